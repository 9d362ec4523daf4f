/*
 * doctor_port.c - every port: state and physical state, link layer, rate;
 * for RoCE the netdev behind it (up, addresses); the MTU: active vs the
 * port's max vs the netdev's, and the netdev MTU that gives the next step.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "doctor.h"

#define SYS_IB "/sys/class/infiniband"

/*
 * RoCE headers inside the netdev MTU: GRH/IP + UDP + BTH + extended headers +
 * ICRC; the kernel reserves 80 (rxe) to 96 (hardware RoCE) bytes. 100, and a
 * round number above it, always gives the step.
 */
#define ROCE_HDR 100

static int netdev_addrs(const char *ifname, struct json_object *arr)
{
	struct ifaddrs *ifa, *i;
	int n = 0;

	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i; i = i->ifa_next) {
		char buf[INET6_ADDRSTRLEN] = "";

		if (!i->ifa_addr || strcmp(i->ifa_name, ifname) != 0)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr,
				  buf, sizeof(buf));
		else if (i->ifa_addr->sa_family == AF_INET6)
			inet_ntop(AF_INET6,
				  &((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr, buf,
				  sizeof(buf));
		if (!buf[0])
			continue;
		json_object_array_add(arr, json_object_new_string(buf));
		n++;
	}
	freeifaddrs(ifa);
	return n;
}

static void check_netdev(struct doc_report *r, struct doc_port *p, struct json_object *o)
{
	struct json_object *addrs = json_object_new_array();
	char path[256], oper[32], fix[160];
	long flags = 0, mtu = 0;
	int n;

	snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", p->netdev);
	doc_read_file(path, oper, sizeof(oper));
	snprintf(path, sizeof(path), "/sys/class/net/%s/flags", p->netdev);
	doc_read_int(path, &flags);
	snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", p->netdev);
	doc_read_int(path, &mtu);
	n = netdev_addrs(p->netdev, addrs);
	json_object_object_add(o, "netdev", json_object_new_string(p->netdev));
	json_object_object_add(o, "netdev_operstate", json_object_new_string(oper));
	json_object_object_add(o, "netdev_up", json_object_new_boolean((flags & IFF_UP) != 0));
	json_object_object_add(o, "netdev_mtu", json_object_new_int64(mtu));
	json_object_object_add(o, "addresses", addrs);
	if (!(flags & IFF_UP)) {
		snprintf(fix, sizeof(fix), "sudo ip link set %s up", p->netdev);
		doc_add(r, DOC_FAIL, "netdev", fix, "%s (under %s port %d) is DOWN", p->netdev,
			p->dev, p->port);
	} else if (n == 0) {
		snprintf(fix, sizeof(fix), "sudo ip addr add ADDR/PREFIX dev %s", p->netdev);
		doc_add(r, DOC_FAIL, "netdev", fix,
			"%s (under %s port %d) has no IP address: rdma_cm cannot use it", p->netdev,
			p->dev, p->port);
	} else {
		doc_add(r, DOC_OK, "netdev", NULL, "%s is up (%s), %d address%s, MTU %ld",
			p->netdev, oper, n, n == 1 ? "" : "es", mtu);
	}
}

static void check_mtu(struct doc_report *r, struct doc_port *p, struct json_object *o)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct ibv_context *ctx = NULL;
	char path[256], fix[256];
	long nmtu = 0;
	int n = 0, act, max, next;

	if (!r->uverbs_ok) {
		doc_add(
		    r, DOC_SKIP, "mtu", NULL,
		    "%s port %d: not checked: needs read-write access to /dev/infiniband/uverbs*",
		    p->dev, p->port);
		return;
	}
	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n && !ctx; i++)
		if (strcmp(ibv_get_device_name(list[i]), p->dev) == 0)
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx || ibv_query_port(ctx, (uint8_t)p->port, &pa)) {
		doc_add(r, DOC_SKIP, "mtu", NULL, "%s port %d: not checked: cannot open the device",
			p->dev, p->port);
		if (ctx)
			ibv_close_device(ctx);
		return;
	}
	ibv_close_device(ctx);
	act = 128 << pa.active_mtu;
	max = 128 << pa.max_mtu;
	json_object_object_add(o, "active_mtu", json_object_new_int(act));
	json_object_object_add(o, "max_mtu", json_object_new_int(max));
	if (act >= max) {
		doc_add(r, DOC_OK, "mtu", NULL, "%s port %d: active MTU %d = the port's max",
			p->dev, p->port, act);
		return;
	}
	next = act * 2;
	if (!p->netdev[0]) {
		doc_add(r, DOC_WARN, "mtu", "check the subnet manager's and the switches' MTU",
			"%s port %d: active MTU %d, the port can do %d", p->dev, p->port, act, max);
		return;
	}
	snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", p->netdev);
	doc_read_int(path, &nmtu);
	/* round the netdev MTU up to a hundred above the RDMA MTU plus headers */
	snprintf(fix, sizeof(fix),
		 "sudo ip link set %s mtu %d (gives RDMA MTU %d; %d for %d) - on both hosts and "
		 "every switch in between",
		 p->netdev, (next + ROCE_HDR + 99) / 100 * 100, next,
		 (max + ROCE_HDR + 99) / 100 * 100, max);
	doc_add(r, DOC_WARN, "mtu", fix,
		"%s port %d: active MTU %d of max %d: netdev %s MTU %ld is the limit (larger "
		"messages are split into more packets)",
		p->dev, p->port, act, max, p->netdev, nmtu);
}

/* sysfs says "4: ACTIVE": keep the name. */
static void strip_number(char *s)
{
	const char *colon = strstr(s, ": ");

	if (colon)
		memmove(s, colon + 2, strlen(colon + 2) + 1);
}

void doc_check_ports(struct doc_report *r)
{
	struct json_object *facts = json_object_new_array();

	json_object_object_add(r->facts, "ports", facts);
	for (int i = 0; i < r->nports; i++) {
		struct doc_port *p = &r->ports[i];
		struct json_object *o = json_object_new_object();
		char path[256], state[64] = "", phys[64] = "", rate[64] = "", fix[160];

		snprintf(path, sizeof(path), SYS_IB "/%s/ports/%d/state", p->dev, p->port);
		doc_read_file(path, state, sizeof(state));
		snprintf(path, sizeof(path), SYS_IB "/%s/ports/%d/phys_state", p->dev, p->port);
		doc_read_file(path, phys, sizeof(phys));
		snprintf(path, sizeof(path), SYS_IB "/%s/ports/%d/rate", p->dev, p->port);
		doc_read_file(path, rate, sizeof(rate));
		p->active = strstr(state, "ACTIVE") != NULL;
		strip_number(state);
		strip_number(phys);
		json_object_object_add(o, "device", json_object_new_string(p->dev));
		json_object_object_add(o, "port", json_object_new_int(p->port));
		json_object_object_add(o, "state", json_object_new_string(state));
		json_object_object_add(o, "phys_state", json_object_new_string(phys));
		json_object_object_add(o, "link_layer", json_object_new_string(p->link_layer));
		json_object_object_add(o, "rate", json_object_new_string(rate));
		json_object_array_add(facts, o);
		if (p->active) {
			doc_add(r, DOC_OK, "port", NULL, "%s port %d: %s, phys %s, %s, %s", p->dev,
				p->port, state, phys, p->link_layer,
				rate[0] ? rate : "rate unknown");
		} else {
			if (p->netdev[0])
				snprintf(
				    fix, sizeof(fix),
				    "sudo ip link set %s up; check its cable / carrier (ip link "
				    "show %s)",
				    p->netdev, p->netdev);
			else
				snprintf(
				    fix, sizeof(fix),
				    "check the cable; INIT means no subnet manager: run opensm "
				    "on the fabric");
			doc_add(r, DOC_FAIL, "port", fix, "%s port %d: state %s, phys %s (%s)",
				p->dev, p->port, state[0] ? state : "unknown", phys, p->link_layer);
		}
		if (p->netdev[0])
			check_netdev(r, p, o);
		check_mtu(r, p, o);
	}
}
