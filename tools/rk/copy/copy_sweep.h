/*
 * copy_sweep.h - rk serve's removal of abandoned temporaries.
 *
 * A transfer that never finishes leaves ".NAME.rkpart" behind for
 * --resume. Left alone, aborted clients would fill DIR with them; so rk
 * serve removes those untouched for --tmp-age seconds, at start and then
 * from time to time while it runs.
 */
#ifndef RK_COPY_SWEEP_H
#define RK_COPY_SWEEP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "copy_path.h"

#define CP_SWEEP_DEPTH CP_PATH_DEPTH /* levels below DIR swept: as deep as names go */

/*
 * cp_sweep - walk the tree under @rootfd (CP_SWEEP_DEPTH levels, never
 * through a symlink) and unlink every temporary name last written
 * at least @age_s seconds old, unless a session holds it (its flock). Only
 * names are removed, never what a planted link points to. Holds one fd per
 * level at most. Returns the number removed.
 */
unsigned cp_sweep(int rootfd, uint64_t age_s);

/*
 * The sweep while rk serve runs has a thread of its own: on a large DIR a
 * walk takes a while, and the listener must keep answering connects.
 */
struct cp_sweeper {
	pthread_t thread;
	int started;
	int rootfd;
	uint64_t age_s;
	atomic_int *stop;
};

/*
 * cp_sweeper_start - sweep once now (before the caller listens), then on
 * a thread every quarter of @age_s (1 s to 10 min) until *@stop is set; a
 * walk under way stops early then. Removals are logged on stdout. @age_s
 * 0: never. @rootfd is borrowed and must outlive cp_sweeper_stop().
 * Returns 0, or -1 if the thread could not start (the first sweep ran).
 */
int cp_sweeper_start(struct cp_sweeper *sw, int rootfd, uint64_t age_s, atomic_int *stop);

/* cp_sweeper_stop - wait for the thread, once *stop is set (at most one step of its walk). */
void cp_sweeper_stop(struct cp_sweeper *sw);

#endif
