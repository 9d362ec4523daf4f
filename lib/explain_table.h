/*
 * explain_table.h - the explain table's storage, shared by explain.c (the
 * lookups) and explain_table.c (the data). Not installed.
 */
#ifndef RK_EXPLAIN_TABLE_H
#define RK_EXPLAIN_TABLE_H

#include <stddef.h>

#include <rdmakit/explain.h>

extern const struct rk_explain rk__explain_table[];
extern const size_t rk__explain_table_len;

#endif
