/*
 * cli_duration.c - the one reader of durations every rk command uses
 * (cli_parse_duration, tools/rk/cli.c: --timeout, --idle, --wait ...),
 * fed any text; a value also comes from a configuration file (rk serve).
 *
 * Asserts, for any bytes (up to the first NUL, at most 64):
 *  - an accepted text is digits, at most one '.' with at most 7 digits
 *    after it, and one of the units "", "ms", "s", "m", "h"; its value is
 *    exactly what a 128-bit reading of the same text gives, in whole
 *    milliseconds;
 *  - a text refused with at most 15 digits before the point is refused by
 *    that reading too (inexact, not a duration); longer ones may be refused
 *    early for fear of overflow;
 *  - cli_fmt_duration writes a value back as text that reads as the same
 *    value; a bare number (cli_is_bare_number) is seconds.
 */
#include <string.h>

#include "cli.h"
#include "fuzz.h"

#define TEXT_MAX 64

/* The reference: 1 with *@ms, 0 refused, from the grammar and 128-bit arithmetic. */
static int ref_parse(const char *s, uint64_t *ms, int *whole_digits)
{
	static const struct {
		const char *name;
		unsigned u;
	} units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"", 1000}};
	const unsigned __int128 big = (unsigned __int128)1 << 100; /* past any uint64_t * 3600000 */
	unsigned __int128 whole = 0, frac = 0, div = 1, v;
	int wd = 0, fd = 0, huge = 0;
	const char *p = s;

	/* Any number of digits (leading zeros included); a value past 2^100 is refused. */
	for (; *p >= '0' && *p <= '9'; p++, wd++) {
		whole = whole * 10 + (unsigned)(*p - '0');
		if (whole > big) {
			huge = 1;
			whole = big;
		}
	}
	*whole_digits = wd;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++, fd++) {
			if (fd == 7)
				return 0;
			frac = frac * 10 + (unsigned)(*p - '0');
			div *= 10;
		}
	if (wd + fd == 0 || huge)
		return 0;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].name) != 0)
			continue;
		if ((frac * units[i].u) % div)
			return 0;
		v = whole * units[i].u + frac * units[i].u / div;
		if (v > UINT64_MAX)
			return 0;
		*ms = (uint64_t)v;
		return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[TEXT_MAX + 1], back[32];
	uint64_t ms = 0, want = 0, again = 0;
	int r, ref, wd = 0;

	if (size > TEXT_MAX)
		size = TEXT_MAX;
	memcpy(s, data, size);
	s[size] = '\0';
	r = cli_parse_duration(s, &ms);
	ref = ref_parse(s, &want, &wd);
	FUZZ_CHECK(r == 0 || r == -1);
	if (r == 0) {
		FUZZ_CHECK(ref == 1 && ms == want);
		cli_fmt_duration(ms, back, sizeof(back));
		FUZZ_CHECK(cli_parse_duration(back, &again) == 0 && again == ms);
		if (cli_is_bare_number(s))
			FUZZ_CHECK(ms % 1000 == 0);
	} else if (wd <= 15) {
		FUZZ_CHECK(ref == 0);
	}
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static const char *const seeds[] = {
	    "30",  "500ms",  "1.5s",	"2m",	      "1h",
	    "0",   "0.001s", "0.0001s", "1.2345678s", "18446744073709551615ms",
	    "1e3", ".5s",    "5.",	"1.5ms",      "10x",
	    "",
	};

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		char name[16];

		snprintf(name, sizeof(name), "seed-%02zu", i);
		emit(name, seeds[i], strlen(seeds[i]));
	}
}
