/*
 * matrix_auth.h - how rank 0 knows a hello comes from a rank of its own
 * job, with what the site already has:
 *
 *  - MUNGE (Slurm's own authentication), when srun started the ranks and
 *    rk was built with libmunge: the hello carries a credential whose
 *    payload binds "rk-matrix 2 job=J step=S rank=R size=N params=DIGEST".
 *    Rank 0 decodes it with its munged and accepts only its own uid, its
 *    own job and step ids, the rank and size the hello claims and the
 *    digest of the parameters in the hello; munged refuses a credential
 *    decoded before (a replay) or expired.
 *  - a job secret (--token-file FILE, the same file content on every
 *    rank, 16 to 256 bytes, not readable by others), sent in the hello and
 *    compared in constant time. It goes over the rendezvous connection in
 *    clear: it keeps out whoever can reach rank 0's port, not whoever can
 *    read the traffic between the ranks.
 *  - --no-auth: nothing (anyone who reaches the port can join), said loudly.
 *
 * With neither a token nor MUNGE under Slurm, rk matrix refuses to start.
 */
#ifndef RK_MATRIX_AUTH_H
#define RK_MATRIX_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "matrix.h"
#include "matrix_hello.h"

struct mx_auth {
	enum mx_auth_kind kind;
	uint8_t token[MX_TOKEN_MAX];
	uint32_t token_len;
	char job[32], step[32];	  /* SLURM_JOB_ID, SLURM_STEP_ID (MX_AUTH_MUNGE) */
	const char *munge_socket; /* NULL: libmunge's default */
};

/*
 * mx_auth_setup - the kind of proof this run uses, from --no-auth,
 * --token-file (read here) and the launcher (@la: Slurm, with MUNGE built
 * in). Returns 0, or -1 with a message for the user in @why.
 */
int mx_auth_setup(struct mx_auth *a, const struct mx_opts *o, const struct mx_launch *la, char *why,
		  size_t why_len);

/* mx_auth_clear - the secret off the memory. */
void mx_auth_clear(struct mx_auth *a);

/*
 * mx_auth_payload - the text a MUNGE credential of rank @rank of @size
 * binds, with @digest of the parameters (mx_params_digest). Pure.
 */
void mx_auth_payload(char *out, size_t len, const char *job, const char *step, uint32_t rank,
		     uint32_t size, uint64_t digest);

/* mx_params_digest - XXH3 of @params' plain JSON text (0 for NULL). */
uint64_t mx_params_digest(json_object *params);

/*
 * mx_auth_prove - add this rank's proof to its @hello (rank, size and
 * params already in it). Returns 0, or -1 with why (munged unreachable).
 */
int mx_auth_prove(const struct mx_auth *a, json_object *hello, uint32_t rank, uint32_t size,
		  json_object *params, char *why, size_t why_len);

/*
 * mx_auth_check - rank 0: is @h's proof good for the rank it claims?
 * 0, or -1 with the reason (for rank 0's log; the stranger hears less).
 * Blocks on munged for a MUNGE credential (a local socket).
 */
int mx_auth_check(const struct mx_auth *a, const struct mx_hello *h, char *why, size_t why_len);

#endif
