/* copy_disk.c - the on-disk steps of writing one file beneath DIR; see copy_disk.h. */
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "copy_disk.h"
#include "copy_path.h"
#include "copy_proto.h"
#include "copy_token.h"

int cp_disk_pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Add bytes [@off, @len) of @fd to @st, read through @buf (CP_DISK_HASH_BUF bytes). */
static int hash_range(int fd, uint64_t off, uint64_t len, XXH3_state_t *st, uint8_t *buf)
{
	while (off < len) {
		size_t want = len - off < CP_DISK_HASH_BUF ? (size_t)(len - off) : CP_DISK_HASH_BUF;
		ssize_t n = pread(fd, buf, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shrank under us */
		XXH3_128bits_update(st, buf, (size_t)n);
		off += (uint64_t)n;
	}
	return 0;
}

/* Hash the first @len bytes of @fd into @st (reset first). */
static int hash_prefix(int fd, uint64_t len, XXH3_state_t *st, uint8_t *buf)
{
	XXH3_128bits_reset(st);
	return hash_range(fd, 0, len, st, buf);
}

int cp_disk_free_space_ok(int dirfd, uint64_t need)
{
	struct statvfs v;

	if (fstatvfs(dirfd, &v))
		return 1; /* cannot tell: let the writes decide */
	return v.f_frsize == 0 || need / v.f_frsize <= v.f_bavail;
}

int cp_disk_final_matches(int dirfd, const char *leaf, uint64_t size, const uint8_t *whole,
			  XXH3_state_t *st, uint8_t *buf)
{
	struct stat now;
	uint8_t h[16];
	int fd, r;

	fd = cp_openat_beneath(dirfd, leaf, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	/* What we opened, not what fstatat saw: it may have been swapped since. */
	if (fstat(fd, &now) || !S_ISREG(now.st_mode) || (uint64_t)now.st_size != size) {
		close(fd);
		return 0;
	}
	r = hash_prefix(fd, size, st, buf);
	close(fd);
	if (r)
		return r;
	cp_hash_digest(st, h);
	return cp_token_equal(h, whole, 16);
}

int cp_disk_same_file(int fd, int dirfd, const char *tmp)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && fstatat(dirfd, tmp, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

int cp_disk_open_temp(int dirfd, const char *tmp, int resume, struct stat *st)
{
	int fd = cp_openat_beneath(dirfd, tmp, O_RDWR | O_NONBLOCK, 0);
	int found = 0;
	struct stat cur;

	if (fd >= 0) {
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			close(fd);
			return -EBUSY;
		}
		/*
		 * We hold the lock of what we opened; the name may have moved on
		 * since (another session unlinked that file and created its own).
		 * Only while the name is still the file we hold may we reuse it
		 * or unlink it: the lock is the proof no session writes it.
		 */
		if (fstat(fd, st) || fstatat(dirfd, tmp, &cur, AT_SYMLINK_NOFOLLOW) ||
		    cur.st_ino != st->st_ino || cur.st_dev != st->st_dev) {
			close(fd);
			return -EBUSY;
		}
		if (resume && S_ISREG(st->st_mode) && st->st_nlink == 1 && st->st_uid == geteuid())
			return fd;
		found = 1;
	} else if (fd == -ELOOP || fd == -EXDEV || fd == -ENOTDIR || fd == -EISDIR) {
		/*
		 * Not a file we could open: a planted symlink (or a directory)
		 * under the name. Only a name that is not a regular file is
		 * unlinked unopened: no session can be writing it.
		 */
		found = fstatat(dirfd, tmp, &cur, AT_SYMLINK_NOFOLLOW) == 0 &&
			!S_ISREG(cur.st_mode) && !S_ISDIR(cur.st_mode);
		if (!found)
			return fd;
	} else if (fd != -ENOENT) {
		return fd; /* EMFILE, EACCES, ...: never a reason to unlink */
	}
	if (found && unlinkat(dirfd, tmp, 0) && errno != ENOENT) {
		int e = -errno;

		if (fd >= 0)
			close(fd);
		return e;
	}
	if (fd >= 0)
		close(fd);
	fd = cp_openat_beneath(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd == -EEXIST)
		return -EBUSY; /* another session created it just now */
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX | LOCK_NB) || fstat(fd, st)) {
		close(fd);
		return -EBUSY;
	}
	return fd;
}

int64_t cp_disk_resume_point(int fd, uint64_t size, uint64_t have, const uint8_t *proof,
			     unsigned nproof, uint64_t step, const uint8_t *whole, XXH3_state_t *st,
			     uint8_t *buf)
{
	uint64_t good = 0, off = 0;
	XXH3_state_t *probe = XXH3_createState();
	uint8_t h[16];

	if (!probe)
		return -ENOMEM;
	XXH3_128bits_reset(st);
	XXH3_128bits_reset(probe);
	for (unsigned k = 1; k <= nproof + 1; k++) {
		uint64_t end = k <= nproof ? k * step : size;
		int r;

		if (end > have)
			break;
		r = hash_range(fd, off, end, probe, buf);
		if (r) {
			XXH3_freeState(probe);
			return r;
		}
		off = end;
		cp_hash_digest(probe, h);
		if (!cp_token_equal(h, k <= nproof ? proof + 16 * (k - 1) : whole, 16))
			break;
		XXH3_copyState(st, probe);
		good = end;
	}
	XXH3_freeState(probe);
	return (int64_t)good;
}

int cp_disk_commit(int dirfd, const char *tmp, const char *leaf, int replace)
{
	unsigned flags = replace ? 0 : RENAME_NOREPLACE;
	struct stat st;

	if (renameat2(dirfd, tmp, dirfd, leaf, flags) == 0)
		return 0;
	if (!flags || errno != EINVAL)
		return -1;
	if (linkat(dirfd, tmp, dirfd, leaf, 0) == 0)
		return unlinkat(dirfd, tmp, 0) && errno != ENOENT ? -1 : 0;
	if (errno == EEXIST)
		return -1;
	if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		errno = EEXIST;
		return -1;
	}
	return renameat(dirfd, tmp, dirfd, leaf);
}
