/*
 * copy_recv_registry.c - rk serve's sessions by key (see copy_recv_int.h).
 *
 * Every session enters the registry once it has sent WELCOME (so has a
 * key) and leaves it once its files are closed, before it is freed; both
 * under srv->reg_mu, and leaving wakes srv->reg_cv. Two users: the
 * listener thread hands the connect request of a joining lane to its
 * session (cp_session_join), and a reconnecting client's new session ends
 * the one it replaces (CP_F_REPLACES): a client whose QP failed under loss
 * may be back before this side has seen anything (its DREQ lost too, no
 * more completions), and until the old session ends it holds the locks of
 * the files it was writing, so the resumed copy would find them busy.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "copy_recv_int.h"
#include "copy_token.h"

#define REPLACE_MS 5000 /* the most a new session waits for the one it replaces */

int cp_server_registry_init(struct cp_server *srv)
{
	pthread_condattr_t ca;
	int r;

	srv->reg_head = NULL;
	r = pthread_mutex_init(&srv->reg_mu, NULL);
	if (r)
		return -r;
	r = pthread_condattr_init(&ca);
	if (!r) {
		r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		if (!r)
			r = pthread_cond_init(&srv->reg_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (r)
		pthread_mutex_destroy(&srv->reg_mu);
	return -r;
}

void cp_server_registry_fini(struct cp_server *srv)
{
	pthread_cond_destroy(&srv->reg_cv);
	pthread_mutex_destroy(&srv->reg_mu);
}

/* The registered session whose key is @key, or NULL; under reg_mu. */
static struct session *find_session(struct cp_server *srv, const uint8_t *key)
{
	struct session *found = NULL;

	/* Compare with every session, in constant time each: no early exit. */
	for (struct session *s = srv->reg_head; s; s = s->reg_next)
		if (cp_token_equal(s->key, key, CP_KEY_LEN))
			found = s;
	return found;
}

void rcv_register(struct session *s)
{
	pthread_mutex_lock(&s->srv->reg_mu);
	s->reg_next = s->srv->reg_head;
	s->srv->reg_head = s;
	s->registered = 1;
	pthread_mutex_unlock(&s->srv->reg_mu);
}

/*
 * Leave the registry; lanes handed over but not taken are refused, and a
 * session waiting to replace this one is woken.
 */
void rcv_unregister(struct session *s)
{
	pthread_mutex_lock(&s->srv->reg_mu);
	if (s->registered) {
		struct session **pp = &s->srv->reg_head;

		while (*pp && *pp != s)
			pp = &(*pp)->reg_next;
		if (*pp)
			*pp = s->reg_next;
		s->registered = 0;
		pthread_cond_broadcast(&s->srv->reg_cv);
	}
	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		if (s->joins[l])
			rk_cm_request_reject(s->joins[l], RK_REJECT_APP, "session is over", NULL);
		s->joins[l] = NULL;
	}
	pthread_mutex_unlock(&s->srv->reg_mu);
}

/*
 * CP_F_REPLACES: tell the session @key names to end, and wait until it has
 * closed its files (it leaves the registry then), at most REPLACE_MS. A
 * key that names no session is no error: it ended already, and what it
 * held is free. Should the old session not end in time, its files are
 * refused as busy and the client tries them again later.
 */
void rcv_replace(struct session *s, const uint8_t *key)
{
	struct cp_server *srv = s->srv;
	struct timespec dl;
	uint64_t one = 1;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += REPLACE_MS / 1000;
	pthread_mutex_lock(&srv->reg_mu);
	for (;;) {
		struct session *old = find_session(srv, key);

		if (!old)
			break;
		if (!atomic_exchange(&old->replaced, 1)) {
			rcv_log(s, "replaces this client's session from %s", old->peer);
			if (write(old->evfd, &one, sizeof(one)) < 0) {
				/* Cannot fail below the eventfd's maximum; the
				 * old session also checks on its next wake-up. */
			}
		}
		if (pthread_cond_timedwait(&srv->reg_cv, &srv->reg_mu, &dl) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&srv->reg_mu);
}

int cp_session_join(struct cp_server *srv, struct rk_cm_request *req, unsigned lane,
		    const uint8_t *key)
{
	struct session *found;
	uint64_t one = 1;

	pthread_mutex_lock(&srv->reg_mu);
	found = find_session(srv, key);
	if (!found || lane >= found->want_lanes || (found->claimed & 1u << lane)) {
		pthread_mutex_unlock(&srv->reg_mu);
		rk_cm_request_reject(req, RK_REJECT_APP, "no such session or lane", NULL);
		return -ENOENT;
	}
	found->joins[lane] = req;
	found->claimed |= 1u << lane;
	if (write(found->evfd, &one, sizeof(one)) < 0) {
		/* Cannot happen with an eventfd below its maximum; the session
		 * still finds the request on its next wake-up. */
	}
	pthread_mutex_unlock(&srv->reg_mu);
	return 0;
}
