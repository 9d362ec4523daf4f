/*
 * copy_disk.h - the on-disk steps of writing one file beneath DIR, for
 * rk serve's file writer (copy_files.c): the temporary ".NAME.rkpart"
 * opened and locked, data written at an offset, a prefix hashed against
 * what a resuming client proved, free space, and the final rename.
 *
 * What it does not do: no records, no sessions, no results, no limits and
 * no logging; it knows no protocol beyond the hash (XXH3-128, copy_proto.h).
 * Each function works on the fds and names it is given and returns a
 * negative errno (or an answer) for the caller to report; none keeps state.
 * Every name is a single component in a directory fd the caller opened
 * beneath DIR (copy_path.h). The caller owns the fds, the hash state and
 * the buffer it passes, and must not share them with another thread
 * during a call.
 */
#ifndef RK_COPY_DISK_H
#define RK_COPY_DISK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <xxhash.h>

/* The buffer a caller lends for hashing what is on disk (@buf below): this many bytes. */
#define CP_DISK_HASH_BUF (1u << 20)

/*
 * cp_disk_pwrite_all - write @len bytes of @p at @off of @fd, retrying short
 * writes and EINTR. Returns 0 or a negative errno (-EIO if the file system
 * took nothing). Blocks on the write.
 */
int cp_disk_pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off);

/*
 * cp_disk_free_space_ok - whether the file system of @dirfd has @need bytes
 * available to us (statvfs f_bavail): 1 or 0; 1 when it cannot tell, so the
 * writes decide. One fstatvfs.
 */
int cp_disk_free_space_ok(int dirfd, uint64_t need);

/*
 * cp_disk_final_matches - whether @leaf in @dirfd is a regular file of
 * @size bytes whose XXH3-128 is @whole: 1 yes, 0 no, or a negative errno
 * when it could not be read. Only a file of exactly that size is read (so
 * the caller bounds the cost: @size bytes read through @buf, of
 * CP_DISK_HASH_BUF bytes), and nothing about it goes back but the answer.
 * Uses @st (reset) as scratch; opens and closes its own fd.
 */
int cp_disk_final_matches(int dirfd, const char *leaf, uint64_t size, const uint8_t *whole,
			  XXH3_state_t *st, uint8_t *buf);

/*
 * cp_disk_open_temp - the temporary @tmp in @dirfd, opened read-write and
 * locked (flock: one writer per file). An existing one is reused only when
 * @resume and only when it is ours beyond doubt: reached without following
 * a link, a regular file with one link, owned by our uid, and still the one
 * under the name once we hold the lock. Anything else found there (a stale
 * temporary without @resume, a planted hard or symbolic link, a file of
 * someone else) is unlinked - the name, never what it points to - and a new
 * one created (mode 0600) with O_EXCL, so what we write always lands in a
 * file we created. Returns the fd (the caller's, to close; closing drops
 * the lock) with *@st filled, or -EBUSY (another session holds it) or
 * another negative errno. A few syscalls; never reads or writes data.
 */
int cp_disk_open_temp(int dirfd, const char *tmp, int resume, struct stat *st);

/*
 * cp_disk_same_file - whether the name @tmp in @dirfd still names the file
 * open as @fd (same inode and device, the name not followed): a rename
 * moves the name, so what it moves into place must be ours. 1 or 0. Two
 * stats.
 */
int cp_disk_same_file(int fd, int dirfd, const char *tmp);

/*
 * cp_disk_resume_point - resume, a temporary @fd of @have bytes (at most
 * @size, the file's): the longest prefix among those the client proved
 * (@nproof hashes @proof, 16 bytes each, of the prefixes [0, k * @step),
 * then @whole of all @size bytes) that the temporary holds byte for byte.
 * Reads the temporary in order, through @buf (CP_DISK_HASH_BUF bytes), at
 * most @have bytes, stopping at the first proof that fails. Leaves @st at
 * the hash of that prefix; returns its length or a negative errno.
 */
int64_t cp_disk_resume_point(int fd, uint64_t size, uint64_t have, const uint8_t *proof,
			     unsigned nproof, uint64_t step, const uint8_t *whole, XXH3_state_t *st,
			     uint8_t *buf);

/*
 * cp_disk_commit - move the verified temporary @tmp to @leaf, both in
 * @dirfd. Unless @replace the name must not exist: RENAME_NOREPLACE where
 * the file system has it (tmpfs, ext4, xfs...), else link() + unlink(),
 * which fails with EEXIST just as atomically; only where neither works
 * (some network file systems) is it check-then-rename. Returns 0, or -1
 * with errno set (EEXIST: the name is taken). No fsync: the caller syncs
 * the file before and its directory after.
 */
int cp_disk_commit(int dirfd, const char *tmp, const char *leaf, int replace);

#endif
