/* SPDX-License-Identifier: MIT */
/*
 * Making workspaces, the daemon's part (never a tool's: code built with
 * TC_TOOL_CODE does not compile with this header, and
 * tests/unit/test_layers.sh keeps it out of tools/): one opened by its
 * path, a session's group of roots, and the roots a client may choose.
 *
 * Choosing a session's workspace without a race. The roots a client may
 * ask for are resolved once (at start-up and on reload) into open O_PATH
 * fds with their (st_dev, st_ino). A directory a client names is opened
 * first and judged afterwards by what was opened: it must be one of the
 * roots, or lie beneath a root that allows that, which is found by walking
 * up with ".." from the opened fd and comparing identities. A symlink
 * swapped in between cannot redirect the check, as nothing is looked up by
 * name after the open. When the daemon runs as root for another user, the
 * path is opened as that user, whatever run_as says (the user chose it):
 * every component looked up and the directory's search right checked by
 * the kernel with the user's identity (lib/files/identity.h: uid, gid and
 * supplementary groups, as the kernel recorded them when the user
 * connected) on a short-lived thread of its own, so no directory the user
 * could not reach itself, beneath one it may not search, is reached for
 * it.
 *
 * Every refusal is the same -EACCES, whether the path does not exist, is
 * not a directory, lies elsewhere or cannot be searched, so the answer
 * tells a client nothing about places it may not use.
 */
#ifndef TC_WORKSPACE_ROOT_H
#define TC_WORKSPACE_ROOT_H

#ifdef TC_TOOL_CODE
#error "workspaces are made by the daemon; a tool works in its call's, through lib/fsjob/fsjob.h"
#endif

#include <stdbool.h>
#include <stddef.h>

struct identity;
struct workspace;
struct ws_roots;

/* Opens a workspace rooted at path (made canonical). Absolute paths in
 * calls may spell the root canonically or, when path is absolute with no
 * "." or ".." in it, as path does. Negative errno on failure. */
int ws_open(const char *path, struct workspace **ret);
/* Makes a workspace rooted where primary is, whose absolute paths may also
 * name the n workspaces in others (each referenced, their own others
 * ignored). */
struct workspace *ws_group(struct workspace *primary, struct workspace *const *others, size_t n);


struct ws_roots *ws_roots_new(void);
/* Accepts NULL; returns NULL. */
struct ws_roots *ws_roots_free(struct ws_roots *r);
/*
 * Adds the directory at path (symlinks followed: the administrator wrote
 * it) as a root; with beneath, its subdirectories are allowed too.
 * Negative errno when it cannot be opened as a directory (it is then not
 * added).
 */
int ws_roots_add(struct ws_roots *r, const char *path, bool beneath);
/* Adds the root of an open workspace (exactly it, nothing beneath). */
int ws_roots_add_ws(struct ws_roots *r, const struct workspace *ws);
size_t ws_roots_count(const struct ws_roots *r);

/*
 * Opens the absolute path as a workspace if the directory opened is
 * allowed by roots and peer (NULL: not checked) can reach and search it.
 * -EINVAL for a path that is not absolute or holds a NUL, -EACCES for
 * every refusal.
 */
int ws_open_allowed(const struct ws_roots *r, const char *path, const struct identity *peer,
		    struct workspace **ret);

#endif
