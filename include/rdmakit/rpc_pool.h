/*
 * rdmakit/rpc_pool.h - RPC connections by peer, made on first use and reused.
 *
 * Connecting costs rdma_cm's address and route resolution, a QP, a PD and
 * registrations: milliseconds on hardware, far more under emulation. The
 * pool keeps connections (rk_rpc_client, rpc.h) per peer ("host:port") and
 * leases each to one thread at a time:
 *
 *  - the first call to a peer connects; later calls reuse an idle client;
 *  - at most max_per_peer clients per peer: a thread that finds them all
 *    leased waits (until its deadline) for one to come back;
 *  - a client idle for idle_ms is closed (on the next pool call, or by
 *    rk_rpc_pool_reap);
 *  - a client that died (peer gone, transport error) is destroyed when it
 *    comes back and never leased again; the next call connects anew. When
 *    connecting to a peer fails, further attempts wait a backoff (100 ms
 *    doubling to 5 s by default, reset by a success); a call whose deadline
 *    ends inside the backoff fails at once with the last connect error.
 *
 * A lease looks at an idle client's CM channel once (an epoll_wait that
 * does not wait), so a connection its peer closed while it sat idle is
 * replaced, not handed out. Zero-copy buffers (resp_mr, req_mr) must be
 * registered in client.pd, which all the pool's clients then share: a
 * server can reach the buffers registered there for any of them (without
 * client.pd each connection has a PD of its own and no zero copy).
 *
 * Thread-safety: every function may be called from any thread at any time,
 * except rk_rpc_pool_destroy (no other call may run or follow). A leased
 * client belongs to its thread until rk_rpc_pool_put. Connecting happens
 * outside the pool's lock, so one slow peer does not stall the others.
 */
#ifndef RDMAKIT_RPC_POOL_H
#define RDMAKIT_RPC_POOL_H

#include <stdint.h>

#include <rdmakit/common.h>
#include <rdmakit/device.h>
#include <rdmakit/error.h>
#include <rdmakit/rpc.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rk_rpc_pool;

struct rk_rpc_pool_opts {
	unsigned max_per_peer;		    /* 0 = 4 */
	int idle_ms;			    /* close clients idle this long; 0 = 30000 */
	int backoff_min_ms, backoff_max_ms; /* 0 = 100, 5000 */
	unsigned max_peers;		    /* 0 = 1024 */
	/* for every connection: window, mode, pd, conn, timeout_ms (host and
	   port are the peer's) */
	struct rk_rpc_client_opts client;
};

/*
 * rk_rpc_pool_create - an empty pool on @dev (NULL @opts = defaults). No
 * connection is made yet. Owned by the caller.
 */
RK_API int rk_rpc_pool_create(struct rk_device *dev, const struct rk_rpc_pool_opts *opts,
			      struct rk_error *err, struct rk_rpc_pool **out);

/*
 * rk_rpc_pool_destroy - close every client. Clients still leased are
 * destroyed too: call it only once no thread uses the pool. Accepts NULL.
 */
RK_API void rk_rpc_pool_destroy(struct rk_rpc_pool *pool);

/*
 * rk_rpc_pool_get - lease a connected client for @peer ("host:port",
 * "[v6]:port"): an idle one, else a new connection if the peer has fewer
 * than max_per_peer, else wait for one to come back, all within
 * @timeout_ms (0 = 5000, -1 = no limit). Returns 0 with *@out leased, -ETIMEDOUT,
 * -EINVAL (a malformed peer), -EMFILE (max_peers reached) or the connect
 * error (also when still inside the peer's backoff).
 */
RK_API int rk_rpc_pool_get(struct rk_rpc_pool *pool, const char *peer, int timeout_ms,
			   struct rk_error *err, struct rk_rpc_client **out);

/*
 * rk_rpc_pool_put - give a leased client back: kept for reuse if alive
 * and no call is in flight on it, otherwise destroyed (its calls fail).
 */
RK_API void rk_rpc_pool_put(struct rk_rpc_pool *pool, struct rk_rpc_client *cl);

/*
 * rk_rpc_pool_call - get, rk_rpc_call, put; the call's timeout_ms covers
 * the lease too. A call that fails because its connection died
 * (-ECONNRESET, -ENOTCONN) is not retried: the request may have run.
 */
RK_API int rk_rpc_pool_call(struct rk_rpc_pool *pool, const char *peer,
			    const struct rk_rpc_call_args *a, uint32_t *resp_len, int32_t *app_code,
			    struct rk_error *err);

/* rk_rpc_pool_reap - close clients idle longer than idle_ms now; how many. */
RK_API unsigned rk_rpc_pool_reap(struct rk_rpc_pool *pool);

struct rk_rpc_pool_stats {
	uint64_t connects, connect_failures, reuses, idle_closed, dead_closed, waits;
	/* Now: peers with a client or a backoff; clients connected (idle or leased); leased. */
	uint32_t peers, clients, leased;
};

/*
 * rk_rpc_pool_get_stats - copy the pool's counters into @st (all zero for a
 * NULL pool). One lock and a copy: safe from any thread, cheap enough to
 * call after every call.
 */
RK_API void rk_rpc_pool_get_stats(struct rk_rpc_pool *pool, struct rk_rpc_pool_stats *st);

#ifdef __cplusplus
}
#endif

#endif
