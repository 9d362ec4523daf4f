/* frame.c - the control channels' frame header; see frame.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdmakit/wire.h>

#include "cli.h"
#include "common/frame.h"

size_t cli_frame_hdr_len(const struct cli_frame_fmt *f)
{
	return f->layout == CLI_FRAME_LEN_TYPE ? 9 : 8;
}

size_t cli_frame_head(const struct cli_frame_fmt *f, unsigned type, uint32_t len,
		      uint8_t hdr[CLI_FRAME_HDR_MAX])
{
	memcpy(hdr, f->magic, 4);
	if (f->layout == CLI_FRAME_TYPE_LEN) {
		rk_put16(hdr + 4, (uint16_t)type);
		rk_put16(hdr + 6, (uint16_t)len);
		return 8;
	}
	rk_put32(hdr + 4, len);
	if (f->layout == CLI_FRAME_LEN)
		return 8;
	hdr[8] = (uint8_t)type;
	return 9;
}

uint32_t cli_frame_len(const struct cli_frame_fmt *f, const uint8_t *hdr)
{
	return f->layout == CLI_FRAME_TYPE_LEN ? rk_get16(hdr + 6) : rk_get32(hdr + 4);
}

unsigned cli_frame_type(const struct cli_frame_fmt *f, const uint8_t *hdr)
{
	switch (f->layout) {
	case CLI_FRAME_TYPE_LEN:
		return rk_get16(hdr + 4);
	case CLI_FRAME_LEN:
		return 1;
	default:
		return hdr[8];
	}
}

static int too_long(const struct cli_frame_fmt *f, uint32_t len, char *why, size_t why_len)
{
	if (why && why_len)
		snprintf(why, why_len, "a frame of %u bytes, over the %u allowed", len, f->max);
	return -EMSGSIZE;
}

int cli_frame_need(const struct cli_frame_fmt *f, const uint8_t *buf, size_t got, char *why,
		   size_t why_len)
{
	size_t hdr = cli_frame_hdr_len(f);
	char shown[9];
	unsigned type;

	if (memcmp(buf, f->magic, got < 4 ? got : 4) != 0) {
		/* What came, as far as a header's first 8 bytes: enough to recognise it. */
		cli_clean_text(shown, sizeof(shown), buf, got < 8 ? got : 8);
		if (why && why_len)
			snprintf(why, why_len, "not %s: it sent \"%s\"", f->who, shown);
		return -EBADMSG;
	}
	/* In the u32 layouts the length is judged before the type byte is in. */
	if (got >= 8 && f->layout != CLI_FRAME_TYPE_LEN && rk_get32(buf + 4) > f->max)
		return too_long(f, rk_get32(buf + 4), why, why_len);
	if (got < hdr)
		return (int)hdr;
	type = cli_frame_type(f, buf);
	if (type == 0 || type > f->type_max) {
		if (why && why_len)
			snprintf(why, why_len, "a frame of unknown type %u", type);
		return -EBADMSG;
	}
	if (cli_frame_len(f, buf) > f->max)
		return too_long(f, cli_frame_len(f, buf), why, why_len);
	return (int)(hdr + cli_frame_len(f, buf));
}
