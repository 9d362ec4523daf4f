/*
 * event_channel.c - one ping-pong, run twice over the same connection: first
 * busy-polling the completion queue, then sleeping on a completion channel.
 * The client prints the round-trip time and the CPU time it spent per message
 * in each mode.
 *
 *   ex05_event_channel [options] ADDR             server (child process) and client
 *   ex05_event_channel --server [options] ADDR    the server only
 *   ex05_event_channel --client [options] ADDR    the client only
 *
 * The lesson: ibv_poll_cq() in a loop answers fastest but keeps a core at
 * 100% even when nothing arrives.  A completion channel lets the thread sleep
 * in poll()/ibv_get_cq_event() until the CQ has something; it costs a wake-up
 * per message and needs care (see wait_completions) not to lose a completion.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rdma/rdma_cma.h>

#include "ex_common.h"

#define TIMEOUT_MS   15000 /* every wait: CM events, completions */
#define ACK_BATCH    16	   /* ibv_ack_cq_events once per this many events */
#define PLAN_VERSION 1

enum mode { BUSY, EVENT };

/* The client tells the server what to expect in the connect private data. */
struct plan {
	uint8_t version;
	uint8_t pad[3];
	uint32_t iters; /* network byte order */
	uint32_t size;	/* network byte order */
};

struct args {
	struct ex_pair pair; /* first: ADDR, --port, --server/--client */
	long iters;
	long long size;
};

struct side {
	struct rdma_event_channel *cm;
	struct rdma_cm_id *listen_id, *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *buf; /* [0, size): receive, [size, 2 * size): send */
	uint32_t size, iters;
	int armed;		   /* ibv_req_notify_cq done, no event taken since */
	unsigned int unacked;	   /* CQ events taken but not yet acknowledged */
	unsigned long long events; /* CQ events taken in this phase */
};

/* Wait for the next CM event, which must be `want`; anything else is fatal. */
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

/* PD, completion channel, CQ bound to it, QP and one registered buffer. */
static void create_resources(struct side *s, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qpa = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1},
	};
	uint8_t ack_timeout = 17; /* 4.096 us * 2^17 = 0.5 s: survives TCG-emulated rxe */

	s->id = id;
	s->pd = ibv_alloc_pd(id->verbs);
	if (!s->pd)
		ex_die_errno("ibv_alloc_pd");
	s->channel = ibv_create_comp_channel(id->verbs);
	if (!s->channel)
		ex_die_errno("ibv_create_comp_channel");
	/* One CQ for sends and receives; events for it go to s->channel. */
	s->cq = ibv_create_cq(id->verbs, 4, NULL, s->channel, 0);
	if (!s->cq)
		ex_die_errno("ibv_create_cq");
	qpa.send_cq = qpa.recv_cq = s->cq;
	if (rdma_create_qp(id, s->pd, &qpa))
		ex_die_errno("rdma_create_qp");
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
			    sizeof(ack_timeout)))
		ex_die_errno("rdma_set_option(ACK_TIMEOUT)");
	s->buf = calloc(2, s->size);
	if (!s->buf)
		ex_die("out of memory");
	s->mr = ibv_reg_mr(s->pd, s->buf, 2 * (size_t)s->size, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr) {
		ex_report_reg_mr_failure(2 * (size_t)s->size);
		exit(1);
	}
}

static void post_recv(struct side *s)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = s->size, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad;

	if (ibv_post_recv(s->id->qp, &wr, &bad))
		ex_die_errno("ibv_post_recv");
}

static void post_send(struct side *s)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)s->buf + s->size, .length = s->size, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 2,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	if (ibv_post_send(s->id->qp, &wr, &bad))
		ex_die_errno("ibv_post_send");
}

/*
 * Collect `want` successful completions into wc[].
 *
 * BUSY: call ibv_poll_cq until they are there.  The CPU never rests.
 *
 * EVENT: poll first (the completion may already be there), and only when the
 * CQ is empty arm it with ibv_req_notify_cq and sleep on the channel fd.  The
 * order matters: a completion that lands after an empty poll but before the
 * arm raises no event, so after arming we must poll once more before sleeping,
 * or we sleep forever next to a full CQ.  An event disarms the CQ, so we arm
 * again next time it is empty.  Each event must be acknowledged before the CQ
 * is destroyed; one ibv_ack_cq_events per ACK_BATCH events saves a lock each.
 */
static void wait_completions(struct side *s, enum mode mode, int want, struct ibv_wc *wc)
{
	uint64_t deadline = ex_now_ns() + TIMEOUT_MS * 1000000ull;
	int got = 0;

	while (got < want) {
		struct pollfd pfd = {.fd = s->channel->fd, .events = POLLIN};
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		int n = ibv_poll_cq(s->cq, want - got, wc + got);

		if (n < 0)
			ex_die("ibv_poll_cq failed");
		for (int i = got; i < got + n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				ex_report_wc(wc[i].wr_id == 1 ? "receive" : "send", &wc[i]);
				exit(1);
			}
		}
		got += n;
		if (got == want || n > 0)
			continue;
		if (ex_now_ns() > deadline)
			ex_die("no completion within %d ms: is the peer alive?", TIMEOUT_MS);
		if (mode == BUSY)
			continue;
		if (!s->armed) {
			if (ibv_req_notify_cq(s->cq, 0))
				ex_die("ibv_req_notify_cq failed");
			s->armed = 1;
			continue; /* poll again: see above */
		}
		n = poll(&pfd, 1, TIMEOUT_MS);
		if (n < 0 && errno != EINTR)
			ex_die_errno("poll(completion channel)");
		if (n <= 0)
			continue; /* the deadline check above decides */
		if (ibv_get_cq_event(s->channel, &ev_cq, &ev_ctx))
			ex_die_errno("ibv_get_cq_event");
		s->armed = 0;
		s->events++;
		if (++s->unacked == ACK_BATCH) {
			ibv_ack_cq_events(ev_cq, s->unacked);
			s->unacked = 0;
		}
	}
}

/* Payload of ping `seq`: the sequence number, then a pattern derived from it. */
static void fill(char *p, uint32_t size, uint32_t seq)
{
	uint32_t be = htonl(seq);

	memcpy(p, &be, sizeof(be));
	for (uint32_t i = sizeof(be); i < size; i++)
		p[i] = (char)(seq * 31 + i);
}

static void teardown(struct side *s)
{
	if (s->unacked)
		ibv_ack_cq_events(s->cq, s->unacked);
	rdma_destroy_qp(s->id);
	if (ibv_dereg_mr(s->mr))
		ex_die_errno("ibv_dereg_mr");
	free(s->buf);
	if (ibv_destroy_cq(s->cq))
		ex_die_errno("ibv_destroy_cq");
	if (ibv_destroy_comp_channel(s->channel))
		ex_die_errno("ibv_destroy_comp_channel");
	if (ibv_dealloc_pd(s->pd))
		ex_die_errno("ibv_dealloc_pd");
	if (rdma_destroy_id(s->id))
		ex_die_errno("rdma_destroy_id");
	if (s->listen_id && rdma_destroy_id(s->listen_id))
		ex_die_errno("rdma_destroy_id(listener)");
	rdma_destroy_event_channel(s->cm);
}

/* Echo every ping back: busy mode for the first `iters`, event mode after. */
static void run_server(void *arg, int ready_fd)
{
	const struct args *a = arg;
	const char *addr = a->pair.addr, *port = a->pair.port;
	struct side s = {0};
	/* retry_count 6: rxe treats 7 like "retry forever", and a dead peer would go unnoticed */
	struct rdma_conn_param param = {.retry_count = 6, .rnr_retry_count = 7};
	struct rdma_cm_event *ev;
	struct addrinfo *ai = ex_resolve(addr, port, 1);
	struct plan plan;
	struct ibv_wc wc[2];
	double cpu[2];

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

	/* The plan is the peer's word: check it before sizing anything by it. */
	ev = get_event(&s, RDMA_CM_EVENT_CONNECT_REQUEST);
	if (ev->param.conn.private_data_len < sizeof(plan))
		ex_die("connect request without a plan");
	memcpy(&plan, ev->param.conn.private_data, sizeof(plan));
	s.iters = ntohl(plan.iters);
	s.size = ntohl(plan.size);
	if (plan.version != PLAN_VERSION || s.iters < 1 || s.iters > 10000000 || s.size < 8 ||
	    s.size > (1u << 20)) {
		rdma_reject(ev->id, NULL, 0);
		ex_die("bad plan: version %u, %u iterations of %u bytes", plan.version, s.iters,
		       s.size);
	}
	create_resources(&s, ev->id);
	rdma_ack_cm_event(ev);
	post_recv(&s); /* before accepting: the first ping may come at once */
	if (rdma_accept(s.id, &param))
		ex_die_errno("rdma_accept");
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_ESTABLISHED));

	for (int m = BUSY; m <= EVENT; m++) {
		double start = ex_cpu_seconds();

		for (uint32_t i = 0; i < s.iters; i++) {
			/*
			 * Wait for the ping and for the previous pong's SEND
			 * completion: until that one is in, the send buffer
			 * still belongs to the HCA and must not be rewritten.
			 */
			int need = i == 0 ? 1 : 2;
			struct ibv_wc *ping = NULL;

			wait_completions(&s, m, need, wc);
			for (int k = 0; k < need; k++)
				if (wc[k].opcode == IBV_WC_RECV)
					ping = &wc[k];
			if (!ping || ping->byte_len != s.size)
				ex_die("expected a ping of %u bytes", s.size);
			memcpy(s.buf + s.size, s.buf, s.size);
			post_recv(&s); /* re-post before answering: the next ping follows */
			post_send(&s);
		}
		wait_completions(&s, m, 1, wc); /* the last pong */
		cpu[m] = (ex_cpu_seconds() - start) * 1e6 / s.iters;
	}
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_DISCONNECTED));
	printf("server: echoed 2 x %u pings; cpu us/msg: busy %.1f, event %.1f\n", s.iters,
	       cpu[BUSY], cpu[EVENT]);
	teardown(&s);
}

static void run_client(void *arg)
{
	const struct args *a = arg;
	const char *addr = a->pair.addr, *port = a->pair.port;
	uint32_t iters = a->iters, size = a->size;
	struct side s = {.iters = iters, .size = size};
	struct plan plan = {.version = PLAN_VERSION, .iters = htonl(iters), .size = htonl(size)};
	/* retry_count 6: rxe treats 7 like "retry forever", and a dead peer would go unnoticed */
	struct rdma_conn_param param = {.private_data = &plan,
					.private_data_len = sizeof(plan),
					.retry_count = 6,
					.rnr_retry_count = 7};
	struct addrinfo *ai = ex_resolve(addr, port, 0);
	static const char *names[] = {"busy-poll", "event"};
	struct ibv_wc wc[2];

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
	post_recv(&s);
	if (rdma_connect(s.id, &param))
		ex_die_errno("rdma_connect");
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_ESTABLISHED));

	printf("%-10s %8s %8s %12s %12s %8s %10s\n", "mode", "msgs", "bytes", "rtt_us",
	       "cpu_us/msg", "cpu_%", "cq_events");
	for (int m = BUSY; m <= EVENT; m++) {
		uint64_t t0 = ex_now_ns();
		double c0 = ex_cpu_seconds(), wall, cpu;

		s.events = 0;
		for (uint32_t i = 0; i < iters; i++) {
			uint32_t seq = m * iters + i;

			fill(s.buf + size, size, seq);
			post_send(&s);
			/* Two completions, in either order: our SEND and the pong. */
			wait_completions(&s, m, 2, wc);
			if (memcmp(s.buf, s.buf + size, size))
				ex_die("pong %u does not match its ping", seq);
			post_recv(&s);
		}
		wall = (ex_now_ns() - t0) / 1e3;
		cpu = (ex_cpu_seconds() - c0) * 1e6;
		printf("%-10s %8u %8u %12.1f %12.1f %8.0f %10llu\n", names[m], iters, size,
		       wall / iters, cpu / iters, 100 * cpu / wall, s.events);
	}
	printf("verified %u pongs\n", 2 * iters);
	if (rdma_disconnect(s.id))
		ex_die_errno("rdma_disconnect");
	rdma_ack_cm_event(get_event(&s, RDMA_CM_EVENT_DISCONNECTED));
	teardown(&s);
}

static void usage(FILE *f)
{
	ex_pair_usage(f,
		      "Ping-pong over RC, busy-polling and then sleeping on a completion channel;\n"
		      "prints round-trip time and CPU time per message for both.\n",
		      "7505", "%s",
		      "  -n, --iters N     ping-pongs per mode (default 10000)\n"
		      "  -S, --size BYTES  message size, 8..1M (default 64)\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"server", no_argument, NULL, 's'},
					     {"client", no_argument, NULL, 'c'},
					     {"port", required_argument, NULL, 'p'},
					     {"iters", required_argument, NULL, 'n'},
					     {"size", required_argument, NULL, 'S'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct args a = {.pair.port = "7505", .iters = 10000, .size = 64};
	int opt;

	ex_set_prog(argv[0]);
	while ((opt = getopt_long(argc, argv, "scp:n:S:h", opts, NULL)) != -1) {
		if (ex_pair_option(&a.pair, opt, optarg, usage))
			continue;
		if (opt == 'n' && ex_parse_int(optarg, 1, 10000000, &a.iters))
			ex_die("--iters: '%s' is not a number in 1..10000000", optarg);
		if (opt == 'S' && ((a.size = ex_parse_size(optarg)) < 8 || a.size > (1 << 20)))
			ex_die("--size: '%s' is not a size in 8..1M", optarg);
	}
	ex_pair_run(&a.pair, argc, argv, usage, run_server, run_client, &a);
	return 0;
}
