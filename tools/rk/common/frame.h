/*
 * frame.h - the one frame format of rk's control channels (rk doctor's
 * control connection, rk matrix's rendezvous, rk bench's control
 * channel): a header of CLI_FRAME_HDR bytes, then the payload.
 *
 *   magic    4 bytes, the channel's own ("RKDR", "RKMX", "RKBC"): a
 *            stranger on the port is told apart from the first byte
 *   length   u32 big-endian, payload bytes, 0..fmt->max
 *   type     u8, 1..fmt->type_max, what the payload is
 *
 * The length comes before the type so a frame too long is refused as soon
 * as its length is in, before anything is allocated for it. This file is
 * the pure codec of the header (no I/O, no globals, reentrant), shared by
 * the channel (chan.h), rk doctor's gate and the fuzz targets.
 */
#ifndef RK_CLI_FRAME_H
#define RK_CLI_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define CLI_FRAME_HDR 9
#define CLI_FRAME_MAX (16u << 20) /* the largest fmt->max: a frame's length fits an int */

/* One channel's format. Constant; shared by every connection of the channel. */
struct cli_frame_fmt {
	char magic[4];	  /* not NUL-terminated */
	uint8_t type_max; /* types 1..type_max are valid */
	uint32_t max;	  /* payload bytes at most (<= CLI_FRAME_MAX) */
	const char *who;  /* the command, for messages: "rk doctor" */
};

/* cli_frame_head - the header of a frame of @type with @len payload bytes into @hdr. */
void cli_frame_head(const struct cli_frame_fmt *f, uint8_t type, uint32_t len,
		    uint8_t hdr[CLI_FRAME_HDR]);

/*
 * cli_frame_need - the whole length (header and payload) of the frame whose
 * first @got bytes are at @buf, as far as they tell: CLI_FRAME_HDR while the
 * header is not in, then the frame's. More bytes are needed while the
 * result is > @got. Returns -EBADMSG when the bytes are not this format's
 * (the magic, known from the first wrong byte; a type out of range) and
 * -EMSGSIZE for a length over f->max (known once the length is in, before
 * the type byte). @why (may be NULL) says which in printable text, with
 * what came ("not rk doctor: it sent \"GET / HT\"").
 */
int cli_frame_need(const struct cli_frame_fmt *f, const uint8_t *buf, size_t got, char *why,
		   size_t why_len);

/* cli_frame_len, cli_frame_type - the length and type fields of a whole header. */
uint32_t cli_frame_len(const uint8_t hdr[CLI_FRAME_HDR]);
uint8_t cli_frame_type(const uint8_t hdr[CLI_FRAME_HDR]);

#endif
