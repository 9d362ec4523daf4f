/*
 * copy_progress.h - rk copy's progress bar: bytes, rate, ETA and the
 * current file on one line of a terminal, redrawn at most five times a
 * second; nothing at all when stderr is not a terminal.
 */
#ifndef RK_COPY_PROGRESS_H
#define RK_COPY_PROGRESS_H

#include <stdint.h>

struct cp_progress {
	int enabled;
	uint64_t total, done;
	uint64_t t0, last_draw;
	char name[48]; /* the current file's, as much as the line shows */
	int drawn;
	unsigned reconnects; /* shown once non-zero */
};

void cp_progress_init(struct cp_progress *p, uint64_t total, int enabled);
/* cp_progress_add - @bytes more moved while working on @name (may be NULL; copied). */
void cp_progress_add(struct cp_progress *p, uint64_t bytes, const char *name);
/*
 * cp_progress_restart - after reconnect number @reconnects, only @done
 * bytes are settled; what the lost session had moved counts again as it
 * is resent (or resumed).
 */
void cp_progress_restart(struct cp_progress *p, uint64_t done, unsigned reconnects);
/* cp_progress_clear - erase the bar (before printing a message, and at the end). */
void cp_progress_clear(struct cp_progress *p);

#endif
