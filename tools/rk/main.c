/*
 * rk - the rdmakit command line.
 *
 *   rk help            list subcommands
 *   rk help options    the options every subcommand shares (cli_options.c)
 *   rk --version       print the version
 *   rk SUBCOMMAND ...  run a subcommand; "rk SUBCOMMAND --help" explains it
 */
#include <stdio.h>
#include <string.h>

#include <rdmakit/version.h>

#include "cli.h"
#include "commands.h"

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

const struct rk_command rk_commands[] = {
    {"copy", "copy files and trees to an rk serve over RDMA (like scp)", rk_cmd_copy},
    {"serve", "receive files from rk copy into a directory", rk_cmd_serve},
    {"bench", "bandwidth and latency benchmark (perftest-class)", rk_cmd_bench},
    {"matrix", "rk bench between every pair of ranks of an srun / mpirun job", rk_cmd_matrix},
    {"doctor", "check this host's RDMA set-up and say the fix for what is wrong", rk_cmd_doctor},
    {"explain", "what a completion status, errno, CM event or reject means, and the fix",
     rk_cmd_explain},
    {"help", "list subcommands, or explain one: rk help SUBCOMMAND | options", cmd_help},
    {"version", "print the rdmakit version", cmd_version},
    {NULL, NULL, NULL},
};

static const struct rk_command *find_command(const char *name)
{
	for (const struct rk_command *c = rk_commands; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: rk [--version] [--help] SUBCOMMAND [ARGS...]\n\nsubcommands:\n");
	for (const struct rk_command *c = rk_commands; c->name; c++)
		fprintf(out, "  %-10s %s\n", c->name, c->summary);
	fprintf(out, "\nexit codes: 0 success, 1 the operation failed, 2 bad command line,\n"
		     "3 refused by the peer, 4 peer unreachable or lost (rk copy)\n"
		     "\noptions mean the same in every subcommand: 'rk help options' lists them\n");
}

static int cmd_help(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "options") == 0) {
		if (argc > 3 || (argc == 3 && strcmp(argv[2], "--check") != 0)) {
			fprintf(stderr, "usage: rk help options [--check]\n");
			return RK_EXIT_USAGE;
		}
		cli_print_options(stdout, argc == 3);
		return RK_EXIT_OK;
	}
	if (argc > 1) {
		const struct rk_command *c = find_command(argv[1]);
		char help[] = "--help";
		char *sub_argv[] = {argv[1], help, NULL};

		if (!c) {
			fprintf(stderr, "rk: unknown subcommand '%s'\n", argv[1]);
			return RK_EXIT_USAGE;
		}
		if (c->run == cmd_help) {
			usage(stdout);
			return RK_EXIT_OK;
		}
		return c->run(2, sub_argv);
	}
	usage(stdout);
	return RK_EXIT_OK;
}

static int cmd_version(int argc, char **argv)
{
	printf("rk %s\n", rk_version());
	return RK_EXIT_OK;
}

int main(int argc, char **argv)
{
	const struct rk_command *c;

	if (argc < 2) {
		usage(stderr);
		return RK_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
		return cmd_version(argc - 1, argv + 1);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return cmd_help(1, argv + 1);

	c = find_command(argv[1]);
	if (!c) {
		fprintf(stderr, "rk: unknown subcommand '%s' (see 'rk help')\n", argv[1]);
		return RK_EXIT_USAGE;
	}
	return c->run(argc - 1, argv + 1);
}
