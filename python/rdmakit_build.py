"""rdmakit_build.py - the cffi (API mode) build of rdmakit._rk.

The extension is C that cffi generates and the C compiler builds against
librdmakit's public headers: every function and struct declared below is
checked against <rdmakit/rdmakit.h> (structs are declared with "...;", so
their layout comes from the headers, never from this file).

Where the headers and the library are found:
  RDMAKIT_INCLUDE_DIR / RDMAKIT_LIBRARY_DIR  a build tree (CMake's rk_python
      target sets them; the library directory also goes in the rpath);
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
	struct rk_error err;
};
int rkpy_call(struct rk_rpc_client *cl, int method, const char *req, uint32_t req_len,
	      char *resp, uint32_t cap, int timeout_ms, uint32_t *len, int32_t *code,
	      struct rk_error *err);
#define RKPY_FAST_BAD_METHOD ...
struct rkpy_fast {
	struct rk_rpc_client *cl;
	char *resp;
	uint32_t cap;
	int32_t code;
	uint32_t len;
	struct rk_error *err;
};
int rkpy_fcall(struct rkpy_fast *f, int method, const char *req, uint32_t req_len);
int rkpy_acall(struct rk_rpc_client *cl, int method, const char *req, uint32_t req_len,
	       char *resp, uint32_t cap, int timeout_ms, struct rkpy_call *c, int spin_us,
	       struct rk_error *err);
int rkpy_pool_call(struct rk_rpc_pool *pool, const char *peer, int method, const char *req,
		   uint32_t req_len, char *resp, uint32_t cap, int timeout_ms, uint32_t *len,
		   int32_t *code, struct rk_error *err);
int rkpy_server_add(struct rk_rpc_server *srv, uint16_t method, void *arg);
int rkpy_reply(struct rk_rpc_req *req, int32_t code, const char *data, uint32_t len);
"""

SOURCE = r"""
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
 * call()'s common case in one foreign call of four arguments: the client,
 * its answer buffer and the outcome's fields sit in @f, set once. Returns
 * the answer's length (>= 0) or a negative errno (RKPY_FAST_BAD_METHOD: a
 * method out of range). Each argument cffi converts costs instructions,
 * and under emulation they add up to microseconds a call.
 */
#define RKPY_FAST_BAD_METHOD (-1000000)

struct rkpy_fast {
	struct rk_rpc_client *cl;
	char *resp;
	uint32_t cap;
	int32_t code;
	uint32_t len;
	struct rk_error *err;
};

static int rkpy_fcall(struct rkpy_fast *f, int method, const char *req, uint32_t req_len)
{
	struct rk_rpc_call_args a = {
	    .req = req, .req_len = req_len, .resp = f->resp, .resp_cap = f->cap};
	int r;

	if (method < 0 || method > 0xffff)
		return RKPY_FAST_BAD_METHOD;
	a.method = (uint16_t)method;
	f->len = 0;
	r = rk_rpc_call(f->cl, &a, &f->len, &f->code, f->err);
	return r ? r : (int)f->len;
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
	struct rk_error err;
};

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
 * Start a call and look for its answer for up to @spin_us (0: not at
 * all): 1 when it completed (in *@c), 0 when still in flight, or a
 * negative errno (-EAGAIN: the window is full). The clock is read every
 * 16 looks.
 */
static int rkpy_acall(struct rk_rpc_client *cl, int method, const char *req, uint32_t req_len,
		      char *resp, uint32_t cap, int timeout_ms, struct rkpy_call *c, int spin_us,
		      struct rk_error *err)
{
	struct rk_rpc_call_args a = {.req = req, .req_len = req_len, .resp = resp,
				     .resp_cap = cap, .timeout_ms = timeout_ms};
	long long until = 0;
	int r;

	if (method < 0 || method > 0xffff)
		return RKPY_BAD_METHOD;
	a.method = (uint16_t)method;
	c->done = 0; /* a struct the caller reuses */
	c->py = NULL;
	r = rk_rpc_call_async(cl, &a, rkpy_call_done, c, err);
	if (r)
		return r;
	if (spin_us > 0)
		until = rkpy_now_us() + spin_us;
	for (unsigned i = 1; spin_us > 0 && !c->done; i++) {
		if (rk_rpc_client_progress(cl, 0, NULL) < 0)
			break;
		if (i % 16 == 0 && rkpy_now_us() >= until)
			break;
	}
	return c->done;
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
        return dict(include_dirs=[inc], library_dirs=[libdir], libraries=["rdmakit"],
                    extra_link_args=["-Wl,-rpath," + os.path.abspath(libdir)])
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
