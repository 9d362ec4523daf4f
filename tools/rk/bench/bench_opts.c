/*
 * bench_opts.c - rk bench's command line.
 *
 * The options every rk command shares mean here what they mean everywhere
 * (rk help options, cli_options.c): --addr, --dev NAME, --json[=FILE],
 * durations with a unit. Other short options follow perftest where it has
 * one (-s -a -n -D -t -Q -I -b -d -i -x -m -p), so a perftest command line
 * mostly carries over; perftest's -q and -l are --quiet and --list in rk,
 * and here one more release --num-qp and --batch, with a warning.
 * Every option given is remembered in explicit_fields: on the server those
 * are the parameters a client must match.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

enum {
	OPT_OP = 256,
	OPT_MODE,
	OPT_POLL,
	OPT_OOB,
	OPT_GBITS,
	OPT_WATCHDOG,
	OPT_WAIT,
	OPT_PACE,
	OPT_JSON,
	OPT_PLOT,
	OPT_ADDR,
	OPT_BIND, /* --addr's old name, one more release */
	OPT_BATCH,
	OPT_NUM_QP,
	OPT_RX_DEPTH,
	OPT_MAX_SIZE,
	OPT_RESP_SIZE,
	OPT_XFER_OP,
	OPT_NOTIFY,
	OPT_VERIFY,
};

static const struct option long_opts[] = {
    {"op", required_argument, NULL, OPT_OP},
    {"mode", required_argument, NULL, OPT_MODE},
    {"size", required_argument, NULL, 's'},
    {"all", no_argument, NULL, 'a'},
    {"max-size", required_argument, NULL, OPT_MAX_SIZE},
    {"resp-size", required_argument, NULL, OPT_RESP_SIZE},
    {"xfer-op", required_argument, NULL, OPT_XFER_OP},
    {"notify", no_argument, NULL, OPT_NOTIFY},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {"iters", required_argument, NULL, 'n'},
    {"duration", required_argument, NULL, 'D'},
    {"warmup", required_argument, NULL, 'w'},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"num-qp", required_argument, NULL, OPT_NUM_QP},
    {"tx-depth", required_argument, NULL, 't'},
    {"rx-depth", required_argument, NULL, OPT_RX_DEPTH},
    {"cq-mod", required_argument, NULL, 'Q'},
    {"inline", required_argument, NULL, 'I'},
    {"poll", required_argument, NULL, OPT_POLL},
    {"bidir", no_argument, NULL, 'b'},
    {"dev", required_argument, NULL, 'd'},
    {"ib-port", required_argument, NULL, 'i'},
    {"gid-index", required_argument, NULL, 'x'},
    {"mtu", required_argument, NULL, 'm'},
    {"port", required_argument, NULL, 'p'},
    {"addr", required_argument, NULL, OPT_ADDR},
    {"bind", required_argument, NULL, OPT_BIND},
    {"oob", no_argument, NULL, OPT_OOB},
    {"gbits", no_argument, NULL, OPT_GBITS},
    {"watchdog", required_argument, NULL, OPT_WATCHDOG},
    {"wait", required_argument, NULL, OPT_WAIT},
    {"pace", required_argument, NULL, OPT_PACE},
    {"json", optional_argument, NULL, OPT_JSON},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char synopsis[] =
    "usage: rk bench [OPTIONS]           server: serve one client run, then exit\n"
    "       rk bench [OPTIONS] HOST[:PORT] client: run the benchmark against HOST\n";

static void usage(FILE *out)
{
	fputs(synopsis, out);
	fprintf(
	    out,
	    "\n"
	    "what to measure (the client's choice; a server given any of these refuses a\n"
	    "client that asks for something else, naming the parameter):\n"
	    "  --op OP             send | write | write-imm | read | rpc | xfer (default write)\n"
	    "  --mode MODE         bw (bandwidth, default) | lat (latency ping-pong)\n"
	    "  -s, --size SIZE     message size, 1 B .. 8M (default 64K); rpc: the request's\n"
	    "  -a, --all           every power of two from 2 B to 8 MiB\n"
	    "      --max-size SIZE with -a: the largest size (a power of two)\n"
	    "      --resp-size N   rpc: the answer's size, 0 .. 8M (default: the request's,\n"
	    "                      at every size); given, it stays fixed while -s / -a\n"
	    "                      sweep the request\n"
	    "  -n, --iters N       messages per QP (default 5000)\n"
	    "  -D, --duration DURATION  run each size this long instead of -n (30s, 2m;\n"
	    "                      whole seconds, a bare number is seconds)\n"
	    "  -w, --warmup N      untimed messages per QP before each size (default 16)\n"
	    "      --batch N       WRs per post (one doorbell for N; default 1)\n"
	    "      --num-qp N      queue pairs (default 1); rpc: clients, one connection each\n"
	    "  -t, --tx-depth N    send queue depth per QP (default 128); rpc: calls in\n"
	    "                      flight per client (at most 1024)\n"
	    "      --rx-depth N    receives kept posted per QP (default 512)\n"
	    "  -Q, --cq-mod N      one completion every N WRs (default 100; lat: 1),\n"
	    "                      and at least one per MiB for large messages\n"
	    "  -I, --inline N      send payloads up to N bytes inline (default 0)\n"
	    "  -b, --bidir         both sides send at once (bw mode)\n"
	    "      --xfer-op OP    read | write: what xfer's batches hold (default read)\n"
	    "      --notify        xfer: each batch ends with one notification to the server\n"
	    "      --verify        xfer: check every batch's data (slower: not for timing)\n"
	    "\n"
	    "this side only:\n"
	    "      --poll MODE     busy (default) | event | adaptive: how completions are awaited\n"
	    "      --pace DURATION sleep this long (1ms .. 1s) before each message this side\n"
	    "                      sends: the client before each ping or call (--mode lat,\n"
	    "                      send, write-imm, rpc), the server before each answer\n"
	    "                      (the same ops, and rpc's bw). Latency at a low rate: an\n"
	    "                      event-mode wait then sleeps every time. The client's\n"
	    "                      latency holds the server's pace, not its own\n"
	    "  -d, --dev NAME      RDMA device (default: the one owning --addr, else $RK_DEV,\n"
	    "                      else the one the route to the server leaves by)\n"
	    "  -i, --ib-port N     device port (default 1)\n"
	    "  -x, --gid-index N   GID index for --oob (rdma_cm picks it from the route)\n"
	    "  -m, --mtu BYTES     largest path MTU to use (256..4096; default the port's)\n"
	    "  -p, --port PORT     control and rdma_cm port (default " BENCH_DEF_PORT ")\n"
	    "      --addr ADDR     server: listen on ADDR only (its device is used)\n"
	    "      --oob           connect QPs by exchanging QP numbers over TCP, not rdma_cm\n"
	    "      --gbits         bandwidth in Gb/s instead of MiB/s\n"
	    "      --watchdog DURATION  no progress this long: fail (default 10s; whole\n"
	    "                      seconds, a bare number is seconds)\n"
	    "      --wait DURATION server: wait this long for a client (default 60s); a\n"
	    "                      connection that sends no parameters within 5 s (or the\n"
	    "                      watchdog) is closed and the next one taken\n"
	    "      --json[=FILE]   parameters, environment and every size's results as JSON\n"
	    "                      on stdout (the table then goes to stderr), or into FILE\n"
	    "      --plot FILE     bandwidth / latency against size as PNG (needs gnuplot)\n"
	    "  -h, --help          this text\n"
	    "\n"
	    "kept one more release, with a warning: -q N (write --num-qp N), -l N (--batch\n"
	    "N), --bind ADDR (--addr ADDR), '--json FILE' (--json=FILE; read so when a\n"
	    "HOST follows, or FILE ends in .json or holds a '/')\n"
	    "\n"
	    "--op rpc: the server answers with an rk_rpc_server on the same port (rdma_cm),\n"
	    "the client calls through --num-qp rk_rpc_clients: lat makes one rk_rpc_call at\n"
	    "a time, bw keeps -t calls in flight per client (rk_rpc_call_async) and counts\n"
	    "request + answer bytes per call; the answers land in one registered buffer\n"
	    "per client (zero copy). Not with --oob, -b, --batch, -I, --rx-depth or -Q.\n"
	    "\n"
	    "--op xfer: the one-sided layer (rk_xfer_post): the server registers and\n"
	    "exports one segment, the client imports its descriptor and keeps -t batches\n"
	    "(default 2) of --batch ops (default 64) of -s bytes in flight, -n batches\n"
	    "(default 100), striped over --num-qp lanes, -Q WRs per doorbell (default and\n"
	    "at most 16). The table counts batches; bandwidth, op rate and CPU are per op;\n"
	    "latency is per batch, post to end. Not with -b, -I, --rx-depth or --mode lat.\n"
	    "\n"
	    "latency is half the round trip for send, write and write-imm (a ping-pong),\n"
	    "the whole round trip for read and rpc.\n"
	    "\n"
	    "exit codes:\n"
	    "  0  every size measured (client and server alike)\n"
	    "  1  the run failed: refused by the peer (naming the parameter), no peer\n"
	    "     within --wait or the watchdog, the peer lost or silent, or this host's\n"
	    "     RDMA device could not be opened ('rk doctor' says why)\n"
	    "  2  bad command line (or --plot without gnuplot)\n");
}

/* A bad value: one line naming it, the usage lines and where the help is; -1. */
static int bad(const char *opt, const char *arg, const char *what)
{
	cli_usage_error(BENCH_PROG, synopsis, "%s '%s': %s", opt, arg, what);
	return -1;
}

/* A duration in whole seconds, @min..@max (cli_duration_opt says what is wrong); 0 or -1. */
static int parse_secs(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *out)
{
	uint64_t ms;

	if (cli_duration_opt(BENCH_PROG, synopsis, opt, arg, min * 1000ull, max * 1000ull, 1000,
			     &ms))
		return -1;
	*out = (unsigned)(ms / 1000);
	return 0;
}

static int parse_u32(const char *opt, const char *arg, uint64_t lo, uint64_t hi, uint32_t *out)
{
	uint64_t v;
	char what[64];

	if (cli_parse_uint(arg, lo, hi, &v)) {
		snprintf(what, sizeof(what), "expected an integer in %llu..%llu",
			 (unsigned long long)lo, (unsigned long long)hi);
		return bad(opt, arg, what);
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_op(const char *arg, uint32_t *op)
{
	for (uint32_t i = 0; i < BENCH_OP_COUNT; i++)
		if (strcmp(arg, bench_op_name(i)) == 0) {
			*op = i;
			return 0;
		}
	return bad("--op", arg, "expected send, write, write-imm, read, rpc or xfer");
}

static int parse_poll(const char *arg, enum rk_wait_mode *m)
{
	static const enum rk_wait_mode modes[] = {RK_WAIT_BUSY, RK_WAIT_EVENT, RK_WAIT_ADAPTIVE};

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(arg, bench_poll_name(modes[i])) == 0) {
			*m = modes[i];
			return 0;
		}
	return bad("--poll", arg, "expected busy, event or adaptive");
}

static int parse_size(const char *arg, uint32_t *out)
{
	uint64_t v;

	if (cli_parse_size(arg, &v) || v < 1 || v > BENCH_MAX_SIZE)
		return bad("--size", arg, "expected 1 .. 8M (one WR stays <= 8 MiB)");
	*out = (uint32_t)v;
	return 0;
}

static int parse_resp_size(const char *arg, uint32_t *out)
{
	uint64_t v;

	if (cli_parse_size(arg, &v) || v > BENCH_MAX_SIZE)
		return bad("--resp-size", arg, "expected 0 .. 8M");
	*out = (uint32_t)v;
	return 0;
}

/*
 * --op rpc: options with a default that only rk bench's own queue pairs
 * use; bench_params_check refuses the others (--oob, -b, -l, -I) for
 * client and server alike.
 */
static int check_rpc_local(const struct bench_params *p, const struct bench_local *l)
{
	const char *opt = NULL, *why = NULL;

	if (p->op == BENCH_OP_RPC && (l->explicit_fields & BF_RX_DEPTH)) {
		opt = "--rx-depth";
		why = "the RPC layer keeps one receive per call in flight";
	} else if (p->op == BENCH_OP_RPC && (l->explicit_fields & BF_CQ_MOD)) {
		opt = "--cq-mod";
		why = "every call completes on its own";
	} else if (p->op != BENCH_OP_RPC && (l->explicit_fields & BF_RESP_SIZE)) {
		opt = "--resp-size";
		why = "an answer's size is for --op rpc only";
	} else if (p->op == BENCH_OP_XFER && (l->explicit_fields & BF_RX_DEPTH)) {
		opt = "--rx-depth";
		why = "the one-sided layer owns the lanes' receive queues";
	} else if (p->op != BENCH_OP_XFER &&
		   (l->explicit_fields & (BF_XFER_OP | BF_NOTIFY | BF_VERIFY))) {
		opt = l->explicit_fields & BF_XFER_OP  ? "--xfer-op"
		      : l->explicit_fields & BF_NOTIFY ? "--notify"
						       : "--verify";
		why = "for --op xfer only";
	}
	if (!opt)
		return 0;
	cli_usage_error(BENCH_PROG, synopsis, "%s: not with --op %s (%s)", opt,
			bench_op_name(p->op), why);
	return -1;
}

/* One option; 0 or -1. */
static int apply(int c, const char *arg, struct bench_params *p, struct bench_local *l)
{
	uint32_t v;

	switch (c) {
	case OPT_OP:
		l->explicit_fields |= BF_OP;
		return parse_op(arg, &p->op);
	case OPT_MODE:
		l->explicit_fields |= BF_MODE;
		if (strcmp(arg, "bw") == 0)
			p->mode = BENCH_MODE_BW;
		else if (strcmp(arg, "lat") == 0)
			p->mode = BENCH_MODE_LAT;
		else
			return bad("--mode", arg, "expected bw or lat");
		return 0;
	case 's':
		l->explicit_fields |= BF_SIZE;
		if (parse_size(arg, &p->size_min))
			return -1;
		p->size_max = p->size_min;
		return 0;
	case 'a':
		l->explicit_fields |= BF_SIZE;
		p->size_min = BENCH_ALL_MIN;
		p->size_max = BENCH_MAX_SIZE;
		return 0;
	case OPT_MAX_SIZE:
		l->explicit_fields |= BF_SIZE;
		return parse_size(arg, &l->max_size);
	case OPT_RESP_SIZE:
		l->explicit_fields |= BF_RESP_SIZE;
		return parse_resp_size(arg, &p->resp_size);
	case OPT_XFER_OP:
		l->explicit_fields |= BF_XFER_OP;
		if (strcmp(arg, "read") == 0)
			p->xfer_op = BENCH_XFER_READ;
		else if (strcmp(arg, "write") == 0)
			p->xfer_op = BENCH_XFER_WRITE;
		else
			return bad("--xfer-op", arg, "expected read or write");
		return 0;
	case OPT_NOTIFY:
		l->explicit_fields |= BF_NOTIFY;
		p->notify = 1;
		return 0;
	case OPT_VERIFY:
		l->explicit_fields |= BF_VERIFY;
		p->verify = 1;
		return 0;
	case 'n':
		l->explicit_fields |= BF_ITERS | BF_DURATION;
		p->duration_s = 0;
		return parse_u32("--iters", arg, 1, BENCH_MAX_ITERS, &p->iters);
	case 'D':
		l->explicit_fields |= BF_ITERS | BF_DURATION;
		p->iters = 0;
		return parse_secs("--duration", arg, 1, BENCH_MAX_DURATION, &p->duration_s);
	case 'w':
		l->explicit_fields |= BF_WARMUP;
		return parse_u32("--warmup", arg, 0, BENCH_MAX_WARMUP, &p->warmup);
	case 'l': /* perftest's letter; -l is --list in rk (rk help options) */
		cli_deprecated(BENCH_PROG, "-l N", "--batch N");
		/* fall through */
	case OPT_BATCH:
		l->explicit_fields |= BF_BATCH;
		return parse_u32("--batch", arg, 1, BENCH_MAX_DEPTH, &p->batch);
	case 'q': /* perftest's letter; -q is --quiet in rk */
		cli_deprecated(BENCH_PROG, "-q N", "--num-qp N");
		/* fall through */
	case OPT_NUM_QP:
		l->explicit_fields |= BF_NUM_QP;
		return parse_u32("--num-qp", arg, 1, BENCH_MAX_QP, &p->num_qp);
	case 't':
		l->explicit_fields |= BF_TX_DEPTH;
		return parse_u32("--tx-depth", arg, 1, BENCH_MAX_DEPTH, &p->tx_depth);
	case OPT_RX_DEPTH:
		l->explicit_fields |= BF_RX_DEPTH;
		return parse_u32("--rx-depth", arg, 1, BENCH_MAX_DEPTH, &p->rx_depth);
	case 'Q':
		l->explicit_fields |= BF_CQ_MOD;
		return parse_u32("--cq-mod", arg, 1, BENCH_MAX_DEPTH, &p->cq_mod);
	case 'I':
		l->explicit_fields |= BF_INLINE;
		return parse_u32("--inline", arg, 0, BENCH_MAX_INLINE, &p->inline_size);
	case 'b':
		l->explicit_fields |= BF_BIDIR;
		p->bidir = 1;
		return 0;
	case OPT_POLL:
		return parse_poll(arg, &l->poll);
	case 'd':
		l->dev_name = arg;
		return 0;
	case 'i':
		if (parse_u32("--ib-port", arg, 1, 255, &v))
			return -1;
		l->ib_port = (uint8_t)v;
		return 0;
	case 'x':
		if (parse_u32("--gid-index", arg, 0, 65535, &v))
			return -1;
		l->gid_index = (int)v;
		return 0;
	case 'm':
		if (parse_u32("--mtu", arg, 256, 4096, &l->mtu))
			return -1;
		if (!rk_mtu_from_bytes(l->mtu))
			return bad("--mtu", arg, "expected 256, 512, 1024, 2048 or 4096");
		return 0;
	case 'p':
		if (parse_u32("--port", arg, 1, 65535, &v))
			return -1;
		snprintf(l->port, sizeof(l->port), "%u", v);
		return 0;
	case OPT_BIND:
		cli_deprecated(BENCH_PROG, "--bind ADDR", "--addr ADDR");
		/* fall through */
	case OPT_ADDR:
		l->addr = arg;
		return 0;
	case OPT_OOB:
		l->explicit_fields |= BF_OOB;
		p->oob = 1;
		return 0;
	case OPT_GBITS:
		l->gbits = 1;
		return 0;
	case OPT_WATCHDOG:
		return parse_secs("--watchdog", arg, 1, 3600, &l->watchdog_s);
	case OPT_WAIT:
		return parse_secs("--wait", arg, 1, 86400, &l->wait_s);
	case OPT_PACE: {
		uint64_t ms;

		if (cli_duration_opt(BENCH_PROG, synopsis, "--pace", arg, 1, 1000, 1, &ms))
			return -1;
		l->pace_ms = (unsigned)ms;
		return 0;
	}
	case OPT_PLOT:
		l->plot_path = arg;
		return 0;
	}
	return -1;
}

/*
 * '--json FILE', the spelling before --json[=FILE], one more release. rk
 * bench has an operand (HOST), so the word after a bare --json (@word, as
 * getopt_long left it among the operands argv[optind..]) is FILE only
 * where it cannot be the HOST: another operand is there too, or it reads
 * as a file name (ends in .json, holds a '/'). Else it is the HOST and the
 * JSON goes to stdout. Returns --json's path.
 */
static const char *json_legacy(int argc, char **argv, char *word)
{
	size_t len = strlen(word);
	int at = -1;

	for (int i = optind; i < argc; i++)
		if (argv[i] == word)
			at = i;
	if (at < 0 || (argc - optind < 2 && !strchr(word, '/') &&
		       (len < 5 || strcmp(word + len - 5, ".json") != 0)))
		return cli_json_path(NULL);
	/* FILE first among the operands, where cli_json_legacy_file takes it from. */
	argv[at] = argv[optind];
	argv[optind] = word;
	return cli_json_legacy_file(BENCH_PROG, argc, argv, NULL);
}

void bench_local_default(struct bench_local *l)
{
	memset(l, 0, sizeof(*l));
	snprintf(l->port, sizeof(l->port), "%s", BENCH_DEF_PORT);
	l->gid_index = -1;
	l->poll = RK_WAIT_BUSY;
	l->watchdog_s = 10;
	l->wait_s = 60;
}

int bench_opts_parse(int argc, char **argv, struct bench_params *p, struct bench_local *l)
{
	static const char shortopts[] = "s:an:D:w:l:q:t:Q:I:bd:i:x:m:p:h";
	static char host[256];
	char why[160], *json_word = NULL;
	int c;

	bench_params_default(p);
	bench_local_default(l);

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c == '?' || c == ':') {
			cli_option_error(BENCH_PROG, synopsis, argv, shortopts, long_opts);
			return -1;
		}
		if (c == OPT_JSON) { /* --json[=FILE]; the next word is judged at the end */
			l->json_path = cli_json_path(optarg);
			json_word = !optarg && optind < argc && argv[optind][0] != '-'
					? argv[optind]
					: NULL;
			continue;
		}
		if (apply(c, optarg, p, l))
			return -1;
	}
	if (json_word)
		l->json_path = json_legacy(argc, argv, json_word);
	/*
	 * One message in flight: signal each WR (as perftest's _lat tools do).
	 * On rxe, latency with unsignaled WRs has a median of a timer tick.
	 */
	if (p->mode == BENCH_MODE_LAT && !(l->explicit_fields & BF_CQ_MOD))
		p->cq_mod = 1;
	/*
	 * --op xfer: 2 batches of 64 ops in flight (perftest's 128 WRs), the
	 * layer's longest chain (one doorbell and one completion per 16 WRs),
	 * 100 batches (6,400 ops: perftest's 5,000 iterations, in batches).
	 */
	if (p->op == BENCH_OP_XFER) {
		if (!(l->explicit_fields & BF_ITERS))
			p->iters = 100;
		if (!(l->explicit_fields & BF_BATCH))
			p->batch = 64;
		if (!(l->explicit_fields & BF_TX_DEPTH))
			p->tx_depth = 2;
		if (!(l->explicit_fields & BF_CQ_MOD))
			p->cq_mod = BENCH_XFER_MAX_CHAIN;
	}
	/* Said before the run, not after it. */
	if (l->plot_path && !cli_have_program("gnuplot")) {
		fprintf(stderr,
			"rk bench: --plot needs gnuplot, which is not installed here (Debian: "
			"apt-get install gnuplot-nox)\n");
		return -1;
	}
	if (l->max_size) {
		if (p->size_min == p->size_max) {
			cli_usage_error(BENCH_PROG, synopsis, "--max-size goes with -a");
			return -1;
		}
		if (l->max_size < BENCH_ALL_MIN || (l->max_size & (l->max_size - 1))) {
			cli_usage_error(BENCH_PROG, synopsis,
					"--max-size: a power of two from 2 to 8M");
			return -1;
		}
		p->size_max = l->max_size;
	}
	if (optind + 1 < argc) {
		cli_usage_error(BENCH_PROG, synopsis, "one HOST expected, got '%s' too",
				argv[optind + 1]);
		return -1;
	}
	if (optind < argc) {
		if (cli_split_host_port(argv[optind], host, sizeof(host), l->port, sizeof(l->port)))
			return bad("HOST", argv[optind], "expected HOST, HOST:PORT or [V6]:PORT");
		l->host = host;
	}
	if (p->op == BENCH_OP_WRITE && p->mode == BENCH_MODE_LAT && l->poll != RK_WAIT_BUSY) {
		cli_usage_error(BENCH_PROG, synopsis,
				"--poll: write latency spins on the buffer; use --op write-imm to "
				"wait for events");
		return -1;
	}
	/* A server paces whatever answers it sends; a client only its pings and calls. */
	if (l->pace_ms && l->host &&
	    (p->mode != BENCH_MODE_LAT ||
	     (p->op != BENCH_OP_SEND && p->op != BENCH_OP_WRITE_IMM && p->op != BENCH_OP_RPC))) {
		cli_usage_error(BENCH_PROG, synopsis,
				"--pace: a client paces its pings and calls, in --mode lat of "
				"send, write-imm and rpc");
		return -1;
	}
	if (check_rpc_local(p, l))
		return -1;
	if (bench_params_check(p, why, sizeof(why))) {
		cli_usage_error(BENCH_PROG, synopsis, "--%s", why);
		return -1;
	}
	return 0;
}
