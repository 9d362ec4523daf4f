/*
 * matrix_wire.c - rk matrix's rendezvous frames (tools/rk/matrix/matrix_wire.c),
 * fed as a rank (or rank 0) would send them: the input in a socketpair,
 * closed after it.
 *
 * Asserts, for any bytes:
 *  - mx_wire_recv returns frames of one JSON object each, then one of the
 *    errors it documents (-ECONNRESET at the end of the stream, -EBADMSG,
 *    -EMSGSIZE), never waits (the stream is closed);
 *  - a frame it returns, sent again with mx_wire_send and read back, is
 *    the same JSON;
 *  - the field readers give what they promise whatever the object holds:
 *    mx_get_str printable and terminated, mx_get_num finite and >= 0,
 *    mx_get_u32 within its bound, mx_type a string;
 *  - the error message is printable; no fd is leaked.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rk_error err;
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
		check_resend(o);
		json_object_put(o);
	}
	FUZZ_CHECK(r == -ECONNRESET || r == -EBADMSG || r == -EMSGSIZE);
	FUZZ_CHECK(fuzz_printable(err.msg, sizeof(err.msg)));
	close(sv[0]);
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
	memcpy(p + 8, json, n + 1); /* with its NUL, which the frame does not count */
	return 8 + n;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static uint8_t buf[4096];
	size_t n = 0;

	n += frame(buf + n,
		   "{\"t\":\"hello\",\"rank\":1,\"size\":4,\"host\":\"rk-a\",\"dev\":\"rxe0\"}");
	n += frame(buf + n, "{\"t\":\"result\",\"rank\":1,\"gbps\":0.25,\"lat_us\":41.5}");
	emit("hello-result", buf, n);
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
}
