/*
 * multi_qp.c - RDMA WRITE bandwidth over 1, 2, 4 ... --num-qp connections,
 * with all QPs sharing one completion queue and with one CQ per QP.  Work
 * requests go out --batch at a time as one linked list per ibv_post_send, of
 * which only the last is signaled; completions come in by the array.
 *
 *   ex07_multi_qp [options] ADDR                  server (child process) and client
 *   ex07_multi_qp --server [options] ADDR         the server only
 *   ex07_multi_qp --client [options] ADDR         the client only
 *
 * The lessons: one doorbell per batch instead of per message; one completion
 * per batch (on RC a completion means every earlier WR of that QP is done);
 * and a CQ is just a queue - many QPs can share one, and one ibv_poll_cq then
 * serves them all, instead of a loop that polls N mostly-empty CQs.  At the
 * end every remote region is read back with RDMA READ and compared.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rdma/rdma_cma.h>

#include "ex_common.h"

#define TIMEOUT_MS 15000 /* every wait: CM events, completions */
#define MAX_QP	   16
#define MAX_BATCH  64
#define IN_FLIGHT  2 /* batches in flight per QP */
#define VERSION	   1

struct req_pdata { /* client -> server in the connect request */
	uint8_t version, pad[3];
	uint32_t size; /* big-endian: the region to expose for this connection */
};

struct rep_pdata {     /* server -> client in the accept */
	uint32_t rkey; /* big-endian, both */
	uint64_t addr;
};

struct args {
	struct ex_pair pair; /* first: ADDR, --port, --server/--client */
	long num_qp, batch, iters;
	long long size;
};

/* Client: one connection.  The first set shares a CQ, the second has one CQ each. */
struct conn {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	uint32_t rkey;
	uint64_t raddr;
	uint32_t posted, inflight; /* batches */
};

/* Server: what one accepted connection holds. */
struct sconn {
	struct rdma_cm_id *id;
	char *buf;
	struct ibv_mr *mr;
};

static struct rdma_cm_event *get_event(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;

	if (!ex_wait_fd(ch->fd, TIMEOUT_MS))
		ex_die("no connection event within %d ms", TIMEOUT_MS);
	if (rdma_get_cm_event(ch, &ev))
		ex_die_errno("rdma_get_cm_event");
	return ev;
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev = get_event(ch);

	if (ev->event == RDMA_CM_EVENT_REJECTED && want == RDMA_CM_EVENT_ESTABLISHED)
		ex_die("rejected (status %d): no server on that address and port?", ev->status);
	if (ev->event != want)
		ex_die("expected %s, got %s (status %d)", rdma_event_str(want),
		       rdma_event_str(ev->event), ev->status);
	return ev;
}

static void create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq, int batch)
{
	struct ibv_qp_init_attr qpa = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = IN_FLIGHT * batch + 1, /* + 1: the final READ */
		    .max_recv_wr = 1,
		    .max_send_sge = 1,
		    .max_recv_sge = 1}};
	uint8_t ack_timeout = 17; /* 4.096 us * 2^17 = 0.5 s: survives TCG-emulated rxe */

	if (rdma_create_qp(id, pd, &qpa))
		ex_die_errno("rdma_create_qp");
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
			    sizeof(ack_timeout)))
		ex_die_errno("rdma_set_option(ACK_TIMEOUT)");
}

static struct ibv_mr *reg(struct ibv_pd *pd, void *buf, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, access);

	if (!mr) {
		ex_report_reg_mr_failure(len);
		exit(1);
	}
	return mr;
}

/*
 * The server is passive: it exposes one region per connection for the
 * client's WRITEs and READs, which complete without involving its CPU.  It
 * only handles connection events, until every connection has gone again.
 */
static void run_server(void *arg, int ready_fd)
{
	const struct args *a = arg;
	const char *addr = a->pair.addr, *port = a->pair.port;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen_id;
	struct addrinfo *ai = ex_resolve(addr, port, 1);
	struct sconn conns[2 * MAX_QP] = {{0}};
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	int total = 0, gone = 0;

	if (!ch)
		ex_die_errno("rdma_create_event_channel");
	if (rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP))
		ex_die_errno("rdma_create_id");
	if (rdma_bind_addr(listen_id, ai->ai_addr))
		ex_die("rdma_bind_addr(%s port %s): %s", addr, port, strerror(errno));
	freeaddrinfo(ai);
	if (rdma_listen(listen_id, 2 * MAX_QP))
		ex_die_errno("rdma_listen");
	printf("server: listening on %s port %s\n", addr, port);
	ex_server_ready(ready_fd);

	do {
		struct rdma_cm_event *ev = get_event(ch);
		struct sconn *c = ev->id->context;
		struct req_pdata rq;
		struct rep_pdata rp;
		struct rdma_conn_param param = {.private_data = &rp,
						.private_data_len = sizeof(rp),
						.responder_resources = 1,
						.initiator_depth = 1,
						/* retry_count 6: rxe treats 7 like "retry forever",
						   and a dead peer would go unnoticed */
						.retry_count = 6,
						.rnr_retry_count = 7};
		uint32_t size;

		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (ev->param.conn.private_data_len < sizeof(rq))
				ex_die("connect request without a region size");
			memcpy(&rq, ev->param.conn.private_data, sizeof(rq));
			size = ntohl(rq.size);
			if (rq.version != VERSION || size < 1 || size > (8u << 20) ||
			    total == 2 * MAX_QP) {
				rdma_reject(ev->id, NULL, 0);
				ex_die("refused connection %d: version %u, region %u bytes", total,
				       rq.version, size);
			}
			if (!pd) { /* all connections arrive on the same device */
				pd = ibv_alloc_pd(ev->id->verbs);
				cq = ibv_create_cq(ev->id->verbs, 2 * MAX_QP, NULL, NULL, 0);
				if (!pd || !cq)
					ex_die_errno("ibv_alloc_pd/ibv_create_cq");
			}
			c = &conns[total++];
			c->id = ev->id;
			ev->id->context = c;
			create_qp(c->id, pd, cq, 1);
			c->buf = calloc(1, size);
			if (!c->buf)
				ex_die("out of memory");
			c->mr = reg(pd, c->buf, size,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ);
			rp.rkey = htonl(c->mr->rkey);
			rp.addr = htobe64((uintptr_t)c->buf);
			if (rdma_accept(c->id, &param))
				ex_die_errno("rdma_accept");
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			rdma_ack_cm_event(ev); /* before destroying the id it belongs to */
			ev = NULL;
			rdma_destroy_qp(c->id);
			if (ibv_dereg_mr(c->mr))
				ex_die_errno("ibv_dereg_mr");
			free(c->buf);
			if (rdma_destroy_id(c->id))
				ex_die_errno("rdma_destroy_id");
			gone++;
			break;
		default:
			ex_die("unexpected %s (status %d)", rdma_event_str(ev->event), ev->status);
		}
		if (ev)
			rdma_ack_cm_event(ev);
	} while (total == 0 || gone < total);
	printf("server: %d connections served\n", total);
	if (ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
		ex_die_errno("ibv_destroy_cq/ibv_dealloc_pd");
	if (rdma_destroy_id(listen_id))
		ex_die_errno("rdma_destroy_id");
	rdma_destroy_event_channel(ch);
}

/* Post the next batch on connection i: `batch` WRITEs in one list, the last signaled. */
static void post_batch(struct conn *c, int i, int batch, uint32_t size, char *local, uint32_t lkey)
{
	struct ibv_sge sge[MAX_BATCH];
	struct ibv_send_wr wr[MAX_BATCH], *bad;

	for (int k = 0; k < batch; k++) {
		sge[k] = (struct ibv_sge){.addr = (uintptr_t)local, .length = size, .lkey = lkey};
		wr[k] = (struct ibv_send_wr){.wr_id = i,
					     .next = k + 1 < batch ? &wr[k + 1] : NULL,
					     .sg_list = &sge[k],
					     .num_sge = 1,
					     .opcode = IBV_WR_RDMA_WRITE,
					     .send_flags = k + 1 < batch ? 0 : IBV_SEND_SIGNALED,
					     .wr.rdma = {.remote_addr = c->raddr, .rkey = c->rkey}};
	}
	if (ibv_post_send(c->id->qp, wr, &bad))
		ex_die_errno("ibv_post_send");
	c->posted++;
	c->inflight++;
}

/*
 * Move `writes` WRITEs of `size` bytes over connections c[0..n), IN_FLIGHT
 * batches in flight on each.  With a shared CQ one ibv_poll_cq sees them all;
 * otherwise every CQ is polled in turn.  Returns the bytes moved per second.
 */
static double measure(struct conn *c, int n, int shared, uint32_t writes, int batch, uint32_t size,
		      char *local, uint32_t lkey)
{
	uint32_t batches = (writes + n * batch - 1) / (n * batch); /* per QP, at least 1 */
	uint32_t done = 0;
	uint64_t t0 = ex_now_ns(), deadline = t0 + TIMEOUT_MS * 1000000ull;
	struct ibv_wc wc[2 * MAX_QP];

	for (int i = 0; i < n; i++)
		c[i].posted = c[i].inflight = 0;
	while (done < batches * n) {
		for (int i = 0; i < n; i++)
			while (c[i].inflight < IN_FLIGHT && c[i].posted < batches)
				post_batch(&c[i], i, batch, size, local + (size_t)i * size, lkey);
		for (int q = 0; q < (shared ? 1 : n); q++) {
			int got = ibv_poll_cq(c[q].cq, 2 * MAX_QP, wc);

			if (got < 0)
				ex_die("ibv_poll_cq failed");
			for (int k = 0; k < got; k++) {
				if (wc[k].status != IBV_WC_SUCCESS) {
					ex_report_wc("RDMA WRITE batch", &wc[k]);
					exit(1);
				}
				c[wc[k].wr_id].inflight--; /* wr_id: our own index, < n */
				done++;
			}
			if (got > 0)
				deadline = ex_now_ns() + TIMEOUT_MS * 1000000ull;
		}
		if (ex_now_ns() > deadline)
			ex_die("no completion within %d ms: is the peer alive?", TIMEOUT_MS);
	}
	return (double)batches * n * batch * size / ((ex_now_ns() - t0) / 1e9);
}

/* READ connection i's remote region back into `into` and compare it with `want`. */
static void verify(struct conn *c, uint32_t size, char *into, uint32_t lkey, const char *want)
{
	struct ibv_sge sge = {.addr = (uintptr_t)into, .length = size, .lkey = lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = c->raddr, .rkey = c->rkey}},
			   *bad;
	uint64_t deadline = ex_now_ns() + TIMEOUT_MS * 1000000ull;
	struct ibv_wc wc;
	int n;

	memset(into, 0, size);
	if (ibv_post_send(c->id->qp, &wr, &bad))
		ex_die_errno("ibv_post_send(READ)");
	while ((n = ibv_poll_cq(c->cq, 1, &wc)) == 0)
		if (ex_now_ns() > deadline)
			ex_die("RDMA READ: no completion within %d ms", TIMEOUT_MS);
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		if (n > 0)
			ex_report_wc("RDMA READ", &wc);
		ex_die("RDMA READ failed");
	}
	if (memcmp(into, want, size))
		ex_die("remote region of QP 0x%x does not hold what was written",
		       c->id->qp->qp_num);
}

static void run_client(void *arg)
{
	const struct args *a = arg;
	const char *addr = a->pair.addr, *port = a->pair.port;
	int max_qp = a->num_qp, batch = a->batch;
	uint32_t size = a->size, writes = a->iters;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct addrinfo *ai = ex_resolve(addr, port, 0);
	struct req_pdata rq = {.version = VERSION, .size = htonl(size)};
	/* retry_count 6: rxe treats 7 like "retry forever", and a dead peer would go unnoticed */
	struct rdma_conn_param param = {.private_data = &rq,
					.private_data_len = sizeof(rq),
					.responder_resources = 1,
					.initiator_depth = 1,
					.retry_count = 6,
					.rnr_retry_count = 7};
	struct conn conns[2][MAX_QP] = {{{0}}}; /* [0]: shared CQ, [1]: a CQ per QP */
	struct ibv_pd *pd = NULL;
	struct ibv_cq *shared_cq = NULL;
	struct ibv_mr *mr;
	char *local; /* max_qp source regions, then one region to read back into */

	if (!ch)
		ex_die_errno("rdma_create_event_channel");
	for (int set = 0; set < 2; set++) {
		for (int i = 0; i < max_qp; i++) {
			struct conn *c = &conns[set][i];
			struct rdma_cm_event *ev;
			struct rep_pdata rp;

			if (rdma_create_id(ch, &c->id, NULL, RDMA_PS_TCP))
				ex_die_errno("rdma_create_id");
			if (rdma_resolve_addr(c->id, NULL, ai->ai_addr, TIMEOUT_MS))
				ex_die("rdma_resolve_addr(%s): %s", addr, strerror(errno));
			rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
			if (rdma_resolve_route(c->id, TIMEOUT_MS))
				ex_die_errno("rdma_resolve_route");
			rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
			if (!pd) {
				pd = ibv_alloc_pd(c->id->verbs);
				shared_cq = ibv_create_cq(c->id->verbs, (IN_FLIGHT + 1) * MAX_QP,
							  NULL, NULL, 0);
				if (!pd || !shared_cq)
					ex_die_errno("ibv_alloc_pd/ibv_create_cq");
			}
			c->cq = set == 0
				    ? shared_cq
				    : ibv_create_cq(c->id->verbs, IN_FLIGHT + 1, NULL, NULL, 0);
			if (!c->cq)
				ex_die_errno("ibv_create_cq");
			create_qp(c->id, pd, c->cq, batch);
			if (rdma_connect(c->id, &param))
				ex_die_errno("rdma_connect");
			ev = expect(ch, RDMA_CM_EVENT_ESTABLISHED);
			if (ev->param.conn.private_data_len < sizeof(rp))
				ex_die("the server did not say where to write");
			memcpy(&rp, ev->param.conn.private_data, sizeof(rp));
			rdma_ack_cm_event(ev);
			c->rkey = ntohl(rp.rkey);
			c->raddr = be64toh(rp.addr);
		}
	}
	freeaddrinfo(ai);
	local = malloc((size_t)(max_qp + 1) * size);
	if (!local)
		ex_die("out of memory");
	for (size_t b = 0; b < (size_t)max_qp * size; b++)
		local[b] = (char)(b / size * 37 + b % 251); /* different in every region */
	mr = reg(pd, local, (size_t)(max_qp + 1) * size, IBV_ACCESS_LOCAL_WRITE);

	printf("%4s %6s %9s %8s %16s %16s\n", "qps", "batch", "size", "writes", "shared_cq_Gb/s",
	       "cq_per_qp_Gb/s");
	for (int n = 1; n <= max_qp; n = n * 2 > max_qp && n < max_qp ? max_qp : n * 2) {
		uint32_t moved = (writes + n * batch - 1) / (n * batch) * n * batch;
		double bw[2];

		for (int set = 0; set < 2; set++)
			bw[set] =
			    measure(conns[set], n, set == 0, writes, batch, size, local, mr->lkey);
		printf("%4d %6d %9u %8u %16.3f %16.3f\n", n, batch, size, moved, bw[0] * 8 / 1e9,
		       bw[1] * 8 / 1e9);
	}
	for (int set = 0; set < 2; set++)
		for (int i = 0; i < max_qp; i++)
			verify(&conns[set][i], size, local + (size_t)max_qp * size, mr->lkey,
			       local + (size_t)i * size);
	printf("verified %d remote regions by RDMA READ\n", 2 * max_qp);

	for (int set = 1; set >= 0; set--) {
		for (int i = max_qp - 1; i >= 0; i--) {
			struct conn *c = &conns[set][i];

			if (rdma_disconnect(c->id))
				ex_die_errno("rdma_disconnect");
			rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
			rdma_destroy_qp(c->id);
			if (set == 1 && ibv_destroy_cq(c->cq))
				ex_die_errno("ibv_destroy_cq");
			if (rdma_destroy_id(c->id))
				ex_die_errno("rdma_destroy_id");
		}
	}
	if (ibv_dereg_mr(mr))
		ex_die_errno("ibv_dereg_mr");
	free(local);
	if (ibv_destroy_cq(shared_cq) || ibv_dealloc_pd(pd))
		ex_die_errno("ibv_destroy_cq/ibv_dealloc_pd");
	rdma_destroy_event_channel(ch);
}

static void usage(FILE *f)
{
	ex_pair_usage(f,
		      "RDMA WRITE bandwidth over 1, 2, 4 ... N QPs, with a shared CQ and with\n"
		      "one CQ per QP; prints a table.\n",
		      "7507",
		      "  -q, --num-qp N    largest number of QPs, 1..%d (default 8)\n"
		      "  -b, --batch B     WRITEs per ibv_post_send, 1..%d (default 8)\n"
		      "  -S, --size BYTES  bytes per WRITE, 1..8M (default 64K)\n"
		      "  -n, --iters N     WRITEs per measurement (default 2048)\n",
		      MAX_QP, MAX_BATCH);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"server", no_argument, NULL, 's'},
					     {"client", no_argument, NULL, 'c'},
					     {"port", required_argument, NULL, 'p'},
					     {"num-qp", required_argument, NULL, 'q'},
					     {"batch", required_argument, NULL, 'b'},
					     {"size", required_argument, NULL, 'S'},
					     {"iters", required_argument, NULL, 'n'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct args a = {
	    .pair.port = "7507", .num_qp = 8, .batch = 8, .iters = 2048, .size = 65536};
	int opt;

	ex_set_prog(argv[0]);
	while ((opt = getopt_long(argc, argv, "scp:q:b:S:n:h", opts, NULL)) != -1) {
		if (ex_pair_option(&a.pair, opt, optarg, usage))
			continue;
		if (opt == 'q' && ex_parse_int(optarg, 1, MAX_QP, &a.num_qp))
			ex_die("--num-qp: '%s' is not a number in 1..%d", optarg, MAX_QP);
		if (opt == 'b' && ex_parse_int(optarg, 1, MAX_BATCH, &a.batch))
			ex_die("--batch: '%s' is not a number in 1..%d", optarg, MAX_BATCH);
		/* rxe and some NICs misbehave on single WRs over 8 MiB */
		if (opt == 'S' && ((a.size = ex_parse_size(optarg)) < 1 || a.size > (8 << 20)))
			ex_die("--size: '%s' is not a size in 1..8M", optarg);
		if (opt == 'n' && ex_parse_int(optarg, 1, 100000000, &a.iters))
			ex_die("--iters: '%s' is not a number in 1..100000000", optarg);
	}
	ex_pair_run(&a.pair, argc, argv, usage, run_server, run_client, &a);
	return 0;
}
