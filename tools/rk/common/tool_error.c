/* tool_error.c - see tool_error.h. */
#include <stdio.h>

#include "common/tool_error.h"

int cli_vfail(struct rk_error *err, const char *cmd, int errnum, const char *fmt, va_list ap)
{
	char msg[RK_ERROR_MSG_MAX];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	return rk_error_setf(err, cmd, errnum, "%s", msg);
}

int cli_fail(struct rk_error *err, const char *cmd, int errnum, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = cli_vfail(err, cmd, errnum, fmt, ap);
	va_end(ap);
	return r;
}
