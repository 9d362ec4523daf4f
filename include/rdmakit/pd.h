/*
 * rdmakit/pd.h - protection domains of your own, to keep peers apart.
 *
 * Every rk_device has one protection domain (PD), used by default for all
 * memory registrations and connections. A registration's rkey is honoured
 * only on queue pairs of the same PD: the device itself refuses an RDMA
 * WRITE or READ whose rkey belongs to another PD, and the initiator's work
 * request fails with IBV_WC_REM_ACCESS_ERR, its QP entering the error
 * state; the owner of the memory sees nothing. So a server that gives each
 * client (or each session of several connections) a PD of its own, with
 * that client's QPs and memory in it, is protected by the hardware from a
 * client that learns or guesses another's rkey and address - unlike
 * secrecy of the rkey, which on some devices (Soft-RoCE) is an index and a
 * few random bits.
 *
 * Use: rk_pd_alloc(), then register with rk_mr_reg_pd() / rk_mr_alloc_pd()
 * (mr.h) and create connections with rk_conn_opts.pd set (conn.h, for
 * rk_conn_create and rk_cm_request_accept alike). A CQ is not tied to a PD
 * and may be shared across PDs.
 *
 * Ownership: an rk_pd belongs to the caller and must be freed after every
 * registration and connection made in it, and before its device is closed.
 *
 * Thread-safety: an rk_pd may be used to create objects from several
 * threads at once (verbs serialises that); it is immutable after creation.
 */
#ifndef RDMAKIT_PD_H
#define RDMAKIT_PD_H

#include <infiniband/verbs.h>

#include <rdmakit/common.h>
#include <rdmakit/device.h>
#include <rdmakit/error.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rk_pd;

/*
 * rk_pd_alloc - allocate a protection domain on @dev. Costs one system
 * call and a small kernel object; devices cap the number of PDs
 * (ibv_device_attr.max_pd, about 512 K on Soft-RoCE, 16 M on mlx5), so a
 * failure with -ENOMEM or -EINVAL after many is that limit. Returns 0 with
 * *@out owned by the caller, or a negative errno with @err filled.
 */
RK_API int rk_pd_alloc(struct rk_device *dev, struct rk_error *err, struct rk_pd **out);

/*
 * rk_pd_free - release the PD. Everything registered or connected in it
 * must be gone first; otherwise the kernel keeps it (EBUSY) and a warning
 * is logged. Accepts NULL.
 */
RK_API void rk_pd_free(struct rk_pd *pd);

/* rk_pd_device - the device the PD was allocated on. */
RK_API struct rk_device *rk_pd_device(const struct rk_pd *pd);

/* rk_pd_ibv - the struct ibv_pd (escape hatch for raw verbs; owned by @pd). */
RK_API struct ibv_pd *rk_pd_ibv(const struct rk_pd *pd);

#ifdef __cplusplus
}
#endif

#endif
