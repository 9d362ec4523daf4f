/*
 * lib_reply.c - what a client takes from the server's answer to its
 * connect request (rdma_cm private data): the accept reply ("RP", u16
 * length, the application's bytes) and, on a reject, the reason and text
 * that end up in the client's error message.
 *
 * Both readers are private to lib/cm_event.c, so this file includes it.
 *
 * Asserts, for any bytes:
 *  - a reply is kept only when it is well framed, within RK_CM_REPLY_MAX
 *    and the bytes received, and then exactly those bytes; otherwise none;
 *  - the error message of a rejected connection is printable (the peer's
 *    text is filtered on its way in), whatever the peer sent.
 */
#include "../lib/cm_event.c" // NOLINT(bugprone-suspicious-include)

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rk_conn conn;
	struct rdma_cm_event ev;
	struct rk_error err;
	size_t n;

	if (size > 255) /* private_data_len is a byte */
		return 0;
	memset(&conn, 0, sizeof(conn));
	memset(&ev, 0, sizeof(ev));
	ev.param.conn.private_data = size ? data : NULL;
	ev.param.conn.private_data_len = (uint8_t)size;
	keep_reply(&conn, &ev.param.conn);
	FUZZ_CHECK(conn.peer_data_len <= RK_CM_REPLY_MAX);
	n = size >= 4 ? (size_t)data[2] << 8 | data[3] : 0;
	if (size >= 4 && data[0] == 'R' && data[1] == 'P' && n <= RK_CM_REPLY_MAX &&
	    n + 4 <= size) {
		FUZZ_CHECK(conn.peer_data_len == n);
		FUZZ_CHECK(memcmp(conn.peer_data, data + 4, n) == 0);
	} else {
		FUZZ_CHECK(conn.peer_data_len == 0);
	}
	ev.event = RDMA_CM_EVENT_REJECTED;
	ev.status = IB_CM_REJ_CONSUMER_DEFINED;
	rk_error_clear(&err);
	FUZZ_CHECK(rejected(&conn, &ev, &err) == -ECONNREFUSED);
	FUZZ_CHECK(fuzz_printable(err.msg, sizeof(err.msg)));
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	uint8_t buf[4 + RK_CM_REPLY_MAX] = {'R', 'P', 0, 16};
	int n;

	memset(buf + 4, 0x3c, 16);
	emit("reply", buf, 20);
	emit("reply-padded", buf, 56);
	n = rk_reject_encode(RK_REJECT_BUSY, "server busy: 16 clients", buf, sizeof(buf));
	emit("reject", buf, (size_t)n);
}
