/*
 * serve_config.h - rk serve's configuration file (--config FILE).
 *
 * The format, kept small so that it is read the same way by people, by
 * packaging scripts and by this parser:
 *
 *   # a comment: a line whose first non-blank character is '#'
 *   key = value
 *   read = yes
 *
 * One setting per line; keys are rk serve's long option names (dir, port,
 * max-clients, ...); blanks around the key and the value are ignored; a
 * value runs to the end of its line (no quoting, no escapes). A '#' that
 * starts a value or follows a blank in it is refused rather than taken as a comment, so a
 * trailing comment never becomes part of a path. A switch (read) takes
 * yes/no, true/false, on/off or 1/0. A CRLF line end is accepted.
 *
 * Refused, naming the line and the key: an unknown key, a key given twice,
 * a line without '=', an empty value, a line over SC_LINE_MAX bytes, a NUL
 * or control byte; a file over SC_FILE_MAX bytes is refused whole. The
 * parser only splits and checks syntax: values are checked by the caller
 * with the very parsers its flags use, so both accept the same values.
 */
#ifndef RK_SERVE_CONFIG_H
#define RK_SERVE_CONFIG_H

#include <stddef.h>

#define SC_LINE_MAX  1024u  /* bytes of one line, without its line end */
#define SC_FILE_MAX  65536u /* bytes of the whole file */
#define SC_MAX_ITEMS 32u    /* settings at most (each key once) */

/* A key the caller accepts: its name and what it stands for (its option code). */
struct sc_key {
	const char *name;
	int code;
	int is_switch; /* takes yes/no instead of a value */
};

/* rk serve's keys (NULL-terminated): its long options but config and help. */
extern const struct sc_key sc_serve_keys[];

/* One setting read from the file. */
struct sc_item {
	const struct sc_key *key;
	const char *value; /* within the sc_file's buffer; "1" or "0" for a switch */
	unsigned line;	   /* 1-based */
};

struct sc_file {
	struct sc_item items[SC_MAX_ITEMS];
	unsigned n;
	char *buf; /* the values, NUL-terminated */
};

/*
 * sc_parse - split @len bytes of @text into settings whose keys are in
 * @keys (terminated by a NULL name) into @out. Returns 0, or -1 with
 * *@line the line at fault (0: the file as a whole) and @why the reason,
 * naming the key when there is one. @out needs sc_free either way.
 */
int sc_parse(const char *text, size_t len, const struct sc_key *keys, struct sc_file *out,
	     unsigned *line, char *why, size_t why_len);

/*
 * sc_load - read @path (at most SC_FILE_MAX bytes) and sc_parse it. On
 * failure @why reads "PATH:LINE: reason" (or "PATH: reason").
 */
int sc_load(const char *path, const struct sc_key *keys, struct sc_file *out, char *why,
	    size_t why_len);

/* sc_free - release what sc_parse or sc_load kept; @f may be zeroed. */
void sc_free(struct sc_file *f);

#endif
