/* SPDX-License-Identifier: MIT */
/*
 * A session's workspace: a root directory held open as an O_PATH fd, and
 * every path a client names resolved beneath it with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), relative to that fd or
 * to directory fds found beneath it. Symlinks are followed while they stay
 * beneath the root: a relative target from the link's directory, an
 * absolute one when it names the canonical root or a place under it (it is
 * then resolved from the root). "..", absolute paths outside the root,
 * symlinks leading out, /proc magic links and prefix tricks ("/ws" vs
 * "/ws-evil") are refused with no race between check and use.
 *
 * Where the kernel lacks openat2 (before Linux 5.6, under valgrind, behind
 * a seccomp filter that denies it), or TOOLCALLD_NO_OPENAT2=1 is in the
 * environment, the same rules hold by a walk in user space, one component
 * at a time with openat(O_NOFOLLOW) beneath the directory fd reached so
 * far; symlinks on /proc that read as absolute paths or as no path are
 * then taken for magic links and refused.
 */
#ifndef TC_WORKSPACE_H
#define TC_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/errors.h"
#include "lib/files/workspace_path.h"	/* struct workspace, ws_open_nofollow */

struct buf;
struct stat;


/* Opens a workspace rooted at path (made canonical). Absolute paths in
 * calls may spell the root canonically or, when path is absolute with no
 * "." or ".." in it, as path does. Negative errno on failure. */
int ws_open(const char *path, struct workspace **ret);
/* A workspace over a directory a tool keeps its own files in (the memory
 * tool's), for its file jobs: dirfd (taken) is the directory, root its
 * path. */
struct workspace *ws_new_at(int dirfd, const char *root);
struct workspace *ws_ref(struct workspace *ws);
/* The most roots one workspace group holds (the primary included). */
#define WS_GROUP_MAX 32
/* Fills roots (room for max, max > 0) with the canonical roots of ws's
 * group, the primary first, NULL-terminated; returns how many. */
size_t ws_group_roots(const struct workspace *ws, const char **roots, size_t max);
/* Makes a workspace rooted where primary is, whose absolute paths may also
 * name the n workspaces in others (each referenced, their own others
 * ignored). */
struct workspace *ws_group(struct workspace *primary, struct workspace *const *others, size_t n);
/* The member of ws's group that path (len bytes) lies in: the one whose
 * root is its longest prefix, or ws itself (relative paths, paths in no
 * member). */
const struct workspace *ws_pick(const struct workspace *ws, const char *path, size_t len);
/* Accepts NULL; returns NULL. */
struct workspace *ws_unref(struct workspace *ws);

/*
 * Opens path beneath the root. Absolute paths that lie under the root are
 * taken relative to it; any other absolute path is refused. A path with a
 * NUL byte (len counts it) is refused with -EINVAL. A path leading out
 * (through "..", a symlink or a magic link) fails with -EXDEV, a symlink
 * loop with -ELOOP.
 */
int ws_openat(const struct workspace *ws, const char *path, size_t len, int flags, mode_t mode, int *ret_fd);
/*
 * Opens the directory that holds path (creating missing directories, each
 * beneath the root, when create_dirs) and returns its fd and the last
 * component. Used to create files: the caller then opens the name (one
 * component) relative to the returned fd, with O_NOFOLLOW or
 * O_CREAT | O_EXCL so that no symlink put there is followed.
 */
int ws_open_parent(const struct workspace *ws, const char *path, size_t len, bool create_dirs,
		   int *ret_dirfd, char **ret_name);
/*
 * Checks, before a call runs, that path stays beneath the root: what exists
 * of it is resolved by the kernel (a missing final part is fine). 0 or a
 * negative errno.
 */
int ws_check(const struct workspace *ws, const char *path, size_t len);
/*
 * Reads up to max bytes of the regular file at path, from offset on, and
 * appends them to out; *ret_st (may be NULL) receives the file's status.
 * A directory fails with -EISDIR, any other non-regular file (FIFO, device,
 * socket) with -ENXIO, without blocking.
 */
int ws_read(const struct workspace *ws, const char *path, size_t len, uint64_t offset, size_t max,
	    struct buf *out, struct stat *ret_st);
/*
 * As ws_read, but only when the file holds at most small bytes (small > 0):
 * a larger file, or one that reports no size, is opened and looked at but
 * not read, and WS_NOT_SMALL is returned. For reading small files at once
 * where a large one would take too long.
 */
#define WS_NOT_SMALL 1
int ws_read_small(const struct workspace *ws, const char *path, size_t len, uint64_t offset, size_t max,
		  uint64_t small, struct buf *out, struct stat *ret_st);
/*
 * Replaces the file at path with n bytes of data, atomically: a temporary
 * file in the same directory is written, fsynced, given the old file's mode
 * less its setuid and setgid bits, and its owner when the writer may chown
 * (0644 minus the umask for a new file, owned by the writer: the peer when
 * the call runs as the peer), and renamed over the
 * target, then the directory is fsynced; on failure the temporary file is
 * removed and the target is untouched. Symlinks are followed as when
 * reading, while they stay beneath the root (the file they lead to is
 * replaced, the link kept); a symlink leading out fails with -EXDEV.
 * *ret_created (may be NULL) says whether the file did not exist before.
 */
int ws_write_atomic(const struct workspace *ws, const char *path, size_t len, const void *data, size_t n,
		    bool create_dirs, bool *ret_created);
/* The path relative to the root as the model should see it ("src/a.c"). */
char *ws_display_path(const struct workspace *ws, const char *path, size_t len);
/*
 * Maps a negative errno from the functions above to an error kind and a
 * message for the model: escapes become permission_denied ("Path
 * '../../etc/passwd' escapes the workspace"), ENOENT an execution_error
 * ("File 'x' not found"), and so on.
 */
enum tc_kind ws_error(int r, const char *path, char **ret_msg);

/* A tool's own message for one errno: fmt holds one %s, the path. */
struct ws_hint {
	int err;		/* negative errno */
	const char *fmt;	/* NULL ends a list of hints */
};

struct tool_call;

/*
 * Fails call for a negative errno r from the functions above: with the
 * first of hints (as an execution_error) whose err is r, else with
 * ws_error()'s kind and message. hints may be NULL.
 */
void ws_fail_call(struct tool_call *call, int r, const char *path, const struct ws_hint *hints);

/*
 * Tools (code built with TC_TOOL_CODE: everything under tools/) reach the
 * file system only through a file job, as the peer (lib/fsjob/fsjob.h): the
 * primitives above that touch it are poisoned for them, so a tool that
 * calls one on the loop, as the daemon, does not build.
 */
#ifdef TC_TOOL_CODE
#pragma GCC poison ws_openat ws_open_parent ws_check ws_read ws_read_small ws_write_atomic
#endif

#endif
