/*
 * hello.c - the connect-request hello and the reject message (rdma_cm
 * private data), encode and validate.
 *
 * The connect request's private data is padded with zeros by the transport
 * to its full size, so the decoder accepts trailing zeros but nothing else
 * after the message.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdmakit/wire.h>

#include "rk_internal.h"

#define HELLO_HDR  16
#define REJECT_HDR 9
#define PDATA_MAX  256 /* more than any CM message carries */

static const uint8_t hello_magic[4] = {'R', 'K', 'H', 'L'};
static const uint8_t reject_magic[4] = {'R', 'K', 'R', 'J'};

int rk_hello_encode(const struct rk_hello *h, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t n = HELLO_HDR + (size_t)h->token_len;

	if (h->token_len > RK_HELLO_TOKEN_MAX)
		return -EINVAL;
	if (len < n)
		return -ENOSPC;
	memcpy(p, hello_magic, 4);
	rk_put16(p + 4, h->version ? h->version : RK_HELLO_VERSION);
	p[6] = 0;
	p[7] = h->token_len;
	rk_put32(p + 8, h->app_id);
	rk_put32(p + 12, h->app_arg);
	memcpy(p + HELLO_HDR, h->token, h->token_len);
	return (int)n;
}

static int zeros_after(const uint8_t *p, size_t from, size_t len)
{
	for (size_t i = from; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

int rk_hello_decode(const void *buf, size_t len, struct rk_hello *h, struct rk_error *err)
{
	const uint8_t *p = buf;
	unsigned v, tl;

	memset(h, 0, sizeof(*h));
	if (len > PDATA_MAX)
		return rk__err_set(err, EMSGSIZE, "rk_hello_decode", "oversized: %zu bytes", len);
	if (!p || len < HELLO_HDR)
		return rk__err_set(err, EBADMSG, "rk_hello_decode", "truncated: %zu bytes", len);
	if (memcmp(p, hello_magic, 4) != 0)
		return rk__err_set(err, EBADMSG, "rk_hello_decode",
				   "bad magic (not an rdmakit peer)");
	v = rk_get16(p + 4);
	if (v != RK_HELLO_VERSION)
		return rk__err_set(err, EPROTO, "rk_hello_decode", "peer speaks version %u, we %u",
				   v, RK_HELLO_VERSION);
	if (p[6] != 0)
		return rk__err_set(err, EBADMSG, "rk_hello_decode", "unknown flags 0x%x", p[6]);
	tl = p[7];
	if (tl > RK_HELLO_TOKEN_MAX)
		return rk__err_set(err, EMSGSIZE, "rk_hello_decode", "token of %u bytes (max %u)",
				   tl, RK_HELLO_TOKEN_MAX);
	if (len < HELLO_HDR + tl)
		return rk__err_set(err, EBADMSG, "rk_hello_decode", "truncated token");
	if (!zeros_after(p, HELLO_HDR + tl, len))
		return rk__err_set(err, EBADMSG, "rk_hello_decode", "garbage after the hello");
	h->version = (uint16_t)v;
	h->token_len = (uint8_t)tl;
	h->app_id = rk_get32(p + 8);
	h->app_arg = rk_get32(p + 12);
	memcpy(h->token, p + HELLO_HDR, tl);
	return 0;
}

int rk_reject_encode(uint16_t reason, const char *text, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t tl = text ? strnlen(text, RK_REJECT_TEXT_MAX) : 0;

	if (len < REJECT_HDR + tl)
		return -ENOSPC;
	memcpy(p, reject_magic, 4);
	rk_put16(p + 4, RK_HELLO_VERSION);
	rk_put16(p + 6, reason);
	p[8] = (uint8_t)tl;
	if (tl)
		memcpy(p + REJECT_HDR, text, tl);
	return (int)(REJECT_HDR + tl);
}

int rk_reject_decode(const void *buf, size_t len, uint16_t *reason, char *text, size_t text_len)
{
	const uint8_t *p = buf;
	size_t tl;

	if (text_len)
		text[0] = '\0';
	if (len > PDATA_MAX)
		return -EMSGSIZE;
	if (!p || len < REJECT_HDR || memcmp(p, reject_magic, 4) != 0)
		return -EBADMSG;
	if (rk_get16(p + 4) != RK_HELLO_VERSION)
		return -EPROTO;
	tl = p[8];
	if (tl > RK_REJECT_TEXT_MAX)
		return -EMSGSIZE;
	if (len < REJECT_HDR + tl || !zeros_after(p, REJECT_HDR + tl, len))
		return -EBADMSG;
	*reason = rk_get16(p + 6);
	if (text_len) {
		size_t n = tl < text_len - 1 ? tl : text_len - 1;

		/* Printable ASCII only: the text ends up in logs and terminals. */
		for (size_t i = 0; i < n; i++)
			text[i] = (p[REJECT_HDR + i] >= 0x20 && p[REJECT_HDR + i] < 0x7f)
				      ? (char)p[REJECT_HDR + i]
				      : '?';
		text[n] = '\0';
	}
	return 0;
}

const char *rk_reject_reason_str(unsigned reason)
{
	switch (reason) {
	case RK_REJECT_APP:
		return "refused by the application";
	case RK_REJECT_BAD_HELLO:
		return "missing or malformed hello";
	case RK_REJECT_VERSION:
		return "unsupported protocol version";
	case RK_REJECT_APP_ID:
		return "hello for another application";
	case RK_REJECT_TOKEN:
		return "access token refused";
	case RK_REJECT_BUSY:
		return "server busy";
	case RK_REJECT_DENIED:
		return "not offered by the server";
	case RK_REJECT_NO_SESSION:
		return "no such session";
	case RK_REJECT_ENDED:
		return "session is over";
	}
	return "unknown reason";
}
