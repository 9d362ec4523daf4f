/*
 * copy_send.c - one rk copy session (see copy_send.h).
 *
 * Local staging mirrors the server's ring: slot i here is filled (records
 * into its header block, file bytes read straight into its data block) and
 * posted as WRITE (header) + WRITE WITH IMMEDIATE (data) into slot i there.
 * A slot is reusable once the server's CREDIT for it has come back and our
 * own send completion too, so up to nslots chunks are in flight while the
 * next one is read from disk.
 *
 * Small files go several to a slot (BEGIN, DATA, END together) without
 * waiting for anything. A file larger than a chunk, and every file with
 * --resume, first announces itself (BEGIN with WAIT) and waits for READY:
 * one round trip per large file, which lets the server refuse it before
 * any data moves. With --resume the BEGIN also proves what we hold (the
 * hashes of our file and of its prefixes, see CP_BEGIN_PROOF) and READY
 * names the longest of those prefixes the server already has.
 *
 * Every wait is bounded: a completion error, a DISCONNECTED event or
 * idle_ms without any completion ends the session with a message.
 *
 * Threads: once the ring is agreed, each lane (connection; more than one
 * with --num-qp) has a thread that posts the slots handed to it and
 * handles its completions, while the main thread reads and hashes the
 * next chunk. Posting is where the work of a software RDMA device (rxe)
 * happens, in the poster's system call, so the two overlap even with one
 * lane, and N lanes spread it over N CPUs. One mutex guards everything the
 * threads share (slots, plan items, the session's fate); the main thread
 * holds it except while it reads and hashes file data, which only it
 * touches, and while it waits on the condition variable the lane threads
 * signal after every batch of completions.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include <rdmakit/cm.h>
#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/device.h>
#include <rdmakit/mr.h>
#include <rdmakit/post.h>

#include "cli.h"
#include "copy_files.h"
#include "copy_proto.h"
#include "copy_send.h"
#include "copy_token.h"

#define RQ_DEPTH      (CP_MAX_SLOTS + 8)
#define SQ_DEPTH      (2 * CP_MAX_SLOTS + 8)
#define HELLO_WRID    (1ull << 40)
#define ACCEPT_MS     5000
#define PULL_MS	      10000 /* serving a pull: the PULL must come this soon */
#define WAIT_MS	      200
#define HASH_BUF      (1u << 20)
#define GONE_GRACE_NS 1000000000ull /* other lanes may still hold the last CREDITs */

enum { LS_FREE = 0, LS_FILL, LS_POSTED };

struct lslot {
	uint8_t state, credited, sent;
	uint16_t hlen; /* header block bytes, set when posted */
	uint32_t dlen; /* data bytes */
};

struct sender;

/* One connection of the session, and (once started) its thread. */
struct lane {
	struct sender *s;
	struct rk_conn *conn;
	struct rk_mr *rbufs;
	int evfd;    /* wakes the thread: slots queued, or stop */
	int gone;    /* the server disconnected this lane */
	int started; /* the thread runs */
	pthread_t th;
	uint16_t q[CP_MAX_SLOTS]; /* slots to post, in order */
	unsigned qhead, qtail;
};

struct sender {
	const struct cp_send_opts *o;
	struct cp_plan *plan;
	struct rk_device *dev;
	struct lane lanes[CP_MAX_LANES];
	unsigned nlanes;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int threaded; /* lane threads run: the main thread holds mu */
	int stop;     /* lane threads: finish */
	uint32_t next_seq;
	uint64_t gone_ns;
	struct rk_mr *stage, *hello;
	struct cp_welcome w;
	size_t stride;
	struct lslot slots[CP_MAX_SLOTS];
	int cur; /* slot being filled, or -1 */
	struct cp_slot_writer wr;
	uint32_t dlen;
	int welcomed;
	int fatal;     /* RK_EXIT_LOST / RK_EXIT_REFUSED once the session is over */
	int transport; /* ... and it was the transport's doing (see cp_send_fate) */
	int refused;   /* lane 0's connect: nobody listening */
	char *why;
	size_t why_len;
	uint64_t last_ns;
	XXH3_state_t *st;
	uint8_t *hashbuf;
	const char *them; /* "server", or "client" when serving a pull */
	/* Serving a pull: the PULL as it came, and the options it sets. */
	int pulled, accept_used;
	uint64_t rate_ns, rate_moved, moved; /* serving a pull: the minimum rate (as --idle) */
	uint32_t pull_len;
	uint8_t pull_buf[CP_MSG_MAX];
	struct cp_send_opts own;
};

static void fatal(struct sender *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fatal_transport(struct sender *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void vfatal(struct sender *s, int code, int transport, const char *fmt, va_list ap)
{
	if (s->fatal)
		return; /* the first cause is the one that counts */
	s->fatal = code;
	s->transport = transport;
	vsnprintf(s->why, s->why_len, fmt, ap);
}

static void fatal(struct sender *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfatal(s, code, 0, fmt, ap);
	va_end(ap);
}

/* The session ended because the transport failed: a reconnect may cure it. */
static void fatal_transport(struct sender *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfatal(s, RK_EXIT_LOST, 1, fmt, ap);
	va_end(ap);
}

static uint8_t *slot_hdr(struct sender *s, int i)
{
	return (uint8_t *)rk_mr_addr(s->stage) + (size_t)i * s->stride;
}

static uint8_t *slot_data(struct sender *s, int i)
{
	return slot_hdr(s, i) + CP_HDR_SIZE;
}

/* The main thread lets go of the shared state around file I/O and hashing. */
static void unlock_main(struct sender *s)
{
	if (s->threaded)
		pthread_mutex_unlock(&s->mu);
}

static void lock_main(struct sender *s)
{
	if (s->threaded)
		pthread_mutex_lock(&s->mu);
}

static int post_recv(struct lane *l, unsigned i, struct rk_error *err)
{
	return rk_post_recv(l->conn, (uint8_t *)rk_mr_addr(l->rbufs) + (size_t)i * CP_MSG_MAX,
			    CP_MSG_MAX, rk_mr_lkey(l->rbufs), i, err);
}

static int prepare(struct rk_conn *conn, void *arg)
{
	struct lane *l = arg;

	l->conn = conn;
	for (unsigned i = 0; i < RQ_DEPTH; i++) {
		int r = post_recv(l, i, NULL);

		if (r)
			return r;
	}
	return 0;
}

/* ---- what the server tells us ---- */

static void on_result(struct sender *s, const struct cp_result *r)
{
	struct cp_item *it;

	if (r->file_id == 0 || r->file_id > s->plan->n)
		return fatal(s, RK_EXIT_LOST, "protocol error: result for unknown file id %u",
			     r->file_id);
	it = &s->plan->items[r->file_id - 1];
	if (it->state != CP_ITEM_SENT)
		return fatal(s, RK_EXIT_LOST, "protocol error: unexpected result for %s", it->dst);
	if (r->kind == CP_RES_READY) {
		if (!it->waiting_ready || it->ready)
			return fatal(s, RK_EXIT_LOST, "protocol error: unexpected READY for %s",
				     it->dst);
		it->ready = 1;
		it->ready_res = *r;
		return;
	}
	it->state = CP_ITEM_DONE;
	it->code = r->code;
	it->sys_errno = r->sys_errno;
	it->offset = r->offset;
}

static void on_credit(struct sender *s, const void *buf, uint32_t len)
{
	struct cp_credit c;
	struct lslot *ls;

	if (cp_credit_decode(buf, len, &c) || c.slot >= s->w.nslots)
		return fatal(s, RK_EXIT_LOST, "protocol error: malformed credit from the %s",
			     s->them);
	ls = &s->slots[c.slot];
	if (ls->state != LS_POSTED || ls->credited)
		return fatal(s, RK_EXIT_LOST, "protocol error: credit for slot %u not in flight",
			     c.slot);
	ls->credited = 1;
	if (ls->sent)
		ls->state = LS_FREE;
	for (unsigned i = 0; i < c.nres && !s->fatal; i++)
		on_result(s, &c.res[i]);
}

static void on_message(struct sender *s, const void *buf, uint32_t len)
{
	char text[256];
	uint16_t code;
	int type = cp_msg_peek(buf, len);

	if (type == CP_MSG_CREDIT && s->welcomed) {
		on_credit(s, buf, len);
	} else if (type == CP_MSG_WELCOME && !s->welcomed) {
		if (cp_welcome_decode(buf, len, &s->w) || s->w.chunk != s->o->chunk ||
		    s->w.nslots > s->o->depth)
			return fatal(s, RK_EXIT_LOST, "protocol error: malformed welcome");
		s->welcomed = 1;
	} else if (type == CP_MSG_ERROR &&
		   cp_error_decode(buf, len, &code, text, sizeof(text)) == 0) {
		/* A limit (e.g. the chunk does not fit the server's ring) is a refusal. */
		fatal(s, code == CP_E_LIMIT ? RK_EXIT_REFUSED : RK_EXIT_LOST,
		      "the %s ended the session: %s", s->them, text);
	} else if (type == -EPROTO) {
		fatal(s, RK_EXIT_LOST, "the %s speaks another protocol version", s->them);
	} else if (type == CP_MSG_PULL && s->o->accept && !s->pulled && len <= CP_MSG_MAX) {
		/* Kept whole: the decoded PULL points into it. */
		memcpy(s->pull_buf, buf, len);
		s->pull_len = len;
		s->pulled = 1;
	} else {
		fatal(s, RK_EXIT_LOST, "protocol error: unexpected message from the %s", s->them);
	}
}

static void lost(struct lane *l, const char *what)
{
	struct sender *s = l->s;
	struct rk_error e;

	if (rk_conn_first_error(l->conn, &e))
		fatal_transport(s, "connection lost%s%s: %s", what ? " " : "", what ? what : "",
				rk_error_str(&e));
	else
		fatal_transport(s, "connection lost%s%s", what ? " " : "", what ? what : "");
}

static void on_wc(struct lane *l, const struct ibv_wc *wc)
{
	struct sender *s = l->s;
	struct rk_error e;

	if (wc->status != IBV_WC_SUCCESS) {
		rk_error_from_wc(&e, wc);
		/*
		 * No ACK in time (loss, peer gone) or flushed after that. A
		 * remote access error is one too once the session was welcomed:
		 * a server that dies has its ring deregistered as the kernel
		 * tears the process down, and a WRITE already on the wire then
		 * meets an rkey that is gone (seen with rk serve killed -9). A
		 * new session gets a new ring and rkey; a real fault would
		 * repeat, and the retry budget bounds that.
		 */
		if (wc->status == IBV_WC_RETRY_EXC_ERR || wc->status == IBV_WC_RNR_RETRY_EXC_ERR ||
		    wc->status == IBV_WC_WR_FLUSH_ERR ||
		    (wc->status == IBV_WC_REM_ACCESS_ERR && s->welcomed))
			return fatal_transport(s, "connection lost: %s", rk_error_str(&e));
		return fatal(s, RK_EXIT_LOST, "connection lost: %s", rk_error_str(&e));
	}
	s->last_ns = cli_now_ns();
	if (wc->opcode == IBV_WC_RECV) {
		if (wc->wr_id >= RQ_DEPTH)
			return fatal(s, RK_EXIT_LOST, "internal error: bad receive id");
		on_message(s, (uint8_t *)rk_mr_addr(l->rbufs) + wc->wr_id * CP_MSG_MAX,
			   wc->byte_len);
		if (!s->fatal && post_recv(l, (unsigned)wc->wr_id, &e))
			fatal(s, RK_EXIT_LOST, "%s", rk_error_str(&e));
		return;
	}
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
		return fatal(s, RK_EXIT_LOST, "protocol error: the %s wrote into our memory",
			     s->them);
	if (wc->wr_id == HELLO_WRID || !(wc->wr_id & 1))
		return; /* hello SEND, or a header WRITE: the data WRITE follows */
	if ((wc->wr_id >> 1) < CP_MAX_SLOTS) {
		struct lslot *ls = &s->slots[wc->wr_id >> 1];

		ls->sent = 1;
		if (ls->credited)
			ls->state = LS_FREE;
	}
}

static int all_done(const struct sender *s)
{
	for (size_t i = 0; i < s->plan->n; i++)
		if (s->plan->items[i].state == CP_ITEM_SENT)
			return 0;
	for (int i = 0; i < s->w.nslots; i++)
		if (s->slots[i].state == LS_POSTED)
			return 0;
	return 1;
}

/*
 * pump_lane - handle what has completed on @l; with @wait_ms, sleep up to
 * that long for a completion, a CM event or (lane threads) a wake-up
 * first. Takes the mutex only to act on what arrived. Returns -1 once the
 * session is over.
 */
static int pump_lane(struct lane *l, int wait_ms)
{
	struct sender *s = l->s;
	struct rk_cq *cq = rk_conn_cq(l->conn);
	struct pollfd pfd[3] = {{.fd = rk_cq_fd(cq), .events = POLLIN},
				{.fd = l->gone ? -1 : rk_conn_cm_fd(l->conn), .events = POLLIN},
				{.fd = l->evfd, .events = POLLIN}};
	struct ibv_wc wc[16];
	struct rk_error e;
	int n, gone = 0, poll_errno = 0, over;
	uint64_t v;

	n = rk_cq_poll(cq, wc, 16, &e);
	if (n == 0 && wait_ms > 0) {
		n = rk_cq_arm(cq, &e);
		if (n == 0)
			n = rk_cq_poll(cq, wc, 16, &e);
		if (n == 0) {
			if (poll(pfd, 3, wait_ms) < 0 && errno != EINTR)
				poll_errno = errno;
			/* The eventfd only wakes us; an empty one (EAGAIN) is fine. */
			if ((pfd[2].revents & POLLIN) && read(l->evfd, &v, sizeof(v)) < 0 &&
			    errno != EAGAIN)
				poll_errno = errno;
			if ((pfd[1].revents & POLLIN) &&
			    rk_conn_progress(l->conn, 0, &e) != RK_CONN_CONNECTED)
				gone = 1;
			n = rk_cq_poll(cq, wc, 16, &e);
		}
	}
	pthread_mutex_lock(&s->mu);
	if (poll_errno)
		fatal(s, RK_EXIT_LOST, "poll: %s", strerror(poll_errno));
	if (n < 0)
		fatal(s, RK_EXIT_LOST, "%s", rk_error_str(&e));
	for (int i = 0; i < n && !s->fatal; i++)
		on_wc(l, &wc[i]);
	/* What completed before the disconnect still counts: drain it first. */
	while (gone && !s->fatal && (n = rk_cq_poll(cq, wc, 16, &e)) > 0)
		for (int i = 0; i < n && !s->fatal; i++)
			on_wc(l, &wc[i]);
	if (gone) {
		l->gone = 1;
		if (!s->gone_ns)
			s->gone_ns = cli_now_ns();
		/* Before the threads start there is no other lane to wait for. */
		if (!s->fatal && (!s->threaded || !s->welcomed) && !all_done(s))
			lost(l, s->o->accept ? "(the client closed it)" : "(the server closed it)");
		if (!s->fatal && !s->welcomed)
			lost(l, s->o->accept ? "(the client closed it before the session began)"
					     : "(the server closed it before the session began)");
	}
	over = s->fatal ? -1 : 0;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return over;
}

/*
 * Checks every wait of the main thread makes: the server silent for too
 * long, or gone while work is outstanding (after a grace period: another
 * lane may still be handing over the last CREDITs).
 */
static int check_session(struct sender *s)
{
	uint64_t now = cli_now_ns();

	if (!s->fatal && s->gone_ns && now - s->gone_ns > GONE_GRACE_NS && !all_done(s))
		fatal_transport(s, "connection lost (the %s closed it)", s->them);
	if (!s->fatal && now - s->last_ns > (uint64_t)s->o->idle_ms * 1000000)
		fatal_transport(s, "the %s did not answer for %d s", s->them, s->o->idle_ms / 1000);
	if (!s->fatal && s->o->stop && atomic_load(s->o->stop))
		fatal(s, RK_EXIT_LOST, "server shutting down");
	/*
	 * Serving a pull, as rk serve's sessions (copy_files.h): a client must
	 * take CP_IDLE_MIN_BYTES in every --idle period (an entry counts
	 * CP_ENTRY_BYTES), or a trickle of CREDITs would hold a session for ever.
	 */
	if (!s->fatal && s->o->accept && s->welcomed &&
	    now - s->rate_ns > (uint64_t)s->o->idle_ms * 1000000) {
		uint64_t moved = s->o->progress->done + s->moved;

		if (moved - s->rate_moved < CP_IDLE_MIN_BYTES && !all_done(s))
			fatal_transport(s, "the client took less than 1 MiB in %d s",
					s->o->idle_ms / 1000);
		s->rate_ns = now;
		s->rate_moved = moved;
	}
	return s->fatal ? -1 : 0;
}

/*
 * pump - the main thread waits up to @wait_ms for something to happen:
 * before the lane threads start it polls lane 0 itself; afterwards it
 * sleeps on the condition variable (holding the mutex otherwise). Returns
 * -1 once the session is over.
 */
static int pump(struct sender *s, int wait_ms)
{
	struct timespec ts;
	uint64_t ns;
	int r;

	if (!s->threaded) {
		r = pump_lane(&s->lanes[0], wait_ms);
		pthread_mutex_lock(&s->mu);
		r = r ? r : check_session(s);
		pthread_mutex_unlock(&s->mu);
		return r;
	}
	if (!s->fatal && wait_ms > 0) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ns = (uint64_t)ts.tv_nsec + (uint64_t)wait_ms * 1000000;
		ts.tv_sec += (time_t)(ns / 1000000000);
		ts.tv_nsec = (long)(ns % 1000000000);
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	return check_session(s);
}

/* ---- lane threads ---- */

/* Post slot @i (its header block, then its data with the immediate) on @l. */
static int post_slot(struct lane *l, int i)
{
	struct sender *s = l->s;
	const struct lslot *ls = &s->slots[i];
	uint64_t remote = s->w.ring_addr + (uint64_t)i * s->stride;
	struct rk_wr wrs[2] = {
	    {.op = RK_OP_WRITE,
	     .wr_id = (uint64_t)i << 1,
	     .addr = slot_hdr(s, i),
	     .len = ls->hlen,
	     .lkey = rk_mr_lkey(s->stage),
	     .remote_addr = remote,
	     .rkey = s->w.rkey},
	    {.op = RK_OP_WRITE_IMM,
	     .flags = RK_WR_SIGNALED,
	     .wr_id = (uint64_t)i << 1 | 1,
	     .addr = slot_data(s, i),
	     .len = ls->dlen,
	     .lkey = rk_mr_lkey(s->stage),
	     .remote_addr = remote + CP_HDR_SIZE,
	     .rkey = s->w.rkey,
	     .imm = cp_imm((uint16_t)i, ls->hlen)},
	};
	struct rk_error e;
	int r;

	/* Cannot fill up (two WRs per slot, fewer slots than room); be safe anyway. */
	while ((r = rk_post_list(l->conn, wrs, 2, &e)) == -ENOBUFS)
		if (pump_lane(l, 10))
			return -1;
	return r == 2 ? 0 : -1;
}

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	struct sender *s = l->s;

	pthread_mutex_lock(&s->mu);
	while (!s->stop && !s->fatal) {
		while (l->qhead != l->qtail && !s->fatal) {
			int i = l->q[l->qhead++ % CP_MAX_SLOTS];
			int r;

			/* The slot is ours until its completion: post it unlocked. */
			pthread_mutex_unlock(&s->mu);
			r = post_slot(l, i);
			pthread_mutex_lock(&s->mu);
			if (r)
				lost(l, "(posting failed)");
		}
		if (s->stop || s->fatal)
			break;
		pthread_mutex_unlock(&s->mu);
		pump_lane(l, WAIT_MS);
		pthread_mutex_lock(&s->mu);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void wake(struct lane *l)
{
	uint64_t one = 1;

	if (write(l->evfd, &one, sizeof(one)) < 0) {
		/* Only fails when the counter is full: the lane is awake anyway. */
	}
}

/* Start a thread per lane; from now on the main thread holds the mutex. */
static int start_lanes(struct sender *s)
{
	pthread_mutex_lock(&s->mu);
	s->threaded = 1;
	for (unsigned i = 0; i < s->nlanes; i++) {
		int r = pthread_create(&s->lanes[i].th, NULL, lane_main, &s->lanes[i]);

		if (r) {
			fatal(s, RK_EXIT_LOST, "cannot start a thread: %s", strerror(r));
			return -1;
		}
		s->lanes[i].started = 1;
	}
	return 0;
}

/* Stop and join the lane threads; the main thread lets go of the mutex. */
static void stop_lanes(struct sender *s)
{
	if (!s->threaded)
		return;
	s->stop = 1;
	pthread_mutex_unlock(&s->mu);
	for (unsigned i = 0; i < s->nlanes; i++) {
		if (!s->lanes[i].started)
			continue;
		wake(&s->lanes[i]);
		pthread_join(s->lanes[i].th, NULL);
		s->lanes[i].started = 0;
	}
	s->threaded = 0;
}

/* ---- slots ---- */

/*
 * Hand the filled slot to a lane (round robin, in sequence order) for
 * posting. The sequence number lets the server handle slots in the order
 * they were filled, whichever lane they travel on.
 */
static int flush(struct sender *s)
{
	uint32_t seq = s->next_seq;
	struct lane *l = &s->lanes[seq % s->nlanes];

	if (s->cur < 0)
		return 0;
	if (s->fatal)
		return -1;
	s->next_seq++;
	cp_slot_set_seq(&s->wr, seq);
	s->slots[s->cur] =
	    (struct lslot){.state = LS_POSTED, .hlen = (uint16_t)s->wr.len, .dlen = s->dlen};
	l->q[l->qtail++ % CP_MAX_SLOTS] = (uint16_t)s->cur;
	s->cur = -1;
	wake(l);
	return 0;
}

/* Make sure a slot is being filled; wait for a credit if none is free. */
static int get_slot(struct sender *s)
{
	if (s->cur >= 0)
		return 0;
	for (;;) {
		for (int i = 0; i < s->w.nslots; i++) {
			if (s->slots[i].state != LS_FREE)
				continue;
			s->slots[i].state = LS_FILL;
			s->cur = i;
			cp_slot_init(&s->wr, slot_hdr(s, i), CP_HDR_SIZE);
			s->dlen = 0;
			return 0;
		}
		if (pump(s, WAIT_MS))
			return -1;
	}
}

/* A slot with room for @nrec records, @name_len bytes of name and @data bytes. */
static int need(struct sender *s, unsigned nrec, size_t name_len, uint64_t data)
{
	if (s->cur >= 0 &&
	    (s->wr.nrec + nrec > CP_MAX_RECORDS ||
	     s->wr.len + nrec * CP_REC_FIXED + name_len + 8 > CP_HDR_SIZE ||
	     s->dlen + data > s->w.chunk) &&
	    flush(s))
		return -1;
	return get_slot(s);
}

static void add(struct sender *s, const struct cp_rec *r)
{
	/* need() made room; a failure here is a bug, not a peer's doing. */
	if (cp_slot_add(&s->wr, r))
		abort();
}

/* ---- files ---- */

static int read_full(int fd, uint8_t *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA; /* the file shrank */
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static void local_fail(struct cp_item *it, const char *what, int e)
{
	snprintf(it->local_err, sizeof(it->local_err), "%s: %s", what,
		 e == -ENODATA ? "the file changed while being copied" : strerror(abs(e)));
	it->state = CP_ITEM_DONE;
}

static int hash_file(struct sender *s, int fd, uint64_t len)
{
	uint64_t off = 0;

	XXH3_128bits_reset(s->st);
	while (off < len) {
		size_t n = len - off < HASH_BUF ? (size_t)(len - off) : HASH_BUF;
		int r;

		unlock_main(s);
		r = read_full(fd, s->hashbuf, n, off);
		if (!r)
			XXH3_128bits_update(s->st, s->hashbuf, n);
		lock_main(s);
		if (r)
			return r;
		off += n;
		if (pump(s, 0))
			return -EPIPE;
	}
	return 0;
}

/* A file that fits in the current slot's data block: no round trip. */
static int send_small(struct sender *s, struct cp_item *it, uint32_t id, int fd)
{
	size_t nl = strlen(it->dst);
	struct cp_rec r = {.file_id = id};
	uint8_t h[16];
	int e;

	if (need(s, 3, nl, it->size))
		return -1;
	/* The slot being filled is ours alone: read and hash without the lock. */
	unlock_main(s);
	e = read_full(fd, slot_data(s, s->cur) + s->dlen, (size_t)it->size, 0);
	if (!e)
		cp_hash128(slot_data(s, s->cur) + s->dlen, (size_t)it->size, h);
	lock_main(s);
	if (e) {
		local_fail(it, "read", e);
		return 0;
	}
	r.type = CP_REC_BEGIN;
	r.flags = it->into ? CP_BEGIN_INTO : 0;
	r.a = it->size;
	r.b = it->mode;
	r.name = it->dst;
	r.name_len = (uint16_t)nl;
	add(s, &r);
	memset(&r, 0, sizeof(r));
	r.file_id = id;
	if (it->size) {
		r.type = CP_REC_DATA;
		r.data_off = s->dlen;
		r.data_len = (uint32_t)it->size;
		memcpy(r.hash, h, 16);
		add(s, &r);
	}
	r.type = CP_REC_END;
	r.data_off = r.data_len = 0;
	memcpy(r.hash, h, 16);
	add(s, &r);
	s->dlen += (uint32_t)it->size;
	it->state = CP_ITEM_SENT;
	cp_progress_add(s->o->progress, it->size, it->dst);
	return 0;
}

/* Add a record of @type for @id to a (possibly new) slot and post it. */
static int send_record(struct sender *s, uint8_t type, uint32_t id, const uint8_t *hash)
{
	struct cp_rec r = {.type = type, .file_id = id};

	if (hash)
		memcpy(r.hash, hash, 16);
	if (need(s, 1, 0, 0))
		return -1;
	add(s, &r);
	return flush(s);
}

/*
 * --resume: what we hold, for the server to check its side against (see
 * CP_BEGIN_PROOF): the hashes of our prefixes at every proof step into
 * @proof and of the whole file into @whole. One read of the file.
 */
static int prove(struct sender *s, int fd, uint64_t size, uint8_t *proof, uint8_t whole[16])
{
	uint64_t step = cp_proof_step(size, s->w.chunk), off = 0;
	unsigned k = 0, n = cp_proof_count(size, s->w.chunk);

	XXH3_128bits_reset(s->st);
	while (off < size) {
		uint64_t stop = k < n ? (k + 1) * step : size;
		size_t len = stop - off < HASH_BUF ? (size_t)(stop - off) : HASH_BUF;
		int r;

		unlock_main(s);
		r = read_full(fd, s->hashbuf, len, off);
		if (!r)
			XXH3_128bits_update(s->st, s->hashbuf, len);
		lock_main(s);
		if (r)
			return r;
		off += len;
		if (off == stop && k < n)
			cp_hash_digest(s->st, proof + 16 * k++);
		if (pump(s, 0))
			return -EPIPE;
	}
	cp_hash_digest(s->st, whole);
	return 0;
}

static int send_large(struct sender *s, struct cp_item *it, uint32_t id, int fd)
{
	int resume = (s->o->flags & CP_F_RESUME) != 0;
	unsigned nproof = resume ? cp_proof_count(it->size, s->w.chunk) : 0;
	uint8_t proof[16 * CP_PROOF_MAX];
	size_t nl = strlen(it->dst);
	struct cp_rec r = {.type = CP_REC_BEGIN,
			   .flags = (uint8_t)(CP_BEGIN_WAIT | (resume ? CP_BEGIN_PROOF : 0) |
					      (it->into ? CP_BEGIN_INTO : 0)),
			   .file_id = id,
			   .a = it->size,
			   .b = it->mode,
			   .name = it->dst,
			   .name_len = (uint16_t)nl};
	uint64_t off;
	int e;

	if (resume) {
		e = prove(s, fd, it->size, proof, r.hash);
		if (e == -EPIPE)
			return -1;
		if (e) {
			local_fail(it, "read", e);
			return 0;
		}
	}
	if (need(s, 1, nl, 16 * nproof))
		return -1;
	if (resume) {
		r.data_off = s->dlen;
		r.data_len = 16 * nproof;
		memcpy(slot_data(s, s->cur) + s->dlen, proof, r.data_len);
		s->dlen += r.data_len;
	}
	add(s, &r);
	it->waiting_ready = 1;
	it->state = CP_ITEM_SENT;
	if (flush(s))
		return -1;
	while (!it->ready && it->state != CP_ITEM_DONE)
		if (pump(s, WAIT_MS))
			return -1;
	if (it->state == CP_ITEM_DONE)
		return 0; /* refused, or (--resume) already up to date */
	/* Only a prefix we proved: anything else is a server that breaks the protocol. */
	off = it->ready_res.offset;
	if (resume ? !cp_proof_offset_ok(it->size, s->w.chunk, off) : off != 0) {
		fatal(s, RK_EXIT_LOST, "protocol error: READY for %s at an offset never offered",
		      it->dst);
		return -1;
	}
	e = hash_file(s, fd, off);
	if (e == -EPIPE)
		return -1;
	if (e) {
		local_fail(it, "read", e);
		return send_record(s, CP_REC_ABORT, id, NULL);
	}
	cp_progress_add(s->o->progress, off, it->dst);
	/* One chunk per slot; the last one also carries END (a file of 0 bytes: END alone). */
	do {
		uint32_t n = it->size - off < s->w.chunk ? (uint32_t)(it->size - off) : s->w.chunk;

		if (need(s, 3, 0, s->w.chunk))
			return -1;
		if (it->state == CP_ITEM_DONE) {
			s->slots[s->cur].state = LS_FREE; /* failed on the server: stop */
			s->cur = -1;
			return 0;
		}
		memset(&r, 0, sizeof(r));
		r.file_id = id;
		unlock_main(s);
		e = read_full(fd, slot_data(s, s->cur), n, off);
		if (!e && n) {
			cp_hash128(slot_data(s, s->cur), n, r.hash);
			XXH3_128bits_update(s->st, slot_data(s, s->cur), n);
		}
		lock_main(s);
		if (e) {
			local_fail(it, "read", e);
			it->state = CP_ITEM_SENT; /* the server still owes its DONE for the abort */
			r.type = CP_REC_ABORT;
			memset(r.hash, 0, sizeof(r.hash));
			add(s, &r);
			return flush(s);
		}
		if (n) {
			r.type = CP_REC_DATA;
			r.a = off;
			r.data_len = n;
			add(s, &r);
			s->dlen = n;
			off += n;
		}
		if (off == it->size) {
			memset(&r, 0, sizeof(r));
			r.type = CP_REC_END;
			r.file_id = id;
			cp_hash_digest(s->st, r.hash);
			add(s, &r);
		}
		if (flush(s))
			return -1;
		cp_progress_add(s->o->progress, n, it->dst);
	} while (off < it->size);
	return 0;
}

static int send_item(struct sender *s, size_t idx)
{
	struct cp_item *it = &s->plan->items[idx];
	uint32_t id = (uint32_t)idx + 1;
	struct stat st;
	int fd, r;

	s->moved += CP_ENTRY_BYTES; /* an entry counts for the minimum rate, as in rk serve */
	if (it->is_dir) {
		struct cp_rec rec = {.type = CP_REC_DIR,
				     .file_id = id,
				     .b = it->mode,
				     .name = it->dst,
				     .name_len = (uint16_t)strlen(it->dst)};

		if (need(s, 1, rec.name_len, 0))
			return -1;
		add(s, &rec);
		it->state = CP_ITEM_SENT;
		return 0;
	}
	fd = cp_plan_open(s->plan, it);
	if (fd < 0) {
		local_fail(it, "open", fd);
		return 0;
	}
	if (fstat(fd, &st)) { /* st is unset: its mode says nothing */
		local_fail(it, "fstat", -errno);
		close(fd);
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		local_fail(it, "open", -EINVAL);
		close(fd);
		return 0;
	}
	if (it->size != (uint64_t)st.st_size) {
		s->o->progress->total += (uint64_t)st.st_size - it->size;
		it->size = (uint64_t)st.st_size;
	}
	if (it->size > s->w.max_file_size) {
		snprintf(it->local_err, sizeof(it->local_err),
			 "larger than the server accepts (%llu bytes)",
			 (unsigned long long)s->w.max_file_size);
		it->state = CP_ITEM_DONE;
		close(fd);
		return 0;
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (!(s->o->flags & CP_F_RESUME) && it->size <= s->w.chunk)
		r = send_small(s, it, id, fd);
	else
		r = send_large(s, it, id, fd);
	close(fd);
	return r;
}

static int run(struct sender *s)
{
	struct cp_rec bye = {.type = CP_REC_BYE};

	/* After a reconnect, what the server already settled stays settled. */
	for (size_t i = 0; i < s->plan->n; i++)
		if (s->plan->items[i].state != CP_ITEM_DONE && send_item(s, i))
			return -1;
	if (need(s, 1, 0, 0))
		return -1;
	add(s, &bye);
	if (flush(s))
		return -1;
	while (!all_done(s))
		if (pump(s, WAIT_MS))
			return -1;
	return 0;
}

/* ---- session set-up ---- */

/* The device: --dev, else $RK_DEV, else the one the route to the server leaves by. */
static int open_device(const struct cp_send_opts *o, struct rk_device **dev, char *why,
		       size_t why_len)
{
	struct rk_device_opts d = {.gid_index = -1};
	struct rk_error e;

	d.name = o->dev ? o->dev : getenv("RK_DEV");
	d.peer = d.name ? NULL : o->host;
	if (rk_device_open(&d, &e, dev)) {
		snprintf(why, why_len, "%s", rk_error_str(&e));
		return RK_EXIT_LOST;
	}
	return 0;
}

/* Local-access memory: in the caller's protection domain if it gave one. */
static int alloc_mr(struct sender *s, size_t len, struct rk_error *e, struct rk_mr **mr)
{
	return s->o->pd ? rk_mr_alloc_pd(s->o->pd, len, RK_ACCESS_LOCAL, e, mr)
			: rk_mr_alloc(s->dev, len, RK_ACCESS_LOCAL, e, mr);
}

/* Lane @l: its receive buffers, its wake-up fd, and (after WELCOME, l > 0) its connection. */
static int lane_init(struct sender *s, unsigned idx)
{
	struct lane *l = &s->lanes[idx];
	struct rk_error e;

	l->s = s;
	l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->evfd < 0) {
		fatal(s, RK_EXIT_LOST, "eventfd: %s", strerror(errno));
		return -1;
	}
	if (alloc_mr(s, (size_t)RQ_DEPTH * CP_MSG_MAX, &e, &l->rbufs)) {
		fatal(s, RK_EXIT_LOST, "%s", rk_error_str(&e));
		return -1;
	}
	return 0;
}

/*
 * Connect failures a restarting or briefly unreachable server causes (no
 * listener yet, no answer, route not there yet); not a bad name or a
 * local fault.
 */
static int reachable_later(int err)
{
	return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
	       err == ENETUNREACH || err == ECONNABORTED || err == ECONNRESET;
}

static int lane_connect(struct sender *s, unsigned idx, const struct rk_hello *hello)
{
	struct lane *l = &s->lanes[idx];
	struct rk_cm_connect_opts co = {
	    .host = s->o->host,
	    .port = s->o->port,
	    .hello = hello,
	    .conn = {.sq_depth = SQ_DEPTH,
		     .rq_depth = RQ_DEPTH,
		     .wait_mode = RK_WAIT_EVENT,
		     .ack_timeout = s->o->ack_timeout,
		     .prepare = prepare,
		     .prepare_arg = l},
	};
	struct rk_error e;
	char which[32] = "";

	if (rk_cm_connect(s->dev, &co, &e, &l->conn)) {
		l->conn = NULL; /* the library destroyed it */
		if (idx)
			snprintf(which, sizeof(which), "lane %u ", idx);
		if (e.reject_reason) /* the server refused us (token, busy, ...): final */
			fatal(s, RK_EXIT_REFUSED, "cannot connect %sto %s:%s: %s", which,
			      s->o->host, s->o->port, rk_error_str(&e));
		else if (reachable_later(e.err)) {
			s->refused = !idx && e.err == ECONNREFUSED;
			fatal_transport(s, "cannot connect %sto %s:%s: %s", which, s->o->host,
					s->o->port, rk_error_str(&e));
		} else
			fatal(s, RK_EXIT_LOST, "cannot connect %sto %s:%s: %s", which, s->o->host,
			      s->o->port, rk_error_str(&e));
		return -1;
	}
	return 0;
}

/* Serving a pull: lane 0 is the connection the client asked for. */
static int lane_accept(struct sender *s)
{
	struct lane *l = &s->lanes[0];
	struct rk_conn_opts co = {.sq_depth = SQ_DEPTH,
				  .rq_depth = RQ_DEPTH,
				  .wait_mode = RK_WAIT_EVENT,
				  .ack_timeout = s->o->ack_timeout,
				  .prepare = prepare,
				  .prepare_arg = l,
				  .pd = s->o->pd};
	struct rk_conn *conn = NULL;
	struct rk_error e;

	s->accept_used = 1; /* taken by the call, whatever it returns */
	if (rk_cm_request_accept(s->o->accept, &co, NULL, 0, ACCEPT_MS, &e, &conn)) {
		l->conn = NULL;
		fatal(s, RK_EXIT_LOST, "accept: %s", rk_error_str(&e));
		return -1;
	}
	l->conn = conn;
	return 0;
}

/* Send an ERROR (code, text) on lane 0 and wait a moment for it to leave. */
static void send_error(struct sender *s, uint16_t code, const char *text)
{
	struct rk_wr wr = {.op = RK_OP_SEND, .flags = RK_WR_SIGNALED, .wr_id = HELLO_WRID};
	int n = cp_error_encode(code, text, rk_mr_addr(s->hello), CP_MSG_MAX);
	struct rk_error e;
	struct ibv_wc wc;

	wr.addr = rk_mr_addr(s->hello);
	wr.len = (uint32_t)n;
	wr.lkey = rk_mr_lkey(s->hello);
	if (n > 0 && rk_post(s->lanes[0].conn, &wr, &e) == 0)
		rk_cq_wait(rk_conn_cq(s->lanes[0].conn), &wc, 1, 2000, &e);
}

/*
 * Serving a pull: wait for the client's PULL, let the caller plan it
 * (o->on_pull), and take its chunk, depth and flags as a client's own.
 */
static int take_pull(struct sender *s)
{
	struct cp_pull p;
	char why[256] = "";
	uint64_t t0 = cli_now_ns();
	size_t stride;
	int code;

	s->last_ns = t0;
	while (!s->pulled) {
		if (cli_now_ns() - t0 > (uint64_t)PULL_MS * 1000000) {
			fatal_transport(s, "no PULL from the client within %d s", PULL_MS / 1000);
			return -1;
		}
		if (pump(s, WAIT_MS))
			return -1;
	}
	if (cp_pull_decode(s->pull_buf, s->pull_len, &p)) {
		send_error(s, CP_E_PROTO, "malformed PULL");
		fatal(s, RK_EXIT_LOST, "protocol error: malformed PULL");
		return -1;
	}
	s->own.chunk = p.chunk;
	s->own.depth = p.depth < CP_MAX_SLOTS ? p.depth : CP_MAX_SLOTS;
	s->own.flags = p.flags;
	/* What we register for slots is bounded as rk serve's rings are (--max-ring). */
	stride = cp_slot_stride(p.chunk);
	if (s->o->max_stage && stride > s->o->max_stage) {
		snprintf(why, sizeof(why),
			 "limit: --max-ring: a %u-byte chunk needs %zu bytes, this server allows "
			 "%llu",
			 p.chunk, stride, (unsigned long long)s->o->max_stage);
		send_error(s, CP_E_LIMIT, why);
		fatal(s, RK_EXIT_REFUSED, "%s", why);
		return -1;
	}
	if (s->o->max_stage && s->own.depth * stride > s->o->max_stage)
		s->own.depth = (unsigned)(s->o->max_stage / stride);
	code = s->o->on_pull(s->o->on_pull_arg, &p, s->plan, why, sizeof(why));
	if (code) {
		send_error(s, (uint16_t)code, why);
		fatal(s, RK_EXIT_REFUSED, "%s", why);
		return -1;
	}
	cp_progress_init(s->o->progress, s->plan->bytes, 0);
	s->rate_ns = cli_now_ns();
	return 0;
}

/*
 * Lane 0: connect with the access token (or, serving a pull, accept the
 * client's connection and take its PULL), HELLO, wait for WELCOME (the
 * ring and the session key). Then the other lanes join with the key, and
 * the staging slots are registered.
 */
static int connect_and_hello(struct sender *s)
{
	struct rk_hello hello = {.app_id = CP_APP_ID, .app_arg = cp_lane_arg(0)};
	struct cp_hello h = {0};
	struct rk_wr wr = {.op = RK_OP_SEND, .flags = RK_WR_SIGNALED, .wr_id = HELLO_WRID};
	struct rk_error e;
	int n, r;

	if (s->o->accept) {
		if (lane_init(s, 0) || lane_accept(s) || take_pull(s))
			return -1;
	} else {
		if (s->o->token) {
			hello.token_len = CP_TOKEN_LEN;
			memcpy(hello.token, s->o->token, CP_TOKEN_LEN);
		}
		if (lane_init(s, 0) || lane_connect(s, 0, &hello))
			return -1;
	}
	h.chunk = s->o->chunk;
	h.depth = (uint16_t)s->o->depth;
	h.flags = (uint16_t)s->o->flags;
	h.lanes = (uint16_t)s->nlanes;
	if (s->o->replacing) {
		h.flags |= CP_F_REPLACES;
		memcpy(h.replaces, s->o->replaces, CP_KEY_LEN);
	}
	n = cp_hello_encode(&h, rk_mr_addr(s->hello), CP_MSG_MAX);
	wr.addr = rk_mr_addr(s->hello);
	wr.len = (uint32_t)n;
	wr.lkey = rk_mr_lkey(s->hello);
	if (n < 0 || rk_post(s->lanes[0].conn, &wr, &e)) {
		lost(&s->lanes[0], "(sending hello)");
		return -1;
	}
	s->last_ns = cli_now_ns();
	while (!s->welcomed)
		if (pump(s, WAIT_MS))
			return -1;
	for (unsigned i = 1; i < s->nlanes; i++) {
		struct rk_hello join = {
		    .app_id = CP_APP_ID, .app_arg = cp_lane_arg(i), .token_len = CP_KEY_LEN};

		memcpy(join.token, s->w.key, CP_KEY_LEN);
		if (lane_init(s, i) || lane_connect(s, i, &join))
			return -1;
	}
	s->stride = cp_slot_stride(s->w.chunk);
	r = alloc_mr(s, s->w.nslots * s->stride, &e, &s->stage);
	if (r) {
		fatal(s, RK_EXIT_LOST, "%s", rk_error_str(&e));
		return -1;
	}
	return 0;
}

int cp_send(const struct cp_send_opts *o, struct cp_plan *plan, struct cp_send_fate *fate,
	    char *why, size_t why_len)
{
	struct sender s = {.own = *o,
			   .plan = plan,
			   .them = o->accept ? "client" : "server",
			   .cur = -1,
			   .why = why,
			   .why_len = why_len,
			   .nlanes = o->lanes ? o->lanes : 1};
	struct rk_error e;
	int r;

	s.o = &s.own;
	why[0] = '\0';
	memset(fate, 0, sizeof(*fate));
	for (unsigned i = 0; i < CP_MAX_LANES; i++)
		s.lanes[i].evfd = -1;
	pthread_mutex_init(&s.mu, NULL);
	{
		/* Timed waits on the monotonic clock: immune to the wall clock being set. */
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s.cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (o->device)
		s.dev = o->device;
	else if ((r = open_device(o, &s.dev, why, why_len)) != 0)
		goto out_sync;
	s.st = XXH3_createState();
	s.hashbuf = malloc(HASH_BUF);
	if (!s.st || !s.hashbuf) {
		fatal(&s, RK_EXIT_LOST, "out of memory");
		goto out;
	}
	r = alloc_mr(&s, CP_MSG_MAX, &e, &s.hello);
	if (r) {
		fatal(&s, RK_EXIT_LOST, "%s", rk_error_str(&e));
		goto out;
	}
	if (connect_and_hello(&s) == 0 && start_lanes(&s) == 0)
		run(&s);
	stop_lanes(&s);
out:
	/* Reverse order of creation: lanes, staging, hello, state, device. */
	for (unsigned i = CP_MAX_LANES; i-- > 0;) {
		struct lane *l = &s.lanes[i];

		if (l->conn && !s.fatal && !l->gone)
			rk_conn_disconnect(l->conn, 2000, NULL);
		rk_conn_destroy(l->conn);
		rk_mr_dereg(l->rbufs);
		if (l->evfd >= 0)
			close(l->evfd);
	}
	rk_mr_dereg(s.stage);
	rk_mr_dereg(s.hello);
	free(s.hashbuf);
	XXH3_freeState(s.st);
	if (o->accept && !s.accept_used) /* set-up failed before the accept */
		rk_cm_request_reject(o->accept, RK_REJECT_BUSY, "server out of resources", NULL);
	if (!o->device)
		rk_device_close(s.dev);
	r = s.fatal;
	fate->transport = s.fatal == RK_EXIT_LOST && s.transport;
	fate->established = s.welcomed;
	if (s.welcomed)
		memcpy(fate->key, s.w.key, CP_KEY_LEN);
	fate->refused = s.refused;
out_sync:
	pthread_cond_destroy(&s.cv);
	pthread_mutex_destroy(&s.mu);
	return r;
}
