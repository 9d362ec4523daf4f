/* copy_files.c - a session's records applied to files; see copy_files.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cli.h"
#include "copy_disk.h"
#include "copy_files.h"
#include "copy_path.h"

static const char *who(const struct cp_files *fs)
{
	return fs->srv->who ? fs->srv->who : "rk serve";
}

static void vlog(const struct cp_files *fs, FILE *to, const char *fmt, va_list ap)
{
	char line[1536];

	vsnprintf(line, sizeof(line), fmt, ap);
	if (fs->srv->progress)
		cp_progress_clear(fs->srv->progress);
	fprintf(to, "%s: %s: %s\n", who(fs), fs->peer, line);
	fflush(to);
}

/* A file done, up to date, a directory made: on stdout, and not with --quiet. */
static void flog(const struct cp_files *fs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void flog(const struct cp_files *fs, const char *fmt, ...)
{
	va_list ap;

	if (fs->srv->quiet)
		return;
	va_start(ap, fmt);
	vlog(fs, stdout, fmt, ap);
	va_end(ap);
}

/* A file or directory that failed: on stderr, with --quiet too ("errors only"). */
static void ffail(const struct cp_files *fs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void ffail(const struct cp_files *fs, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(fs, stderr, fmt, ap);
	va_end(ap);
}

/* A pull's progress bar: @n more bytes of @name are here. */
static void show(const struct cp_files *fs, uint64_t n, const char *name)
{
	if (fs->srv->progress && n)
		cp_progress_add(fs->srv->progress, n, name);
}

int cp_files_init(struct cp_files *fs, const struct cp_server *srv, const char *peer)
{
	memset(fs, 0, sizeof(*fs));
	fs->srv = srv;
	fs->peer = peer;
	fs->next_id = 1;
	for (unsigned i = 0; i < CP_SERVE_MAX_OPEN; i++)
		fs->files[i].fd = fs->files[i].dirfd = -1;
	fs->hashbuf = malloc(CP_DISK_HASH_BUF);
	return fs->hashbuf ? 0 : -ENOMEM;
}

static struct cp_rfile *find_file(struct cp_files *fs, uint32_t id)
{
	for (unsigned i = 0; i < CP_SERVE_MAX_OPEN; i++)
		if (fs->files[i].used && fs->files[i].id == id)
			return &fs->files[i];
	return NULL;
}

/* Close @f; the temporary is removed when @unlink_tmp (a failed file). */
static void close_file(struct cp_rfile *f, int unlink_tmp)
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

static void result(struct cp_results *c, uint32_t id, uint8_t kind, uint16_t code, int sys_errno,
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
static void fail_file(struct cp_files *fs, struct cp_results *c, struct cp_rfile *f, uint16_t code,
		      int sys_errno, uint64_t offset, int unlink_tmp)
{
	result(c, f->id, CP_RES_DONE, code, sys_errno, offset);
	fs->n_failed++;
	cp_progress_file(fs->srv->progress);
	SM_ADD(fs->srv->metrics, files_failed, 1);
	ffail(fs, "%s: FAILED at offset %llu: %s%s%s", f->name, (unsigned long long)offset,
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

/* @f is there already, identical: DONE up to date, and a log line. */
static void up_to_date(struct cp_files *fs, struct cp_results *c, struct cp_rfile *f,
		       int unlink_tmp)
{
	result(c, f->id, CP_RES_DONE, CP_E_UPTODATE, 0, f->size);
	cp_progress_file(fs->srv->progress);
	fs->n_uptodate++;
	flog(fs, "%s: already up to date (verified xxh3-128)", f->name);
	close_file(f, unlink_tmp);
}

/*
 * Resume, the final file exists: the client stated its size and hash. The
 * answer is yes (up to date) or no (exists).
 */
static void begin_existing(struct cp_files *fs, struct cp_results *c, struct cp_rfile *f,
			   const struct stat *fin, const uint8_t *whole)
{
	int r = (uint64_t)fin->st_size == f->size
		    ? cp_disk_final_matches(f->dirfd, f->leaf, f->size, whole, f->st, fs->hashbuf)
		    : 0;

	if (r < 0)
		fail_file(fs, c, f, CP_E_IO, r, 0, 0);
	else if (!r)
		fail_file(fs, c, f, CP_E_EXISTS, 0, 0, 0);
	else
		up_to_date(fs, c, f, 0);
}

/*
 * Whether the sender may use @name (@len bytes): a checked relative path
 * (cp_path_check) and, where srv->only_under is set, that name or one
 * beneath it.
 */
static int name_ok(const struct cp_files *fs, const char *name, size_t len)
{
	const char *u = fs->srv->only_under;
	size_t ul = u ? strlen(u) : 0;

	if (cp_path_check(name, len))
		return 0;
	return ul == 0 || (len >= ul && !memcmp(name, u, ul) && (len == ul || name[ul] == '/'));
}

/*
 * CP_BEGIN_INTO: the name is DEST/LEAF (@parent, @leaf as split). When DEST
 * is a directory beneath DIR the file goes in it; when nothing or a
 * non-directory is there, the file is DEST itself, so @name, @parent and
 * @leaf are made DEST's. A symlink on the way is an error as anywhere
 * (-EXDEV, -ELOOP). A directory made under DEST between this look and the
 * file's commit is found there then (CP_E_EXISTS), never written through.
 */
static int resolve_into(int rootfd, char *name, char *parent, char *leaf)
{
	int fd;

	if (!parent[0])
		return 0; /* DEST is DIR's top: always a directory */
	fd = cp_open_dir(rootfd, parent, 0);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (fd != -ENOENT && fd != -ENOTDIR)
		return fd;
	memmove(name, parent, strlen(parent) + 1);
	cp_path_split(name, strlen(name), parent, leaf);
	return 0;
}

static void begin_file(struct cp_files *fs, struct cp_results *c, const struct cp_rec *r,
		       const uint8_t *data)
{
	int resume = (fs->flags & CP_F_RESUME) && (r->flags & CP_BEGIN_PROOF);
	uint8_t proof[16 * CP_PROOF_MAX];
	unsigned nproof = 0;
	struct cp_rfile *f = NULL;
	char parent[CP_NAME_MAX + 1];
	struct stat st;
	int64_t good;
	int e;

	if (++fs->nfiles > fs->srv->max_files) {
		result(c, r->file_id, CP_RES_DONE, CP_E_ENTRY_LIMIT, 0, 0);
		return;
	}
	for (unsigned i = 0; i < fs->srv->max_open && !f; i++)
		if (!fs->files[i].used)
			f = &fs->files[i];
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
	if (!name_ok(fs, r->name, r->name_len)) {
		snprintf(f->name, sizeof(f->name), "(refused name)");
		fail_file(fs, c, f, CP_E_PATH, 0, 0, 0);
		return;
	}
	if (f->size > fs->srv->max_file_size) {
		fail_file(fs, c, f, CP_E_LIMIT, 0, 0, 0);
		return;
	}
	if (f->size > fs->srv->max_bytes - fs->bytes) {
		fail_file(fs, c, f, CP_E_BYTES_LIMIT, 0, 0, 0);
		return;
	}
	fs->bytes += f->size;
	if (r->flags & CP_BEGIN_PROOF) {
		/* Copied out of the ring at once: the client can rewrite it there. */
		nproof = cp_proof_count(f->size, fs->chunk);
		if (!resume || r->data_len != 16 * nproof) {
			fail_file(fs, c, f, CP_E_PROTO, 0, 0, 0);
			return;
		}
		memcpy(proof, data + r->data_off, r->data_len);
	}
	f->st = XXH3_createState();
	if (!f->st) {
		fail_file(fs, c, f, CP_E_IO, ENOMEM, 0, 0);
		return;
	}
	cp_path_split(r->name, r->name_len, parent, f->leaf);
	if (r->flags & CP_BEGIN_INTO) {
		e = resolve_into(fs->srv->rootfd, f->name, parent, f->leaf);
		if (e) {
			fail_file(fs, c, f, open_errno_code(e), e, 0, 0);
			return;
		}
	}
	cp_temp_name(f->leaf, f->tmp, sizeof(f->tmp));
	f->dirfd = cp_open_dir(fs->srv->rootfd, parent, 1);
	if (f->dirfd < 0) {
		e = f->dirfd;
		f->dirfd = -1;
		fail_file(fs, c, f, open_errno_code(e), e, 0, 0);
		return;
	}
	if (fstatat(f->dirfd, f->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (resume && S_ISREG(st.st_mode) && !(fs->flags & CP_F_FORCE)) {
			begin_existing(fs, c, f, &st, r->hash);
			return;
		}
		if (!(fs->flags & CP_F_FORCE) || S_ISDIR(st.st_mode)) {
			fail_file(fs, c, f, CP_E_EXISTS, 0, 0, 0);
			return;
		}
	} else if (errno != ENOENT) {
		fail_file(fs, c, f, open_errno_code(errno), errno, 0, 0);
		return;
	}
	if (!cp_disk_free_space_ok(f->dirfd, f->size)) {
		fail_file(fs, c, f, CP_E_NOSPACE, 0, 0, 0);
		return;
	}
	f->fd = cp_disk_open_temp(f->dirfd, f->tmp, resume, &st);
	if (f->fd < 0) {
		e = f->fd;
		f->fd = -1; /* not ours: leave it alone */
		if (e == -EBUSY) {
			fail_file(fs, c, f, CP_E_BUSY, 0, 0, 0);
			return;
		}
		fail_file(fs, c, f, open_errno_code(e), e, 0, 0);
		return;
	}
	/* Resume: keep the longest proven prefix; else start empty. */
	good = 0;
	XXH3_128bits_reset(f->st);
	if (resume && st.st_size > 0) {
		uint64_t have = (uint64_t)st.st_size < f->size ? (uint64_t)st.st_size : f->size;

		good = cp_disk_resume_point(f->fd, f->size, have, proof, nproof,
					    cp_proof_step(f->size, fs->chunk), r->hash, f->st,
					    fs->hashbuf);
		if (good < 0) {
			fail_file(fs, c, f, CP_E_IO, (int)good, 0, 1);
			return;
		}
	}
	f->next_off = f->start_off = (uint64_t)good;
	if (ftruncate(f->fd, (off_t)f->next_off)) {
		fail_file(fs, c, f, CP_E_IO, errno, 0, 1);
		return;
	}
	if (r->flags & CP_BEGIN_WAIT)
		result(c, f->id, CP_RES_READY, CP_OK, 0, f->next_off);
}

static void data_file(struct cp_files *fs, struct cp_results *c, struct cp_rfile *f,
		      const struct cp_rec *r, const uint8_t *data)
{
	uint8_t h[16];
	int e;

	/*
	 * In order, inside the announced size. The file's hash streams, and
	 * the record states its digest up to the end of these bytes: one pass
	 * over them checks the chunk and everything before it.
	 */
	if (f->existing || r->a != f->next_off || r->data_len > f->size - f->next_off) {
		fail_file(fs, c, f, CP_E_PROTO, 0, r->a, 1);
		return;
	}
	XXH3_128bits_update(f->st, data + r->data_off, r->data_len);
	cp_hash_digest(f->st, h);
	if (memcmp(h, r->hash, 16)) {
		fail_file(fs, c, f, CP_E_HASH, 0, r->a, 1);
		return;
	}
	e = cp_disk_pwrite_all(f->fd, data + r->data_off, r->data_len, r->a);
	if (e) {
		fail_file(fs, c, f, open_errno_code(e), e, r->a, 1);
		return;
	}
	f->next_off += r->data_len;
}

static void end_file(struct cp_files *fs, struct cp_results *c, struct cp_rfile *f,
		     const struct cp_rec *r)
{
	char bytes[32], rate[32];
	uint8_t h[16];
	double secs;

	if (f->existing) {
		if (memcmp(r->hash, f->existing_hash, 16)) {
			fail_file(fs, c, f, CP_E_EXISTS, 0, 0, 0);
			return;
		}
		up_to_date(fs, c, f, 0);
		return;
	}
	if (f->next_off != f->size) {
		fail_file(fs, c, f, CP_E_PROTO, 0, f->next_off, 1);
		return;
	}
	cp_hash_digest(f->st, h);
	if (memcmp(h, r->hash, 16)) {
		fail_file(fs, c, f, CP_E_HASH, 0, f->size, 1);
		return;
	}
	if (fchmod(f->fd, (mode_t)(f->mode & ~0022u) | 0600)) {
		fail_file(fs, c, f, CP_E_IO, errno, f->size, 1);
		return;
	}
	if (fsync(f->fd)) {
		fail_file(fs, c, f, CP_E_IO, errno, f->size, 1);
		return;
	}
	if (!cp_disk_same_file(f->fd, f->dirfd, f->tmp)) {
		/*
		 * Another transfer of this file took the name over (a session of
		 * a killed client's run or of a resume racing it): what the name
		 * holds is its temporary, not ours, so it is neither committed nor
		 * removed here, and the client hears "busy": it tries the file
		 * again once that transfer ended (up to date, or resumed).
		 */
		ffail(fs, "%s: the temporary was replaced under its name; not committed", f->name);
		fail_file(fs, c, f, CP_E_BUSY, 0, f->size, 0);
		return;
	}
	if (cp_disk_commit(f->dirfd, f->tmp, f->leaf, (fs->flags & CP_F_FORCE) != 0)) {
		int e = errno;

		/*
		 * Resume: the name was free at BEGIN, and now holds a file. Another
		 * session committed it meanwhile: one of this client's the server
		 * had not yet seen end, a killed client's still taking what reached
		 * its ring, or another copy of the same files. If it is what we
		 * verified, the file is there, which is what a resume asks for.
		 */
		if (e == EEXIST && (fs->flags & CP_F_RESUME) &&
		    cp_disk_final_matches(f->dirfd, f->leaf, f->size, h, f->st, fs->hashbuf) == 1) {
			up_to_date(fs, c, f, 1);
			return;
		}
		fail_file(fs, c, f, e == EEXIST ? CP_E_EXISTS : CP_E_IO, e == EEXIST ? 0 : e,
			  f->size, 1);
		return;
	}
	if (fsync(f->dirfd))
		ffail(fs, "%s: fsync of its directory: %s", f->name, strerror(errno));
	secs = (double)(cli_now_ns() - f->t0) / 1e9;
	flog(fs, "%s  %s  %.2f s  %s  verified xxh3-128%s", f->name,
	     cli_fmt_bytes(f->size, bytes, sizeof(bytes)), secs,
	     cli_fmt_rate(secs > 0 ? (double)(f->size - f->start_off) / secs : 0, rate,
			  sizeof(rate)),
	     f->start_off ? " (resumed)" : "");
	result(c, f->id, CP_RES_DONE, CP_OK, 0, f->size);
	cp_progress_file(fs->srv->progress);
	fs->n_ok++;
	fs->bytes_ok += f->size;
	SM_ADD(fs->srv->metrics, files_committed, 1);
	close_file(f, 0);
}

static void make_dir(struct cp_files *fs, struct cp_results *c, const struct cp_rec *r)
{
	char name[CP_NAME_MAX + 1];
	int fd;

	if (!name_ok(fs, r->name, r->name_len)) {
		fs->n_failed++;
		SM_ADD(fs->srv->metrics, files_failed, 1);
		ffail(fs, "(refused name)/: FAILED: %s", cp_code_str(CP_E_PATH));
		result(c, r->file_id, CP_RES_DONE, CP_E_PATH, 0, 0);
		return;
	}
	if (++fs->nfiles > fs->srv->max_files) {
		fs->n_failed++;
		SM_ADD(fs->srv->metrics, files_failed, 1);
		result(c, r->file_id, CP_RES_DONE, CP_E_ENTRY_LIMIT, 0, 0);
		return;
	}
	memcpy(name, r->name, r->name_len);
	name[r->name_len] = '\0';
	fd = cp_open_dir(fs->srv->rootfd, name, 1);
	if (fd < 0) {
		ffail(fs, "%s/: FAILED: %s", name, strerror(-fd));
		fs->n_failed++;
		SM_ADD(fs->srv->metrics, files_failed, 1);
		result(c, r->file_id, CP_RES_DONE, open_errno_code(fd), fd, 0);
		return;
	}
	close(fd);
	fs->n_dirs++;
	result(c, r->file_id, CP_RES_DONE, CP_OK, 0, 0);
}

/* Whether the record just handled ended in a success (for --idle). */
static int done_ok(const struct cp_results *c, unsigned before)
{
	const struct cp_result *r;

	if (c->nres <= before)
		return 0; /* no result (a BEGIN waiting for data), and none to index */
	r = &c->res[c->nres - 1];
	return r->kind == CP_RES_DONE && (r->code == CP_OK || r->code == CP_E_UPTODATE);
}

/*
 * One record. File ids grow strictly with each DIR / BEGIN; a later record
 * for an id that is no longer open belongs to a file that already failed,
 * and is ignored. Anything else out of line is a protocol error.
 *
 * Progress, which alone counts against the idle timer, is file data
 * written and entries made (a directory, a file committed or found up to
 * date: CP_ENTRY_BYTES each, and an up-to-date file's verified bytes); not
 * files begun, refused or failed, and not empty slots.
 */
int cp_files_record(struct cp_files *fs, struct cp_results *c, const struct cp_rec *r,
		    const uint8_t *data)
{
	unsigned before = c->nres;
	struct cp_rfile *f;
	uint64_t at;

	if (r->type == CP_REC_BYE) {
		fs->bye = 1;
		return 0;
	}
	if (r->type == CP_REC_DIR || r->type == CP_REC_BEGIN) {
		if (r->file_id < fs->next_id || r->file_id == UINT32_MAX)
			return -EPROTO;
		fs->next_id = r->file_id + 1;
		if (r->type == CP_REC_DIR)
			make_dir(fs, c, r);
		else
			begin_file(fs, c, r, data);
		if (done_ok(c, before)) {
			fs->progressed += CP_ENTRY_BYTES + c->res[c->nres - 1].offset;
			show(fs, c->res[c->nres - 1].offset, NULL); /* up to date */
		} else if (r->type == CP_REC_BEGIN && (f = find_file(fs, r->file_id)) != NULL) {
			show(fs, f->start_off, f->name); /* the prefix a resume keeps */
		}
		return 0;
	}
	if (r->file_id >= fs->next_id)
		return -EPROTO;
	f = find_file(fs, r->file_id);
	if (!f)
		return 0;
	switch (r->type) {
	case CP_REC_DATA:
		at = f->next_off;
		data_file(fs, c, f, r, data);
		if (f->used && f->next_off > at) {
			fs->progressed += f->next_off - at;
			fs->moved += f->next_off - at;
			SM_ADD(fs->srv->metrics, bytes_received, f->next_off - at);
			show(fs, f->next_off - at, f->name);
		}
		break;
	case CP_REC_END:
		end_file(fs, c, f, r);
		if (done_ok(c, before))
			fs->progressed += CP_ENTRY_BYTES;
		break;
	case CP_REC_ABORT:
		result(c, f->id, CP_RES_DONE, CP_E_ABORTED, 0, f->next_off);
		ffail(fs, "%s: aborted by the sender at offset %llu", f->name,
		      (unsigned long long)f->next_off);
		close_file(f, 0);
		break;
	default:
		return -EPROTO;
	}
	return 0;
}

void cp_files_close(struct cp_files *fs)
{
	for (unsigned i = 0; i < CP_SERVE_MAX_OPEN; i++)
		if (fs->files[i].used)
			close_file(&fs->files[i], 0); /* keep the temporary for --resume */
	free(fs->hashbuf);
	fs->hashbuf = NULL;
}
