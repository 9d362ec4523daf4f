/* gnuplot.c - see gnuplot.h. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "common/gnuplot.h"
#include "common/tool_error.h"

#define INSTALL "install it (Debian: apt-get install gnuplot-nox)"

int cli_gnuplot_run(const char *cmd, const char *path, cli_gnuplot_script_fn *script,
		    const void *arg, struct rk_error *err)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	FILE *g;
	int st, rc;

	/* The path goes between single quotes in the script: keep it inert. */
	if (!*path || strpbrk(path, "'\n\r\\"))
		return cli_fail(err, cmd, EINVAL,
				"--plot %s: quotes, backslashes and newlines are not supported "
				"in the name",
				path);
	if (!cli_have_program("gnuplot"))
		return cli_fail(err, cmd, ENOENT, "--plot: gnuplot is not installed; " INSTALL);
	if (sigaction(SIGPIPE, &ign, &old))
		return cli_fail(err, cmd, errno, "sigaction: %s", strerror(errno));
	g = popen("gnuplot", "w");
	if (!g) {
		rc = cli_fail(err, cmd, errno, "--plot: cannot run gnuplot: %s", strerror(errno));
		goto out;
	}
	rc = script(g, arg, path);
	if (rc)
		cli_fail(err, cmd, -rc, "--plot: cannot write the script: %s", strerror(-rc));
	st = pclose(g);
	if (rc)
		goto out;
	if (st == -1)
		rc = cli_fail(err, cmd, errno, "--plot: gnuplot: %s", strerror(errno));
	else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		rc = cli_fail(err, cmd, EIO, "--plot: gnuplot failed (exit %d)%s",
			      WIFEXITED(st) ? WEXITSTATUS(st) : -1,
			      WIFEXITED(st) && WEXITSTATUS(st) == 127 ? "; " INSTALL : "");
out:
	sigaction(SIGPIPE, &old, NULL);
	return rc;
}
