/*
 * doctor_link.c - the link test of rk doctor HOST: an rdma_cm connection,
 * then 4 KiB SEND, RDMA WRITE and RDMA READ each way, every one checked
 * against a pattern both sides derive from the client's seed, then a SEND
 * ping-pong for the round-trip time. The client asks for a step on the
 * control channel (doctor_link_client.c), the listener does its part and
 * answers with a result (doctor_link_serve.c). This file opens and closes
 * the link and holds what both ends use to move and check the data.
 *
 * What the peer can reach: one buffer it may write (inbox) and one it may
 * read (outbox), DOC_XFER_LEN bytes each, in a protection domain of their
 * own with the one QP. The inbox is copied out before it is compared,
 * because the peer may change it at any moment.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdmakit/cm.h>
#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/explain.h>
#include <rdmakit/mr.h>
#include <rdmakit/pd.h>
#include <rdmakit/post.h>

#include "cli.h"
#include "common/deadline.h"
#include "doctor_link_int.h"
#include "doctor_peer.h"

uint8_t *doc_link_slot(const struct doc_link *l, int i)
{
	return (uint8_t *)rk_mr_addr(l->local) + (size_t)i * DOC_XFER_LEN;
}

/* The pattern of @step: splitmix64 from the seed, the same at both ends. */
void doc_link_pattern(uint64_t seed, int step, uint8_t *buf, size_t len)
{
	uint64_t x = seed ^ ((uint64_t)(step + 1) * 0x9e3779b97f4a7c15ull);

	for (size_t i = 0; i < len; i += 8) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		memcpy(buf + i, &z, len - i < 8 ? len - i : 8);
	}
}

/* Compare @len bytes of @got (copied first: it may be registered memory) with @step's. */
void doc_link_verify(uint64_t seed, int step, const volatile uint8_t *got, size_t len,
		     struct step_res *res)
{
	uint8_t copy[DOC_XFER_LEN], want[DOC_XFER_LEN];
	size_t first = len, wrong = 0;

	for (size_t i = 0; i < len; i++)
		copy[i] = got[i];
	doc_link_pattern(seed, step, want, len);
	for (size_t i = 0; i < len; i++)
		if (copy[i] != want[i]) {
			if (first == len)
				first = i;
			wrong++;
		}
	res->ok = wrong == 0;
	if (res->ok)
		snprintf(res->text, sizeof(res->text), "%zu bytes verified", len);
	else
		snprintf(res->text, sizeof(res->text),
			 "data differs from byte %zu on (%zu of %zu bytes wrong)", first, wrong,
			 len);
}

/*
 * Wait for the completion of send WR @want, or (@want 0) of a receive,
 * within @ms. Other completions are skipped (receives counted for later).
 */
int doc_link_wait_wc(struct doc_link *l, uint64_t want, int ms, struct step_res *res)
{
	uint64_t deadline = cli_deadline_in(ms);
	struct rk_error err;

	if (!want && l->recv_pending > 0) {
		l->recv_pending--;
		return 0;
	}
	for (;;) {
		struct ibv_wc wc[8];
		int n, found = 0, left = cli_deadline_ms_left(deadline);

		if (left == 0) {
			res->timed_out = 1;
			snprintf(res->text, sizeof(res->text), "no completion within %d ms", ms);
			return -ETIMEDOUT;
		}
		n = rk_cq_wait(rk_conn_cq(l->conn), wc, 8, left, &err);
		if (n == -ETIMEDOUT)
			continue;
		if (n < 0) {
			snprintf(res->text, sizeof(res->text), "%s", rk_error_str(&err));
			return n;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				res->wc_status = wc[i].status;
				rk_error_from_wc(&err, &wc[i]);
				snprintf(res->text, sizeof(res->text), "%s", rk_error_str(&err));
				return -EIO;
			}
			if (wc[i].opcode & IBV_WC_RECV) {
				if (!want && !found)
					found = 1;
				else
					l->recv_pending++;
			} else if (want && wc[i].wr_id == want) {
				found = 1;
			}
		}
		if (found)
			return 0;
	}
}

int doc_link_post(struct doc_link *l, enum rk_op op, int s, uint32_t len, uint64_t raddr,
		  uint32_t rkey, uint64_t *id, struct step_res *res)
{
	struct rk_wr wr = {.op = op,
			   .flags = RK_WR_SIGNALED | RK_WR_NO_INLINE,
			   .wr_id = *id = ++l->next_id + WR_RECV,
			   .addr = doc_link_slot(l, s),
			   .len = len,
			   .lkey = rk_mr_lkey(l->local),
			   .remote_addr = raddr,
			   .rkey = rkey};
	struct rk_error err;
	int r = rk_post(l->conn, &wr, &err);

	if (r)
		snprintf(res->text, sizeof(res->text), "%s", rk_error_str(&err));
	return r;
}

/* Post @op, wait for its completion. */
int doc_link_post_wait(struct doc_link *l, enum rk_op op, int s, uint32_t len, uint64_t raddr,
		       uint32_t rkey, int ms, struct step_res *res)
{
	uint64_t id;
	int r = doc_link_post(l, op, s, len, raddr, rkey, &id, res);

	return r ? r : doc_link_wait_wc(l, id, ms, res);
}

static int prepare(struct rk_conn *conn, void *arg)
{
	struct doc_link *l = arg;

	for (int i = 0; i < RECVS; i++) {
		int r = rk_post_recv(conn, doc_link_slot(l, SLOT_RECV), DOC_XFER_LEN,
				     rk_mr_lkey(l->local), WR_RECV, NULL);
		if (r)
			return r;
	}
	return 0;
}

struct rk_conn_opts doc_link_conn_opts(struct doc_link *l, int mtu_a, int mtu_b)
{
	/* event mode: a spinning waiter would take the CPU the peer's Soft-RoCE needs */
	struct rk_conn_opts o = {.sq_depth = QUEUE,
				 .rq_depth = QUEUE,
				 .wait_mode = RK_WAIT_EVENT,
				 .pd = l->pd,
				 .prepare = prepare,
				 .prepare_arg = l};

	/*
	 * The MTU both ends can take. (rdma_cm connections take the path MTU
	 * from the connecting side's route instead; the report says so.)
	 */
	o.max_mtu = rk_mtu_from_bytes((uint32_t)(mtu_a < mtu_b ? mtu_a : mtu_b));
	return o;
}

int doc_link_open(struct rk_device *dev, int listener, const char *addr, uint64_t seed,
		  struct doc_facts *f, struct rk_error *err, struct doc_link **out)
{
	struct doc_link *l = calloc(1, sizeof(*l));
	int r;

	*out = NULL;
	if (!l)
		return -ENOMEM;
	l->dev = dev;
	l->seed = seed;
	r = rk_pd_alloc(dev, err, &l->pd);
	if (!r)
		r = rk_mr_alloc_pd(l->pd, (size_t)NSLOTS * DOC_XFER_LEN, RK_ACCESS_LOCAL, err,
				   &l->local);
	if (!r)
		r = rk_mr_alloc_pd(l->pd, DOC_XFER_LEN, RK_ACCESS_REMOTE_WRITE, err, &l->inbox);
	if (!r)
		r = rk_mr_alloc_pd(l->pd, DOC_XFER_LEN, RK_ACCESS_REMOTE_READ, err, &l->outbox);
	if (!r && listener) {
		struct rk_listen_opts lo = {.addr = addr, .port = "0", .app_id = DOC_APP_ID};

		r = rk_listener_create(dev, &lo, err, &l->lis);
	}
	if (r) {
		doc_link_close(l);
		return r;
	}
	if (!listener) /* the listener learns the seed from the client's facts */
		doc_link_pattern(seed, DOC_STEP_READ_IN, rk_mr_addr(l->outbox), DOC_XFER_LEN);
	f->seed = seed;
	f->nonce = (uint32_t)(seed >> 32) ^ (uint32_t)seed;
	f->cm_port = l->lis ? rk_listener_port(l->lis) : 0;
	f->wr_addr = (uint64_t)(uintptr_t)rk_mr_addr(l->inbox);
	f->wr_rkey = rk_mr_rkey(l->inbox);
	f->rd_addr = (uint64_t)(uintptr_t)rk_mr_addr(l->outbox);
	f->rd_rkey = rk_mr_rkey(l->outbox);
	*out = l;
	return 0;
}

void doc_link_close(struct doc_link *l)
{
	if (!l)
		return;
	rk_conn_destroy(l->conn);
	rk_listener_destroy(l->lis);
	rk_mr_dereg(l->outbox);
	rk_mr_dereg(l->inbox);
	rk_mr_dereg(l->local);
	rk_pd_free(l->pd);
	free(l);
}
