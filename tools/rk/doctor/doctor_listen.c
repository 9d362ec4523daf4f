/*
 * doctor_listen.c - rk doctor --listen: the other end of rk doctor HOST.
 *
 * Anyone who can reach the port can connect, so nothing is told or held
 * for a connection before it proves to be an rk doctor client (with the
 * token, when the listener has one; doctor_gate.h). Until then it is one
 * of at most DOC_PENDING_MAX pending connections, all served by one poll
 * loop over non-blocking sockets, each with DOC_HELLO_MS to send its hello
 * of at most DOC_HELLO_MAX bytes: a silent or slow stranger costs a slot
 * for two seconds and blocks nobody, and past the bound the oldest goes.
 *
 * An admitted client's test (facts and link test, doctor_session.c) runs
 * in a child process, so the loop goes on meanwhile; one test at a time
 * (the link test holds an rdma_cm listener and the device), and a client
 * admitted while one runs is told "busy" at once rather than left waiting.
 * A child that outlives DOC_SESSION_MS is killed.
 *
 * Refusals are logged, at most LOG_PER_S a second (a flood of strangers
 * does not flood the log; the rest are counted).
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdmakit/oob.h>

#include "cli.h"
#include "common/deadline.h"
#include "doctor_gate.h"
#include "doctor_peer.h"

#define LOG_PER_S    20
#define PAUSE_MS     100 /* no accept for a while when out of descriptors */
#define ACCEPT_ROUND DOC_PENDING_MAX
#define DRAIN_MAX    65536

struct pending {
	int fd; /* -1: free slot */
	uint64_t since, deadline;
	size_t got;
	char ip[INET6_ADDRSTRLEN], local[INET6_ADDRSTRLEN];
	uint8_t buf[DOC_WIRE_HDR + DOC_HELLO_MAX];
};

struct listener {
	int lfd, max_step_ms, once;
	const uint8_t *token;
	struct pending p[DOC_PENDING_MAX];
	/* the running test: its child, the pipe that closes when it ends, its bound */
	pid_t pid;
	int done_fd;
	uint64_t started, kill_at;
	char run_ip[INET6_ADDRSTRLEN];
	int tests; /* tests ended */
	uint64_t paused_until;
	/* the refusal log's rate */
	uint64_t log_second;
	unsigned logged, unlogged;
};

static uint64_t ms_ns(uint64_t ms)
{
	return ms * 1000000;
}

__attribute__((format(printf, 3, 4))) static void log_refusal(struct listener *L, const char *ip,
							      const char *fmt, ...)
{
	uint64_t second = cli_now_ns() / 1000000000;
	char text[320];
	va_list ap;

	if (second != L->log_second) {
		if (L->unlogged)
			fprintf(stderr,
				"rk doctor: %u more refusals not shown (at most %d a second)\n",
				L->unlogged, LOG_PER_S);
		L->log_second = second;
		L->logged = L->unlogged = 0;
	}
	if (L->logged >= LOG_PER_S) {
		L->unlogged++;
		return;
	}
	L->logged++;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rk doctor: %s: refused: %s\n", ip, text);
}

/* An ERROR frame, if the socket takes it now: never a wait for a stranger. */
static void tell(int fd, const char *text)
{
	uint8_t buf[DOC_WIRE_HDR + 512];
	struct doc_msg m = {.type = DOC_MSG_ERROR};
	int n;

	snprintf(m.text, sizeof(m.text), "%s", text);
	n = doc_msg_encode(&m, buf, sizeof(buf));
	if (n > 0 && send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return; /* it gets the close alone */
}

/*
 * Close after reading what already arrived (bounded): unread bytes would
 * make the close a reset, which can destroy the ERROR just sent.
 */
static void drain_close(int fd)
{
	uint8_t junk[4096];
	size_t total = 0;

	while (total < DRAIN_MAX) {
		ssize_t n = recv(fd, junk, sizeof(junk), MSG_DONTWAIT);

		if (n <= 0)
			break;
		total += (size_t)n;
	}
	close(fd);
}

static void drop(struct pending *p)
{
	drain_close(p->fd);
	p->fd = -1;
}

/* Refuse @p: logged; an ERROR too if it speaks rk doctor's frames (strangers get silence). */
static void refuse(struct listener *L, struct pending *p, const char *why)
{
	log_refusal(L, p->ip, "%s", why);
	if (p->got && doc_hello_from_rk(p->buf, p->got))
		tell(p->fd, why);
	drop(p);
}

static void close_all(struct listener *L, int keep)
{
	for (int i = 0; i < DOC_PENDING_MAX; i++)
		if (L->p[i].fd >= 0 && L->p[i].fd != keep) {
			close(L->p[i].fd);
			L->p[i].fd = -1;
		}
}

/* The admitted client on @p: its test in a child process. */
static void start_test(struct listener *L, struct pending *p, int checked)
{
	uint64_t now = cli_now_ns();
	pid_t parent = getpid(), pid;
	int pfd[2];

	if (pipe2(pfd, O_CLOEXEC)) {
		log_refusal(L, p->ip, "cannot start its test: %s", strerror(errno));
		tell(p->fd, "cannot start the test there (out of resources): try again later");
		drop(p);
		return;
	}
	pid = fork();
	if (pid < 0) {
		log_refusal(L, p->ip, "cannot start its test: %s", strerror(errno));
		tell(p->fd, "cannot start the test there (out of resources): try again later");
		close(pfd[0]);
		close(pfd[1]);
		drop(p);
		return;
	}
	if (pid == 0) {
		/* the child: nothing of the listener but this client; gone with the listener */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(1);
		close(pfd[0]);
		close(L->lfd);
		if (L->done_fd >= 0)
			close(L->done_fd);
		close_all(L, p->fd);
		doc_session(p->fd, p->local, p->ip, checked, L->max_step_ms);
		_exit(0);
	}
	close(pfd[1]);
	fprintf(stderr, "rk doctor: %s: rk doctor client%s, its test begins\n", p->ip,
		checked ? " with the token" : "");
	L->pid = pid;
	L->done_fd = pfd[0];
	L->started = now;
	L->kill_at = now + ms_ns(DOC_SESSION_MS(L->max_step_ms));
	snprintf(L->run_ip, sizeof(L->run_ip), "%s", p->ip);
	close(p->fd);
	p->fd = -1;
}

/* The test's child has ended (its pipe closed): reaped and logged. */
static void test_ended(struct listener *L)
{
	int st = 0;

	while (waitpid(L->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(st))
		fprintf(stderr, "rk doctor: %s: its test ended by signal %d after %llu ms\n",
			L->run_ip, WTERMSIG(st),
			(unsigned long long)((cli_now_ns() - L->started) / 1000000));
	close(L->done_fd);
	L->done_fd = -1;
	L->pid = 0;
	L->tests++;
}

/* A whole hello on @p: admitted to a test, told busy, or refused. */
static void judge(struct listener *L, struct pending *p)
{
	char why[256];
	int checked = 0;

	if (doc_hello_judge(p->buf, p->got, L->token, &checked, why, sizeof(why))) {
		refuse(L, p, why);
		return;
	}
	if (L->pid) {
		uint64_t now = cli_now_ns();
		uint64_t bound = L->started + ms_ns(DOC_SESSION_MS(L->max_step_ms));
		unsigned left = bound > now ? (unsigned)((bound - now) / 1000000000) + 1 : 1;

		log_refusal(L, p->ip, "busy with another test");
		snprintf(why, sizeof(why),
			 "busy with another peer's test (for %u s at most): try again then", left);
		tell(p->fd, why);
		drop(p);
		return;
	}
	start_test(L, p, checked);
}

/* Bytes for @p's hello, never past its frame. */
static void read_hello(struct listener *L, struct pending *p)
{
	char why[256];

	for (;;) {
		int need = doc_hello_need(p->buf, p->got, why, sizeof(why));
		ssize_t n;

		if (need < 0) {
			refuse(L, p, why);
			return;
		}
		if ((size_t)need == p->got) {
			judge(L, p);
			return;
		}
		n = recv(p->fd, p->buf + p->got, (size_t)need - p->got, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (n <= 0) {
			log_refusal(L, p->ip, "%s after %zu bytes, before its hello",
				    n == 0 ? "closed" : strerror(errno), p->got);
			drop(p);
			return;
		}
		p->got +=
		    (size_t)n; /* checked at the top: a stranger goes at its first wrong byte */
	}
}

static struct pending *free_slot(struct listener *L)
{
	struct pending *oldest = NULL;

	for (int i = 0; i < DOC_PENDING_MAX; i++) {
		if (L->p[i].fd < 0)
			return &L->p[i];
		if (!oldest || L->p[i].since < oldest->since)
			oldest = &L->p[i];
	}
	log_refusal(L, oldest->ip,
		    "dropped: %d connections waiting for their hello, the oldest goes",
		    DOC_PENDING_MAX);
	drop(oldest);
	return oldest;
}

/* Accept what waits, up to a round's worth (the pending ones get read in between). */
static int accept_some(struct listener *L)
{
	for (int i = 0; i < ACCEPT_ROUND; i++) {
		int fd = accept4(L->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct pending *p;

		if (fd < 0) {
			int e = errno;

			if (e == EAGAIN || e == EWOULDBLOCK)
				return 0;
			if (e == EINTR || e == ECONNABORTED || e == EPROTO || e == EPERM)
				continue;
			if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
				fprintf(stderr, "rk doctor: accept: %s: pausing %d ms\n",
					strerror(e), PAUSE_MS);
				L->paused_until = cli_now_ns() + ms_ns(PAUSE_MS);
				return 0;
			}
			fprintf(stderr, "rk doctor: accept: %s\n", strerror(e));
			return -e;
		}
		p = free_slot(L);
		memset(p, 0, sizeof(*p));
		p->fd = fd;
		p->since = cli_now_ns();
		p->deadline = p->since + ms_ns(DOC_HELLO_MS);
		if (doc_sock_addrs(fd, p->local, p->ip, sizeof(p->ip))) {
			close(fd);
			p->fd = -1;
		}
	}
	return 0;
}

/* Deadlines: hellos not in within DOC_HELLO_MS, a test past its bound. */
static uint64_t expire(struct listener *L)
{
	uint64_t now = cli_now_ns(), next = now + ms_ns(1000);

	for (int i = 0; i < DOC_PENDING_MAX; i++) {
		struct pending *p = &L->p[i];

		if (p->fd < 0)
			continue;
		if (now >= p->deadline) {
			char why[96];

			snprintf(why, sizeof(why), "no whole hello within %d ms (%zu bytes came)",
				 DOC_HELLO_MS, p->got);
			refuse(L, p, why);
		} else if (p->deadline < next) {
			next = p->deadline;
		}
	}
	if (L->pid && now >= L->kill_at) {
		fprintf(stderr, "rk doctor: %s: its test ran past %llu ms: ended\n", L->run_ip,
			(unsigned long long)DOC_SESSION_MS(L->max_step_ms));
		if (kill(L->pid, SIGKILL) && errno != ESRCH)
			fprintf(stderr, "rk doctor: kill %d: %s\n", (int)L->pid, strerror(errno));
		L->kill_at = UINT64_MAX; /* once; the pipe tells when it is gone */
	} else if (L->pid && L->kill_at < next) {
		next = L->kill_at;
	}
	if (L->paused_until > now && L->paused_until < next)
		next = L->paused_until;
	return next;
}

/* One round: deadlines, then one poll over the listener, the test and every pending peer. */
static int round_once(struct listener *L)
{
	struct pollfd fds[DOC_PENDING_MAX + 2];
	struct pending *of[DOC_PENDING_MAX + 2] = {0};
	uint64_t next = expire(L), now = cli_now_ns();
	int n = 0, r, ilfd = -1, idone = -1;

	if (L->paused_until <= now) {
		ilfd = n;
		fds[n++] = (struct pollfd){.fd = L->lfd, .events = POLLIN};
	}
	if (L->pid) {
		idone = n;
		fds[n++] = (struct pollfd){.fd = L->done_fd, .events = POLLIN};
	}
	for (int i = 0; i < DOC_PENDING_MAX; i++)
		if (L->p[i].fd >= 0) {
			of[n] = &L->p[i];
			fds[n++] = (struct pollfd){.fd = L->p[i].fd, .events = POLLIN};
		}
	r = poll(fds, (nfds_t)n, cli_deadline_ms_left(next));
	if (r < 0 && errno == EINTR)
		return 0;
	if (r < 0) {
		fprintf(stderr, "rk doctor: poll: %s\n", strerror(errno));
		return -errno;
	}
	if (idone >= 0 && fds[idone].revents)
		test_ended(L);
	for (int i = 0; i < n; i++)
		if (of[i] && of[i]->fd >= 0 && fds[i].revents)
			read_hello(L, of[i]);
	if (ilfd >= 0 && fds[ilfd].revents)
		return accept_some(L);
	return 0;
}

int doc_listen(const char *addr, const char *port, int once, int max_step_ms, const uint8_t *token)
{
	struct listener L = {
	    .max_step_ms = max_step_ms, .once = once, .token = token, .done_fd = -1};
	struct rk_error err;
	int r = 0, fl;

	for (int i = 0; i < DOC_PENDING_MAX; i++)
		L.p[i].fd = -1;
	L.lfd = rk_tcp_listen(addr, port, &err);
	if (L.lfd < 0) {
		cli_report("doctor", "listen", &err);
		return 1;
	}
	fl = fcntl(L.lfd, F_GETFL);
	if (fl < 0 || fcntl(L.lfd, F_SETFL, fl | O_NONBLOCK) < 0) {
		fprintf(stderr, "rk doctor: listen: %s\n", strerror(errno));
		close(L.lfd);
		return 1;
	}
	fprintf(stderr,
		"rk doctor: listening on %s port %s, one test at a time, %s; a hello within %d "
		"ms, at most %d waiting\n",
		addr ? addr : "any address", port,
		token ? "clients with the token" : "any rk doctor client (no --token-file)",
		DOC_HELLO_MS, DOC_PENDING_MAX);
	while (r == 0 && !(once && L.tests > 0))
		r = round_once(&L);
	close_all(&L, -1);
	if (L.pid) {
		if (kill(L.pid, SIGKILL) && errno != ESRCH)
			fprintf(stderr, "rk doctor: kill %d: %s\n", (int)L.pid, strerror(errno));
		test_ended(&L);
	}
	close(L.lfd);
	return r ? 1 : 0;
}
