/*
 * matrix_wire.c - rk matrix's rendezvous frames (tools/rk/matrix/matrix_wire.c),
 * fed as a rank (or rank 0) would send them: the input in a socketpair,
 * closed after it.
 *
 * Asserts, for any bytes:
 *  - mx_wire_recv returns frames of one JSON object each, then one of the
 *    errors it documents (-ECONNRESET at the end of the stream, -EBADMSG,
 *    -EPROTO for an older rk matrix's frame, -EMSGSIZE), never waits (the
 *    stream is closed);
 *  - a frame it returns, sent again with mx_wire_send and read back, is
 *    the same JSON;
 *  - the field readers give what they promise whatever the object holds:
 *    mx_get_str printable and terminated, mx_get_num finite and >= 0,
 *    mx_get_u32 within its bound, mx_type a string;
 *  - the error message is printable; no fd is leaked;
 *  - mx_wire_rd_feed (rank 0's reader of many hellos at once) reads the
 *    same frames from the same bytes, and the same error;
 *  - mx_hello_decode on any frame gives what it promises: rank and size
 *    within MX_MAX_RANKS, host and address printable, a token of 16 to
 *    256 bytes, a credential printable and terminated; cli_unhex gives
 *    bytes that cli_hex writes back as the (lowercased) input.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "cli.h"
#include "matrix_hello.h"
#include "matrix_sched.h"
#include "matrix_wire.h"

#define MAX_STREAM 150000

static const char *const keys[] = {"t", "rank", "size", "host", "dev", "gbps", "lat_us", "err"};

static void check_fields(json_object *o)
{
	char s[64];
	double d;
	uint32_t u;

	FUZZ_CHECK(mx_type(o) != NULL);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (mx_get_str(o, keys[i], s, sizeof(s)) == 0)
			FUZZ_CHECK(fuzz_printable(s, sizeof(s)));
		if (mx_get_num(o, keys[i], &d) == 0)
			FUZZ_CHECK(isfinite(d) && d >= 0);
		if (mx_get_u32(o, keys[i], 4096, &u) == 0)
			FUZZ_CHECK(u <= 4096);
	}
}

static void check_hello(json_object *o)
{
	static struct mx_hello h;
	char why[200];

	why[0] = 0;
	if (mx_hello_decode(o, &h, why, sizeof(why))) {
		FUZZ_CHECK(why[0] && fuzz_printable(why, sizeof(why)));
	} else {
		FUZZ_CHECK(h.rank <= MX_MAX_RANKS && h.size <= MX_MAX_RANKS);
		FUZZ_CHECK(fuzz_printable(h.host, sizeof(h.host)));
		FUZZ_CHECK(fuzz_printable(h.addr, sizeof(h.addr)));
		FUZZ_CHECK(!h.params || json_object_is_type(h.params, json_type_object));
		if (h.auth == MX_AUTH_TOKEN)
			FUZZ_CHECK(h.token_len >= MX_TOKEN_MIN && h.token_len <= MX_TOKEN_MAX);
		if (h.auth == MX_AUTH_MUNGE)
			FUZZ_CHECK(strnlen(h.cred, sizeof(h.cred)) < sizeof(h.cred) &&
				   fuzz_printable(h.cred, sizeof(h.cred)));
	}
	/* Any string member as hex: what decodes encodes back the same. */
	json_object_object_foreach(o, k, m)
	{
		static uint8_t b[MX_TOKEN_MAX];
		static char back[2 * MX_TOKEN_MAX + 1];
		const char *t;
		size_t n;
		int got;

		(void)k;
		if (!json_object_is_type(m, json_type_string))
			continue;
		t = json_object_get_string(m);
		n = (size_t)json_object_get_string_len(m);
		got = cli_unhex(t, n, b, sizeof(b));
		FUZZ_CHECK(got >= -1 && got <= (int)MX_TOKEN_MAX);
		if (got < 0)
			continue;
		FUZZ_CHECK((size_t)got * 2 == n);
		cli_hex(b, (size_t)got, back);
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(back[i] ==
				   (t[i] >= 'A' && t[i] <= 'F' ? t[i] - 'A' + 'a' : t[i]));
	}
}

/* The same bytes through the piecewise reader: the same frames, then an error of its own list. */
static void check_rd(const uint8_t *data, size_t size, json_object **frames, size_t nframes)
{
	struct mx_wire_rd rd;
	struct rk_error err;
	size_t k = 0;
	int sv[2], r;

	memset(&rd, 0, sizeof(rd));
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	FUZZ_CHECK(size == 0 || send(sv[1], data, size, MSG_NOSIGNAL) == (ssize_t)size);
	close(sv[1]);
	for (;;) {
		json_object *o = NULL;

		rk_error_clear(&err);
		r = mx_wire_rd_feed(&rd, sv[0], MX_WIRE_MAX, &o, &err);
		FUZZ_CHECK(r != 0); /* the stream is closed: never "more to come" */
		if (r < 0) {
			FUZZ_CHECK(o == NULL);
			break;
		}
		FUZZ_CHECK(k < nframes && o);
		FUZZ_CHECK(
		    strcmp(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
			   json_object_to_json_string_ext(frames[k], JSON_C_TO_STRING_PLAIN)) == 0);
		k++;
		json_object_put(o);
		mx_wire_rd_free(&rd);
	}
	FUZZ_CHECK(k == nframes);
	FUZZ_CHECK(r == -ECONNRESET || r == -EBADMSG || r == -EPROTO || r == -EMSGSIZE);
	FUZZ_CHECK(fuzz_printable(err.msg, sizeof(err.msg)));
	mx_wire_rd_free(&rd);
	close(sv[0]);
}

/* @o through mx_wire_send and back: the same JSON text. */
static void check_resend(json_object *o)
{
	json_object *back = NULL;
	int sv[2];

	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	FUZZ_CHECK(mx_wire_send(sv[1], o, 1000, NULL) == 0);
	FUZZ_CHECK(mx_wire_recv(sv[0], &back, 1000, NULL) == 0 && back);
	FUZZ_CHECK(strcmp(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
			  json_object_to_json_string_ext(back, JSON_C_TO_STRING_PLAIN)) == 0);
	json_object_put(back);
	close(sv[0]);
	close(sv[1]);
}

#define MAX_FRAMES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rk_error err;
	json_object *frames[MAX_FRAMES];
	size_t nframes = 0;
	int sv[2], r, fd0 = fuzz_lowest_fd();

	if (size > MAX_STREAM)
		return 0;
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	FUZZ_CHECK(size == 0 || send(sv[1], data, size, MSG_NOSIGNAL) == (ssize_t)size);
	close(sv[1]);
	for (;;) {
		json_object *o = NULL;

		rk_error_clear(&err);
		r = mx_wire_recv(sv[0], &o, 1000, &err);
		if (r) {
			FUZZ_CHECK(o == NULL);
			break;
		}
		FUZZ_CHECK(o && json_object_is_type(o, json_type_object));
		check_fields(o);
		check_hello(o);
		check_resend(o);
		if (nframes == MAX_FRAMES) {
			json_object_put(o);
			r = 1;
			break;
		}
		frames[nframes++] = o;
	}
	FUZZ_CHECK(r == 1 || r == -ECONNRESET || r == -EBADMSG || r == -EPROTO || r == -EMSGSIZE);
	FUZZ_CHECK(fuzz_printable(err.msg, sizeof(err.msg)));
	close(sv[0]);
	if (r != 1)
		check_rd(data, size, frames, nframes);
	while (nframes)
		json_object_put(frames[--nframes]);
	FUZZ_CHECK(fuzz_lowest_fd() == fd0);
	return 0;
}

static size_t frame(uint8_t *p, const char *json)
{
	size_t n = strlen(json);

	p[0] = 'R';
	p[1] = 'K';
	p[2] = 'M';
	p[3] = 'X';
	p[4] = (uint8_t)(n >> 24);
	p[5] = (uint8_t)(n >> 16);
	p[6] = (uint8_t)(n >> 8);
	p[7] = (uint8_t)n;
	p[8] = MX_FRAME_JSON;
	memcpy(p + CLI_FRAME_HDR, json, n + 1); /* with its NUL, which the frame does not count */
	return CLI_FRAME_HDR + n;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static uint8_t buf[4096];
	size_t n = 0;

	n += frame(buf + n,
		   "{\"t\":\"hello\",\"rank\":1,\"size\":4,\"host\":\"rk-a\",\"dev\":\"rxe0\"}");
	n += frame(buf + n, "{\"t\":\"result\",\"rank\":1,\"gbps\":0.25,\"lat_us\":41.5}");
	emit("hello-result", buf, n);
	n = frame(buf, "{\"t\":\"hello\",\"proto\":2,\"rank\":1,\"size\":3,\"host\":\"h\","
		       "\"addr\":\"10.0.0.2\",\"params\":{\"size\":1},\"auth\":\"token\","
		       "\"token\":\"00112233445566778899aAbBcCdDeEfF\"}");
	n += frame(buf + n,
		   "{\"t\":\"hello\",\"proto\":2,\"rank\":3,\"size\":4,\"host\":\"h\","
		   "\"addr\":\"a\",\"params\":[],\"auth\":\"munge\",\"cred\":\"MUNGE:AwQ=:\"}");
	n += frame(buf + n, "{\"t\":\"hello\",\"proto\":2,\"rank\":0,\"size\":1,\"host\":\"\","
			    "\"addr\":\"\",\"auth\":\"none\"}");
	emit("hellos-v2", buf, n);
	n = frame(buf, "{\"t\":\"hello\",\"proto\":2,\"rank\":1,\"size\":3,\"host\":\"h\","
		       "\"addr\":\"a\",\"auth\":\"token\",\"token\":\"0g1\"}");
	n += frame(buf + n, "{\"t\":\"hello\",\"proto\":2,\"rank\":1,\"size\":3,\"host\":\"h\","
			    "\"addr\":\"a\",\"auth\":\"munge\",\"cred\":\"a b\\u0000\"}");
	emit("hellos-bad-proof", buf, n);
	n = frame(buf, "{\"t\":\"error\",\"err\":\"\\u001b[2Jpeer failed\"}");
	emit("escapes", buf, n);
	n = frame(buf, "[1,2,3]");
	emit("not-an-object", buf, n);
	n = frame(buf, "{\"gbps\":-1,\"rank\":1e300,\"size\":\"x\"}");
	emit("bad-fields", buf, n);
	frame(buf, "");
	memset(buf + 4, 0xff, 4); /* a length of 4 GiB */
	emit("huge-length", buf, 8);
	emit("partial", buf, 5);
	/* rk matrix protocol 2: "RKMX", u32 length, the JSON text (no type byte) */
	n = frame(buf, "{\"t\":\"end\"}");
	memmove(buf + 8, buf + CLI_FRAME_HDR, n - CLI_FRAME_HDR);
	emit("older-frame", buf, n - 1);
}
