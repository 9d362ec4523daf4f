/*
 * smoke_cm.c - the Foundation rdma_cm smoke test.
 *
 *   smoke_cm server ADDR PORT    listen, accept one client, exchange, disconnect
 *   smoke_cm client ADDR PORT    connect, exchange one message each way, disconnect
 *   smoke_cm pair ADDR PORT      both, server in a child process
 *
 * Every step waits for its CM event with a deadline, so a silent or missing
 * peer ends the program with a message instead of a hang.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <rdma/rdma_cma.h>

#define STEP_MS 15000
#define MSG_LEN 64

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "smoke_cm[%s]: ", role);                                           \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		exit(1);                                                                           \
	} while (0)

static const char *role = "?";

/* Wait up to STEP_MS for the next CM event and require it to be `want`. */
static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int r = poll(&p, 1, STEP_MS);

	if (r == 0)
		FAIL("no %s within %d ms", rdma_event_str(want), STEP_MS);
	if (r < 0)
		FAIL("poll: %s", strerror(errno));
	if (rdma_get_cm_event(ch, &ev))
		FAIL("rdma_get_cm_event: %s", strerror(errno));
	if (ev->event != want)
		FAIL("expected %s, got %s (status %d)", rdma_event_str(want),
		     rdma_event_str(ev->event), ev->status);
	return ev;
}

struct conn {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[2][MSG_LEN]; /* [0] receive, [1] send */
};

/* Wait for one successful completion on the connection's CQ. */
static void complete(struct conn *c, const char *what)
{
	struct ibv_wc wc;
	int n, waited = 0;

	while ((n = ibv_poll_cq(c->cq, 1, &wc)) == 0) {
		if (waited++ > STEP_MS * 10)
			FAIL("%s: no completion within %d ms", what, STEP_MS);
		usleep(100);
	}
	if (n < 0 || wc.status != IBV_WC_SUCCESS)
		FAIL("%s: %s (vendor_err 0x%x)", what,
		     n < 0 ? "poll failed" : ibv_wc_status_str(wc.status), wc.vendor_err);
}

static void setup_qp(struct rdma_cm_id *id, struct conn *c)
{
	struct ibv_qp_init_attr qa = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_sge sge;
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

	c->pd = ibv_alloc_pd(id->verbs);
	if (!c->pd)
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	c->cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	if (!c->cq)
		FAIL("ibv_create_cq: %s", strerror(errno));
	qa.send_cq = qa.recv_cq = c->cq;
	if (rdma_create_qp(id, c->pd, &qa))
		FAIL("rdma_create_qp: %s", strerror(errno));
	/* Local only: the peer never touches this memory directly. */
	c->mr = ibv_reg_mr(c->pd, c->buf, sizeof(c->buf), IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		FAIL("ibv_reg_mr: %s", strerror(errno));
	sge =
	    (struct ibv_sge){.addr = (uintptr_t)c->buf[0], .length = MSG_LEN, .lkey = c->mr->lkey};
	if (ibv_post_recv(id->qp, &wr, &bad))
		FAIL("ibv_post_recv: %s", strerror(errno));
}

static void send_msg(struct rdma_cm_id *id, struct conn *c, const char *text)
{
	struct ibv_sge sge = {.addr = (uintptr_t)c->buf[1], .length = MSG_LEN, .lkey = c->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	snprintf(c->buf[1], MSG_LEN, "%s", text);
	if (ibv_post_send(id->qp, &wr, &bad))
		FAIL("ibv_post_send: %s", strerror(errno));
	complete(c, "SEND");
}

static void recv_msg(struct rdma_cm_id *id, struct conn *c)
{
	complete(c, "RECV");
	c->buf[0][MSG_LEN - 1] = '\0';
	printf("%s received: %s\n", role, c->buf[0]);
}

static void teardown(struct rdma_cm_id *id, struct conn *c)
{
	rdma_destroy_qp(id);
	if (ibv_dereg_mr(c->mr) || ibv_destroy_cq(c->cq) || ibv_dealloc_pd(c->pd))
		FAIL("teardown: %s", strerror(errno));
}

static struct addrinfo *resolve(const char *addr, const char *port, int passive)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = passive ? AI_PASSIVE : 0},
			*ai;
	int r = getaddrinfo(addr, port, &hints, &ai);

	if (r)
		FAIL("getaddrinfo(%s): %s", addr, gai_strerror(r));
	return ai;
}

static int server(const char *addr, const char *port, int ready_fd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listener, *id;
	struct rdma_cm_event *ev;
	struct addrinfo *ai = resolve(addr, port, 1);
	struct conn c = {0};

	role = "server";
	if (!ch || rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP))
		FAIL("rdma_create_id: %s", strerror(errno));
	if (rdma_bind_addr(listener, ai->ai_addr))
		FAIL("rdma_bind_addr(%s): %s", addr, strerror(errno));
	freeaddrinfo(ai);
	if (rdma_listen(listener, 4))
		FAIL("rdma_listen: %s", strerror(errno));
	if (ready_fd >= 0) {
		if (write(ready_fd, "r", 1) != 1)
			FAIL("pipe write failed");
		close(ready_fd);
	}
	printf("server listening on %s port %s\n", addr, port);
	fflush(stdout);

	ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	rdma_ack_cm_event(ev);
	setup_qp(id, &c);
	if (rdma_accept(id, &(struct rdma_conn_param){.responder_resources = 1,
						      .initiator_depth = 1,
						      .rnr_retry_count = 7}))
		FAIL("rdma_accept: %s", strerror(errno));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));

	recv_msg(id, &c);
	send_msg(id, &c, "hello from the server");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	teardown(id, &c);
	rdma_destroy_id(id);
	rdma_destroy_id(listener);
	rdma_destroy_event_channel(ch);
	printf("server: OK\n");
	return 0;
}

static int client(const char *addr, const char *port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct addrinfo *ai = resolve(addr, port, 0);
	struct conn c = {0};

	role = "client";
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		FAIL("rdma_create_id: %s", strerror(errno));
	if (rdma_resolve_addr(id, NULL, ai->ai_addr, STEP_MS))
		FAIL("rdma_resolve_addr(%s): %s", addr, strerror(errno));
	freeaddrinfo(ai);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(id, STEP_MS))
		FAIL("rdma_resolve_route: %s", strerror(errno));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	setup_qp(id, &c);
	if (rdma_connect(
		id, &(struct rdma_conn_param){.responder_resources = 1,
					      .initiator_depth = 1,
					      /* retry_count 6: rxe treats 7 like "retry forever",
						 and a dead peer would go unnoticed */
					      .retry_count = 6,
					      .rnr_retry_count = 7}))
		FAIL("rdma_connect: %s", strerror(errno));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));

	send_msg(id, &c, "hello from the client");
	recv_msg(id, &c);
	if (strcmp(c.buf[0], "hello from the server"))
		FAIL("unexpected reply '%s'", c.buf[0]);
	if (rdma_disconnect(id))
		FAIL("rdma_disconnect: %s", strerror(errno));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	teardown(id, &c);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("client: OK\n");
	return 0;
}

int main(int argc, char **argv)
{
	int fds[2], status;
	pid_t pid;
	char r;

	if (argc != 4) {
		fprintf(stderr, "usage: smoke_cm server|client|pair ADDR PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "server"))
		return server(argv[2], argv[3], -1);
	if (!strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	if (strcmp(argv[1], "pair")) {
		fprintf(stderr, "usage: smoke_cm server|client|pair ADDR PORT\n");
		return 2;
	}
	if (pipe(fds))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		_exit(server(argv[2], argv[3], fds[1]));
	}
	close(fds[1]);
	if (read(fds[0], &r, 1) != 1) {
		fprintf(stderr, "smoke_cm: server did not start\n");
		return 1;
	}
	close(fds[0]);
	if (client(argv[2], argv[3]))
		return 1;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	return 0;
}
