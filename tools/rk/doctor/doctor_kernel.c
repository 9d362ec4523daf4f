/*
 * doctor_kernel.c - the kernel side: RDMA devices, their user-space
 * providers, the modules, and the device nodes this user must open.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "doctor.h"

#define SYS_IB "/sys/class/infiniband"

/* A netdev to suggest for Soft-RoCE: the first non-loopback one that is up with IPv4. */
static void suggest_iface(char *out, size_t len)
{
	struct ifaddrs *ifa, *i;

	snprintf(out, len, "IFACE");
	if (getifaddrs(&ifa))
		return;
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
		    !(i->ifa_flags & IFF_LOOPBACK)) {
			snprintf(out, len, "%s", i->ifa_name);
			break;
		}
	freeifaddrs(ifa);
}

/*
 * Whether modprobe can give this kernel module @name: 1 loaded or built in,
 * or listed in its modules.dep; 0 not there, or no /lib/modules for this
 * kernel at all (a container, a kernel booted without its modules: modprobe
 * has nothing to load from); -1 cannot tell.
 */
static int kernel_has_module(const char *name)
{
	static const char *const lists[] = {"modules.dep", "modules.builtin"};
	char path[256], want[64], line[512];
	struct utsname u;

	snprintf(path, sizeof(path), "/sys/module/%s", name);
	if (access(path, F_OK) == 0)
		return 1;
	if (uname(&u))
		return -1;
	snprintf(want, sizeof(want), "/%s.ko", name);
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		FILE *f;

		snprintf(path, sizeof(path), "/lib/modules/%s/%s", u.release, lists[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (strstr(line, want)) {
				fclose(f);
				return 1;
			}
		fclose(f);
	}
	return 0;
}

/*
 * The fix for "no RDMA device" where this kernel has no rdma_rxe: modprobe
 * cannot help, so say what can (a kernel that has it, or the project's
 * sandbox, which boots one under QEMU).
 */
static void no_rxe_fix(char *fix, size_t len)
{
	struct utsname u;

	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "?");
	snprintf(fix, len,
		 "load the NIC's RDMA driver (check dmesg); for Soft-RoCE, modprobe has no "
		 "rdma_rxe for this kernel (%s) here: boot a kernel that has it (Debian's "
		 "does), or run under rdmakit's 'scripts/softroce run -- CMD' (scripts/softroce "
		 "status says which mode it would use)",
		 u.release);
}

/* The netdev behind @dev's port @port: GID 0's, else rxe/siw's "parent". */
static void port_netdev(const char *dev, int port, char *out, size_t len)
{
	char path[512];

	snprintf(path, sizeof(path), SYS_IB "/%s/ports/%d/gid_attrs/ndevs/0", dev, port);
	if (doc_read_file(path, out, len) == 0 && out[0])
		return;
	snprintf(path, sizeof(path), SYS_IB "/%s/parent", dev);
	if (doc_read_file(path, out, len) != 0)
		out[0] = '\0';
}

static void scan_ports(struct doc_report *r, const char *dev)
{
	char path[512];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), SYS_IB "/%s/ports", dev);
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir)) && r->nports < DOC_MAX_PORTS) {
		struct doc_port *p = &r->ports[r->nports];
		char *end;
		long n = strtol(d->d_name, &end, 10);

		if (end == d->d_name || *end || n < 1 || n > 255)
			continue;
		memset(p, 0, sizeof(*p));
		snprintf(p->dev, sizeof(p->dev), "%.63s", dev);
		p->port = (int)n;
		snprintf(path, sizeof(path), SYS_IB "/%s/ports/%ld/link_layer", dev, n);
		doc_read_file(path, p->link_layer, sizeof(p->link_layer));
		if (strcmp(p->link_layer, "Ethernet") == 0)
			port_netdev(dev, p->port, p->netdev, sizeof(p->netdev));
		r->nports++;
	}
	closedir(dir);
}

static int has_provider(struct ibv_device **list, int n, const char *dev)
{
	for (int i = 0; i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), dev) == 0)
			return 1;
	return 0;
}

/* "rdma_rxe" / "siw" for a software device, the kernel driver for hardware. */
static int device_driver(const char *dev, char *out, size_t len)
{
	char path[512], link[512];
	ssize_t n;

	snprintf(path, sizeof(path), SYS_IB "/%s/device/driver", dev);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = '\0';
		snprintf(out, len, "%.63s", strrchr(link, '/') ? strrchr(link, '/') + 1 : link);
		return 0;
	}
	snprintf(path, sizeof(path), SYS_IB "/%s/parent", dev);
	if (access(path, F_OK) == 0 && access("/sys/module/rdma_rxe", F_OK) == 0) {
		snprintf(out, len, "rdma_rxe");
		return 1;
	}
	if (access("/sys/module/siw", F_OK) == 0) {
		snprintf(out, len, "siw");
		return 1;
	}
	snprintf(out, len, "unknown");
	return 0;
}

static void check_devices(struct doc_report *r)
{
	struct json_object *facts = json_object_new_array();
	struct ibv_device **list;
	char iface[IF_NAMESIZE], fix[512];
	struct dirent *d;
	int n = 0, ndev = 0;
	DIR *dir;

	json_object_object_add(r->facts, "devices", facts);
	list = ibv_get_device_list(&n);
	dir = opendir(SYS_IB);
	while (dir && (d = readdir(dir))) {
		struct json_object *o;
		char drv[64];
		int soft;

		if (d->d_name[0] == '.')
			continue;
		ndev++;
		soft = device_driver(d->d_name, drv, sizeof(drv));
		scan_ports(r, d->d_name);
		o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(d->d_name));
		json_object_object_add(o, "driver", json_object_new_string(drv));
		json_object_object_add(
		    o, "soft_roce", json_object_new_boolean(soft && strcmp(drv, "rdma_rxe") == 0));
		json_object_object_add(
		    o, "provider",
		    json_object_new_boolean(list && has_provider(list, n, d->d_name)));
		json_object_array_add(facts, o);
		if (!list || !has_provider(list, n, d->d_name)) {
			doc_add(
			    r, DOC_FAIL, "provider",
			    "apt install ibverbs-providers (rdma-core's user-space drivers)",
			    "%s (kernel driver %s): no user-space provider, verbs cannot open it",
			    d->d_name, drv);
			continue;
		}
		if (soft && strcmp(drv, "rdma_rxe") == 0)
			doc_add(
			    r, DOC_OK, "device", NULL,
			    "%s: Soft-RoCE (rdma_rxe, RDMA in software over %s): real RoCE v2 on "
			    "the wire, but CPU-bound and far below the NIC's speed; right for "
			    "development and tests",
			    d->d_name, r->nports ? r->ports[r->nports - 1].netdev : "?");
		else
			doc_add(r, DOC_OK, "device", NULL, "%s: driver %s, provider present",
				d->d_name, drv);
	}
	if (dir)
		closedir(dir);
	if (list)
		ibv_free_device_list(list);
	if (ndev == 0 && kernel_has_module("rdma_rxe") == 0) {
		no_rxe_fix(fix, sizeof(fix));
		doc_add(r, DOC_FAIL, "device", fix, "no RDMA device (%s is empty or missing)",
			SYS_IB);
	} else if (ndev == 0) {
		suggest_iface(iface, sizeof(iface));
		snprintf(fix, sizeof(fix),
			 "load the NIC's RDMA driver (e.g. modprobe mlx5_ib; check dmesg), or for "
			 "Soft-RoCE: sudo modprobe rdma_rxe && sudo rdma link add rxe0 type rxe "
			 "netdev %s",
			 iface);
		doc_add(r, DOC_FAIL, "device", fix, "no RDMA device (%s is empty or missing)",
			SYS_IB);
	}
}

static void check_modules(struct doc_report *r)
{
	static const char *const mods[] = {"ib_core", "ib_uverbs", "rdma_cm", "rdma_ucm"};
	struct json_object *facts = doc_fact(r, "modules");
	char missing[128] = "", fix[256], path[128];
	size_t len = 0;

	for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++) {
		int here;

		snprintf(path, sizeof(path), "/sys/module/%s", mods[i]);
		here = access(path, F_OK) == 0;
		json_object_object_add(facts, mods[i], json_object_new_boolean(here));
		if (!here)
			len +=
			    (size_t)snprintf(missing + len, sizeof(missing) - len, " %s", mods[i]);
		if (len >= sizeof(missing))
			break;
	}
	if (!missing[0]) {
		doc_add(r, DOC_OK, "modules", NULL, "ib_core, ib_uverbs, rdma_cm, rdma_ucm loaded");
		return;
	}
	if (kernel_has_module("ib_core") == 0)
		snprintf(fix, sizeof(fix),
			 "this kernel has no RDMA modules (no ib_core.ko): boot one built with "
			 "CONFIG_INFINIBAND (Debian's is), or see the device line");
	else
		snprintf(fix, sizeof(fix),
			 "sudo modprobe -a%s (and add them to /etc/modules-load.d/)", missing);
	doc_add(r, DOC_FAIL, "modules", fix, "not loaded:%s", missing);
}

static void check_node(struct doc_report *r, const char *node, const char *what, int *ok)
{
	char fix[256];
	int fd = open(node, O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		doc_add(r, DOC_OK, "devnode", NULL, "%s (%s) opens read-write", node, what);
		return;
	}
	*ok = 0;
	if (errno == EACCES || errno == EPERM) {
		snprintf(fix, sizeof(fix),
			 "ls -l %s: add this user to its group (sudo usermod -aG GROUP $USER) or "
			 "install rdma-core's udev rules (MODE=\"0666\")",
			 node);
		doc_add(r, DOC_FAIL, "devnode", fix, "%s (%s): permission denied for this user",
			node, what);
		return;
	}
	if (access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0)
		snprintf(fix, sizeof(fix),
			 "start the container with --device /dev/infiniband (docker/podman run)");
	else
		snprintf(fix, sizeof(fix), "sudo modprobe %s",
			 strstr(node, "rdma_cm") ? "rdma_ucm" : "ib_uverbs");
	doc_add(r, DOC_FAIL, "devnode", fix, "%s (%s): %s", node, what, strerror(errno));
}

static void check_nodes(struct doc_report *r)
{
	struct dirent *d;
	char node[300];
	int any = 0;
	DIR *dir;

	r->uverbs_ok = 1;
	dir = opendir("/dev/infiniband");
	while (dir && (d = readdir(dir))) {
		if (strncmp(d->d_name, "uverbs", 6) != 0)
			continue;
		any = 1;
		snprintf(node, sizeof(node), "/dev/infiniband/%s", d->d_name);
		check_node(r, node, "verbs", &r->uverbs_ok);
	}
	if (dir)
		closedir(dir);
	if (!any) {
		r->uverbs_ok = 0;
		if (r->nports)
			check_node(r, "/dev/infiniband/uverbs0", "verbs", &r->uverbs_ok);
	}
	if (r->nports || access("/dev/infiniband/rdma_cm", F_OK) == 0) {
		int ok = 1;

		check_node(r, "/dev/infiniband/rdma_cm", "rdma_cm", &ok);
	}
}

void doc_check_kernel(struct doc_report *r)
{
	check_devices(r);
	check_modules(r);
	check_nodes(r);
}
