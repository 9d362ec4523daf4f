/*
 * test_serve_config.c - rk serve's configuration file parser (good,
 * bad and hostile files) and its metrics file (format, atomic write).
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
#include <dirent.h>
#include <sys/stat.h>

#include "serve_config.h"
#include "serve_metrics.h"

static const struct sc_key keys[] = {
    {"dir", 'd', 0},	     {"port", 'p', 0}, {"read", 'r', 1},
    {"max-clients", 'c', 0}, {"idle", 'i', 0}, {NULL, 0, 0},
};

/* Parse @text; returns sc_parse's result, the line and reason in @line, @why. */
static int parse(const char *text, size_t len, struct sc_file *f, unsigned *line, char *why)
{
	int r = sc_parse(text, len, keys, f, line, why, 256);

	if (r)
		assert_true(why[0] != '\0');
	return r;
}

static const char *value_of(const struct sc_file *f, const char *key)
{
	for (unsigned i = 0; i < f->n; i++)
		if (!strcmp(f->items[i].key->name, key))
			return f->items[i].value;
	return NULL;
}

static void good_file(void **state)
{
	static const char text[] = "# rk serve\n"
				   "\n"
				   "   # indented comment\n"
				   "dir = /srv/rdmakit/a b#c\n"
				   "port=18515\r\n"
				   "\tread\t=\tyes   \n"
				   "max-clients =   4";
	struct sc_file f;
	unsigned line;
	char why[256];

	(void)state;
	assert_int_equal(parse(text, strlen(text), &f, &line, why), 0);
	assert_int_equal(f.n, 4);
	assert_string_equal(value_of(&f, "dir"), "/srv/rdmakit/a b#c");
	assert_string_equal(value_of(&f, "port"), "18515");
	assert_string_equal(value_of(&f, "read"), "1");
	assert_string_equal(value_of(&f, "max-clients"), "4");
	assert_int_equal(f.items[0].line, 4);
	assert_int_equal(f.items[3].line, 7);
	assert_int_equal(f.items[2].key->code, 'r');
	sc_free(&f);

	assert_int_equal(parse("", 0, &f, &line, why), 0);
	assert_int_equal(f.n, 0);
	sc_free(&f);
	assert_int_equal(parse("read = off\n", 11, &f, &line, why), 0);
	assert_string_equal(value_of(&f, "read"), "0");
	sc_free(&f);
}

/* @text is refused at @want_line with a reason containing @want. */
static void refused(const char *text, size_t len, unsigned want_line, const char *want)
{
	struct sc_file f;
	unsigned line = 99;
	char why[256];

	assert_int_equal(parse(text, len, &f, &line, why), -1);
	if (line != want_line || !strstr(why, want))
		fail_msg("'%s': line %u '%s', expected line %u '%s'", text, line, why, want_line,
			 want);
	sc_free(&f);
}

static void bad_files(void **state)
{
	(void)state;
	refused("dir = /a\nbogus = 1\n", 19, 2, "bogus: unknown key");
	refused("port = 1\n\nport = 2\n", 19, 3, "port: given twice (first on line 1)");
	refused("dir /a\n", 7, 1, "dir: expected '='");
	refused("dir\n", 4, 1, "dir: expected '='");
	refused("= /a\n", 5, 1, "expected 'key = value'");
	refused("Dir = /a\n", 9, 1, "expected 'key = value'");
	refused("max_clients = 1\n", 16, 1, "expected 'key = value'");
	refused("idle =   \n", 10, 1, "idle: empty value");
	refused("dir = /a # where\n", 17, 1, "dir: '#' inside a value");
	refused("dir = #a\n", 9, 1, "dir: '#' inside a value");
	refused("dir =#a\n", 8, 1, "dir: '#' inside a value");
	refused("read = maybe\n", 13, 1, "read: bad value 'maybe'");
	refused("read = YES\n", 11, 1, "read: bad value");
	refused("dir = /a\x1b[2J\n", 13, 1, "control byte (0x1b)");
	refused("port = 1\ndir = /a\0b\n", 19, 2, "control byte (0x00)");
	refused("dir = /a\rb\n", 11, 1, "control byte (0x0d)");
}

static void line_limit(void **state)
{
	char *text = malloc(SC_FILE_MAX + 2);
	struct sc_file f;
	unsigned line;
	char why[256];
	size_t n;

	(void)state;
	assert_non_null(text);
	/* Exactly SC_LINE_MAX bytes (and a CR) is a line; one more is refused, naming the key. */
	n = (size_t)sprintf(text, "dir = ");
	memset(text + n, 'a', SC_LINE_MAX - n);
	text[SC_LINE_MAX] = '\r';
	text[SC_LINE_MAX + 1] = '\n';
	assert_int_equal(parse(text, SC_LINE_MAX + 2, &f, &line, why), 0);
	assert_int_equal(strlen(value_of(&f, "dir")), SC_LINE_MAX - 6);
	sc_free(&f);
	text[SC_LINE_MAX] = 'a';
	refused(text, SC_LINE_MAX + 1, 1, "dir: line longer than 1024 bytes");
	/* A whole file of comments over the file limit. */
	memset(text, '#', SC_FILE_MAX + 1);
	for (size_t i = 100; i < SC_FILE_MAX + 1; i += 100)
		text[i] = '\n';
	refused(text, SC_FILE_MAX + 1, 0, "larger than");
	assert_int_equal(parse(text, SC_FILE_MAX, &f, &line, why), 0);
	sc_free(&f);
	free(text);
}

static char tmpdir[64];

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

static void load(void **state)
{
	char path[128], want[160], why[512];
	struct sc_file f;

	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rk-sc.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/serve-a.conf", tmpdir);
	write_file(path, "dir = /srv\nport = 1\n\nidle = 5\nidle = 6\n");
	assert_int_equal(sc_load(path, keys, &f, why, sizeof(why)), -1);
	snprintf(want, sizeof(want), "%s:5: idle: given twice", path);
	assert_non_null(strstr(why, want));
	sc_free(&f);
	write_file(path, "dir = /srv\nread = true\n");
	assert_int_equal(sc_load(path, keys, &f, why, sizeof(why)), 0);
	assert_string_equal(value_of(&f, "dir"), "/srv");
	sc_free(&f);
	/* Not a regular file, missing. */
	assert_int_equal(sc_load(tmpdir, keys, &f, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not a regular file"));
	sc_free(&f);
	assert_int_equal(sc_load("/nonexistent/x.conf", keys, &f, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "/nonexistent/x.conf: No such file"));
	sc_free(&f);
	unlink(path);
}

static void metrics(void **state)
{
	static struct sm_metrics m;
	char buf[8192], path[128], why[512];
	struct stat st;
	struct dirent *de;
	DIR *d;
	int n;

	(void)state;
	atomic_store(&m.sessions, 3);
	atomic_store(&m.bytes_received, 1ull << 33);
	atomic_store(&m.refused[SM_REF_TOKEN], 2);
	atomic_store(&m.failed[SM_FAIL_SHUTDOWN], 1);
	atomic_store(&m.registered_bytes, 4096);
	n = sm_format(&m, 1, 7, buf, sizeof(buf));
	assert_true(n > 0 && (size_t)n == strlen(buf));
	assert_non_null(strstr(buf, "# TYPE rk_serve_sessions_total counter\n"
				    "rk_serve_sessions_total 3\n"));
	assert_non_null(strstr(buf, "\nrk_serve_received_bytes_total 8589934592\n"));
	assert_non_null(strstr(buf, "\nrk_serve_refusals_total{reason=\"token\"} 2\n"));
	assert_non_null(strstr(buf, "\nrk_serve_session_failures_total{reason=\"shutdown\"} 1\n"));
	assert_non_null(strstr(buf, "\nrk_serve_sessions_active 1\n"));
	assert_non_null(strstr(buf, "\nrk_serve_registered_bytes 4096\n"));
	assert_non_null(strstr(buf, "\nrk_serve_open_fds 7\n"));
	assert_int_equal(sm_format(&m, 1, 7, buf, 100), -1);

	snprintf(path, sizeof(path), "%s/rk.prom", tmpdir);
	assert_int_equal(sm_write(path, &m, 0, why, sizeof(why)), 0);
	assert_int_equal(sm_write(path, &m, 0, why, sizeof(why)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	d = opendir(tmpdir); /* the file alone: no temporary left behind */
	assert_non_null(d);
	n = 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	assert_int_equal(n, 1);
	unlink(path);
	assert_int_equal(sm_write("/nonexistent/rk.prom", &m, 0, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "/nonexistent/rk.prom"));
	rmdir(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(good_file), cmocka_unit_test(bad_files), cmocka_unit_test(line_limit),
	    cmocka_unit_test(load),	 cmocka_unit_test(metrics),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
