/*
 * matrix_worker.c - what every rank does, rank 0 included: join rank 0,
 * run the pairs it is given, report each one's three legs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdmakit/oob.h>

#include "cli.h"
#include "common/deadline.h"
#include "matrix_coord.h"
#include "matrix_hello.h"
#include "matrix_pair.h"
#include "matrix_wire.h"

/* Rank 0 may not listen yet (it is starting, or its host is slower): try until --wait. */
static int join(const struct mx_opts *o, const char *host, const char *port, struct rk_error *err)
{
	uint64_t deadline = cli_now_ns() + (uint64_t)o->wait_s * 1000000000ull;

	for (;;) {
		uint64_t now = cli_now_ns();
		struct timespec pause = {0, 200000000};
		int fd;

		if (now >= deadline)
			return mx_fail(err, ECONNREFUSED,
				       "rendezvous: rank 0 did not accept on %s port %s for %u s",
				       host, port, o->wait_s);
		fd = rk_tcp_connect(host, port, cli_deadline_ms_left(deadline), err);
		if (fd != -ECONNREFUSED && fd != -EHOSTUNREACH && fd != -ENETUNREACH)
			return fd;
		nanosleep(&pause, NULL);
	}
}

/* The local address of the connection to rank 0: the one the other ranks can reach. */
static int local_addr(int fd, char *out, size_t len, struct rk_error *err)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const void *a;

	if (getsockname(fd, (struct sockaddr *)&ss, &sl))
		return mx_fail(err, errno, "getsockname: %s", strerror(errno));
	if (ss.ss_family == AF_INET6)
		a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
	else
		a = &((struct sockaddr_in *)&ss)->sin_addr;
	if (!inet_ntop(ss.ss_family, a, out, (socklen_t)len))
		return mx_fail(err, errno, "inet_ntop: %s", strerror(errno));
	return 0;
}

static json_object *hello(const struct mx_launch *la, const char *addr, json_object *params)
{
	json_object *o = json_object_new_object();
	char host[64] = "";

	gethostname(host, sizeof(host) - 1);
	json_object_object_add(o, "t", json_object_new_string("hello"));
	json_object_object_add(o, "proto", json_object_new_int64(MX_PROTO));
	json_object_object_add(o, "rank", json_object_new_int64(la->rank));
	json_object_object_add(o, "size", json_object_new_int64(la->size));
	json_object_object_add(o, "host", json_object_new_string(host));
	json_object_object_add(o, "addr", json_object_new_string(addr));
	json_object_object_add(o, "params", json_object_get(params));
	return o;
}

static json_object *result(uint32_t round, const struct mx_leg_out *legs)
{
	json_object *o = json_object_new_object(), *arr = json_object_new_array();
	const char *dev = "";

	json_object_object_add(o, "t", json_object_new_string("result"));
	json_object_object_add(o, "round", json_object_new_int64(round));
	for (int i = 0; i < MX_LEGS; i++) {
		json_object *leg = json_object_new_object(), *v = json_object_new_array();

		if (legs[i].dev[0])
			dev = legs[i].dev;
		json_object_object_add(leg, "status", json_object_new_int(legs[i].status));
		json_object_array_add(v, json_object_new_double(legs[i].v[0]));
		json_object_array_add(v, json_object_new_double(legs[i].v[1]));
		json_object_object_add(leg, "v", v);
		json_object_object_add(leg, "why", json_object_new_string(legs[i].why));
		json_object_array_add(arr, leg);
	}
	json_object_object_add(o, "dev", json_object_new_string(dev));
	json_object_object_add(o, "legs", arr);
	return o;
}

static int run_pair(const struct mx_opts *o, const struct mx_launch *la, const char *my_addr,
		    int fd, json_object *m, struct rk_error *err)
{
	struct mx_leg_out legs[MX_LEGS];
	uint8_t keys[MX_LEGS * MX_KEY_LEN];
	char peer_addr[64], hex[2 * sizeof(keys) + 2];
	uint32_t round, peer, which;
	json_object *res;
	int r;

	if (mx_get_u32(m, "round", UINT32_MAX, &round) ||
	    mx_get_u32(m, "peer", la->size - 1, &peer) || peer == la->rank ||
	    mx_get_str(m, "peer_addr", peer_addr, sizeof(peer_addr)) ||
	    mx_get_u32(m, "legs", MX_ALL_LEGS, &which) || mx_get_str(m, "keys", hex, sizeof(hex)) ||
	    cli_unhex(hex, strlen(hex), keys, sizeof(keys)) != (int)sizeof(keys))
		return mx_fail(err, EPROTO, "rendezvous: a malformed pair from rank 0");
	memset(hex, 0, sizeof(hex));
	for (int leg = 0; leg < MX_LEGS; leg++) {
		if (which & (1u << leg)) {
			mx_run_leg(o, leg, la->rank, my_addr, peer, peer_addr,
				   keys + (size_t)leg * MX_KEY_LEN, &legs[leg]);
			continue;
		}
		memset(&legs[leg], 0, sizeof(legs[leg]));
		legs[leg].status = -ENODATA; /* a retest of other legs: not asked for */
		snprintf(legs[leg].why, sizeof(legs[leg].why), "not asked for");
	}
	memset(keys, 0, sizeof(keys));
	res = result(round, legs);
	r = mx_wire_send(fd, res, 10000, err);
	json_object_put(res);
	return r;
}

int mx_worker_run(const struct mx_opts *o, const struct mx_auth *auth, const struct mx_launch *la,
		  const char *rdv_port, json_object *params, struct rk_error *err)
{
	/* Rank 0 waits up to --wait for everyone, then each round takes up to a pair's budget. */
	int idle_ms = (int)(o->wait_s * 1000 + 2 * mx_pair_budget_ms(o) + 30000);
	char addr[64], proof_why[300];
	json_object *m = NULL;
	int fd, r, answered = 0;

	fd = join(o, la->rdv_host, rdv_port, err);
	if (fd < 0)
		return fd;
	if (o->addr)
		snprintf(addr, sizeof(addr), "%s", o->addr);
	else if ((r = local_addr(fd, addr, sizeof(addr), err)))
		goto out;
	m = hello(la, addr, params);
	if (mx_auth_prove(auth, m, la->rank, la->size, params, proof_why, sizeof(proof_why)))
		r = mx_fail(err, EACCES, "rendezvous: %s", proof_why);
	else
		r = mx_wire_send(fd, m, 10000, err);
	json_object_put(m);
	m = NULL;
	while (!r) {
		const char *t;

		r = mx_wire_recv(fd, &m, idle_ms, err);
		if (r) {
			/* An older rank 0 drops today's frames unanswered. */
			if (r == -ECONNRESET)
				r = mx_fail(err, ECONNRESET,
					    "rendezvous: rank 0 closed the connection (%s)",
					    answered
						? "it failed or died"
						: "unanswered: it failed, or it is an rk matrix of "
						  "another version");
			break;
		}
		answered = 1;
		t = mx_type(m);
		if (!strcmp(t, "refuse")) {
			char why[300] = "?";

			mx_get_str(m, "why", why, sizeof(why));
			r = mx_fail(err, ECONNREFUSED, "rank 0 refused this rank: %s", why);
		} else if (!strcmp(t, "end")) {
			json_object_put(m);
			m = NULL;
			break;
		} else if (!strcmp(t, "pair")) {
			r = run_pair(o, la, addr, fd, m, err);
		} else if (strcmp(t, "welcome") && strcmp(t, "sit")) {
			r = mx_fail(err, EPROTO, "rendezvous: unexpected message from rank 0");
		}
		json_object_put(m);
		m = NULL;
	}
out:
	close(fd);
	return r;
}
