/*
 * test_doctor_gate.c - rk doctor's hello and welcome (doctor_wire.c) and
 * the listener's gate (doctor_gate.c): what it reads of a stranger, what
 * it admits, with and without a token, and what it says when it refuses.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "doctor_gate.h"
#include "doctor_wire.h"

static const uint8_t tok[DOC_TOKEN_LEN] = {0xde, 0xad, 0xbe, 0xef, 1, 2,  3,  4,
					   5,	 6,    7,    8,	   9, 10, 11, 0xff};

/* A frame header announcing @n bytes of a hello. */
static void header(uint8_t *buf, uint32_t n)
{
	buf[0] = 'R';
	buf[1] = 'K';
	buf[2] = 'D';
	buf[3] = 'R';
	buf[4] = (uint8_t)(n >> 24);
	buf[5] = (uint8_t)(n >> 16);
	buf[6] = (uint8_t)(n >> 8);
	buf[7] = (uint8_t)n;
	buf[8] = DOC_MSG_HELLO;
}

/* A frame of @json as rk doctor would frame it. */
static size_t frame(uint8_t *buf, size_t cap, const char *json)
{
	size_t n = strlen(json);

	assert_true(n + 1 + DOC_WIRE_HDR <= cap);
	header(buf, (uint32_t)n);
	memcpy(buf + DOC_WIRE_HDR, json, n + 1);
	return n + DOC_WIRE_HDR;
}

static size_t hello(uint8_t *buf, size_t cap, const uint8_t *token)
{
	struct doc_msg m = {.type = DOC_MSG_HELLO};
	int n;

	if (token) {
		m.has_token = 1;
		memcpy(m.token, token, DOC_TOKEN_LEN);
	}
	n = doc_msg_encode(&m, buf, cap);
	assert_true(n > DOC_WIRE_HDR && n <= DOC_WIRE_HDR + DOC_HELLO_MAX);
	return (size_t)n;
}

static void hello_round_trip(void **state)
{
	uint8_t buf[DOC_WIRE_HDR + DOC_WIRE_MAX];
	struct doc_msg m;
	size_t n;

	(void)state;
	n = hello(buf, sizeof(buf), tok);
	buf[n] = '\0';
	assert_non_null(strstr((const char *)buf + DOC_WIRE_HDR, "\"deadbeef01020304"));
	assert_int_equal(doc_msg_decode(buf + DOC_WIRE_HDR, n - DOC_WIRE_HDR, &m, NULL, 0), 0);
	assert_int_equal(m.type, DOC_MSG_HELLO);
	assert_int_equal(m.has_token, 1);
	assert_memory_equal(m.token, tok, DOC_TOKEN_LEN);
	n = hello(buf, sizeof(buf), NULL);
	assert_int_equal(doc_msg_decode(buf + DOC_WIRE_HDR, n - DOC_WIRE_HDR, &m, NULL, 0), 0);
	assert_int_equal(m.type, DOC_MSG_HELLO);
	assert_int_equal(m.has_token, 0);

	m = (struct doc_msg){.type = DOC_MSG_WELCOME, .checked = 1};
	n = (size_t)doc_msg_encode(&m, buf, sizeof(buf));
	assert_int_equal(doc_msg_decode(buf + DOC_WIRE_HDR, n - DOC_WIRE_HDR, &m, NULL, 0), 0);
	assert_int_equal(m.type, DOC_MSG_WELCOME);
	assert_int_equal(m.checked, 1);
}

static void hello_bad_tokens(void **state)
{
	static const char *const bad[] = {
	    "{\"v\":3,\"t\":\"hello\"}",		   /* none */
	    "{\"v\":3,\"t\":\"hello\",\"token\":1}",	   /* a number */
	    "{\"v\":3,\"t\":\"hello\",\"token\":\"abc\"}", /* short */
	    "{\"v\":3,\"t\":\"hello\",\"token\":\"0123456789abcdef0123456789abcdefaa\"}", /* long */
	    "{\"v\":3,\"t\":\"hello\",\"token\":\"0123456789abcdef0123456789abcdeg\"}",	  /* not hex
											   */
	    "{\"v\":3,\"t\":\"hello\",\"token\":\"0123456789abcdef0123456789abcde \"}",
	    "{\"v\":3,\"t\":\"welcome\",\"checked\":2}",
	};
	struct doc_msg m;
	char why[160];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(doc_msg_decode(bad[i], strlen(bad[i]), &m, why, sizeof(why)),
				 -EBADMSG);
		assert_true(why[0] != '\0');
		assert_int_equal(m.has_token, 0);
	}
	/* upper-case hex is the same token */
	{
		const char *up =
		    "{\"v\":3,\"t\":\"hello\",\"token\":\"DEADBEEF0102030405060708090A0BFF\"}";

		assert_int_equal(doc_msg_decode(up, strlen(up), &m, why, sizeof(why)), 0);
		assert_memory_equal(m.token, tok, DOC_TOKEN_LEN);
	}
}

static void need_reads_no_further(void **state)
{
	uint8_t buf[DOC_WIRE_HDR + DOC_WIRE_MAX] = {0};
	char why[256];
	size_t n;

	(void)state;
	assert_int_equal(doc_hello_need(buf, 0, why, sizeof(why)), DOC_WIRE_HDR);
	/* a stranger goes at its first wrong byte, named */
	assert_int_equal(doc_hello_need((const uint8_t *)"G", 1, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why, "not rk doctor: it sent \"G\"");
	assert_int_equal(doc_hello_need((const uint8_t *)"\x16\x03\x01\x00", 4, why, sizeof(why)),
			 -EBADMSG);
	assert_string_equal(why, "not rk doctor: it sent \"????\"");
	assert_int_equal(doc_hello_need((const uint8_t *)"RKD", 3, why, sizeof(why)), DOC_WIRE_HDR);
	/* the frame's length once the header is in; never more than a hello */
	n = hello(buf, sizeof(buf), tok);
	for (size_t got = DOC_WIRE_HDR; got <= n; got++)
		assert_int_equal(doc_hello_need(buf, got, why, sizeof(why)), (int)n);
	header(buf, 257);
	assert_int_equal(doc_hello_need(buf, 8, why, sizeof(why)), -EMSGSIZE);
	assert_non_null(strstr(why, "a first message of 257 bytes"));
	assert_non_null(strstr(why, "install the same rk version"));
	header(buf, 0);
	assert_int_equal(doc_hello_need(buf, 8, why, sizeof(why)), -EMSGSIZE);
	header(buf, UINT32_MAX);
	assert_int_equal(doc_hello_need(buf, 8, why, sizeof(why)), -EMSGSIZE);
	header(buf, DOC_HELLO_MAX); /* the most a hello may be */
	assert_int_equal(doc_hello_need(buf, DOC_WIRE_HDR, NULL, 0), DOC_WIRE_HDR + DOC_HELLO_MAX);
}

static void judge_without_token(void **state)
{
	uint8_t buf[DOC_WIRE_HDR + DOC_WIRE_MAX];
	char why[256];
	size_t n;
	int checked = -1;

	(void)state;
	/* any rk doctor client: with or without a token, not checked */
	n = hello(buf, sizeof(buf), NULL);
	assert_int_equal(doc_hello_judge(buf, n, NULL, &checked, why, sizeof(why)), 0);
	assert_int_equal(checked, 0);
	n = hello(buf, sizeof(buf), tok);
	assert_int_equal(doc_hello_judge(buf, n, NULL, &checked, why, sizeof(why)), 0);
	assert_int_equal(checked, 0);
	/* another version: told so */
	n = frame(buf, sizeof(buf), "{\"v\":1,\"t\":\"hello\",\"token\":\"\"}");
	assert_int_equal(doc_hello_judge(buf, n, NULL, &checked, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "version 1, this rk speaks 3"));
	/* protocol 1's first message, facts, does not fit a hello */
	n = frame(buf, sizeof(buf), "{\"v\":3,\"t\":\"do\",\"step\":1}");
	assert_int_equal(doc_hello_judge(buf, n, NULL, &checked, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "not an rk doctor hello"));
	n = frame(buf, sizeof(buf), "{\"v\":3,\"t\":\"hello\",");
	assert_int_equal(doc_hello_judge(buf, n, NULL, &checked, why, sizeof(why)), -EBADMSG);
	n = frame(buf, sizeof(buf), "[2]");
	assert_int_equal(doc_hello_judge(buf, n, NULL, &checked, why, sizeof(why)), -EBADMSG);
	/* a frame that is not exactly the bytes given */
	n = hello(buf, sizeof(buf), NULL);
	assert_int_equal(doc_hello_judge(buf, n - 1, NULL, &checked, why, sizeof(why)), -EBADMSG);
	assert_int_equal(doc_hello_judge(buf, 3, NULL, &checked, why, sizeof(why)), -EBADMSG);
	assert_int_equal(checked, 0);
}

static void judge_with_token(void **state)
{
	uint8_t buf[DOC_WIRE_HDR + DOC_WIRE_MAX], wrong[DOC_TOKEN_LEN];
	char why[256];
	size_t n;
	int checked = -1;

	(void)state;
	n = hello(buf, sizeof(buf), tok);
	assert_int_equal(doc_hello_judge(buf, n, tok, &checked, why, sizeof(why)), 0);
	assert_int_equal(checked, 1);
	/* wrong in any one byte */
	for (int i = 0; i < DOC_TOKEN_LEN; i++) {
		memcpy(wrong, tok, sizeof(wrong));
		wrong[i] ^= 0x40;
		n = hello(buf, sizeof(buf), wrong);
		assert_int_equal(doc_hello_judge(buf, n, tok, &checked, why, sizeof(why)), -EACCES);
		assert_int_equal(checked, 0);
		assert_non_null(strstr(why, "wrong token"));
	}
	n = hello(buf, sizeof(buf), NULL);
	assert_int_equal(doc_hello_judge(buf, n, tok, &checked, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "requires a token"));
	assert_non_null(strstr(why, "--token-file"));
	/* the token does not excuse a bad hello */
	n = frame(buf, sizeof(buf),
		  "{\"v\":4,\"t\":\"hello\",\"token\":\"deadbeef0102030405060708090a0bff\"}");
	assert_int_equal(doc_hello_judge(buf, n, tok, &checked, why, sizeof(why)), -EPROTO);
	assert_int_equal(checked, 0);
}

static void facts_of_version_1_refused(void **state)
{
	static const char v1[] = "{\"v\":1,\"t\":\"facts\"}";
	struct doc_msg m;
	char why[160];

	(void)state;
	assert_int_equal(doc_msg_decode(v1, strlen(v1), &m, why, sizeof(why)), -EPROTO);
	assert_string_equal(why, "version 1, this rk speaks 3");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(hello_round_trip),	     cmocka_unit_test(hello_bad_tokens),
	    cmocka_unit_test(need_reads_no_further), cmocka_unit_test(judge_without_token),
	    cmocka_unit_test(judge_with_token),	     cmocka_unit_test(facts_of_version_1_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
