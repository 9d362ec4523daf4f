/*
 * copy_path.c - rk serve's path checks and lookups (tools/rk/copy_path.c)
 * on a trap tree: for every input a fresh served directory DIR, full of
 * symlinks that lead out (absolute, relative, dangling, to "..", in a
 * loop), existing files and directories, a FIFO, and hard links to a file
 * outside planted under ordinary and temporary (".NAME.rkpart") names,
 * next to an outside directory OUT holding the files they point at.
 *
 * Input: one byte of flags (bit 0: the walk without openat2; bit 1: create
 * missing directories; bit 2: also open the whole name as a directory),
 * then up to MAX_NAMES names separated by '\n' (itself a refused byte).
 *
 * For each name, asserts:
 *  - cp_path_check accepts only a relative name of plain, printable
 *    components within the length limits, none "." or ".." or a temporary;
 *  - cp_path_split gives back parent and leaf that join to the name;
 *  - every directory cp_open_dir opens or creates, and every file
 *    cp_openat_beneath opens, is inside DIR (by the kernel's own name for
 *    the fd), whatever symlinks the tree holds;
 *  - a temporary created the way a receiver must (O_CREAT | O_EXCL) is a
 *    new file with one link, never a planted link to a file outside.
 * And after all names: nothing outside DIR was created, removed, written
 * or had its mode changed; no fd is left open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy_path.h"
#include "copy_proto.h"
#include "fuzz.h"

#define MAX_NAMES 8

static char base[PATH_MAX]; /* holds run/, rebuilt for every input */
static char run[PATH_MAX], dir[PATH_MAX], out[PATH_MAX];

/* What must not change outside DIR. */
struct snap {
	struct stat st[4];  /* out/secret, out/lonely, out, run */
	char names[3][256]; /* entries of out, out/sub, run */
	char secret[16], lonely[16];
};

static void remove_tree(const char *path);

static void cleanup(void)
{
	if (base[0])
		remove_tree(base);
}

static void setup_once(void)
{
	const char *tmp = getenv("TMPDIR");

	if (base[0])
		return;
	snprintf(base, sizeof(base), "%s/rk-fuzz-path.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	FUZZ_CHECK(mkdtemp(base) != NULL);
	snprintf(run, sizeof(run), "%s/run", base);
	snprintf(dir, sizeof(dir), "%s/dir", run);
	snprintf(out, sizeof(out), "%s/out", run);
	atexit(cleanup);
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static void remove_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void put_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static void at(char *buf, const char *d, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", d, name);
}

static void symlink_in(const char *target, const char *name)
{
	char p[PATH_MAX];

	at(p, dir, name);
	FUZZ_CHECK(symlink(target, p) == 0);
}

static void build_tree(void)
{
	char p[PATH_MAX], q[PATH_MAX];

	FUZZ_CHECK(mkdir(run, 0755) == 0 && mkdir(dir, 0755) == 0 && mkdir(out, 0755) == 0);
	at(p, out, "sub");
	FUZZ_CHECK(mkdir(p, 0755) == 0);
	at(p, out, "secret");
	put_file(p, "secret", 0600);
	at(p, out, "lonely");
	put_file(p, "lonely", 0600);
	/* symlinks that leave DIR */
	symlink_in(out, "abs");
	symlink_in("../out", "rel");
	symlink_in("..", "up");
	symlink_in("../out/secret", "file-out");
	symlink_in("../out/lonely", "lonely");
	symlink_in("../out/new", "dangling");
	at(p, out, "newdir");
	symlink_in(p, "dangling-abs");
	symlink_in("loop", "loop");
	/* inside: a directory, a symlink to it, files, a FIFO */
	at(p, dir, "sub");
	FUZZ_CHECK(mkdir(p, 0755) == 0);
	at(p, dir, "sub/back");
	FUZZ_CHECK(symlink("../../out", p) == 0);
	symlink_in("sub", "in");
	at(p, dir, "exists");
	put_file(p, "exists", 0644);
	at(p, dir, "sub/x");
	put_file(p, "x", 0644);
	at(p, dir, "fifo");
	FUZZ_CHECK(mkfifo(p, 0644) == 0);
	/* hard links to out/secret under plain and temporary names */
	at(q, out, "secret");
	at(p, dir, "hl");
	FUZZ_CHECK(link(q, p) == 0);
	at(p, dir, ".hl.rkpart");
	FUZZ_CHECK(link(q, p) == 0);
	at(p, dir, ".exists.rkpart");
	FUZZ_CHECK(link(q, p) == 0);
	at(p, dir, "sub/.x.rkpart");
	FUZZ_CHECK(link(q, p) == 0);
}

/* Entry names of @d, sorted by the order readdir gives (stable for an unchanged directory). */
static void list_names(const char *d, char *buf, size_t len)
{
	DIR *h = opendir(d);
	struct dirent *e;
	size_t n = 0;

	FUZZ_CHECK(h != NULL);
	buf[0] = '\0';
	while ((e = readdir(h))) {
		int w = snprintf(buf + n, len - n, "%s/", e->d_name);

		FUZZ_CHECK(w > 0 && (size_t)w < len - n);
		n += (size_t)w;
	}
	closedir(h);
}

static void read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	FUZZ_CHECK(fd >= 0);
	memset(buf, 0, len);
	n = read(fd, buf, len - 1);
	FUZZ_CHECK(n >= 0);
	close(fd);
}

static void take_snap(struct snap *s)
{
	char p[PATH_MAX];

	memset(s, 0, sizeof(*s));
	at(p, out, "secret");
	FUZZ_CHECK(lstat(p, &s->st[0]) == 0);
	read_small(p, s->secret, sizeof(s->secret));
	at(p, out, "lonely");
	FUZZ_CHECK(lstat(p, &s->st[1]) == 0);
	read_small(p, s->lonely, sizeof(s->lonely));
	FUZZ_CHECK(lstat(out, &s->st[2]) == 0);
	FUZZ_CHECK(lstat(run, &s->st[3]) == 0);
	list_names(out, s->names[0], sizeof(s->names[0]));
	at(p, out, "sub");
	list_names(p, s->names[1], sizeof(s->names[1]));
	list_names(run, s->names[2], sizeof(s->names[2]));
}

static void same_snap(const struct snap *a, const struct snap *b)
{
	for (int i = 0; i < 4; i++) {
		FUZZ_CHECK(a->st[i].st_ino == b->st[i].st_ino);
		FUZZ_CHECK(a->st[i].st_mode == b->st[i].st_mode);
		FUZZ_CHECK(a->st[i].st_nlink == b->st[i].st_nlink);
		FUZZ_CHECK(a->st[i].st_size == b->st[i].st_size);
	}
	for (int i = 0; i < 3; i++)
		FUZZ_CHECK(strcmp(a->names[i], b->names[i]) == 0);
	FUZZ_CHECK(strcmp(a->secret, b->secret) == 0 && strcmp(a->lonely, b->lonely) == 0);
}

/* The kernel's name for @fd is DIR or below it. */
static void inside(int fd)
{
	char link[64], path[PATH_MAX];
	size_t dl = strlen(dir);
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	FUZZ_CHECK(n > 0);
	path[n] = '\0';
	if (strncmp(path, dir, dl) != 0 || (path[dl] != '\0' && path[dl] != '/')) {
		fprintf(stderr, "invariant failed: opened outside the served directory: %s\n",
			path);
		abort();
	}
}

/* The lexical rules, said again independently of cp_path_check. */
static void check_accepted(const char *name, size_t len)
{
	size_t start = 0;

	FUZZ_CHECK(len >= 1 && len <= CP_NAME_MAX && name[0] != '/');
	for (size_t i = 0; i <= len; i++) {
		size_t n = i - start;
		const char *c = name + start;

		if (i < len && name[i] != '/') {
			FUZZ_CHECK((unsigned char)name[i] >= 0x20 && name[i] != 0x7f);
			continue;
		}
		FUZZ_CHECK(n >= 1 && n <= CP_COMP_MAX);
		FUZZ_CHECK(!(n == 1 && c[0] == '.') && !(n == 2 && c[0] == '.' && c[1] == '.'));
		FUZZ_CHECK(!(n > 7 && c[0] == '.' && memcmp(c + n - 7, ".rkpart", 7) == 0));
		start = i + 1;
	}
}

static void one_name(int rootfd, const char *name, size_t len, unsigned flags)
{
	char parent[CP_NAME_MAX + 1], leaf[CP_NAME_MAX + 1], temp[256], full[CP_NAME_MAX + 1];
	int dfd, fd;

	if (cp_path_check(name, len))
		return;
	check_accepted(name, len);
	cp_path_split(name, len, parent, leaf);
	FUZZ_CHECK(leaf[0] != '\0');
	if (parent[0]) {
		FUZZ_CHECK(strlen(parent) + 1 + strlen(leaf) == len);
		FUZZ_CHECK(memcmp(parent, name, strlen(parent)) == 0 &&
			   name[strlen(parent)] == '/');
	}
	FUZZ_CHECK(memcmp(name + len - strlen(leaf), leaf, strlen(leaf)) == 0);
	dfd = cp_open_dir(rootfd, parent, flags & 2);
	if (dfd < 0)
		return;
	inside(dfd);
	fd = cp_openat_beneath(dfd, leaf, O_RDONLY | O_NONBLOCK, 0);
	if (fd >= 0) {
		inside(fd);
		close(fd);
	}
	cp_temp_name(leaf, temp, sizeof(temp));
	fd = cp_openat_beneath(dfd, temp, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		struct stat st;

		inside(fd);
		FUZZ_CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1);
		FUZZ_CHECK(st.st_size == 0 && write(fd, "x", 1) == 1);
		close(fd);
	}
	close(dfd);
	if (flags & 4) {
		memcpy(full, name, len);
		full[len] = '\0';
		dfd = cp_open_dir(rootfd, full, flags & 2);
		if (dfd >= 0) {
			inside(dfd);
			close(dfd);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snap before, after;
	unsigned flags;
	size_t pos = 1;
	int rootfd, fd0;

	if (size < 1)
		return 0;
	setup_once();
	fd0 = fuzz_lowest_fd();
	remove_tree(run);
	build_tree();
	take_snap(&before);
	flags = data[0];
	cp_path_use_openat2(!(flags & 1));
	rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(rootfd >= 0);
	for (int i = 0; i < MAX_NAMES && pos < size; i++) {
		const uint8_t *nl = memchr(data + pos, '\n', size - pos);
		size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;

		one_name(rootfd, (const char *)data + pos, len, flags);
		pos += len + 1;
	}
	close(rootfd);
	cp_path_use_openat2(1);
	take_snap(&after);
	same_snap(&before, &after);
	remove_tree(run);
	FUZZ_CHECK(fuzz_lowest_fd() == fd0);
	return 0;
}

static void seed(fuzz_emit_fn *emit, const char *name, unsigned flags, const char *names)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%c%s", (char)flags, names);

	emit(name, buf, (size_t)n);
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static const char traps[] = "abs/x\nrel/x\nup/out/x\nfile-out\nlonely\ndangling\n"
				    "dangling-abs/x\nloop/x";
	static const char inside[] = "a/b/c\nin/y\nsub/back/z\nexists\nhl\nsub/x\nfifo\nsub/in";

	seed(emit, "traps-create", 2 | 4, traps);
	seed(emit, "traps-walk", 1 | 2 | 4, traps);
	seed(emit, "inside-create", 2 | 4, inside);
	seed(emit, "inside-walk", 1 | 2, inside);
	seed(emit, "refused", 2, "../x\n/abs\na//b\n./a\n.x.rkpart\na/./b\nb/..\n");
}
