/* cmd_copy.c - rk copy (placeholder until the subcommand lands). */
#include <stdio.h>

#include "commands.h"

int rk_cmd_copy(int argc, char **argv)
{
	fprintf(stderr, "rk copy: not implemented yet\n");
	return RK_EXIT_FAILURE;
}
