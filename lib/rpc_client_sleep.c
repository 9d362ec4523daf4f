/*
 * rpc_client_sleep.c - the RPC client's lean synchronous call in event
 * mode (rpc_client_int.h): the request posted, then the answer slept for
 * on the CQ's channel with the state of the call in registers.
 */
#include <errno.h>
#include <poll.h>

#include "rpc_client_int.h"

/*
 * The sleep is sleep_round's (rpc_client_answer.c) without the rounds
 * around it: the CQ armed only when it is not and polled after the arming
 * (a completion before it raises no event), a wake-up's one event read and
 * the CQ polled before any arming again, the connection's CM channel the
 * second fd. What the usual path adds to each call, and this one does
 * not: the call's booking and its slot's state, the result's structure,
 * the wait's rounds (a clock reading and the pending deadlines settled in
 * each) and the answer's bookkeeping.
 *
 * Anything else writes the call out (rk__rpc_cl_lean_to_usual) and the
 * usual wait ends it: a completion that is not its answer nor a request's
 * SEND retiring the queue, an answer that is not the usual one, the CM
 * channel readable while the CQ is empty (the usual wait reads it, and a
 * disconnect fails the call), a failure to arm, poll or read (the usual
 * wait meets it again and says why), or the deadline past (the call
 * fails). The deadline starts at the first sleep: a call answered before
 * it reads no clock.
 */
__attribute__((noinline)) int rk__rpc_cl_call_sleep(struct rk_rpc_client *cl,
						    const struct rk_rpc_call_args *a,
						    uint32_t *resp_len, int32_t *app_code,
						    struct rk_error *err)
{
	const uint16_t i = cl->free_slots[cl->nfree - 1];
	const uint16_t gen = ++cl->calls[i].gen;
	struct rk_cq *cq = cl->cq;
	struct pollfd p[2] = {{.fd = cq->ch->fd, .events = POLLIN},
			      {.fd = cl->cm_fd, .events = POLLIN}};
	const nfds_t nfds = cl->cm_fd >= 0 ? 2 : 1;
	struct ibv_wc wc[POLL_BATCH];
	int64_t deadline = DEADLINE_UNSET, now;
	int n, r, cm = 0, late = 0;

	if (__builtin_expect(lean_post(cl, a, i, gen) != 0, 0))
		return 1; /* the usual path posts again and says why */
	for (;;) {
		if (!cq->armed && rk__cq_arm_unarmed(cq, NULL))
			break;
		n = ibv_poll_cq(cl->vcq, POLL_BATCH, wc);
		if (!n) { /* the CQ empty and armed: sleep */
			if (cm)
				break;
			now = coarse_ms();
			if (deadline == DEADLINE_UNSET)
				deadline = a->timeout_ms < 0 ? -1
							     : now + (a->timeout_ms ? a->timeout_ms
										    : DEF_TIMEOUT);
			else if (deadline >= 0 && now >= deadline) {
				late = 1;
				break;
			}
			r = poll(p, nfds, deadline < 0 ? -1 : (int)(deadline - now));
			if (r < 0 && errno != EINTR)
				break;
			if (r <= 0) /* a timeout or a signal: the CQ, then the clock */
				continue;
			cm = nfds > 1 && p[1].revents;
			if (p[0].revents && rk__cq_consume_one(cq, NULL))
				break;
			/* After a wake-up the CQ first: arming again waits until it is empty. */
			n = ibv_poll_cq(cl->vcq, POLL_BATCH, wc);
			if (!n)
				continue;
		}
		if (__builtin_expect(n < 0, 0))
			break;
		n = lean_take(cl, a, i, gen, deadline, wc, n, resp_len, app_code, err);
		if (n != LEAN_WAIT)
			return n;
	}
	return rk__rpc_cl_lean_to_usual(cl, a, i, gen, deadline, late, wc, 0, resp_len, app_code,
					err);
}
