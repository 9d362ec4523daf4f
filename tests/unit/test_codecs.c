/*
 * test_codecs.c - the out-of-band and hello / reject wire codecs against
 * truncated, oversized, wrong-version and garbage input.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include <rdmakit/rdmakit.h>

static struct rk_oob_info sample_oob(void)
{
	struct rk_oob_info in = {.lid = 7, .qpn = 0x123456, .psn = 0xabcdef, .mtu = 5};

	for (int i = 0; i < 16; i++)
		in.gid[i] = (uint8_t)(i * 17);
	in.buf_addr = 0x7f0000001000ULL;
	in.buf_len = 8 << 20;
	in.buf_rkey = 0xdeadbeef;
	in.app = 3;
	return in;
}

static void oob_roundtrip(void **state)
{
	struct rk_oob_info in = sample_oob(), out;
	uint8_t buf[RK_OOB_MSG_LEN];
	struct rk_error e;

	assert_int_equal(rk_oob_encode(&in, buf, sizeof(buf)), RK_OOB_MSG_LEN);
	assert_memory_equal(buf, "RKOB", 4);
	assert_int_equal(rk_oob_decode(buf, sizeof(buf), &out, &e), 0);
	assert_memory_equal(&in, &out, sizeof(in));
}

static void oob_bad_input(void **state)
{
	struct rk_oob_info in = sample_oob(), out;
	uint8_t buf[RK_OOB_MSG_LEN + 8], bad[RK_OOB_MSG_LEN];
	struct rk_error e;

	assert_int_equal(rk_oob_encode(&in, buf, 10), -ENOSPC);
	in.qpn = 1 << 24;
	assert_int_equal(rk_oob_encode(&in, buf, sizeof(buf)), -EINVAL);
	in = sample_oob();
	rk_oob_encode(&in, buf, sizeof(buf));
	/* truncated at every length */
	for (size_t n = 0; n < RK_OOB_MSG_LEN; n++)
		assert_int_equal(rk_oob_decode(buf, n, &out, &e), -EBADMSG);
	/* oversized */
	assert_int_equal(rk_oob_decode(buf, sizeof(buf), &out, &e), -EMSGSIZE);
	/* length field lies */
	memcpy(bad, buf, sizeof(bad));
	bad[7] = 200;
	assert_int_equal(rk_oob_decode(bad, sizeof(bad), &out, &e), -EMSGSIZE);
	/* wrong version */
	memcpy(bad, buf, sizeof(bad));
	bad[5] = 2;
	assert_int_equal(rk_oob_decode(bad, sizeof(bad), &out, &e), -EPROTO);
	assert_non_null(strstr(e.msg, "version 2"));
	/* out-of-range fields */
	memcpy(bad, buf, sizeof(bad));
	bad[10] = 9; /* mtu */
	assert_int_equal(rk_oob_decode(bad, sizeof(bad), &out, &e), -EINVAL);
	memcpy(bad, buf, sizeof(bad));
	bad[12] = 1; /* qpn > 24 bits */
	assert_int_equal(rk_oob_decode(bad, sizeof(bad), &out, &e), -EINVAL);
	memcpy(bad, buf, sizeof(bad));
	memset(bad + 12, 0, 4); /* qpn 0 */
	assert_int_equal(rk_oob_decode(bad, sizeof(bad), &out, &e), -EINVAL);
	memcpy(bad, buf, sizeof(bad));
	bad[63] = 1; /* reserved */
	assert_int_equal(rk_oob_decode(bad, sizeof(bad), &out, &e), -EINVAL);
	memcpy(bad, buf, sizeof(bad));
	memset(bad + 36, 0xff, 16); /* buffer wraps */
	assert_int_equal(rk_oob_decode(bad, sizeof(bad), &out, &e), -EINVAL);
}

static void oob_garbage(void **state)
{
	static const uint8_t good_header[8] = {'R', 'K', 'O', 'B', 0, 1, 0, RK_OOB_MSG_LEN};
	uint8_t buf[RK_OOB_MSG_LEN];
	struct rk_oob_info out;

	/* Pseudo-random bytes never decode (the magic is checked first), and never crash. */
	for (uint64_t seed = 0; seed < 2000; seed++) {
		for (size_t i = 0; i < sizeof(buf); i += 8) {
			uint64_t h = XXH64(&i, sizeof(i), seed);

			memcpy(buf + i, &h, 8);
		}
		if (seed % 2)
			memcpy(buf, good_header, sizeof(good_header)); /* garbage body */
		int r = rk_oob_decode(buf, sizeof(buf), &out, NULL);

		if (seed % 2 == 0)
			assert_int_equal(r, -EBADMSG);
		else
			assert_true(r == 0 || r == -EINVAL);
	}
}

static void hello_roundtrip(void **state)
{
	struct rk_hello h = {.app_id = 0x1234, .app_arg = 99, .token_len = 32}, out;
	uint8_t buf[56] = {0}; /* the CM pads the request to 56 bytes */
	struct rk_error e;
	int n;

	memset(h.token, 0xa5, 32);
	n = rk_hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(n, 48);
	assert_true(n <= RK_HELLO_MSG_MAX);
	assert_int_equal(rk_hello_decode(buf, sizeof(buf), &out, &e), 0);
	assert_int_equal(out.version, RK_HELLO_VERSION);
	assert_int_equal(out.app_id, 0x1234);
	assert_int_equal(out.app_arg, 99);
	assert_int_equal(out.token_len, 32);
	assert_memory_equal(out.token, h.token, 32);
}

static void hello_bad_input(void **state)
{
	struct rk_hello h = {.app_id = 1, .token_len = 4}, out;
	uint8_t buf[300] = {0}, bad[56];
	struct rk_error e;
	int n;

	memcpy(h.token, "abcd", 4);
	h.token_len = 33;
	assert_int_equal(rk_hello_encode(&h, buf, sizeof(buf)), -EINVAL);
	h.token_len = 4;
	assert_int_equal(rk_hello_encode(&h, buf, 10), -ENOSPC);
	n = rk_hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(n, 20);
	for (int i = 0; i < n; i++)
		assert_int_equal(rk_hello_decode(buf, (size_t)i, &out, &e), -EBADMSG);
	assert_int_equal(rk_hello_decode(NULL, 0, &out, &e), -EBADMSG);
	assert_int_equal(rk_hello_decode(buf, sizeof(buf), &out, &e), -EMSGSIZE);
	memcpy(bad, buf, sizeof(bad));
	bad[5] = 7;
	assert_int_equal(rk_hello_decode(bad, sizeof(bad), &out, &e), -EPROTO);
	memcpy(bad, buf, sizeof(bad));
	bad[7] = 40; /* token longer than allowed */
	assert_int_equal(rk_hello_decode(bad, sizeof(bad), &out, &e), -EMSGSIZE);
	memcpy(bad, buf, sizeof(bad));
	bad[40] = 1; /* garbage after the message */
	assert_int_equal(rk_hello_decode(bad, sizeof(bad), &out, &e), -EBADMSG);
	memcpy(bad, buf, sizeof(bad));
	bad[0] = 'X';
	assert_int_equal(rk_hello_decode(bad, sizeof(bad), &out, &e), -EBADMSG);
	memcpy(bad, buf, sizeof(bad));
	bad[6] = 1; /* unknown flags */
	assert_int_equal(rk_hello_decode(bad, sizeof(bad), &out, &e), -EBADMSG);
}

static void reject_codec(void **state)
{
	uint8_t buf[148] = {0};
	char text[RK_REJECT_TEXT_MAX + 1];
	uint16_t reason = 0;
	int n;

	n = rk_reject_encode(RK_REJECT_TOKEN, "bad\x01token", buf, sizeof(buf));
	assert_true(n > 0 && n <= RK_REJECT_MSG_MAX);
	assert_int_equal(rk_reject_decode(buf, sizeof(buf), &reason, text, sizeof(text)), 0);
	assert_int_equal(reason, RK_REJECT_TOKEN);
	assert_string_equal(text, "bad?token"); /* control bytes never reach a terminal */
	assert_string_equal(rk_reject_reason_str(reason), "access token refused");
	assert_int_equal(rk_reject_decode(buf, 5, &reason, text, sizeof(text)), -EBADMSG);
	buf[5] = 9;
	assert_int_equal(rk_reject_decode(buf, sizeof(buf), &reason, text, sizeof(text)), -EPROTO);
	buf[5] = 1;
	buf[8] = 200;
	assert_int_equal(rk_reject_decode(buf, sizeof(buf), &reason, text, sizeof(text)),
			 -EMSGSIZE);
	/* a long text is truncated, and a small output buffer is respected */
	n = rk_reject_encode(
	    1, "0123456789012345678901234567890123456789012345678901234567890123456789", buf,
	    sizeof(buf));
	assert_int_equal(n, 9 + RK_REJECT_TEXT_MAX);
	assert_int_equal(rk_reject_decode(buf, (size_t)n, &reason, text, 5), 0);
	assert_string_equal(text, "0123");
	/* every code travels and has a name of its own: a peer acts on the code, never the text */
	for (unsigned r = RK_REJECT_APP; r <= RK_REJECT_ENDED; r++) {
		n = rk_reject_encode((uint16_t)r, NULL, buf, sizeof(buf));
		assert_true(n > 0);
		assert_int_equal(rk_reject_decode(buf, (size_t)n, &reason, text, sizeof(text)), 0);
		assert_int_equal(reason, r);
		assert_string_not_equal(rk_reject_reason_str(r), "unknown reason");
		if (r > RK_REJECT_APP)
			assert_string_not_equal(rk_reject_reason_str(r),
						rk_reject_reason_str(r - 1));
	}
	assert_string_equal(rk_reject_reason_str(RK_REJECT_ENDED + 1), "unknown reason");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(oob_roundtrip),   cmocka_unit_test(oob_bad_input),
	    cmocka_unit_test(oob_garbage),     cmocka_unit_test(hello_roundtrip),
	    cmocka_unit_test(hello_bad_input), cmocka_unit_test(reject_codec),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
