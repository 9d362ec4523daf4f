/*
 * serve_config.c - rk serve's configuration file (--config), which a
 * package, an administrator or a configuration tool writes, and which is
 * read with the server's privileges at start.
 *
 * Asserts, for any bytes:
 *  - sc_parse accepts or refuses; a refusal names a line within the input
 *    (0: the file as a whole) and says why (a NUL-terminated reason);
 *  - what it accepts holds only rk serve's keys, each once, with values
 *    that are non-empty, at most SC_LINE_MAX bytes, free of control bytes
 *    and of blanks at either end, "0" or "1" for a switch, on lines in
 *    increasing order;
 *  - written back as "key=value" lines, the settings parse again into
 *    the very same settings. (Not "key = value": a value that filled a
 *    line of SC_LINE_MAX bytes after "key=" would not fit with blanks.)
 */
#include <string.h>

#include "fuzz.h"
#include "serve_config.h"

static void check_item(const struct sc_item *it, size_t size)
{
	size_t n = strlen(it->value);

	FUZZ_CHECK(it->key && it->key->name);
	FUZZ_CHECK(n > 0 && n <= SC_LINE_MAX);
	FUZZ_CHECK(it->value[0] != ' ' && it->value[0] != '\t');
	FUZZ_CHECK(it->value[n - 1] != ' ' && it->value[n - 1] != '\t');
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK((unsigned char)it->value[i] >= 0x20 || it->value[i] == '\t');
	if (it->key->is_switch)
		FUZZ_CHECK(!strcmp(it->value, "0") || !strcmp(it->value, "1"));
	FUZZ_CHECK(it->line >= 1 && it->line <= size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char again[SC_MAX_ITEMS * (SC_LINE_MAX + 40)];
	struct sc_file f, g;
	unsigned line;
	size_t len = 0;
	char why[256];

	memset(why, 0x55, sizeof(why));
	if (sc_parse((const char *)data, size, sc_serve_keys, &f, &line, why, sizeof(why))) {
		FUZZ_CHECK(memchr(why, '\0', sizeof(why)) && why[0] != '\0');
		FUZZ_CHECK(line <= size);
		sc_free(&f);
		return 0;
	}
	FUZZ_CHECK(line == 0 && f.n <= SC_MAX_ITEMS);
	for (unsigned i = 0; i < f.n; i++) {
		check_item(&f.items[i], size);
		for (unsigned j = 0; j < i; j++)
			FUZZ_CHECK(f.items[j].key != f.items[i].key &&
				   f.items[j].line < f.items[i].line);
		len += (size_t)snprintf(again + len, sizeof(again) - len, "%s=%s\n",
					f.items[i].key->name, f.items[i].value);
		FUZZ_CHECK(len < sizeof(again));
	}
	FUZZ_CHECK(sc_parse(again, len, sc_serve_keys, &g, &line, why, sizeof(why)) == 0);
	FUZZ_CHECK(g.n == f.n);
	for (unsigned i = 0; i < f.n; i++)
		FUZZ_CHECK(g.items[i].key == f.items[i].key &&
			   !strcmp(g.items[i].value, f.items[i].value) && g.items[i].line == i + 1);
	sc_free(&g);
	sc_free(&f);
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static const char example[] =
	    "# rk serve --config: the example of the documentation\n"
	    "dir = /srv/rdmakit/incoming\n"
	    "addr = 10.0.0.1\n"
	    "port = 18515\n"
	    "token-file = /etc/rdmakit/token\n"
	    "read = no\n"
	    "max-clients = 16\n"
	    "max-file-size = 1T\n"
	    "max-files = 1000000\n"
	    "max-bytes = 16T\n"
	    "max-open = 128\n"
	    "idle = 60\n"
	    "max-ring = 64M\n"
	    "tmp-age = 86400\n"
	    "metrics-file = /var/lib/prometheus/node-exporter/rk-serve.prom\n"
	    "dev = rxe0\n";
	static const char crlf[] = "\r\n  # windows\r\n\tdir\t=\t/a b\t\r\nread=on\r\n";
	static const char dup[] = "port = 1\nport = 2\n";
	static const char unknown[] = "dir = /a\nconfig = /etc/other.conf\n";
	static const char hash[] = "dir = /a # comment\n";
	static const char ctrl[] = "dir = /a\x1b]0;x\x07\n";
	char longline[SC_LINE_MAX + 16];

	emit("example", example, sizeof(example) - 1);
	emit("crlf", crlf, sizeof(crlf) - 1);
	emit("duplicate", dup, sizeof(dup) - 1);
	emit("unknown", unknown, sizeof(unknown) - 1);
	emit("hash", hash, sizeof(hash) - 1);
	emit("control", ctrl, sizeof(ctrl) - 1);
	emit("nul", "dir = /a\0b\n", 11);
	memset(longline, 'x', sizeof(longline) - 1);
	longline[0] = 'd'; /* "dir = xxx...": a key, then a value too long */
	longline[1] = 'i';
	longline[2] = 'r';
	longline[3] = ' ';
	longline[4] = '=';
	longline[5] = ' ';
	longline[sizeof(longline) - 1] = '\n';
	emit("long-line", longline, sizeof(longline));
	emit("max-line", longline, SC_LINE_MAX); /* no line end: the longest allowed */
}
