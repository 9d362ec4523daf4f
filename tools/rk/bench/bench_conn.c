/*
 * bench_conn.c - one side of a benchmark: its context and the resources
 * it holds (device, registered buffer, CQ, queue pairs), set up in order
 * and released in reverse.
 *
 * Order of a run: control channel (TCP) -> PARAMS -> ACCEPT/REFUSE
 * (bench_start.c) -> buffer and CQ (here) -> QPs (bench_qp.c: rdma_cm, or
 * QP numbers exchanged as OOB messages on the control channel) -> READY
 * both ways (bench_ready.c). The server decides on the parameters before
 * it creates anything, so a refused client costs it nothing but a TCP
 * connection.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>

#include "bench_clock.h"
#include "bench_conn.h"
#include "bench_rpc.h"
#include "bench_xfer.h"
#include "cli.h"

#define MAX_BUFFER (4ull << 30) /* (1 + num-qp) * size we agree to pin */

void bench_ctx_init(struct bench_ctx *c, const struct bench_params *p, const struct bench_local *l)
{
	memset(c, 0, sizeof(*c));
	c->p = p;
	c->l = l;
	c->is_client = l->host != NULL;
	c->ctl.fd = -1;
	c->listen_fd = -1;
}

int bench_step_ms(const struct bench_ctx *c)
{
	return (int)c->l->watchdog_s * 1000;
}

int bench_connect_ms(const struct bench_ctx *c)
{
	int ms = bench_step_ms(c);

	return ms > BENCH_CONNECT_MIN_MS ? ms : BENCH_CONNECT_MIN_MS;
}
/* Copy @src into @dst, cut to fit (names and kernel strings may be long). */
static void copy_cut(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = 0;
}

static void fill_kernel(char *buf, size_t len)
{
	struct utsname u;
	char tmp[3 * sizeof(u.release) + 3];

	if (uname(&u)) {
		copy_cut(buf, len, "unknown");
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s %s %s", u.sysname, u.release, u.machine);
	copy_cut(buf, len, tmp);
}
/* This side keeps receives posted when SENDs or WRITE_IMMs come its way. */
static int needs_receives(const struct bench_params *p, int is_client)
{
	if (p->op != BENCH_OP_SEND && p->op != BENCH_OP_WRITE_IMM)
		return 0;
	return p->mode == BENCH_MODE_LAT || p->bidir || !is_client;
}

/*
 * Selective signaling as perftest does it: at most tx-depth WRs in flight
 * (the engines count them), one signaled every cq-mod (at most tx-depth).
 * The send queue holds cq-mod more than that: the library signals every
 * WR posted into the last signal_every free slots (and caps signal_every
 * at half the queue), so a queue of exactly tx-depth would signal nearly
 * every WR once it is full, a completion per WR instead of one per cq-mod.
 */
uint32_t bench_signal_every(const struct bench_params *p)
{
	return p->cq_mod < p->tx_depth ? p->cq_mod : p->tx_depth;
}

uint32_t bench_sq_depth(const struct bench_params *p)
{
	return p->tx_depth + bench_signal_every(p);
}

/* --op xfer registers its memory through the one-sided layer (bench_xfer.c): none here. */
uint64_t bench_buffer_len(const struct bench_params *p)
{
	return p->op == BENCH_OP_XFER ? 0 : (uint64_t)p->size_max * (1 + p->num_qp);
}
/* What the parameters need from the device; "PARAM: why" on failure. */
int bench_check_device(const struct bench_params *p, const struct rk_device_info *di, char *why,
		       size_t len)
{
	uint64_t cqe = (uint64_t)p->num_qp * (bench_sq_depth(p) + p->rx_depth);

	if (bench_sq_depth(p) > di->max_qp_wr) {
		snprintf(why, len, "tx-depth: %u (+ %u for signaling) exceeds the device's %u",
			 p->tx_depth, bench_signal_every(p), di->max_qp_wr);
		return -1;
	}
	if (p->rx_depth > di->max_qp_wr) {
		snprintf(why, len, "rx-depth: %u exceeds the device's %u", p->rx_depth,
			 di->max_qp_wr);
		return -1;
	}
	if (cqe > di->max_cqe) {
		snprintf(why, len,
			 "num-qp: %u QPs x (tx-depth %u + %u + rx-depth %u) exceed the device's %u "
			 "CQ entries",
			 p->num_qp, p->tx_depth, bench_signal_every(p), p->rx_depth, di->max_cqe);
		return -1;
	}
	if (bench_buffer_len(p) > MAX_BUFFER || bench_buffer_len(p) > di->max_mr_size) {
		snprintf(why, len, "num-qp: (1 + %u QPs) x %u bytes is more memory than allowed",
			 p->num_qp, p->size_max);
		return -1;
	}
	return 0;
}

/*
 * The device (cli.h): --dev, else the server's --addr (@addr),
 * else $RK_DEV, else the client's route to the server (what rdma_cm will
 * use).
 */
int bench_open_device(struct bench_ctx *c, const char *addr, const char *peer, struct rk_error *err)
{
	struct rk_device_opts o = {
	    .port = c->l->ib_port,
	    .gid_index = c->l->gid_index,
	};
	const struct rk_device_info *di;
	int r;

	/* With -d the GID is picked as the client picks its own (no address): both ends alike. */
	cli_device_opts(&o, c->l->dev_name, c->l->dev_name ? NULL : addr, peer);
	r = rk_device_open(&o, err, &c->dev);

	if (r)
		return r;
	di = rk_device_get_info(c->dev);
	copy_cut(c->me.dev, sizeof(c->me.dev), di->name);
	fill_kernel(c->me.kernel, sizeof(c->me.kernel));
	c->me.ib_port = di->port;
	c->me.gid_index = di->gid_index;
	c->me.roce_v2 = (uint32_t)di->gid_roce_v2;
	c->me.mtu = di->active_mtu_bytes;
	return 0;
}

static unsigned mr_access(const struct bench_params *p)
{
	switch (p->op) {
	case BENCH_OP_WRITE:
	case BENCH_OP_WRITE_IMM:
		return RK_ACCESS_REMOTE_WRITE;
	case BENCH_OP_READ:
		return RK_ACCESS_REMOTE_READ;
	default:
		return RK_ACCESS_LOCAL;
	}
}

/* Buffer, CQ and QPs: every op but rpc. */
static int connect_qps(struct bench_ctx *c, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	struct rk_cq_opts co = {0};
	int r;

	c->receives = needs_receives(p, c->is_client);
	if (p->op != BENCH_OP_XFER) {
		r = rk_mr_alloc(c->dev, bench_buffer_len(p), mr_access(p), err, &c->mr);
		if (r)
			return r;
		c->base = rk_mr_addr(c->mr);
		c->lkey = rk_mr_lkey(c->mr);
	}
	co.depth = p->op == BENCH_OP_XFER
		       ? bench_xfer_cq_depth(c)
		       : p->num_qp * (bench_sq_depth(p) + (c->receives ? p->rx_depth : 1));
	co.mode = c->l->poll;
	r = rk_cq_create(c->dev, &co, err, &c->cq);
	if (r)
		return r;
	c->vcq = rk_cq_ibv(c->cq);
	c->qps = calloc(p->num_qp, sizeof(*c->qps));
	if (!c->qps)
		return bench_fail(err, ENOMEM, "out of memory for %u QPs", p->num_qp);
	for (uint32_t i = 0; i < p->num_qp; i++) {
		c->qps[i].ctx = c;
		c->qps[i].index = i;
		c->qps[i].rx = c->base ? c->base + (uint64_t)p->size_max * (1 + i) : NULL;
		/* --op xfer: --batch is ops per batch, posted by the layer. */
		c->qps[i].wrs = calloc(p->op == BENCH_OP_XFER ? 1 : p->batch, sizeof(struct rk_wr));
		if (!c->qps[i].wrs)
			return bench_fail(err, ENOMEM, "out of memory for WR templates");
	}
	r = bench_qps_connect(c, err);
	if (r)
		return r;
	c->me.mtu = rk_mtu_bytes(rk_conn_path_mtu(c->qps[0].conn));
	if (p->op == BENCH_OP_READ || (p->op == BENCH_OP_XFER && p->xfer_op == BENCH_XFER_READ)) {
		uint8_t init;

		/* What the QP got, not what was asked: rdma_cm may negotiate it down. */
		r = rk_conn_rd_atomic(c->qps[0].conn, &init, NULL, err);
		if (r)
			return r;
		c->reads_in_flight = init;
	}
	c->me.buf_addr = (uintptr_t)c->base;
	c->me.buf_len = bench_buffer_len(p);
	c->me.buf_rkey = c->mr ? rk_mr_rkey(c->mr) : 0;
	return 0;
}

int bench_connect(struct bench_ctx *c, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	int r;

	/* The engines' clock; its 10 ms calibration must not fall inside a run. */
	bench_clock_init();
	r = p->op == BENCH_OP_RPC ? bench_rpc_connect(c, err) : connect_qps(c, err);
	if (r)
		return r;
	r = bench_ready_exchange(c, err);
	if (!r && p->op == BENCH_OP_XFER)
		r = bench_xfer_setup(c, err);
	if (r)
		return r;
	for (uint32_t i = 0; c->qps && i < p->num_qp; i++)
		c->qps[i].remote_rx = c->peer.buf_addr + (uint64_t)p->size_max * (1 + i);
	return 0;
}

void bench_ctx_release(struct bench_ctx *c)
{
	bench_rpc_release(c);
	/* The layer's order: batches and peer, the lanes, then segment and rk_xfer. */
	bench_xfer_release_peer(c);
	if (c->qps) {
		for (uint32_t i = c->p->num_qp; i-- > 0;) {
			rk_conn_destroy(c->qps[i].conn);
			free(c->qps[i].wrs);
		}
		free(c->qps);
		c->qps = NULL;
	}
	bench_xfer_release(c);
	rk_cq_destroy(c->cq);
	c->cq = NULL;
	c->vcq = NULL;
	rk_mr_dereg(c->mr);
	c->mr = NULL;
	rk_listener_destroy(c->lis);
	c->lis = NULL;
	bench_ctl_close(&c->ctl);
	if (c->listen_fd >= 0 && close(c->listen_fd))
		perror("rk bench: close listening socket");
	c->listen_fd = -1;
	rk_device_close(c->dev);
	c->dev = NULL;
}
