/*
 * doctor_wire.c - rk doctor's control messages (see doctor_wire.h): JSON
 * written by json-c, read back field by field with types and ranges
 * checked, because the bytes come from the peer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "doctor_wire.h"

const struct cli_frame_fmt doc_frame_fmt = {.magic = {'R', 'K', 'D', 'R'},
					    .type_max = DOC_MSG_LAST,
					    .max = DOC_WIRE_MAX,
					    .who = "rk doctor"};
const struct cli_frame_fmt doc_hello_fmt = {.magic = {'R', 'K', 'D', 'R'},
					    .type_max = DOC_MSG_LAST,
					    .max = DOC_HELLO_MAX,
					    .who = "rk doctor"};

static const char *const step_names[DOC_STEP_COUNT] = {
    "connect", "send out", "send in", "write out", "write in", "read out", "read in", "rtt",
};

static const char *const type_names[DOC_MSG_LAST + 1] = {NULL,	  "facts", "do",     "result",
							 "error", "hello", "welcome"};

const char *doc_step_name(int step)
{
	return step >= 0 && step < DOC_STEP_COUNT ? step_names[step] : "?";
}

const char *doc_msg_type_name(int type)
{
	return type >= DOC_MSG_FACTS && type <= DOC_MSG_LAST ? type_names[type] : "?";
}

/* ---- encoding --------------------------------------------------------- */

static void put_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

static void put_int(struct json_object *o, const char *k, int64_t v)
{
	json_object_object_add(o, k, json_object_new_int64(v));
}

static void put_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

/* The token's digest as 32 lowercase hex digits ("" without one). */
static void put_token(struct json_object *o, const struct doc_msg *m)
{
	char s[2 * DOC_TOKEN_LEN + 1];

	cli_hex(m->token, DOC_TOKEN_LEN, s);
	s[m->has_token ? 2 * DOC_TOKEN_LEN : 0] = '\0';
	put_str(o, "token", s);
}

static void put_facts(struct json_object *o, const struct doc_facts *f)
{
	struct json_object *lines = json_object_new_array();

	put_str(o, "rk_version", f->rk_version);
	put_str(o, "kernel", f->kernel);
	put_str(o, "host", f->host);
	put_str(o, "device", f->dev);
	put_str(o, "link_layer", f->link_layer);
	put_str(o, "netdev", f->netdev);
	put_str(o, "address", f->addr);
	put_int(o, "port", f->port);
	put_int(o, "active_mtu", f->active_mtu);
	put_int(o, "max_mtu", f->max_mtu);
	put_int(o, "netdev_mtu", f->netdev_mtu);
	put_int(o, "gid_index", f->gid_index);
	put_int(o, "roce_v2", f->roce_v2);
	put_int(o, "memlock_soft", f->memlock_soft);
	put_int(o, "memlock_hard", f->memlock_hard);
	put_int(o, "cap_ipc_lock", f->cap_ipc_lock);
	put_int(o, "failures", f->nfail);
	put_int(o, "warnings", f->nwarn);
	for (int i = 0; i < f->nlines && i < DOC_PEER_LINES; i++) {
		struct json_object *l = json_object_new_object();

		put_str(l, "check", f->lines[i].check);
		put_int(l, "fail", f->lines[i].fail);
		put_str(l, "text", f->lines[i].text);
		put_str(l, "fix", f->lines[i].fix);
		json_object_array_add(lines, l);
	}
	json_object_object_add(o, "lines", lines);
	put_int(o, "step_ms", f->step_ms);
	put_int(o, "cm_port", f->cm_port);
	put_u64(o, "nonce", f->nonce);
	put_u64(o, "seed", f->seed);
	put_u64(o, "wr_addr", f->wr_addr);
	put_u64(o, "wr_rkey", f->wr_rkey);
	put_u64(o, "rd_addr", f->rd_addr);
	put_u64(o, "rd_rkey", f->rd_rkey);
}

int doc_msg_encode(const struct doc_msg *m, uint8_t *buf, size_t len)
{
	struct json_object *o;
	const char *s;
	size_t n;

	if (m->type < DOC_MSG_FACTS || m->type > DOC_MSG_LAST)
		return -EINVAL;
	o = json_object_new_object();
	put_int(o, "v", DOC_WIRE_VERSION);
	put_str(o, "t", type_names[m->type]);
	switch (m->type) {
	case DOC_MSG_FACTS:
		put_facts(o, &m->facts);
		break;
	case DOC_MSG_RESULT:
		put_int(o, "ok", m->ok);
		put_int(o, "wc_status", m->wc_status);
		put_int(o, "timed_out", m->timed_out);
		put_int(o, "value", m->value);
		put_str(o, "text", m->text);
		put_int(o, "step", m->step);
		break;
	case DOC_MSG_DO:
		put_int(o, "step", m->step);
		break;
	case DOC_MSG_ERROR:
		put_str(o, "text", m->text);
		break;
	case DOC_MSG_HELLO:
		put_token(o, m);
		break;
	case DOC_MSG_WELCOME:
		put_int(o, "checked", m->checked);
		break;
	}
	s = json_object_to_json_string_ext(o,
					   JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	n = strlen(s);
	if (n > DOC_WIRE_MAX || n + DOC_WIRE_HDR > len) {
		json_object_put(o);
		return -ENOSPC;
	}
	cli_frame_head(&doc_frame_fmt, (unsigned)m->type, (uint32_t)n, buf);
	memcpy(buf + DOC_WIRE_HDR, s, n);
	json_object_put(o);
	return (int)(n + DOC_WIRE_HDR);
}

/* ---- decoding --------------------------------------------------------- */

int doc_frame_len(const uint8_t hdr[DOC_WIRE_HDR], uint32_t *len)
{
	int need = cli_frame_need(&doc_frame_fmt, hdr, DOC_WIRE_HDR, NULL, 0);

	if (need < 0)
		return need;
	if (need == DOC_WIRE_HDR)
		return -EMSGSIZE; /* an empty message: none is */
	*len = (uint32_t)need - DOC_WIRE_HDR;
	return 0;
}

struct dec {
	char *why;
	size_t why_len;
	int failed;
};

__attribute__((format(printf, 2, 3))) static int bad(struct dec *d, const char *fmt, ...)
{
	va_list ap;

	if (!d->failed && d->why && d->why_len) {
		va_start(ap, fmt);
		vsnprintf(d->why, d->why_len, fmt, ap);
		va_end(ap);
	}
	d->failed = 1;
	return -EBADMSG;
}

/* A string field, cut to @cap and made printable. */
static void get_str(struct dec *d, struct json_object *o, const char *k, char *dst, size_t cap)
{
	struct json_object *v;

	dst[0] = '\0';
	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string)) {
		bad(d, "field '%s' missing or not a string", k);
		return;
	}
	cli_clean_text(dst, cap, json_object_get_string(v), (size_t)json_object_get_string_len(v));
}

/* An integer field in [@min, @max]. */
static int64_t get_int(struct dec *d, struct json_object *o, const char *k, int64_t min,
		       int64_t max)
{
	struct json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int)) {
		bad(d, "field '%s' missing or not an integer", k);
		return min;
	}
	/* json-c keeps integers above INT64_MAX as unsigned: those are out of range here */
	x = json_object_get_int64(v);
	if (x < min || x > max || (x == INT64_MAX && json_object_get_uint64(v) != INT64_MAX)) {
		bad(d, "field '%s' out of range", k);
		return min;
	}
	return x;
}

static uint64_t get_u64(struct dec *d, struct json_object *o, const char *k)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) < 0) {
		bad(d, "field '%s' missing or not an unsigned integer", k);
		return 0;
	}
	return json_object_get_uint64(v);
}

/* The hello's token: "" (none) or exactly 32 hex digits, nothing else. */
static void get_token(struct dec *d, struct json_object *o, struct doc_msg *m)
{
	struct json_object *v;
	const char *s;

	if (!json_object_object_get_ex(o, "token", &v) ||
	    !json_object_is_type(v, json_type_string)) {
		bad(d, "field 'token' missing or not a string");
		return;
	}
	s = json_object_get_string(v);
	if (json_object_get_string_len(v) == 0)
		return;
	if (json_object_get_string_len(v) != 2 * DOC_TOKEN_LEN ||
	    cli_unhex(s, 2 * DOC_TOKEN_LEN, m->token, DOC_TOKEN_LEN) != DOC_TOKEN_LEN) {
		bad(d, "a token that is not %d hex digits", 2 * DOC_TOKEN_LEN);
		return;
	}
	m->has_token = 1;
}

static int mtu_ok(int64_t v)
{
	return v == 256 || v == 512 || v == 1024 || v == 2048 || v == 4096;
}

static void get_lines(struct dec *d, struct json_object *o, struct doc_facts *f)
{
	struct json_object *arr;
	size_t n;

	if (!json_object_object_get_ex(o, "lines", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		bad(d, "field 'lines' missing or not an array");
		return;
	}
	n = json_object_array_length(arr);
	if (n > DOC_PEER_LINES) {
		bad(d, "more than %d lines", DOC_PEER_LINES);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *l = json_object_array_get_idx(arr, i);
		struct doc_line *dl = &f->lines[i];

		if (!json_object_is_type(l, json_type_object)) {
			bad(d, "line %zu is not an object", i);
			return;
		}
		get_str(d, l, "check", dl->check, sizeof(dl->check));
		dl->fail = (int)get_int(d, l, "fail", 0, 1);
		get_str(d, l, "text", dl->text, sizeof(dl->text));
		get_str(d, l, "fix", dl->fix, sizeof(dl->fix));
	}
	f->nlines = (int)n;
}

static void get_facts(struct dec *d, struct json_object *o, struct doc_facts *f)
{
	get_str(d, o, "rk_version", f->rk_version, sizeof(f->rk_version));
	get_str(d, o, "kernel", f->kernel, sizeof(f->kernel));
	get_str(d, o, "host", f->host, sizeof(f->host));
	get_str(d, o, "device", f->dev, sizeof(f->dev));
	get_str(d, o, "link_layer", f->link_layer, sizeof(f->link_layer));
	get_str(d, o, "netdev", f->netdev, sizeof(f->netdev));
	get_str(d, o, "address", f->addr, sizeof(f->addr));
	f->port = (int)get_int(d, o, "port", 1, 255);
	f->active_mtu = (int)get_int(d, o, "active_mtu", 256, 4096);
	f->max_mtu = (int)get_int(d, o, "max_mtu", 256, 4096);
	if (!d->failed && (!mtu_ok(f->active_mtu) || !mtu_ok(f->max_mtu)))
		bad(d, "an MTU that is not 256, 512, 1024, 2048 or 4096");
	f->netdev_mtu = (int)get_int(d, o, "netdev_mtu", 0, 1 << 20);
	f->gid_index = (int)get_int(d, o, "gid_index", -1, 255);
	f->roce_v2 = (int)get_int(d, o, "roce_v2", 0, 1);
	f->memlock_soft = get_int(d, o, "memlock_soft", -1, INT64_MAX - 1);
	f->memlock_hard = get_int(d, o, "memlock_hard", -1, INT64_MAX - 1);
	f->cap_ipc_lock = (int)get_int(d, o, "cap_ipc_lock", 0, 1);
	f->nfail = (int)get_int(d, o, "failures", 0, 10000);
	f->nwarn = (int)get_int(d, o, "warnings", 0, 10000);
	get_lines(d, o, f);
	f->step_ms = (int)get_int(d, o, "step_ms", 0, DOC_STEP_MS_MAX);
	f->cm_port = (int)get_int(d, o, "cm_port", 0, 65535);
	f->nonce = (uint32_t)get_int(d, o, "nonce", 0, UINT32_MAX);
	f->seed = get_u64(d, o, "seed");
	f->wr_addr = get_u64(d, o, "wr_addr");
	f->wr_rkey = (uint32_t)get_int(d, o, "wr_rkey", 0, UINT32_MAX);
	f->rd_addr = get_u64(d, o, "rd_addr");
	f->rd_rkey = (uint32_t)get_int(d, o, "rd_rkey", 0, UINT32_MAX);
	if (!d->failed &&
	    (f->wr_addr > UINT64_MAX - DOC_XFER_LEN || f->rd_addr > UINT64_MAX - DOC_XFER_LEN))
		bad(d, "a buffer that wraps around the address space");
}

int doc_msg_decode(const void *buf, size_t len, struct doc_msg *m, char *why, size_t why_len)
{
	struct dec d = {.why = why, .why_len = why_len};
	struct json_tokener *tok;
	struct json_object *o, *v;
	const char *t;
	int r = 0;

	memset(m, 0, sizeof(*m));
	m->wc_status = -1;
	if (why && why_len)
		why[0] = '\0';
	if (len == 0 || len > DOC_WIRE_MAX) {
		if (why && why_len)
			snprintf(why, why_len, "a message of %zu bytes", len);
		return -EMSGSIZE;
	}
	tok = json_tokener_new_ex(DOC_WIRE_DEPTH);
	if (!tok)
		return -ENOMEM;
	o = json_tokener_parse_ex(tok, buf, (int)len);
	if (!o || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len) {
		r = bad(&d, "not one JSON value");
		goto out;
	}
	if (!json_object_is_type(o, json_type_object)) {
		r = bad(&d, "not a JSON object");
		goto out;
	}
	if (get_int(&d, o, "v", 0, INT32_MAX) != DOC_WIRE_VERSION) {
		if (!d.failed) {
			if (why && why_len)
				snprintf(why, why_len, "version %lld, this rk speaks %d",
					 (long long)json_object_get_int64(
					     json_object_object_get(o, "v")),
					 DOC_WIRE_VERSION);
			r = -EPROTO;
		} else {
			r = -EBADMSG;
		}
		goto out;
	}
	if (!json_object_object_get_ex(o, "t", &v) || !json_object_is_type(v, json_type_string)) {
		r = bad(&d, "no message type");
		goto out;
	}
	t = json_object_get_string(v);
	for (int i = DOC_MSG_FACTS; i <= DOC_MSG_LAST; i++)
		if (strcmp(t, type_names[i]) == 0)
			m->type = i;
	switch (m->type) {
	case DOC_MSG_FACTS:
		get_facts(&d, o, &m->facts);
		break;
	case DOC_MSG_RESULT:
		m->ok = (int)get_int(&d, o, "ok", 0, 1);
		m->wc_status = (int)get_int(&d, o, "wc_status", -1, 255);
		m->timed_out = (int)get_int(&d, o, "timed_out", 0, 1);
		m->value = get_int(&d, o, "value", 0, INT32_MAX);
		get_str(&d, o, "text", m->text, sizeof(m->text));
		m->step = (int)get_int(&d, o, "step", 0, DOC_STEP_COUNT - 1);
		break;
	case DOC_MSG_DO:
		m->step = (int)get_int(&d, o, "step", 0, DOC_STEP_COUNT - 1);
		break;
	case DOC_MSG_ERROR:
		get_str(&d, o, "text", m->text, sizeof(m->text));
		break;
	case DOC_MSG_HELLO:
		get_token(&d, o, m);
		break;
	case DOC_MSG_WELCOME:
		m->checked = (int)get_int(&d, o, "checked", 0, 1);
		break;
	default:
		bad(&d, "unknown message type");
		break;
	}
	if (d.failed)
		r = -EBADMSG;
out:
	if (r) {
		int type = m->type;

		memset(m, 0, sizeof(*m));
		m->type = type;
		m->wc_status = -1;
	}
	if (o)
		json_object_put(o);
	json_tokener_free(tok);
	return r;
}
