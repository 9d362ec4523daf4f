/*
 * trap_tree.c - the served directory full of traps that the fuzz targets
 * of rk serve's file handling run on (see trap_tree.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "trap_tree.h"

static char base[PATH_MAX]; /* holds run/, rebuilt for every input */
char trap_run[PATH_MAX], trap_dir[PATH_MAX], trap_out[PATH_MAX];

static void remove_tree(const char *path);

static void cleanup(void)
{
	if (base[0])
		remove_tree(base);
}

void trap_setup(void)
{
	const char *tmp = getenv("TMPDIR");

	if (base[0])
		return;
	snprintf(base, sizeof(base), "%s/rk-fuzz-traps.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	FUZZ_CHECK(mkdtemp(base) != NULL);
	FUZZ_CHECK((size_t)snprintf(trap_run, sizeof(trap_run), "%s/run", base) < sizeof(trap_run));
	FUZZ_CHECK((size_t)snprintf(trap_dir, sizeof(trap_dir), "%s/dir", trap_run) <
		   sizeof(trap_dir));
	FUZZ_CHECK((size_t)snprintf(trap_out, sizeof(trap_out), "%s/out", trap_run) <
		   sizeof(trap_out));
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
	FUZZ_CHECK((size_t)snprintf(buf, PATH_MAX, "%s/%s", d, name) < PATH_MAX);
}

static void symlink_in(const char *target, const char *name)
{
	char p[PATH_MAX];

	at(p, trap_dir, name);
	FUZZ_CHECK(symlink(target, p) == 0);
}

void trap_build(void)
{
	char p[PATH_MAX], q[PATH_MAX];

	FUZZ_CHECK(mkdir(trap_run, 0755) == 0 && mkdir(trap_dir, 0755) == 0 &&
		   mkdir(trap_out, 0755) == 0);
	at(p, trap_out, "sub");
	FUZZ_CHECK(mkdir(p, 0755) == 0);
	at(p, trap_out, "secret");
	put_file(p, "secret", 0600);
	at(p, trap_out, "lonely");
	put_file(p, "lonely", 0600);
	/* symlinks that leave DIR */
	symlink_in(trap_out, "abs");
	symlink_in("../out", "rel");
	symlink_in("..", "up");
	symlink_in("../out/secret", "file-out");
	symlink_in("../out/lonely", "lonely");
	symlink_in("../out/new", "dangling");
	at(p, trap_out, "newdir");
	symlink_in(p, "dangling-abs");
	symlink_in("loop", "loop");
	/* inside: a directory, a symlink to it, files, a FIFO */
	at(p, trap_dir, "sub");
	FUZZ_CHECK(mkdir(p, 0755) == 0);
	at(p, trap_dir, "sub/back");
	FUZZ_CHECK(symlink("../../out", p) == 0);
	symlink_in("sub", "in");
	at(p, trap_dir, "exists");
	put_file(p, "exists", 0644);
	at(p, trap_dir, "sub/x");
	put_file(p, "x", 0644);
	at(p, trap_dir, "fifo");
	FUZZ_CHECK(mkfifo(p, 0644) == 0);
	/* hard links to out/secret under plain and temporary names */
	at(q, trap_out, "secret");
	at(p, trap_dir, "hl");
	FUZZ_CHECK(link(q, p) == 0);
	at(p, trap_dir, ".hl.rkpart");
	FUZZ_CHECK(link(q, p) == 0);
	at(p, trap_dir, ".exists.rkpart");
	FUZZ_CHECK(link(q, p) == 0);
	at(p, trap_dir, "sub/.x.rkpart");
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

void trap_read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	FUZZ_CHECK(fd >= 0);
	memset(buf, 0, len);
	n = read(fd, buf, len - 1);
	FUZZ_CHECK(n >= 0);
	close(fd);
}

void trap_snap_take(struct trap_snap *s)
{
	char p[PATH_MAX];

	memset(s, 0, sizeof(*s));
	at(p, trap_out, "secret");
	FUZZ_CHECK(lstat(p, &s->st[0]) == 0);
	trap_read_small(p, s->secret, sizeof(s->secret));
	at(p, trap_out, "lonely");
	FUZZ_CHECK(lstat(p, &s->st[1]) == 0);
	trap_read_small(p, s->lonely, sizeof(s->lonely));
	FUZZ_CHECK(lstat(trap_out, &s->st[2]) == 0);
	FUZZ_CHECK(lstat(trap_run, &s->st[3]) == 0);
	list_names(trap_out, s->names[0], sizeof(s->names[0]));
	at(p, trap_out, "sub");
	list_names(p, s->names[1], sizeof(s->names[1]));
	list_names(trap_run, s->names[2], sizeof(s->names[2]));
}

void trap_snap_same(const struct trap_snap *a, const struct trap_snap *b)
{
	for (int i = 0; i < 4; i++) {
		FUZZ_CHECK(a->st[i].st_ino == b->st[i].st_ino);
		FUZZ_CHECK(a->st[i].st_mode == b->st[i].st_mode);
		/* Fewer links is a planted name in DIR replaced (--force); more is a link made. */
		FUZZ_CHECK(b->st[i].st_nlink <= a->st[i].st_nlink);
		FUZZ_CHECK(a->st[i].st_size == b->st[i].st_size);
	}
	for (int i = 0; i < 3; i++)
		FUZZ_CHECK(strcmp(a->names[i], b->names[i]) == 0);
	FUZZ_CHECK(strcmp(a->secret, b->secret) == 0 && strcmp(a->lonely, b->lonely) == 0);
}

/* The kernel's name for @fd is DIR or below it. */
void trap_inside(int fd)
{
	char link[64], path[PATH_MAX];
	size_t dl = strlen(trap_dir);
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	FUZZ_CHECK(n > 0);
	path[n] = '\0';
	if (strncmp(path, trap_dir, dl) != 0 || (path[dl] != '\0' && path[dl] != '/')) {
		fprintf(stderr, "invariant failed: opened outside the served directory: %s\n",
			path);
		abort();
	}
}

void trap_remove(void)
{
	remove_tree(trap_run);
}
