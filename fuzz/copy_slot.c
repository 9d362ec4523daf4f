/*
 * copy_slot.c - a slot's message as rk serve copies it out of the ring: a
 * header block, then the data.
 *
 * Input: the message.
 *
 * Asserts, for any bytes:
 *  - cp_slot_split's header length lies within the message and the block
 *    bounds;
 *  - every record the reader returns lies inside the block, its name inside
 *    the block and only on DIR / BEGIN, its data inside the data length and
 *    only on DATA;
 *  - a block read to its end is written back byte for byte by the writer
 *    (cp_slot_init / cp_slot_add / cp_slot_finish), which must find room
 *    for every record the reader accepted.
 */
#include <string.h>

#include "copy_proto.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t block[CP_HDR_SIZE];
	struct cp_rec recs[CP_MAX_RECORDS];
	struct cp_slot_reader rd;
	struct cp_slot_writer w;
	uint32_t data_len, hlen;
	unsigned n = 0;
	int r;

	if (cp_slot_split(data, size, &hlen))
		return 0;
	FUZZ_CHECK(hlen >= CP_SLOT_HDR && hlen <= CP_HDR_SIZE && hlen <= size);
	data_len = (uint32_t)(size - hlen);
	size = hlen; /* the block; the data follows it */
	if (cp_slot_reader_init(&rd, data, size, data_len))
		return 0;
	while ((r = cp_slot_next(&rd, &recs[n])) == 1) {
		const struct cp_rec *e = &recs[n];

		FUZZ_CHECK(n < CP_MAX_RECORDS);
		FUZZ_CHECK(e->type >= CP_REC_DIR && e->type <= CP_REC_BYE);
		FUZZ_CHECK(rd.pos <= size);
		FUZZ_CHECK(e->name_len <= CP_NAME_MAX);
		if (e->name) {
			FUZZ_CHECK(e->type == CP_REC_DIR || e->type == CP_REC_BEGIN);
			FUZZ_CHECK((const uint8_t *)e->name >= data + CP_SLOT_HDR);
			FUZZ_CHECK((const uint8_t *)e->name + e->name_len <= data + rd.pos);
		} else {
			FUZZ_CHECK(e->name_len == 0);
		}
		FUZZ_CHECK((uint64_t)e->data_off + e->data_len <= data_len);
		/* data only on DATA, and on a BEGIN that carries a resume proof */
		FUZZ_CHECK(e->type == CP_REC_DATA ||
			   (e->type == CP_REC_BEGIN && (e->flags & CP_BEGIN_PROOF)) ||
			   (e->data_off == 0 && e->data_len == 0));
		n++;
	}
	if (r != 0)
		return 0;
	FUZZ_CHECK(n == rd.nrec && rd.pos == size);
	cp_slot_init(&w, block, sizeof(block));
	for (unsigned i = 0; i < n; i++) {
		FUZZ_CHECK(cp_slot_room(&w, recs[i].name_len));
		FUZZ_CHECK(cp_slot_add(&w, &recs[i]) == 0);
	}
	cp_slot_finish(&w, rd.seq);
	FUZZ_CHECK(w.len == size);
	FUZZ_CHECK(memcmp(block, data, size) == 0);
	return 0;
}

static void emit_block(fuzz_emit_fn *emit, const char *name, uint32_t data_len,
		       const struct cp_rec *recs, unsigned n, uint32_t seq)
{
	static uint8_t buf[CP_HDR_SIZE + 8192];
	struct cp_slot_writer w;

	cp_slot_init(&w, buf, CP_HDR_SIZE);
	for (unsigned i = 0; i < n; i++)
		if (cp_slot_add(&w, &recs[i]))
			abort();
	cp_slot_finish(&w, seq);
	memset(buf + w.len, 0x5a, data_len);
	emit(name, buf, w.len + data_len);
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct cp_rec tree[] = {
	    {.type = CP_REC_DIR, .name = "a/b", .name_len = 3},
	    {.type = CP_REC_BEGIN,
	     .file_id = 1,
	     .a = 10,
	     .b = 0644,
	     .name = "a/b/f",
	     .name_len = 5},
	    {.type = CP_REC_DATA, .file_id = 1, .a = 0, .data_off = 0, .data_len = 10},
	    {.type = CP_REC_END, .file_id = 1},
	    {.type = CP_REC_BEGIN,
	     .flags = CP_BEGIN_WAIT,
	     .file_id = 2,
	     .a = 1 << 20,
	     .b = 0600,
	     .name = "big",
	     .name_len = 3},
	};
	struct cp_rec tail[] = {
	    {.type = CP_REC_DATA, .file_id = 2, .a = 4096, .data_off = 0, .data_len = 4096},
	    {.type = CP_REC_ABORT, .file_id = 4},
	    {.type = CP_REC_BYE},
	};

	/* --resume: the client's whole-file hash and the hashes of 2 prefixes */
	struct cp_rec proof[] = {
	    {.type = CP_REC_BEGIN,
	     .flags = CP_BEGIN_WAIT | CP_BEGIN_PROOF,
	     .file_id = 5,
	     .a = 3u << 20,
	     .b = 0644,
	     .data_off = 0,
	     .data_len = 32,
	     .name = "resumed",
	     .name_len = 7},
	};

	memset(proof[0].hash, 0x33, sizeof(proof[0].hash));
	memset(tree[2].hash, 0x11, sizeof(tree[2].hash));
	memset(tree[3].hash, 0x22, sizeof(tree[3].hash));
	emit_block(emit, "tree", 10, tree, 5, 0);
	emit_block(emit, "tail", 4096, tail, 3, 7);
	emit_block(emit, "proof", 32, proof, 1, 2);
	emit_block(emit, "empty", 0, NULL, 0, 1);
}
