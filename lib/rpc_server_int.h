/*
 * rpc_server_int.h - what the files of the RPC server share (private to
 * lib/; rpc.h is the contract):
 *
 *   rpc_server.c         requests in, handlers run, progress, setup
 *   rpc_server_conn.c    connections accepted, dropped and freed
 *   rpc_server_answer.c  answers: staged memory, posting, and the queues of
 *                        answers from other threads and of work waiting
 *                        for send-queue room
 *
 * All of it runs on the progress thread, but rk_rpc_reply() from another
 * thread, which only copies the answer onto the locked deferred queue.
 */
#ifndef RK_RPC_SERVER_INT_H
#define RK_RPC_SERVER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "rk_internal.h"
#include "rpc_wire.h"

#define TAG_RECV	 0x5251ull /* wr_id top 16 bits: request receives */
#define TAG_ANSWER	 0x5241ull /* the answers' send set (write with immediate) */
#define TAG_READ	 0x5244ull /* a rendezvous body's READ; low bits the slot */
#define TAG_DATA	 0x5257ull /* an answer's data WRITE */
#define TAG_STAGE	 0x5253ull /* the last WRITE from a staged answer: free it */
#define TAG_INLINE	 0x5249ull /* an inline answer (sconn's kept WR): nothing to free */
#define TAG_LISTEN	 (~0ull)
#define CONN_TAG	 (1ull << 32)
#define CHUNK		 (8u << 20) /* bytes per READ / WRITE: Soft-RoCE's limit */
#define POOL_MAX_CLASS	 (1u << 20) /* larger bodies and answers are registered per use */
#define MAX_EVENTS	 16
#define DEF_WINDOW	 64
#define DEF_SLOT	 4096
#define DEF_MAX_MSG	 (64u << 20)
#define DEF_MAX_CONNS	 64
#define DEF_RDV_BYTES	 (256ull << 20)
#define MAX_CONNS_LIMIT	 65535
#define ANSWER_SPARE_BUF 8
/*
 * Request receives beyond the window: answered requests' buffers are
 * posted again RECV_SPARE at a time (one ibv_post_recv), and the spares
 * keep a receive ready for every request the client may send meanwhile.
 */
#define RECV_SPARE	 16
#define ESTABLISH_MS	 1000 /* data came first: how long ESTABLISHED may take */
#define DEF_INLINE	 128  /* bytes an answer carries inline (header and 116 bytes) */
#define SIGNAL_EVERY	 16   /* answers: a completion every this many frees them all */
#define DEF_IDLE_MS	 60000
#define IDLE_CHECK_EVERY 64   /* progress calls that found work between clock readings */
#define SOLO_SPINS	 1024 /* busy, one connection: empty passes between looks at the fds */
#define SOLO_LOOK_EVERY	 64   /* ... and calls that found work between looks */
#define ANS_INLINE_MAX	 256  /* the most bytes an answer sent inline from sconn may hold */

enum req_state { R_FREE = 0, R_READING, R_HANDLER };

struct sconn;

/* Memory a body or an answer was staged in: a pool buffer or a registration. */
struct stage {
	struct stage *next;
	struct rk_buf buf; /* buf.addr NULL when mr */
	struct rk_mr *mr;
	uint64_t bytes;
};

struct rk_rpc_req {
	struct sconn *c;
	uint16_t slot;
	enum req_state state;
	struct rk_rpc_req_hdr h;
	int has_buf;
	uint32_t buf_index;
	const uint8_t *data; /* the body: in the receive buffer or the stage */
	struct stage body;
	struct stage *out; /* rk_rpc_reply_buf(): the answer built in place */
	unsigned reads_left;
	struct rk_rpc_req *next_oom; /* on the list of replies that found no memory */
};

/* Work waiting: an answer from another thread, or anything waiting for send-queue room. */
enum pending_kind {
	P_ANSWER, /* a handler's answer (the request is held) */
	P_STATUS, /* the server's own answer: no method, too big, no room */
	P_READ,	  /* a rendezvous body's READs */
};

struct pending {
	struct pending *next;
	struct rk_rpc_req *req;
	enum pending_kind kind;
	uint32_t status; /* P_STATUS */
	int32_t code;
	uint32_t len;
	int in_out; /* P_ANSWER: the data is in req->out, not data[] */
	uint8_t data[];
};

struct sconn {
	struct rk_rpc_server *srv;
	unsigned idx;
	struct rk_conn *conn;
	struct rk_recv_set *rs;
	struct rk_send_set *ss;
	int cq_id, conn_id;
	int dead, closed;	 /* closed: the peer disconnected (not dropped by us) */
	int idle;		 /* closed by the idle sweep */
	unsigned held;		 /* requests with handlers, not yet answered */
	uint64_t rdv_bytes;	 /* rendezvous bodies this connection holds */
	struct sconn *next_dead; /* on the server's list of dead connections */
	uint32_t requests;	 /* requests received: idle while it stays the same */
	uint32_t seen_requests;	 /* ... at the last idle sweep */
	int64_t idle_since_ms;	 /* when the last sweep saw it change (or the accept) */
	uint16_t host_len;	 /* peer[0..host_len): the address without its port */
	int in_table;		 /* still in conns[] (until the end of a progress) */
	struct rk_cq *cq;	 /* the connection's CQ, and its verbs CQ (solo polling) */
	struct ibv_cq *vcq;
	uint32_t window;
	struct rk_rpc_limits lim; /* the server's, with this connection's window */
	struct rk_rpc_req *reqs;
	struct stage *stages, **stages_tail; /* staged answers in posting order */
	/*
	 * Answers that go inline (header and data within ans_inline bytes,
	 * the connection's max_inline): encoded in ans_buf and posted from
	 * one verbs WR built at the accept, its length, the caller's slot
	 * and the immediate written per answer. The provider copies an
	 * inline WR's bytes when it is posted, so ans_buf is free again at
	 * once: no send buffer, no FIFO of buffers in flight. 0: none go so.
	 */
	uint32_t ans_inline;
	struct ibv_send_wr ans_wr;
	struct ibv_sge ans_sge;
	char peer[64];
	uint8_t ans_buf[ANS_INLINE_MAX] __attribute__((aligned(8)));
};

struct handler {
	uint16_t method;
	rk_rpc_handler_fn fn;
	void *arg;
};

struct rk_rpc_server {
	struct rk_device *dev;
	struct rk_listener *lis;
	struct rk_wait *ws;
	struct rk_pool *pool;
	struct rk_rpc_server_opts o;
	struct rk_conn_opts copts;
	struct rk_rpc_limits lim;
	uint32_t req_buf;
	uint8_t token[RK_HELLO_TOKEN_MAX];
	struct handler *handlers;
	unsigned nhandlers;
	struct rk_pd *pd;
	struct sconn **conns;
	struct sconn *dead;		     /* dropped: out of conns[] and freed after progress */
	struct rk_rpc_req *oom;		     /* replies that found no memory (under lock) */
	int in_progress;		     /* atomic: a progress runs, on progress_thread */
	uintptr_t progress_thread;	     /* atomic (relaxed): rk__rpcs_self() of its thread */
	struct pending *retry, **retry_tail; /* progress thread only */
	pthread_mutex_t lock;		     /* guards deferred */
	struct pending *deferred, **deferred_tail;
	int deferred_n, wake_req; /* atomics */
	unsigned idle_calls;	  /* progress calls since the last clock reading */
	struct sconn *solo;	  /* busy mode: the one live connection, else NULL */
	unsigned solo_calls;	  /* solo_wait calls since the fds' last look */
	int fds_ready;		  /* that look found an fd ready: the wait set's turn */
	uint32_t idle_slack_ms;	  /* a wait this short is not cut for an idle sweep */
	int64_t idle_next_ms;	  /* the next idle sweep is due (0: none yet) */
	struct rk_rpc_server_stats st;
};

/*
 * This thread, as a number no other live thread has: the thread pointer
 * where the compiler reads it in one instruction (x86-64's %fs:0 and
 * aarch64's tpidr_el0 hold it by their ABIs), else pthread_self(), a call
 * into libc per use.
 */
#if defined(__has_builtin) && (defined(__x86_64__) || defined(__aarch64__))
#if __has_builtin(__builtin_thread_pointer)
#define RK_RPCS_SELF_TP 1
#endif
#endif
static inline uintptr_t rk__rpcs_self(void)
{
#ifdef RK_RPCS_SELF_TP
	return (uintptr_t)__builtin_thread_pointer();
#else
	return (uintptr_t)pthread_self();
#endif
}

/*
 * Whether this thread runs @srv's progress now (a reply from it posts at
 * once; the pool and the connections are that thread's alone). A field of
 * the server, not a thread-local: a library's thread-local costs a call of
 * __tls_get_addr per access, three on every call's path.
 */
static inline int rk__rpcs_on_progress(const struct rk_rpc_server *srv)
{
	if (!__atomic_load_n(&srv->in_progress, __ATOMIC_ACQUIRE))
		return 0;
	return __atomic_load_n(&srv->progress_thread, __ATOMIC_RELAXED) == rk__rpcs_self();
}

/* @c's free send slots, as rk_sq_room() counts them, without the call. */
static inline unsigned rk__rpcs_sq_room(const struct rk_conn *c)
{
	return c->sq_depth - (unsigned)(c->slots.sq_head - c->slots.sq_tail);
}

static inline uint64_t wrid(uint64_t tag, unsigned idx, unsigned low)
{
	return tag << 48 | (uint64_t)idx << 32 | low;
}

static inline void *stage_addr(const struct stage *s)
{
	return s->mr ? rk_mr_addr(s->mr) : s->buf.addr;
}

static inline uint32_t stage_lkey(const struct stage *s)
{
	return s->mr ? rk_mr_lkey(s->mr) : s->buf.lkey;
}

static inline unsigned chunks(uint64_t len)
{
	return (unsigned)((len + CHUNK - 1) / CHUNK);
}

/* ---- rpc_server_conn.c ---- */

/* Accept every pending connection request (or refuse it: token, limit, memory). */
void rk__rpcs_accept_all(struct rk_rpc_server *srv);
/* Drop @c: logged, its QP, CQ and CM id gone now; the rest once no handler holds a request. */
void rk__rpcs_conn_drop(struct rk_rpc_server *srv, struct sconn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* End of progress: dead connections leave the table; those nobody holds are freed. */
void rk__rpcs_sweep_dead(struct rk_rpc_server *srv);
/*
 * Close connections with no call in flight since the sweep before the one
 * that finds them idle for idle_ms; returns how many it closed and sets
 * the next sweep's time (a quarter of idle_ms on).
 */
unsigned rk__rpcs_idle_sweep(struct rk_rpc_server *srv, int64_t now_ms);
/* Free what is left of dead @c; nobody may reference it any more. */
void rk__rpcs_conn_free(struct rk_rpc_server *srv, struct sconn *c);
/* srv->solo after an accept or a drop: the one live connection of a busy server, or NULL. */
void rk__rpcs_solo_update(struct rk_rpc_server *srv);
/* A request is done with: its staged body and answer go back, its slot is free. */
void rk__rpcs_req_release(struct rk_rpc_server *srv, struct rk_rpc_req *q);
/* The same, inline for the common request that staged nothing. */
static inline void rk__rpcs_req_done(struct rk_rpc_server *srv, struct rk_rpc_req *q)
{
	if (q->out || q->body.bytes)
		rk__rpcs_req_release(srv, q);
	else
		q->state = R_FREE;
}

/* ---- rpc_server_answer.c ---- */

/* Memory for @bytes of body or answer: from the pool up to 1 MiB, registered beyond. */
int rk__rpcs_stage_alloc(struct rk_rpc_server *srv, uint64_t bytes, struct stage *s,
			 struct rk_error *err);
void rk__rpcs_stage_free(struct rk_rpc_server *srv, struct stage *s);
/* Work for @q kept for later: its answer (copied unless built in place), or a status. */
struct pending *rk__rpcs_pending_new(struct rk_rpc_req *q, int32_t code, const void *data,
				     uint32_t len);
/* Queue @p to be tried again at the end of this progress (progress thread only). */
void rk__rpcs_retry_push(struct rk_rpc_server *srv, struct pending *p);
/* An answer the server itself gives (no handler ran): posted now or queued for room. */
void rk__rpcs_answer_status(struct rk_rpc_server *srv, struct rk_rpc_req *q, uint32_t status,
			    struct pending *p);
/* Answers from other threads, and work that waited for send-queue room. */
void rk__rpcs_run_queues(struct rk_rpc_server *srv);

/* ---- rpc_server.c ---- */

/* Post the body's READs if the send queue has room: 1, 0 (no room), < 0 dropped. */
int rk__rpcs_read_body(struct rk_rpc_server *srv, struct rk_rpc_req *q);

#endif
