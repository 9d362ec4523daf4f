/* matrix_wire.c - length-prefixed JSON documents over TCP; see matrix_wire.h. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <rdmakit/wire.h>

#include "bench/bench_ctl.h"
#include "cli.h"
#include "matrix_wire.h"

static int io(int fd, void *buf, size_t len, int sending, uint64_t deadline, struct rk_error *err)
{
	uint8_t *p = buf;
	size_t done = 0;

	while (done < len) {
		uint64_t now = cli_now_ns();
		struct pollfd pf = {.fd = fd, .events = sending ? POLLOUT : POLLIN};
		ssize_t n;
		int r;

		if (now >= deadline)
			return bench_fail(err, ETIMEDOUT, "rendezvous: no %s within the deadline",
					  sending ? "room to send" : "message");
		r = poll(&pf, 1, (int)((deadline - now) / 1000000) + 1);
		if (r < 0 && errno != EINTR)
			return bench_fail(err, errno, "rendezvous: poll: %s", strerror(errno));
		if (r <= 0)
			continue;
		n = sending ? send(fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
			    : recv(fd, p + done, len - done, MSG_DONTWAIT);
		if (n == 0)
			return bench_fail(err, ECONNRESET, "rendezvous: the other side closed");
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			if (errno == EPIPE)
				errno = ECONNRESET;
			return bench_fail(err, errno, "rendezvous: %s: %s",
					  sending ? "send" : "recv", strerror(errno));
		}
		done += (size_t)n;
	}
	return 0;
}

static uint64_t deadline_of(int timeout_ms)
{
	return cli_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
}

int mx_wire_send(int fd, json_object *o, int timeout_ms, struct rk_error *err)
{
	size_t len;
	const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
	uint64_t deadline = deadline_of(timeout_ms);
	uint8_t head[8] = {'R', 'K', 'M', 'X'};
	int r;

	if (!text || len > MX_WIRE_MAX)
		return bench_fail(err, EMSGSIZE, "rendezvous: a message of %zu bytes is too long",
				  len);
	rk_put32(head + 4, (uint32_t)len);
	r = io(fd, head, sizeof(head), 1, deadline, err);
	return r ?: io(fd, (void *)text, len, 1, deadline, err);
}

int mx_wire_parse(const char *text, size_t len, json_object **o, struct rk_error *err)
{
	json_tokener *tok = json_tokener_new();
	int r = 0;

	*o = NULL;
	if (!tok)
		return bench_fail(err, ENOMEM, "rendezvous: out of memory");
	/*
	 * Standard JSON only: json-c's lenient default takes a number such as
	 * 0310e and keeps its odd text, so a frame would not read back the same
	 * once sent on (found by fuzz_matrix_wire).
	 */
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	*o = json_tokener_parse_ex(tok, text, (int)len);
	/* One whole object, nothing after it. */
	if (!*o || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len || !json_object_is_type(*o, json_type_object)) {
		json_object_put(*o);
		*o = NULL;
		r = bench_fail(err, EBADMSG, "rendezvous: a frame that is no JSON object");
	}
	json_tokener_free(tok);
	return r;
}

/* The frame's header: its length, checked against @max. */
static int head_len(const uint8_t *head, uint32_t max, uint32_t *len, struct rk_error *err)
{
	*len = rk_get32(head + 4);
	if (memcmp(head, "RKMX", 4))
		return bench_fail(err, EBADMSG, "rendezvous: not an rk matrix frame");
	if (*len > max || !*len)
		return bench_fail(err, EMSGSIZE, "rendezvous: a frame of %u bytes", *len);
	return 0;
}

int mx_wire_recv(int fd, json_object **o, int timeout_ms, struct rk_error *err)
{
	uint64_t deadline = deadline_of(timeout_ms);
	uint8_t head[8];
	uint32_t len;
	char *text;
	int r;

	*o = NULL;
	r = io(fd, head, sizeof(head), 0, deadline, err);
	r = r ?: head_len(head, MX_WIRE_MAX, &len, err);
	if (r)
		return r;
	text = malloc(len);
	if (!text)
		return bench_fail(err, ENOMEM, "rendezvous: out of memory");
	r = io(fd, text, len, 0, deadline, err);
	if (!r)
		r = mx_wire_parse(text, len, o, err);
	free(text);
	return r;
}

void mx_wire_rd_free(struct mx_wire_rd *rd)
{
	free(rd->text);
	memset(rd, 0, sizeof(*rd));
}

int mx_wire_rd_feed(struct mx_wire_rd *rd, int fd, uint32_t max, json_object **o,
		    struct rk_error *err)
{
	*o = NULL;
	for (;;) {
		int in_head = rd->got < sizeof(rd->head);
		uint8_t *dst = in_head ? rd->head + rd->got : (uint8_t *)rd->text + (rd->got - 8);
		size_t want = in_head ? sizeof(rd->head) - rd->got : rd->len - (rd->got - 8);
		ssize_t n = recv(fd, dst, want, MSG_DONTWAIT);
		int r;

		if (n == 0)
			return bench_fail(err, ECONNRESET, "rendezvous: the other side closed");
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return 0;
			return bench_fail(err, errno, "rendezvous: recv: %s", strerror(errno));
		}
		rd->got += (uint32_t)n;
		if (rd->got == sizeof(rd->head)) {
			/* The length is bounded before anything is allocated. */
			r = head_len(rd->head, max, &rd->len, err);
			if (r)
				return r;
			rd->text = malloc(rd->len);
			if (!rd->text)
				return bench_fail(err, ENOMEM, "rendezvous: out of memory");
		}
		if (rd->got > sizeof(rd->head) && rd->got - 8 == rd->len)
			return mx_wire_parse(rd->text, rd->len, o, err) ?: 1;
	}
}

int mx_get_u32(json_object *o, const char *k, uint32_t max, uint32_t *out)
{
	json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int))
		return -1;
	errno = 0;
	x = json_object_get_int64(v);
	if (errno || x < 0 || x > (int64_t)max)
		return -1;
	*out = (uint32_t)x;
	return 0;
}

int mx_get_num(json_object *o, const char *k, double *out)
{
	json_object *v;
	double x;

	if (!json_object_object_get_ex(o, k, &v) ||
	    !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
		return -1;
	x = json_object_get_double(v);
	if (!isfinite(x) || x < 0)
		return -1;
	*out = x;
	return 0;
}

int mx_get_str(json_object *o, const char *k, char *out, size_t len)
{
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return -1;
	cli_clean_text(out, len, json_object_get_string(v), (size_t)json_object_get_string_len(v));
	return 0;
}

const char *mx_type(json_object *o)
{
	json_object *v;

	if (!json_object_object_get_ex(o, "t", &v) || !json_object_is_type(v, json_type_string))
		return "";
	return json_object_get_string(v);
}
