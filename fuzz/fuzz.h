/*
 * fuzz.h - what every fuzz target in this directory shares.
 *
 * A target is one file defining LLVMFuzzerTestOneInput (the libFuzzer
 * entry point) and fuzz_seeds, which writes its starting inputs with the
 * project's own encoders. The same file builds two ways: against
 * libFuzzer (-DRK_FUZZ=ON, clang) to search, and with replay.c (any
 * compiler, a unit test) to run the committed seeds and regression inputs
 * on every `make check`.
 *
 * An invariant that fails aborts, so both libFuzzer and the replay report
 * it as a crash with the input that caused it.
 */
#ifndef RK_FUZZ_H
#define RK_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__,       \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_seeds - call @emit once per starting input (name: a file name). */
typedef void fuzz_emit_fn(const char *name, const void *buf, size_t len);
void fuzz_seeds(fuzz_emit_fn *emit);

/*
 * fuzz_lowest_fd - the lowest free descriptor. A descriptor leaked by the
 * code under test takes that number, so the value changes across one input.
 */
static inline int fuzz_lowest_fd(void)
{
	int fd = dup(2);

	if (fd >= 0)
		close(fd);
	return fd;
}

/* fuzz_printable - @len bytes of NUL-terminated @s are all printable ASCII. */
static inline int fuzz_printable(const char *s, size_t cap)
{
	for (size_t i = 0; i < cap; i++) {
		if (s[i] == '\0')
			return 1;
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	}
	return 0; /* not terminated */
}

#endif
