/*
 * cost_floor - the least work a verified copy does per MiB on one side.
 *
 * usage: cost_floor MIB
 *
 * Copies MIB MiB, one MiB at a time, from one buffer to another with
 * memcpy and hashes each MiB once with XXH3-128 (the streaming calls rk
 * copy makes: XXH3_128bits_update): one copy and one hash pass, what rk copy cannot avoid on either
 * side (the client copies a chunk into registered memory and hashes it; the server hashes what
 * landed and copies it out). bench/cost runs it under callgrind at two
 * sizes and reports the slope, instructions per MiB, as the floor that
 * "rk copy per MiB" is compared with.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
/* The variant rk copy hashes with (tools/rk/copy/copy_proto.h). */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#endif
#endif

#define MIB (1u << 20)

int main(int argc, char **argv)
{
	unsigned char *src, *dst;
	XXH3_state_t *st;
	XXH128_hash_t h;
	long i, n;

	if (argc != 2 || (n = strtol(argv[1], NULL, 10)) <= 0 || n > 1 << 20) {
		fprintf(stderr, "usage: cost_floor MIB\n");
		return 2;
	}
	src = malloc(MIB);
	dst = malloc(MIB);
	st = XXH3_createState();
	if (!src || !dst || !st || XXH3_128bits_reset(st) != XXH_OK) {
		perror("cost_floor");
		XXH3_freeState(st);
		free(dst);
		free(src);
		return 1;
	}
	for (i = 0; i < (long)MIB; i++)
		src[i] = (unsigned char)(i * 131u + 7u);
	for (i = 0; i < n; i++) {
		src[0] = (unsigned char)i; /* each MiB differs: nothing to fold away */
		memcpy(dst, src, MIB);
		if (XXH3_128bits_update(st, dst, MIB) != XXH_OK)
			return 1;
	}
	h = XXH3_128bits_digest(st);
	printf("%016llx%016llx\n", (unsigned long long)h.high64, (unsigned long long)h.low64);
	XXH3_freeState(st);
	free(dst);
	free(src);
	return 0;
}
