/*
 * copy_recv.h - the receiving side of rk copy: one session per accepted
 * connection, each on a thread of its own with its own CQ and its own
 * registered ring, so a slow or hostile client never stalls the others and
 * can only ever write into its own ring.
 */
#ifndef RK_COPY_RECV_H
#define RK_COPY_RECV_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include <rdmakit/cm.h>
#include <rdmakit/device.h>

#define CP_SERVE_MAX_OPEN 128u /* largest --max-open */

/* What every session shares; read-only while sessions run (but @active). */
struct cp_server {
	struct rk_device *dev;
	int rootfd; /* the served directory, O_DIRECTORY */
	uint64_t max_file_size;
	uint64_t max_bytes; /* sizes of the files begun, per session */
	uint32_t max_files; /* files and directories per session */
	uint32_t max_open;  /* files open at once per session, <= CP_SERVE_MAX_OPEN */
	uint32_t max_ring;  /* bytes of ring per connection */
	int idle_ms;	    /* end a session that moves nothing for this long */
	atomic_int *stop;   /* set on SIGINT/SIGTERM */
	atomic_int active;  /* sessions running */
};

/*
 * cp_session_fds - the most file descriptors one session holds with
 * @max_open files open: per lane its CM event channel and completion
 * channel, the join eventfd, two per open file (it and its directory) and
 * a few held for moments (opening a directory, a replaced temporary).
 */
unsigned cp_session_fds(unsigned max_open);

/*
 * cp_session_start - accept @req on a new thread and serve it until the
 * client says bye, disconnects, fails or goes silent. Takes ownership of
 * @req (rejects it if the thread cannot start). @srv->active counts the
 * session from now until its thread ends. Returns 0 or a negative errno.
 */
int cp_session_start(struct cp_server *srv, struct rk_cm_request *req);

/*
 * cp_session_join - hand the connect request of lane @lane (1..) to the
 * running session whose key is @key (CP_KEY_LEN bytes, compared in
 * constant time); that session's thread accepts it. Rejects @req and
 * returns -ENOENT when no session has that key or the lane is not expected
 * or taken. Takes ownership of @req. Called from the listener thread.
 */
int cp_session_join(struct rk_cm_request *req, unsigned lane, const uint8_t *key);

#endif
