/* serve_config.c - rk serve's configuration file: see serve_config.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "serve_config.h"

#define KEY_SHOW 64 /* bytes of an unknown key quoted in a message */

/*
 * rk serve's keys: its long options but --config and --help, each with the
 * option's short code (cmd_serve.c applies both through one switch).
 */
const struct sc_key sc_serve_keys[] = {
    {"dir", 'd', 0},	      {"addr", 'a', 0},
    {"port", 'p', 0},	      {"dev", 'D', 0},
    {"token-file", 't', 0},   {"read", 'r', 1},
    {"max-clients", 'c', 0},  {"max-file-size", 's', 0},
    {"max-files", 'f', 0},    {"max-bytes", 'b', 0},
    {"max-open", 'o', 0},     {"idle", 'i', 0},
    {"max-ring", 'R', 0},     {"tmp-age", 'A', 0},
    {"metrics-file", 'M', 0}, {NULL, 0, 0},
};

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static int is_key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static const struct sc_key *find_key(const struct sc_key *keys, const char *name)
{
	for (; keys->name; keys++)
		if (!strcmp(keys->name, name))
			return keys;
	return NULL;
}

/* yes/no and friends into "1" or "0"; NULL for anything else. */
static const char *switch_value(const char *v)
{
	static const char *const on[] = {"yes", "true", "on", "1"};
	static const char *const off[] = {"no", "false", "off", "0"};

	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		if (!strcmp(v, on[i]))
			return "1";
		if (!strcmp(v, off[i]))
			return "0";
	}
	return NULL;
}

/*
 * One line (@p, @len bytes, its line end removed, NUL-terminated in
 * place) into @out. 0, or -1 with @why set.
 */
static int parse_line(char *p, size_t len, unsigned line, const struct sc_key *keys,
		      struct sc_file *out, char *why, size_t why_len)
{
	char *key, *val, *end = p + len;
	const struct sc_key *k;
	const char *value;
	size_t klen;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			snprintf(why, why_len, "a control byte (0x%02x) in the line", c);
			return -1;
		}
	}
	while (p < end && is_blank(*p))
		p++;
	if (p == end || *p == '#')
		return 0; /* blank line or comment */
	key = p;
	while (p < end && is_key_char(*p))
		p++;
	klen = (size_t)(p - key);
	if (!klen || (p < end && !is_blank(*p) && *p != '=')) {
		snprintf(why, why_len, "expected 'key = value' (keys are long option names)");
		return -1;
	}
	while (p < end && is_blank(*p))
		p++;
	if (p == end || *p != '=') {
		snprintf(why, why_len, "%.*s: expected '=' after the key",
			 (int)(klen > KEY_SHOW ? KEY_SHOW : klen), key);
		return -1;
	}
	key[klen] = '\0'; /* a blank or the '=' */
	p++;
	while (p < end && is_blank(*p))
		p++;
	val = p;
	while (end > val && is_blank(end[-1]))
		end--;
	*end = '\0';
	k = find_key(keys, key);
	if (!k) {
		snprintf(why, why_len, "%.*s: unknown key", KEY_SHOW, key);
		return -1;
	}
	for (unsigned i = 0; i < out->n; i++)
		if (out->items[i].key == k) {
			snprintf(why, why_len, "%s: given twice (first on line %u)", k->name,
				 out->items[i].line);
			return -1;
		}
	if (!*val) {
		snprintf(why, why_len, "%s: empty value", k->name);
		return -1;
	}
	for (const char *q = val; *q; q++)
		if (*q == '#' && (q == val || is_blank(q[-1]))) {
			snprintf(why, why_len,
				 "%s: '#' inside a value (comments are lines of their own)",
				 k->name);
			return -1;
		}
	value = val;
	if (k->is_switch) {
		value = switch_value(val);
		if (!value) {
			snprintf(why, why_len, "%s: bad value '%.64s' (yes or no)", k->name, val);
			return -1;
		}
	}
	if (out->n >= SC_MAX_ITEMS) {
		snprintf(why, why_len, "%s: more than %u settings", k->name, SC_MAX_ITEMS);
		return -1;
	}
	out->items[out->n++] = (struct sc_item){.key = k, .value = value, .line = line};
	return 0;
}

int sc_parse(const char *text, size_t len, const struct sc_key *keys, struct sc_file *out,
	     unsigned *line, char *why, size_t why_len)
{
	char *p, *end;

	memset(out, 0, sizeof(*out));
	*line = 0;
	if (len > SC_FILE_MAX) {
		snprintf(why, why_len, "larger than %u bytes", SC_FILE_MAX);
		return -1;
	}
	out->buf = malloc(len + 1);
	if (!out->buf) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	if (len)
		memcpy(out->buf, text, len);
	out->buf[len] = '\0';
	p = out->buf;
	end = out->buf + len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		++*line;
		if (n && p[n - 1] == '\r')
			n--; /* CRLF */
		if (n > SC_LINE_MAX) {
			size_t k = 0;

			while (k < n && k < KEY_SHOW && is_key_char(p[k]))
				k++;
			snprintf(why, why_len, "%.*s%sline longer than %u bytes", (int)k, p,
				 k ? ": " : "", SC_LINE_MAX);
			return -1;
		}
		p[n] = '\0';
		if (parse_line(p, n, *line, keys, out, why, why_len))
			return -1;
		if (!nl)
			break;
		p = nl + 1;
	}
	*line = 0;
	return 0;
}

int sc_load(const char *path, const struct sc_key *keys, struct sc_file *out, char *why,
	    size_t why_len)
{
	char *text = NULL, reason[256];
	size_t len = 0;
	unsigned line;
	struct stat st;
	int fd, r = -1;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(why, why_len, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(why, why_len, "%s: not a regular file", path);
		goto out;
	}
	text = malloc(SC_FILE_MAX + 1);
	if (!text) {
		snprintf(why, why_len, "%s: out of memory", path);
		goto out;
	}
	for (;;) { /* one byte more than allowed tells a file that is too large */
		ssize_t n = read(fd, text + len, SC_FILE_MAX + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(why, why_len, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0 || (len += (size_t)n) > SC_FILE_MAX)
			break;
	}
	if (sc_parse(text, len, keys, out, &line, reason, sizeof(reason))) {
		if (line)
			snprintf(why, why_len, "%s:%u: %s", path, line, reason);
		else
			snprintf(why, why_len, "%s: %s", path, reason);
		goto out;
	}
	r = 0;
out:
	free(text);
	close(fd);
	return r;
}

void sc_free(struct sc_file *f)
{
	free(f->buf);
	memset(f, 0, sizeof(*f));
}
