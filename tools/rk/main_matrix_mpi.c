/*
 * rk-matrix-mpi (cmake -DRK_MPI=ON): rk matrix alone, started by MPI when an
 * MPI launcher started it (matrix_launch_mpi.c), as rk matrix otherwise.
 * Its own main so that no other file is compiled twice: rk's main.c and
 * rk_tool_matrix are the same here as in rk.
 */
#include "commands.h"
#include "matrix/matrix_launch.h"

int main(int argc, char **argv)
{
	mx_launch_mpi = &mx_launch_mpi_start;
	return rk_cmd_matrix(argc, argv);
}
