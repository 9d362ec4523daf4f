/*
 * matrix_hello.h - what a rank says when it joins rank 0 (protocol
 * MX_PROTO), and the hex text that carries a token, a pair's keys.
 *
 * Hello: {"t": "hello", "proto": 3, "rank": R, "size": N, "host": NAME,
 * "addr": RDMA-ADDRESS, "params": {...}, "auth": "munge" | "token" |
 * "none", and "cred": MUNGE-CREDENTIAL (munge) or "token": HEX (token)}.
 * Everything in it is network input: mx_hello_decode bounds every field
 * before rank 0 looks at it, and nothing in it counts before
 * mx_auth_check (matrix_auth.h) has accepted its proof.
 */
#ifndef RK_MATRIX_HELLO_H
#define RK_MATRIX_HELLO_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/*
 * Protocol 2: hellos carry a proof (matrix_auth.h), pairs their keys;
 * 3: rk's one control frame header, with a type byte (matrix_wire.h).
 */
#define MX_PROTO     3u
#define MX_TOKEN_MIN 16u	 /* bytes of a --token-file secret, at least ... */
#define MX_TOKEN_MAX 256u	 /* ... and at most */
#define MX_CRED_MAX  4096u	 /* a MUNGE credential's text (a few hundred bytes in practice) */
#define MX_HELLO_MAX (16u << 10) /* a hello frame's bytes */
/* A pair's keys for one leg: the client proves itself with the first half, the server with the
 * second. */
#define MX_KEY_LEN 32u

enum mx_auth_kind {
	MX_AUTH_NONE = 0, /* --no-auth */
	MX_AUTH_TOKEN,	  /* --token-file */
	MX_AUTH_MUNGE,	  /* a MUNGE credential, under Slurm */
};

struct mx_hello {
	uint32_t proto, rank, size;
	char host[64];
	char addr[64];
	json_object *params; /* borrowed from the message, or NULL */
	enum mx_auth_kind auth;
	uint8_t token[MX_TOKEN_MAX]; /* MX_AUTH_TOKEN */
	uint32_t token_len;
	char cred[MX_CRED_MAX]; /* MX_AUTH_MUNGE, NUL-terminated */
};

/* mx_auth_name - "none", "token", "munge". */
const char *mx_auth_name(enum mx_auth_kind k);

/*
 * mx_hello_decode - the hello @m into @h. Returns 0, or -1 with why in
 * @why: not a hello, a field missing or of the wrong type, out of range
 * (rank, size < MX_MAX_RANKS), a token not hex or of a length outside
 * [MX_TOKEN_MIN, MX_TOKEN_MAX], a credential longer than MX_CRED_MAX - 1
 * or not printable ASCII. The protocol version is decoded, not checked.
 */
int mx_hello_decode(json_object *m, struct mx_hello *h, char *why, size_t why_len);

#endif
