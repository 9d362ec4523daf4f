/*
 * bench_conn.h - everything a benchmark run needs on one side: device,
 * control channel, one registered buffer, a shared CQ and the queue pairs.
 *
 * The buffer is one registration: a send region of size_max bytes at the
 * start, then one region of size_max bytes per QP that the peer writes
 * into (write, write-imm), reads from (read) or we receive into (send).
 * One rkey covers it all; the peer learns address, length and rkey in its
 * READY message and checks them before use.
 */
#ifndef RK_BENCH_CONN_H
#define RK_BENCH_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/rdmakit.h>

#include "bench.h"
#include "bench_ctl.h"

#define BENCH_WC_BATCH	64
#define BENCH_TOKEN_LEN 16
#define BENCH_APP_ID	0x726b6265u /* "rkbe": the hello of rk bench */

/* What a side tells the other about itself (in READY). */
struct bench_side_info {
	char dev[32];
	char kernel[64];
	uint32_t ib_port;
	int32_t gid_index;
	uint32_t roce_v2;
	uint32_t mtu; /* path MTU in bytes */
	uint64_t buf_addr, buf_len;
	uint32_t buf_rkey;
};

struct bench_ctx;
struct bench_rpc;  /* --op rpc: its clients or its server (bench_rpc.c) */
struct bench_xfer; /* --op xfer: the one-sided layer's objects (bench_xfer.c) */

struct bench_qp {
	struct bench_ctx *ctx;
	struct rk_conn *conn;
	uint32_t index;
	uint8_t *rx;		  /* our region for this QP */
	uint64_t remote_rx;	  /* the peer's region for this QP */
	uint64_t posted;	  /* send WRs posted this run */
	uint64_t done;		  /* send WRs known complete this run */
	uint64_t recvd;		  /* receive completions this run */
	struct rk_wr *wrs;	  /* batch WR templates */
	struct rk_prepared *prep; /* the same, prepared (bench_bw.c), during a run */
	struct rk_recv_prepared
	    *rprep; /* its receives, prepared, during a run (bench_prepare_recv) */
};

struct bench_ctx {
	const struct bench_params *p;
	const struct bench_local *l;
	int is_client;
	struct bench_ctl ctl;
	int listen_fd; /* server: TCP */
	struct rk_listener *lis;
	struct rk_device *dev;
	struct rk_cq *cq;
	struct ibv_cq *vcq; /* cq's verbs CQ: busy loops poll it directly (bench_poll) */
	struct rk_mr *mr;
	uint8_t *base; /* the send region; QP regions follow */
	uint32_t lkey;
	int receives; /* this side keeps receives posted */
	struct bench_qp *qps;
	uint32_t nqp; /* QPs created so far */
	uint8_t token[BENCH_TOKEN_LEN];
	struct bench_side_info me, peer;
	uint32_t reads_in_flight; /* --op read: the QPs' initiator depth, as connected */
	struct bench_rpc *rpc;	  /* --op rpc: instead of buffer, CQ and QPs */
	uint32_t rpc_window;	  /* --op rpc: calls in flight per client, as granted */
	struct bench_xfer *xfer;  /* --op xfer: instead of the registered buffer */
	const char *xfer_access;  /* --op xfer: "mw" or "mr" (outlives xfer, for the report) */
	struct ibv_wc wc[BENCH_WC_BATCH];
};

/* bench_ctx_init - an empty context (nothing to release yet). */
void bench_ctx_init(struct bench_ctx *c, const struct bench_params *p, const struct bench_local *l);

/*
 * bench_client_start - open the device that routes to the server, connect
 * the control channel and send the parameters; on refusal @err says why.
 */
int bench_client_start(struct bench_ctx *c, struct rk_error *err);

/*
 * bench_server_start - open the device, listen, take one client within
 * --wait, validate its parameters against @server_p (the fields our
 * command line fixed) and the device; answer ACCEPT or REFUSE. On success
 * @client_p holds what the run uses.
 */
int bench_server_start(struct bench_ctx *c, const struct bench_params *server_p,
		       struct bench_params *client_p, struct rk_error *err);

/*
 * bench_connect - buffer, CQ, QPs (rdma_cm or --oob), or for --op rpc the
 * RPC connections (bench_rpc.c); then READY both ways.
 */
int bench_connect(struct bench_ctx *c, struct rk_error *err);

/* bench_ctx_release - everything, in reverse order. Safe on a partial context. */
void bench_ctx_release(struct bench_ctx *c);

/* Deadline for one control step, from --watchdog. */
int bench_step_ms(const struct bench_ctx *c);
/*
 * bench_connect_ms - how long connecting the QPs may take: the watchdog,
 * but never under BENCH_CONNECT_MIN_MS. rdma_cm's address and route
 * resolution and each side's QP set-up take seconds under emulation on a
 * loaded host; a short watchdog (tests run -a legs at 2 s) bounds the run's
 * silences, not a connect that is on its way.
 */
#define BENCH_CONNECT_MIN_MS 10000
int bench_connect_ms(const struct bench_ctx *c);

/* bench_signal_every - the QPs' selective signaling: cq-mod, at most tx-depth. */
uint32_t bench_signal_every(const struct bench_params *p);

/*
 * The set-up's parts, one file each, for each other (cmd_bench.c calls
 * only the functions above): bench_conn.c the context and its resources,
 * bench_start.c the control channel's start, bench_qp.c the queue pairs,
 * bench_ready.c the READY exchange.
 */

/* bench_sq_depth - each QP's send queue: tx-depth, and room for signaling. */
uint32_t bench_sq_depth(const struct bench_params *p);
/* bench_buffer_len - the registered buffer: a send region and one per QP (none for --op xfer). */
uint64_t bench_buffer_len(const struct bench_params *p);
/* bench_check_device - what the parameters need from the device: 0, or -1 and "PARAM: why". */
int bench_check_device(const struct bench_params *p, const struct rk_device_info *di, char *why,
		       size_t len);
/* bench_open_device - the device (--dev, --addr @addr, $RK_DEV, or the route to @peer); fills me.
 */
int bench_open_device(struct bench_ctx *c, const char *addr, const char *peer,
		      struct rk_error *err);
/* bench_server_proved - rk matrix: does @proof hold the second half of the pair's key? */
int bench_server_proved(const struct bench_ctx *c, const void *proof, size_t len);
/*
 * bench_rd_atomic - READs a QP may hold in flight: @want, at most the
 * device's max_qp_rd_atom and max_qp_init_rd_atom and 255, at least 1.
 */
uint8_t bench_rd_atomic(const struct rk_device_info *di, uint64_t want);
/* bench_qps_connect - the QPs (already created empty) connected: --oob, or rdma_cm either side. */
int bench_qps_connect(struct bench_ctx *c, struct rk_error *err);

/*
 * bench_prepare_recv - the receives a run posts again on @q, prepared once
 * (rk_prepare_recv) into q->rprep: @n, at most BENCH_PREP_RECV_MAX and the
 * receive queue's depth, each as the first ones were posted (the QP's
 * region, its index as wr_id). 0 or an error; the caller frees q->rprep
 * when the run ends.
 */
#define BENCH_PREP_RECV_MAX 32u
int bench_prepare_recv(struct bench_ctx *c, struct bench_qp *q, unsigned n, struct rk_error *err);
/* bench_ready_exchange - send our READY, take and check the peer's (into c->peer). */
int bench_ready_exchange(struct bench_ctx *c, struct rk_error *err);
/* READY's codec (bench_ready.c), public to the tool for the fuzz target: encode
 * @s into BENCH_READY_LEN bytes; decode the peer's into c->peer and check it
 * (names made printable, the agreed buffer length, no wrap, fields in range). */
#define BENCH_READY_LEN (32 + 64 + 4 * 4 + 8 + 8 + 4)
void bench_ready_encode(const struct bench_side_info *s, uint8_t *b);
int bench_ready_decode(struct bench_ctx *c, const uint8_t *b, struct rk_error *err);

#endif
