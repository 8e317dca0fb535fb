/* SPDX-License-Identifier: MIT */
/*
 * What the searching tools (search, glob) share: a walk of a tree beneath
 * the workspace that can stop after any entry and resume later. It runs on
 * an io thread as the peer (lib/fsjob/fsjob.h), in parts for search, and stops
 * reading a huge directory as soon as the call is cancelled.
 *
 * Each directory is read whole (getdents64 into one buffer of the walk,
 * its names copied into one block, sorted, so results come in a stable
 * order; nothing allocated per entry, no stat where the type the
 * directory gives suffices) and its fd kept open while its entries are walked (one fd per
 * level, at most 128 levels); each entry is reached by its one name beneath
 * that fd, never through a symlink. So the work on one entry depends only
 * on (directory fd, name), and could run on another thread while the
 * directory's level is held.
 *
 * With use_ignores, each directory's .ignore and .gitignore are read as it
 * is entered (lib/ignore/ignore.h: git's rules), and what they exclude is neither
 * reported nor entered; skip_hidden does the same for names starting with
 * "."; both are counted in skipped (but a .git directory skip_git skips
 * whatever the flags).
 */
#ifndef TC_TOOLS_WALK_H
#define TC_TOOLS_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/base/buf.h"

enum walk_type { WALK_FILE, WALK_DIR, WALK_SYMLINK, WALK_OTHER };

struct fsjob;
struct ignore;
struct walk_level;

/* Ignore patterns from outside the walk (a directory above its start, or
 * .git/info/exclude): matched against prefix + "/" + the entry's path. */
struct walk_outer {
	struct ignore *ig;
	char *prefix;		/* from the patterns' directory to the start; "" for the start */
};

struct walk {
	int basefd;		/* the start directory, owned */
	bool skip_git;		/* do not enter directories named ".git" */
	/* Skip, without reporting them, what ignore files exclude (each
	 * directory's .ignore, then its .gitignore, deepest first, then the
	 * outer patterns in the order added) and names starting with ".". */
	bool use_ignores;
	bool skip_hidden;
	struct walk_outer *outer;	/* owned */
	size_t n_outer;
	size_t skipped;		/* entries skipped so */
	/* Optional: whether to enter the directory rel (relative to the start). */
	bool (*descend)(void *arg, const char *rel, size_t len);
	void *arg;
	const struct fsjob *job;	/* polled for cancellation while a directory is read, or NULL */
	struct walk_level *stack;
	size_t depth, alloc;
	size_t n_ignoring;	/* levels with ignore files */
	bool started;
	char *dents;		/* getdents64's buffer, one for the walk */
	struct buf pathbuf;	/* the current entry's path; each level's is a prefix of it */
	struct buf scratch;
	bool unsorted;		/* each directory's entries in the order read, not by name */
	const char *path;	/* the current entry's relative path (in pathbuf) */
	size_t path_len;
	const char *name;	/* its name (in its directory's block of names) */
	int dirfd;		/* the directory holding it (the walk's) */
	size_t unreadable;	/* directories that could not be read */
	size_t denied_files;	/* files not reported: private (sandbox.deny_read) */
	char *deny_base;	/* the start's absolute path, where the file work
				 * has private paths (ws_guard_reads_denied()) */
};

/* Starts a walk of the directory fd dirfd (taken over). A private path
 * (sandbox.deny_read) met is neither reported nor entered: counted in
 * unreadable (a directory) or denied_files. */
void walk_init(struct walk *w, int dirfd);
/*
 * Moves to the next entry below the start, directories before what they
 * hold: 1 with its relative path (valid until the next call) and type, or
 * 0 when the walk is over; w->dirfd and w->name then name the entry for
 * the *at() calls. Symlinks are reported, never followed.
 */
int walk_next(struct walk *w, const char **ret_path, enum walk_type *ret_type);
/* Adds outer ignore patterns (taken over; NULL is fine), after those
 * added before: they are looked at after them. */
void walk_add_ignore(struct walk *w, struct ignore *ig, const char *prefix);
/* Adds, with use_ignores, the .ignore and .gitignore files of the
 * directories above start (the start's path relative to the workspace
 * root, "." for the root) up to the root, and the .git/info/exclude of the
 * nearest of them (or the start) that has one; read as the job reads. */
void walk_load_outer(struct walk *w, const struct fsjob *job, const char *start);
/* Whether a glob names a hidden component (".github/x", "a/.env"): what
 * it names is then looked for among hidden entries too. */
bool walk_names_hidden(const char *s, size_t n);
/* Frees what the walk holds (closes basefd). */
void walk_done(struct walk *w);

#endif
