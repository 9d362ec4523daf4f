/*
 * matrix_coord.h - rank 0's part of rk matrix: the rendezvous, the rounds
 * and the merge of results (see matrix.h for the protocol); and the
 * worker every rank runs.
 */
#ifndef RK_MATRIX_COORD_H
#define RK_MATRIX_COORD_H

#include <json-c/json.h>
#include <rdmakit/error.h>

#include "matrix.h"
#include "matrix_auth.h"

struct mx_coord {
	const struct mx_opts *o;
	const struct mx_auth *auth; /* what a hello must prove */
	json_object *params;	    /* what every rank must send the same */
	int lfd;		    /* the rendezvous socket */
	int *fds;		    /* per rank, -1: none */
	struct mx_matrix m;	    /* the outcome */
	int rc;			    /* 0, or the fatal error (in err) */
	struct rk_error err;
};

/*
 * mx_coord_init - listen on @host (NULL: every address) @port for @n
 * ranks, each to prove itself as @auth says. Call before the worker of
 * rank 0 starts, so it finds the socket. 0 or a negative errno.
 */
int mx_coord_init(struct mx_coord *c, const struct mx_opts *o, const struct mx_auth *auth,
		  uint32_t n, const char *launcher, const char *host, const char *port,
		  json_object *params, struct rk_error *err);

/*
 * mx_coord_run - the whole matrix: wait up to --wait for the ranks, the
 * rounds, the retests, the end. A pthread start routine: @arg is the
 * mx_coord; the outcome is in c->m, c->rc. Does not print.
 */
void *mx_coord_run(void *arg);

/* mx_coord_free - sockets and the outcome. */
void mx_coord_free(struct mx_coord *c);

/*
 * mx_worker_run - join rank 0 at @la->rdv_host:@rdv_port with @params and
 * the proof @auth makes, then run every pair given until rank 0 says the end. 0 or a negative
 * errno (refused, rank 0 lost, a protocol error).
 */
int mx_worker_run(const struct mx_opts *o, const struct mx_auth *auth, const struct mx_launch *la,
		  const char *rdv_port, json_object *params, struct rk_error *err);

#endif
