/*
 * copy_files.h - what an rk serve session does with the records of its
 * slots, on real files beneath DIR, and nothing else: no verbs, no
 * threads, no ring. copy_recv.c feeds it the records of each slot (from
 * its private copy of the slot) and sends back the results it collects;
 * the fuzz target fuzz/copy_session.c feeds it arbitrary records on a
 * tree full of traps.
 *
 * Files are written to ".NAME.rkpart" next to their destination, locked
 * with flock so two clients cannot write the same one, verified as a whole
 * (streaming XXH3-128 in offset order) at END, fsync'ed, and only then
 * renamed into place (RENAME_NOREPLACE unless --force). A session that
 * ends early closes its files and leaves the temporaries for --resume
 * (rk serve removes them once older than --tmp-age, copy_sweep.c).
 * Those steps on disk, one file at a time, are copy_disk.h's; this file
 * holds what records ask of them, the results, the limits and the log.
 *
 * Limits a client cannot get around here: files open at once
 * (--max-open), files and directories per session (--max-files), bytes
 * per session (--max-bytes), file size (--max-file-size, existing files
 * too), and the progress the idle timer counts (below).
 */
#ifndef RK_COPY_FILES_H
#define RK_COPY_FILES_H

#include <stdint.h>

#include <xxhash.h>

#include "copy_proto.h"
#include "copy_recv.h"

/*
 * --idle is a minimum rate, not a silence detector: a period ends well only
 * once CP_IDLE_MIN_BYTES moved in it (17 KiB/s at the default 60 s, far below
 * any real link), so trickling a byte, an empty slot or a directory per
 * period cannot hold a session (and a --max-clients place) for ever. An
 * entry made or found up to date counts CP_ENTRY_BYTES besides its data,
 * so a tree of tiny files keeps its session.
 */
#define CP_IDLE_MIN_BYTES (1u << 20)
#define CP_ENTRY_BYTES	  4096u

struct cp_rfile {
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

/* One session's files. The caller sets flags and chunk from the HELLO. */
struct cp_files {
	const struct cp_server *srv; /* DIR and the limits; borrowed */
	const char *peer;	     /* for the log lines; borrowed */
	uint16_t flags;		     /* CP_F_* of the session */
	uint32_t chunk;		     /* the session's chunk size */
	uint32_t next_id, nfiles;
	uint64_t bytes;	     /* announced by the files begun (--max-bytes) */
	uint64_t progressed; /* what counts against --idle since the caller last zeroed it */
	uint64_t moved;	     /* file data written in this session */
	int bye;	     /* the client said BYE: no further records */
	/* Outcomes so far: files committed (and their bytes), up to date, failed; directories. */
	uint32_t n_ok, n_uptodate, n_failed, n_dirs;
	uint64_t bytes_ok;
	uint8_t *hashbuf; /* CP_DISK_HASH_BUF bytes, lent to copy_disk.c for reading files */
	struct cp_rfile files[CP_SERVE_MAX_OPEN];
};

/*
 * cp_files_init - no file open, ids from 1. Allocates a 1 MiB buffer for
 * hashing existing files. Returns 0 or -ENOMEM. Not thread-safe: one
 * session's thread owns @fs.
 */
int cp_files_init(struct cp_files *fs, const struct cp_server *srv, const char *peer);

/*
 * cp_files_record - act on one record @r of a slot, with the slot's data
 * block @data (chunk bytes, in memory the peer cannot write), and append
 * its result (if any) to @c. File ids grow strictly with each DIR /
 * BEGIN; a later record for an id no longer open belongs to a file that
 * already failed and is ignored. Returns 0, or -EPROTO for anything else
 * out of line (the session must end). Blocks on file I/O (pwrite, fsync,
 * hashing a resumed prefix).
 */
int cp_files_record(struct cp_files *fs, struct cp_results *c, const struct cp_rec *r,
		    const uint8_t *data);

/* cp_files_close - close every open file, keeping the temporaries (for --resume); free. */
void cp_files_close(struct cp_files *fs);

#endif
