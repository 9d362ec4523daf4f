/*
 * copy_progress.h - rk copy's progress line: bytes done of the total, files
 * done of the total, the rate, the ETA and the current file, in one unit
 * family (IEC bytes, bytes per second). On a terminal it is one line
 * redrawn at most five times a second; elsewhere (--progress with stderr a
 * file or pipe) a plain line at most once a second; off by default there.
 */
#ifndef RK_COPY_PROGRESS_H
#define RK_COPY_PROGRESS_H

#include <stdint.h>

enum cp_progress_mode {
	CP_PROGRESS_OFF = 0,
	CP_PROGRESS_TTY,   /* redrawn in place (\r, erase to the end of the line) */
	CP_PROGRESS_LINES, /* one plain line per redraw: logs and tests */
};

struct cp_progress {
	int enabled; /* an enum cp_progress_mode */
	uint64_t total, done;
	uint32_t files_total, files_done; /* files (not directories) in the copy, settled */
	uint64_t t0, last_draw;
	char name[48]; /* the current file's, as much as the line shows */
	int drawn;
	unsigned reconnects; /* shown once non-zero */
};

/* cp_progress_init - @total bytes in @files files; @mode an enum cp_progress_mode. */
void cp_progress_init(struct cp_progress *p, uint64_t total, uint32_t files, int mode);
/* cp_progress_add - @bytes more moved while working on @name (may be NULL; copied). */
void cp_progress_add(struct cp_progress *p, uint64_t bytes, const char *name);
/* cp_progress_file - one more file settled (copied, up to date, refused or failed); @p may be NULL.
 */
void cp_progress_file(struct cp_progress *p);
/*
 * cp_progress_restart - after reconnect number @reconnects, only @done
 * bytes of @files files are settled; what the lost session had moved
 * counts again as it is resent (or resumed).
 */
void cp_progress_restart(struct cp_progress *p, uint64_t done, uint32_t files, unsigned reconnects);
/* cp_progress_clear - erase the bar (before printing a message); plain lines stay. */
void cp_progress_clear(struct cp_progress *p);
/* cp_progress_end - the copy is over: erase the bar, or print the last plain line. */
void cp_progress_end(struct cp_progress *p);

#endif
