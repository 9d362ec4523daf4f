/*
 * test_copy_path.c - the destination path sanitiser, and openat2 beneath
 * the served directory against '..' and symlinks that leave it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "copy_path.h"
#include "copy_proto.h"

static int check(const char *s)
{
	return cp_path_check(s, strlen(s));
}

static void accepted(void **state)
{
	assert_int_equal(check("a"), 0);
	assert_int_equal(check("a/b/c.txt"), 0);
	assert_int_equal(check(".hidden"), 0);
	assert_int_equal(check("a..b"), 0);
	assert_int_equal(check("..."), 0);
	assert_int_equal(check("dir/file with spaces"), 0);
	assert_int_equal(check("x.rkpart"), 0); /* only ".*.rkpart" is reserved */
}

static void refused(void **state)
{
	char big[CP_NAME_MAX + 2], comp[CP_COMP_MAX + 2];

	assert_int_equal(check(""), -EINVAL);
	assert_int_equal(check("/etc/passwd"), -EINVAL);
	assert_int_equal(check(".."), -EINVAL);
	assert_int_equal(check("../x"), -EINVAL);
	assert_int_equal(check("a/../../x"), -EINVAL);
	assert_int_equal(check("a/.."), -EINVAL);
	assert_int_equal(check("."), -EINVAL);
	assert_int_equal(check("./a"), -EINVAL);
	assert_int_equal(check("a//b"), -EINVAL);
	assert_int_equal(check("a/"), -EINVAL);
	assert_int_equal(check("a\nb"), -EINVAL);
	assert_int_equal(check("a\033[2J"), -EINVAL);
	assert_int_equal(check("dir/.f.rkpart"), -EINVAL);
	assert_int_equal(cp_path_check("a\0b", 3), -EINVAL);
	assert_int_equal(cp_path_check(NULL, 0), -EINVAL);
	memset(big, 'a', sizeof(big));
	for (size_t i = 100; i < sizeof(big); i += 100)
		big[i] = '/';
	big[CP_NAME_MAX + 1] = '\0';
	assert_int_equal(check(big), -EINVAL);
	big[CP_NAME_MAX] = '\0';
	assert_int_equal(check(big), 0);
	memset(comp, 'b', sizeof(comp));
	comp[CP_COMP_MAX + 1] = '\0';
	assert_int_equal(check(comp), -EINVAL);
}

static void split(void **state)
{
	char p[64], l[64];

	cp_path_split("a/b/c", 5, p, l);
	assert_string_equal(p, "a/b");
	assert_string_equal(l, "c");
	cp_path_split("c", 1, p, l);
	assert_string_equal(p, "");
	assert_string_equal(l, "c");
	cp_temp_name("c", l, sizeof(l));
	assert_string_equal(l, ".c.rkpart");
}

static void beneath(void **state)
{
	char root[] = "/tmp/rkpath.XXXXXX", out[] = "/tmp/rkpath-out.XXXXXX", buf[256];
	int rfd, fd;

	assert_non_null(mkdtemp(root));
	assert_non_null(mkdtemp(out));
	rfd = open(root, O_RDONLY | O_DIRECTORY);
	assert_true(rfd >= 0);
	snprintf(buf, sizeof(buf), "%s/esc", root);
	assert_int_equal(symlink(out, buf), 0);
	snprintf(buf, sizeof(buf), "%s/up", root);
	assert_int_equal(symlink("..", buf), 0);
	snprintf(buf, sizeof(buf), "%s/in", root);
	assert_int_equal(symlink("x", buf), 0);

	/* creating nested directories works */
	fd = cp_open_dir(rfd, "x/y/z", 1);
	assert_true(fd >= 0);
	close(fd);
	/* a symlink inside that stays inside is followed */
	fd = cp_open_dir(rfd, "in/y", 0);
	assert_true(fd >= 0);
	close(fd);
	/* symlinks that leave are refused, with or without create */
	assert_int_equal(cp_open_dir(rfd, "esc", 1), -EXDEV);
	assert_int_equal(cp_open_dir(rfd, "esc/sub", 1), -EXDEV);
	assert_int_equal(cp_open_dir(rfd, "up/x", 0), -EXDEV);
	/* a file opened beneath never follows a symlink */
	fd = cp_open_dir(rfd, "", 0);
	assert_true(fd >= 0);
	assert_true(cp_openat_beneath(fd, "esc", O_RDONLY, 0) < 0);
	assert_true(cp_openat_beneath(fd, "in", O_RDONLY, 0) < 0);
	close(fd);
	/* nothing appeared outside */
	snprintf(buf, sizeof(buf), "%s/sub", out);
	assert_int_equal(access(buf, F_OK), -1);

	close(rfd);
	snprintf(buf, sizeof(buf), "rm -rf '%s' '%s'", root, out);
	assert_int_equal(system(buf), 0);
}

/* Without openat2 (old kernels, valgrind): every symlink refused, the rest the same. */
static void beneath_fallback(void **state)
{
	char root[] = "/tmp/rkpath.XXXXXX", out[] = "/tmp/rkpath-out.XXXXXX", buf[256];
	int rfd, fd;

	cp_path_use_openat2(0);
	assert_non_null(mkdtemp(root));
	assert_non_null(mkdtemp(out));
	rfd = open(root, O_RDONLY | O_DIRECTORY);
	assert_true(rfd >= 0);
	snprintf(buf, sizeof(buf), "%s/esc", root);
	assert_int_equal(symlink(out, buf), 0);
	snprintf(buf, sizeof(buf), "%s/up", root);
	assert_int_equal(symlink("..", buf), 0);
	snprintf(buf, sizeof(buf), "%s/in", root);
	assert_int_equal(symlink("x", buf), 0);

	fd = cp_open_dir(rfd, "x/y/z", 1);
	assert_true(fd >= 0);
	close(fd);
	fd = cp_open_dir(rfd, "x/y", 0);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(cp_open_dir(rfd, "in/y", 0), -EXDEV);
	assert_int_equal(cp_open_dir(rfd, "esc", 1), -EXDEV);
	assert_int_equal(cp_open_dir(rfd, "esc/sub", 1), -EXDEV);
	assert_int_equal(cp_open_dir(rfd, "up/x", 0), -EXDEV);
	assert_int_equal(cp_open_dir(rfd, "missing", 0), -ENOENT);
	fd = cp_open_dir(rfd, "", 0);
	assert_true(fd >= 0);
	assert_int_equal(cp_openat_beneath(fd, "esc", O_RDONLY, 0), -EXDEV);
	assert_int_equal(cp_openat_beneath(fd, "in", O_RDONLY, 0), -EXDEV);
	assert_int_equal(cp_openat_beneath(fd, "x/y", O_RDONLY, 0), -EXDEV);
	assert_int_equal(cp_openat_beneath(fd, "..", O_RDONLY, 0), -EXDEV);
	{
		int f = cp_openat_beneath(fd, "new", O_RDWR | O_CREAT, 0600);

		assert_true(f >= 0);
		close(f);
	}
	close(fd);
	snprintf(buf, sizeof(buf), "%s/sub", out);
	assert_int_equal(access(buf, F_OK), -1);

	close(rfd);
	snprintf(buf, sizeof(buf), "rm -rf '%s' '%s'", root, out);
	assert_int_equal(system(buf), 0);
	cp_path_use_openat2(1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(accepted), cmocka_unit_test(refused),	    cmocka_unit_test(split),
	    cmocka_unit_test(beneath),	cmocka_unit_test(beneath_fallback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
