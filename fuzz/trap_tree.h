/*
 * trap_tree.h - a fresh served directory DIR for every fuzz input, full of
 * symlinks that lead out (absolute, relative, dangling, to "..", in a
 * loop), existing files and directories (DIR/exists, DIR/sub/x), a FIFO,
 * and hard links to a file outside planted under ordinary and temporary
 * (".NAME.rkpart") names, next to a directory OUT outside DIR holding
 * the files they point at; and a snapshot of what must never change
 * outside DIR. Shared by copy_path.c and copy_session.c; single-threaded.
 */
#ifndef RK_TRAP_TREE_H
#define RK_TRAP_TREE_H

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>

extern char trap_run[PATH_MAX]; /* holds DIR and OUT */
extern char trap_dir[PATH_MAX]; /* DIR, the served directory */
extern char trap_out[PATH_MAX]; /* OUT, outside DIR */

/* What must not change outside DIR. */
struct trap_snap {
	struct stat st[4];  /* out/secret, out/lonely, out, run */
	char names[3][256]; /* entries of out, out/sub, run */
	char secret[16], lonely[16];
};

/* trap_setup - once per process: a private temporary base, removed at exit. */
void trap_setup(void);
/* trap_build - the tree, afresh (after trap_remove). */
void trap_build(void);
/* trap_remove - all of it. */
void trap_remove(void);
void trap_snap_take(struct trap_snap *s);
/*
 * trap_snap_same - abort unless nothing outside DIR changed between @a and
 * @b: same inodes, modes, sizes, contents and entries; a file outside may
 * have fewer links (a planted hard link in DIR replaced), never more.
 */
void trap_snap_same(const struct trap_snap *a, const struct trap_snap *b);
/* trap_inside - abort unless the kernel's name for @fd is DIR or below it. */
void trap_inside(int fd);
/* trap_read_small - the first @len - 1 bytes of @path, NUL-terminated. */
void trap_read_small(const char *path, char *buf, size_t len);

#endif
