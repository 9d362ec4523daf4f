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
#include <stdio.h>
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

/* The registered entry whose key is @key, or NULL; under reg_mu. */
static struct cp_reg *find(struct cp_server *srv, const uint8_t *key)
{
	struct cp_reg *found = NULL;

	/* Compare with every entry, in constant time each: no early exit. */
	for (struct cp_reg *e = srv->reg_head; e; e = e->next)
		if (cp_token_equal(e->key, key, CP_KEY_LEN))
			found = e;
	return found;
}

static void poke(int evfd)
{
	uint64_t one = 1;

	if (write(evfd, &one, sizeof(one)) < 0) {
		/* Cannot fail below the eventfd's maximum; the owner also
		 * looks at its entry on its next wake-up. */
	}
}

void cp_reg_add(struct cp_server *srv, struct cp_reg *e)
{
	pthread_mutex_lock(&srv->reg_mu);
	e->next = srv->reg_head;
	srv->reg_head = e;
	e->registered = 1;
	pthread_mutex_unlock(&srv->reg_mu);
}

void cp_reg_remove(struct cp_server *srv, struct cp_reg *e)
{
	pthread_mutex_lock(&srv->reg_mu);
	if (e->registered) {
		struct cp_reg **pp = &srv->reg_head;

		while (*pp && *pp != e)
			pp = &(*pp)->next;
		if (*pp)
			*pp = e->next;
		e->registered = 0;
		pthread_cond_broadcast(&srv->reg_cv);
	}
	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		if (e->joins[l])
			rk_cm_request_reject(e->joins[l], RK_REJECT_ENDED, "session is over", NULL);
		e->joins[l] = NULL;
	}
	pthread_mutex_unlock(&srv->reg_mu);
}

int cp_reg_take(struct cp_server *srv, struct cp_reg *e, struct rk_cm_request **reqs)
{
	uint64_t v;
	int n = 0;

	if (read(e->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	pthread_mutex_lock(&srv->reg_mu);
	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		reqs[l] = e->joins[l];
		e->joins[l] = NULL;
		n += reqs[l] != NULL;
	}
	pthread_mutex_unlock(&srv->reg_mu);
	return n;
}

/*
 * Should the old session not end in time, its files are refused as busy
 * and the client tries them again later.
 */
int cp_reg_replace(struct cp_server *srv, const uint8_t *key, char *peer, size_t peer_len)
{
	struct timespec dl;
	int told = 0;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += REPLACE_MS / 1000;
	pthread_mutex_lock(&srv->reg_mu);
	for (;;) {
		struct cp_reg *old = find(srv, key);

		if (!old)
			break;
		if (!atomic_exchange(&old->replaced, 1)) {
			snprintf(peer, peer_len, "%s", old->peer ? old->peer : "?");
			told = 1;
			poke(old->evfd);
		}
		if (pthread_cond_timedwait(&srv->reg_cv, &srv->reg_mu, &dl) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&srv->reg_mu);
	return told;
}

int cp_session_join(struct cp_server *srv, struct rk_cm_request *req, unsigned lane,
		    const uint8_t *key)
{
	struct cp_reg *found;

	pthread_mutex_lock(&srv->reg_mu);
	found = find(srv, key);
	if (!found || lane >= found->want_lanes || (found->claimed & 1u << lane)) {
		pthread_mutex_unlock(&srv->reg_mu);
		/* No session (yet: its WELCOME may be under way), or a lane it never takes. */
		if (!found)
			rk_cm_request_reject(req, RK_REJECT_NO_SESSION, "no such session", NULL);
		else
			rk_cm_request_reject(req, RK_REJECT_DENIED, "no such lane", NULL);
		return -ENOENT;
	}
	found->joins[lane] = req;
	found->claimed |= 1u << lane;
	poke(found->evfd);
	pthread_mutex_unlock(&srv->reg_mu);
	return 0;
}
