/*
 * bench_pool.c - cost of a 4 KiB buffer from the pre-registered pool versus
 * registering and deregistering one per request.
 *
 *   bench_pool [DEVICE-ADDRESS]     (default $RK_ADDR)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <rdmakit/rdmakit.h>

#define POOL_ITERS 200000
#define REG_ITERS  400
#define ROUNDS	   5 /* best of: the sandbox shares two cores with other VMs */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct rk_device_opts o = {.addr = argc > 1 ? argv[1] : getenv("RK_ADDR"), .gid_index = -1};
	struct rk_pool_opts po = {.access = RK_ACCESS_REMOTE_WRITE, .prealloc = 1};
	struct rk_device *dev;
	struct rk_pool *pool;
	struct rk_error e;
	struct rk_buf b;
	double t0, pool_ns, reg_ns;
	void *mem;

	if (!o.addr) {
		fprintf(stderr, "usage: bench_pool ADDRESS (or set RK_ADDR)\n");
		return 2;
	}
	if (rk_device_open(&o, &e, &dev) || rk_pool_create(dev, &po, &e, &pool)) {
		fprintf(stderr, "bench_pool: %s\n", rk_error_str(&e));
		return 1;
	}
	mem = rk_alloc_aligned(4096);
	pool_ns = reg_ns = 1e18;
	for (int round = 0; round < ROUNDS; round++) {
		double t;

		t0 = now_ns();
		for (int i = 0; i < POOL_ITERS; i++) {
			if (rk_pool_alloc(pool, 4096, &b, &e) || rk_pool_free(pool, &b)) {
				fprintf(stderr, "bench_pool: %s\n", rk_error_str(&e));
				return 1;
			}
		}
		t = (now_ns() - t0) / POOL_ITERS;
		pool_ns = t < pool_ns ? t : pool_ns;
		t0 = now_ns();
		for (int i = 0; i < REG_ITERS; i++) {
			struct ibv_mr *mr =
			    ibv_reg_mr(rk_device_pd(dev), mem, 4096,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

			if (!mr || ibv_dereg_mr(mr)) {
				perror("bench_pool: ibv_reg_mr/ibv_dereg_mr");
				return 1;
			}
		}
		t = (now_ns() - t0) / REG_ITERS;
		reg_ns = t < reg_ns ? t : reg_ns;
	}
	printf(
	    "4 KiB buffer (best of %d): pool alloc+free %.1f ns, ibv_reg_mr+ibv_dereg_mr %.0f ns: "
	    "pool %.0fx cheaper\n",
	    ROUNDS, pool_ns, reg_ns, reg_ns / pool_ns);
	rk_free_aligned(mem);
	rk_pool_destroy(pool);
	rk_device_close(dev);
	return 0;
}
