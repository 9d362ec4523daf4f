/*
 * rdmakit/common.h - definitions every rdmakit header shares.
 *
 * Conventions used across the whole API:
 *  - Handles are opaque (struct rk_xxx *), created by rk_xxx_create/open and
 *    released by the matching rk_xxx_destroy/close, which accepts NULL.
 *  - Functions that can fail return 0 (or a count) on success and a negative
 *    errno on failure, and fill a struct rk_error when the caller passes one.
 */
#ifndef RDMAKIT_COMMON_H
#define RDMAKIT_COMMON_H

#if defined(RK_BUILDING_LIB)
#define RK_API __attribute__((visibility("default")))
#else
#define RK_API
#endif

#endif
