/*
 * doctor_wire.h - the messages `rk doctor HOST` and `rk doctor --listen`
 * exchange on their TCP control connection: the client's hello (with its
 * token, if any) and the listener's welcome, then each side's facts, the
 * client's "do this step" and the listener's result of it.
 *
 * Frame: rk's control frame (common/frame.h) with magic "RKDR", a payload
 * of 1..DOC_WIRE_MAX bytes and the message's type (enum doc_msg_type), then
 * a JSON object: {"v": 3, "t": "hello" | "welcome" | "facts" | "do" |
 * "result" | "error", ...}, whose "t" must be the frame's type. The hello comes first and alone, at
 * most DOC_HELLO_MAX bytes: the listener tells nothing about itself (not even its facts) to a peer
 * before it has proven to be an rk doctor client with the right token. Version 2 added the hello; 1
 * began with the facts; 3 has the type byte in the frame header (rk's one frame format). JSON
 * because the facts are a report's facts (json-c already writes and parses them); the decoder is
 * what stands between the peer and the rest of rk doctor: sizes bounded, nesting limited, every
 * field typed and range-checked, unknown keys ignored, text cut to its field and made printable
 * (cli_clean_text).
 *
 * The codec is pure (no I/O, no globals) and reentrant; the frame I/O is
 * in doctor_peer.c.
 */
#ifndef RK_DOCTOR_WIRE_H
#define RK_DOCTOR_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/frame.h"

#define DOC_WIRE_MAGIC	 "RKDR"
#define DOC_WIRE_VERSION 3
#define DOC_WIRE_HDR	 CLI_FRAME_HDR /* magic, length, type */
#define DOC_WIRE_MAX	 16384	       /* payload bytes */
#define DOC_HELLO_MAX	 256	       /* payload bytes of the first message, the hello */
#define DOC_TOKEN_LEN	 16	       /* the token's digest (CP_TOKEN_LEN, as rk copy) */
#define DOC_WIRE_DEPTH	 4	       /* JSON nesting: message, lines array, line object */
#define DOC_PEER_LINES	 8	       /* the peer's ! and ✗ lines carried in its facts */
#define DOC_XFER_LEN	 4096u	       /* every verified transfer */
#define DOC_APP_ID	 0x726b6472u   /* "rkdr": the rdma_cm hello of rk doctor */
#define DOC_STEP_MS_MIN	 100
#define DOC_STEP_MS_MAX	 60000
#define DOC_RTT_ROUNDS	 16

/* The steps of the link test, in order, named from the client's side. */
enum doc_step {
	DOC_STEP_CONNECT = 0, /* rdma_cm connection */
	DOC_STEP_SEND_OUT,    /* SEND client -> listener */
	DOC_STEP_SEND_IN,     /* SEND listener -> client */
	DOC_STEP_WRITE_OUT,   /* client writes the listener's memory */
	DOC_STEP_WRITE_IN,    /* listener writes the client's memory */
	DOC_STEP_READ_OUT,    /* client reads the listener's memory */
	DOC_STEP_READ_IN,     /* listener reads the client's memory */
	DOC_STEP_RTT,	      /* SEND ping-pong, DOC_RTT_ROUNDS times */
	DOC_STEP_COUNT,
};

enum doc_msg_type {
	DOC_MSG_FACTS = 1,
	DOC_MSG_DO,
	DOC_MSG_RESULT,
	DOC_MSG_ERROR,
	DOC_MSG_HELLO,	 /* client, first: "I am rk doctor", and its token */
	DOC_MSG_WELCOME, /* listener: the hello passed; facts may follow */
	DOC_MSG_LAST = DOC_MSG_WELCOME,
};

/* One ! or ✗ line of a side's local checks. */
struct doc_line {
	char check[16];
	int fail; /* 1 ✗, 0 ! */
	char text[256];
	char fix[256];
};

/* What one side tells the other about itself and its end of the link test. */
struct doc_facts {
	char rk_version[32];
	char kernel[64];
	char host[64];
	char dev[64];
	char link_layer[16];  /* "Ethernet", "InfiniBand" */
	char netdev[16];      /* "" when not RoCE or unknown */
	char addr[48];	      /* the address the link test uses */
	int port;	      /* 1..255 */
	int active_mtu;	      /* bytes, 256..4096 */
	int max_mtu;	      /* bytes, 256..4096 */
	int netdev_mtu;	      /* bytes, 0 unknown */
	int gid_index;	      /* -1..255 */
	int roce_v2;	      /* 0 / 1 */
	int64_t memlock_soft; /* bytes, -1 unlimited */
	int64_t memlock_hard;
	int cap_ipc_lock; /* 0 / 1 */
	int nfail, nwarn; /* the side's local checks */
	int nlines;
	struct doc_line lines[DOC_PEER_LINES];
	/* The link test. */
	int step_ms;		   /* the client's per-step deadline (client facts only) */
	int cm_port;		   /* listener: its rdma_cm port; client: 0 */
	uint32_t nonce;		   /* client: the hello's app_arg the listener accepts */
	uint64_t seed;		   /* client: the data patterns' seed */
	uint64_t wr_addr, rd_addr; /* DOC_XFER_LEN bytes the peer may write / read */
	uint32_t wr_rkey, rd_rkey;
};

struct doc_msg {
	int type;		      /* enum doc_msg_type */
	struct doc_facts facts;	      /* FACTS */
	int step;		      /* DO, RESULT: enum doc_step */
	int ok;			      /* RESULT */
	int wc_status;		      /* RESULT: a failed completion's status, -1 none */
	int timed_out;		      /* RESULT: the step's deadline passed first */
	int64_t value;		      /* RESULT: a number (path MTU), 0 none */
	char text[256];		      /* RESULT, ERROR */
	int has_token;		      /* HELLO: a token follows (else none) */
	uint8_t token[DOC_TOKEN_LEN]; /* HELLO: the digest of the client's token */
	int checked;		      /* WELCOME: the listener checked the token */
};

/* doc_step_name - "connect", "send out" ... ("?" past the end). */
const char *doc_step_name(int step);

/* doc_msg_type_name - "facts", "do" ... ("?" for a type rk doctor does not know). */
const char *doc_msg_type_name(int type);

/*
 * doc_msg_encode - @m as a whole frame (header and JSON) into @buf.
 * Returns the frame's length, or -ENOSPC / -EINVAL (a field out of range).
 */
int doc_msg_encode(const struct doc_msg *m, uint8_t *buf, size_t len);

/* rk doctor's frames (DOC_WIRE_MAX), and the bound on its first, the hello (DOC_HELLO_MAX). */
extern const struct cli_frame_fmt doc_frame_fmt, doc_hello_fmt;

/*
 * doc_frame_len - the payload length a whole frame header announces: 0
 * with *@len set, -EBADMSG (not "RKDR": not rk doctor; a type it does not
 * know) or -EMSGSIZE (empty, or over DOC_WIRE_MAX).
 */
int doc_frame_len(const uint8_t hdr[DOC_WIRE_HDR], uint32_t *len);

/*
 * doc_msg_decode - parse one payload of @len bytes into @m (cleared first).
 * Returns 0, or -EBADMSG (not JSON, not an object, a field missing, of the
 * wrong type or out of range), -EPROTO (another version), -EMSGSIZE; @why
 * (may be NULL) says which, in printable text.
 */
int doc_msg_decode(const void *buf, size_t len, struct doc_msg *m, char *why, size_t why_len);

#endif
