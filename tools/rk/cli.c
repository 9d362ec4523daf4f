/* cli.c - see cli.h. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <rdmakit/device.h>

#include "cli.h"
#include "common/deadline.h"
#include "commands.h"

int cli_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (shift && end[0] == 'i' && end[1] == 'B')
		end += 2;
	else if (shift && end[0] == 'B')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int cli_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int copy_part(const char *p, size_t n, char *dst, size_t dst_len)
{
	if (n == 0 || n >= dst_len)
		return -1;
	memcpy(dst, p, n);
	dst[n] = '\0';
	return 0;
}

int cli_split_host_port(const char *arg, char *host, size_t host_len, char *port, size_t port_len)
{
	const char *colon;

	if (!arg || !*arg)
		return -1;
	if (arg[0] == '[') {
		const char *close = strchr(arg, ']');

		if (!close || copy_part(arg + 1, (size_t)(close - arg - 1), host, host_len))
			return -1;
		if (close[1] == '\0')
			return 0;
		if (close[1] != ':')
			return -1;
		return copy_part(close + 2, strlen(close + 2), port, port_len);
	}
	colon = strchr(arg, ':');
	if (!colon || strchr(colon + 1, ':')) /* none, or a bare IPv6 literal */
		return copy_part(arg, strlen(arg), host, host_len);
	if (copy_part(arg, (size_t)(colon - arg), host, host_len))
		return -1;
	return copy_part(colon + 1, strlen(colon + 1), port, port_len);
}

const char *cli_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	unsigned i = 0;

	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.2f %s", v, unit[i]);
	return buf;
}

const char *cli_fmt_rate(double bytes_per_s, char *buf, size_t len)
{
	if (bytes_per_s >= 1024.0 * 1024 * 1024)
		snprintf(buf, len, "%.2f GiB/s", bytes_per_s / (1024.0 * 1024 * 1024));
	else if (bytes_per_s >= 1024.0 * 1024)
		snprintf(buf, len, "%.2f MiB/s", bytes_per_s / (1024.0 * 1024));
	else
		snprintf(buf, len, "%.2f KiB/s", bytes_per_s / 1024.0);
	return buf;
}

int cli_have_program(const char *name)
{
	const char *path = getenv("PATH"), *p, *end;
	char file[4096];

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p; p = *end ? end + 1 : end) {
		size_t n;

		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		n = (size_t)(end - p);
		if (n && n + strlen(name) + 2 <= sizeof(file)) {
			snprintf(file, sizeof(file), "%.*s/%s", (int)n, p, name);
			if (access(file, X_OK) == 0)
				return 1;
		}
	}
	return 0;
}

uint64_t cli_now_ns(void)
{
	return cli_deadline_now();
}

void cli_name_thread(const char *name)
{
	(void)prctl(PR_SET_NAME, name, 0, 0, 0);
}

void cli_report(const char *prog, const char *what, const struct rk_error *err)
{
	const char *text = rk_error_str(err);

	fprintf(stderr, "rk %s: %s%s%s\n", prog, what, *text ? ": " : "", text);
	if (err && err->hint && !strstr(text, err->hint))
		fprintf(stderr, "rk %s: hint: %s\n", prog, err->hint);
}

int cli_usage_error(const char *cmd, const char *synopsis, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rk %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%stry 'rk %s --help' for the options\n", synopsis, cmd);
	return RK_EXIT_USAGE;
}

int cli_option_error(const char *cmd, const char *synopsis, char *const *argv,
		     const char *shortopts, const struct option *longopts)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "";
	size_t len = strcspn(arg, "=");

	if (optopt == 0) /* a long option getopt does not know (or an ambiguous prefix) */
		return cli_usage_error(cmd, synopsis, "unrecognized option '%.*s'", (int)len, arg);
	if (strncmp(arg, "--", 2) == 0) /* a known long option without its value */
		for (const struct option *o = longopts; o && o->name; o++)
			if (o->val == optopt && o->has_arg == required_argument &&
			    strncmp(arg + 2, o->name, len - 2) == 0)
				return cli_usage_error(cmd, synopsis, "option '--%s' needs a value",
						       o->name);
	if (optopt > ' ' && optopt < 0x7f && optopt != ':' && strchr(shortopts, optopt))
		return cli_usage_error(cmd, synopsis, "option '-%c' needs a value", optopt);
	if (optopt > ' ' && optopt < 0x7f)
		return cli_usage_error(cmd, synopsis, "unrecognized option '-%c'", optopt);
	return cli_usage_error(cmd, synopsis, "unrecognized option '%.*s'", (int)len, arg);
}

int cli_device_failed(const struct rk_error *err, char *why, size_t why_len)
{
	if (strcmp(err->op, "getaddrinfo") == 0) {
		snprintf(why, why_len, "cannot resolve the peer: %s", rk_error_str(err));
		return RK_EXIT_LOST;
	}
	snprintf(why, why_len, "this host's RDMA device: %s; 'rk doctor' checks this host's set-up",
		 rk_error_str(err));
	return RK_EXIT_FAILURE;
}

void cli_device_opts(struct rk_device_opts *o, const char *dev, const char *addr, const char *peer)
{
	const char *env = getenv("RK_DEV");

	o->name = dev && *dev ? dev : NULL;
	o->addr = addr && *addr ? addr : NULL; /* with a name too: it picks the GID */
	if (!o->name && !o->addr && env && *env)
		o->name = env;
	o->peer = !o->name && !o->addr ? peer : NULL;
}

void cli_hex(const uint8_t *b, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * len] = 0;
}

static int nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int cli_unhex(const char *s, size_t s_len, uint8_t *out, size_t max)
{
	if (s_len % 2 || s_len / 2 > max)
		return -1;
	for (size_t i = 0; i < s_len / 2; i++) {
		int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (int)(s_len / 2);
}

int cli_is_bare_number(const char *s)
{
	if (!s || !*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

int cli_parse_duration(const char *s, uint64_t *ms)
{
	static const struct {
		const char *name;
		uint64_t ms;
	} units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"", 1000}};
	uint64_t whole = 0, frac = 0, frac_div = 1;
	const char *p = s;
	int digits = 0;

	if (!s)
		return -1;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		uint64_t d = (uint64_t)(*p - '0');

		/* Exact: every value up to UINT64_MAX reads, so what cli_fmt_duration writes reads
		 * back. */
		if (whole > UINT64_MAX / 10 || whole * 10 > UINT64_MAX - d)
			return -1;
		whole = whole * 10 + d;
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
			if (frac_div > 1000000) /* finer than a nanosecond: not a duration */
				return -1;
			frac = frac * 10 + (uint64_t)(*p - '0');
			frac_div *= 10;
		}
	}
	if (!digits)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		uint64_t u = units[i].ms;

		if (strcmp(p, units[i].name) != 0)
			continue;
		/* whole * u + frac * u / frac_div, exact in milliseconds or refused */
		if (whole > UINT64_MAX / u || (frac * u) % frac_div)
			return -1;
		if (whole * u > UINT64_MAX - frac * u / frac_div)
			return -1;
		*ms = whole * u + frac * u / frac_div;
		return 0;
	}
	return -1;
}

const char *cli_fmt_duration(uint64_t ms, char *buf, size_t len)
{
	if (ms && ms % 3600000 == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
	else if (ms && ms % 60000 == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
	return buf;
}

int cli_duration_opt(const char *cmd, const char *synopsis, const char *opt, const char *arg,
		     uint64_t min_ms, uint64_t max_ms, uint64_t step_ms, uint64_t *ms)
{
	char lo[32], hi[32];
	uint64_t v;

	if (cli_parse_duration(arg, &v) == 0 && v >= min_ms && v <= max_ms &&
	    (step_ms <= 1 || v % step_ms == 0)) {
		*ms = v;
		return 0;
	}
	return cli_usage_error(cmd, synopsis,
			       "%s '%s': expected a duration from %s to %s%s (a number and a "
			       "unit: 500ms, 30s, 2m, 1h; a bare number is seconds)",
			       opt, arg, cli_fmt_duration(min_ms, lo, sizeof(lo)),
			       cli_fmt_duration(max_ms, hi, sizeof(hi)),
			       step_ms == 1000 ? " in whole seconds" : "");
}

const char *cli_json_path(const char *optarg)
{
	return optarg && *optarg ? optarg : "-";
}

int cli_json_to_stdout(const char *path)
{
	return path && strcmp(path, "-") == 0;
}

const char *cli_json_legacy_file(const char *cmd, int argc, char **argv, const char *optarg)
{
	if (!optarg && optind < argc && argv[optind][0] != '-') {
		cli_deprecated(cmd, "'--json FILE'", "--json=FILE");
		return argv[optind++];
	}
	return cli_json_path(optarg);
}

int cli_json_emit(const char *cmd, const char *path, const char *text)
{
	char tmp[4096];
	FILE *f;
	int bad;

	if (!path || cli_json_to_stdout(path)) {
		printf("%s\n", text);
		return fflush(stdout) ? -1 : 0;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid()) >= sizeof(tmp)) {
		fprintf(stderr, "rk %s: --json %s: name too long\n", cmd, path);
		return -1;
	}
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "rk %s: --json %s: %s\n", cmd, tmp, strerror(errno));
		return -1;
	}
	bad = fprintf(f, "%s\n", text) < 0;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path)) {
		fprintf(stderr, "rk %s: --json %s: %s\n", cmd, path, strerror(errno ? errno : EIO));
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int deprecated_quiet;

void cli_deprecated_quiet(void)
{
	deprecated_quiet = 1;
}

void cli_deprecated(const char *cmd, const char *old, const char *now)
{
	if (deprecated_quiet)
		return;
	fprintf(stderr, "rk %s: warning: %s is deprecated and goes in the next release; write %s\n",
		cmd, old, now);
}
