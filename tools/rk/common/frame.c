/* frame.c - the control channels' frame header; see frame.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdmakit/wire.h>

#include "cli.h"
#include "common/frame.h"

void cli_frame_head(const struct cli_frame_fmt *f, uint8_t type, uint32_t len,
		    uint8_t hdr[CLI_FRAME_HDR])
{
	memcpy(hdr, f->magic, 4);
	rk_put32(hdr + 4, len);
	hdr[8] = type;
}

uint32_t cli_frame_len(const uint8_t hdr[CLI_FRAME_HDR])
{
	return rk_get32(hdr + 4);
}

uint8_t cli_frame_type(const uint8_t hdr[CLI_FRAME_HDR])
{
	return hdr[8];
}

int cli_frame_need(const struct cli_frame_fmt *f, const uint8_t *buf, size_t got, char *why,
		   size_t why_len)
{
	char shown[9];
	uint32_t len;

	if (memcmp(buf, f->magic, got < 4 ? got : 4) != 0) {
		/* What came, as far as a header's first 8 bytes: enough to recognise it. */
		cli_clean_text(shown, sizeof(shown), buf, got < 8 ? got : 8);
		if (why && why_len)
			snprintf(why, why_len, "not %s: it sent \"%s\"", f->who, shown);
		return -EBADMSG;
	}
	if (got < 8)
		return CLI_FRAME_HDR;
	len = rk_get32(buf + 4);
	if (len > f->max) {
		if (why && why_len)
			snprintf(why, why_len, "a message of %u bytes, over the %u allowed", len,
				 f->max);
		return -EMSGSIZE;
	}
	if (got >= CLI_FRAME_HDR && (buf[8] == 0 || buf[8] > f->type_max)) {
		if (why && why_len)
			snprintf(why, why_len, "a message of unknown type %u", buf[8]);
		return -EBADMSG;
	}
	return (int)(CLI_FRAME_HDR + len);
}
