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
#include <sys/stat.h>

#include <cmocka.h>

#include "copy_plan.h"

static char top[PATH_MAX];

static void make(const char *rel, int is_dir)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", top, rel);
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
	assert_int_equal(chdir(top), 0);
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
 * for a file the server places (into), space-separated.
 */
static void expect(const char *srcs, const char *dest, int recursive, const char *want)
{
	char *argv[8], buf[256], got[512] = "", why[256] = "";
	char *names[32] = {0};
	struct cp_plan p;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", srcs);
	for (char *t = strtok(buf, " "); t; t = strtok(NULL, " "))
		argv[n++] = t;
	assert_int_equal(cp_plan_build(&p, argv, n, dest, recursive, why, sizeof(why)), 0);
	assert_true(p.n < 32);
	for (size_t i = 0; i < p.n; i++) {
		char *s = malloc(strlen(p.items[i].dst) + 2);

		assert_non_null(s);
		sprintf(s, "%s%s", p.items[i].dst,
			p.items[i].is_dir ? "/" : (p.items[i].into ? ">" : ""));
		names[i] = s;
	}
	qsort(names, p.n, sizeof(names[0]), by_name);
	for (size_t i = 0; i < p.n; i++) {
		strcat(got, i ? " " : "");
		strcat(got, names[i]);
		free(names[i]);
	}
	cp_plan_free(&p);
	if (strcmp(got, want))
		fail_msg("rk copy %s%s %s: got '%s', want '%s'", recursive ? "-r " : "", srcs, dest,
			 got, want);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_file),	     cmocka_unit_test(test_several),
	    cmocka_unit_test(test_directory_itself), cmocka_unit_test(test_contents),
	    cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
