/*
 * copy_budget.h - rk serve's share of the process's limits: file
 * descriptors and locked (registered) memory, divided among --max-clients
 * sessions at start, so that the last session admitted gets what the
 * first did instead of an EMFILE or ENOMEM halfway through a file; and
 * how deep rk copy's pipeline may be by default within the same limit.
 */
#ifndef RK_COPY_BUDGET_H
#define RK_COPY_BUDGET_H

#include <stdint.h>

#include "copy_proto.h"

/*
 * cp_fit_fds - raise the soft fd limit to the hard one, then lower
 * @max_open so that @max_clients sessions fit beside @reserve fds.
 * Returns the limit in force, or 0 (with a message on stderr) when not
 * even one open file per session fits.
 */
uint64_t cp_fit_fds(unsigned max_clients, unsigned reserve, uint32_t *max_open);

/*
 * cp_fit_memlock - raise the soft RLIMIT_MEMLOCK to the hard one, then
 * make *@max_clients sessions' registered memory (cp_session_pinned) fit
 * in it: first by a smaller *@max_ring, down to CP_RING_FLOOR (rk copy's
 * default chunk, four deep), then by fewer sessions, with a warning that
 * names the limit and the fix. A process with CAP_IPC_LOCK is not held to
 * the limit by the kernel, and neither is a limit of "unlimited": *@limit
 * is then 0 and nothing changes. Returns 0, or -1 (with a message) when
 * not even one session with a ring of one smallest slot fits.
 */
int cp_fit_memlock(unsigned *max_clients, uint32_t *max_ring, uint64_t *limit);

/*
 * cp_default_depth - rk copy's chunks in flight when --depth is not given:
 * 8 per connection, so that each of @lanes lanes keeps a pipeline of its
 * own. Where the locked-memory limit binds (finite after raising the soft
 * limit to the hard one, and no CAP_IPC_LOCK), no more than fit in it
 * beside CP_PINNED_MARGIN(@lanes) of queues and control buffers, but never fewer
 * than 8 (one lane's default: if even that does not fit, registering it
 * fails with the limit's hint, as it always did). At most CP_MAX_SLOTS.
 */
unsigned cp_default_depth(unsigned lanes, uint32_t chunk);

/*
 * What a client pins besides its slots: per lane about 80 receive buffers
 * of 4 KiB and its queues (under 512 KiB), and 1 MiB for the rest.
 */
#define CP_PINNED_MARGIN(lanes) ((1ull << 20) + (uint64_t)(lanes) * (512u << 10))

#define CP_RING_FLOOR (4 * (4096u + (1u << 20)))

#define CP_CHUNK_DEFAULT  (1u << 20) /* rk copy's --chunk */
#define CP_DEPTH_PER_LANE 8	     /* rk copy's --depth, per connection */

/*
 * cp_client_pinned - what an rk copy client registers (and the kernel
 * pins) with @lanes connections, @depth chunks of @chunk bytes in flight:
 * its slots with their headers and CP_PINNED_MARGIN. rk doctor measures
 * the locked-memory limit against cp_client_pinned(1, CP_DEPTH_PER_LANE,
 * CP_CHUNK_DEFAULT), about 9.5 MiB.
 */
static inline uint64_t cp_client_pinned(unsigned lanes, unsigned depth, uint32_t chunk)
{
	return (uint64_t)depth * (CP_HDR_SIZE + (uint64_t)chunk) + CP_PINNED_MARGIN(lanes);
}

#endif
