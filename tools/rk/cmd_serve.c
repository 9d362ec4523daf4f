/* cmd_serve.c - rk serve (placeholder until the subcommand lands). */
#include <stdio.h>

#include "commands.h"

int rk_cmd_serve(int argc, char **argv)
{
	fprintf(stderr, "rk serve: not implemented yet\n");
	return RK_EXIT_FAILURE;
}
