/*
 * bench_params.c - the parameters both sides of rk bench must agree on.
 *
 * The same checks run on our own command line and on what arrives from the
 * peer: a PARAMS message is network input, so a field out of range must be
 * refused with its name, never used to size a queue or a buffer.
 */
#include <stdio.h>
#include <string.h>

#include <rdmakit/wire.h>

#include "bench.h"

static const char *const op_names[BENCH_OP_COUNT] = {"send", "write", "write-imm",
						     "read", "rpc",   "xfer"};
static const char *const op_titles[BENCH_OP_COUNT] = {
    "SEND",	 "RDMA WRITE",	      "RDMA WRITE with immediate",
    "RDMA READ", "RPC (rk_rpc_call)", "one-sided batches (rk_xfer_post)"};
static const char *const xfer_op_names[BENCH_XFER_OP_COUNT] = {"read", "write"};

const char *bench_op_name(uint32_t op)
{
	return op < BENCH_OP_COUNT ? op_names[op] : "?";
}

const char *bench_op_title(uint32_t op)
{
	return op < BENCH_OP_COUNT ? op_titles[op] : "?";
}

const char *bench_xfer_op_name(uint32_t xop)
{
	return xop < BENCH_XFER_OP_COUNT ? xfer_op_names[xop] : "?";
}

const char *bench_mode_name(uint32_t mode)
{
	return mode == BENCH_MODE_BW ? "bw" : mode == BENCH_MODE_LAT ? "lat" : "?";
}

const char *bench_poll_name(enum rk_wait_mode m)
{
	switch (m) {
	case RK_WAIT_BUSY:
		return "busy";
	case RK_WAIT_EVENT:
		return "event";
	case RK_WAIT_ADAPTIVE:
		return "adaptive";
	}
	return "?";
}

void bench_params_default(struct bench_params *p)
{
	memset(p, 0, sizeof(*p));
	p->op = BENCH_OP_WRITE;
	p->mode = BENCH_MODE_BW;
	p->size_min = p->size_max = 65536;
	p->iters = 5000;
	p->warmup = 16;
	p->batch = 1;
	p->num_qp = 1;
	p->tx_depth = 128;
	p->rx_depth = 512;
	p->cq_mod = 100;
	p->resp_size = BENCH_RESP_AS_REQ;
}

uint32_t bench_resp_size(const struct bench_params *p, uint32_t size)
{
	return p->resp_size == BENCH_RESP_AS_REQ ? size : p->resp_size;
}

uint64_t bench_msg_bytes(const struct bench_params *p, uint32_t size)
{
	if (p->op != BENCH_OP_RPC)
		return size;
	return (uint64_t)size + bench_resp_size(p, size);
}

static int is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

static int range(char *why, size_t len, const char *name, uint32_t v, uint32_t lo, uint32_t hi)
{
	if (v >= lo && v <= hi)
		return 0;
	snprintf(why, len, "%s: %u is outside %u..%u", name, v, lo, hi);
	return -1;
}

/*
 * --op rpc runs on the RPC layer's own connections (rdma_cm, one SEND per
 * call, answers by write with immediate): the options that shape rk
 * bench's own queue pairs mean nothing there. The ones with defaults
 * (rx-depth, cq-mod) are refused on the command line (bench_opts.c).
 */
static int check_rpc(const struct bench_params *p, char *why, size_t len)
{
	if (p->oob)
		snprintf(why, len, "oob: --op rpc connects by rdma_cm (an rk_rpc_server)");
	else if (p->bidir)
		snprintf(why, len, "bidir: an RPC is a round trip already");
	else if (p->batch != 1)
		snprintf(why, len, "batch: the RPC layer posts one SEND per call (got %u)",
			 p->batch);
	else if (p->inline_size)
		snprintf(why, len, "inline: the RPC layer decides what goes inline (got %u)",
			 p->inline_size);
	else
		return 0;
	return -1;
}

static int check_not_rpc(const struct bench_params *p, char *why, size_t len)
{
	if (p->resp_size == BENCH_RESP_AS_REQ)
		return 0;
	snprintf(why, len, "resp-size: an answer's size is for --op rpc only (got %u with %s)",
		 p->resp_size, bench_op_name(p->op));
	return -1;
}

/*
 * --op xfer posts through the one-sided layer (xfer.h) on lanes of its
 * own: --batch is ops per batch, -t batches in flight, --num-qp lanes, -Q the chain
 * (WRs per doorbell); the layer owns the receive queues and the inline
 * choice. Every side holds up to tx-depth x batch x size bytes.
 */
static int check_xfer(const struct bench_params *p, char *why, size_t len)
{
	if (p->mode != BENCH_MODE_BW)
		snprintf(why, len,
			 "mode: --op xfer runs in bw mode (every batch's latency is "
			 "measured there; -t 1 for one batch at a time)");
	else if (p->bidir)
		snprintf(why, len,
			 "bidir: --op xfer: the client posts, the server owns the memory");
	else if (p->inline_size)
		snprintf(why, len, "inline: the one-sided layer decides what goes inline (got %u)",
			 p->inline_size);
	else if (range(why, len, "batch", p->batch, 1, BENCH_XFER_MAX_OPS) ||
		 range(why, len, "tx-depth", p->tx_depth, 1, BENCH_XFER_MAX_DEPTH) ||
		 range(why, len, "num-qp", p->num_qp, 1, BENCH_XFER_MAX_LANES) ||
		 range(why, len, "cq-mod", p->cq_mod, 1, BENCH_XFER_MAX_CHAIN) ||
		 range(why, len, "xfer-op", p->xfer_op, 0, BENCH_XFER_OP_COUNT - 1) ||
		 range(why, len, "notify", p->notify, 0, 1) ||
		 range(why, len, "verify", p->verify, 0, 1))
		return -1;
	/*
	 * What each side allocates on the peer's word: the segment (a batch's
	 * worth per batch in flight where the data lands) and the reference
	 * pattern of one batch (bench_xfer.c alloc_side).
	 */
	else if (((uint64_t)p->tx_depth + 1) * p->batch * p->size_max > BENCH_XFER_MAX_MEM)
		snprintf(why, len,
			 "tx-depth: (%u batches + 1 reference) x %u ops x %u bytes is more "
			 "memory than allowed (4 GiB)",
			 p->tx_depth, p->batch, p->size_max);
	else
		return 0;
	return -1;
}

static int check_not_xfer(const struct bench_params *p, char *why, size_t len)
{
	if (p->xfer_op || p->notify || p->verify) {
		snprintf(why, len, "%s: for --op xfer only (got %s)",
			 p->xfer_op  ? "xfer-op"
			 : p->notify ? "notify"
				     : "verify",
			 bench_op_name(p->op));
		return -1;
	}
	return 0;
}

int bench_params_check(const struct bench_params *p, char *why, size_t len)
{
	if (p->op >= BENCH_OP_COUNT) {
		snprintf(why, len, "op: unknown operation %u", p->op);
		return -1;
	}
	if (p->mode >= BENCH_MODE_COUNT) {
		snprintf(why, len, "mode: unknown mode %u", p->mode);
		return -1;
	}
	if (range(why, len, "size", p->size_min, 1, BENCH_MAX_SIZE) ||
	    range(why, len, "size", p->size_max, p->size_min, BENCH_MAX_SIZE))
		return -1;
	if (p->size_min != p->size_max && (!is_pow2(p->size_min) || !is_pow2(p->size_max))) {
		snprintf(why, len, "size: a sweep runs over powers of two (%u..%u)", p->size_min,
			 p->size_max);
		return -1;
	}
	if (!p->iters == !p->duration_s) {
		snprintf(why, len, "iters: give either iterations or a duration");
		return -1;
	}
	if (p->op == BENCH_OP_XFER ? check_xfer(p, why, len) : check_not_xfer(p, why, len))
		return -1;
	if (range(why, len, "iters", p->iters, 0, BENCH_MAX_ITERS) ||
	    range(why, len, "duration", p->duration_s, 0, BENCH_MAX_DURATION) ||
	    range(why, len, "warmup", p->warmup, 0, BENCH_MAX_WARMUP) ||
	    range(why, len, "num-qp", p->num_qp, 1, BENCH_MAX_QP) ||
	    range(why, len, "tx-depth", p->tx_depth, 1, BENCH_MAX_DEPTH) ||
	    range(why, len, "rx-depth", p->rx_depth, 1, BENCH_MAX_DEPTH) ||
	    range(why, len, "batch", p->batch, 1,
		  p->op == BENCH_OP_XFER ? BENCH_XFER_MAX_OPS : p->tx_depth) ||
	    range(why, len, "cq-mod", p->cq_mod, 1, BENCH_MAX_DEPTH) ||
	    range(why, len, "inline", p->inline_size, 0, BENCH_MAX_INLINE) ||
	    range(why, len, "bidir", p->bidir, 0, 1) || range(why, len, "oob", p->oob, 0, 1))
		return -1;
	if (p->resp_size != BENCH_RESP_AS_REQ &&
	    range(why, len, "resp-size", p->resp_size, 0, BENCH_MAX_SIZE))
		return -1;
	if (p->op == BENCH_OP_RPC ? check_rpc(p, why, len) : check_not_rpc(p, why, len))
		return -1;
	if (p->mode == BENCH_MODE_LAT) {
		/* A ping-pong is one message in flight on one QP: nothing to batch. */
		if (p->num_qp != 1) {
			snprintf(why, len, "num-qp: latency mode uses one QP (got %u)", p->num_qp);
			return -1;
		}
		if (p->batch != 1) {
			snprintf(why, len, "batch: latency mode posts one WR at a time (got %u)",
				 p->batch);
			return -1;
		}
		if (p->bidir) {
			snprintf(why, len, "bidir: latency is measured as a ping-pong already");
			return -1;
		}
	}
	return 0;
}

struct field_desc {
	unsigned bit;
	const char *name;
	size_t off;
};

#define FIELD(bit, name, member)                                                                   \
	{                                                                                          \
		bit, name, offsetof(struct bench_params, member)                                   \
	}

static const struct field_desc fields[] = {
    FIELD(BF_OP, "op", op),
    FIELD(BF_MODE, "mode", mode),
    FIELD(BF_SIZE, "size", size_min),
    FIELD(BF_SIZE, "size", size_max),
    FIELD(BF_ITERS, "iters", iters),
    FIELD(BF_DURATION, "duration", duration_s),
    FIELD(BF_WARMUP, "warmup", warmup),
    FIELD(BF_BATCH, "batch", batch),
    FIELD(BF_NUM_QP, "num-qp", num_qp),
    FIELD(BF_TX_DEPTH, "tx-depth", tx_depth),
    FIELD(BF_RX_DEPTH, "rx-depth", rx_depth),
    FIELD(BF_CQ_MOD, "cq-mod", cq_mod),
    FIELD(BF_INLINE, "inline", inline_size),
    FIELD(BF_BIDIR, "bidir", bidir),
    FIELD(BF_OOB, "oob", oob),
    FIELD(BF_RESP_SIZE, "resp-size", resp_size),
    FIELD(BF_XFER_OP, "xfer-op", xfer_op),
    FIELD(BF_NOTIFY, "notify", notify),
    FIELD(BF_VERIFY, "verify", verify),
};

static uint32_t field_get(const struct bench_params *p, size_t off)
{
	uint32_t v;

	memcpy(&v, (const char *)p + off, sizeof(v));
	return v;
}

static void field_text(unsigned bit, uint32_t v, char *buf, size_t len)
{
	if (bit == BF_OP)
		snprintf(buf, len, "%s", bench_op_name(v));
	else if (bit == BF_MODE)
		snprintf(buf, len, "%s", bench_mode_name(v));
	else if (bit == BF_XFER_OP)
		snprintf(buf, len, "%s", bench_xfer_op_name(v));
	else if (bit == BF_RESP_SIZE && v == BENCH_RESP_AS_REQ)
		snprintf(buf, len, "as the request");
	else
		snprintf(buf, len, "%u", v);
}

int bench_params_diff(const struct bench_params *s, const struct bench_params *c, unsigned mask,
		      char *why, size_t len)
{
	char sv[32], cv[32];

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		uint32_t a = field_get(s, fields[i].off), b = field_get(c, fields[i].off);

		if (!(mask & fields[i].bit) || a == b)
			continue;
		field_text(fields[i].bit, a, sv, sizeof(sv));
		field_text(fields[i].bit, b, cv, sizeof(cv));
		snprintf(why, len, "parameter mismatch: %s: server %s, client %s", fields[i].name,
			 sv, cv);
		return -1;
	}
	return 0;
}

/*
 * Wire layout (big-endian): "RKBP", u16 version, u16 length (84), then the
 * 19 u32 fields in struct order, then zeros up to BENCH_PARAMS_LEN bytes
 * (none since version 3: a further field needs a longer message).
 */
#define NFIELDS 19
_Static_assert(8 + 4 * NFIELDS <= BENCH_PARAMS_LEN, "parameter message too short");

static void as_array(const struct bench_params *p, uint32_t v[NFIELDS])
{
	const uint32_t src[NFIELDS] = {
	    p->op,    p->mode,	    p->size_min, p->size_max, p->iters,	 p->duration_s,	 p->warmup,
	    p->batch, p->num_qp,    p->tx_depth, p->rx_depth, p->cq_mod, p->inline_size, p->bidir,
	    p->oob,   p->resp_size, p->xfer_op,	 p->notify,   p->verify};

	memcpy(v, src, sizeof(src));
}

int bench_params_encode(const struct bench_params *p, uint8_t *buf, size_t len)
{
	uint32_t v[NFIELDS];

	if (len < BENCH_PARAMS_LEN)
		return -1;
	memset(buf, 0, BENCH_PARAMS_LEN);
	buf[0] = 'R';
	buf[1] = 'K';
	buf[2] = 'B';
	buf[3] = 'P';
	buf[4] = 0;
	buf[5] = BENCH_PARAMS_VERSION;
	buf[6] = 0;
	buf[7] = BENCH_PARAMS_LEN;
	as_array(p, v);
	for (int i = 0; i < NFIELDS; i++)
		rk_put32(buf + 8 + 4 * i, v[i]);
	return BENCH_PARAMS_LEN;
}

int bench_params_decode(const uint8_t *buf, size_t len, struct bench_params *p, char *why,
			size_t why_len)
{
	uint32_t v[NFIELDS];

	/* The version before the length: an older peer's message is shorter. */
	if (len < BENCH_PARAMS_MIN_LEN || memcmp(buf, "RKBP", 4) != 0) {
		snprintf(why, why_len, "malformed parameter message (%zu bytes)", len);
		return -1;
	}
	if (buf[4] != 0 || buf[5] != BENCH_PARAMS_VERSION) {
		snprintf(why, why_len, "parameter message version %u, this rk speaks %u",
			 (unsigned)rk_get16(buf + 4), (unsigned)BENCH_PARAMS_VERSION);
		return -1;
	}
	if (len != BENCH_PARAMS_LEN) {
		snprintf(why, why_len, "malformed parameter message (%zu bytes)", len);
		return -1;
	}
	if (buf[6] != 0 || buf[7] != BENCH_PARAMS_LEN) {
		snprintf(why, why_len, "parameter message length field %u",
			 (unsigned)rk_get16(buf + 6));
		return -1;
	}
	for (size_t i = 8 + 4 * NFIELDS; i < BENCH_PARAMS_LEN; i++)
		if (buf[i]) {
			snprintf(why, why_len, "parameter message: reserved byte %zu is not zero",
				 i);
			return -1;
		}
	for (int i = 0; i < NFIELDS; i++)
		v[i] = rk_get32(buf + 8 + 4 * i);
	p->op = v[0];
	p->mode = v[1];
	p->size_min = v[2];
	p->size_max = v[3];
	p->iters = v[4];
	p->duration_s = v[5];
	p->warmup = v[6];
	p->batch = v[7];
	p->num_qp = v[8];
	p->tx_depth = v[9];
	p->rx_depth = v[10];
	p->cq_mod = v[11];
	p->inline_size = v[12];
	p->bidir = v[13];
	p->oob = v[14];
	p->resp_size = v[15];
	p->xfer_op = v[16];
	p->notify = v[17];
	p->verify = v[18];
	return bench_params_check(p, why, why_len);
}

uint32_t bench_next_size(const struct bench_params *p, uint32_t size)
{
	if (size >= p->size_max || size > UINT32_MAX / 2)
		return 0;
	return size * 2 > p->size_max ? p->size_max : size * 2;
}

unsigned bench_size_count(const struct bench_params *p)
{
	unsigned n = 0;

	for (uint32_t s = p->size_min; s; s = bench_next_size(p, s))
		n++;
	return n;
}
