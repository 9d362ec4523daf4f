/*
 * copy_path.c - rk serve's path checks and lookups (tools/rk/copy/copy_path.c)
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
#include "trap_tree.h"

#define MAX_NAMES 8

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
	trap_inside(dfd);
	fd = cp_openat_beneath(dfd, leaf, O_RDONLY | O_NONBLOCK, 0);
	if (fd >= 0) {
		trap_inside(fd);
		close(fd);
	}
	cp_temp_name(leaf, temp, sizeof(temp));
	fd = cp_openat_beneath(dfd, temp, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		struct stat st;

		trap_inside(fd);
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
			trap_inside(dfd);
			close(dfd);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trap_snap before, after;
	unsigned flags;
	size_t pos = 1;
	int rootfd, fd0;

	if (size < 1)
		return 0;
	trap_setup();
	fd0 = fuzz_lowest_fd();
	trap_remove();
	trap_build();
	trap_snap_take(&before);
	flags = data[0];
	cp_path_use_openat2(!(flags & 1));
	rootfd = open(trap_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(rootfd >= 0);
	for (int i = 0; i < MAX_NAMES && pos < size; i++) {
		const uint8_t *nl = memchr(data + pos, '\n', size - pos);
		size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;

		one_name(rootfd, (const char *)data + pos, len, flags);
		pos += len + 1;
	}
	close(rootfd);
	cp_path_use_openat2(1);
	trap_snap_take(&after);
	trap_snap_same(&before, &after);
	trap_remove();
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
