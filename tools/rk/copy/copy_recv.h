/*
 * copy_recv.h - the receiving side of rk copy: one session per accepted
 * connection, each on a thread of its own with its own CQ and its own
 * registered ring, so a slow or hostile client never stalls the others.
 *
 * What keeps sessions apart is the device, not secrecy: each session has a
 * protection domain of its own, holding its ring, its message buffers and
 * the QPs of all its lanes, and nothing else. An RDMA WRITE is checked by
 * the device against the PD of the QP it arrives on, so a client that
 * learns or guesses another session's rkey and ring address (on Soft-RoCE
 * an rkey is an MR index and 8 random bits, and WELCOME names the address)
 * only gets a remote access error on its own QP; the other session never
 * sees the attempt. A PD per session rather than memory windows: a session
 * has up to CP_MAX_LANES QPs that all must reach the one ring, and a type 2
 * window is bound to a single QP (one window, rkey and bind per lane and
 * per rebind), while a PD costs one system call per session and needs no
 * change to the protocol.
 *
 * Within a session the client still owns its ring and can rewrite a slot at
 * any time, also after posting it: the session copies each slot out of the
 * ring before parsing, hashing or writing anything (copy_recv.c).
 */
#ifndef RK_COPY_RECV_H
#define RK_COPY_RECV_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include <rdmakit/cm.h>
#include <rdmakit/device.h>

#include "copy_progress.h"
#include "copy_proto.h"
#include "serve_metrics.h"

#define CP_SERVE_MAX_OPEN 128u /* largest --max-open */

/* What every session shares; read-only while sessions run (but @active and the registry). */
struct cp_server {
	struct rk_device *dev;
	int rootfd; /* the served directory, O_DIRECTORY */
	uint64_t max_file_size;
	uint64_t max_bytes; /* sizes of the files begun, per session */
	uint32_t max_files; /* files and directories per session */
	uint32_t max_open;  /* files open at once per session, <= CP_SERVE_MAX_OPEN */
	uint32_t max_ring; /* bytes of ring per session; a chunk whose slot exceeds it is refused */
	int idle_ms;	   /* end a session that moves nothing for this long */
	/*
	 * Names the sender may use: this one and those beneath it (NULL: any
	 * beneath rootfd). A client that pulls receives where DEST is, and the
	 * server, which it does not trust, must not write beside DEST.
	 */
	const char *only_under;
	int serve_reads;	      /* rk serve --read: clients may pull files from DIR */
	const char *who;	      /* log lines start "WHO: PEER: " (NULL: "rk serve") */
	int quiet;		      /* no log lines about files and sessions */
	struct cp_progress *progress; /* a pull's progress bar, or NULL */
	atomic_int *stop;	      /* set on SIGINT/SIGTERM */
	struct sm_metrics *metrics;   /* rk serve's counters (NULL: none) */
	atomic_int active;	      /* sessions running */
	/*
	 * Sessions by key, for lanes that join (cp_session_join) and sessions
	 * that replace one (CP_F_REPLACES); this server's alone: two servers
	 * in one process never see each other's. reg_mu and reg_cv are set up
	 * by cp_server_registry_init, before the first session.
	 */
	pthread_mutex_t reg_mu;
	pthread_cond_t reg_cv; /* broadcast when a session leaves the registry */
	struct cp_reg *reg_head;
};

/*
 * One session in its server's registry: a receiving session (a push) or
 * the sending side of a pull; either may have lanes join it by its key.
 * Every field but evfd and peer is read and written under srv->reg_mu.
 */
struct cp_reg {
	uint8_t key[CP_KEY_LEN];
	unsigned want_lanes;			   /* lanes 1..want_lanes-1 may join */
	uint32_t claimed;			   /* lanes handed over so far (bit per lane) */
	struct rk_cm_request *joins[CP_MAX_LANES]; /* handed over, not yet taken */
	int evfd;				   /* the owner's: written on either news */
	atomic_int replaced; /* a new session of the same client took over: end */
	int registered;
	const char *peer; /* for the log line of a replacement */
	struct cp_reg *next;
};

/*
 * cp_reg_add - enter @e under e->key (set key, want_lanes, evfd and peer
 * first): lanes may join it from now on, and a new session may replace
 * it. cp_reg_remove - leave again (idempotent): lanes handed over but not
 * taken are refused, and a session waiting to replace this one is woken.
 * Both take srv->reg_mu.
 */
void cp_reg_add(struct cp_server *srv, struct cp_reg *e);
void cp_reg_remove(struct cp_server *srv, struct cp_reg *e);

/*
 * cp_reg_take - move the connect requests handed over to @e into @reqs
 * (CP_MAX_LANES entries, by lane; the caller accepts or rejects each) and
 * empty e->evfd. Returns how many, or a negative errno from the eventfd.
 */
int cp_reg_take(struct cp_server *srv, struct cp_reg *e, struct rk_cm_request **reqs);

/*
 * cp_reg_replace - CP_F_REPLACES: tell the session @key names to end and
 * wait until it has left the registry (its files are closed then), at
 * most 5 s. A key that names no session is no error: that one ended
 * already. Returns 1 and the old session's peer in @peer if one was told.
 */
int cp_reg_replace(struct cp_server *srv, const uint8_t *key, char *peer, size_t peer_len);

/* cp_server_registry_init - an empty lane registry in @srv; 0 or a negative errno. */
int cp_server_registry_init(struct cp_server *srv);

/* cp_server_registry_fini - release it, once no session runs. */
void cp_server_registry_fini(struct cp_server *srv);

/*
 * cp_session_fds - the most file descriptors one session holds with
 * @max_open files open, whichever way it goes: receiving, per lane its CM
 * event channel and completion channel, the join eventfd and the wait set,
 * two per open file (it and its directory) and a few held for moments
 * (opening a directory, a replaced temporary); serving a pull, five per
 * lane (the channels, a wake-up eventfd, a wait set) and a few.
 */
unsigned cp_session_fds(unsigned max_open);

/*
 * cp_session_pinned - the most bytes of memory one session registers
 * (pins) with a ring of at most @max_ring bytes: the ring and, per lane,
 * its message buffers. rk serve sizes --max-ring with it so that
 * --max-clients sessions fit in RLIMIT_MEMLOCK.
 */
uint64_t cp_session_pinned(uint32_t max_ring);

/*
 * cp_session_start - accept @req on a new thread and serve it until the
 * client says bye, disconnects, fails or goes silent. Takes ownership of
 * @req (rejects it if the thread cannot start). @srv->active counts the
 * session from now until its thread ends. Returns 0 or a negative errno.
 */
int cp_session_start(struct cp_server *srv, struct rk_cm_request *req);

/* What a pulling client received (cp_recv_pull). */
struct cp_recv_stats {
	uint32_t files, up_to_date, failed, dirs;
	uint64_t bytes;	 /* of the files committed */
	uint64_t moved;	 /* file data written, committed or not */
	int established; /* the peer's HELLO came and was answered */
	int refused;	 /* a pull: the server refused it with an ERROR (the text is in err) */
};

/*
 * cp_recv_pull - the receiving side over a connection this process makes
 * (rk copy HOST:SRC DEST): connect with @co (its hello asks for a pull),
 * send the PULL message @pull (@len bytes), then take what the server
 * sends exactly as an rk serve session takes a push, into @srv's
 * directory (@srv->only_under: DEST), until the server hangs up after its
 * BYE. The server's HELLO may carry no flag but those of @flags (the
 * PULL's: --force, --resume) and at most @lanes lanes (the PULL's), which
 * this side then connects with the session key. @srv must have its registry set up
 * (cp_server_registry_init).
 * Counts land in @st; @err says why a session failed; a refusal the
 * server sent as ERROR is -ECONNREFUSED with its text in @err. Blocks;
 * every wait is bounded by @srv->idle_ms.
 */
int cp_recv_pull(struct cp_server *srv, const struct rk_cm_connect_opts *co, const void *pull,
		 size_t len, unsigned flags, unsigned lanes, struct cp_recv_stats *st,
		 struct rk_error *err);

/*
 * cp_session_join - hand the connect request of lane @lane (1..) to the
 * running session of @srv whose key is @key (CP_KEY_LEN bytes, compared in
 * constant time); that session's thread accepts it. Rejects @req and
 * returns -ENOENT when no session has that key or the lane is not expected
 * or taken. Takes ownership of @req. Called from the listener thread.
 */
int cp_session_join(struct cp_server *srv, struct rk_cm_request *req, unsigned lane,
		    const uint8_t *key);

#endif
