/*
 * memory_pool.c - where should a client's RDMA WRITE land?  Two answers,
 * measured on the same connection:
 *
 *   reg per request  the server allocates a buffer and ibv_reg_mr()s it for
 *                    each request, hands out its (rkey, addr), and
 *                    ibv_dereg_mr()s it when the client is done;
 *   pool             the server registered one slab at start-up and hands
 *                    out a slot of it: the rkey is the slab's, the client
 *                    only needs the slot's offset.
 *
 * Each request: client SENDs ALLOC, server answers GRANT, client RDMA WRITEs
 * a pattern into the granted memory and SENDs DONE, server checks the pattern
 * is there, frees the memory and answers ACK with what allocating and freeing
 * cost it.
 *
 *   ex06_memory_pool [options] ADDR               server (child process) and client
 *   ex06_memory_pool --server [options] ADDR      the server only
 *   ex06_memory_pool --client [options] ADDR      the client only
 *
 * The lesson: registration pins pages and programs the NIC's translation
 * tables - a system call and tens of microseconds or more, per request.  A
 * pool pays that once; a slot costs a free-list operation.
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
#define VERSION	   1

/* Accept private data: the pool, registered once.  Integers big-endian. */
struct hello {
	uint8_t version, pad[3];
	uint32_t rkey, slots, slot_size;
	uint64_t base;
};

enum { ALLOC_REG = 1, ALLOC_POOL, GRANT, DONE, ACK, BYE };
static const char *mode_name[] = {"", "reg_mr/request", "pool slot"};

/* Every message, both ways, by SEND.  Integers big-endian. */
struct msg {
	uint32_t type, seq;
	uint32_t rkey;	  /* GRANT, reg mode: the fresh MR's rkey */
	uint32_t ok;	  /* ACK: the pattern was found in the granted memory */
	uint64_t addr;	  /* GRANT: reg mode the address, pool mode the offset */
	uint64_t cost_ns; /* ACK: the server's cost to allocate + free it */
};

struct args {
	struct ex_pair pair; /* first: ADDR, --port, --server/--client */
	long iters, slots;
	long long size;
};

struct side {
	struct rdma_event_channel *cm;
	struct rdma_cm_id *listen_id, *id;
	struct ibv_pd *pd;
	struct ibv_cq *send_cq, *recv_cq; /* apart: wait for one kind at a time */
	struct ibv_mr *msg_mr, *data_mr;
	struct msg msg[2]; /* [0] receive, [1] send */
	char *data;	   /* server: the pool; client: the source of the writes */
	size_t data_len;
};

static struct rdma_cm_event *get_event(struct side *s, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	if (!ex_wait_fd(s->cm->fd, TIMEOUT_MS))
		ex_die("no %s within %d ms", rdma_event_str(want), TIMEOUT_MS);
	if (rdma_get_cm_event(s->cm, &ev))
		ex_die_errno("rdma_get_cm_event");
	if (ev->event == RDMA_CM_EVENT_REJECTED && want == RDMA_CM_EVENT_ESTABLISHED)
		ex_die("rejected (status %d): no server on that address and port?", ev->status);
	if (ev->event != want)
		ex_die("expected %s, got %s (status %d)", rdma_event_str(want),
		       rdma_event_str(ev->event), ev->status);
	return ev;
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

static void post_recv(struct side *s)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)&s->msg[0], .length = sizeof(struct msg), .lkey = s->msg_mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

	if (ibv_post_recv(s->id->qp, &wr, &bad))
		ex_die_errno("ibv_post_recv");
}

static void create_resources(struct side *s, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qpa = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	};
	uint8_t ack_timeout = 17; /* 4.096 us * 2^17 = 0.5 s: survives TCG-emulated rxe */

	s->id = id;
	s->pd = ibv_alloc_pd(id->verbs);
	if (!s->pd)
		ex_die_errno("ibv_alloc_pd");
	s->send_cq = ibv_create_cq(id->verbs, 2, NULL, NULL, 0);
	s->recv_cq = ibv_create_cq(id->verbs, 1, NULL, NULL, 0);
	if (!s->send_cq || !s->recv_cq)
		ex_die_errno("ibv_create_cq");
	qpa.send_cq = s->send_cq;
	qpa.recv_cq = s->recv_cq;
	if (rdma_create_qp(id, s->pd, &qpa))
		ex_die_errno("rdma_create_qp");
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
			    sizeof(ack_timeout)))
		ex_die_errno("rdma_set_option(ACK_TIMEOUT)");
	s->msg_mr = reg(s->pd, s->msg, sizeof(s->msg), IBV_ACCESS_LOCAL_WRITE);
	post_recv(s);
}

/* The server's pool, or the client's write source: one buffer, registered once. */
static void create_data(struct side *s, size_t len, int access)
{
	s->data_len = len;
	if (posix_memalign((void **)&s->data, 4096, len))
		ex_die("out of memory");
	memset(s->data, 0, len);
	s->data_mr = reg(s->pd, s->data, len, access);
}

/* Busy-poll one successful completion from cq, or die at the deadline. */
static void poll_one(struct ibv_cq *cq)
{
	uint64_t deadline = ex_now_ns() + TIMEOUT_MS * 1000000ull;
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (ex_now_ns() > deadline)
			ex_die("no completion within %d ms: is the peer alive?", TIMEOUT_MS);
	if (n < 0)
		ex_die("ibv_poll_cq failed");
	if (wc.status != IBV_WC_SUCCESS) {
		ex_report_wc("request", &wc);
		exit(1);
	}
	if (wc.opcode == IBV_WC_RECV && wc.byte_len != sizeof(struct msg))
		ex_die("message of %u bytes, expected %zu", wc.byte_len, sizeof(struct msg));
}

/* Take the next message, re-post the receive, check it is of type `want` (0: any). */
static struct msg recv_msg(struct side *s, uint32_t want)
{
	struct msg m;

	poll_one(s->recv_cq);
	m = s->msg[0];
	post_recv(s); /* before we answer: the peer's next message may follow at once */
	m.type = ntohl(m.type);
	m.seq = ntohl(m.seq);
	if (want && m.type != want)
		ex_die("expected message type %u, got %u", want, m.type);
	return m;
}

/*
 * SEND msg[1], preceded when len != 0 by an RDMA WRITE of the data buffer to
 * (raddr, rkey).  Both go in one ibv_post_send list; only the SEND is
 * signaled, and on RC its completion means the WRITE before it completed
 * too.  The peer sees the SEND after the written data is in its memory.
 */
static void send_msg(struct side *s, uint32_t rkey, uint64_t raddr, uint32_t len)
{
	struct ibv_sge msg_sge = {
	    .addr = (uintptr_t)&s->msg[1], .length = sizeof(struct msg), .lkey = s->msg_mr->lkey};
	struct ibv_sge data_sge = {
	    .addr = (uintptr_t)s->data, .length = len, .lkey = s->data_mr->lkey};
	struct ibv_send_wr send = {.sg_list = &msg_sge,
				   .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr write = {.next = &send,
				    .sg_list = &data_sge,
				    .num_sge = 1,
				    .opcode = IBV_WR_RDMA_WRITE,
				    .wr.rdma = {.remote_addr = raddr, .rkey = rkey}};
	struct ibv_send_wr *bad;

	if (ibv_post_send(s->id->qp, len ? &write : &send, &bad))
		ex_die_errno("ibv_post_send");
	poll_one(s->send_cq);
}

/* What request `seq` writes at byte i of its buffer. */
static char pattern(uint32_t seq, uint32_t i)
{
	return (char)(seq * 7 + i / 8);
}

static void teardown(struct side *s)
{
	rdma_destroy_qp(s->id);
	if (ibv_dereg_mr(s->data_mr) || ibv_dereg_mr(s->msg_mr))
		ex_die_errno("ibv_dereg_mr");
	free(s->data);
	if (ibv_destroy_cq(s->recv_cq) || ibv_destroy_cq(s->send_cq))
		ex_die_errno("ibv_destroy_cq");
	if (ibv_dealloc_pd(s->pd))
		ex_die_errno("ibv_dealloc_pd");
	if (rdma_destroy_id(s->id) || (s->listen_id && rdma_destroy_id(s->listen_id)))
		ex_die_errno("rdma_destroy_id");
	rdma_destroy_event_channel(s->cm);
}

static void run_server(void *arg, int ready_fd)
{
	const struct args *a = arg;
	const char *addr = a->pair.addr, *port = a->pair.port;
	uint32_t slots = a->slots, size = a->size;
	struct side s = {0};
	/* retry_count 6: rxe treats 7 like "retry forever", and a dead peer would go unnoticed */
	struct rdma_conn_param param = {.retry_count = 6, .rnr_retry_count = 7};
	struct addrinfo *ai = ex_resolve(addr, port, 1);
	struct rdma_cm_event *ev;
	struct hello h = {.version = VERSION, .slots = htonl(slots), .slot_size = htonl(size)};
	uint32_t *ring = calloc(slots, sizeof(*ring)), head = 0, nfree = slots;
	uint32_t open = 0, open_seq = 0, slot = 0, served = 0;
	struct ibv_mr *mr = NULL;
	char *buf = NULL;
	uint64_t cost = 0, t0;

	if (!ring)
		ex_die("out of memory");
	/* The free list: a FIFO ring of slot numbers, so requests walk through the pool. */
	for (uint32_t i = 0; i < slots; i++)
		ring[i] = i;
	s.cm = rdma_create_event_channel();
	if (!s.cm)
		ex_die_errno("rdma_create_event_channel");
	if (rdma_create_id(s.cm, &s.listen_id, NULL, RDMA_PS_TCP))
		ex_die_errno("rdma_create_id");
	if (rdma_bind_addr(s.listen_id, ai->ai_addr))
		ex_die("rdma_bind_addr(%s port %s): %s", addr, port, strerror(errno));
	freeaddrinfo(ai);
	if (rdma_listen(s.listen_id, 1))
		ex_die_errno("rdma_listen");
	printf("server: listening on %s port %s\n", addr, port);
	ex_server_ready(ready_fd);

	ev = get_event(&s, RDMA_CM_EVENT_CONNECT_REQUEST);
	create_resources(&s, ev->id);
	rdma_ack_cm_event(ev);
	/* The pool: registered once, open to remote writes, announced in the accept. */
	create_data(&s, (size_t)slots * size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	h.rkey = htonl(s.data_mr->rkey);
	h.base = htobe64((uintptr_t)s.data);
	param.private_data = &h;
	param.private_data_len = sizeof(h);
	if (rdma_accept(s.id, &param))
		ex_die_errno("rdma_accept");
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_ESTABLISHED));

	for (;;) {
		struct msg m = recv_msg(&s, 0);

		if (m.type == BYE)
			break;
		memset(&s.msg[1], 0, sizeof(s.msg[1]));
		s.msg[1].seq = htonl(m.seq);
		if ((m.type == ALLOC_REG || m.type == ALLOC_POOL) && !open) {
			t0 = ex_now_ns();
			if (m.type == ALLOC_REG) {
				/* The expensive way: a fresh registration per request. */
				if (posix_memalign((void **)&buf, 4096, size))
					ex_die("out of memory");
				mr = reg(s.pd, buf, size,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
				s.msg[1].rkey = htonl(mr->rkey);
				s.msg[1].addr = htobe64((uintptr_t)buf);
			} else {
				/* The pool: take a slot, hand out its offset. */
				slot = ring[head];
				head = (head + 1) % slots;
				nfree--;
				buf = s.data + (size_t)slot * size;
				s.msg[1].addr = htobe64((uint64_t)slot * size);
			}
			cost = ex_now_ns() - t0;
			open = m.type;
			open_seq = m.seq;
			s.msg[1].type = htonl(GRANT);
		} else if (m.type == DONE && open && m.seq == open_seq) {
			/* DONE came after the WRITE on the same QP: the data is in place. */
			uint32_t i = 0;

			while (i < size && buf[i] == pattern(m.seq, i))
				i++;
			memset(buf, 0, size); /* so that a stray write shows in the final check */
			t0 = ex_now_ns();
			if (open == ALLOC_REG) {
				if (ibv_dereg_mr(mr))
					ex_die_errno("ibv_dereg_mr");
				free(buf);
			} else {
				ring[(head + nfree) % slots] = slot;
				nfree++;
			}
			cost += ex_now_ns() - t0;
			open = 0;
			served++;
			s.msg[1].type = htonl(ACK);
			s.msg[1].ok = htonl(i == size);
			s.msg[1].cost_ns = htobe64(cost);
		} else {
			ex_die("unexpected message: type %u, request %u", m.type, m.seq);
		}
		send_msg(&s, 0, 0, 0);
	}
	for (size_t i = 0; i < s.data_len; i++)
		if (s.data[i])
			ex_die("pool byte %zu was written outside a granted slot", i);
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_DISCONNECTED));
	printf("server: %u requests served; pool clean: no write outside its slot\n", served);
	free(ring);
	teardown(&s);
}

static void run_client(void *arg)
{
	const struct args *a = arg;
	const char *addr = a->pair.addr, *port = a->pair.port;
	uint32_t iters = a->iters;
	struct side s = {0};
	/* retry_count 6: rxe treats 7 like "retry forever", and a dead peer would go unnoticed */
	struct rdma_conn_param param = {.retry_count = 6, .rnr_retry_count = 7};
	struct addrinfo *ai = ex_resolve(addr, port, 0);
	struct rdma_cm_event *ev;
	struct hello h;
	uint32_t slots, size, pool_rkey;
	uint64_t base, *cost = calloc(iters, sizeof(*cost)), *lat = calloc(iters, sizeof(*lat));

	if (!cost || !lat)
		ex_die("out of memory");
	s.cm = rdma_create_event_channel();
	if (!s.cm)
		ex_die_errno("rdma_create_event_channel");
	if (rdma_create_id(s.cm, &s.id, NULL, RDMA_PS_TCP))
		ex_die_errno("rdma_create_id");
	if (rdma_resolve_addr(s.id, NULL, ai->ai_addr, TIMEOUT_MS))
		ex_die("rdma_resolve_addr(%s): %s", addr, strerror(errno));
	freeaddrinfo(ai);
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(s.id, TIMEOUT_MS))
		ex_die_errno("rdma_resolve_route");
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_ROUTE_RESOLVED));
	create_resources(&s, s.id);
	if (rdma_connect(s.id, &param))
		ex_die_errno("rdma_connect");
	ev = get_event(&s, RDMA_CM_EVENT_ESTABLISHED);
	/* The pool description is the peer's word: check it before sizing by it. */
	if (ev->param.conn.private_data_len < sizeof(h))
		ex_die("the server did not describe its pool");
	memcpy(&h, ev->param.conn.private_data, sizeof(h));
	rdma_ack_cm_event(ev);
	slots = ntohl(h.slots);
	size = ntohl(h.slot_size);
	pool_rkey = ntohl(h.rkey);
	base = be64toh(h.base);
	if (h.version != VERSION || slots < 1 || slots > 65536 || size < 64 || size > (1 << 20))
		ex_die("bad pool: version %u, %u slots of %u bytes", h.version, slots, size);
	create_data(&s, size, IBV_ACCESS_LOCAL_WRITE);

	/* Medians, not means: a preempted request would skew a mean. */
	printf("%-15s %9s %17s %15s %9s\n", "mode", "requests", "alloc+free_p50_us",
	       "request_p50_us", "verified");
	for (uint32_t mode = ALLOC_REG; mode <= ALLOC_POOL; mode++) {
		uint32_t verified = 0;

		for (uint32_t i = 0; i < iters; i++) {
			uint32_t seq = (mode - ALLOC_REG) * iters + i, rkey;
			struct msg m;
			uint64_t raddr;

			uint64_t t0 = ex_now_ns();

			s.msg[1] = (struct msg){.type = htonl(mode), .seq = htonl(seq)};
			send_msg(&s, 0, 0, 0);
			m = recv_msg(&s, GRANT);
			raddr = be64toh(m.addr);
			rkey = ntohl(m.rkey);
			if (mode == ALLOC_POOL) {
				/* A pool slot is (pool rkey, offset): check the offset first. */
				if (raddr % size || raddr / size >= slots)
					ex_die("granted offset %llu is not a slot of the pool",
					       (unsigned long long)raddr);
				raddr += base;
				rkey = pool_rkey;
			}
			if (m.seq != seq)
				ex_die("grant for request %u, expected %u", m.seq, seq);
			for (uint32_t b = 0; b < size; b++)
				s.data[b] = pattern(seq, b);
			s.msg[1] = (struct msg){.type = htonl(DONE), .seq = htonl(seq)};
			send_msg(&s, rkey, raddr, size);
			m = recv_msg(&s, ACK);
			if (m.seq != seq)
				ex_die("ack for request %u, expected %u", m.seq, seq);
			verified += ntohl(m.ok) == 1;
			cost[i] = be64toh(m.cost_ns);
			lat[i] = ex_now_ns() - t0;
		}
		printf("%-15s %9u %17.2f %15.1f %9u\n", mode_name[mode], iters,
		       ex_percentile(cost, iters, 50) / 1e3, ex_percentile(lat, iters, 50) / 1e3,
		       verified);
	}
	free(lat);
	free(cost);
	s.msg[1] = (struct msg){.type = htonl(BYE)};
	send_msg(&s, 0, 0, 0);
	if (rdma_disconnect(s.id))
		ex_die_errno("rdma_disconnect");
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_DISCONNECTED));
	teardown(&s);
}

static void usage(FILE *f)
{
	ex_pair_usage(f,
		      "RDMA WRITEs into memory registered per request versus a slot of a pool\n"
		      "registered once; prints the per-request cost of each.\n",
		      "7506", "%s",
		      "  -n, --iters N     requests per mode (default 1000)\n"
		      "  -k, --slots N     server: slots in the pool, 1..65536 (default 64)\n"
		      "  -S, --size BYTES  server: slot size, 64..1M (default 4K)\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"server", no_argument, NULL, 's'},	     {"client", no_argument, NULL, 'c'},
	    {"port", required_argument, NULL, 'p'},  {"iters", required_argument, NULL, 'n'},
	    {"slots", required_argument, NULL, 'k'}, {"size", required_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},	     {NULL, 0, NULL, 0}};
	struct args a = {.pair.port = "7506", .iters = 1000, .slots = 64, .size = 4096};
	int opt;

	ex_set_prog(argv[0]);
	while ((opt = getopt_long(argc, argv, "scp:n:k:S:h", opts, NULL)) != -1) {
		if (ex_pair_option(&a.pair, opt, optarg, usage))
			continue;
		if (opt == 'n' && ex_parse_int(optarg, 1, 10000000, &a.iters))
			ex_die("--iters: '%s' is not a number in 1..10000000", optarg);
		if (opt == 'k' && ex_parse_int(optarg, 1, 65536, &a.slots))
			ex_die("--slots: '%s' is not a number in 1..65536", optarg);
		if (opt == 'S' && ((a.size = ex_parse_size(optarg)) < 64 || a.size > (1 << 20)))
			ex_die("--size: '%s' is not a size in 64..1M", optarg);
	}
	if (a.slots * a.size > (1ll << 30))
		ex_die("--slots x --size: a pool over 1 GiB is not what this example is about");
	ex_pair_run(&a.pair, argc, argv, usage, run_server, run_client, &a);
	return 0;
}
