/*
 * rdmakit/rpc.h - request / response calls over rdma_cm connections.
 *
 * A server registers handlers by method id and serves many connections
 * from one thread (rk_rpc_server_progress); a handler answers at once or
 * later, from any thread (rk_rpc_reply). A client calls synchronously with
 * a deadline (rk_rpc_call) or asynchronously with a completion callback
 * (rk_rpc_call_async), up to `window` calls in flight per connection.
 *
 * On the wire (rpc_wire.h has the layout):
 *  - a request goes by SEND: a 52-byte header and, when it fits the
 *    server's receive buffers (req_inline, 4 KiB by default), the body;
 *  - a larger body stays at the client, copied into memory the library
 *    registers for the call (or in the caller's own registration, req_mr),
 *    and the server READs it (rendezvous): never one huge SEND;
 *  - the answer is an RDMA WRITE WITH IMMEDIATE into the call's response
 *    slot at the client (a 12-byte header: status, the handler's code,
 *    length; then the data when it fits the slot, 4084 bytes by default).
 *    Larger data is RDMA WRITTEN first, straight into the caller's own
 *    registered buffer (resp_mr: zero copy) or into memory the library
 *    registers for the call; reliable connections place those writes
 *    before the write with immediate.
 *  - Requests and responses are limited to 64 MiB by default (max_msg);
 *    every piece goes in work requests of at most 8 MiB (Soft-RoCE's limit).
 *
 * Per call the result is one of: 0 (the handler's code 0), -EREMOTEIO (the
 * handler answered with a non-zero code: *@app_code), -EOPNOTSUPP (no
 * handler for the method), -EMSGSIZE (the answer did not fit resp_cap, or
 * the request exceeded the server's max_msg), -ENOBUFS (the server had no
 * room for a rendezvous body right now), -ETIMEDOUT (the deadline passed),
 * -ECONNRESET ("peer gone": the connection died; every call in flight
 * fails at once with the reason in its rk_error), -ENOTCONN (called on a
 * dead client), -EINVAL (a buffer not in the client's PD, a length without
 * a buffer) and -EBUSY (rk_rpc_call or progress from a completion
 * callback, or server progress from a handler: the completions being
 * handled would be lost).
 *
 * Hostile peers. The server registers no memory that a peer can reach
 * (requests land in receive buffers, bodies are READ into local memory,
 * answers leave from local memory), and its connections live in a PD of
 * its own, so one client's QP can reach nothing of the server's, let alone
 * another client's, nor memory the application registered elsewhere. A
 * token (opts.token) keeps out who does not have it; connections, windows
 * and rendezvous memory are bounded (max_conns, window, max_rdv_bytes), and
 * so is what a few silent clients can hold: a connection with no call in
 * flight for idle_ms (60 s) is closed, and one address may hold at most
 * max_conns_per_peer (half) of the connections. Every header is checked
 * (a slot it does not own, a length beyond its buffer or max_msg, unknown
 * flags, garbage); a client that breaks a rule loses its own connection,
 * with a logged reason, and the others go on. A client puts each
 * connection in a protection domain of its own unless opts.pd says
 * otherwise, so a server reaches only that connection's response slots
 * and the buffers the caller registered in opts.pd; the header of every
 * answer is copied out of the slot before it is checked.
 *
 * Deadlines. Every wait has one. A call that times out keeps its slot
 * until the late answer (dropped) or the connection's end, so memory the
 * library staged is never reused under a late write; the caller's own
 * resp_mr buffer, however, may still be written after -ETIMEDOUT until the
 * connection is destroyed.
 *
 * Thread-safety: a client is used by one thread at a time (the pool,
 * rpc_pool.h, leases clients to threads). A server's progress runs on one
 * thread; rk_rpc_reply() may be called from any thread.
 */
#ifndef RDMAKIT_RPC_H
#define RDMAKIT_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/common.h>
#include <rdmakit/cq.h>
#include <rdmakit/device.h>
#include <rdmakit/error.h>
#include <rdmakit/mr.h>
#include <rdmakit/pd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RK_RPC_APP_ID	  0x524b5250u /* "RKRP": the hello's application id */
#define RK_RPC_MAX_WINDOW 1024

struct rk_rpc_server;
struct rk_rpc_client;
struct rk_rpc_req;

/* ---- server ---------------------------------------------------------- */

/*
 * A handler runs on the server's progress thread with the request. It must
 * answer with rk_rpc_reply() exactly once: before it returns or later from
 * any thread (a deferred answer). Until then the request, its data and its
 * slot are held; a request never answered holds them until the connection
 * ends.
 */
typedef void (*rk_rpc_handler_fn)(struct rk_rpc_req *req, void *arg);

struct rk_rpc_server_opts {
	const char *addr;		 /* local address; NULL = any */
	const char *port;		 /* "0" = pick one (rk_rpc_server_port) */
	uint32_t window;		 /* calls in flight per connection; 0 = 64 */
	uint32_t req_inline;		 /* request bodies sent inline up to this; 0 = 4096 - 52 */
	uint32_t slot_size;		 /* client response slots (the answer's inline room
					    plus 12); 0 = 4096 */
	uint32_t max_msg;		 /* largest request or answer; 0 = 64 MiB */
	uint32_t max_conns;		 /* connections at once (more are refused busy); 0 = 64 */
	uint64_t max_rdv_bytes;		 /* request bodies being read or waiting for their
					    answer, all connections; 0 = 256 MiB */
	uint64_t max_rdv_per_conn;	 /* ... one connection (so one client cannot
					    take it all); 0 = max_rdv_bytes */
	enum rk_wait_mode mode;		 /* how the progress thread waits; default busy */
	const struct rk_conn_opts *conn; /* transport settings; NULL = defaults */
	const void *token;		 /* clients must bring these bytes (compared in constant
					    time); NULL = anyone may connect */
	uint8_t token_len;		 /* at most RK_HELLO_TOKEN_MAX (32) */
	uint32_t idle_ms;		 /* close a connection that has had no call in flight
					    for this long (it may reconnect: the pool does);
					    0 = 60000, RK_RPC_IDLE_NEVER = never */
	uint32_t max_conns_per_peer;	 /* connections from one address (any port; more are
					    refused busy); 0 = max_conns / 2, at least 1 */
};

#define RK_RPC_IDLE_NEVER UINT32_MAX

/*
 * rk_rpc_server_create - listen on @opts->addr:@opts->port (rdma_cm, hello
 * app id RK_RPC_APP_ID). Creates a listener, a wait set and a buffer pool;
 * connections are accepted by rk_rpc_server_progress. Owned by the caller.
 */
RK_API int rk_rpc_server_create(struct rk_device *dev, const struct rk_rpc_server_opts *opts,
				struct rk_error *err, struct rk_rpc_server **out);

/*
 * rk_rpc_server_destroy - close every connection and the listener. Requests
 * not yet answered are freed: no thread may still hold one. Accepts NULL.
 */
RK_API void rk_rpc_server_destroy(struct rk_rpc_server *srv);

/* rk_rpc_server_port - the bound port. */
RK_API uint16_t rk_rpc_server_port(const struct rk_rpc_server *srv);

/*
 * rk_rpc_server_add - serve @method with @fn (called with @arg). Before
 * progress starts, or from the progress thread. -EEXIST if it has one.
 */
RK_API int rk_rpc_server_add(struct rk_rpc_server *srv, uint16_t method, rk_rpc_handler_fn fn,
			     void *arg);

/*
 * rk_rpc_server_progress - wait up to @timeout_ms for work and do it:
 * accept connections, run handlers, send answers (deferred ones too), READ
 * rendezvous bodies, drop broken or hostile connections, close idle ones
 * (a wait longer than a sixteenth of idle_ms ends early when one is due:
 * at most a quarter of idle_ms late). Cost: a poll of the wait set per
 * call (busy mode with one connection: a poll of that connection's CQ,
 * and a poll(2) of the wait set's fds every 64 calls; a busy wait may end
 * some thousand empty polls late, never early), and a clock reading every
 * 64 calls that found work (every call that found none, and every wait
 * longer than that sixteenth). Returns 0 after
 * doing some, -ETIMEDOUT when nothing happened, -EINTR after
 * rk_rpc_server_wake, or another negative errno for a failure of the
 * server itself (a lost connection is not one). One thread only.
 */
RK_API int rk_rpc_server_progress(struct rk_rpc_server *srv, int timeout_ms, struct rk_error *err);

/* rk_rpc_server_wake - make progress return -EINTR soon. Any thread. */
RK_API void rk_rpc_server_wake(struct rk_rpc_server *srv);

struct rk_rpc_server_stats {
	uint64_t conns_accepted, conns_refused;
	uint64_t conns_closed;	     /* the peer disconnected */
	uint64_t conns_dropped;	     /* broken, or a rule broken: logged as warnings */
	uint64_t conns_idle;	     /* closed by the server: idle for idle_ms */
	uint64_t calls, errors_sent; /* answered, of which not OK */
	uint32_t conns;		     /* connected now */
	uint64_t rdv_bytes;	     /* rendezvous memory held now */
};

/* rk_rpc_server_stats - counters (progress thread, or after it stopped). */
RK_API void rk_rpc_server_get_stats(const struct rk_rpc_server *srv,
				    struct rk_rpc_server_stats *st);

/* rk_rpc_req_method - the method the request is for. */
RK_API uint16_t rk_rpc_req_method(const struct rk_rpc_req *req);

/*
 * rk_rpc_req_data - the request body (*@len bytes), in server memory the
 * peer cannot change; valid until rk_rpc_reply().
 */
RK_API const void *rk_rpc_req_data(const struct rk_rpc_req *req, uint32_t *len);

/* rk_rpc_req_peer - the caller's address ("10.0.0.2:51234"); valid until rk_rpc_reply. */
RK_API const char *rk_rpc_req_peer(const struct rk_rpc_req *req);

/* rk_rpc_req_resp_cap - the most answer bytes the caller accepts. */
RK_API uint32_t rk_rpc_req_resp_cap(const struct rk_rpc_req *req);

/*
 * rk_rpc_reply_buf - @len bytes of registered server memory to build
 * @req's answer in, so that rk_rpc_reply() sends it without a copy (for
 * large answers: a memcpy of 1 MiB costs about as much as sending it).
 * The memory is local to the server (no peer can write it) and belongs to
 * @req: fill it, from any thread, then call rk_rpc_reply(req, code, buf,
 * n) with n <= @len; it is freed with the request. A second call returns
 * the same buffer if it is large enough. Call it from the handler (the
 * progress thread): it allocates from the server's pool, which only that
 * thread touches. Returns NULL (errno set) when @len exceeds
 * rk_rpc_req_resp_cap() (EMSGSIZE), when it would allocate on another
 * thread (EPERM) or there is no memory (ENOMEM); answer with rk_rpc_reply()
 * and data of your own then.
 */
RK_API void *rk_rpc_reply_buf(struct rk_rpc_req *req, uint32_t len);

/*
 * rk_rpc_reply - answer @req with @code (0 = success; any other value
 * reaches the caller as -EREMOTEIO and the code) and @len bytes of @data
 * (copied before return, unless @data is the request's rk_rpc_reply_buf()).
 * More than resp_cap bytes answer -EMSGSIZE.
 * Frees @req: do not touch it afterwards. From the progress thread the
 * answer is posted at once (or, when the send queue is full, once it has
 * room): one WRITE WITH IMMEDIATE, its header and data copied once, sent
 * inline from a WR the connection keeps when they fit its inline size
 * (what the device granted for the conn options' max_inline, 128 asked
 * by default, at most 256 bytes: 116 bytes of data when 128 is granted;
 * a device may grant more), else from one of its answer buffers (and
 * WRITEs of staged data when it is larger than the slot). From another thread it is
 * queued and the progress thread woken (one malloc and memcpy of the
 * data, one write(2)).
 * Returns 0, or -ENOMEM when there was no memory for the copy: the caller
 * then gets the handler code -ENOMEM instead; -EINVAL for @len past the end
 * of rk_rpc_reply_buf(): the caller gets code -EINVAL and no data (the
 * request is freed either way).
 */
RK_API int rk_rpc_reply(struct rk_rpc_req *req, int32_t code, const void *data, uint32_t len);

/* ---- client ---------------------------------------------------------- */

struct rk_rpc_client_opts {
	const char *host;		 /* server address */
	const char *port;		 /* server port */
	uint32_t window;		 /* calls in flight wanted; the server may grant fewer;
					    0 = 64 */
	int timeout_ms;			 /* connect, per step; 0 = 5000 */
	enum rk_wait_mode mode;		 /* how calls wait; default busy */
	struct rk_pd *pd;		 /* the connection's PD; NULL = one of its own.
					    resp_mr / req_mr buffers must be registered in it */
	const struct rk_conn_opts *conn; /* transport settings; NULL = defaults. Its cq
					    must be NULL (-EINVAL): the client's CQ is
					    its own */
	const void *token;		 /* the server's access token, if it wants one */
	uint8_t token_len;		 /* at most RK_HELLO_TOKEN_MAX (32) */
};

/*
 * One call. @req is copied (inline) or staged (rendezvous) unless @req_mr
 * holds it; the answer lands in @resp (up to @resp_cap bytes), copied out
 * of the response slot or a staging buffer, unless @resp_mr holds @resp
 * and @resp_cap is more than the slot holds: then the server writes it
 * there directly (zero copy; the registration needs
 * RK_ACCESS_REMOTE_WRITE, req_mr RK_ACCESS_REMOTE_READ, in the client's
 * PD). An answer that fits the slot always comes in it, so a call whose
 * @resp_cap fits names no buffer of the caller's to the server. A call
 * whose body goes inline and whose answer fits the slot (the common call)
 * does not look at its MRs; any other call checks both: each must hold its
 * buffer and be in the client's PD (else -EINVAL). Plain data.
 */
struct rk_rpc_call_args {
	uint16_t method;
	const void *req;
	uint32_t req_len;
	struct rk_mr *req_mr; /* optional: @req lies in it */
	void *resp;
	uint32_t resp_cap;
	struct rk_mr *resp_mr; /* optional: @resp lies in it */
	int timeout_ms;	       /* the call's deadline; 0 = 5000, -1 = none */
};

/*
 * Completion of an async call, run by rk_rpc_client_progress (or inside a
 * rk_rpc_call on the same client): @status as rk_rpc_call returns it,
 * @resp_len bytes in the caller's resp buffer, @app_code the handler's code,
 * @err the reason (valid during the callback). The callback may start new
 * async calls; it must not call rk_rpc_call or destroy the client.
 */
typedef void (*rk_rpc_done_fn)(void *arg, int status, uint32_t resp_len, int32_t app_code,
			       const struct rk_error *err);

/*
 * rk_rpc_client_connect - connect to an rk_rpc_server: a PD (unless
 * opts.pd), one connection with its CQ, window response slots registered
 * for the server's writes, window request buffers, a wait set (2 fds).
 * Owned by the caller. -ECONNREFUSED with the server's reason (busy, not an
 * RPC server) in @err.
 */
RK_API int rk_rpc_client_connect(struct rk_device *dev, const struct rk_rpc_client_opts *opts,
				 struct rk_error *err, struct rk_rpc_client **out);

/*
 * rk_rpc_client_destroy - disconnect; calls in flight complete with
 * -ECONNRESET (their callbacks run) before the resources go, in reverse
 * order. Accepts NULL.
 */
RK_API void rk_rpc_client_destroy(struct rk_rpc_client *cl);

/*
 * rk_rpc_call - call and wait for the answer until the call's deadline.
 * Returns 0 or a negative errno as described at the top; *@resp_len and
 * *@app_code (either may be NULL) are set when the server answered. Async
 * calls of the same client complete meanwhile. Cost for a small call (the
 * 52-byte header and the body within the connection's inline size, 128
 * bytes by default; the answer in the slot): one SEND posted (the body
 * copied beside the header in the client's own request buffer, and the
 * two in one piece into the work request), one write with immediate
 * received, one copy of the answer; no clock reading when the answer comes
 * within the wait's first spin (the deadline counts from the wait's first
 * clock reading, microseconds after the call). Busy, the wait spins on the
 * CQ and looks at the clock every 64 empty polls and at the connection's
 * channel (a disconnect) every 1024, one poll(2). Busy, with no other call
 * in flight, a small call keeps its state in registers until its answer
 * (no slot bookkeeping): about 660 instructions a call on Soft-RoCE, its
 * provider's post and poll included, against 511 for a SEND round trip
 * with the library's prepared work requests. In event mode the call
 * does not poll the CQ before it sleeps (its answer cannot be there yet)
 * unless the CQ is still armed from an earlier wait; a wait that sleeps
 * costs one clock reading, the CQ's arming (when it is not armed) and
 * one poll of the CQ after it, one poll(2) of the CQ's and the
 * connection's channels and one read of the CQ's channel. In event mode,
 * with no other call in flight, a small call keeps its state in
 * registers as well: about 1,150 instructions a call that sleeps once,
 * the arming's ioctl path (238) included, against about 1,240 for a SEND
 * round trip waited for the same way. The answers' receives are posted
 * again 16 at a time, as one chain built at connect.
 */
RK_API int rk_rpc_call(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a,
		       uint32_t *resp_len, int32_t *app_code, struct rk_error *err);

/*
 * rk_rpc_call_async - start a call; @done runs exactly once, from
 * rk_rpc_client_progress (never from inside this function). The caller's
 * buffers must stay valid until then. Returns 0, -EAGAIN when the window is
 * full (progress first), -ENOTCONN on a dead client, -EINVAL, -EMSGSIZE
 * beyond the server's max_msg, or -ENOMEM staging a large body. On a
 * sleeping client with no call in flight whose CQ is not armed (after an
 * rk_rpc_call), the call arms it first (one system call), so that its
 * answer makes rk_rpc_client_fd readable.
 */
RK_API int rk_rpc_call_async(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a,
			     rk_rpc_done_fn done, void *arg, struct rk_error *err);

/*
 * rk_rpc_client_progress - wait up to @timeout_ms for completions and run
 * the callbacks of finished, failed and timed-out calls. Returns how many
 * calls completed (>= 0), or -ENOTCONN once the connection is dead and no
 * call is left.
 */
RK_API int rk_rpc_client_progress(struct rk_rpc_client *cl, int timeout_ms, struct rk_error *err);

/*
 * rk_rpc_client_fd - a file descriptor for an event loop of the caller's
 * (asyncio's add_reader, libuv, epoll): readable when
 * rk_rpc_client_progress(cl, 0) has something to do (completions, the
 * connection's CM events). The client must wait in a sleeping mode
 * (opts.mode RK_WAIT_EVENT or RK_WAIT_ADAPTIVE); a busy client returns
 * -EOPNOTSUPP. The contract: call rk_rpc_client_progress(cl, 0) once before
 * the first wait on the fd (it arms the completion queue), and whenever the
 * fd is readable call it again until it returns 0; call it also when the
 * earliest deadline of a call in flight has passed (a deadline does not
 * make the fd readable). Owned by the client (do not close it); level-
 * triggered. Costs nothing.
 */
RK_API int rk_rpc_client_fd(const struct rk_rpc_client *cl);

/* rk_rpc_client_inflight - calls started and not completed. */
RK_API uint32_t rk_rpc_client_inflight(const struct rk_rpc_client *cl);

/* rk_rpc_client_window - calls that may be in flight (as the server granted). */
RK_API uint32_t rk_rpc_client_window(const struct rk_rpc_client *cl);

/*
 * rk_rpc_client_alive - 1 while the connection works, 0 once it died (the
 * reason in @err, which may be NULL).
 */
RK_API int rk_rpc_client_alive(const struct rk_rpc_client *cl, struct rk_error *err);

/*
 * rk_rpc_client_pd - the PD to register resp_mr / req_mr buffers in. When
 * it is the client's own (opts.pd NULL) it goes with rk_rpc_client_destroy:
 * deregister those buffers before, which also cuts the server off from
 * them (a late answer then fails at the server, not in your memory).
 */
RK_API struct rk_pd *rk_rpc_client_pd(const struct rk_rpc_client *cl);

#ifdef __cplusplus
}
#endif

#endif
