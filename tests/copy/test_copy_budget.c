/*
 * test_copy_budget.c - rk copy's default depth and rk serve's share of
 * locked memory, under a real RLIMIT_MEMLOCK. The process lowers its own
 * limits (allowed without privilege) and, run as root, first drops
 * CAP_IPC_LOCK from its effective set: with it the kernel does not count
 * pinned pages, and both functions rightly ignore the limit. Lowering a
 * hard limit cannot be undone, so the cases run from the widest limit to
 * the narrowest, in one test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "copy_budget.h"
#include "copy_proto.h"
#include "copy_recv.h"

#define MIB (1ull << 20)

/* What a session holds besides its ring: stand-ins for copy_recv.c's accounting. */
unsigned cp_session_fds(unsigned max_open)
{
	return 8 + 2 * max_open;
}

uint64_t cp_session_pinned(uint32_t max_ring)
{
	return MIB + max_ring;
}

static int lock_cap(int drop)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return -1;
	if (drop) {
		d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
		return (int)syscall(SYS_capset, &h, d);
	}
	return !!(d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK));
}

static void set_memlock(uint64_t soft, uint64_t hard)
{
	struct rlimit rl = {.rlim_cur = soft, .rlim_max = hard};

	assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
}

/*
 * The cases need a hard limit of 8 MiB or more (Debian's default is 8 MiB;
 * raising it takes CAP_SYS_RESOURCE, which a container's root may lack).
 * Below that the test is skipped: cmocka says so, ctest counts it passed.
 */
static int start_at_8mib(void)
{
	struct rlimit rl = {.rlim_cur = 2 * MIB, .rlim_max = 8 * MIB};

	return setrlimit(RLIMIT_MEMLOCK, &rl) == 0;
}

static void memlock_limits(void **state)
{
	const uint32_t mib = (uint32_t)MIB, k256 = 256u << 10;
	uint32_t ring = 64 * mib;
	unsigned clients = 4;
	uint64_t limit = 1;

	(void)state;
	if (!start_at_8mib())
		skip();
	if (lock_cap(0) == 1) { /* CAP_IPC_LOCK: no limit holds */
		assert_int_equal(cp_default_depth(4, mib), 32);
		assert_int_equal(cp_fit_memlock(&clients, &ring, &limit), 0);
		assert_true(limit == 0 && clients == 4 && ring == 64 * mib);
		assert_int_equal(lock_cap(1), 0);
		assert_int_equal(lock_cap(0), 0);
	}

	/* The soft limit (2 MiB) is raised to the hard one (8 MiB) first. */
	assert_int_equal(cp_default_depth(1, mib), 8);
	assert_int_equal(cp_default_depth(2, k256), 16); /* 8 per lane fits */
	assert_int_equal(cp_default_depth(4, k256), 19); /* (8 - 3) MiB / (256 + 4) KiB */
	assert_int_equal(cp_default_depth(8, k256), 11); /* (8 - 5) MiB / (256 + 4) KiB */
	assert_int_equal(cp_default_depth(8, 4096), CP_MAX_SLOTS);
	/* One session: a smaller ring. Four: fewer sessions, each with the floor ring. */
	clients = 1;
	assert_int_equal(cp_fit_memlock(&clients, &ring, &limit), 0);
	assert_true(limit == 8 * MIB && clients == 1 && ring == 7 * mib);
	clients = 4;
	ring = 64 * mib;
	assert_int_equal(cp_fit_memlock(&clients, &ring, &limit), 0);
	assert_true(clients == 1 && ring == CP_RING_FLOOR);

	/* 4 MiB: the margin leaves less than 8 slots; one lane's 8 stay. */
	set_memlock(4 * MIB, 4 * MIB);
	assert_int_equal(cp_default_depth(2, k256), 8);
	assert_int_equal(cp_default_depth(4, mib), 8);
	assert_int_equal(cp_default_depth(8, k256), 8);
	/* Not one floor ring: one session, with what is left. */
	clients = 4;
	ring = 64 * mib;
	assert_int_equal(cp_fit_memlock(&clients, &ring, &limit), 0);
	assert_true(clients == 1 && ring == 3 * mib);

	/* 1 MiB: not even one session with one smallest slot. */
	set_memlock(MIB, MIB);
	clients = 1;
	ring = 64 * mib;
	assert_int_equal(cp_fit_memlock(&clients, &ring, &limit), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(memlock_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
