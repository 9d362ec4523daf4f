/*
 * copy_msg.c - rk copy's control messages (HELLO, WELCOME, RESULTS, ERROR, PULL)
 * and the rdma_cm hello's lane argument. (A slot's immediate is the
 * library's ring's: lib_ring_imm.)
 *
 * Asserts, for any bytes:
 *  - at most one decoder accepts them, that of the type cp_msg_peek names;
 *    none accepts what cp_msg_peek refuses;
 *  - what a decoder accepts, its encoder writes back byte for byte (ERROR:
 *    when the text was printable; otherwise the decoded text is printable,
 *    NUL-terminated and within the caller's buffer, and re-encoding it
 *    decodes to the same);
 *  - cp_lane_parse accepts exactly what cp_lane_arg and cp_pull_arg
 *    produce, and gives back their arguments.
 */
#include <string.h>

#include "copy_proto.h"
#include "fuzz.h"

static void same_bytes(const uint8_t *data, size_t size, const uint8_t *enc, int n)
{
	FUZZ_CHECK(n > 0 && (size_t)n == size);
	FUZZ_CHECK(memcmp(enc, data, size) == 0);
}

static void check_error(const uint8_t *data, size_t size, int type, size_t text_len)
{
	char text[256], text2[256];
	uint8_t enc[CP_MSG_MAX];
	uint16_t code, code2;
	int printable = 1, n;

	memset(text, 0x55, sizeof(text));
	if (cp_error_decode(data, size, &code, text, text_len))
		return;
	FUZZ_CHECK(type == CP_MSG_ERROR);
	FUZZ_CHECK(fuzz_printable(text, text_len));
	for (size_t i = text_len; i < sizeof(text); i++)
		FUZZ_CHECK(text[i] == 0x55); /* nothing written past the buffer */
	for (size_t i = CP_MSG_HDR + 4; i < size; i++)
		printable &= data[i] >= 0x20 && data[i] < 0x7f;
	n = cp_error_encode(code, text, enc, sizeof(enc));
	if (printable && strlen(text) == size - CP_MSG_HDR - 4)
		same_bytes(data, size, enc, n);
	FUZZ_CHECK(n > 0 && cp_error_decode(enc, (size_t)n, &code2, text2, sizeof(text2)) == 0);
	FUZZ_CHECK(code2 == code && strcmp(text2, text) == 0);
}

static void check_lane(const uint8_t *data, size_t size)
{
	unsigned lane;
	uint32_t v;
	int r;

	if (size < 4)
		return;
	v = (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 | (uint32_t)data[2] << 8 | data[3];
	r = cp_lane_parse(v, &lane);
	if (r == 2) {
		FUZZ_CHECK(lane == 0 && cp_pull_arg() == v);
	} else if (r >= 0) {
		FUZZ_CHECK(r == (lane != 0));
		FUZZ_CHECK(lane < CP_MAX_LANES);
		FUZZ_CHECK(cp_lane_arg(lane) == v);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t enc[CP_MSG_MAX];
	struct cp_hello h;
	struct cp_welcome w;
	struct cp_results c;
	struct cp_pull p;
	int type = cp_msg_peek(data, size), accepted = 0;

	if (cp_hello_decode(data, size, &h) == 0) {
		FUZZ_CHECK(type == CP_MSG_HELLO);
		same_bytes(data, size, enc, cp_hello_encode(&h, enc, sizeof(enc)));
		accepted++;
	}
	if (cp_welcome_decode(data, size, &w) == 0) {
		FUZZ_CHECK(type == CP_MSG_WELCOME);
		FUZZ_CHECK(w.nslots >= 1 && w.nslots <= CP_MAX_SLOTS);
		same_bytes(data, size, enc, cp_welcome_encode(&w, enc, sizeof(enc)));
		accepted++;
	}
	if (cp_results_decode(data, size, &c) == 0) {
		FUZZ_CHECK(type == CP_MSG_RESULTS);
		FUZZ_CHECK(c.nres <= CP_MAX_RECORDS);
		same_bytes(data, size, enc, cp_results_encode(&c, enc, sizeof(enc)));
		accepted++;
	}
	if (cp_pull_decode(data, size, &p) == 0) {
		FUZZ_CHECK(type == CP_MSG_PULL);
		FUZZ_CHECK(p.nsrc >= 1 && p.nsrc <= CP_PULL_MAX_SRC && p.dest_len <= CP_NAME_MAX);
		for (unsigned i = 0; i < p.nsrc; i++)
			FUZZ_CHECK(p.src_len[i] >= 1 && p.src_len[i] <= CP_NAME_MAX &&
				   !memchr(p.src[i], 0, p.src_len[i]));
		same_bytes(data, size, enc, cp_pull_encode(&p, enc, sizeof(enc)));
		accepted++;
	}
	FUZZ_CHECK(accepted <= 1);
	/* Text buffers of every size up to more than the longest text. */
	check_error(data, size, type, 256);
	check_error(data, size, type, size ? 1 + data[size - 1] % 64 : 1);
	check_lane(data, size);
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	uint8_t buf[CP_MSG_MAX];
	struct cp_hello h = {.chunk = 1 << 20, .depth = 8, .flags = CP_F_RESUME, .lanes = 2};
	struct cp_welcome w = {.ring_addr = 0x7f0012340000ull,
			       .rkey = 0x1234,
			       .chunk = 1 << 20,
			       .nslots = 16,
			       .max_name = CP_NAME_MAX,
			       .max_files = 128,
			       .max_file_size = 1ull << 40,
			       .key = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
	struct cp_results c = {.seq = 3, .nres = 2};
	int n;

	n = cp_hello_encode(&h, buf, sizeof(buf));
	emit("hello", buf, (size_t)n);
	h.flags |= CP_F_REPLACES;
	memcpy(h.replaces, w.key, CP_KEY_LEN);
	n = cp_hello_encode(&h, buf, sizeof(buf));
	emit("hello-replaces", buf, (size_t)n);
	{
		struct cp_pull p = {.chunk = 1 << 20,
				    .depth = 8,
				    .flags = CP_F_RESUME,
				    .options = CP_PULL_RECURSIVE,
				    .lanes = 2,
				    .nsrc = 2,
				    .dest = "ckpt",
				    .dest_len = 4,
				    .src = {"data/", "run/step-100.bin"},
				    .src_len = {5, 16}};

		n = cp_pull_encode(&p, buf, sizeof(buf));
		emit("pull", buf, (size_t)n);
	}
	n = cp_welcome_encode(&w, buf, sizeof(buf));
	emit("welcome", buf, (size_t)n);
	c.res[0] = (struct cp_result){.file_id = 1, .kind = CP_RES_READY, .offset = 4096};
	c.res[1] =
	    (struct cp_result){.file_id = 2, .kind = CP_RES_DONE, .code = CP_E_IO, .sys_errno = 28};
	n = cp_results_encode(&c, buf, sizeof(buf));
	emit("results", buf, (size_t)n);
	c.nres = 0;
	n = cp_results_encode(&c, buf, sizeof(buf));
	emit("results-empty", buf, (size_t)n);
	n = cp_error_encode(CP_E_PROTO, "protocol error: bad slot", buf, sizeof(buf));
	emit("error", buf, (size_t)n);
	/* lane join of lane 3 */
	buf[0] = (uint8_t)(cp_lane_arg(3) >> 24);
	buf[1] = (uint8_t)(cp_lane_arg(3) >> 16);
	buf[2] = (uint8_t)(cp_lane_arg(3) >> 8);
	buf[3] = (uint8_t)cp_lane_arg(3);
	emit("lane", buf, 4);
}
