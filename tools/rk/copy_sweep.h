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

#endif
