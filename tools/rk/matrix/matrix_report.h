/*
 * matrix_report.h - what rank 0 prints and writes once the matrix is
 * done: the text matrix (rows from, columns to, Gb/s; up to
 * MX_TEXT_MAX ranks), the flagged pairs with both measurements and the
 * verdict of their retest, the failures; one JSON document (json-c) with
 * every rank and pair; a heatmap PNG (gnuplot).
 */
#ifndef RK_MATRIX_REPORT_H
#define RK_MATRIX_REPORT_H

#include <rdmakit/error.h>

#include "matrix.h"

#define MX_TEXT_MAX 64u

/* mx_report_text - the matrix, flagged pairs, failures to stdout. */
void mx_report_text(const struct mx_matrix *m, const struct mx_opts *o);

/* mx_report_failures - how many pairs have a leg not measured. */
uint32_t mx_report_failures(const struct mx_matrix *m);

/* mx_report_json - the document into @path (a temporary renamed into place). */
int mx_report_json(const struct mx_matrix *m, const struct mx_opts *o, const char *path,
		   struct rk_error *err);

/* mx_report_plot - the bandwidth heatmap into PNG @path via gnuplot. */
int mx_report_plot(const struct mx_matrix *m, const char *path, struct rk_error *err);

#endif
