/*
 * cmd_copy.c - rk copy: send files and trees to an rk serve, like scp (paths as rsync).
 *
 * This file is the command line: options, the HOST[:PORT]:DEST target, the
 * report at the end (a line per failed file, a summary line or --json) and
 * the exit code. The plan of what to send is copy_plan.c, the transfer
 * copy_send.c, reconnecting after a lost connection copy_retry.c.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli.h"
#include "commands.h"
#include "copy_budget.h"
#include "copy_plan.h"
#include "copy_progress.h"
#include "copy_proto.h"
#include "copy_pull.h"
#include "copy_retry.h"
#include "copy_send.h"
#include "copy_token.h"

static const char synopsis[] = "usage: rk copy [OPTIONS] SRC... HOST[:PORT]:DEST      (push)\n"
			       "       rk copy [OPTIONS] HOST[:PORT]:SRC... DEST      (pull)\n";

static void usage(FILE *f)
{
	fputs(synopsis, f);
	fprintf(
	    f,
	    "\n"
	    "Copy files (and with -r, directory trees) to an 'rk serve' over RDMA. DEST is\n"
	    "relative to the server's directory ('' or '.' is its top). Every chunk and\n"
	    "every whole file is verified (XXH3-128); a file becomes visible only once\n"
	    "complete. Where things land follows rsync's rules:\n"
	    "\n"
	    "  rk copy f host:d/               d/f\n"
	    "  rk copy f host:d                d/f if d is a directory on the server, else d\n"
	    "  rk copy -r src host:d[/]        d/src/...  (the directory itself)\n"
	    "  rk copy -r src/ host:d[/]       d/...      (its contents; also src/. and .)\n"
	    "  rk copy a b host:d[/]           d/a, d/b\n"
	    "\n"
	    "A pull fetches from an 'rk serve --read' by the same rules, SRC relative to the\n"
	    "server's directory and DEST local: 'rk copy -r host:data/ d' puts data's contents\n"
	    "in d. Nothing is written but DEST and what lies beneath it, whatever names the\n"
	    "server sends; symlinks on the server are not followed (inside trees: skipped).\n"
	    "A pull stripes over --num-qp lanes and reconnects as a push does.\n"
	    "\n"
	    "options:\n"
	    "  -r, --recursive       copy directories\n"
	    "      --resume          continue interrupted transfers from the longest verified\n"
	    "                        prefix; files already there and identical are skipped\n"
	    "  -f, --force           overwrite existing files\n"
	    "      --chunk SIZE      bytes per RDMA write (default 1M, 4K..8188K)\n"
	    "      --depth N         chunks in flight in all (default 8 per connection, fewer\n"
	    "                        if locked memory is short; 1..%d)\n"
	    "      --num-qp N        stripe over N connections (1..8, default 1)\n"
	    "      --token-file FILE access token, if the server requires one\n"
	    "  -d, --dev NAME        local RDMA device (default $RK_DEV, else the one the route\n"
	    "                        to HOST leaves by)\n"
	    "      --timeout DURATION  give up on a server silent this long (default 30s;\n"
	    "                        500ms, 30s, 2m: a bare number is seconds)\n"
	    "      --retries N       reconnect up to N times after the connection fails (no\n"
	    "                        ACK from the server, server gone or restarting, not\n"
	    "                        answering) and resume from what the server verified;\n"
	    "                        waits 0.5 s doubling to 8 s (jittered) while nothing\n"
	    "                        moves; after repeated losses lowers the chunk size and\n"
	    "                        depth (down to 64K and 4) for a lossy link. A file\n"
	    "                        another transfer holds (busy) is tried again too.\n"
	    "                        Refusals (token, busy server, file exists, limits,\n"
	    "                        disk full) and nobody listening at the first connect\n"
	    "                        (wrong host or port) are not retried; a first connect\n"
	    "                        that finds no answer at all is retried only when\n"
	    "                        --retries is given. Default %d, 0: fail at once\n"
	    "      --retry-window DURATION  stop retrying once nothing has moved for this\n"
	    "                        long (default %ds; whole seconds)\n"
	    "      --json[=FILE]     a machine-readable summary on stdout (nothing else\n"
	    "                        there), or into FILE beside the usual output\n"
	    "      --progress        the progress line also when stderr is not a terminal\n"
	    "                        (one plain line a second)\n"
	    "  -q, --quiet           no progress bar and no summary line; errors only\n"
	    "  -h, --help            this text\n"
	    "\n"
	    "exit codes:\n"
	    "  0  everything copied and verified\n"
	    "  1  some file failed (I/O error, integrity check, source changed), or this\n"
	    "     host's RDMA device could not be opened ('rk doctor' says why)\n"
	    "  2  bad command line\n"
	    "  3  refused by the server (access token, busy, file exists, path, limits)\n"
	    "  4  could not connect, connection lost, or server not answering (after the\n"
	    "     retries)\n"
	    "\n"
	    "examples:\n"
	    "  rk copy big.img 10.0.0.1:images/            # into DIR/images/big.img\n"
	    "  rk copy -r dataset 10.0.0.1:7900:incoming   # tree under DIR/incoming/dataset\n"
	    "  rk copy -r dataset/ 10.0.0.1:incoming       # its contents under DIR/incoming\n"
	    "  rk copy --resume big.img 10.0.0.1:          # after an interruption\n"
	    "  rk copy -r 10.0.0.1:ckpt/step-900 ./restore # pull: ./restore/step-900/...\n"
	    "  rk copy --token-file ~/.rk-token --json a b 10.0.0.1:x/\n",
	    CP_MAX_SLOTS, CP_RETRIES_DEFAULT, CP_WINDOW_DEFAULT);
}

/*
 * USER@HOST...: the scp habit. rk copy has no user accounts (the server
 * writes as itself; access is the token), so the user part is skipped,
 * with a note (user_note). Returns where the host starts.
 */
static const char *skip_user(const char *arg)
{
	const char *colon = strchr(arg, ':'), *at = NULL;

	/* The last '@' before the host (scp's rule: me@corp.com@host). */
	for (const char *p = arg; *p && (!colon || p < colon); p++)
		if (*p == '@')
			at = p;
	if (!at || at == arg || memchr(arg, ':', (size_t)(at - arg)) ||
	    memchr(arg, '/', (size_t)(at - arg)) || memchr(arg, '[', (size_t)(at - arg)))
		return arg;
	return at + 1;
}

static void user_note(const char *arg, int quiet)
{
	const char *h = skip_user(arg);

	if (h != arg && !quiet)
		fprintf(stderr,
			"rk copy: note: '%.*s' ignored: the server writes as its own user "
			"(access is by --token-file)\n",
			(int)(h - arg), arg);
}

/* [USER@]HOST[:PORT]:DEST, HOST may be [v6]. DEST may be empty. */
static int parse_target(const char *arg, char *host, size_t hl, char *port, size_t pl,
			const char **dest)
{
	const char *p, *q;
	size_t n;

	arg = skip_user(arg);
	if (arg[0] == '[') {
		p = strchr(arg, ']');
		if (!p)
			return -1;
		n = (size_t)(p - arg - 1);
		arg++;
		p++;
	} else {
		p = strchr(arg, ':');
		if (!p)
			return -1;
		n = (size_t)(p - arg);
	}
	if (n == 0 || n >= hl || *p != ':')
		return -1;
	memcpy(host, arg, n);
	host[n] = '\0';
	p++;
	for (q = p; isdigit((unsigned char)*q); q++)
		;
	if (q > p && *q == ':') {
		if ((size_t)(q - p) >= pl)
			return -1;
		memcpy(port, p, (size_t)(q - p));
		port[q - p] = '\0';
		p = q + 1;
	}
	*dest = p;
	return 0;
}

#define UNSENT_NAMED 5

struct tally {
	size_t ok, uptodate, failed, refused, unsent, dirs;
	size_t refused_by[CP_E_BUSY + 1]; /* by refused_code() code */
	uint64_t bytes;
};

static int refused_code(unsigned code)
{
	return code == CP_E_EXISTS || code == CP_E_PATH || code == CP_E_LIMIT || code == CP_E_BUSY;
}

/* Describe why @it failed into @buf; "" if it did not. */
static const char *item_error(const struct cp_item *it, char *buf, size_t len)
{
	buf[0] = '\0';
	if (it->local_err[0])
		snprintf(buf, len, "%s", it->local_err);
	else if (it->state != CP_ITEM_DONE)
		snprintf(buf, len, "not copied (the session ended first)");
	else if (it->code == CP_E_HASH)
		snprintf(buf, len, "%s at offset %llu", cp_code_str(it->code),
			 (unsigned long long)it->offset);
	else if (it->code == CP_E_IO && it->sys_errno)
		snprintf(buf, len, "%s: %s", cp_code_str(it->code), strerror((int)it->sys_errno));
	else if (it->code != CP_OK && it->code != CP_E_UPTODATE)
		snprintf(buf, len, "%s", cp_code_str(it->code));
	return buf;
}

/*
 * Count the outcome; name the failures on stderr (@name_unsent: also the
 * files a lost session left unsent - not when none was ever sent, where
 * the one reason, already printed, is the whole story).
 */
static void tally_plan(const struct cp_plan *p, struct tally *t, int name_unsent)
{
	char why[256];

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < p->n; i++) {
		const struct cp_item *it = &p->items[i];

		item_error(it, why, sizeof(why));
		if (!why[0]) {
			if (it->is_dir)
				t->dirs++;
			else if (it->code == CP_E_UPTODATE)
				t->uptodate++;
			else
				t->ok++;
			if (!it->is_dir)
				t->bytes += it->size;
			continue;
		}
		if (it->state != CP_ITEM_DONE && !it->local_err[0]) {
			/* After a lost connection, name a few, count the rest. */
			if (t->unsent++ >= UNSENT_NAMED || !name_unsent)
				continue;
		} else if (!it->local_err[0] && refused_code(it->code)) {
			t->refused_by[it->code]++;
			/* A refused tree: a few named, the rest counted (refusal_summary). */
			if (t->refused++ >= UNSENT_NAMED)
				continue;
		} else {
			t->failed++;
		}
		fprintf(stderr, "rk copy: %s -> %s: %s\n", it->src, it->dst, why);
	}
	if (t->unsent > UNSENT_NAMED && name_unsent)
		fprintf(stderr, "rk copy: ... and %zu more not copied\n", t->unsent - UNSENT_NAMED);
	if (t->refused > UNSENT_NAMED)
		fprintf(stderr, "rk copy: ... and %zu more refused\n", t->refused - UNSENT_NAMED);
}

/* One line: the refused files counted by reason, with the option that helps where one does. */
static void refusal_summary(const struct tally *t)
{
	static const struct {
		unsigned code;
		const char *what, *help;
	} r[] = {
	    {CP_E_EXISTS, "exist on the server",
	     "--force replaces them; --resume skips identical ones and completes partial ones"},
	    {CP_E_PATH, "named a path the server refuses",
	     "outside its directory or through a link"},
	    {CP_E_LIMIT, "are over the server's limits", "its rk serve --max-* options"},
	    {CP_E_BUSY, "are being written by another transfer", "try again once it ends"},
	};
	char line[768];
	size_t n = 0;

	if (!t->refused)
		return;
	n += (size_t)snprintf(line, sizeof(line), "rk copy: %zu file%s refused:", t->refused,
			      t->refused == 1 ? "" : "s");
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]) && n < sizeof(line); i++)
		if (t->refused_by[r[i].code])
			n += (size_t)snprintf(line + n, sizeof(line) - n, "%s %zu %s (%s)",
					      n > 30 && line[n - 1] == ')' ? ";" : "",
					      t->refused_by[r[i].code], r[i].what, r[i].help);
	fprintf(stderr, "%s\n", line);
}

static void print_json(const char *path, const struct cp_plan *p, const struct tally *t,
		       double secs, int rc, const char *fatal, const struct cp_retry_stats *rs)
{
	json_object *o = json_object_new_object(), *errs = json_object_new_array();
	char why[256];

	if (!o || !errs) {
		json_object_put(o);
		json_object_put(errs);
		fprintf(stderr, "rk copy: out of memory\n");
		return;
	}
	for (size_t i = 0; i < p->n; i++) {
		json_object *e;

		if (!item_error(&p->items[i], why, sizeof(why))[0])
			continue;
		e = json_object_new_object();
		if (!e)
			continue;
		json_object_object_add(e, "src", json_object_new_string(p->items[i].src));
		json_object_object_add(e, "dest", json_object_new_string(p->items[i].dst));
		json_object_object_add(e, "error", json_object_new_string(why));
		json_object_array_add(errs, e);
	}
	json_object_object_add(o, "files", json_object_new_int64((int64_t)p->files));
	json_object_object_add(o, "files_copied", json_object_new_int64((int64_t)t->ok));
	json_object_object_add(o, "files_up_to_date", json_object_new_int64((int64_t)t->uptodate));
	json_object_object_add(
	    o, "failed", json_object_new_int64((int64_t)(t->failed + t->refused + t->unsent)));
	json_object_object_add(o, "directories", json_object_new_int64((int64_t)t->dirs));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)t->bytes));
	json_object_object_add(o, "seconds", json_object_new_double(secs));
	json_object_object_add(
	    o, "gbps", json_object_new_double(secs > 0 ? (double)t->bytes * 8 / secs / 1e9 : 0));
	json_object_object_add(o, "verified", json_object_new_string("xxh3-128"));
	json_object_object_add(o, "reconnects", json_object_new_int64(rs->reconnects));
	json_object_object_add(o, "chunk", json_object_new_int64(rs->chunk));
	json_object_object_add(o, "depth", json_object_new_int64(rs->depth));
	json_object_object_add(o, "exit_code", json_object_new_int(rc));
	if (fatal && *fatal)
		json_object_object_add(o, "error", json_object_new_string(fatal));
	json_object_object_add(o, "errors", errs);
	(void)cli_json_emit("copy", path,
			    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
}

/*
 * HOST[:PORT]:SRC... DEST: every source on the same server; then copy_pull.c.
 * @n operands in @ops; @so holds the options parsed.
 */
static int pull(int n, char **ops, const struct cp_send_opts *so, const struct cp_retry_opts *ro,
		int recursive, int idle_ms, const char *token_file, int quiet,
		const char *json_path)
{
	char host[256] = "", port[16], h2[256] = "", p2[16], why[256];
	uint8_t token[CP_TOKEN_LEN];
	char *srcs[CP_PULL_MAX_SRC];
	struct cp_pull_opts o = {.dev = so->dev,
				 .dest = ops[n - 1],
				 .chunk = so->chunk,
				 .depth = so->depth,
				 .flags = so->flags,
				 .lanes = so->lanes,
				 .recursive = recursive,
				 .idle_ms = idle_ms,
				 .retries = ro->retries,
				 .window_s = ro->window_s,
				 .retry_first = ro->retry_first,
				 .progress = so->progress_mode,
				 .quiet = quiet,
				 .json = cli_json_to_stdout(json_path),
				 .json_path = json_path};
	const char *path;

	if (n - 1 > CP_PULL_MAX_SRC) {
		fprintf(stderr, "rk copy: at most %d sources from a server at once\n",
			CP_PULL_MAX_SRC);
		return RK_EXIT_USAGE;
	}
	snprintf(port, sizeof(port), "%s", CP_DEFAULT_PORT);
	for (int i = 0; i < n - 1; i++) {
		snprintf(p2, sizeof(p2), "%s", CP_DEFAULT_PORT);
		if (parse_target(ops[i], i ? h2 : host, sizeof(host), i ? p2 : port, sizeof(port),
				 &path) ||
		    (i && (strcmp(h2, host) || strcmp(p2, port)))) {
			fprintf(stderr,
				"rk copy: '%s': every source must be HOST[:PORT]:PATH on the same "
				"server\n",
				ops[i]);
			return RK_EXIT_USAGE;
		}
		srcs[i] = (char *)path;
	}
	o.host = host;
	o.port = port;
	o.srcs = srcs;
	o.nsrc = n - 1;
	if (token_file) {
		if (cp_token_load(token_file, token, why, sizeof(why))) {
			fprintf(stderr, "rk copy: token: %s\n", why);
			return RK_EXIT_USAGE;
		}
		o.token = token;
	}
	return cp_pull_run(&o);
}

int rk_cmd_copy(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"recursive", no_argument, NULL, 'r'},
	    {"resume", no_argument, NULL, 'R'},
	    {"force", no_argument, NULL, 'f'},
	    {"chunk", required_argument, NULL, 'C'},
	    {"depth", required_argument, NULL, 'E'},
	    {"num-qp", required_argument, NULL, 'n'},
	    {"token-file", required_argument, NULL, 't'},
	    {"dev", required_argument, NULL, 'd'},
	    {"timeout", required_argument, NULL, 'T'},
	    {"retries", required_argument, NULL, 'e'},
	    {"retry-window", required_argument, NULL, 'w'},
	    {"json", optional_argument, NULL, 'j'},
	    {"progress", no_argument, NULL, 'P'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct cp_send_opts so = {.port = CP_DEFAULT_PORT, .chunk = CP_CHUNK_DEFAULT};
	uint64_t v, timeout_ms = 30000;
	int recursive = 0, json = 0, quiet = 0, progress = 0, c, rc, started;
	char host[256], port[16], why[512];
	uint8_t token[CP_TOKEN_LEN];
	const char *dest, *token_file = NULL, *json_path = NULL;
	struct cp_retry_opts ro = {.retries = CP_RETRIES_DEFAULT, .window_s = CP_WINDOW_DEFAULT};
	struct cp_retry_stats rs;
	struct cp_progress prog;
	struct cp_plan plan;
	struct tally t;
	uint64_t t0;
	double secs;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "rfqhd:", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			recursive = 1;
			break;
		case 'R':
			so.flags |= CP_F_RESUME;
			break;
		case 'f':
			so.flags |= CP_F_FORCE;
			break;
		case 'C':
			if (cli_parse_size(optarg, &v) || v < CP_CHUNK_MIN || v > CP_CHUNK_MAX) {
				fprintf(stderr, "rk copy: --chunk must be 4K..8188K (8M less a "
						"slot's records)\n");
				return RK_EXIT_USAGE;
			}
			so.chunk = (uint32_t)v;
			break;
		case 'E':
			if (cli_parse_uint(optarg, 1, CP_MAX_SLOTS, &v)) {
				fprintf(stderr, "rk copy: --depth must be 1..%d\n", CP_MAX_SLOTS);
				return RK_EXIT_USAGE;
			}
			so.depth = (unsigned)v;
			break;
		case 'n':
			if (cli_parse_uint(optarg, 1, CP_MAX_LANES, &v)) {
				fprintf(stderr, "rk copy: --num-qp must be 1..%d\n", CP_MAX_LANES);
				return RK_EXIT_USAGE;
			}
			so.lanes = (unsigned)v;
			break;
		case 't':
			token_file = optarg;
			break;
		case 'd':
			so.dev = optarg;
			break;
		case 'T':
			if (cli_duration_opt("copy", synopsis, "--timeout", optarg, 1000, 3600000,
					     1, &timeout_ms))
				return RK_EXIT_USAGE;
			break;
		case 'e':
			if (cli_parse_uint(optarg, 0, 1000, &v)) {
				fprintf(stderr, "rk copy: --retries must be 0..1000\n");
				return RK_EXIT_USAGE;
			}
			ro.retries = (unsigned)v;
			ro.retry_first = 1;
			break;
		case 'w':
			if (cli_duration_opt("copy", synopsis, "--retry-window", optarg, 1000,
					     86400000, 1000, &v))
				return RK_EXIT_USAGE;
			ro.window_s = (unsigned)(v / 1000);
			break;
		case 'P':
			progress = 1;
			break;
		case 'j':
			json_path = cli_json_path(optarg);
			json = cli_json_to_stdout(json_path);
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return RK_EXIT_OK;
		default:
			return cli_option_error("copy", synopsis, argv, "rfqhd:", opts);
		}
	}
	/*
	 * 8 chunks in flight per connection by default: a lane that has only
	 * 4 runs dry while the others' RESULTS come back (measured with two
	 * lanes: 1.14x the rate of 8 shared). Fewer where locked memory is
	 * short (cp_default_depth).
	 */
	if (!so.depth)
		so.depth = cp_default_depth(so.lanes, so.chunk);
	if (argc - optind < 2)
		return cli_usage_error(
		    "copy", synopsis,
		    "need SRC... and HOST[:PORT]:DEST (or HOST[:PORT]:SRC... and DEST)");
	so.progress_mode = quiet || json	   ? CP_PROGRESS_OFF
			   : isatty(STDERR_FILENO) ? CP_PROGRESS_TTY
			   : progress		   ? CP_PROGRESS_LINES
						   : CP_PROGRESS_OFF;
	snprintf(port, sizeof(port), "%s", CP_DEFAULT_PORT);
	if (parse_target(argv[argc - 1], host, sizeof(host), port, sizeof(port), &dest) &&
	    !parse_target(argv[optind], host, sizeof(host), port, sizeof(port), &dest)) {
		for (int i = optind; i < argc - 1; i++)
			user_note(argv[i], quiet || json);
		return pull(argc - optind, argv + optind, &so, &ro, recursive, (int)timeout_ms,
			    token_file, quiet, json_path);
	}
	if (parse_target(argv[argc - 1], host, sizeof(host), port, sizeof(port), &dest)) {
		fprintf(stderr, "rk copy: neither '%s' nor '%s' is HOST[:PORT]:PATH\n",
			argv[optind], argv[argc - 1]);
		return RK_EXIT_USAGE;
	}
	user_note(argv[argc - 1], quiet || json);
	so.host = host;
	so.port = port;
	so.idle_ms = (int)timeout_ms;
	if (token_file) {
		if (cp_token_load(token_file, token, why, sizeof(why))) {
			fprintf(stderr, "rk copy: token: %s\n", why);
			return RK_EXIT_USAGE;
		}
		so.token = token;
	}
	rc = cp_plan_build(&plan, argv + optind, argc - optind - 1, dest, recursive, why,
			   sizeof(why));
	if (rc) {
		fprintf(stderr, "rk copy: %s\n", why);
		cp_plan_free(&plan);
		return rc == -2 ? RK_EXIT_USAGE : RK_EXIT_FAILURE;
	}
	cp_progress_init(&prog, plan.bytes, (uint32_t)plan.files, so.progress_mode);
	so.progress = &prog;
	t0 = cli_now_ns();
	ro.verbose = !quiet;
	rc = cp_copy(&so, &ro, &plan, &rs, why, sizeof(why));
	secs = (double)(cli_now_ns() - t0) / 1e9;
	cp_progress_end(&prog);
	if (rc)
		fprintf(stderr, "rk copy: %s\n", why);
	started = 0;
	for (size_t i = 0; i < plan.n && !started; i++)
		started = plan.items[i].state != CP_ITEM_PENDING;
	tally_plan(&plan, &t, started);
	if (!rc && (t.failed || t.unsent))
		rc = RK_EXIT_FAILURE;
	else if (!rc && t.refused)
		rc = RK_EXIT_REFUSED;
	if (json_path)
		print_json(json_path, &plan, &t, secs, rc, rc ? why : NULL, &rs);
	if (!json && !quiet && (started || !rc)) {
		char bytes[32], rate[32];

		char again[64] = "";

		if (rs.reconnects)
			snprintf(again, sizeof(again), ", %u reconnect%s", rs.reconnects,
				 rs.reconnects == 1 ? "" : "s");
		printf("rk copy: %zu of %zu files copied%s (%s) in %.2f s, %s%s, verified "
		       "xxh3-128%s\n",
		       t.ok + t.uptodate, plan.files, t.uptodate ? " or up to date" : "",
		       cli_fmt_bytes(t.bytes, bytes, sizeof(bytes)), secs,
		       cli_fmt_rate(secs > 0 ? (double)t.bytes / secs : 0, rate, sizeof(rate)),
		       again, rc && rc != RK_EXIT_REFUSED ? "; FAILED" : "");
	}
	if (!json && !quiet)
		refusal_summary(&t);
	cp_plan_free(&plan);
	return rc;
}
