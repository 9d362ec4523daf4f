/* doctor_gate.c - rk doctor --listen's admission of a peer (see doctor_gate.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "doctor_gate.h"

static void say(char *why, size_t why_len, const char *text)
{
	if (why && why_len)
		snprintf(why, why_len, "%s", text);
}

int doc_hello_from_rk(const uint8_t *buf, size_t got)
{
	return memcmp(buf, DOC_WIRE_MAGIC, got < 4 ? got : 4) == 0;
}

int doc_hello_need(const uint8_t *buf, size_t got, char *why, size_t why_len)
{
	char text[224];
	int need = cli_frame_need(&doc_hello_fmt, buf, got, text, sizeof(text));
	uint32_t len = got >= 8 ? cli_frame_len(buf) : 1;

	if (need == -EMSGSIZE || len == 0) {
		/* rk doctor protocol 1 began with its facts, a few KiB */
		snprintf(text, sizeof(text),
			 "a first message of %u bytes: rk doctor protocol %d begins with a hello "
			 "of at most %d (install the same rk version on both hosts)",
			 len, DOC_WIRE_VERSION, DOC_HELLO_MAX);
		need = -EMSGSIZE;
	}
	if (need < 0)
		say(why, why_len, text);
	return need;
}

int doc_hello_judge(const uint8_t *frame, size_t len, const uint8_t *token, int *checked, char *why,
		    size_t why_len)
{
	struct doc_msg m;
	char detail[160], text[256];
	int r = doc_hello_need(frame, len, why, why_len);

	*checked = 0;
	if (r < 0)
		return r;
	if ((size_t)r != len) {
		say(why, why_len, "not one whole hello");
		return -EBADMSG;
	}
	r = doc_msg_decode(frame + DOC_WIRE_HDR, len - DOC_WIRE_HDR, &m, detail, sizeof(detail));
	if (r == -EPROTO) {
		snprintf(text, sizeof(text),
			 "another rk doctor protocol: %s (install the same rk version on both "
			 "hosts)",
			 detail);
		say(why, why_len, text);
		return -EPROTO;
	}
	if (r) {
		snprintf(text, sizeof(text), "not an rk doctor hello: %s", detail);
		say(why, why_len, text);
		return -EBADMSG;
	}
	if (m.type != DOC_MSG_HELLO || cli_frame_type(frame) != DOC_MSG_HELLO) {
		say(why, why_len, "not an rk doctor hello: another message first");
		return -EBADMSG;
	}
	if (!token)
		return 0;
	if (!m.has_token) {
		say(why, why_len,
		    "this rk doctor --listen requires a token: rk doctor --token-file FILE, "
		    "with the token it was started with");
		return -EACCES;
	}
	if (!cli_equal_ct(m.token, token, DOC_TOKEN_LEN)) {
		say(why, why_len,
		    "wrong token: --token-file must hold the token this rk doctor --listen was "
		    "started with");
		return -EACCES;
	}
	*checked = 1;
	return 0;
}
