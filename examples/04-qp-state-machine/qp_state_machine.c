/*
 * ex04_qp_state_machine - connect two RC QPs by hand: no rdma_cm.
 *
 *   ex04_qp_state_machine [OPTIONS] server [ADDR]   wait for the peer on TCP ADDR:PORT
 *   ex04_qp_state_machine [OPTIONS] client ADDR     reach the server over TCP
 *
 * rdma_cm does all of this for you; here every step is visible.  A QP is
 * born in RESET; INIT gives it a port and access rights; RTR (ready to
 * receive) needs the peer's QP number, first PSN, GID/LID and the path MTU;
 * RTS (ready to send) needs our own first PSN and the retry policy.  The
 * peer's values travel over a plain TCP connection ("out of band").  Each
 * side then SENDs one message and prints the one it received.
 *
 * --wrong-psn tells the peer a PSN (packet sequence number) different from
 * the one our send queue starts with.  Nothing complains during setup: the
 * peer's receive queue simply waits for a PSN that never comes and drops our
 * packets; our side retransmits until "transport retry counter exceeded".
 * Both sides then say what happened instead of waiting forever.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>

#include "ex_common.h"

#define MAGIC	    0x52583034 /* "RX04" */
#define VERSION	    1
#define ACK_TIMEOUT 14 /* 4.096 us * 2^14 = 67 ms before a packet is resent */
/* Resends before giving up.  Not 7: Soft-RoCE (rxe) takes 7 as "forever", as
 * the spec does for rnr_retry, and --wrong-psn would then never end. */
#define RETRY_CNT 6
#define MSG_LEN	  64

/* What each side tells the other over TCP: fixed size, big-endian. */
struct qp_info {
	uint32_t magic;
	uint16_t version;
	uint8_t mtu;	   /* enum ibv_mtu of the active port */
	uint8_t wrong_psn; /* this side runs the --wrong-psn demonstration */
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint16_t pad;
	uint8_t gid[16];
};

static int timeout_ms = 10000;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [OPTIONS] server [ADDR]\n"
		"       %s [OPTIONS] client ADDR\n"
		"Bring an RC QP through RESET, INIT, RTR and RTS by hand; exchange one message.\n"
		"  -d, --device NAME      RDMA device (default: the first one)\n"
		"  -i, --ib-port N        device port (default 1)\n"
		"  -g, --gid-index N      GID table index (default: a RoCE v2 IPv4 GID)\n"
		"  -p, --port PORT        TCP port for the exchange (default 7530)\n"
		"  -t, --timeout SECONDS  deadline of every wait (default 10)\n"
		"  -w, --wrong-psn        advertise a wrong PSN and watch the connection fail\n"
		"  -h, --help             this text\n",
		ex_prog, ex_prog);
}

static const char *gid_str(const void *gid, char *out)
{
	return inet_ntop(AF_INET6, gid, out, INET6_ADDRSTRLEN);
}

/* Send all of `len` bytes, then receive exactly `len`, within timeout_ms. */
static void tcp_swap(int fd, const void *out, void *in, size_t len)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	size_t got = 0;
	ssize_t n;

	if (send(fd, out, len, MSG_NOSIGNAL) != (ssize_t)len)
		ex_die_errno("send to peer");
	while (got < len) {
		n = poll(&pfd, 1, timeout_ms);
		if (n == 0)
			ex_die("the peer sent nothing for %d ms", timeout_ms);
		n = n < 0 ? -1 : recv(fd, (char *)in + got, len - got, 0);
		if (n < 0)
			ex_die_errno("recv from peer");
		if (n == 0)
			ex_die("the peer closed the TCP connection");
		got += (size_t)n;
	}
}

static int tcp_connect(const char *host, const char *port, int server)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = server ? AI_PASSIVE : 0};
	struct addrinfo *ai;
	struct pollfd pfd;
	int fd, lfd, err, one = 1;
	socklen_t elen = sizeof(err);

	if ((err = getaddrinfo(host, port, &hints, &ai)))
		ex_die("%s: %s", host ? host : "*", gai_strerror(err));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		ex_die_errno("socket");
	if (server) {
		lfd = fd;
		if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
		    bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, 1))
			ex_die_errno("bind/listen");
		printf("server listening on TCP %s port %s\n", host ? host : "*", port);
		pfd = (struct pollfd){.fd = lfd, .events = POLLIN};
		if (poll(&pfd, 1, timeout_ms) <= 0)
			ex_die("no client within %d ms", timeout_ms);
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			ex_die_errno("accept");
		close(lfd);
	} else {
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS)
			ex_die_errno("connect");
		pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
		if (poll(&pfd, 1, timeout_ms) <= 0)
			ex_die("TCP connect to %s port %s: no answer within %d ms", host, port,
			       timeout_ms);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) || err)
			ex_die("TCP connect to %s port %s: %s", host, port, strerror(err));
	}
	freeaddrinfo(ai);
	return fd;
}

/*
 * RoCE addresses a peer by GID; the table holds one entry per IP address of
 * the netdev and per RoCE version.  Prefer RoCE v2 (routable, UDP) with an
 * IPv4 address; fall back to index 0 (InfiniBand: the port GID).
 */
static int choose_gid(struct ibv_context *ctx, int port, int len, union ibv_gid *gid)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	struct ibv_gid_entry e;
	char ifname[IF_NAMESIZE] = "-", s[INET6_ADDRSTRLEN];
	int i, best = 0;

	for (i = len - 1; i >= 0; i--) {
		if (ibv_query_gid_ex(ctx, (uint32_t)port, (uint32_t)i, &e, 0))
			continue; /* an empty slot */
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(e.gid.raw, v4mapped, 12))
			best = i;
	}
	if (ibv_query_gid_ex(ctx, (uint32_t)port, (uint32_t)best, &e, 0))
		ex_die_errno("ibv_query_gid_ex");
	*gid = e.gid;
	if (e.ndev_ifindex)
		if_indextoname(e.ndev_ifindex, ifname);
	printf("GID[%d] %s (%s, netdev %s)\n", best, gid_str(gid->raw, s),
	       e.gid_type == IBV_GID_TYPE_ROCE_V2   ? "RoCE v2"
	       : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1"
						    : "IB",
	       ifname);
	return best;
}

static void print_state(struct ibv_qp *qp, const char *step)
{
	static const char *const names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		ex_die_errno("ibv_query_qp");
	printf("%-14s QP 0x%06x is now %s\n", step, qp->qp_num,
	       a.qp_state <= IBV_QPS_ERR ? names[a.qp_state] : "?");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"device", required_argument, NULL, 'd'},
	    {"ib-port", required_argument, NULL, 'i'},
	    {"gid-index", required_argument, NULL, 'g'},
	    {"port", required_argument, NULL, 'p'},
	    {"timeout", required_argument, NULL, 't'},
	    {"wrong-psn", no_argument, NULL, 'w'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *devname = NULL, *port = "7530", *role, *host;
	int ib_port = 1, gid_index = -1, wrong_psn = 0, is_server, opt, fd, i, n, err;
	int sent = -1, received = -1, peer_sent = -1;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_qp_init_attr qpa = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_qp_attr a;
	struct qp_info me, peer;
	uint32_t psn, peer_psn;
	enum ibv_mtu mtu;
	char buf[2][MSG_LEN] = {{0}}, s[INET6_ADDRSTRLEN], verdict, peer_verdict;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr = {.wr_id = 0, .sg_list = &sge, .num_sge = 1}, *bad_rwr;
	struct ibv_send_wr swr = {.wr_id = 1,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED},
			   *bad_swr;
	struct ibv_wc wc, send_wc = {.status = IBV_WC_SUCCESS};
	struct pollfd pfd;
	uint64_t deadline;

	ex_set_prog(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0); /* a test reads our output while we run */
	while ((opt = getopt_long(argc, argv, "d:i:g:p:t:wh", opts, NULL)) != -1) {
		if (ex_role_option(opt, optarg, &port, &timeout_ms, usage))
			continue;
		switch (opt) {
		case 'd':
			devname = optarg;
			break;
		case 'i':
			ib_port = (int)ex_opt_num(optarg, 1, 255, "--ib-port must be 1..255");
			break;
		case 'g':
			gid_index = (int)ex_opt_num(optarg, 0, 255, "--gid-index must be 0..255");
			break;
		case 'w':
			wrong_psn = 1;
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

	/* 1. Device, port, GID. */
	list = ibv_get_device_list(&n);
	if (!list)
		ex_die_errno("ibv_get_device_list");
	for (i = 0; i < n && !ctx; i++)
		if (!devname || !strcmp(devname, ibv_get_device_name(list[i])))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		ex_die("no RDMA device %s%s", devname ? devname : "found",
		       devname ? " (or it cannot be opened)" : "");
	if (ibv_query_port(ctx, (uint8_t)ib_port, &pa))
		ex_die_errno("ibv_query_port");
	if (pa.state != IBV_PORT_ACTIVE)
		ex_die("port %d of %s is %s, not ACTIVE", ib_port, ibv_get_device_name(ctx->device),
		       ibv_port_state_str(pa.state));
	printf("device %s port %d: %s, active MTU %d\n", ibv_get_device_name(ctx->device), ib_port,
	       pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "InfiniBand",
	       128 << pa.active_mtu);
	if (gid_index < 0) {
		gid_index = choose_gid(ctx, ib_port, pa.gid_tbl_len, &gid);
	} else {
		if (ibv_query_gid(ctx, (uint8_t)ib_port, gid_index, &gid))
			ex_die("GID index %d: %s", gid_index, strerror(errno));
		printf("GID[%d] %s (from --gid-index)\n", gid_index, gid_str(gid.raw, s));
	}

	/* 2. PD, CQ, MR and the QP, which starts in RESET. */
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		ex_die_errno("ibv_alloc_pd");
	cq = ibv_create_cq(ctx, 2, NULL, NULL, 0);
	if (!cq)
		ex_die_errno("ibv_create_cq");
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr) {
		ex_report_reg_mr_failure(sizeof(buf));
		exit(1);
	}
	qpa.send_cq = cq;
	qpa.recv_cq = cq;
	qp = ibv_create_qp(pd, &qpa);
	if (!qp)
		ex_die_errno("ibv_create_qp");
	print_state(qp, "created:");

	/* 3. RESET -> INIT: which port and partition, what the peer may do. */
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT,
				 .pkey_index = 0,
				 .port_num = (uint8_t)ib_port,
				 .qp_access_flags = 0};
	printf("RESET -> INIT: port %d, pkey_index 0, access flags 0 (SEND/RECV only)\n", ib_port);
	if ((err = ibv_modify_qp(
		 qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		ex_die("modify QP to INIT: %s", strerror(err));
	print_state(qp, "");
	/* A receive may be posted from INIT on: it waits for the peer's SEND. */
	sge = (struct ibv_sge){(uintptr_t)buf[0], MSG_LEN, mr->lkey};
	if (ibv_post_recv(qp, &rwr, &bad_rwr))
		ex_die_errno("ibv_post_recv");

	/* 4. Out of band: swap QP number, first PSN, LID, GID and MTU over TCP.
	 * The PSN is random, so packets of an old connection cannot pass as ours. */
	if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn))
		ex_die_errno("getrandom");
	psn &= 0xffffff;
	/* --wrong-psn: claim a PSN 4096 behind the real one, so our packets look
	 * like they come from the future and the peer discards them. */
	me = (struct qp_info){.magic = htobe32(MAGIC),
			      .version = htobe16(VERSION),
			      .mtu = (uint8_t)pa.active_mtu,
			      .wrong_psn = (uint8_t)wrong_psn,
			      .qpn = htobe32(qp->qp_num),
			      .psn = htobe32(wrong_psn ? (psn - 0x1000) & 0xffffff : psn),
			      .lid = htobe16(pa.lid)};
	memcpy(me.gid, gid.raw, sizeof(me.gid));
	if (wrong_psn)
		printf("--wrong-psn: telling the peer our first PSN is 0x%06x; it is 0x%06x\n",
		       be32toh(me.psn), psn);
	fd = tcp_connect(host, port, is_server);
	tcp_swap(fd, &me, &peer, sizeof(peer));
	peer_psn = be32toh(peer.psn);
	if (be32toh(peer.magic) != MAGIC || be16toh(peer.version) != VERSION)
		ex_die("the peer is not ex04_qp_state_machine version %d", VERSION);
	if (!be32toh(peer.qpn) || be32toh(peer.qpn) > 0xffffff || peer_psn > 0xffffff ||
	    peer.mtu < IBV_MTU_256 || peer.mtu > IBV_MTU_4096)
		ex_die("the peer sent an impossible QP number, PSN or MTU");
	if (pa.link_layer != IBV_LINK_LAYER_ETHERNET && !be16toh(peer.lid))
		ex_die("InfiniBand needs the peer's LID, and it sent 0 (no subnet manager?)");
	mtu = pa.active_mtu < peer.mtu ? pa.active_mtu : (enum ibv_mtu)peer.mtu;

	/* 5. INIT -> RTR: where the peer is and what its first PSN will be. */
	a = (struct ibv_qp_attr){
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = mtu,
	    .dest_qp_num = be32toh(peer.qpn),
	    .rq_psn = peer_psn,
	    .max_dest_rd_atomic = 1,
	    .min_rnr_timer = 12, /* 0.64 ms before the peer may retry a SEND we had no buffer for */
	    .ah_attr = {.dlid = be16toh(peer.lid), .port_num = (uint8_t)ib_port}};
	if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) { /* RoCE: always a global route */
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, peer.gid, sizeof(peer.gid));
		a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	printf("INIT -> RTR:   path_mtu %d (ours %d, peer's %d), dest_qp 0x%06x, rq_psn 0x%06x,\n"
	       "               dlid %u, dgid %s, sgid_index %d, max_dest_rd_atomic 1, "
	       "min_rnr_timer 12\n",
	       128 << mtu, 128 << pa.active_mtu, 128 << peer.mtu, a.dest_qp_num, a.rq_psn,
	       a.ah_attr.dlid, gid_str(peer.gid, s), gid_index);
	if ((err = ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER)))
		ex_die("modify QP to RTR: %s", strerror(err));
	print_state(qp, "");

	/* 6. RTR -> RTS: our first PSN and how hard to retry. */
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .sq_psn = psn,
				 .timeout = ACK_TIMEOUT,
				 .retry_cnt = RETRY_CNT,
				 .rnr_retry = 7,
				 .max_rd_atomic = 1};
	printf("RTR -> RTS:    sq_psn 0x%06x, timeout %d (%.0f ms), retry_cnt %d, rnr_retry 7, "
	       "max_rd_atomic 1\n",
	       psn, ACK_TIMEOUT, 4.096e-3 * (1 << ACK_TIMEOUT), RETRY_CNT);
	if ((err = ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)))
		ex_die("modify QP to RTS: %s", strerror(err));
	print_state(qp, "");

	/* 7. Both QPs must be ready to receive before either sends: a TCP barrier. */
	tcp_swap(fd, "R", &verdict, 1);
	snprintf(buf[1], MSG_LEN, "hello from the %s", role);
	sge = (struct ibv_sge){(uintptr_t)buf[1], (uint32_t)strlen(buf[1]), mr->lkey};
	if (ibv_post_send(qp, &swr, &bad_swr))
		ex_die_errno("ibv_post_send");

	/*
	 * 8. Wait for our SEND and the peer's, at most timeout_ms.  Each side
	 * reports its SEND's fate over TCP, so a side whose peer failed to send
	 * stops waiting at once.
	 */
	deadline = ex_now_ns() + (uint64_t)timeout_ms * 1000000;
	pfd = (struct pollfd){.fd = fd, .events = POLLIN};
	while ((sent < 0 || received < 0) && !(received < 0 && sent >= 0 && peer_sent == 0)) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			ex_die("ibv_poll_cq failed");
		if (n == 1 && wc.wr_id == 1) {
			send_wc = wc;
			sent = wc.status == IBV_WC_SUCCESS;
			verdict = (char)('0' + sent);
			if (send(fd, &verdict, 1, MSG_NOSIGNAL) != 1)
				ex_die_errno("send to peer");
		} else if (n == 1) {
			received = wc.status == IBV_WC_SUCCESS;
			if (received)
				printf("received: \"%.*s\"\n",
				       (int)(wc.byte_len < MSG_LEN ? wc.byte_len : MSG_LEN),
				       buf[0]);
		}
		if (n == 1)
			continue;
		if (ex_now_ns() > deadline)
			break;
		if (poll(&pfd, 1, 1) == 1 && peer_sent < 0) {
			if (recv(fd, &peer_verdict, 1, 0) != 1)
				ex_die("the peer closed the TCP connection");
			peer_sent = peer_verdict == '1';
		}
	}
	if (sent == 0)
		ex_report_wc("SEND", &send_wc);
	if (sent == 1 && received == 1) {
		printf("%s: OK\n", role);
	} else if (wrong_psn && sent == 0 && send_wc.status == IBV_WC_RETRY_EXC_ERR) {
		printf("explanation: we told the peer our first PSN was 0x%06x, but our send\n"
		       "queue started at 0x%06x.  The peer's receive queue accepts only the PSN\n"
		       "it expects, so it discarded our packets (with at most one NAK \"PSN\n"
		       "sequence error\") and never acknowledged them.  We resent %d times, %.0f\n"
		       "ms apart (retry_cnt, timeout), then gave up; our QP is now in the error\n"
		       "state.  Fix: sq_psn on one side must equal rq_psn on the other.\n",
		       be32toh(me.psn), psn, RETRY_CNT, 4.096e-3 * (1 << ACK_TIMEOUT));
	} else if (peer.wrong_psn && received != 1) {
		printf("explanation: the peer ran with --wrong-psn: it told us its first PSN was\n"
		       "0x%06x, so our receive queue expected that PSN and discarded the packets\n"
		       "it really sent.  Its SEND never arrived; %s.\n",
		       peer_psn, peer_sent == 0 ? "it gave up and told us" : "we stopped waiting");
	} else {
		printf("%s: the exchange did not complete (sent %d, received %d) within %d ms\n",
		       role, sent, received, timeout_ms);
	}

	/* 9. Release in reverse order. */
	close(fd);
	if ((err = ibv_destroy_qp(qp)) || (err = ibv_dereg_mr(mr)) || (err = ibv_destroy_cq(cq)) ||
	    (err = ibv_dealloc_pd(pd)))
		ex_die("teardown: %s", strerror(err));
	if (ibv_close_device(ctx))
		ex_die_errno("ibv_close_device");
	return sent == 1 && received == 1 ? 0 : 1;
}
