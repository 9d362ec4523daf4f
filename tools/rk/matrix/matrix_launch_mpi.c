/*
 * matrix_launch_mpi.c - rk-matrix-mpi's start: rank, size and rank 0's
 * address from MPI; see matrix_launch.h. The one matrix file that includes
 * mpi.h: only rk-matrix-mpi compiles it (tools/rk/CMakeLists.txt), so
 * rk_tool_matrix is the same library in rk and in rk-matrix-mpi.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "matrix_launch.h"
#include "matrix_sched.h"

/* Started by an MPI launcher (not by srun without PMI, which MPI would see as size 1). */
static int mpi_launched(void)
{
	return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE");
}

static const char *env_get(const char *name)
{
	return getenv(name);
}

static int mpi_start(struct mx_launch *l, int *argc, char ***argv, const char *rdv, char *why,
		     size_t why_len)
{
	int rank, size, r = 0;

	memset(l, 0, sizeof(*l));
	if (MPI_Init(argc, argv) != MPI_SUCCESS) {
		snprintf(why, why_len, "MPI_Init failed");
		return -1;
	}
	l->mpi = 1;
	l->source = "MPI";
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 1 || (unsigned)size > MX_MAX_RANKS) {
		snprintf(why, why_len, "MPI size %d: 1 to %u ranks", size, MX_MAX_RANKS);
		return -1;
	}
	l->rank = (uint32_t)rank;
	l->size = (uint32_t)size;
	/* Rank 0 says where it listens; an empty name means it found none. */
	if (rank == 0 && mx_launch_rendezvous(l, env_get, rdv, why, why_len) &&
	    gethostname(l->rdv_host, sizeof(l->rdv_host) - 1))
		r = -1;
	MPI_Bcast(l->rdv_host, sizeof(l->rdv_host), MPI_CHAR, 0, MPI_COMM_WORLD);
	l->rdv_host[sizeof(l->rdv_host) - 1] = 0;
	if (r || !l->rdv_host[0]) {
		snprintf(
		    why, why_len,
		    "no rendezvous address for rank 0: looked for --rendezvous, "
		    "RK_MATRIX_ADDR, SLURM_STEP_NODELIST, SLURM_JOB_NODELIST and the host name");
		return -1;
	}
	return 0;
}

static void mpi_end(void)
{
	MPI_Finalize();
}

const struct mx_launch_mpi mx_launch_mpi_start = {
    .launched = mpi_launched,
    .start = mpi_start,
    .end = mpi_end,
};
