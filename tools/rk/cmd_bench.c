/* cmd_bench.c - rk bench (placeholder until the subcommand lands). */
#include <stdio.h>

#include "commands.h"

int rk_cmd_bench(int argc, char **argv)
{
	fprintf(stderr, "rk bench: not implemented yet\n");
	return RK_EXIT_FAILURE;
}
