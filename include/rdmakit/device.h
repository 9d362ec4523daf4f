/*
 * rdmakit/device.h - an RDMA device, one of its ports, and its protection domain.
 *
 * An rk_device is the root of everything rdmakit creates for a device: the
 * protection domain (PD) inside it owns every memory registration, pool,
 * completion queue and connection made with it, so those must be destroyed
 * before the device is closed.
 *
 * The device is opened through librdmacm's device list, so connections made
 * with rdma_cm (cm.h) and manually (conn.h) share the same verbs context and
 * PD, and memory registered once serves both.
 *
 * Thread-safety: an rk_device may be used from several threads to create
 * objects (verbs serialises that); rk_device_poll_async() must be called from
 * one thread at a time.
 */
#ifndef RDMAKIT_DEVICE_H
#define RDMAKIT_DEVICE_H

#include <stdint.h>

#include <infiniband/verbs.h>

#include <rdmakit/common.h>
#include <rdmakit/error.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rk_device;

struct rk_device_opts {
	const char *name; /* device name ("rxe0", "mlx5_0"); NULL: use @addr */
	const char *addr; /* local IPv4/IPv6 address: the device whose netdev owns it */
	const char *peer; /* neither given: a remote host (name or address); the device
			   * owning the local address the kernel routes to it from */
	uint8_t port;	  /* port number, 0 = 1 */
	int gid_index;	  /* -1 = choose automatically (RoCE v2 IPv4-mapped first) */
};

/* What the rest of the API needs to know about the device and port. */
struct rk_device_info {
	char name[64];
	uint8_t port;
	int link_layer;		 /* IBV_LINK_LAYER_ETHERNET or _INFINIBAND */
	uint16_t lid;		 /* 0 on RoCE */
	int gid_index;		 /* the GID used for connections */
	union ibv_gid gid;	 /* its value */
	int gid_roce_v2;	 /* 1 if the GID is RoCE v2 */
	enum ibv_mtu active_mtu; /* port active MTU (IBV_MTU_256..4096) */
	uint32_t active_mtu_bytes;
	uint32_t max_qp_wr; /* deepest send/receive queue */
	uint32_t max_sge;
	uint32_t max_cqe;
	uint32_t max_qp_rd_atom;      /* RDMA READs a QP may have in flight as responder */
	uint32_t max_qp_init_rd_atom; /* ... as initiator */
	uint64_t max_mr_size;
};

/*
 * rk_device_open - open the device named by @opts->name, or the one whose
 * network interface owns @opts->addr, or the one owning the local address
 * the kernel would use to reach @opts->peer (what rdma_cm will pick when
 * connecting there), or, given none of them, the only device there is;
 * check that the port is ACTIVE, choose the GID index and allocate the PD.
 * On success *@out owns all of that. Returns 0 or a negative errno
 * (-ENODEV: no such device or address, or several devices and nothing to
 * choose by: the message names them; -ENETUNREACH: no route to @peer;
 * -ENETDOWN: port not active). Costs a few syscalls (a name lookup for a
 * @peer given by name); call once per device.
 */
RK_API int rk_device_open(const struct rk_device_opts *opts, struct rk_error *err,
			  struct rk_device **out);

/*
 * rk_device_close - release the PD and the device. Everything created on
 * @dev must have been destroyed first. Drains and acks pending async events.
 * Accepts NULL.
 */
RK_API void rk_device_close(struct rk_device *dev);

/* rk_device_get_info - the device facts; the pointer lives as long as @dev. */
RK_API const struct rk_device_info *rk_device_get_info(const struct rk_device *dev);

/* rk_device_pd - the PD (escape hatch for raw verbs; owned by @dev). */
RK_API struct ibv_pd *rk_device_pd(const struct rk_device *dev);

/* rk_device_context - the verbs context (escape hatch; owned by librdmacm). */
RK_API struct ibv_context *rk_device_context(const struct rk_device *dev);

/*
 * rk_device_async_fd - the file descriptor that becomes readable when the
 * device has an asynchronous event (QP fatal, port error, device fatal).
 * It is non-blocking; add it to your epoll set and call rk_device_poll_async().
 */
RK_API int rk_device_async_fd(const struct rk_device *dev);

struct rk_async_event {
	int type;	      /* enum ibv_event_type */
	const char *type_str; /* ibv_event_type_str(type), static */
	uint32_t qp_num;      /* for QP events, else 0 */
	int port;	      /* for port events, else 0 */
	int fatal;	      /* 1 if the QP / port / device is unusable after it */
};

/*
 * rk_device_poll_async - read one pending async event without blocking, ack
 * it, mark the connection it concerns as failed (QP events), log it, and
 * describe it in *@ev. Returns 1 if an event was read, 0 if none is pending,
 * or a negative errno. Fatal events are also described in @err.
 */
RK_API int rk_device_poll_async(struct rk_device *dev, struct rk_async_event *ev,
				struct rk_error *err);

/*
 * rk_mtu_bytes - the number of bytes of an enum ibv_mtu value (0 if invalid).
 * rk_mtu_from_bytes - the enum ibv_mtu for 256..4096 bytes (0 if invalid).
 */
RK_API uint32_t rk_mtu_bytes(enum ibv_mtu mtu);
RK_API enum ibv_mtu rk_mtu_from_bytes(uint32_t bytes);

#ifdef __cplusplus
}
#endif

#endif
