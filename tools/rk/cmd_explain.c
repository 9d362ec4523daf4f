/*
 * cmd_explain.c - rk explain WHAT: what a completion status, errno, rdma_cm
 * event or CM reject reason means, its usual causes and the fixes.
 *
 * All the knowledge is the library's explain table (rdmakit/explain.h), the
 * same one the hints of every rk error come from; this file only prints it.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <rdmakit/explain.h>

#include "commands.h"

#define MAX_HITS    32
#define SUGGESTIONS 5

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rk explain WHAT...\n"
		"       rk explain --list\n"
		"\n"
		"What a failure means, why it usually happens and how to fix it. WHAT is one of\n"
		"  a completion status by number, name or text: 12, RETRY_EXC_ERR,\n"
		"    IBV_WC_RETRY_EXC_ERR, \"transport retry counter exceeded\"\n"
		"  an errno, alone or with the call that returned it: ENOMEM, \"ENOMEM reg_mr\"\n"
		"  an rdma_cm event: ADDR_ERROR, REJECTED, \"event 8\"\n"
		"  a CM reject reason (the status of a REJECTED event): \"reject 8\",\n"
		"    INVALID_SERVICE_ID, \"stale connection\"\n"
		"Case does not matter; several words are taken as one phrase.\n"
		"\n"
		"  -l, --list   every known entry: kind, code, name (and calls for errnos)\n"
		"  -h, --help   this text\n"
		"\n"
		"exit: 0 found, 1 unknown (the closest names are listed), 2 bad command line\n");
}

static void print_list(const char *title, const char *const *items, int numbered)
{
	if (!items[0])
		return;
	printf("  %s\n", title);
	for (int i = 0; i < RK_EXPLAIN_LIST_MAX && items[i]; i++) {
		if (numbered)
			printf("    %d. %s\n", i + 1, items[i]);
		else
			printf("    - %s\n", items[i]);
	}
}

static void print_entry(const struct rk_explain *e)
{
	printf("%s (%s %d)", e->name, rk_explain_kind_str(e->kind), e->code);
	if (e->ops[0]) {
		printf(" from");
		for (int i = 0; i < RK_EXPLAIN_OPS_MAX && e->ops[i]; i++)
			printf("%s %s", i ? "," : "", e->ops[i]);
	} else if (e->kind == RK_EXPLAIN_ERRNO) {
		printf(" from any call");
	}
	printf(": %s\n", rk_explain_text(e));
	printf("  %s\n", e->meaning);
	print_list("usual causes, most likely first:", e->causes, 1);
	print_list("fixes:", e->fixes, 0);
	if (e->hint)
		printf("  hint shown with the error: %s\n", e->hint);
}

static void list_all(void)
{
	for (size_t i = 0; i < rk_explain_count(); i++) {
		const struct rk_explain *e = rk_explain_at(i);

		printf("%s\t%d\t%s", rk_explain_kind_str(e->kind), e->code, e->name);
		for (int k = 0; k < RK_EXPLAIN_OPS_MAX && e->ops[k]; k++)
			printf("%s%s", k ? "," : "\t", e->ops[k]);
		printf("\n");
	}
}

int rk_cmd_explain(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"list", no_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const struct rk_explain *hits[MAX_HITS];
	const char *names[SUGGESTIONS];
	char what[256] = "";
	size_t n, len = 0;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "lh", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			list_all();
			return RK_EXIT_OK;
		case 'h':
			usage(stdout);
			return RK_EXIT_OK;
		default:
			usage(stderr);
			return RK_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return RK_EXIT_USAGE;
	}
	for (int i = optind; i < argc; i++) {
		int w = snprintf(what + len, sizeof(what) - len, "%s%s", len ? " " : "", argv[i]);

		if (w < 0 || (size_t)w >= sizeof(what) - len) {
			fprintf(stderr, "rk explain: WHAT is too long\n");
			return RK_EXIT_USAGE;
		}
		len += (size_t)w;
	}

	n = rk_explain_lookup(what, hits, MAX_HITS);
	if (n == 0) {
		size_t k = rk_explain_suggest(what, names, SUGGESTIONS);

		fprintf(stderr,
			"rk explain: '%s' is not a known status, errno, event or reject "
			"reason\n",
			what);
		if (k) {
			fprintf(stderr, "closest known names:");
			for (size_t i = 0; i < k; i++)
				fprintf(stderr, "%s %s", i ? "," : "", names[i]);
			fprintf(stderr, "\n");
		}
		fprintf(stderr, "(rk explain --list shows them all)\n");
		return RK_EXIT_FAILURE;
	}
	for (size_t i = 0; i < n && i < MAX_HITS; i++) {
		if (i)
			printf("\n");
		print_entry(hits[i]);
	}
	if (n > MAX_HITS)
		printf("\n(%zu more: be more specific)\n", n - MAX_HITS);
	return RK_EXIT_OK;
}
