/*
 * bench_clock.h - the clock of the engines' hot loops.
 *
 * A latency sample brackets one round trip with two clock reads, and the
 * waits look at the clock every few dozen polls for the watchdog, so a
 * read must cost next to nothing. clock_gettime() does not always: where
 * the kernel's clocksource is not the TSC (hpet under QEMU TCG, some
 * VMs), every call is a system call and a device read, 1.4 - 1.9 us in
 * the sandbox, about the tenth of a 64 B round trip. perftest reads the
 * TSC (get_cycles()); so do we on x86-64, converted to ns with a rate
 * measured against CLOCK_MONOTONIC when the session starts. Elsewhere, or
 * when the TSC does not tick at a steady rate, ticks are CLOCK_MONOTONIC
 * nanoseconds.
 */
#ifndef RK_BENCH_CLOCK_H
#define RK_BENCH_CLOCK_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

struct bench_clock {
	int ready;	    /* bench_clock_init() ran */
	int tsc;	    /* ticks are TSC cycles (else CLOCK_MONOTONIC ns) */
	double ns_per_tick; /* 1 for CLOCK_MONOTONIC */
	uint64_t tick0;	    /* a TSC reading ... */
	uint64_t ns0;	    /* ... and the CLOCK_MONOTONIC time it stands for */
	uint64_t last_ns;   /* bench_now_ns() never goes back */
};

extern struct bench_clock bench_clk;

/*
 * bench_clock_init - choose the source and calibrate (about 10 ms, once).
 * Before it, ticks are CLOCK_MONOTONIC ns; a reading taken before must not
 * be compared with one taken after.
 */
void bench_clock_init(void);

/* bench_clock_mono_ns - CLOCK_MONOTONIC in ns (what the fallback ticks are). */
uint64_t bench_clock_mono_ns(void);

/* bench_ticks - a raw reading; differences go through bench_ticks_ns(). */
static inline uint64_t bench_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (bench_clk.tsc)
		return __rdtsc();
#endif
	return bench_clock_mono_ns();
}

/* bench_ticks_ns - a tick interval in ns; 0 if @to is before @from. */
static inline uint64_t bench_ticks_ns(uint64_t from, uint64_t to)
{
	if (to <= from)
		return 0;
	return bench_clk.tsc ? (uint64_t)((double)(to - from) * bench_clk.ns_per_tick) : to - from;
}

/*
 * bench_ticks_for - how many ticks @ns nanoseconds last: hot loops compare
 * raw readings against deadlines computed once, with no conversion (a
 * double multiply is a library call under emulation, ~40 ns in the sandbox).
 */
static inline uint64_t bench_ticks_for(uint64_t ns)
{
	return bench_clk.tsc && bench_clk.ns_per_tick > 0
		   ? (uint64_t)((double)ns / bench_clk.ns_per_tick)
		   : ns;
}

/*
 * bench_ns_at - the CLOCK_MONOTONIC-like time of reading @t, never less
 * than one returned before: deadlines and the watchdog use it.
 */
uint64_t bench_ns_at(uint64_t t);

/* bench_now_ns - bench_ns_at(bench_ticks()). */
static inline uint64_t bench_now_ns(void)
{
	return bench_ns_at(bench_ticks());
}

/*
 * bench_pace - sleep @ms milliseconds (--pace: the pause before each
 * message a side sends), through a signal if one comes. Never inlined:
 * bench/cost leaves the pause out of a profile by this name.
 */
void bench_pace(unsigned ms);

/* "tsc" or "clock_gettime", and the TSC rate in MHz (0 for clock_gettime). */
const char *bench_clock_name(void);
double bench_clock_mhz(void);

#endif
