/*
 * bench_ctl.c - rk bench's control channel: the frame splitter behind
 * bench_ctl_recv (tools/rk/common/chan.c), fed the input as a TCP peer would send it (a socketpair
 * holding the input, closed after it).
 *
 * Asserts, for any bytes:
 *  - bench_ctl_recv returns the frames a plain reading of the format finds
 *    ("RKBC", u32 length <= BENCH_MSG_MAX, u8 type, payload), in order,
 *    heartbeats skipped; then -EREMOTEIO at an ERROR frame, -EBADMSG at a
 *    bad magic (from its first wrong byte) or type or a heartbeat not of
 *    8 bytes, -EPROTO at the header of rk bench before PARAMS version 5
 *    ("RKBC", u16 type 1..11, u16 length <= 256), -EMSGSIZE at a length
 *    over BENCH_MSG_MAX, -ECONNRESET at the end of the stream;
 *  - beat_count is the highest count the heartbeats read so far claimed;
 *  - each frame it returns, sent again with bench_ctl_send, is the same
 *    bytes as the input frame;
 *  - no fd is leaked, no call waits (the stream is closed).
 *  - the peer's ERROR text reaches the error message printable (filtered).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <rdmakit/wire.h>

#include "bench_ctl.h"
#include "fuzz.h"

#define MAX_STREAM 65536
#define HDR	   CLI_FRAME_HDR

/* The reference reading of the frame at @pos: 1 a frame, or the expected error. */
static int ref_frame(const uint8_t *d, size_t size, size_t pos, unsigned *type, size_t *len)
{
	size_t avail = size - pos;

	/* A stranger is known from its first wrong byte, before a whole header. */
	if (memcmp(d + pos, "RKBC", avail < 4 ? avail : 4))
		return -EBADMSG;
	if (avail < 8)
		return -ECONNRESET;
	if (d[pos + 4] == 0 && d[pos + 5] >= 1 && d[pos + 5] <= 11 &&
	    ((size_t)d[pos + 6] << 8 | d[pos + 7]) <= 256)
		return -EPROTO;
	*len = rk_get32(d + pos + 4);
	if (*len > BENCH_MSG_MAX)
		return -EMSGSIZE;
	if (avail < HDR)
		return -ECONNRESET;
	*type = d[pos + 8];
	if (*type == 0 || *type >= BM_TYPE_MAX)
		return -EBADMSG;
	if (avail < HDR + *len)
		return -ECONNRESET;
	if (*type == BM_HEARTBEAT && *len != 8)
		return -EBADMSG;
	return *type == BM_ERROR ? -EREMOTEIO : 1;
}

/* bench_ctl_send @m through a socketpair: the bytes must be the input frame. */
static void check_resend(const struct bench_msg *m, const uint8_t *frame)
{
	uint8_t back[HDR + BENCH_MSG_MAX];
	struct bench_ctl out;
	int sv[2];

	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	bench_ctl_init(&out, sv[0]);
	FUZZ_CHECK(bench_ctl_send(&out, m->type, m->data, m->len, 1000, NULL) == 0);
	FUZZ_CHECK(recv(sv[1], back, sizeof(back), MSG_DONTWAIT) == HDR + m->len);
	FUZZ_CHECK(memcmp(back, frame, HDR + m->len) == 0);
	bench_ctl_close(&out);
	close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bench_ctl in;
	struct bench_msg m;
	struct rk_error err;
	size_t pos = 0, len = 0;
	uint64_t beat = 0;
	unsigned type = 0;
	int sv[2], r, want, fd0 = fuzz_lowest_fd();

	if (size > MAX_STREAM)
		return 0;
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	FUZZ_CHECK(size == 0 || send(sv[1], data, size, MSG_NOSIGNAL) == (ssize_t)size);
	close(sv[1]);
	bench_ctl_init(&in, sv[0]);
	for (;;) {
		while ((want = ref_frame(data, size, pos, &type, &len)) == 1 &&
		       type == BM_HEARTBEAT) {
			uint64_t n = rk_get64(data + pos + HDR);

			beat = n > beat ? n : beat;
			pos += HDR + len;
		}
		rk_error_clear(&err);
		r = bench_ctl_recv(&in, &m, 0, &err);
		FUZZ_CHECK(in.beat_count == beat);
		FUZZ_CHECK(r == (want == 1 ? 0 : want));
		if (r)
			break;
		FUZZ_CHECK(m.type == type && m.len == len);
		FUZZ_CHECK(memcmp(m.data, data + pos + HDR, len) == 0);
		check_resend(&m, data + pos);
		pos += HDR + len;
	}
	FUZZ_CHECK(err.err == -r && err.msg[0]);
	FUZZ_CHECK(fuzz_printable(err.msg, sizeof(err.msg)));
	bench_ctl_close(&in);
	FUZZ_CHECK(fuzz_lowest_fd() == fd0);
	return 0;
}

static size_t frame(uint8_t *p, unsigned type, const void *payload, size_t len)
{
	p[0] = 'R';
	p[1] = 'K';
	p[2] = 'B';
	p[3] = 'C';
	rk_put32(p + 4, (uint32_t)len);
	p[8] = (uint8_t)type;
	if (len)
		memcpy(p + HDR, payload, len);
	return HDR + len;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	/* rk bench before PARAMS version 5: "RKBC", u16 type (PARAMS), u16 length */
	static const uint8_t older[8] = {'R', 'K', 'B', 'C', 0, BM_PARAMS, 0, 88};
	static uint8_t buf[4096];
	uint8_t go[8] = {0, 0, 16, 0, 0, 0, 0, 1}, big[BENCH_MSG_MAX];
	uint8_t beat1[8] = {0, 0, 0, 0, 0, 0, 0, 7}, beat2[8] = {0, 0, 0, 0, 0, 0, 1, 0};
	size_t n = 0;

	memset(big, 0xa5, sizeof(big));
	n += frame(buf + n, BM_ACCEPT, NULL, 0);
	n += frame(buf + n, BM_HEARTBEAT, beat1, sizeof(beat1));
	n += frame(buf + n, BM_GO, go, sizeof(go));
	n += frame(buf + n, BM_HEARTBEAT, beat2, sizeof(beat2));
	n += frame(buf + n, BM_HEARTBEAT, beat1, sizeof(beat1));
	n += frame(buf + n, BM_DONE, go, sizeof(go));
	n += frame(buf + n, BM_RESULT, big, sizeof(big));
	emit("run", buf, n);
	n = frame(buf, BM_GO, go, sizeof(go));
	n += frame(buf + n, BM_ERROR, "peer failed: out of memory", 26);
	emit("error", buf, n);
	n = frame(buf, BM_REFUSE, "size: 0 is outside 1..8388608", 29);
	emit("refuse", buf, n);
	emit("partial", buf, 12);
	/* terminal escapes in the peer's text: clear screen, set title */
	n = frame(buf, BM_ERROR, "\033[2J\033]0;pwned\007 failed", 21);
	emit("regress-error-escapes", buf, n);
	/* a heartbeat without its progress count (rk before parameter version 2) */
	n = frame(buf, BM_HEARTBEAT, NULL, 0);
	emit("regress-heartbeat-empty", buf, n);
	memcpy(buf, older, sizeof(older));
	memset(buf + 8, 0, 88);
	emit("older-params", buf, 8 + 88);
}
