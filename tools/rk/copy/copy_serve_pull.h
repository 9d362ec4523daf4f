/*
 * copy_serve_pull.h - rk serve --read: the session of a client that pulls
 * (copy_serve_pull.c).
 */
#ifndef RK_COPY_SERVE_PULL_H
#define RK_COPY_SERVE_PULL_H

#include <rdmakit/cm.h>

#include "copy_recv.h"

/*
 * cp_pull_session_start - accept @req (a pull: cp_lane_parse said 2) on a
 * new thread that sends what the client's PULL names under @srv's
 * directory. Takes ownership of @req (rejects it if the thread cannot
 * start). @srv->active counts the session until its thread ends. Returns
 * 0 or a negative errno.
 */
int cp_pull_session_start(struct cp_server *srv, struct rk_cm_request *req);

#endif
