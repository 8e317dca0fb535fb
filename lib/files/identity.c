/* SPDX-License-Identifier: MIT */
/*
 * Peer identities (from the socket or a user's name, with the home their
 * children get) and the per-thread switch of file-system credentials (see
 * identity.h). The raw system calls are used on purpose: glibc's
 * setgroups() and setfsuid() broadcast to every thread of the process.
 */
#include "lib/files/identity.h"

#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/base/util.h"

/* On 32-bit x86 and arm the plain calls take 16-bit ids. */
#ifdef SYS_setfsuid32
#define SYS_SETFSUID SYS_setfsuid32
#define SYS_SETFSGID SYS_setfsgid32
#define SYS_SETGROUPS SYS_setgroups32
#define SYS_GETGROUPS SYS_getgroups32
#else
#define SYS_SETFSUID SYS_setfsuid
#define SYS_SETFSGID SYS_setfsgid
#define SYS_SETGROUPS SYS_setgroups
#define SYS_GETGROUPS SYS_getgroups
#endif

int identity_from_socket(int fd, struct identity *ret)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	*ret = (struct identity){ .uid = cred.uid, .gid = cred.gid };

	gid_t small[64];
	_cleanup_free_ gid_t *big = NULL;
	gid_t *groups = small;
	len = sizeof(small);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
		if (errno != ERANGE)
			return 0;	/* before Linux 4.13: the primary group only */
		if (len > IDENTITY_MAX_GROUPS * sizeof(gid_t))
			return -E2BIG;
		/* The kernel said how much room the list needs. */
		groups = big = xmalloc(len ? len : 1);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
			return -errno;
	}
	ret->n_groups = MIN(len / sizeof(gid_t), (size_t)IDENTITY_MAX_GROUPS);
	if (ret->n_groups) {
		ret->groups = xreallocarray(NULL, ret->n_groups, sizeof(gid_t));
		memcpy(ret->groups, groups, ret->n_groups * sizeof(gid_t));
	}
	return 0;
}

/* Decides whether id's children take its ids, and their home. */
void identity_for_children(struct identity *id, bool run_as_peer)
{
	free(id->home);
	id->home = NULL;
	id->change = run_as_peer && geteuid() == 0 && id->uid != geteuid();
	if (!id->change) {
		const char *home = getenv("HOME");
		id->home = home ? xstrdup(home) : NULL;
		return;
	}
	if (id->n_groups == 0) {
		free(id->groups);
		id->groups = xmemdup(&id->gid, sizeof(gid_t));	/* never keep the daemon's groups */
		id->n_groups = 1;
	}
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwuid_r(id->uid, &pw, buf, sizeof(buf), &res) == 0 && res && res->pw_dir && res->pw_dir[0] == '/')
		id->home = xstrdup(res->pw_dir);
}

/* Looks the user up in the passwd and group databases. */
int identity_from_user(const char *name, struct identity *ret)
{
	*ret = (struct identity){0};
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return -ENOENT;
	gid_t groups[64];
	int n = (int)ELEMENTSOF(groups);
	if (getgrouplist(name, pw.pw_gid, groups, &n) < 0)
		n = 0;
	ret->uid = pw.pw_uid;
	ret->gid = pw.pw_gid;
	if (n > 0) {
		ret->groups = xmemdup(groups, (size_t)n * sizeof(gid_t));
		ret->n_groups = (size_t)n;
	}
	identity_for_children(ret, true);
	return 0;
}

void identity_copy(struct identity *dst, const struct identity *src)
{
	*dst = *src;
	dst->groups = NULL;
	if (src->n_groups) {
		dst->groups = xreallocarray(NULL, src->n_groups, sizeof(gid_t));
		memcpy(dst->groups, src->groups, src->n_groups * sizeof(gid_t));
	}
	dst->home = src->home ? xstrdup(src->home) : NULL;
}

void identity_clear(struct identity *id)
{
	if (!id)
		return;
	free(id->groups);
	id->groups = NULL;
	id->n_groups = 0;
	free(id->home);
	id->home = NULL;
}

bool identity_needs_switch(const struct identity *id)
{
	return id && id->uid != 0 && geteuid() == 0;
}

/* Returns the thread's fsuid (setfsuid with an invalid id only reports). */
static uid_t cur_fsuid(void)
{
	return (uid_t)syscall(SYS_SETFSUID, (uid_t)-1);
}

static gid_t cur_fsgid(void)
{
	return (gid_t)syscall(SYS_SETFSGID, (gid_t)-1);
}

/* Sets the thread's fsuid to uid; -EPERM when the kernel did not. */
static int set_fsuid(uid_t uid)
{
	(void)syscall(SYS_SETFSUID, uid);
	return cur_fsuid() == uid ? 0 : -EPERM;
}

static int set_fsgid(gid_t gid)
{
	(void)syscall(SYS_SETFSGID, gid);
	return cur_fsgid() == gid ? 0 : -EPERM;
}

/* Sets the thread's supplementary groups. */
static int set_groups(const gid_t *groups, size_t n)
{
	if (n > IDENTITY_MAX_GROUPS)
		return -E2BIG;
	return syscall(SYS_SETGROUPS, n, groups) < 0 ? -errno : 0;
}

int identity_enter(const struct identity *id, struct identity_saved *saved)
{
	*saved = (struct identity_saved){ .fsuid = cur_fsuid(), .fsgid = cur_fsgid() };
	long n = syscall(SYS_GETGROUPS, 0, NULL);
	if (n < 0)
		return -errno;
	saved->groups = xreallocarray(NULL, (size_t)n + 1, sizeof(gid_t));
	n = syscall(SYS_GETGROUPS, n, saved->groups);
	if (n < 0) {
		int r = -errno;
		free(TAKE_PTR(saved->groups));
		return r;
	}
	saved->n_groups = (int)n;
	saved->active = true;

	/* Groups and gid first: once the fsuid is not 0 the thread may no
	 * longer have the rights to change them. */
	int r = set_groups(id->groups, id->n_groups);
	if (r >= 0)
		r = set_fsgid(id->gid);
	if (r >= 0)
		r = set_fsuid(id->uid);
	if (r < 0) {
		identity_leave(saved);
		return r;
	}
	return 0;
}

void identity_leave(struct identity_saved *saved)
{
	if (!saved->active)
		return;
	/* The fsuid first: back to 0 gives the capabilities back. */
	if (set_fsuid(saved->fsuid) < 0 || set_fsgid(saved->fsgid) < 0 ||
	    set_groups(saved->groups, (size_t)saved->n_groups) < 0)
		abort();
	free(TAKE_PTR(saved->groups));
	saved->active = false;
}

bool identity_thread_clean(void)
{
	return cur_fsuid() == geteuid() && cur_fsgid() == getegid();
}

struct identity_job {
	const struct identity *id;
	int (*fn)(void *arg);
	void *arg;
	int result;
};

/* The thread of identity_run(). */
static void *run_as(void *p)
{
	struct identity_job *j = p;
	struct identity_saved saved;
	j->result = identity_enter(j->id, &saved);
	if (j->result < 0)
		return NULL;
	j->result = j->fn(j->arg);
	identity_leave(&saved);
	return NULL;
}

int identity_run(const struct identity *id, int (*fn)(void *arg), void *arg)
{
	struct identity_job j = { id, fn, arg, -EPERM };
	pthread_t t;
	int r = pthread_create(&t, NULL, run_as, &j);
	if (r != 0)
		return -r;
	pthread_join(t, NULL);
	return j.result;
}
