/*
 * device.c - open a device by name, by local address or by the route to a
 * peer, check the port, choose the GID, allocate the PD.
 *
 * The device comes from librdmacm's list (rdma_get_devices) rather than
 * ibv_open_device, because rdma_cm ids are bound to librdmacm's contexts:
 * a PD from another context could not be used with them.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "rk_internal.h"

uint32_t rk_mtu_bytes(enum ibv_mtu mtu)
{
	switch (mtu) {
	case IBV_MTU_256:
		return 256;
	case IBV_MTU_512:
		return 512;
	case IBV_MTU_1024:
		return 1024;
	case IBV_MTU_2048:
		return 2048;
	case IBV_MTU_4096:
		return 4096;
	}
	return 0;
}

enum ibv_mtu rk_mtu_from_bytes(uint32_t bytes)
{
	for (int m = IBV_MTU_256; m <= IBV_MTU_4096; m++)
		if (rk_mtu_bytes((enum ibv_mtu)m) == bytes)
			return (enum ibv_mtu)m;
	return (enum ibv_mtu)0;
}

/*
 * The device (and port) whose netdev owns @addr: binding an rdma_cm id to
 * the address makes the kernel answer exactly that question.
 */
static int context_for_addr(const char *addr, struct ibv_context **ctx, uint8_t *port,
			    struct rk_error *err)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE}, *ai = NULL;
	struct rdma_cm_id *id = NULL;
	int r;

	r = getaddrinfo(addr, NULL, &hints, &ai);
	if (r)
		return rk__err_gai(err, r, "'%s'", addr);
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
		r = rk__err_sys(err, "rdma_create_id", NULL);
		freeaddrinfo(ai);
		return r;
	}
	if (rdma_bind_addr(id, ai->ai_addr)) {
		r = rk__err_sys(err, "rdma_bind_addr", "'%s'", addr);
		goto out;
	}
	if (!id->verbs) {
		r = rk__err_set(err, ENODEV, "rdma_bind_addr", "'%s' is on no RDMA device", addr);
		goto out;
	}
	*ctx = id->verbs;
	*port = id->port_num;
	r = 0;
out:
	if (rdma_destroy_id(id))
		rk_warn("rdma_destroy_id: %s", strerror(errno));
	freeaddrinfo(ai);
	return r;
}

/*
 * The local address the kernel would use to reach @peer, into @out:
 * connect() on a UDP socket only consults the routing table; it sends
 * nothing.
 */
static int route_source(const char *peer, char *out, size_t len, struct rk_error *err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const void *a;
	int fd, r;

	r = getaddrinfo(peer, "9", &hints, &ai);
	if (r)
		return rk__err_gai(err, r, "'%s'", peer);
	fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = rk__err_sys(err, "socket", NULL);
		goto out;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		r = rk__err_sys(err, "connect", "no route to '%s'", peer);
		goto out;
	}
	a = ss.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
				     : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
	r = inet_ntop(ss.ss_family, a, out, (socklen_t)len) ? 0
							    : rk__err_sys(err, "inet_ntop", NULL);
out:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return r;
}

static int is_ipv4_mapped(const uint8_t *g)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(g, prefix, sizeof(prefix)) == 0;
}

static int is_zero(const uint8_t *g)
{
	static const uint8_t zero[16];

	return memcmp(g, zero, 16) == 0;
}

/*
 * RoCE v2 with an IPv4-mapped address routes over IPv4 like rdma_cm does;
 * link-local GIDs only work on one segment. Prefer what matches @want.
 */
static int gid_score(const struct ibv_gid_entry *e, const struct addrinfo *want)
{
	const uint8_t *g = e->gid.raw;
	int score = 1;

	if (is_zero(g))
		return -1;
	if (e->gid_type == IBV_GID_TYPE_ROCE_V2)
		score += 100;
	if (is_ipv4_mapped(g))
		score += 50;
	if (!(g[0] == 0xfe && (g[1] & 0xc0) == 0x80))
		score += 20;
	if (want && want->ai_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)want->ai_addr;

		if (is_ipv4_mapped(g) && memcmp(g + 12, &s->sin_addr, 4) == 0)
			score += 1000;
	} else if (want && want->ai_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)want->ai_addr;

		if (memcmp(g, &s->sin6_addr, 16) == 0)
			score += 1000;
	}
	return score;
}

/*
 * The port's valid GIDs, in one call: the table of every port at once
 * (ibv_query_gid_table), or, where the kernel lacks that, one query a slot.
 * A slot at a time costs a system call each, and rxe's table has 1,024
 * slots: 1.8 s of every device open under emulation. Returns the count
 * (>= 0) in *@out (malloc'd), or -1 when out of memory.
 */
static ssize_t port_gids(struct rk_device *dev, int tbl_len, struct ibv_gid_entry **out)
{
	size_t max = (size_t)tbl_len * (dev->attr.phys_port_cnt ? dev->attr.phys_port_cnt : 1);
	struct ibv_gid_entry *e = calloc(max ? max : 1, sizeof(*e));
	ssize_t n, kept = 0;

	*out = e;
	if (!e)
		return -1;
	n = ibv_query_gid_table(dev->ctx, e, max, 0);
	if (n < 0) { /* not supported here: slot by slot */
		for (int i = 0; i < tbl_len; i++)
			if (!ibv_query_gid_ex(dev->ctx, dev->info.port, (uint32_t)i, &e[kept], 0))
				kept++;
		return kept;
	}
	for (ssize_t i = 0; i < n; i++)
		if (e[i].port_num == dev->info.port)
			e[kept++] = e[i];
	return kept;
}

static int choose_gid(struct rk_device *dev, int tbl_len, const char *addr, struct rk_error *err)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST}, *want = NULL;
	struct rk_device_info *in = &dev->info;
	int best = -1, best_score = -1;

	if (in->link_layer != IBV_LINK_LAYER_ETHERNET) {
		best = 0; /* InfiniBand: GID 0 is the port GID */
	} else {
		struct ibv_gid_entry *gids;
		ssize_t n = port_gids(dev, tbl_len, &gids);

		if (n < 0)
			return rk__err_set(err, ENOMEM, "rk_device_open", "out of memory");
		if (addr && getaddrinfo(addr, NULL, &hints, &want))
			want = NULL;
		for (ssize_t i = 0; i < n; i++) {
			int s = gid_score(&gids[i], want);

			if (s > best_score) {
				best_score = s;
				best = (int)gids[i].gid_index;
			}
		}
		free(gids);
		if (want)
			freeaddrinfo(want);
		if (best < 0)
			return rk__err_set(err, ENODEV, "ibv_query_gid_ex",
					   "port %u of %s has no usable GID", in->port, in->name);
	}
	in->gid_index = best;
	return 0;
}

static int fill_gid(struct rk_device *dev, struct rk_error *err)
{
	struct rk_device_info *in = &dev->info;
	struct ibv_gid_entry e;
	int r;

	r = ibv_query_gid_ex(dev->ctx, in->port, (uint32_t)in->gid_index, &e, 0);
	if (r)
		return rk__err_ret(err, r, "ibv_query_gid_ex", "%s port %u index %d", in->name,
				   in->port, in->gid_index);
	in->gid = e.gid;
	in->gid_roce_v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
	return 0;
}

static int find_context(struct rk_device *dev, int n, const struct rk_device_opts *o, uint8_t *port,
			struct rk_error *err)
{
	struct ibv_context *want = NULL;
	int r;

	if (!o->name && o->addr) {
		r = context_for_addr(o->addr, &want, port, err);
		if (r)
			return r;
	}
	if (!o->name && !o->addr && n > 1) { /* nothing decides: never a silent first pick */
		char names[160] = "";
		size_t len = 0;

		for (int i = 0; i < n && len < sizeof(names); i++)
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
						i ? ", " : "",
						ibv_get_device_name(dev->list[i]->device));
		return rk__err_set(
		    err, ENODEV, "rk_device_open",
		    "%d RDMA devices (%s) and nothing to choose by: give a device name, "
		    "a local address or the peer",
		    n, names);
	}
	for (int i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(dev->list[i]->device);

		if ((o->name && strcmp(name, o->name) == 0) || (!o->name && want == dev->list[i]) ||
		    (!o->name && !o->addr)) {
			dev->ctx = dev->list[i];
			return 0;
		}
	}
	if (o->name)
		return rk__err_set(err, ENODEV, "rk_device_open", "no RDMA device named '%s'",
				   o->name);
	return rk__err_set(err, ENODEV, "rk_device_open", "no RDMA device owns '%s'",
			   o->addr ? o->addr : "?");
}

static int query_port(struct rk_device *dev, int gid_index, const char *addr, struct rk_error *err)
{
	struct rk_device_info *in = &dev->info;
	struct ibv_port_attr pa;
	int r;

	r = ibv_query_device(dev->ctx, &dev->attr);
	if (r)
		return rk__err_ret(err, r, "ibv_query_device", "%s", in->name);
	if (in->port < 1 || in->port > dev->attr.phys_port_cnt)
		return rk__err_set(err, EINVAL, "rk_device_open", "%s has no port %u", in->name,
				   in->port);
	r = ibv_query_port(dev->ctx, in->port, &pa);
	if (r)
		return rk__err_ret(err, r, "ibv_query_port", "%s port %u", in->name, in->port);
	if (pa.state != IBV_PORT_ACTIVE)
		return rk__err_set(err, ENETDOWN, "ibv_query_port", "%s port %u is %s", in->name,
				   in->port, ibv_port_state_str(pa.state));
	in->link_layer = pa.link_layer;
	in->lid = pa.lid;
	in->active_mtu = pa.active_mtu;
	in->active_mtu_bytes = rk_mtu_bytes(pa.active_mtu);
	in->max_qp_wr = (uint32_t)dev->attr.max_qp_wr;
	in->max_sge = (uint32_t)dev->attr.max_sge;
	in->max_cqe = (uint32_t)dev->attr.max_cqe;
	in->max_qp_rd_atom = (uint32_t)dev->attr.max_qp_rd_atom;
	in->max_qp_init_rd_atom = (uint32_t)dev->attr.max_qp_init_rd_atom;
	in->max_mr_size = dev->attr.max_mr_size;
	if (gid_index >= 0) {
		if (gid_index >= pa.gid_tbl_len)
			return rk__err_set(err, EINVAL, "rk_device_open",
					   "GID index %d out of range (table has %d)", gid_index,
					   pa.gid_tbl_len);
		in->gid_index = gid_index;
	} else {
		r = choose_gid(dev, pa.gid_tbl_len, addr, err);
		if (r)
			return r;
	}
	return fill_gid(dev, err);
}

int rk_device_open(const struct rk_device_opts *opts, struct rk_error *err, struct rk_device **out)
{
	struct rk_device_opts none = {.gid_index = -1}, routed;
	const struct rk_device_opts *o = opts ? opts : &none;
	char src[INET6_ADDRSTRLEN];
	struct rk_device *dev;
	uint8_t port = 0;
	int n = 0, r;

	*out = NULL;
	if (!o->name && !o->addr && o->peer) {
		/* By route: from here on, the device that owns the source address. */
		r = route_source(o->peer, src, sizeof(src), err);
		if (r)
			return r;
		routed = *o;
		routed.addr = src;
		o = &routed;
	}
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return rk__err_set(err, ENOMEM, "rk_device_open", NULL);
	dev->list = rdma_get_devices(&n);
	if (!dev->list || n == 0) {
		r = rk__err_set(err, ENODEV, "rdma_get_devices", "no RDMA device");
		goto fail;
	}
	r = find_context(dev, n, o, &port, err);
	if (r || !dev->ctx) {
		r = rk__fail(r);
		goto fail;
	}
	snprintf(dev->info.name, sizeof(dev->info.name), "%s",
		 ibv_get_device_name(dev->ctx->device));
	dev->info.port = o->port ? o->port : (port ? port : 1);
	r = query_port(dev, o->gid_index, o->addr, err);
	if (r)
		goto fail;
	dev->pd = ibv_alloc_pd(dev->ctx);
	if (!dev->pd) {
		r = rk__err_sys(err, "ibv_alloc_pd", "%s", dev->info.name);
		goto fail;
	}
	if (rk__set_nonblock(dev->ctx->async_fd)) {
		r = rk__err_sys(err, "fcntl", "async fd of %s", dev->info.name);
		goto fail;
	}
	rk_dbg("device %s port %u: mtu %u, gid index %d%s, lid %u", dev->info.name, dev->info.port,
	       dev->info.active_mtu_bytes, dev->info.gid_index,
	       dev->info.gid_roce_v2 ? " (RoCE v2)" : "", dev->info.lid);
	*out = dev;
	return 0;
fail:
	rk_device_close(dev);
	return r;
}

void rk_device_close(struct rk_device *dev)
{
	if (!dev)
		return;
	if (dev->ctx)
		rk__device_drain_async(dev);
	if (dev->pd && ibv_dealloc_pd(dev->pd))
		rk_warn("ibv_dealloc_pd: %s (something created on the device is still alive)",
			strerror(errno));
	if (dev->list)
		rdma_free_devices(dev->list);
	free(dev);
}

const struct rk_device_info *rk_device_get_info(const struct rk_device *dev)
{
	return &dev->info;
}

struct ibv_pd *rk_device_pd(const struct rk_device *dev)
{
	return dev->pd;
}

struct ibv_context *rk_device_context(const struct rk_device *dev)
{
	return dev->ctx;
}
