/*
 * rpc_pool_book.h - the RPC pool's bookkeeping, free of verbs, locks and
 * clocks so it can be unit tested with a fake clock (rpc_pool.c is the part
 * that connects, locks and waits).
 *
 * Peers are keyed by their normalized "host:port" string. Each peer has a
 * list of entries, one per client: IDLE (connected, in the pool), LEASED
 * (connected, a thread has it) or CONNECTING (a thread is connecting it
 * outside the lock; it counts against max_per_peer from the start, so
 * max_per_peer threads connecting at once is the worst case, never more).
 * The book holds the clients as opaque pointers and never calls them:
 * whatever it removes (expired, dead, everything at the end) goes back to
 * the caller as a chain of entries to destroy and free.
 *
 * Every time is an int64 of milliseconds the caller passes in, from one
 * monotonic clock; a deadline of -1 means none.
 */
#ifndef RK_RPC_POOL_BOOK_H
#define RK_RPC_POOL_BOOK_H

#include <stdint.h>

#include <rdmakit/error.h>
#include <rdmakit/rpc_pool.h>

/* Longest host accepted (a DNS name is at most 253; an IPv6 address with a zone fits). */
#define RK_PBOOK_HOST_MAX 255
/* Longest key: "[" host "]:" and five digits. */
#define RK_PBOOK_KEY_MAX (RK_PBOOK_HOST_MAX + 8)
/* Peer hash buckets (a power of two). */
#define RK_PBOOK_BUCKETS 256

#define RK_PBOOK_DEF_MAX_PER_PEER 4
#define RK_PBOOK_DEF_IDLE_MS	  30000
#define RK_PBOOK_DEF_BACKOFF_MIN  100
#define RK_PBOOK_DEF_BACKOFF_MAX  5000
#define RK_PBOOK_DEF_MAX_PEERS	  1024

/* A parsed peer: what rk_rpc_client_opts wants, and the key. */
struct rk__pbook_addr {
	char host[RK_PBOOK_HOST_MAX + 1]; /* without brackets */
	char port[6];			  /* decimal, no leading zeros */
	char key[RK_PBOOK_KEY_MAX + 1];	  /* "host:port" or "[v6]:port", host in lower case */
};

enum rk__pbook_state {
	RK_PBOOK_IDLE,
	RK_PBOOK_LEASED,
	RK_PBOOK_CONNECTING,
};

struct rk__pbook_peer;

struct rk__pbook_entry {
	/* In the peer's list; `next` alone chains the entries handed back. */
	struct rk__pbook_entry *next, *prev;
	/* In the book's list of leased entries (found by client pointer). */
	struct rk__pbook_entry *lnext, *lprev;
	struct rk__pbook_peer *peer; /* NULL once handed back */
	enum rk__pbook_state state;
	int64_t last_used; /* when it last became idle (or was reserved) */
	uint64_t fail_gen; /* the peer's failure count when connecting began */
	void *client;	   /* NULL while CONNECTING */
};

struct rk__pbook_peer {
	struct rk__pbook_peer *hnext; /* hash chain */
	struct rk__pbook_addr addr;
	struct rk__pbook_entry *entries;
	unsigned nentries, nidle;
	int64_t last_used; /* last put, expiry or connect failure */
	/* Backoff: connects wait until retry_at after a failure. */
	int backoff_ms;	   /* 0 = none (never failed, or succeeded since) */
	int64_t retry_at;  /* may connect at this time */
	uint64_t fail_gen; /* counted failures (those that doubled the backoff) */
	int last_err;	   /* the last connect error, negative errno */
	struct rk_error last_why;
};

struct rk__pbook {
	unsigned max_per_peer, max_peers;
	int idle_ms, backoff_min_ms, backoff_max_ms;
	struct rk__pbook_peer *buckets[RK_PBOOK_BUCKETS];
	struct rk__pbook_entry *leased; /* every LEASED entry, by lnext */
	/* No idle entry expires before this (a lower bound; exact after a scan). */
	int64_t next_expiry;
	struct rk_rpc_pool_stats st; /* counters, and peers / clients / leased now */
};

/*
 * rk__pbook_parse - parse "host:port" or "[v6]:port" into @a. A host is a
 * name or IPv4 address (letters, digits, '.', '-', '_'); in brackets, an
 * IPv6 address (hex digits, ':', '.') and maybe "%zone". -EINVAL for an
 * empty host or one longer than RK_PBOOK_HOST_MAX, any other byte in it
 * (an IPv6 address without brackets too), a missing, non-numeric, 0 or
 * > 65535 port, or a string longer than RK_PBOOK_KEY_MAX. The host is kept
 * as given (resolving is rdma_cm's job) but lower-cased in the key, up to
 * a "%zone", and the port loses its leading zeros.
 */
int rk__pbook_parse(const char *s, struct rk__pbook_addr *a);

/*
 * rk__pbook_init - an empty book with the pool's limits (0 = the defaults
 * above). -EINVAL for a negative time, or backoff_min > backoff_max when
 * both are given (a default minimum is lowered to a smaller maximum).
 */
int rk__pbook_init(struct rk__pbook *b, unsigned max_per_peer, int idle_ms, int backoff_min_ms,
		   int backoff_max_ms, unsigned max_peers);

/*
 * rk__pbook_fini - empty the book: every entry still in it (idle, leased,
 * connecting) comes back as a chain by ->next. The caller destroys each
 * non-NULL ->client and frees the entries (rk__pbook_entry_free).
 */
struct rk__pbook_entry *rk__pbook_fini(struct rk__pbook *b);

/* Free an entry handed back (accepts NULL; not the chain, one entry). */
void rk__pbook_entry_free(struct rk__pbook_entry *e);

enum rk__pbook_verdict {
	RK_PBOOK_TAKE,	   /* l->e was idle (most recently used first), now LEASED */
	RK_PBOOK_CONNECT,  /* l->e is a new CONNECTING entry: connect, then
			      rk__pbook_connected() or rk__pbook_connect_failed() */
	RK_PBOOK_WAIT,	   /* max_per_peer leased or connecting: wait for a put
			      until l->until (-1 = no limit), then ask again */
	RK_PBOOK_BACKOFF,  /* the peer's backoff runs until l->until (at or before
			      the deadline): wait, then ask again */
	RK_PBOOK_REFUSED,  /* the deadline ends inside the backoff: fail now with
			      l->err and l->why (the last connect error) */
	RK_PBOOK_TIMEDOUT, /* the deadline passed with no idle entry */
};

struct rk__pbook_lease {
	struct rk__pbook_entry *e;	   /* TAKE, CONNECT */
	int64_t until;			   /* WAIT, BACKOFF */
	int err;			   /* REFUSED: a negative errno */
	const struct rk_error *why;	   /* REFUSED: valid until the book next changes */
	const struct rk__pbook_peer *peer; /* the peer (NULL for TIMEDOUT before it existed) */
};

/*
 * rk__pbook_lease - lease a client of @a at @now, with the caller's
 * @deadline (-1 = none). In order: an idle entry; else, past the deadline,
 * TIMEDOUT; else max_per_peer busy, WAIT; else inside the backoff,
 * BACKOFF or REFUSED; else a new CONNECTING entry. Returns the verdict, or
 * -EMFILE when @a is a new peer and max_peers peers are in use (a peer with
 * no entry and past its backoff is forgotten to make room), or -ENOMEM.
 */
int rk__pbook_lease(struct rk__pbook *b, const struct rk__pbook_addr *a, int64_t now,
		    int64_t deadline, struct rk__pbook_lease *l);

/*
 * rk__pbook_connected - the CONNECTING entry @e got @client at @now: it is
 * LEASED, the peer's backoff is over.
 */
void rk__pbook_connected(struct rk__pbook *b, struct rk__pbook_entry *e, void *client, int64_t now);

/*
 * rk__pbook_connect_failed - connecting @e failed at @now with @err (a
 * negative errno) and @why (may be NULL): @e is removed and freed, and the
 * peer waits a backoff: backoff_min after a success, else double the last
 * one up to backoff_max. An attempt that began before another failure of
 * the same peer (threads connecting at once) does not double it again.
 */
void rk__pbook_connect_failed(struct rk__pbook *b, struct rk__pbook_entry *e, int err,
			      const struct rk_error *why, int64_t now);

/* rk__pbook_find - the LEASED entry holding @client, or NULL. */
struct rk__pbook_entry *rk__pbook_find(const struct rk__pbook *b, const void *client);

/*
 * rk__pbook_put - the LEASED entry @e comes back at @now. @reusable: it
 * becomes IDLE and NULL is returned. Otherwise (dead, or calls in flight)
 * it leaves the book and is returned for the caller to destroy its client
 * and free it (counted in dead_closed); the next lease connects anew.
 */
struct rk__pbook_entry *rk__pbook_put(struct rk__pbook *b, struct rk__pbook_entry *e, int reusable,
				      int64_t now);

/*
 * rk__pbook_expire - the entries idle for idle_ms or longer at @now leave
 * the book, returned as a chain by ->next (counted in idle_closed). A peer
 * left with no entry is forgotten at once if it is not in backoff, else
 * once its backoff is over and it was unused for idle_ms (it keeps the
 * backoff's doubling meanwhile). Costs O(1) until the earliest of those is
 * due, then one pass over the peers.
 */
struct rk__pbook_entry *rk__pbook_expire(struct rk__pbook *b, int64_t now);

#endif
