/*
 * matrix.h - rk matrix: rk bench between every pair of ranks of a job
 * started by srun or mpirun, with the slow links found.
 *
 * rk matrix is split by concern, one file each:
 *   matrix_launch.c  rank, size and rendezvous from MPI or the launcher's environment
 *   matrix_sched.c   rounds of disjoint pairs, flags, merge (pure, unit-tested)
 *   matrix_wire.c    the rendezvous channel: JSON documents on rk's control channel
 *   matrix_coord.c   rank 0: ranks joining, the rounds, results, retests
 *   matrix_worker.c  every rank: join, run the pairs it is given, report
 *   matrix_pair.c    one measurement of a pair: an rk bench session in-process
 *   matrix_report.c  at rank 0: the text matrix, the JSON document, the heatmap
 *   cmd_matrix.c     the command line and the run
 *   matrix_hello.c   a rank's hello, decoded with every field bounded
 *   matrix_auth.c    its proof: a MUNGE credential, the job's token, or none
 *
 * Protocol 3 (MX_PROTO, matrix_hello.h). Every rank joins rank 0 over TCP
 * (rank 0's own worker too, from a second thread of the same process) and
 * says who it is, with which parameters, and proves that it is a rank of
 * this job (matrix_auth.h: MUNGE under Slurm, --token-file, or --no-auth).
 * A hello whose proof fails is refused and logged and changes nothing:
 * the rank it named can still join, and rank 0 waits for it as before.
 * Rank 0 reads up to 32 hellos at once, each within 5 s and 16 KiB, so a
 * stranger holding a connection open holds nobody up. Rank 0 refuses an
 * authenticated rank whose parameters differ, naming the first one. Then,
 * round by round, rank 0 gives each rank its pair with fresh keys for each
 * leg (or tells it to sit the round out), so that each side of a leg proves
 * to the other that it is the pair's rank (matrix_pair.h), and waits for
 * both sides' results before the next round: that is the barrier. A leg
 * counts only when both sides report the same figures (mx_merge). A rank
 * whose connection closes or that does not answer in time is dead for the
 * rest of the run; its pairs are reported failed. Flagged pairs are then
 * retested one at a time, each only in the legs that were flagged (the
 * pair message names them).
 */
#ifndef RK_MATRIX_H
#define RK_MATRIX_H

#include <stdint.h>

#include <rdmakit/cq.h>

#include "common/tool_error.h"
#include "matrix_launch.h"
#include "matrix_sched.h"

/* mx_fail - rk matrix's own failure in @err: cli_fail under the command's name. */
#define mx_fail(err, errnum, ...) cli_fail((err), "rk matrix", (errnum), __VA_ARGS__)

#define MATRIX_PROG	    "matrix"
#define MATRIX_DEF_RDV_PORT "18590"
#define MATRIX_DEF_PORT	    20000u /* a pair's server listens on PORT + 3 x rank + leg */
#define MATRIX_LAT_SIZE	    64u
#define MATRIX_INFLIGHT	    (16u << 20) /* bandwidth: bytes queued at most */
#define MATRIX_MAX_DEPTH    128u	/* ... and work requests (rk bench's default) */

/* What every rank must agree on (checked at the rendezvous), and the local choices. */
struct mx_opts {
	uint32_t size;		 /* bandwidth message size (default 1 MiB) */
	uint32_t duration_s;	 /* per bandwidth direction */
	uint32_t lat_duration_s; /* the latency run */
	double bw_frac;		 /* flag below this share of the median bandwidth */
	double lat_mult;	 /* flag above this multiple of the least latency */
	int intra;		 /* pairs on one host too */
	int quick;		 /* one round */
	int retest;		 /* retest flagged pairs alone (default on) */
	const char *pairs_path;	 /* --pairs FILE */
	char *pairs_text;	 /* its content (rank 0 parses it), malloc'd */
	uint64_t pairs_hash;	 /* XXH3 of it, compared at the rendezvous */
	uint32_t port_base;
	unsigned watchdog_s, wait_s;
	/* How completions are awaited; not busy: the latency leg is WRITE WITH IMMEDIATE. */
	enum rk_wait_mode poll;
	/* local */
	const char *addr; /* this rank's RDMA address; NULL: the one that reaches rank 0 */
	const char *dev;
	const char *json_path, *plot_path;
	const char *rdv;	  /* --rendezvous HOST[:PORT] */
	const char *token_path;	  /* --token-file: the job's secret */
	const char *munge_socket; /* --munge-socket: munged's, when not the default */
	int no_auth;		  /* --no-auth: no proof asked of anyone */
	int listen_any;		  /* --listen-any: rank 0's rendezvous on every address */
};

/* How long a pair may take: three sessions with their connection set-up. */
unsigned mx_pair_budget_ms(const struct mx_opts *o);

/* What a rank told rank 0 about itself. */
struct mx_rank {
	uint32_t rank;
	int joined;	  /* said hello and was accepted */
	int refused;	  /* said hello with other parameters: not waited for */
	int dead;	  /* its connection failed later */
	uint32_t host_id; /* index of its host name among the ranks' */
	char host[64];
	char addr[64];
	char dev[32];
	char *why; /* never joined or died: why (malloc'd) */
};

/* What rank 0 gathered: the input of the report. */
struct mx_matrix {
	uint32_t n;
	struct mx_rank *ranks;
	struct mx_sched sched;
	struct mx_result *res; /* sched.npairs, in schedule order */
	struct mx_refs refs;
	uint32_t nhosts;
	uint64_t wall_ns;
	const char *launcher;
};

void mx_matrix_free(struct mx_matrix *m);

#endif
