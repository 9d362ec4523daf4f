/*
 * kv_cache.h - example 10's two sides and the options they share
 * (kv_cache.c parses them; kv_server.c and kv_client.c run them).
 */
#ifndef KV_CACHE_H
#define KV_CACHE_H

#include <rdmakit/rdmakit.h>

#include "ex_common.h"

#define KV_TIMEOUT_MS 15000 /* every call, connect step and batch */
#define KV_BATCH_MAX  64    /* --batch: blocks per rk_xfer_post, at most */

struct kv_args {
	struct ex_pair pair;
	char data_port[8];	/* the data lanes' port: PORT + 1 */
	long blocks;		/* server: blocks held */
	long clients;		/* server: exit after this many said bye and left; 0 = never */
	enum rk_xfer_mode mode; /* server: how access is controlled */
	long lease_s;		/* server: access lasts this long after a hello or lookup */
	long keys;		/* client: keys looked up, 0 .. keys - 1 */
	long batch;		/* client: blocks per READ batch */
};

void kv_server(void *arg, int ready_fd);
void kv_client(void *arg);

#endif
