"""rdmakit_build.py - the cffi (API mode) build of rdmakit._rk.

The extension is C that cffi generates and the C compiler builds against
librdmakit's public headers: every function and struct declared below is
checked against <rdmakit/rdmakit.h> (structs are declared with "...;", so
their layout comes from the headers, never from this file).

Where the headers and the library are found:
  RDMAKIT_INCLUDE_DIR / RDMAKIT_LIBRARY_DIR  a build tree (CMake's rk_python
      target sets them; the library directory also goes in the rpath, unless
      RDMAKIT_NO_RPATH=1: a package built for the system's librdmakit);
  otherwise pkg-config rdmakit (the installed library, librdmakit-dev).

Run directly (python3 rdmakit_build.py OUTDIR) it builds the extension into
OUTDIR/rdmakit/; setup.py uses `ffibuilder` through cffi_modules.
"""
import os
import shlex
import subprocess
import sys

from cffi import FFI

CDEF = r"""
/* error.h */
#define RK_ERROR_OP_MAX ...
#define RK_ERROR_MSG_MAX ...
struct rk_error {
	char op[...];
	int err;
	char err_str[...];
	int wc_status;
	const char *wc_status_str;
	uint32_t vendor_err;
	uint32_t qp_num;
	const char *hint;
	int reject_reason;
	char msg[...];
	...;
};
void rk_error_clear(struct rk_error *e);
const char *rk_error_str(const struct rk_error *e);

/* version.h, log.h */
const char *rk_version(void);
enum rk_log_level { RK_LOG_DEBUG, RK_LOG_INFO, RK_LOG_WARN, RK_LOG_ERROR, RK_LOG_OFF, ... };
void rk_log_set_level(enum rk_log_level level);
enum rk_log_level rk_log_get_level(void);

/* cq.h */
enum rk_wait_mode { RK_WAIT_BUSY, RK_WAIT_EVENT, RK_WAIT_ADAPTIVE, ... };

/* cm.h */
#define RK_HELLO_TOKEN_MAX ...

/* device.h */
struct rk_device;
struct rk_device_opts {
	const char *name;
	const char *addr;
	const char *peer;
	uint8_t port;
	int gid_index;
	...;
};
struct rk_device_info {
	char name[...];
	uint8_t port;
	int link_layer;
	uint16_t lid;
	int gid_index;
	int gid_roce_v2;
	uint32_t active_mtu_bytes;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_cqe;
	uint32_t max_qp_rd_atom;
	uint32_t max_qp_init_rd_atom;
	uint64_t max_mr_size;
	...;
};
int rk_device_open(const struct rk_device_opts *opts, struct rk_error *err,
		   struct rk_device **out);
void rk_device_close(struct rk_device *dev);
const struct rk_device_info *rk_device_get_info(const struct rk_device *dev);
/* the GID's 16 bytes (union ibv_gid is not declared here) */
void rkpy_device_gid(const struct rk_device *dev, unsigned char out[16]);

/* rpc.h */
#define RK_RPC_MAX_WINDOW ...
#define RK_RPC_IDLE_NEVER ...
struct rk_rpc_server;
struct rk_rpc_client;
struct rk_rpc_req;
struct rk_mr;
struct rk_pd;
typedef void (*rk_rpc_handler_fn)(struct rk_rpc_req *req, void *arg);
struct rk_rpc_server_opts {
	const char *addr;
	const char *port;
	uint32_t window;
	uint32_t req_inline;
	uint32_t slot_size;
	uint32_t max_msg;
	uint32_t max_conns;
	uint64_t max_rdv_bytes;
	uint64_t max_rdv_per_conn;
	enum rk_wait_mode mode;
	const void *token;
	uint8_t token_len;
	uint32_t idle_ms;
	uint32_t max_conns_per_peer;
	...;
};
int rk_rpc_server_create(struct rk_device *dev, const struct rk_rpc_server_opts *opts,
			 struct rk_error *err, struct rk_rpc_server **out);
void rk_rpc_server_destroy(struct rk_rpc_server *srv);
uint16_t rk_rpc_server_port(const struct rk_rpc_server *srv);
int rk_rpc_server_add(struct rk_rpc_server *srv, uint16_t method, rk_rpc_handler_fn fn,
		      void *arg);
int rk_rpc_server_progress(struct rk_rpc_server *srv, int timeout_ms, struct rk_error *err);
void rk_rpc_server_wake(struct rk_rpc_server *srv);
struct rk_rpc_server_stats {
	uint64_t conns_accepted, conns_refused;
	uint64_t conns_closed;
	uint64_t conns_dropped;
	uint64_t conns_idle;
	uint64_t calls, errors_sent;
	uint32_t conns;
	uint64_t rdv_bytes;
	...;
};
void rk_rpc_server_get_stats(const struct rk_rpc_server *srv, struct rk_rpc_server_stats *st);
uint16_t rk_rpc_req_method(const struct rk_rpc_req *req);
const void *rk_rpc_req_data(const struct rk_rpc_req *req, uint32_t *len);
const char *rk_rpc_req_peer(const struct rk_rpc_req *req);
uint32_t rk_rpc_req_resp_cap(const struct rk_rpc_req *req);
int rk_rpc_reply(struct rk_rpc_req *req, int32_t code, const void *data, uint32_t len);

struct rk_rpc_client_opts {
	const char *host;
	const char *port;
	uint32_t window;
	int timeout_ms;
	enum rk_wait_mode mode;
	struct rk_pd *pd;
	const void *token;
	uint8_t token_len;
	...;
};
struct rk_rpc_call_args {
	uint16_t method;
	const void *req;
	uint32_t req_len;
	struct rk_mr *req_mr;
	void *resp;
	uint32_t resp_cap;
	struct rk_mr *resp_mr;
	int timeout_ms;
	...;
};
typedef void (*rk_rpc_done_fn)(void *arg, int status, uint32_t resp_len, int32_t app_code,
			       const struct rk_error *err);
int rk_rpc_client_connect(struct rk_device *dev, const struct rk_rpc_client_opts *opts,
			  struct rk_error *err, struct rk_rpc_client **out);
void rk_rpc_client_destroy(struct rk_rpc_client *cl);
int rk_rpc_call(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a,
		uint32_t *resp_len, int32_t *app_code, struct rk_error *err);
int rk_rpc_call_async(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a,
		      rk_rpc_done_fn done, void *arg, struct rk_error *err);
int rk_rpc_client_progress(struct rk_rpc_client *cl, int timeout_ms, struct rk_error *err);
int rk_rpc_client_fd(const struct rk_rpc_client *cl);
uint32_t rk_rpc_client_inflight(const struct rk_rpc_client *cl);
uint32_t rk_rpc_client_window(const struct rk_rpc_client *cl);
int rk_rpc_client_alive(const struct rk_rpc_client *cl, struct rk_error *err);

/* rpc_pool.h */
struct rk_rpc_pool;
struct rk_rpc_pool_opts {
	unsigned max_per_peer;
	int idle_ms;
	int backoff_min_ms, backoff_max_ms;
	unsigned max_peers;
	struct rk_rpc_client_opts client;
	...;
};
int rk_rpc_pool_create(struct rk_device *dev, const struct rk_rpc_pool_opts *opts,
		       struct rk_error *err, struct rk_rpc_pool **out);
void rk_rpc_pool_destroy(struct rk_rpc_pool *pool);
int rk_rpc_pool_get(struct rk_rpc_pool *pool, const char *peer, int timeout_ms,
		    struct rk_error *err, struct rk_rpc_client **out);
void rk_rpc_pool_put(struct rk_rpc_pool *pool, struct rk_rpc_client *cl);
int rk_rpc_pool_call(struct rk_rpc_pool *pool, const char *peer,
		     const struct rk_rpc_call_args *a, uint32_t *resp_len, int32_t *app_code,
		     struct rk_error *err);
unsigned rk_rpc_pool_reap(struct rk_rpc_pool *pool);
struct rk_rpc_pool_stats {
	uint64_t connects, connect_failures, reuses, idle_closed, dead_closed, waits;
	uint32_t peers, clients, leased;
	...;
};
void rk_rpc_pool_get_stats(struct rk_rpc_pool *pool, struct rk_rpc_pool_stats *st);

/* cq.h, conn.h, cm.h: the lanes of one-sided peers (rdmakit/xfer.py) */
struct rk_cq;
struct rk_cq_opts {
	uint32_t depth;
	enum rk_wait_mode mode;
	uint32_t spin_us;
	...;
};
int rk_cq_create(struct rk_device *dev, const struct rk_cq_opts *opts, struct rk_error *err,
		 struct rk_cq **out);
void rk_cq_destroy(struct rk_cq *cq);
struct rk_conn;
struct rk_conn_opts {
	uint32_t sq_depth;
	uint32_t rq_depth;
	uint32_t signal_every;
	struct rk_cq *cq;
	enum rk_wait_mode wait_mode;
	uint32_t cq_depth;
	struct rk_pd *pd;
	...;
};
enum rk_conn_state { RK_CONN_IDLE, RK_CONN_CONNECTING, RK_CONN_CONNECTED, RK_CONN_DISCONNECTED,
		     RK_CONN_ERROR, ... };
void rk_conn_destroy(struct rk_conn *conn);
enum rk_conn_state rk_conn_state(const struct rk_conn *conn);
int rk_conn_progress(struct rk_conn *conn, int timeout_ms, struct rk_error *err);
int rk_conn_cm_fd(const struct rk_conn *conn);
struct rk_hello {
	uint16_t version;
	uint32_t app_id;
	uint32_t app_arg;
	uint8_t token_len;
	uint8_t token[...];
	...;
};
enum rk_reject_reason { RK_REJECT_APP, RK_REJECT_BAD_HELLO, RK_REJECT_BUSY, RK_REJECT_DENIED,
			RK_REJECT_NO_SESSION, RK_REJECT_ENDED, ... };
struct rk_cm_connect_opts {
	const char *host;
	const char *port;
	const char *src_addr;
	int timeout_ms;
	const struct rk_hello *hello;
	struct rk_conn_opts conn;
	...;
};
int rk_cm_connect(struct rk_device *dev, const struct rk_cm_connect_opts *opts,
		  struct rk_error *err, struct rk_conn **out);
const void *rk_conn_peer_data(const struct rk_conn *conn, size_t *len);
struct rk_listener;
struct rk_cm_request;
struct rk_listen_opts {
	const char *addr;
	const char *port;
	int backlog;
	uint32_t app_id;
	...;
};
int rk_listener_create(struct rk_device *dev, const struct rk_listen_opts *opts,
		       struct rk_error *err, struct rk_listener **out);
void rk_listener_destroy(struct rk_listener *lis);
uint16_t rk_listener_port(const struct rk_listener *lis);
int rk_listener_fd(const struct rk_listener *lis);
int rk_listener_get_request(struct rk_listener *lis, int timeout_ms, struct rk_error *err,
			    struct rk_cm_request **out);
const struct rk_hello *rk_cm_request_hello(const struct rk_cm_request *req);
const char *rk_cm_request_peer(const struct rk_cm_request *req);
int rk_cm_request_reject(struct rk_cm_request *req, uint16_t reason, const char *text,
			 struct rk_error *err);
int rk_cm_request_accept(struct rk_cm_request *req, const struct rk_conn_opts *opts,
			 const void *reply, size_t reply_len, int timeout_ms,
			 struct rk_error *err, struct rk_conn **out);

/* wait.h: a peer's lanes on an asyncio loop */
struct rk_wait;
struct rk_wait_opts {
	enum rk_wait_mode mode;
	uint32_t spin_us;
	...;
};
int rk_wait_create(const struct rk_wait_opts *opts, struct rk_error *err, struct rk_wait **out);
void rk_wait_destroy(struct rk_wait *ws);
int rk_wait_add_cq(struct rk_wait *ws, struct rk_cq *cq, int max_wc, uint64_t tag,
		   struct rk_error *err);
int rk_wait_add_conn(struct rk_wait *ws, struct rk_conn *conn, uint64_t tag,
		     struct rk_error *err);
int rk_wait_fd(const struct rk_wait *ws);

/* xfer.h */
#define RK_XFER_LANES_MAX ...
#define RK_XFER_DESC_MAX ...
struct rk_xfer;
struct rk_xfer_seg;
struct rk_xfer_peer;
struct rk_xfer_remote;
struct rk_xfer_batch;
enum rk_xfer_mode { RK_XFER_AUTO, RK_XFER_MW, RK_XFER_MR, ... };
enum rk_xfer_access { RK_XFER_READ, RK_XFER_WRITE, ... };
struct rk_xfer_opts {
	enum rk_xfer_mode mode;
	uint32_t chain;
	uint32_t max_batches;
	uint32_t max_ops;
	uint32_t notif_recvs;
	int ctl_timeout_ms;
	...;
};
struct rk_xfer_stats {
	uint64_t reg_mr, dereg_mr, cache_hits, mw_binds, mw_invalidates, doorbells, wrs, ops,
		batches, notifs_sent, notifs_received, foreign;
	...;
};
int rk_xfer_mw_supported(const struct rk_device *dev);
int rk_xfer_create(struct rk_device *dev, struct rk_pd *pd, const struct rk_xfer_opts *opts,
		   struct rk_error *err, struct rk_xfer **out);
void rk_xfer_destroy(struct rk_xfer *x);
enum rk_xfer_mode rk_xfer_mode(const struct rk_xfer *x);
void rk_xfer_stats(const struct rk_xfer *x, struct rk_xfer_stats *st);
int rk_xfer_seg_reg(struct rk_xfer *x, void *addr, size_t len, unsigned access,
		    struct rk_error *err, struct rk_xfer_seg **out);
void rk_xfer_seg_dereg(struct rk_xfer_seg *seg);
void *rk_xfer_seg_addr(const struct rk_xfer_seg *seg);
size_t rk_xfer_seg_len(const struct rk_xfer_seg *seg);
int rk_xfer_peer_create(struct rk_xfer *x, struct rk_conn *const *lanes, unsigned nlanes,
			struct rk_error *err, struct rk_xfer_peer **out);
void rk_xfer_peer_destroy(struct rk_xfer_peer *peer);
int rk_xfer_export(struct rk_xfer_seg *seg, struct rk_xfer_peer *peer, unsigned access,
		   void *buf, size_t cap, size_t *len, int timeout_ms, struct rk_error *err);
int rk_xfer_revoke(struct rk_xfer_seg *seg, struct rk_xfer_peer *peer, int timeout_ms,
		   struct rk_error *err);
int rk_xfer_import(struct rk_xfer_peer *peer, const void *buf, size_t len,
		   struct rk_error *err, struct rk_xfer_remote **out);
void rk_xfer_remote_free(struct rk_xfer_remote *r);
uint64_t rk_xfer_remote_len(const struct rk_xfer_remote *r);
unsigned rk_xfer_remote_access(const struct rk_xfer_remote *r);
enum rk_xfer_mode rk_xfer_remote_mode(const struct rk_xfer_remote *r);
enum rk_xfer_opcode { RK_XFER_OP_READ, RK_XFER_OP_WRITE, ... };
struct rk_xfer_op {
	enum rk_xfer_opcode op;
	struct rk_xfer_seg *local;
	uint64_t local_off;
	const struct rk_xfer_remote *remote;
	uint64_t remote_off;
	uint64_t len;
	...;
};
struct rk_xfer_batch_opts {
	int timeout_ms;
	int notify;
	uint32_t notif;
	...;
};
int rk_xfer_post(struct rk_xfer_peer *peer, const struct rk_xfer_op *ops, unsigned nops,
		 const struct rk_xfer_batch_opts *opts, struct rk_error *err,
		 struct rk_xfer_batch **out);
int rk_xfer_batch_check(struct rk_xfer_batch *b, struct rk_error *err);
void rk_xfer_batch_free(struct rk_xfer_batch *b);
int rk_xfer_notif_take(struct rk_xfer_peer *peer, uint32_t *value);

/* The one-sided waits in C (below): one foreign call per slice. */
int rkpy_op_status(const struct rk_xfer_batch *b, unsigned i, int *wc_status);
int rkpy_xfer_poll(struct rk_cq *cq, struct rk_xfer *x);
int rkpy_xfer_drain(struct rk_wait *ws, struct rk_xfer *x, struct rk_error *err);
int rkpy_batch_wait(struct rk_xfer_batch *b, struct rk_conn *const *lanes, unsigned n, int ms,
		    struct rk_error *err);
int rkpy_notif_wait(struct rk_xfer_peer *p, struct rk_conn *const *lanes, unsigned n, int ms,
		    uint32_t *value, struct rk_error *err);

/* Callbacks into Python (rdmakit/rpc.py). */
extern "Python" void rkpy_handler(struct rk_rpc_req *req, void *arg, uint16_t method,
				  const char *data, uint32_t len);
extern "Python" void rkpy_done(void *arg, int status, uint32_t resp_len, int32_t app_code,
			       const struct rk_error *err);

/* The per-call paths in C (below): one foreign call per RPC, no struct
   filled field by field from Python. */
#define RKPY_BAD_METHOD ...
struct rkpy_call {
	int done, status;
	uint32_t len;
	int32_t code;
	void *py;
	char *resp;
	struct rk_error err;
};
int rkpy_call(struct rk_rpc_client *cl, int method, const char *req, uint32_t req_len,
	      char *resp, uint32_t cap, int timeout_ms, uint32_t *len, int32_t *code,
	      struct rk_error *err);
#define RKPY_FAST_BAD_METHOD ...
#define RKPY_FAST_CLOSED ...
#define RKPY_FAST_ELSEWHERE ...
#define RKPY_ANSWER_MAX ...
#define RKPY_INFLIGHT ...
#define RKPY_FAILED ...
#define RKPY_NOT_HERE ...
struct rkpy_fast {
	struct rk_rpc_client *cl;
	int spin_us;
	struct rkpy_call acall;
	char answer[4084];
	...;
};
struct rkpy_out {
	int32_t code;
	uint32_t len;
	struct rk_error err;
};
extern char rkpy_answer[4084];
void rkpy_fast_init(struct rkpy_fast *f);
void rkpy_fast_lock(struct rkpy_fast *f);
void rkpy_fast_unlock(struct rkpy_fast *f);
struct rkpy_out *rkpy_fast_out(void);
int rkpy_fcall(struct rkpy_fast *f, int method, const char *req, uint32_t req_len);
#define RKPY_MANY_MAX ...
int rkpy_fcall_many(struct rkpy_fast *f, int method, const char *reqs, const uint32_t *lens,
		    uint32_t n, char *out, uint32_t *ends, int timeout_ms, int *status);
int rkpy_acall(struct rkpy_fast *f, int method, const char *req, uint32_t req_len,
	       char *resp, uint32_t cap, int timeout_ms, struct rkpy_call *c, int spin_us,
	       struct rk_error *err);
int rkpy_acall_wait(struct rkpy_fast *f, struct rkpy_call *c, void *py);
int rkpy_afcall(struct rkpy_fast *f, int method, const char *req, uint32_t req_len);
void rkpy_fast_attach(struct rkpy_fast *f);
int rkpy_pool_call(struct rk_rpc_pool *pool, const char *peer, int method, const char *req,
		   uint32_t req_len, char *resp, uint32_t cap, int timeout_ms, uint32_t *len,
		   int32_t *code, struct rk_error *err);
int rkpy_server_add(struct rk_rpc_server *srv, uint16_t method, void *arg);
int rkpy_reply(struct rk_rpc_req *req, int32_t code, const char *data, uint32_t len);
"""

SOURCE = r"""
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <rdmakit/rdmakit.h>

#define RKPY_BAD_METHOD 1 /* > 0: no errno; Python raises ValueError naming "method" */

static void rkpy_device_gid(const struct rk_device *dev, unsigned char out[16])
{
	memcpy(out, rk_device_get_info(dev)->gid.raw, 16);
}

/* cffi defines these Python callbacks further down. */
static void rkpy_handler(struct rk_rpc_req *req, void *arg, uint16_t method, const char *data,
			 uint32_t len);
static void rkpy_done(void *arg, int status, uint32_t resp_len, int32_t app_code,
		      const struct rk_error *err);

/* A handler's request, its method and data handed to Python in one callback. */
static void rkpy_tramp(struct rk_rpc_req *req, void *arg)
{
	uint32_t n = 0;
	const void *d = rk_rpc_req_data(req, &n);

	rkpy_handler(req, arg, rk_rpc_req_method(req), (const char *)d, n);
}

static int rkpy_server_add(struct rk_rpc_server *srv, uint16_t method, void *arg)
{
	return rk_rpc_server_add(srv, method, rkpy_tramp, arg);
}

static int rkpy_reply(struct rk_rpc_req *req, int32_t code, const char *data, uint32_t len)
{
	return rk_rpc_reply(req, code, data, len);
}

static int rkpy_call(struct rk_rpc_client *cl, int method, const char *req, uint32_t req_len,
		     char *resp, uint32_t cap, int timeout_ms, uint32_t *len, int32_t *code,
		     struct rk_error *err)
{
	struct rk_rpc_call_args a = {.req = req, .req_len = req_len, .resp = resp,
				     .resp_cap = cap, .timeout_ms = timeout_ms};

	if (method < 0 || method > 0xffff)
		return RKPY_BAD_METHOD;
	a.method = (uint16_t)method;
	*len = 0;
	return rk_rpc_call(cl, &a, len, code, err);
}

/*
 * An asynchronous call's outcome. While Python spins for it (py NULL) it
 * is only recorded; once Python waits for it on the event loop (py set,
 * under the client's lock, so no completion runs in between) it is also
 * handed to rkpy_done.
 */
struct rkpy_call {
	int done, status;
	uint32_t len;
	int32_t code;
	void *py;
	char *resp; /* rkpy_fast's .acall: its .answer (set once) */
	struct rk_error err;
};

/*
 * call()'s and acall()'s common case in one foreign call of four
 * arguments, the client's lock taken inside it: @f holds the client and
 * its mutex (the lock of every use of the client, RpcClient._lock, so
 * that no Python lock is taken per call). Each argument cffi converts
 * costs instructions, and under emulation they add up to microseconds a
 * call.
 *
 * The answer lands in @f->answer, which Python slices into the answer's
 * bytes after the foreign call, the mutex released: so only one thread,
 * the owner (the first to make a call), answers there, and it reads the
 * answer before its next call. Any other thread's answer lands in its own
 * rkpy_answer (RKPY_FAST_ELSEWHERE; a thread-local Python reaches at a
 * cost), and so does the owner's while an acall() in flight holds
 * @f->answer (@f->busy). The outcome of a failed call() is in the calling
 * thread's rkpy_out (an error's answer copied to its rkpy_answer).
 */
#define RKPY_FAST_BAD_METHOD (-1000000)
#define RKPY_FAST_CLOSED     (-1000001)
#define RKPY_FAST_ELSEWHERE  (-1000004)
#define RKPY_ANSWER_MAX	     4084 /* rpc.py's DEFAULT_MAX_SIZE */

struct rkpy_fast {
	struct rk_rpc_client *cl; /* NULL once closed (under mu) */
	int spin_us;		  /* acall's look for the answer (mode "adaptive") */
	pthread_mutex_t mu;
	pthread_t owner;	  /* the thread that answers into .answer (owned) */
	int owned;
	pthread_t loop_thread; /* the thread of the event loop acall() is tied to (looped) */
	int looped;
	int busy;		 /* .acall is in flight, answering into .answer */
	struct rkpy_call acall;	 /* acall()'s common case, one at a time */
	char answer[RKPY_ANSWER_MAX];
};

struct rkpy_out {
	int32_t code;
	uint32_t len;
	struct rk_error err;
};

static __thread char rkpy_answer[RKPY_ANSWER_MAX];
static __thread struct rkpy_out rkpy_out;

static void rkpy_fast_init(struct rkpy_fast *f)
{
	pthread_mutex_init(&f->mu, NULL);
	f->acall.resp = f->answer;
}

static void rkpy_fast_lock(struct rkpy_fast *f)
{
	pthread_mutex_lock(&f->mu);
}

static void rkpy_fast_unlock(struct rkpy_fast *f)
{
	pthread_mutex_unlock(&f->mu);
}

static struct rkpy_out *rkpy_fast_out(void)
{
	return &rkpy_out;
}

/* Whether the calling thread answers into @f->answer (the lock held); the first to ask owns it. */
static int rkpy_fast_here(struct rkpy_fast *f, pthread_t self)
{
	if (!f->owned) {
		f->owner = self;
		f->owned = 1;
	}
	return pthread_equal(f->owner, self) && !f->busy;
}

static int rkpy_fcall(struct rkpy_fast *f, int method, const char *req, uint32_t req_len)
{
	struct rk_rpc_call_args a = {.req = req, .req_len = req_len, .resp_cap = RKPY_ANSWER_MAX};
	struct rkpy_out *o = &rkpy_out;
	int r, here = 0;

	if (method < 0 || method > 0xffff)
		return RKPY_FAST_BAD_METHOD;
	a.method = (uint16_t)method;
	o->len = 0;
	pthread_mutex_lock(&f->mu);
	if (f->cl) {
		here = rkpy_fast_here(f, pthread_self());
		a.resp = here ? f->answer : rkpy_answer;
		r = rk_rpc_call(f->cl, &a, &o->len, &o->code, &o->err);
		if (r && here && o->len <= RKPY_ANSWER_MAX)
			memcpy(rkpy_answer, f->answer, o->len); /* an error's answer, where Python reads it */
	} else {
		r = RKPY_FAST_CLOSED;
	}
	pthread_mutex_unlock(&f->mu);
	if (r)
		return r;
	return here ? (int)o->len : RKPY_FAST_ELSEWHERE;
}

/*
 * call_many()'s calls in one foreign call, one after another, the lock
 * held throughout: @n (at most RKPY_MANY_MAX) requests, request i the
 * @lens[i] bytes after request i-1 in @reqs. Answer i (up to
 * RKPY_ANSWER_MAX bytes) lands in @out right after answer i-1 (@out has
 * room for RKPY_MANY_MAX of them) and ends at @ends[i]. Returns how many
 * completed well: @n, or the index of the one that failed (its status in
 * *@status, its outcome in this thread's rkpy_out, an answer that came
 * with an error ending at @ends[index]), or RKPY_FAST_BAD_METHOD /
 * RKPY_FAST_CLOSED. Python's cost per call, the interpreter's path and
 * cffi's crossing, is paid once for the lot.
 */
#define RKPY_MANY_MAX 64

static int rkpy_fcall_many(struct rkpy_fast *f, int method, const char *reqs,
			   const uint32_t *lens, uint32_t n, char *out, uint32_t *ends,
			   int timeout_ms, int *status)
{
	struct rk_rpc_call_args a = {.resp_cap = RKPY_ANSWER_MAX, .timeout_ms = timeout_ms};
	struct rkpy_out *o = &rkpy_out;
	uint32_t i, at = 0;
	int r = 0;

	if (method < 0 || method > 0xffff)
		return RKPY_FAST_BAD_METHOD;
	if (n > RKPY_MANY_MAX)
		n = RKPY_MANY_MAX;
	a.method = (uint16_t)method;
	pthread_mutex_lock(&f->mu);
	if (!f->cl) {
		pthread_mutex_unlock(&f->mu);
		return RKPY_FAST_CLOSED;
	}
	for (i = 0; i < n; i++) {
		a.req = reqs;
		a.req_len = lens[i];
		a.resp = out + at;
		o->len = 0;
		r = rk_rpc_call(f->cl, &a, &o->len, &o->code, &o->err);
		at += o->len <= RKPY_ANSWER_MAX ? o->len : 0;
		ends[i] = at;
		if (r)
			break;
		reqs += lens[i];
	}
	pthread_mutex_unlock(&f->mu);
	*status = r;
	return (int)i;
}

static int rkpy_pool_call(struct rk_rpc_pool *pool, const char *peer, int method,
			  const char *req, uint32_t req_len, char *resp, uint32_t cap,
			  int timeout_ms, uint32_t *len, int32_t *code, struct rk_error *err)
{
	struct rk_rpc_call_args a = {.req = req, .req_len = req_len, .resp = resp,
				     .resp_cap = cap, .timeout_ms = timeout_ms};

	if (method < 0 || method > 0xffff)
		return RKPY_BAD_METHOD;
	a.method = (uint16_t)method;
	*len = 0;
	return rk_rpc_pool_call(pool, peer, &a, len, code, err);
}

static void rkpy_call_done(void *arg, int status, uint32_t len, int32_t code,
			   const struct rk_error *err)
{
	struct rkpy_call *c = arg;

	c->done = 1;
	c->status = status;
	c->len = len;
	c->code = code;
	if (status)
		c->err = *err;
	if (c->py)
		rkpy_done(c->py, status, len, code, err);
}

static long long rkpy_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * Look for @c's answer for about @spin_us (the lock held). The clock is
 * first read after RKPY_SPIN_FIRST looks and then every RKPY_SPIN_EVERY:
 * where the clocksource is not the TSC (hpet under QEMU, some VMs) a
 * clock read is a system call of 1-2 us, and an answer that comes within
 * the first looks (the common case of a server that answers at once)
 * then costs none; the spin grows by those looks (a few us natively).
 */
#define RKPY_SPIN_FIRST 64
#define RKPY_SPIN_EVERY 16

static void rkpy_spin(struct rkpy_fast *f, struct rkpy_call *c, int spin_us)
{
	long long until = 0;

	for (unsigned i = 1; spin_us > 0 && !c->done; i++) {
		if (rk_rpc_client_progress(f->cl, 0, NULL) < 0)
			break;
		if (i >= RKPY_SPIN_FIRST && i % RKPY_SPIN_EVERY == 0) {
			long long now = rkpy_now_us();

			if (!until)
				until = now + spin_us;
			else if (now >= until)
				break;
		}
	}
}

/*
 * Start a call and look for its answer for up to @spin_us (0: not at
 * all): 1 when it completed (in *@c), 0 when still in flight, or a
 * negative errno (-EAGAIN: the window is full; RKPY_FAST_BAD_METHOD,
 * RKPY_FAST_CLOSED).
 */
static int rkpy_acall(struct rkpy_fast *f, int method, const char *req, uint32_t req_len,
		      char *resp, uint32_t cap, int timeout_ms, struct rkpy_call *c, int spin_us,
		      struct rk_error *err)
{
	struct rk_rpc_call_args a = {.req = req, .req_len = req_len, .resp = resp,
				     .resp_cap = cap, .timeout_ms = timeout_ms};
	int r;

	if (method < 0 || method > 0xffff)
		return RKPY_FAST_BAD_METHOD;
	a.method = (uint16_t)method;
	c->done = 0; /* a struct the caller reuses */
	c->py = NULL;
	pthread_mutex_lock(&f->mu);
	r = f->cl ? rk_rpc_call_async(f->cl, &a, rkpy_call_done, c, err) : RKPY_FAST_CLOSED;
	if (r == 0) {
		rkpy_spin(f, c, spin_us);
		r = c->done;
	}
	pthread_mutex_unlock(&f->mu);
	return r;
}

/* The completion of @f->acall: recorded (and handed to Python if it waits), .answer free again. */
static void rkpy_fast_done(void *arg, int status, uint32_t len, int32_t code,
			   const struct rk_error *err)
{
	struct rkpy_fast *f = arg;

	rkpy_call_done(&f->acall, status, len, code, err);
	f->busy = 0;
}

/*
 * acall()'s common case in four arguments, as call()'s: the default
 * deadline, the answer into @f->answer, the outcome in @f->acall, a look
 * for the answer of up to f->spin_us. Only in the thread of the event
 * loop the client is tied to (rkpy_fast_attach), when it owns @f->answer
 * and no such call is in flight; otherwise RKPY_NOT_HERE, nothing sent
 * (Python takes the general path, rkpy_acall). Returns the answer's
 * length (>= 0) when the call completed well within the spin,
 * RKPY_INFLIGHT when it is still in flight (@f->answer is then the
 * call's until it completes), RKPY_FAILED when it completed with an
 * error (the outcome in @f->acall), or as rkpy_acall for a call not
 * started. The answer's length as the result spares Python reading the
 * struct's fields.
 */
#define RKPY_INFLIGHT (-1000002)
#define RKPY_FAILED   (-1000003)
#define RKPY_NOT_HERE (-1000005)

static int rkpy_afcall(struct rkpy_fast *f, int method, const char *req, uint32_t req_len)
{
	struct rk_rpc_call_args a = {
	    .req = req, .req_len = req_len, .resp = f->answer, .resp_cap = RKPY_ANSWER_MAX};
	struct rkpy_call *c = &f->acall;
	pthread_t self = pthread_self();
	int r;

	if (method < 0 || method > 0xffff)
		return RKPY_FAST_BAD_METHOD;
	a.method = (uint16_t)method;
	pthread_mutex_lock(&f->mu);
	if (!f->cl) {
		r = RKPY_FAST_CLOSED;
	} else if (!f->looped || !pthread_equal(f->loop_thread, self) || !rkpy_fast_here(f, self)) {
		r = RKPY_NOT_HERE;
	} else {
		c->done = 0;
		c->py = NULL;
		r = rk_rpc_call_async(f->cl, &a, rkpy_fast_done, f, &c->err);
		if (r == 0) {
			rkpy_spin(f, c, f->spin_us);
			if (!c->done) {
				f->busy = 1;
				r = RKPY_INFLIGHT;
			} else {
				r = c->status ? RKPY_FAILED : (int)c->len;
			}
		}
	}
	pthread_mutex_unlock(&f->mu);
	return r;
}

/* Tie acall()'s common case to the calling thread's event loop (the lock held). */
static void rkpy_fast_attach(struct rkpy_fast *f)
{
	f->loop_thread = pthread_self();
	f->looped = 1;
	rkpy_fast_here(f, f->loop_thread);
}

/*
 * Hand a call in flight to Python's callback @py (its completion then
 * calls rkpy_done), under the client's lock so that no completion runs in
 * between; 1 if it completed meanwhile (@py not set: the outcome is in @c).
 */
static int rkpy_acall_wait(struct rkpy_fast *f, struct rkpy_call *c, void *py)
{
	int done;

	pthread_mutex_lock(&f->mu);
	done = c->done;
	if (!done)
		c->py = py;
	pthread_mutex_unlock(&f->mu);
	return done;
}

/* Op @i's outcome, its completion status as an int (the enum is not declared to Python). */
static int rkpy_op_status(const struct rk_xfer_batch *b, unsigned i, int *wc_status)
{
	enum ibv_wc_status s = IBV_WC_SUCCESS;
	int r = rk_xfer_batch_op_status(b, i, &s);

	*wc_status = (int)s;
	return r;
}

/* Hand what @cq holds now to @x (up to 256 completions); the count or a negative errno. */
static int rkpy_xfer_poll(struct rk_cq *cq, struct rk_xfer *x)
{
	struct ibv_wc wc[16];
	int r, got = 0;

	while (got < 256 && (r = rk_cq_poll(cq, wc, 16, NULL)) > 0) {
		for (int i = 0; i < r; i++)
			rk_xfer_handle(x, &wc[i]);
		got += r;
	}
	return got ? got : (r < 0 ? r : 0);
}

/*
 * What a peer's wait set has now (its fd was readable): completions to @x,
 * connection events handled by the set. Looks until nothing fired (which
 * also re-arms the CQ), at most 64 times: the fd stays readable for the rest.
 */
static int rkpy_xfer_drain(struct rk_wait *ws, struct rk_xfer *x, struct rk_error *err)
{
	struct rk_wait_event ev[8];
	int total = 0;

	for (int round = 0; round < 64; round++) {
		int n = rk_wait(ws, ev, 8, 0, err);

		if (n == -ETIMEDOUT)
			return total;
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++)
			if (ev[i].src == RK_SRC_CQ)
				for (int k = 0; k < ev[i].nwc; k++)
					rk_xfer_handle(x, &ev[i].wc[k]);
		total += n;
	}
	return total;
}

/* The lanes' rdma_cm events (a peer's disconnect), without waiting. */
static void rkpy_lanes_progress(struct rk_conn *const *lanes, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		rk_conn_progress(lanes[i], 0, NULL);
}

/*
 * One slice of a batch's wait: 1 ended well, 0 still running after @ms
 * (the lanes' connection events then handled), or the batch's error.
 */
static int rkpy_batch_wait(struct rk_xfer_batch *b, struct rk_conn *const *lanes, unsigned n,
			   int ms, struct rk_error *err)
{
	int r = rk_xfer_batch_wait(b, ms, err);

	if (r != -ETIMEDOUT)
		return r;
	r = rk_xfer_batch_check(b, err);
	if (r == 0)
		rkpy_lanes_progress(lanes, n);
	return r;
}

/* One slice of a notification wait: 1 with *@value, 0 none within @ms, or an error. */
static int rkpy_notif_wait(struct rk_xfer_peer *p, struct rk_conn *const *lanes, unsigned n,
			   int ms, uint32_t *value, struct rk_error *err)
{
	int r = rk_xfer_notif_wait(p, ms, value, err);

	if (r != -ETIMEDOUT)
		return r;
	rkpy_lanes_progress(lanes, n);
	return 0;
}
"""


def _pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "rdmakit"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("rdmakit_build: librdmakit not found (install librdmakit-dev, "
                         "or set RDMAKIT_INCLUDE_DIR and RDMAKIT_LIBRARY_DIR): %s" % e)
    return shlex.split(out)


def _locations():
    inc = os.environ.get("RDMAKIT_INCLUDE_DIR")
    libdir = os.environ.get("RDMAKIT_LIBRARY_DIR")
    if inc and libdir:
        rpath = [] if os.environ.get("RDMAKIT_NO_RPATH") == "1" else \
            ["-Wl,-rpath," + os.path.abspath(libdir)]
        return dict(include_dirs=[inc], library_dirs=[libdir], libraries=["rdmakit"],
                    extra_link_args=rpath)
    cflags = _pkg_config("--cflags")
    libs = _pkg_config("--libs")
    return dict(include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
                extra_compile_args=[f for f in cflags if not f.startswith("-I")],
                library_dirs=[f[2:] for f in libs if f.startswith("-L")],
                libraries=[f[2:] for f in libs if f.startswith("-l")] or ["rdmakit"],
                extra_link_args=[f for f in libs if not f.startswith(("-L", "-l"))])


ffibuilder = FFI()
ffibuilder.cdef(CDEF)
_loc = _locations()
_loc["extra_compile_args"] = _loc.get("extra_compile_args", []) + ["-Wall"]
ffibuilder.set_source("rdmakit._rk", SOURCE, **_loc)

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    ffibuilder.compile(tmpdir=out, verbose=False)
