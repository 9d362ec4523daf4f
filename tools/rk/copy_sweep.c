/*
 * copy_sweep.c - remove abandoned temporaries (see copy_sweep.h).
 *
 * Races with sessions are settled by the same flock the sessions take: a
 * temporary a session has open and locked is skipped; one we hold locked
 * is unlinked only while we hold it and only if the name still refers to
 * the file we locked. A session that opened it just before we unlinked it
 * checks the name again once it holds the lock (copy_recv.c) and starts
 * afresh.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "copy_sweep.h"

#define SUFFIX ".rkpart"

static int is_temp_name(const char *name)
{
	size_t n = strlen(name), k = sizeof(SUFFIX) - 1;

	return name[0] == '.' && n > k + 1 && strcmp(name + n - k, SUFFIX) == 0;
}

static int old_enough(const struct stat *st, time_t now, uint64_t age_s)
{
	return st->st_mtime <= now && (uint64_t)(now - st->st_mtime) >= age_s;
}

/* One temporary name in @dfd: 1 if removed. */
static unsigned sweep_one(int dfd, const char *name, time_t now, uint64_t age_s)
{
	struct stat st, cur;
	unsigned removed = 0;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) || !old_enough(&st, now, age_s))
		return 0;
	/*
	 * Only our own regular files, by the lock a live session would hold.
	 * Anything else under a temporary's name (a planted symlink, someone
	 * else's file) is left alone: it holds no data of ours, and a session
	 * that needs the name replaces it (open_temp) - unlinking it here,
	 * with no lock to tell, could race with that and remove a live one.
	 */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return 0;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid() && old_enough(&st, now, age_s) &&
	    fstatat(dfd, name, &cur, AT_SYMLINK_NOFOLLOW) == 0 && cur.st_ino == st.st_ino &&
	    cur.st_dev == st.st_dev)
		removed = unlinkat(dfd, name, 0) == 0;
	close(fd); /* drops the lock */
	return removed;
}

/* Takes ownership of @dfd. */
static unsigned sweep_dir(int dfd, unsigned depth, time_t now, uint64_t age_s)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	unsigned removed = 0;

	if (!d) {
		close(dfd);
		return 0;
	}
	while ((e = readdir(d))) {
		int sub;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) {
			if (is_temp_name(e->d_name))
				removed += sweep_one(dirfd(d), e->d_name, now, age_s);
			continue;
		}
		if (is_temp_name(e->d_name))
			removed += sweep_one(dirfd(d), e->d_name, now, age_s);
		if (depth >= CP_SWEEP_DEPTH)
			continue;
		/* O_NOFOLLOW: a symlink to a directory is never entered. */
		sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			removed += sweep_dir(sub, depth + 1, now, age_s);
	}
	closedir(d);
	return removed;
}

unsigned cp_sweep(int rootfd, uint64_t age_s)
{
	int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? 0 : sweep_dir(fd, 0, time(NULL), age_s);
}
