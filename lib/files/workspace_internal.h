/* SPDX-License-Identifier: MIT */
/*
 * The private header of lib/files: the workspace primitives, which act on
 * the file system beneath a root with the rights of the calling thread.
 * The path engine (workspace_path.c), the ground the rest of the module
 * stands on: the walk with no symlink, and the entry points the API
 * (workspace.c), the atomic write (workspace_write.c), the operations
 * (workspace_ops.c) and the choice of roots (workspace_root.c) open
 * everything through.
 *
 * Who includes it: lib/files itself; the file job (lib/fsjob), which runs
 * the primitives for tools as the peer; lib/dispatch, whose checks before
 * a call resolve its paths (as the peer where it has another identity);
 * and the tests. Never a tool: code built with TC_TOOL_CODE (everything
 * under tools/) does not compile with it, and tests/unit/test_layers.sh
 * fails for a file under tools/ that names it. So a tool has no way to
 * the file system but the file job, whoever writes it.
 *
 * For the tests only, the engine can be switched to the walk used where
 * the kernel lacks openat2, so that both walks run the same tests on any
 * kernel. Programs get the same with TOOLCALLD_NO_OPENAT2=1 in the
 * environment.
 */
#ifndef TC_WORKSPACE_INTERNAL_H
#define TC_WORKSPACE_INTERNAL_H

#ifdef TC_TOOL_CODE
#error "a tool reaches the file system through lib/fsjob/fsjob.h, as the peer, not through the workspace primitives"
#endif

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/openat2.h>
#include <sys/types.h>

#include "lib/files/workspace.h"

struct buf;
struct stat;


/*
 * Opens rel beneath dirfd (an fd found beneath a root) following no symlink
 * at all, as openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS) does: a symlink on the way fails with -ELOOP, the
 * last one too unless flags hold O_PATH | O_NOFOLLOW (it is then opened
 * itself). rel holds names found in directories, no ".." (-EXDEV without
 * openat2); flags may not hold O_CREAT (-EINVAL). For walking a tree found
 * by reading directories.
 */
int ws_open_nofollow(int dirfd, const char *rel, int flags, int *ret_fd);
/* The directory rel in dirfd opened for reading its entries, following no
 * link (ws_open_nofollow()): 0 or a negative errno. */
int ws_opendir_nofollow(int dirfd, const char *rel, DIR **ret);

/*
 * The protected paths of the calling thread's file work. While one is set
 * (ws_guard_set(), per thread), every primitive that changes the file
 * system checks, on the directory fd it reached and just before it acts,
 * the canonical path it is about to change (ws_guard_check()): a
 * protected one fails with -EPERM, and the first entry refused is kept in
 * hit. So no symlink or rename made meanwhile, between a check of the
 * path and the write, leads a write there. Set by the file job
 * (lib/fsjob/fsjob.h) around a tool's work.
 */
struct ws_guard {
	/* The entry of list that changing rel touches (rel canonical,
	 * relative to the root; whole: with all it holds; dir: a directory
	 * made there), or NULL. */
	const char *(*match)(const struct ws_guard *g, const char *rel, bool whole, bool dir);
	const char *const *list;
	const void *arg;	/* the match's own */
	const char *hit;	/* out: the first entry refused */
	/* What the work may not read either (sandbox.deny_read beneath the
	 * workspace's roots: absolute, canonical as written): opening one,
	 * or what lies beneath it, fails -EACCES (ws_open_rel(),
	 * ws_lstat()); the first refused is kept in denied. */
	const char *const *deny;
	const char *denied;
};
/* Sets the calling thread's guard (NULL: none); returns the one before. */
struct ws_guard *ws_guard_set(struct ws_guard *g);
/* 0, or -EPERM when the thread's guard refuses changing name in dirfd (a
 * directory beneath ws's root) as whole and dir say. */
int ws_guard_check(const struct workspace *ws, int dirfd, const char *name, bool whole, bool dir);
/* True when the thread's guard protects anything. */
bool ws_guard_active(void);
/* 0, or -EACCES when the thread's guard may not read what fd (beneath
 * ws's root) is, or name in it when name is not NULL. */
int ws_guard_read_check(const struct workspace *ws, int fd, const char *name);
/* The entry the thread's guard refuses for changing rel (canonical,
 * relative to the root) as whole and dir say, noted in its hit; or NULL. */
const char *ws_guard_match(const char *rel, bool whole, bool dir);

/*
 * Looks, before a directory is taken whole, for what the thread's guard
 * protects beneath it (workspace_scan.c): every entry of the tree, at any
 * depth, is asked about as if it alone were deleted or moved, reading
 * directories only and following no symlink. ws_scan_begin() (path, as
 * the operation names it) and ws_scan_begin_at() (name in dirfd) answer 0
 * with *ret NULL when there is nothing to look at (no guard, not a
 * directory, a path the operation itself will refuse), WS_MORE when
 * ws_scan_step() is to go on; that returns WS_MORE after about budget_ms
 * (0: to the end), 0 when nothing protected was found, -EPERM at the
 * first entry refused (ws_scan_hit(): its path relative to the root and
 * the protection; ws_scan_top(): the directory looked at), or a negative
 * errno when the tree cannot be read whole (-ELOOP: too deep). Freed with
 * ws_scan_free() (workspace.h).
 */
int ws_scan_begin(const struct workspace *ws, const char *path, size_t len, struct ws_scan **ret);
int ws_scan_begin_at(const struct workspace *ws, int dirfd, const char *name, struct ws_scan **ret);
int ws_scan_step(struct ws_scan *s, uint64_t budget_ms);
const char *ws_scan_top(const struct ws_scan *s);
/* The looked-through directory's stream, rewound, once ws_scan_step() has
 * answered 0 (the caller's to close), else NULL: to delete what was read. */
DIR *ws_scan_take(struct ws_scan *s);
const char *ws_scan_hit(const struct ws_scan *s, const char **ret_entry);
/* The look a recursive delete makes before it removes anything, or NULL. */
const struct ws_scan *ws_delete_scan(const struct ws_deleter *del);
/* Opens the directory holding path's last component (ws_open_parent(),
 * trailing slashes ignored); the root: -EBUSY, "." or "..": -EISDIR. */
int ws_open_last(const struct workspace *ws, const char *path, size_t len, int *ret_dirfd, char **ret_name);

/*
 * With on, resolves every path by the walk with plain openat(), as where
 * openat2 is missing; with off, finds out again whether openat2 is there
 * (and whether TOOLCALLD_NO_OPENAT2 asks not to use it). Process-wide.
 */
void ws_force_fallback(bool on);

/*
 * Inside the workspace module, for workspace.c (the API),
 * workspace_write.c (atomic replacement) and workspace_root.c. Paths are
 * relative to the root, already checked by ws_relative unless said
 * otherwise.
 */

#define RESOLVE_WS (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
/* As the kernel's MAXSYMLINKS. */
#define SYMLINK_HOPS 40

/* Tells whether openat2 is to be used, finding out on the first call. */
bool ws_have_openat2(void);

/* Calls openat2, retrying the transient EAGAIN and EINTR a bounded number of times. */
int ws_openat2_retry(int dirfd, const char *path, int flags, mode_t mode, uint64_t resolve);

/*
 * Reads the symlink name in dirfd, or linkfd (the link itself, O_PATH) when
 * not -1, newly allocated; a /proc magic link fails with -EXDEV.
 */
int ws_read_link(int dirfd, const char *name, int linkfd, char **ret);

/* Opens the single component name in dirfd with flags, following no symlink in it without openat2. */
int ws_open_one(int dirfd, const char *name, int flags, mode_t mode);

/*
 * Opens rel (relative to the root) the slow way, one component at a time,
 * for what the kernel refused with EXDEV: an escape, or an absolute symlink
 * that may name a place under the root. Each component is opened
 * O_PATH | O_NOFOLLOW beneath the directory reached so far; a symlink is
 * read and its target put in front of what is left: a relative one walked
 * on from the link's directory, an absolute one inside rewritten relative
 * to the root and walked from the root fd. ".." goes back to the parent of
 * the directory reached, never above the root. The last component is opened
 * with the caller's flags (after its symlinks, unless they are not to be
 * followed), beneath the directory that holds it.
 *
 * With create, missing directories are made on the way (and the last one),
 * as "mkdir -p" would: only those the caller named, never the missing
 * target of a dangling symlink.
 */
int ws_chase(const struct workspace *ws, const char *rel, int flags, mode_t mode, bool create);

/*
 * Opens rel (relative to the root) beneath the root with flags. The kernel
 * walks it first; only what it refuses with EXDEV, as it refuses every
 * absolute symlink, is walked again by ws_chase() to tell the links pointing
 * inside from the escapes.
 */
int ws_open_rel(const struct workspace *ws, const char *rel, int flags, mode_t mode);

/* Checks that rel, as far as it exists, resolves beneath the root, and
 * that the rest would too (a missing final part is fine). */
int ws_check_rel(const struct workspace *ws, const char *rel);

/* Splits rel as split_path() does; a directory by its form that leads out ("..") is an escape first. */
int ws_split_beneath(const struct workspace *ws, const char *rel, char **ret_dir, char **ret_name);

/* Opens the directory rel beneath the root for creating files in it (readable, so it can be fsynced). */
int ws_open_dir(const struct workspace *ws, const char *rel, bool create, int *ret_fd);

/* True when path holds a "." or ".." component. */
bool ws_has_dot_component(const char *path);

/* Makes a client's path (len bytes) relative to the root in *ret: "." for
 * the root itself; an absolute path must spell the root (or its alias):
 * else -EXDEV. NUL bytes: -EINVAL; PATH_MAX or longer: -ENAMETOOLONG. */
int ws_relative(const struct workspace *ws, const char *path, size_t len, char **ret);

/* --- the primitives (workspace.c, workspace_write.c) --- */

/* A workspace over a directory of the daemon's own store (the file job's
 * fsjob_start_store(), never a tool): dirfd (taken) is the directory,
 * root its path. */
struct workspace *ws_new_at(int dirfd, const char *root);

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

/* --- operations beyond reading and writing (workspace_ops.c) --- */

/*
 * Stats path without following its last component; *ret_target (may be
 * NULL) receives a symlink's target text (NULL for anything else). The root
 * itself (".", "a/..") is stat'ed as the directory it is.
 */
int ws_lstat(const struct workspace *ws, const char *path, size_t len, struct stat *ret_st, char **ret_target);
/*
 * Renames from to to, both beneath the root, atomically (renameat2). With
 * overwrite false an existing to fails with -EEXIST; with overwrite true it
 * is replaced (a directory only by a directory, when empty, as rename(2)
 * does). The root cannot be moved (-EBUSY). Two file systems: -EOPNOTSUPP.
 */
int ws_rename(const struct workspace *ws, const char *from, size_t from_len, const char *to, size_t to_len,
	      bool overwrite);
/*
 * Deletes path: a file, a symlink (not what it points to) or an empty
 * directory; a directory with entries only when recursive (else
 * -ENOTEMPTY), by a walk beneath it that follows no symlink. The root
 * cannot be deleted (-EBUSY). *ret_deleted counts the entries removed, also
 * on failure midway.
 */
int ws_delete(const struct workspace *ws, const char *path, size_t len, bool recursive, uint64_t *ret_deleted);
/*
 * ws_delete in parts, so that a large tree is deleted a part at a time
 * (between parts a worker may serve other work, and a cancelled call
 * stops). ws_delete_begin() does what ws_delete does for a file, a symlink
 * or an empty directory (0 when done); for a directory with entries, when
 * recursive, it opens it and returns WS_MORE: ws_delete_step() then goes
 * on for about budget_ms milliseconds (0: to the end) and returns WS_MORE
 * while entries are left, 0 when the directory is gone. Both may fail with
 * a negative errno; *ret is set in any case, counts what was deleted
 * (ws_delete_count()) and is freed with ws_delete_free(). Every step
 * follows no symlink (they are removed as themselves). With a guard on
 * the thread (ws_guard_set()), the steps of a recursive delete look
 * through the whole tree first (ws_scan_step()), the step that ends the
 * look answering WS_MORE: a protected entry anywhere fails them with
 * -EPERM before anything is deleted (ws_delete_scan() tells which); then
 * the directory the look read is emptied, never one renamed into its
 * place meanwhile (-ENOTEMPTY).
 */
struct ws_deleter;
int ws_delete_begin(const struct workspace *ws, const char *path, size_t len, bool recursive,
		    struct ws_deleter **ret);
int ws_delete_step(struct ws_deleter *del, uint64_t budget_ms);
/*
 * Makes the directory path (0777 minus the umask), its missing parents too
 * when parents. An existing directory is fine (*ret_created false); an
 * existing file there fails with -EEXIST, a missing parent without parents
 * with -ENOENT.
 */
int ws_mkdir(const struct workspace *ws, const char *path, size_t len, bool parents, bool *ret_created);

/* The path of the open fd relative to ws's root ("." for the root), or
 * NULL when it is not beneath it. */
char *ws_fd_relative(const struct workspace *ws, int fd);
/*
 * Where path leads, as the kernel resolves it: its canonical path relative
 * to the root of the workspace (of ws's group) it lies in, "." for the
 * root. What exists of it is resolved by opening it (symlinks followed
 * beneath the root); a missing rest is appended as written, "." and ".."
 * taken lexically, as a create would make it. With follow, a final symlink
 * (a dangling one too) leads to its target, as a write follows it;
 * without, the last component is itself. Escapes fail as ws_openat does.
 */
int ws_resolved(const struct workspace *ws, const char *path, size_t len, bool follow, char **ret);

#endif
