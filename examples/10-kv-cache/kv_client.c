/*
 * kv_client.c - example 10's client: ask by RPC where the keys are, then
 * READ their blocks one-sided, several per batch, and check every byte.
 *
 * The steps, each below in its own function:
 *   1. connect the RPC client (control plane) and a data lane (kv_wire.h;
 *      kv_server.c says why they are two connections), and read the
 *      lane's ticket from the server's accept;
 *   2. KV_M_HELLO with the ticket (a wrong one is refused): the answer
 *      carries the descriptor, which rk_xfer_import checks field by field
 *      (it came off the wire);
 *   3. KV_M_LOOKUP, up to 256 keys per call;
 *   4. READ the blocks, --batch per rk_xfer_post: one doorbell per chain
 *      of up to 16 work requests and one completion per chain, not one
 *      per block; every block checked against kv_word();
 *   5. export is per peer: the descriptor on another lane of ours;
 *   6. what the descriptor does not allow: a WRITE is refused before
 *      anything is posted, and after KV_M_BYE the server's NIC refuses
 *      the READ it allowed a moment before.
 * Exits non-zero on any mismatch or unexpected answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "kv_wire.h"

struct kv {
	const struct kv_args *a;
	struct rk_device *dev;
	struct rk_rpc_client *rpc;
	struct rk_xfer *x;
	struct rk_conn *lane;
	struct rk_xfer_peer *peer;
	struct rk_xfer_remote *blocks;	/* the server's segment, as imported */
	uint8_t desc[RK_XFER_DESC_MAX]; /* ... and as received */
	size_t desc_len;
	uint32_t nblocks;
	uint64_t ticket;
	unsigned long calls;
};

/* One RPC call with our deadline; any failure ends the program. */
static uint32_t call(struct kv *k, uint16_t method, const void *req, uint32_t req_len, void *resp,
		     uint32_t resp_cap, const char *what)
{
	struct rk_rpc_call_args ca = {.method = method,
				      .req = req,
				      .req_len = req_len,
				      .resp = resp,
				      .resp_cap = resp_cap,
				      .timeout_ms = KV_TIMEOUT_MS};
	struct rk_error err;
	uint32_t len = 0;
	int32_t code = 0;
	int r = rk_rpc_call(k->rpc, &ca, &len, &code, &err);

	if (r == -EREMOTEIO)
		ex_die("%s: the server answered %s", what, strerror(code));
	if (r)
		ex_die("%s: %s", what, rk_error_str(&err));
	k->calls++;
	return len;
}

/* A call the server must refuse with @want (its answer, not a transport failure). */
static void refused(struct kv *k, uint16_t method, const void *req, uint32_t req_len, int32_t want,
		    const char *what)
{
	struct rk_rpc_call_args ca = {
	    .method = method, .req = req, .req_len = req_len, .timeout_ms = KV_TIMEOUT_MS};
	struct rk_error err;
	int32_t code = 0;
	int r = rk_rpc_call(k->rpc, &ca, NULL, &code, &err);

	if (r == -EREMOTEIO && code != want)
		ex_die("%s: the server answered %s, not %s", what, strerror(code), strerror(want));
	if (r != -EREMOTEIO)
		ex_die("%s: %s", what, r ? rk_error_str(&err) : "accepted");
	k->calls++;
}

/*
 * A data lane: an rdma_cm connection whose hello names KV_APP_ID, and the
 * ticket the server answered it with. The lane carries only one-sided
 * traffic: signal_every 16 lets a chain of 16 READs ask for one completion
 * (xfer.h); the send queue holds several chains; the receive queue belongs
 * to the one-sided layer.
 */
static struct rk_conn *connect_lane(struct kv *k, uint64_t *ticket)
{
	struct rk_hello hello = {.app_id = KV_APP_ID};
	struct rk_cm_connect_opts lo = {
	    .host = k->a->pair.addr,
	    .port = k->a->data_port,
	    .timeout_ms = KV_TIMEOUT_MS,
	    .hello = &hello,
	    .conn = {.sq_depth = 64, .signal_every = RK_XFER_CHAIN_MAX}};
	struct rk_conn *lane;
	struct rk_error err;
	const uint8_t *t;
	size_t len;

	if (rk_cm_connect(k->dev, &lo, &err, &lane))
		ex_die("data lane: %s", rk_error_str(&err));
	t = rk_conn_peer_data(lane, &len);
	/* The transport pads private data with zeros: at least 8 bytes, the rest ignored. */
	if (!t || len < KV_TICKET_LEN)
		ex_die("data lane: the server sent no ticket (%zu bytes)", len);
	*ticket = kv_get64(t);
	return lane;
}

/* Step 1. The control plane, then the data lane and the one-sided peer over it. */
static void connect_both(struct kv *k)
{
	struct rk_rpc_client_opts co = {.host = k->a->pair.addr,
					.port = k->a->pair.port,
					.window = 4,
					.timeout_ms = KV_TIMEOUT_MS};
	struct rk_error err;

	if (rk_rpc_client_connect(k->dev, &co, &err, &k->rpc))
		ex_die("%s", rk_error_str(&err));
	k->lane = connect_lane(k, &k->ticket);
	/* The lane is in the device's PD, like the rk_xfer: the layer checks. */
	if (rk_xfer_create(k->dev, NULL, NULL, &err, &k->x) ||
	    rk_xfer_peer_create(k->x, &k->lane, 1, &err, &k->peer))
		ex_die("%s", rk_error_str(&err));
}

/* Step 2. The descriptor is hostile input until rk_xfer_import says otherwise. */
static void say_hello(struct kv *k)
{
	uint8_t req[KV_TICKET_LEN], resp[KV_HELLO_HDR + RK_XFER_DESC_MAX];
	uint32_t len, bs;
	struct rk_error err;

	/* The ticket is the capability: one the server did not give this lane gets nothing. */
	kv_put64(req, k->ticket ^ 1);
	refused(k, KV_M_HELLO, req, sizeof(req), ENOENT, "hello with a ticket not ours");
	printf("hello: a ticket the server did not give out is refused\n");
	kv_put64(req, k->ticket);
	len = call(k, KV_M_HELLO, req, sizeof(req), resp, sizeof(resp), "hello");
	if (len <= KV_HELLO_HDR)
		ex_die("hello: %u bytes, no descriptor", len);
	bs = kv_get32(resp);
	k->nblocks = kv_get32(resp + 4);
	if (bs != KV_BLOCK_SIZE || k->nblocks == 0)
		ex_die("hello: blocks of %u bytes, %u of them", bs, k->nblocks);
	if (rk_xfer_import(k->peer, resp + KV_HELLO_HDR, len - KV_HELLO_HDR, &err, &k->blocks))
		ex_die("hello: %s", rk_error_str(&err));
	k->desc_len = len - KV_HELLO_HDR; /* at most RK_XFER_DESC_MAX: import checked */
	memcpy(k->desc, resp + KV_HELLO_HDR, k->desc_len);
	/* What the descriptor grants must be what the geometry says; no less. */
	if (rk_xfer_remote_len(k->blocks) < (uint64_t)k->nblocks * KV_BLOCK_SIZE)
		ex_die("hello: the descriptor covers %llu bytes, not %u blocks",
		       (unsigned long long)rk_xfer_remote_len(k->blocks), k->nblocks);
	printf("hello: a descriptor of %u bytes, %s, %u blocks of %u bytes\n", len - KV_HELLO_HDR,
	       rk_xfer_remote_access(k->blocks) == RK_XFER_READ ? "READ only" : "READ and WRITE",
	       k->nblocks, bs);
}

/*
 * Step 3. Keys 0 .. keys - 1, in calls of up to 256 keys: *off[i] the
 * block's offset or KV_ABSENT. The server holds keys below nblocks and no
 * others (kv_wire.h); any other answer is a mismatch.
 */
static uint32_t look_up(struct kv *k, uint64_t *off)
{
	uint8_t req[8 * KV_LOOKUP_MAX], resp[8 * KV_LOOKUP_MAX];
	uint32_t present = 0, calls = 0;

	for (uint32_t first = 0; first < (uint32_t)k->a->keys; first += KV_LOOKUP_MAX) {
		uint32_t n = (uint32_t)k->a->keys - first, len;

		if (n > KV_LOOKUP_MAX)
			n = KV_LOOKUP_MAX;
		for (uint32_t i = 0; i < n; i++)
			kv_put64(req + 8 * i, first + i);
		len = call(k, KV_M_LOOKUP, req, 8 * n, resp, sizeof(resp), "lookup");
		if (len != 8 * n)
			ex_die("lookup: %u bytes for %u keys", len, n);
		calls++;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t key = first + i, o = kv_get64(resp + 8 * i);

			off[key] = o;
			if ((o == KV_ABSENT) != (key >= k->nblocks))
				ex_die("lookup: key %llu is %s", (unsigned long long)key,
				       o == KV_ABSENT ? "absent" : "present");
			/* An offset we will READ at: it must be a whole block inside the segment.
			 */
			if (o != KV_ABSENT &&
			    (o % KV_BLOCK_SIZE || o / KV_BLOCK_SIZE >= k->nblocks))
				ex_die("lookup: key %llu at offset %llu", (unsigned long long)key,
				       (unsigned long long)o);
			present += o != KV_ABSENT;
		}
	}
	printf("lookup: %ld keys in %u call%s: %u present, %ld absent\n", k->a->keys, calls,
	       calls == 1 ? "" : "s", present, k->a->keys - present);
	return present;
}

/*
 * Step 4. READ every present key's block, --batch blocks per batch into
 * one local segment (registered once, access 0: local use only), and
 * check each block once its batch has ended.
 */
static void read_blocks(struct kv *k, const uint64_t *off, struct rk_xfer_seg *lseg, uint8_t *buf)
{
	uint32_t batch = (uint32_t)k->a->batch, nb = 0, done = 0, in = 0;
	uint64_t keys[KV_BATCH_MAX];
	struct rk_xfer_op ops[KV_BATCH_MAX];
	struct rk_xfer_stats s0, s1;
	uint64_t t0, ns = 0;
	struct rk_error err;

	rk_xfer_stats(k->x, &s0);
	for (uint64_t key = 0; key <= (uint64_t)k->a->keys; key++) {
		int end = key == (uint64_t)k->a->keys;
		struct rk_xfer_batch *b;
		int r;

		if (!end && off[key] != KV_ABSENT) {
			keys[in] = key;
			ops[in] = (struct rk_xfer_op){.op = RK_XFER_OP_READ,
						      .local = lseg,
						      .local_off = (uint64_t)in * KV_BLOCK_SIZE,
						      .remote = k->blocks,
						      .remote_off = off[key],
						      .len = KV_BLOCK_SIZE};
			in++;
		}
		if (in < batch && !(end && in))
			continue;
		/* Checked against the descriptor, then posted: up to 16 READs per doorbell. */
		t0 = ex_now_ns();
		if (rk_xfer_post(k->peer, ops, in, NULL, &err, &b))
			ex_die("READ batch: %s", rk_error_str(&err));
		/* Until every chain has completed: the blocks are in buf, or an error. */
		r = rk_xfer_batch_wait(b, -1, &err);
		ns += ex_now_ns() - t0; /* the transfer only, not the checks */
		rk_xfer_batch_free(b);
		if (r != 1)
			ex_die("READ batch: %s", rk_error_str(&err));
		for (uint32_t i = 0; i < in; i++) {
			long bad = kv_check(buf + (size_t)i * KV_BLOCK_SIZE, keys[i]);

			if (bad >= 0)
				ex_die("key %llu: byte %ld of its block differs",
				       (unsigned long long)keys[i], bad);
		}
		memset(buf, 0, (size_t)in * KV_BLOCK_SIZE); /* no stale block can pass a check */
		done += in;
		nb++;
		in = 0;
	}
	rk_xfer_stats(k->x, &s1);
	printf("read: %u blocks in %u batch%s of up to %u, %llu doorbells, all verified\n", done,
	       nb, nb == 1 ? "" : "es", batch, (unsigned long long)(s1.doorbells - s0.doorbells));
	printf("read: %.1f us per batch, %.0f MiB/s\n", nb ? ns / 1e3 / nb : 0.0,
	       ns ? done * (double)KV_BLOCK_SIZE / (1 << 20) / (ns / 1e9) : 0.0);
}

/*
 * Step 5. Export is per peer. A second lane of ours is, to the server, just
 * another client (one that never says hello). Import the first lane's
 * descriptor on it and READ key 0's block: with memory windows the key is
 * a window bound to the first lane's QP; with registrations a key of the
 * first lane's PD, and the server gives each lane a PD of its own (a key is
 * honoured by every QP of its PD: xfer.h). Either way the server's NIC
 * refuses the READ.
 */
static void other_lane(struct kv *k, struct rk_xfer_seg *lseg, uint8_t *buf, uint64_t off0)
{
	int windows = rk_xfer_remote_mode(k->blocks) == RK_XFER_MW;
	struct rk_xfer_op op = {
	    .op = RK_XFER_OP_READ, .local = lseg, .remote_off = off0, .len = KV_BLOCK_SIZE};
	struct rk_xfer_remote *r2;
	struct rk_xfer_peer *peer2;
	struct rk_xfer_batch *b;
	struct rk_conn *lane2;
	struct rk_error err;
	uint64_t ticket2;
	int r;

	lane2 = connect_lane(k, &ticket2); /* a ticket we never show */
	if (rk_xfer_peer_create(k->x, &lane2, 1, &err, &peer2) ||
	    rk_xfer_import(peer2, k->desc, k->desc_len, &err, &r2))
		ex_die("second lane: %s", rk_error_str(&err));
	op.remote = r2;
	if (rk_xfer_post(peer2, &op, 1, NULL, &err, &b))
		ex_die("second lane: %s", rk_error_str(&err));
	r = rk_xfer_batch_wait(b, -1, &err);
	rk_xfer_batch_free(b);
	if (r != -EREMOTEIO)
		ex_die("second lane: the first lane's descriptor: %s, not a remote access error",
		       r == 1 ? "the READ worked" : rk_error_str(&err));
	printf("another lane: the same descriptor is refused by the server's NIC (%s)\n",
	       windows ? "a window works on its own QP only"
		       : "a registration works in its own PD only, one per client");
	memset(buf, 0, KV_BLOCK_SIZE);
	rk_xfer_remote_free(r2);
	rk_xfer_peer_destroy(peer2);
	rk_conn_destroy(lane2);
}

/* Step 6. What the descriptor does not grant, and what revoking it does. */
static void limits(struct kv *k, struct rk_xfer_seg *lseg)
{
	struct rk_xfer_op op = {
	    .op = RK_XFER_OP_WRITE, .local = lseg, .remote = k->blocks, .len = KV_BLOCK_SIZE};
	uint8_t req[KV_TICKET_LEN];
	struct rk_xfer_batch *b;
	struct rk_error err;
	int r;

	/* READ only: the library refuses a WRITE before posting it. */
	r = rk_xfer_post(k->peer, &op, 1, NULL, &err, &b);
	if (r != -EACCES)
		ex_die("a WRITE with a READ-only descriptor: %d, not -EACCES", r);
	printf("write: refused before posting, the descriptor grants READ only\n");

	kv_put64(req, k->ticket);
	call(k, KV_M_BYE, req, sizeof(req), NULL, 0, "bye");
	/*
	 * The descriptor still looks valid here (nothing told this side), so
	 * the READ goes out; the server's NIC refuses it: remote access error,
	 * and the lane's QP goes to the error state.
	 */
	op.op = RK_XFER_OP_READ;
	if (rk_xfer_post(k->peer, &op, 1, NULL, &err, &b))
		ex_die("READ after bye: %s", rk_error_str(&err));
	r = rk_xfer_batch_wait(b, -1, &err);
	rk_xfer_batch_free(b);
	if (r != -EREMOTEIO)
		ex_die("READ after bye: %s, not a remote access error",
		       r == 1 ? "it succeeded" : rk_error_str(&err));
	printf("after bye: the server's NIC refused the READ (%s)\n",
	       err.wc_status_str && *err.wc_status_str ? err.wc_status_str : "remote access error");
}

void kv_client(void *arg)
{
	struct kv k = {.a = arg};
	struct rk_device_opts dopts = {.addr = k.a->pair.addr, .gid_index = -1};
	size_t buf_len = (size_t)k.a->batch * KV_BLOCK_SIZE;
	uint64_t *off = calloc((size_t)k.a->keys, sizeof(*off));
	struct rk_xfer_seg *lseg;
	struct rk_error err;
	uint8_t *buf;

	if (!off)
		ex_die("out of memory");
	if (rk_device_open(&dopts, &err, &k.dev))
		ex_die("%s", rk_error_str(&err));
	connect_both(&k);
	say_hello(&k);
	look_up(&k, off);
	/* Zeroed: the NIC writes it behind the compiler's (and valgrind's) back. */
	buf = rk_alloc_aligned(buf_len);
	if (!buf)
		ex_die("out of memory");
	if (rk_xfer_seg_reg(k.x, buf, buf_len, 0, &err, &lseg))
		ex_die("%s", rk_error_str(&err));
	read_blocks(&k, off, lseg, buf);
	other_lane(&k, lseg, buf, off[0]);
	limits(&k, lseg);
	printf("client: %lu calls, every block checked: OK\n", k.calls);
	/* Reverse order: import, peer, lane, segment, rk_xfer, RPC, device. */
	rk_xfer_remote_free(k.blocks);
	rk_xfer_peer_destroy(k.peer);
	rk_conn_destroy(k.lane);
	rk_xfer_seg_dereg(lseg);
	rk_free_aligned(buf);
	rk_xfer_destroy(k.x);
	rk_rpc_client_destroy(k.rpc);
	rk_device_close(k.dev);
	free(off);
}
