/*
 * doctor_peer.c - rk doctor HOST[:PORT]: the control channel to the peer's
 * rk doctor --listen, this side's facts, the exchange, and the comparison
 * of both sides with what to change on which host. The link test itself is
 * doctor_link.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdmakit/explain.h>
#include <rdmakit/oob.h>
#include <rdmakit/version.h>

#include "cli.h"
#include "common/chan.h"
#include "common/tool_error.h"
#include "doctor_peer.h"

/* ---- control channel ----------------------------------------------------- */

int doc_ctl_send(int fd, const struct doc_msg *m, int timeout_ms, struct rk_error *err)
{
	static uint8_t buf[DOC_WIRE_HDR + DOC_WIRE_MAX];
	struct cli_chan ch;
	int n = doc_msg_encode(m, buf, sizeof(buf));

	if (n < 0)
		return cli_fail(err, "rk doctor", -n, "cannot encode the message: %s",
				strerror(-n));
	cli_chan_init(&ch, fd, &doc_frame_fmt);
	return cli_chan_send(&ch, cli_frame_type(buf), buf + DOC_WIRE_HDR,
			     (uint32_t)n - DOC_WIRE_HDR, timeout_ms, err);
}

int doc_ctl_recv(int fd, struct doc_msg *m, int timeout_ms, struct rk_error *err)
{
	struct cli_chan ch;
	struct cli_frame f;
	char why[160];
	int r;

	/* One frame, read no further: a channel of its own for each is enough. */
	cli_chan_init(&ch, fd, &doc_frame_fmt);
	r = cli_chan_recv(&ch, &f, timeout_ms, err);
	if (!r) {
		r = doc_msg_decode(f.data, f.len, m, why, sizeof(why));
		if (!r && (unsigned)m->type != f.type) {
			snprintf(why, sizeof(why), "a frame of type %u holding a \"%s\" message",
				 f.type, doc_msg_type_name(m->type));
			r = -EBADMSG;
		}
		if (r)
			cli_fail(err, "rk doctor", -r, "a bad message: %s", why);
	}
	cli_chan_free(&ch);
	return r;
}

static int addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const void *a = ss->ss_family == AF_INET6
			    ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
			    : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;

	return inet_ntop(ss->ss_family, a, buf, (socklen_t)len) ? 0 : -errno;
}

int doc_sock_addrs(int fd, char *local, char *peer, size_t len)
{
	struct sockaddr_storage a, b;
	socklen_t la = sizeof(a), lb = sizeof(b);

	if (getsockname(fd, (struct sockaddr *)&a, &la) ||
	    getpeername(fd, (struct sockaddr *)&b, &lb))
		return -errno;
	if (addr_str(&a, local, len) || addr_str(&b, peer, len))
		return -EINVAL;
	return 0;
}

/* ---- this side's facts ---------------------------------------------------- */

static void netdev_of(const char *addr, char *ifname, size_t len)
{
	struct ifaddrs *ifa, *i;

	ifname[0] = '\0';
	if (getifaddrs(&ifa))
		return;
	for (i = ifa; i; i = i->ifa_next) {
		struct sockaddr_storage ss = {0};
		char buf[INET6_ADDRSTRLEN];

		if (!i->ifa_addr ||
		    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		memcpy(&ss, i->ifa_addr,
		       i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
							 : sizeof(struct sockaddr_in6));
		if (addr_str(&ss, buf, sizeof(buf)) == 0 && strcmp(buf, addr) == 0) {
			snprintf(ifname, len, "%.*s", (int)(len - 1), i->ifa_name);
			break;
		}
	}
	freeifaddrs(ifa);
}

static int64_t fact_int(const struct doc_report *r, const char *section, const char *key)
{
	struct json_object *s, *v;

	if (json_object_object_get_ex(r->facts, section, &s) &&
	    json_object_object_get_ex(s, key, &v))
		return json_object_get_int64(v);
	return 0;
}

static void copy_lines(const struct doc_report *r, struct doc_facts *f)
{
	size_t n = json_object_array_length(r->checks);

	f->nfail = r->nfail;
	f->nwarn = r->nwarn;
	for (size_t i = 0; i < n && f->nlines < DOC_PEER_LINES; i++) {
		struct json_object *o = json_object_array_get_idx(r->checks, i), *v;
		struct doc_line *l = &f->lines[f->nlines];
		const char *verdict;

		if (!json_object_object_get_ex(o, "verdict", &v))
			continue;
		verdict = json_object_get_string(v);
		if (strcmp(verdict, "fail") != 0 && strcmp(verdict, "warn") != 0)
			continue;
		l->fail = verdict[0] == 'f';
		if (json_object_object_get_ex(o, "check", &v))
			snprintf(l->check, sizeof(l->check), "%.15s", json_object_get_string(v));
		if (json_object_object_get_ex(o, "text", &v))
			snprintf(l->text, sizeof(l->text), "%.255s", json_object_get_string(v));
		if (json_object_object_get_ex(o, "fix", &v))
			snprintf(l->fix, sizeof(l->fix), "%.255s", json_object_get_string(v));
		f->nlines++;
	}
}

int doc_local_facts(const struct doc_report *r, const char *addr, struct doc_facts *f,
		    struct rk_device **dev, struct rk_error *err)
{
	struct rk_device_opts o = {.addr = addr, .gid_index = -1};
	const struct rk_device_info *di;
	struct ibv_port_attr pa;
	struct utsname u;
	char path[128];
	long mtu = 0;
	int e;

	memset(f, 0, sizeof(*f));
	snprintf(f->rk_version, sizeof(f->rk_version), "%.31s", rk_version());
	if (uname(&u) == 0)
		snprintf(f->kernel, sizeof(f->kernel), "%.63s", u.release);
	if (gethostname(f->host, sizeof(f->host) - 1))
		f->host[0] = '\0';
	snprintf(f->addr, sizeof(f->addr), "%.47s", addr);
	f->memlock_soft = fact_int(r, "memlock", "soft");
	f->memlock_hard = fact_int(r, "memlock", "hard");
	f->cap_ipc_lock = (int)fact_int(r, "memlock", "cap_ipc_lock");
	f->gid_index = -1;
	f->port = 1;
	f->active_mtu = f->max_mtu = 256;
	copy_lines(r, f);
	e = rk_device_open(&o, err, dev);
	if (e)
		return e;
	di = rk_device_get_info(*dev);
	snprintf(f->dev, sizeof(f->dev), "%.63s", di->name);
	snprintf(f->link_layer, sizeof(f->link_layer), "%s",
		 di->link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	f->port = di->port;
	f->gid_index = di->gid_index;
	f->roce_v2 = di->gid_roce_v2 ? 1 : 0;
	f->active_mtu = (int)di->active_mtu_bytes;
	f->max_mtu = f->active_mtu;
	if (ibv_query_port(rk_device_context(*dev), di->port, &pa) == 0 && rk_mtu_bytes(pa.max_mtu))
		f->max_mtu = (int)rk_mtu_bytes(pa.max_mtu);
	netdev_of(addr, f->netdev, sizeof(f->netdev));
	if (f->netdev[0]) {
		snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", f->netdev);
		if (doc_read_int(path, &mtu) == 0 && mtu > 0 && mtu <= (1 << 20))
			f->netdev_mtu = (int)mtu;
	}
	return 0;
}

struct json_object *doc_facts_json(const struct doc_facts *f)
{
	struct json_object *o = json_object_new_object(), *lines = json_object_new_array();

	json_object_object_add(o, "rk_version", json_object_new_string(f->rk_version));
	json_object_object_add(o, "host", json_object_new_string(f->host));
	json_object_object_add(o, "kernel", json_object_new_string(f->kernel));
	json_object_object_add(o, "address", json_object_new_string(f->addr));
	json_object_object_add(o, "device", json_object_new_string(f->dev));
	json_object_object_add(o, "port", json_object_new_int(f->port));
	json_object_object_add(o, "link_layer", json_object_new_string(f->link_layer));
	json_object_object_add(o, "netdev", json_object_new_string(f->netdev));
	json_object_object_add(o, "netdev_mtu", json_object_new_int(f->netdev_mtu));
	json_object_object_add(o, "active_mtu", json_object_new_int(f->active_mtu));
	json_object_object_add(o, "max_mtu", json_object_new_int(f->max_mtu));
	json_object_object_add(o, "gid_index", json_object_new_int(f->gid_index));
	json_object_object_add(o, "gid_type",
			       json_object_new_string(f->roce_v2 ? "RoCE v2" : "RoCE v1"));
	json_object_object_add(o, "memlock_soft", json_object_new_int64(f->memlock_soft));
	json_object_object_add(o, "memlock_hard", json_object_new_int64(f->memlock_hard));
	json_object_object_add(o, "cap_ipc_lock", json_object_new_boolean(f->cap_ipc_lock));
	json_object_object_add(o, "failures", json_object_new_int(f->nfail));
	json_object_object_add(o, "warnings", json_object_new_int(f->nwarn));
	for (int i = 0; i < f->nlines; i++) {
		struct json_object *l = json_object_new_object();

		json_object_object_add(l, "check", json_object_new_string(f->lines[i].check));
		json_object_object_add(l, "verdict",
				       json_object_new_string(f->lines[i].fail ? "fail" : "warn"));
		json_object_object_add(l, "text", json_object_new_string(f->lines[i].text));
		json_object_object_add(l, "fix", json_object_new_string(f->lines[i].fix));
		json_object_array_add(lines, l);
	}
	json_object_object_add(o, "lines", lines);
	return o;
}

/* ---- the comparison --------------------------------------------------------- */

static int memlock_enough(const struct doc_facts *f)
{
	return f->memlock_soft < 0 || (uint64_t)f->memlock_soft >= DOC_NEED_COPY || f->cap_ipc_lock;
}

static void fmt_memlock(int64_t v, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "unlimited");
	else
		snprintf(buf, len, "%" PRId64 " KiB", v >> 10);
}

/* The netdev MTU that gives RDMA MTU @mtu: rk doctor's local MTU check rounds the same way. */
static int netdev_mtu_for(int mtu)
{
	return (mtu + 100 + 99) / 100 * 100;
}

static void compare_mtu(struct doc_report *r, const struct doc_facts *me,
			const struct doc_facts *peer, const char *pn)
{
	int path = me->active_mtu < peer->active_mtu ? me->active_mtu : peer->active_mtu;
	const struct doc_facts *lo = me->active_mtu <= peer->active_mtu ? me : peer;
	const struct doc_facts *hi = lo == me ? peer : me;
	const char *lo_name = lo == me ? "this host" : pn;
	char fix[320];
	struct json_object *f = doc_fact(r, "pair");

	json_object_object_add(f, "mtu_both_take", json_object_new_int(path));
	if (me->active_mtu == peer->active_mtu && me->netdev_mtu == peer->netdev_mtu) {
		doc_add(r, DOC_OK, "mtu", NULL,
			"active MTU %d at both ends (netdev MTU %d): path MTU %d", me->active_mtu,
			me->netdev_mtu, path);
		return;
	}
	if (me->active_mtu == peer->active_mtu) {
		doc_add(
		    r, DOC_WARN, "mtu",
		    "set the same netdev MTU on both hosts (and every switch in between)",
		    "active MTU %d at both ends, path MTU %d, but the netdev MTUs differ: %d here, "
		    "%d on %s (IP traffic between them may be dropped)",
		    me->active_mtu, path, me->netdev_mtu, peer->netdev_mtu, pn);
		return;
	}
	snprintf(fix, sizeof(fix),
		 "on %s: sudo ip link set %s mtu %d (as on %s; gives RDMA MTU %d), and every "
		 "switch in between",
		 lo_name, lo->netdev[0] ? lo->netdev : "IFACE",
		 hi->netdev_mtu > netdev_mtu_for(hi->active_mtu) ? hi->netdev_mtu
								 : netdev_mtu_for(hi->active_mtu),
		 lo == me ? pn : "this host", hi->active_mtu);
	json_object_object_add(f, "path_mtu_this_host_connects",
			       json_object_new_int(me->active_mtu));
	json_object_object_add(f, "path_mtu_peer_connects", json_object_new_int(peer->active_mtu));
	/*
	 * rdma_cm on RoCE takes the path MTU from the connecting side's netdev
	 * and the accepting side adopts it: connecting from the larger MTU makes
	 * the smaller side send packets its netdev drops.
	 */
	doc_add(r, me->active_mtu > peer->active_mtu ? DOC_FAIL : DOC_WARN, "mtu", fix,
		"MTU mismatch: active MTU %d here (netdev %s MTU %d), %d on %s (netdev %s MTU %d): "
		"rdma_cm takes the path MTU from the side that connects, so the path MTU is %d "
		"when this host connects and %d when %s does; at %d %s cannot send (its netdev "
		"drops the packets); %d would suit both",
		me->active_mtu, me->netdev[0] ? me->netdev : "?", me->netdev_mtu, peer->active_mtu,
		pn, peer->netdev[0] ? peer->netdev : "?", peer->netdev_mtu, me->active_mtu,
		peer->active_mtu, pn, hi->active_mtu, lo_name, path);
}

void doc_compare(struct doc_report *r, const struct doc_facts *me, const struct doc_facts *peer,
		 const char *pn)
{
	char fix[320], a[32], b[32];

	/* the peer's own findings, with the host to fix them on */
	for (int i = 0; i < peer->nlines; i++) {
		const struct doc_line *l = &peer->lines[i];

		snprintf(fix, sizeof(fix), "on %s: %s", pn,
			 l->fix[0] ? l->fix : "see rk doctor there");
		doc_add(r, l->fail ? DOC_FAIL : DOC_WARN, "peer", fix, "%s: %s: %s", pn, l->check,
			l->text);
	}
	if (peer->nfail + peer->nwarn > peer->nlines)
		doc_add(r, DOC_WARN, "peer", "run rk doctor on the peer for the rest",
			"%s: %d more ! or \u2717 of its own", pn,
			peer->nfail + peer->nwarn - peer->nlines);

	if (strcmp(me->rk_version, peer->rk_version) != 0)
		doc_add(r, DOC_WARN, "version", "install the same rk version on both hosts",
			"rk %s here, %s on %s", me->rk_version, peer->rk_version, pn);
	else
		doc_add(r, DOC_OK, "version", NULL, "rk %s at both ends (kernel %s here, %s on %s)",
			me->rk_version, me->kernel, peer->kernel, pn);

	if (strcmp(me->link_layer, peer->link_layer) != 0) {
		doc_add(r, DOC_FAIL, "device",
			"use devices of the same link layer at both ends (ibv_devinfo: link_layer)",
			"link layer %s here (%s), %s on %s (%s): they cannot talk", me->link_layer,
			me->dev, peer->link_layer, pn, peer->dev);
	} else {
		doc_add(r, DOC_OK, "device", NULL, "%s port %d (%s) here, %s port %d on %s; %s",
			me->dev, me->port, me->addr, peer->dev, peer->port, pn, me->link_layer);
	}

	if (strcmp(me->link_layer, "Ethernet") == 0) {
		if (me->roce_v2 != peer->roce_v2) {
			const char *v1_host = me->roce_v2 ? pn : "this host";

			snprintf(fix, sizeof(fix),
				 "on %s: give its address a RoCE v2 GID (rk doctor there: gid), or "
				 "use the same GID type at both ends",
				 v1_host);
			doc_add(
			    r, DOC_FAIL, "gid", fix,
			    "GID types differ: RoCE %s here (index %d), RoCE %s on %s (index %d): "
			    "the connection request never matches",
			    me->roce_v2 ? "v2" : "v1", me->gid_index, peer->roce_v2 ? "v2" : "v1",
			    pn, peer->gid_index);
		} else {
			doc_add(r, DOC_OK, "gid", NULL,
				"RoCE %s at both ends (GID index %d here, %d on %s)",
				me->roce_v2 ? "v2" : "v1", me->gid_index, peer->gid_index, pn);
		}
	}

	compare_mtu(r, me, peer, pn);

	fmt_memlock(me->memlock_soft, a, sizeof(a));
	fmt_memlock(peer->memlock_soft, b, sizeof(b));
	if (memlock_enough(me) && memlock_enough(peer)) {
		doc_add(r, DOC_OK, "memlock", NULL, "locked-memory limit %s here, %s on %s: enough",
			a, b, pn);
	} else {
		const char *low = memlock_enough(me) ? pn : "this host";

		snprintf(fix, sizeof(fix),
			 "on %s: ulimit -l unlimited (limits.conf '* - memlock unlimited'; "
			 "LimitMEMLOCK=infinity for a service; --ulimit memlock=-1 in a container)",
			 low);
		doc_add(r, DOC_FAIL, "memlock", fix,
			"locked-memory limit %s here, %s on %s: %s cannot pin what rk copy needs "
			"(~10 MiB)",
			a, b, pn, low);
	}
}

/* ---- the client's run --------------------------------------------------------- */

static void explain_errno(struct doc_report *r, int e, const char *op, const char *check)
{
	doc_explain(r, rk_explain_find(RK_EXPLAIN_ERRNO, e, op), check);
}

/* Why the exchange failed, in the words of what came. */
static void exchange_failed(struct doc_report *r, int e, const struct rk_error *err, const char *pn,
			    const char *port)
{
	char fix[768]; /* a host name is up to 255 bytes, and may appear twice */

	snprintf(fix, sizeof(fix),
		 "on %s: rk doctor --listen --port %s (and nothing else on that port)", pn, port);
	switch (e) {
	case -EBADMSG:
	case -EMSGSIZE:
		doc_add(r, DOC_FAIL, "peer", fix, "%s port %s is not an rk doctor --listen: %s", pn,
			port, err->msg);
		break;
	case -EPROTO:
		doc_add(r, DOC_FAIL, "peer", "install the same rk version on both hosts",
			"%s port %s speaks another rk doctor protocol: %s", pn, port, err->msg);
		break;
	case -ETIMEDOUT:
		doc_add(
		    r, DOC_FAIL, "peer", fix,
		    "%s port %s accepted the connection but did not answer: %s (not an rk doctor "
		    "--listen, or a stalled one)",
		    pn, port, err->msg);
		break;
	default:
		doc_add(r, DOC_FAIL, "peer", fix,
			"%s port %s: %s (not an rk doctor --listen, or it refused us)", pn, port,
			err->msg);
		break;
	}
}

static void connect_failed(struct doc_report *r, int e, const struct rk_error *err,
			   const char *host, const char *port, int step_ms)
{
	char fix[768]; /* a host name is up to 255 bytes, and may appear twice */

	if (e == -ECONNREFUSED) {
		snprintf(fix, sizeof(fix), "on %s: rk doctor --listen --port %s", host, port);
		doc_add(r, DOC_FAIL, "peer", fix,
			"nobody listens on %s port %s (connection refused)", host, port);
		return;
	}
	snprintf(fix, sizeof(fix),
		 "ping %s; on %s: rk doctor --listen --port %s, and no firewall dropping TCP %s",
		 host, host, port, port);
	if (e == -ETIMEDOUT)
		doc_add(r, DOC_FAIL, "peer", fix, "no TCP connection to %s port %s within %d ms",
			host, port, step_ms);
	else
		doc_add(r, DOC_FAIL, "peer", fix, "cannot reach %s port %s: %s", host, port,
			rk_error_str(err));
	explain_errno(r, -e, "connect", NULL);
}

/*
 * The hello and the listener's answer, before anything else: the listener
 * tells nothing to a peer that has not said it is rk doctor (with the
 * token, when it asks for one). 0 when welcomed; else the reason is in @r.
 */
static int say_hello(struct doc_report *r, int fd, const char *host, const char *port, int step_ms,
		     const uint8_t *token)
{
	struct doc_msg hi = {.type = DOC_MSG_HELLO}, ans = {0};
	struct rk_error err;
	int e;

	rk_error_clear(&err);
	if (token) {
		hi.has_token = 1;
		memcpy(hi.token, token, DOC_TOKEN_LEN);
	}
	e = doc_ctl_send(fd, &hi, step_ms, &err);
	if (!e)
		e = doc_ctl_recv(fd, &ans, step_ms, &err);
	if (e == -ECONNRESET) {
		char fix[768]; /* a host name is up to 255 bytes, and may appear twice */

		snprintf(fix, sizeof(fix),
			 "on %s: rk doctor --listen --port %s of the same rk version as here", host,
			 port);
		doc_add(
		    r, DOC_FAIL, "peer", fix,
		    "%s port %s closed the connection after our hello: an rk doctor --listen of "
		    "an older protocol, or not rk doctor",
		    host, port);
		return e;
	}
	if (e) {
		exchange_failed(r, e, &err, host, port);
		return e;
	}
	if (ans.type == DOC_MSG_ERROR) {
		doc_add(r, DOC_FAIL, "peer", NULL, "%s refused the test: %s", host, ans.text);
		return -EACCES;
	}
	if (ans.type != DOC_MSG_WELCOME) {
		cli_fail(&err, "rk doctor", EBADMSG, "another message where its welcome belongs");
		exchange_failed(r, -EBADMSG, &err, host, port);
		return -EBADMSG;
	}
	if (token && !ans.checked)
		doc_add(
		    r, DOC_WARN, "token",
		    "start rk doctor --listen there with --token-file, to keep strangers out",
		    "%s does not check tokens (no --token-file there): any rk doctor client may "
		    "use it",
		    host);
	return 0;
}

void doc_peer_run(struct doc_report *r, const char *target, int step_ms, const uint8_t *token)
{
	char host[256], port[16] = DOC_DEFAULT_PORT, local[INET6_ADDRSTRLEN], rip[INET6_ADDRSTRLEN];
	struct rk_device *dev = NULL;
	struct doc_link *link = NULL;
	struct doc_msg me = {.type = DOC_MSG_FACTS}, peer;
	struct rk_error err;
	uint64_t seed = 0;
	int fd, e;

	rk_error_clear(&err);
	if (cli_split_host_port(target, host, sizeof(host), port, sizeof(port))) {
		doc_add(r, DOC_FAIL, "peer", "rk doctor HOST[:PORT]", "bad peer '%s'", target);
		return;
	}
	fd = rk_tcp_connect(host, port, step_ms, &err);
	if (fd < 0) {
		connect_failed(r, fd, &err, host, port, step_ms);
		return;
	}
	if (doc_sock_addrs(fd, local, rip, sizeof(local))) {
		doc_add(r, DOC_FAIL, "peer", NULL, "cannot read the addresses of the connection");
		goto out;
	}
	if (say_hello(r, fd, host, port, step_ms, token))
		goto out;
	e = doc_local_facts(r, local, &me.facts, &dev, &err);
	if (e) {
		doc_add(r, DOC_FAIL, "device", "rk doctor (this host) for the device's state",
			"no usable RDMA device for %s, the address this host reaches %s from: %s",
			local, host, rk_error_str(&err));
		explain_errno(r, -e, err.op, NULL);
		goto out;
	}
	if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		seed = cli_now_ns() ^ ((uint64_t)getpid() << 32);
	e = doc_link_open(dev, 0, local, seed, &me.facts, &err, &link);
	if (e) {
		doc_add(r, DOC_FAIL, "link", NULL, "cannot prepare the link test on %s: %s",
			me.facts.dev, rk_error_str(&err));
		explain_errno(r, -e, err.op, NULL);
		goto out;
	}
	me.facts.step_ms = step_ms;
	e = doc_ctl_send(fd, &me, step_ms, &err);
	if (!e)
		e = doc_ctl_recv(fd, &peer, step_ms, &err);
	if (!e && peer.type == DOC_MSG_ERROR) {
		doc_add(r, DOC_FAIL, "peer", NULL, "%s refused the test: %s", host, peer.text);
		goto out;
	}
	if (!e && peer.type != DOC_MSG_FACTS)
		e = cli_fail(&err, "rk doctor", EBADMSG, "a %s message where its facts belong",
			     peer.type == DOC_MSG_DO ? "do" : "result");
	if (e) {
		exchange_failed(r, e, &err, host, port);
		goto out;
	}
	json_object_object_add(r->facts, "this_side", doc_facts_json(&me.facts));
	json_object_object_add(r->facts, "peer", doc_facts_json(&peer.facts));
	doc_add(r, DOC_OK, "peer", NULL,
		"%s (%s, %s): rk doctor --listen, rk %s, kernel %s, %d \u2717 and %d ! of its own",
		host, peer.facts.host, peer.facts.addr, peer.facts.rk_version, peer.facts.kernel,
		peer.facts.nfail, peer.facts.nwarn);
	doc_compare(r, &me.facts, &peer.facts, host);
	doc_link_client(r, link, fd, &me.facts, &peer.facts, host, step_ms);
out:
	close(fd);
	doc_link_close(link);
	rk_device_close(dev);
}
