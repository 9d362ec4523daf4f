/*
 * rdmakit/wait.h - one wait over many sources: CQs, rdma_cm channels,
 * eventfds and plain file descriptors, with a deadline.
 *
 * A program that serves several connections waits for whichever of them has
 * something to do: completions on a CQ, a CM event (the peer disconnected),
 * a wake-up from another thread, a socket or pipe of its own. A wait set
 * holds all of these; rk_wait() returns the list of sources that fired, each
 * with what it has (the completions taken from a CQ, the new state of a
 * connection, an eventfd's count, an fd's poll events).
 *
 * Underneath is one epoll instance. CQs wait as rk_cq_wait() does, in the
 * set's mode (cq.h): RK_WAIT_BUSY spins on every CQ and looks at the other
 * fds with a non-blocking epoll_wait (a system call) after 1024 empty
 * spins or 128 waits that returned completions, counted across calls, and
 * once more before a wait ends with nothing (so an fd's event may wait
 * that long to be seen; a wake-up by rk_wait_wake() is seen on the next
 * spin);
 * RK_WAIT_EVENT arms every CQ's completion channel and sleeps in
 * epoll_wait; RK_WAIT_ADAPTIVE spins for spin_us first, then sleeps. In the
 * two sleeping modes each CQ must have a completion channel (a CQ created in
 * event or adaptive mode).
 *
 * Completions are taken from a CQ by the wait set (through rk_cq_poll, so
 * wr_ids are the caller's and failures are recorded on their connection)
 * into a buffer the set owns; they are valid until the next rk_wait() or
 * until the CQ is removed. A source that fired but found no room in the
 * caller's array is reported by a later rk_wait(): nothing is lost, epoll
 * is level-triggered and completions stay in the CQ. CQs cannot hide the
 * fds by filling the array on every call: when a look at the fds is due
 * (busy) or the last one found them ready with no room (event), the CQs
 * fill all but one place.
 *
 * Thread-safety: one thread at a time per wait set (add, remove, wait),
 * except rk_wait_wake(), which any thread may call at any time. The CQs
 * and connections added keep their own rules (cq.h, conn.h): the thread
 * that waits is the one that polls them.
 */
#ifndef RDMAKIT_WAIT_H
#define RDMAKIT_WAIT_H

#include <stdint.h>

#include <infiniband/verbs.h>

#include <rdmakit/common.h>
#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/error.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rk_wait;

enum rk_wait_src {
	RK_SRC_CQ = 1,	/* completions: wc[0..nwc) */
	RK_SRC_CONN,	/* a connection's CM channel: its events were handled */
	RK_SRC_EVENTFD, /* an eventfd: its counter was read (count) */
	RK_SRC_FD,	/* a plain fd: poll events (revents); nothing was read */
	RK_SRC_WAKE,	/* rk_wait_wake() was called (count = how many times) */
};

struct rk_wait_opts {
	enum rk_wait_mode mode; /* how CQs are waited for; default busy */
	uint32_t spin_us;	/* adaptive: spin this long before sleeping; 0 = 50 */
};

/* One source that fired. Plain data; valid until the next rk_wait(). */
struct rk_wait_event {
	uint64_t tag;	      /* the caller's tag given when adding */
	struct rk_cq *cq;     /* RK_SRC_CQ */
	struct ibv_wc *wc;    /* RK_SRC_CQ: completions, owned by the wait set */
	struct rk_conn *conn; /* RK_SRC_CONN */
	uint64_t count;	      /* RK_SRC_EVENTFD / RK_SRC_WAKE: the counter read */
	enum rk_wait_src src;
	int id;			  /* the source id rk_wait_add_*() returned (-1 for WAKE) */
	int nwc;		  /* RK_SRC_CQ: how many (>= 1) */
	enum rk_conn_state state; /* RK_SRC_CONN: the state after the events */
	int fd;			  /* RK_SRC_FD / RK_SRC_EVENTFD */
	uint32_t revents;	  /* RK_SRC_FD: EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP ... */
};

/*
 * rk_wait_create - an empty wait set (NULL @opts = busy mode). Creates an
 * epoll instance and an eventfd for rk_wait_wake(). Owned by the caller.
 */
RK_API int rk_wait_create(const struct rk_wait_opts *opts, struct rk_error *err,
			  struct rk_wait **out);

/*
 * rk_wait_destroy - close the epoll instance and the wake eventfd and free
 * the completion buffers. The sources themselves (CQs, connections, fds)
 * stay the caller's and are not touched. Accepts NULL.
 */
RK_API void rk_wait_destroy(struct rk_wait *ws);

/*
 * rk_wait_add_cq - wait for completions on @cq; up to @max_wc (0 = 16) are
 * taken per rk_wait() into a buffer the set allocates now. -EINVAL for a
 * busy-mode CQ in a sleeping set (it has no channel to sleep on), -EEXIST
 * if @cq is already in the set. Returns the source id (>= 0).
 */
RK_API int rk_wait_add_cq(struct rk_wait *ws, struct rk_cq *cq, int max_wc, uint64_t tag,
			  struct rk_error *err);

/*
 * rk_wait_add_conn - wait for rdma_cm events of @conn (DISCONNECTED,
 * DEVICE_REMOVAL, ...): when its channel is readable the set handles them
 * with rk_conn_progress(conn, 0) and reports the resulting state
 * (RK_CONN_ERROR if the channel cannot be read). While @conn's CQ, if it
 * is in the set, has completions the caller has not been handed yet, its
 * CM events wait for a later rk_wait(): a peer's last messages and its
 * disconnect often come together, and the caller must be able to act on
 * those messages (repost a receive, answer) while the connection is still
 * CONNECTED. They wait 16 looks at the fds at most (a CQ shared by busy
 * connections is never idle; in busy mode a look comes every 128 waits
 * that returned completions, see above). -EINVAL for a manual connection (it has no CM channel).
 * Returns the source id.
 */
RK_API int rk_wait_add_conn(struct rk_wait *ws, struct rk_conn *conn, uint64_t tag,
			    struct rk_error *err);

/*
 * rk_wait_add_eventfd - wait for @fd (an eventfd, made non-blocking by the
 * caller or not: it is only read once epoll says it is readable) to be
 * signaled; the set reads the counter and reports it. Returns the source id.
 */
RK_API int rk_wait_add_eventfd(struct rk_wait *ws, int fd, uint64_t tag, struct rk_error *err);

/*
 * rk_wait_add_fd - wait for @events (EPOLLIN, EPOLLOUT ...) on a plain fd;
 * the set reports the events and reads nothing (level-triggered: it fires
 * again until the caller consumes what is there). Returns the source id.
 */
RK_API int rk_wait_add_fd(struct rk_wait *ws, int fd, uint32_t events, uint64_t tag,
			  struct rk_error *err);

/*
 * rk_wait_remove - take source @id out of the set (before the CQ,
 * connection or fd behind it is destroyed or closed). Completions the set
 * returned for a CQ source are freed with it: handle them first. Returns 0
 * or -ENOENT. Cost: one epoll_ctl.
 */
RK_API int rk_wait_remove(struct rk_wait *ws, int id);

/*
 * rk_wait - wait until at least one source fires or @timeout_ms passes
 * (-1 = forever, 0 = just look). Fills up to @n events and returns how many
 * (>= 1), -ETIMEDOUT at the deadline, or another negative errno (with @err).
 * Cost: busy mode, one ibv_poll_cq per CQ per spin and one epoll_wait
 * system call per 1024 empty spins or 128 calls that returned completions
 * (a busy deadline may pass by up to 2048 spins: it is checked every 1024);
 * event mode, per call one epoll_wait
 * plus, per CQ whose channel fired, one read of the channel; a CQ is armed
 * again (one ibv_req_notify_cq) by the next call, before it may sleep,
 * not on the way to the completions that woke it (acks are batched, see
 * cq.h). Nothing is allocated.
 */
RK_API int rk_wait(struct rk_wait *ws, struct rk_wait_event *out, int n, int timeout_ms,
		   struct rk_error *err);

/*
 * rk_wait_fd - the set's epoll file descriptor, for an event loop of the
 * caller's (asyncio's add_reader, libuv, another epoll): readable when a
 * source of the set may have fired; then call rk_wait(..., 0). Sleeping
 * modes only: a busy set's CQs have no channel, so their completions never
 * make it readable. A CQ raises an event only once rk_wait has armed it:
 * call rk_wait(..., 0) once before the first wait on the fd, and again
 * while it returns events (a call that returns events may leave the CQs
 * that woke it not armed; a completion that was already in a CQ when it
 * was armed raises none). Owned by the set (do not close it); level-
 * triggered. Costs nothing.
 */
RK_API int rk_wait_fd(const struct rk_wait *ws);

/*
 * rk_wait_wake - make the current or next rk_wait() return an RK_SRC_WAKE
 * event. Safe from any thread and from signal handlers (one write(2) on an
 * eventfd). Returns 0 or a negative errno.
 */
RK_API int rk_wait_wake(struct rk_wait *ws);

#ifdef __cplusplus
}
#endif

#endif
