/* frame.c - the control channels' frame header; see frame.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdmakit/wire.h>

#include "cli.h"
#include "common/frame.h"

size_t cli_frame_head(const struct cli_frame_fmt *f, unsigned type, uint32_t len,
		      uint8_t hdr[CLI_FRAME_HDR])
{
	memcpy(hdr, f->magic, 4);
	rk_put32(hdr + 4, len);
	hdr[8] = (uint8_t)type;
	return CLI_FRAME_HDR;
}

uint32_t cli_frame_len(const uint8_t *hdr)
{
	return rk_get32(hdr + 4);
}

unsigned cli_frame_type(const uint8_t *hdr)
{
	return hdr[8];
}

/* f->older says these bytes are the older header: why, -EPROTO. */
static int older(const struct cli_frame_fmt *f, const uint8_t *buf, size_t got, char *why,
		 size_t why_len)
{
	if (!f->older || !f->older(buf, got))
		return 0;
	if (why && why_len)
		snprintf(
		    why, why_len,
		    "version mismatch: the peer speaks %s (install the same rk version on both "
		    "hosts)",
		    f->older_name);
	return -EPROTO;
}

int cli_frame_need(const struct cli_frame_fmt *f, const uint8_t *buf, size_t got, char *why,
		   size_t why_len)
{
	char shown[9];
	unsigned type;
	int r;

	if (memcmp(buf, f->magic, got < 4 ? got : 4) != 0) {
		/* What came, as far as a header's first 8 bytes: enough to recognise it. */
		cli_clean_text(shown, sizeof(shown), buf, got < 8 ? got : 8);
		if (why && why_len)
			snprintf(why, why_len, "not %s: it sent \"%s\"", f->who, shown);
		return -EBADMSG;
	}
	/*
	 * An older header told by the bytes before the type: before the
	 * length, which it may read as one over the bound. One told by the
	 * type byte: after it, as the length is judged before the type byte
	 * is in. So the verdict is the same however the bytes arrive.
	 */
	r = older(f, buf, got < 8 ? got : 8, why, why_len);
	if (r)
		return r;
	if (got >= 8 && cli_frame_len(buf) > f->max) {
		if (why && why_len)
			snprintf(why, why_len, "a frame of %u bytes, over the %u allowed",
				 cli_frame_len(buf), f->max);
		return -EMSGSIZE;
	}
	if (got < CLI_FRAME_HDR)
		return CLI_FRAME_HDR;
	r = older(f, buf, got, why, why_len);
	if (r)
		return r;
	type = cli_frame_type(buf);
	if (type == 0 || type > f->type_max) {
		if (why && why_len)
			snprintf(why, why_len, "a frame of unknown type %u", type);
		return -EBADMSG;
	}
	return (int)(CLI_FRAME_HDR + cli_frame_len(buf));
}
