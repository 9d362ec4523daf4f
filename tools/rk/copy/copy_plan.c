/*
 * copy_plan.c - see copy_plan.h. The walk uses fstatat and openat only; it
 * never follows a directory symlink, so a tree with a loop cannot make it
 * spin.
 */
#define _GNU_SOURCE /* O_PATH */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "copy_path.h"
#include "copy_plan.h"

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 2);

	if (!s)
		return NULL;
	snprintf(s, la + lb + 2, "%s%s%s", a, la ? "/" : "", b);
	return s;
}

static int add(struct cp_plan *p, int is_dir, const char *src, char *dst, const struct stat *st,
	       char *why, size_t why_len)
{
	struct cp_item *it;

	/*
	 * RK_COPY_TEST_UNCHECKED_NAMES lets the tests send names this check
	 * would stop, to prove the server refuses them on its own.
	 */
	if (cp_path_check(dst, strlen(dst)) && !getenv("RK_COPY_TEST_UNCHECKED_NAMES")) {
		snprintf(why, why_len,
			 "%s: destination name '%s' refused (absolute, '..', empty or reserved "
			 "component, control character, or too long)",
			 src, dst);
		free(dst);
		return -2;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		struct cp_item *n = realloc(p->items, cap * sizeof(*n));

		if (!n) {
			free(dst);
			snprintf(why, why_len, "out of memory");
			return -1;
		}
		p->items = n;
		p->cap = cap;
	}
	it = &p->items[p->n];
	memset(it, 0, sizeof(*it));
	it->src = strdup(src);
	if (!it->src) {
		free(dst);
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	it->dst = dst;
	it->is_dir = is_dir;
	it->mode = st->st_mode & 07777;
	if (!is_dir) {
		it->size = (uint64_t)st->st_size;
		p->bytes += it->size;
		p->files++;
	} else {
		p->dirs++;
	}
	p->n++;
	return 0;
}

/*
 * How sources are found. A client's own files (@confined 0): by path from
 * the working directory, a top-level symlink followed, inside a tree a
 * symlink to a regular file taken as that file. A server's files for a
 * client that pulls (@confined 1): beneath @rootfd, never through a
 * symlink (cp_openat_beneath), and symlinks inside a tree skipped.
 */
struct walker {
	int rootfd;
	int confined;
	size_t max_items;
};

static int too_many(const struct walker *w, struct cp_plan *p, char *why, size_t why_len)
{
	if (!w->max_items || p->n < w->max_items)
		return 0;
	snprintf(why, why_len, "limit: more than %zu files and directories", w->max_items);
	return CP_PLAN_LIMIT;
}

/* Walk the open directory @fd (taken over) named @src, planning under @dst. */
static int walk(const struct walker *w, struct cp_plan *p, int fd, const char *src, const char *dst,
		char *why, size_t why_len)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	int r = 0;

	if (!d) {
		snprintf(why, why_len, "%s: %s", src, strerror(errno));
		close(fd);
		return -1;
	}
	while (!r && (errno = 0, e = readdir(d))) {
		char *s, *t;
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		s = join(src, e->d_name);
		t = join(dst, e->d_name);
		if (!s || !t) {
			free(s);
			free(t);
			snprintf(why, why_len, "out of memory");
			r = -1;
			break;
		}
		/*
		 * A server's tree may hold names no peer may be sent (its own
		 * temporaries, control characters, trees too deep) and entries
		 * that vanish while we look: those are skipped, not the pull.
		 */
		if (w->confined && cp_path_check(t, strlen(t)) &&
		    !getenv("RK_COPY_TEST_UNCHECKED_NAMES")) {
			free(s);
			free(t);
			continue;
		}
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			if (!(w->confined && errno == ENOENT)) {
				snprintf(why, why_len, "%s: %s", s, strerror(errno));
				r = -1;
			}
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0 && w->confined &&
			    (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)) {
				/* gone or replaced since fstatat: skipped */
			} else if (sub < 0) {
				snprintf(why, why_len, "%s: %s", s, strerror(errno));
				r = -1;
			} else if ((r = too_many(w, p, why, why_len))) {
				close(sub);
			} else {
				/* add() takes t (keeps it or frees it); walk() takes sub. */
				r = add(p, 1, s, t, &st, why, why_len);
				if (!r)
					r = walk(w, p, sub, s, t, why, why_len);
				else
					close(sub);
				t = NULL;
			}
		} else if (w->confined && S_ISREG(st.st_mode) && st.st_nlink > 1) {
			/* A hard link may lead out of the served directory: not served. */
			if (!p->linked++)
				snprintf(p->linked_name, sizeof(p->linked_name), "%s", s);
		} else if (S_ISREG(st.st_mode) ||
			   (!w->confined && S_ISLNK(st.st_mode) &&
			    fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))) {
			/* a symlink counts only when it leads to a regular file */
			r = too_many(w, p, why, why_len);
			if (!r) {
				r = add(p, 0, s, t, &st, why, why_len);
				t = NULL;
			}
		} else if (!w->confined) {
			fprintf(stderr, "rk copy: skipping %s (not a regular file or directory)\n",
				s);
		}
		free(s);
		free(t);
	}
	if (!r && errno) {
		snprintf(why, why_len, "%s: %s", src, strerror(errno));
		r = -1;
	}
	closedir(d);
	return r;
}

/*
 * Whether directory @src names its contents: a trailing '/', or a last
 * component "." or ".." (which have no name of their own to land under).
 */
static int names_contents(const char *src)
{
	size_t n = strlen(src);
	const char *last = strrchr(src, '/');

	last = last ? last + 1 : src;
	return (n > 0 && src[n - 1] == '/') || !strcmp(last, ".") || !strcmp(last, "..");
}

/* The last component of @src, without trailing slashes, into @out. */
static int base_name(const char *src, char *out, size_t out_len)
{
	size_t end = strlen(src), start;

	while (end > 1 && src[end - 1] == '/')
		end--;
	start = end;
	while (start > 0 && src[start - 1] != '/')
		start--;
	if (end - start == 0 || end - start >= out_len)
		return -1;
	memcpy(out, src + start, end - start);
	out[end - start] = '\0';
	if (!strcmp(out, ".") || !strcmp(out, "..") || !strcmp(out, "/"))
		return -1;
	return 0;
}

/*
 * Find source @src: *@st filled and, for a directory, *@fd open on it
 * (else -1). Confined, @src is first made a path under the root: trailing
 * '/' and a last "." dropped into @rel (then it names its contents, as
 * *@contents says), and refused unless it passes cp_path_check.
 */
static int open_source(const struct walker *w, const char *src, char *rel, size_t rel_len,
		       struct stat *st, int *fd, int *contents, char *why, size_t why_len)
{
	size_t n = strlen(src);
	int pfd;

	*fd = -1;
	*contents = names_contents(src);
	if (!w->confined) {
		if (n >= rel_len) {
			snprintf(why, why_len, "%s: path too long", src);
			return -1;
		}
		memcpy(rel, src, n + 1);
		if (stat(src, st)) {
			snprintf(why, why_len, "%s: %s", src, strerror(errno));
			return -1;
		}
		if (S_ISDIR(st->st_mode)) {
			*fd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (*fd < 0) {
				snprintf(why, why_len, "%s: %s", src, strerror(errno));
				return -1;
			}
		}
		return 0;
	}
	while (n > 0 && src[n - 1] == '/')
		n--;
	if (n == 1 && src[0] == '.')
		n = 0;
	else if (n >= 2 && src[n - 1] == '.' && src[n - 2] == '/')
		n -= 2;
	if (n >= rel_len || n > CP_NAME_MAX) {
		snprintf(why, why_len, "%.64s...: path too long", src);
		return -2;
	}
	memcpy(rel, src, n);
	rel[n] = '\0';
	*contents |= n == 0;
	if (n && cp_path_check(rel, n)) {
		snprintf(why, why_len,
			 "%.200s: not a path under the served directory (absolute, '..', empty "
			 "component or control character)",
			 src);
		return -2;
	}
	/* O_PATH: nothing is opened for reading until we know it is a file or directory. */
	pfd = n ? cp_open_path_beneath(w->rootfd, rel, O_PATH)
		: openat(w->rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0) {
		int e = n ? -pfd : errno;

		snprintf(why, why_len, "%.200s: %s", src,
			 e == ELOOP || e == EXDEV ? "a symbolic link (not followed)" : strerror(e));
		return -1;
	}
	if (fstat(pfd, st)) {
		snprintf(why, why_len, "%.200s: %s", src, strerror(errno));
		close(pfd);
		return -1;
	}
	if (S_ISLNK(st->st_mode)) {
		/* O_PATH | O_NOFOLLOW opens a last component that is a link as the link. */
		snprintf(why, why_len, "%.200s: a symbolic link (not followed)", src);
		close(pfd);
		return -1;
	}
	if (S_ISDIR(st->st_mode)) {
		*fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (*fd < 0) {
			snprintf(why, why_len, "%.200s: %s", src, strerror(errno));
			close(pfd);
			return -1;
		}
	}
	close(pfd);
	return 0;
}

static int plan_build(const struct walker *w, struct cp_plan *p, char *const *srcs, int nsrc,
		      const char *dest, int recursive, char *why, size_t why_len)
{
	char dir[CP_NAME_MAX + 2], base[256], rel[PATH_MAX];
	size_t dl = strlen(dest);
	int dest_is_dir, r;

	memset(p, 0, sizeof(*p));
	p->confined = w->confined;
	p->rootfd = w->rootfd;
	if (dl > CP_NAME_MAX) {
		snprintf(why, why_len, "destination path too long");
		return -1;
	}
	memcpy(dir, dest, dl + 1);
	dest_is_dir = dl == 0 || dest[dl - 1] == '/';
	while (dl > 0 && dir[dl - 1] == '/')
		dir[--dl] = '\0';
	if (!strcmp(dir, "."))
		dir[0] = '\0';
	dest_is_dir |= dir[0] == '\0';
	for (int i = 0; i < nsrc; i++) {
		struct stat st;
		int fd, contents;
		char *dst;

		r = open_source(w, srcs[i], rel, sizeof(rel), &st, &fd, &contents, why, why_len);
		if (r)
			return r;
		if (S_ISDIR(st.st_mode) && !recursive) {
			snprintf(why, why_len, "%.200s: is a directory (use -r)", srcs[i]);
			close(fd);
			return -1;
		}
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
			snprintf(why, why_len, "%.200s: not a regular file", srcs[i]);
			return -1;
		}
		if (w->confined && S_ISREG(st.st_mode) && st.st_nlink > 1) {
			snprintf(why, why_len,
				 "%.200s: a file with %ju hard links (not served: a link may lead "
				 "outside the served directory)",
				 srcs[i], (uintmax_t)st.st_nlink);
			return -2;
		}
		r = too_many(w, p, why, why_len);
		if (r) {
			if (fd >= 0)
				close(fd);
			return r;
		}
		if (S_ISDIR(st.st_mode) && contents) {
			/* DEST itself is the directory; its top needs no entry. */
			r = 0;
			if (dir[0]) {
				dst = strdup(dir);
				if (!dst) {
					snprintf(why, why_len, "out of memory");
					close(fd);
					return -1;
				}
				r = add(p, 1, rel, dst, &st, why, why_len);
			}
			if (!r)
				r = walk(w, p, fd, rel, dir, why, why_len);
			else
				close(fd);
			if (r)
				return r;
			continue;
		}
		if (base_name(rel, base, sizeof(base))) {
			snprintf(why, why_len,
				 "%.200s: cannot tell its name; name the file or directory itself",
				 srcs[i]);
			if (fd >= 0)
				close(fd);
			return -1;
		}
		dst = join(dir, base);
		if (!dst) {
			snprintf(why, why_len, "out of memory");
			if (fd >= 0)
				close(fd);
			return -1;
		}
		r = add(p, S_ISDIR(st.st_mode), rel, dst, &st, why, why_len);
		if (!r && fd >= 0)
			r = walk(w, p, fd, rel, p->items[p->n - 1].dst, why, why_len);
		else if (fd >= 0)
			close(fd);
		if (r)
			return r;
		/* One file onto a DEST that may be a directory: the server decides. */
		p->items[p->n - 1].into = nsrc == 1 && S_ISREG(st.st_mode) && !dest_is_dir;
	}
	return 0;
}

int cp_plan_build(struct cp_plan *p, char *const *srcs, int nsrc, const char *dest, int recursive,
		  char *why, size_t why_len)
{
	const struct walker w = {.rootfd = AT_FDCWD};

	return plan_build(&w, p, srcs, nsrc, dest, recursive, why, why_len);
}

int cp_plan_build_beneath(struct cp_plan *p, int rootfd, char *const *srcs, int nsrc,
			  const char *dest, int recursive, size_t max_items, char *why,
			  size_t why_len)
{
	const struct walker w = {.rootfd = rootfd, .confined = 1, .max_items = max_items};

	return plan_build(&w, p, srcs, nsrc, dest, recursive, why, why_len);
}

int cp_plan_open(const struct cp_plan *p, const struct cp_item *it)
{
	int fd;

	if (p->confined)
		return cp_open_path_beneath(p->rootfd, it->src, O_RDONLY | O_NONBLOCK);
	fd = open(it->src, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void cp_plan_free(struct cp_plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->items[i].src);
		free(p->items[i].dst);
	}
	free(p->items);
	memset(p, 0, sizeof(*p));
}
