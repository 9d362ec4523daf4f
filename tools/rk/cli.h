/*
 * cli.h - small helpers every rk subcommand shares: parsing sizes, numbers
 * and HOST[:PORT] arguments, printing sizes and rates, and reporting an
 * rk_error.  Nothing here knows about any one subcommand.
 */
#ifndef RK_CLI_H
#define RK_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rdmakit/error.h>

/*
 * cli_parse_size - "4096", "64K", "8M", "1G" (also "KiB", "MB"...; powers of
 * two) into *out. Returns 0, or -1 on junk, a negative value or overflow.
 */
int cli_parse_size(const char *s, uint64_t *out);

/* cli_parse_uint - a decimal integer in [min, max] into *out; 0 or -1. */
int cli_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/*
 * cli_split_host_port - split "host", "host:port", "[v6addr]" or
 * "[v6addr]:port" into @host (NUL-terminated, brackets removed) and @port
 * (left unchanged when absent). A bare IPv6 literal with several colons is
 * taken as a host without port. Returns 0, or -1 when a part is empty or
 * does not fit.
 */
int cli_split_host_port(const char *arg, char *host, size_t host_len, char *port, size_t port_len);

/*
 * Durations, the one way every rk command reads them (--timeout, --idle,
 * --duration, --watchdog, --wait ...): a number with a unit, "500ms",
 * "30s", "2m", "1h", a fraction allowed ("1.5s"); a bare number is seconds.
 *
 * cli_parse_duration - @s into milliseconds in *@ms. Returns 0, or -1 on
 * junk, a value that is not a whole number of milliseconds, or overflow.
 */
int cli_parse_duration(const char *s, uint64_t *ms);

/* cli_is_bare_number - whether @s is digits only (a duration without unit). */
int cli_is_bare_number(const char *s);

/* cli_fmt_duration - @ms as "1h", "2m", "30s", "1500ms" (the largest exact unit); returns @buf. */
const char *cli_fmt_duration(uint64_t ms, char *buf, size_t len);

/*
 * cli_duration_opt - option @opt's value @arg as a duration from @min_ms to
 * @max_ms, a whole multiple of @step_ms (1000: whole seconds), into *@ms.
 * Returns 0, or cli_usage_error's RK_EXIT_USAGE with the range and the
 * accepted forms said.
 */
int cli_duration_opt(const char *cmd, const char *synopsis, const char *opt, const char *arg,
		     uint64_t min_ms, uint64_t max_ms, uint64_t step_ms, uint64_t *ms);

/*
 * --json[=FILE], the same in every command: getopt_long's optional_argument
 * (so "--json=FILE", never "--json FILE"); without FILE (or with "-") the
 * document goes to stdout, with FILE it is written there whole (a
 * temporary renamed into place, so a reader never sees half of it).
 *
 * cli_json_path - what --json's @optarg selects: "-" for stdout, else FILE.
 */
const char *cli_json_path(const char *optarg);

/* cli_json_to_stdout - whether @path (from cli_json_path, or NULL: no --json) is stdout. */
int cli_json_to_stdout(const char *path);

/*
 * cli_json_legacy_file - for a command without operands whose --json took
 * a FILE as the next word ("--json FILE", rk matrix and rk bench before
 * --json[=FILE]): when --json came without '=' and the next word is not an
 * option, take it as FILE (optind moves past it) and warn once, naming
 * --json=FILE. Returns FILE, or @optarg's reading when there is none.
 * Call right after getopt_long returned --json.
 */
const char *cli_json_legacy_file(const char *cmd, int argc, char **argv, const char *optarg);

/*
 * cli_json_emit - @text and a newline to stdout (@path "-") or into FILE
 * @path (written to PATH.tmpPID, then renamed). Returns 0, or -1 with
 * "rk CMD: --json FILE: reason" printed to stderr.
 */
int cli_json_emit(const char *cmd, const char *path, const char *text);

/*
 * cli_deprecated - the one-line warning for a spelling kept for one more
 * release: "rk CMD: warning: OLD is deprecated and goes in the next
 * release; write NEW". Printed on stderr, once per use.
 */
void cli_deprecated(const char *cmd, const char *old, const char *now);

/*
 * cli_deprecated_quiet - from now on cli_deprecated prints nothing: for
 * the processes of a job that run the same command line as one that does
 * print (rk matrix's ranks but 0), so a job of 64 ranks says it once.
 */
void cli_deprecated_quiet(void);

/*
 * cli_print_options - the option vocabulary every rk command shares (rk
 * help options, the table in README.md): @check 0 the table for people,
 * 1 the same facts as tab-separated lines for tests/docs/options_vocab.py.
 */
void cli_print_options(FILE *out, int check);

/* cli_fmt_bytes - "1.50 MiB" into @buf; returns @buf. */
const char *cli_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/*
 * cli_fmt_rate - bytes per second as "1.23 MiB/s" (KiB, MiB, GiB: the same
 * units as cli_fmt_bytes, so one line never mixes bits and bytes) into
 * @buf; returns @buf.
 */
const char *cli_fmt_rate(double bytes_per_s, char *buf, size_t len);

/*
 * cli_have_program - whether @name is an executable file in one of $PATH's
 * directories: a tool that needs a helper program (gnuplot for --plot)
 * says so before a run, not after it.
 */
int cli_have_program(const char *name);

/* cli_now_ns - monotonic clock in nanoseconds. */
uint64_t cli_now_ns(void);

/*
 * cli_name_thread - name the calling thread (at most 15 characters are
 * kept), so that top -H, perf and gdb tell a tool's threads apart. Costs one
 * system call; a failure is ignored (the name is only a help).
 */
void cli_name_thread(const char *name);

/*
 * cli_clean_text - @len bytes of text from a peer made safe for a terminal:
 * printable ASCII kept, every other byte (escapes, control characters, NUL,
 * anything beyond ASCII) shown as '?'. Cut to fit @dst (@dst_len >= 1) and
 * NUL-terminated; returns the length written. Inline, as is cli_equal_ct:
 * codec files linked on their own (unit tests, fuzz targets) use them
 * without pulling in the rest of this file.
 */
static inline size_t cli_clean_text(char *dst, size_t dst_len, const void *src, size_t len)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t n = len < dst_len - 1 ? len : dst_len - 1;

	for (size_t i = 0; i < n; i++)
		dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
	dst[n] = '\0';
	return n;
}

/*
 * cli_equal_ct - 1 if the @len bytes at @a and @b are equal, else 0, in a
 * time that does not depend on where they differ (for secrets: tokens, keys).
 */
static inline int cli_equal_ct(const void *a, const void *b, size_t len)
{
	const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
	volatile unsigned char diff = 0;

	for (size_t i = 0; i < len; i++)
		diff |= x[i] ^ y[i];
	return diff == 0;
}

/* cli_report - print "rk PROG: WHAT: <error text>" and the hint, if any, to stderr. */
/* cli_hex - @len bytes as 2 * @len lowercase hex digits and a NUL, into @out. */
void cli_hex(const uint8_t *b, size_t len, char *out);

/*
 * cli_unhex - the bytes @s_len hex digits (either case) stand for, into
 * @out (at most @max): their count, or -1 for an odd length, a length
 * over @max bytes or anything not a hex digit. @s is a peer's: checked whole.
 */
int cli_unhex(const char *s, size_t s_len, uint8_t *out, size_t max);

void cli_report(const char *prog, const char *what, const struct rk_error *err);

/*
 * cli_usage_error - the one way every rk command reports a bad command
 * line, as scp and rsync do: "rk CMD: MESSAGE", then @synopsis (the
 * command's "usage:" lines, ending in a newline) and "try 'rk CMD --help'",
 * on stderr; not the whole help. Returns RK_EXIT_USAGE.
 */
int cli_usage_error(const char *cmd, const char *synopsis, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct option;

/*
 * cli_option_error - cli_usage_error for an option getopt_long() returned
 * '?' for (the command set opterr = 0, so getopt printed nothing): names
 * the unknown option, or the option whose value is missing. @argv,
 * @shortopts and @longopts are what getopt_long was given.
 */
int cli_option_error(const char *cmd, const char *synopsis, char *const *argv,
		     const char *shortopts, const struct option *longopts);

struct rk_device_opts;

/*
 * cli_device_failed - why rk_device_open failed (@err), for the message
 * and the exit code: a name the resolver does not know (the device is
 * chosen by the route to the peer) is the peer's side (RK_EXIT_LOST);
 * anything else is this host's RDMA set-up (RK_EXIT_FAILURE), and the text
 * in @why says so and points to rk doctor. Returns the exit code.
 */
int cli_device_failed(const struct rk_error *err, char *why, size_t why_len);

/*
 * cli_device_opts - how every rk command picks its device, in this order:
 * --dev (@dev); else the device owning the local address @addr (--addr,
 * --bind; given with --dev too, it picks the GID); else $RK_DEV; else the
 * one the route to @peer leaves by; else
 * the only device (rk_device_open names the candidates when several fit
 * and nothing decides). Fills the name, address and peer of @o; NULLs and
 * an empty $RK_DEV mean "not given". The strings must outlive @o.
 */
void cli_device_opts(struct rk_device_opts *o, const char *dev, const char *addr, const char *peer);

#endif
