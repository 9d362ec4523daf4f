/*
 * frame.h - the frames of rk's control channels (rk doctor's control
 * connection, rk matrix's rendezvous, rk bench's control channel): a
 * header, then the payload. One header for every channel, 9 bytes:
 *
 *   magic   4 bytes, the channel's own ("RKDR", "RKMX", "RKBC"), so a
 *           stranger on the port is told apart from its first byte;
 *   length  u32 big-endian, the payload's bytes;
 *   type    u8, the message's type (1..fmt->type_max).
 *
 * The length comes before the type, so a frame too long is refused as
 * soon as its length is in; length and type are bounded from the header,
 * before a byte of payload is read or allocated.
 *
 * rk bench (before its PARAMS version 5) and rk matrix (before its protocol 3)
 * had headers of their own; a channel whose older header is recognisable
 * from its first bytes names it in fmt->older, so that an older peer is
 * told a version mismatch rather than garbage.
 *
 * This file is the pure codec of the header (no I/O, no globals,
 * reentrant), shared by the channel (chan.h), rk doctor's gate and the
 * fuzz targets.
 */
#ifndef RK_CLI_FRAME_H
#define RK_CLI_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define CLI_FRAME_HDR 9		  /* magic, u32 length, u8 type */
#define CLI_FRAME_MAX (16u << 20) /* the largest fmt->max: a frame's length fits an int */

/*
 * cli_frame_older_fn - whether the first @got bytes at @buf (the magic
 * matched) are surely a header of the channel's older layout. Pure.
 */
typedef int cli_frame_older_fn(const uint8_t *buf, size_t got);

/* One channel's format. Constant; shared by every connection of the channel. */
struct cli_frame_fmt {
	char magic[4];		   /* not NUL-terminated */
	uint8_t type_max;	   /* types 1..type_max are valid */
	uint32_t max;		   /* payload bytes at most (<= CLI_FRAME_MAX) */
	const char *who;	   /* the command, for messages: "rk doctor" */
	cli_frame_older_fn *older; /* may be NULL: no older layout to recognise */
	const char *older_name;	   /* who sends it: "rk matrix protocol 2 or older" */
};

/*
 * cli_frame_head - the header of a frame of @type with @len payload bytes
 * into @hdr. Returns CLI_FRAME_HDR. The caller keeps @type and @len within
 * the format.
 */
size_t cli_frame_head(const struct cli_frame_fmt *f, unsigned type, uint32_t len,
		      uint8_t hdr[CLI_FRAME_HDR]);

/*
 * cli_frame_need - the whole length (header and payload) of the frame whose
 * first @got bytes are at @buf, as far as they tell: the header's length
 * while it is not in, then the frame's. More bytes are needed while the
 * result is > @got. Returns -EBADMSG when the bytes are not this format's
 * (the magic, known from the first wrong byte; a type out of range),
 * -EPROTO for the channel's older layout (f->older; an older header told
 * only by the type byte is judged after the length) and -EMSGSIZE for a
 * length over f->max (known once the length is in). @why (may be NULL)
 * says which in printable text, with what came ("not rk doctor: it sent
 * \"GET / HT\"", "a frame of 4294967295 bytes, ...").
 */
int cli_frame_need(const struct cli_frame_fmt *f, const uint8_t *buf, size_t got, char *why,
		   size_t why_len);

/* cli_frame_len, cli_frame_type - the length and type a whole header states. */
uint32_t cli_frame_len(const uint8_t *hdr);
unsigned cli_frame_type(const uint8_t *hdr);

#endif
