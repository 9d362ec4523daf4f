/*
 * lib_hello.c - librdmakit's connect-request hello and reject message (the
 * rdma_cm private data a peer chooses).
 *
 * Asserts, for any bytes:
 *  - rk_hello_decode accepts only a hello it re-encodes byte for byte,
 *    followed by nothing but the zeros the transport pads with; the token
 *    fits its array; on failure the error says something;
 *  - rk_reject_decode accepts only a message it re-encodes the same way
 *    (when the text was printable); its text is printable, NUL-terminated
 *    and within the caller's buffer, for every buffer size.
 */
#include <string.h>

#include <rdmakit/cm.h>
#include <rdmakit/error.h>

#include "fuzz.h"

static int zeros(const uint8_t *p, size_t from, size_t len)
{
	for (size_t i = from; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

static void check_hello(const uint8_t *data, size_t size)
{
	uint8_t enc[512];
	struct rk_hello h, g;
	struct rk_error err;
	int n;

	rk_error_clear(&err);
	if (rk_hello_decode(data, size, &h, &err)) {
		FUZZ_CHECK(err.err != 0 && err.msg[0] != '\0');
		return;
	}
	FUZZ_CHECK(h.version == RK_HELLO_VERSION && h.token_len <= RK_HELLO_TOKEN_MAX);
	n = rk_hello_encode(&h, enc, sizeof(enc));
	FUZZ_CHECK(n > 0 && (size_t)n <= size);
	FUZZ_CHECK(memcmp(enc, data, (size_t)n) == 0 && zeros(data, (size_t)n, size));
	FUZZ_CHECK(rk_hello_decode(enc, (size_t)n, &g, &err) == 0);
	FUZZ_CHECK(g.version == h.version && g.token_len == h.token_len && g.app_id == h.app_id &&
		   g.app_arg == h.app_arg && memcmp(g.token, h.token, sizeof(h.token)) == 0);
}

static void check_reject(const uint8_t *data, size_t size, size_t text_len)
{
	char text[RK_REJECT_TEXT_MAX + 64];
	uint8_t enc[RK_REJECT_MSG_MAX];
	uint16_t reason = 0;
	int n, printable = 1;
	size_t tl;

	memset(text, 0x55, sizeof(text));
	if (rk_reject_decode(data, size, &reason, text, text_len)) {
		FUZZ_CHECK(text_len == 0 || text[0] == '\0');
		return;
	}
	FUZZ_CHECK(text_len == 0 || fuzz_printable(text, text_len));
	for (size_t i = text_len; i < sizeof(text); i++)
		FUZZ_CHECK(text[i] == 0x55);
	FUZZ_CHECK(size >= 9);
	tl = data[8];
	for (size_t i = 0; i < tl; i++)
		printable &= data[9 + i] >= 0x20 && data[9 + i] < 0x7f;
	if (text_len <= tl || !printable)
		return;
	n = rk_reject_encode(reason, text, enc, sizeof(enc));
	FUZZ_CHECK(n == (int)(9 + tl));
	FUZZ_CHECK(memcmp(enc, data, (size_t)n) == 0 && zeros(data, (size_t)n, size));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_hello(data, size);
	check_reject(data, size, RK_REJECT_TEXT_MAX + 1);
	check_reject(data, size, size ? data[size - 1] % (RK_REJECT_TEXT_MAX + 2) : 0);
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct rk_hello h = {.app_id = 0x524b4350u, .app_arg = 2, .token_len = 16};
	uint8_t buf[256] = {0};
	int n;

	memset(h.token, 0x5a, h.token_len);
	n = rk_hello_encode(&h, buf, sizeof(buf));
	emit("hello", buf, (size_t)n);
	/* rdma_cm pads a connect request's private data with zeros to 56 bytes */
	emit("hello-padded", buf, 56);
	h.token_len = 0;
	n = rk_hello_encode(&h, buf, sizeof(buf));
	emit("hello-notoken", buf, (size_t)n);
	n = rk_reject_encode(RK_REJECT_TOKEN, "access token refused", buf, sizeof(buf));
	emit("reject", buf, (size_t)n);
	n = rk_reject_encode(RK_REJECT_BUSY, NULL, buf, sizeof(buf));
	emit("reject-notext", buf, (size_t)n);
}
