/*
 * matrix_launch.h - who this process is in the matrix: its rank, the
 * number of ranks and where rank 0 (the rendezvous) listens, from the
 * launcher that started it.
 *
 * In rk-matrix-mpi (cmake -DRK_MPI=ON; rk links no MPI), with an MPI
 * launcher's variables present (OMPI_COMM_WORLD_SIZE, PMIX_RANK,
 * PMI_SIZE), rank and size come from MPI_Comm_rank / MPI_Comm_size and
 * rank 0's address is broadcast with MPI_Bcast (matrix_launch_mpi.c).
 * Otherwise they come from the environment, in this order: Slurm
 * (SLURM_PROCID, SLURM_NTASKS), Open MPI (OMPI_COMM_WORLD_RANK,
 * OMPI_COMM_WORLD_SIZE), PMI (PMI_RANK, PMI_SIZE);
 * rank 0's address from --rendezvous, RK_MATRIX_ADDR, or the first host of
 * SLURM_STEP_NODELIST / SLURM_JOB_NODELIST (where Slurm puts task 0).
 */
#ifndef RK_MATRIX_LAUNCH_H
#define RK_MATRIX_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

struct mx_launch {
	uint32_t rank, size;
	char rdv_host[256]; /* where rank 0 listens */
	const char *source; /* "Slurm", "Open MPI", "PMI", "MPI" */
	int mpi;	    /* MPI_Init was called: mx_launch_end must finalize */
};

/* The variable lookup mx_launch_env uses (getenv, or a table in tests). */
typedef const char *(*mx_getenv_fn)(const char *name);

/*
 * mx_launch_env - rank, size and rendezvous from the variables @get
 * returns; @rdv (NULL: none) overrides the address. Returns 0, or -1 with
 * a message in @why naming every variable looked for. Pure: unit-tested.
 */
int mx_launch_env(struct mx_launch *l, mx_getenv_fn get, const char *rdv, char *why,
		  size_t why_len);

/*
 * mx_hostlist_first - the first host of a Slurm host list ("n[01-04,7],m"
 * -> "n01") into @out. Returns 0, or -1 if @list is not a host list.
 */
int mx_hostlist_first(const char *list, char *out, size_t len);

/*
 * mx_launch_rendezvous - rank 0's address alone, as mx_launch_env finds
 * it: @rdv, else RK_MATRIX_ADDR, else the first host of Slurm's node list.
 * Returns 0, or -1 with @why.
 */
int mx_launch_rendezvous(struct mx_launch *l, mx_getenv_fn get, const char *rdv, char *why,
			 size_t why_len);

/*
 * The MPI start of rk-matrix-mpi. Only its main (main_matrix_mpi.c) sets
 * mx_launch_mpi, to mx_launch_mpi_start (matrix_launch_mpi.c, the only
 * file compiled with mpi.h), before rk matrix runs and before any thread;
 * in rk it stays NULL, so rk_tool_matrix is one library for both.
 */
struct mx_launch_mpi {
	int (*launched)(void); /* an MPI launcher's variables are set */
	int (*start)(struct mx_launch *l, int *argc, char ***argv, const char *rdv, char *why,
		     size_t why_len);
	void (*end)(void); /* MPI_Finalize */
};
extern const struct mx_launch_mpi *mx_launch_mpi;
extern const struct mx_launch_mpi mx_launch_mpi_start;

/*
 * mx_launch_start - mx_launch_env on the process environment, or MPI as
 * above when mx_launch_mpi is set. Call once, before any thread starts. Returns 0 or -1 with @why.
 */
int mx_launch_start(struct mx_launch *l, int *argc, char ***argv, const char *rdv, char *why,
		    size_t why_len);

/* mx_launch_end - MPI_Finalize when MPI was started; nothing otherwise. */
void mx_launch_end(struct mx_launch *l);

#endif
