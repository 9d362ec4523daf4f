/*
 * smoke_verbs.c - the Foundation smoke test, on raw libibverbs.
 *
 * One process, one device: PD, MR, CQ and two RC QPs connected to each other
 * through RESET -> INIT -> RTR -> RTS.  Then SEND/RECV, RDMA WRITE and RDMA
 * READ of a random 1 MiB buffer, each compared byte for byte.  Prints the
 * environment it ran in (device, port state, GID, active MTU) first.
 *
 * The device is $RK_DEV (else the first one); exit 0 on success.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/random.h>

#include <infiniband/verbs.h>

#define MSG_SIZE    (1 << 20)
#define PORT	    1
#define DEADLINE_MS 20000

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "smoke_verbs: " __VA_ARGS__);                                      \
		fprintf(stderr, "\n");                                                             \
		exit(1);                                                                           \
	} while (0)

struct endpoint {
	struct ibv_qp *qp;
	uint32_t psn;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for exactly one completion, with a deadline, and require success. */
static void wait_one(struct ibv_cq *cq, enum ibv_wc_opcode want, const char *what)
{
	int64_t end = now_ms() + DEADLINE_MS;
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
		if (now_ms() > end)
			FAIL("%s: no completion within %d ms", what, DEADLINE_MS);
	}
	if (n < 0)
		FAIL("%s: ibv_poll_cq failed", what);
	if (wc.status != IBV_WC_SUCCESS)
		FAIL("%s: completion status %s (vendor_err 0x%x, qp 0x%x)", what,
		     ibv_wc_status_str(wc.status), wc.vendor_err, wc.qp_num);
	if (wc.opcode != want)
		FAIL("%s: completion opcode %d, expected %d", what, wc.opcode, want);
}

/* Pick a RoCE v2 GID holding an IPv4-mapped address, else any RoCE v2, else 0. */
static int pick_gid(struct ibv_context *ctx, const struct ibv_port_attr *pa, union ibv_gid *gid)
{
	int best = -1;

	for (int i = 0; i < pa->gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(ctx, PORT, i, &e, 0))
			continue;
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		/* ::ffff:a.b.c.d */
		if (!memcmp(e.gid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
			*gid = e.gid;
			return i;
		}
		if (best < 0) {
			best = i;
			*gid = e.gid;
		}
	}
	if (best < 0 && ibv_query_gid(ctx, PORT, 0, gid) == 0)
		best = 0;
	return best;
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT,
	    .pkey_index = 0,
	    .port_num = PORT,
	    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("RESET->INIT: %s", strerror(errno));
}

static void to_rtr_rts(struct endpoint *me, const struct endpoint *peer,
		       const struct ibv_port_attr *pa, const union ibv_gid *gid, int gid_index)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = pa->active_mtu,
	    .dest_qp_num = peer->qp->qp_num,
	    .rq_psn = peer->psn,
	    .max_dest_rd_atomic = 1,
	    .min_rnr_timer = 12,
	    .ah_attr =
		{
		    .dlid = pa->lid,
		    .port_num = PORT,
		    .is_global = pa->link_layer == IBV_LINK_LAYER_ETHERNET,
		    .grh = {.dgid = *gid, .sgid_index = (uint8_t)gid_index, .hop_limit = 1},
		},
	};

	if (ibv_modify_qp(me->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("INIT->RTR: %s", strerror(errno));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me->psn;
	a.timeout = 17;	 /* 4.096 us * 2^17 = 0.5 s: survives slow Soft-RoCE */
	a.retry_cnt = 6; /* rxe treats 7 as "retry forever" */
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(me->qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("RTR->RTS: %s", strerror(errno));
}

static void post_one(struct ibv_qp *qp, enum ibv_wr_opcode op, void *buf, uint32_t lkey,
		     uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = MSG_SIZE, .lkey = lkey};
	struct ibv_send_wr wr = {
	    .sg_list = &sge,
	    .num_sge = 1,
	    .opcode = op,
	    .send_flags = IBV_SEND_SIGNALED,
	    .wr.rdma = {.remote_addr = raddr, .rkey = rkey},
	};
	struct ibv_send_wr *bad;

	if (ibv_post_send(qp, &wr, &bad))
		FAIL("ibv_post_send(opcode %d): %s", op, strerror(errno));
}

static void check_equal(const uint8_t *a, const uint8_t *b, const char *what)
{
	if (memcmp(a, b, MSG_SIZE)) {
		size_t i = 0;

		while (a[i] == b[i])
			i++;
		FAIL("%s: data differs at byte %zu", what, i);
	}
	printf("%s: %d bytes verified\n", what, MSG_SIZE);
}

int main(void)
{
	const char *want = getenv("RK_DEV");
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	struct ibv_context *ctx;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_cq *cq[2];
	struct ibv_mr *mr;
	struct endpoint ep[2];
	uint8_t *mem, *src, *dst;
	char gidtxt[INET6_ADDRSTRLEN];
	int n, gid_index;

	list = ibv_get_device_list(&n);
	if (!list || n == 0)
		FAIL("no RDMA device (run through scripts/softroce)");
	for (int i = 0; i < n; i++)
		if (!want || !strcmp(ibv_get_device_name(list[i]), want))
			dev = dev ? dev : list[i];
	if (!dev)
		FAIL("device %s not found", want);

	ctx = ibv_open_device(dev);
	if (!ctx)
		FAIL("ibv_open_device: %s", strerror(errno));
	if (ibv_query_port(ctx, PORT, &pa))
		FAIL("ibv_query_port: %s", strerror(errno));
	gid_index = pick_gid(ctx, &pa, &gid);
	if (gid_index < 0)
		FAIL("no usable GID");
	inet_ntop(AF_INET6, gid.raw, gidtxt, sizeof(gidtxt));
	printf("device %s port %d state %s active_mtu %d gid[%d] %s\n", ibv_get_device_name(dev),
	       PORT, ibv_port_state_str(pa.state), 128 << pa.active_mtu, gid_index, gidtxt);
	if (pa.state != IBV_PORT_ACTIVE)
		FAIL("port is not ACTIVE");

	/* The PD is the root: the MR, CQ and QPs below all hang off it (or the context). */
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	mem = aligned_alloc(4096, 2 * MSG_SIZE);
	if (!mem)
		FAIL("out of memory");
	src = mem;
	dst = mem + MSG_SIZE;
	mr = ibv_reg_mr(pd, mem, 2 * MSG_SIZE,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		FAIL("ibv_reg_mr: %s%s", strerror(errno),
		     errno == ENOMEM || errno == EPERM ? " (locked-memory limit? see ulimit -l)"
						       : "");
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr qa = {0};

		/* One CQ per QP, so each side's completions come back in order. */
		cq[i] = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		if (!cq[i])
			FAIL("ibv_create_cq: %s", strerror(errno));
		qa = (struct ibv_qp_init_attr){
		    .send_cq = cq[i],
		    .recv_cq = cq[i],
		    .cap = {.max_send_wr = 8,
			    .max_recv_wr = 8,
			    .max_send_sge = 1,
			    .max_recv_sge = 1},
		    .qp_type = IBV_QPT_RC,
		};

		ep[i].qp = ibv_create_qp(pd, &qa);
		if (!ep[i].qp)
			FAIL("ibv_create_qp: %s", strerror(errno));
		if (getrandom(&ep[i].psn, sizeof(ep[i].psn), 0) != sizeof(ep[i].psn))
			FAIL("getrandom failed");
		ep[i].psn &= 0xffffff;
		to_init(ep[i].qp);
	}
	to_rtr_rts(&ep[0], &ep[1], &pa, &gid, gid_index);
	to_rtr_rts(&ep[1], &ep[0], &pa, &gid, gid_index);
	printf("qp 0x%x psn 0x%06x <-> qp 0x%x psn 0x%06x, RTS\n", ep[0].qp->qp_num, ep[0].psn,
	       ep[1].qp->qp_num, ep[1].psn);

	/* SEND/RECV: qp1 posts a receive into dst, qp0 sends src. */
	if (getrandom(src, MSG_SIZE, 0) != MSG_SIZE)
		FAIL("getrandom failed");
	memset(dst, 0, MSG_SIZE);
	{
		struct ibv_sge sge = {.addr = (uintptr_t)dst, .length = MSG_SIZE, .lkey = mr->lkey};
		struct ibv_recv_wr rwr = {.sg_list = &sge, .num_sge = 1}, *bad;

		if (ibv_post_recv(ep[1].qp, &rwr, &bad))
			FAIL("ibv_post_recv: %s", strerror(errno));
	}
	post_one(ep[0].qp, IBV_WR_SEND, src, mr->lkey, 0, 0);
	wait_one(cq[0], IBV_WC_SEND, "SEND");
	wait_one(cq[1], IBV_WC_RECV, "RECV");
	check_equal(src, dst, "SEND/RECV");

	/* RDMA WRITE: qp0 writes fresh random src into dst. */
	if (getrandom(src, MSG_SIZE, 0) != MSG_SIZE)
		FAIL("getrandom failed");
	memset(dst, 0, MSG_SIZE);
	post_one(ep[0].qp, IBV_WR_RDMA_WRITE, src, mr->lkey, (uintptr_t)dst, mr->rkey);
	wait_one(cq[0], IBV_WC_RDMA_WRITE, "RDMA WRITE");
	check_equal(src, dst, "RDMA WRITE");

	/* RDMA READ: qp0 reads fresh random src into dst. */
	if (getrandom(src, MSG_SIZE, 0) != MSG_SIZE)
		FAIL("getrandom failed");
	memset(dst, 0, MSG_SIZE);
	post_one(ep[0].qp, IBV_WR_RDMA_READ, dst, mr->lkey, (uintptr_t)src, mr->rkey);
	wait_one(cq[0], IBV_WC_RDMA_READ, "RDMA READ");
	check_equal(src, dst, "RDMA READ");

	/* Teardown in reverse order of creation. */
	for (int i = 1; i >= 0; i--) {
		if (ibv_destroy_qp(ep[i].qp))
			FAIL("ibv_destroy_qp: %s", strerror(errno));
		if (ibv_destroy_cq(cq[i]))
			FAIL("ibv_destroy_cq: %s", strerror(errno));
	}
	if (ibv_dereg_mr(mr))
		FAIL("ibv_dereg_mr: %s", strerror(errno));
	free(mem);
	if (ibv_dealloc_pd(pd))
		FAIL("ibv_dealloc_pd: %s", strerror(errno));
	if (ibv_close_device(ctx))
		FAIL("ibv_close_device: %s", strerror(errno));
	ibv_free_device_list(list);
	printf("smoke_verbs: OK\n");
	return 0;
}
