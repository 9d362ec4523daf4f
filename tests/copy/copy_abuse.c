/*
 * copy_abuse.c - rk copy clients that try to make rk serve hold too much
 * or tell too much, speaking the wire protocol directly (copy_proto.h).
 *
 *   copy_abuse open ADDR PORT TAG N RELEASE
 *	BEGIN (WAIT) N files named TAG-i and never send their data. Each
 *	must be answered READY or refused with CP_E_OPEN_LIMIT (a named
 *	limit, never an I/O error such as EMFILE). Prints "holding: ..." once
 *	all are answered, holds them until the file RELEASE exists (2 minutes
 *	at most), then aborts them and says bye.
 *   copy_abuse idle ADDR PORT EVERY_MS MAX_S
 *	Post an empty slot every EVERY_MS ms. The server must drop the
 *	session (at its --idle) within MAX_S seconds; prints when it did.
 *   copy_abuse oracle ADDR PORT NAME SIZE SECRET...
 *	With --resume's flag, BEGIN NAME stating SIZE and a proof of random
 *	hashes (content this client does not hold). The answer must be DONE
 *	"exists" or READY at offset 0, and no message from the server may
 *	contain the size of a SECRET file (the server's copies, read here from
 *	disk) or the XXH3-128 of any of its 4 KiB-aligned prefixes, whole or
 *	either half.
 *
 *   copy_abuse replace ADDR PORT NAME
 *	Session A begins NAME and holds it. Session B, with CP_F_REPLACES and
 *	a key of its own making, must find NAME busy (a guessed key ends
 *	nobody's session). Session C, with A's key, must get NAME READY, and
 *	A must have been disconnected by then.
 *
 * RK_DEV names the device. Exit 0 when the server behaved.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include <rdmakit/cm.h>
#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/device.h>
#include <rdmakit/mr.h>
#include <rdmakit/post.h>

#include "copy_proto.h"
#include "raw_ring.h"

#define NRX	8
#define CHUNK	65536u
#define TX_HDR	CP_MSG_MAX
#define TX_DATA (CP_MSG_MAX + CP_HDR_SIZE)

struct cl {
	struct rk_device *dev;
	struct rk_conn *conn;
	struct rk_mr *rx, *tx;
	struct cp_welcome w;
	uint32_t seq;
	/* every message received, for the oracle check */
	uint8_t *seen;
	size_t seen_len;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int post_rx(struct rk_conn *conn, struct cl *c, unsigned i)
{
	return rk_post_recv(conn, (uint8_t *)rk_mr_addr(c->rx) + (size_t)i * CP_MSG_MAX, CP_MSG_MAX,
			    rk_mr_lkey(c->rx), i, NULL);
}

static int prepare(struct rk_conn *conn, void *arg)
{
	for (unsigned i = 0; i < NRX; i++)
		if (post_rx(conn, arg, i))
			return -EIO;
	return 0;
}

/*
 * The next message into @out (CP_MSG_MAX bytes): its length, 0 on timeout,
 * -1 when the connection failed.
 */
static int recv_msg(struct cl *c, void *out, int timeout_ms)
{
	double end = now_s() + timeout_ms / 1000.0;
	struct ibv_wc wc[4];
	struct rk_error e;

	while (now_s() < end) {
		int n = rk_cq_wait(rk_conn_cq(c->conn), wc, 4, 100, &e);
		int got = 0;

		if (n < 0 && n != -ETIMEDOUT && n != -EAGAIN)
			return -1;
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				return -1;
			if (!(wc[i].opcode & IBV_WC_RECV))
				continue;
			if (wc[i].wc_flags & IBV_WC_WITH_IMM) { /* the ring's credit */
				if (post_rx(c->conn, c, (unsigned)wc[i].wr_id))
					return -1;
				continue;
			}
			memcpy(out, (uint8_t *)rk_mr_addr(c->rx) + wc[i].wr_id * CP_MSG_MAX,
			       wc[i].byte_len);
			got = (int)wc[i].byte_len;
			c->seen = realloc(c->seen, c->seen_len + (size_t)got);
			if (!c->seen)
				abort();
			memcpy(c->seen + c->seen_len, out, (size_t)got);
			c->seen_len += (size_t)got;
			if (post_rx(c->conn, c, (unsigned)wc[i].wr_id))
				return -1;
		}
		if (got)
			return got;
		if (rk_conn_progress(c->conn, 0, &e) != RK_CONN_CONNECTED)
			return -1;
	}
	return 0;
}

/* A session; with @replaces (CP_KEY_LEN bytes) it asks to replace that one. */
static int session_open(struct cl *c, const char *addr, const char *port, uint16_t flags,
			const uint8_t *replaces)
{
	struct rk_hello h = {.app_id = CP_APP_ID, .app_arg = cp_lane_arg(0)};
	struct rk_cm_connect_opts co = {.host = addr, .port = port, .hello = &h};
	struct cp_hello hello = {.chunk = CHUNK, .depth = 2, .flags = flags, .lanes = 1};
	struct rk_device_opts o = {.gid_index = -1};
	uint8_t msg[CP_MSG_MAX];
	struct rk_error e;
	int n;

	if (replaces) {
		hello.flags |= CP_F_REPLACES;
		memcpy(hello.replaces, replaces, CP_KEY_LEN);
	}
	o.name = getenv("RK_DEV");
	o.addr = o.name ? NULL : addr;
	if (rk_device_open(&o, &e, &c->dev) ||
	    rk_mr_alloc(c->dev, (size_t)NRX * CP_MSG_MAX, RK_ACCESS_LOCAL, &e, &c->rx) ||
	    rk_mr_alloc(c->dev, TX_DATA + CHUNK, RK_ACCESS_LOCAL, &e, &c->tx)) {
		fprintf(stderr, "copy_abuse: %s\n", rk_error_str(&e));
		return -1;
	}
	co.conn.prepare = prepare;
	co.conn.prepare_arg = c;
	if (rk_cm_connect(c->dev, &co, &e, &c->conn)) {
		fprintf(stderr, "copy_abuse: connect: %s\n", rk_error_str(&e));
		return -1;
	}
	n = cp_hello_encode(&hello, rk_mr_addr(c->tx), CP_MSG_MAX);
	{
		struct rk_wr wr = {.op = RK_OP_SEND,
				   .flags = RK_WR_SIGNALED,
				   .addr = rk_mr_addr(c->tx),
				   .len = (uint32_t)n,
				   .lkey = rk_mr_lkey(c->tx)};

		if (rk_post(c->conn, &wr, &e))
			return -1;
	}
	n = recv_msg(c, msg, 10000);
	if (n <= 0 || cp_welcome_decode(msg, (size_t)n, &c->w)) {
		fprintf(stderr, "copy_abuse: no WELCOME\n");
		return -1;
	}
	return 0;
}

static void session_close(struct cl *c)
{
	rk_conn_destroy(c->conn);
	rk_mr_dereg(c->tx);
	rk_mr_dereg(c->rx);
	if (c->dev)
		rk_device_close(c->dev);
	free(c->seen);
}

/*
 * Post the next slot with the records in @w's block and @dlen bytes at
 * TX_DATA (the block moved to sit right before them: one message), and
 * wait for its RESULTS into *@cr. 0, or -1 (none: gone, or ERROR).
 */
static int slot_roundtrip(struct cl *c, struct cp_slot_writer *w, uint32_t dlen,
			  struct cp_results *cr)
{
	uint8_t *tx = rk_mr_addr(c->tx);
	uint8_t msg[CP_MSG_MAX];
	struct rk_error e;
	char text[256];
	uint16_t code;
	int n;

	uint32_t seq = c->seq++;

	cp_slot_finish(w, seq);
	memmove(tx + TX_DATA - w->len, tx + TX_HDR, w->len);
	{
		struct rk_wr wr = {.op = RK_OP_WRITE_IMM,
				   .flags = RK_WR_SIGNALED,
				   .addr = tx + TX_DATA - w->len,
				   .len = (uint32_t)w->len + dlen,
				   .lkey = rk_mr_lkey(c->tx),
				   .remote_addr =
				       c->w.ring_addr + (uint64_t)raw_slot(c->w.nslots, seq) *
							    cp_slot_stride(c->w.chunk),
				   .rkey = c->w.rkey,
				   .imm = raw_imm(c->w.nslots, seq)};

		if (rk_post(c->conn, &wr, &e))
			return -1;
	}
	n = recv_msg(c, msg, 10000);
	if (n <= 0)
		return -1;
	if (cp_msg_peek(msg, (size_t)n) == CP_MSG_ERROR &&
	    cp_error_decode(msg, (size_t)n, &code, text, sizeof(text)) == 0) {
		fprintf(stderr, "copy_abuse: server ERROR: %s\n", text);
		return -1;
	}
	return cp_results_decode(msg, (size_t)n, cr) || cr->seq != (uint16_t)seq ? -1 : 0;
}

static void slot_begin(struct cl *c, struct cp_slot_writer *w)
{
	cp_slot_init(w, (uint8_t *)rk_mr_addr(c->tx) + TX_HDR, CP_HDR_SIZE);
}

static int bye(struct cl *c)
{
	struct cp_slot_writer w;
	struct cp_rec r = {.type = CP_REC_BYE};
	struct cp_results cr;

	slot_begin(c, &w);
	cp_slot_add(&w, &r);
	return slot_roundtrip(c, &w, 0, &cr);
}

static int do_open(struct cl *c, const char *tag, unsigned nfiles, const char *release)
{
	unsigned ready = 0, limited = 0, other = 0, id = 1, sent = 0;
	char names[64][32];
	struct cp_slot_writer w;
	struct cp_results cr;

	while (sent < nfiles) {
		unsigned k = 0;

		slot_begin(c, &w);
		for (; sent < nfiles && k < 64; k++, sent++) {
			struct cp_rec r = {.type = CP_REC_BEGIN,
					   .flags = CP_BEGIN_WAIT,
					   .file_id = id++,
					   .a = 1u << 20,
					   .b = 0644};

			snprintf(names[k], sizeof(names[k]), "%s-%u", tag, sent);
			r.name = names[k];
			r.name_len = (uint16_t)strlen(names[k]);
			if (!cp_slot_room(&w, r.name_len))
				break;
			cp_slot_add(&w, &r);
		}
		if (slot_roundtrip(c, &w, 0, &cr)) {
			fprintf(stderr, "copy_abuse open: lost the session after %u files\n", sent);
			return 1;
		}
		for (unsigned i = 0; i < cr.nres; i++) {
			if (cr.res[i].kind == CP_RES_READY)
				ready++;
			else if (cr.res[i].code == CP_E_OPEN_LIMIT)
				limited++;
			else {
				other++;
				fprintf(stderr, "copy_abuse open: file %u: %s (errno %u)\n",
					cr.res[i].file_id, cp_code_str(cr.res[i].code),
					cr.res[i].sys_errno);
			}
		}
	}
	printf("holding: %u ready, %u refused (%s), %u other\n", ready, limited,
	       cp_code_str(CP_E_OPEN_LIMIT), other);
	fflush(stdout);
	for (int i = 0; i < 1200 && access(release, F_OK); i++)
		usleep(100000);
	/* Give them up, the ones the server holds, and leave. */
	for (uint32_t f = 1; f < id;) {
		slot_begin(c, &w);
		for (unsigned k = 0; k < 64 && f < id; k++, f++) {
			struct cp_rec r = {.type = CP_REC_ABORT, .file_id = f};

			cp_slot_add(&w, &r);
		}
		if (slot_roundtrip(c, &w, 0, &cr)) {
			fprintf(stderr, "copy_abuse open: lost the session while aborting\n");
			return 1;
		}
	}
	if (bye(c))
		return 1;
	return other == 0 && ready > 0 && ready + limited == nfiles ? 0 : 1;
}

static int do_idle(struct cl *c, unsigned every_ms, unsigned max_s)
{
	double t0 = now_s();
	struct cp_slot_writer w;
	struct cp_results cr;
	unsigned n = 0;

	while (now_s() - t0 < max_s) {
		slot_begin(c, &w);
		if (slot_roundtrip(c, &w, 0, &cr)) {
			printf("dropped after %.1f s and %u empty slots\n", now_s() - t0, n);
			return n > 0 ? 0 : 1;
		}
		n++;
		usleep(every_ms * 1000u);
	}
	printf("still connected after %u s and %u empty slots\n", max_s, n);
	return 1;
}

/* Does @needle (@len bytes) occur in what the server sent? */
static int leaked(const struct cl *c, const uint8_t *needle, size_t len)
{
	for (size_t i = 0; i + len <= c->seen_len; i++)
		if (!memcmp(c->seen + i, needle, len))
			return 1;
	return 0;
}

static int check_secret(const struct cl *c, const char *path)
{
	XXH3_state_t *st = XXH3_createState();
	uint8_t buf[4096], be[8], h[16];
	struct stat sb;
	int fd = open(path, O_RDONLY), bad = 0;
	uint64_t off = 0;

	if (fd < 0 || fstat(fd, &sb) || !st) {
		fprintf(stderr, "copy_abuse: %s: cannot read\n", path);
		return 1;
	}
	for (int i = 0; i < 8; i++)
		be[i] = (uint8_t)((uint64_t)sb.st_size >> (56 - 8 * i));
	if (sb.st_size && leaked(c, be, 8)) {
		fprintf(stderr, "LEAK: the size of %s (%lld) was sent\n", path,
			(long long)sb.st_size);
		bad = 1;
	}
	XXH3_128bits_reset(st);
	for (;;) {
		ssize_t n;

		cp_hash_digest(st, h);
		if (leaked(c, h, 16) || leaked(c, h, 8) || leaked(c, h + 8, 8)) {
			fprintf(stderr, "LEAK: the hash of %s's first %llu bytes was sent\n", path,
				(unsigned long long)off);
			bad = 1;
		}
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		XXH3_128bits_update(st, buf, (size_t)n);
		off += (uint64_t)n;
	}
	close(fd);
	XXH3_freeState(st);
	return bad;
}

static void random_bytes(uint8_t *p, size_t n)
{
	int fd = open("/dev/urandom", O_RDONLY);

	if (fd < 0 || read(fd, p, n) != (ssize_t)n)
		abort();
	close(fd);
}

static int do_oracle(struct cl *c, const char *name, uint64_t size, int nsecret, char **secret)
{
	struct cp_rec r = {.type = CP_REC_BEGIN,
			   .flags = CP_BEGIN_WAIT | CP_BEGIN_PROOF,
			   .file_id = 1,
			   .a = size,
			   .b = 0644,
			   .name = name,
			   .name_len = (uint16_t)strlen(name)};
	unsigned nproof = cp_proof_count(size, CHUNK);
	struct cp_slot_writer w;
	struct cp_results cr;
	int bad = 0;

	random_bytes(r.hash, 16);
	random_bytes((uint8_t *)rk_mr_addr(c->tx) + TX_DATA, 16 * nproof);
	r.data_len = 16 * nproof;
	slot_begin(c, &w);
	cp_slot_add(&w, &r);
	if (slot_roundtrip(c, &w, r.data_len, &cr) || cr.nres != 1) {
		fprintf(stderr, "copy_abuse oracle: no answer to BEGIN\n");
		return 1;
	}
	printf("answer: %s, code %u (%s), offset %llu\n",
	       cr.res[0].kind == CP_RES_READY ? "READY" : "DONE", cr.res[0].code,
	       cp_code_str(cr.res[0].code), (unsigned long long)cr.res[0].offset);
	if (cr.res[0].offset != 0 ||
	    !(cr.res[0].kind == CP_RES_READY || cr.res[0].code == CP_E_EXISTS)) {
		fprintf(stderr, "copy_abuse oracle: the answer tells more than yes or no\n");
		bad = 1;
	}
	if (cr.res[0].kind == CP_RES_READY) {
		struct cp_rec a = {.type = CP_REC_ABORT, .file_id = 1};

		slot_begin(c, &w);
		cp_slot_add(&w, &a);
		if (slot_roundtrip(c, &w, 0, &cr))
			bad = 1;
	}
	if (bye(c))
		bad = 1;
	for (int i = 0; i < nsecret; i++)
		bad |= check_secret(c, secret[i]);
	return bad;
}

/* BEGIN (WAIT) @name as file 1: the result's code, 0 for READY, -1 when the session is gone. */
static int begin_one(struct cl *c, const char *name)
{
	struct cp_rec r = {.type = CP_REC_BEGIN,
			   .flags = CP_BEGIN_WAIT,
			   .file_id = 1,
			   .a = 1u << 20,
			   .b = 0644,
			   .name = name,
			   .name_len = (uint16_t)strlen(name)};
	struct cp_slot_writer w;
	struct cp_results cr;

	slot_begin(c, &w);
	cp_slot_add(&w, &r);
	if (slot_roundtrip(c, &w, 0, &cr) || cr.nres != 1)
		return -1;
	return cr.res[0].kind == CP_RES_READY ? 0 : cr.res[0].code;
}

static int do_replace(const char *addr, const char *port, const char *name)
{
	struct cl a = {0}, b = {0}, c = {0};
	uint8_t guess[CP_KEY_LEN];
	struct rk_error e;
	int r, bad = 1, st = RK_CONN_CONNECTED;

	if (session_open(&a, addr, port, 0, NULL) || begin_one(&a, name) != 0) {
		fprintf(stderr, "copy_abuse replace: A could not begin %s\n", name);
		goto out;
	}
	random_bytes(guess, sizeof(guess));
	if (session_open(&b, addr, port, CP_F_RESUME, guess)) {
		fprintf(stderr, "copy_abuse replace: B (a guessed key) was not welcomed\n");
		goto out;
	}
	r = begin_one(&b, name);
	if (r != CP_E_BUSY) {
		fprintf(stderr, "copy_abuse replace: B (a guessed key) got %s, not busy\n",
			r < 0 ? "no answer"
			: r   ? cp_code_str((uint16_t)r)
			      : "READY");
		goto out;
	}
	if (bye(&b))
		goto out;
	if (session_open(&c, addr, port, CP_F_RESUME, a.w.key)) {
		fprintf(stderr, "copy_abuse replace: C (A's key) was not welcomed\n");
		goto out;
	}
	r = begin_one(&c, name);
	if (r != 0) {
		fprintf(stderr, "copy_abuse replace: C (A's key) got %s, not READY\n",
			r < 0 ? "no answer" : cp_code_str((uint16_t)r));
		goto out;
	}
	/* A was ended before C's WELCOME; its DREQ may take a moment to arrive. */
	for (int i = 0; i < 50 && st == RK_CONN_CONNECTED; i++) {
		st = rk_conn_progress(a.conn, 0, &e);
		if (st == RK_CONN_CONNECTED)
			usleep(100000);
	}
	if (st == RK_CONN_CONNECTED) {
		fprintf(stderr, "copy_abuse replace: A is still connected\n");
		goto out;
	}
	{
		struct cp_rec ab = {.type = CP_REC_ABORT, .file_id = 1};
		struct cp_slot_writer w;
		struct cp_results cr;

		slot_begin(&c, &w);
		cp_slot_add(&w, &ab);
		if (slot_roundtrip(&c, &w, 0, &cr) || bye(&c))
			goto out;
	}
	printf("replace: a guessed key: busy; A's key: READY, A disconnected\n");
	bad = 0;
out:
	session_close(&c);
	session_close(&b);
	session_close(&a);
	return bad;
}

int main(int argc, char **argv)
{
	struct cl c = {0};
	int rc = 2;

	if (argc >= 7 && !strcmp(argv[1], "open")) {
		if (!session_open(&c, argv[2], argv[3], 0, NULL))
			rc = do_open(&c, argv[4], (unsigned)strtoul(argv[5], NULL, 10), argv[6]);
		else
			rc = 1;
	} else if (argc >= 6 && !strcmp(argv[1], "idle")) {
		if (!session_open(&c, argv[2], argv[3], 0, NULL))
			rc = do_idle(&c, (unsigned)strtoul(argv[4], NULL, 10),
				     (unsigned)strtoul(argv[5], NULL, 10));
		else
			rc = 1;
	} else if (argc >= 7 && !strcmp(argv[1], "oracle")) {
		if (!session_open(&c, argv[2], argv[3], CP_F_RESUME, NULL))
			rc = do_oracle(&c, argv[4], strtoull(argv[5], NULL, 0), argc - 6, argv + 6);
		else
			rc = 1;
	} else if (argc >= 5 && !strcmp(argv[1], "replace")) {
		rc = do_replace(argv[2], argv[3], argv[4]);
	} else {
		fprintf(stderr, "usage: copy_abuse open|idle|oracle|replace ADDR PORT ... (see the "
				"source)\n");
	}
	session_close(&c);
	return rc;
}
