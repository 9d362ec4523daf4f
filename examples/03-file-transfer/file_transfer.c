/*
 * ex03_file_transfer - send a file with RDMA WRITE WITH IMMEDIATE.
 *
 *   ex03_file_transfer [OPTIONS] server [ADDR]      receive one file into the working directory
 *   ex03_file_transfer [OPTIONS] client ADDR FILE   send FILE
 *
 * The protocol: the server registers a buffer and SENDs its address and rkey
 * (MR).  The client RDMA-WRITEs the file name into it WITH IMMEDIATE data =
 * the length; the server checks the name, opens the file and SENDs READY.
 * Then, chunk by chunk, the client WRITEs data (immediate = length) and waits
 * for READY before reusing the server's buffer.  A zero-length WRITE ends the
 * file; the server answers DONE with its hash of what it stored, and both
 * sides print that hash (xxh3-64).
 *
 * What the classic version of this program got wrong, and what we do:
 *  - one 10 MiB WRITE under a slow link outlived the default ACK timeout and
 *    died with "transport retry counter exceeded": we WRITE chunks of at most
 *    8 MiB (1 MiB by default; Soft-RoCE's limit per message is 8 MiB), set the
 *    ACK timeout with rdma_set_option() and ask for 6 retries (rxe treats 7
 *    as "retry forever");
 *  - the immediate was trusted as a length: we check it against the buffer
 *    and against the number of bytes the HCA actually placed;
 *  - the file name was used as given: we refuse anything that is not a plain
 *    name in the working directory, and an existing file unless -f;
 *  - errors printed "status is not IBV_WC_SUCCESS": we print the status name
 *    and vendor_err.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <rdma/rdma_cma.h>
#include <xxhash.h>

#include "ex_common.h"

#define MAGIC	   0x52583033 /* "RX03": this program's control messages */
#define VERSION	   1
#define CHUNK_MAX  (8 << 20) /* Soft-RoCE's limit for one message */
#define MSG_MR	   1	     /* server -> client: addr, rkey, len of its buffer */
#define MSG_READY  2	     /* server -> client: buffer free, write the next chunk */
#define MSG_DONE   3	     /* server -> client: file stored, len bytes, hash */
#define MSG_ERROR  4	     /* server -> client: refused, code says why */
#define ERR_NAME   1
#define ERR_EXISTS 2
#define ERR_IO	   3

/* Server -> client control message: fixed size, big-endian fields. */
struct ctrl {
	uint32_t magic;
	uint16_t version;
	uint8_t type;
	uint8_t code;
	uint64_t addr;
	uint64_t len;
	uint64_t hash;
	uint32_t rkey;
	uint32_t pad;
};

static struct rdma_event_channel *ch;
static int timeout_ms = 30000;
static const char *partial; /* server: file being written, removed if we fail */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: %s [OPTIONS] server [ADDR]      receive one file into the working "
	    "directory\n"
	    "       %s [OPTIONS] client ADDR FILE   send FILE\n"
	    "  -c, --chunk SIZE       bytes per RDMA WRITE / server buffer (default 1M, max 8M)\n"
	    "  -n, --name NAME        client: name to store the file as (default: base name of\n"
	    "                         FILE); sent as given, so you can see the server refuse it\n"
	    "  -f, --force            server: overwrite an existing file\n"
	    "  -a, --ack-timeout N    ACK timeout 4.096 us * 2^N, 1..31 (default 17: 0.5 s)\n"
	    "  -p, --port PORT        rdma_cm port (default 7520)\n"
	    "  -t, --timeout SECONDS  deadline of every step (default 30)\n"
	    "  -h, --help             this text\n",
	    ex_prog, ex_prog);
}

static void remove_partial(void)
{
	if (partial && unlink(partial) == 0)
		fprintf(stderr, "%s: removed the incomplete file '%s'\n", ex_prog, partial);
}

/* Wait, at most timeout_ms, for CM event `want`; explain anything else. */
static struct rdma_cm_event *wait_event(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	if (!ex_wait_fd(ch->fd, timeout_ms))
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
 * Wait, at most timeout_ms, for one successful completion on `cq`.  Between
 * empty polls we sleep up to 1 ms on the CM channel: if the peer disconnects
 * we stop at once instead of waiting out the deadline.
 */
static void wait_cq(struct ibv_cq *cq, const char *what, struct ibv_wc *wc)
{
	uint64_t deadline = ex_now_ns() + (uint64_t)timeout_ms * 1000000;
	struct rdma_cm_event *ev;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0) {
		if (ex_now_ns() > deadline)
			ex_die("%s: no completion within %d ms", what, timeout_ms);
		if (!ex_wait_fd(ch->fd, 1))
			continue;
		if (rdma_get_cm_event(ch, &ev))
			ex_die_errno("rdma_get_cm_event");
		ex_die("%s: %s from the peer", what, rdma_event_str(ev->event));
	}
	if (n < 0)
		ex_die("%s: ibv_poll_cq failed", what);
	if (wc->status != IBV_WC_SUCCESS) {
		ex_report_wc(what, wc);
		exit(1);
	}
}

/* Why a file name from the peer is not acceptable, or NULL if it is. */
static const char *bad_name(const char *name, size_t len)
{
	size_t i;

	if (len == 0 || len > NAME_MAX)
		return "empty or longer than NAME_MAX";
	for (i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return "contains a NUL or control character";
	if (memchr(name, '/', len))
		return "contains '/': it would leave the working directory";
	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)))
		return "is '.' or '..'";
	return NULL;
}

/* What each side sets up the same way: one data buffer, one control message. */
struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *send_cq, *recv_cq;
	struct ibv_mr *buf_mr, *ctrl_mr;
	char *buf;
	struct ctrl *msg;
	XXH3_state_t *xxh;
};

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);

	if (!mr) {
		ex_report_reg_mr_failure(len);
		exit(1);
	}
	return mr;
}

/*
 * Arm one receive.  The client receives control messages into `msg`; the
 * server receives only WRITE WITH IMMEDIATE, which needs no buffer (num_sge 0).
 */
static void post_recv(struct conn *c, int num_sge)
{
	struct ibv_sge sge = {(uintptr_t)c->msg, sizeof(*c->msg), c->ctrl_mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = num_sge}, *bad;

	if (ibv_post_recv(c->id->qp, &wr, &bad))
		ex_die_errno("ibv_post_recv");
}

/* Post one signaled work request and wait for its completion. */
static void post_send(struct conn *c, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	if (ibv_post_send(c->id->qp, wr, &bad))
		ex_die("ibv_post_send(%s): %s", what, strerror(errno));
	wait_cq(c->send_cq, what, &wc);
}

/* Server: SEND the control message in `msg`, of type `type`. */
static void send_ctrl(struct conn *c, int type, const char *what)
{
	struct ibv_sge sge = {(uintptr_t)c->msg, sizeof(*c->msg), c->ctrl_mr->lkey};
	struct ibv_send_wr wr = {
	    .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};

	c->msg->type = type;
	post_send(c, &wr, what);
}

/*
 * Connect, the same way on both sides but for the first steps: the server
 * listens and takes one CONNECT_REQUEST, the client resolves the address and
 * the route.  Then the ACK timeout, PD, a CQ per direction, the QP, the two
 * registered buffers, one receive armed, and rdma_accept / rdma_connect.
 * Returns the server's listening id (NULL for the client).
 */
static struct rdma_cm_id *open_conn(struct conn *c, int server, const char *host, const char *port,
				    uint8_t ack, size_t chunk)
{
	struct addrinfo *ai = ex_resolve(host, port, server);
	struct rdma_cm_id *listener = NULL;
	struct rdma_cm_event *ev;
	/* retry_count 6: rxe treats 7 like "retry forever", and a dead peer would go unnoticed */
	struct rdma_conn_param param = {.retry_count = 6, .rnr_retry_count = 7};
	struct ibv_qp_init_attr qpa = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	};

	if (rdma_create_id(ch, server ? &listener : &c->id, NULL, RDMA_PS_TCP))
		ex_die_errno("rdma_create_id");
	if (server) {
		if (rdma_bind_addr(listener, ai->ai_addr))
			ex_die_errno("rdma_bind_addr");
		if (rdma_listen(listener, 1))
			ex_die_errno("rdma_listen");
		printf("server listening on %s port %s, buffer %zu bytes\n", host, port, chunk);
		ev = wait_event(RDMA_CM_EVENT_CONNECT_REQUEST);
		c->id = ev->id;
		rdma_ack_cm_event(ev);
	} else {
		if (rdma_resolve_addr(c->id, NULL, ai->ai_addr, timeout_ms))
			ex_die_errno("rdma_resolve_addr");
		rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_ADDR_RESOLVED));
		if (rdma_resolve_route(c->id, timeout_ms))
			ex_die_errno("rdma_resolve_route");
		rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_ROUTE_RESOLVED));
	}
	freeaddrinfo(ai);

	/* The ACK timeout bounds how long a WRITE may go unacknowledged before it
	 * is sent again; 6 such retries and the QP fails with "transport retry
	 * counter exceeded".  It must be set before connecting.  The server's
	 * SENDs are small, but a slow link deserves a patient timeout too. */
	if (rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack, sizeof(ack)))
		ex_die_errno("rdma_set_option(ACK_TIMEOUT)");
	c->pd = ibv_alloc_pd(c->id->verbs);
	if (!c->pd)
		ex_die_errno("ibv_alloc_pd");
	c->send_cq = ibv_create_cq(c->id->verbs, 1, NULL, NULL, 0);
	c->recv_cq = ibv_create_cq(c->id->verbs, 1, NULL, NULL, 0);
	if (!c->send_cq || !c->recv_cq)
		ex_die_errno("ibv_create_cq");
	qpa.send_cq = c->send_cq;
	qpa.recv_cq = c->recv_cq;
	if (rdma_create_qp(c->id, c->pd, &qpa))
		ex_die_errno("rdma_create_qp");
	c->buf = aligned_alloc(4096, chunk);
	c->msg = calloc(1, sizeof(*c->msg));
	c->xxh = XXH3_createState();
	if (!c->buf || !c->msg || !c->xxh || XXH3_64bits_reset(c->xxh) == XXH_ERROR)
		ex_die("out of memory");
	memset(c->buf, 0, chunk); /* valgrind cannot see the HCA write it: start defined */
	/* The client writes into the server's `buf` (REMOTE_WRITE, which needs
	 * LOCAL_WRITE); the server's control message is its own.  The client's
	 * HCA only reads `buf` (the WRITE source) and writes `msg`. */
	c->buf_mr = reg(c->pd, c->buf, chunk,
			server ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : 0);
	c->ctrl_mr = reg(c->pd, c->msg, sizeof(*c->msg), server ? 0 : IBV_ACCESS_LOCAL_WRITE);

	post_recv(c, !server);
	if (server ? rdma_accept(c->id, &param) : rdma_connect(c->id, &param))
		ex_die_errno(server ? "rdma_accept" : "rdma_connect");
	rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_ESTABLISHED));
	return listener;
}

/*
 * Disconnect: the client first, the server answers its DISCONNECTED.  Then
 * release in reverse order; `listener` is the server's (NULL for the client).
 */
static void teardown(struct conn *c, struct rdma_cm_id *listener)
{
	int err;

	if (!listener && rdma_disconnect(c->id))
		ex_die_errno("rdma_disconnect");
	rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_DISCONNECTED));
	if (listener && rdma_disconnect(c->id))
		ex_die_errno("rdma_disconnect");
	rdma_destroy_qp(c->id);
	if ((err = ibv_dereg_mr(c->ctrl_mr)) || (err = ibv_dereg_mr(c->buf_mr)))
		ex_die("ibv_dereg_mr: %s", strerror(err));
	XXH3_freeState(c->xxh);
	free(c->msg);
	free(c->buf);
	if ((err = ibv_destroy_cq(c->recv_cq)) || (err = ibv_destroy_cq(c->send_cq)))
		ex_die("ibv_destroy_cq: %s", strerror(err));
	if ((err = ibv_dealloc_pd(c->pd)))
		ex_die("ibv_dealloc_pd: %s", strerror(err));
	if (rdma_destroy_id(c->id) || (listener && rdma_destroy_id(listener)))
		ex_die_errno("rdma_destroy_id");
}

static void run_server(const char *host, const char *port, size_t chunk, int force, uint8_t ack)
{
	struct conn c;
	struct rdma_cm_id *listener = open_conn(&c, 1, host, port, ack, chunk);
	struct ibv_wc wc;
	char name[NAME_MAX + 1];
	const char *why;
	uint64_t total = 0, chunks = 0, hash;
	uint32_t len;
	ssize_t w;
	int fd = -1, code;

	*c.msg = (struct ctrl){.magic = htobe32(MAGIC),
			       .version = htobe16(VERSION),
			       .addr = htobe64((uintptr_t)c.buf),
			       .len = htobe64(chunk),
			       .rkey = htobe32(c.buf_mr->rkey)};
	send_ctrl(&c, MSG_MR, "send MR");

	for (;;) {
		wait_cq(c.recv_cq, "receive chunk", &wc);
		/* The immediate is the peer's claim; byte_len is what the HCA placed.
		 * Both must agree and fit the buffer. */
		len = be32toh(wc.imm_data);
		if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM))
			ex_die("peer sent opcode %d, expected RDMA WRITE WITH IMMEDIATE",
			       wc.opcode);
		if (len > chunk || len != wc.byte_len)
			ex_die("peer announced %u bytes, wrote %u, buffer holds %zu", len,
			       wc.byte_len, chunk);
		post_recv(&c, 0); /* before READY lets it write again */

		if (fd < 0) { /* the first message is the file name */
			snprintf(name, sizeof(name), "%.*s", (int)len, c.buf);
			why = bad_name(c.buf, len);
			code = ERR_NAME;
			if (!why) {
				/* O_EXCL: never replace a file unless asked; O_NOFOLLOW:
				 * never write through a symbolic link. */
				fd = open(name,
					  O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
					      (force ? O_TRUNC : O_EXCL),
					  0644);
				if (fd < 0 && errno == EEXIST)
					why = "exists (use -f to overwrite)", code = ERR_EXISTS;
				else if (fd < 0)
					why = strerror(errno), code = ERR_IO;
			}
			if (why) {
				c.msg->code = code;
				send_ctrl(&c, MSG_ERROR, "send ERROR");
				rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_DISCONNECTED));
				ex_die("refused file name '%s': %s", name, why);
			}
			partial = name;
			printf("receiving '%s'\n", name);
		} else if (len == 0) { /* end of file */
			break;
		} else {
			for (size_t off = 0; off < len; off += (size_t)w) {
				w = write(fd, c.buf + off, len - off);
				if (w < 0) {
					c.msg->code = ERR_IO;
					send_ctrl(&c, MSG_ERROR, "send ERROR");
					ex_die("write(%s): %s", name, strerror(errno));
				}
			}
			XXH3_64bits_update(c.xxh, c.buf, len);
			total += len;
			chunks++;
		}
		send_ctrl(&c, MSG_READY, "send READY");
	}
	if (fsync(fd) || close(fd))
		ex_die("%s: %s", name, strerror(errno));
	partial = NULL;
	hash = XXH3_64bits_digest(c.xxh);
	c.msg->len = htobe64(total);
	c.msg->hash = htobe64(hash);
	send_ctrl(&c, MSG_DONE, "send DONE");
	printf("received '%s': %" PRIu64 " bytes in %" PRIu64 " chunks, xxh3 %016" PRIx64 "\n",
	       name, total, chunks, hash);
	teardown(&c, listener);
}

/* Client: wait for the server's next control message and check everything in it. */
static struct ctrl *recv_ctrl(struct conn *c, int type)
{
	static const char *const errors[] = {
	    [ERR_NAME] = "the name is not a plain file name (no '/', not '.' or '..')",
	    [ERR_EXISTS] = "a file of that name exists there (run the server with -f)",
	    [ERR_IO] = "it could not create or write the file",
	};
	struct ibv_wc wc;

	wait_cq(c->recv_cq, "receive control message", &wc);
	if (wc.opcode != IBV_WC_RECV || wc.byte_len != sizeof(*c->msg))
		ex_die("peer sent %u bytes (opcode %d), not a control message", wc.byte_len,
		       wc.opcode);
	if (be32toh(c->msg->magic) != MAGIC || be16toh(c->msg->version) != VERSION)
		ex_die("peer is not ex03_file_transfer version %d", VERSION);
	if (c->msg->type == MSG_ERROR)
		ex_die("the server refused: %s", c->msg->code >= ERR_NAME && c->msg->code <= ERR_IO
						     ? errors[c->msg->code]
						     : "(unknown reason)");
	if (c->msg->type != type)
		ex_die("peer sent message type %d, expected %d", c->msg->type, type);
	post_recv(c, 1); /* re-arm the receive for the next message before asking for it */
	return c->msg;
}

static void run_client(const char *host, const char *port, const char *path, const char *name,
		       size_t chunk, uint8_t ack)
{
	struct conn c;
	struct ibv_sge sge;
	struct ibv_send_wr swr = {
	    .sg_list = &sge, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .send_flags = IBV_SEND_SIGNALED};
	struct ctrl *peer;
	struct stat st;
	size_t name_len = strlen(name), n;
	uint64_t total = 0, chunks = 0, hash, t0;
	ssize_t r;
	double secs;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st))
		ex_die("%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		ex_die("%s: not a regular file", path);

	open_conn(&c, 0, host, port, ack, chunk);
	peer = recv_ctrl(&c, MSG_MR);
	swr.wr.rdma.remote_addr = be64toh(peer->addr);
	swr.wr.rdma.rkey = be32toh(peer->rkey);
	if (be64toh(peer->len) < chunk)
		chunk = be64toh(peer->len); /* never write past the server's buffer */
	if (chunk <= name_len)
		ex_die("the server's buffer (%zu bytes) cannot even hold the name", chunk);
	printf("connected to %s port %s, sending '%s' as '%s' in chunks of %zu bytes\n", host, port,
	       path, name, chunk);

	/* The name first, then the data, then a zero-length WRITE: end of file.
	 * Each waits for READY: the server's buffer is ours again. */
	memcpy(c.buf, name, name_len + 1); /* the NUL is not sent: the length says it all */
	n = name_len;
	t0 = ex_now_ns();
	for (;;) {
		sge = (struct ibv_sge){(uintptr_t)c.buf, (uint32_t)n, c.buf_mr->lkey};
		swr.num_sge = n ? 1 : 0;
		swr.imm_data = htobe32((uint32_t)n);
		post_send(&c, &swr, n ? "RDMA WRITE WITH IMM" : "RDMA WRITE (end)");
		if (n == 0)
			break;
		recv_ctrl(&c, MSG_READY);

		for (n = 0; n < chunk; n += (size_t)r) {
			r = read(fd, c.buf + n, chunk - n);
			if (r < 0)
				ex_die("read(%s): %s", path, strerror(errno));
			if (r == 0)
				break;
		}
		XXH3_64bits_update(c.xxh, c.buf, n);
		total += n;
		chunks += n > 0;
	}
	peer = recv_ctrl(&c, MSG_DONE);
	secs = (double)(ex_now_ns() - t0) / 1e9;
	hash = XXH3_64bits_digest(c.xxh);
	printf("sent '%s': %" PRIu64 " bytes in %" PRIu64
	       " chunks, %.2f s, %.1f MiB/s, xxh3 %016" PRIx64 "\n",
	       path, total, chunks, secs, (double)total / (1 << 20) / secs, hash);
	if (be64toh(peer->len) != total || be64toh(peer->hash) != hash)
		ex_die("the server stored %" PRIu64 " bytes with xxh3 %016" PRIx64
		       ": NOT the same file",
		       be64toh(peer->len), be64toh(peer->hash));
	printf("the server stored the same %" PRIu64 " bytes (xxh3 %016" PRIx64 ")\n", total, hash);
	teardown(&c, NULL);
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"chunk", required_argument, NULL, 'c'}, {"name", required_argument, NULL, 'n'},
	    {"force", no_argument, NULL, 'f'},	     {"ack-timeout", required_argument, NULL, 'a'},
	    {"port", required_argument, NULL, 'p'},  {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},	     {NULL, 0, NULL, 0},
	};
	const char *port = "7520", *name = NULL, *role, *host, *path;
	long long chunk = 1 << 20;
	int force = 0, is_server, opt;
	uint8_t ack = 17;
	char *copy;

	ex_set_prog(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0); /* a test reads our output while we run */
	while ((opt = getopt_long(argc, argv, "c:n:fa:p:t:h", opts, NULL)) != -1) {
		if (ex_role_option(opt, optarg, &port, &timeout_ms, usage))
			continue;
		switch (opt) {
		case 'c':
			chunk = ex_parse_size(optarg);
			if (chunk < 4096 || chunk > CHUNK_MAX)
				ex_bad_usage("--chunk must be 4K..8M");
			break;
		case 'n':
			name = optarg;
			break;
		case 'f':
			force = 1;
			break;
		case 'a':
			ack = (uint8_t)ex_opt_num(optarg, 1, 31, "--ack-timeout must be 1..31");
			break;
		}
	}
	role = optind < argc ? argv[optind++] : "";
	host = optind < argc ? argv[optind++] : NULL;
	path = optind < argc ? argv[optind++] : NULL;
	is_server = !strcmp(role, "server");
	if (!is_server && strcmp(role, "client"))
		ex_bad_usage("say 'server' or 'client'");
	if (optind < argc || (is_server && path))
		ex_bad_usage("too many arguments");
	if (name && (!*name || strlen(name) > NAME_MAX))
		ex_bad_usage("--name must be 1..NAME_MAX bytes");

	ch = rdma_create_event_channel();
	if (!ch)
		ex_die_errno("rdma_create_event_channel");
	if (is_server) {
		atexit(remove_partial);
		run_server(host ? host : "0.0.0.0", port, (size_t)chunk, force, ack);
	} else {
		if (!host || !path)
			ex_bad_usage("the client needs the server's address and a FILE");
		/* Only the last component of FILE travels: "dir/../x.bin" -> "x.bin". */
		copy = strdup(path);
		if (!copy)
			ex_die("out of memory");
		run_client(host, port, path, name ? name : basename(copy), (size_t)chunk, ack);
		free(copy);
	}
	rdma_destroy_event_channel(ch);
	return 0;
}
