/* SPDX-License-Identifier: MIT */
/*
 * A session's workspace, as tools see it: the one header of lib/files that
 * code under tools/ includes (with lib/files/identity.h, whom work is done
 * for). A workspace is a root directory held open as an O_PATH fd; every
 * path a client names is resolved beneath it with
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
 *
 * Nothing here touches the file system beneath a root. A tool reaches it
 * only through the file job (lib/fsjob/fsjob.h), which acts as the peer:
 * the primitives that open, read, write, move, delete and walk are in the
 * module's private header (workspace_internal.h), which code built as a
 * tool cannot include (it stops the build), and which
 * tests/unit/test_layers.sh keeps out of tools/; workspaces are made by
 * the daemon (lib/files/workspace_root.h), never by a tool.
 */
#ifndef TC_WORKSPACE_H
#define TC_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/errors.h"

struct ws_deleter;
struct ws_scan;

struct workspace {
	unsigned refs;
	/* O_PATH | O_DIRECTORY | O_CLOEXEC of the root, opened as the
	 * daemon. A tool reaches the root only through a file job, as the
	 * peer, and its children start there by default (child_opts.cwd_fd
	 * -1): in code built as a tool (TC_TOOL_CODE) the member has a name
	 * no tool spells, so that none can open beneath it as the daemon. */
#ifdef TC_TOOL_CODE
	int root_fd_not_for_tools;
#else
	int dirfd;
#endif
	char *root;		/* canonical absolute path of the root */
	char *alias;		/* the absolute path it was opened by, when that
				 * differs (a symlink on the way); or NULL */
	/* A session's other roots (MCP roots, §12): an absolute path beneath
	 * one of them is resolved there; relative paths stay with this one,
	 * the primary. Never changed once made: a session given new roots
	 * gets a new workspace (ws_group), calls in flight keep theirs. */
	struct workspace **others;
	size_t n_others;
};

struct workspace *ws_ref(struct workspace *ws);
/* The most roots one workspace group holds (the primary included). */
#define WS_GROUP_MAX 32
/* Fills roots (room for max, max > 0) with the canonical roots of ws's
 * group, the primary first, NULL-terminated; returns how many. */
size_t ws_group_roots(const struct workspace *ws, const char **roots, size_t max);
/* The member of ws's group that path (len bytes) lies in: the one whose
 * root is its longest prefix, or ws itself (relative paths, paths in no
 * member). */
const struct workspace *ws_pick(const struct workspace *ws, const char *path, size_t len);
/* Accepts NULL; returns NULL. */
struct workspace *ws_unref(struct workspace *ws);

/* The path relative to the root as the model should see it ("src/a.c"). */
char *ws_display_path(const struct workspace *ws, const char *path, size_t len);
/*
 * Maps a negative errno from the workspace functions (and the file job's) to an error kind and a
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
 * Fails call for a negative errno r from a file job's work: with the
 * first of hints (as an execution_error) whose err is r, else with
 * ws_error()'s kind and message. hints may be NULL.
 */
void ws_fail_call(struct tool_call *call, int r, const char *path, const struct ws_hint *hints);

/* What a deletion in parts (fsjob_delete_begin(), lib/fsjob/fsjob.h) has
 * removed so far, and its end: frees what it holds (accepts NULL). Its
 * steps return WS_MORE while entries are left. */
#define WS_MORE 1
/* What reading a small file (fsjob_read_small()) answers for a larger one. */
#define WS_NOT_SMALL 1
uint64_t ws_delete_count(const struct ws_deleter *del);
struct ws_deleter *ws_delete_free(struct ws_deleter *del);
/* Ends a look beneath a directory (fsjob_scan_begin()); accepts NULL. */
struct ws_scan *ws_scan_free(struct ws_scan *s);

/* Whether the calling thread's file work has paths it may not read
 * (sandbox.deny_read, set by its file job), and whether abs (absolute,
 * len bytes) is one or lies beneath one: the entry, or NULL. For the
 * walks that open entries by name (and skip those, counted). */
bool ws_guard_reads_denied(void);
const char *ws_guard_denied(const char *abs, size_t len);
/* Whether what fd is (its path now) is such a path: for a walk that has
 * opened an entry, to pass it over. */
bool ws_guard_fd_denied(int fd);

/* Whether rel beneath dirfd, reached following no link, is a directory
 * with no entry. */
bool ws_dir_empty(int dirfd, const char *rel);

#endif
