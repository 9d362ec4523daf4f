/*
 * test_copy_plan.c - rk copy's plan (copy_plan.c) follows rsync's path
 * rules, row by row of the table in copy_plan.h and rk copy --help: a
 * trailing '/' on a directory copies its contents, without it the
 * directory itself; one file onto a DEST without '/' is left for the
 * server to place (inside DEST if that is a directory there).
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "copy_path.h"
#include "copy_plan.h"

static char top[PATH_MAX];

static void make(const char *rel, int is_dir)
{
	char p[PATH_MAX];
	FILE *f;

	assert_true((size_t)snprintf(p, sizeof(p), "%s/%s", top, rel) < sizeof(p));
	if (is_dir) {
		assert_int_equal(mkdir(p, 0755), 0);
		return;
	}
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(rel, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(top, sizeof(top), "/tmp/rk-plan-XXXXXX");
	assert_non_null(mkdtemp(top));
	make("file", 0);
	make("other", 0);
	make("dir", 1);
	make("dir/x", 0);
	make("dir/sub", 1);
	make("dir/sub/y", 0);
	/* What a server serves to a client that pulls: links that leave, a FIFO. */
	make("served", 1);
	make("served/a.bin", 0);
	make("served/d", 1);
	make("served/d/x", 0);
	make("served/d/.x.rkpart", 0); /* a temporary of rk serve's: never sent */
	assert_int_equal(chdir(top), 0);
	assert_int_equal(symlink("../a.bin", "served/d/ln"), 0);
	assert_int_equal(symlink("/etc/passwd", "served/d/out"), 0);
	assert_int_equal(symlink("/etc", "served/esc"), 0);
	assert_int_equal(mkfifo("served/d/fifo", 0600), 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	assert_int_equal(chdir("/"), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Plan @srcs (a space-separated list) to @dest and compare the destinations,
 * sorted, with @want: "name" for a file, "name/" for a directory, "name>"
 * for a file the server places (into), space-separated. With @beneath, the
 * plan is a server's of what a client pulls from "served": every source is
 * a path under it, and every file opens beneath it.
 */
static void expect_plan(int beneath, const char *srcs, const char *dest, int recursive,
			const char *want)
{
	char *argv[8], buf[256], got[512] = "", why[256] = "";
	char *names[32] = {0};
	int root = -1, n = 0, r;
	struct cp_plan p;

	snprintf(buf, sizeof(buf), "%s", srcs);
	for (char *t = strtok(buf, " "); t; t = strtok(NULL, " "))
		argv[n++] = t;
	if (beneath) {
		root = open("served", O_RDONLY | O_DIRECTORY);
		assert_true(root >= 0);
		r = cp_plan_build_beneath(&p, root, argv, n, dest, recursive, 0, why, sizeof(why));
	} else {
		r = cp_plan_build(&p, argv, n, dest, recursive, why, sizeof(why));
	}
	if (r)
		fail_msg("%s %s: %s", beneath ? "pull" : "push", srcs, why);
	assert_true(p.n < 32);
	for (size_t i = 0; i < p.n; i++) {
		char *s = malloc(strlen(p.items[i].dst) + 2);

		assert_non_null(s);
		sprintf(s, "%s%s", p.items[i].dst,
			p.items[i].is_dir ? "/" : (p.items[i].into ? ">" : ""));
		names[i] = s;
		if (beneath && !p.items[i].is_dir) {
			int fd = cp_plan_open(&p, &p.items[i]);

			assert_true(p.items[i].src[0] != '/');
			assert_true(fd >= 0);
			close(fd);
		}
	}
	qsort(names, p.n, sizeof(names[0]), by_name);
	for (size_t i = 0; i < p.n; i++) {
		strcat(got, i ? " " : "");
		strcat(got, names[i]);
		free(names[i]);
	}
	cp_plan_free(&p);
	if (root >= 0)
		close(root);
	if (strcmp(got, want))
		fail_msg("rk copy %s%s %s (%s): got '%s', want '%s'", recursive ? "-r " : "", srcs,
			 dest, beneath ? "pull" : "push", got, want);
}

static void expect(const char *srcs, const char *dest, int recursive, const char *want)
{
	expect_plan(0, srcs, dest, recursive, want);
}

static void expect_beneath(const char *srcs, const char *dest, int recursive, const char *want)
{
	expect_plan(1, srcs, dest, recursive, want);
}

static void test_one_file(void **state)
{
	(void)state;
	expect("file", "d/", 0, "d/file");
	expect("file", "d", 0, "d/file>"); /* d/file if d is a directory there, else d */
	expect("file", "a/b", 0, "a/b/file>");
	expect("file", "", 0, "file");
	expect("file", ".", 0, "file");
	expect("file", "./", 0, "file");
	expect("dir/x", "d", 0, "d/x>");
}

static void test_several(void **state)
{
	(void)state;
	expect("file other", "d", 0, "d/file d/other");
	expect("file other", "d/", 0, "d/file d/other");
	expect("file dir", "d", 1, "d/dir/ d/dir/sub/ d/dir/sub/y d/dir/x d/file");
}

static void test_directory_itself(void **state)
{
	(void)state;
	expect("dir", "d", 1, "d/dir/ d/dir/sub/ d/dir/sub/y d/dir/x");
	expect("dir", "d/", 1, "d/dir/ d/dir/sub/ d/dir/sub/y d/dir/x");
	expect("dir", "", 1, "dir/ dir/sub/ dir/sub/y dir/x");
	expect("dir/sub", "d", 1, "d/sub/ d/sub/y");
}

static void test_contents(void **state)
{
	(void)state;
	expect("dir/", "d", 1, "d/ d/sub/ d/sub/y d/x");
	expect("dir/", "d/", 1, "d/ d/sub/ d/sub/y d/x");
	expect("dir//", "d", 1, "d/ d/sub/ d/sub/y d/x");
	expect("dir/.", "d", 1, "d/ d/sub/ d/sub/y d/x");
	expect("dir/", "", 1, "sub/ sub/y x");
	expect("dir/sub/", "d", 1, "d/ d/y");
	assert_int_equal(chdir("dir"), 0);
	expect(".", "d", 1, "d/ d/sub/ d/sub/y d/x");
	expect("./", "", 1, "sub/ sub/y x");
	assert_int_equal(chdir("sub"), 0);
	expect("..", "d", 1, "d/ d/sub/ d/sub/y d/x");
	assert_int_equal(chdir(top), 0);
}

static void test_refusals(void **state)
{
	char *argv[2] = {"dir", NULL}, why[256];
	struct cp_plan p;

	(void)state;
	assert_int_equal(cp_plan_build(&p, argv, 1, "d", 0, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "use -r"));
	cp_plan_free(&p);
	argv[0] = "file/";
	assert_int_equal(cp_plan_build(&p, argv, 1, "d", 0, why, sizeof(why)), -1);
	cp_plan_free(&p);
	argv[0] = "missing";
	assert_int_equal(cp_plan_build(&p, argv, 1, "d", 0, why, sizeof(why)), -1);
	cp_plan_free(&p);
	argv[0] = "file";
	assert_int_equal(cp_plan_build(&p, argv, 1, "../d", 0, why, sizeof(why)), -2);
	cp_plan_free(&p);
	argv[0] = "dir/";
	assert_int_equal(cp_plan_build(&p, argv, 1, "a/../..", 1, why, sizeof(why)), -2);
	cp_plan_free(&p);
}

static void test_beneath(void **state)
{
	(void)state;
	expect_beneath("a.bin", "", 0, "a.bin");
	expect_beneath("a.bin", "n", 0, "n/a.bin>");
	expect_beneath("d/x", "k/", 0, "k/x");
	/* symlinks (in or out) and the FIFO are skipped, as rsync does without -l */
	expect_beneath("d", "", 1, "d/ d/x");
	expect_beneath("d/", "k", 1, "k/ k/x");
	expect_beneath("d/.", "", 1, "x");
	expect_beneath(".", "", 1, "a.bin d/ d/x");
	expect_beneath("./", "top", 1, "top/ top/a.bin top/d/ top/d/x");
}

/* A refused pull source: @rc and a word of @why. */
static void refused_beneath(const char *src, int recursive, int rc, const char *word)
{
	char *argv[1] = {(char *)src}, why[256] = "";
	int root = open("served", O_RDONLY | O_DIRECTORY);
	struct cp_plan p;

	assert_true(root >= 0);
	if (cp_plan_build_beneath(&p, root, argv, 1, "", recursive, 0, why, sizeof(why)) != rc ||
	    !strstr(why, word))
		fail_msg("pull %s: want %d and '%s', got: %s", src, rc, word, why);
	cp_plan_free(&p);
	close(root);
}

static void test_beneath_refusals(void **state)
{
	char *argv[1] = {"."}, why[256];
	int root = open("served", O_RDONLY | O_DIRECTORY), fd;
	struct cp_plan p;

	(void)state;
	refused_beneath("../file", 0, -2, "not a path under");
	refused_beneath("/etc/passwd", 0, -2, "not a path under");
	refused_beneath("d/../../file", 0, -2, "not a path under");
	refused_beneath("d/..", 1, -2, "not a path under");
	refused_beneath("..", 1, -2, "not a path under");
	refused_beneath("esc", 1, -1, "symbolic link");
	refused_beneath("esc/passwd", 0, -1, "symbolic link");
	refused_beneath("d/out", 0, -1, "symbolic link");
	refused_beneath("d/ln", 0, -1, "symbolic link");
	refused_beneath("d/fifo", 0, -1, "not a regular file");
	refused_beneath("missing", 0, -1, "No such file");
	refused_beneath("d", 0, -1, "use -r");
	/* the same without openat2 (Linux < 5.6, valgrind): a component at a time */
	cp_path_use_openat2(0);
	expect_beneath("d/x", "k/", 0, "k/x");
	expect_beneath("d", "", 1, "d/ d/x");
	refused_beneath("esc/passwd", 0, -1, "symbolic link");
	refused_beneath("d/ln", 0, -1, "symbolic link");
	cp_path_use_openat2(1);
	/* at most max_items */
	assert_true(root >= 0);
	assert_int_equal(cp_plan_build_beneath(&p, root, argv, 1, "", 1, 2, why, sizeof(why)),
			 CP_PLAN_LIMIT);
	assert_non_null(strstr(why, "limit"));
	cp_plan_free(&p);
	/* a file swapped for a link after planning is not opened through it */
	argv[0] = "d";
	assert_int_equal(cp_plan_build_beneath(&p, root, argv, 1, "", 1, 0, why, sizeof(why)), 0);
	assert_int_equal(p.n, 2);
	assert_int_equal(rename("served/d/x", "served/d/x.was"), 0);
	assert_int_equal(symlink("/etc/passwd", "served/d/x"), 0);
	fd = cp_plan_open(&p, &p.items[1]);
	assert_true(fd == -ELOOP || fd == -EXDEV);
	assert_int_equal(unlink("served/d/x"), 0);
	assert_int_equal(rename("served/d/x.was", "served/d/x"), 0);
	cp_plan_free(&p);
	close(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_file),	     cmocka_unit_test(test_several),
	    cmocka_unit_test(test_directory_itself), cmocka_unit_test(test_contents),
	    cmocka_unit_test(test_refusals),	     cmocka_unit_test(test_beneath),
	    cmocka_unit_test(test_beneath_refusals),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
