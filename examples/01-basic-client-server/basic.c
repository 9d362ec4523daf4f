/*
 * ex01_basic - the smallest complete rdma_cm program.
 *
 *   ex01_basic [OPTIONS] server [ADDR]    listen (on ADDR, default all addresses)
 *   ex01_basic [OPTIONS] client ADDR      connect to a server listening on ADDR
 *
 * The client connects, each side SENDs one message and prints the one it
 * received, the client disconnects and both sides tear everything down.
 *
 * What to look at:
 *  - every rdma_cm step is "start an operation, then wait for its event".
 *    wait_event() waits with a deadline and, when the event is not the one
 *    expected (ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, REJECTED, ...), says in
 *    words what it means instead of just failing;
 *  - the receive is posted *before* connecting, so the peer's SEND always
 *    finds a buffer waiting for it;
 *  - a failed completion is printed with its status name and vendor_err;
 *  - waiting for a completion also watches the CM channel, so a peer that
 *    disconnects or dies is noticed instead of waited for.
 */
#include <ctype.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "ex_common.h"

#define MSG_MAX 256 /* bytes in each message buffer */

enum { WR_RECV = 1, WR_SEND = 2 }; /* wr_id: which work request completed */

struct conn {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *buf;	   /* [0, MSG_MAX): receive, [MSG_MAX, 2*MSG_MAX): send */
	uint32_t recv_len; /* bytes the peer sent */
	int disconnected;  /* DISCONNECTED already seen while waiting for completions */
	int timeout_ms;	   /* deadline of every single wait */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [OPTIONS] server [ADDR]\n"
		"       %s [OPTIONS] client ADDR\n"
		"Connect with rdma_cm, exchange one message each way, disconnect.\n"
		"  -p, --port PORT        rdma_cm port (default 7500)\n"
		"  -m, --message TEXT     message to send (at most %d bytes)\n"
		"  -t, --timeout SECONDS  deadline of every step (default 30)\n"
		"  -h, --help             this text\n",
		ex_prog, ex_prog, MSG_MAX);
}

/* Explain an event that is not the one a step waits for, then exit. */
static void __attribute__((noreturn)) unexpected(struct rdma_cm_event *ev, const char *waiting_for)
{
	const char *why;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_ERROR:
		why = "no local RDMA device has a route to that IP address (is it on an RDMA "
		      "netdev? Soft-RoCE on 'lo' does not work)";
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		why = "no path to the peer could be resolved";
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		why = "the peer did not answer the connection request (no RDMA stack at that "
		      "address, or the packets are lost)";
		break;
	case RDMA_CM_EVENT_REJECTED:
		why = ev->status == 8 ? "nobody listens on that port (IB CM reason 8: invalid "
					"service ID)"
				      : "the peer refused the connection";
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		why = "the connection could not be set up";
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		why = "the peer disconnected";
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		why = "the RDMA device was removed";
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		why = "the address moved to another device";
		break;
	default:
		why = "not expected at this step";
		break;
	}
	ex_die("waiting for %s, got %s (status %d): %s", waiting_for, rdma_event_str(ev->event),
	       ev->status, why);
}

/* Wait, at most timeout_ms, for the next CM event; it must be `want`. */
static struct rdma_cm_event *wait_event(struct conn *c, enum rdma_cm_event_type want)
{
	struct pollfd pfd = {.fd = c->ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int n = poll(&pfd, 1, c->timeout_ms);

	if (n < 0)
		ex_die_errno("poll(CM channel)");
	if (n == 0)
		ex_die("no %s within %d ms: the peer is silent or gone", rdma_event_str(want),
		       c->timeout_ms);
	if (rdma_get_cm_event(c->ch, &ev))
		ex_die_errno("rdma_get_cm_event");
	if (ev->event != want)
		unexpected(ev, rdma_event_str(want));
	return ev;
}

/*
 * Everything the connection needs before connect/accept: protection domain,
 * one CQ for both directions, the QP (rdma_create_qp moves it through INIT
 * for us), one registered buffer, and the posted receive.
 */
static void setup_qp(struct conn *c)
{
	struct ibv_qp_init_attr qpa = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_sge sge;
	struct ibv_recv_wr wr = {.wr_id = WR_RECV, .sg_list = &sge, .num_sge = 1}, *bad;

	c->pd = ibv_alloc_pd(c->id->verbs);
	if (!c->pd)
		ex_die_errno("ibv_alloc_pd");
	c->cq = ibv_create_cq(c->id->verbs, 2, NULL, NULL, 0);
	if (!c->cq)
		ex_die_errno("ibv_create_cq");
	qpa.send_cq = c->cq;
	qpa.recv_cq = c->cq;
	if (rdma_create_qp(c->id, c->pd, &qpa))
		ex_die_errno("rdma_create_qp");

	/* Only this host's HCA writes here (the receive): no remote access. */
	c->buf = calloc(2, MSG_MAX);
	if (!c->buf)
		ex_die("out of memory");
	c->mr = ibv_reg_mr(c->pd, c->buf, 2 * MSG_MAX, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr) {
		ex_report_reg_mr_failure(2 * MSG_MAX);
		exit(1);
	}

	/* Post the receive now: the peer may SEND as soon as it is connected. */
	sge = (struct ibv_sge){.addr = (uintptr_t)c->buf, .length = MSG_MAX, .lkey = c->mr->lkey};
	if (ibv_post_recv(c->id->qp, &wr, &bad))
		ex_die_errno("ibv_post_recv");
}

/*
 * Wait until `want` completions have arrived, at most timeout_ms.  While the
 * CQ is empty we sleep in poll() on the CM channel for 1 ms: a DISCONNECTED
 * from the peer wakes us at once; its effect (our QP moves to the error state
 * and flushes what is outstanding) then shows up as a failed completion.
 */
static void wait_completions(struct conn *c, int want)
{
	uint64_t deadline = ex_now_ns() + (uint64_t)c->timeout_ms * 1000000;
	struct pollfd pfd = {.fd = c->ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	struct ibv_wc wc;
	int n;

	while (want > 0) {
		n = ibv_poll_cq(c->cq, 1, &wc);
		if (n < 0)
			ex_die("ibv_poll_cq failed");
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS) {
				ex_report_wc(wc.wr_id == WR_SEND ? "SEND" : "RECV", &wc);
				if (c->disconnected)
					ex_die("the peer disconnected before the exchange ended");
				exit(1);
			}
			if (wc.wr_id == WR_RECV)
				c->recv_len = wc.byte_len;
			want--;
			continue;
		}
		if (ex_now_ns() > deadline)
			ex_die("no completion within %d ms: the peer is silent", c->timeout_ms);
		n = poll(&pfd, 1, 1);
		if (n < 0)
			ex_die_errno("poll(CM channel)");
		if (n == 0)
			continue;
		if (rdma_get_cm_event(c->ch, &ev))
			ex_die_errno("rdma_get_cm_event");
		if (ev->event != RDMA_CM_EVENT_DISCONNECTED || c->disconnected)
			unexpected(ev, "completions");
		/* Keep draining the CQ: what completed before still counts. */
		c->disconnected = 1;
		rdma_ack_cm_event(ev);
	}
}

/* SEND our message and wait for both our SEND and the peer's to complete. */
static void exchange(struct conn *c, const char *msg)
{
	size_t len = strlen(msg);
	struct ibv_sge sge = {
	    .addr = (uintptr_t)c->buf + MSG_MAX, .length = (uint32_t)len, .lkey = c->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = WR_SEND,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	uint32_t i;

	memcpy(c->buf + MSG_MAX, msg, len);
	if (ibv_post_send(c->id->qp, &wr, &bad))
		ex_die_errno("ibv_post_send");
	wait_completions(c, 2);

	/* The bytes come from the peer: bound them and print only printable ones. */
	if (c->recv_len > MSG_MAX)
		ex_die("peer sent %u bytes, more than the %d-byte buffer", c->recv_len, MSG_MAX);
	printf("received %u bytes from the peer: \"", c->recv_len);
	for (i = 0; i < c->recv_len; i++)
		putchar(isprint((unsigned char)c->buf[i]) ? c->buf[i] : '?');
	printf("\"\n");
}

/* Release in reverse order of creation; each call can fail and says so. */
static void teardown(struct conn *c)
{
	int err;

	rdma_destroy_qp(c->id);
	if ((err = ibv_dereg_mr(c->mr)))
		ex_die("ibv_dereg_mr: %s", strerror(err));
	free(c->buf);
	if ((err = ibv_destroy_cq(c->cq)))
		ex_die("ibv_destroy_cq: %s", strerror(err));
	if ((err = ibv_dealloc_pd(c->pd)))
		ex_die("ibv_dealloc_pd: %s", strerror(err));
	if (rdma_destroy_id(c->id))
		ex_die_errno("rdma_destroy_id");
}

static struct addrinfo *resolve(const char *host, const char *port, int passive)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
	struct addrinfo *ai;
	int err = getaddrinfo(host, port, &hints, &ai);

	if (err)
		ex_die("%s: %s", host, gai_strerror(err));
	return ai;
}

/* The connection parameters both sides use: no RDMA READs, patient retries. */
static struct rdma_conn_param conn_param(void)
{
	/* retry_count 6: rxe treats 7 like "retry forever", and a dead peer would go unnoticed */
	return (struct rdma_conn_param){.retry_count = 6, .rnr_retry_count = 7};
}

static void run_server(struct conn *c, const char *host, const char *port, const char *msg)
{
	struct rdma_cm_id *listener;
	struct rdma_cm_event *ev;
	struct addrinfo *ai = resolve(host, port, 1);
	struct rdma_conn_param param = conn_param();

	if (rdma_create_id(c->ch, &listener, NULL, RDMA_PS_TCP))
		ex_die_errno("rdma_create_id");
	if (rdma_bind_addr(listener, ai->ai_addr))
		ex_die_errno("rdma_bind_addr");
	freeaddrinfo(ai);
	if (rdma_listen(listener, 1))
		ex_die_errno("rdma_listen");
	printf("server listening on %s port %s\n", host, port);

	/* A connection request brings a new cm_id: the connection's own. */
	ev = wait_event(c, RDMA_CM_EVENT_CONNECT_REQUEST);
	c->id = ev->id;
	setup_qp(c);
	if (rdma_accept(c->id, &param))
		ex_die_errno("rdma_accept");
	rdma_ack_cm_event(ev);
	rdma_ack_cm_event(wait_event(c, RDMA_CM_EVENT_ESTABLISHED));
	printf("server connected\n");

	exchange(c, msg);

	/* The client disconnects first; answering with our own disconnect
	 * completes the handshake at once instead of when the id is destroyed. */
	if (!c->disconnected)
		rdma_ack_cm_event(wait_event(c, RDMA_CM_EVENT_DISCONNECTED));
	if (rdma_disconnect(c->id))
		ex_die_errno("rdma_disconnect");
	teardown(c);
	if (rdma_destroy_id(listener))
		ex_die_errno("rdma_destroy_id");
}

static void run_client(struct conn *c, const char *host, const char *port, const char *msg)
{
	struct addrinfo *ai = resolve(host, port, 0);
	struct rdma_conn_param param = conn_param();

	if (rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP))
		ex_die_errno("rdma_create_id");
	/* IP address -> local RDMA device and port (and the peer's L2 address). */
	if (rdma_resolve_addr(c->id, NULL, ai->ai_addr, c->timeout_ms))
		ex_die_errno("rdma_resolve_addr");
	freeaddrinfo(ai);
	rdma_ack_cm_event(wait_event(c, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(c->id, c->timeout_ms))
		ex_die_errno("rdma_resolve_route");
	rdma_ack_cm_event(wait_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED));

	setup_qp(c);
	if (rdma_connect(c->id, &param))
		ex_die_errno("rdma_connect");
	rdma_ack_cm_event(wait_event(c, RDMA_CM_EVENT_ESTABLISHED));
	printf("client connected to %s port %s\n", host, port);

	exchange(c, msg);

	if (!c->disconnected) {
		if (rdma_disconnect(c->id))
			ex_die_errno("rdma_disconnect");
		rdma_ack_cm_event(wait_event(c, RDMA_CM_EVENT_DISCONNECTED));
	}
	teardown(c);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"port", required_argument, NULL, 'p'},
	    {"message", required_argument, NULL, 'm'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct conn c = {.timeout_ms = 30000};
	const char *port = "7500", *msg = NULL, *role, *host;
	int opt;

	ex_set_prog(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0); /* a test reads our output while we run */
	while ((opt = getopt_long(argc, argv, "p:m:t:h", opts, NULL)) != -1) {
		if (ex_role_option(opt, optarg, &port, &c.timeout_ms, usage))
			continue;
		switch (opt) {
		case 'm':
			if (strlen(optarg) > MSG_MAX)
				ex_bad_usage("--message is too long");
			msg = optarg;
			break;
		}
	}
	if (optind >= argc)
		ex_bad_usage("say 'server' or 'client'");
	role = argv[optind++];
	host = optind < argc ? argv[optind++] : NULL;
	if (optind < argc)
		ex_bad_usage("too many arguments");
	if (strcmp(role, "server") && strcmp(role, "client"))
		ex_bad_usage("the role is 'server' or 'client'");
	if (!strcmp(role, "client") && !host)
		ex_bad_usage("the client needs the server's address");
	if (!msg)
		msg = !strcmp(role, "server") ? "hello from the server" : "hello from the client";

	/* All CM events of this process arrive on one channel; we poll its fd. */
	c.ch = rdma_create_event_channel();
	if (!c.ch)
		ex_die_errno("rdma_create_event_channel");
	if (!strcmp(role, "server"))
		run_server(&c, host ? host : "0.0.0.0", port, msg);
	else
		run_client(&c, host, port, msg);
	rdma_destroy_event_channel(c.ch);
	printf("%s done\n", role);
	return 0;
}
