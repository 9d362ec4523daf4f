/*
 * cli_frame.c - rk's control channel (tools/rk/common/frame.c, chan.c),
 * the frame reader behind rk doctor's, rk matrix's and rk bench's control
 * connections, in their one header layout.
 *
 * The first input byte picks the older header the format recognises
 * (none, rk bench's, rk matrix's), the second the payload bound (0..255
 * bytes), the third the highest type and the fourth the size of the
 * pieces the bytes arrive in; the rest is the stream. Asserts:
 *  - cli_frame_need on a frame's prefixes as a reader grows them: a length
 *    at least the header's and at most header + bound, never shrinking,
 *    or -EBADMSG / -EMSGSIZE / -EPROTO (only with an older header to
 *    recognise, and only where its recogniser says so) with a printable
 *    reason;
 *  - cli_chan_recv on the stream (a closed socketpair, timeout 0: it never
 *    waits) returns exactly the frames the reference reading finds (whole
 *    prefixes that cli_frame_need accepts), in order, then -ECONNRESET,
 *    -EBADMSG or -EMSGSIZE with a printable message;
 *  - the same bytes written a piece at a time to an open socket and read
 *    with cli_chan_feed after each piece give the same frames ("more to
 *    come" meanwhile) and the same end once closed;
 *  - each frame sent again with cli_chan_send is the same bytes;
 *  - no fd is leaked.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "bench_ctl.h"
#include "common/chan.h"
#include "fuzz.h"
#include "matrix_wire.h"

#define MAX_STREAM 65536
#define MAX_FRAMES 256

struct ref {
	size_t at, len; /* the frame's bytes in the stream: header and payload */
};

/* The reference reading: frames while whole prefixes are accepted, then the end. */
static int ref_read(const struct cli_frame_fmt *f, const uint8_t *d, size_t size, struct ref *fr,
		    size_t *n)
{
	size_t pos = 0;
	char why[128];

	*n = 0;
	for (;;) {
		size_t got = 0;
		int need = 0, prev = -1;

		/* Grow the prefix as the reader does: as far as the header says, never further. */
		for (;;) {
			need = cli_frame_need(f, d + pos, got, why, sizeof(why));
			if (need < 0) {
				FUZZ_CHECK(need == -EBADMSG || need == -EMSGSIZE ||
					   (need == -EPROTO && f->older && f->older(d + pos, got)));
				FUZZ_CHECK(why[0] && fuzz_printable(why, sizeof(why)));
				return need;
			}
			FUZZ_CHECK(!f->older || !f->older(d + pos, got));
			FUZZ_CHECK((size_t)need >= CLI_FRAME_HDR &&
				   (size_t)need <= CLI_FRAME_HDR + f->max);
			FUZZ_CHECK(prev < 0 || need >= prev);
			prev = need;
			if ((size_t)need == got)
				break;
			if (pos + (size_t)need > size) {
				/* Cut short: a header is judged on what came of it. */
				if (got == 0 && size > pos) {
					need = cli_frame_need(f, d + pos, size - pos, why,
							      sizeof(why));
					if (need < 0)
						return need;
				}
				return -ECONNRESET;
			}
			got = (size_t)need;
		}
		if (*n == MAX_FRAMES)
			return 1;
		fr[*n].at = pos;
		fr[(*n)++].len = got;
		pos += got;
	}
}

static void check_resend(const struct cli_frame_fmt *f, const struct cli_frame *fr,
			 const uint8_t *bytes, size_t len)
{
	static uint8_t back[CLI_FRAME_HDR + 256 + 1];
	struct cli_chan out;
	int sv[2];

	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	cli_chan_init(&out, sv[0], f);
	FUZZ_CHECK(cli_chan_send(&out, fr->type, fr->data, fr->len, 1000, NULL) == 0);
	FUZZ_CHECK(recv(sv[1], back, sizeof(back), MSG_DONTWAIT) == (ssize_t)len);
	FUZZ_CHECK(memcmp(back, bytes, len) == 0);
	cli_chan_free(&out);
	close(sv[0]);
	close(sv[1]);
}

static void same(const struct cli_frame_fmt *f, const struct cli_frame *fr, const uint8_t *d,
		 const struct ref *r)
{
	size_t hdr = CLI_FRAME_HDR;

	FUZZ_CHECK(fr->len == r->len - hdr && fr->type == cli_frame_type(d + r->at));
	FUZZ_CHECK(fr->type >= 1 && fr->type <= f->type_max && fr->len <= f->max);
	FUZZ_CHECK(fr->len == 0 || memcmp(fr->data, d + r->at + hdr, fr->len) == 0);
}

/* Choice @k: the older header of no channel, of rk bench's, of rk matrix's. */
static void older(struct cli_frame_fmt *f, uint8_t k)
{
	const struct cli_frame_fmt *of[3] = {NULL, &bench_frame_fmt, &mx_frame_fmt};

	f->older = of[k % 3] ? of[k % 3]->older : NULL;
	f->older_name = of[k % 3] ? of[k % 3]->older_name : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ref fr[MAX_FRAMES];
	struct cli_frame_fmt f = {.magic = {'R', 'K', 'T', 'F'}, .who = "rk test"};
	struct cli_chan ch;
	struct cli_frame got;
	struct rk_error err;
	size_t nref = 0, k = 0, piece;
	int sv[2], r, end, fd0 = fuzz_lowest_fd();

	if (size < 4 || size > MAX_STREAM)
		return 0;
	older(&f, data[0]);
	f.max = data[1];
	f.type_max = data[2] ? data[2] : 1;
	piece = (size_t)data[3] % 16 + 1;
	data += 4;
	size -= 4;
	end = ref_read(&f, data, size, fr, &nref);

	/* All at once, from a closed stream. */
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	FUZZ_CHECK(size == 0 || send(sv[1], data, size, MSG_NOSIGNAL) == (ssize_t)size);
	close(sv[1]);
	cli_chan_init(&ch, sv[0], &f);
	for (;;) {
		rk_error_clear(&err);
		r = cli_chan_recv(&ch, &got, 0, &err);
		if (r)
			break;
		FUZZ_CHECK(k < nref);
		same(&f, &got, data, &fr[k]);
		check_resend(&f, &got, data + fr[k].at, fr[k].len);
		if (++k == MAX_FRAMES)
			break;
	}
	if (end != 1) {
		FUZZ_CHECK(k == nref && r == end);
		FUZZ_CHECK(err.err == -r && fuzz_printable(err.msg, sizeof(err.msg)));
	}
	cli_chan_free(&ch);
	close(sv[0]);

	/* A piece at a time, the socket open until the last. */
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	cli_chan_init(&ch, sv[0], &f);
	k = 0;
	r = 0;
	for (size_t pos = 0; pos < size && r >= 0 && k < MAX_FRAMES;) {
		size_t n = size - pos < piece ? size - pos : piece;

		FUZZ_CHECK(send(sv[1], data + pos, n, MSG_NOSIGNAL) == (ssize_t)n);
		pos += n;
		while ((r = cli_chan_feed(&ch, &got, &err)) == 1) {
			FUZZ_CHECK(k < nref);
			same(&f, &got, data, &fr[k]);
			if (++k == MAX_FRAMES)
				break;
		}
	}
	close(sv[1]);
	if (end != 1) {
		while (r >= 0 && (r = cli_chan_feed(&ch, &got, &err)) == 1) {
			FUZZ_CHECK(k < nref);
			same(&f, &got, data, &fr[k]);
			k++;
		}
		FUZZ_CHECK(k == nref && r == end);
	}
	cli_chan_free(&ch);
	close(sv[0]);
	FUZZ_CHECK(fuzz_lowest_fd() == fd0);
	return 0;
}

/* A seed: the 4 choice bytes, then @n frames. */
static size_t stream(uint8_t *buf, uint8_t older_k, uint8_t max, uint8_t type_max, uint8_t piece,
		     int n)
{
	struct cli_frame_fmt f = {.magic = {'R', 'K', 'T', 'F'}, .type_max = type_max, .max = max};
	size_t len = 4;

	buf[0] = older_k;
	buf[1] = max;
	buf[2] = type_max;
	buf[3] = piece;
	for (int i = 0; i < n; i++) {
		uint32_t plen = (uint32_t)(i * 7) % ((uint32_t)max + 1);

		len += cli_frame_head(&f, (unsigned)(i % type_max) + 1, plen, buf + len);
		memset(buf + len, 'a' + i, plen);
		len += plen;
	}
	return len;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static const uint8_t older_bench[8] = {'R', 'K', 'T', 'F', 0, 1, 0, 88};
	static const uint8_t older_matrix[10] = {'R', 'K', 'T', 'F', 0, 0, 0, 2, '{', '}'};
	static uint8_t buf[8192];
	size_t n;

	emit("frames", buf, stream(buf, 0, 64, 6, 3, 5));
	emit("frames-bench", buf, stream(buf, 1, 255, 11, 7, 6));
	emit("frames-matrix", buf, stream(buf, 2, 200, 1, 0, 4));
	n = stream(buf, 0, 16, 2, 1, 2);
	emit("partial", buf, n - 3);
	memcpy(buf + 4, "GET / HTTP/1.0\r\n\r\n", 19); /* 18 bytes sent */
	emit("stranger", buf, 22);
	n = stream(buf, 2, 16, 1, 5, 1);
	memset(buf + 8, 0xff, 4); /* a length of 4 GiB */
	emit("huge", buf, n);
	n = stream(buf, 1, 16, 3, 2, 2);
	buf[4 + 9 + 8] = 9; /* the second frame's type, past the highest */
	emit("bad-type", buf, n);
	/* rk bench's older header: "RKBC", u16 type 1, u16 length 88 */
	n = stream(buf, 1, 255, 11, 4, 0);
	memcpy(buf + n, older_bench, sizeof(older_bench));
	emit("older-bench", buf, n + 8 + 88);
	/* rk matrix's older header: "RKMX", u32 length, the JSON text */
	n = stream(buf, 2, 255, 1, 3, 0);
	memcpy(buf + n, older_matrix, sizeof(older_matrix));
	emit("older-matrix", buf, n + sizeof(older_matrix));
}
