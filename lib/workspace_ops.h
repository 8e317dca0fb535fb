/* SPDX-License-Identifier: MIT */
/*
 * Workspace operations beyond reading and writing a file: status without
 * following the last symlink, atomic rename, deletion (of a tree too) and
 * directory creation. Every path is resolved as lib/workspace.h does: the
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
 * Makes the directory path (0777 minus the umask), its missing parents too
 * when parents. An existing directory is fine (*ret_created false); an
 * existing file there fails with -EEXIST, a missing parent without parents
 * with -ENOENT.
 */
int ws_mkdir(const struct workspace *ws, const char *path, size_t len, bool parents, bool *ret_created);

#endif
