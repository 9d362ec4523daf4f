/*
 * replay.c - main() for a fuzz target built without libFuzzer.
 *
 *   fuzz_NAME FILE|DIR...    run every input once (a directory: its files,
 *                            in name order); exit 0 when none failed
 *   fuzz_NAME --seeds DIR    write the target's seed inputs into DIR
 *
 * The first form is the unit test that replays fuzz/seeds/NAME (seeds and
 * regression inputs) on every build, with or without clang.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#define REPLAY_MAX (1u << 20)

static const char *seed_dir;
static int seed_failed;

static void write_seed(const char *name, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", seed_dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
		fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
		seed_failed = 1;
	}
}

static int run_file(const char *path)
{
	static uint8_t buf[REPLAY_MAX];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		fprintf(stderr, "fuzz: %s: %s\n", path, strerror(errno));
		return -1;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, unsigned *count)
{
	struct dirent *e;
	char **names = NULL, path[4096];
	size_t n = 0, cap = 0;
	int rc = 0;
	DIR *d = opendir(dir);

	if (!d) {
		fprintf(stderr, "fuzz: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **more = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));

			if (!more) {
				rc = -1;
				break;
			}
			names = more;
		}
		names[n] = strdup(e->d_name);
		if (!names[n]) {
			rc = -1;
			break;
		}
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (rc == 0 && run_file(path) == 0)
			(*count)++;
		else
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;

	if (argc == 3 && strcmp(argv[1], "--seeds") == 0) {
		seed_dir = argv[2];
		if (mkdir(seed_dir, 0755) && errno != EEXIST) {
			fprintf(stderr, "fuzz: mkdir %s: %s\n", seed_dir, strerror(errno));
			return 1;
		}
		fuzz_seeds(write_seed);
		return seed_failed;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR... | --seeds DIR\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "fuzz: %s: %s\n", argv[i], strerror(errno));
			rc = 1;
		} else if (S_ISDIR(st.st_mode)) {
			rc |= run_dir(argv[i], &count) ? 1 : 0;
		} else {
			rc |= run_file(argv[i]) ? 1 : 0;
			count += rc == 0;
		}
	}
	if (rc == 0)
		printf("%s: %u inputs, no invariant failed\n", argv[0], count);
	return rc || count == 0;
}
