/*
 * xfer_world.h - two ends of one-sided transfers (xfer.h) in one process,
 * for the lib_xfer_flow and lib_xfer_life device tests: an owner and a
 * user over NLANES connected pairs, a 64 KiB segment each, the owner's
 * exported to the user and imported there.
 */
#ifndef XFER_WORLD_H
#define XFER_WORLD_H

#include <stdint.h>

#include "lt.h"

#define NLANES 2
#define BLK    4096u
#define BUF    (64u * 1024)

struct side {
	struct rk_conn *lanes[NLANES];
	struct rk_xfer *x;
	struct rk_xfer_peer *peer;
	uint8_t *buf;
	struct rk_xfer_seg *seg;
};

struct world {
	struct rk_device *dev;
	struct side own, usr;
	struct rk_xfer_remote *rem;
	uint64_t raddr;	  /* the owner's segment, from the descriptor */
	uint32_t rkey[2]; /* per lane, from the descriptor */
};

#define FOREIGN_ID 0x77 /* wr_id of the tests' own (foreign) work requests */

extern const struct rk_conn_opts xw_conn_opts;

/* Both ends up; @zero_based: rk_xfer_opts.zero_based. */
void world_up(struct world *w, enum rk_xfer_mode mode, int zero_based);
/* Everything down (a NULL user peer or handle is fine). */
void world_down(struct world *w);

#endif
