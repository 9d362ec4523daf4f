/*
 * copy_retry.h - rk copy keeps going when the transport fails: run
 * sessions (copy_send.h) until the plan is through, reconnecting after a
 * transport failure with a bounded, jittered backoff and resuming every
 * unfinished file from the prefix the server verified.
 *
 * Why the chunk size and depth come down after repeated failures: rxe
 * acknowledges a message's packets in order and on a lost packet goes
 * back to the last one acknowledged (go-back-N); each of those restarts,
 * and each ACK timeout with nothing acknowledged, takes one of the QP's
 * retry_cnt tries (6; 7 would be "forever"). With many packets in flight
 * (depth chunks of chunk/MTU packets, 2048 at 1 MiB x 8 over a 4 KiB MTU)
 * a lossy link keeps the sender re-sending the tail of what is in flight,
 * each loss there costs another try, and the QP soon fails with "retry
 * counter exceeded". Fewer packets in flight per QP make each try likelier
 * to get through, at some cost in rate on a clean link; so the first
 * sessions use what the user asked for and only repeated failures of
 * established sessions step it down (copy_retry.c says to what).
 */
#ifndef RK_COPY_RETRY_H
#define RK_COPY_RETRY_H

#include <stddef.h>
#include <stdint.h>

#include "copy_plan.h"
#include "copy_send.h"

#define CP_RETRIES_DEFAULT 10 /* reconnects per rk copy */
#define CP_WINDOW_DEFAULT  60 /* seconds without progress before giving up */

struct cp_retry_opts {
	unsigned retries;  /* reconnects at most; 0: fail on the first loss */
	unsigned window_s; /* give up once no session has moved data for this long */
	int verbose;	   /* a line on stderr per reconnect */
	int retry_first; /* --retries given: a first connect that finds no answer is retried too */
};

struct cp_retry_stats {
	unsigned reconnects; /* sessions started after the first */
	uint32_t chunk;	     /* chunk size and depth the last session used */
	unsigned depth;
	uint8_t ack_timeout; /* its QP ACK timeout exponent (0: the library's default) */
};

/*
 * cp_copy - send @plan with sessions of @o (chunk, depth and flags are
 * changed as retrying goes; the caller's other fields are kept) until every
 * item is settled, a session ends for a reason other than the transport
 * (refused, protocol error, the server's ERROR), or the budget of @r is
 * spent: r->retries reconnects, or r->window_s seconds in which no session
 * moved any data. Sessions after the first run with CP_F_RESUME, and each
 * after an established one with CP_F_REPLACES and its key, so the server
 * ends that one (it may not have noticed the loss) and its file locks go
 * with it. A file the server calls busy (another session holds it) is
 * tried again in a later session, from the same budget; such a session
 * keeps @o's flags (it turns on CP_F_RESUME only after a loss). Returns
 * cp_send's code for the last session; @why
 * says what ended it. Blocks; not thread-safe (uses o->progress).
 */
/*
 * cp_first_connect_note - append to @why what a first connect without any
 * answer most likely means and the option that retries it.
 */
void cp_first_connect_note(char *why, size_t why_len);

int cp_copy(struct cp_send_opts *o, const struct cp_retry_opts *r, struct cp_plan *plan,
	    struct cp_retry_stats *st, char *why, size_t why_len);

/*
 * The budget of one run of sessions, shared by a push (cp_copy) and a pull
 * (copy_pull.c): how many reconnects are left, how long since the last
 * progress, and when to step the chunk size and depth down.
 */
struct cp_retry_state {
	const struct cp_retry_opts *r;
	uint64_t rnd;		/* jitter */
	uint64_t last_progress; /* cli_now_ns() of the last new byte */
	uint64_t high;		/* the most bytes any session reached */
	unsigned idle_runs;	/* sessions in a row that moved nothing new */
	unsigned lost_established;
	unsigned reconnects;
};

/* cp_retry_begin - a fresh budget of @r; @done bytes are already settled. */
void cp_retry_begin(struct cp_retry_state *rs, const struct cp_retry_opts *r, uint64_t done);

/*
 * cp_retry_next - a session just ended and another may follow. @done: bytes
 * settled so far (progress is bytes beyond the most any session reached);
 * @lost_established: it was lost after its set-up, which after repeated
 * losses steps *@chunk, *@depth and *@ack_timeout down (cp_retry_lower; a
 * NULL @ack_timeout is not changed). Returns 0 and sets *@wait_ms to the
 * backoff before the next session, counting it in rs->reconnects; or -1
 * when the budget (retries, or window_s without progress) is spent, with
 * the reason appended to @why. Does not sleep (cp_retry_sleep does).
 */
int cp_retry_next(struct cp_retry_state *rs, uint64_t done, int lost_established, uint32_t *chunk,
		  unsigned *depth, uint8_t *ack_timeout, uint64_t *wait_ms, char *why,
		  size_t why_len);

/* cp_retry_sleep - sleep @ms milliseconds, through signals. */
void cp_retry_sleep(uint64_t ms);

/*
 * cp_backoff_ms - the wait before reconnect number @n (1, 2, ...) of a run
 * of sessions that moved nothing: 500 ms doubling up to 8 s, then a random
 * share of it in [1/2, 1] drawn from @rnd (so clients that lost the same
 * server do not come back in step).
 */
uint64_t cp_backoff_ms(unsigned n, uint64_t rnd);

/*
 * cp_retry_lower - one step down after repeated transport failures:
 * chunk / 4 (not below 64 KiB, or what it was if smaller) and depth / 2
 * (not below 4, or what it was); at 64 KiB the ACK timeout drops to 67 ms
 * (2^14 x 4.096 us), and further steps at the floor raise it again, to at
 * most 0.27 s (2^16), for links where ACKs are slow rather than lost.
 * Returns 0 if anything changed, -1 at the last step.
 */
int cp_retry_lower(uint32_t *chunk, unsigned *depth, uint8_t *ack_timeout);

#endif
