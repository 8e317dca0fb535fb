/* SPDX-License-Identifier: MIT */
/*
 * The workspace path engine (workspace_path.c), the ground the rest of the
 * workspace module stands on: what a workspace is (a root held open, and
 * its group), the walk with no symlink that tools use on trees they read,
 * and the entry points the API (workspace.c), the atomic write
 * (workspace_write.c) and the choice of roots (workspace_root.c) open
 * everything through. lib/files/workspace.h includes it; other code uses that.
 * For the tests only, the engine can be switched to the walk used where
 * the kernel lacks openat2, so that both walks run the same tests on any
 * kernel. Programs get the same with TOOLCALLD_NO_OPENAT2=1 in the
 * environment.
 */
#ifndef TC_WORKSPACE_PATH_H
#define TC_WORKSPACE_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/openat2.h>
#include <sys/types.h>

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
	const char *hit;	/* out: the first entry refused */
};
/* Sets the calling thread's guard (NULL: none); returns the one before. */
struct ws_guard *ws_guard_set(struct ws_guard *g);
/* 0, or -EPERM when the thread's guard refuses changing name in dirfd (a
 * directory beneath ws's root) as whole and dir say. */
int ws_guard_check(const struct workspace *ws, int dirfd, const char *name, bool whole, bool dir);

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

/* Tools act through lib/fsjob/fsjob.h, as the peer (see lib/files/workspace.h). */
#ifdef TC_TOOL_CODE
#pragma GCC poison ws_guard_set ws_guard_check ws_chase ws_open_rel ws_check_rel ws_open_dir ws_open_one ws_read_link ws_openat2_retry ws_split_beneath
#endif

#endif
