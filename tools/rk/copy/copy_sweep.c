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
#include <stdio.h>
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

/* Takes ownership of @dfd. Stops early once *@stop is set (@stop may be NULL). */
static unsigned sweep_dir(int dfd, unsigned depth, time_t now, uint64_t age_s,
			  const atomic_int *stop)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	unsigned removed = 0;

	if (!d) {
		close(dfd);
		return 0;
	}
	while ((e = readdir(d)) && !(stop && atomic_load(stop))) {
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
			removed += sweep_dir(sub, depth + 1, now, age_s, stop);
	}
	closedir(d);
	return removed;
}

unsigned cp_sweep(int rootfd, uint64_t age_s)
{
	int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? 0 : sweep_dir(fd, 0, time(NULL), age_s, NULL);
}

static void report(unsigned n, uint64_t age_s)
{
	if (n)
		printf("rk serve: removed %u abandoned temporar%s untouched for %llu s\n", n,
		       n == 1 ? "y" : "ies", (unsigned long long)age_s);
	fflush(stdout);
}

static void *sweeper(void *arg)
{
	struct cp_sweeper *sw = arg;
	/* Every quarter of the age, 1 s to 10 min: a temporary outlives it by 25 % at most. */
	uint64_t every_ms = sw->age_s / 4 * 1000, waited = 0;

	every_ms = every_ms < 1000 ? 1000 : every_ms > 600000 ? 600000 : every_ms;
	while (!atomic_load(sw->stop)) {
		struct timespec nap = {.tv_nsec = 200 * 1000000};

		nanosleep(&nap, NULL);
		waited += 200;
		if (waited < every_ms)
			continue;
		waited = 0;
		{
			int fd = openat(sw->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

			if (fd >= 0)
				report(sweep_dir(fd, 0, time(NULL), sw->age_s, sw->stop),
				       sw->age_s);
		}
	}
	return NULL;
}

int cp_sweeper_start(struct cp_sweeper *sw, int rootfd, uint64_t age_s, atomic_int *stop)
{
	sw->rootfd = rootfd;
	sw->age_s = age_s;
	sw->stop = stop;
	sw->started = 0;
	if (!age_s)
		return 0;
	report(cp_sweep(rootfd, age_s), age_s);
	if (pthread_create(&sw->thread, NULL, sweeper, sw))
		return -1;
	sw->started = 1;
	return 0;
}

void cp_sweeper_stop(struct cp_sweeper *sw)
{
	if (sw->started)
		pthread_join(sw->thread, NULL);
	sw->started = 0;
}
