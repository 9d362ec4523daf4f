/*
 * bench_xfer_read.c - one-sided READ batches from C, the figure the Python
 * binding's (bench/python-xfer-compare) is held against.
 *
 *   bench_xfer_read [-s BYTES] [-n ITERS] [-w WARMUP]
 *
 * One process, both ends on RK_DEV (the sandbox's): an owner rk_xfer with a
 * segment exported READ, a user rk_xfer that imports it, one lane made as
 * the Python binding makes its lanes (send queue 128, a completion per 16,
 * the peer's lanes on one busy CQ). Each iteration posts a batch of one
 * READ of BYTES (default 1 MiB) into a local segment, waits for it
 * (rk_xfer_batch_wait), frees it. Prints the median and mean time per batch
 * and the rate, and checks the bytes once at the end.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmakit/rdmakit.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void die(const char *what, const struct rk_error *e)
{
	fprintf(stderr, "bench_xfer_read: %s: %s\n", what, e ? rk_error_str(e) : "failed");
	exit(1);
}

/* One side's lane on a busy CQ of its own, as rdmakit.xfer makes them. */
static struct rk_conn *lane(struct rk_device *dev, struct rk_cq **cq)
{
	struct rk_cq_opts co = {.depth = 128 + 32, .mode = RK_WAIT_BUSY};
	struct rk_conn_opts o = {.sq_depth = 128, .rq_depth = 32, .signal_every = 16};
	struct rk_conn *c;
	struct rk_error e;

	if (rk_cq_create(dev, &co, &e, cq))
		die("rk_cq_create", &e);
	o.cq = *cq;
	if (rk_conn_create(dev, &o, &e, &c))
		die("rk_conn_create", &e);
	return c;
}

int main(int argc, char **argv)
{
	size_t size = 1u << 20;
	unsigned iters = 200, warm = 20;
	struct rk_device_opts dopts = {.name = getenv("RK_DEV")};
	struct rk_device *dev;
	struct rk_cq *cqa, *cqb;
	struct rk_conn *a, *b;
	struct rk_oob_info ia, ib;
	struct rk_xfer *xo, *xu;
	struct rk_xfer_peer *po, *pu;
	struct rk_xfer_seg *so, *su;
	struct rk_xfer_remote *rem;
	struct rk_error e;
	uint8_t desc[RK_XFER_DESC_MAX], *src, *dst;
	double *t, sum = 0;
	size_t dlen;
	int opt;

	while ((opt = getopt(argc, argv, "s:n:w:")) != -1) {
		if (opt == 's')
			size = strtoull(optarg, NULL, 0);
		else if (opt == 'n')
			iters = (unsigned)strtoul(optarg, NULL, 0);
		else if (opt == 'w')
			warm = (unsigned)strtoul(optarg, NULL, 0);
		else {
			fprintf(stderr,
				"usage: bench_xfer_read [-s BYTES] [-n ITERS] [-w WARMUP]\n");
			return 2;
		}
	}
	if (!size || !iters) {
		fprintf(stderr, "bench_xfer_read: -s and -n must be > 0\n");
		return 2;
	}
	if (rk_device_open(&dopts, &e, &dev))
		die("rk_device_open", &e);
	a = lane(dev, &cqa);
	b = lane(dev, &cqb);
	rk_conn_local_info(a, &ia);
	rk_conn_local_info(b, &ib);
	if (rk_conn_connect(a, &ib, &e) || rk_conn_connect(b, &ia, &e))
		die("rk_conn_connect", &e);
	if (rk_xfer_create(dev, NULL, NULL, &e, &xo) || rk_xfer_create(dev, NULL, NULL, &e, &xu))
		die("rk_xfer_create", &e);
	if (rk_xfer_peer_create(xo, &a, 1, &e, &po) || rk_xfer_peer_create(xu, &b, 1, &e, &pu))
		die("rk_xfer_peer_create", &e);
	src = rk_alloc_aligned(size);
	dst = rk_alloc_aligned(size);
	t = calloc(iters, sizeof(*t));
	if (!src || !dst || !t)
		die("out of memory", NULL);
	for (size_t i = 0; i < size; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	memset(dst, 0, size);
	if (rk_xfer_seg_reg(xo, src, size, RK_XFER_READ, &e, &so) ||
	    rk_xfer_seg_reg(xu, dst, size, 0, &e, &su))
		die("rk_xfer_seg_reg", &e);
	if (rk_xfer_export(so, po, RK_XFER_READ, desc, sizeof(desc), &dlen, 5000, &e))
		die("rk_xfer_export", &e);
	if (rk_xfer_import(pu, desc, dlen, &e, &rem))
		die("rk_xfer_import", &e);
	for (unsigned i = 0; i < warm + iters; i++) {
		struct rk_xfer_op op = {RK_XFER_OP_READ, su, 0, rem, 0, size};
		struct rk_xfer_batch *bt;
		double t0 = now_us();

		if (rk_xfer_post(pu, &op, 1, NULL, &e, &bt))
			die("rk_xfer_post", &e);
		if (rk_xfer_batch_wait(bt, -1, &e) != 1)
			die("rk_xfer_batch_wait", &e);
		rk_xfer_batch_free(bt);
		if (i >= warm)
			t[i - warm] = now_us() - t0;
	}
	if (memcmp(src, dst, size))
		die("the bytes READ differ", NULL);
	for (unsigned i = 0; i < iters; i++)
		sum += t[i];
	qsort(t, iters, sizeof(*t), cmp_double);
	printf("bench_xfer_read: %zu B x %u: median %.1f us, mean %.1f us, %.1f MB/s\n", size,
	       iters, t[iters / 2], sum / iters, (double)size * iters / sum);
	rk_xfer_remote_free(rem);
	rk_xfer_peer_destroy(pu);
	rk_xfer_peer_destroy(po);
	rk_conn_destroy(b);
	rk_conn_destroy(a);
	rk_xfer_seg_dereg(su);
	rk_xfer_seg_dereg(so);
	rk_xfer_destroy(xu);
	rk_xfer_destroy(xo);
	rk_cq_destroy(cqb);
	rk_cq_destroy(cqa);
	rk_free_aligned(src);
	rk_free_aligned(dst);
	free(t);
	rk_device_close(dev);
	return 0;
}
