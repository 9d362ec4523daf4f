/* ex_common.c - see ex_common.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <getopt.h>
#include <poll.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "ex_common.h"

const char *ex_prog = "example";

void ex_set_prog(const char *argv0)
{
	const char *slash = strrchr(argv0, '/');

	ex_prog = slash ? slash + 1 : argv0;
}

void ex_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", ex_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void ex_die_errno(const char *what)
{
	ex_die("%s: %s", what, strerror(errno));
}

void ex_bad_usage(const char *what)
{
	fprintf(stderr, "%s: %s (try --help)\n", ex_prog, what);
	exit(2);
}

long ex_opt_num(const char *s, long min, long max, const char *what)
{
	long v;

	if (ex_parse_int(s, min, max, &v))
		ex_bad_usage(what);
	return v;
}

int ex_role_option(int opt, const char *arg, const char **port, int *timeout_ms,
		   void (*usage)(FILE *f))
{
	switch (opt) {
	case 'p':
		ex_opt_num(arg, 1, 65535, "--port must be 1..65535");
		*port = arg;
		return 1;
	case 't':
		*timeout_ms =
		    1000 * (int)ex_opt_num(arg, 1, 3600, "--timeout must be 1..3600 seconds");
		return 1;
	case 'h':
		usage(stdout);
		exit(0);
	case '?':
		ex_bad_usage("unknown option");
	default:
		return 0;
	}
}

void ex_report_reg_mr_failure(size_t len)
{
	int err = errno;
	struct rlimit rl;
	char cur[32] = "unknown";

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			snprintf(cur, sizeof(cur), "unlimited");
		else
			snprintf(cur, sizeof(cur), "%llu KiB",
				 (unsigned long long)rl.rlim_cur / 1024);
	}
	fprintf(stderr, "%s: ibv_reg_mr(%zu bytes): %s\n", ex_prog, len, strerror(err));
	if (err == ENOMEM || err == EPERM)
		fprintf(stderr,
			"%s: registration pins memory, limited by RLIMIT_MEMLOCK (now %s), not by "
			"RAM.\n"
			"%s: raise it: 'ulimit -l unlimited' in this shell, 'memlock' in\n"
			"%s: /etc/security/limits.conf for good, '--ulimit memlock=-1' for a "
			"container.\n",
			ex_prog, cur, ex_prog, ex_prog);
}

static const char *wc_hint(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_REM_ACCESS_ERR:
		return "the peer refused the access: wrong rkey, an address outside its MR, or the "
		       "MR lacks REMOTE_WRITE/REMOTE_READ";
	case IBV_WC_RETRY_EXC_ERR:
		return "no ACK from the peer: it is gone, the path is broken, or the ACK timeout "
		       "is too short for this link";
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return "the receiver had no receive posted (receiver not ready)";
	case IBV_WC_WR_FLUSH_ERR:
		return "the QP was already in error; look at the first failed completion";
	case IBV_WC_LOC_PROT_ERR:
		return "local protection: wrong lkey, or the MR belongs to another PD";
	case IBV_WC_LOC_LEN_ERR:
		return "the message is longer than the posted receive buffer";
	case IBV_WC_REM_INV_REQ_ERR:
		return "the peer found the request invalid: length, opcode or QP capabilities";
	default:
		return NULL;
	}
}

void ex_report_wc(const char *what, const struct ibv_wc *wc)
{
	const char *hint = wc_hint(wc->status);

	fprintf(stderr,
		"%s: %s: completion failed: %s (status %d, vendor_err 0x%x, opcode %d, qp 0x%x)\n",
		ex_prog, what, ibv_wc_status_str(wc->status), wc->status, wc->vendor_err,
		wc->opcode, wc->qp_num);
	if (hint)
		fprintf(stderr, "%s: hint: %s\n", ex_prog, hint);
}

long long ex_parse_size(const char *s)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end || v > (unsigned long long)(INT64_MAX >> shift))
		return -1;
	return (long long)(v << shift);
}

int ex_parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

uint64_t ex_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double ex_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct addrinfo *ex_resolve(const char *addr, const char *port, int passive)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
	struct addrinfo *ai;
	int r = getaddrinfo(addr, port, &hints, &ai);

	if (r)
		ex_die("%s: %s", addr, gai_strerror(r));
	return ai;
}

int ex_wait_fd(int fd, int timeout_ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int n = poll(&pfd, 1, timeout_ms);

	if (n < 0)
		ex_die_errno("poll");
	return n > 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t ex_percentile(uint64_t *v, size_t n, unsigned pct)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[(unsigned long long)n * pct / 100];
}

void ex_server_ready(int ready_fd)
{
	fflush(stdout);
	if (ready_fd >= 0 && (write(ready_fd, "", 1) != 1 || close(ready_fd)))
		ex_die_errno("ready pipe");
}

void ex_run_pair(void (*server)(void *arg, int ready_fd), void (*client)(void *arg), void *arg)
{
	int fds[2], status;
	pid_t pid;
	char c;

	if (pipe(fds))
		ex_die_errno("pipe");
	fflush(stdout); /* or the child inherits and prints our buffered output */
	pid = fork();
	if (pid < 0)
		ex_die_errno("fork");
	if (pid == 0) {
		close(fds[0]);
		server(arg, fds[1]);
		exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		ex_die("the server did not start");
	close(fds[0]);
	client(arg);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		ex_die("the server failed");
}

void ex_pair_usage(FILE *f, const char *what, const char *port, const char *fmt, ...)
{
	va_list ap;

	fprintf(f,
		"usage: %s [--server|--client] [options] ADDR\n"
		"%s"
		"Without --server/--client both run, the server in a child process.\n"
		"  -s, --server      listen on ADDR\n"
		"  -c, --client      connect to a server at ADDR\n"
		"  -p, --port PORT   rdma_cm port (default %s)\n",
		ex_prog, what, port);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fprintf(f, "  -h, --help        this text\n");
}

int ex_pair_option(struct ex_pair *p, int opt, const char *arg, void (*usage)(FILE *f))
{
	long v;

	switch (opt) {
	case 's':
		p->server = 1;
		return 1;
	case 'c':
		p->client = 1;
		return 1;
	case 'p':
		if (ex_parse_int(arg, 1, 65535, &v))
			ex_die("--port: '%s' is not a port number", arg);
		p->port = arg;
		return 1;
	case 'h':
		usage(stdout);
		exit(0);
	case '?':
	case ':':
		usage(stderr);
		exit(2);
	default:
		return 0;
	}
}

void ex_pair_run(struct ex_pair *p, int argc, char **argv, void (*usage)(FILE *f),
		 void (*server)(void *arg, int ready_fd), void (*client)(void *arg), void *arg)
{
	if (optind != argc - 1 || (p->server && p->client)) {
		usage(stderr);
		exit(2);
	}
	p->addr = argv[optind];
	if (p->server)
		server(arg, -1);
	else if (p->client)
		client(arg);
	else
		ex_run_pair(server, client, arg);
}
