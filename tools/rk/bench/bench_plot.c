/*
 * bench_plot.c - a PNG of the run via gnuplot: the data goes inline as a
 * datablock on gnuplot's stdin, so no temporary files are left behind.
 * bw mode: bandwidth (average, peak) and message rate against size;
 * lat mode: latency (median, p99, p99.9) and the bandwidth it implies.
 */
#include <errno.h>
#include <stdio.h>

#include "bench_report.h"
#include "common/gnuplot.h"

static int write_script(FILE *g, const void *arg, const char *path)
{
	const struct bench_report *r = arg;
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
	return 0;
}

int bench_report_plot(const struct bench_report *r, const char *path, struct rk_error *err)
{
	if (!r->n)
		return bench_fail(err, ENODATA, "--plot: no results to plot");
	return cli_gnuplot_run("rk bench", path, write_script, r, err);
}
