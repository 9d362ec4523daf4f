/*
 * doctor_report.c - rk doctor's report: every check adds one line (verdict,
 * text, fix) that is printed as it is found, and kept for --json with the
 * facts the checks gathered.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmakit/explain.h>

#include "doctor.h"

int doc_quiet;

static const char *mark(enum doc_verdict v)
{
	switch (v) {
	case DOC_OK:
		return "\u2713"; /* ✓ */
	case DOC_WARN:
		return "!";
	case DOC_FAIL:
		return "\u2717"; /* ✗ */
	case DOC_SKIP:
		return "-";
	}
	return "?";
}

static const char *verdict_str(enum doc_verdict v)
{
	switch (v) {
	case DOC_OK:
		return "ok";
	case DOC_WARN:
		return "warn";
	case DOC_FAIL:
		return "fail";
	case DOC_SKIP:
		return "not checked";
	}
	return "?";
}

void doc_add(struct doc_report *r, enum doc_verdict v, const char *check, const char *fix,
	     const char *fmt, ...)
{
	struct json_object *o = json_object_new_object();
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (v == DOC_FAIL)
		r->nfail++;
	else if (v == DOC_WARN)
		r->nwarn++;
	else if (v == DOC_SKIP)
		r->nskip++;
	json_object_object_add(o, "check", json_object_new_string(check));
	json_object_object_add(o, "verdict", json_object_new_string(verdict_str(v)));
	json_object_object_add(o, "text", json_object_new_string(text));
	if (fix)
		json_object_object_add(o, "fix", json_object_new_string(fix));
	json_object_array_add(r->checks, o);
	if (doc_quiet)
		return;
	printf("%s %-8s %s\n", mark(v), check, text);
	if (fix)
		printf("  %-8s fix: %s\n", "", fix);
}

void doc_explain(struct doc_report *r, const struct rk_explain *e, const char *check)
{
	size_t n = json_object_array_length(r->checks);
	struct json_object *line = n ? json_object_array_get_idx(r->checks, n - 1) : NULL;
	struct json_object *o = json_object_new_object();

	if (e) {
		struct json_object *causes = json_object_new_array(),
				   *fixes = json_object_new_array();

		json_object_object_add(o, "name", json_object_new_string(e->name));
		json_object_object_add(o, "kind",
				       json_object_new_string(rk_explain_kind_str(e->kind)));
		json_object_object_add(o, "meaning", json_object_new_string(e->meaning));
		if (!doc_quiet)
			printf("  %-8s %s %s (%s): %s\n", "", rk_explain_kind_str(e->kind), e->name,
			       rk_explain_text(e), e->meaning);
		if (!doc_quiet && e->causes[0])
			printf("  %-8s likely causes, in order:\n", "");
		for (int i = 0; i < RK_EXPLAIN_LIST_MAX && e->causes[i]; i++) {
			json_object_array_add(causes, json_object_new_string(e->causes[i]));
			if (!doc_quiet)
				printf("  %-8s   %d. %s?\n", "", i + 1, e->causes[i]);
		}
		for (int i = 0; i < RK_EXPLAIN_LIST_MAX && e->fixes[i]; i++) {
			json_object_array_add(fixes, json_object_new_string(e->fixes[i]));
			if (!doc_quiet)
				printf("  %-8s fix: %s\n", "", e->fixes[i]);
		}
		json_object_object_add(o, "causes", causes);
		json_object_object_add(o, "fixes", fixes);
	}
	if (check) {
		json_object_object_add(o, "check", json_object_new_string(check));
		if (!doc_quiet)
			printf("  %-8s check: %s\n", "", check);
	}
	if (line)
		json_object_object_add(line, "explain", o);
	else
		json_object_put(o);
}

void doc_run_local(struct doc_report *r)
{
	memset(r, 0, sizeof(*r));
	r->checks = json_object_new_array();
	r->facts = json_object_new_object();
	doc_check_kernel(r);
	doc_check_ports(r);
	doc_check_gids(r);
	doc_check_memlock(r);
	doc_check_cm(r);
	doc_check_caps(r);
}

void doc_report_free(struct doc_report *r)
{
	json_object_put(r->checks);
	json_object_put(r->facts);
	r->checks = r->facts = NULL;
}

struct json_object *doc_fact(struct doc_report *r, const char *section)
{
	struct json_object *o;

	if (json_object_object_get_ex(r->facts, section, &o))
		return o;
	o = json_object_new_object();
	json_object_object_add(r->facts, section, o);
	return o;
}

int doc_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	buf[0] = '\0';
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return 0;
}

int doc_read_int(const char *path, long *out)
{
	char buf[64], *end;
	int r = doc_read_file(path, buf, sizeof(buf));

	if (r)
		return r;
	*out = strtol(buf, &end, 0);
	return end == buf ? -EINVAL : 0;
}
