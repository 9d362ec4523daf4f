/*
 * deadline.h - the one way rk's tools keep a wait's deadline: a point on
 * the monotonic clock in nanoseconds, computed once, and every poll() in
 * the wait given what is left of it, so a loop of short waits (EINTR, a
 * partial frame) never outlives the whole.
 *
 * Inline and free of the rest of cli.c, so that codec files linked on
 * their own (fuzz targets, unit tests) can use it. Thread-safe.
 */
#ifndef RK_CLI_DEADLINE_H
#define RK_CLI_DEADLINE_H

#include <limits.h>
#include <stdint.h>
#include <time.h>

/* cli_deadline_now - the monotonic clock in nanoseconds (as cli_now_ns). */
static inline uint64_t cli_deadline_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* cli_deadline_in - the deadline @ms milliseconds from now (a negative @ms: now). */
static inline uint64_t cli_deadline_in(int64_t ms)
{
	return cli_deadline_now() + (uint64_t)(ms > 0 ? ms : 0) * 1000000ull;
}

/*
 * cli_deadline_ms_left - what is left of @deadline_ns in milliseconds,
 * rounded up (a wait of poll(ms) never ends before the deadline) and
 * clamped to [0, INT_MAX] for poll(); 0 once it has passed.
 */
static inline int cli_deadline_ms_left(uint64_t deadline_ns)
{
	uint64_t now = cli_deadline_now(), ms;

	if (now >= deadline_ns)
		return 0;
	ms = (deadline_ns - now + 999999) / 1000000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* cli_deadline_expired - whether @deadline_ns has passed. */
static inline int cli_deadline_expired(uint64_t deadline_ns)
{
	return cli_deadline_now() >= deadline_ns;
}

#endif
