/*
 * copy_path.h - destination paths from a peer, made safe.
 *
 * A path named by rk copy is hostile until proven otherwise. It must be
 * relative, made of plain components (no "", ".", ".."), printable, within
 * the length limits, and may not use the name pattern of our temporary
 * files. Then every lookup goes through openat2(RESOLVE_BENEATH) from the
 * served directory, so neither ".." nor a symlink (absolute or relative)
 * can lead outside it, whatever the tree contains at the time.
 */
#ifndef RK_COPY_PATH_H
#define RK_COPY_PATH_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Components a name may have at most: deeper trees are refused, so every
 * temporary stays within reach of the sweep of abandoned ones (copy_sweep.h).
 */
#define CP_PATH_DEPTH 32

/*
 * cp_path_check - 0 if @name (@len bytes, not NUL-terminated) is acceptable
 * (relative, components neither empty nor "." nor "..", no control
 * characters, at most CP_PATH_DEPTH components), else -EINVAL.
 */
int cp_path_check(const char *name, size_t len);

/*
 * cp_path_split - split a checked @name into its parent ("" for the top)
 * and its last component, both NUL-terminated into buffers of at least
 * @len + 1 bytes.
 */
void cp_path_split(const char *name, size_t len, char *parent, char *leaf);

/* cp_temp_name - ".LEAF.rkpart" into @out (@out_len >= 256). */
void cp_temp_name(const char *leaf, char *out, size_t out_len);

/*
 * cp_open_dir - open directory @rel (NUL-terminated, checked; "" = the top)
 * beneath @rootfd, creating missing components (mode 0755) when @create.
 * Returns the fd (O_RDONLY | O_DIRECTORY) or a negative errno: -EXDEV when a
 * symlink or ".." would leave @rootfd, -ENOTDIR, -ENOENT, ...
 */
int cp_open_dir(int rootfd, const char *rel, int create);

/*
 * cp_openat_beneath - openat2(@dirfd, @name, @flags | O_CLOEXEC | O_NOFOLLOW,
 * @mode) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS.
 * Returns the fd or a negative errno.
 */
int cp_openat_beneath(int dirfd, const char *name, int flags, mode_t mode);

/*
 * cp_open_path_beneath - open @rel (a checked path of one or more
 * components) beneath @rootfd with @flags | O_NOFOLLOW | O_CLOEXEC, no
 * component a symlink, not even one that stays inside (-ELOOP or -EXDEV).
 * Returns the fd or a negative errno.
 */
int cp_open_path_beneath(int rootfd, const char *rel, int flags);

/*
 * cp_dest_place - a pulling client's DEST by rsync's rules: a name that
 * ends in '/' or is an existing directory receives what comes into it
 * (made if missing, mode 0755): @root is DEST, @leaf "". Any other name is
 * what one file becomes: @root its parent ("." if none), @leaf its last
 * component. Returns 0, -1 (empty, too long for @root_len or @leaf_len, or
 * a last component "." or "..") or a negative errno from mkdir.
 */
int cp_dest_place(const char *dest, char *root, size_t root_len, char *leaf, size_t leaf_len);

/*
 * Where openat2 is missing (Linux < 5.6, valgrind) these functions fall back
 * to a walk one component at a time with O_NOFOLLOW, which refuses every
 * symlink, even one that stays inside. cp_path_use_openat2(0) forces that
 * fallback (for tests).
 */
void cp_path_use_openat2(int on);

#endif
