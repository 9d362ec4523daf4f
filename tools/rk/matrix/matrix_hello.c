/* matrix_hello.c - a rank's hello, decoded with every field bounded; see matrix_hello.h. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "matrix_hello.h"
#include "matrix_sched.h"
#include "matrix_wire.h"

const char *mx_auth_name(enum mx_auth_kind k)
{
	switch (k) {
	case MX_AUTH_TOKEN:
		return "token";
	case MX_AUTH_MUNGE:
		return "munge";
	default:
		return "none";
	}
}

/* Member @k, a string of at most @max bytes: its text and length, or NULL. */
static const char *str_of(json_object *o, const char *k, size_t max, size_t *len)
{
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	*len = (size_t)json_object_get_string_len(v);
	return *len <= max ? json_object_get_string(v) : NULL;
}

static int proof(json_object *m, struct mx_hello *h, char *why, size_t why_len)
{
	const char *kind, *s;
	size_t len;
	int n;

	kind = str_of(m, "auth", 16, &len);
	if (!kind) {
		snprintf(why, why_len, "a hello without \"auth\"");
		return -1;
	}
	if (!strcmp(kind, "none")) {
		h->auth = MX_AUTH_NONE;
		return 0;
	}
	if (!strcmp(kind, "token")) {
		h->auth = MX_AUTH_TOKEN;
		s = str_of(m, "token", 2 * MX_TOKEN_MAX, &len);
		n = s ? cli_unhex(s, len, h->token, MX_TOKEN_MAX) : -1;
		if (n < (int)MX_TOKEN_MIN) {
			snprintf(why, why_len, "a token that is no hex text of %u to %u bytes",
				 MX_TOKEN_MIN, MX_TOKEN_MAX);
			return -1;
		}
		h->token_len = (uint32_t)n;
		return 0;
	}
	if (!strcmp(kind, "munge")) {
		h->auth = MX_AUTH_MUNGE;
		s = str_of(m, "cred", MX_CRED_MAX - 1, &len);
		for (size_t i = 0; s && i < len; i++)
			if (s[i] < 0x21 || s[i] > 0x7e)
				s = NULL;
		if (!s || !len) {
			snprintf(why, why_len,
				 "a MUNGE credential that is no text of 1 to %u bytes",
				 MX_CRED_MAX - 1);
			return -1;
		}
		memcpy(h->cred, s, len);
		h->cred[len] = 0;
		return 0;
	}
	snprintf(why, why_len, "an unknown kind of proof");
	return -1;
}

int mx_hello_decode(json_object *m, struct mx_hello *h, char *why, size_t why_len)
{
	memset(h, 0, sizeof(*h));
	if (strcmp(mx_type(m), "hello") || mx_get_u32(m, "proto", UINT32_MAX, &h->proto)) {
		snprintf(why, why_len, "not a hello of rk matrix protocol 2 or later");
		return -1;
	}
	if (mx_get_u32(m, "size", MX_MAX_RANKS, &h->size) ||
	    mx_get_u32(m, "rank", MX_MAX_RANKS, &h->rank) ||
	    mx_get_str(m, "host", h->host, sizeof(h->host)) ||
	    mx_get_str(m, "addr", h->addr, sizeof(h->addr))) {
		snprintf(why, why_len, "a malformed hello");
		return -1;
	}
	if (json_object_object_get_ex(m, "params", &h->params) &&
	    !json_object_is_type(h->params, json_type_object))
		h->params = NULL;
	return proof(m, h, why, why_len);
}
