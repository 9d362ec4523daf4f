/*
 * rdmakit/log.h - the library's diagnostic log.
 *
 * The library reports details that help when a connection misbehaves (the
 * PSNs and MTUs both sides agreed on, CM events, async events) at debug
 * level. By default only warnings and errors are printed, to stderr. The
 * environment variable RK_LOG=debug|info|warn|error|off sets the level at
 * the first log call; rk_log_set_level() overrides it.
 *
 * Thread-safety: logging is safe from any thread; set the level and handler
 * before starting threads.
 */
#ifndef RDMAKIT_LOG_H
#define RDMAKIT_LOG_H

#include <rdmakit/common.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rk_log_level {
	RK_LOG_DEBUG = 0,
	RK_LOG_INFO = 1,
	RK_LOG_WARN = 2,
	RK_LOG_ERROR = 3,
	RK_LOG_OFF = 4,
};

/* A log sink: @msg is one line without a trailing newline. */
typedef void (*rk_log_fn)(enum rk_log_level level, const char *msg, void *arg);

/* rk_log_set_level - print messages at @level and above. */
RK_API void rk_log_set_level(enum rk_log_level level);

/* rk_log_get_level - the current level (after reading RK_LOG if not yet done). */
RK_API enum rk_log_level rk_log_get_level(void);

/*
 * rk_log_set_handler - send log lines to @fn(level, msg, @arg) instead of
 * stderr; NULL restores stderr.
 */
RK_API void rk_log_set_handler(rk_log_fn fn, void *arg);

/* rk_log - log a printf-style message at @level (used by the library, usable by tools). */
RK_API void rk_log(enum rk_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
