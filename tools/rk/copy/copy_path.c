/*
 * copy_path.c - see copy_path.h. The lexical check rejects what is never
 * legitimate; openat2(RESOLVE_BENEATH) handles what only the file system
 * knows (symlinks, including ones created after the check).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/openat2.h>

#include "copy_path.h"
#include "copy_proto.h"

#define TEMP_SUFFIX ".rkpart"

static int is_temp_name(const char *c, size_t n)
{
	size_t sl = strlen(TEMP_SUFFIX);

	return n > sl && c[0] == '.' && memcmp(c + n - sl, TEMP_SUFFIX, sl) == 0;
}

static int component_ok(const char *c, size_t n)
{
	if (n == 0 || n > CP_COMP_MAX)
		return 0;
	if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
		return 0;
	return !is_temp_name(c, n);
}

int cp_path_check(const char *name, size_t len)
{
	size_t start = 0;

	if (!name || len == 0 || len > CP_NAME_MAX || name[0] == '/')
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)name[i];

		/* No NUL (C strings would cut the name), no control characters
		 * (they end up in logs and terminals). */
		if (ch < 0x20 || ch == 0x7f)
			return -EINVAL;
	}
	for (size_t i = 0, depth = 0; i <= len; i++) {
		if (i == len || name[i] == '/') {
			if (!component_ok(name + start, i - start) || ++depth > CP_PATH_DEPTH)
				return -EINVAL;
			start = i + 1;
		}
	}
	return 0;
}

void cp_path_split(const char *name, size_t len, char *parent, char *leaf)
{
	size_t cut = len;

	while (cut > 0 && name[cut - 1] != '/')
		cut--;
	if (cut) {
		memcpy(parent, name, cut - 1);
		parent[cut - 1] = '\0';
	} else {
		parent[0] = '\0';
	}
	memcpy(leaf, name + cut, len - cut);
	leaf[len - cut] = '\0';
}

void cp_temp_name(const char *leaf, char *out, size_t out_len)
{
	snprintf(out, out_len, ".%s" TEMP_SUFFIX, leaf);
}

/*
 * openat2 arrived in Linux 5.6; older kernels (RHEL 8's 4.18) and valgrind
 * answer ENOSYS. Then every lookup walks one component at a time with
 * O_NOFOLLOW from an fd we hold: no symlink is followed at all (stricter
 * than RESOLVE_BENEATH, which follows those that stay inside), and the
 * names were checked for ".." before they got here.
 */
static atomic_int use_openat2 = 1;

void cp_path_use_openat2(int on)
{
	atomic_store(&use_openat2, on);
}

static int openat2_beneath(int dirfd, const char *name, int flags, mode_t mode, uint64_t resolve)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC),
	    .mode = (flags & O_CREAT) ? mode : 0,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | resolve,
	};
	long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));

	if (fd < 0 && errno == ENOSYS)
		atomic_store(&use_openat2, 0);
	return fd < 0 ? -errno : (int)fd;
}

/* One component @name under @dirfd, never through a symlink (-EXDEV). */
static int open_component(int dirfd, const char *name, int flags, mode_t mode)
{
	struct stat st;
	int fd;

	if (strchr(name, '/') || !strcmp(name, ".."))
		return -EXDEV;
	fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd >= 0)
		return fd;
	fd = -errno;
	if ((fd == -ELOOP || fd == -ENOTDIR) &&
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
		return -EXDEV;
	return fd;
}

int cp_openat_beneath(int dirfd, const char *name, int flags, mode_t mode)
{
	int fd;

	if (atomic_load(&use_openat2)) {
		fd = openat2_beneath(dirfd, name, flags | O_NOFOLLOW, mode, RESOLVE_NO_SYMLINKS);
		if (fd != -ENOSYS)
			return fd;
	}
	return open_component(dirfd, name, flags, mode);
}

int cp_open_path_beneath(int rootfd, const char *rel, int flags)
{
	char comp[CP_NAME_MAX + 1];
	const char *p = rel;
	int parent, fd;

	if (strlen(rel) > CP_NAME_MAX)
		return -ENAMETOOLONG;
	if (atomic_load(&use_openat2)) {
		fd = openat2_beneath(rootfd, rel, flags | O_NOFOLLOW, 0, RESOLVE_NO_SYMLINKS);
		if (fd != -ENOSYS)
			return fd;
	}
	/* Without openat2: a component at a time, none of them a symlink. */
	parent = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0)
		return -errno;
	for (;;) {
		size_t n = strcspn(p, "/");

		memcpy(comp, p, n);
		comp[n] = '\0';
		p += n;
		if (!*p) {
			fd = open_component(parent, comp, flags, 0);
			close(parent);
			return fd;
		}
		p++;
		fd = open_component(parent, comp, O_RDONLY | O_DIRECTORY, 0);
		close(parent);
		if (fd < 0)
			return fd;
		parent = fd;
	}
}

/* cp_open_dir without openat2: from the top, a component at a time. */
static int open_dir_walk(int rootfd, const char *rel, int create)
{
	char comp[CP_NAME_MAX + 1];
	int parent = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
	const char *p = rel;

	if (parent < 0)
		return -errno;
	while (*p) {
		size_t n = strcspn(p, "/");

		memcpy(comp, p, n);
		comp[n] = '\0';
		p += n + (p[n] == '/');
		fd = open_component(parent, comp, O_RDONLY | O_DIRECTORY, 0);
		if (fd == -ENOENT && create) {
			if (mkdirat(parent, comp, 0755) && errno != EEXIST)
				fd = -errno;
			else
				fd = open_component(parent, comp, O_RDONLY | O_DIRECTORY, 0);
		}
		close(parent);
		if (fd < 0)
			return fd;
		parent = fd;
	}
	return parent;
}

int cp_open_dir(int rootfd, const char *rel, int create)
{
	char prefix[CP_NAME_MAX + 1];
	size_t len = strlen(rel), start = 0;
	int parent = -1, fd;

	if (len > CP_NAME_MAX)
		return -ENAMETOOLONG;
	if (!atomic_load(&use_openat2))
		return open_dir_walk(rootfd, rel, create);
	if (len == 0) {
		fd = openat2_beneath(rootfd, ".", O_RDONLY | O_DIRECTORY, 0, 0);
		return fd == -ENOSYS ? open_dir_walk(rootfd, rel, create) : fd;
	}
	/*
	 * Component by component, each lookup from the top: a symlink inside
	 * the tree that stays inside is followed, one that leaves is -EXDEV.
	 */
	for (size_t i = 0; i <= len; i++) {
		if (i < len && rel[i] != '/')
			continue;
		memcpy(prefix, rel, i);
		prefix[i] = '\0';
		fd = openat2_beneath(rootfd, prefix, O_RDONLY | O_DIRECTORY, 0, 0);
		if (fd == -ENOSYS) {
			if (parent >= 0)
				close(parent);
			return open_dir_walk(rootfd, rel, create);
		}
		if (fd == -ENOENT && create) {
			char comp[CP_NAME_MAX + 1];

			memcpy(comp, rel + start, i - start);
			comp[i - start] = '\0';
			if (mkdirat(parent >= 0 ? parent : rootfd, comp, 0755) && errno != EEXIST) {
				fd = -errno;
			} else {
				fd = openat2_beneath(rootfd, prefix, O_RDONLY | O_DIRECTORY, 0, 0);
			}
		}
		if (parent >= 0)
			close(parent);
		if (fd < 0)
			return fd;
		parent = fd;
		start = i + 1;
	}
	return parent;
}

int cp_dest_place(const char *dest, char *root, size_t root_len, char *leaf, size_t leaf_len)
{
	size_t n = strlen(dest);
	struct stat st;
	const char *slash;

	if (n == 0 || n >= root_len)
		return -1;
	if (dest[n - 1] == '/' || (stat(dest, &st) == 0 && S_ISDIR(st.st_mode))) {
		if (mkdir(dest, 0755) && errno != EEXIST)
			return -errno;
		if (stat(dest, &st) || !S_ISDIR(st.st_mode)) /* "file/": not a directory */
			return -ENOTDIR;
		snprintf(root, root_len, "%s", dest);
		leaf[0] = '\0';
		return 0;
	}
	slash = strrchr(dest, '/');
	if (slash) {
		snprintf(root, root_len, "%.*s", (int)(slash - dest + 1), dest);
		slash++;
	} else {
		snprintf(root, root_len, ".");
		slash = dest;
	}
	if (strlen(slash) >= leaf_len || !strcmp(slash, ".") || !strcmp(slash, ".."))
		return -1;
	snprintf(leaf, leaf_len, "%s", slash);
	return 0;
}
