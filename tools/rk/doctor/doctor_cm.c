/*
 * doctor_cm.c - rdma_cm can bind each address of every RoCE netdev, and the
 * device it binds to is the one behind that netdev. A bind is local only: no
 * packet leaves the host.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdmakit/error.h>

#include "doctor.h"

static int on_rdma_netdev(const struct doc_report *r, const char *ifname)
{
	for (int i = 0; i < r->nports; i++)
		if (strcmp(r->ports[i].netdev, ifname) == 0)
			return 1;
	return 0;
}

static void try_bind(struct doc_report *r, struct rdma_event_channel *ch, struct sockaddr *sa,
		     const char *addr, struct json_object *facts)
{
	struct json_object *o = json_object_new_object();
	struct rdma_cm_id *id = NULL;
	const char *hint;
	int err = 0;

	json_object_object_add(o, "address", json_object_new_string(addr));
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		err = errno;
		hint = rk_errno_hint("rdma_create_id", err);
		doc_add(r, DOC_FAIL, "rdma_cm", hint ? hint : "see rk explain",
			"%s: rdma_create_id: %s", addr, strerror(err));
	} else if (rdma_bind_addr(id, sa)) {
		err = errno;
		hint = rk_errno_hint("rdma_bind_addr", err);
		doc_add(r, DOC_FAIL, "rdma_cm", hint ? hint : "see rk explain",
			"%s: rdma_bind_addr: %s", addr, strerror(err));
	} else {
		const char *dev = id->verbs ? ibv_get_device_name(id->verbs->device) : "?";

		json_object_object_add(o, "device", json_object_new_string(dev));
		doc_add(r, DOC_OK, "rdma_cm", NULL, "%s binds (device %s, port %u)", addr, dev,
			id->port_num);
	}
	json_object_object_add(o, "errno", json_object_new_int(err));
	json_object_array_add(facts, o);
	if (id)
		rdma_destroy_id(id);
}

void doc_check_cm(struct doc_report *r)
{
	struct json_object *facts = json_object_new_array();
	struct rdma_event_channel *ch;
	struct ifaddrs *ifa, *i;
	int any = 0;

	json_object_object_add(r->facts, "rdma_cm", facts);
	if (!r->nports)
		return;
	ch = rdma_create_event_channel();
	if (!ch) {
		int err = errno;
		const char *hint = rk_errno_hint("rdma_create_event_channel", err);

		doc_add(r, DOC_FAIL, "rdma_cm", hint ? hint : "modprobe rdma_ucm",
			"rdma_create_event_channel: %s", strerror(err));
		return;
	}
	if (getifaddrs(&ifa)) {
		rdma_destroy_event_channel(ch);
		doc_add(r, DOC_SKIP, "rdma_cm", NULL, "not checked: getifaddrs failed");
		return;
	}
	for (i = ifa; i; i = i->ifa_next) {
		char addr[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "";
		int fam;

		if (!i->ifa_addr || !on_rdma_netdev(r, i->ifa_name))
			continue;
		fam = i->ifa_addr->sa_family;
		if (fam == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr,
				  addr, sizeof(addr));
		else if (fam == AF_INET6)
			inet_ntop(AF_INET6,
				  &((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr, addr,
				  sizeof(addr));
		else
			continue;
		any = 1;
		try_bind(r, ch, i->ifa_addr, addr, facts);
	}
	freeifaddrs(ifa);
	rdma_destroy_event_channel(ch);
	if (!any)
		doc_add(r, DOC_SKIP, "rdma_cm", NULL,
			"not checked: no address on an RDMA netdev to bind");
}
