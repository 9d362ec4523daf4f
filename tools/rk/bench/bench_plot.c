/*
 * bench_plot.c - a PNG of the run via gnuplot: the data goes inline as a
 * datablock on gnuplot's stdin, so no temporary files are left behind.
 * bw mode: bandwidth (average, peak) and message rate against size;
 * lat mode: latency (median, p99, p99.9) and the bandwidth it implies.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "bench_report.h"

/* The path goes between single quotes in the script: keep it inert. */
static int path_ok(const char *path)
{
	return *path && !strpbrk(path, "'\n\r\\");
}

static void write_script(FILE *g, const struct bench_report *r, const char *path)
{
	const struct bench_ctx *c = r->c;
	int lat = c->p->mode == BENCH_MODE_LAT;
	double div = c->l->gbits ? 1e9 : 8.0 * 1048576.0;
	const char *unit = c->l->gbits ? "Gb/s" : "MiB/s";

	fprintf(g, "$d << EOD\n");
	for (unsigned i = 0; i < r->n; i++) {
		struct bench_figures f;

		bench_figures(r, &r->res[i], &f);
		fprintf(g, "%u %.6f %.6f %.6f %.3f %.3f %.3f\n", r->res[i].size, f.bw_avg_bps / div,
			f.bw_peak_bps / div, f.mpps, f.lat->lat_ns[LAT_MEDIAN] / 1e3,
			f.lat->lat_ns[LAT_P99] / 1e3, f.lat->lat_ns[LAT_P999] / 1e3);
	}
	fprintf(g, "EOD\n");
	fprintf(g, "set terminal pngcairo size 900,900 noenhanced\n");
	fprintf(g, "set output '%s'\n", path);
	fprintf(g, "set multiplot layout 2,1 title 'rk bench: %s %s on %s (%u QP, batch %u)'\n",
		bench_op_name(c->p->op), bench_mode_name(c->p->mode), c->me.dev, c->p->num_qp,
		c->p->batch);
	fprintf(g, "set grid\nset key top left\nset xlabel 'message size [bytes]'\n");
	if (r->n > 1)
		fprintf(g, "set logscale x 2\nset format x '%%.0b%%B'\n");
	if (lat) {
		fprintf(g, "set ylabel 'latency [us]'\n");
		fprintf(g, "plot $d using 1:5 with linespoints title 'median', "
			   "$d using 1:6 with linespoints title 'p99', "
			   "$d using 1:7 with linespoints title 'p99.9'\n");
		fprintf(g, "set ylabel 'bandwidth [%s]'\n", unit);
		fprintf(g, "plot $d using 1:2 with linespoints title 'size / latency'\n");
	} else {
		fprintf(g, "set ylabel 'bandwidth [%s]'\n", unit);
		fprintf(g, "plot $d using 1:2 with linespoints title 'average', "
			   "$d using 1:3 with linespoints title 'peak'\n");
		fprintf(g, "set ylabel 'message rate [Mpps]'\n");
		fprintf(g, "plot $d using 1:4 with linespoints title 'Mpps'\n");
	}
	fprintf(g, "unset multiplot\nset output\n");
}

int bench_report_plot(const struct bench_report *r, const char *path, struct rk_error *err)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	FILE *g;
	int st, rc = 0;

	if (!path_ok(path))
		return bench_fail(err, EINVAL,
				  "--plot %s: quotes, backslashes and newlines are "
				  "not supported in the name",
				  path);
	if (!r->n)
		return bench_fail(err, ENODATA, "--plot: no results to plot");
	/* gnuplot dying early must not kill us with SIGPIPE. */
	if (sigaction(SIGPIPE, &ign, &old))
		return bench_fail(err, errno, "sigaction: %s", strerror(errno));
	g = popen("gnuplot", "w");
	if (!g) {
		rc = bench_fail(err, errno, "--plot: cannot run gnuplot: %s", strerror(errno));
		goto out;
	}
	write_script(g, r, path);
	st = pclose(g);
	if (st == -1)
		rc = bench_fail(err, errno, "--plot: gnuplot: %s", strerror(errno));
	else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		rc = bench_fail(err, EIO, "--plot: gnuplot failed (exit %d)%s",
				WIFEXITED(st) ? WEXITSTATUS(st) : -1,
				WIFEXITED(st) && WEXITSTATUS(st) == 127
				    ? "; install it (Debian: apt-get install gnuplot-nox)"
				    : "");
out:
	sigaction(SIGPIPE, &old, NULL);
	return rc;
}
