/*
 * rdmakit/mr.h - memory registration with the least access the use needs.
 *
 * A registration pins memory and gives it a local key (lkey, for our own
 * work requests) and a remote key (rkey, for the peer's RDMA WRITE/READ).
 * Grant the peer only what it needs: RK_ACCESS_LOCAL for buffers we send
 * from or receive into, RK_ACCESS_REMOTE_WRITE for buffers the peer writes,
 * RK_ACCESS_REMOTE_READ for buffers the peer reads.
 *
 * When pinning fails because of the locked-memory limit (ENOMEM/EPERM), the
 * error says so, shows the current RLIMIT_MEMLOCK and how to raise it.
 *
 * Thread-safety: registering and deregistering may happen from any thread;
 * an rk_mr is immutable after creation.
 */
#ifndef RDMAKIT_MR_H
#define RDMAKIT_MR_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/common.h>
#include <rdmakit/device.h>
#include <rdmakit/error.h>
#include <rdmakit/pd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Intended use; combine with |. Local write is always granted. */
enum rk_access {
	RK_ACCESS_LOCAL = 0,
	RK_ACCESS_REMOTE_WRITE = 1 << 0,
	RK_ACCESS_REMOTE_READ = 1 << 1,
};

struct rk_mr;

/*
 * rk_mr_reg - register [@addr, @addr + @len) owned by the caller, who must
 * keep it alive until rk_mr_dereg(). Costs a syscall and pinning every page
 * (tens of microseconds per MiB): register once, reuse many times.
 */
RK_API int rk_mr_reg(struct rk_device *dev, void *addr, size_t len, unsigned access,
		     struct rk_error *err, struct rk_mr **out);

/*
 * rk_mr_alloc - allocate @len bytes, page aligned and zeroed, and register
 * them. The memory belongs to the rk_mr and is freed by rk_mr_dereg().
 */
RK_API int rk_mr_alloc(struct rk_device *dev, size_t len, unsigned access, struct rk_error *err,
		       struct rk_mr **out);

/*
 * rk_mr_reg_pd, rk_mr_alloc_pd - the same in protection domain @pd
 * (pd.h) instead of the device's: the rkey then works only on QPs of @pd,
 * so the memory is out of reach of every other connection of the device.
 * Same cost and ownership; @pd must outlive the registration.
 */
RK_API int rk_mr_reg_pd(struct rk_pd *pd, void *addr, size_t len, unsigned access,
			struct rk_error *err, struct rk_mr **out);
RK_API int rk_mr_alloc_pd(struct rk_pd *pd, size_t len, unsigned access, struct rk_error *err,
			  struct rk_mr **out);

/* rk_mr_dereg - unregister (and free, if allocated by rk_mr_alloc). Accepts NULL. */
RK_API void rk_mr_dereg(struct rk_mr *mr);

RK_API void *rk_mr_addr(const struct rk_mr *mr);
RK_API size_t rk_mr_len(const struct rk_mr *mr);
RK_API uint32_t rk_mr_lkey(const struct rk_mr *mr);
RK_API uint32_t rk_mr_rkey(const struct rk_mr *mr);
/* rk_mr_ibv - the underlying struct ibv_mr (escape hatch; owned by @mr). */
RK_API struct ibv_mr *rk_mr_ibv(const struct rk_mr *mr);

/*
 * rk_alloc_aligned - @len bytes aligned to the page size, zeroed; NULL with
 * errno set on failure. Release with rk_free_aligned() (accepts NULL).
 */
RK_API void *rk_alloc_aligned(size_t len);
RK_API void rk_free_aligned(void *p);

#ifdef __cplusplus
}
#endif

#endif
