/*
 * rpc_client_int.h - what the files of the RPC client share: the client
 * and its call slots (rpc_client.c: connect, slots, teardown), the call
 * path (rpc_client_call.c: a request posted, the busy lean call), the
 * answer path (rpc_client_answer.c: completions, deadlines, the
 * connection's end) and the lean call's sleep in event mode
 * (rpc_client_sleep.c).
 *
 * Each of the window's call slots owns a request buffer (local memory) and
 * a response slot (remote-writable, in the client's PD). A slot is busy from
 * the call until both its SEND completed and its answer (or the connection's
 * end) came: a timed-out call keeps its slot as a zombie until then, so a
 * late answer never lands in a slot or staging buffer that is in use again.
 */
#ifndef RK_RPC_CLIENT_INT_H
#define RK_RPC_CLIENT_INT_H

#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "rk_internal.h"
#include "rpc_wire.h"

#define TAG_REQ	       0x5251ull	 /* wr_id top 16 bits: a request SEND; low bits the slot */
#define TAG_REQ_INLINE 0x5249ull	 /* an inline request SEND: no slot waits for it */
#define SIGNAL_EVERY   16		 /* inline requests: a completion every this many */
#define WRID_ANS       (0x5241ull << 48) /* every receive (of an answer) */
#define DEF_WINDOW     64
#define DEF_TIMEOUT    5000
#define DEF_INLINE     128 /* bytes a SEND carries inline: a header and 76 bytes */
#define MAX_EVENTS     8
#define POLL_BATCH     16
#define CLOCK_EVERY    64 /* progress calls with completions between looks at the clock */
#define SPIN_POLLS     64 /* busy: empty CQ polls before a look at the clock (and the wait set) */
/*
 * Answers come as WRITE WITH IMMEDIATE into 0-byte receives, which carry
 * no buffer: they are posted again in chains of RECV_BATCH (one
 * ibv_post_recv), and RECV_BATCH more than the window are posted, so that
 * the ones waiting to go again never leave a call's answer without one.
 */
#define RECV_BATCH 16
/*
 * A synchronous call's deadline before the clock was read: the first look
 * at the clock, when its answer did not come within the first spin (busy:
 * SPIN_POLLS polls, microseconds), makes it that reading plus the call's
 * timeout. A call answered at once reads no clock.
 */
#define DEADLINE_PENDING (-2)

enum call_state { C_FREE = 0, C_BUSY, C_ZOMBIE };

/*
 * A slot's awaited answer, packed: the immediate its answer carries (the
 * slot in the high half, the call's generation in the low) while the
 * answer is awaited, WANT_NONE when no answer may come (the slot free, or
 * its answer came). The answer's one check of slot state, generation and
 * "not answered yet". WANT_NONE names slot 0xffff, never within a window
 * (RK_RPC_MAX_WINDOW): no immediate that passed the window check matches.
 */
#define WANT_NONE UINT32_MAX
_Static_assert(RK_RPC_MAX_WINDOW < 0xffff, "WANT_NONE names no slot");

/* A synchronous call's outcome; the error goes straight to the caller's object. */
struct sync_result {
	int finished, status;
	uint32_t len;
	int32_t code;
	struct rk_error *err; /* the caller's, or NULL */
};

struct call {
	enum call_state state;
	uint16_t gen;
	uint8_t send_done, direct;
	/*
	 * The request buffer holds a rendezvous or direct call's addresses;
	 * the only calls that may have stages (req_stage, resp_stage).
	 */
	uint8_t far;
	uint32_t want; /* the answer's immediate while awaited, else WANT_NONE */
	uint32_t resp_cap;
	void *resp;
	struct rk_mr *req_stage, *resp_stage; /* library-registered, or NULL */
	int64_t deadline;		      /* ms, -1 = none, or DEADLINE_PENDING */
	int timeout_ms;			      /* a pending deadline's timeout */
	rk_rpc_done_fn done;		      /* NULL: a synchronous call, arg its sync_result */
	void *arg;
};

struct rk_rpc_client {
	struct rk_device *dev;
	struct rk_pd *pd, *own_pd;
	struct rk_conn *conn;
	struct rk_cq *cq;   /* the connection's */
	struct ibv_cq *vcq; /* its verbs CQ: the spin polls it, rk_cq_take translates */
	int busy;	    /* the CQ's mode is RK_WAIT_BUSY */
	int cm_fd;	    /* the connection's CM channel, or -1 */
	struct rk_wait *ws;
	struct rk_mr *slots, *reqs;
	struct rk_rpc_accept acc;
	uint32_t window, req_buf;
	uint32_t resp_room;	  /* answer bytes a slot holds after its header */
	uint32_t max_inline;	  /* the connection's: a request up to this goes inline */
	uint8_t *req_base;	  /* the request buffers (reqs) */
	const uint8_t *slot_base; /* the response slots (slots) */
	/*
	 * A call up to these (its body inline, its answer in the slot, both
	 * within max_msg) takes the common path: checked at connect.
	 */
	uint32_t small_req, small_resp;
	/*
	 * rk_rpc_call may take its lean path (busy or event mode, the
	 * connection alive, a header that goes inline: cleared when the
	 * connection dies) for a request body up to lean_req (small_req within
	 * max_inline).
	 */
	int lean; /* 0, LEAN_BUSY or LEAN_SLEEP */
	uint32_t lean_req;
	/*
	 * The request's SEND, built at connect (one SGE): per call only the
	 * SGE (the slot's buffer, the header and the body) and the flags.
	 */
	struct ibv_send_wr req_wr;
	struct ibv_sge req_sge;
	/*
	 * The answers' receives posted again, RECV_BATCH at a time: a chain
	 * built at connect (0-byte receives, no SGE), linked once; a post
	 * writes only each WR's id (rk__post_recv_kept).
	 */
	struct ibv_recv_wr ans_rx[RECV_BATCH];
	struct call *calls;
	uint16_t *free_slots;
	uint32_t nfree, inflight;
	uint32_t rx_consumed; /* answer receives used, not yet posted again (< RECV_BATCH) */
	uint64_t completed;   /* calls finished, ever (progress returns the difference) */
	int in_progress;      /* completions are being handled: no reentry */
	unsigned polls_unclocked;
	int64_t soonest;       /* the earliest deadline of a call in flight (ms), -1 none */
	uint32_t npending;     /* calls in flight whose deadline is DEADLINE_PENDING */
	uint16_t pending_last; /* the slot of the last call that started so */
	int dead;	       /* negative errno once the connection is gone */
	struct rk_error why;
};

/*
 * Call deadlines are kept on the coarse monotonic clock: read from memory
 * the kernel updates every tick (1-4 ms), where a precise reading costs a
 * system call on some clock sources (HPET: about 2 us under emulation) and
 * every call would pay one or two. A deadline is then met to within a tick.
 */
static inline int64_t coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int coarse_left(int64_t deadline_ms)
{
	int64_t left = deadline_ms - coarse_ms();

	return left > 0 ? (int)(left < INT32_MAX ? left : INT32_MAX) : 0;
}

/*
 * Copy @n bytes of a small message without a call into libc: 16 to 128
 * bytes as two pairs of fixed-size moves that overlap (what a call's body
 * or answer usually is), any other length by memcpy. The bytes are data,
 * never parsed.
 */
static inline __attribute__((always_inline)) void copy_small(void *dst, const void *src, uint32_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	/* Each range in one unsigned compare (n - lo <= hi - lo), the usual first. */
	if (n - 32u <= 32u) {
		memcpy(d, s, 32);
		memcpy(d + n - 32, s + n - 32, 32);
	} else if (n - 65u <= 63u) {
		memcpy(d, s, 64);
		memcpy(d + n - 64, s + n - 64, 64);
	} else if (n - 16u <= 15u) {
		memcpy(d, s, 16);
		memcpy(d + n - 16, s + n - 16, 16);
	} else if (n) {
		memcpy(d, s, n);
	}
}

/*
 * The usual answer (success, its data in the slot) to a call that accepts
 * @resp_cap bytes, from its slot's header @hdr (copied out of the slot:
 * the server may write the slot at any time) and its completion @wc: its
 * length, or -1 for any other answer, which rk__rpc_ans_decode judges.
 * One compare of the status word and three of the length: what
 * rk__rpc_ans_decode accepts for that status, in fewer steps. The data
 * must fit the slot as well as the call: a direct call accepts more than a
 * slot holds, and the server can make byte_len what it likes by writing
 * the answer into the call's own buffer instead.
 */
static inline __attribute__((always_inline)) int64_t
usual_answer_len(const struct rk_rpc_client *cl, const uint8_t *hdr, const struct ibv_wc *wc,
		 uint32_t resp_cap)
{
	const uint32_t len = rk_get32(hdr + 8);

	if (__builtin_expect(rk_get32(hdr) == RK_RPC_ANS_IN_SLOT && len <= resp_cap &&
				 len <= cl->resp_room && wc->byte_len == RK_RPC_ANS_HDR + len,
			     1))
		return len;
	return -1;
}

/* rpc_client_answer.c */
int rk__rpc_cl_post_answer_recvs(struct rk_conn *conn, uint32_t n, struct rk_error *err);
/*
 * The answers' receives used, RECV_BATCH of them, posted again (when
 * rx_consumed reaches RECV_BATCH; a failure fails the connection).
 */
void rk__rpc_cl_repost_answers(struct rk_rpc_client *cl);
/*
 * Busy, the look of rk_rpc_call's spin every SPIN_POLLS empty polls (the
 * @looks-th): the clock (the pending deadlines settled, calls past theirs
 * failed) and, every FD_LOOKS looks (the wait set's FD_EVERY polls), the
 * connection's CM channel without waiting (a disconnect fails every call:
 * cl->dead). What the wait set's round did there, without its event array
 * and its passes over the CQ. Returns the clock's reading (coarse_ms).
 */
#define FD_LOOKS 16
int64_t rk__rpc_cl_busy_look(struct rk_rpc_client *cl, unsigned looks);
/*
 * Completions @wc[0..@n), translated (rk_cq_take), handled as progress
 * handles them: for a caller that holds in_progress.
 */
void rk__rpc_cl_on_wcs(struct rk_rpc_client *cl, const struct ibv_wc *wc, int n);
void rk__rpc_cl_fail_all(struct rk_rpc_client *cl, int e, const struct rk_error *why);
/* Progress from outside: refused (-EBUSY) from a completion callback. */
int rk__rpc_cl_progress(struct rk_rpc_client *cl, int timeout_ms, struct rk_error *err);
/*
 * One round of progress for a caller that set cl->in_progress itself
 * (rk_rpc_call, for its whole wait): the number of events, or a negative
 * errno of the wait.
 */
int rk__rpc_cl_handle(struct rk_rpc_client *cl, int timeout_ms, struct rk_error *err);
/*
 * rk_rpc_call's wait, in_progress held: until @s finished (its answer, its
 * deadline or the connection's end).
 */
void rk__rpc_cl_wait_call(struct rk_rpc_client *cl, const struct sync_result *s,
			  struct rk_error *err);

/*
 * The lean synchronous call: rk_rpc_call with no other call in flight, a
 * common call whose request goes inline (rpc_client_call.c spins for its
 * answer on a busy client, rpc_client_sleep.c sleeps for it in event
 * mode). It keeps its state in registers: its slot stays on top of the
 * free stack, marked free, awaiting no answer, and its answer is looked
 * for in its own wait with the checks of the answer path. Anything else
 * writes the state out (rk__rpc_cl_lean_to_usual) and the usual wait takes
 * over.
 */
#define LEAN_BUSY      1    /* cl->lean: the call spins for its answer */
#define LEAN_SLEEP     2    /* cl->lean: the call sleeps for its answer (event mode) */
#define DEADLINE_UNSET (-3) /* the lean call's deadline before its first look */
#define LEAN_WAIT      1    /* lean_take: the answer did not come, wait on */

/*
 * The lean call (slot @i, generation @gen) written out: from the
 * completions @wc[0..@n) on (what its wait polled and could not handle
 * itself) a call like any other, ending by @deadline (a clock reading in
 * ms, -1 none, or DEADLINE_UNSET: then as rk_rpc_call's), and the usual
 * wait ends it. @late: the deadline has passed; the call fails at once
 * (its slot stays a zombie until its answer comes). The call's result.
 */
int rk__rpc_cl_lean_to_usual(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a, uint16_t i,
			     uint16_t gen, int64_t deadline, int late, const struct ibv_wc *wc,
			     int n, uint32_t *resp_len, int32_t *app_code, struct rk_error *err);
/* Completions the lean call's wait polled after its answer: progress's. */
void rk__rpc_cl_lean_rest(struct rk_rpc_client *cl, const struct ibv_wc *wc, int n);

/*
 * The lean call's request: slot @i (the top of the free stack), generation
 * @gen, its header and body in the slot's buffer, posted inline with no
 * completion asked. 0, or nonzero when nothing went out (the usual path
 * then posts again and says why).
 */
static inline __attribute__((always_inline)) int
lean_post(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a, uint16_t i, uint16_t gen)
{
	struct call *c = &cl->calls[i];
	uint8_t *buf = cl->req_base + (size_t)i * cl->req_buf;
	const uint32_t req_len = a->req_len;
	const struct rk_rpc_req_hdr h = {
	    .method = a->method, .gen = gen, .req_len = req_len, .resp_cap = a->resp_cap};

	if (__builtin_expect(c->far, 0)) { /* the slot's last call was not a common one */
		static const struct rk_rpc_req_hdr zero = {0};

		rk__rpc_req_encode_far(&zero, buf);
		c->far = 0;
	}
	c->direct = 0; /* the answer path judges an answer by it, should this call go there */
	rk__rpc_req_encode_call(&h, buf);
	if (req_len)
		copy_small(buf + RK_RPC_REQ_HDR, a->req, req_len);
	cl->req_sge.addr = (uintptr_t)buf;
	cl->req_sge.length = RK_RPC_REQ_HDR + req_len;
	return rk__post_kept(cl->conn, &cl->req_wr, TAG_REQ_INLINE << 48, IBV_SEND_INLINE, NULL);
}

/*
 * The completions @wc[0..@n) the lean call (slot @i, generation @gen,
 * @deadline as rk__rpc_cl_lean_to_usual's) polled: translated, then its
 * answer checked as the answer path checks it (the immediate, then
 * usual_answer_len on the header copied out of the slot) and its outputs
 * written. A request's SEND that retires the queue is passed over. The
 * call's result, or LEAN_WAIT when its answer was not among them; any
 * other completion, or an answer that is not the usual one, writes the
 * call out.
 */
static inline __attribute__((always_inline)) int
lean_take(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a, uint16_t i, uint16_t gen,
	  int64_t deadline, struct ibv_wc *wc, int n, uint32_t *resp_len, int32_t *app_code,
	  struct rk_error *err)
{
	const uint32_t want = (uint32_t)i << 16 | gen;

	n = rk_cq_take(cl->cq, wc, n);
	for (int j = 0; j < n; j++) {
		const struct ibv_wc *w = &wc[j];

		if (__builtin_expect(w->wr_id != WRID_ANS || w->status != IBV_WC_SUCCESS ||
					 w->opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
					 ntohl(w->imm_data) != want,
				     0)) {
			if (w->wr_id == TAG_REQ_INLINE << 48 && w->status == IBV_WC_SUCCESS)
				continue; /* a request's SEND that retires the queue */
			return rk__rpc_cl_lean_to_usual(cl, a, i, gen, deadline, 0, w, n - j,
							resp_len, app_code, err);
		}
		/* Its answer. The slot is the server's to write: copy, then check. */
		const uint8_t *slot = cl->slot_base + (size_t)i * cl->acc.slot_size;
		uint8_t hdr[RK_RPC_ANS_HDR];
		int64_t len;

		memcpy(hdr, slot, sizeof(hdr));
		len = usual_answer_len(cl, hdr, w, a->resp_cap);
		if (__builtin_expect(len < 0, 0)) /* the answer path judges it */
			return rk__rpc_cl_lean_to_usual(cl, a, i, gen, deadline, 0, w, n - j,
							resp_len, app_code, err);
		copy_small(a->resp, slot + RK_RPC_ANS_HDR, (uint32_t)len);
		cl->completed++;
		if (++cl->rx_consumed == RECV_BATCH)
			rk__rpc_cl_repost_answers(cl);
		if (__builtin_expect(j + 1 < n, 0))
			rk__rpc_cl_lean_rest(cl, w + 1, n - j - 1);
		if (resp_len)
			*resp_len = (uint32_t)len;
		if (app_code)
			*app_code = (int32_t)rk_get32(hdr + 4);
		return 0;
	}
	return LEAN_WAIT;
}

/* rpc_client_sleep.c */
/*
 * rk_rpc_call's lean path in event mode (rk_rpc_call checked that it may
 * take it): the request posted, then the CQ armed, polled, and slept on
 * with the connection's CM channel. 1 when the request could not be
 * posted (nothing went out: the usual path starts the call), else the
 * call's result.
 */
int rk__rpc_cl_call_sleep(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a,
			  uint32_t *resp_len, int32_t *app_code, struct rk_error *err);

#endif
