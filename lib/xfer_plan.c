/*
 * xfer_plan.c - how a batch becomes work requests (xfer.h): ops split at
 * the per-WR limit, striped over lanes by op, chained up to N WRs per
 * doorbell with only each chain's last WR signaled. Pure, so the unit
 * tests check the doorbell and signal counts without a device.
 */
#include <errno.h>

#include "xfer_int.h"

long rk__xplan_count(const uint64_t *lens, unsigned nops, uint32_t split, unsigned max)
{
	uint64_t total = 0;

	if (!split)
		return -EINVAL;
	for (unsigned i = 0; i < nops; i++) {
		if (!lens[i])
			return -EINVAL;
		total += lens[i] / split + (lens[i] % split != 0);
		if (total > max)
			return -E2BIG;
	}
	return (long)total;
}

long rk__xplan(const uint64_t *lens, unsigned nops, unsigned lanes, unsigned chain, uint32_t split,
	       struct rk__xwr *out, unsigned *doorbells)
{
	unsigned n = 0, chains = 0;

	if (!lanes || !chain || !split)
		return -EINVAL;
	for (unsigned lane = 0; lane < lanes; lane++) {
		unsigned in_chain = 0;

		for (unsigned i = lane; i < nops; i += lanes) {
			for (uint64_t off = 0; off < lens[i]; off += split) {
				uint64_t left = lens[i] - off;
				struct rk__xwr *w = &out[n++];

				w->op = i;
				w->off = off;
				w->len = (uint32_t)(left < split ? left : split);
				w->lane = (uint16_t)lane;
				w->first = in_chain == 0;
				w->signaled = 0;
				w->done = 0;
				if (++in_chain == chain) {
					w->signaled = 1;
					in_chain = 0;
					chains++;
				}
			}
		}
		if (in_chain) {
			out[n - 1].signaled = 1;
			chains++;
		}
	}
	if (doorbells)
		*doorbells = chains;
	return (long)n;
}
