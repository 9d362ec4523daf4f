/*
 * bench_ctl.c - see bench_ctl.h.
 *
 * The socket is used with MSG_DONTWAIT and poll(), whatever its blocking
 * flag, so a send or receive never outlives its deadline. Received bytes
 * accumulate in c->in until a whole frame is there; the benchmark loops
 * call bench_ctl_recv with timeout 0 between polls of the CQ.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <rdmakit/wire.h>

#include "bench_ctl.h"
#include "cli.h"

int bench_fail(struct rk_error *err, int errnum, const char *fmt, ...)
{
	char msg[RK_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rk_error_setf(err, "rk bench", errnum, "%s", msg);
}

void bench_ctl_init(struct bench_ctl *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->last_rx_ns = cli_now_ns();
}

void bench_ctl_beat_reset(struct bench_ctl *c)
{
	c->beat_count = 0;
	c->beat_ns = 0;
}

void bench_ctl_close(struct bench_ctl *c)
{
	if (c->fd >= 0 && close(c->fd))
		perror("rk bench: close control socket");
	c->fd = -1;
}

/* Milliseconds left until @deadline_ns (0 if past). */
static int ms_left(uint64_t deadline_ns)
{
	uint64_t now = cli_now_ns();

	if (now >= deadline_ns)
		return 0;
	return (int)((deadline_ns - now + 999999) / 1000000);
}

static int wait_fd(struct bench_ctl *c, short events, uint64_t deadline_ns)
{
	struct pollfd p = {.fd = c->fd, .events = events};
	int r;

	do {
		r = poll(&p, 1, ms_left(deadline_ns));
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r ? 0 : -ETIMEDOUT;
}

int bench_ctl_send(struct bench_ctl *c, uint16_t type, const void *data, uint16_t len,
		   int timeout_ms, struct rk_error *err)
{
	uint64_t deadline = cli_now_ns() + (uint64_t)timeout_ms * 1000000;
	uint8_t frame[8 + BENCH_MSG_MAX];
	size_t total = 8u + len, done = 0;

	if (len > BENCH_MSG_MAX)
		return bench_fail(err, EMSGSIZE, "control message of %u bytes", len);
	frame[0] = 'R';
	frame[1] = 'K';
	frame[2] = 'B';
	frame[3] = 'C';
	rk_put16(frame + 4, type);
	rk_put16(frame + 6, len);
	if (len)
		memcpy(frame + 8, data, len);
	while (done < total) {
		ssize_t n = send(c->fd, frame + done, total - done, MSG_NOSIGNAL | MSG_DONTWAIT);
		int r;

		if (n >= 0) {
			done += (size_t)n;
			continue;
		}
		if (errno == EPIPE || errno == ECONNRESET)
			return bench_fail(err, ECONNRESET,
					  "the peer closed the control connection");
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return bench_fail(err, errno, "control send: %s", strerror(errno));
		r = wait_fd(c, POLLOUT, deadline);
		if (r == -ETIMEDOUT)
			return bench_fail(err, ETIMEDOUT,
					  "the peer took no control message for %d ms", timeout_ms);
		if (r)
			return bench_fail(err, -r, "poll control socket: %s", strerror(-r));
	}
	return 0;
}

/* Take one whole frame out of c->in if there is one: 1, 0 (need more), or error. */
static int take_frame(struct bench_ctl *c, struct bench_msg *m, struct rk_error *err)
{
	size_t len;

	if (c->have < 8)
		return 0;
	if (memcmp(c->in, "RKBC", 4) != 0)
		return bench_fail(err, EBADMSG, "control channel: bad frame magic");
	m->type = rk_get16(c->in + 4);
	len = rk_get16(c->in + 6);
	if (len > BENCH_MSG_MAX || m->type == 0 || m->type >= BM_TYPE_MAX)
		return bench_fail(err, EBADMSG, "control channel: bad frame (type %u, %zu bytes)",
				  m->type, len);
	if (c->have < 8 + len)
		return 0;
	m->len = (uint16_t)len;
	memcpy(m->data, c->in + 8, len);
	c->have -= 8 + len;
	memmove(c->in, c->in + 8 + len, c->have);
	return 1;
}

/* Read what the socket has without blocking: 0, -EAGAIN (nothing), or error. */
static int fill(struct bench_ctl *c, struct rk_error *err)
{
	ssize_t n = recv(c->fd, c->in + c->have, sizeof(c->in) - c->have, MSG_DONTWAIT);

	if (n > 0) {
		c->have += (size_t)n;
		c->last_rx_ns = cli_now_ns();
		return 0;
	}
	if (n == 0)
		return bench_fail(err, ECONNRESET, "the peer closed the control connection");
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return -EAGAIN;
	if (errno == ECONNRESET)
		return bench_fail(err, ECONNRESET, "the peer reset the control connection");
	return bench_fail(err, errno, "control receive: %s", strerror(errno));
}

int bench_ctl_recv(struct bench_ctl *c, struct bench_msg *m, int timeout_ms, struct rk_error *err)
{
	uint64_t deadline = cli_now_ns() + (uint64_t)timeout_ms * 1000000;
	int r;

	for (;;) {
		r = take_frame(c, m, err);
		if (r < 0)
			return r;
		if (r == 1) {
			if (m->type == BM_HEARTBEAT) {
				uint64_t n;

				if (m->len != 8)
					return bench_fail(err, EBADMSG,
							  "control channel: heartbeat of %u bytes",
							  m->len);
				n = rk_get64(m->data);
				if (n > c->beat_count) {
					c->beat_count = n;
					c->beat_ns = cli_now_ns();
				}
				continue;
			}
			if (m->type == BM_ERROR) {
				char text[BENCH_MSG_MAX + 1];

				/* Shown on a terminal: no escapes from the peer. */
				cli_clean_text(text, sizeof(text), m->data, m->len);
				return bench_fail(err, EREMOTEIO, "peer failed: %s", text);
			}
			return 0;
		}
		r = fill(c, err);
		if (r == 0)
			continue;
		if (r != -EAGAIN)
			return r;
		if (timeout_ms == 0)
			return -EAGAIN;
		r = wait_fd(c, POLLIN, deadline);
		if (r == -ETIMEDOUT)
			return bench_fail(err, ETIMEDOUT,
					  "no word from the peer for %d ms (is it alive?)",
					  timeout_ms);
		if (r)
			return bench_fail(err, -r, "poll control socket: %s", strerror(-r));
	}
}

static const char *type_name(unsigned t)
{
	static const char *const names[BM_TYPE_MAX] = {
	    "?",  "PARAMS", "ACCEPT", "REFUSE",	   "OOB",   "READY",
	    "GO", "DONE",   "RESULT", "HEARTBEAT", "ERROR", "XDESC",
	};

	return t < BM_TYPE_MAX ? names[t] : "?";
}

int bench_ctl_expect(struct bench_ctl *c, uint16_t type, int len, struct bench_msg *m,
		     int timeout_ms, struct rk_error *err)
{
	int r = bench_ctl_recv(c, m, timeout_ms, err);

	if (r)
		return r;
	if (m->type != type)
		return bench_fail(err, EPROTO, "protocol error: expected %s, the peer sent %s",
				  type_name(type), type_name(m->type));
	if (len >= 0 && m->len != len)
		return bench_fail(err, EPROTO, "protocol error: %s of %u bytes, expected %d",
				  type_name(type), m->len, len);
	return 0;
}

void bench_ctl_error(struct bench_ctl *c, const char *text)
{
	size_t n = strnlen(text, BENCH_MSG_MAX - 1);

	if (c->fd >= 0)
		bench_ctl_send(c, BM_ERROR, text, (uint16_t)n, 500, NULL);
}
