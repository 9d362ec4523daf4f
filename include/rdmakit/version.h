/*
 * rdmakit/version.h - library version.
 */
#ifndef RDMAKIT_VERSION_H
#define RDMAKIT_VERSION_H

#include <rdmakit/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * rk_version - the library's version as "MAJOR.MINOR.PATCH".
 * Costs nothing; the string is static.
 */
RK_API const char *rk_version(void);

#ifdef __cplusplus
}
#endif

#endif
