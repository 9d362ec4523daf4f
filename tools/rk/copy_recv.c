/*
 * copy_recv.c - one rk serve session: accept, agree on the ring, then turn
 * each slot the client fills into file operations and give the slot back.
 *
 * The loop is simple on purpose: a slot arrives (WRITE WITH IMMEDIATE
 * completion), its header block and data are copied out of the ring into
 * memory the client cannot reach, records are parsed from that copy, data
 * is verified (XXH3-128 per chunk) and pwrite()n at its offset, and one
 * CREDIT returns the slot with the results of its records. While
 * we write one slot the client is already filling others, so reading at
 * the source, the wire and writing here overlap.
 *
 * Files are written to ".NAME.rkpart" next to their destination, locked
 * with flock so two clients cannot write the same one, verified as a whole
 * (streaming XXH3-128 in offset order) at END, fsync'ed, and only then
 * renamed into place (RENAME_NOREPLACE unless --force). A session that
 * ends early closes its files and leaves the temporaries for --resume
 * (rk serve removes them once older than --tmp-age, copy_sweep.c).
 *
 * Limits a client cannot get around: files open at once (--max-open, sized
 * by the listener so every session's fds fit), files and directories per
 * session (--max-files), bytes per session (--max-bytes), and the idle
 * timer, which is a minimum rate: a session must move IDLE_MIN_BYTES of
 * file data (an entry made counts ENTRY_BYTES) within every --idle period.
 * A client that keeps posting empty slots, one byte or one directory at a
 * time, is still dropped after --idle.
 *
 * With lanes (rk copy --num-qp), more connections join the session: the
 * listener hands their requests over through a registry keyed by the
 * session key, and this thread accepts them and serves all lanes from one
 * loop. Slots may then arrive out of sequence; they wait in a small
 * reorder window (never larger than the ring) and are handled strictly in
 * sequence, so everything below sees the same order as with one lane.
 */
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/statvfs.h>

#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/mr.h>
#include <rdmakit/pd.h>
#include <rdmakit/post.h>

#include "cli.h"
#include "copy_path.h"
#include "copy_proto.h"
#include "copy_recv.h"
#include "copy_token.h"

#define RQ_DEPTH      (CP_MAX_SLOTS + 8) /* a receive per slot, and spares */
#define NSEND	      (CP_MAX_SLOTS + 4) /* CREDIT buffers: one per slot, and spares */
#define MAX_OPEN      CP_SERVE_MAX_OPEN	 /* files open at once per session, at most */
#define HELLO_MS      10000
#define ACCEPT_MS     5000
#define SEND_TAG      (1ull << 32)
#define HASH_BUF      (1u << 20)
#define BYE_LINGER_NS 2000000000ull

struct rfile {
	int used;
	uint32_t id;
	int dirfd, fd;
	char name[CP_NAME_MAX + 1];
	char leaf[CP_NAME_MAX + 1];
	char tmp[CP_COMP_MAX + 16];
	uint64_t size, next_off, start_off, t0;
	uint32_t mode;
	int existing; /* resume found the final file: expect END only */
	uint8_t existing_hash[16];
	XXH3_state_t *st;
};

/* One connection of the session and its receive buffers. */
struct lane {
	struct rk_conn *conn;
	struct rk_mr *rbufs;
};

/* A slot that arrived ahead of its turn. */
struct pending {
	uint8_t valid, lane;
	uint16_t slot, hlen;
	uint32_t byte_len, seq;
};

struct session {
	struct cp_server *srv;
	struct rk_cm_request *req;
	char peer[64];
	struct rk_pd *pd; /* the session's alone: its QPs, ring and buffers */
	struct lane lanes[CP_MAX_LANES];
	unsigned want_lanes, prep_lane;
	struct rk_mr *sbufs, *ring;
	uint8_t send_busy[NSEND];
	struct pending pend[CP_MAX_SLOTS];
	uint8_t slot_pending[CP_MAX_SLOTS];
	uint32_t next_seq;
	/* Joining lanes: set by the listener thread under reg_mu. */
	uint8_t key[CP_KEY_LEN];
	struct rk_cm_request *joins[CP_MAX_LANES];
	uint32_t claimed; /* lanes handed over so far (bit per lane) */
	int evfd, registered;
	struct session *reg_next;
	uint32_t chunk;
	uint16_t nslots, flags;
	size_t stride;
	uint32_t next_id, nfiles;
	int bye, hello_done;
	uint64_t bytes;	      /* announced by the files begun (--max-bytes) */
	uint64_t progress_ns; /* when the idle period began (--idle) */
	uint64_t progressed;  /* bytes moved in it (see do_record) */
	struct rfile files[MAX_OPEN];
	uint8_t hdr[CP_HDR_SIZE]; /* private copy of a header block */
	uint8_t *data;		  /* private copy of a data block (chunk bytes) */
	uint8_t *hashbuf;
};

/*
 * Sessions that accept lanes, for cp_session_join (listener thread). A
 * session is registered once it has sent WELCOME (so has a key) and
 * unregistered before it is freed; both under reg_mu.
 */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct session *reg_head;

static void slog(const struct session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void slog(const struct session *s, const char *fmt, ...)
{
	char line[1536];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printf("rk serve: %s: %s\n", s->peer, line);
	fflush(stdout);
}

/* ---- control messages out ---- */

static int send_msg(struct session *s, unsigned lane, const void *msg, size_t len,
		    struct rk_error *err)
{
	uint8_t *base = rk_mr_addr(s->sbufs);
	struct rk_wr wr = {.op = RK_OP_SEND, .flags = RK_WR_SIGNALED};

	for (unsigned i = 0; i < NSEND; i++) {
		if (s->send_busy[i])
			continue;
		memcpy(base + (size_t)i * CP_MSG_MAX, msg, len);
		wr.wr_id = SEND_TAG | i;
		wr.addr = base + (size_t)i * CP_MSG_MAX;
		wr.len = (uint32_t)len;
		wr.lkey = rk_mr_lkey(s->sbufs);
		s->send_busy[i] = 1;
		return rk_post(s->lanes[lane].conn, &wr, err);
	}
	/* Cannot happen with one CREDIT per slot; a client breaking that is gone. */
	return -ENOBUFS;
}

static void send_error(struct session *s, uint16_t code, const char *text)
{
	uint8_t msg[CP_MSG_MAX];
	int n = cp_error_encode(code, text, msg, sizeof(msg));

	if (n > 0)
		send_msg(s, 0, msg, (size_t)n, NULL);
}

/* ---- files ---- */

static struct rfile *find_file(struct session *s, uint32_t id)
{
	for (unsigned i = 0; i < MAX_OPEN; i++)
		if (s->files[i].used && s->files[i].id == id)
			return &s->files[i];
	return NULL;
}

/* Close @f; the temporary is removed when @unlink_tmp (a failed file). */
static void close_file(struct rfile *f, int unlink_tmp)
{
	if (f->fd >= 0) {
		if (unlink_tmp && unlinkat(f->dirfd, f->tmp, 0) && errno != ENOENT)
			fprintf(stderr, "rk serve: cannot remove %s: %s\n", f->tmp,
				strerror(errno));
		close(f->fd);
	}
	if (f->dirfd >= 0)
		close(f->dirfd);
	XXH3_freeState(f->st);
	memset(f, 0, sizeof(*f));
	f->fd = f->dirfd = -1;
}

static void result(struct cp_credit *c, uint32_t id, uint8_t kind, uint16_t code, int sys_errno,
		   uint64_t offset)
{
	struct cp_result *r = &c->res[c->nres++];

	memset(r, 0, sizeof(*r));
	r->file_id = id;
	r->kind = kind;
	r->code = code;
	r->sys_errno = (uint32_t)(sys_errno < 0 ? -sys_errno : sys_errno);
	r->offset = offset;
}

/* Fail @f: one DONE with the reason, a log line, the temporary removed. */
static void fail_file(struct session *s, struct cp_credit *c, struct rfile *f, uint16_t code,
		      int sys_errno, uint64_t offset, int unlink_tmp)
{
	result(c, f->id, CP_RES_DONE, code, sys_errno, offset);
	slog(s, "%s: FAILED at offset %llu: %s%s%s", f->name, (unsigned long long)offset,
	     cp_code_str(code), sys_errno ? ": " : "", sys_errno ? strerror(abs(sys_errno)) : "");
	close_file(f, unlink_tmp);
}

static uint16_t open_errno_code(int e)
{
	e = abs(e);
	if (e == EXDEV || e == ELOOP || e == ENOTDIR || e == EINVAL || e == ENAMETOOLONG)
		return CP_E_PATH;
	if (e == ENOSPC || e == EDQUOT)
		return CP_E_NOSPACE;
	return CP_E_IO;
}

static int pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off)
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

/* Add bytes [@off, @len) of @fd to @st. */
static int hash_range(struct session *s, int fd, uint64_t off, uint64_t len, XXH3_state_t *st)
{
	while (off < len) {
		size_t want = len - off < HASH_BUF ? (size_t)(len - off) : HASH_BUF;
		ssize_t n = pread(fd, s->hashbuf, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shrank under us */
		XXH3_128bits_update(st, s->hashbuf, (size_t)n);
		off += (uint64_t)n;
	}
	return 0;
}

/* Hash the first @len bytes of @fd into @st (reset first). */
static int hash_prefix(struct session *s, int fd, uint64_t len, XXH3_state_t *st)
{
	XXH3_128bits_reset(st);
	return hash_range(s, fd, 0, len, st);
}

static int free_space_ok(int dirfd, uint64_t need)
{
	struct statvfs v;

	if (fstatvfs(dirfd, &v))
		return 1; /* cannot tell: let the writes decide */
	return v.f_frsize == 0 || need / v.f_frsize <= v.f_bavail;
}

/*
 * Resume, the final file exists: the client stated its size and hash. Only
 * a file of exactly that size is read (so never more than --max-file-size)
 * and the answer is yes (up to date) or no (exists): nothing about the
 * file itself goes back.
 */
static void begin_existing(struct session *s, struct cp_credit *c, struct rfile *f,
			   const struct stat *fin, const uint8_t *whole)
{
	struct stat now;
	uint8_t h[16];
	int fd, r;

	if ((uint64_t)fin->st_size != f->size)
		return fail_file(s, c, f, CP_E_EXISTS, 0, 0, 0);
	fd = cp_openat_beneath(f->dirfd, f->leaf, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return fail_file(s, c, f, CP_E_EXISTS, 0, 0, 0);
	/* What we opened, not what fstatat saw: it may have been swapped since. */
	if (fstat(fd, &now) || !S_ISREG(now.st_mode) || (uint64_t)now.st_size != f->size) {
		close(fd);
		return fail_file(s, c, f, CP_E_EXISTS, 0, 0, 0);
	}
	r = hash_prefix(s, fd, f->size, f->st);
	close(fd);
	if (r)
		return fail_file(s, c, f, CP_E_IO, r, 0, 0);
	cp_hash_digest(f->st, h);
	if (!cp_token_equal(h, whole, 16))
		return fail_file(s, c, f, CP_E_EXISTS, 0, 0, 0);
	result(c, f->id, CP_RES_DONE, CP_E_UPTODATE, 0, f->size);
	slog(s, "%s: already up to date (verified xxh3-128)", f->name);
	close_file(f, 0);
}

/*
 * Whether the temporary's name still names the file we wrote (f->fd): a
 * rename moves the name, so what it moves into place must be ours.
 */
static int same_file(const struct rfile *f)
{
	struct stat a, b;

	return fstat(f->fd, &a) == 0 && fstatat(f->dirfd, f->tmp, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/*
 * The temporary, opened and locked (flock: one writer per file). An
 * existing one is reused only for --resume and only when it is ours beyond
 * doubt: reached without following a link, a regular file with one link,
 * owned by our uid, and still the one under the name once we hold the
 * lock. Anything else found there (a stale temporary without --resume, a
 * planted hard or symbolic link, a file of someone else) is unlinked - the
 * name, never what it points to - and a new one created with O_EXCL, so
 * what we write always lands in a file we created. Returns the fd with
 * *@st filled, or -EBUSY (another session holds it) or another negative errno.
 */
static int open_temp(struct rfile *f, int resume, struct stat *st)
{
	int fd = cp_openat_beneath(f->dirfd, f->tmp, O_RDWR | O_NONBLOCK, 0);
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
		if (fstat(fd, st) || fstatat(f->dirfd, f->tmp, &cur, AT_SYMLINK_NOFOLLOW) ||
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
		found = fstatat(f->dirfd, f->tmp, &cur, AT_SYMLINK_NOFOLLOW) == 0 &&
			!S_ISREG(cur.st_mode) && !S_ISDIR(cur.st_mode);
		if (!found)
			return fd;
	} else if (fd != -ENOENT) {
		return fd; /* EMFILE, EACCES, ...: never a reason to unlink */
	}
	if (found && unlinkat(f->dirfd, f->tmp, 0) && errno != ENOENT) {
		int e = -errno;

		if (fd >= 0)
			close(fd);
		return e;
	}
	if (fd >= 0)
		close(fd);
	fd = cp_openat_beneath(f->dirfd, f->tmp, O_RDWR | O_CREAT | O_EXCL, 0600);
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

/*
 * Resume, a temporary of @have bytes: the longest prefix among those the
 * client proved (its hashes at multiples of the proof step, and of the
 * whole file) that the temporary holds byte for byte. Leaves f->st at the
 * hash of that prefix; returns its length or a negative errno.
 */
static int64_t resume_point(struct session *s, struct rfile *f, uint64_t have, const uint8_t *proof,
			    unsigned nproof, const uint8_t *whole)
{
	uint64_t step = cp_proof_step(f->size, s->chunk), good = 0, off = 0;
	XXH3_state_t *probe = XXH3_createState();
	uint8_t h[16];

	if (!probe)
		return -ENOMEM;
	XXH3_128bits_reset(f->st);
	XXH3_128bits_reset(probe);
	for (unsigned k = 1; k <= nproof + 1; k++) {
		uint64_t end = k <= nproof ? k * step : f->size;
		int r;

		if (end > have)
			break;
		r = hash_range(s, f->fd, off, end, probe);
		if (r) {
			XXH3_freeState(probe);
			return r;
		}
		off = end;
		cp_hash_digest(probe, h);
		if (!cp_token_equal(h, k <= nproof ? proof + 16 * (k - 1) : whole, 16))
			break;
		XXH3_copyState(f->st, probe);
		good = end;
	}
	XXH3_freeState(probe);
	return (int64_t)good;
}

static void begin_file(struct session *s, struct cp_credit *c, const struct cp_rec *r,
		       const uint8_t *data)
{
	int resume = (s->flags & CP_F_RESUME) && (r->flags & CP_BEGIN_PROOF);
	uint8_t proof[16 * CP_PROOF_MAX];
	unsigned nproof = 0;
	struct rfile *f = NULL;
	char parent[CP_NAME_MAX + 1];
	struct stat st;
	int64_t good;
	int e;

	if (++s->nfiles > s->srv->max_files) {
		result(c, r->file_id, CP_RES_DONE, CP_E_ENTRY_LIMIT, 0, 0);
		return;
	}
	for (unsigned i = 0; i < s->srv->max_open && !f; i++)
		if (!s->files[i].used)
			f = &s->files[i];
	if (!f) {
		result(c, r->file_id, CP_RES_DONE, CP_E_OPEN_LIMIT, 0, 0);
		return;
	}
	memset(f, 0, sizeof(*f));
	f->used = 1;
	f->fd = f->dirfd = -1;
	f->id = r->file_id;
	f->size = r->a;
	f->mode = (uint32_t)(r->b & 0777);
	f->t0 = cli_now_ns();
	memcpy(f->name, r->name, r->name_len);
	f->name[r->name_len] = '\0';
	if (cp_path_check(r->name, r->name_len)) {
		snprintf(f->name, sizeof(f->name), "(refused name)");
		return fail_file(s, c, f, CP_E_PATH, 0, 0, 0);
	}
	if (f->size > s->srv->max_file_size)
		return fail_file(s, c, f, CP_E_LIMIT, 0, 0, 0);
	if (f->size > s->srv->max_bytes - s->bytes)
		return fail_file(s, c, f, CP_E_BYTES_LIMIT, 0, 0, 0);
	s->bytes += f->size;
	if (r->flags & CP_BEGIN_PROOF) {
		/* Copied out of the ring at once: the client can rewrite it there. */
		nproof = cp_proof_count(f->size, s->chunk);
		if (!resume || r->data_len != 16 * nproof)
			return fail_file(s, c, f, CP_E_PROTO, 0, 0, 0);
		memcpy(proof, data + r->data_off, r->data_len);
	}
	f->st = XXH3_createState();
	if (!f->st)
		return fail_file(s, c, f, CP_E_IO, ENOMEM, 0, 0);
	cp_path_split(r->name, r->name_len, parent, f->leaf);
	cp_temp_name(f->leaf, f->tmp, sizeof(f->tmp));
	f->dirfd = cp_open_dir(s->srv->rootfd, parent, 1);
	if (f->dirfd < 0) {
		e = f->dirfd;
		f->dirfd = -1;
		return fail_file(s, c, f, open_errno_code(e), e, 0, 0);
	}
	if (fstatat(f->dirfd, f->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (resume && S_ISREG(st.st_mode) && !(s->flags & CP_F_FORCE))
			return begin_existing(s, c, f, &st, r->hash);
		if (!(s->flags & CP_F_FORCE) || S_ISDIR(st.st_mode))
			return fail_file(s, c, f, CP_E_EXISTS, 0, 0, 0);
	} else if (errno != ENOENT) {
		return fail_file(s, c, f, open_errno_code(errno), errno, 0, 0);
	}
	if (!free_space_ok(f->dirfd, f->size))
		return fail_file(s, c, f, CP_E_NOSPACE, 0, 0, 0);
	f->fd = open_temp(f, resume, &st);
	if (f->fd < 0) {
		e = f->fd;
		f->fd = -1; /* not ours: leave it alone */
		if (e == -EBUSY)
			return fail_file(s, c, f, CP_E_BUSY, 0, 0, 0);
		return fail_file(s, c, f, open_errno_code(e), e, 0, 0);
	}
	/* Resume: keep the longest proven prefix; else start empty. */
	good = 0;
	XXH3_128bits_reset(f->st);
	if (resume && st.st_size > 0) {
		uint64_t have = (uint64_t)st.st_size < f->size ? (uint64_t)st.st_size : f->size;

		good = resume_point(s, f, have, proof, nproof, r->hash);
		if (good < 0)
			return fail_file(s, c, f, CP_E_IO, (int)good, 0, 1);
	}
	f->next_off = f->start_off = (uint64_t)good;
	if (ftruncate(f->fd, (off_t)f->next_off))
		return fail_file(s, c, f, CP_E_IO, errno, 0, 1);
	if (r->flags & CP_BEGIN_WAIT)
		result(c, f->id, CP_RES_READY, CP_OK, 0, f->next_off);
}

static void data_file(struct session *s, struct cp_credit *c, struct rfile *f,
		      const struct cp_rec *r, const uint8_t *data)
{
	uint8_t h[16];
	int e;

	/* In order, inside the announced size: the whole-file hash streams. */
	if (f->existing || r->a != f->next_off || r->data_len > f->size - f->next_off)
		return fail_file(s, c, f, CP_E_PROTO, 0, r->a, 1);
	cp_hash128(data + r->data_off, r->data_len, h);
	if (memcmp(h, r->hash, 16))
		return fail_file(s, c, f, CP_E_HASH, 0, r->a, 1);
	e = pwrite_all(f->fd, data + r->data_off, r->data_len, r->a);
	if (e)
		return fail_file(s, c, f, open_errno_code(e), e, r->a, 1);
	XXH3_128bits_update(f->st, data + r->data_off, r->data_len);
	f->next_off += r->data_len;
}

/*
 * Move the verified temporary into place. Without --force the name must
 * not exist: RENAME_NOREPLACE where the file system has it (tmpfs, ext4,
 * xfs...), else link() + unlink(), which fails with EEXIST just as
 * atomically; only where neither works (some network file systems) is it
 * check-then-rename.
 */
static int commit_rename(int dirfd, const char *tmp, const char *leaf, unsigned flags)
{
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

static void end_file(struct session *s, struct cp_credit *c, struct rfile *f,
		     const struct cp_rec *r)
{
	unsigned flags = (s->flags & CP_F_FORCE) ? 0 : RENAME_NOREPLACE;
	char bytes[32], rate[32];
	uint8_t h[16];
	double secs;

	if (f->existing) {
		if (memcmp(r->hash, f->existing_hash, 16))
			return fail_file(s, c, f, CP_E_EXISTS, 0, 0, 0);
		result(c, f->id, CP_RES_DONE, CP_E_UPTODATE, 0, f->size);
		slog(s, "%s: already up to date (verified xxh3-128)", f->name);
		return close_file(f, 0);
	}
	if (f->next_off != f->size)
		return fail_file(s, c, f, CP_E_PROTO, 0, f->next_off, 1);
	cp_hash_digest(f->st, h);
	if (memcmp(h, r->hash, 16))
		return fail_file(s, c, f, CP_E_HASH, 0, f->size, 1);
	if (fchmod(f->fd, (mode_t)(f->mode & ~0022u) | 0600)) {
		slog(s, "%s: fchmod: %s", f->name, strerror(errno));
		return fail_file(s, c, f, CP_E_IO, errno, f->size, 1);
	}
	if (fsync(f->fd)) {
		slog(s, "%s: fsync: %s", f->name, strerror(errno));
		return fail_file(s, c, f, CP_E_IO, errno, f->size, 1);
	}
	if (!same_file(f)) {
		slog(s, "%s: the temporary was replaced under its name; not committed", f->name);
		return fail_file(s, c, f, CP_E_IO, EIO, f->size, 1);
	}
	if (commit_rename(f->dirfd, f->tmp, f->leaf, flags)) {
		slog(s, "%s: rename: %s", f->name, strerror(errno));
		return fail_file(s, c, f, errno == EEXIST ? CP_E_EXISTS : CP_E_IO,
				 errno == EEXIST ? 0 : errno, f->size, 1);
	}
	if (fsync(f->dirfd))
		fprintf(stderr, "rk serve: fsync of the directory of %s: %s\n", f->name,
			strerror(errno));
	secs = (double)(cli_now_ns() - f->t0) / 1e9;
	slog(s, "%s  %s  %.2f s  %s  verified xxh3-128%s", f->name,
	     cli_fmt_bytes(f->size, bytes, sizeof(bytes)), secs,
	     cli_fmt_rate(secs > 0 ? (double)(f->size - f->start_off) * 8 / secs : 0, rate,
			  sizeof(rate)),
	     f->start_off ? " (resumed)" : "");
	result(c, f->id, CP_RES_DONE, CP_OK, 0, f->size);
	close_file(f, 0);
}

static void make_dir(struct session *s, struct cp_credit *c, const struct cp_rec *r)
{
	char name[CP_NAME_MAX + 1];
	int fd;

	if (cp_path_check(r->name, r->name_len))
		return result(c, r->file_id, CP_RES_DONE, CP_E_PATH, 0, 0);
	if (++s->nfiles > s->srv->max_files)
		return result(c, r->file_id, CP_RES_DONE, CP_E_ENTRY_LIMIT, 0, 0);
	memcpy(name, r->name, r->name_len);
	name[r->name_len] = '\0';
	fd = cp_open_dir(s->srv->rootfd, name, 1);
	if (fd < 0) {
		slog(s, "%s/: FAILED: %s", name, strerror(-fd));
		return result(c, r->file_id, CP_RES_DONE, open_errno_code(fd), fd, 0);
	}
	close(fd);
	result(c, r->file_id, CP_RES_DONE, CP_OK, 0, 0);
}

/*
 * --idle is a minimum rate, not a silence detector: a period ends well only
 * once IDLE_MIN_BYTES moved in it (17 KiB/s at the default 60 s, far below
 * any real link), so trickling a byte, an empty slot or a directory per
 * period cannot hold a session (and a --max-clients place) for ever. An
 * entry made or found up to date counts ENTRY_BYTES besides its data,
 * so a tree of tiny files keeps its session.
 */
#define IDLE_MIN_BYTES (1u << 20)
#define ENTRY_BYTES    4096u

/* Whether the record just handled ended in a success (for --idle). */
static int done_ok(const struct cp_credit *c, unsigned before)
{
	const struct cp_result *r = &c->res[c->nres - 1];

	return c->nres > before && r->kind == CP_RES_DONE &&
	       (r->code == CP_OK || r->code == CP_E_UPTODATE);
}

/*
 * One record. File ids grow strictly with each DIR / BEGIN; a later record
 * for an id that is no longer open belongs to a file that already failed,
 * and is ignored. Anything else out of line is a protocol error.
 *
 * Progress, which alone counts against the idle timer, is file data
 * written and entries made (a directory, a file committed or found up to
 * date: ENTRY_BYTES each, and an up-to-date file's verified bytes); not
 * files begun, refused or failed, and not empty slots.
 */
static int do_record(struct session *s, struct cp_credit *c, const struct cp_rec *r,
		     const uint8_t *data)
{
	unsigned before = c->nres;
	struct rfile *f;
	uint64_t at;

	if (r->type == CP_REC_BYE) {
		s->bye = 1;
		return 0;
	}
	if (r->type == CP_REC_DIR || r->type == CP_REC_BEGIN) {
		if (r->file_id < s->next_id || r->file_id == UINT32_MAX)
			return -EPROTO;
		s->next_id = r->file_id + 1;
		if (r->type == CP_REC_DIR)
			make_dir(s, c, r);
		else
			begin_file(s, c, r, data);
		if (done_ok(c, before))
			s->progressed += ENTRY_BYTES + c->res[c->nres - 1].offset;
		return 0;
	}
	if (r->file_id >= s->next_id)
		return -EPROTO;
	f = find_file(s, r->file_id);
	if (!f)
		return 0;
	switch (r->type) {
	case CP_REC_DATA:
		at = f->next_off;
		data_file(s, c, f, r, data);
		if (f->used && f->next_off > at)
			s->progressed += f->next_off - at;
		break;
	case CP_REC_END:
		end_file(s, c, f, r);
		if (done_ok(c, before))
			s->progressed += ENTRY_BYTES;
		break;
	case CP_REC_ABORT:
		result(c, f->id, CP_RES_DONE, CP_E_ABORTED, 0, f->next_off);
		slog(s, "%s: aborted by the client at offset %llu", f->name,
		     (unsigned long long)f->next_off);
		close_file(f, 0);
		break;
	default:
		return -EPROTO;
	}
	return 0;
}

/* Its turn has come: act on a slot's records, give it back with results. */
static int handle_slot(struct session *s, const struct pending *p, struct rk_error *err)
{
	uint8_t msg[CP_MSG_MAX];
	struct cp_slot_reader rd;
	struct cp_credit c;
	struct cp_rec r;
	const uint8_t *base;
	int n;

	if (s->bye)
		return -EPROTO;
	base = (const uint8_t *)rk_mr_addr(s->ring) + (size_t)p->slot * s->stride;
	/*
	 * Our own copies: the client can rewrite its slot at any moment, also
	 * after posting it. What we parse, hash, write and hash again must be
	 * one and the same bytes, so all of it comes from memory it cannot
	 * reach (one memcpy of the slot; cheaper than the wire by far).
	 */
	memcpy(s->hdr, base, p->hlen);
	memcpy(s->data, base + CP_HDR_SIZE, p->byte_len);
	if (cp_slot_reader_init(&rd, s->hdr, p->hlen, p->byte_len) || rd.seq != p->seq)
		return -EPROTO;
	memset(&c, 0, sizeof(c));
	c.slot = p->slot;
	while ((n = cp_slot_next(&rd, &r)) == 1)
		if (do_record(s, &c, &r, s->data))
			return -EPROTO;
	if (n < 0)
		return -EPROTO;
	if (s->progressed >= IDLE_MIN_BYTES) {
		s->progress_ns = cli_now_ns();
		s->progressed = 0;
	}
	n = cp_credit_encode(&c, msg, sizeof(msg));
	if (n < 0)
		return -EPROTO;
	return send_msg(s, p->lane, msg, (size_t)n, err);
}

/*
 * A slot arrived on @lane: check the immediate, the length and the
 * sequence number (inside the window of slots the client can have in
 * flight, not already waiting), park it, and handle every slot whose turn
 * has come.
 */
static int slot_arrived(struct session *s, unsigned lane, uint32_t imm, uint32_t byte_len,
			struct rk_error *err)
{
	struct pending *p;
	uint16_t slot, hlen;
	int64_t seq;

	if (s->bye || cp_imm_parse(imm, s->nslots, &slot, &hlen) || byte_len > s->chunk ||
	    s->slot_pending[slot])
		return -EPROTO;
	seq = cp_slot_seq((const uint8_t *)rk_mr_addr(s->ring) + (size_t)slot * s->stride, hlen);
	if (seq < 0 || (uint32_t)seq - s->next_seq >= s->nslots)
		return -EPROTO;
	p = &s->pend[(uint32_t)seq % CP_MAX_SLOTS];
	if (p->valid)
		return -EPROTO;
	*p = (struct pending){.valid = 1,
			      .lane = (uint8_t)lane,
			      .slot = slot,
			      .hlen = hlen,
			      .byte_len = byte_len,
			      .seq = (uint32_t)seq};
	s->slot_pending[slot] = 1;
	while ((p = &s->pend[s->next_seq % CP_MAX_SLOTS])->valid) {
		struct pending turn = *p;
		int r;

		p->valid = 0;
		s->slot_pending[turn.slot] = 0;
		s->next_seq++;
		r = handle_slot(s, &turn, err);
		if (r)
			return r;
	}
	return 0;
}

/* HELLO: size the ring to the client's chunk and depth, within our limit. */
static int handle_hello(struct session *s, const void *buf, uint32_t len, struct rk_error *err)
{
	struct cp_welcome w = {0};
	struct cp_hello h;
	uint8_t msg[CP_MSG_MAX];
	unsigned nslots;
	int n, r;

	if (cp_msg_peek(buf, len) == -EPROTO) {
		send_error(s, CP_E_PROTO, "protocol version not supported");
		return -EPROTO;
	}
	if (cp_hello_decode(buf, len, &h))
		return -EPROTO;
	s->chunk = h.chunk;
	s->flags = h.flags;
	s->want_lanes = h.lanes;
	s->stride = CP_HDR_SIZE + ((size_t)h.chunk + 4095) / 4096 * 4096;
	if (s->stride > s->srv->max_ring) {
		char why[128];

		snprintf(why, sizeof(why),
			 "limit: --max-ring: a %u-byte chunk needs %zu bytes of ring, this "
			 "server allows %u",
			 h.chunk, s->stride, s->srv->max_ring);
		send_error(s, CP_E_LIMIT, why);
		return -EPERM;
	}
	nslots = h.depth < CP_MAX_SLOTS ? h.depth : CP_MAX_SLOTS;
	while (nslots > 1 && nslots * s->stride > s->srv->max_ring)
		nslots--;
	s->nslots = (uint16_t)nslots;
	s->data = rk_alloc_aligned(s->chunk);
	if (!s->data) {
		send_error(s, CP_E_IO, "server out of memory");
		return -ENOMEM;
	}
	r = rk_mr_alloc_pd(s->pd, nslots * s->stride, RK_ACCESS_REMOTE_WRITE, err, &s->ring);
	if (r) {
		send_error(s, CP_E_IO, "server out of registered memory");
		return r;
	}
	w.ring_addr = (uintptr_t)rk_mr_addr(s->ring);
	w.rkey = rk_mr_rkey(s->ring);
	w.chunk = s->chunk;
	w.nslots = s->nslots;
	w.max_name = CP_NAME_MAX;
	w.max_files = s->srv->max_files;
	w.max_file_size = s->srv->max_file_size;
	if (getrandom(s->key, sizeof(s->key), 0) != (ssize_t)sizeof(s->key)) {
		send_error(s, CP_E_IO, "server has no randomness for a session key");
		return -EIO;
	}
	memcpy(w.key, s->key, sizeof(w.key));
	n = cp_welcome_encode(&w, msg, sizeof(msg));
	if (n < 0)
		return -EPROTO;
	s->hello_done = 1;
	if (s->want_lanes > 1) {
		pthread_mutex_lock(&reg_mu);
		s->reg_next = reg_head;
		reg_head = s;
		s->registered = 1;
		pthread_mutex_unlock(&reg_mu);
	}
	return send_msg(s, 0, msg, (size_t)n, err);
}

/* Receive ids: lane in bits 8.., buffer index below. */
static int post_recv(struct session *s, unsigned lane, unsigned i, struct rk_error *err)
{
	struct lane *l = &s->lanes[lane];
	uint8_t *base = rk_mr_addr(l->rbufs);

	return rk_post_recv(l->conn, base + (size_t)i * CP_MSG_MAX, CP_MSG_MAX,
			    rk_mr_lkey(l->rbufs), (uint64_t)lane << 8 | i, err);
}

static int prepare(struct rk_conn *conn, void *arg)
{
	struct session *s = arg;

	s->lanes[s->prep_lane].conn = conn;
	for (unsigned i = 0; i < RQ_DEPTH; i++) {
		int r = post_recv(s, s->prep_lane, i, NULL);

		if (r)
			return r;
	}
	return 0;
}

static int handle_wc(struct session *s, unsigned lane, const struct ibv_wc *wc,
		     struct rk_error *err)
{
	unsigned i = (unsigned)(wc->wr_id & 0xff);

	if (wc->status != IBV_WC_SUCCESS) {
		rk_error_from_wc(err, wc);
		return -EIO;
	}
	if (wc->wr_id & SEND_TAG) {
		s->send_busy[(wc->wr_id & 0xffff) % NSEND] = 0;
		return 0;
	}
	if (wc->wr_id >> 8 != lane || i >= RQ_DEPTH)
		return -EPROTO;
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM && s->hello_done) {
		int r = slot_arrived(s, lane, ntohl(wc->imm_data), wc->byte_len, err);

		if (r == -EPROTO)
			send_error(s, CP_E_PROTO, "malformed slot");
		if (r)
			return r;
	} else if (wc->opcode == IBV_WC_RECV && !s->hello_done && lane == 0) {
		uint8_t *buf = (uint8_t *)rk_mr_addr(s->lanes[0].rbufs) + (size_t)i * CP_MSG_MAX;
		int r = handle_hello(s, buf, wc->byte_len, err);

		if (r)
			return r;
	} else {
		send_error(s, CP_E_PROTO, "unexpected message");
		return -EPROTO;
	}
	return post_recv(s, lane, i, err);
}

static int sends_pending(const struct session *s)
{
	for (unsigned i = 0; i < NSEND; i++)
		if (s->send_busy[i])
			return 1;
	return 0;
}

/* Handle every completion waiting now on all lanes: their count, or a negative errno. */
static int drain_cq(struct session *s, struct rk_error *err)
{
	struct ibv_wc wc[16];
	int total = 0;

	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		int n;

		if (!s->lanes[l].conn)
			continue;
		n = rk_cq_poll(rk_conn_cq(s->lanes[l].conn), wc, 16, err);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			int r = handle_wc(s, l, &wc[i], err);

			if (r)
				return r < 0 ? r : -EPROTO;
		}
		total += n;
	}
	return total;
}

static int arm_all(struct session *s, struct rk_error *err)
{
	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		int r = s->lanes[l].conn ? rk_cq_arm(rk_conn_cq(s->lanes[l].conn), err) : 0;

		if (r)
			return r;
	}
	return 0;
}

static struct rk_conn_opts conn_opts(struct session *s)
{
	return (struct rk_conn_opts){
	    .sq_depth = NSEND,
	    .rq_depth = RQ_DEPTH,
	    .wait_mode = RK_WAIT_EVENT,
	    .prepare = prepare,
	    .prepare_arg = s,
	    .pd = s->pd,
	};
}

/* Accept the lanes the listener handed over (see cp_session_join). */
static int take_joins(struct session *s, struct rk_error *err)
{
	struct rk_cm_request *reqs[CP_MAX_LANES];
	uint64_t v;

	if (read(s->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	pthread_mutex_lock(&reg_mu);
	memcpy(reqs, s->joins, sizeof(reqs));
	memset(s->joins, 0, sizeof(s->joins));
	pthread_mutex_unlock(&reg_mu);
	for (unsigned l = 1; l < CP_MAX_LANES; l++) {
		struct rk_conn_opts o = conn_opts(s);
		struct rk_conn *conn = NULL;
		int r;

		if (!reqs[l])
			continue;
		r = rk_mr_alloc_pd(s->pd, (size_t)RQ_DEPTH * CP_MSG_MAX, RK_ACCESS_LOCAL, err,
				   &s->lanes[l].rbufs);
		if (r) {
			rk_cm_request_reject(reqs[l], RK_REJECT_BUSY, "server out of memory", NULL);
			reqs[l] = NULL;
			for (unsigned k = l + 1; k < CP_MAX_LANES; k++)
				if (reqs[k])
					rk_cm_request_reject(reqs[k], RK_REJECT_BUSY,
							     "server out of memory", NULL);
			return r;
		}
		s->prep_lane = l;
		r = rk_cm_request_accept(reqs[l], &o, NULL, 0, ACCEPT_MS, err, &conn);
		reqs[l] = NULL;
		if (r) {
			s->lanes[l].conn = NULL;
			for (unsigned k = l + 1; k < CP_MAX_LANES; k++)
				if (reqs[k])
					rk_cm_request_reject(reqs[k], RK_REJECT_BUSY,
							     "session failed", NULL);
			return r;
		}
		s->lanes[l].conn = conn;
	}
	return 0;
}

/*
 * The event loop: completions and CM events (a client that dies is seen
 * as DISCONNECTED), each wait bounded, and the session given up after
 * an idle_ms period that moved less than IDLE_MIN_BYTES (see do_record).
 */
static int serve(struct session *s, struct rk_error *err)
{
	uint64_t last = cli_now_ns();

	s->progress_ns = last;
	for (;;) {
		struct pollfd pfd[1 + 2 * CP_MAX_LANES] = {{.fd = s->evfd, .events = POLLIN}};
		unsigned lane_of[1 + 2 * CP_MAX_LANES] = {0}, npfd = 1;
		int n = drain_cq(s, err);

		if (n < 0)
			return n;
		if (n) {
			last = cli_now_ns();
			continue;
		}
		/* After BYE, let the client hang up first (it has our last CREDIT). */
		if (s->bye && !sends_pending(s) && cli_now_ns() - last > BYE_LINGER_NS)
			return 0;
		if (atomic_load(s->srv->stop))
			return -ESHUTDOWN;
		if (!s->hello_done && cli_now_ns() - last > (uint64_t)HELLO_MS * 1000000)
			return -ETIMEDOUT;
		if (cli_now_ns() - s->progress_ns > (uint64_t)s->srv->idle_ms * 1000000)
			return -ETIMEDOUT;
		n = arm_all(s, err);
		if (n)
			return n;
		n = drain_cq(s, err);
		if (n < 0)
			return n;
		if (n) {
			last = cli_now_ns();
			continue;
		}
		for (unsigned l = 0; l < CP_MAX_LANES; l++) {
			if (!s->lanes[l].conn)
				continue;
			pfd[npfd++] = (struct pollfd){.fd = rk_cq_fd(rk_conn_cq(s->lanes[l].conn)),
						      .events = POLLIN};
			lane_of[npfd] = l;
			pfd[npfd++] = (struct pollfd){.fd = rk_conn_cm_fd(s->lanes[l].conn),
						      .events = POLLIN};
		}
		if (poll(pfd, npfd, 500) < 0 && errno != EINTR)
			return -errno;
		if (pfd[0].revents & POLLIN) {
			n = take_joins(s, err);
			if (n)
				return n;
		}
		/* Any lane going down ends the session. */
		for (unsigned i = 2; i < npfd; i += 2) {
			int st;

			if (!(pfd[i].revents & POLLIN))
				continue;
			st = rk_conn_progress(s->lanes[lane_of[i]].conn, 0, err);
			if (st != RK_CONN_CONNECTED)
				return s->bye && !sends_pending(s) ? 0 : -ECONNRESET;
		}
	}
}

/* Leave the registry; lanes handed over but not taken are refused. */
static void unregister(struct session *s)
{
	pthread_mutex_lock(&reg_mu);
	if (s->registered) {
		struct session **pp = &reg_head;

		while (*pp && *pp != s)
			pp = &(*pp)->reg_next;
		if (*pp)
			*pp = s->reg_next;
		s->registered = 0;
	}
	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		if (s->joins[l])
			rk_cm_request_reject(s->joins[l], RK_REJECT_APP, "session is over", NULL);
		s->joins[l] = NULL;
	}
	pthread_mutex_unlock(&reg_mu);
}

static void session_free(struct session *s)
{
	unregister(s);
	for (unsigned i = 0; i < MAX_OPEN; i++)
		if (s->files[i].used)
			close_file(&s->files[i], 0); /* keep the temporary for --resume */
	for (unsigned l = CP_MAX_LANES; l-- > 0;) {
		rk_conn_destroy(s->lanes[l].conn);
		rk_mr_dereg(s->lanes[l].rbufs);
	}
	rk_mr_dereg(s->ring);
	rk_mr_dereg(s->sbufs);
	rk_pd_free(s->pd);
	if (s->evfd >= 0)
		close(s->evfd);
	rk_free_aligned(s->data);
	free(s->hashbuf);
	free(s);
}

static void *session_main(void *arg)
{
	struct session *s = arg;
	struct cp_server *srv;
	struct rk_conn_opts o = conn_opts(s);
	struct rk_conn *conn = NULL;
	struct rk_error err;
	int r;

	rk_error_clear(&err);
	r = rk_cm_request_accept(s->req, &o, NULL, 0, ACCEPT_MS, &err, &conn);
	s->req = NULL;
	s->lanes[0].conn = conn;
	if (r) {
		fprintf(stderr, "rk serve: %s: accept failed: %s\n", s->peer, rk_error_str(&err));
	} else {
		slog(s, "connected");
		r = serve(s, &err);
		if (r == 0)
			slog(s, "done");
		else if (r == -ECONNRESET)
			slog(s, "client disconnected");
		else if (r == -ETIMEDOUT)
			slog(s, "less than 1 MiB written in %d s (--idle); connection closed",
			     s->srv->idle_ms / 1000);
		else if (r == -ESHUTDOWN)
			slog(s, "server shutting down");
		else if (r == -EPROTO)
			slog(s, "protocol error; connection closed");
		else
			slog(s, "connection lost: %s", rk_error_str(&err));
	}
	srv = s->srv;
	session_free(s);
	/* Last: the main thread closes the device once no session is active. */
	atomic_fetch_sub(&srv->active, 1);
	return NULL;
}

int cp_session_start(struct cp_server *srv, struct rk_cm_request *req)
{
	struct session *s = calloc(1, sizeof(*s));
	struct rk_error err;
	pthread_attr_t attr;
	pthread_t th;
	int r = -ENOMEM;

	if (!s)
		goto reject;
	s->srv = srv;
	s->req = req;
	s->next_id = 1;
	s->evfd = -1;
	snprintf(s->peer, sizeof(s->peer), "%s", rk_cm_request_peer(req));
	for (unsigned i = 0; i < MAX_OPEN; i++)
		s->files[i].fd = s->files[i].dirfd = -1;
	s->hashbuf = malloc(HASH_BUF);
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!s->hashbuf || s->evfd < 0)
		goto reject;
	r = rk_pd_alloc(srv->dev, &err, &s->pd);
	if (!r)
		r = rk_mr_alloc_pd(s->pd, (size_t)RQ_DEPTH * CP_MSG_MAX, RK_ACCESS_LOCAL, &err,
				   &s->lanes[0].rbufs);
	if (!r)
		r = rk_mr_alloc_pd(s->pd, (size_t)NSEND * CP_MSG_MAX, RK_ACCESS_LOCAL, &err,
				   &s->sbufs);
	if (r) {
		fprintf(stderr, "rk serve: %s: %s\n", s->peer, rk_error_str(&err));
		goto reject;
	}
	r = pthread_attr_init(&attr);
	if (r) {
		r = -r;
		goto reject;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	atomic_fetch_add(&srv->active, 1);
	r = pthread_create(&th, &attr, session_main, s);
	pthread_attr_destroy(&attr);
	if (r) {
		atomic_fetch_sub(&srv->active, 1);
		r = -r;
		goto reject;
	}
	return 0;
reject:
	rk_cm_request_reject(req, RK_REJECT_BUSY, "server could not start a session", NULL);
	if (s) {
		s->req = NULL;
		session_free(s);
	}
	return r;
}

int cp_session_join(struct rk_cm_request *req, unsigned lane, const uint8_t *key)
{
	struct session *found = NULL;
	uint64_t one = 1;

	pthread_mutex_lock(&reg_mu);
	/* Compare with every session, in constant time each: no early exit. */
	for (struct session *s = reg_head; s; s = s->reg_next)
		if (cp_token_equal(s->key, key, CP_KEY_LEN))
			found = s;
	if (!found || lane >= found->want_lanes || (found->claimed & 1u << lane)) {
		pthread_mutex_unlock(&reg_mu);
		rk_cm_request_reject(req, RK_REJECT_APP, "no such session or lane", NULL);
		return -ENOENT;
	}
	found->joins[lane] = req;
	found->claimed |= 1u << lane;
	if (write(found->evfd, &one, sizeof(one)) < 0) {
		/* Cannot happen with an eventfd below its maximum; the session
		 * still finds the request on its next wake-up. */
	}
	pthread_mutex_unlock(&reg_mu);
	return 0;
}

unsigned cp_session_fds(unsigned max_open)
{
	return 1 + 2 * CP_MAX_LANES + 4 + 2 * max_open;
}

uint64_t cp_session_pinned(uint32_t max_ring)
{
	/* Per lane its receive and CREDIT buffers, rounded up to pages as pinned. */
	uint64_t lane = ((uint64_t)RQ_DEPTH * CP_MSG_MAX + 4095) / 4096 * 4096 +
			((uint64_t)NSEND * CP_MSG_MAX + 4095) / 4096 * 4096;

	return max_ring + CP_MAX_LANES * lane;
}
