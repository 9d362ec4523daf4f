/*
 * bench_ctl.c - see bench_ctl.h.
 *
 * The frames travel on rk's control channel (common/chan.h), which keeps
 * every send and receive within its deadline and a partial frame between
 * calls; the benchmark loops call bench_ctl_recv with timeout 0 between
 * polls of the CQ. What is rk bench's own is here: heartbeats taken in
 * passing, the peer's ERROR turned into ours, the expected type.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rdmakit/wire.h>

#include "bench_ctl.h"
#include "cli.h"
#include "common/deadline.h"
#include "common/tool_error.h"

int bench_fail(struct rk_error *err, int errnum, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = cli_vfail(err, "rk bench", errnum, fmt, ap);
	va_end(ap);
	return r;
}

/*
 * rk bench before PARAMS version 5 framed "RKBC", u16 type (1..11), u16
 * length (<= 256): read as today's header, a length of 64 KiB or more,
 * which no frame has. Known once its 8 bytes are in.
 */
static int older_header(const uint8_t *buf, size_t got)
{
	return got >= 8 && buf[4] == 0 && buf[5] >= 1 && buf[5] <= 11 && rk_get16(buf + 6) <= 256;
}

const struct cli_frame_fmt bench_frame_fmt = {.magic = {'R', 'K', 'B', 'C'},
					      .type_max = BM_TYPE_MAX - 1,
					      .max = BENCH_MSG_MAX,
					      .who = "rk bench",
					      .older = older_header,
					      .older_name =
						  "rk bench parameter version 4 or older"};

void bench_ctl_init(struct bench_ctl *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	cli_chan_init(&c->ch, fd, &bench_frame_fmt);
}

void bench_ctl_beat_reset(struct bench_ctl *c)
{
	c->beat_count = 0;
	c->beat_ns = 0;
}

void bench_ctl_close(struct bench_ctl *c)
{
	cli_chan_free(&c->ch);
	if (c->fd >= 0 && close(c->fd))
		perror("rk bench: close control socket");
	c->fd = -1;
}

int bench_ctl_send(struct bench_ctl *c, uint16_t type, const void *data, uint16_t len,
		   int timeout_ms, struct rk_error *err)
{
	if (len > BENCH_MSG_MAX)
		return bench_fail(err, EMSGSIZE, "control message of %u bytes", len);
	return cli_chan_send(&c->ch, type, data, len, timeout_ms, err);
}

int bench_ctl_recv(struct bench_ctl *c, struct bench_msg *m, int timeout_ms, struct rk_error *err)
{
	uint64_t deadline = cli_deadline_in(timeout_ms);
	struct cli_frame f;
	int r;

	for (;;) {
		/*
		 * 0: only what is already there, and no error for nothing. One
		 * deadline for the call: heartbeats do not stretch it.
		 */
		r = timeout_ms ? cli_chan_recv(&c->ch, &f, cli_deadline_ms_left(deadline), err)
			       : cli_chan_feed(&c->ch, &f, err);
		if (r == 0 && !timeout_ms)
			return -EAGAIN;
		if (r < 0)
			return r;
		m->type = (uint16_t)f.type;
		m->len = (uint16_t)f.len;
		if (f.len)
			memcpy(m->data, f.data, f.len);
		if (m->type == BM_HEARTBEAT) {
			uint64_t n;

			if (m->len != 8)
				return bench_fail(err, EBADMSG,
						  "control channel: heartbeat of %u bytes", m->len);
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
