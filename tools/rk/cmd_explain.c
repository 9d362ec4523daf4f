/*
 * cmd_explain.c - rk explain WHAT: what a completion status, errno, rdma_cm
 * event or CM reject reason means, its usual causes and the fixes.
 *
 * All the knowledge is the library's explain table (rdmakit/explain.h), the
 * same one the hints of every rk error come from; this file only prints it.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmakit/explain.h>

#include "cli.h"
#include "commands.h"

#define MAX_HITS    32
#define SUGGESTIONS 5

static const char synopsis[] = "usage: rk explain WHAT...\n"
			       "       rk explain --list\n";

static void usage(FILE *out)
{
	fprintf(out,
		"%s"
		"\n"
		"What a failure means, why it usually happens and how to fix it. WHAT is one of\n"
		"  a completion status by number, name or text: 12, RETRY_EXC_ERR,\n"
		"    IBV_WC_RETRY_EXC_ERR, \"transport retry counter exceeded\"\n"
		"  an errno, alone or with the call that returned it: ENOMEM, \"ENOMEM reg_mr\",\n"
		"    -12 (as the library returns it), \"errno 12\"\n"
		"  an rdma_cm event: ADDR_ERROR, REJECTED, \"event 8\"\n"
		"  a CM reject reason (the status of a REJECTED event): \"reject 8\",\n"
		"    INVALID_SERVICE_ID, \"stale connection\"\n"
		"Case does not matter; several words are taken as one phrase.\n"
		"\n"
		"  -l, --list   every known entry: kind, code, name (and calls for errnos)\n"
		"  -h, --help   this text\n"
		"\n"
		"A bare number is read as a completion status, and the other readings of it\n"
		"(errno, rdma_cm event, reject reason) are named after the answer.\n"
		"\n"
		"exit: 0 found, 1 unknown (the closest names are listed), 2 bad command line\n",
		synopsis);
}

/* "-12": a negative errno, as the library returns them: never an option. */
static int negative_number(const char *s)
{
	if (s[0] != '-' || !isdigit((unsigned char)s[1]))
		return 0;
	for (s++; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

/* "12" alone: all digits, no kind word. */
static int bare_number(const char *s, int *code)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)*s))
		return 0;
	v = strtol(s, &end, 10);
	if (*end || v > 0xffff)
		return 0;
	*code = (int)v;
	return 1;
}

/*
 * After the answer to a bare number: say it was read as a completion
 * status and what else the number is, with the words that ask for it.
 */
static void other_readings(int code, size_t status_hits)
{
	static const struct {
		const char *word; /* the kind word rk_explain_lookup knows */
		const char *how;  /* the words that ask for it, before the number */
	} kinds[] = {
	    {"errno", "-"},
	    {"event", "event "},
	    {"reject", "reject "},
	};
	int any = 0;

	if (status_hits)
		printf("\n(%d was read as a completion status.", code);
	else
		printf("(%d is no completion status.", code);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const struct rk_explain *e;
		char q[32];

		snprintf(q, sizeof(q), "%s %d", kinds[i].word, code);
		if (rk_explain_lookup(q, &e, 1) == 0)
			continue;
		printf("%s %s %d is %s (rk explain %s%d)",
		       any ? ";" : " Other readings:", rk_explain_kind_str(e->kind), code, e->name,
		       kinds[i].how, code);
		any = 1;
	}
	printf("%s)\n", any ? "." : " Nothing else is known by that number.");
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
	char *words[64], *opt_argv[64];
	char what[256] = "";
	size_t n, len = 0;
	int c, nwords = 0, opt_argc = 0, code;

	if (argc > 64)
		return cli_usage_error("explain", synopsis, "too many words");
	/*
	 * getopt would take "-12" for the options -1 and -2: negative numbers
	 * are kept out of its way, and put back in their place among the words.
	 */
	for (int i = 0; i < argc; i++)
		if (i == 0 || !negative_number(argv[i]))
			opt_argv[opt_argc++] = argv[i];
	opt_argv[opt_argc] = NULL;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(opt_argc, opt_argv, "lh", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			list_all();
			return RK_EXIT_OK;
		case 'h':
			usage(stdout);
			return RK_EXIT_OK;
		default:
			return cli_option_error("explain", synopsis, opt_argv, "lh", opts);
		}
	}
	for (int i = 1; i < argc; i++) {
		int operand = negative_number(argv[i]);

		for (int k = optind; k < opt_argc && !operand; k++)
			operand = opt_argv[k] == argv[i];
		if (operand && strcmp(argv[i], "--") != 0)
			words[nwords++] = argv[i];
	}
	if (nwords == 0)
		return cli_usage_error("explain", synopsis, "say WHAT to explain");
	for (int i = 0; i < nwords; i++) {
		int w = snprintf(what + len, sizeof(what) - len, "%s%s", len ? " " : "", words[i]);

		if (w < 0 || (size_t)w >= sizeof(what) - len) {
			fprintf(stderr, "rk explain: WHAT is too long\n");
			return RK_EXIT_USAGE;
		}
		len += (size_t)w;
	}

	n = rk_explain_lookup(what, hits, MAX_HITS);
	if (n == 0 && bare_number(what, &code)) {
		other_readings(code, 0);
		return RK_EXIT_FAILURE;
	}
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
	if (bare_number(what, &code))
		other_readings(code, n);
	return RK_EXIT_OK;
}
