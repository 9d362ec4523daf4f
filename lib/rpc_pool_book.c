/*
 * rpc_pool_book.c - the RPC pool's bookkeeping (rpc_pool_book.h).
 *
 * Peers live in a small hash table of chains (a pool call looks its peer up
 * every time; a linear scan of up to 1024 keys would cost more than a call
 * on hardware). A peer's entries are few (max_per_peer), so picking the
 * most recently used idle one is a scan of its list. Leased entries are
 * also on one book-wide list, the only place a client pointer is looked
 * up. Expiry keeps a lower bound of the earliest due time, so the common
 * pool call pays a comparison, not a pass over every peer.
 *
 * A peer with no entry is usually forgotten at once; one in backoff is kept
 * a while so that a peer that keeps failing sees its backoff double rather
 * than start over at every attempt.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rk_internal.h"
#include "rpc_pool_book.h"

#define NEVER INT64_MAX

static int is_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '_';
}

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* An IPv6 literal as found in brackets: hex, ':' and '.', then maybe "%zone". */
static int v6_ok(const char *h, size_t n)
{
	size_t i = 0;
	int colons = 0;

	for (; i < n && h[i] != '%'; i++) {
		if (h[i] == ':')
			colons++;
		else if (!is_hex(h[i]) && h[i] != '.')
			return 0;
	}
	if (colons < 2)
		return 0;
	if (i < n && i + 1 == n)
		return 0; /* an empty zone */
	for (i++; i < n; i++)
		if (!is_host_char(h[i]))
			return 0;
	return 1;
}

int rk__pbook_parse(const char *s, struct rk__pbook_addr *a)
{
	const char *host, *port, *end;
	size_t hlen, plen, len;
	unsigned long v = 0;
	int v6 = 0;

	if (!s)
		return -EINVAL;
	len = strnlen(s, RK_PBOOK_KEY_MAX + 1);
	if (len > RK_PBOOK_KEY_MAX)
		return -EINVAL;
	if (s[0] == '[') {
		end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		host = s + 1;
		hlen = (size_t)(end - host);
		port = end + 2;
		if (!v6_ok(host, hlen))
			return -EINVAL;
		v6 = 1;
	} else {
		end = strrchr(s, ':');
		if (!end)
			return -EINVAL;
		host = s;
		hlen = (size_t)(end - s);
		port = end + 1;
		for (size_t i = 0; i < hlen; i++)
			if (!is_host_char(host[i]))
				return -EINVAL; /* also a bare IPv6 address: brackets needed */
	}
	if (hlen == 0 || hlen > RK_PBOOK_HOST_MAX)
		return -EINVAL;
	plen = strlen(port);
	if (plen == 0 || plen > 5)
		return -EINVAL;
	for (size_t i = 0; i < plen; i++) {
		if (port[i] < '0' || port[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(port[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;

	memcpy(a->host, host, hlen);
	a->host[hlen] = '\0';
	snprintf(a->port, sizeof(a->port), "%lu", v);
	/* Names and hex digits ignore case; an interface (the zone) does not. */
	{
		char low[RK_PBOOK_HOST_MAX + 1];
		int zone = 0;

		for (size_t i = 0; i <= hlen; i++) {
			char c = a->host[i];

			zone |= c == '%';
			low[i] = (!zone && c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
		}
		snprintf(a->key, sizeof(a->key), v6 ? "[%s]:%s" : "%s:%s", low, a->port);
	}
	return 0;
}

int rk__pbook_init(struct rk__pbook *b, unsigned max_per_peer, int idle_ms, int backoff_min_ms,
		   int backoff_max_ms, unsigned max_peers)
{
	memset(b, 0, sizeof(*b));
	if (idle_ms < 0 || backoff_min_ms < 0 || backoff_max_ms < 0)
		return -EINVAL;
	if (backoff_min_ms && backoff_max_ms && backoff_min_ms > backoff_max_ms)
		return -EINVAL;
	b->max_per_peer = max_per_peer ? max_per_peer : RK_PBOOK_DEF_MAX_PER_PEER;
	b->max_peers = max_peers ? max_peers : RK_PBOOK_DEF_MAX_PEERS;
	b->idle_ms = idle_ms ? idle_ms : RK_PBOOK_DEF_IDLE_MS;
	b->backoff_max_ms = backoff_max_ms ? backoff_max_ms : RK_PBOOK_DEF_BACKOFF_MAX;
	b->backoff_min_ms = backoff_min_ms ? backoff_min_ms : RK_PBOOK_DEF_BACKOFF_MIN;
	if (b->backoff_min_ms > b->backoff_max_ms)
		b->backoff_min_ms = b->backoff_max_ms; /* only a default minimum gets here */
	b->next_expiry = NEVER;
	return 0;
}

void rk__pbook_entry_free(struct rk__pbook_entry *e)
{
	free(e);
}

static unsigned bucket_of(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *key; key++)
		h = (h ^ (uint8_t)*key) * 16777619u;
	return h & (RK_PBOOK_BUCKETS - 1);
}

static struct rk__pbook_peer *peer_find(const struct rk__pbook *b, const char *key)
{
	struct rk__pbook_peer *p = b->buckets[bucket_of(key)];

	while (p && strcmp(p->addr.key, key))
		p = p->hnext;
	return p;
}

static void peer_forget(struct rk__pbook *b, struct rk__pbook_peer *p)
{
	struct rk__pbook_peer **pp = &b->buckets[bucket_of(p->addr.key)];

	while (*pp != p)
		pp = &(*pp)->hnext;
	*pp = p->hnext;
	b->st.peers--;
	free(p);
}

/* When a peer with no entry may be forgotten (it keeps its backoff until then). */
static int64_t forget_at(const struct rk__pbook *b, const struct rk__pbook_peer *p)
{
	int64_t t = p->last_used + b->idle_ms;

	return p->retry_at > t ? p->retry_at : t;
}

/*
 * A peer may have lost its last entry: forget it now, or note when. Returns
 * 1 if it was forgotten.
 */
static int peer_settle(struct rk__pbook *b, struct rk__pbook_peer *p, int64_t now)
{
	int64_t t;

	if (p->nentries)
		return 0;
	t = forget_at(b, p);
	if (!p->backoff_ms || now >= t) {
		peer_forget(b, p);
		return 1;
	}
	if (t < b->next_expiry)
		b->next_expiry = t;
	return 0;
}

/* Make room for a new peer: forget one with no entry whose backoff is over. */
static int evict_one(struct rk__pbook *b, int64_t now)
{
	for (unsigned i = 0; i < RK_PBOOK_BUCKETS; i++)
		for (struct rk__pbook_peer *p = b->buckets[i]; p; p = p->hnext)
			if (!p->nentries && now >= p->retry_at) {
				peer_forget(b, p);
				return 1;
			}
	return 0;
}

static void entry_link(struct rk__pbook_peer *p, struct rk__pbook_entry *e)
{
	e->peer = p;
	e->prev = NULL;
	e->next = p->entries;
	if (p->entries)
		p->entries->prev = e;
	p->entries = e;
	p->nentries++;
}

static void entry_unlink(struct rk__pbook_entry *e)
{
	struct rk__pbook_peer *p = e->peer;

	if (e->prev)
		e->prev->next = e->next;
	else
		p->entries = e->next;
	if (e->next)
		e->next->prev = e->prev;
	p->nentries--;
	e->next = e->prev = NULL;
	e->peer = NULL;
}

static void leased_add(struct rk__pbook *b, struct rk__pbook_entry *e)
{
	e->state = RK_PBOOK_LEASED;
	e->lprev = NULL;
	e->lnext = b->leased;
	if (b->leased)
		b->leased->lprev = e;
	b->leased = e;
	b->st.leased++;
}

static void leased_remove(struct rk__pbook *b, struct rk__pbook_entry *e)
{
	if (e->lprev)
		e->lprev->lnext = e->lnext;
	else
		b->leased = e->lnext;
	if (e->lnext)
		e->lnext->lprev = e->lprev;
	e->lnext = e->lprev = NULL;
	b->st.leased--;
}

int rk__pbook_lease(struct rk__pbook *b, const struct rk__pbook_addr *a, int64_t now,
		    int64_t deadline, struct rk__pbook_lease *l)
{
	struct rk__pbook_peer *p = peer_find(b, a->key);
	struct rk__pbook_entry *e, *best = NULL;
	int expired = deadline >= 0 && now >= deadline;

	memset(l, 0, sizeof(*l));
	l->until = -1;
	if (!p) {
		if (expired)
			return RK_PBOOK_TIMEDOUT;
		if (b->st.peers >= b->max_peers && !evict_one(b, now))
			return -EMFILE;
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		p->addr = *a;
		p->last_used = now;
		rk_error_clear(&p->last_why);
		p->hnext = b->buckets[bucket_of(a->key)];
		b->buckets[bucket_of(a->key)] = p;
		b->st.peers++;
	}
	l->peer = p;

	for (e = p->nidle ? p->entries : NULL; e; e = e->next)
		if (e->state == RK_PBOOK_IDLE && (!best || e->last_used > best->last_used))
			best = e;
	if (best) {
		p->nidle--;
		leased_add(b, best);
		b->st.reuses++;
		l->e = best;
		return RK_PBOOK_TAKE;
	}
	if (expired)
		return RK_PBOOK_TIMEDOUT;
	if (p->nentries >= b->max_per_peer) {
		l->until = deadline;
		return RK_PBOOK_WAIT;
	}
	if (now < p->retry_at) {
		if (deadline >= 0 && deadline < p->retry_at) {
			l->err = p->last_err;
			l->why = &p->last_why;
			return RK_PBOOK_REFUSED;
		}
		l->until = p->retry_at;
		return RK_PBOOK_BACKOFF;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		peer_settle(b, p, now); /* a peer made just now goes again */
		l->peer = NULL;
		return -ENOMEM;
	}
	e->state = RK_PBOOK_CONNECTING;
	e->last_used = now;
	e->fail_gen = p->fail_gen;
	entry_link(p, e);
	l->e = e;
	return RK_PBOOK_CONNECT;
}

void rk__pbook_connected(struct rk__pbook *b, struct rk__pbook_entry *e, void *client, int64_t now)
{
	struct rk__pbook_peer *p = e->peer;

	e->client = client;
	e->last_used = now;
	leased_add(b, e);
	p->backoff_ms = 0;
	p->retry_at = 0;
	b->st.connects++;
	b->st.clients++;
}

void rk__pbook_connect_failed(struct rk__pbook *b, struct rk__pbook_entry *e, int err,
			      const struct rk_error *why, int64_t now)
{
	struct rk__pbook_peer *p = e->peer;
	int64_t backoff;

	if (!p->backoff_ms) {
		backoff = b->backoff_min_ms;
		p->fail_gen++;
	} else if (e->fail_gen == p->fail_gen) {
		backoff = (int64_t)p->backoff_ms * 2;
		if (backoff > b->backoff_max_ms)
			backoff = b->backoff_max_ms;
		p->fail_gen++;
	} else {
		backoff = p->backoff_ms; /* overlapped a failure already counted */
	}
	p->backoff_ms = (int)backoff;
	if (now + backoff > p->retry_at)
		p->retry_at = now + backoff;
	p->last_err = err < 0 ? err : -EIO;
	if (why && why->err) {
		p->last_why = *why;
	} else {
		rk_error_clear(&p->last_why);
		p->last_why.err = -p->last_err;
		snprintf(p->last_why.op, sizeof(p->last_why.op), "rk_rpc_client_connect");
		snprintf(p->last_why.err_str, sizeof(p->last_why.err_str), "%s",
			 strerror(-p->last_err));
		rk__err_msgf(&p->last_why, "rk_rpc_client_connect: %s: %s", p->addr.key,
			     p->last_why.err_str);
	}
	p->last_used = now;
	b->st.connect_failures++;
	entry_unlink(e);
	free(e);
	peer_settle(b, p, now);
}

struct rk__pbook_entry *rk__pbook_find(const struct rk__pbook *b, const void *client)
{
	struct rk__pbook_entry *e = b->leased;

	while (e && e->client != client)
		e = e->lnext;
	return e;
}

struct rk__pbook_entry *rk__pbook_put(struct rk__pbook *b, struct rk__pbook_entry *e, int reusable,
				      int64_t now)
{
	struct rk__pbook_peer *p = e->peer;

	leased_remove(b, e);
	e->last_used = now;
	p->last_used = now;
	if (reusable) {
		e->state = RK_PBOOK_IDLE;
		p->nidle++;
		if (now + b->idle_ms < b->next_expiry)
			b->next_expiry = now + b->idle_ms;
		return NULL;
	}
	entry_unlink(e);
	b->st.clients--;
	b->st.dead_closed++;
	peer_settle(b, p, now);
	return e;
}

struct rk__pbook_entry *rk__pbook_expire(struct rk__pbook *b, int64_t now)
{
	struct rk__pbook_entry *out = NULL;
	int64_t next = NEVER;

	if (now < b->next_expiry)
		return NULL;
	for (unsigned i = 0; i < RK_PBOOK_BUCKETS; i++) {
		struct rk__pbook_peer *p = b->buckets[i], *pn;

		for (; p; p = pn) {
			struct rk__pbook_entry *e = p->entries, *en;

			pn = p->hnext;
			for (; e; e = en) {
				en = e->next;
				if (e->state != RK_PBOOK_IDLE)
					continue;
				if (now - e->last_used < b->idle_ms) {
					if (e->last_used + b->idle_ms < next)
						next = e->last_used + b->idle_ms;
					continue;
				}
				entry_unlink(e);
				p->nidle--;
				p->last_used = now;
				b->st.clients--;
				b->st.idle_closed++;
				e->next = out;
				out = e;
			}
			if (!p->nentries) {
				if (now < forget_at(b, p) && p->backoff_ms) {
					if (forget_at(b, p) < next)
						next = forget_at(b, p);
				} else {
					peer_forget(b, p);
				}
			}
		}
	}
	b->next_expiry = next;
	return out;
}

struct rk__pbook_entry *rk__pbook_fini(struct rk__pbook *b)
{
	struct rk__pbook_entry *out = NULL;

	for (unsigned i = 0; i < RK_PBOOK_BUCKETS; i++) {
		struct rk__pbook_peer *p = b->buckets[i], *pn;

		for (; p; p = pn) {
			struct rk__pbook_entry *e = p->entries, *en;

			pn = p->hnext;
			for (; e; e = en) {
				en = e->next;
				if (e->state == RK_PBOOK_LEASED)
					leased_remove(b, e);
				e->peer = NULL;
				e->prev = NULL;
				e->next = out;
				out = e;
			}
			free(p);
		}
		b->buckets[i] = NULL;
	}
	b->st.peers = b->st.clients = b->st.leased = 0;
	b->leased = NULL;
	b->next_expiry = NEVER;
	return out;
}
