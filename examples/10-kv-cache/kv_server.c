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

#define MAX_CLIENTS 16			 /* data lanes at once: each pins a QP and its queues */
#define IDLE_NS	    (30ull * 1000000000) /* --clients N: give up after 30 s of nothing */

/* One client: its data lane, the one-sided peer over it, the ticket naming both. */
struct client {
	struct rk_conn *lane; /* NULL: the slot is free */
	struct rk_xfer_peer *peer;
	uint64_t ticket;
	char addr[64];
	uint64_t deadline_ns; /* close the lane then, unless it holds a live export */
	int exported, bye;
};

struct server {
	const struct kv_args *a;
	struct rk_xfer *x;
	struct rk_xfer_seg *seg;
	uint8_t *blocks;
	uint32_t nblocks;
	uint32_t *where; /* key -> block index: the "index" a lookup consults */
	struct client cl[MAX_CLIENTS];
	unsigned long calls, served;
	uint64_t last_ns; /* when anything last happened */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Every method with a ticket: check its length and find its client. */
static struct client *by_ticket(struct server *s, struct rk_rpc_req *req)
{
	uint32_t len;
	const uint8_t *in = rk_rpc_req_data(req, &len);
	uint64_t t;

	if (len != KV_TICKET_LEN) {
		rk_rpc_reply(req, EINVAL, NULL, 0);
		return NULL;
	}
	t = kv_get64(in);
	for (unsigned i = 0; i < MAX_CLIENTS; i++)
		if (s->cl[i].lane && s->cl[i].ticket == t)
			return &s->cl[i];
	rk_rpc_reply(req, ENOENT, NULL, 0);
	return NULL;
}

/*
 * KV_M_HELLO: export the segment to the caller's lane and answer with the
 * descriptor. The lesson of the example: the descriptor is a few bytes the
 * application carries as it likes (here in an RPC answer), and it is made
 * for one peer. With memory windows (RK_XFER_MW) the key in it is a window
 * bound to this client's lane QP only: another client that learns it
 * reaches nothing. READ only: nobody needs to write a cache it reads.
 */
static void hello(struct rk_rpc_req *req, void *arg)
{
	struct server *s = arg;
	uint8_t out[KV_HELLO_HDR + RK_XFER_DESC_MAX];
	struct client *c = by_ticket(s, req);
	struct rk_error err;
	size_t len;

	s->calls++;
	if (!c)
		return;
	if (c->bye) { /* revoked: a new export would undo what the client asked for */
		rk_rpc_reply(req, EALREADY, NULL, 0);
		return;
	}
	/*
	 * Blocks this thread while the window binds complete (one bind per
	 * lane, microseconds); exporting again gives the same descriptor.
	 */
	if (rk_xfer_export(s->seg, c->peer, RK_XFER_READ, out + KV_HELLO_HDR,
			   sizeof(out) - KV_HELLO_HDR, &len, KV_TIMEOUT_MS, &err)) {
		fprintf(stderr, "server: export to %s: %s\n", c->addr, rk_error_str(&err));
		rk_rpc_reply(req, EIO, NULL, 0);
		return;
	}
	kv_put32(out, KV_BLOCK_SIZE);
	kv_put32(out + 4, s->nblocks);
	c->exported = 1;
	rk_rpc_reply(req, 0, out, (uint32_t)(KV_HELLO_HDR + len));
}

/* KV_M_LOOKUP: up to 256 keys per call, one offset (or KV_ABSENT) each. */
static void lookup(struct rk_rpc_req *req, void *arg)
{
	struct server *s = arg;
	uint8_t out[8 * KV_LOOKUP_MAX];
	uint32_t len;
	const uint8_t *in = rk_rpc_req_data(req, &len);

	s->calls++;
	/* The library checked the length against its buffers; our own rule is stricter. */
	if (len == 0 || len % 8 || len > sizeof(out)) {
		rk_rpc_reply(req, EINVAL, NULL, 0);
		return;
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
	struct client *c = by_ticket(s, req);
	struct rk_error err;
	int code = 0;

	s->calls++;
	if (!c)
		return;
	if (c->exported && !c->bye && rk_xfer_revoke(s->seg, c->peer, KV_TIMEOUT_MS, &err)) {
		/* A timed-out invalidation disconnected the lane: access ended either way. */
		fprintf(stderr, "server: revoke for %s: %s\n", c->addr, rk_error_str(&err));
		code = EIO;
	}
	if (!c->bye)
		printf("server: %s said bye: access revoked\n", c->addr);
	c->bye = 1;
	c->deadline_ns = ex_now_ns() + KV_CLAIM_MS * 1000000ull;
	rk_rpc_reply(req, code, NULL, 0);
}

/* Release a client: peer before lane (the peer's revoke needs the lane). */
static void drop(struct client *c)
{
	rk_xfer_peer_destroy(c->peer);
	rk_conn_destroy(c->lane);
	memset(c, 0, sizeof(*c));
}

/*
 * Accept the data lanes waiting (never blocks when none is). The listener
 * already refused connects whose hello is not KV_APP_ID's; we refuse more
 * than MAX_CLIENTS. The lane's queues need room for a window bind and an
 * invalidation each (the defaults have plenty).
 */
static void accept_lanes(struct server *s, struct rk_listener *lis)
{
	struct rk_cm_request *req;
	struct rk_error err;

	while (rk_listener_get_request(lis, 0, &err, &req) == 0) {
		uint8_t reply[KV_TICKET_LEN];
		struct client *c = NULL;

		s->last_ns = ex_now_ns();
		for (unsigned i = 0; i < MAX_CLIENTS && !c; i++)
			if (!s->cl[i].lane)
				c = &s->cl[i];
		if (!c) {
			rk_cm_request_reject(req, RK_REJECT_BUSY, "all client slots in use", &err);
			continue;
		}
		snprintf(c->addr, sizeof(c->addr), "%s", rk_cm_request_peer(req));
		/* Unguessable: the ticket is what entitles its holder to a descriptor. */
		if (getrandom(&c->ticket, sizeof(c->ticket), 0) != (ssize_t)sizeof(c->ticket))
			ex_die_errno("getrandom");
		kv_put64(reply, c->ticket);
		if (rk_cm_request_accept(req, NULL, reply, sizeof(reply), KV_TIMEOUT_MS, &err,
					 &c->lane)) {
			fprintf(stderr, "server: lane from %s: %s\n", c->addr, rk_error_str(&err));
			memset(c, 0, sizeof(*c));
			continue;
		}
		if (rk_xfer_peer_create(s->x, &c->lane, 1, &err, &c->peer)) {
			fprintf(stderr, "server: peer %s: %s\n", c->addr, rk_error_str(&err));
			rk_conn_destroy(c->lane);
			memset(c, 0, sizeof(*c));
			continue;
		}
		/* A lane that never says hello would hold its slot forever: bound it. */
		c->deadline_ns = ex_now_ns() + KV_CLAIM_MS * 1000000ull;
	}
}

/* Notice lanes that went away (rdma_cm events) and close those past their deadline. */
static void tend_lanes(struct server *s)
{
	uint64_t now = ex_now_ns();
	struct rk_error err;

	for (unsigned i = 0; i < MAX_CLIENTS; i++) {
		struct client *c = &s->cl[i];
		int st;

		if (!c->lane)
			continue;
		st = rk_conn_progress(c->lane, 0, &err);
		if (st < 0 || st == RK_CONN_DISCONNECTED || st == RK_CONN_ERROR) {
			s->last_ns = now;
			if (c->bye)
				s->served++;
			else
				printf("server: %s left without bye\n", c->addr);
			drop(c);
		} else if ((!c->exported || c->bye) && now > c->deadline_ns) {
			printf("server: closing the lane of %s: %s for %d ms\n", c->addr,
			       c->bye ? "lingering after bye" : "no hello", KV_CLAIM_MS);
			drop(c);
		}
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
	return m == RK_XFER_MW ? "memory windows bound per lane" : "a registration per client";
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
	struct rk_device *dev;
	struct rk_error err;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (rk_device_open(&dopts, &err, &dev))
		ex_die("%s", rk_error_str(&err));
	if (rk_xfer_create(dev, NULL, &xo, &err, &s.x))
		ex_die("%s", rk_error_str(&err));
	s.blocks = rk_alloc_aligned(size);
	s.where = calloc(s.nblocks, sizeof(*s.where));
	if (!s.blocks || !s.where)
		ex_die("out of memory for %u blocks", s.nblocks);
	fill(&s);
	/*
	 * One segment over every block, at most READ: one registration however
	 * many clients come, and no export can ever grant WRITE.
	 */
	if (rk_xfer_seg_reg(s.x, s.blocks, size, RK_XFER_READ, &err, &s.seg))
		ex_die("%s", rk_error_str(&err));
	if (rk_rpc_server_create(dev, &so, &err, &srv))
		ex_die("%s", rk_error_str(&err));
	rk_rpc_server_add(srv, KV_M_HELLO, hello, &s);
	rk_rpc_server_add(srv, KV_M_LOOKUP, lookup, &s);
	rk_rpc_server_add(srv, KV_M_BYE, bye, &s);
	if (rk_listener_create(dev, &lo, &err, &lis))
		ex_die("%s", rk_error_str(&err));
	printf("server: listening on %s port %s (data lanes on %s): %u blocks of %u bytes, "
	       "access by %s\n",
	       a->pair.addr, a->pair.port, a->data_port, s.nblocks, KV_BLOCK_SIZE,
	       mode_str(rk_xfer_mode(s.x)));
	if (rk_xfer_mode(s.x) == RK_XFER_MR)
		/* Keys are honoured by every QP of the PD: see xfer.h. */
		printf(
		    "server: without windows a client could use another's key until its revoke\n");
	ex_server_ready(ready_fd);
	/*
	 * One thread does everything: the RPC server's progress (which waits up
	 * to 20 ms for work), then the data listener and the lanes' rdma_cm
	 * events, neither of which ever blocks.
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
	for (unsigned i = 0; i < MAX_CLIENTS; i++)
		if (s.cl[i].lane)
			drop(&s.cl[i]);
	rk_listener_destroy(lis);
	rk_rpc_server_destroy(srv);
	rk_xfer_seg_dereg(s.seg);
	rk_xfer_destroy(s.x);
	free(s.where);
	rk_free_aligned(s.blocks);
	rk_device_close(dev);
}
