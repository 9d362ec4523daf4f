/*
 * time.c - monotonic clock and deadline arithmetic shared by every wait.
 */
#include <fcntl.h>
#include <time.h>

#include "rk_internal.h"

int64_t rk__now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t rk__now_ms(void)
{
	return rk__now_us() / 1000;
}

int64_t rk__deadline(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : rk__now_ms() + timeout_ms;
}

int rk__ms_left(int64_t deadline_ms)
{
	int64_t left;

	if (deadline_ms < 0)
		return -1;
	left = deadline_ms - rk__now_ms();
	if (left <= 0)
		return 0;
	return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

int rk__set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}
