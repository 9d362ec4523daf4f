/*
 * kv_server.c - example 10's block server: nblocks blocks of 4 KiB in one
 * buffer, one registered segment over all of it, and RPC methods that tell
 * a client where a key's block is and hand it a descriptor to READ it with.
 * The blocks themselves never pass through this process again: clients
 * READ them one-sided, and the server's CPU sleeps meanwhile.
 *
 * Each client has two connections (kv_wire.h): its RPC connection (the
 * control plane, the library's RPC server) and a data lane (an rdma_cm
 * connection of its own, accepted here). Why not READ over the RPC
 * connection? Three reasons, each enough:
 *  - the RPC layer owns its connections' receive queues (requests land in
 *    them) and the one-sided layer wants its lanes' receive queues too
 *    (rk_xfer_peer_create posts its notification receives there): two
 *    owners of one queue lose completions;
 *  - the RPC server keeps its connections in a PD of its own, which holds
 *    no memory of ours, on purpose: a peer's QP can reach only memory
 *    registered in its PD, and the blocks are not there;
 *  - the data path wants its own tuning (send queue, selective signaling,
 *    READs in flight) and its own failure: a lane that fails a READ goes
 *    to the error state, and the control plane should not go with it.
 * (rpc.h gives no access to an RPC connection's rk_conn, for the same
 * reasons.) So the data goes on lanes of their own, joined to the client
 * by a ticket, as rk copy joins its lanes to a session. The server
 * answers a lane's connect with a random 64-bit ticket; the client shows
 * it in KV_M_HELLO and gets a descriptor exported to that lane and to no
 * other.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/random.h>

#include "kv_cache.h"
#include "kv_wire.h"

#define IDLE_NS		 (30ull * 1000000000) /* --clients N: give up after 30 s of nothing */
#define ACCEPTS_PER_PASS 2	    /* lane connects handled between two looks at the RPC server */
#define MS		 1000000ull /* ns */

/*
 * One client: its data lane, the one-sided peer over it, the ticket naming
 * both. With windows every lane uses the server's rk_xfer and segment; with
 * registrations each client has a PD, an rk_xfer and a segment of its own
 * (pd set), so that a key exported to one is honoured on its lane only.
 */
struct client {
	struct rk_conn *lane; /* NULL: the slot is free */
	struct rk_xfer_peer *peer;
	struct rk_pd *pd; /* NULL: the server's x and seg */
	struct rk_xfer *x;
	struct rk_xfer_seg *seg;
	uint64_t ticket;
	char addr[64];		    /* the lane's peer, "10.0.0.2:51234" */
	char rpc[64];		    /* the RPC connection it is bound to; "" until then */
	struct rk_rpc_req *waiting; /* a hello that came before the handshake ended */
	uint64_t deadline_ns;	    /* close the lane then: see expire() */
	int up, exported, bye;
};

struct server {
	const struct kv_args *a;
	struct rk_device *dev;
	struct rk_xfer *x;
	struct rk_xfer_seg *seg; /* windows only: registrations are per client */
	enum rk_xfer_mode mode;
	uint8_t *blocks;
	uint32_t nblocks;
	uint32_t *where; /* key -> block index: the "index" a lookup consults */
	struct client cl[KV_LANES_MAX];
	unsigned long calls, served;
	uint64_t last_ns; /* when anything last happened */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t lease_ns(const struct server *s)
{
	return (uint64_t)s->a->lease_s * 1000 * MS;
}

/*
 * Every method with a ticket: check its length, find its client, and bind
 * the lane to the calling RPC connection on first use, so that another
 * connection that learns the ticket can neither take the descriptor nor
 * say bye for it (kv_wire.h: the limits of knowing a connection by its
 * address and port).
 */
static struct client *claim(struct server *s, struct rk_rpc_req *req)
{
	const char *rpc = rk_rpc_req_peer(req);
	uint32_t len;
	const uint8_t *in = rk_rpc_req_data(req, &len);
	struct client *c = NULL;
	uint64_t t;

	if (len != KV_TICKET_LEN) {
		rk_rpc_reply(req, EINVAL, NULL, 0);
		return NULL;
	}
	t = kv_get64(in);
	for (unsigned i = 0; i < KV_LANES_MAX && !c; i++)
		if (s->cl[i].lane && s->cl[i].ticket == t)
			c = &s->cl[i];
	if (!c) {
		rk_rpc_reply(req, ENOENT, NULL, 0);
		return NULL;
	}
	if (!c->rpc[0])
		snprintf(c->rpc, sizeof(c->rpc), "%s", rpc);
	else if (strcmp(c->rpc, rpc)) {
		rk_rpc_reply(req, EPERM, NULL, 0);
		return NULL;
	}
	return c;
}

/*
 * Export the segment to the client's (established) lane and answer @req
 * with the descriptor. The lesson of the example: the descriptor is a few
 * bytes the application carries as it likes (here in an RPC answer), and
 * it is made for one peer. With memory windows (RK_XFER_MW) the key in it
 * is a window bound to this client's lane QP only; with registrations, a
 * registration in this client's PD only: another client that learns it
 * reaches nothing. READ only: nobody needs to write a cache it reads.
 */
static void give_access(struct server *s, struct client *c, struct rk_rpc_req *req)
{
	uint8_t out[KV_HELLO_HDR + RK_XFER_DESC_MAX];
	struct rk_error err;
	size_t len;

	if (rk_conn_state(c->lane) != RK_CONN_CONNECTED) { /* gone meanwhile */
		rk_rpc_reply(req, ENOENT, NULL, 0);
		return;
	}
	/*
	 * Blocks this thread while the window binds complete (one bind per
	 * lane, microseconds); exporting again gives the same descriptor.
	 */
	if (rk_xfer_export(c->seg, c->peer, RK_XFER_READ, out + KV_HELLO_HDR,
			   sizeof(out) - KV_HELLO_HDR, &len, KV_TIMEOUT_MS, &err)) {
		fprintf(stderr, "server: export to %s: %s\n", c->addr, rk_error_str(&err));
		rk_rpc_reply(req, EIO, NULL, 0);
		return;
	}
	kv_put32(out, KV_BLOCK_SIZE);
	kv_put32(out + 4, s->nblocks);
	c->exported = 1;
	c->deadline_ns = ex_now_ns() + lease_ns(s); /* the lease starts (or is renewed) */
	rk_rpc_reply(req, 0, out, (uint32_t)(KV_HELLO_HDR + len));
}

/* The lane's handshake has ended: it now has KV_CLAIM_MS to say hello. */
static void established(struct server *s, struct client *c)
{
	struct rk_rpc_req *q = c->waiting;

	c->up = 1;
	c->deadline_ns = ex_now_ns() + KV_CLAIM_MS * MS;
	c->waiting = NULL;
	if (q)
		give_access(s, c, q);
}

/*
 * KV_M_HELLO. The client learnt the ticket from the server's accept, so its
 * handshake is all but done; but our side may not have seen the end of it
 * yet (the client's ready-to-use message and its hello travel apart). Then
 * the answer waits, held (rpc.h: a deferred answer), until tend_lanes sees
 * the lane established or gives it up: the thread never waits for a peer.
 */
static void hello(struct rk_rpc_req *req, void *arg)
{
	struct server *s = arg;
	struct client *c = claim(s, req);

	s->calls++;
	if (!c)
		return;
	if (c->bye) { /* revoked: a new export would undo what the client asked for */
		rk_rpc_reply(req, EALREADY, NULL, 0);
		return;
	}
	if (c->waiting) {
		rk_rpc_reply(req, EBUSY, NULL, 0);
		return;
	}
	if (!c->up && rk_conn_progress(c->lane, 0, NULL) == RK_CONN_CONNECTED)
		established(s, c);
	if (!c->up) {
		c->waiting = req; /* answered by tend_lanes */
		return;
	}
	give_access(s, c, req);
}

/* KV_M_LOOKUP: up to 256 keys per call, one offset (or KV_ABSENT) each. */
static void lookup(struct rk_rpc_req *req, void *arg)
{
	struct server *s = arg;
	const char *rpc = rk_rpc_req_peer(req);
	uint8_t out[8 * KV_LOOKUP_MAX];
	uint32_t len;
	const uint8_t *in = rk_rpc_req_data(req, &len);

	s->calls++;
	/* The library checked the length against its buffers; our own rule is stricter. */
	if (len == 0 || len % 8 || len > sizeof(out)) {
		rk_rpc_reply(req, EINVAL, NULL, 0);
		return;
	}
	/* A client at work: its lanes' leases go on. */
	for (unsigned i = 0; i < KV_LANES_MAX; i++) {
		struct client *c = &s->cl[i];

		if (c->lane && c->exported && !c->bye && !strcmp(c->rpc, rpc))
			c->deadline_ns = ex_now_ns() + lease_ns(s);
	}
	for (uint32_t i = 0; i < len / 8; i++) {
		uint64_t key = kv_get64(in + 8 * i);

		kv_put64(out + 8 * i,
			 key < s->nblocks ? (uint64_t)s->where[key] * KV_BLOCK_SIZE : KV_ABSENT);
	}
	rk_rpc_reply(req, 0, out, len);
}

/*
 * KV_M_BYE: revoke the caller's access. When rk_xfer_revoke returns, the
 * window is invalidated on the lane's QP (or, without windows, the
 * registration is gone): a READ with the old descriptor fails at the
 * client and touches nothing here. The lane stays up so that the client
 * can see that; it closes it, or we do after KV_CLAIM_MS.
 */
static void bye(struct rk_rpc_req *req, void *arg)
{
	struct server *s = arg;
	struct client *c = claim(s, req);
	struct rk_error err;
	int code = 0;

	s->calls++;
	if (!c)
		return;
	if (c->waiting) { /* its hello is moot now */
		rk_rpc_reply(c->waiting, EALREADY, NULL, 0);
		c->waiting = NULL;
	}
	if (c->exported && !c->bye && rk_xfer_revoke(c->seg, c->peer, KV_TIMEOUT_MS, &err)) {
		/* A timed-out invalidation disconnected the lane: access ended either way. */
		fprintf(stderr, "server: revoke for %s: %s\n", c->addr, rk_error_str(&err));
		code = EIO;
	}
	if (!c->bye)
		printf("server: %s said bye: access revoked\n", c->addr);
	c->bye = 1;
	c->deadline_ns = ex_now_ns() + KV_CLAIM_MS * MS;
	rk_rpc_reply(req, code, NULL, 0);
}

/*
 * Release a client, in reverse order: the peer first (its revoke needs the
 * lane), then the lane, then what the client had of its own. The lane is
 * disconnected without waiting for the peer's answer: a peer that never
 * answers must not hold this thread (rk_conn_destroy would wait 1 s).
 */
static void drop(struct client *c)
{
	if (c->waiting)
		rk_rpc_reply(c->waiting, ENOENT, NULL, 0);
	rk_xfer_peer_destroy(c->peer);
	if (c->lane && rk_conn_state(c->lane) == RK_CONN_CONNECTED)
		rk_conn_disconnect(c->lane, 0, NULL);
	rk_conn_destroy(c->lane);
	if (c->pd) {
		rk_xfer_seg_dereg(c->seg);
		rk_xfer_destroy(c->x);
		rk_pd_free(c->pd);
	}
	memset(c, 0, sizeof(*c));
}

/* "10.0.0.2:51234" and "10.0.0.2:40001" are one address; "[fd77::1]:5" too. */
static int same_host(const char *a, const char *b)
{
	const char *pa = strrchr(a, ':'), *pb = strrchr(b, ':');

	return pa && pb && pa - a == pb - b && !strncmp(a, b, (size_t)(pa - a));
}

/*
 * With registrations: a PD for this client, an rk_xfer in it and the
 * blocks registered there (xfer.h's advice). A key of this PD is honoured
 * on this client's lane only. The cost: one ibv_reg_mr of the blocks per
 * client (tens of microseconds per MiB) and its pinned pages counted again.
 */
static int own_domain(struct server *s, struct client *c, struct rk_error *err)
{
	struct rk_xfer_opts xo = {.mode = RK_XFER_MR};

	return rk_pd_alloc(s->dev, err, &c->pd) ?: rk_xfer_create(s->dev, c->pd, &xo, err, &c->x)
						   ?: rk_xfer_seg_reg(c->x, s->blocks,
								      (size_t)s->nblocks * KV_BLOCK_SIZE,
								      RK_XFER_READ, err, &c->seg);
}

/*
 * Accept one data lane, without waiting for its handshake to end: a
 * connector that never finishes it (a stopped process, a hostile one)
 * would otherwise hold this thread, and every other client's calls with
 * it. The lane stays CONNECTING in its slot; tend_lanes sees it
 * established, or closes it after KV_ESTABLISH_MS. The listener already
 * refused connects whose hello is not KV_APP_ID's; we refuse more than
 * KV_LANES_MAX, and more than KV_LANES_PER_ADDR from one address, so that
 * one host cannot take every slot. The lane's queues need room for a
 * window bind and an invalidation each (the defaults have plenty).
 */
static void accept_lane(struct server *s, struct rk_cm_request *req)
{
	const char *peer = rk_cm_request_peer(req);
	uint8_t reply[KV_TICKET_LEN];
	struct rk_conn_opts co = {0};
	struct client *c = NULL;
	struct rk_error err;
	unsigned same = 0;

	for (unsigned i = 0; i < KV_LANES_MAX; i++) {
		if (!s->cl[i].lane && !c)
			c = &s->cl[i];
		else if (s->cl[i].lane && same_host(s->cl[i].addr, peer))
			same++;
	}
	if (!c || same >= KV_LANES_PER_ADDR) {
		rk_cm_request_reject(req, RK_REJECT_BUSY,
				     c ? "too many lanes from this address" : "all lanes in use",
				     &err);
		return;
	}
	snprintf(c->addr, sizeof(c->addr), "%s", peer);
	/* Unguessable: the ticket is what entitles its holder to a descriptor. */
	if (getrandom(&c->ticket, sizeof(c->ticket), 0) != (ssize_t)sizeof(c->ticket))
		ex_die_errno("getrandom");
	kv_put64(reply, c->ticket);
	if (s->mode == RK_XFER_MR && own_domain(s, c, &err)) {
		fprintf(stderr, "server: lane from %s: %s\n", c->addr, rk_error_str(&err));
		rk_cm_request_reject(req, RK_REJECT_BUSY, "no resources", &err);
		drop(c);
		return;
	}
	if (!c->pd) {
		c->x = s->x;
		c->seg = s->seg;
	}
	co.pd = c->pd;
	/* Timeout 0: returns with the lane CONNECTING (cm.h). */
	if (rk_cm_request_accept(req, &co, reply, sizeof(reply), 0, &err, &c->lane) ||
	    rk_xfer_peer_create(c->x, &c->lane, 1, &err, &c->peer)) {
		fprintf(stderr, "server: lane from %s: %s\n", c->addr, rk_error_str(&err));
		drop(c);
		return;
	}
	c->deadline_ns = ex_now_ns() + KV_ESTABLISH_MS * MS;
}

/* The lane connects waiting, a few per pass: the RPC server's turn comes soon again. */
static void accept_lanes(struct server *s, struct rk_listener *lis)
{
	struct rk_cm_request *req;
	struct rk_error err;

	for (int n = 0; n < ACCEPTS_PER_PASS && rk_listener_get_request(lis, 0, &err, &req) == 0;
	     n++) {
		s->last_ns = ex_now_ns();
		accept_lane(s, req);
	}
}

/*
 * A lane past its deadline: not established in time, no hello in time,
 * lease run out (no hello or lookup: a client gone silent, or dead, as
 * the server never posts on a lane and would not notice otherwise), or
 * lingering after bye. Its access is revoked (drop) and the slot freed.
 */
static void expire(struct server *s, struct client *c)
{
	if (!c->up)
		printf("server: closing the lane of %s: not established within %d ms\n", c->addr,
		       KV_ESTABLISH_MS);
	else if (c->bye)
		printf("server: closing the lane of %s: lingering %d ms after bye\n", c->addr,
		       KV_CLAIM_MS);
	else if (c->exported)
		printf("server: closing the lane of %s: lease expired (no hello or lookup for %ld "
		       "s): access revoked\n",
		       c->addr, s->a->lease_s);
	else
		printf("server: closing the lane of %s: no hello within %d ms\n", c->addr,
		       KV_CLAIM_MS);
	if (c->bye) /* it said bye: served, whoever closes the lane */
		s->served++;
	drop(c);
}

/* Lanes established or gone (rdma_cm events), and lanes past their deadline. */
static void tend_lanes(struct server *s)
{
	uint64_t now = ex_now_ns();
	struct rk_error err;

	for (unsigned i = 0; i < KV_LANES_MAX; i++) {
		struct client *c = &s->cl[i];
		int st;

		if (!c->lane)
			continue;
		st = rk_conn_progress(c->lane, 0, &err);
		if (st < 0 || st == RK_CONN_DISCONNECTED || st == RK_CONN_ERROR) {
			/* (Perhaps before we saw its handshake end: both events in one look.) */
			s->last_ns = now;
			if (c->bye)
				s->served++;
			else
				printf("server: %s left without bye\n", c->addr);
			drop(c);
			continue;
		}
		if (!c->up && st == RK_CONN_CONNECTED)
			established(s, c);
		if (now > c->deadline_ns)
			expire(s, c);
		else if (c->exported && !c->bye)
			s->last_ns = now; /* a client reading is not idleness */
	}
}

/* Key k goes to block where[k]: a shuffle with a fixed seed, so lookups mean something. */
static void fill(struct server *s)
{
	for (uint32_t k = 0; k < s->nblocks; k++)
		s->where[k] = k;
	for (uint32_t k = s->nblocks - 1; k > 0; k--) {
		uint32_t j = (uint32_t)(kv_mix(k) % (k + 1)), t = s->where[k];

		s->where[k] = s->where[j];
		s->where[j] = t;
	}
	for (uint32_t k = 0; k < s->nblocks; k++)
		kv_fill(s->blocks + (size_t)s->where[k] * KV_BLOCK_SIZE, k);
}

static const char *mode_str(enum rk_xfer_mode m)
{
	return m == RK_XFER_MW ? "memory windows bound per lane"
			       : "a registration per client, each in a PD of its own";
}

void kv_server(void *arg, int ready_fd)
{
	const struct kv_args *a = arg;
	struct rk_device_opts dopts = {.addr = a->pair.addr, .gid_index = -1};
	struct rk_xfer_opts xo = {.mode = a->mode};
	/*
	 * The RPC server sleeps in its wait (RK_WAIT_EVENT): clients READ the
	 * blocks without it, so there is nothing to spin for.
	 */
	struct rk_rpc_server_opts so = {
	    .addr = a->pair.addr, .port = a->pair.port, .window = 8, .mode = RK_WAIT_EVENT};
	struct rk_listen_opts lo = {
	    .addr = a->pair.addr, .port = a->data_port, .app_id = KV_APP_ID};
	struct server s = {.a = a, .nblocks = (uint32_t)a->blocks};
	size_t size = (size_t)s.nblocks * KV_BLOCK_SIZE;
	struct rk_rpc_server *srv;
	struct rk_listener *lis;
	struct rk_error err;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (rk_device_open(&dopts, &err, &s.dev))
		ex_die("%s", rk_error_str(&err));
	if (rk_xfer_create(s.dev, NULL, &xo, &err, &s.x))
		ex_die("%s", rk_error_str(&err));
	s.mode = rk_xfer_mode(s.x);
	s.blocks = rk_alloc_aligned(size);
	s.where = calloc(s.nblocks, sizeof(*s.where));
	if (!s.blocks || !s.where)
		ex_die("out of memory for %u blocks", s.nblocks);
	fill(&s);
	/*
	 * With windows, one segment over every block, at most READ: one
	 * registration however many clients come, and no export can ever grant
	 * WRITE. With registrations, the same per client, each in a PD of its
	 * own (own_domain): a registration's key works on every QP of its PD.
	 */
	if (s.mode == RK_XFER_MW &&
	    rk_xfer_seg_reg(s.x, s.blocks, size, RK_XFER_READ, &err, &s.seg))
		ex_die("%s", rk_error_str(&err));
	if (rk_rpc_server_create(s.dev, &so, &err, &srv))
		ex_die("%s", rk_error_str(&err));
	rk_rpc_server_add(srv, KV_M_HELLO, hello, &s);
	rk_rpc_server_add(srv, KV_M_LOOKUP, lookup, &s);
	rk_rpc_server_add(srv, KV_M_BYE, bye, &s);
	if (rk_listener_create(s.dev, &lo, &err, &lis))
		ex_die("%s", rk_error_str(&err));
	printf("server: listening on %s port %s (data lanes on %s): %u blocks of %u bytes, "
	       "access by %s\n",
	       a->pair.addr, a->pair.port, a->data_port, s.nblocks, KV_BLOCK_SIZE,
	       mode_str(s.mode));
	ex_server_ready(ready_fd);
	/*
	 * One thread does everything: the RPC server's progress (which waits up
	 * to 20 ms for work), then the data listener and the lanes' rdma_cm
	 * events, neither of which ever waits for a peer.
	 */
	s.last_ns = ex_now_ns();
	while (!stop && !(a->clients && s.served >= (unsigned long)a->clients)) {
		int r = rk_rpc_server_progress(srv, 20, &err);

		if (r < 0 && r != -ETIMEDOUT && r != -EINTR)
			ex_die("%s", rk_error_str(&err));
		if (r == 0)
			s.last_ns = ex_now_ns();
		accept_lanes(&s, lis);
		tend_lanes(&s);
		if (a->clients && ex_now_ns() - s.last_ns > IDLE_NS)
			ex_die("nothing happened for 30 s (%lu of %ld clients done)", s.served,
			       a->clients);
	}
	printf("server: answered %lu calls for %lu client%s; every block went out by RDMA READ\n",
	       s.calls, s.served, s.served == 1 ? "" : "s");
	/* Reverse order: lanes (peers first), listener, RPC, segment, rk_xfer, memory, device. */
	for (unsigned i = 0; i < KV_LANES_MAX; i++)
		if (s.cl[i].lane)
			drop(&s.cl[i]);
	rk_listener_destroy(lis);
	rk_rpc_server_destroy(srv);
	rk_xfer_seg_dereg(s.seg);
	rk_xfer_destroy(s.x);
	free(s.where);
	rk_free_aligned(s.blocks);
	rk_device_close(s.dev);
}
