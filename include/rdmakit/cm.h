/*
 * rdmakit/cm.h - connections through rdma_cm, with a versioned hello.
 *
 * The client's connect request carries a hello in its private data:
 * protocol version, the application's id and argument, and an optional
 * access token. The server decodes and validates it before accepting;
 * anything malformed, of another version or for another application is
 * rejected with a reason the client reports ("rejected by peer: ...").
 *
 * Every step has a deadline (resolve address, resolve route, connect,
 * established), so a dead, silent or absent peer ends in an error, never a
 * hang. responder_resources / initiator_depth come from the device caps.
 *
 * A server: rk_listener_create, then repeatedly rk_listener_get_request
 * (when rk_listener_fd() is readable, or blocking with a deadline),
 * inspect the hello, rk_cm_request_accept or rk_cm_request_reject. Each
 * accepted connection moves to an event channel of its own
 * (rk_conn_cm_fd), so one listener serves many connections at once.
 *
 * Hello layout (version 1, big-endian): magic "RKHL", u16 version, u8 flags
 * (0), u8 token_len, u32 app_id, u32 app_arg, token[token_len].
 * Reject layout: magic "RKRJ", u16 version, u16 reason, u8 text_len, text.
 *
 * Thread-safety: one thread at a time per listener; connections as conn.h.
 */
#ifndef RDMAKIT_CM_H
#define RDMAKIT_CM_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/common.h>
#include <rdmakit/conn.h>
#include <rdmakit/device.h>
#include <rdmakit/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RK_HELLO_VERSION   1
#define RK_HELLO_TOKEN_MAX 32
#define RK_HELLO_MSG_MAX   48  /* fits the 56 bytes of an RC connect request */
#define RK_CM_REPLY_MAX	   128 /* private data the server may send with accept */
#define RK_REJECT_TEXT_MAX 64
#define RK_REJECT_MSG_MAX  (9 + RK_REJECT_TEXT_MAX)

struct rk_hello {
	uint16_t version; /* RK_HELLO_VERSION (filled by the encoder if 0) */
	uint32_t app_id;  /* which application protocol */
	uint32_t app_arg; /* free for the application */
	uint8_t token_len;
	uint8_t token[RK_HELLO_TOKEN_MAX];
};

enum rk_reject_reason {
	RK_REJECT_APP = 1,	 /* application decision (see text) */
	RK_REJECT_BAD_HELLO = 2, /* missing or malformed hello */
	RK_REJECT_VERSION = 3,	 /* unsupported hello version */
	RK_REJECT_APP_ID = 4,	 /* hello for another application */
	RK_REJECT_TOKEN = 5,	 /* access token refused */
	RK_REJECT_BUSY = 6,	 /* server at its connection limit */
	RK_REJECT_DENIED = 7,	 /* the server does not offer what the hello asks */
	/*
	 * A connection that joins a session of several (a lane): no session
	 * under that key, perhaps not yet (the first connection's handshake is
	 * still under way), so a retry within a short while may succeed ...
	 */
	RK_REJECT_NO_SESSION = 8,
	RK_REJECT_ENDED = 9, /* ... or the session has ended: final */
};

/*
 * rk_hello_encode - write @h into @buf. Returns the byte count
 * (16 + token_len), -ENOSPC, or -EINVAL (token too long).
 */
RK_API int rk_hello_encode(const struct rk_hello *h, void *buf, size_t len);

/*
 * rk_hello_decode - parse a hello from connect-request private data of @len
 * bytes (the transport may pad it with zeros, which are accepted). Returns
 * 0, -EBADMSG (bad magic, truncated, non-zero padding), -EPROTO (other
 * version), -EMSGSIZE (token or @len too large).
 */
RK_API int rk_hello_decode(const void *buf, size_t len, struct rk_hello *h, struct rk_error *err);

/* rk_reject_encode - a reject message with @reason and @text (truncated). */
RK_API int rk_reject_encode(uint16_t reason, const char *text, void *buf, size_t len);

/*
 * rk_reject_decode - parse a reject message; @text receives the
 * NUL-terminated reason text (at most RK_REJECT_TEXT_MAX + 1 bytes).
 * Returns 0 or a negative errno as rk_hello_decode.
 */
RK_API int rk_reject_decode(const void *buf, size_t len, uint16_t *reason, char *text,
			    size_t text_len);

/* rk_reject_reason_str - "bad token" etc. for a reason code (static). */
RK_API const char *rk_reject_reason_str(unsigned reason);

struct rk_cm_connect_opts {
	const char *host;	      /* server address (IPv4 or IPv6 literal or name) */
	const char *port;	      /* server port */
	const char *src_addr;	      /* optional local address to bind */
	int timeout_ms;		      /* per step; 0 = 5000 */
	const struct rk_hello *hello; /* NULL = version only, app_id 0 */
	struct rk_conn_opts conn;
};

/*
 * rk_cm_connect - connect to a rk_listener: resolve the address and route,
 * create the QP (conn.prepare runs here), send the hello and wait until the
 * connection is ESTABLISHED, each step within opts->timeout_ms. The address
 * must route through @dev. Returns 0 with *@out connected, or a negative
 * errno: -ETIMEDOUT, -EHOSTUNREACH (ADDR/ROUTE_ERROR, UNREACHABLE),
 * -ECONNREFUSED (REJECTED: @err->reject_reason holds the peer's reason, 0
 * when nobody listens there), -ENODEV.
 */
RK_API int rk_cm_connect(struct rk_device *dev, const struct rk_cm_connect_opts *opts,
			 struct rk_error *err, struct rk_conn **out);

/*
 * rk_conn_peer_data - the private data the server sent with its accept
 * (client side), or NULL with *@len 0. Lives as long as @conn.
 */
RK_API const void *rk_conn_peer_data(const struct rk_conn *conn, size_t *len);

struct rk_listener;
struct rk_cm_request;

struct rk_listen_opts {
	const char *addr; /* local address (IPv4 or IPv6); NULL = any */
	const char *port; /* "0" = pick one (see rk_listener_port) */
	int backlog;	  /* 0 = 64 */
	uint32_t app_id;  /* reject hellos for another app_id (0 = accept any) */
};

/* rk_listener_create - bind and listen. Owned by the caller. */
RK_API int rk_listener_create(struct rk_device *dev, const struct rk_listen_opts *opts,
			      struct rk_error *err, struct rk_listener **out);

/*
 * rk_listener_destroy - stop listening; pending requests are rejected.
 * Connections already accepted are independent and stay up. Accepts NULL.
 */
RK_API void rk_listener_destroy(struct rk_listener *lis);

/* rk_listener_fd - the listener's CM event channel fd (non-blocking). */
RK_API int rk_listener_fd(const struct rk_listener *lis);

/* rk_listener_port - the bound port (useful with port "0"). */
RK_API uint16_t rk_listener_port(const struct rk_listener *lis);

/*
 * rk_listener_get_request - wait up to @timeout_ms (0 = just check) for a
 * connect request with a valid hello; invalid ones are rejected with a
 * reason and skipped. Returns 0 with *@out set (to be accepted or
 * rejected), -EAGAIN (nothing pending with timeout 0) or -ETIMEDOUT.
 */
RK_API int rk_listener_get_request(struct rk_listener *lis, int timeout_ms, struct rk_error *err,
				   struct rk_cm_request **out);

/* rk_cm_request_hello - the validated hello (lives as long as @req). */
RK_API const struct rk_hello *rk_cm_request_hello(const struct rk_cm_request *req);

/* rk_cm_request_peer - the client's address as text ("10.0.0.2:51234"). */
RK_API const char *rk_cm_request_peer(const struct rk_cm_request *req);

/* rk_cm_request_reject - reject with @reason and @text; frees @req. */
RK_API int rk_cm_request_reject(struct rk_cm_request *req, uint16_t reason, const char *text,
				struct rk_error *err);

/*
 * rk_cm_request_accept - create the connection for @req (conn opts as in
 * rk_conn_create; prepare runs before accepting), accept with @reply
 * (<= RK_CM_REPLY_MAX bytes, may be NULL) as private data, and wait up to
 * @timeout_ms for ESTABLISHED. With @timeout_ms 0 it returns at once with
 * the connection CONNECTING; call rk_conn_progress when rk_conn_cm_fd() is
 * readable. Frees @req in every case.
 */
RK_API int rk_cm_request_accept(struct rk_cm_request *req, const struct rk_conn_opts *opts,
				const void *reply, size_t reply_len, int timeout_ms,
				struct rk_error *err, struct rk_conn **out);

#ifdef __cplusplus
}
#endif

#endif
