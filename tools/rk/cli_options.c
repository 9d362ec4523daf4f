/*
 * cli_options.c - the option vocabulary every rk command shares, written
 * down once: rk help options prints it, README.md carries the same table
 * and tests/docs/options_vocab.py holds every command's --help to it (one
 * meaning and one unit per long option, one meaning per short letter).
 */
#include <stdio.h>

#include "cli.h"

/* A long option more than one command has. */
struct vocab_opt {
	char short_opt; /* 0: none */
	const char *name, *arg, *meaning, *commands;
};

static const struct vocab_opt shared[] = {
    {'h', "help", "", "this command's options", "all"},
    {'d', "dev", "NAME", "the local RDMA device (else --addr's, $RK_DEV, the route's)",
     "copy serve matrix bench"},
    {0, "addr", "ADDR", "this host's address: listen on it, and it picks the device",
     "serve doctor matrix bench"},
    {'p', "port", "PORT", "the TCP / rdma_cm port to listen on (matrix: the first)",
     "serve doctor matrix bench"},
    {0, "token-file", "FILE", "the access token, read from FILE", "copy serve doctor matrix"},
    {0, "json", "[=FILE]", "the result as JSON on stdout, or whole into FILE",
     "copy doctor matrix bench"},
    {0, "timeout", "DURATION", "give up on a peer silent this long", "copy doctor"},
    {'D', "duration", "DURATION", "how long to measure", "matrix bench"},
    {0, "watchdog", "DURATION", "a run without progress this long fails", "matrix bench"},
    {0, "wait", "DURATION", "how long to wait for the peers to join", "matrix bench"},
    {'s', "size", "SIZE", "message size", "matrix bench"},
    {0, "poll", "MODE", "busy | event | adaptive: how completions are awaited", "matrix bench"},
    {0, "plot", "FILE", "a PNG of the results (needs gnuplot)", "matrix bench"},
    {'q', "quiet", "", "errors only: no progress, no summary", "copy"},
    {0, "num-qp", "N", "connections (queue pairs) to stripe over", "copy bench"},
};

/* Short letters: one meaning each, everywhere; a command without the option has no letter. */
static const struct {
	char letter;
	const char *name, *commands;
} letters[] = {
    {'h', "help", "all"},	  {'d', "dev", "copy matrix bench (serve: next release)"},
    {'p', "port", "serve bench"}, {'q', "quiet", "copy"},
    {'r', "recursive", "copy"},	  {'f', "force", "copy"},
    {'l', "list", "explain"},	  {'s', "size", "bench"},
    {'a', "all", "bench"},	  {'n', "iters", "bench"},
    {'D', "duration", "bench"},	  {'w', "warmup", "bench"},
    {'t', "tx-depth", "bench"},	  {'Q', "cq-mod", "bench"},
    {'I', "inline", "bench"},	  {'b', "bidir", "bench"},
    {'i', "ib-port", "bench"},	  {'x', "gid-index", "bench"},
    {'m', "mtu", "bench"},	  {'V', "version", "rk"},
};

/*
 * Spellings on their way out: they work for one release, with a warning
 * naming the new one.
 */
static const struct {
	const char *old, *now, *commands;
} retired[] = {
    {"-d DIR", "--dir DIR", "serve"},
    {"-a ADDR", "--addr ADDR", "serve"},
    {"--timeout N (bare: ms)", "--timeout Nms", "doctor"},
    {"--json FILE", "--json=FILE", "matrix"},
    {"--json FILE", "--json=FILE", "bench"},
    {"--bind ADDR", "--addr ADDR", "bench"},
    {"-q N (perftest's)", "--num-qp N", "bench"},
    {"-l N (perftest's)", "--batch N", "bench"},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void print_check(FILE *out)
{
	for (size_t i = 0; i < N_OF(shared); i++)
		fprintf(out, "option\t--%s\t%s\t%s\t%s\n", shared[i].name,
			shared[i].short_opt ? (char[]){'-', shared[i].short_opt, 0} : "",
			shared[i].arg, shared[i].commands);
	for (size_t i = 0; i < N_OF(letters); i++)
		fprintf(out, "letter\t-%c\t--%s\t%s\n", letters[i].letter, letters[i].name,
			letters[i].commands);
	for (size_t i = 0; i < N_OF(retired); i++)
		fprintf(out, "retired\t%s\t%s\t%s\n", retired[i].old, retired[i].now,
			retired[i].commands);
}

void cli_print_options(FILE *out, int check)
{
	if (check) {
		print_check(out);
		return;
	}
	fprintf(out, "Options every rk command shares: one spelling, one meaning, one unit.\n\n");
	for (size_t i = 0; i < N_OF(shared); i++) {
		const struct vocab_opt *o = &shared[i];
		char head[40];

		snprintf(head, sizeof(head), "%c%c%c --%s%s%s", o->short_opt ? '-' : ' ',
			 o->short_opt ? o->short_opt : ' ', o->short_opt ? ',' : ' ', o->name,
			 *o->arg && o->arg[0] != '[' ? " " : "", o->arg);
		fprintf(out, "  %-24s %s\n  %-24s [%s]\n", head, o->meaning, "", o->commands);
	}
	fprintf(out,
		"\nunits:\n"
		"  DURATION  a number and a unit: 500ms, 30s, 2m, 1h (1.5s too); a bare number\n"
		"            is seconds (rk doctor --timeout: milliseconds, with a warning, until\n"
		"            the next release)\n"
		"  SIZE      bytes: 4096, 64K, 8M, 1G (K, M, G: powers of two; KiB, MB too)\n"
		"  N         a count; PORT a number, 1..65535\n"
		"\nshort letters (the same everywhere; a command without the option has none):\n");
	for (size_t i = 0; i < N_OF(letters); i++)
		fprintf(out, "  -%c  --%-10s %s\n", letters[i].letter, letters[i].name,
			letters[i].commands);
	fprintf(out,
		"\nports (a listener takes --port; a client writes HOST:PORT):\n"
		"  7900                    rk serve, the long-running service\n"
		"  18515                   rk bench (perftest's)\n"
		"  18517                   rk doctor --listen\n"
		"  18590                   rk matrix, rank 0's rendezvous\n"
		"  20000 + 3 x rank + leg  rk matrix pairs (--port sets the 20000)\n"
		"  one-shot tools take the next free port of 18515..18599; ranges start at\n"
		"  20000; the service keeps 7900 (units and firewalls name it)\n"
		"\nspellings that work one more release, with a warning naming the new one:\n");
	for (size_t i = 0; i < N_OF(retired); i++)
		fprintf(out, "  rk %-7s %-26s -> %s\n", retired[i].commands, retired[i].old,
			retired[i].now);
}
