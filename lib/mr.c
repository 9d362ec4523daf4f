/*
 * mr.c - memory registration with minimal access, and page-aligned memory.
 *
 * The most common first failure on a new machine is the locked-memory
 * limit: ibv_reg_mr pins pages and fails with ENOMEM or EPERM once
 * RLIMIT_MEMLOCK is used up. The error therefore shows the current limit
 * and the ways to raise it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "rk_internal.h"

struct rk_mr {
	struct ibv_mr *mr;
	void *owned; /* memory from rk_mr_alloc, freed on dereg */
};

void *rk_alloc_aligned(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p = NULL;
	int r;

	if (page <= 0)
		page = 4096;
	len = (len + (size_t)page - 1) & ~((size_t)page - 1);
	r = posix_memalign(&p, (size_t)page, len ? len : (size_t)page);
	if (r) {
		errno = r;
		return NULL;
	}
	memset(p, 0, len);
	return p;
}

void rk_free_aligned(void *p)
{
	free(p);
}

static int access_flags(unsigned access)
{
	int f = IBV_ACCESS_LOCAL_WRITE;

	if (access & RK_ACCESS_REMOTE_WRITE)
		f |= IBV_ACCESS_REMOTE_WRITE;
	if (access & RK_ACCESS_REMOTE_READ)
		f |= IBV_ACCESS_REMOTE_READ;
	return f;
}

static void fmt_limit(char *buf, size_t len, rlim_t v)
{
	if (v == RLIM_INFINITY)
		snprintf(buf, len, "unlimited");
	else
		snprintf(buf, len, "%llu KiB", (unsigned long long)(v / 1024));
}

static int reg_failed(struct rk_error *err, size_t len)
{
	int e = errno ? errno : EIO;
	struct rlimit rl;
	char cur[32] = "?", max[32] = "?";

	if (e != ENOMEM && e != EPERM)
		return rk__err_set(err, e, "ibv_reg_mr", "%zu bytes", len);
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		fmt_limit(cur, sizeof(cur), rl.rlim_cur);
		fmt_limit(max, sizeof(max), rl.rlim_max);
	}
	return rk__err_set(err, e, "ibv_reg_mr",
			   "cannot pin %zu bytes: locked-memory limit (memlock) is %s, hard %s",
			   len, cur, max);
}

static int reg_in(struct rk_device *dev, struct ibv_pd *pd, void *addr, size_t len, unsigned access,
		  struct rk_error *err, struct rk_mr **out)
{
	struct rk_mr *m;

	*out = NULL;
	if (!addr || !len)
		return rk__err_set(err, EINVAL, "rk_mr_reg", "empty buffer");
	if (len > dev->info.max_mr_size)
		return rk__err_set(err, EINVAL, "rk_mr_reg", "%zu bytes exceed the device's %llu",
				   len, (unsigned long long)dev->info.max_mr_size);
	m = calloc(1, sizeof(*m));
	if (!m)
		return rk__err_set(err, ENOMEM, "rk_mr_reg", NULL);
	errno = 0;
	m->mr = ibv_reg_mr(pd, addr, len, access_flags(access));
	if (!m->mr) {
		int r = reg_failed(err, len);

		free(m);
		return rk__fail(r);
	}
	*out = m;
	return 0;
}

int rk_mr_reg(struct rk_device *dev, void *addr, size_t len, unsigned access, struct rk_error *err,
	      struct rk_mr **out)
{
	return reg_in(dev, dev->pd, addr, len, access, err, out);
}

int rk_mr_reg_pd(struct rk_pd *pd, void *addr, size_t len, unsigned access, struct rk_error *err,
		 struct rk_mr **out)
{
	return reg_in(pd->dev, pd->pd, addr, len, access, err, out);
}

static int alloc_in(struct rk_device *dev, struct ibv_pd *pd, size_t len, unsigned access,
		    struct rk_error *err, struct rk_mr **out)
{
	void *p;
	int r;

	*out = NULL;
	p = rk_alloc_aligned(len);
	if (!p)
		return rk__err_sys(err, "posix_memalign", "%zu bytes", len);
	r = reg_in(dev, pd, p, len, access, err, out);
	if (r || !*out) {
		rk_free_aligned(p);
		return rk__fail(r);
	}
	(*out)->owned = p;
	return 0;
}

int rk_mr_alloc(struct rk_device *dev, size_t len, unsigned access, struct rk_error *err,
		struct rk_mr **out)
{
	return alloc_in(dev, dev->pd, len, access, err, out);
}

int rk_mr_alloc_pd(struct rk_pd *pd, size_t len, unsigned access, struct rk_error *err,
		   struct rk_mr **out)
{
	return alloc_in(pd->dev, pd->pd, len, access, err, out);
}

void rk_mr_dereg(struct rk_mr *mr)
{
	int r;

	if (!mr)
		return;
	r = ibv_dereg_mr(mr->mr);
	if (r)
		rk_warn("ibv_dereg_mr: %s", strerror(r));
	rk_free_aligned(mr->owned);
	free(mr);
}

void *rk_mr_addr(const struct rk_mr *mr)
{
	return mr->mr->addr;
}

size_t rk_mr_len(const struct rk_mr *mr)
{
	return mr->mr->length;
}

uint32_t rk_mr_lkey(const struct rk_mr *mr)
{
	return mr->mr->lkey;
}

uint32_t rk_mr_rkey(const struct rk_mr *mr)
{
	return mr->mr->rkey;
}

struct ibv_mr *rk_mr_ibv(const struct rk_mr *mr)
{
	return mr->mr;
}
