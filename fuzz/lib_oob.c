/*
 * lib_oob.c - librdmakit's out-of-band connection message, decoded on its
 * own and as rk_oob_exchange reads it from a TCP peer (here a socketpair
 * holding the input, closed after it).
 *
 * Asserts, for any bytes:
 *  - rk_oob_decode accepts exactly RK_OOB_MSG_LEN bytes that rk_oob_encode
 *    writes back byte for byte, with every field in range (24-bit QP
 *    number and PSN, MTU code, a buffer that does not wrap);
 *  - rk_oob_exchange succeeds exactly when the first RK_OOB_MSG_LEN bytes
 *    of the stream decode, and then gives the same info; it returns (the
 *    peer's end is closed: no wait outlives the input) and leaks no fd.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <rdmakit/oob.h>

#include "fuzz.h"

static const struct rk_oob_info local = {.lid = 1, .qpn = 0x11, .psn = 0x22, .mtu = 3};

static int same_info(const struct rk_oob_info *a, const struct rk_oob_info *b)
{
	return a->lid == b->lid && memcmp(a->gid, b->gid, sizeof(a->gid)) == 0 &&
	       a->qpn == b->qpn && a->psn == b->psn && a->mtu == b->mtu &&
	       a->buf_addr == b->buf_addr && a->buf_len == b->buf_len &&
	       a->buf_rkey == b->buf_rkey && a->app == b->app;
}

static void check_exchange(const uint8_t *data, size_t size, int decoded,
			   const struct rk_oob_info *want)
{
	struct rk_oob_info got;
	struct rk_error err;
	int sv[2], r, fd0 = fuzz_lowest_fd();

	if (size > 4096 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	FUZZ_CHECK(size == 0 || send(sv[1], data, size, MSG_NOSIGNAL) == (ssize_t)size);
	shutdown(sv[1], SHUT_WR);
	r = rk_oob_exchange(sv[0], &local, &got, 5000, &err);
	FUZZ_CHECK((r == 0) == decoded);
	FUZZ_CHECK(r != -ETIMEDOUT);
	if (r == 0)
		FUZZ_CHECK(same_info(&got, want));
	close(sv[0]);
	close(sv[1]);
	FUZZ_CHECK(fuzz_lowest_fd() == fd0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rk_oob_info in, first;
	struct rk_error err;
	uint8_t enc[RK_OOB_MSG_LEN];
	int decoded = 0;

	memset(&in, 0, sizeof(in));
	if (rk_oob_decode(data, size, &in, &err) == 0) {
		FUZZ_CHECK(size == RK_OOB_MSG_LEN);
		FUZZ_CHECK(in.qpn && in.qpn <= 0xffffff && in.psn <= 0xffffff);
		FUZZ_CHECK(in.mtu >= 1 && in.mtu <= 5);
		FUZZ_CHECK(in.buf_addr + in.buf_len >= in.buf_addr);
		FUZZ_CHECK(rk_oob_encode(&in, enc, sizeof(enc)) == RK_OOB_MSG_LEN);
		FUZZ_CHECK(memcmp(enc, data, RK_OOB_MSG_LEN) == 0);
	}
	/* The stream: the first message decides, whatever follows it. */
	memset(&first, 0, sizeof(first));
	if (size >= RK_OOB_MSG_LEN)
		decoded = rk_oob_decode(data, RK_OOB_MSG_LEN, &first, &err) == 0;
	check_exchange(data, size, decoded, &first);
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct rk_oob_info i = {.lid = 7,
				.qpn = 0x123456,
				.psn = 0xabcdef,
				.mtu = 5,
				.buf_addr = 0x7f0000000000ull,
				.buf_len = 1 << 20,
				.buf_rkey = 0x42,
				.app = 3};
	uint8_t buf[RK_OOB_MSG_LEN * 2];

	memset(i.gid, 0xfe, sizeof(i.gid));
	rk_oob_encode(&i, buf, sizeof(buf));
	emit("oob", buf, RK_OOB_MSG_LEN);
	memcpy(buf + RK_OOB_MSG_LEN, buf, RK_OOB_MSG_LEN);
	emit("oob-twice", buf, sizeof(buf));
	emit("oob-header", buf, 8);
}
