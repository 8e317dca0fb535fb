/* SPDX-License-Identifier: MIT */
/*
 * Whom work is done for: a peer's uid, gid and supplementary groups (from
 * SO_PEERCRED and SO_PEERGROUPS when it connected, or a user named in a
 * file), its home, and whether work done for it takes its ids (change:
 * the one place that decision is kept). One such identity serves the
 * children of its calls, its hooks, MCP servers started as a user, file
 * work, and the check that a peer may search the workspace it asks for;
 * the switch of one thread's file-system identity to it and back lives
 * here too.
 *
 * The switch uses the raw setfsuid, setfsgid and setgroups system calls,
 * which change only the calling thread's credentials (glibc's wrappers
 * change every thread of the process). With the fsuid set to a non-zero
 * uid the kernel also clears CAP_CHOWN, CAP_DAC_OVERRIDE,
 * CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID, CAP_LINUX_IMMUTABLE,
 * CAP_MAC_OVERRIDE and CAP_MKNOD from the thread's effective set, and puts
 * them back when it returns to 0: the kernel, not the daemon, then decides
 * what the peer may open. Only threads other than the loop switch (io
 * workers, and the short-lived thread of the workspace search check); the
 * loop never does, so nothing it does for one peer runs with another's
 * rights.
 */
#ifndef TC_IDENTITY_H
#define TC_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The kernel's NGROUPS_MAX: more supplementary groups than this cannot be set. */
#define IDENTITY_MAX_GROUPS 65536

struct identity {
	uid_t uid;
	gid_t gid;
	gid_t *groups;		/* supplementary groups, owned */
	size_t n_groups;
	char *home;		/* for "~/" in deny_read and a child's $HOME; NULL: none; owned */
	bool change;		/* work for it takes its ids: children take uid,
				 * gid and groups, file work (lib/fsjob/fsjob.h) its
				 * file-system identity; false: both keep the
				 * daemon's own identity */
};

/* Reads the identity of the peer on the Unix socket fd (uid and gid from
 * SO_PEERCRED, groups from SO_PEERGROUPS, none where the kernel lacks it).
 * Children are not to take it yet: see identity_for_children(). */
int identity_from_socket(int fd, struct identity *ret);
/*
 * Decides whom work for id is done as, its children and its file work
 * alike: as id itself (change) when run_as_peer, the daemon is root and id
 * is another uid, with its groups (its primary group alone when it has
 * none: never the daemon's) and the home of its passwd entry (looked up
 * here, once). Otherwise the daemon's own identity, with $HOME. May be
 * called again on an identity already decided (a reload).
 */
void identity_for_children(struct identity *id, bool run_as_peer);
/* Fills ret for the user called name (a provider file's "run_as"): its
 * uid, gid and groups, children running as it when the daemon is root.
 * -ENOENT when there is no such user. */
int identity_from_user(const char *name, struct identity *ret);
/* Copies src into dst (dst's old content is not freed). */
void identity_copy(struct identity *dst, const struct identity *src);
/* Frees what id holds; leaves it empty. */
void identity_clear(struct identity *id);
/* True when acting as id would change anything: the process runs as root
 * and id is another uid. Whether work for id does is id->change; this is
 * for checks made as the peer whatever run_as says (the search right on a
 * workspace it asks for). */
bool identity_needs_switch(const struct identity *id);

/* A thread's own credentials while it acts as someone else. */
struct identity_saved {
	uid_t fsuid;
	gid_t fsgid;
	gid_t *groups;
	int n_groups;
	bool active;
};

/*
 * Makes the calling thread (never the loop) act on files as id: groups,
 * then fsgid, then fsuid, each checked. On failure the thread is as it was
 * and a negative errno is returned. identity_leave() must follow.
 */
int identity_enter(const struct identity *id, struct identity_saved *saved);
/* Gives the thread back the credentials identity_enter() saved; aborts
 * when they cannot be restored (a thread must never keep a peer's rights). */
void identity_leave(struct identity_saved *saved);
/* True when the calling thread's fsuid and fsgid are the process's
 * effective ids: no identity of an earlier job is left on it. */
bool identity_thread_clean(void);
/*
 * Runs fn(arg) as id on a short-lived thread of its own and waits for it:
 * for the few checks the loop must have made as a peer (the loop itself
 * never switches). The thread enters id before fn and leaves it after;
 * its credentials die with it. Returns what fn returned, or a negative
 * errno when the thread could not be started or id not taken (fn not run).
 */
int identity_run(const struct identity *id, int (*fn)(void *arg), void *arg);

#endif
