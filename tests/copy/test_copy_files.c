/*
 * test_copy_files.c - rk serve's file sink (copy_files.c) on the host: the
 * records a session applies, straight to cp_files_record, on a scratch
 * directory with a sibling "outside" that nothing may touch. No verbs: the
 * transport only hands the sink a private copy of each slot.
 *
 * What it pins down: files and directories are made beneath DIR only; data
 * goes to ".NAME.rkpart" and the name appears only once the whole file is
 * verified; an existing file is kept without --force and replaced with it;
 * a second session on the same file is refused (BUSY); --resume keeps the
 * longest prefix the client proved and nothing it did not; every escape
 * (absolute, "..", a symlink out, a planted link at the temporary name) is
 * refused or defused; chunk and whole-file hashes are checked; records out
 * of line end the session.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "copy_files.h"
#include "copy_proto.h"

#define CHUNK 4096u

static char top[PATH_MAX], dir[PATH_MAX], outside[PATH_MAX];

struct sess {
	struct cp_server srv;
	struct cp_files fs;
	struct cp_results c; /* the results of the last record */
};

static void path_in(char *out, const char *base, const char *rel)
{
	assert_true((size_t)snprintf(out, PATH_MAX, "%s/%s", base, rel) < PATH_MAX);
}

static void sess_open(struct sess *s, uint16_t flags)
{
	memset(s, 0, sizeof(*s));
	s->srv.max_file_size = 1ull << 30;
	s->srv.max_bytes = 1ull << 32;
	s->srv.max_files = 1000;
	s->srv.max_open = 16;
	s->srv.rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(s->srv.rootfd >= 0);
	assert_int_equal(cp_files_init(&s->fs, &s->srv, "test"), 0);
	s->fs.flags = flags;
	s->fs.chunk = CHUNK;
}

static void sess_close(struct sess *s)
{
	cp_files_close(&s->fs);
	close(s->srv.rootfd);
}

/* One record through the sink; returns cp_files_record's value. */
static int apply(struct sess *s, struct cp_rec *r, const uint8_t *data)
{
	memset(&s->c, 0, sizeof(s->c));
	return cp_files_record(&s->fs, &s->c, r, data);
}

/* The code of the only result of the last record (-1: a READY, -2: none). */
static int code_of(const struct sess *s)
{
	if (s->c.nres == 0)
		return -2;
	assert_int_equal(s->c.nres, 1);
	return s->c.res[0].kind == CP_RES_DONE ? s->c.res[0].code : -1;
}

static int rec_dir(struct sess *s, uint32_t id, const char *name)
{
	struct cp_rec r = {.type = CP_REC_DIR, .file_id = id, .name = name};

	r.name_len = (uint16_t)strlen(name);
	assert_int_equal(apply(s, &r, NULL), 0);
	return code_of(s);
}

static int rec_begin(struct sess *s, uint32_t id, const char *name, uint64_t size, uint8_t flags,
		     const uint8_t *whole, const uint8_t *proof, uint32_t proof_len)
{
	struct cp_rec r = {.type = CP_REC_BEGIN, .flags = flags, .file_id = id, .name = name};

	r.name_len = (uint16_t)strlen(name);
	r.a = size;
	r.b = 0644;
	r.data_len = proof_len;
	if (whole)
		memcpy(r.hash, whole, 16);
	assert_int_equal(apply(s, &r, proof), 0);
	return code_of(s);
}

static int rec_data(struct sess *s, uint32_t id, uint64_t off, const uint8_t *p, uint32_t len)
{
	struct cp_rec r = {.type = CP_REC_DATA, .file_id = id};

	r.a = off;
	r.data_len = len;
	cp_hash128(p - off, off + len, r.hash); /* the file's digest so far: @p is at @off */
	assert_int_equal(apply(s, &r, p), 0);
	return code_of(s);
}

static int rec_end(struct sess *s, uint32_t id, const uint8_t *whole)
{
	struct cp_rec r = {.type = CP_REC_END, .file_id = id};

	memcpy(r.hash, whole, 16);
	assert_int_equal(apply(s, &r, NULL), 0);
	return code_of(s);
}

/* @n bytes of a pattern that depends on @seed. */
static uint8_t *pattern(size_t n, unsigned seed)
{
	uint8_t *p = malloc(n);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 12));
	return p;
}

/* All of @p (@n bytes) as file @id named @name, in chunks; returns the code it ends with. */
static int send_flags(struct sess *s, uint32_t id, const char *name, uint8_t flags,
		      const uint8_t *p, size_t n)
{
	uint8_t whole[16];
	int code;

	cp_hash128(p, n, whole);
	code = rec_begin(s, id, name, n, flags, whole, NULL, 0);
	if (code != -2)
		return code;
	for (size_t off = 0; off < n; off += CHUNK) {
		uint32_t len = (uint32_t)(n - off < CHUNK ? n - off : CHUNK);

		code = rec_data(s, id, off, p + off, len);
		if (code != -2)
			return code;
	}
	return rec_end(s, id, whole);
}

static int send_file(struct sess *s, uint32_t id, const char *name, const uint8_t *p, size_t n)
{
	return send_flags(s, id, name, 0, p, n);
}

static int file_is(const char *base, const char *rel, const uint8_t *p, size_t n)
{
	char path[PATH_MAX];
	struct stat st;
	uint8_t *got;
	int fd, same;

	path_in(path, base, rel);
	fd = open(path, O_RDONLY | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size != n) {
		close(fd);
		return 0;
	}
	got = malloc(n + 1);
	assert_non_null(got);
	same = read(fd, got, n + 1) == (ssize_t)n && memcmp(got, p, n) == 0;
	free(got);
	close(fd);
	return same;
}

static int exists(const char *base, const char *rel)
{
	char path[PATH_MAX];
	struct stat st;

	path_in(path, base, rel);
	return lstat(path, &st) == 0;
}

static void put_file(const char *base, const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	path_in(path, base, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The names in directory @base (not recursive). */
static int entries(const char *base)
{
	DIR *d = opendir(base);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static int setup(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(top, sizeof(top), "/tmp/rk-sink-XXXXXX");
	assert_non_null(mkdtemp(top));
	path_in(dir, top, "dir");
	path_in(outside, top, "outside");
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(mkdir(outside, 0755), 0);
	put_file(outside, "secret", "keep me");
	snprintf(cmd, sizeof(cmd), "chmod 0755 '%s'", top);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	assert_true(file_is(outside, "secret", (const uint8_t *)"keep me", 7));
	assert_int_equal(entries(outside), 1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* A tree beneath DIR; the name appears only once END verified the whole file. */
static void test_create_beneath(void **state)
{
	uint8_t *p = pattern(3 * CHUNK + 100, 1), whole[16];
	struct sess s;

	(void)state;
	sess_open(&s, 0);
	assert_int_equal(rec_dir(&s, 1, "a/b"), CP_OK);
	cp_hash128(p, 3 * CHUNK + 100, whole);
	assert_int_equal(rec_begin(&s, 2, "a/b/f", 3 * CHUNK + 100, 0, whole, NULL, 0), -2);
	assert_int_equal(rec_data(&s, 2, 0, p, CHUNK), -2);
	/* Partway: the data is in the temporary, the name does not exist yet. */
	assert_true(exists(dir, "a/b/.f.rkpart"));
	assert_false(exists(dir, "a/b/f"));
	assert_int_equal(rec_data(&s, 2, CHUNK, p + CHUNK, CHUNK), -2);
	assert_int_equal(rec_data(&s, 2, 2 * CHUNK, p + 2 * CHUNK, CHUNK + 100), -2);
	assert_int_equal(rec_end(&s, 2, whole), CP_OK);
	assert_true(file_is(dir, "a/b/f", p, 3 * CHUNK + 100));
	assert_false(exists(dir, "a/b/.f.rkpart"));
	/* An empty file and one straight under the top. */
	assert_int_equal(send_file(&s, 3, "empty", p, 0), CP_OK);
	assert_true(file_is(dir, "empty", p, 0));
	sess_close(&s);
	free(p);
}

/* Without --force an existing name stays as it was; with it, it is replaced. */
static void test_exists_and_force(void **state)
{
	uint8_t *p = pattern(5000, 2);
	struct sess s;

	(void)state;
	put_file(dir, "old", "old content");
	sess_open(&s, 0);
	assert_int_equal(send_file(&s, 1, "old", p, 5000), CP_E_EXISTS);
	assert_true(file_is(dir, "old", (const uint8_t *)"old content", 11));
	assert_false(exists(dir, ".old.rkpart"));
	sess_close(&s);

	sess_open(&s, CP_F_FORCE);
	assert_int_equal(send_file(&s, 1, "old", p, 5000), CP_OK);
	assert_true(file_is(dir, "old", p, 5000));
	/* Not even --force replaces a directory with a file. */
	assert_int_equal(rec_dir(&s, 2, "adir"), CP_OK);
	assert_int_equal(send_file(&s, 3, "adir", p, 5000), CP_E_EXISTS);
	sess_close(&s);
	free(p);
}

/*
 * Without --force the commit itself refuses a name that appeared while the
 * file was on its way (rename without replacing): BEGIN found no file, END
 * finds one, keeps it, and leaves no temporary behind.
 */
static void test_exists_at_commit(void **state)
{
	uint8_t *p = pattern(2 * CHUNK, 6), whole[16];
	struct sess s;

	(void)state;
	cp_hash128(p, 2 * CHUNK, whole);
	sess_open(&s, 0);
	assert_int_equal(rec_begin(&s, 1, "late", 2 * CHUNK, 0, whole, NULL, 0), -2);
	assert_int_equal(rec_data(&s, 1, 0, p, CHUNK), -2);
	put_file(dir, "late", "someone else's");
	assert_int_equal(rec_data(&s, 1, CHUNK, p + CHUNK, CHUNK), -2);
	assert_int_equal(rec_end(&s, 1, whole), CP_E_EXISTS);
	assert_true(file_is(dir, "late", (const uint8_t *)"someone else's", 14));
	assert_false(exists(dir, ".late.rkpart"));
	sess_close(&s);
	free(p);
}

/* @n bytes of @p at DIR/@rel. */
static void put_bytes(const char *rel, const uint8_t *p, size_t n)
{
	char path[PATH_MAX];
	FILE *f;

	path_in(path, dir, rel);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/*
 * --resume, and the name appears while the file is on its way: another
 * session committed it first (one of the same client's the server had not
 * seen end, say). The same content is up to date, not "exists"; anything
 * else is kept and refused as before. No temporary is left either way.
 */
static void test_resume_committed_meanwhile(void **state)
{
	const size_t n = 4 * CHUNK;
	uint8_t *p = pattern(n, 8), whole[16], proof[16 * CP_PROOF_MAX] = {0};
	unsigned nproof = cp_proof_count(n, CHUNK);
	uint64_t step = cp_proof_step(n, CHUNK);
	const char *names[2] = {"same", "other"};
	struct sess s;

	(void)state;
	cp_hash128(p, n, whole);
	for (unsigned k = 1; k <= nproof; k++)
		cp_hash128(p, k * step, proof + 16 * (k - 1));
	for (unsigned i = 0; i < 2; i++) {
		sess_open(&s, CP_F_RESUME);
		assert_int_equal(rec_begin(&s, 1, names[i], n, CP_BEGIN_WAIT | CP_BEGIN_PROOF,
					   whole, proof, 16 * nproof),
				 -1);
		assert_int_equal(s.c.res[0].offset, 0);
		for (size_t off = 0; off < n; off += CHUNK)
			assert_int_equal(rec_data(&s, 1, off, p + off, CHUNK), -2);
		if (i == 0)
			put_bytes(names[i], p, n);
		else
			put_file(dir, names[i], "someone else's");
		assert_int_equal(rec_end(&s, 1, whole), i == 0 ? CP_E_UPTODATE : CP_E_EXISTS);
		assert_int_equal(s.fs.n_uptodate, i == 0);
		sess_close(&s);
	}
	assert_true(file_is(dir, "same", p, n));
	assert_true(file_is(dir, "other", (const uint8_t *)"someone else's", 14));
	assert_false(exists(dir, ".same.rkpart"));
	assert_false(exists(dir, ".other.rkpart"));
	free(p);
}

/*
 * What lies at a temporary's name is never written through: a hard link
 * to a file elsewhere (even one holding the very prefix the client proves,
 * so --resume would keep it if it trusted it) and a stale temporary
 * without --resume are unlinked, and a new file is created (O_EXCL).
 */
static void test_planted_temporaries(void **state)
{
	const size_t n = 4 * CHUNK;
	uint8_t *p = pattern(n, 7), whole[16], proof[16 * CP_PROOF_MAX] = {0};
	unsigned nproof = cp_proof_count(n, CHUNK);
	uint64_t step = cp_proof_step(n, CHUNK);
	char secret[PATH_MAX], tmp[PATH_MAX];
	struct stat st;
	struct sess s;
	int fd;

	(void)state;
	cp_hash128(p, n, whole);
	for (unsigned k = 1; k <= nproof; k++)
		cp_hash128(p, k * step, proof + 16 * (k - 1));
	/* outside/prefix holds the first 2 steps of the file; linked in as the temporary */
	path_in(secret, outside, "prefix");
	fd = open(secret, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, 2 * step), (ssize_t)(2 * step));
	close(fd);
	path_in(tmp, dir, ".linked.rkpart");
	assert_int_equal(link(secret, tmp), 0);
	sess_open(&s, CP_F_RESUME);
	assert_int_equal(rec_begin(&s, 1, "linked", n, CP_BEGIN_WAIT | CP_BEGIN_PROOF, whole, proof,
				   16 * nproof),
			 -1);
	assert_int_equal(s.c.res[0].kind, CP_RES_READY);
	assert_int_equal(s.c.res[0].offset, 0); /* nothing of the linked file was trusted */
	for (size_t off = 0; off < n; off += CHUNK)
		assert_int_equal(rec_data(&s, 1, off, p + off, CHUNK), -2);
	assert_int_equal(rec_end(&s, 1, whole), CP_OK);
	assert_true(file_is(dir, "linked", p, n));
	assert_true(file_is(outside, "prefix", p, 2 * step)); /* untouched */
	assert_int_equal(stat(secret, &st), 0);
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(unlink(secret), 0); /* the teardown counts what is outside */
	sess_close(&s);

	/* A stale temporary without --resume: replaced, none of its bytes kept. */
	put_file(dir, ".stale.rkpart", "stale bytes that are no part of the file");
	sess_open(&s, 0);
	assert_int_equal(send_file(&s, 2, "stale", p, n), CP_OK);
	assert_true(file_is(dir, "stale", p, n));
	assert_false(exists(dir, ".stale.rkpart"));
	sess_close(&s);
	free(p);
}

/* Two sessions on one file: the second is refused while the first holds it. */
static void test_busy(void **state)
{
	uint8_t *p = pattern(2 * CHUNK, 3), whole[16];
	struct sess a, b;

	(void)state;
	cp_hash128(p, 2 * CHUNK, whole);
	sess_open(&a, 0);
	sess_open(&b, 0);
	assert_int_equal(rec_begin(&a, 1, "shared", 2 * CHUNK, 0, whole, NULL, 0), -2);
	assert_int_equal(rec_data(&a, 1, 0, p, CHUNK), -2);
	assert_int_equal(rec_begin(&b, 1, "shared", 2 * CHUNK, 0, whole, NULL, 0), CP_E_BUSY);
	assert_int_equal(rec_data(&a, 1, CHUNK, p + CHUNK, CHUNK), -2);
	assert_int_equal(rec_end(&a, 1, whole), CP_OK);
	assert_true(file_is(dir, "shared", p, 2 * CHUNK));
	sess_close(&b);
	sess_close(&a);
	free(p);
}

/*
 * --resume: a session that ended partway keeps its temporary; the next one
 * starts at the longest prefix the client proved (hashes at multiples of
 * the proof step), so a temporary that differs is rewritten from 0.
 */
static void resume_case(int lie)
{
	const size_t n = 4 * CHUNK;
	uint8_t *p = pattern(n, 4), whole[16], proof[16 * CP_PROOF_MAX] = {0};
	unsigned nproof = cp_proof_count(n, CHUNK);
	uint64_t step = cp_proof_step(n, CHUNK);
	struct sess s;

	assert_int_equal(nproof, 3);
	cp_hash128(p, n, whole);
	sess_open(&s, 0);
	assert_int_equal(rec_begin(&s, 1, lie ? "liar" : "big", n, 0, whole, NULL, 0), -2);
	assert_int_equal(rec_data(&s, 1, 0, p, CHUNK), -2);
	assert_int_equal(rec_data(&s, 1, CHUNK, p + CHUNK, CHUNK), -2);
	assert_int_equal(rec_data(&s, 1, 2 * CHUNK, p + 2 * CHUNK, 100), -2);
	sess_close(&s); /* the client went away */
	assert_true(exists(dir, lie ? ".liar.rkpart" : ".big.rkpart"));

	for (unsigned k = 1; k <= nproof; k++)
		cp_hash128(p, k * step, proof + 16 * (k - 1));
	if (lie)
		proof[0] ^= 1; /* the first prefix does not match: nothing is kept */
	sess_open(&s, CP_F_RESUME);
	assert_int_equal(rec_begin(&s, 1, lie ? "liar" : "big", n, CP_BEGIN_WAIT | CP_BEGIN_PROOF,
				   whole, proof, 16 * nproof),
			 -1);
	assert_int_equal(s.c.res[0].kind, CP_RES_READY);
	assert_int_equal(s.c.res[0].offset, lie ? 0 : 2 * step);
	for (size_t off = s.c.res[0].offset; off < n; off += CHUNK)
		assert_int_equal(rec_data(&s, 1, off, p + off, CHUNK), -2);
	assert_int_equal(rec_end(&s, 1, whole), CP_OK);
	assert_true(file_is(dir, lie ? "liar" : "big", p, n));
	sess_close(&s);

	/* Once there and identical, a resumed file is found up to date. */
	sess_open(&s, CP_F_RESUME);
	assert_int_equal(rec_begin(&s, 1, lie ? "liar" : "big", n, CP_BEGIN_WAIT | CP_BEGIN_PROOF,
				   whole, proof, 16 * nproof),
			 CP_E_UPTODATE);
	sess_close(&s);
	free(p);
}

static void test_resume_prefix(void **state)
{
	(void)state;
	resume_case(0);
}

static void test_resume_unproven(void **state)
{
	(void)state;
	resume_case(1);
}

/*
 * One file onto DEST without a trailing '/' (CP_BEGIN_INTO, name DEST/LEAF):
 * inside DEST when it is a directory, else DEST itself; never through a link.
 */
static void test_into(void **state)
{
	uint8_t *p = pattern(CHUNK + 9, 9);
	char link[PATH_MAX];
	struct sess s;

	(void)state;
	path_in(link, dir, "out");
	assert_int_equal(symlink(outside, link), 0);
	put_file(dir, "plain", "was here");
	sess_open(&s, 0);
	assert_int_equal(rec_dir(&s, 1, "d"), CP_OK);
	struct {
		const char *name, *lands;
		int code;
	} cases[] = {
	    {"d/leaf", "d/leaf", CP_OK},	  /* a directory: inside */
	    {"new/leaf", "new", CP_OK},		  /* nothing there: the file itself */
	    {"a/b/leaf", "a/b", CP_OK},		  /* ... with its parents made */
	    {"plain/leaf", "plain", CP_E_EXISTS}, /* a file there: exists, no --force */
	    {"out/leaf", NULL, CP_E_PATH},	  /* a symlink: refused */
	    {"leaf", "leaf", CP_OK},		  /* DEST is the top */
	};
	uint32_t id = 2;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++, id++) {
		assert_int_equal(send_flags(&s, id, cases[i].name, CP_BEGIN_INTO, p, CHUNK + 9),
				 cases[i].code);
		if (cases[i].code == CP_OK)
			assert_true(file_is(dir, cases[i].lands, p, CHUNK + 9));
	}
	assert_true(file_is(dir, "plain", (const uint8_t *)"was here", 8));
	assert_false(exists(dir, "d/leaf/leaf"));
	sess_close(&s);
	/* --force replaces a file at DEST, and still goes inside a directory. */
	sess_open(&s, CP_F_FORCE);
	assert_int_equal(send_flags(&s, 1, "plain/leaf", CP_BEGIN_INTO, p, CHUNK), CP_OK);
	assert_true(file_is(dir, "plain", p, CHUNK));
	assert_int_equal(send_flags(&s, 2, "d/leaf", CP_BEGIN_INTO, p, CHUNK), CP_OK);
	assert_true(file_is(dir, "d/leaf", p, CHUNK));
	sess_close(&s);
	free(p);
}

/*
 * A client that pulls into DEST takes names at DEST or beneath it only: a
 * server that names a sibling of DEST, or DEST's parent, gets CP_E_PATH.
 */
static void test_only_under(void **state)
{
	uint8_t *p = pattern(100, 3);
	struct sess s;

	(void)state;
	sess_open(&s, 0);
	s.srv.only_under = "dest";
	assert_int_equal(rec_dir(&s, 1, "dest"), CP_OK);
	assert_int_equal(rec_dir(&s, 2, "dest/sub"), CP_OK);
	assert_int_equal(send_flags(&s, 3, "dest/sub/f", 0, p, 100), CP_OK);
	assert_true(file_is(dir, "dest/sub/f", p, 100));
	assert_int_equal(send_flags(&s, 4, "dest/g", CP_BEGIN_INTO, p, 100), CP_OK);
	assert_int_equal(rec_dir(&s, 5, "destx"), CP_E_PATH);
	assert_int_equal(rec_dir(&s, 6, "other"), CP_E_PATH);
	assert_int_equal(send_flags(&s, 7, "destx/f", 0, p, 100), CP_E_PATH);
	assert_int_equal(send_flags(&s, 8, ".bashrc", 0, p, 100), CP_E_PATH);
	assert_int_equal(send_flags(&s, 9, "des", 0, p, 100), CP_E_PATH);
	assert_false(exists(dir, "destx"));
	assert_false(exists(dir, ".bashrc"));
	assert_false(exists(dir, "des"));
	sess_close(&s);
	free(p);
}

/* Every way out of DIR is refused, and nothing outside is touched. */
static void test_escapes(void **state)
{
	static const char *const lexical[] = {
	    "../outside/x", "/tmp/x", "a/../../x", ".", "..", "a//b", "", "a/./b", ".x.rkpart"};
	uint8_t *p = pattern(CHUNK, 5);
	char link[PATH_MAX];
	uint32_t id = 1;
	struct sess s;

	(void)state;
	path_in(link, dir, "out");
	assert_int_equal(symlink(outside, link), 0);
	path_in(link, dir, "abs");
	assert_int_equal(symlink("/tmp", link), 0);
	path_in(link, dir, ".planted.rkpart");
	assert_int_equal(symlink("../outside/secret", link), 0);
	sess_open(&s, CP_F_FORCE);
	for (size_t i = 0; i < sizeof(lexical) / sizeof(lexical[0]); i++) {
		assert_int_equal(send_file(&s, id++, lexical[i], p, CHUNK), CP_E_PATH);
		assert_int_equal(rec_dir(&s, id++, lexical[i]), CP_E_PATH);
	}
	/* A symlink in DIR leads nowhere: not to write a file, not to make a directory. */
	assert_int_equal(send_file(&s, id++, "out/x", p, CHUNK), CP_E_PATH);
	assert_int_equal(rec_dir(&s, id++, "out/sub"), CP_E_PATH);
	assert_int_equal(send_file(&s, id++, "abs/rk-sink-escape", p, CHUNK), CP_E_PATH);
	/* --force replaces the link itself, never what it points to. */
	assert_int_equal(send_file(&s, id++, "out", p, CHUNK), CP_OK);
	assert_true(file_is(dir, "out", p, CHUNK));
	/* A link planted at the temporary name is removed, not followed. */
	assert_int_equal(send_file(&s, id++, "planted", p, CHUNK), CP_OK);
	assert_true(file_is(dir, "planted", p, CHUNK));
	sess_close(&s);
	assert_false(exists("/tmp", "rk-sink-escape"));
	free(p);
}

/* A chunk or a whole file that does not match its hash is never committed. */
static void test_hashes(void **state)
{
	uint8_t *p = pattern(2 * CHUNK, 6), whole[16], bad[16];
	struct cp_rec r = {.type = CP_REC_DATA, .file_id = 1, .data_len = CHUNK};
	struct sess s;

	(void)state;
	cp_hash128(p, 2 * CHUNK, whole);
	sess_open(&s, 0);
	assert_int_equal(rec_begin(&s, 1, "h1", 2 * CHUNK, 0, whole, NULL, 0), -2);
	cp_hash128(p, CHUNK, r.hash);
	r.hash[3] ^= 0x40;
	assert_int_equal(apply(&s, &r, p), 0);
	assert_int_equal(code_of(&s), CP_E_HASH);
	assert_false(exists(dir, "h1"));
	assert_false(exists(dir, ".h1.rkpart"));

	memcpy(bad, whole, 16);
	bad[15] ^= 1;
	assert_int_equal(rec_begin(&s, 2, "h2", 2 * CHUNK, 0, bad, NULL, 0), -2);
	assert_int_equal(rec_data(&s, 2, 0, p, CHUNK), -2);
	assert_int_equal(rec_data(&s, 2, CHUNK, p + CHUNK, CHUNK), -2);
	assert_int_equal(rec_end(&s, 2, bad), CP_E_HASH);
	assert_false(exists(dir, "h2"));
	assert_false(exists(dir, ".h2.rkpart"));

	/* Data out of order, or past the announced size: the file fails. */
	assert_int_equal(rec_begin(&s, 3, "h3", 2 * CHUNK, 0, whole, NULL, 0), -2);
	assert_int_equal(rec_data(&s, 3, CHUNK, p + CHUNK, CHUNK), CP_E_PROTO);
	assert_int_equal(rec_begin(&s, 4, "h4", CHUNK, 0, whole, NULL, 0), -2);
	assert_int_equal(rec_data(&s, 4, 0, p, CHUNK), -2);
	assert_int_equal(rec_data(&s, 4, CHUNK, p + CHUNK, CHUNK), CP_E_PROTO);
	/* A DATA record's hash is the file's so far: the chunk's own hash alone is refused. */
	assert_int_equal(rec_begin(&s, 5, "h5", 2 * CHUNK, 0, whole, NULL, 0), -2);
	assert_int_equal(rec_data(&s, 5, 0, p, CHUNK), -2);
	r.file_id = 5;
	r.a = CHUNK;
	cp_hash128(p + CHUNK, CHUNK, r.hash);
	assert_int_equal(apply(&s, &r, p + CHUNK), 0);
	assert_int_equal(code_of(&s), CP_E_HASH);
	sess_close(&s);
	assert_false(exists(dir, "h3"));
	assert_false(exists(dir, "h4"));
	assert_false(exists(dir, "h5"));
	free(p);
}

/* Records out of line end the session; a late record of a failed file is ignored. */
static void test_out_of_line(void **state)
{
	uint8_t *p = pattern(CHUNK, 7);
	struct cp_rec r = {.type = CP_REC_END, .file_id = 9};
	struct sess s;

	(void)state;
	sess_open(&s, 0);
	assert_int_equal(send_file(&s, 5, "o1", p, CHUNK), CP_OK);
	/* Ids only grow. */
	r.type = CP_REC_DIR;
	r.file_id = 5;
	r.name = "d";
	r.name_len = 1;
	assert_int_equal(apply(&s, &r, NULL), -EPROTO);
	/* A record for an id never begun. */
	r.type = CP_REC_END;
	r.file_id = 9;
	assert_int_equal(apply(&s, &r, NULL), -EPROTO);
	/* A record for a file that already ended: ignored, no result. */
	r.file_id = 5;
	assert_int_equal(apply(&s, &r, NULL), 0);
	assert_int_equal(s.c.nres, 0);
	/* Unknown and retired types. */
	assert_int_equal(send_file(&s, 6, "o2", p, 0), CP_OK);
	r.type = CP_REC_RESTART;
	r.file_id = 6;
	assert_int_equal(rec_begin(&s, 7, "o3", CHUNK, 0, p, NULL, 0), -2);
	r.file_id = 7;
	assert_int_equal(apply(&s, &r, NULL), -EPROTO);
	sess_close(&s);
	free(p);
}

/* The limits a client cannot get around: files, open files, bytes, file size. */
static void test_limits(void **state)
{
	uint8_t *p = pattern(CHUNK, 8), whole[16];
	struct sess s;

	(void)state;
	cp_hash128(p, CHUNK, whole);
	sess_open(&s, 0);
	s.srv.max_files = 3;
	s.srv.max_open = 1;
	s.srv.max_file_size = 2 * CHUNK;
	s.srv.max_bytes = 3 * CHUNK;
	assert_int_equal(rec_begin(&s, 1, "l1", 3 * CHUNK, 0, whole, NULL, 0), CP_E_LIMIT);
	assert_int_equal(rec_begin(&s, 2, "l2", 2 * CHUNK, 0, whole, NULL, 0), -2);
	assert_int_equal(rec_begin(&s, 3, "l3", CHUNK, 0, whole, NULL, 0), CP_E_OPEN_LIMIT);
	assert_int_equal(rec_dir(&s, 4, "l4"), CP_E_ENTRY_LIMIT);
	sess_close(&s);

	sess_open(&s, 0);
	s.srv.max_bytes = 3 * CHUNK;
	assert_int_equal(rec_begin(&s, 1, "m1", 2 * CHUNK, 0, whole, NULL, 0), -2);
	assert_int_equal(rec_begin(&s, 2, "m2", 2 * CHUNK, 0, whole, NULL, 0), CP_E_BYTES_LIMIT);
	sess_close(&s);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_create_beneath, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exists_and_force, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exists_at_commit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_planted_temporaries, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_busy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resume_committed_meanwhile, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resume_prefix, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resume_unproven, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_into, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_only_under, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_escapes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hashes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_out_of_line, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
