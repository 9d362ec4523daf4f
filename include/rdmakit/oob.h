/*
 * rdmakit/oob.h - the out-of-band message for manual connections, and the
 * TCP helpers to exchange it.
 *
 * To connect two RC QPs without rdma_cm, each side must learn the other's
 * LID, GID, QP number, starting PSN and MTU. rdmakit sends them over a TCP
 * connection as a fixed, versioned, big-endian message of RK_OOB_MSG_LEN
 * bytes; the decoder rejects anything truncated, oversized, of another
 * version or out of range, because it comes from the network.
 *
 * Layout (version 1): magic "RKOB", u16 version, u16 length, u16 lid,
 * u8 mtu, u8 flags (0), u32 qpn, u32 psn, u8 gid[16], u64 buf_addr,
 * u64 buf_len, u32 buf_rkey, u32 app, u32 reserved (0).
 *
 * The codec is pure (no I/O); the helpers do blocking I/O with deadlines.
 * Thread-safety: all functions are reentrant.
 */
#ifndef RDMAKIT_OOB_H
#define RDMAKIT_OOB_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/common.h>
#include <rdmakit/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RK_OOB_VERSION 1
#define RK_OOB_MSG_LEN 64

struct rk_oob_info {
	uint16_t lid;
	uint8_t gid[16];
	uint32_t qpn; /* 24 bits */
	uint32_t psn; /* 24 bits */
	uint8_t mtu;  /* enum ibv_mtu, 1..5 */
	/* Optional: a buffer the peer may access by RDMA (zeros if none). */
	uint64_t buf_addr;
	uint64_t buf_len;
	uint32_t buf_rkey;
	uint32_t app; /* free for the application (e.g. the QP's index) */
};

/*
 * rk_oob_encode - write @info into @buf (@len >= RK_OOB_MSG_LEN).
 * Returns RK_OOB_MSG_LEN, -ENOSPC if @len is too small, -EINVAL if a field
 * is out of range.
 */
RK_API int rk_oob_encode(const struct rk_oob_info *info, void *buf, size_t len);

/*
 * rk_oob_decode - parse exactly one message of @len bytes. Returns 0,
 * -EBADMSG (bad magic or truncated), -EPROTO (other version), -EMSGSIZE
 * (length field or @len not RK_OOB_MSG_LEN), -EINVAL (field out of range).
 * @err says which.
 */
RK_API int rk_oob_decode(const void *buf, size_t len, struct rk_oob_info *info,
			 struct rk_error *err);

/*
 * rk_oob_exchange - send @local on connected socket @fd and receive the
 * peer's message into @remote, within @timeout_ms in total. Either side may
 * call it first. Returns 0, -ETIMEDOUT, -ECONNRESET (peer closed) or a
 * decode error.
 */
RK_API int rk_oob_exchange(int fd, const struct rk_oob_info *local, struct rk_oob_info *remote,
			   int timeout_ms, struct rk_error *err);

/*
 * rk_tcp_listen - a listening TCP socket on @addr (NULL = any, IPv4 or IPv6)
 * and @port. Returns the fd (caller closes it) or a negative errno.
 */
RK_API int rk_tcp_listen(const char *addr, const char *port, struct rk_error *err);

/* rk_tcp_accept - accept one connection within @timeout_ms; returns its fd (blocking). */
RK_API int rk_tcp_accept(int listen_fd, int timeout_ms, struct rk_error *err);

/*
 * rk_tcp_connect - connect to @host:@port within @timeout_ms; returns the fd
 * (non-blocking, TCP_NODELAY; the caller closes it).
 */
RK_API int rk_tcp_connect(const char *host, const char *port, int timeout_ms, struct rk_error *err);

#ifdef __cplusplus
}
#endif

#endif
