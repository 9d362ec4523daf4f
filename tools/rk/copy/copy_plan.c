/*
 * copy_plan.c - see copy_plan.h. The walk uses lstat and opendir only; it
 * never follows a directory symlink, so a tree with a loop cannot make it
 * spin.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int walk(struct cp_plan *p, const char *src, const char *dst, char *why, size_t why_len)
{
	DIR *d = opendir(src);
	struct dirent *e;
	int r = 0;

	if (!d) {
		snprintf(why, why_len, "%s: %s", src, strerror(errno));
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
		if (lstat(s, &st)) {
			snprintf(why, why_len, "%s: %s", s, strerror(errno));
			r = -1;
		} else if (S_ISDIR(st.st_mode)) {
			r = add(p, 1, s, t, &st, why, why_len);
			if (!r)
				r = walk(p, s, t, why, why_len);
			t = NULL;
		} else if (S_ISREG(st.st_mode) ||
			   (S_ISLNK(st.st_mode) && stat(s, &st) == 0 && S_ISREG(st.st_mode))) {
			/* a symlink counts only when it leads to a regular file */
			r = add(p, 0, s, t, &st, why, why_len);
			t = NULL;
		} else {
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

int cp_plan_build(struct cp_plan *p, char *const *srcs, int nsrc, const char *dest, int recursive,
		  char *why, size_t why_len)
{
	char dir[CP_NAME_MAX + 2], base[256];
	size_t dl = strlen(dest);
	int dest_is_dir, r;

	memset(p, 0, sizeof(*p));
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
		char *dst;

		if (stat(srcs[i], &st)) {
			snprintf(why, why_len, "%s: %s", srcs[i], strerror(errno));
			return -1;
		}
		if (S_ISDIR(st.st_mode) && !recursive) {
			snprintf(why, why_len, "%s: is a directory (use -r)", srcs[i]);
			return -1;
		}
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
			snprintf(why, why_len, "%s: not a regular file", srcs[i]);
			return -1;
		}
		if (S_ISDIR(st.st_mode) && names_contents(srcs[i])) {
			/* DEST itself is the directory; its top needs no entry. */
			r = 0;
			if (dir[0]) {
				dst = strdup(dir);
				if (!dst) {
					snprintf(why, why_len, "out of memory");
					return -1;
				}
				r = add(p, 1, srcs[i], dst, &st, why, why_len);
			}
			if (!r)
				r = walk(p, srcs[i], dir, why, why_len);
			if (r)
				return r;
			continue;
		}
		if (base_name(srcs[i], base, sizeof(base))) {
			snprintf(why, why_len,
				 "%s: cannot tell its name; name the file or directory itself",
				 srcs[i]);
			return -1;
		}
		dst = join(dir, base);
		if (!dst) {
			snprintf(why, why_len, "out of memory");
			return -1;
		}
		r = add(p, S_ISDIR(st.st_mode), srcs[i], dst, &st, why, why_len);
		if (!r && S_ISDIR(st.st_mode))
			r = walk(p, srcs[i], p->items[p->n - 1].dst, why, why_len);
		if (r)
			return r;
		/* One file onto a DEST that may be a directory: the server decides. */
		p->items[p->n - 1].into = nsrc == 1 && S_ISREG(st.st_mode) && !dest_is_dir;
	}
	return 0;
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
