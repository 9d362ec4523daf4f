/* copy_token.c - see copy_token.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "copy_proto.h"
#include "copy_token.h"

#define TOKEN_FILE_MAX 4096

int cp_token_load(const char *path, uint8_t out[CP_TOKEN_LEN], char *why, size_t why_len)
{
	char buf[TOKEN_FILE_MAX + 1];
	size_t len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		snprintf(why, why_len, "%s: %s", path, strerror(e));
		return -e;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			snprintf(why, why_len, "%s: %s", path, strerror(e));
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf))
			break;
	}
	close(fd);
	if (len > TOKEN_FILE_MAX) {
		snprintf(why, why_len, "%s: token file larger than %d bytes", path, TOKEN_FILE_MAX);
		return -EINVAL;
	}
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ' ||
		       buf[len - 1] == '\t'))
		len--;
	if (!len) {
		snprintf(why, why_len, "%s: empty token file", path);
		return -EINVAL;
	}
	cp_hash128(buf, len, out);
	return 0;
}

int cp_token_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	return cli_equal_ct(a, b, len);
}
