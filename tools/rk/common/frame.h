/*
 * frame.h - the frames of rk's control channels (rk doctor's control
 * connection, rk matrix's rendezvous, rk bench's control channel): a
 * header, then the payload. The header begins with the channel's own
 * 4-byte magic ("RKDR", "RKMX", "RKBC"), so a stranger on the port is told
 * apart from its first byte; then, by layout:
 *
 *   CLI_FRAME_LEN_TYPE  u32 length, u8 type (9 bytes). The format for a
 *                       new channel; rk doctor's. The length comes before
 *                       the type, so a frame too long is refused as soon
 *                       as its length is in.
 *   CLI_FRAME_LEN       u32 length (8 bytes); one type, 1: rk matrix's
 *                       rendezvous (JSON documents).
 *   CLI_FRAME_TYPE_LEN  u16 type, u16 length (8 bytes): rk bench's.
 *
 * All big-endian. Every layout bounds the length (fmt->max) and the type
 * (1..fmt->type_max) from the header, before a byte of payload is read or
 * allocated. This file is the pure codec of the header (no I/O, no
 * globals, reentrant), shared by the channel (chan.h), rk doctor's gate
 * and the fuzz targets.
 */
#ifndef RK_CLI_FRAME_H
#define RK_CLI_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define CLI_FRAME_HDR_MAX 9	      /* the longest header */
#define CLI_FRAME_MAX	  (16u << 20) /* the largest fmt->max: a frame's length fits an int */

enum cli_frame_layout {
	CLI_FRAME_LEN_TYPE = 0,
	CLI_FRAME_LEN,
	CLI_FRAME_TYPE_LEN,
};

/* One channel's format. Constant; shared by every connection of the channel. */
struct cli_frame_fmt {
	char magic[4]; /* not NUL-terminated */
	enum cli_frame_layout layout;
	uint16_t type_max; /* types 1..type_max are valid (1 for CLI_FRAME_LEN) */
	uint32_t max;	   /* payload bytes at most (<= CLI_FRAME_MAX) */
	const char *who;   /* the command, for messages: "rk doctor" */
};

/* cli_frame_hdr_len - the header's length in @f's layout: 8 or 9. */
size_t cli_frame_hdr_len(const struct cli_frame_fmt *f);

/*
 * cli_frame_head - the header of a frame of @type with @len payload bytes
 * into @hdr (CLI_FRAME_HDR_MAX bytes of room). Returns its length. The
 * caller keeps @type and @len within the format.
 */
size_t cli_frame_head(const struct cli_frame_fmt *f, unsigned type, uint32_t len,
		      uint8_t hdr[CLI_FRAME_HDR_MAX]);

/*
 * cli_frame_need - the whole length (header and payload) of the frame whose
 * first @got bytes are at @buf, as far as they tell: the header's length
 * while it is not in, then the frame's. More bytes are needed while the
 * result is > @got. Returns -EBADMSG when the bytes are not this format's
 * (the magic, known from the first wrong byte; a type out of range) and
 * -EMSGSIZE for a length over f->max (known once the length is in). @why
 * (may be NULL) says which in printable text, with what came ("not rk
 * doctor: it sent \"GET / HT\"", "a frame of 4294967295 bytes, ...").
 */
int cli_frame_need(const struct cli_frame_fmt *f, const uint8_t *buf, size_t got, char *why,
		   size_t why_len);

/* cli_frame_len, cli_frame_type - the length and type a whole header of @f's layout states. */
uint32_t cli_frame_len(const struct cli_frame_fmt *f, const uint8_t *hdr);
unsigned cli_frame_type(const struct cli_frame_fmt *f, const uint8_t *hdr);

#endif
