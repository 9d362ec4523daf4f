/*
 * copy_hostile.c - clients that attack rk serve through the ring.
 *
 *   cross:   a victim session places a slot's header block (file
 *            "victim.bin") in its ring (rk serve's ring: a header block,
 *            then the data, written by one WRITE WITH IMMEDIATE whose
 *            immediate names the slot and the sequence, raw_ring.h); an
 *            attacker, a session of its own,
 *            RDMA WRITEs a forged header block (file "stolen.bin") over it
 *            in the victim's ring with the victim's rkey and address -
 *            the strongest case: a real attacker has to guess them. The
 *            attacker's WRITE must fail with a remote access error on its
 *            own QP; the victim then posts its data and its file must
 *            arrive exactly as sent, verified, and no "stolen.bin" appear.
 *   rewrite: a client posts a slot (one whole file: BEGIN, DATA, END) and
 *            then rewrites its data block over and over, alternating other
 *            content with the original, until the slot's RESULTS come back.
 *            Each file must either be committed with exactly the content
 *            that was hashed, or be refused (hash mismatch) and absent:
 *            never verified with other content.
 *
 * usage: copy_hostile cross|rewrite ADDR PORT DIR   (rk serve --dir DIR
 *        listening there; RK_DEV set)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmakit/cm.h>
#include <rdmakit/cq.h>
#include <rdmakit/device.h>
#include <rdmakit/mr.h>
#include <rdmakit/post.h>

#include "copy_proto.h"
#include "raw_ring.h"

#define NRX	 8
#define RX_TAG	 1000u
#define CHUNK	 (256u << 10)
#define TRIALS	 40
#define INFLIGHT 8 /* rewrites in flight at once */
#define SLICE	 4096

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		printf("FAIL ");                                                                   \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		failures++;                                                                        \
	} while (0)

/* One client session on one connection. */
struct cli {
	struct rk_conn *conn;
	struct rk_mr *rx, *tx; /* NRX messages; a header block and CHUNK of data */
	struct cp_welcome wel;
	unsigned sends; /* signaled sends not yet completed */
};

static int post_rx(struct rk_conn *conn, struct rk_mr *rx, unsigned i)
{
	return rk_post_recv(conn, (uint8_t *)rk_mr_addr(rx) + (size_t)i * CP_MSG_MAX, CP_MSG_MAX,
			    rk_mr_lkey(rx), RX_TAG + i, NULL);
}

static int prepare(struct rk_conn *conn, void *arg)
{
	struct cli *c = arg;

	for (unsigned i = 0; i < NRX; i++) {
		int r = post_rx(conn, c->rx, i);

		if (r)
			return r;
	}
	return 0;
}

/*
 * Wait up to 10 s for the next completion. A receive is reposted and its
 * message left in *@msg (*@len bytes); *@msg is NULL for a send, whose
 * status is returned in *@st. The ring's credits (SENDs with an
 * immediate) are reposted and passed over: one slot at a time needs none.
 */
static int next_wc(struct cli *c, const uint8_t **msg, size_t *len, enum ibv_wc_status *st)
{
	struct ibv_wc wc;
	struct rk_error e;
	int n;

again:
	n = rk_cq_wait(rk_conn_cq(c->conn), &wc, 1, 10000, &e);
	if (n <= 0)
		return n ? n : -ETIMEDOUT;
	*st = wc.status;
	*msg = NULL;
	if (wc.wr_id >= RX_TAG && wc.wr_id < RX_TAG + NRX) {
		unsigned i = (unsigned)(wc.wr_id - RX_TAG);

		if (wc.status != IBV_WC_SUCCESS)
			return -EIO;
		/* The buffer stays valid until NRX more messages arrive. */
		post_rx(c->conn, c->rx, i);
		if (wc.wc_flags & IBV_WC_WITH_IMM)
			goto again;
		*msg = (const uint8_t *)rk_mr_addr(c->rx) + (size_t)i * CP_MSG_MAX;
		*len = wc.byte_len;
		return 0;
	}
	c->sends--;
	return 0;
}

/* The next control message; send completions on the way must succeed. */
static int next_msg(struct cli *c, const uint8_t **msg, size_t *len)
{
	enum ibv_wc_status st;

	for (;;) {
		int r = next_wc(c, msg, len, &st);

		if (r)
			return r;
		if (*msg)
			return 0;
		if (st != IBV_WC_SUCCESS)
			return -EIO;
	}
}

static int post(struct cli *c, const struct rk_wr *wr)
{
	struct rk_wr w = *wr;
	struct rk_error e;
	int r;

	w.flags |= RK_WR_SIGNALED;
	r = rk_post(c->conn, &w, &e);
	if (r)
		printf("post: %s\n", rk_error_str(&e));
	else
		c->sends++;
	return r;
}

static void cli_close(struct cli *c)
{
	rk_conn_destroy(c->conn);
	rk_mr_dereg(c->tx);
	rk_mr_dereg(c->rx);
	memset(c, 0, sizeof(*c));
}

/* Connect, say HELLO, read WELCOME. */
static int cli_open(struct rk_device *dev, const char *addr, const char *port, struct cli *c)
{
	struct rk_hello h = {.app_id = CP_APP_ID, .app_arg = cp_lane_arg(0)};
	struct rk_cm_connect_opts co = {.host = addr, .port = port, .hello = &h};
	struct cp_hello hello = {.chunk = CHUNK, .depth = 2, .lanes = 1};
	const uint8_t *msg;
	struct rk_error e;
	size_t len;
	int n;

	memset(c, 0, sizeof(*c));
	if (rk_mr_alloc(dev, (size_t)NRX * CP_MSG_MAX, RK_ACCESS_LOCAL, &e, &c->rx) ||
	    rk_mr_alloc(dev, CP_HDR_SIZE + CHUNK, RK_ACCESS_LOCAL, &e, &c->tx)) {
		printf("alloc: %s\n", rk_error_str(&e));
		return -1;
	}
	co.conn.prepare = prepare;
	co.conn.prepare_arg = c;
	if (rk_cm_connect(dev, &co, &e, &c->conn)) {
		printf("connect: %s\n", rk_error_str(&e));
		return -1;
	}
	n = cp_hello_encode(&hello, rk_mr_addr(c->tx), CP_MSG_MAX);
	if (n < 0 || post(c, &(struct rk_wr){.op = RK_OP_SEND,
					     .addr = rk_mr_addr(c->tx),
					     .len = (uint32_t)n,
					     .lkey = rk_mr_lkey(c->tx)}))
		return -1;
	if (next_msg(c, &msg, &len) || cp_welcome_decode(msg, len, &c->wel)) {
		printf("no WELCOME\n");
		return -1;
	}
	if (c->wel.chunk != CHUNK || c->wel.nslots < 1) {
		printf("WELCOME with chunk %u, %u slots\n", c->wel.chunk, c->wel.nslots);
		return -1;
	}
	return 0;
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 7;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

/*
 * Header block of sequence @seq at @buf: one whole file @name of @data. The
 * message is the block and the data right after it (see place()).
 */
static size_t whole_file_block(uint8_t *buf, uint32_t seq, uint32_t id, const char *name,
			       const uint8_t *data, uint32_t len)
{
	struct cp_rec begin = {.type = CP_REC_BEGIN,
			       .file_id = id,
			       .a = len,
			       .b = 0644,
			       .name = name,
			       .name_len = (uint16_t)strlen(name)};
	struct cp_rec rec = {.type = CP_REC_DATA, .file_id = id, .data_len = len};
	struct cp_rec end = {.type = CP_REC_END, .file_id = id};
	struct cp_slot_writer w;

	cp_hash128(data, len, rec.hash);
	memcpy(end.hash, rec.hash, 16);
	cp_slot_init(&w, buf, CP_HDR_SIZE);
	if (cp_slot_add(&w, &begin) || cp_slot_add(&w, &rec) || cp_slot_add(&w, &end))
		return 0;
	cp_slot_finish(&w, seq);
	return w.len;
}

/*
 * @blk holds a header block of @hlen bytes at its start and the data at
 * CP_HDR_SIZE: move the block to sit right before the data; the message's
 * start.
 */
static uint8_t *place(uint8_t *blk, size_t hlen)
{
	memmove(blk + CP_HDR_SIZE - hlen, blk, hlen);
	return blk + CP_HDR_SIZE - hlen;
}

/* Where slot @seq's message goes in @c's ring. */
static uint64_t slot_addr(const struct cli *c, uint32_t seq)
{
	return c->wel.ring_addr +
	       (uint64_t)raw_slot(c->wel.nslots, seq) * cp_slot_stride(c->wel.chunk);
}

/* Wait for the RESULTS of slot 0 and the DONE of file @id in it; its code, or -1. */
static int wait_done(struct cli *c, uint32_t id)
{
	struct cp_results cr;
	const uint8_t *msg;
	size_t len;

	if (next_msg(c, &msg, &len) || cp_results_decode(msg, len, &cr) || cr.seq != 0)
		return -1;
	for (unsigned i = 0; i < cr.nres; i++)
		if (cr.res[i].file_id == id && cr.res[i].kind == CP_RES_DONE)
			return cr.res[i].code;
	return -1;
}

/* Whether DIR/@name holds exactly @len bytes of @want (0), differs (1), is absent (-1). */
static int file_is(const char *dir, const char *name, const uint8_t *want, size_t len)
{
	char path[4096];
	uint8_t *got = malloc(len + 1);
	ssize_t n;
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		free(got);
		return -1;
	}
	n = got ? read(fd, got, len + 1) : -1;
	r = n == (ssize_t)len && memcmp(got, want, len) == 0 ? 0 : 1;
	close(fd);
	free(got);
	return r;
}

static void cross(struct rk_device *dev, const char *addr, const char *port, const char *dir)
{
	struct cli v = {0}, a = {0};
	uint8_t *vh, *ah, *want = malloc(CHUNK);
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	size_t vlen, alen, len;
	const uint8_t *msg = NULL;
	int code;

	if (!want || cli_open(dev, addr, port, &v) || cli_open(dev, addr, port, &a)) {
		FAIL("cross: cannot set up the two sessions");
		goto out;
	}
	if (v.wel.rkey == a.wel.rkey && v.wel.ring_addr == a.wel.ring_addr)
		FAIL("cross: two sessions were given the same ring");
	vh = rk_mr_addr(v.tx);
	ah = rk_mr_addr(a.tx);
	fill(want, CHUNK, 1);
	memcpy(vh + CP_HDR_SIZE, want, CHUNK);
	vlen = whole_file_block(vh, 0, 1, "victim.bin", want, CHUNK);
	/* The attacker's forgery: the same records under a name of its choice. */
	alen = whole_file_block(ah, 0, 1, "stolen.bin", want, CHUNK);
	if (!vlen || !alen) {
		FAIL("cross: header blocks");
		goto out;
	}
	/* 1. The victim's header block lands in its ring; its data is not posted yet. */
	if (post(&v, &(struct rk_wr){.op = RK_OP_WRITE,
				     .addr = vh,
				     .len = (uint32_t)vlen,
				     .lkey = rk_mr_lkey(v.tx),
				     .remote_addr = v.wel.ring_addr,
				     .rkey = v.wel.rkey}) ||
	    next_wc(&v, &msg, &len, &st) || msg || st != IBV_WC_SUCCESS) {
		FAIL("cross: the victim's header WRITE: %s", ibv_wc_status_str(st));
		goto out;
	}
	/* 2. The attacker overwrites it from its own QP (which then is dead). */
	if (post(&a, &(struct rk_wr){.op = RK_OP_WRITE,
				     .addr = ah,
				     .len = (uint32_t)alen,
				     .lkey = rk_mr_lkey(a.tx),
				     .remote_addr = v.wel.ring_addr,
				     .rkey = v.wel.rkey}) ||
	    next_wc(&a, &msg, &len, &st) || msg) {
		FAIL("cross: the attacker's WRITE did not complete");
		goto out;
	}
	if (st != IBV_WC_REM_ACCESS_ERR)
		FAIL("cross: the attacker's WRITE into another session's ring: %s (wanted remote "
		     "access error)",
		     ibv_wc_status_str(st));
	else
		printf("ok   attacker's WRITE into another session's ring: %s on its own QP\n",
		       ibv_wc_status_str(st));
	/* 3. The victim posts its message as usual and gets its file committed. */
	if (post(&v, &(struct rk_wr){.op = RK_OP_WRITE_IMM,
				     .addr = place(vh, vlen),
				     .len = (uint32_t)vlen + CHUNK,
				     .lkey = rk_mr_lkey(v.tx),
				     .remote_addr = slot_addr(&v, 0),
				     .rkey = v.wel.rkey,
				     .imm = raw_imm(v.wel.nslots, 0)})) {
		FAIL("cross: the victim's data WRITE");
		goto out;
	}
	code = wait_done(&v, 1);
	if (code != CP_OK)
		FAIL("cross: the victim's file: %d (%s)", code,
		     code < 0 ? "no result" : cp_code_str((unsigned)code));
	else if (file_is(dir, "victim.bin", want, CHUNK) != 0)
		FAIL("cross: victim.bin differs from what the victim sent");
	else
		printf("ok   the victim's file arrived as sent, verified\n");
	if (file_is(dir, "stolen.bin", want, CHUNK) != -1)
		FAIL("cross: stolen.bin exists");
out:
	cli_close(&a);
	cli_close(&v);
	free(want);
}

/*
 * Post slot @seq, the header block of @hlen bytes in @orig and @orig's
 * bytes as file @id's data, wait @delay_us, then rewrite one SLICE of the
 * data in the ring with other content and the original in turn, INFLIGHT
 * WRITEs at a time, until the RESULTS. The delay sweeps the moment the
 * rewrites start across the server's copy, hash, pwrite and whole-file
 * hash of the slot. The DONE code of @id, or -1.
 */
static int post_and_rewrite(struct cli *c, uint32_t seq, size_t hlen, uint32_t id,
			    struct rk_mr *orig, unsigned delay_us)
{
	size_t at = CHUNK - SLICE * (1 + id % 8);
	uint8_t *other = (uint8_t *)rk_mr_addr(c->tx) + CP_HDR_SIZE + at;
	uint8_t *mine = (uint8_t *)rk_mr_addr(orig) + CP_HDR_SIZE + at;
	uint64_t data = slot_addr(c, seq) + hlen;
	enum ibv_wc_status st;
	struct cp_results cr;
	const uint8_t *msg;
	unsigned sent = 0;
	int code = -1;
	size_t len;

	if (post(c, &(struct rk_wr){.op = RK_OP_WRITE_IMM,
				    .addr = place(rk_mr_addr(orig), hlen),
				    .len = (uint32_t)hlen + CHUNK,
				    .lkey = rk_mr_lkey(orig),
				    .remote_addr = slot_addr(c, seq),
				    .rkey = c->wel.rkey,
				    .imm = raw_imm(c->wel.nslots, seq)}))
		return -1;
	usleep(delay_us);
	for (;;) {
		while (c->sends < INFLIGHT) {
			struct rk_mr *from = sent++ & 1 ? orig : c->tx;

			if (post(c, &(struct rk_wr){.op = RK_OP_WRITE,
						    .addr = from == orig ? mine : other,
						    .len = SLICE,
						    .lkey = rk_mr_lkey(from),
						    .remote_addr = data + at,
						    .rkey = c->wel.rkey}))
				return -1;
		}
		if (next_wc(c, &msg, &len, &st) || (!msg && st != IBV_WC_SUCCESS))
			return -1;
		if (msg)
			break;
	}
	if (cp_results_decode(msg, len, &cr))
		return -1;
	for (unsigned i = 0; i < cr.nres; i++)
		if (cr.res[i].file_id == id && cr.res[i].kind == CP_RES_DONE)
			code = cr.res[i].code;
	/* The slot is ours again; let the rewrites still in flight land. */
	while (c->sends)
		if (next_wc(c, &msg, &len, &st) || msg || st != IBV_WC_SUCCESS)
			return -1;
	return code;
}

static void rewrite(struct rk_device *dev, const char *addr, const char *port, const char *dir)
{
	unsigned committed = 0, refused = 0;
	struct rk_mr *orig = NULL;
	struct cli c = {0};
	struct rk_error e;

	if (rk_mr_alloc(dev, CP_HDR_SIZE + CHUNK, RK_ACCESS_LOCAL, &e, &orig) ||
	    cli_open(dev, addr, port, &c)) {
		FAIL("rewrite: cannot set up the session");
		goto out;
	}
	/* The other content: tx's data block, the same length. */
	fill((uint8_t *)rk_mr_addr(c.tx) + CP_HDR_SIZE, CHUNK, 99);
	for (uint32_t t = 0; t < TRIALS && !failures; t++) {
		uint8_t *want = (uint8_t *)rk_mr_addr(orig) + CP_HDR_SIZE;
		char name[32];
		size_t hlen;
		int code;

		snprintf(name, sizeof(name), "race.%u", (unsigned)t);
		fill(want, CHUNK, 1000 + t);
		hlen = whole_file_block(rk_mr_addr(orig), t, t + 1, name, want, CHUNK);
		code = hlen ? post_and_rewrite(&c, t, hlen, t + 1, orig, (t % 10) * 3000) : -1;
		if (code == CP_OK) {
			committed++;
			if (file_is(dir, name, want, CHUNK) != 0)
				FAIL("rewrite: %s verified with content other than what was hashed",
				     name);
		} else if (code == CP_E_HASH) {
			refused++;
			if (file_is(dir, name, want, CHUNK) != -1)
				FAIL("rewrite: %s refused, yet it exists", name);
		} else {
			FAIL("rewrite: %s: %d (%s)", name, code,
			     code < 0 ? "no result" : cp_code_str((unsigned)code));
		}
	}
	printf("%s rewritten after posting: %u committed as hashed, %u refused (hash)\n",
	       failures ? "FAIL" : "ok  ", committed, refused);
out:
	cli_close(&c);
	rk_mr_dereg(orig);
}

int main(int argc, char **argv)
{
	struct rk_device_opts o = {.gid_index = -1};
	struct rk_device *dev;
	struct rk_error e;

	if (argc != 5 || (strcmp(argv[1], "cross") && strcmp(argv[1], "rewrite"))) {
		fprintf(stderr, "usage: copy_hostile cross|rewrite ADDR PORT DIR\n");
		return 2;
	}
	o.name = getenv("RK_DEV");
	o.addr = o.name ? NULL : argv[2];
	if (rk_device_open(&o, &e, &dev)) {
		fprintf(stderr, "copy_hostile: %s\n", rk_error_str(&e));
		return 1;
	}
	if (!strcmp(argv[1], "cross"))
		cross(dev, argv[2], argv[3], argv[4]);
	else
		rewrite(dev, argv[2], argv[3], argv[4]);
	rk_device_close(dev);
	printf("copy hostile %s: %s\n", argv[1], failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
