/*
 * test_bench_opts.c - rk bench's command line in the shared vocabulary
 * (rk help options): durations with a unit in whole seconds, --addr,
 * --json[=FILE], and the old spellings kept one release with their warning
 * (-q, -l, --bind, '--json FILE', the last judged against the HOST operand).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "bench.h"

static struct bench_params p;
static struct bench_local l;
static char err_text[4096];

/* bench_opts_parse on "bench" and the NULL-ended @words; its stderr in err_text. */
static int parse(const char *const *words)
{
	char *argv[32] = {"bench"};
	int argc = 1, saved, r;
	FILE *tmp = tmpfile();
	size_t n;

	assert_non_null(tmp);
	for (; *words; words++) {
		assert_true(argc < 31);
		argv[argc++] = (char *)*words;
	}
	argv[argc] = NULL;
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0 && dup2(fileno(tmp), STDERR_FILENO) >= 0);
	r = bench_opts_parse(argc, argv, &p, &l);
	fflush(stderr);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	rewind(tmp);
	n = fread(err_text, 1, sizeof(err_text) - 1, tmp);
	err_text[n] = '\0';
	fclose(tmp);
	return r;
}

#define PARSE(...) parse((const char *const[]){__VA_ARGS__, NULL})

static void said(const char *what)
{
	if (!strstr(err_text, what))
		fail_msg("stderr lacks '%s': %s", what, err_text);
}

static void defaults(void **state)
{
	(void)state;
	assert_int_equal(parse((const char *const[]){NULL}), 0);
	assert_null(l.host);
	assert_null(l.json_path);
	assert_null(l.addr);
	assert_int_equal(p.iters, 5000);
	assert_int_equal(p.duration_s, 0);
	assert_int_equal(l.watchdog_s, 10);
	assert_int_equal(l.wait_s, 60);
	assert_string_equal(err_text, "");
}

static void durations(void **state)
{
	(void)state;
	assert_int_equal(PARSE("-D", "2m", "h1"), 0);
	assert_int_equal(p.duration_s, 120);
	assert_int_equal(p.iters, 0);
	assert_int_equal(PARSE("-D", "30"), 0); /* a bare number: seconds, as before */
	assert_int_equal(p.duration_s, 30);
	assert_int_equal(PARSE("--duration=1h"), 0);
	assert_int_equal(p.duration_s, 3600);
	assert_int_equal(PARSE("--watchdog", "1m", "--wait", "90"), 0);
	assert_int_equal(l.watchdog_s, 60);
	assert_int_equal(l.wait_s, 90);
	assert_int_equal(PARSE("--watchdog", "4", "--wait", "1.5m"), 0);
	assert_int_equal(l.watchdog_s, 4);
	assert_int_equal(l.wait_s, 90);
	assert_string_equal(err_text, "");

	/* Whole seconds (the PARAMS message and the watchdog count seconds). */
	assert_int_equal(PARSE("-D", "1500ms"), -1);
	said("rk bench: --duration '1500ms': expected a duration from 1s to 24h in whole seconds");
	said("usage: rk bench");
	said("try 'rk bench --help'");
	assert_int_equal(PARSE("--watchdog", "500ms"), -1);
	said("--watchdog '500ms'");
	assert_int_equal(PARSE("--watchdog", "2h"), -1); /* at most 1h */
	assert_int_equal(PARSE("--wait", "0"), -1);
	assert_int_equal(PARSE("--wait", "5x"), -1);
	said("--wait '5x': expected a duration");
}

static void addr_and_bind(void **state)
{
	(void)state;
	assert_int_equal(PARSE("--addr", "10.0.0.1"), 0);
	assert_string_equal(l.addr, "10.0.0.1");
	assert_string_equal(err_text, "");
	assert_int_equal(PARSE("--bind", "10.0.0.2"), 0);
	assert_string_equal(l.addr, "10.0.0.2");
	said("rk bench: warning: --bind ADDR is deprecated and goes in the next release; "
	     "write --addr ADDR");
}

static void perftest_letters(void **state)
{
	(void)state;
	assert_int_equal(PARSE("--num-qp", "4", "--batch", "8", "h1"), 0);
	assert_int_equal(p.num_qp, 4);
	assert_int_equal(p.batch, 8);
	assert_int_equal(l.explicit_fields & (BF_NUM_QP | BF_BATCH), BF_NUM_QP | BF_BATCH);
	assert_string_equal(err_text, "");
	assert_int_equal(PARSE("-q", "3", "-l", "2", "h1"), 0);
	assert_int_equal(p.num_qp, 3);
	assert_int_equal(p.batch, 2);
	assert_int_equal(l.explicit_fields & (BF_NUM_QP | BF_BATCH), BF_NUM_QP | BF_BATCH);
	said("warning: -q N is deprecated and goes in the next release; write --num-qp N");
	said("warning: -l N is deprecated and goes in the next release; write --batch N");
	/* The range is the long option's, named by it. */
	assert_int_equal(PARSE("-q", "999"), -1);
	said("--num-qp '999': expected an integer in 1..256");
}

static void json(void **state)
{
	(void)state;
	assert_int_equal(PARSE("--json"), 0);
	assert_string_equal(l.json_path, "-");
	assert_int_equal(PARSE("--json=out.json", "h1"), 0);
	assert_string_equal(l.json_path, "out.json");
	assert_string_equal(l.host, "h1");
	assert_string_equal(err_text, "");

	/* The word after a bare --json that can be the HOST is the HOST. */
	assert_int_equal(PARSE("--json", "h1:9000"), 0);
	assert_string_equal(l.json_path, "-");
	assert_string_equal(l.host, "h1");
	assert_string_equal(l.port, "9000");
	assert_int_equal(PARSE("--json", "-D", "5", "h1"), 0);
	assert_string_equal(l.json_path, "-");
	assert_string_equal(l.host, "h1");
	assert_string_equal(err_text, "");

	/* '--json FILE' of before: with a HOST after it, or a name that is a file's. */
	assert_int_equal(PARSE("--json", "run", "-s", "64", "h1"), 0);
	assert_string_equal(l.json_path, "run");
	assert_string_equal(l.host, "h1");
	said(
	    "warning: '--json FILE' is deprecated and goes in the next release; write --json=FILE");
	assert_int_equal(PARSE("h1", "--json", "run"), 0);
	assert_string_equal(l.json_path, "run");
	assert_string_equal(l.host, "h1");
	said("write --json=FILE");
	assert_int_equal(PARSE("--json", "server.json"), 0); /* a server's */
	assert_string_equal(l.json_path, "server.json");
	assert_null(l.host);
	said("write --json=FILE");
	assert_int_equal(PARSE("--json", "out/run"), 0);
	assert_string_equal(l.json_path, "out/run");
	assert_null(l.host);
	/* A later --json=FILE wins, and the word is an operand again. */
	assert_int_equal(PARSE("--json", "h1", "--json=b.json"), 0);
	assert_string_equal(l.json_path, "b.json");
	assert_string_equal(l.host, "h1");
}

static void usage_errors(void **state)
{
	(void)state;
	assert_int_equal(PARSE("--no-such-option"), -1);
	said("rk bench: unrecognized option '--no-such-option'");
	said("usage: rk bench");
	said("try 'rk bench --help'");
	assert_int_equal(PARSE("--size", "9M"), -1);
	said("rk bench: --size '9M': expected 1 .. 8M");
	said("try 'rk bench --help'");
	assert_int_equal(PARSE("h1", "h2"), -1);
	said("one HOST expected, got 'h2' too");
	said("try 'rk bench --help'");
	assert_int_equal(PARSE("--op", "rpc", "-Q", "4", "h1"), -1);
	said("--cq-mod: not with --op rpc");
	said("try 'rk bench --help'");
	assert_int_equal(PARSE("--mode", "lat", "--num-qp", "2", "h1"), -1);
	said("rk bench: --num-qp: latency mode uses one QP");
}

/* --pace: this side's own (not in PARAMS), milliseconds from 1 to 1000. */
static void pace(void **state)
{
	(void)state;
	assert_int_equal(PARSE("--poll", "event"), 0);
	assert_int_equal(l.pace_ms, 0);
	assert_int_equal(PARSE("--pace", "3ms", "--op", "send", "--mode", "lat", "h1"), 0);
	assert_int_equal(l.pace_ms, 3);
	assert_int_equal(PARSE("--pace=0.5s", "--op", "rpc", "--mode", "lat", "h1"), 0);
	assert_int_equal(l.pace_ms, 500);
	assert_int_equal(PARSE("--pace", "1", "--op", "write-imm", "--mode", "lat", "h1"), 0);
	assert_int_equal(l.pace_ms, 1000); /* a bare number is seconds */
	/* A server paces whatever answers it sends: no op is its to judge. */
	assert_int_equal(PARSE("--pace", "2ms"), 0);
	assert_int_equal(l.pace_ms, 2);
	assert_string_equal(err_text, "");

	assert_int_equal(PARSE("--pace", "2s"), -1);
	said("--pace '2s'");
	assert_int_equal(PARSE("--pace", "0"), -1);
	assert_int_equal(PARSE("--pace", "0.5ms"), -1);
	assert_int_equal(PARSE("--pace", "3ms", "--op", "send", "h1"), -1); /* bw */
	said(
	    "--pace: a client paces its pings and calls, in --mode lat of send, write-imm and rpc");
	assert_int_equal(PARSE("--pace", "3ms", "--op", "read", "--mode", "lat", "h1"), -1);
	said("--pace: a client paces");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(defaults),	     cmocka_unit_test(durations),
	    cmocka_unit_test(addr_and_bind), cmocka_unit_test(perftest_letters),
	    cmocka_unit_test(json),	     cmocka_unit_test(usage_errors),
	    cmocka_unit_test(pace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
