/*
 * copy_retry.c - see copy_retry.h.
 *
 * What may be retried is decided by copy_send.c (cp_send_fate.transport);
 * this file decides when and with what: the backoff, the budget, and the
 * steps down in chunk size, depth and ACK timeout.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "copy_retry.h"

#define BACKOFF_BASE_MS 500u
#define BACKOFF_MAX_MS	8000u
#define FLOOR_CHUNK	(64u << 10)
#define FLOOR_DEPTH	4u
/*
 * ACK timeout once a step down has left few packets in flight: 2^14 x
 * 4.096 us = 67 ms instead of the default 0.5 s. A lost last packet of a
 * message (nothing after it to reveal the gap) costs one timeout; at 5 %
 * loss that happens often enough that 0.5 s each dominates the time. On
 * a loaded emulated link ACKs can take longer than that to come back;
 * the timeouts that then fire for nothing spend tries too, so further
 * losses at the floor double it, up to 2^16 (0.27 s).
 */
#define LOW_ACK_TIMEOUT 14
#define MAX_ACK_TIMEOUT 16
#define LOWER_AFTER	2 /* established sessions lost before stepping down */

uint64_t cp_backoff_ms(unsigned n, uint64_t rnd)
{
	uint64_t d = BACKOFF_BASE_MS;

	for (unsigned i = 1; i < n && d < BACKOFF_MAX_MS; i++)
		d *= 2;
	if (d > BACKOFF_MAX_MS)
		d = BACKOFF_MAX_MS;
	return d / 2 + rnd % (d / 2 + 1);
}

int cp_retry_lower(uint32_t *chunk, unsigned *depth, uint8_t *ack_timeout)
{
	uint32_t c = *chunk;
	unsigned d = *depth;

	if (c > FLOOR_CHUNK)
		c = c / 4 > FLOOR_CHUNK ? c / 4 : FLOOR_CHUNK;
	if (d > FLOOR_DEPTH)
		d = d / 2 > FLOOR_DEPTH ? d / 2 : FLOOR_DEPTH;
	if (c == *chunk && d == *depth) {
		/* At the floor: only the ACK timeout is left to adjust. */
		if (!*ack_timeout)
			*ack_timeout = LOW_ACK_TIMEOUT;
		else if (*ack_timeout < MAX_ACK_TIMEOUT)
			(*ack_timeout)++;
		else
			return -1;
		return 0;
	}
	*chunk = c;
	*depth = d;
	if (c <= FLOOR_CHUNK && !*ack_timeout)
		*ack_timeout = LOW_ACK_TIMEOUT;
	return 0;
}

static const char *ack_str(uint8_t exp, char *buf, size_t len)
{
	snprintf(buf, len, "%.0f ms", 4.096e-3 * (double)(1u << exp));
	return buf;
}

static uint64_t next_rnd(uint64_t *x)
{
	/* xorshift64: spreading waits, nothing more. */
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

void cp_retry_sleep(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void cp_retry_begin(struct cp_retry_state *rs, const struct cp_retry_opts *r, uint64_t done)
{
	memset(rs, 0, sizeof(*rs));
	rs->r = r;
	rs->rnd = cli_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	rs->last_progress = cli_now_ns();
	rs->high = done;
}

/* Append @text to @why. */
static void append(char *why, size_t why_len, const char *text)
{
	size_t n = strnlen(why, why_len);

	if (n < why_len)
		snprintf(why + n, why_len - n, "%s", text);
}

int cp_retry_next(struct cp_retry_state *rs, uint64_t done, int lost_established, uint32_t *chunk,
		  unsigned *depth, uint8_t *ack_timeout, uint64_t *wait_ms, char *why,
		  size_t why_len)
{
	uint8_t no_ack = 0;
	char text[64];

	if (done > rs->high) {
		rs->high = done;
		rs->last_progress = cli_now_ns();
		rs->idle_runs = 0;
	}
	rs->idle_runs++;
	if (lost_established && ++rs->lost_established >= LOWER_AFTER)
		cp_retry_lower(chunk, depth, ack_timeout ? ack_timeout : &no_ack);
	if (rs->reconnects >= rs->r->retries) {
		snprintf(text, sizeof(text), " (gave up after %u reconnect%s)", rs->reconnects,
			 rs->reconnects == 1 ? "" : "s");
		if (rs->r->retries)
			append(why, why_len, text);
		return -1;
	}
	*wait_ms = cp_backoff_ms(rs->idle_runs, next_rnd(&rs->rnd));
	if (cli_now_ns() + *wait_ms * 1000000 - rs->last_progress >
	    (uint64_t)rs->r->window_s * 1000000000) {
		snprintf(text, sizeof(text), " (nothing moved for %u s: gave up)", rs->r->window_s);
		append(why, why_len, text);
		return -1;
	}
	rs->reconnects++;
	return 0;
}

/* Bytes of the items the server has settled: where progress restarts. */
static uint64_t settled_bytes(const struct cp_plan *p)
{
	uint64_t b = 0;

	for (size_t i = 0; i < p->n; i++)
		if (!p->items[i].is_dir && p->items[i].state == CP_ITEM_DONE)
			b += p->items[i].size;
	return b;
}

/* Files the server has settled (or that failed here): the files done where progress restarts. */
static uint32_t settled_files(const struct cp_plan *p)
{
	uint32_t n = 0;

	for (size_t i = 0; i < p->n; i++)
		n += !p->items[i].is_dir && p->items[i].state == CP_ITEM_DONE;
	return n;
}

static int refused_busy(const struct cp_item *it)
{
	return it->state == CP_ITEM_DONE && !it->local_err[0] && it->code == CP_E_BUSY;
}

static size_t count_busy(const struct cp_plan *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n; i++)
		n += refused_busy(&p->items[i]);
	return n;
}

/*
 * Make what the last session left unsettled pending again: announced but
 * never answered, or refused as busy. Only once another session will run:
 * when the budget is spent, a busy file stays "refused: busy" (exit 3), as
 * it would be without retrying. Returns how many.
 */
static size_t requeue(struct cp_plan *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n; i++) {
		struct cp_item *it = &p->items[i];

		if (it->state == CP_ITEM_SENT || refused_busy(it)) {
			it->state = CP_ITEM_PENDING;
			it->waiting_ready = it->ready = 0;
			memset(&it->ready_res, 0, sizeof(it->ready_res));
			it->code = 0;
			it->sys_errno = 0;
			it->offset = 0;
			n++;
		}
	}
	return n;
}

void cp_first_connect_note(char *why, size_t why_len)
{
	size_t n = strlen(why);

	snprintf(why + n, why_len - n,
		 "; a first connect is not retried unless --retries is given");
}

int cp_copy(struct cp_send_opts *o, const struct cp_retry_opts *r, struct cp_plan *plan,
	    struct cp_retry_stats *st, char *why, size_t why_len)
{
	struct cp_retry_state rs;
	struct cp_send_fate fate;
	int rc;

	memset(st, 0, sizeof(*st));
	cp_retry_begin(&rs, r, o->progress->done);
	for (;;) {
		uint64_t wait;
		char ack[16];
		int busy;

		st->chunk = o->chunk;
		st->depth = o->depth;
		st->ack_timeout = o->ack_timeout;
		memset(&fate, 0, sizeof(fate));
		rc = cp_send(o, plan, &fate, why, why_len);
		/*
		 * The next session names this one, so that the server ends it
		 * and frees its files at once rather than after --idle.
		 */
		if (fate.established) {
			o->replacing = 1;
			memcpy(o->replaces, fate.key, CP_KEY_LEN);
		}
		/*
		 * A file refused as busy is held by a session that ends on its
		 * own: a session of this run the server has not seen end yet
		 * (replaced, it stops within a slot), a killed client's still
		 * taking what reached its ring before it died, or another copy
		 * of the same files. Once it ends, the file is there (up to date
		 * for a resume), or its temporary is free to resume: try again,
		 * in the same budget as a reconnect. The first session too: the
		 * client killed before this one was such a run.
		 */
		busy = rc == RK_EXIT_OK && count_busy(plan);
		if ((rc == RK_EXIT_OK && !busy) || (rc != RK_EXIT_OK && !fate.transport))
			return rc;
		/*
		 * Nobody listening on the first try is a wrong host or port, as
		 * for scp: say so at once. Once a session ran, the server may be
		 * restarting, and waiting for it is the point.
		 */
		if (rc != RK_EXIT_OK && !st->reconnects && fate.refused)
			return rc;
		/*
		 * No answer at all at the first connect (no route, no reply
		 * within the deadline) is most likely a wrong address too: one
		 * deadline, not a minute of reconnects, unless the user asked
		 * for retries (a server on its way up).
		 */
		if (rc != RK_EXIT_OK && !st->reconnects && fate.unanswered && !r->retry_first) {
			cp_first_connect_note(why, why_len);
			return rc;
		}
		if (busy)
			snprintf(why, why_len, "a file is still busy on the server");
		/* Progress is what the server settled, and the bytes of this session. */
		if (cp_retry_next(&rs, o->progress->done, rc != RK_EXIT_OK && fate.established,
				  &o->chunk, &o->depth, &o->ack_timeout, &wait, why, why_len))
			return busy ? RK_EXIT_OK : rc;
		requeue(plan);
		st->reconnects = rs.reconnects;
		if (r->verbose) {
			cp_progress_clear(o->progress);
			fprintf(
			    stderr,
			    "rk copy: %s; reconnecting in %.1f s (%u of %u, chunk %u KiB, depth "
			    "%u%s%s)\n",
			    why, (double)wait / 1000, st->reconnects, r->retries, o->chunk >> 10,
			    o->depth, o->ack_timeout ? ", ACK timeout " : "",
			    o->ack_timeout ? ack_str(o->ack_timeout, ack, sizeof(ack)) : "");
		}
		cp_retry_sleep(wait);
		/*
		 * After a loss, what this run sent may be committed or half
		 * there: resume. Files only busy were never ours to write, so
		 * they keep the run's own flags (without --resume, a file the
		 * other transfer committed meanwhile exists).
		 */
		if (rc != RK_EXIT_OK)
			o->flags |= CP_F_RESUME;
		cp_progress_restart(o->progress, settled_bytes(plan), settled_files(plan),
				    st->reconnects);
	}
}
