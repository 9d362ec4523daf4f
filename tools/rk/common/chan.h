/*
 * chan.h - one framed control channel over a connected TCP socket, in the
 * frame header of frame.h: rk doctor's, rk matrix's and rk bench's
 * control connections are each one of these with a format (magic, bounds)
 * of their own.
 *
 * What arrives is a peer's: the header is checked (magic, type, length
 * against the format's bound) before a byte of payload is read or
 * allocated, and never more than the current frame is read from the
 * socket (what follows stays there, for whoever reads next). Every send
 * and receive has a deadline: the socket is used with MSG_DONTWAIT and
 * poll(), whatever its blocking flag, so no call outlives its timeout.
 * A partial frame is kept between calls (cli_chan_feed: many connections
 * read at once, none of which may hold up the others).
 *
 * Errors name the format's command (fmt->who) as their operation. One
 * channel is used by one thread at a time; channels are independent.
 */
#ifndef RK_CLI_CHAN_H
#define RK_CLI_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/error.h>

#include "common/frame.h"

struct cli_chan {
	int fd;
	const struct cli_frame_fmt *fmt;
	uint8_t head[CLI_FRAME_HDR];
	size_t got;	     /* bytes of the frame being read, header included */
	int whole;	     /* the frame is complete (handed out; the next read starts anew) */
	uint8_t *buf;	     /* its payload, allocated once its header passed */
	size_t cap;	     /* of buf */
	uint64_t last_rx_ns; /* when anything last arrived (cli_deadline_now) */
};

/* One received frame: @data (@len bytes) stays valid until the channel's next read. */
struct cli_frame {
	unsigned type;
	uint32_t len;
	const uint8_t *data;
};

/* cli_chan_init - a channel on connected socket @fd (not owned: close it yourself). */
void cli_chan_init(struct cli_chan *c, int fd, const struct cli_frame_fmt *fmt);

/* cli_chan_free - release the receive buffer (the socket stays open). Accepts a zeroed channel. */
void cli_chan_free(struct cli_chan *c);

/*
 * cli_chan_send - one frame of @type and @len payload bytes within
 * @timeout_ms. Returns 0, or -EMSGSIZE (over the format's bound), -ETIMEDOUT
 * (the peer took nothing), -ECONNRESET (it closed), another -errno; @err
 * (may be NULL) says which.
 */
int cli_chan_send(struct cli_chan *c, unsigned type, const void *data, uint32_t len, int timeout_ms,
		  struct rk_error *err);

/*
 * cli_chan_feed - read what the socket holds now, never waiting: 1 with a
 * whole frame in *@f, 0 when more is to come, or -ECONNRESET (closed),
 * -EBADMSG (not this format, a type out of range), -EPROTO (the channel's
 * older header: a peer of another version), -EMSGSIZE (a length over the
 * bound), -ENOMEM, another -errno, with @err set.
 */
int cli_chan_feed(struct cli_chan *c, struct cli_frame *f, struct rk_error *err);

/*
 * cli_chan_recv - the next whole frame within @timeout_ms: cli_chan_feed
 * and poll() until it has one. Returns 0 with *@f, -ETIMEDOUT (nothing, or
 * only part of a frame, in time; a timeout of 0 only takes what is already
 * there) or cli_chan_feed's errors, with @err set.
 */
int cli_chan_recv(struct cli_chan *c, struct cli_frame *f, int timeout_ms, struct rk_error *err);

#endif
