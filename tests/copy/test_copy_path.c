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
	/* CP_PATH_DEPTH components, then one more */
	big[0] = '\0';
	for (int i = 0; i < CP_PATH_DEPTH; i++)
		strcat(big, i ? "/d" : "d");
	assert_int_equal(check(big), 0);
	strcat(big, "/d");
	assert_int_equal(check(big), -EINVAL);
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

/*
 * The tree both beneath tests walk: ROOT holds "esc" (a symlink to OUT,
 * outside), "up" (to "..") and "in" (to "x", inside).
 */
struct tree {
	char root[32], out[32];
	int rfd;
};

static int tree_setup(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));
	char esc[64], up[64], in[64];

	if (!t)
		return -1;
	snprintf(t->root, sizeof(t->root), "/tmp/rkpath.XXXXXX");
	snprintf(t->out, sizeof(t->out), "/tmp/rkpath-out.XXXXXX");
	t->rfd = -1;
	if (mkdtemp(t->root) && mkdtemp(t->out)) {
		snprintf(esc, sizeof(esc), "%s/esc", t->root);
		snprintf(up, sizeof(up), "%s/up", t->root);
		snprintf(in, sizeof(in), "%s/in", t->root);
		t->rfd = open(t->root, O_RDONLY | O_DIRECTORY);
	}
	if (t->rfd < 0 || symlink(t->out, esc) || symlink("..", up) || symlink("x", in)) {
		if (t->rfd >= 0)
			close(t->rfd);
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

static int tree_teardown(void **state)
{
	struct tree *t = *state;
	char buf[256];
	int r;

	/* nothing appeared outside */
	snprintf(buf, sizeof(buf), "%s/sub", t->out);
	r = access(buf, F_OK) == 0 ? -1 : 0;
	close(t->rfd);
	snprintf(buf, sizeof(buf), "rm -rf '%s' '%s'", t->root, t->out);
	if (system(buf))
		r = -1;
	free(t);
	cp_path_use_openat2(1);
	return r;
}

static void beneath(void **state)
{
	struct tree *t = *state;
	int fd;

	/* creating nested directories works */
	fd = cp_open_dir(t->rfd, "x/y/z", 1);
	assert_true(fd >= 0);
	close(fd);
	/* a symlink inside that stays inside is followed */
	fd = cp_open_dir(t->rfd, "in/y", 0);
	assert_true(fd >= 0);
	close(fd);
	/* symlinks that leave are refused, with or without create */
	assert_int_equal(cp_open_dir(t->rfd, "esc", 1), -EXDEV);
	assert_int_equal(cp_open_dir(t->rfd, "esc/sub", 1), -EXDEV);
	assert_int_equal(cp_open_dir(t->rfd, "up/x", 0), -EXDEV);
	/* a file opened beneath never follows a symlink */
	fd = cp_open_dir(t->rfd, "", 0);
	assert_true(fd >= 0);
	assert_true(cp_openat_beneath(fd, "esc", O_RDONLY, 0) < 0);
	assert_true(cp_openat_beneath(fd, "in", O_RDONLY, 0) < 0);
	close(fd);
}

/* A pulling client's DEST: into a directory (trailing '/' or existing), or onto a name. */
static void dest_place(void **state)
{
	struct tree *t = *state;
	char dest[128], want[160], root[128], leaf[64], small[4];
	struct stat st;

	/* a trailing '/': the directory receives, made when missing */
	snprintf(dest, sizeof(dest), "%s/new/", t->root);
	assert_int_equal(cp_dest_place(dest, root, sizeof(root), leaf, sizeof(leaf)), 0);
	assert_string_equal(root, dest);
	assert_string_equal(leaf, "");
	assert_int_equal(stat(dest, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	/* an existing directory without '/': the file lands inside it */
	snprintf(dest, sizeof(dest), "%s/new", t->root);
	assert_int_equal(cp_dest_place(dest, root, sizeof(root), leaf, sizeof(leaf)), 0);
	assert_string_equal(root, dest);
	assert_string_equal(leaf, "");
	/* any other name is what the one file becomes, in its parent */
	snprintf(dest, sizeof(dest), "%s/new/name", t->root);
	assert_int_equal(cp_dest_place(dest, root, sizeof(root), leaf, sizeof(leaf)), 0);
	snprintf(want, sizeof(want), "%s/new/", t->root);
	assert_string_equal(root, want);
	assert_string_equal(leaf, "name");
	assert_int_equal(cp_dest_place("plain", root, sizeof(root), leaf, sizeof(leaf)), 0);
	assert_string_equal(root, ".");
	assert_string_equal(leaf, "plain");
	/* nothing, "." or ".." as the last component, or too long: no destination */
	assert_int_equal(cp_dest_place("", root, sizeof(root), leaf, sizeof(leaf)), -1);
	assert_int_equal(cp_dest_place("nowhere/..", root, sizeof(root), leaf, sizeof(leaf)), -1);
	assert_int_equal(cp_dest_place("longname", root, sizeof(root), small, sizeof(small)), -1);
	assert_int_equal(cp_dest_place("abcdef/", small, sizeof(small), leaf, sizeof(leaf)), -1);
	/* a regular file where a directory is asked for */
	snprintf(dest, sizeof(dest), "%s/new/f", t->root);
	close(open(dest, O_WRONLY | O_CREAT, 0600));
	snprintf(dest, sizeof(dest), "%s/new/f/", t->root);
	assert_true(cp_dest_place(dest, root, sizeof(root), leaf, sizeof(leaf)) < -1);
}

/* Without openat2 (old kernels, valgrind): every symlink refused, the rest the same. */
static void beneath_fallback(void **state)
{
	struct tree *t = *state;
	int fd, f;

	cp_path_use_openat2(0);
	fd = cp_open_dir(t->rfd, "x/y/z", 1);
	assert_true(fd >= 0);
	close(fd);
	fd = cp_open_dir(t->rfd, "x/y", 0);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(cp_open_dir(t->rfd, "in/y", 0), -EXDEV);
	assert_int_equal(cp_open_dir(t->rfd, "esc", 1), -EXDEV);
	assert_int_equal(cp_open_dir(t->rfd, "esc/sub", 1), -EXDEV);
	assert_int_equal(cp_open_dir(t->rfd, "up/x", 0), -EXDEV);
	assert_int_equal(cp_open_dir(t->rfd, "missing", 0), -ENOENT);
	fd = cp_open_dir(t->rfd, "", 0);
	assert_true(fd >= 0);
	assert_int_equal(cp_openat_beneath(fd, "esc", O_RDONLY, 0), -EXDEV);
	assert_int_equal(cp_openat_beneath(fd, "in", O_RDONLY, 0), -EXDEV);
	assert_int_equal(cp_openat_beneath(fd, "x/y", O_RDONLY, 0), -EXDEV);
	assert_int_equal(cp_openat_beneath(fd, "..", O_RDONLY, 0), -EXDEV);
	f = cp_openat_beneath(fd, "new", O_RDWR | O_CREAT, 0600);
	assert_true(f >= 0);
	close(f);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(accepted),
	    cmocka_unit_test(refused),
	    cmocka_unit_test(split),
	    cmocka_unit_test_setup_teardown(beneath, tree_setup, tree_teardown),
	    cmocka_unit_test_setup_teardown(beneath_fallback, tree_setup, tree_teardown),
	    cmocka_unit_test_setup_teardown(dest_place, tree_setup, tree_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
