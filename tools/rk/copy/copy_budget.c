/* copy_budget.c - fds and locked memory per session; see copy_budget.h. */
#include <stdio.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "copy_budget.h"
#include "copy_proto.h"
#include "copy_recv.h"

/* Raise @res's soft limit to its hard one (best effort); the limit in force. */
static struct rlimit raise_soft(int res)
{
	struct rlimit rl;

	if (getrlimit(res, &rl)) {
		rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
		return rl;
	}
	if (rl.rlim_cur != rl.rlim_max) {
		struct rlimit up = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};

		if (setrlimit(res, &up) == 0)
			rl = up;
	}
	return rl;
}

uint64_t cp_fit_fds(unsigned max_clients, unsigned reserve, uint32_t *max_open)
{
	struct rlimit rl = raise_soft(RLIMIT_NOFILE);
	uint64_t lim, per;

	lim = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 24) ? (1u << 24) : rl.rlim_cur;
	per = lim > reserve ? (lim - reserve) / max_clients : 0;
	if (per < cp_session_fds(1)) {
		fprintf(stderr,
			"rk serve: the fd limit (%llu) is too low for --max-clients %u: "
			"each session needs up to %u fds with one open file\n",
			(unsigned long long)lim, max_clients, cp_session_fds(1));
		return 0;
	}
	/* At most CP_SERVE_MAX_OPEN steps; at least one file stays (checked above). */
	while (*max_open > 1 && cp_session_fds(*max_open) > per)
		(*max_open)--;
	return lim;
}

/* CAP_IPC_LOCK in the effective set: the kernel then pins without counting. */
static int can_lock_all(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};

	if (syscall(SYS_capget, &h, d))
		return 0;
	return !!(d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK));
}

unsigned cp_default_depth(unsigned lanes, uint32_t chunk)
{
	struct rlimit rl = raise_soft(RLIMIT_MEMLOCK);
	uint64_t want = (uint64_t)CP_DEPTH_PER_LANE * (lanes > 1 ? lanes : 1), fit;
	uint64_t margin = CP_PINNED_MARGIN(lanes > 1 ? lanes : 1);

	if (want > CP_MAX_SLOTS)
		want = CP_MAX_SLOTS;
	if (want <= 8 || rl.rlim_cur == RLIM_INFINITY || can_lock_all())
		return (unsigned)want;
	fit = rl.rlim_cur > margin ? (rl.rlim_cur - margin) / ((uint64_t)CP_HDR_SIZE + chunk) : 0;
	return (unsigned)(fit < 8 ? 8 : fit < want ? fit : want);
}

int cp_fit_memlock(unsigned *max_clients, uint32_t *max_ring, uint64_t *limit)
{
	struct rlimit rl = raise_soft(RLIMIT_MEMLOCK);
	uint64_t fixed = cp_session_pinned(0), least = CP_HDR_SIZE + CP_CHUNK_MIN;
	uint64_t lim, per, floor = *max_ring < CP_RING_FLOOR ? *max_ring : CP_RING_FLOOR;
	unsigned fit;

	*limit = 0;
	if (rl.rlim_cur == RLIM_INFINITY || can_lock_all())
		return 0;
	*limit = lim = rl.rlim_cur;
	if (lim < fixed + least) {
		fprintf(
		    stderr,
		    "rk serve: the locked-memory limit (%llu KiB) is too low: one session "
		    "registers up to %llu KiB with the smallest ring. Raise it (ulimit -l, "
		    "LimitMEMLOCK= for a systemd service, --ulimit memlock=-1 for a container)\n",
		    (unsigned long long)(lim >> 10), (unsigned long long)((fixed + least) >> 10));
		return -1;
	}
	per = lim / *max_clients;
	if (per >= fixed + *max_ring)
		return 0;
	if (per >= fixed + floor) {
		*max_ring = (uint32_t)(per - fixed);
		return 0;
	}
	fit = (unsigned)(lim / (fixed + floor));
	if (!fit) {
		fit = 1;
		floor = lim - fixed;
	}
	fprintf(stderr,
		"rk serve: warning: the locked-memory limit (%llu KiB) fits %u session%s of the "
		"%u asked (each registers up to %llu KiB); raise it (ulimit -l, LimitMEMLOCK= "
		"for a systemd service, --ulimit memlock=-1 for a container) for more\n",
		(unsigned long long)(lim >> 10), fit, fit == 1 ? "" : "s", *max_clients,
		(unsigned long long)((fixed + floor) >> 10));
	*max_clients = fit;
	*max_ring = (uint32_t)floor;
	return 0;
}
