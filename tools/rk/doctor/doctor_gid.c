/*
 * doctor_gid.c - the GID table of every RoCE port, with types, and for each
 * address of the port's netdev the GID index rdma_cm will use: the entry
 * whose GID is that address (IPv4-mapped for IPv4) with RoCE v2, the
 * kernel's default RoCE mode for rdma_cm. An address with only a v1 GID, or
 * none, gets a "!": connections from it fail or mismatch a v2 peer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"

#define SYS_IB	 "/sys/class/infiniband"
#define GID_SCAN 256 /* entries looked at per port: the filled ones come first */

struct gid {
	struct in6_addr gid;
	int index;
	int v2;
	char ndev[IF_NAMESIZE];
};

static int read_gids(const struct doc_port *p, struct gid *out, int max, struct json_object *arr)
{
	int n = 0;

	for (int i = 0; i < GID_SCAN && n < max; i++) {
		char path[256], val[64], type[32] = "";
		struct json_object *o;
		struct in6_addr a;
		static const struct in6_addr zero;

		snprintf(path, sizeof(path), SYS_IB "/%s/ports/%d/gids/%d", p->dev, p->port, i);
		if (doc_read_file(path, val, sizeof(val)) == -ENOENT)
			break;
		if (inet_pton(AF_INET6, val, &a) != 1 || memcmp(&a, &zero, sizeof(a)) == 0)
			continue;
		snprintf(path, sizeof(path), SYS_IB "/%s/ports/%d/gid_attrs/types/%d", p->dev,
			 p->port, i);
		if (doc_read_file(path, type, sizeof(type)))
			continue; /* an entry being replaced */
		out[n].gid = a;
		out[n].index = i;
		out[n].v2 = strstr(type, "v2") != NULL;
		snprintf(path, sizeof(path), SYS_IB "/%s/ports/%d/gid_attrs/ndevs/%d", p->dev,
			 p->port, i);
		doc_read_file(path, out[n].ndev, sizeof(out[n].ndev));
		inet_ntop(AF_INET6, &a, val, sizeof(val));
		o = json_object_new_object();
		json_object_object_add(o, "index", json_object_new_int(i));
		json_object_object_add(o, "gid", json_object_new_string(val));
		json_object_object_add(o, "type",
				       json_object_new_string(out[n].v2 ? "RoCE v2" : "RoCE v1"));
		json_object_object_add(
		    o, "kind",
		    json_object_new_string(IN6_IS_ADDR_V4MAPPED(&a) ? "IPv4-mapped" : "IPv6"));
		json_object_object_add(o, "netdev", json_object_new_string(out[n].ndev));
		json_object_array_add(arr, o);
		n++;
	}
	return n;
}

static void check_port(struct doc_report *r, const struct doc_port *p, struct json_object *facts)
{
	struct json_object *port = json_object_new_object(), *table = json_object_new_array();
	struct json_object *use = json_object_new_array();
	struct gid g[64];
	struct ifaddrs *ifa, *i;
	char key[96];
	int n, naddr = 0;

	snprintf(key, sizeof(key), "%s/%d", p->dev, p->port);
	json_object_object_add(facts, key, port);
	json_object_object_add(port, "table", table);
	json_object_object_add(port, "rdma_cm", use);
	n = read_gids(p, g, (int)(sizeof(g) / sizeof(g[0])), table);
	if (getifaddrs(&ifa)) {
		doc_add(r, DOC_SKIP, "gid", NULL, "%s: not checked: getifaddrs failed", key);
		return;
	}
	for (i = ifa; i; i = i->ifa_next) {
		char addr[INET6_ADDRSTRLEN] = "", line[160] = "";
		struct in6_addr want;
		struct json_object *o;
		int v1 = -1, v2 = -1;

		if (!i->ifa_addr || strcmp(i->ifa_name, p->netdev) != 0)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			const struct sockaddr_in *s = (const void *)i->ifa_addr;

			memset(&want, 0, sizeof(want));
			want.s6_addr[10] = want.s6_addr[11] = 0xff;
			memcpy(&want.s6_addr[12], &s->sin_addr, 4);
			inet_ntop(AF_INET, &s->sin_addr, addr, sizeof(addr));
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			want = ((const struct sockaddr_in6 *)(const void *)i->ifa_addr)->sin6_addr;
			inet_ntop(AF_INET6, &want, addr, sizeof(addr));
		} else {
			continue;
		}
		naddr++;
		for (int k = 0; k < n; k++)
			if (memcmp(&g[k].gid, &want, sizeof(want)) == 0) {
				if (g[k].v2 && v2 < 0)
					v2 = g[k].index;
				if (!g[k].v2 && v1 < 0)
					v1 = g[k].index;
			}
		o = json_object_new_object();
		json_object_object_add(o, "address", json_object_new_string(addr));
		json_object_object_add(o, "gid_index_v2", json_object_new_int(v2));
		json_object_object_add(o, "gid_index_v1", json_object_new_int(v1));
		json_object_array_add(use, o);
		if (v2 >= 0) {
			if (v1 >= 0)
				snprintf(line, sizeof(line), " (v1 at %d)", v1);
			doc_add(r, DOC_OK, "gid", NULL, "%s: %s uses GID index %d (RoCE v2)%s", key,
				addr, v2, line);
		} else if (v1 >= 0) {
			doc_add(
			    r, DOC_WARN, "gid",
			    "peers must use RoCE v1 too; enable v2: echo 'RoCE v2' > "
			    "/sys/kernel/config/rdma_cm/DEV/ports/N/default_roce_mode (configfs)",
			    "%s: %s has only a RoCE v1 GID (index %d): a v2 peer cannot talk to it",
			    key, addr, v1);
		} else {
			doc_add(
			    r, DOC_WARN, "gid",
			    "re-add the address, or recreate the device (rdma link delete / add)",
			    "%s: %s has no GID: rdma_cm cannot use this address", key, addr);
		}
	}
	freeifaddrs(ifa);
	if (!naddr)
		doc_add(r, DOC_SKIP, "gid", NULL, "%s: %d GIDs; no address on %s to map", key, n,
			p->netdev[0] ? p->netdev : "(no netdev)");
}

void doc_check_gids(struct doc_report *r)
{
	struct json_object *facts = doc_fact(r, "gids");

	for (int i = 0; i < r->nports; i++)
		if (r->ports[i].netdev[0])
			check_port(r, &r->ports[i], facts);
}
