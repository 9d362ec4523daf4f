/*
 * ex02_read_write - one-sided RDMA: each side tells the other where one of
 * its buffers is (address + rkey, sent with SEND), then
 *
 *   --mode write   each side RDMA-WRITEs its message into the peer's buffer,
 *                  then SENDs "DONE" so the peer knows the bytes are there;
 *   --mode read    each side RDMA-READs the peer's message out of the peer's
 *                  buffer, then SENDs "DONE" so the peer may free it.
 *
 * and each side prints the peer's message.
 *
 *   ex02_read_write [OPTIONS] server [ADDR]
 *   ex02_read_write [OPTIONS] client ADDR
 *
 * The pitfall: the target of an RDMA WRITE gets no completion and no signal.
 * Reading the buffer "after a while" prints whatever was there before - the
 * classic version printed garbage.  Here the writer SENDs a DONE message after
 * the WRITE on the same QP; a reliable connection executes a QP's requests in
 * order, so once the target's receive of DONE completes, the WRITE's bytes
 * are in its memory.
 */
#include <ctype.h>
#include <endian.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "ex_common.h"

#define MSG_MAX	   256	      /* bytes in each message buffer */
#define MAGIC	   0x52583032 /* "RX02": this program's control messages */
#define VERSION	   1
#define MSG_MR	   1 /* "my buffer is at addr/rkey, len bytes" */
#define MSG_DONE   2 /* write: "len bytes are in your buffer"; read: "finished" */
#define MODE_WRITE 1
#define MODE_READ  2

/* A control message as it travels: fixed size, big-endian fields. */
struct ctrl {
	uint32_t magic;
	uint16_t version;
	uint8_t type;
	uint8_t mode;
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

/* Memory only this host's HCA touches: registered for local access only. */
struct local {
	struct ctrl recv[2]; /* the peer's MR and DONE messages */
	struct ctrl send[2]; /* ours */
	char data[MSG_MAX];  /* write: our message (WRITE source); read: READ target */
};

static struct rdma_event_channel *ch;
static int timeout_ms = 30000;
static int disconnected; /* DISCONNECTED seen while waiting for a completion */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [OPTIONS] server [ADDR]\n"
		"       %s [OPTIONS] client ADDR\n"
		"Exchange buffer addresses, then RDMA-WRITE or RDMA-READ one message each way.\n"
		"  -M, --mode write|read  one-sided operation (default write; same on both sides)\n"
		"  -m, --message TEXT     message to offer the peer (at most %d bytes)\n"
		"  -p, --port PORT        rdma_cm port (default 7510)\n"
		"  -t, --timeout SECONDS  deadline of every step (default 30)\n"
		"  -h, --help             this text\n",
		ex_prog, ex_prog, MSG_MAX);
}

/* Wait, at most timeout_ms, for CM event `want`; explain anything else. */
static struct rdma_cm_event *wait_event(enum rdma_cm_event_type want)
{
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int n = poll(&pfd, 1, timeout_ms);

	if (n < 0)
		ex_die_errno("poll(CM channel)");
	if (n == 0)
		ex_die("no %s within %d ms: the peer is silent or gone", rdma_event_str(want),
		       timeout_ms);
	if (rdma_get_cm_event(ch, &ev))
		ex_die_errno("rdma_get_cm_event");
	if (ev->event == want)
		return ev;
	if (ev->event == RDMA_CM_EVENT_REJECTED && ev->status == 8)
		ex_die("connection rejected: nobody listens on that port");
	ex_die("waiting for %s, got %s (status %d)", rdma_event_str(want),
	       rdma_event_str(ev->event), ev->status);
}

/*
 * Wait, at most timeout_ms, for the next completion on `cq`.  Between empty
 * polls we sleep up to 1 ms on the CM channel, so a peer's DISCONNECTED is
 * seen at once; the flushed completions that follow it end the program.
 */
static void wait_cq(struct ibv_cq *cq, const char *what, struct ibv_wc *wc)
{
	uint64_t deadline = ex_now_ns() + (uint64_t)timeout_ms * 1000000;
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0) {
		if (ex_now_ns() > deadline)
			ex_die("%s: no completion within %d ms", what, timeout_ms);
		if (poll(&pfd, 1, 1) <= 0)
			continue;
		if (rdma_get_cm_event(ch, &ev))
			ex_die_errno("rdma_get_cm_event");
		if (ev->event != RDMA_CM_EVENT_DISCONNECTED)
			ex_die("%s: unexpected %s", what, rdma_event_str(ev->event));
		disconnected = 1;
		rdma_ack_cm_event(ev);
	}
	if (n < 0)
		ex_die("%s: ibv_poll_cq failed", what);
	if (wc->status != IBV_WC_SUCCESS) {
		ex_report_wc(what, wc);
		ex_die("%s failed%s", what, disconnected ? ": the peer disconnected" : "");
	}
}

/* Wait for the peer's next control message and check everything in it. */
static struct ctrl *recv_ctrl(struct ibv_cq *cq, struct local *l, int type, int mode)
{
	struct ibv_wc wc;
	struct ctrl *m;

	wait_cq(cq, type == MSG_MR ? "receive MR" : "receive DONE", &wc);
	if (wc.opcode != IBV_WC_RECV || wc.byte_len != sizeof(*m) || wc.wr_id > 1)
		ex_die("peer sent %u bytes (opcode %d), not a control message", wc.byte_len,
		       wc.opcode);
	m = &l->recv[wc.wr_id];
	if (be32toh(m->magic) != MAGIC || be16toh(m->version) != VERSION)
		ex_die("peer is not ex02_read_write version %d", VERSION);
	if (m->type != type)
		ex_die("peer sent message type %d, expected %d", m->type, type);
	if (m->mode != mode)
		ex_die("peer runs in %s mode, we in %s mode: use the same --mode on both sides",
		       m->mode == MODE_READ ? "read" : "write",
		       mode == MODE_READ ? "read" : "write");
	return m;
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"mode", required_argument, NULL, 'M'}, {"message", required_argument, NULL, 'm'},
	    {"port", required_argument, NULL, 'p'}, {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},	    {NULL, 0, NULL, 0},
	};
	const char *port = "7510", *msg = NULL, *role, *host;
	int mode = MODE_WRITE, is_server, opt, i, err;
	struct rdma_cm_id *listener = NULL, *id;
	struct rdma_cm_event *ev;
	struct addrinfo *ai;
	struct ibv_pd *pd;
	struct ibv_cq *send_cq, *recv_cq;
	struct ibv_mr *local_mr, *exposed_mr;
	struct local *l;
	char *exposed, *peer_msg;
	struct ctrl *peer;
	uint32_t msg_len, peer_len;
	struct ibv_sge sge[2];
	struct ibv_send_wr swr[2], *bad_swr;
	struct ibv_recv_wr rwr, *bad_rwr;
	struct ibv_qp_init_attr qpa = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1},
	};
	/* A READ needs responder resources at the target and initiator depth at
	 * the reader; with 0 (the classic default) every READ fails. */
	struct rdma_conn_param param = {/* retry_count 6: rxe treats 7 like "retry forever", and a
					   dead peer would go unnoticed */
					.responder_resources = 1,
					.initiator_depth = 1,
					.retry_count = 6,
					.rnr_retry_count = 7};
	struct ibv_wc wc;

	ex_set_prog(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0); /* a test reads our output while we run */
	while ((opt = getopt_long(argc, argv, "M:m:p:t:h", opts, NULL)) != -1) {
		if (ex_role_option(opt, optarg, &port, &timeout_ms, usage))
			continue;
		switch (opt) {
		case 'M':
			if (strcmp(optarg, "write") && strcmp(optarg, "read"))
				ex_bad_usage("--mode is 'write' or 'read'");
			mode = !strcmp(optarg, "read") ? MODE_READ : MODE_WRITE;
			break;
		case 'm':
			if (strlen(optarg) > MSG_MAX)
				ex_bad_usage("--message is too long");
			msg = optarg;
			break;
		}
	}
	role = optind < argc ? argv[optind++] : "";
	host = optind < argc ? argv[optind++] : NULL;
	is_server = !strcmp(role, "server");
	if (!is_server && strcmp(role, "client"))
		ex_bad_usage("say 'server' or 'client'");
	if (optind < argc || (!is_server && !host))
		ex_bad_usage(is_server ? "too many arguments"
				       : "the client needs the server's address");
	if (!msg)
		msg = is_server ? "hello from the server" : "hello from the client";
	msg_len = (uint32_t)strlen(msg);

	/* 1. Connect: the server accepts one client, the client resolves and connects. */
	ch = rdma_create_event_channel();
	if (!ch)
		ex_die_errno("rdma_create_event_channel");
	if (rdma_create_id(ch, is_server ? &listener : &id, NULL, RDMA_PS_TCP))
		ex_die_errno("rdma_create_id");
	ai = resolve(is_server && !host ? "0.0.0.0" : host, port, is_server);
	if (is_server) {
		if (rdma_bind_addr(listener, ai->ai_addr))
			ex_die_errno("rdma_bind_addr");
		if (rdma_listen(listener, 1))
			ex_die_errno("rdma_listen");
		printf("server listening on port %s, %s mode\n", port,
		       mode == MODE_READ ? "read" : "write");
		ev = wait_event(RDMA_CM_EVENT_CONNECT_REQUEST);
		id = ev->id;
		rdma_ack_cm_event(ev);
	} else {
		if (rdma_resolve_addr(id, NULL, ai->ai_addr, timeout_ms))
			ex_die_errno("rdma_resolve_addr");
		rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_ADDR_RESOLVED));
		if (rdma_resolve_route(id, timeout_ms))
			ex_die_errno("rdma_resolve_route");
		rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_ROUTE_RESOLVED));
	}
	freeaddrinfo(ai);

	/* 2. PD, one CQ per direction (so each wait is about one thing), QP. */
	pd = ibv_alloc_pd(id->verbs);
	if (!pd)
		ex_die_errno("ibv_alloc_pd");
	send_cq = ibv_create_cq(id->verbs, 2, NULL, NULL, 0);
	recv_cq = ibv_create_cq(id->verbs, 2, NULL, NULL, 0);
	if (!send_cq || !recv_cq)
		ex_die_errno("ibv_create_cq");
	qpa.send_cq = send_cq;
	qpa.recv_cq = recv_cq;
	if (rdma_create_qp(id, pd, &qpa))
		ex_die_errno("rdma_create_qp");

	/*
	 * 3. Memory.  An rkey opens its whole MR to the peer, so the buffer the
	 * peer may touch gets an MR of its own with exactly the access this mode
	 * needs: REMOTE_WRITE (which requires LOCAL_WRITE) for a WRITE target,
	 * REMOTE_READ for a READ source.  Everything else stays local.
	 */
	l = calloc(1, sizeof(*l));
	exposed = calloc(1, MSG_MAX);
	if (!l || !exposed)
		ex_die("out of memory");
	local_mr = ibv_reg_mr(pd, l, sizeof(*l), IBV_ACCESS_LOCAL_WRITE);
	if (!local_mr) {
		ex_report_reg_mr_failure(sizeof(*l));
		exit(1);
	}
	exposed_mr =
	    ibv_reg_mr(pd, exposed, MSG_MAX,
		       mode == MODE_WRITE ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
					  : IBV_ACCESS_REMOTE_READ);
	if (!exposed_mr) {
		ex_report_reg_mr_failure(MSG_MAX);
		exit(1);
	}
	memcpy(mode == MODE_WRITE ? l->data : exposed, msg, msg_len);

	/* Both receives (MR, then DONE) are posted before connecting. */
	for (i = 0; i < 2; i++) {
		sge[0] =
		    (struct ibv_sge){(uintptr_t)&l->recv[i], sizeof(l->recv[i]), local_mr->lkey};
		rwr = (struct ibv_recv_wr){.wr_id = (uint64_t)i, .sg_list = sge, .num_sge = 1};
		if (ibv_post_recv(id->qp, &rwr, &bad_rwr))
			ex_die_errno("ibv_post_recv");
	}

	if (is_server) {
		if (rdma_accept(id, &param))
			ex_die_errno("rdma_accept");
	} else if (rdma_connect(id, &param)) {
		ex_die_errno("rdma_connect");
	}
	rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_ESTABLISHED));
	printf("%s connected\n", role);

	/* 4. Tell the peer where our exposed buffer is; learn where its is. */
	l->send[0] = (struct ctrl){.magic = htobe32(MAGIC),
				   .version = htobe16(VERSION),
				   .type = MSG_MR,
				   .mode = (uint8_t)mode,
				   .addr = htobe64((uintptr_t)exposed),
				   .rkey = htobe32(exposed_mr->rkey),
				   .len = htobe32(mode == MODE_WRITE ? MSG_MAX : msg_len)};
	sge[0] = (struct ibv_sge){(uintptr_t)&l->send[0], sizeof(l->send[0]), local_mr->lkey};
	swr[0] = (struct ibv_send_wr){
	    .sg_list = sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	if (ibv_post_send(id->qp, &swr[0], &bad_swr))
		ex_die_errno("ibv_post_send(MR)");
	wait_cq(send_cq, "send MR", &wc);
	peer = recv_ctrl(recv_cq, l, MSG_MR, mode);
	peer_len = be32toh(peer->len);
	if (mode == MODE_WRITE && peer_len < msg_len)
		ex_die("peer offers %u bytes, our message needs %u", peer_len, msg_len);
	if (mode == MODE_READ && peer_len > MSG_MAX)
		ex_die("peer offers a %u-byte message, more than our %d-byte buffer", peer_len,
		       MSG_MAX);

	/* 5. The one-sided operation, then DONE. */
	l->send[1] = l->send[0];
	l->send[1].type = MSG_DONE;
	l->send[1].addr = 0;
	l->send[1].rkey = 0;
	l->send[1].len = htobe32(mode == MODE_WRITE ? msg_len : 0);
	sge[0] = (struct ibv_sge){(uintptr_t)l->data, mode == MODE_WRITE ? msg_len : peer_len,
				  local_mr->lkey};
	sge[1] = (struct ibv_sge){(uintptr_t)&l->send[1], sizeof(l->send[1]), local_mr->lkey};
	swr[0] = (struct ibv_send_wr){
	    .wr_id = 0,
	    .sg_list = sge,
	    .num_sge = 1,
	    .opcode = mode == MODE_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
	    .send_flags = IBV_SEND_SIGNALED,
	    .wr.rdma = {.remote_addr = be64toh(peer->addr), .rkey = be32toh(peer->rkey)}};
	swr[1] = (struct ibv_send_wr){.wr_id = 1,
				      .sg_list = &sge[1],
				      .num_sge = 1,
				      .opcode = IBV_WR_SEND,
				      .send_flags = IBV_SEND_SIGNALED};
	if (mode == MODE_WRITE) {
		/* WRITE then DONE in one post: the QP keeps them in this order. */
		swr[0].next = &swr[1];
		if (ibv_post_send(id->qp, &swr[0], &bad_swr))
			ex_die_errno("ibv_post_send(WRITE, DONE)");
		wait_cq(send_cq, "RDMA WRITE", &wc);
		wait_cq(send_cq, "send DONE", &wc);
		/* Only now, with the peer's DONE received, is its message here. */
		peer = recv_ctrl(recv_cq, l, MSG_DONE, mode);
		peer_len = be32toh(peer->len);
		if (peer_len > MSG_MAX)
			ex_die("peer claims to have written %u bytes into our %d", peer_len,
			       MSG_MAX);
		peer_msg = exposed;
	} else {
		/* A READ completes when the data is in our buffer: no message needed.
		 * DONE tells the peer we no longer need its buffer. */
		if (ibv_post_send(id->qp, &swr[0], &bad_swr))
			ex_die_errno("ibv_post_send(READ)");
		wait_cq(send_cq, "RDMA READ", &wc);
		if (ibv_post_send(id->qp, &swr[1], &bad_swr))
			ex_die_errno("ibv_post_send(DONE)");
		wait_cq(send_cq, "send DONE", &wc);
		recv_ctrl(recv_cq, l, MSG_DONE, mode);
		peer_msg = l->data;
	}
	printf("peer's message (%s, %u bytes): \"", mode == MODE_WRITE ? "write" : "read",
	       peer_len);
	for (i = 0; i < (int)peer_len; i++)
		putchar(isprint((unsigned char)peer_msg[i]) ? peer_msg[i] : '?');
	printf("\"\n");

	/* 6. Disconnect (the client starts it), then release in reverse order. */
	if (!is_server && !disconnected && rdma_disconnect(id))
		ex_die_errno("rdma_disconnect");
	if (!disconnected)
		rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_DISCONNECTED));
	if (is_server && rdma_disconnect(id))
		ex_die_errno("rdma_disconnect");
	rdma_destroy_qp(id);
	if ((err = ibv_dereg_mr(exposed_mr)) || (err = ibv_dereg_mr(local_mr)))
		ex_die("ibv_dereg_mr: %s", strerror(err));
	free(exposed);
	free(l);
	if ((err = ibv_destroy_cq(recv_cq)) || (err = ibv_destroy_cq(send_cq)))
		ex_die("ibv_destroy_cq: %s", strerror(err));
	if ((err = ibv_dealloc_pd(pd)))
		ex_die("ibv_dealloc_pd: %s", strerror(err));
	if (rdma_destroy_id(id) || (listener && rdma_destroy_id(listener)))
		ex_die_errno("rdma_destroy_id");
	rdma_destroy_event_channel(ch);
	printf("%s done\n", role);
	return 0;
}
