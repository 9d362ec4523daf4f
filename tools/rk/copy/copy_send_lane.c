/*
 * copy_send_lane.c - a sending session's lanes (see copy_send_int.h): what
 * the peer sends (WELCOME, RESULTS, ERROR, a pull's PULL, and the ring's
 * credits), each completion, the waits, and the thread per lane that posts
 * the slots the main thread filled.
 *
 * Why a thread per lane: posting is where a software RDMA device (rxe)
 * does its work, in the poster's system call, so posting on other threads
 * overlaps it with the main thread's reading and hashing even with one
 * lane, and N lanes spread it over N CPUs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdmakit/cm.h>
#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/mr.h>
#include <rdmakit/msgbuf.h>
#include <rdmakit/post.h>

#include "cli.h"
#include "copy_files.h"
#include "copy_send_int.h"

int snd_prepare(struct rk_conn *conn, void *arg)
{
	struct send_lane *l = arg;
	struct rk_msgbuf_opts ro = {.count = RQ_DEPTH, .size = CP_MSG_MAX};

	l->conn = conn;
	rk_recv_set_destroy(l->rs); /* a connection tried before is gone */
	l->rs = NULL;
	return rk_recv_set_create(conn, l->s->pool, &ro, NULL, &l->rs);
}

/* ---- what the server tells us ---- */

static void on_result(struct sender *s, const struct cp_result *r)
{
	struct cp_item *it;

	if (r->file_id == 0 || r->file_id > s->plan->n) {
		snd_fatal(s, RK_EXIT_LOST, "protocol error: result for unknown file id %u",
			  r->file_id);
		return;
	}
	it = &s->plan->items[r->file_id - 1];
	if (it->state != CP_ITEM_SENT) {
		snd_fatal(s, RK_EXIT_LOST, "protocol error: unexpected result for %s", it->dst);
		return;
	}
	if (r->kind == CP_RES_READY) {
		if (!it->waiting_ready || it->ready) {
			snd_fatal(s, RK_EXIT_LOST, "protocol error: unexpected READY for %s",
				  it->dst);
			return;
		}
		it->ready = 1;
		it->ready_res = *r;
		return;
	}
	it->state = CP_ITEM_DONE;
	if (!it->is_dir)
		cp_progress_file(s->o->progress);
	it->code = r->code;
	it->sys_errno = r->sys_errno;
	it->offset = r->offset;
}

/* The results of the next slot in sequence (they all come on lane 0, in order). */
static void on_results(struct sender *s, const void *buf, uint32_t len)
{
	uint64_t posted = s->next_seq - (s->cur >= 0); /* the slot being filled is not */
	struct cp_results c;

	if (cp_results_decode(buf, len, &c)) {
		snd_fatal(s, RK_EXIT_LOST, "protocol error: malformed results from the %s",
			  s->them);
		return;
	}
	if (c.seq != (uint16_t)s->results_seq || s->results_seq >= posted) {
		snd_fatal(s, RK_EXIT_LOST,
			  "protocol error: results for slot %u, %u expected, %llu sent", c.seq,
			  (uint16_t)s->results_seq, (unsigned long long)posted);
		return;
	}
	s->results_seq++;
	for (unsigned i = 0; i < c.nres && !s->fatal; i++)
		on_result(s, &c.res[i]);
}

static void on_message(struct sender *s, int lane0, const void *buf, uint32_t len)
{
	char text[256];
	uint16_t code;
	int type = cp_msg_peek(buf, len);

	if (type == CP_MSG_RESULTS && s->welcomed && lane0) {
		on_results(s, buf, len);
	} else if (type == CP_MSG_WELCOME && !s->welcomed) {
		/* A ring of at most our depth (or one slot per lane), the lanes dividing it. */
		if (cp_welcome_decode(buf, len, &s->w) || s->w.chunk != s->o->chunk ||
		    s->w.nslots % s->nlanes ||
		    s->w.nslots > (s->o->depth > s->nlanes ? s->o->depth : s->nlanes)) {
			snd_fatal(s, RK_EXIT_LOST, "protocol error: malformed welcome");
			return;
		}
		s->welcomed = 1;
	} else if (type == CP_MSG_ERROR &&
		   cp_error_decode(buf, len, &code, text, sizeof(text)) == 0) {
		/* A limit (e.g. the chunk does not fit the server's ring) is a refusal. */
		snd_fatal(s, code == CP_E_LIMIT ? RK_EXIT_REFUSED : RK_EXIT_LOST,
			  "the %s ended the session: %s", s->them, text);
	} else if (type == -EPROTO) {
		snd_fatal(s, RK_EXIT_LOST, "the %s speaks another protocol version", s->them);
	} else if (type == CP_MSG_PULL && s->o->accept && !s->pulled && len <= CP_MSG_MAX) {
		/* Kept whole: the decoded PULL points into it. */
		memcpy(s->pull_buf, buf, len);
		s->pull_len = len;
		s->pulled = 1;
	} else {
		snd_fatal(s, RK_EXIT_LOST, "protocol error: unexpected message from the %s",
			  s->them);
	}
}

void snd_lost(struct send_lane *l, const char *what)
{
	struct sender *s = l->s;
	struct rk_error e;

	if (rk_conn_first_error(l->conn, &e))
		snd_fatal_transport(s, "connection lost%s%s: %s", what ? " " : "", what ? what : "",
				    rk_error_str(&e));
	else
		snd_fatal_transport(s, "connection lost%s%s", what ? " " : "", what ? what : "");
}

static void on_wc(struct send_lane *l, const struct ibv_wc *wc)
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
		    (wc->status == IBV_WC_REM_ACCESS_ERR && s->welcomed)) {
			snd_fatal_transport(s, "connection lost: %s", rk_error_str(&e));
			return;
		}
		snd_fatal(s, RK_EXIT_LOST, "connection lost: %s", rk_error_str(&e));
		return;
	}
	s->last_ns = cli_now_ns();
	if (wc->opcode == IBV_WC_RECV || wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		struct rk_msg m;

		if (rk_recv_set_take(l->rs, wc, &m, &e) != 1) {
			snd_fatal(s, RK_EXIT_LOST, "internal error: bad receive id");
			return;
		}
		if (m.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			snd_fatal(s, RK_EXIT_LOST, "protocol error: the %s wrote into our memory",
				  s->them);
			return;
		}
		if (m.has_imm) {
			/* The ring's credit, checked there (a forged one drops the lane). */
			if (!s->ring ||
			    rk_ring_tx_msg(s->ring, (unsigned)(l - s->lanes), &m, &e) < 0) {
				snd_fatal(s, RK_EXIT_LOST, "protocol error: %s",
					  s->ring ? rk_error_str(&e) : "a credit before the ring");
				return;
			}
		} else {
			on_message(s, l == &s->lanes[0], m.data, m.len);
		}
		if (!s->fatal && rk_recv_set_release(l->rs, m.index, &e)) {
			if (rk_conn_state(l->conn) != RK_CONN_CONNECTED)
				snd_lost(l,
					 NULL); /* it went down under us: the transport's doing */
			else
				snd_fatal(s, RK_EXIT_LOST, "%s", rk_error_str(&e));
		}
		return;
	}
	if (wc->wr_id == HELLO_WRID || !(wc->wr_id & 1))
		return; /* the HELLO's SEND */
	/* A slot's write completed: the server has it, our staging slot is free. */
	if ((wc->wr_id >> 1) < CP_MAX_SLOTS && s->slots[wc->wr_id >> 1].state == LS_POSTED)
		s->slots[wc->wr_id >> 1].state = LS_FREE;
}

int snd_all_done(const struct sender *s)
{
	/* Every slot answered, the BYE's too: the server is done with us. */
	if (s->results_seq != s->next_seq || s->cur >= 0)
		return 0;
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
static int pump_lane(struct send_lane *l, int wait_ms)
{
	struct sender *s = l->s;
	struct rk_cq *cq = rk_conn_cq(l->conn);
	struct rk_wait_event ev[3];
	const struct ibv_wc *wc = NULL;
	struct ibv_wc more[16];
	struct rk_error e;
	int n, nwc = 0, gone = 0, over;

	/* The eventfd only wakes us: the set reads it, nothing else to do. */
	n = rk_wait(l->ws, ev, 3, wait_ms > 0 ? wait_ms : 0, &e);
	for (int k = 0; k < n; k++) {
		if (ev[k].src == RK_SRC_CQ) {
			wc = ev[k].wc;
			nwc = ev[k].nwc;
		} else if (ev[k].src == RK_SRC_CONN && ev[k].state != RK_CONN_CONNECTED) {
			gone = 1;
		}
	}
	if (gone && l->conn_src >= 0) { /* its channel has nothing more to say */
		rk_wait_remove(l->ws, l->conn_src);
		l->conn_src = -1;
	}
	pthread_mutex_lock(&s->mu);
	if (n < 0 && n != -ETIMEDOUT)
		snd_fatal(s, RK_EXIT_LOST, "%s", rk_error_str(&e));
	for (int i = 0; i < nwc && !s->fatal; i++)
		on_wc(l, &wc[i]);
	/* What completed before the disconnect still counts: drain it first. */
	while (gone && !s->fatal && (n = rk_cq_poll(cq, more, 16, &e)) > 0)
		for (int i = 0; i < n && !s->fatal; i++)
			on_wc(l, &more[i]);
	if (gone) {
		l->gone = 1;
		if (!s->gone_ns)
			s->gone_ns = cli_now_ns();
		/* Before the threads start there is no other lane to wait for. */
		if (!s->fatal && (!s->threaded || !s->welcomed) && !snd_all_done(s))
			snd_lost(l, s->o->accept ? "(the client closed it)"
						 : "(the server closed it)");
		if (!s->fatal && !s->welcomed)
			snd_lost(l, s->o->accept
					? "(the client closed it before the session began)"
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

	if (!s->fatal && s->gone_ns && now - s->gone_ns > GONE_GRACE_NS && !snd_all_done(s))
		snd_fatal_transport(s, "connection lost (the %s closed it)", s->them);
	if (!s->fatal && now - s->last_ns > (uint64_t)s->o->idle_ms * 1000000)
		snd_fatal_transport(s, "the %s did not answer for %d s", s->them,
				    s->o->idle_ms / 1000);
	if (!s->fatal && s->o->stop && atomic_load(s->o->stop))
		snd_fatal(s, RK_EXIT_LOST, "server shutting down");
	/*
	 * Serving a pull, as rk serve's sessions (copy_files.h): a client must
	 * take CP_IDLE_MIN_BYTES in every --idle period (an entry counts
	 * CP_ENTRY_BYTES), or a trickle of CREDITs would hold a session for ever.
	 */
	if (!s->fatal && s->o->accept && s->welcomed &&
	    now - s->rate_ns > (uint64_t)s->o->idle_ms * 1000000) {
		uint64_t moved = s->o->progress->done + s->moved;

		if (moved - s->rate_moved < CP_IDLE_MIN_BYTES && !snd_all_done(s))
			snd_fatal_transport(s, "the client took less than 1 MiB in %d s",
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
int snd_pump(struct sender *s, int wait_ms)
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

/* Post slot @i (its header block and data, one write with the ring's immediate) on @l. */
static int post_slot(struct send_lane *l, int i)
{
	struct sender *s = l->s;
	const struct lslot *ls = &s->slots[i];
	struct rk_wr wr = {.flags = RK_WR_SIGNALED,
			   .wr_id = (uint64_t)i << 1 | 1,
			   .addr = snd_slot_data(s, i) - ls->hlen,
			   .lkey = rk_mr_lkey(s->stage)};
	struct rk_error e;
	int r;

	if (rk_ring_tx_write_wr(s->ring, &ls->rb, ls->hlen + ls->dlen, &wr))
		return -1;
	/* Cannot fill up (one WR per slot, fewer slots than room); be safe anyway. */
	while ((r = rk_post(l->conn, &wr, &e)) == -ENOBUFS)
		if (pump_lane(l, 10))
			return -1;
	return r ? -1 : 0;
}

static void *lane_main(void *arg)
{
	struct send_lane *l = arg;
	struct sender *s = l->s;
	char name[16];

	snprintf(name, sizeof(name), "rk-lane%u", (unsigned)(l - s->lanes));
	cli_name_thread(name);
	pthread_mutex_lock(&s->mu);
	while (!s->stop && !s->fatal) {
		while (l->qhead != l->qtail && !s->fatal) {
			int i = l->q[l->qhead++ % CP_MAX_SLOTS];
			int r;

			/* The slot is ours until its completion: post it unlocked. */
			pthread_mutex_unlock(&s->mu);
			r = post_slot(l, i);
			/*
			 * Take what has come in since, without waiting: the
			 * write's completion frees its staging slot, and the
			 * server's RESULTS and credits free ring slots. Left
			 * until the queue runs dry, they would keep the main
			 * thread from filling the next slot, and this lane
			 * would then wait for it (measured: 10-15 % of one
			 * lane's rate under Soft-RoCE). An end of the session
			 * shows in s->fatal.
			 */
			if (!r)
				(void)pump_lane(l, 0);
			pthread_mutex_lock(&s->mu);
			if (r)
				snd_lost(l, "(posting failed)");
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

void snd_wake(struct send_lane *l)
{
	uint64_t one = 1;

	if (write(l->evfd, &one, sizeof(one)) < 0) {
		/* Only fails when the counter is full: the lane is awake anyway. */
	}
}

int snd_watch_lane(struct send_lane *l, struct rk_error *e)
{
	struct rk_wait_opts wo = {.mode = RK_WAIT_EVENT}; /* the lanes' CQs have channels */
	int r = rk_wait_create(&wo, e, &l->ws);

	if (!r)
		r = rk_wait_add_cq(l->ws, rk_conn_cq(l->conn), 16, 0, e);
	if (r >= 0)
		r = l->conn_src = rk_wait_add_conn(l->ws, l->conn, 1, e);
	if (r >= 0)
		r = rk_wait_add_eventfd(l->ws, l->evfd, 2, e);
	return r < 0 ? r : 0;
}

/* Start a thread per lane; from now on the main thread holds the mutex. */
int snd_start_lanes(struct sender *s)
{
	pthread_mutex_lock(&s->mu);
	s->threaded = 1;
	for (unsigned i = 0; i < s->nlanes; i++) {
		int r = pthread_create(&s->lanes[i].th, NULL, lane_main, &s->lanes[i]);

		if (r) {
			snd_fatal(s, RK_EXIT_LOST, "cannot start a thread: %s", strerror(r));
			return -1;
		}
		s->lanes[i].started = 1;
	}
	return 0;
}

/* Stop and join the lane threads; the main thread lets go of the mutex. */
void snd_stop_lanes(struct sender *s)
{
	if (!s->threaded)
		return;
	s->stop = 1;
	pthread_mutex_unlock(&s->mu);
	for (unsigned i = 0; i < s->nlanes; i++) {
		if (!s->lanes[i].started)
			continue;
		snd_wake(&s->lanes[i]);
		pthread_join(s->lanes[i].th, NULL);
		s->lanes[i].started = 0;
	}
	s->threaded = 0;
}
