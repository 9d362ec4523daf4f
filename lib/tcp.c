/*
 * tcp.c - TCP helpers for the out-of-band exchange, every step with a deadline.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "rk_internal.h"

int rk_tcp_listen(const char *addr, const char *port, struct rk_error *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE},
			*ai, *a;
	int fd = -1, one = 1, r;

	r = getaddrinfo(addr, port, &hints, &ai);
	if (r)
		return rk__err_gai(err, r, "%s:%s", addr ? addr : "*", port);
	r = -EADDRNOTAVAIL;
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			r = rk__err_sys(err, "socket", NULL);
			continue;
		}
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
		    bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0)
			break;
		r = rk__err_sys(err, "bind/listen", "%s:%s", addr ? addr : "*", port);
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd >= 0 ? fd : r;
}

static int wait_fd(int fd, short events, int64_t deadline, struct rk_error *err, const char *op)
{
	struct pollfd p = {.fd = fd, .events = events};
	int r;

	do
		r = poll(&p, 1, rk__ms_left(deadline));
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return rk__err_sys(err, "poll", "%s", op);
	if (r == 0)
		return rk__err_set(err, ETIMEDOUT, op, "deadline passed");
	return 0;
}

int rk_tcp_accept(int lfd, int timeout_ms, struct rk_error *err)
{
	int fd, r, one = 1;

	r = wait_fd(lfd, POLLIN, rk__deadline(timeout_ms), err, "accept");
	if (r)
		return r;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return rk__err_sys(err, "accept", NULL);
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one))) {
		r = rk__err_sys(err, "setsockopt", "TCP_NODELAY");
		close(fd);
		return r;
	}
	return fd;
}

static int connect_one(const struct addrinfo *a, int64_t deadline, struct rk_error *err)
{
	int fd, r, soerr = 0, one = 1;
	socklen_t sl = sizeof(soerr);

	fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
	if (fd < 0)
		return rk__err_sys(err, "socket", NULL);
	if (connect(fd, a->ai_addr, a->ai_addrlen) && errno != EINPROGRESS) {
		r = rk__err_sys(err, "connect", NULL);
		goto fail;
	}
	r = wait_fd(fd, POLLOUT, deadline, err, "connect");
	if (r)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) || soerr) {
		r = rk__err_set(err, soerr ? soerr : errno, "connect", NULL);
		goto fail;
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one))) {
		r = rk__err_sys(err, "setsockopt", "TCP_NODELAY");
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return r;
}

int rk_tcp_connect(const char *host, const char *port, int timeout_ms, struct rk_error *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *a;
	int64_t deadline = rk__deadline(timeout_ms);
	int r;

	r = getaddrinfo(host, port, &hints, &ai);
	if (r)
		return rk__err_gai(err, r, "%s:%s", host, port);
	r = -EHOSTUNREACH;
	for (a = ai; a; a = a->ai_next) {
		r = connect_one(a, deadline, err);
		if (r >= 0)
			break;
	}
	freeaddrinfo(ai);
	return r;
}

/*
 * Each send/recv is MSG_DONTWAIT after a bounded wait, so this works whether
 * the socket is blocking (rk_tcp_accept) or not (rk_tcp_connect).
 */
static int xfer(int fd, void *buf, size_t len, int sending, int64_t deadline, struct rk_error *err)
{
	uint8_t *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n;
		int r = wait_fd(fd, sending ? POLLOUT : POLLIN, deadline, err,
				sending ? "oob send" : "oob receive");

		if (r)
			return r;
		n = sending ? send(fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
			    : recv(fd, p + done, len - done, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
				continue;
			return rk__err_sys(err, sending ? "send" : "recv", "oob exchange");
		}
		if (n == 0)
			return rk__err_set(err, ECONNRESET, "recv",
					   "peer closed the out-of-band connection");
		done += (size_t)n;
	}
	return 0;
}

int rk_oob_exchange(int fd, const struct rk_oob_info *local, struct rk_oob_info *remote,
		    int timeout_ms, struct rk_error *err)
{
	int64_t deadline = rk__deadline(timeout_ms);
	uint8_t out[RK_OOB_MSG_LEN], in[RK_OOB_MSG_LEN];
	int r;

	r = rk_oob_encode(local, out, sizeof(out));
	if (r < 0)
		return rk__err_set(err, -r, "rk_oob_encode", "local info out of range");
	r = xfer(fd, out, sizeof(out), 1, deadline, err);
	if (r)
		return r;
	/* Header first: a peer of another version may send another length. */
	r = xfer(fd, in, 8, 0, deadline, err);
	if (r)
		return r;
	r = rk_oob_decode(in, 8, remote, err);
	if (r != -EBADMSG || memcmp(in, "RKOB", 4) != 0)
		return r ? r : rk__err_set(err, EBADMSG, "rk_oob_decode", "short message");
	r = xfer(fd, in + 8, sizeof(in) - 8, 0, deadline, err);
	if (r)
		return r;
	return rk_oob_decode(in, sizeof(in), remote, err);
}
