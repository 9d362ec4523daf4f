/*
 * chan.c - a framed control channel with deadlines; see chan.h.
 *
 * The bytes are read a piece at a time, exactly as far as the frame goes
 * (header, then payload), so the header is judged before the payload's
 * buffer exists and a frame's end is never overrun.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/chan.h"
#include "common/deadline.h"
#include "common/tool_error.h"

void cli_chan_init(struct cli_chan *c, int fd, const struct cli_frame_fmt *fmt)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->fmt = fmt;
	c->last_rx_ns = cli_deadline_now();
}

void cli_chan_free(struct cli_chan *c)
{
	free(c->buf);
	c->buf = NULL;
	c->cap = 0;
	c->got = 0;
	c->whole = 0;
}

/* poll() @fd for @events until @deadline: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};
	int r;

	do {
		r = poll(&p, 1, cli_deadline_ms_left(deadline));
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r ? 0 : -ETIMEDOUT;
}

static int send_all(struct cli_chan *c, const uint8_t *p, size_t len, uint64_t deadline,
		    int timeout_ms, struct rk_error *err)
{
	const char *who = c->fmt->who;
	size_t done = 0;

	while (done < len) {
		ssize_t n = send(c->fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
		int r;

		if (n >= 0) {
			done += (size_t)n;
			continue;
		}
		if (errno == EPIPE || errno == ECONNRESET)
			return cli_fail(err, who, ECONNRESET, "the peer closed the connection");
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return cli_fail(err, who, errno, "send: %s", strerror(errno));
		r = wait_fd(c->fd, POLLOUT, deadline);
		if (r == -ETIMEDOUT)
			return cli_fail(err, who, ETIMEDOUT, "the peer took nothing for %d ms",
					timeout_ms);
		if (r)
			return cli_fail(err, who, -r, "poll: %s", strerror(-r));
	}
	return 0;
}

int cli_chan_send(struct cli_chan *c, unsigned type, const void *data, uint32_t len, int timeout_ms,
		  struct rk_error *err)
{
	uint64_t deadline = cli_deadline_in(timeout_ms);
	uint8_t hdr[CLI_FRAME_HDR];
	size_t n;
	int r;

	if (len > c->fmt->max || type == 0 || type > c->fmt->type_max)
		return cli_fail(err, c->fmt->who, EMSGSIZE,
				"a frame of %u bytes (type %u): over the %u allowed", len, type,
				c->fmt->max);
	n = cli_frame_head(c->fmt, type, len, hdr);
	r = send_all(c, hdr, n, deadline, timeout_ms, err);
	return r ?: send_all(c, data, len, deadline, timeout_ms, err);
}

/* The header is whole: check it, and make room for the payload it announces. */
static int take_head(struct cli_chan *c, struct rk_error *err)
{
	size_t hdr = CLI_FRAME_HDR, len;
	char why[128];
	int need = cli_frame_need(c->fmt, c->head, hdr, why, sizeof(why));

	if (need < 0)
		return cli_fail(err, c->fmt->who, -need, "%s", why);
	len = (size_t)need - hdr;
	if (len > c->cap) {
		uint8_t *b = realloc(c->buf, len);

		if (!b)
			return cli_fail(err, c->fmt->who, ENOMEM, "out of memory for a message");
		c->buf = b;
		c->cap = len;
	}
	return 0;
}

int cli_chan_feed(struct cli_chan *c, struct cli_frame *f, struct rk_error *err)
{
	const char *who = c->fmt->who;
	size_t hdr = CLI_FRAME_HDR;

	if (c->whole) {
		c->got = 0;
		c->whole = 0;
	}
	for (;;) {
		int in_head = c->got < hdr;
		size_t len = in_head ? 0 : cli_frame_len(c->head);
		uint8_t *dst = in_head ? c->head + c->got : c->buf + (c->got - hdr);
		size_t want = in_head ? hdr - c->got : len - (c->got - hdr);
		ssize_t n = 0;
		int r;

		if (want) {
			n = recv(c->fd, dst, want, MSG_DONTWAIT);
			if (n == 0)
				return cli_fail(err, who, ECONNRESET,
						"the peer closed the connection%s",
						c->got ? " in the middle of a message" : "");
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
					return 0;
				if (errno == ECONNRESET)
					return cli_fail(err, who, ECONNRESET,
							"the peer reset the connection");
				return cli_fail(err, who, errno, "recv: %s", strerror(errno));
			}
			c->last_rx_ns = cli_deadline_now();
		}
		if (in_head) {
			char why[128];
			int need;

			c->got += (size_t)n;
			/* A stranger is told apart from its first bytes, not a whole header. */
			need = cli_frame_need(c->fmt, c->head, c->got, why, sizeof(why));
			if (need < 0)
				return cli_fail(err, who, -need, "%s", why);
			if (c->got < hdr)
				continue;
			r = take_head(c, err);
			if (r)
				return r;
		} else {
			c->got += (size_t)n;
		}
		if (c->got == hdr + (size_t)cli_frame_len(c->head)) {
			c->whole = 1;
			f->type = cli_frame_type(c->head);
			f->len = cli_frame_len(c->head);
			f->data = c->buf;
			return 1;
		}
	}
}

int cli_chan_recv(struct cli_chan *c, struct cli_frame *f, int timeout_ms, struct rk_error *err)
{
	uint64_t deadline = cli_deadline_in(timeout_ms);

	for (;;) {
		int r = cli_chan_feed(c, f, err);

		if (r)
			return r < 0 ? r : 0;
		if (timeout_ms <= 0 || cli_deadline_expired(deadline))
			break;
		r = wait_fd(c->fd, POLLIN, deadline);
		if (r == -ETIMEDOUT)
			break;
		if (r)
			return cli_fail(err, c->fmt->who, -r, "poll: %s", strerror(-r));
	}
	return cli_fail(err, c->fmt->who, ETIMEDOUT, "%s within %d ms",
			c->got ? "only part of a message" : "no message", timeout_ms);
}
