/* SPDX-License-Identifier: MIT */
/*
 * Workspace operations beyond reading and writing a file: status without
 * following the last symlink, atomic rename, deletion (of a tree too) and
 * directory creation. Every path is resolved as lib/files/workspace.h does: the
 * directory that holds the last component is opened beneath the root
 * (symlinks on the way followed while they stay beneath it), and the last
 * component itself is acted on relative to that directory fd, never
 * followed. So a symlink is stat'ed, moved or deleted as itself, and
 * nothing outside the root can be reached.
 */
#ifndef TC_WORKSPACE_OPS_H
#define TC_WORKSPACE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stat;
struct workspace;

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
 * follows no symlink (they are removed as themselves).
 */
struct ws_deleter;
#define WS_MORE 1
int ws_delete_begin(const struct workspace *ws, const char *path, size_t len, bool recursive,
		    struct ws_deleter **ret);
int ws_delete_step(struct ws_deleter *del, uint64_t budget_ms);
uint64_t ws_delete_count(const struct ws_deleter *del);
struct ws_deleter *ws_delete_free(struct ws_deleter *del);
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

/* Tools act through lib/fsjob/fsjob.h, as the peer (see lib/files/workspace.h). */
#ifdef TC_TOOL_CODE
#pragma GCC poison ws_resolved ws_lstat ws_rename ws_delete ws_delete_begin ws_delete_step ws_mkdir
#endif

#endif
