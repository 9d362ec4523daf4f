/*
 * bench.h - the types every part of rk bench shares.
 *
 * rk bench is split by concern, one file each:
 *   bench_params.c  what the two sides must agree on: defaults, checks, wire codec
 *   bench_opts.c    the command line (getopt_long) into params + local options
 *   bench_ctl.c     the TCP control channel (framed messages with deadlines)
 *   bench_start.c   the run's start: PARAMS, ACCEPT or REFUSE, strangers turned away
 *   bench_conn.c    the context: device, buffer, CQ, set up and released
 *   bench_qp.c      the queue pairs connected (rdma_cm or out of band)
 *   bench_ready.c   READY both ways: the peer's buffer coordinates, checked
 *   bench_bw.c      the bandwidth engine
 *   bench_lat.c     the latency engine (ping-pong, or READ round trips)
 *   bench_rpc.c     --op rpc: its connections (rk_rpc_server, rk_rpc_clients)
 *                   and its engine, both modes
 *   bench_xfer.c    --op xfer: the one-sided layer's set-up (rk_xfer, lanes,
 *                   segments, the descriptor over the control channel)
 *   bench_xfer_run.c --op xfer: its engine (batches in flight; notifications)
 *   bench_hist.c    latency histogram and percentiles
 *   bench_result.c  the RESULT record: codec and checks of the peer's figures
 *   bench_report.c  the table, the JSON document and the gnuplot chart
 *   cmd_bench.c     the session: handshake, one run per size, results
 */
#ifndef RK_BENCH_H
#define RK_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/cq.h>

#define BENCH_PROG	   "bench"
#define BENCH_DEF_PORT	   "18515"
#define BENCH_MAX_SIZE	   (8u << 20) /* one WR on rxe must stay <= 8 MiB */
#define BENCH_ALL_MIN	   2u	      /* -a sweeps 2 B .. BENCH_MAX_SIZE */
#define BENCH_MAX_QP	   256u
#define BENCH_MAX_DEPTH	   16384u
#define BENCH_MAX_INLINE   4096u
#define BENCH_MAX_ITERS	   1000000000u
#define BENCH_MAX_DURATION 86400u
#define BENCH_MAX_WARMUP   1000000u
#define BENCH_RESP_AS_REQ  0xffffffffu /* resp_size: as many bytes as the request */

enum bench_op {
	BENCH_OP_SEND = 0,
	BENCH_OP_WRITE,
	BENCH_OP_WRITE_IMM,
	BENCH_OP_READ,
	BENCH_OP_RPC,  /* rk_rpc_call: request by SEND, answer by write with immediate */
	BENCH_OP_XFER, /* rk_xfer_post: batches of one-sided READs or WRITEs (xfer.h) */
	BENCH_OP_COUNT,
};

/* --op xfer: what the batches hold (--xfer-op). */
enum bench_xfer_op {
	BENCH_XFER_READ = 0,
	BENCH_XFER_WRITE,
	BENCH_XFER_OP_COUNT,
};

enum bench_mode {
	BENCH_MODE_BW = 0,
	BENCH_MODE_LAT,
	BENCH_MODE_COUNT,
};

/*
 * What the client asks for and the server must agree to. Everything here
 * travels in the PARAMS message; each field has a bit in enum bench_field
 * so the server can tell which ones its own command line fixed.
 */
struct bench_params {
	uint32_t op;	     /* enum bench_op */
	uint32_t mode;	     /* enum bench_mode */
	uint32_t size_min;   /* one size: size_min == size_max */
	uint32_t size_max;   /* -a: BENCH_ALL_MIN .. BENCH_MAX_SIZE, powers of two */
	uint32_t iters;	     /* messages per QP; 0 when duration_s is set */
	uint32_t duration_s; /* 0 when iters is set */
	uint32_t warmup;     /* untimed messages per QP before each size */
	uint32_t batch;	     /* WRs per ibv_post_send (post list) */
	uint32_t num_qp;
	uint32_t tx_depth; /* send queue depth = most WRs outstanding per QP */
	uint32_t rx_depth; /* receives kept posted per QP (send, write-imm) */
	uint32_t cq_mod;   /* request a completion every cq_mod WRs */
	uint32_t inline_size;
	uint32_t bidir;
	uint32_t oob;	    /* QPs connected by exchanging their numbers over TCP */
	uint32_t resp_size; /* --op rpc: answer bytes, fixed over a sweep (0 allowed),
			       or BENCH_RESP_AS_REQ (the default; other ops: always) */
	uint32_t xfer_op;   /* --op xfer: enum bench_xfer_op (other ops: 0) */
	uint32_t notify;    /* --op xfer: each batch ends with one notification */
	uint32_t verify;    /* --op xfer: the data is checked (not for timing) */
};

enum bench_field {
	BF_OP = 1u << 0,
	BF_MODE = 1u << 1,
	BF_SIZE = 1u << 2,
	BF_ITERS = 1u << 3,
	BF_DURATION = 1u << 4,
	BF_WARMUP = 1u << 5,
	BF_BATCH = 1u << 6,
	BF_NUM_QP = 1u << 7,
	BF_TX_DEPTH = 1u << 8,
	BF_RX_DEPTH = 1u << 9,
	BF_CQ_MOD = 1u << 10,
	BF_INLINE = 1u << 11,
	BF_BIDIR = 1u << 12,
	BF_OOB = 1u << 13,
	BF_RESP_SIZE = 1u << 14,
	BF_XFER_OP = 1u << 15,
	BF_NOTIFY = 1u << 16,
	BF_VERIFY = 1u << 17,
};

/*
 * --op xfer: --batch is the ops per batch, -t the batches in flight,
 * --num-qp the lanes, -Q the chain (WRs per doorbell; rk_xfer_opts.chain).
 */
#define BENCH_XFER_MAX_OPS   4096u
#define BENCH_XFER_MAX_DEPTH 1024u
#define BENCH_XFER_MAX_LANES 16u
#define BENCH_XFER_MAX_CHAIN 16u
#define BENCH_XFER_MAX_MEM   (4ull << 30) /* batches in flight x ops x size, one side */

/* Options that concern this side only; never sent. */
struct bench_local {
	const char *host; /* NULL: server */
	char port[16];
	const char *addr; /* server: --addr, the local address to listen on */
	const char *dev_name;
	uint8_t ib_port;
	int gid_index; /* -1: automatic */
	uint32_t mtu;  /* bytes; 0: the port's */
	enum rk_wait_mode poll;
	int gbits;	     /* Gb/s instead of MiB/s */
	unsigned watchdog_s; /* no progress for this long: fail */
	unsigned wait_s;     /* server: how long to wait for a client */
	unsigned pace_ms;    /* --pace: sleep this long before each message this side sends */
	const char *json_path;
	const char *plot_path;
	uint32_t max_size;	  /* --max-size: where -a stops */
	unsigned explicit_fields; /* enum bench_field bits given on the command line */
	int quiet;		  /* print nothing (a caller reports the figures: rk matrix) */
	/*
	 * rk matrix: the leg's keys, 2 x BENCH_TOKEN_LEN bytes from its rank 0
	 * (NULL: rk bench's own random token). The client sends the first half
	 * as its token; the server takes only a client with it (waiting on
	 * past others) and proves itself with the second half in ACCEPT and
	 * in its rdma_cm accept, which the client checks.
	 */
	const uint8_t *pair_key;
};

const char *bench_op_name(uint32_t op);	      /* "write-imm" */
const char *bench_xfer_op_name(uint32_t xop); /* "read" / "write" */
const char *bench_op_title(uint32_t op);      /* "RDMA WRITE with immediate" */
const char *bench_mode_name(uint32_t mode);   /* "bw" / "lat" */
const char *bench_poll_name(enum rk_wait_mode m);

/* bench_params_default - perftest-like defaults (65536 B, 5000 iterations, depth 128). */
void bench_params_default(struct bench_params *p);

/*
 * bench_params_check - range and consistency checks, used on our own
 * command line and on what a peer sent. On failure writes "PARAM: why"
 * into @why (PARAM is the option name, e.g. "tx-depth") and returns -1.
 */
int bench_params_check(const struct bench_params *p, char *why, size_t len);

/*
 * bench_params_diff - compare the client's @c against the server's @s for
 * the fields in @mask (those the server's command line fixed). Returns 0,
 * or -1 with "parameter mismatch: PARAM: server X, client Y" in @why.
 */
int bench_params_diff(const struct bench_params *s, const struct bench_params *c, unsigned mask,
		      char *why, size_t len);

/*
 * Wire form: BENCH_PARAMS_LEN bytes, big-endian, versioned. Version 3
 * added resp_size in what were the 4 reserved bytes; version 4 the three
 * --op xfer fields, 12 bytes more; version 5 is the same message in rk's
 * one control frame header (common/frame.h; bench_ctl.h), whose older
 * form the control channel refuses as a version mismatch before PARAMS
 * is read. Magic and version come first and are checked before the
 * length, so a peer of an older version is refused by version whatever
 * its length (and refuses ours as it can).
 */
#define BENCH_PARAMS_VERSION 5 /* 2: heartbeats; 3: --op rpc; 4: --op xfer; 5: frame header */
#define BENCH_PARAMS_LEN     84
#define BENCH_PARAMS_MIN_LEN 8 /* magic, version, length: enough to be refused by version */
int bench_params_encode(const struct bench_params *p, uint8_t *buf, size_t len);
/* Returns 0, or -1 with the reason in @why (the peer is not trusted). */
int bench_params_decode(const uint8_t *buf, size_t len, struct bench_params *p, char *why,
			size_t why_len);

/* bench_resp_size - --op rpc: the answer's bytes for a request of @size bytes. */
uint32_t bench_resp_size(const struct bench_params *p, uint32_t size);

/*
 * bench_msg_bytes - the bytes one message of @size moves, as bandwidth
 * counts them: @size, or for --op rpc the request plus its answer.
 */
uint64_t bench_msg_bytes(const struct bench_params *p, uint32_t size);

/* Next size of the sweep after @size, 0 when done. */
uint32_t bench_next_size(const struct bench_params *p, uint32_t size);
/* How many sizes the run has. */
unsigned bench_size_count(const struct bench_params *p);

/* bench_local_default - what bench_opts_parse starts from: port 18515, watchdog 10 s, wait 60 s. */
void bench_local_default(struct bench_local *l);

/*
 * bench_opts_parse - the command line into @p and @l. Returns 0, 1 when
 * --help was printed, or -1 after printing a usage error.
 */
int bench_opts_parse(int argc, char **argv, struct bench_params *p, struct bench_local *l);

#endif
