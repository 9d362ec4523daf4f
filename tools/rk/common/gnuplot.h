/*
 * gnuplot.h - the one way rk's tools draw a PNG (--plot FILE): gnuplot
 * runs with the script on its stdin (the data inline as a datablock, so
 * no temporary file is left behind), and its exit status decides.
 */
#ifndef RK_CLI_GNUPLOT_H
#define RK_CLI_GNUPLOT_H

#include <stdio.h>

#include <rdmakit/error.h>

/* Writes the script for @path to @g: 0, or a negative errno (the run then fails). */
typedef int cli_gnuplot_script_fn(FILE *g, const void *arg, const char *path);

/*
 * cli_gnuplot_run - check that @path may go between single quotes in the
 * script and that gnuplot is on $PATH, start it (popen), let @script write
 * to it, and close it. SIGPIPE is ignored meanwhile (a gnuplot dying early
 * must not kill the tool). Returns 0, or a negative errno with @err set
 * under @cmd's name ("rk bench: --plot: gnuplot failed (exit 1)").
 * Blocks until gnuplot has drawn; not thread-safe (it sets SIGPIPE's
 * disposition for the process).
 */
int cli_gnuplot_run(const char *cmd, const char *path, cli_gnuplot_script_fn *script,
		    const void *arg, struct rk_error *err);

#endif
