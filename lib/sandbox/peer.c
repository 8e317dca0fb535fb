/* SPDX-License-Identifier: MIT */
/*
 * Telling a sandboxed process among the peers of the daemon's socket: a
 * process the daemon started is its descendant for as long as it lives
 * (the daemon is child subreaper, so nothing can leave its tree), and one
 * in a call's cgroup is one of a call's. Such a peer is refused, and the
 * refusals are logged at a bounded rate (a call could connect in a loop).
 */
#include "lib/sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/base/util.h"

/* How far up the tree is followed; deeper counts as confined. */
#define DEPTH_MAX 4096

/* The parent of pid from /proc/pid/stat, or -1. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(AT_FDCWD, path, buf, sizeof(buf)) <= 0)
		return -1;
	/* The command name may hold spaces and parentheses: the state and
	 * ppid follow the last ')'. */
	char *p = strrchr(buf, ')');
	int ppid;
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -1;
	return ppid;
}

/* Whether pid's cgroup v2 path names one of our call cgroups. */
static bool in_call_cgroup(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (read_small(AT_FDCWD, path, buf, sizeof(buf)) <= 0)
		return false;
	char mark[64];
	snprintf(mark, sizeof(mark), "/tc-%d-%" PRIu64 "-", (int)getpid(), sandbox_self_start());
	return strstr(buf, mark) != NULL;
}

/* Whether a peer is one of the processes the daemon started. */
bool sandbox_pid_confined(pid_t pid, int pidfd)
{
	pid_t self = getpid();
	bool confined = false;
	if (pid <= 0 || pid == self)
		return false;
	if (in_call_cgroup(pid))
		confined = true;
	pid_t p = pid;
	for (int depth = 0; !confined && p > 1; depth++) {
		if (depth >= DEPTH_MAX) {
			confined = true;
			break;
		}
		p = parent_of(p);
		if (p == self)
			confined = true;
	}
	/* The walk read /proc by pid: if the peer is gone now, its pid may
	 * have named another process meanwhile. A gone peer is refused. */
	if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0 && errno == ESRCH)
		return true;	/* EPERM only says the peer is another user's: it is there */
	return confined;
}

/* The refusals since the last logged one, and when that was. */
static unsigned refused_unlogged;
static uint64_t refused_logged_ms;
static bool refused_any;

/* Says whether a refusal of a sandboxed peer is logged now: the first one,
 * then at most one every interval_ms, which says (*ret_more) how many were
 * refused since the last logged one and not logged. */
bool sandbox_refusal_due(uint64_t now_ms, uint64_t interval_ms, unsigned *ret_more)
{
	if (refused_any && now_ms - refused_logged_ms < interval_ms) {
		refused_unlogged++;
		return false;
	}
	*ret_more = refused_unlogged;
	refused_unlogged = 0;
	refused_logged_ms = now_ms;
	refused_any = true;
	return true;
}
