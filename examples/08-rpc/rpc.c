/*
 * rpc.c - request/response over one reused RC connection.  The request goes
 * to the server by SEND; the response comes back by RDMA WRITE WITH IMMEDIATE
 * straight into a response slot the client registered once, and the 32-bit
 * immediate says which request it answers.  Prints requests/s and latency
 * with one request in flight, then with --depth in flight.
 *
 *   ex08_rpc [options] ADDR                       server (child process) and client
 *   ex08_rpc --server [options] ADDR              the server only
 *   ex08_rpc --client [options] ADDR              the client only
 *
 * The lessons: connect once and keep the connection (setup costs
 * milliseconds, a request microseconds); let the responder write the answer
 * where the caller wants it instead of into a generic receive buffer; never
 * trust what the peer says - slot numbers, lengths and immediates are checked
 * on both sides before anything is indexed by them.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rdma/rdma_cma.h>

#include "ex_common.h"

#define TIMEOUT_MS  15000 /* every wait: CM events, completions, an idle client */
#define MAX_DEPTH   64
#define MAX_PAYLOAD 112
#define VERSION	    1

/* Connect private data: where the server may write responses. */
struct hello {
	uint8_t version, pad[3];
	uint32_t rkey, slots, slot_size; /* all integers big-endian on the wire */
	uint64_t addr;
};

enum { OP_CALL = 1, OP_BYE = 2 };

struct request { /* client -> server by SEND */
	uint32_t op, id, slot, len;
	char payload[MAX_PAYLOAD];
};

struct response { /* server -> client slot by RDMA WRITE WITH IMM (imm = id) */
	uint32_t id, len;
	char payload[MAX_PAYLOAD];
};

struct args {
	struct ex_pair pair; /* first: ADDR, --port, --server/--client */
	long iters, depth;
};

struct side {
	struct rdma_event_channel *cm;
	struct rdma_cm_id *listen_id, *id;
	struct ibv_pd *pd;
	struct ibv_cq *send_cq, *recv_cq; /* the client uses one CQ for both */
	struct ibv_mr *req_mr, *resp_mr;
	struct request *req;   /* one per slot */
	struct response *resp; /* one per slot */
	uint32_t slots;
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

static struct ibv_mr *reg(struct side *s, void *buf, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(s->pd, buf, len, access);

	if (!mr) {
		ex_report_reg_mr_failure(len);
		exit(1);
	}
	return mr;
}

/* Both sides: slots requests and slots responses, registered once. */
static void create_resources(struct side *s, struct rdma_cm_id *id, int one_cq)
{
	struct ibv_qp_init_attr qpa = {.qp_type = IBV_QPT_RC,
				       .cap = {.max_send_wr = s->slots + 1,
					       .max_recv_wr = s->slots,
					       .max_send_sge = 1,
					       .max_recv_sge = 1}};
	uint8_t ack_timeout = 17; /* 4.096 us * 2^17 = 0.5 s: survives TCG-emulated rxe */

	s->id = id;
	s->pd = ibv_alloc_pd(id->verbs);
	if (!s->pd)
		ex_die_errno("ibv_alloc_pd");
	s->send_cq = ibv_create_cq(id->verbs, 2 * s->slots + 1, NULL, NULL, 0);
	s->recv_cq = one_cq ? s->send_cq : ibv_create_cq(id->verbs, s->slots, NULL, NULL, 0);
	if (!s->send_cq || !s->recv_cq)
		ex_die_errno("ibv_create_cq");
	qpa.send_cq = s->send_cq;
	qpa.recv_cq = s->recv_cq;
	if (rdma_create_qp(id, s->pd, &qpa))
		ex_die_errno("rdma_create_qp");
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
			    sizeof(ack_timeout)))
		ex_die_errno("rdma_set_option(ACK_TIMEOUT)");
	s->req = calloc(s->slots, sizeof(*s->req));
	s->resp = calloc(s->slots, sizeof(*s->resp));
	if (!s->req || !s->resp)
		ex_die("out of memory");
	s->req_mr = reg(s, s->req, s->slots * sizeof(*s->req), IBV_ACCESS_LOCAL_WRITE);
	/* Only the client's response slots are open to the peer. */
	s->resp_mr = reg(s, s->resp, s->slots * sizeof(*s->resp),
			 IBV_ACCESS_LOCAL_WRITE | (one_cq ? IBV_ACCESS_REMOTE_WRITE : 0));
}

/* Server: receive into request buffer i.  Client: an empty receive for an immediate. */
static void post_recv(struct side *s, uint32_t i, int with_buffer)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)&s->req[i], .length = sizeof(s->req[i]), .lkey = s->req_mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = with_buffer}, *bad;

	if (ibv_post_recv(s->id->qp, &wr, &bad))
		ex_die_errno("ibv_post_recv");
}

/*
 * The CQ says nothing about a peer that has gone: a server waiting for the
 * next request of a client that crashed would wait for its whole deadline.
 * The CM channel does say it: when a process with a connected rdma_cm id
 * exits, its kernel disconnects, and our side gets DISCONNECTED. Look there
 * (a poll() that does not wait) every CM_CHECK_NS while spinning.
 *
 * A peer that sends its last message and disconnects at once is not gone
 * mid-run: that message completed here before its DISCONNECTED came (the
 * peer's send completed only once our side had received it), but it may
 * have done so just after our last look at the CQ. So on a CM event, look
 * at the CQ once more, and leave the event to whoever waits for it.
 */
#define CM_CHECK_NS 1000000ull

static void peer_gone(struct side *s)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(s->cm, &ev))
		ex_die_errno("rdma_get_cm_event");
	ex_die("the peer went away mid-run (%s)", rdma_event_str(ev->event));
}

/* Busy-poll one successful completion from cq; die at the deadline or when the peer leaves. */
static void poll_one(struct side *s, struct ibv_cq *cq, struct ibv_wc *wc)
{
	uint64_t now = ex_now_ns(), deadline = now + TIMEOUT_MS * 1000000ull;
	uint64_t next_check = now + CM_CHECK_NS;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0) {
		now = ex_now_ns();
		if (now > deadline)
			ex_die("no completion within %d ms: is the peer alive?", TIMEOUT_MS);
		if (now > next_check) {
			if (ex_wait_fd(s->cm->fd, 0)) {
				n = ibv_poll_cq(cq, 1, wc);
				if (n)
					break;
				peer_gone(s);
			}
			next_check = now + CM_CHECK_NS;
		}
	}
	if (n < 0)
		ex_die("ibv_poll_cq failed");
	if (wc->status != IBV_WC_SUCCESS) {
		ex_report_wc("rpc", wc);
		exit(1);
	}
}

static void teardown(struct side *s)
{
	rdma_destroy_qp(s->id);
	if (ibv_dereg_mr(s->resp_mr) || ibv_dereg_mr(s->req_mr))
		ex_die_errno("ibv_dereg_mr");
	free(s->resp);
	free(s->req);
	if (s->recv_cq != s->send_cq && ibv_destroy_cq(s->recv_cq))
		ex_die_errno("ibv_destroy_cq");
	if (ibv_destroy_cq(s->send_cq))
		ex_die_errno("ibv_destroy_cq");
	if (ibv_dealloc_pd(s->pd))
		ex_die_errno("ibv_dealloc_pd");
	if (rdma_destroy_id(s->id) || (s->listen_id && rdma_destroy_id(s->listen_id)))
		ex_die_errno("rdma_destroy_id");
	rdma_destroy_event_channel(s->cm);
}

/* The payload of request `id`, and its length; the response is it in upper case. */
static uint32_t make_payload(char *p, uint32_t id)
{
	uint32_t len = 16 + id % (MAX_PAYLOAD - 16);
	/*
	 * Zero-filled: the sentence can end before `len` bytes (id 94: 108
	 * characters for 110 bytes), and every byte we send must be defined -
	 * both sides compute this payload and compare it byte by byte.
	 */
	char text[MAX_PAYLOAD + 1] = {0};

	snprintf(text, sizeof(text), "request %u: %s", id,
		 "the quick brown fox jumps over the lazy dog, again and again and again, "
		 "until the buffer is full");
	memcpy(p, text, len);
	return len;
}

static void run_server(void *arg, int ready_fd)
{
	const struct args *a = arg;
	const char *addr = a->pair.addr, *port = a->pair.port;
	struct side s = {0};
	/* retry_count 6: rxe treats 7 like "retry forever", and a dead peer would go unnoticed */
	struct rdma_conn_param param = {.retry_count = 6, .rnr_retry_count = 7};
	struct addrinfo *ai = ex_resolve(addr, port, 1);
	struct rdma_cm_event *ev;
	struct hello h;
	uint64_t raddr;
	uint32_t rkey, slot_size, served = 0;
	int sending[MAX_DEPTH] = {0}; /* response in slot i not yet completed */
	struct ibv_wc wc, swc;

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
	if (ev->param.conn.private_data_len < sizeof(h))
		ex_die("connect request without the response slots");
	memcpy(&h, ev->param.conn.private_data, sizeof(h));
	s.slots = ntohl(h.slots);
	slot_size = ntohl(h.slot_size);
	rkey = ntohl(h.rkey);
	raddr = be64toh(h.addr);
	if (h.version != VERSION || s.slots < 1 || s.slots > MAX_DEPTH ||
	    slot_size < sizeof(struct response) || slot_size > 65536) {
		rdma_reject(ev->id, NULL, 0);
		ex_die("bad hello: version %u, %u slots of %u bytes", h.version, s.slots,
		       slot_size);
	}
	create_resources(&s, ev->id, 0);
	rdma_ack_cm_event(ev);
	for (uint32_t i = 0; i < s.slots; i++)
		post_recv(&s, i, 1); /* before accept: requests may follow at once */
	if (rdma_accept(s.id, &param))
		ex_die_errno("rdma_accept");
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_ESTABLISHED));

	for (;;) {
		struct request *rq;
		struct response *rp;
		uint32_t slot, len;
		struct ibv_sge sge;
		struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

		poll_one(&s, s.recv_cq, &wc);
		rq = &s.req[wc.wr_id];
		slot = ntohl(rq->slot);
		len = ntohl(rq->len);
		if (wc.byte_len < offsetof(struct request, payload))
			ex_die("short request: %u bytes", wc.byte_len);
		if (ntohl(rq->op) == OP_BYE)
			break;
		if (ntohl(rq->op) != OP_CALL || slot >= s.slots || len > MAX_PAYLOAD ||
		    wc.byte_len != offsetof(struct request, payload) + len)
			ex_die("malformed request: op %u, slot %u, %u bytes", ntohl(rq->op), slot,
			       wc.byte_len);
		/*
		 * Our response buffer for this slot is the HCA's until the
		 * WRITE that last used it completes.  Send completions live on
		 * their own CQ so we can wait for them here without having to
		 * put other requests' receive completions aside.
		 */
		while (sending[slot]) {
			poll_one(&s, s.send_cq, &swc);
			sending[swc.wr_id] = 0;
		}
		rp = &s.resp[slot];
		rp->id = rq->id;
		rp->len = rq->len;
		for (uint32_t i = 0; i < len; i++)
			rp->payload[i] = (char)toupper((unsigned char)rq->payload[i]);
		/* Re-post the receive before answering: the next request can follow the answer. */
		post_recv(&s, wc.wr_id, 1);
		sge = (struct ibv_sge){.addr = (uintptr_t)rp,
				       .length = offsetof(struct response, payload) + len,
				       .lkey = s.resp_mr->lkey};
		wr.wr_id = slot;
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.imm_data = rq->id; /* already big-endian, as imm_data must be */
		wr.wr.rdma.remote_addr = raddr + (uint64_t)slot * slot_size;
		wr.wr.rdma.rkey = rkey;
		if (ibv_post_send(s.id->qp, &wr, &bad))
			ex_die_errno("ibv_post_send(WRITE_WITH_IMM)");
		sending[slot] = 1;
		served++;
	}
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_DISCONNECTED));
	printf("server: answered %u requests on one connection\n", served);
	teardown(&s);
}

/* Check response `id` in its slot: same id and length, payload in upper case. */
static void check_response(struct side *s, uint32_t slot, uint32_t id, uint32_t byte_len)
{
	struct response *rp = &s->resp[slot];
	char want[MAX_PAYLOAD];
	uint32_t len = make_payload(want, id);

	for (uint32_t i = 0; i < len; i++)
		want[i] = (char)toupper((unsigned char)want[i]);
	if (byte_len != offsetof(struct response, payload) + len || ntohl(rp->id) != id ||
	    ntohl(rp->len) != len || memcmp(rp->payload, want, len))
		ex_die("response %u in slot %u does not match its request", id, slot);
}

/* Client: fill request buffer `slot` and SEND it (signaled, wr_id = slot). */
static void post_request(struct side *s, uint32_t slot, uint32_t op, uint32_t id)
{
	struct request *rq = &s->req[slot];
	uint32_t len = op == OP_CALL ? make_payload(rq->payload, id) : 0;
	struct ibv_sge sge = {.addr = (uintptr_t)rq,
			      .length = offsetof(struct request, payload) + len,
			      .lkey = s->req_mr->lkey};
	struct ibv_send_wr wr = {.wr_id = slot,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	rq->op = htonl(op);
	rq->id = htonl(id);
	rq->slot = htonl(slot);
	rq->len = htonl(len);
	if (ibv_post_send(s->id->qp, &wr, &bad))
		ex_die_errno("ibv_post_send(SEND)");
}

/*
 * `iters` requests with up to `depth` in flight, request id in slot id % depth.
 * A slot is free again once both its SEND and its response have completed:
 * the request buffer belongs to the HCA until the SEND completes, and the
 * response can overtake that completion.
 */
static void run_phase(struct side *s, uint32_t depth, uint32_t iters, uint32_t *next_id,
		      uint64_t *lat)
{
	enum { SENDING = 1, WAITING = 2 };
	uint32_t first = *next_id, issued = 0, done = 0, outstanding = 0;
	uint32_t state[MAX_DEPTH] = {0}, inflight[MAX_DEPTH] = {0};
	uint64_t t_issue[MAX_DEPTH], t0 = ex_now_ns(), sum = 0;
	double secs;
	struct ibv_wc wc;

	while (issued < iters || outstanding) {
		while (issued < iters && !state[(first + issued) % depth]) {
			uint32_t id = first + issued, slot = id % depth;

			t_issue[slot] = ex_now_ns();
			post_request(s, slot, OP_CALL, id);
			state[slot] = SENDING | WAITING;
			inflight[slot] = id;
			outstanding += 2;
			issued++;
		}
		poll_one(s, s->send_cq, &wc);
		outstanding--;
		if (wc.opcode == IBV_WC_SEND) {
			state[wc.wr_id] &= ~SENDING;
			continue;
		}
		/* A response.  The immediate is the peer's word: check it names a waiting slot. */
		if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM))
			ex_die("unexpected completion, opcode %d", wc.opcode);
		uint32_t id = ntohl(wc.imm_data), slot = id % depth;

		if (id - first >= issued || !(state[slot] & WAITING) || inflight[slot] != id)
			ex_die("response for request %u, which is not in flight", id);
		check_response(s, slot, id, wc.byte_len);
		lat[done++] = ex_now_ns() - t_issue[slot];
		state[slot] &= ~WAITING;
		post_recv(s, slot, 0); /* one receive per response to come */
	}
	secs = (ex_now_ns() - t0) / 1e9;
	*next_id += iters;
	for (uint32_t i = 0; i < iters; i++)
		sum += lat[i];
	printf("%5u %9u %10.0f %9.1f %9.1f %9.1f\n", depth, iters, iters / secs, sum / 1e3 / iters,
	       ex_percentile(lat, iters, 50) / 1e3, ex_percentile(lat, iters, 99) / 1e3);
}

static void run_client(void *arg)
{
	const struct args *a = arg;
	const char *addr = a->pair.addr, *port = a->pair.port;
	uint32_t iters = a->iters, depth = a->depth;
	struct side s = {.slots = depth};
	struct hello h = {
	    .version = VERSION, .slots = htonl(depth), .slot_size = htonl(sizeof(struct response))};
	/* retry_count 6: rxe treats 7 like "retry forever", and a dead peer would go unnoticed */
	struct rdma_conn_param param = {.private_data = &h,
					.private_data_len = sizeof(h),
					.retry_count = 6,
					.rnr_retry_count = 7};
	struct addrinfo *ai = ex_resolve(addr, port, 0);
	uint32_t next_id = 0;
	uint64_t *lat = calloc(iters, sizeof(*lat));
	struct ibv_wc wc;

	if (!lat)
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
	create_resources(&s, s.id, 1);
	for (uint32_t i = 0; i < depth; i++)
		post_recv(&s, i, 0);
	h.rkey = htonl(s.resp_mr->rkey);
	h.addr = htobe64((uintptr_t)s.resp);
	if (rdma_connect(s.id, &param))
		ex_die_errno("rdma_connect");
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_ESTABLISHED));

	/* One connection for everything: depth 1 shows latency, then depth N throughput. */
	printf("%5s %9s %10s %9s %9s %9s\n", "depth", "requests", "req/s", "avg_us", "p50_us",
	       "p99_us");
	run_phase(&s, 1, iters, &next_id, lat);
	if (depth > 1)
		run_phase(&s, depth, iters, &next_id, lat);
	printf("verified %u responses (id, length, payload) on one connection\n", next_id);
	free(lat);

	/* Tell the server we are done, then disconnect. */
	post_request(&s, 0, OP_BYE, next_id);
	poll_one(&s, s.send_cq, &wc);
	if (rdma_disconnect(s.id))
		ex_die_errno("rdma_disconnect");
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_DISCONNECTED));
	teardown(&s);
}

static void usage(FILE *f)
{
	ex_pair_usage(
	    f,
	    "RPC over one RC connection: request by SEND, response by RDMA WRITE WITH\n"
	    "IMMEDIATE into the client's registered slot.  Prints requests/s and latency.\n",
	    "7508",
	    "  -n, --iters N     requests per phase (default 10000)\n"
	    "  -d, --depth D     requests in flight in the second phase, 1..%d (default 8)\n",
	    MAX_DEPTH);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"server", no_argument, NULL, 's'},
					     {"client", no_argument, NULL, 'c'},
					     {"port", required_argument, NULL, 'p'},
					     {"iters", required_argument, NULL, 'n'},
					     {"depth", required_argument, NULL, 'd'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct args a = {.pair.port = "7508", .iters = 10000, .depth = 8};
	int opt;

	ex_set_prog(argv[0]);
	while ((opt = getopt_long(argc, argv, "scp:n:d:h", opts, NULL)) != -1) {
		if (ex_pair_option(&a.pair, opt, optarg, usage))
			continue;
		if (opt == 'n' && ex_parse_int(optarg, 1, 10000000, &a.iters))
			ex_die("--iters: '%s' is not a number in 1..10000000", optarg);
		if (opt == 'd' && ex_parse_int(optarg, 1, MAX_DEPTH, &a.depth))
			ex_die("--depth: '%s' is not a number in 1..%d", optarg, MAX_DEPTH);
	}
	ex_pair_run(&a.pair, argc, argv, usage, run_server, run_client, &a);
	return 0;
}
