/*
 * copy_session.c - rk serve's session logic behind its transport boundary
 * (tools/rk/copy/copy_files.c): the records of a client's slots applied to
 * real files, on a fresh trap tree per input (trap_tree.h).
 *
 * Input: one byte of session flags (CP_F_FORCE, CP_F_RESUME), one byte of
 * limits (bit 0: --max-files 4; bit 1: --max-open 2; bit 2:
 * --max-file-size 8 KiB; bit 3: --max-bytes 12 KiB), then slots, each a
 * big-endian u16 header length, a u16 data length (at most the chunk,
 * 4 KiB) and that many bytes of header block and of data. The slots go
 * through what the transport does with them: a private copy, the slot
 * reader, each record to cp_files_record, the results encoded as a
 * RESULTS; a record the session refuses (-EPROTO), a block the reader
 * refuses or a slot after BYE ends the session.
 *
 * Asserts, for any input:
 *  - every slot's results fit in one RESULTS, which encodes;
 *  - nothing outside DIR is created, removed, written or chmodded,
 *    whatever the names, planted links and temporaries;
 *  - without CP_F_FORCE the files that were in DIR (DIR/exists,
 *    DIR/sub/x) keep their content and inode;
 *  - once the session is closed, no fd is left open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "copy_files.h"
#include "copy_proto.h"
#include "fuzz.h"
#include "trap_tree.h"

#define CHUNK 4096u

/* A file that was in DIR before the session: what must stay without --force. */
struct kept {
	const char *name;
	struct stat st;
	char text[16];
};

static void keep(struct kept *k, const char *name)
{
	char p[PATH_MAX];

	FUZZ_CHECK((size_t)snprintf(p, sizeof(p), "%s/%s", trap_dir, name) < sizeof(p));
	k->name = name;
	FUZZ_CHECK(lstat(p, &k->st) == 0);
	trap_read_small(p, k->text, sizeof(k->text));
}

static void still_kept(const struct kept *k)
{
	char p[PATH_MAX], text[16];
	struct stat st;

	FUZZ_CHECK((size_t)snprintf(p, sizeof(p), "%s/%s", trap_dir, k->name) < sizeof(p));
	FUZZ_CHECK(lstat(p, &st) == 0 && st.st_ino == k->st.st_ino);
	FUZZ_CHECK(st.st_size == k->st.st_size && st.st_mode == k->st.st_mode);
	trap_read_small(p, text, sizeof(text));
	FUZZ_CHECK(strcmp(text, k->text) == 0);
}

/* One slot as the transport hands it over; 0 while the session goes on. */
static int one_slot(struct cp_files *fs, const uint8_t *hdr_in, size_t hlen, const uint8_t *data_in,
		    size_t dlen)
{
	static uint8_t hdr[CP_HDR_SIZE], data[CHUNK];
	uint8_t msg[CP_MSG_MAX];
	struct cp_slot_reader rd;
	struct cp_results c;
	struct cp_rec r;
	int n;

	if (fs->bye)
		return -EPROTO;
	memcpy(hdr, hdr_in, hlen);
	memcpy(data, data_in, dlen);
	if (cp_slot_reader_init(&rd, hdr, hlen, (uint32_t)dlen))
		return -EPROTO;
	memset(&c, 0, sizeof(c));
	while ((n = cp_slot_next(&rd, &r)) == 1) {
		if (cp_files_record(fs, &c, &r, data))
			return -EPROTO;
		FUZZ_CHECK(c.nres <= CP_MAX_RECORDS);
	}
	if (n < 0)
		return -EPROTO;
	FUZZ_CHECK(cp_results_encode(&c, msg, sizeof(msg)) > 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	struct cp_server srv = {
	    .max_file_size = 1ull << 40,
	    .max_bytes = 1ull << 40,
	    .max_files = 1000,
	    .max_open = CP_SERVE_MAX_OPEN,
	    .max_ring = 1u << 20,
	};
	struct trap_snap before, after;
	struct kept exists, subx;
	struct cp_files fs;
	size_t pos = 2;
	int fd0;

	if (size < 2)
		return 0;
	trap_setup();
	fd0 = fuzz_lowest_fd();
	trap_remove();
	trap_build();
	trap_snap_take(&before);
	keep(&exists, "exists");
	keep(&subx, "sub/x");
	if (in[1] & 1)
		srv.max_files = 4;
	if (in[1] & 2)
		srv.max_open = 2;
	if (in[1] & 4)
		srv.max_file_size = 8192;
	if (in[1] & 8)
		srv.max_bytes = 12288;
	srv.rootfd = open(trap_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(srv.rootfd >= 0);
	FUZZ_CHECK(cp_files_init(&fs, &srv, "fuzz") == 0);
	fs.flags = in[0] & CP_F_ALL;
	fs.chunk = CHUNK;
	while (size - pos >= 4) {
		size_t hlen = (size_t)in[pos] << 8 | in[pos + 1];
		size_t dlen = (size_t)in[pos + 2] << 8 | in[pos + 3];

		pos += 4;
		if (hlen > CP_HDR_SIZE || dlen > CHUNK || size - pos < hlen + dlen)
			break;
		if (one_slot(&fs, in + pos, hlen, in + pos + hlen, dlen))
			break;
		pos += hlen + dlen;
	}
	cp_files_close(&fs);
	close(srv.rootfd);
	trap_snap_take(&after);
	trap_snap_same(&before, &after);
	if (!(in[0] & CP_F_FORCE)) {
		still_kept(&exists);
		still_kept(&subx);
	}
	trap_remove();
	FUZZ_CHECK(fuzz_lowest_fd() == fd0);
	return 0;
}

/* ---- seeds: sessions written with the client's own encoders ---- */

static uint8_t sbuf[65536];
static size_t slen;

static void put16(size_t v)
{
	sbuf[slen++] = (uint8_t)(v >> 8);
	sbuf[slen++] = (uint8_t)v;
}

/* Append a slot of @n records and @dlen bytes of data. */
static void slot(const struct cp_rec *recs, unsigned n, const void *data, size_t dlen)
{
	static uint8_t block[CP_HDR_SIZE];
	static uint32_t seq;
	struct cp_slot_writer w;

	cp_slot_init(&w, block, sizeof(block));
	for (unsigned i = 0; i < n; i++)
		FUZZ_CHECK(cp_slot_add(&w, &recs[i]) == 0);
	cp_slot_finish(&w, seq++);
	put16(w.len);
	put16(dlen);
	memcpy(sbuf + slen, block, w.len);
	slen += w.len;
	if (dlen)
		memcpy(sbuf + slen, data, dlen);
	slen += dlen;
}

static struct cp_rec rec(uint8_t type, uint32_t id, const char *name)
{
	struct cp_rec r = {.type = type, .file_id = id, .name = name};

	r.name_len = name ? (uint16_t)strlen(name) : 0;
	return r;
}

static uint8_t begin_flags; /* the CP_BEGIN_* of upload()'s BEGIN */

/* A whole file @name of @len bytes of @fill, id @id: BEGIN, DATA per chunk, END. */
static void upload(uint32_t id, const char *name, size_t len, uint8_t fill)
{
	static uint8_t content[3 * CHUNK];
	struct cp_rec r = rec(CP_REC_BEGIN, id, name);

	r.flags = begin_flags;
	memset(content, fill, len);
	r.a = len;
	r.b = 0644;
	slot(&r, 1, NULL, 0);
	for (size_t off = 0; off < len; off += CHUNK) {
		size_t n = len - off < CHUNK ? len - off : CHUNK;

		r = rec(CP_REC_DATA, id, NULL);
		r.a = off;
		r.data_len = (uint32_t)n;
		cp_hash128(content, off + n, r.hash); /* the file's digest so far */
		slot(&r, 1, content + off, n);
	}
	r = rec(CP_REC_END, id, NULL);
	cp_hash128(content, len, r.hash);
	slot(&r, 1, NULL, 0);
}

static void start(uint8_t flags, uint8_t limits)
{
	slen = 0;
	sbuf[slen++] = flags;
	sbuf[slen++] = limits;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static const char *const traps[] = {"exists", "hl",	"file-out",  "lonely", "abs/x",
					    "rel/x",  "up/out", "dangling",  "in/y",   "sub/x",
					    "fifo",   "loop/x", "sub/back/z"};
	/* One file onto DEST without '/': a directory, a file, links out, nothing. */
	static const char *const into[] = {"sub/leaf",	 "exists/leaf", "file-out/leaf",
					   "abs/leaf",	 "up/leaf",	"nothing/leaf",
					   "sub/x/leaf", "loop/leaf",	"leaf"};
	struct cp_rec r[2];
	uint32_t id = 1;

	start(0, 0);
	upload(id++, "new", 5000, 'n');
	upload(id++, "a/b/c", 0, 0);
	r[0] = rec(CP_REC_BYE, 0, NULL);
	slot(r, 1, NULL, 0);
	emit("upload", sbuf, slen);

	start(0, 0);
	for (unsigned i = 0; i < sizeof(traps) / sizeof(traps[0]); i++)
		upload(id++, traps[i], 100, 't');
	r[0] = rec(CP_REC_DIR, id++, "up/made");
	r[1] = rec(CP_REC_DIR, id++, "in/made");
	slot(r, 2, NULL, 0);
	emit("traps", sbuf, slen);

	start(CP_F_FORCE, 0);
	for (unsigned i = 0; i < sizeof(traps) / sizeof(traps[0]); i++)
		upload(id++, traps[i], 5000, 'f');
	emit("traps-force", sbuf, slen);

	/* --resume of a file the client holds: "exists" is the 6 bytes "exists". */
	start(CP_F_RESUME, 0);
	r[0] = rec(CP_REC_BEGIN, id++, "exists");
	r[0].flags = CP_BEGIN_WAIT | CP_BEGIN_PROOF;
	r[0].a = 6;
	r[0].b = 0644;
	cp_hash128("exists", 6, r[0].hash);
	slot(r, 1, NULL, 0);
	r[0] = rec(CP_REC_BEGIN, id++, "hl");
	r[0].flags = CP_BEGIN_WAIT | CP_BEGIN_PROOF;
	r[0].a = 6;
	r[0].b = 0644;
	cp_hash128("secret", 6, r[0].hash);
	slot(r, 1, NULL, 0);
	emit("resume", sbuf, slen);

	/* limits, and an abort */
	start(0, 1 | 2 | 4 | 8);
	upload(id++, "big", 3 * CHUNK, 'b');
	r[0] = rec(CP_REC_BEGIN, id, "aborted");
	r[0].a = 100;
	r[0].b = 0600;
	r[1] = rec(CP_REC_ABORT, id++, NULL);
	slot(r, 2, NULL, 0);
	for (int i = 0; i < 5; i++)
		upload(id++, "many", 10, 'm');
	emit("limits", sbuf, slen);

	start(0, 0);
	begin_flags = CP_BEGIN_INTO;
	for (unsigned i = 0; i < sizeof(into) / sizeof(into[0]); i++)
		upload(id++, into[i], 100, 'i');
	begin_flags = 0;
	emit("into", sbuf, slen);
}
