/*
 * cmd_serve.c - rk serve: receive files from rk copy into one directory.
 *
 * The main thread only listens: it checks each connect request's hello
 * (application, protocol version, access token in constant time) and the
 * client limit, and hands accepted requests to a session thread of their
 * own (copy_recv.c). A refused client learns why before any data moves.
 *
 * Everything a client can make the server hold is bounded, and each bound
 * is an option: sessions (--max-clients), files open at once per session
 * (--max-open, lowered at start until every session's fds fit under the fd
 * limit, whose soft value is first raised to the hard one), entries and
 * bytes per session, the idle time, and the age of abandoned temporaries.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include <rdmakit/cm.h>
#include <rdmakit/device.h>

#include "cli.h"
#include "commands.h"
#include "copy_proto.h"
#include "copy_recv.h"
#include "copy_budget.h"
#include "copy_serve_pull.h"
#include "copy_sweep.h"
#include "copy_token.h"
#include "serve_config.h"
#include "serve_metrics.h"

#define SHUTDOWN_MS 10000
/* fds the process holds besides its sessions: stdio, the device, the
 * listener, the temporaries sweep (one per level) and some slack. */
#define FD_RESERVE (24 + CP_SWEEP_DEPTH + 1)

/* Set by the signal handler, read by every session thread: a lock-free atomic. */
static atomic_int stop;

static void on_signal(int sig)
{
	stop = sig; /* non-zero: which one, for the log line */
}

/* What the flags and the configuration file set. */
struct serve_opts {
	const char *dir, *addr, *port, *dev_name, *token_file, *metrics_file;
	uint64_t max_clients, max_files, idle, max_size, max_bytes, max_open, tmp_age, max_ring;
	int serve_reads;
};

/* A duration option's value (cli_parse_duration) as whole seconds in [@min, @max]; 0 or -1. */
static int parse_secs(const char *val, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t ms;

	if (cli_parse_duration(val, &ms) || ms % 1000 || ms / 1000 < min || ms / 1000 > max)
		return -1;
	*out = ms / 1000;
	return 0;
}

/*
 * Set option @code to @val, from a flag or from the configuration file,
 * with the same parsers either way. @val of 'r' is NULL from the flag,
 * "1" or "0" from the file. 0, or -1 for a bad value.
 */
static int set_opt(struct serve_opts *o, int code, const char *val)
{
	switch (code) {
	case 'd':
		o->dir = val;
		return 0;
	case 'a':
		o->addr = val;
		return 0;
	case 'p': {
		uint64_t port;

		if (cli_parse_uint(val, 0, 65535, &port))
			return -1;
		o->port = val;
		return 0;
	}
	case 'D':
		o->dev_name = val;
		return 0;
	case 't':
		o->token_file = val;
		return 0;
	case 'M':
		o->metrics_file = val;
		return 0;
	case 'r':
		o->serve_reads = !val || !strcmp(val, "1");
		return 0;
	case 'c':
		return cli_parse_uint(val, 1, 1024, &o->max_clients);
	case 's':
		return cli_parse_size(val, &o->max_size);
	case 'f':
		return cli_parse_uint(val, 1, UINT32_MAX - 1, &o->max_files);
	case 'i':
		return parse_secs(val, 1, 86400, &o->idle);
	case 'b':
		return cli_parse_size(val, &o->max_bytes);
	case 'o':
		return cli_parse_uint(val, 1, CP_SERVE_MAX_OPEN, &o->max_open);
	case 'A':
		return parse_secs(val, 0, 10ull * 365 * 86400, &o->tmp_age);
	case 'R':
		return cli_parse_size(val, &o->max_ring) ||
			       o->max_ring < CP_HDR_SIZE + CP_CHUNK_MIN || o->max_ring > (1u << 30)
			   ? -1
			   : 0;
	default:
		return -1;
	}
}

/* Apply @path's settings to @o; exit status 2 material on failure (the reason printed). */
static int load_config(const char *path, struct serve_opts *o, struct sc_file *cf)
{
	char why[1400];

	if (sc_load(path, sc_serve_keys, cf, why, sizeof(why))) {
		fprintf(stderr, "rk serve: config: %s\n", why);
		return -1;
	}
	for (unsigned i = 0; i < cf->n; i++) {
		const struct sc_item *it = &cf->items[i];

		if (set_opt(o, it->key->code, it->value)) {
			fprintf(stderr, "rk serve: config: %s:%u: %s: bad value '%.64s'\n", path,
				it->line, it->key->name, it->value);
			return -1;
		}
	}
	return 0;
}

/* The metrics file, if asked for; a failure while running is logged, not fatal. */
static void write_metrics(const struct serve_opts *o, const struct cp_server *srv)
{
	char why[512];

	if (o->metrics_file &&
	    sm_write(o->metrics_file, srv->metrics, atomic_load(&srv->active), why, sizeof(why)))
		fprintf(stderr, "rk serve: warning: metrics: %s\n", why);
}

static const char synopsis[] = "usage: rk serve --dir DIR [OPTIONS]\n";

static void usage(FILE *f)
{
	fputs(synopsis, f);
	fprintf(
	    f,
	    "\n"
	    "Receive files sent by 'rk copy' into DIR, over RDMA (and with --read, send files\n"
	    "from DIR to clients that fetch them). Many clients at once, each\n"
	    "with its own registered ring; files appear only once complete and verified\n"
	    "(XXH3-128), under DIR and nowhere else.\n"
	    "\n"
	    "options:\n"
	    "      --dir DIR            directory to write into (required)\n"
	    "      --addr ADDR          local address to listen on (also picks the device)\n"
	    "  -p, --port PORT          port (default %s)\n"
	    "      --dev NAME           RDMA device (default: the one owning ADDR, $RK_DEV,\n"
	    "                           or the only one)\n"
	    "      --token-file FILE    require this access token from clients\n"
	    "      --read               also let clients fetch files from DIR (rk copy\n"
	    "                           HOST:SRC DEST); off by default. Symlinks are not\n"
	    "                           followed, files with more than one hard link not\n"
	    "                           served (refused by name, left out of a tree); a\n"
	    "                           pull plans at most 100000 entries\n"
	    "\n"
	    "limits (per session: one rk copy, whatever its --num-qp):\n"
	    "      --max-clients N      sessions at once; more are refused busy (default 16)\n"
	    "      --max-file-size SIZE largest file accepted or compared (default 1T)\n"
	    "      --max-files N        files and directories per session (default 1000000)\n"
	    "      --max-bytes SIZE     sum of the file sizes a session begins (default 16T)\n"
	    "      --max-open N         files open at once per session (default and most %u;\n"
	    "                           lowered at start so that --max-clients sessions fit in\n"
	    "                           the fd limit, whose soft value is raised to the hard)\n"
	    "      --idle DURATION      drop a session that moves less than 1 MiB of file data\n"
	    "                           in this long (each file or directory made counts 4 KiB;\n"
	    "                           default 60s; whole seconds, a bare number is seconds)\n"
	    "      --max-ring SIZE      registered ring per session (default 64M); lowered at\n"
	    "                           start so that --max-clients sessions fit in the\n"
	    "                           locked-memory limit; a client whose chunk does not\n"
	    "                           fit in one slot is refused\n"
	    "      --tmp-age DURATION   remove temporaries (.NAME.rkpart) of abandoned transfers\n"
	    "                           untouched this long, at start and while running\n"
	    "                           (default 24h; whole seconds; 0: never)\n"
	    "\n"
	    "service:\n"
	    "      --config FILE        settings from FILE: 'key = value' lines, keys the long\n"
	    "                           options above (dir, port, read = yes, max-clients...),\n"
	    "                           '#' lines comments; flags win over the file. An\n"
	    "                           unknown key, bad value, key given twice or line over\n"
	    "                           1024 bytes: exit 2 naming FILE:LINE and the key\n"
	    "      --metrics-file PATH  write Prometheus text (rk_serve_* sessions, bytes,\n"
	    "                           files, failures and refusals by reason...) to PATH\n"
	    "                           every 5 s and at exit, atomically (for node_exporter's\n"
	    "                           textfile collector); refused at start if PATH's\n"
	    "                           directory is not writable\n"
	    "  -h, --help               this text\n"
	    "\n"
	    "A file over a limit is refused with the limit's name; the session goes on.\n"
	    "Without --token-file anyone who can reach the port can write into DIR.\n"
	    "One line is logged per finished file: name, size, seconds, rate, verified.\n"
	    "Stop with Ctrl-C or SIGTERM: sessions in flight end as a lost connection would\n"
	    "(temporaries kept for rk copy --resume, no file half committed); exit within\n"
	    "about 10 s. Exit codes: 0 stopped cleanly, 1 failure, 2 usage or configuration.\n"
	    "systemd: rdmakit-serve@NAME.service runs --config /etc/rdmakit/serve-NAME.conf.\n"
	    "\n"
	    "example:\n"
	    "  rk serve --dir /data/incoming --addr 10.0.0.1 --token-file ~/.rk-token\n",
	    CP_DEFAULT_PORT, CP_SERVE_MAX_OPEN);
}

/*
 * Refuse or hand over one connect request. A new session must bring the
 * access token; a further lane of a running session brings that
 * session's key instead (copy_recv.c checks it).
 */
static void handle_request(struct cp_server *srv, struct rk_cm_request *req, int has_token,
			   const uint8_t *token, unsigned max_clients)
{
	const struct rk_hello *h = rk_cm_request_hello(req);
	unsigned lane;
	char text[64];
	int kind = cp_lane_parse(h->app_arg, &lane);

	if (kind == -EPROTO) {
		snprintf(text, sizeof(text), "rk copy protocol %u not supported (server: %u)",
			 (unsigned)(h->app_arg & 0xffff), (unsigned)CP_VERSION);
		rk_cm_request_reject(req, RK_REJECT_VERSION, text, NULL);
		SM_ADD(srv->metrics, refused[SM_REF_VERSION], 1);
		return;
	}
	if (kind < 0) {
		rk_cm_request_reject(req, RK_REJECT_BAD_HELLO, "malformed lane request", NULL);
		SM_ADD(srv->metrics, refused[SM_REF_HELLO], 1);
		return;
	}
	if (kind == 1) {
		if (h->token_len != CP_KEY_LEN) {
			rk_cm_request_reject(req, RK_REJECT_BAD_HELLO, "lane without session key",
					     NULL);
			SM_ADD(srv->metrics, refused[SM_REF_HELLO], 1);
			return;
		}
		snprintf(text, sizeof(text), "%s", rk_cm_request_peer(req));
		if (cp_session_join(srv, req, lane, h->token)) { /* req is gone now */
			SM_ADD(srv->metrics, refused[SM_REF_LANE], 1);
			fprintf(stderr, "rk serve: %s: refused a lane for an unknown session\n",
				text);
		}
		return;
	}
	if (has_token &&
	    (h->token_len != CP_TOKEN_LEN || !cp_token_equal(h->token, token, CP_TOKEN_LEN))) {
		fprintf(stderr, "rk serve: %s: refused: wrong or missing access token\n",
			rk_cm_request_peer(req));
		rk_cm_request_reject(req, RK_REJECT_TOKEN, "access token refused", NULL);
		SM_ADD(srv->metrics, refused[SM_REF_TOKEN], 1);
		return;
	}
	if (kind == 2 && !srv->serve_reads) {
		fprintf(stderr, "rk serve: %s: refused a pull (no --read)\n",
			rk_cm_request_peer(req));
		rk_cm_request_reject(req, RK_REJECT_DENIED,
				     "this server does not serve reads (rk serve --read)", NULL);
		SM_ADD(srv->metrics, refused[SM_REF_NO_READ], 1);
		return;
	}
	if ((unsigned)atomic_load(&srv->active) >= max_clients) {
		snprintf(text, sizeof(text), "server busy (%u clients)", max_clients);
		rk_cm_request_reject(req, RK_REJECT_BUSY, text, NULL);
		SM_ADD(srv->metrics, refused[SM_REF_BUSY], 1);
		return;
	}
	if ((kind == 2 ? cp_pull_session_start(srv, req) : cp_session_start(srv, req))) {
		fprintf(stderr, "rk serve: could not start a session\n");
		SM_ADD(srv->metrics, refused[SM_REF_RESOURCES], 1);
	} else {
		SM_ADD(srv->metrics, sessions, 1);
	}
}

/* Serve as @o says until a signal; an exit status. */
static int serve(const struct serve_opts *o)
{
	const char *dir = o->dir, *addr = o->addr, *port = o->port, *dev_name = o->dev_name,
		   *token_file = o->token_file;
	uint64_t max_clients = o->max_clients, max_files = o->max_files, idle = o->idle,
		 max_size = o->max_size, max_bytes = o->max_bytes, max_open = o->max_open,
		 tmp_age = o->tmp_age, fdlim, max_ring = o->max_ring, memlock;
	unsigned nclients; /* --max-clients, or fewer if the locked-memory limit says so */
	static struct sm_metrics metrics; /* zero: counted from start */
	struct cp_sweeper sweeper = {0};
	struct cp_server srv = {0};
	struct rk_device_opts dopts = {.gid_index = -1};
	struct rk_listener *lis = NULL;
	struct sigaction sa = {0};
	uint8_t token[CP_TOKEN_LEN];
	int has_token = 0, rc = RK_EXIT_FAILURE;
	uint64_t metrics_at;
	struct rk_error err;
	char why[512];

	srv.serve_reads = o->serve_reads;
	srv.metrics = &metrics;
	/*
	 * From here SIGTERM (systemctl stop) and SIGINT only set stop: the
	 * loop below notices within a poll period, sessions end as a lost
	 * connection would (temporaries kept for --resume) and we exit 0.
	 */
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL) ||
	    signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
		fprintf(stderr, "rk serve: signal handlers: %s\n", strerror(errno));
		return RK_EXIT_FAILURE;
	}
	/* A metrics file that cannot be written is refused now, not lost silently later. */
	if (o->metrics_file && sm_write(o->metrics_file, &metrics, 0, why, sizeof(why))) {
		fprintf(stderr, "rk serve: --metrics-file: %s\n", why);
		return RK_EXIT_FAILURE;
	}
	if (token_file) {
		if (cp_token_load(token_file, token, why, sizeof(why))) {
			fprintf(stderr, "rk serve: token: %s\n", why);
			return RK_EXIT_FAILURE;
		}
		has_token = 1;
	}
	srv.rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (srv.rootfd < 0) {
		fprintf(stderr, "rk serve: %s: %s\n", dir, strerror(errno));
		return RK_EXIT_FAILURE;
	}
	srv.max_open = (uint32_t)max_open;
	fdlim = cp_fit_fds((unsigned)max_clients, FD_RESERVE, &srv.max_open);
	srv.max_ring = (uint32_t)max_ring;
	nclients = (unsigned)max_clients;
	if (!fdlim || cp_fit_memlock(&nclients, &srv.max_ring, &memlock)) {
		close(srv.rootfd);
		return RK_EXIT_FAILURE;
	}
	srv.max_files = (uint32_t)max_files;
	srv.max_bytes = max_bytes;
	srv.max_file_size = max_size;
	srv.idle_ms = (int)idle * 1000;
	srv.stop = &stop;
	atomic_init(&srv.active, 0);
	if (cp_server_registry_init(&srv)) {
		fprintf(stderr, "rk serve: cannot set up the lane registry\n");
		close(srv.rootfd);
		return RK_EXIT_FAILURE;
	}

	/* --dev, else the address's, else $RK_DEV, else the only device (cli.h). */
	cli_device_opts(&dopts, dev_name, addr, NULL);
	if (rk_device_open(&dopts, &err, &srv.dev)) {
		cli_report("serve", "opening the RDMA device", &err);
		cp_server_registry_fini(&srv);
		close(srv.rootfd);
		return RK_EXIT_FAILURE;
	}
	{
		struct rk_listen_opts lo = {.addr = addr, .port = port, .app_id = CP_APP_ID};

		if (rk_listener_create(srv.dev, &lo, &err, &lis)) {
			cli_report("serve", "listen", &err);
			goto out;
		}
	}
	if (!has_token)
		fprintf(stderr,
			"rk serve: warning: no --token-file: anyone who can reach %s:%u can write "
			"files into %s%s\n",
			addr ? addr : "*", rk_listener_port(lis), dir,
			srv.serve_reads ? " and read every file under it" : "");
	{
		char ring[32], lock[48] = "no locked-memory limit";

		if (memlock)
			snprintf(lock, sizeof(lock), "locked-memory limit %llu KiB",
				 (unsigned long long)(memlock >> 10));
		printf("rk serve: limits: %llu sessions, %u files open each (fd limit %llu), "
		       "ring %s each (%s), idle %llu s, temporaries kept %llu s\n",
		       (unsigned long long)nclients, srv.max_open, (unsigned long long)fdlim,
		       cli_fmt_bytes(srv.max_ring, ring, sizeof(ring)), lock,
		       (unsigned long long)idle, (unsigned long long)tmp_age);
	}
	if (cp_sweeper_start(&sweeper, srv.rootfd, tmp_age, &stop))
		fprintf(stderr, "rk serve: warning: no thread for the sweep of temporaries: "
				"only the one at start ran\n");
	printf("rk serve: listening on %s:%u, writing into %s%s%s\n", addr ? addr : "*",
	       rk_listener_port(lis), dir, srv.serve_reads ? ", reads allowed (--read)" : "",
	       has_token ? " (token required)" : "");
	fflush(stdout);

	metrics_at = cli_now_ns();
	while (!stop) {
		struct rk_cm_request *req;
		int r;

		if (cli_now_ns() - metrics_at >= SM_PERIOD_S * 1000000000ull) {
			write_metrics(o, &srv);
			metrics_at = cli_now_ns();
		}
		r = rk_listener_get_request(lis, 500, &err, &req);
		if (r == -ETIMEDOUT || r == -EAGAIN || r == -EINTR)
			continue;
		if (r) {
			cli_report("serve", "listener", &err);
			goto out;
		}
		handle_request(&srv, req, has_token, token, nclients);
	}
	printf("rk serve: %s: stopping; %d sessions end as if their connection were lost\n",
	       strsignal(stop), atomic_load(&srv.active));
	fflush(stdout);
	rc = RK_EXIT_OK;
out:
	rk_listener_destroy(lis);
	/* Sessions see stop within a poll period; the device must outlive them. */
	stop = 1;
	cp_sweeper_stop(&sweeper);
	for (int waited = 0; atomic_load(&srv.active) > 0; waited += 50) {
		if (waited >= SHUTDOWN_MS) {
			fprintf(stderr, "rk serve: sessions did not end; exiting anyway\n");
			write_metrics(o, &srv);
			return RK_EXIT_FAILURE;
		}
		usleep(50000);
	}
	write_metrics(o, &srv); /* the final counts */
	rk_device_close(srv.dev);
	cp_server_registry_fini(&srv);
	close(srv.rootfd);
	printf("rk serve: stopped\n");
	return rc;
}

int rk_cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"dir", required_argument, NULL, 'd'},
	    {"addr", required_argument, NULL, 'a'},
	    {"port", required_argument, NULL, 'p'},
	    {"dev", required_argument, NULL, 'D'},
	    {"token-file", required_argument, NULL, 't'},
	    {"max-clients", required_argument, NULL, 'c'},
	    {"max-file-size", required_argument, NULL, 's'},
	    {"max-files", required_argument, NULL, 'f'},
	    {"idle", required_argument, NULL, 'i'},
	    {"max-bytes", required_argument, NULL, 'b'},
	    {"max-open", required_argument, NULL, 'o'},
	    {"tmp-age", required_argument, NULL, 'A'},
	    {"max-ring", required_argument, NULL, 'R'},
	    {"read", no_argument, NULL, 'r'},
	    {"config", required_argument, NULL, 'C'},
	    {"metrics-file", required_argument, NULL, 'M'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct serve_opts o = {.port = CP_DEFAULT_PORT,
			       .max_clients = 16,
			       .max_files = 1000000,
			       .idle = 60,
			       .max_size = 1ull << 40,
			       .max_bytes = 16ull << 40,
			       .max_open = CP_SERVE_MAX_OPEN,
			       .tmp_age = 86400,
			       .max_ring = 64u << 20};
	struct sc_file cf = {0};
	const char *config = NULL;
	int c, rc, idx = -1;

	/* First the file, then the flags over it: find --config (and --help) first. */
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "d:a:p:h", opts, NULL)) != -1) {
		if (c == 'C')
			config = optarg;
		else if (c == 'h') {
			usage(stdout);
			return RK_EXIT_OK;
		} else if (c == '?') {
			return cli_option_error("serve", synopsis, argv, "d:a:p:h", opts);
		}
	}
	if (config && load_config(config, &o, &cf)) {
		sc_free(&cf);
		return RK_EXIT_USAGE;
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "d:a:p:h", opts, &idx)) != -1) {
		/*
		 * -d DIR and -a ADDR: one more release, then -d is --dev as in
		 * every rk command, and -a is rk bench's --all (rk help options).
		 */
		if (idx < 0 && c == 'd')
			cli_deprecated("serve", "-d DIR", "--dir DIR (-d will be --dev)");
		else if (idx < 0 && c == 'a')
			cli_deprecated("serve", "-a ADDR", "--addr ADDR");
		idx = -1;
		if (c != 'C' && set_opt(&o, c, c == 'r' ? NULL : optarg)) {
			fprintf(stderr, "rk serve: bad option value: %s\n", optarg);
			sc_free(&cf);
			return RK_EXIT_USAGE;
		}
	}
	if (!o.dir || optind != argc) {
		if (o.dir)
			cli_usage_error("serve", synopsis, "unexpected argument '%s'",
					argv[optind]);
		else
			cli_usage_error("serve", synopsis,
					"--dir is required (or dir in --config)");
		sc_free(&cf);
		return RK_EXIT_USAGE;
	}
	rc = serve(&o);
	sc_free(&cf); /* the strings of @o point into it */
	return rc;
}
