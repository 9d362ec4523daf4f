/*
 * cmd_matrix.c - rk matrix: rk bench between every pair of ranks of a job
 * that srun or mpirun started (see matrix.h for the parts).
 *
 * Every rank runs the same command line. Rank 0 also runs the rendezvous
 * (in a second thread) and, at the end, writes the report. Exit status:
 * 0 every scheduled pair was measured (flagged pairs are in the report),
 * 1 a pair or a rank failed, or the matrix could not run; 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include <rdmakit/version.h>

#include "bench/bench.h"
#include "cli.h"
#include "commands.h"
#include "matrix_auth.h"
#include "matrix_coord.h"
#include "matrix_report.h"

#define PAIRS_FILE_MAX (16u << 20)

enum {
	OPT_SIZE = 256,
	OPT_DURATION,
	OPT_LAT_DURATION,
	OPT_BW_FRAC,
	OPT_LAT_MULT,
	OPT_INTRA,
	OPT_QUICK,
	OPT_PAIRS,
	OPT_NO_RETEST,
	OPT_PORT,
	OPT_RDV,
	OPT_ADDR,
	OPT_DEV,
	OPT_WATCHDOG,
	OPT_WAIT,
	OPT_JSON,
	OPT_PLOT,
	OPT_POLL,
	OPT_TOKEN_FILE,
	OPT_NO_AUTH,
	OPT_MUNGE_SOCKET,
	OPT_LISTEN_ANY,
};

static const struct option long_opts[] = {
    {"size", required_argument, NULL, OPT_SIZE},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"lat-duration", required_argument, NULL, OPT_LAT_DURATION},
    {"bw-frac", required_argument, NULL, OPT_BW_FRAC},
    {"lat-mult", required_argument, NULL, OPT_LAT_MULT},
    {"intra", no_argument, NULL, OPT_INTRA},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"pairs", required_argument, NULL, OPT_PAIRS},
    {"no-retest", no_argument, NULL, OPT_NO_RETEST},
    {"port", required_argument, NULL, OPT_PORT},
    {"rendezvous", required_argument, NULL, OPT_RDV},
    {"addr", required_argument, NULL, OPT_ADDR},
    {"dev", required_argument, NULL, OPT_DEV},
    {"watchdog", required_argument, NULL, OPT_WATCHDOG},
    {"wait", required_argument, NULL, OPT_WAIT},
    {"json", optional_argument, NULL, OPT_JSON},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"poll", required_argument, NULL, OPT_POLL},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"no-auth", no_argument, NULL, OPT_NO_AUTH},
    {"munge-socket", required_argument, NULL, OPT_MUNGE_SOCKET},
    {"listen-any", no_argument, NULL, OPT_LISTEN_ANY},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char synopsis[] = "usage: srun [-N HOSTS --ntasks-per-node K] rk matrix [OPTIONS]\n"
			       "       mpirun -np N [--host ...] rk matrix [OPTIONS]\n";

static void usage(FILE *out)
{
	fputs(synopsis, out);
	fprintf(
	    out,
	    "\n"
	    "rk bench between every pair of ranks, in rounds of disjoint pairs (n - 1 rounds\n"
	    "of n / 2 pairs), every rank started by the launcher with the same options.\n"
	    "Rank 0 is the rendezvous and writes the report.\n"
	    "\n"
	    "what each pair measures (every rank must give the same; others are refused):\n"
	    "  --size SIZE          WRITE bandwidth message size (default 1M), each direction\n"
	    "  --duration DURATION  per bandwidth direction (default 2s; whole seconds, a\n"
	    "                       bare number is seconds)\n"
	    "  --lat-duration DURATION  of 64 B WRITE latency (default 1s)\n"
	    "  --poll MODE          busy (default) | event | adaptive: how completions are\n"
	    "                       awaited; not busy, the latency run is WRITE WITH IMMEDIATE\n"
	    "                       (a receive completion to wait for); event where a host\n"
	    "                       has more ranks than free cores (spinners starve others)\n"
	    "  --bw-frac F          flag below F x the median bandwidth (default 0.9)\n"
	    "  --lat-mult M         flag above M x the least median latency (default 2.0)\n"
	    "  --no-retest          do not retest flagged pairs alone\n"
	    "  --intra              also pairs of ranks on the same host (skipped otherwise)\n"
	    "  --quick              one round only (n / 2 links)\n"
	    "  --pairs FILE         only these pairs: \"A B\" rank numbers a line, '#' comments\n"
	    "  --port PORT          a pair's server listens on PORT + 3 x rank + 0..2\n"
	    "                       (default %u; TCP and rdma_cm)\n"
	    "  --watchdog DURATION  a session with no progress this long fails (default 10s)\n"
	    "  --wait DURATION      how long rank 0 waits for every rank to join (default 60s)\n"
	    "\n"
	    "this rank:\n"
	    "  --rendezvous HOST[:PORT]  where rank 0 listens (default: RK_MATRIX_ADDR, or\n"
	    "                       the first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST;\n"
	    "                       rk-matrix-mpi: rank 0's host name; port %s)\n"
	    "  --addr ADDR          this rank's RDMA address (default: the local address of\n"
	    "                       its connection to rank 0)\n"
	    "  -d, --dev NAME       the RDMA device (default: the one that routes to the peer)\n"
	    "  --listen-any         rank 0: the rendezvous on every address (default: only\n"
	    "                       the rendezvous address, unless that is a loopback\n"
	    "                       address rank 0's host name resolves to)\n"
	    "  --json[=FILE]        rank 0: every rank and pair as one JSON document on\n"
	    "                       stdout (the text report then goes to stderr), or into\n"
	    "                       FILE ('--json FILE': one more release, with a warning)\n"
	    "  --plot FILE          rank 0: the bandwidth heatmap as PNG (gnuplot)\n"
	    "\n"
	    "who may join (rank 0 refuses and logs any other hello; every rank the same):\n"
	    "  under srun           a MUNGE credential (Slurm's own) binding the job, step,\n"
	    "                       rank and parameters; rank 0 takes only its own uid, job\n"
	    "                       and step (needs rk built with libmunge)\n"
	    "  --token-file FILE    a job secret of 16 to 256 bytes, the same on every rank,\n"
	    "                       the file readable by its owner only (chmod 600); it goes\n"
	    "                       to rank 0 in clear: it keeps out whoever reaches the port,\n"
	    "                       not whoever reads the traffic\n"
	    "  --munge-socket PATH  munged's socket, when not the default\n"
	    "  --no-auth            anyone who reaches rank 0's port may join (said loudly)\n"
	    "with none of these, rk matrix refuses to start. Each pair's legs carry fresh\n"
	    "keys from rank 0: a side that cannot prove it is the pair's other rank is\n"
	    "not measured, and a pair counts only when both of its ranks report the same.\n"
	    "\n"
	    "rank and size come from SLURM_PROCID / SLURM_NTASKS, OMPI_COMM_WORLD_RANK / _SIZE\n"
	    "or PMI_RANK / _SIZE (rk-matrix-mpi, built with cmake -DRK_MPI=ON: from MPI).\n"
	    "exit status: 0 every pair measured (flags are in the report), 1 a pair or rank\n"
	    "failed, 2 usage\n",
	    MATRIX_DEF_PORT, MATRIX_DEF_RDV_PORT);
}

static int bad(const char *opt, const char *arg, const char *why)
{
	fprintf(stderr, "rk matrix: %s %s: %s\n", opt, arg, why);
	return -1;
}

static int parse_u32(const char *opt, const char *arg, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (cli_parse_uint(arg, min, max, &v)) {
		char why[64];

		snprintf(why, sizeof(why), "expected %u to %u", min, max);
		return bad(opt, arg, why);
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_frac(const char *opt, const char *arg, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= min && v <= max)) {
		char why[64];

		snprintf(why, sizeof(why), "expected a number from %g to %g", min, max);
		return bad(opt, arg, why);
	}
	*out = v;
	return 0;
}

/* A duration in whole seconds, @min..@max (cli_duration_opt says what is wrong). */
static int parse_secs(const char *opt, const char *arg, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t ms;

	if (cli_duration_opt("matrix", synopsis, opt, arg, min * 1000ull, max * 1000ull, 1000, &ms))
		return -1;
	*out = (uint32_t)(ms / 1000);
	return 0;
}

static int apply(int c, const char *arg, struct mx_opts *o)
{
	uint64_t size;

	switch (c) {
	case OPT_SIZE:
		if (cli_parse_size(arg, &size) || size < 1 || size > BENCH_MAX_SIZE)
			return bad("--size", arg, "expected 1 B to 8M");
		o->size = (uint32_t)size;
		return 0;
	case OPT_DURATION:
		return parse_secs("--duration", arg, 1, 3600, &o->duration_s);
	case OPT_LAT_DURATION:
		return parse_secs("--lat-duration", arg, 1, 3600, &o->lat_duration_s);
	case OPT_BW_FRAC:
		return parse_frac("--bw-frac", arg, 0, 1, &o->bw_frac);
	case OPT_LAT_MULT:
		return parse_frac("--lat-mult", arg, 1, 1000, &o->lat_mult);
	case OPT_INTRA:
		o->intra = 1;
		return 0;
	case OPT_QUICK:
		o->quick = 1;
		return 0;
	case OPT_PAIRS:
		o->pairs_path = arg;
		return 0;
	case OPT_NO_RETEST:
		o->retest = 0;
		return 0;
	case OPT_PORT:
		return parse_u32("--port", arg, 1, 65535, &o->port_base);
	case OPT_RDV:
		o->rdv = arg;
		return 0;
	case OPT_ADDR:
		o->addr = arg;
		return 0;
	case OPT_DEV:
		o->dev = arg;
		return 0;
	case OPT_WATCHDOG:
		return parse_secs("--watchdog", arg, 1, 3600, &o->watchdog_s);
	case OPT_WAIT:
		return parse_secs("--wait", arg, 1, 86400, &o->wait_s);
	case OPT_JSON:
		o->json_path = arg;
		return 0;
	case OPT_PLOT:
		o->plot_path = arg;
		return 0;
	case OPT_TOKEN_FILE:
		o->token_path = arg;
		return 0;
	case OPT_NO_AUTH:
		o->no_auth = 1;
		return 0;
	case OPT_MUNGE_SOCKET:
		o->munge_socket = arg;
		return 0;
	case OPT_LISTEN_ANY:
		o->listen_any = 1;
		return 0;
	case OPT_POLL:
		for (int m = RK_WAIT_BUSY; m <= RK_WAIT_ADAPTIVE; m++) {
			if (!strcmp(arg, bench_poll_name((enum rk_wait_mode)m))) {
				o->poll = (enum rk_wait_mode)m;
				return 0;
			}
		}
		return bad("--poll", arg, "expected busy, event or adaptive");
	}
	return -1;
}

static int parse(int argc, char **argv, struct mx_opts *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->size = 1u << 20;
	o->duration_s = 2;
	o->lat_duration_s = 1;
	o->bw_frac = 0.9;
	o->lat_mult = 2.0;
	o->retest = 1;
	o->port_base = MATRIX_DEF_PORT;
	o->watchdog_s = 10;
	o->wait_s = 60;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hd:", long_opts, NULL)) != -1) {
		if (c == 'd')
			c = OPT_DEV;
		if (c == OPT_JSON) { /* --json[=FILE]; "--json FILE" one more release */
			o->json_path = cli_json_legacy_file("matrix", argc, argv, optarg);
			continue;
		}
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c == '?' || c == ':') {
			cli_option_error("matrix", synopsis, argv, "hd:", long_opts);
			return -1;
		}
		if (apply(c, optarg, o))
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "rk matrix: no arguments expected, got '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

/* The whole --pairs file: rank 0 parses it, every rank hashes it (they must agree). */
static int read_pairs(struct mx_opts *o)
{
	struct stat st;
	size_t have = 0;
	int fd;

	if (!o->pairs_path)
		return 0;
	fd = open(o->pairs_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "rk matrix: --pairs %s: %s\n", o->pairs_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)PAIRS_FILE_MAX) {
		fprintf(stderr, "rk matrix: --pairs %s: not a regular file of at most 16 MiB\n",
			o->pairs_path);
		close(fd);
		return -1;
	}
	o->pairs_text = malloc((size_t)st.st_size + 1);
	while (o->pairs_text && have < (size_t)st.st_size) {
		ssize_t n = read(fd, o->pairs_text + have, (size_t)st.st_size - have);

		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	if (!o->pairs_text || have != (size_t)st.st_size) {
		fprintf(stderr, "rk matrix: --pairs %s: cannot read it\n", o->pairs_path);
		return -1;
	}
	o->pairs_text[have] = 0;
	if (strlen(o->pairs_text) != have) {
		fprintf(stderr, "rk matrix: --pairs %s: a NUL byte in the text\n", o->pairs_path);
		return -1;
	}
	o->pairs_hash = XXH3_64bits(o->pairs_text, have);
	return 0;
}

static json_object *params_json(const struct mx_opts *o)
{
	json_object *p = json_object_new_object();
	char hash[32];

	snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)o->pairs_hash);
	json_object_object_add(p, "version", json_object_new_string(rk_version()));
	json_object_object_add(p, "size", json_object_new_int64(o->size));
	json_object_object_add(p, "duration", json_object_new_int64(o->duration_s));
	json_object_object_add(p, "lat-duration", json_object_new_int64(o->lat_duration_s));
	json_object_object_add(p, "bw-frac", json_object_new_double(o->bw_frac));
	json_object_object_add(p, "lat-mult", json_object_new_double(o->lat_mult));
	json_object_object_add(p, "intra", json_object_new_boolean(o->intra));
	json_object_object_add(p, "quick", json_object_new_boolean(o->quick));
	json_object_object_add(p, "retest", json_object_new_boolean(o->retest));
	json_object_object_add(p, "pairs", json_object_new_string(o->pairs_text ? hash : "all"));
	json_object_object_add(p, "port", json_object_new_int64(o->port_base));
	json_object_object_add(p, "watchdog", json_object_new_int64(o->watchdog_s));
	json_object_object_add(p, "poll", json_object_new_string(bench_poll_name(o->poll)));
	return p;
}

/* Rank 0's report, after the matrix. */
/* --json without FILE: the real stdout, kept for the JSON alone; stdout is stderr meanwhile. */
static int json_fd = -1;

static int report(struct mx_coord *c, const struct mx_opts *o)
{
	struct rk_error err;
	int bad = 0;

	rk_error_clear(&err);
	if (c->rc) {
		cli_report(MATRIX_PROG, "rendezvous", &c->err);
		return RK_EXIT_FAILURE;
	}
	mx_report_text(&c->m, o); /* on stderr when the JSON takes stdout (json_fd) */
	if (json_fd >= 0 && (fflush(stdout) || dup2(json_fd, STDOUT_FILENO) < 0)) {
		mx_fail(&err, errno, "--json: stdout: %s", strerror(errno));
		cli_report(MATRIX_PROG, "json", &err);
		return RK_EXIT_FAILURE;
	}
	if (o->json_path && mx_report_json(&c->m, o, o->json_path, &err)) {
		cli_report(MATRIX_PROG, "json", &err);
		bad = 1;
	}
	if (o->plot_path && mx_report_plot(&c->m, o->plot_path, &err)) {
		cli_report(MATRIX_PROG, "plot", &err);
		bad = 1;
	}
	for (uint32_t i = 0; i < c->m.n; i++)
		bad |= c->m.ranks[i].why != NULL;
	return bad || mx_report_failures(&c->m) ? RK_EXIT_FAILURE : RK_EXIT_OK;
}

/*
 * This process's rank as its launcher says (Slurm, Open MPI, PMI, in
 * matrix_launch.c's order), 0 when none does: before the options are read,
 * only to keep the other ranks from repeating rank 0's warnings.
 */
static long launcher_rank(void)
{
	static const char *const vars[] = {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
					   "PMIX_RANK"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);

		if (v && *v)
			return strtol(v, NULL, 10);
	}
	return 0;
}

int rk_cmd_matrix(int argc, char **argv)
{
	char rdv_host[256], rdv_port[16] = MATRIX_DEF_RDV_PORT, why[400];
	struct mx_launch la;
	struct mx_opts o;
	struct mx_coord coord;
	struct mx_auth auth;
	struct rk_error err;
	json_object *params = NULL;
	pthread_t th;
	int started = 0, r, rc = RK_EXIT_FAILURE;

	memset(&auth, 0, sizeof(auth));
	/* Every rank parses the same line: only rank 0 warns of old spellings. */
	if (launcher_rank() != 0)
		cli_deprecated_quiet();
	r = parse(argc, argv, &o);
	if (r)
		return r > 0 ? RK_EXIT_OK : RK_EXIT_USAGE;
	if (read_pairs(&o)) {
		free(o.pairs_text);
		return RK_EXIT_USAGE;
	}
	if (cli_json_to_stdout(o.json_path)) {
		fflush(stdout);
		json_fd = dup(STDOUT_FILENO);
		if (json_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
			fprintf(stderr, "rk matrix: --json: stdout: %s\n", strerror(errno));
			free(o.pairs_text);
			return RK_EXIT_FAILURE;
		}
	}
	if (mx_launch_start(&la, &argc, &argv, o.rdv, why, sizeof(why))) {
		fprintf(stderr, "rk matrix: %s\n", why);
		goto out;
	}
	if (cli_split_host_port(la.rdv_host, rdv_host, sizeof(rdv_host), rdv_port,
				sizeof(rdv_port))) {
		fprintf(stderr, "rk matrix: rendezvous '%s': expected HOST or HOST:PORT\n",
			la.rdv_host);
		goto out;
	}
	snprintf(la.rdv_host, sizeof(la.rdv_host), "%s", rdv_host);
	if (o.port_base + 3ull * la.size > 65535) {
		fprintf(stderr, "rk matrix: --port %u: %u ranks need ports up to %llu\n",
			o.port_base, la.size, o.port_base + 3ull * la.size);
		goto out;
	}
	if (mx_auth_setup(&auth, &o, &la, why, sizeof(why))) {
		fprintf(stderr, "rk matrix: %s\n", why);
		goto out;
	}
	if (auth.kind == MX_AUTH_NONE)
		fprintf(stderr,
			"rk matrix: WARNING: --no-auth: rank %u asks no proof of anyone; whoever "
			"reaches rank 0's port %s can take a rank and forge results\n",
			la.rank, rdv_port);
	/*
	 * Without gnuplot the plot would fail only after the whole run. Rank 0
	 * refusing to start would leave every other rank waiting for it: the
	 * run goes on, without the plot, and says so now.
	 */
	if (la.rank == 0 && o.plot_path && !cli_have_program("gnuplot")) {
		fprintf(stderr, "rk matrix: --plot: gnuplot is not installed on this host (Debian: "
				"apt-get install gnuplot-nox); the run goes on without the plot\n");
		o.plot_path = NULL;
	}
	params = params_json(&o);
	rk_error_clear(&err);
	memset(&coord, 0, sizeof(coord));
	coord.lfd = -1;
	if (la.rank == 0) {
		r = mx_coord_init(&coord, &o, &auth, la.size, la.source,
				  o.listen_any ? NULL : la.rdv_host, rdv_port, params, &err);
		if (!r) {
			r = -pthread_create(&th, NULL, mx_coord_run, &coord);
			if (r)
				mx_fail(&err, -r, "pthread_create: %s", strerror(-r));
		}
		if (r) {
			cli_report(MATRIX_PROG, "rendezvous", &err);
			goto out_coord;
		}
		started = 1;
	}
	r = mx_worker_run(&o, &auth, &la, rdv_port, params, &err);
	if (r)
		cli_report(MATRIX_PROG, la.rank ? "rank" : "rank 0", &err);
	if (started) {
		pthread_join(th, NULL);
		rc = report(&coord, &o);
	} else {
		rc = r ? RK_EXIT_FAILURE : RK_EXIT_OK;
	}
out_coord:
	if (la.rank == 0)
		mx_coord_free(&coord);
out:
	mx_auth_clear(&auth);
	json_object_put(params);
	mx_launch_end(&la);
	free(o.pairs_text);
	if (json_fd >= 0) {
		close(json_fd);
		json_fd = -1;
	}
	return rc;
}
