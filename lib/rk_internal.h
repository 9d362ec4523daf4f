/*
 * rk_internal.h - the library's private structures and helpers.
 *
 * Not installed. Handles are opaque to users; their layouts live here so the
 * small single-purpose files of lib/ can share them.
 *
 * Layers, bottom up. A file calls only into its own layer or the ones below;
 * news travels upward only through hooks the upper layer registered (a
 * function pointer in the lower object), never by a direct call:
 *
 *   0 base     error.c explain*.c log.c time.c tcp.c oob.c hello.c version.c:
 *              errors, logging, clocks, wire codecs; no verbs objects.
 *              xfer_desc.c xfer_plan.c xfer_cache.c: the one-sided layer's
 *              pure parts (descriptor codec, batch planner, registration
 *              cache with its verbs calls injected).
 *   1 device   device.c async.c pd.c mr.c slab.c pool.c: the device, its
 *              PDs and registered memory. async.c reports a fatal QP event
 *              upward through dev->on_qp_fatal (set by layer 3).
 *   2 cq       cq.c: completion queues and their waits; knows QPs only as
 *              struct rk_cq_member (wr_id slots + on_fail hook, set by 3).
 *   3 conn     conn.c qp_connect.c post.c post_recv_kept.c recv_prep.c: one
 *              RC QP, its state and first error, posting. What rdma_cm adds
 *              is reached through c->cm (struct rk_conn_cm_ops, set by 4).
 *   4 cm       cm_event.c cm_client.c cm_listener.c: rdma_cm connections
 *              made and accepted; CM events turned into connection states.
 *   5 messaging  wait.c (one wait over CQs, CM channels and fds), msgbuf.c
 *              (receive and send buffer sets), ring*.c (credit ring),
 *              xfer.c xfer_batch.c (one-sided transfers, xfer.h): on top
 *              of connections and CQs; nothing below calls into them.
 *   6 rpc      rpc_wire.c (headers, no verbs), rpc_client*.c, rpc_server*.c
 *              (calls on the messaging layer), rpc_pool_book.c and
 *              rpc_pool.c (connections by peer, leased to threads).
 *
 * tests/unit/layers_guard.py holds the same table and fails the unit tests
 * when a file calls a function of a layer above its own, or when files call
 * each other in a cycle (within a layer too: rpc_server*.c, one module
 * sharing rpc_server_int.h, is the only exception).
 */
#ifndef RK_INTERNAL_H
#define RK_INTERNAL_H

#include <errno.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <rdmakit/rdmakit.h>

/*
 * Called by async.c for a fatal event on a QP, with the QP's qp_context:
 * the layer that created the QP registers it (conn.c), so the device layer
 * reports upward without knowing what a connection is.
 */
typedef void (*rk_qp_fatal_fn)(void *qp_context, const struct rk_error *e);

struct rk_device {
	struct ibv_context **list; /* rdma_get_devices(): keeps ctx alive */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	struct rk_device_info info;
	rk_qp_fatal_fn on_qp_fatal; /* NULL until a connection exists */
};

/* A PD of the caller's own (pd.h); the device's default one is dev->pd. */
struct rk_pd {
	struct rk_device *dev;
	struct ibv_pd *pd;
};

/*
 * A queue pair as its CQ sees it (cq.c): the work-request slots that turn a
 * completion's wr_id back into the caller's, and the hook that reports a
 * failed completion to whoever owns the QP. The connection layer embeds one
 * per connection and attaches it; the CQ never sees a struct rk_conn.
 *
 * The wr_id handed to verbs is a sequence number (bit 63 set for receives);
 * the caller's wr_id is kept here. A completion for sequence s retires every
 * slot up to s, which is what makes selective signaling and flushes add up.
 *
 * The id arrays are rings of a power of two >= the depth, indexed by the
 * sequence & mask: a modulo by a variable would be a division on every post
 * and completion (tens of cycles on hardware, a helper call under emulation).
 */
struct rk_cq_member;
typedef void (*rk_cq_fail_fn)(struct rk_cq_member *m, const struct ibv_wc *wc);

struct rk_cq_member {
	uint32_t qp_num;
	uint64_t *sq_ids, sq_head, sq_tail;
	uint64_t *rq_ids, rq_head, rq_tail;
	uint64_t sq_mask, rq_mask;
	rk_cq_fail_fn on_fail; /* a completion with an error status (cold path) */
};

struct rk_cq {
	struct rk_device *dev;
	struct ibv_cq *cq;
	struct ibv_comp_channel *ch; /* NULL in busy mode */
	enum rk_wait_mode mode;
	uint32_t depth;
	uint32_t spin_us;
	int armed;	  /* a notification is requested and not yet consumed */
	unsigned unacked; /* channel events read but not yet acked */
	uint64_t events;
	struct rk_cq_member **members; /* QPs that report here */
	unsigned nmembers, cap;
	struct rk_cq_member *last; /* the one the last completion was for */
};

struct rk_conn;

/*
 * What the rdma_cm layer (cm_*.c) does for a connection it made, registered
 * on it so that conn.c never calls up into that layer: create the QP on the
 * CM id, send the disconnect and wait for the peer's, destroy the QP, and
 * release the id and its event channel.
 */
struct rk_conn_cm_ops {
	int (*create_qp)(struct rk_conn *c, struct ibv_qp_init_attr *qa, struct rk_error *err);
	void (*disconnect)(struct rk_conn *c, int64_t deadline_ms, struct rk_error *err);
	void (*destroy_qp)(struct rk_conn *c);
	void (*release)(struct rk_conn *c);
};

struct rk_conn {
	struct rk_device *dev;
	struct rk_cq *cq;
	int own_cq;
	struct ibv_qp *qp;
	struct ibv_pd *pd; /* opts.pd's, or the device's */
	enum rk_conn_state state;
	struct rk_conn_opts opts; /* with defaults resolved */
	uint32_t sq_depth, rq_depth, max_inline, signal_every;
	uint32_t psn;
	enum ibv_mtu local_mtu, path_mtu;

	struct rk_cq_member slots; /* wr_id translation, see above */
	uint32_t unsignaled_run;
	struct ibv_send_wr *wrs; /* scratch for rk_post_list, sq_depth long */
	struct ibv_sge *sges;

	int first_errno;
	struct rk_error first_err;

	/* rdma_cm only */
	const struct rk_conn_cm_ops *cm; /* NULL for a manual connection */
	struct rdma_cm_id *id;
	struct rdma_event_channel *ch;
	uint8_t peer_data[RK_CM_REPLY_MAX];
	size_t peer_data_len;

	void *user;
	/* notification receives the one-sided layer (xfer.c) has posted here */
	uint32_t xfer_recvs;
};

#define RK_RECV_TAG (1ULL << 63)

/* Defaults that survive TCG-emulated Soft-RoCE yet notice a dead peer in seconds. */
#define RK_DEF_DEPTH	     128
#define RK_DEF_ACK_TIMEOUT   17
#define RK_DEF_RETRY_CNT     6 /* rxe treats 7 as "retry forever" */
#define RK_DEF_RNR_RETRY     6
#define RK_DEF_MIN_RNR_TIMER 20
#define RK_DEF_RD_ATOMIC     16

/*
 * rk__err_msgf - rewrite @e's whole message; a long one is cut to fit (what
 * an error message wraps - a cause's own message - may be as long as it).
 */
void rk__err_msgf(struct rk_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * rk__err_gai - a failed getaddrinfo (@gai_rc, its return) in @e (may be
 * NULL): "getaddrinfo: DETAIL: gai_strerror", with no strerror after it
 * (the resolver's text is the story); the errno is the nearest one
 * (ENXIO: no such name, EAGAIN: resolver unreachable, ENOMEM, EINVAL for
 * the rest). Returns the negative errno.
 */
int rk__err_gai(struct rk_error *e, int gai_rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* error.c: fill @e (may be NULL) and return -@err. */
int rk__err_set(struct rk_error *e, int err, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Same, for a failed verbs call that set errno (falls back to EIO). */
int rk__err_sys(struct rk_error *e, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same, for a verbs call returning a positive errno or -1 with errno. */
int rk__err_ret(struct rk_error *e, int ret, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void rk__err_set_qp(struct rk_error *e, uint32_t qp_num);

/* A failure result that is visibly non-zero (for readers and the analyzer). */
static inline int rk__fail(int r)
{
	return r < 0 ? r : -EIO;
}

#define rk_dbg(...)  rk_log(RK_LOG_DEBUG, __VA_ARGS__)
#define rk_info(...) rk_log(RK_LOG_INFO, __VA_ARGS__)
#define rk_warn(...) rk_log(RK_LOG_WARN, __VA_ARGS__)

/* time.c: monotonic milliseconds, and the time left until a deadline. */
int64_t rk__now_ms(void);
int64_t rk__now_us(void);
/* -1 deadline (forever) maps to -1, else max(0, deadline - now). */
int rk__ms_left(int64_t deadline_ms);
int64_t rk__deadline(int timeout_ms);
int rk__set_nonblock(int fd);

/* conn.c */
int rk__conn_alloc(struct rk_device *dev, const struct rk_conn_opts *opts, struct rk_error *err,
		   struct rk_conn **out);
int rk__conn_build_qp(struct rk_conn *conn, struct rk_error *err);
void rk__conn_fail(struct rk_conn *conn, enum rk_conn_state state, const struct rk_error *e);

/*
 * post.c: post one verbs WR that struct rk_wr cannot express (a memory
 * window bind, a local invalidate), signaled, its completion carrying
 * @wr_id; slots counted as rk_post's. 0, -ENOBUFS, -ENOTCONN or the error.
 */
int rk__post_verbs(struct rk_conn *c, struct ibv_send_wr *wr, uint64_t wr_id, struct rk_error *err);

/*
 * post.c: for a layer that builds verbs WRs itself (the one-sided layer),
 * without a struct rk_wr in between. It fills the connection's scratch
 * WRs 0..@n-1 (rk__post_scratch(); @n at most the free send slots, which
 * it checks first with rk_sq_room()): opcode, sg_list pointing at scratch
 * SGE i (or num_sge 0), send_flags (inline only within max_inline, and
 * IBV_SEND_SIGNALED where it wants a completion), imm_data, wr.rdma, and
 * wr_id = its own id, returned in the completion as rk_post's. Then
 * rk__post_built() does the rest: the slots, sequence numbers, the links,
 * the signaling rule, one ibv_post_send. Returns as rk_post_list().
 */
static inline struct ibv_send_wr *rk__post_scratch(struct rk_conn *c, struct ibv_sge **sges)
{
	*sges = c->sges;
	return c->wrs;
}
int rk__post_built(struct rk_conn *c, unsigned n, struct rk_error *err);

/*
 * post.c: post one verbs WR the caller keeps built across posts (a send
 * set's answer, the RPC client's request: the caller writes only what changes, as a prepared WR of
 * rk_prepare, but with its length, remote address, rkey and immediate
 * its own to change). @wr->next must be NULL; @send_flags are verbs flags
 * (IBV_SEND_INLINE within max_inline, IBV_SEND_SIGNALED to ask for a
 * completion), to which the connection's signaling rule adds; @wr_id comes
 * back in the completion as rk_post's. wr->wr_id and wr->send_flags are
 * written here. Returns 0, -ENOBUFS, -ENOTCONN or the provider's error.
 */
int rk__post_kept(struct rk_conn *c, struct ibv_send_wr *wr, uint64_t wr_id, unsigned send_flags,
		  struct rk_error *err);

/*
 * post_recv_kept.c: post @chain, @n receive WRs the caller keeps built
 * (linked by ->next, the last one's NULL), in one ibv_post_recv. Each WR's
 * wr_id holds the caller's id, which goes to its slot (it comes back in
 * the completion as rk_post_recv's), and is overwritten with the sequence
 * number; the SGEs are the caller's and left as they are. Returns @n, the
 * count posted before the provider refused one (err says why), or a
 * negative errno (-ENOTCONN, -ENOBUFS, -EINVAL: the chain is not @n long).
 */
int rk__post_recv_kept(struct rk_conn *c, struct ibv_recv_wr *chain, unsigned n,
		       struct rk_error *err);

/*
 * msgbuf.c: rk_recv_set_release(), except that buffer @index is posted
 * again only once @batch (at most 32) wait, all in one ibv_post_recv. The
 * owner keeps @batch - 1 receives more than its peer can fill. 0, -EINVAL
 * (not handed out) or the post's error (the waiting buffers then stay with
 * the set, not posted, as rk_recv_set_release leaves its one).
 */
int rk__recv_set_release_batch(struct rk_recv_set *rs, uint32_t index, uint32_t batch,
			       struct rk_error *err);

/*
 * msgbuf.c: rk_recv_set_take() for an owner that wants a SEND's bytes and
 * nothing else of the message: 1 with *@data the buffer (@wc->byte_len
 * bytes of it are the peer's) and *@index the buffer to release, or
 * *@data NULL for a message that came by WRITE WITH IMMEDIATE (the
 * buffer is handed out all the same); 0 and negative as rk_recv_set_take.
 */
int rk__recv_set_take_send(struct rk_recv_set *rs, const struct ibv_wc *wc, const void **data,
			   uint32_t *index, struct rk_error *err);

/*
 * msgbuf.c: rk_send_set_post() of a WRITE WITH IMMEDIATE of @len bytes of
 * buffer @index to @remote_addr / @rkey, from a verbs WR the set keeps per
 * buffer (built at the first such post): only the length, the remote
 * address, the key and the immediate are written per post, no struct
 * rk_wr is translated. Inline within the connection's max_inline. Returns
 * as rk_send_set_post().
 */
int rk__send_set_post_write_imm(struct rk_send_set *ss, uint32_t index, uint32_t len,
				uint64_t remote_addr, uint32_t rkey, uint32_t imm,
				struct rk_error *err);

/* cq.c: @m reports its completions through @cq until detached. */
int rk__cq_attach(struct rk_cq *cq, struct rk_cq_member *m);
void rk__cq_detach(struct rk_cq *cq, struct rk_cq_member *m);
/*
 * cq.c: after a wake-up on @cq's channel, read its one event (an armed CQ
 * raises one), ack in batches; the CQ is then not armed. 0 or -errno.
 */
int rk__cq_consume_one(struct rk_cq *cq, struct rk_error *err);
/*
 * cq.c: arm @cq, not armed (its last event read, or never armed): no event
 * can wait in its channel, so none is read first (rk_cq_arm reads until
 * the channel is empty, a system call that finds nothing here).
 */
int rk__cq_arm_unarmed(struct rk_cq *cq, struct rk_error *err);

/* async.c: read and surface every pending async event (device close). */
void rk__device_drain_async(struct rk_device *dev);

/* cm_event.c: wait for one CM event on @ch within @deadline_ms. */
int rk__cm_get_event(struct rdma_event_channel *ch, int64_t deadline_ms, struct rk_error *err,
		     struct rdma_cm_event **ev);
int rk__cm_conn_event(struct rk_conn *conn, struct rdma_cm_event *ev, struct rk_error *err);
int rk__cm_new_channel(struct rk_error *err, struct rdma_event_channel **out);
/*
 * rk__cm_comm_established - a completion came on @conn, accepted without
 * waiting, before rdma_cm reported ESTABLISHED: take the event if it is
 * pending, else tell the CM the connection is up (rdma_notify COMM_EST)
 * and wait up to @timeout_ms for its ESTABLISHED. Returns the state.
 */
int rk__cm_comm_established(struct rk_conn *conn, int timeout_ms, struct rk_error *err);
/* Make @conn an rdma_cm connection: its id, channel and QP are the CM's. */
void rk__cm_own(struct rk_conn *conn);
const char *rk__sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);
void rk__cm_set_ack_timeout(struct rk_conn *conn);
int rk__cm_conn_param(struct rk_conn *conn, struct rdma_conn_param *p, uint8_t peer_initiator,
		      uint8_t peer_responder);

#endif
