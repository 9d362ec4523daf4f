/*
 * log.c - the diagnostic log: level from RK_LOG, sink to stderr or a hook.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmakit/log.h>

static enum rk_log_level log_level = RK_LOG_WARN;
static int log_level_set; /* 1 once RK_LOG was read or a level was set */
static rk_log_fn log_fn;
static void *log_arg;

static enum rk_log_level level_from_env(void)
{
	static const char *names[] = {"debug", "info", "warn", "error", "off"};
	const char *v = getenv("RK_LOG");

	if (!v)
		return RK_LOG_WARN;
	for (int i = 0; i <= RK_LOG_OFF; i++)
		if (strcmp(v, names[i]) == 0)
			return (enum rk_log_level)i;
	return RK_LOG_WARN;
}

void rk_log_set_level(enum rk_log_level level)
{
	log_level = level;
	log_level_set = 1;
}

enum rk_log_level rk_log_get_level(void)
{
	/* Benign race: every thread computes the same value from the environment. */
	if (!log_level_set) {
		log_level = level_from_env();
		log_level_set = 1;
	}
	return log_level;
}

void rk_log_set_handler(rk_log_fn fn, void *arg)
{
	log_fn = fn;
	log_arg = arg;
}

void rk_log(enum rk_log_level level, const char *fmt, ...)
{
	static const char *tags[] = {"debug", "info", "warn", "error", "off"};
	char line[512];
	va_list ap;

	if (level < rk_log_get_level() || level >= RK_LOG_OFF)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_fn)
		log_fn(level, line, log_arg);
	else
		fprintf(stderr, "rdmakit %s: %s\n", tags[level], line);
}
