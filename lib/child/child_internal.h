/* SPDX-License-Identifier: MIT */
/*
 * What the parts of lib/child*.c share and nothing else sees: the kept
 * head and tail of one output stream (child_capture.c), and the PATH
 * search the spawn uses (child_env.c).
 */
#ifndef TC_CHILD_INTERNAL_H
#define TC_CHILD_INTERNAL_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "proto/base/buf.h"

/* One output stream's kept bytes: the first head_cap bytes, and the last
 * tail_cap bytes in a ring allocated once the head is full. */
struct capture {
	size_t head_cap;
	size_t tail_cap;
	struct buf head;
	char *ring;
	size_t ring_start;
	size_t ring_len;
	uint64_t total;
};

void capture_init(struct capture *cp, size_t cap);
void capture_add(struct capture *cp, const char *p, size_t n);
void capture_finish(struct capture *cp, char **ret, size_t *ret_len, bool *ret_truncated);
/* Bytes kept (head and tail), and capture_finish() keeping at most budget
 * of them: the head's first budget/2 at most, the rest from the tail's
 * end. */
size_t capture_kept(const struct capture *cp);
void capture_finish_within(struct capture *cp, size_t budget, char **ret, size_t *ret_len, bool *ret_truncated);
void capture_free(struct capture *cp);

/* Finds a program named without a slash in the absolute directories of
 * the PATH of envp; a name with a slash is taken as it is. */
int find_program(const char *name, char *const *envp, char **ret);

/* Makes ahead, off the way of the next call, what its child's start
 * needs (its output pipe): called once an answer is written. */
void child_ahead(void);

/* The leaders (and spawners) the daemon keeps as its children: any other
 * child of it is an orphan, killed and reaped (child_spawn.c). */
void child_track(pid_t pid);
void child_untrack(pid_t pid);

/*
 * Spawners (child_spawner.c). spawner_spawn() starts the child of a
 * sandboxed call through the spawner of its seccomp program (started if
 * need be): 0 with the child's pid (the caller opens its pidfd: the
 * child is the daemon's, unreaped), a negative errno (the child did not exec: sandbox->failed says at
 * which step when its sandbox did not hold; it has been reaped), or
 * SPAWNER_NONE: no spawner serves this call (its plan needs what a
 * spawner cannot do, it is too large, or the spawner could not be started
 * or was gone), the caller starts it itself. A spawner ends when the
 * daemon does (its socket closes; PR_SET_PDEATHSIG).
 */
struct sandbox_child;
struct spawner_call {
	const char *path;
	char *const *argv;
	char *const *envp;
	int cwd_fd, in_fd, out_fd, err_fd;	/* in_fd, cwd_fd: or -1 */
	int exec_fd;				/* or -1: child_opts.exec_fd */
	uint64_t fd_soft;			/* 0, or the soft RLIMIT_NOFILE */
	struct sandbox_child *sandbox;
};
#define SPAWNER_NONE 1

/*
 * The last step of a child before its exec: it dies (SIGKILL) with the
 * daemon, its parent, however the daemon ends (PR_SET_PDEATHSIG). Set
 * after its ids and capabilities changed, which clear it (an exec changes
 * neither: no_new_privs or the locked securebits keep setuid bits and
 * file capabilities from acting); the signal comes when the parent
 * *thread* ends, and every child is started from the daemon's main
 * thread. -ESRCH when the daemon is gone already. Descendants do not
 * inherit it: the call's cgroup (or, without one, the next daemon's
 * start, sandbox_reap_dead()) takes them. System calls only.
 */
__attribute__((no_sanitize("address"))) static inline int child_die_with_parent(pid_t parent)
{
	if (syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_getppid) != parent) {
		errno = ESRCH;
		return -ESRCH;
	}
	return 0;
}
int spawner_spawn(const struct spawner_call *call, pid_t *ret_pid);

#endif
