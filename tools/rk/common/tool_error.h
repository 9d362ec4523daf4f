/*
 * tool_error.h - the one way an rk command fills an rk_error of its own:
 * the operation is the command's name ("rk matrix", "rk doctor"), so a
 * message printed by cli_report says which command failed, whichever
 * shared code (the control channel, the plot) noticed it.
 */
#ifndef RK_CLI_TOOL_ERROR_H
#define RK_CLI_TOOL_ERROR_H

#include <stdarg.h>

#include <rdmakit/error.h>

/*
 * cli_fail - set @err (may be NULL) to @cmd's failure with errno @errnum
 * and the printf-style message. Returns -@errnum, so a caller writes
 * "return cli_fail(err, cmd, EPROTO, ...)". Thread-safe; no allocation.
 */
int cli_fail(struct rk_error *err, const char *cmd, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* cli_vfail - cli_fail with a va_list (for a command's own one-line wrapper). */
int cli_vfail(struct rk_error *err, const char *cmd, int errnum, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
