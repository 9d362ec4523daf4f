/*
 * matrix_munge.h - MUNGE, loaded when rk matrix needs it.
 *
 * rk links no libmunge: a storage node without it must still run rk copy,
 * and only rk matrix under srun authenticates with MUNGE. The build takes
 * munge.h's declarations (libmunge-dev); at run time mx_munge() opens
 * libmunge.so.2 (Debian: libmunge2, installed with Slurm's munge) once and
 * resolves the calls matrix_auth.c makes. Thread-safe.
 */
#ifndef RK_MATRIX_MUNGE_H
#define RK_MATRIX_MUNGE_H

#include <stddef.h>

#include <munge.h>

struct mx_munge {
	munge_ctx_t (*ctx_create)(void);
	void (*ctx_destroy)(munge_ctx_t ctx);
	const char *(*ctx_strerror)(munge_ctx_t ctx);
	munge_err_t (*ctx_set)(munge_ctx_t ctx, int opt, ...);
	munge_err_t (*encode)(char **cred, munge_ctx_t ctx, const void *buf, int len);
	munge_err_t (*decode)(const char *cred, munge_ctx_t ctx, void **buf, int *len, uid_t *uid,
			      gid_t *gid);
};

/* The calls, or NULL with @why saying what is missing (and how to install it). */
const struct mx_munge *mx_munge(char *why, size_t why_len);

#endif
