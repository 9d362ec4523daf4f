/*
 * commands.h - the rk subcommand table.
 *
 * Each subcommand lives in its own cmd_NAME.c and exports one entry point with
 * the signature below.  main.c only dispatches; it knows no subcommand's
 * options.
 */
#ifndef RK_COMMANDS_H
#define RK_COMMANDS_H

struct rk_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
};

/*
 * Exit codes of every subcommand, in one place (rk help lists them; a
 * subcommand's --help says which it uses): 0, 1 and 2 for all, 3 and 4
 * where a peer can refuse or be lost (rk copy).
 */
enum {
	RK_EXIT_OK = 0,
	RK_EXIT_FAILURE = 1, /* the operation failed (rk copy: some file); the message says why */
	RK_EXIT_USAGE = 2,   /* bad command line */
	RK_EXIT_REFUSED = 3, /* refused by the peer: token, busy, exists, path, limits */
	RK_EXIT_LOST = 4,    /* could not connect, connection lost, peer silent */
};

/* The subcommands, one file each. */
int rk_cmd_bench(int argc, char **argv);
int rk_cmd_copy(int argc, char **argv);
int rk_cmd_doctor(int argc, char **argv);
int rk_cmd_explain(int argc, char **argv);
int rk_cmd_matrix(int argc, char **argv);
int rk_cmd_serve(int argc, char **argv);

/* The table, terminated by an entry with name == NULL. */
extern const struct rk_command rk_commands[];

#endif
