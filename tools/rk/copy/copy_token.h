/*
 * copy_token.h - the shared access token of rk serve / rk copy.
 *
 * Both sides read the token from a file (trailing whitespace ignored) and
 * reduce it to its XXH3-128 digest, which travels in the rdma_cm hello (at
 * most 32 bytes fit there). The server compares digests in constant time
 * and refuses a wrong or missing one before the connection exists, so no
 * data moves for a client without the token.
 *
 * The connect request is not encrypted: the token keeps out the wrong
 * clients of a trusted fabric, it is no defence against someone who can
 * sniff it.
 */
#ifndef RK_COPY_TOKEN_H
#define RK_COPY_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#define CP_TOKEN_LEN 16

/*
 * cp_token_load - read @path (at most 4 KiB, non-empty after trimming) and
 * digest it into @out. Returns 0 or a negative errno (-EINVAL: empty or too
 * large); @why receives a short reason.
 */
int cp_token_load(const char *path, uint8_t out[CP_TOKEN_LEN], char *why, size_t why_len);

/* cp_token_equal - constant-time comparison of @len bytes; 1 if equal. */
int cp_token_equal(const uint8_t *a, const uint8_t *b, size_t len);

#endif
