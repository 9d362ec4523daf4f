/*
 * test_copy_proto.c - rk copy's wire codec against truncated, oversized,
 * wrong-version and garbage input: every decoder must refuse, never read
 * past what it was given.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "copy_proto.h"

static void hello_roundtrip(void **state)
{
	struct cp_hello h = {.chunk = 1 << 20,
			     .depth = 8,
			     .flags = CP_F_RESUME,
			     .lanes = 4,
			     .total_bytes = 0x123456789abull,
			     .total_files = 70000},
			g;
	uint8_t buf[CP_MSG_MAX];
	int n = cp_hello_encode(&h, buf, sizeof(buf));

	assert_true(n > 0);
	assert_int_equal(cp_msg_peek(buf, (size_t)n), CP_MSG_HELLO);
	assert_int_equal(cp_hello_decode(buf, (size_t)n, &g), 0);
	assert_int_equal(g.chunk, h.chunk);
	assert_int_equal(g.depth, 8);
	assert_int_equal(g.flags, CP_F_RESUME);
	assert_int_equal(g.lanes, 4);
	assert_int_equal(g.total_bytes, 0x123456789abull);
	assert_int_equal(g.total_files, 70000);
	/* a session that replaces another carries its key */
	h.flags = CP_F_RESUME | CP_F_REPLACES;
	memset(h.replaces, 0xa5, sizeof(h.replaces));
	h.replaces[0] = 0;
	n = cp_hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(cp_hello_decode(buf, (size_t)n, &g), 0);
	assert_int_equal(g.flags, CP_F_RESUME | CP_F_REPLACES);
	assert_memory_equal(g.replaces, h.replaces, CP_KEY_LEN);
}

static void hello_bad(void **state)
{
	struct cp_hello h = {.chunk = 1 << 20, .depth = 8, .lanes = 1}, g;
	uint8_t buf[CP_MSG_MAX];
	int n = cp_hello_encode(&h, buf, sizeof(buf));

	/* every truncation */
	for (int i = 0; i < n; i++)
		assert_int_not_equal(cp_hello_decode(buf, (size_t)i, &g), 0);
	/* a byte too many (length no longer matches) */
	assert_int_not_equal(cp_hello_decode(buf, (size_t)n + 1, &g), 0);
	/* wrong version */
	buf[4] = CP_VERSION + 1;
	assert_int_equal(cp_msg_peek(buf, (size_t)n), -EPROTO);
	assert_int_not_equal(cp_hello_decode(buf, (size_t)n, &g), 0);
	buf[4] = CP_VERSION;
	/* bad magic */
	buf[0] ^= 0xff;
	assert_int_equal(cp_msg_peek(buf, (size_t)n), -EBADMSG);
	buf[0] ^= 0xff;
	/* chunk out of range, depth 0, unknown flag */
	h.chunk = CP_CHUNK_MAX + 1;
	n = cp_hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(cp_hello_decode(buf, (size_t)n, &g), -EBADMSG);
	h.chunk = 1 << 20;
	h.depth = 0;
	n = cp_hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(cp_hello_decode(buf, (size_t)n, &g), -EBADMSG);
	h.depth = 1;
	h.flags = 0x80;
	n = cp_hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(cp_hello_decode(buf, (size_t)n, &g), -EBADMSG);
	/* no lanes, too many lanes */
	h.flags = 0;
	h.lanes = 0;
	n = cp_hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(cp_hello_decode(buf, (size_t)n, &g), -EBADMSG);
	h.lanes = CP_MAX_LANES + 1;
	n = cp_hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(cp_hello_decode(buf, (size_t)n, &g), -EBADMSG);
	h.lanes = 1;
	/* a key without CP_F_REPLACES */
	h.replaces[3] = 1;
	n = cp_hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(cp_hello_decode(buf, (size_t)n, &g), -EBADMSG);
	h.replaces[3] = 0;
	/* a HELLO is not a WELCOME */
	n = cp_hello_encode(&h, buf, sizeof(buf));
	{
		struct cp_welcome w;

		assert_int_not_equal(cp_welcome_decode(buf, (size_t)n, &w), 0);
	}
}

static void pull_roundtrip_and_bad(void **state)
{
	struct cp_pull p = {.chunk = 1 << 20,
			    .depth = 8,
			    .flags = CP_F_RESUME,
			    .options = CP_PULL_RECURSIVE,
			    .lanes = 3,
			    .nsrc = 2,
			    .dest = "d",
			    .dest_len = 1};
	uint8_t buf[CP_MSG_MAX], big[CP_NAME_MAX + 1];
	struct cp_pull g;
	int n;

	(void)state;
	p.src[0] = "data/";
	p.src_len[0] = 5;
	p.src[1] = "ckpt.bin";
	p.src_len[1] = 8;
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(cp_msg_peek(buf, (size_t)n), CP_MSG_PULL);
	assert_int_equal(cp_pull_decode(buf, (size_t)n, &g), 0);
	assert_int_equal(g.chunk, p.chunk);
	assert_int_equal(g.depth, 8);
	assert_int_equal(g.flags, CP_F_RESUME);
	assert_int_equal(g.options, CP_PULL_RECURSIVE);
	assert_int_equal(g.lanes, 3);
	assert_int_equal(g.nsrc, 2);
	assert_int_equal(g.dest_len, 1);
	assert_memory_equal(g.dest, "d", 1);
	assert_int_equal(g.src_len[1], 8);
	assert_memory_equal(g.src[1], "ckpt.bin", 8);
	/* every truncation, and a byte too many */
	for (int i = 0; i < n; i++)
		assert_int_not_equal(cp_pull_decode(buf, (size_t)i, &g), 0);
	assert_int_not_equal(cp_pull_decode(buf, (size_t)n + 1, &g), 0);
	/* a NUL inside a name */
	p.src[1] = "ck\0t.bin";
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_int_equal(cp_pull_decode(buf, (size_t)n, &g), -EBADMSG);
	p.src[1] = "ckpt.bin";
	/* an empty source; no sources; an unknown flag or option; CP_F_REPLACES */
	p.src_len[1] = 0;
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_int_equal(cp_pull_decode(buf, (size_t)n, &g), -EBADMSG);
	p.src_len[1] = 8;
	p.nsrc = 0;
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_int_equal(cp_pull_decode(buf, (size_t)n, &g), -EBADMSG);
	p.nsrc = 2;
	p.options = 2;
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_int_equal(cp_pull_decode(buf, (size_t)n, &g), -EBADMSG);
	p.options = 0;
	/* no lanes, or more than a session may have */
	p.lanes = 0;
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_int_equal(cp_pull_decode(buf, (size_t)n, &g), -EBADMSG);
	p.lanes = CP_MAX_LANES + 1;
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_int_equal(cp_pull_decode(buf, (size_t)n, &g), -EBADMSG);
	p.lanes = 1;
	p.flags = CP_F_REPLACES;
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_int_equal(cp_pull_decode(buf, (size_t)n, &g), -EBADMSG);
	p.flags = 0;
	/* a name over CP_NAME_MAX; sources that do not fit one message */
	memset(big, 'a', sizeof(big));
	p.src[0] = (const char *)big;
	p.src_len[0] = CP_NAME_MAX + 1;
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_int_equal(cp_pull_decode(buf, (size_t)n, &g), -EBADMSG);
	p.src_len[0] = CP_NAME_MAX;
	p.src[1] = (const char *)big;
	p.src_len[1] = CP_NAME_MAX;
	p.nsrc = 4;
	p.src[2] = p.src[3] = (const char *)big;
	p.src_len[2] = p.src_len[3] = CP_NAME_MAX;
	assert_int_equal(cp_pull_encode(&p, buf, sizeof(buf)), -ENOSPC);
	/* a PULL is no HELLO */
	p.nsrc = 1;
	n = cp_pull_encode(&p, buf, sizeof(buf));
	assert_true(n > 0);
	{
		struct cp_hello h;

		assert_int_not_equal(cp_hello_decode(buf, (size_t)n, &h), 0);
	}
}

static void oversized(void **state)
{
	uint8_t *buf = calloc(1, CP_MSG_MAX * 2);
	struct cp_hello h = {.chunk = 1 << 20, .depth = 8};
	int n;

	assert_non_null(buf);
	n = cp_hello_encode(&h, buf, CP_MSG_MAX * 2);
	/* claim a payload larger than any message */
	buf[8] = 0;
	buf[9] = 0;
	buf[10] = 0x20;
	buf[11] = 0;
	assert_int_equal(cp_msg_peek(buf, CP_MSG_MAX * 2), -EMSGSIZE);
	/* a length field that does not match what arrived */
	buf[10] = 0xff;
	buf[11] = 0xff;
	assert_int_not_equal(cp_msg_peek(buf, (size_t)n), CP_MSG_HELLO);
	assert_int_equal(cp_hello_encode(&h, buf, 5), -ENOSPC);
	free(buf);
}

static void welcome_roundtrip_and_bounds(void **state)
{
	struct cp_welcome w = {.ring_addr = 0x1122334455667788ull,
			       .rkey = 0xabcdef01,
			       .chunk = 65536,
			       .nslots = 16,
			       .max_name = CP_NAME_MAX,
			       .max_files = 1000,
			       .max_file_size = 1ull << 40,
			       .key = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
			  g;
	uint8_t buf[CP_MSG_MAX];
	int n = cp_welcome_encode(&w, buf, sizeof(buf));

	assert_true(n > 0);
	assert_int_equal(cp_welcome_decode(buf, (size_t)n, &g), 0);
	assert_memory_equal(&w, &g, sizeof(w));
	w.nslots = CP_MAX_SLOTS + 1;
	n = cp_welcome_encode(&w, buf, sizeof(buf));
	assert_int_equal(cp_welcome_decode(buf, (size_t)n, &g), -EBADMSG);
	w.nslots = 0;
	n = cp_welcome_encode(&w, buf, sizeof(buf));
	assert_int_equal(cp_welcome_decode(buf, (size_t)n, &g), -EBADMSG);
}

static void results_roundtrip_and_bad(void **state)
{
	struct cp_results c = {.seq = 3, .nres = 2}, *g = malloc(sizeof(*g));
	uint8_t buf[CP_MSG_MAX];
	int n;

	assert_non_null(g);
	c.res[0] = (struct cp_result){.file_id = 7, .kind = CP_RES_READY, .offset = 4096};
	c.res[1] =
	    (struct cp_result){.file_id = 8, .kind = CP_RES_DONE, .code = CP_E_HASH, .offset = 123};
	n = cp_results_encode(&c, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(cp_results_decode(buf, (size_t)n, g), 0);
	assert_int_equal(g->seq, 3);
	assert_int_equal(g->nres, 2);
	assert_int_equal(g->res[0].offset, 4096);
	/* nothing but fields: a result carries no hash of the server's files */
	assert_int_equal(n, CP_MSG_HDR + 4 + 2 * CP_RESULT_SIZE);
	assert_int_equal(g->res[1].code, CP_E_HASH);
	/* truncated in the middle of a result */
	assert_int_not_equal(cp_results_decode(buf, (size_t)n - 1, g), 0);
	/* a result count that does not match the length */
	buf[CP_MSG_HDR + 3] = 3;
	assert_int_equal(cp_results_decode(buf, (size_t)n, g), -EBADMSG);
	buf[CP_MSG_HDR + 3] = 2;
	/* no flags are defined for a result */
	buf[CP_MSG_HDR + 4 + 5] = 1;
	assert_int_equal(cp_results_decode(buf, (size_t)n, g), -EBADMSG);
	buf[CP_MSG_HDR + 4 + 5] = 0;
	/* unknown kind */
	buf[CP_MSG_HDR + 4 + 4] = 9;
	assert_int_equal(cp_results_decode(buf, (size_t)n, g), -EBADMSG);
	/* too many results to encode */
	c.nres = CP_MAX_RECORDS + 1;
	assert_int_equal(cp_results_encode(&c, buf, sizeof(buf)), -ENOSPC);
	free(g);
}

static void error_text_sanitised(void **state)
{
	uint8_t buf[CP_MSG_MAX];
	char text[16];
	uint16_t code;
	int n = cp_error_encode(4, "bad\033[2Jthing and a long tail", buf, sizeof(buf));

	assert_true(n > 0);
	assert_int_equal(cp_error_decode(buf, (size_t)n, &code, text, sizeof(text)), 0);
	assert_int_equal(code, 4);
	assert_string_equal(text, "bad?[2Jthing an"); /* escape neutralised, truncated */
	assert_int_not_equal(cp_error_decode(buf, (size_t)n - 1, &code, text, sizeof(text)), 0);
}

static void garbage(void **state)
{
	uint8_t buf[CP_MSG_MAX];
	struct cp_results *c = malloc(sizeof(*c));
	struct cp_slot_reader rd;
	struct cp_rec r;

	assert_non_null(c);
	srand(12345);
	for (int round = 0; round < 20000; round++) {
		size_t len = (size_t)rand() % sizeof(buf);

		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rand();
		if (round & 1) { /* valid header, random body */
			buf[0] = 'R', buf[1] = 'K', buf[2] = 'C', buf[3] = 'P';
			buf[4] = CP_VERSION;
		}
		(void)cp_msg_peek(buf, len);
		(void)cp_results_decode(buf, len, c);
		if (cp_slot_reader_init(&rd, buf, len > CP_HDR_SIZE ? CP_HDR_SIZE : len,
					(uint32_t)rand()) == 0)
			while (cp_slot_next(&rd, &r) == 1)
				assert_true(rd.pos <= rd.len);
	}
	free(c);
}

/* Make the block at @buf state @len as its length (cp_slot_finish states the true one). */
static void state_len(uint8_t *buf, size_t len)
{
	buf[12] = (uint8_t)(len >> 24);
	buf[13] = (uint8_t)(len >> 16);
	buf[14] = (uint8_t)(len >> 8);
	buf[15] = (uint8_t)len;
}

static void slot_roundtrip(void **state)
{
	uint8_t buf[CP_HDR_SIZE];
	struct cp_slot_writer w;
	struct cp_slot_reader rd;
	struct cp_rec r = {.type = CP_REC_BEGIN,
			   .file_id = 1,
			   .a = 10,
			   .b = 0644,
			   .name = "dir/file",
			   .name_len = 8},
		      g;

	cp_slot_init(&w, buf, sizeof(buf));
	assert_int_equal(cp_slot_add(&w, &r), 0);
	r = (struct cp_rec){.type = CP_REC_DATA, .file_id = 1, .data_off = 0, .data_len = 10};
	assert_int_equal(cp_slot_add(&w, &r), 0);
	r = (struct cp_rec){.type = CP_REC_END, .file_id = 1};
	assert_int_equal(cp_slot_add(&w, &r), 0);
	cp_slot_finish(&w, 0);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 10), 0);
	assert_int_equal(cp_slot_next(&rd, &g), 1);
	assert_int_equal(g.type, CP_REC_BEGIN);
	assert_int_equal(g.name_len, 8);
	assert_memory_equal(g.name, "dir/file", 8);
	assert_int_equal(cp_slot_next(&rd, &g), 1);
	assert_int_equal(g.data_len, 10);
	assert_int_equal(cp_slot_next(&rd, &g), 1);
	assert_int_equal(cp_slot_next(&rd, &g), 0);

	/* The data record claims more bytes than the peer placed. */
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 9), 0);
	assert_int_equal(cp_slot_next(&rd, &g), 1);
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
	/* Truncated block: the record count promises more than there is. */
	state_len(buf, w.len - 8);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len - 8, 10), 0);
	assert_int_equal(cp_slot_next(&rd, &g), 1);
	assert_int_equal(cp_slot_next(&rd, &g), 1);
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
	/* Trailing bytes after the last record. */
	state_len(buf, w.len + 8);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len + 8, 10), 0);
	while (cp_slot_next(&rd, &g) == 1)
		;
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
	/* A block whose stated length is not the one it is read with. */
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 10), -EBADMSG);
	state_len(buf, w.len);
	/* Oversized block, and a name length past the block. */
	assert_int_equal(cp_slot_reader_init(&rd, buf, CP_HDR_SIZE + 1, 10), -EBADMSG);
	buf[CP_SLOT_HDR + 2] = 0x0f;
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 10), 0);
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
	buf[CP_SLOT_HDR + 2] = 0;
	/* Unknown record type; data offset overflow. */
	buf[CP_SLOT_HDR] = 99;
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 10), 0);
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
}

static void slot_data_overflow(void **state)
{
	uint8_t buf[CP_HDR_SIZE];
	struct cp_slot_writer w;
	struct cp_slot_reader rd;
	struct cp_rec r = {.type = CP_REC_DATA,
			   .file_id = 1,
			   .data_off = 0xffffffffu,
			   .data_len = 2},
		      g;

	cp_slot_init(&w, buf, sizeof(buf));
	assert_int_equal(cp_slot_add(&w, &r), 0);
	cp_slot_finish(&w, 0);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 0xffffffffu), 0);
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
	/* too many records for one slot */
	cp_slot_init(&w, buf, sizeof(buf));
	r = (struct cp_rec){.type = CP_REC_END, .file_id = 1};
	for (int i = 0; i < CP_MAX_RECORDS; i++)
		assert_int_equal(cp_slot_add(&w, &r), 0);
	assert_int_equal(cp_slot_add(&w, &r), -ENOSPC);
}

/* Resume proofs: where the checkpoints lie, and BEGIN records that carry them. */
static void proof(void **state)
{
	uint8_t buf[CP_HDR_SIZE];
	struct cp_slot_writer w;
	struct cp_slot_reader rd;
	struct cp_rec r = {.type = CP_REC_BEGIN,
			   .flags = CP_BEGIN_WAIT | CP_BEGIN_PROOF,
			   .file_id = 1,
			   .a = 10 * 4096 + 1,
			   .name = "f",
			   .name_len = 1,
			   .data_len = 16 * 10},
		      g;

	assert_int_equal(cp_proof_step(0, 4096), 4096);
	assert_int_equal(cp_proof_count(0, 4096), 0);
	assert_int_equal(cp_proof_count(4096, 4096), 0);
	assert_int_equal(cp_proof_count(4097, 4096), 1);
	/* up to CP_PROOF_MAX chunks: one checkpoint per chunk */
	assert_int_equal(cp_proof_step(64 * 4096, 4096), 4096);
	assert_int_equal(cp_proof_count(64 * 4096, 4096), 63);
	/* more: the step grows by whole chunks, the count stays below the maximum */
	assert_int_equal(cp_proof_step(65 * 4096, 4096), 2 * 4096);
	assert_true(cp_proof_count(1ull << 40, 1u << 20) < CP_PROOF_MAX);
	assert_true(cp_proof_count(UINT64_MAX, CP_CHUNK_MIN) < CP_PROOF_MAX);
	assert_int_equal(cp_proof_step(1ull << 40, 1u << 20) % (1u << 20), 0);
	/* READY may name 0, a checkpoint or the size; nothing else */
	assert_true(cp_proof_offset_ok(3 * 4096 + 5, 4096, 0));
	assert_true(cp_proof_offset_ok(3 * 4096 + 5, 4096, 3 * 4096));
	assert_true(cp_proof_offset_ok(3 * 4096 + 5, 4096, 3 * 4096 + 5));
	assert_false(cp_proof_offset_ok(3 * 4096 + 5, 4096, 4 * 4096));
	assert_false(cp_proof_offset_ok(3 * 4096 + 5, 4096, 4095));
	assert_false(cp_proof_offset_ok(2 * 4096, 4096, 2 * 4096 + 4096));
	/* a BEGIN with a proof carries data; without WAIT, or ragged, it is refused */
	cp_slot_init(&w, buf, sizeof(buf));
	assert_int_equal(cp_slot_add(&w, &r), 0);
	cp_slot_finish(&w, 0);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 160), 0);
	assert_int_equal(cp_slot_next(&rd, &g), 1);
	assert_int_equal(g.data_len, 160);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 159), 0);
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
	r.flags = CP_BEGIN_PROOF;
	cp_slot_init(&w, buf, sizeof(buf));
	assert_int_equal(cp_slot_add(&w, &r), 0);
	cp_slot_finish(&w, 0);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 160), 0);
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
	r.flags = CP_BEGIN_WAIT | CP_BEGIN_PROOF;
	r.data_len = 15;
	cp_slot_init(&w, buf, sizeof(buf));
	assert_int_equal(cp_slot_add(&w, &r), 0);
	cp_slot_finish(&w, 0);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 160), 0);
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
	/* data on a BEGIN without a proof is refused, as on every other record */
	r.flags = CP_BEGIN_WAIT;
	r.data_len = 16;
	cp_slot_init(&w, buf, sizeof(buf));
	assert_int_equal(cp_slot_add(&w, &r), 0);
	cp_slot_finish(&w, 0);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 160), 0);
	assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
	/* INTO travels; a flag no version defines, or one on another record, is refused */
	r.data_len = 0;
	for (unsigned bit = 0; bit < 8; bit++) {
		r.type = CP_REC_BEGIN;
		r.flags = (uint8_t)(CP_BEGIN_WAIT | 1u << bit);
		cp_slot_init(&w, buf, sizeof(buf));
		assert_int_equal(cp_slot_add(&w, &r), 0);
		cp_slot_finish(&w, 0);
		assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 0), 0);
		assert_int_equal(cp_slot_next(&rd, &g), (1u << bit) & CP_BEGIN_ALL ? 1 : -EBADMSG);
		r.type = CP_REC_END;
		r.flags = (uint8_t)(1u << bit);
		r.name_len = 0;
		cp_slot_init(&w, buf, sizeof(buf));
		assert_int_equal(cp_slot_add(&w, &r), 0);
		cp_slot_finish(&w, 0);
		assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 0), 0);
		assert_int_equal(cp_slot_next(&rd, &g), -EBADMSG);
		r.name_len = 1;
	}
}

/* A message from the ring: a finished header block, then the data. */
static void slot_split(void **state)
{
	uint8_t buf[CP_HDR_SIZE + 64];
	struct cp_rec r = {.type = CP_REC_BYE};
	struct cp_slot_writer w;
	struct cp_slot_reader rd;
	uint32_t hlen = 0;

	(void)state;
	cp_slot_init(&w, buf, CP_HDR_SIZE);
	assert_int_equal(cp_slot_add(&w, &r), 0);
	/* Not finished: it states no length, and the reader wants the one it states. */
	assert_int_equal(cp_slot_split(buf, w.len + 64, &hlen), -EBADMSG);
	assert_int_equal(cp_slot_reader_init(&rd, buf, w.len, 64), -EBADMSG);
	cp_slot_finish(&w, 0xdeadbeefu);
	assert_int_equal(cp_slot_split(buf, w.len + 64, &hlen), 0);
	assert_int_equal(hlen, w.len);
	assert_int_equal(cp_slot_split(buf, w.len, &hlen), 0); /* no data is fine */
	assert_int_equal(cp_slot_reader_init(&rd, buf, hlen, 64), 0);
	assert_int_equal(rd.seq, 0xdeadbeefu);
	/* a block longer than the message, than CP_HDR_SIZE, or shorter than its header */
	assert_int_equal(cp_slot_split(buf, w.len - 1, &hlen), -EBADMSG);
	assert_int_equal(cp_slot_split(buf, CP_SLOT_HDR - 1, &hlen), -EBADMSG);
	buf[12] = 0x10; /* 0x10000000 + len */
	assert_int_equal(cp_slot_split(buf, sizeof(buf), &hlen), -EBADMSG);
	buf[12] = 0;
	buf[15] = 8;
	assert_int_equal(cp_slot_split(buf, sizeof(buf), &hlen), -EBADMSG);
	buf[15] = (uint8_t)w.len;
	buf[0] ^= 0xff;
	assert_int_equal(cp_slot_split(buf, sizeof(buf), &hlen), -EBADMSG);
}

static void lane_args(void **state)
{
	unsigned lane = 99;

	assert_int_equal(cp_lane_parse(cp_lane_arg(0), &lane), 0);
	assert_int_equal(lane, 0);
	assert_int_equal(cp_lane_parse(cp_lane_arg(3), &lane), 1);
	assert_int_equal(lane, 3);
	assert_int_equal(cp_lane_parse(cp_lane_arg(CP_MAX_LANES), &lane), -EBADMSG);
	assert_int_equal(cp_lane_parse(CP_VERSION | CP_LANE_JOIN, &lane), -EBADMSG);
	assert_int_equal(cp_lane_parse(CP_VERSION | 1u << 16, &lane), -EBADMSG);
	assert_int_equal(cp_lane_parse(CP_VERSION + 1, &lane), -EPROTO);
	assert_int_equal(cp_lane_parse(1, &lane), -EPROTO); /* a version 1 client */
	/* a pull: one connection, nothing else in the argument */
	lane = 9;
	assert_int_equal(cp_lane_parse(cp_pull_arg(), &lane), 2);
	assert_int_equal(lane, 0);
	assert_int_equal(cp_lane_parse(cp_pull_arg() | CP_LANE_JOIN, &lane), -EBADMSG);
	assert_int_equal(cp_lane_parse(cp_pull_arg() | 1u << 16, &lane), -EBADMSG);
}

/* Both sides size the ring by one rule: a header block, then the chunk in whole pages. */
static void stride(void **state)
{
	(void)state;
	assert_int_equal(cp_slot_stride(CP_CHUNK_MIN), CP_HDR_SIZE + 4096);
	assert_int_equal(cp_slot_stride(4097), CP_HDR_SIZE + 8192);
	assert_int_equal(cp_slot_stride(1u << 20), CP_HDR_SIZE + (1u << 20));
	assert_int_equal(cp_slot_stride(CP_CHUNK_MAX), CP_HDR_SIZE + CP_CHUNK_MAX);
	/* the largest slot is what one work request may carry on rxe, the ring's limit */
	assert_int_equal(cp_slot_stride(CP_CHUNK_MAX), 8u << 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(hello_roundtrip),
	    cmocka_unit_test(hello_bad),
	    cmocka_unit_test(pull_roundtrip_and_bad),
	    cmocka_unit_test(oversized),
	    cmocka_unit_test(welcome_roundtrip_and_bounds),
	    cmocka_unit_test(results_roundtrip_and_bad),
	    cmocka_unit_test(error_text_sanitised),
	    cmocka_unit_test(garbage),
	    cmocka_unit_test(slot_roundtrip),
	    cmocka_unit_test(slot_data_overflow),
	    cmocka_unit_test(proof),
	    cmocka_unit_test(slot_split),
	    cmocka_unit_test(lane_args),
	    cmocka_unit_test(stride),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
