/*
 * copy_plan.h - what rk copy will send: the SRC arguments expanded (with
 * -r, whole trees) into an ordered list of directories and files, each with
 * its destination path relative to the served directory, and afterwards
 * what became of each.
 */
#ifndef RK_COPY_PLAN_H
#define RK_COPY_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "copy_proto.h"

/* cp_plan_build_beneath: more items than its @max_items (a code, not text to match). */
#define CP_PLAN_LIMIT (-3)

enum cp_item_state {
	CP_ITEM_PENDING = 0, /* not sent yet */
	CP_ITEM_SENT,	     /* announced; waiting for the server's verdict */
	CP_ITEM_DONE,	     /* verdict in (code), or failed here (local_err) */
};

struct cp_item {
	int is_dir;
	int into;  /* dst is DEST/LEAF: DEST itself unless a directory (CP_BEGIN_INTO) */
	char *src; /* local path */
	char *dst; /* relative destination path */
	uint64_t size;
	uint32_t mode;
	/* outcome */
	enum cp_item_state state;
	int waiting_ready, ready;
	struct cp_result ready_res;
	uint16_t code; /* enum cp_code from the server's DONE */
	uint32_t sys_errno;
	uint64_t offset;
	char local_err[160]; /* non-empty: failed on this side */
};

struct cp_plan {
	struct cp_item *items;
	size_t n, cap;
	size_t files, dirs;
	uint64_t bytes;
	int confined; /* items' src are under rootfd (cp_plan_build_beneath) */
	int rootfd;
	size_t linked;	       /* cp_plan_build_beneath: hard-linked files left out */
	char linked_name[256]; /* ... the first of them */
};

/*
 * cp_plan_build - expand @srcs into @p, by rsync's rules. @dest is the path
 * under the served directory ("" or "." is its top):
 *
 *   SRC         DEST        lands at
 *   file        d/          d/file
 *   file        d           d/file if d is a directory on the server, else d
 *   dir         d  or  d/   d/dir/...          (with @recursive)
 *   dir/        d  or  d/   d/...: the contents (also "dir/." and ".")
 *   several     d  or  d/   each in d as above
 *
 * Only the server knows whether d is a directory: that item is planned as
 * d/file with .into set. Symlinks met inside a tree are followed to files
 * and skipped for directories. Returns 0, or -1 (a source problem) or -2
 * (a refused destination name) with @why set.
 */
int cp_plan_build(struct cp_plan *p, char *const *srcs, int nsrc, const char *dest, int recursive,
		  char *why, size_t why_len);

/*
 * cp_plan_build_beneath - the same for a server whose client pulls: the
 * @srcs (a client's words: hostile) are paths under the directory
 * @rootfd, "." or "" its top. Each must pass cp_path_check once a trailing
 * '/' or "/." is dropped (which, as above, names a directory's contents),
 * and is looked up beneath @rootfd without following any symlink; inside
 * a tree symlinks and other non-regular files are skipped (as rsync does
 * without -l). A regular file with more than one hard link is not served:
 * another name of it may lie outside the top (planted there by a local
 * user whom the directory is meant to confine); named as a source it is
 * refused (-2), inside a tree it is left out and counted in @p->linked.
 * At most @max_items items (0: no limit). Returns 0, -1 (a
 * source problem), -2 (a source that is no path under the top, or a
 * hard-linked file) or
 * CP_PLAN_LIMIT (more than @max_items), with @why set. @rootfd must stay
 * open while the plan is used.
 */
int cp_plan_build_beneath(struct cp_plan *p, int rootfd, char *const *srcs, int nsrc,
			  const char *dest, int recursive, size_t max_items, char *why,
			  size_t why_len);

/*
 * cp_plan_open - open item @it's file for reading: by its path, or beneath
 * the plan's root without following symlinks. The fd, or a negative errno.
 */
int cp_plan_open(const struct cp_plan *p, const struct cp_item *it);

void cp_plan_free(struct cp_plan *p);

#endif
