/*
 * doctor_memlock.c - the locked-memory limit against what rk copy and rk
 * bench pin with their defaults (memory regions and the queues, which the
 * kernel pins too), and the fix that applies here: a shell, a container, a
 * systemd service.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "doctor.h"

/*
 * rk copy: what its budget says it registers with the defaults
 * (cp_client_pinned: 8 slots of 1 MiB with their headers, the receive
 * buffers and the queues, about 9.5 MiB). rk bench: 64 KiB x (1 + 1 QP)
 * plus queues and CQs of a few hundred entries: 1 MiB.
 */
#define NEED_COPY  DOC_NEED_COPY
#define NEED_BENCH (1ull << 20)

static void fmt_limit(rlim_t v, char *buf, size_t len)
{
	if (v == RLIM_INFINITY)
		snprintf(buf, len, "unlimited");
	else if (v >= (1u << 20) && v % (1u << 20) == 0)
		snprintf(buf, len, "%llu MiB", (unsigned long long)(v >> 20));
	else
		snprintf(buf, len, "%llu KiB", (unsigned long long)(v >> 10));
}

/*
 * A root file system shared into a virtual machine (9p, virtiofs) shows the
 * host's files, its container marks included: those say nothing here.
 */
static int root_is_shared(void)
{
	char buf[8192], *line, *save = NULL;

	if (doc_read_file("/proc/self/mounts", buf, sizeof(buf)))
		return 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char dev[256], dir[256], type[64];

		if (sscanf(line, "%255s %255s %63s", dev, dir, type) == 3 &&
		    strcmp(dir, "/") == 0 &&
		    (strcmp(type, "9p") == 0 || strcmp(type, "virtiofs") == 0))
			return 1;
	}
	return 0;
}

/* CAP_IPC_LOCK in the effective set: the kernel then pins without counting the limit. */
static int has_ipc_lock(void)
{
	char buf[4096];
	const char *cap;
	char *end;
	unsigned long long eff;

	if (doc_read_file("/proc/self/status", buf, sizeof(buf)))
		return 0;
	cap = strstr(buf, "CapEff:");
	if (!cap)
		return 0;
	eff = strtoull(cap + 7, &end, 16);
	if (end == cap + 7)
		return 0;
	return (eff >> 14) & 1; /* CAP_IPC_LOCK */
}

/* Docker, podman, LXC, Kubernetes: the usual marks. */
static const char *container(void)
{
	char buf[4096];
	const char *env = getenv("container");

	if (access("/.dockerenv", F_OK) == 0 && !root_is_shared())
		return "docker";
	if (access("/run/.containerenv", F_OK) == 0 && !root_is_shared())
		return "podman";
	if (env && env[0])
		return env;
	if (doc_read_file("/proc/1/cgroup", buf, sizeof(buf)) == 0) {
		if (strstr(buf, "kubepods"))
			return "kubernetes";
		if (strstr(buf, "docker"))
			return "docker";
		if (strstr(buf, "lxc"))
			return "lxc";
	}
	return NULL;
}

void doc_check_memlock(struct doc_report *r)
{
	struct json_object *f = doc_fact(r, "memlock");
	const char *ct = container();
	const char *unit = getenv("INVOCATION_ID"); /* set by systemd for its services */
	char soft[32], hard[32], fix[512];
	struct rlimit rl;
	size_t n = 0;

	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		doc_add(r, DOC_SKIP, "memlock", NULL, "not checked: getrlimit failed");
		return;
	}
	fmt_limit(rl.rlim_cur, soft, sizeof(soft));
	fmt_limit(rl.rlim_max, hard, sizeof(hard));
	json_object_object_add(f, "soft",
			       rl.rlim_cur == RLIM_INFINITY
				   ? json_object_new_int64(-1)
				   : json_object_new_int64((int64_t)rl.rlim_cur));
	json_object_object_add(f, "hard",
			       rl.rlim_max == RLIM_INFINITY
				   ? json_object_new_int64(-1)
				   : json_object_new_int64((int64_t)rl.rlim_max));
	json_object_object_add(f, "need_copy", json_object_new_int64((int64_t)NEED_COPY));
	json_object_object_add(f, "need_bench", json_object_new_int64((int64_t)NEED_BENCH));
	json_object_object_add(f, "container", ct ? json_object_new_string(ct) : NULL);
	json_object_object_add(f, "systemd_service", json_object_new_boolean(unit != NULL));
	json_object_object_add(f, "cap_ipc_lock", json_object_new_boolean(has_ipc_lock()));

	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= NEED_COPY) {
		doc_add(r, DOC_OK, "memlock", NULL,
			"locked-memory limit %s (hard %s): enough for rk copy (~10 MiB) and rk "
			"bench (~1 MiB) with their defaults",
			soft, hard);
		return;
	}
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= NEED_COPY)
		n += (size_t)snprintf(fix + n, sizeof(fix) - n,
				      "ulimit -l %s (the hard limit allows it)",
				      rl.rlim_max == RLIM_INFINITY ? "unlimited" : hard);
	else
		n += (size_t)snprintf(fix + n, sizeof(fix) - n,
				      "/etc/security/limits.conf: '* - memlock unlimited', log in "
				      "again");
	if (ct && n < sizeof(fix))
		n += (size_t)snprintf(fix + n, sizeof(fix) - n,
				      "; in this %s container: run it with --ulimit memlock=-1 "
				      "--device /dev/infiniband",
				      ct);
	if (n < sizeof(fix))
		snprintf(fix + n, sizeof(fix) - n, "; %s: LimitMEMLOCK=infinity in [Service]",
			 unit ? "this systemd service" : "systemd services");
	if (has_ipc_lock()) {
		doc_add(
		    r, DOC_WARN, "memlock", fix,
		    "locked-memory limit (ulimit -l) %s, hard %s, but this process has "
		    "CAP_IPC_LOCK (root), so the kernel does not enforce it; without it rk copy "
		    "(~10 MiB) would fail",
		    soft, hard);
		return;
	}
	doc_add(r, DOC_FAIL, "memlock", fix,
		"locked-memory limit (ulimit -l) %s, hard %s: rk copy needs ~10 MiB, rk bench "
		"~1 MiB%s; memory registration fails with ENOMEM",
		soft, hard, rl.rlim_cur >= NEED_BENCH ? " (rk bench fits, rk copy does not)" : "");
}
