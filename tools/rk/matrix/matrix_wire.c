/* matrix_wire.c - JSON documents on rk's control channel (common/chan.h); see matrix_wire.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/chan.h"
#include "matrix.h"
#include "matrix_wire.h"

/*
 * rk matrix before protocol 3 framed "RKMX", u32 length, then the JSON
 * text: where today's header has its type byte, that text's '{'.
 */
static int older_header(const uint8_t *buf, size_t got)
{
	return got >= CLI_FRAME_HDR && buf[8] == '{';
}

const struct cli_frame_fmt mx_frame_fmt = {.magic = {'R', 'K', 'M', 'X'},
					   .type_max = MX_FRAME_JSON,
					   .max = MX_WIRE_MAX,
					   .who = "rk matrix",
					   .older = older_header,
					   .older_name = "rk matrix protocol 2 or older"};

int mx_wire_send(int fd, json_object *o, int timeout_ms, struct rk_error *err)
{
	size_t len;
	const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
	struct cli_chan ch;

	if (!text || len > MX_WIRE_MAX)
		return mx_fail(err, EMSGSIZE, "rendezvous: a message of %zu bytes is too long",
			       len);
	cli_chan_init(&ch, fd, &mx_frame_fmt);
	return cli_chan_send(&ch, MX_FRAME_JSON, text, (uint32_t)len, timeout_ms, err);
}

int mx_wire_parse(const char *text, size_t len, json_object **o, struct rk_error *err)
{
	json_tokener *tok = json_tokener_new();
	int r = 0;

	*o = NULL;
	if (!tok)
		return mx_fail(err, ENOMEM, "rendezvous: out of memory");
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
		r = mx_fail(err, EBADMSG, "rendezvous: a frame that is no JSON object");
	}
	json_tokener_free(tok);
	return r;
}

int mx_wire_recv(int fd, json_object **o, int timeout_ms, struct rk_error *err)
{
	struct cli_chan ch;
	struct cli_frame f;
	int r;

	*o = NULL;
	/* One frame, read no further: a channel of its own for each is enough. */
	cli_chan_init(&ch, fd, &mx_frame_fmt);
	r = cli_chan_recv(&ch, &f, timeout_ms, err);
	if (!r)
		r = mx_wire_parse((const char *)f.data, f.len, o, err);
	cli_chan_free(&ch);
	return r;
}

void mx_wire_rd_free(struct mx_wire_rd *rd)
{
	cli_chan_free(&rd->ch);
	memset(rd, 0, sizeof(*rd));
}

int mx_wire_rd_feed(struct mx_wire_rd *rd, int fd, uint32_t max, json_object **o,
		    struct rk_error *err)
{
	struct cli_frame f;
	int r;

	*o = NULL;
	if (!rd->fmt.who) {
		rd->fmt = mx_frame_fmt;
		rd->fmt.max = max < MX_WIRE_MAX ? max : MX_WIRE_MAX;
		cli_chan_init(&rd->ch, fd, &rd->fmt);
	}
	/* @rd may have moved (an array of pending connections): point at its own format. */
	rd->ch.fmt = &rd->fmt;
	rd->ch.fd = fd;
	r = cli_chan_feed(&rd->ch, &f, err);
	if (r <= 0)
		return r;
	return mx_wire_parse((const char *)f.data, f.len, o, err) ?: 1;
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
