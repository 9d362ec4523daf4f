/*
 * bench_rpc.h - rk bench --op rpc: the library's RPC layer (rdmakit/rpc.h)
 * measured inside rk bench's session: the same control channel, GO
 * barriers, watchdog and heartbeats, RESULT records and report.
 *
 * The server answers with an rk_rpc_server on the bind address and port
 * (rdma_cm; the TCP control channel is the same port number, another
 * protocol); one handler answers every call with the run's answer size
 * from one buffer allocated once. The client opens num-qp rk_rpc_clients,
 * one connection each, each with one registered request buffer (size_max
 * bytes, also the rendezvous source when a request exceeds the server's
 * inline limit) and one registered answer buffer that every call in
 * flight targets (zero copy; a benchmark does not look at the data).
 *
 * lat: one rk_rpc_call at a time, the whole round trip per sample.
 * bw: tx-depth calls in flight per client (rk_rpc_call_async), request +
 * answer bytes counted per call. The server's counts are calls answered.
 */
#ifndef RK_BENCH_RPC_H
#define RK_BENCH_RPC_H

#include <stdint.h>

#include <rdmakit/error.h>

#include "bench_conn.h"
#include "bench_run.h"

/* bench_rpc_listen - server, before ACCEPT: the rk_rpc_server and its handler. */
int bench_rpc_listen(struct bench_ctx *c, struct rk_error *err);

/*
 * bench_rpc_connect - client: connect num-qp clients and register their
 * buffers; server: accept num-qp connections (within --watchdog).
 */
int bench_rpc_connect(struct bench_ctx *c, struct rk_error *err);

/* bench_rpc_run - one run of @size-byte requests, either mode, either side. */
int bench_rpc_run(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		  struct bench_run *out, struct rk_error *err);

/* bench_rpc_release - clients, server, buffers; safe on a partial setup. */
void bench_rpc_release(struct bench_ctx *c);

#endif
