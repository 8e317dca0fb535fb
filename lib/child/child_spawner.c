/* SPDX-License-Identifier: MIT */
/*
 * Spawners: one process per seccomp program, forked from the daemon the
 * first time a sandboxed child of that program is started, that has done
 * once what every such child did before its exec: the bounding set
 * emptied, the securebits locked, no_new_privs, and the seccomp filter
 * loaded (the kernel compiles a filter for each process that loads it; a
 * child of a process that has it shares it). Each child it starts inherits
 * all that and carries out only the part of its plan that is the call's
 * (sandbox_child_apply_spawned(): cgroup, the namespaces made ahead, ids,
 * capabilities, Landlock), then execs. Its resource limits are worked out
 * by the spawner from its own, which the child starts with: the child sets
 * each that differs, without reading it first; its stdin, when the call
 * gives none, is the spawner's /dev/null. Long because the spawner's
 * process, its wire and its child's side are one protocol, read best
 * together.
 *
 * The spawner clones each child with CLONE_PARENT, so it is the daemon's
 * child, reaped, watched and killed as any other (child_spawn.c), and
 * hands back its pid (the daemon opens its pidfd: some 4 µs less than
 * CLONE_PIDFD and the fd passed back). The daemon sends a request (the
 * command, its environment, the plan's values and fds) over a
 * SOCK_SEQPACKET socket and waits for the answer; the spawner answers
 * once the child has exec'd (CLONE_VFORK) or failed. A spawner that is
 * gone when a request is sent is reaped and the call started directly
 * (the request never reached it); one that ends or does not answer after
 * it was sent fails the call with the step named (the command may have
 * started). The next call starts a new spawner.
 *
 * What a child of it costs, measured in place (medians of a loaded 2-core
 * VM, default-profile shell): some 3 µs in the spawner from request to
 * clone (the working directory's path, cwd_path()), 18 µs from clone to
 * the child running, 37 µs of the child's own work (its cgroup 8, the
 * mount namespace 7 with the path checked, Landlock's restrict_self 14,
 * ids, capabilities, fds and limits the rest), 10 µs from the daemon's
 * send to the spawner's receive and 13 from its answer to the daemon's
 * receive. Tried and left out: joining the cgroup with clone3's
 * CLONE_INTO_CGROUP, which would need clone3 allowed by the filter the
 * children inherit and a filter of their own refusing it again (loading
 * even a 7-instruction filter costs 17 µs here, twice the cgroup write);
 * Landlock enforced once by a spawner per ruleset, its children sharing
 * its domain (it saves the 14 µs, but a child could then signal, stop or
 * take fds from its spawner and reach the abstract sockets of other
 * calls, which their own domain each keeps apart); answering before the
 * exec (without CLONE_VFORK the child would still read the request's
 * memory when the spawner takes the next); a start the daemon completes
 * later from its loop (the same work on the same CPU, and every caller
 * of child_spawn() would have to take a start that fails afterwards);
 * the spawner taking a call's resource limits on itself so that its
 * children set none (three prlimit64, 1.2 µs: putting back a limit the
 * next call has not takes CAP_SYS_RESOURCE, which root lacks in many
 * containers, this one among them); a scheduler slice for the spawner
 * longer than its children's (sched_setattr, 3 ms, reset on fork): woken
 * at its child's exec it no longer preempts a short command, but woken by
 * a request it still preempts the daemon before the daemon waits for the
 * answer (some two calls in five), and no gain showed in time per call.
 */
#include "lib/child/child_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/filter.h>

#include "lib/sandbox/sandbox.h"
#include "proto/base/util.h"

/* The largest request (the command's arguments and environment): beyond
 * it, or beyond what the socket takes, the child is started directly. */
#define SPAWNER_MSG_MAX (1024 * 1024)
/* The most arguments and environment entries a request has. */
#define SPAWNER_STRINGS_MAX 65536
/* The most supplementary groups a request has. */
#define SPAWNER_GROUPS_MAX 1024
/* The spawner's socket and its /dev/null, the only fds it keeps (but
 * 0-2) between requests. */
#define SPAWNER_SOCK_FD 3
#define SPAWNER_NULL_FD 4
/* How long the daemon waits for a spawner's answer (a child's exec). */
#define SPAWNER_ANSWER_MS 10000

/* The fds of a request, in the order they are sent (those present). */
enum { F_CWD, F_IN, F_OUT, F_ERR, F_CGROUP, F_NETNS, F_MNTNS, F_LL1, F_LL2, F_EXEC, F_COUNT };

struct spawner_req {
	uint32_t len;			/* of the whole request */
	uint32_t fds;			/* bit F_*: that fd is sent */
	uint32_t argc, envc;
	uint64_t fd_soft;
	uint32_t uid, gid;
	uint32_t n_groups;
	uint8_t set_ids, subreaper;
	uint8_t err_is_out;		/* stderr is stdout's fd, sent once (no F_ERR) */
	uint32_t n_rlimits;
	struct { int32_t resource; uint64_t value; } rlimits[6];
	/* then gid_t groups[n_groups]; the path, argv and envp, each NUL-ended */
};

struct spawner_answer {
	int32_t err;			/* 0, or why the child did not exec */
	int32_t pid;			/* the child (exited when err), or 0 */
	uint64_t failed;		/* its sandbox's step: a string of the
					 * daemon's image, at the same address
					 * in the spawner */
};

/* One spawner, for one seccomp program. */
struct spawner {
	/* The plans' program, a copy: the key (a program freed on a reload
	 * and another made at its address must not find this one). */
	struct sock_fprog key;
	pid_t pid;			/* 0: none */
	int sock;
	bool broken;			/* could not be set up: not tried again */
};

/* Three programs (one per network kind) and room for the next after a
 * reload. */
static struct spawner spawners[6];

/* ---- the spawner process ---------------------------------------------- */

/* The kernel's struct rlimit64 for prlimit64(2). */
struct spawner_rlimit {
	uint64_t cur, max;
};

/* What the spawner's child needs, in the spawner's memory. */
struct spawned_args {
	const char *path;
	char *const *argv;
	char *const *envp;
	int fd[F_COUNT];
	/* The resource limits it sets (the request's, and the soft limit on
	 * open files for children), worked out by the spawner from its own,
	 * which the child has: one prlimit64 each, only where they differ. */
	struct { int resource; struct spawner_rlimit rl; } lim[8];
	unsigned n_lim;
	struct sandbox_child c;
	/* The working directory's path, where the child joins a mount
	 * namespace (which moves it to that namespace's root), or NULL: see
	 * cwd_path(). */
	const char *cwd;
	int err;
};

/* The spawner's own resource limits (its children's at their clone),
 * read once; and /dev/null, open for reading, a child's stdin when the
 * call gives none. */
static struct spawner_rlimit spawner_rl[RLIM_NLIMITS];
static int spawner_null = -1;
/* The daemon, its children's parent (CLONE_PARENT). */
static pid_t spawner_daemon;

/* The spawner's child until exec: raw system calls only, on the spawner's
 * stack and memory (CLONE_VM), with a copy of its fd table, signals
 * blocked and at their defaults (the spawner's). */
__attribute__((no_sanitize("address"))) static int spawned_child(void *arg)
{
	struct spawned_args *a = arg;
	const uint64_t none = 0;
	long in = a->fd[F_IN] >= 0 ? a->fd[F_IN] : spawner_null;
	/* Given the path of its working directory, entered once it has
	 * joined its mount namespace, it does not move there first. */
	if (syscall(SYS_setpgid, 0, 0) < 0 || (!a->cwd && a->fd[F_CWD] >= 0 && syscall(SYS_fchdir, a->fd[F_CWD]) < 0))
		goto fail;
	for (unsigned i = 0; i < a->n_lim; i++)
		if (syscall(SYS_prlimit64, 0, a->lim[i].resource, &a->lim[i].rl, NULL) < 0) {
			a->c.failed = "setting a resource limit";
			goto fail;
		}
	/* The spawner keeps 0-2 open (on /dev/null), so every fd received
	 * is 3 or above and each dup3 makes a new fd, without close-on-exec;
	 * everything else is close-on-exec. */
	if (in < 0 && (in = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		goto fail;
	if (syscall(SYS_dup3, in, STDIN_FILENO, 0) < 0 || syscall(SYS_dup3, a->fd[F_OUT], STDOUT_FILENO, 0) < 0 ||
	    syscall(SYS_dup3, a->fd[F_ERR], STDERR_FILENO, 0) < 0)
		goto fail;
	if (sandbox_child_apply_spawned(&a->c, a->cwd, a->fd[F_CWD]) < 0)
		goto fail;
	if (child_die_with_parent(spawner_daemon) < 0) {
		a->c.failed = "dying with the daemon (PR_SET_PDEATHSIG)";
		goto fail;
	}
	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
	if (a->fd[F_EXEC] >= 0) {
		/* The checked program (child_opts.exec_fd): a script's
		 * interpreter is given it, without close-on-exec. */
		(void)syscall(SYS_execveat, a->fd[F_EXEC], "", a->argv, a->envp, AT_EMPTY_PATH);
		if (errno == ENOENT && syscall(SYS_fcntl, a->fd[F_EXEC], F_SETFD, 0) == 0)
			(void)syscall(SYS_execveat, a->fd[F_EXEC], "", a->argv, a->envp, AT_EMPTY_PATH);
	} else {
		(void)syscall(SYS_execve, a->path, a->argv, a->envp);
	}
fail:
	a->err = errno ? errno : EINVAL;
	syscall(SYS_exit_group, 127);
	return 127;
}

/* The device, inode and mount of a directory (the mount: a directory
 * bound at two places must not be entered by the other's path). */
static bool dir_id(int dfd, const char *path, int flags, struct statx *ret)
{
	return statx(dfd, path, flags, STATX_TYPE | STATX_INO | STATX_MNT_ID, ret) == 0 &&
	       (ret->stx_mask & STATX_MNT_ID) && S_ISDIR(ret->stx_mode);
}

/*
 * The path of the working directory of a child that joins a mount
 * namespace: its cwd fd's, or the spawner's own directory's. Read from
 * /proc it costs some 7 µs even here (11 in the child, whose /proc
 * entries are all new), so the last few are kept with the device, inode
 * and mount they led to, and one is used again while it still leads
 * there (two statx, some 2 µs); the child checks that it entered that
 * directory (apply.c). NULL when it cannot be read: the child reads its
 * own.
 */
static const char *cwd_path(const struct spawned_args *a)
{
	static struct {
		struct statx id;
		char path[PATH_MAX];
	} kept[4];
	static unsigned next;
	struct statx id, now;
	int fd = a->fd[F_CWD];
	if (a->c.mntns_fd < 0 || !(fd >= 0 ? dir_id(fd, "", AT_EMPTY_PATH, &id) : dir_id(AT_FDCWD, ".", 0, &id)))
		return NULL;
	for (unsigned i = 0; i < ELEMENTSOF(kept); i++)
		if (kept[i].path[0] && kept[i].id.stx_ino == id.stx_ino && kept[i].id.stx_mnt_id == id.stx_mnt_id &&
		    kept[i].id.stx_dev_major == id.stx_dev_major && kept[i].id.stx_dev_minor == id.stx_dev_minor &&
		    dir_id(AT_FDCWD, kept[i].path, 0, &now) && now.stx_ino == id.stx_ino &&
		    now.stx_mnt_id == id.stx_mnt_id && now.stx_dev_major == id.stx_dev_major &&
		    now.stx_dev_minor == id.stx_dev_minor)
			return kept[i].path;
	char proc[64];
	if (fd >= 0)
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	else
		snprintf(proc, sizeof(proc), "/proc/self/cwd");
	unsigned i = next++ % ELEMENTSOF(kept);
	ssize_t n = readlink(proc, kept[i].path, PATH_MAX - 1);
	if (n <= 0 || n >= PATH_MAX - 1 || kept[i].path[0] != '/') {
		kept[i].path[0] = '\0';
		return NULL;
	}
	kept[i].path[n] = '\0';
	kept[i].id = id;
	return kept[i].path;
}

/* Sends len bytes of buf, with fd (SCM_RIGHTS) when it is not -1;
 * sendmsg()'s result. */
static ssize_t send_with_fd(int sock, const void *buf, size_t len, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	ssize_t n;
	while ((n = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return n;
}

/* Sends an answer. */
static void answer(int sock, const struct spawner_answer *ans)
{
	(void)send_with_fd(sock, ans, sizeof(*ans), -1);
}

/* Reads the strings of a request into ptrs (count of them, NUL-ended
 * each, within [p, end)); returns past the last, or NULL. */
static const char *take_strings(const char *p, const char *end, uint32_t count, char **ptrs)
{
	for (uint32_t i = 0; i < count; i++) {
		const char *z = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
		if (!z)
			return NULL;
		ptrs[i] = (char *)p;
		p = z + 1;
	}
	ptrs[count] = NULL;
	return p;
}

/* Checks a request and fills the child's arguments from it; a negative
 * errno if it is not one the daemon would send. */
static int parse(const char *buf, size_t n, const int *fds, unsigned n_fds, char **ptrs, struct spawned_args *a)
{
	struct spawner_req q;
	if (n < sizeof(q))
		return -EBADMSG;
	memcpy(&q, buf, sizeof(q));
	if (q.len != n || q.argc < 1 || q.argc > SPAWNER_STRINGS_MAX || q.envc > SPAWNER_STRINGS_MAX ||
	    q.n_groups > SPAWNER_GROUPS_MAX || q.n_rlimits > ELEMENTSOF(q.rlimits) || (q.fds >> F_COUNT) ||
	    (unsigned)__builtin_popcount(q.fds) != n_fds || !(q.fds & (1u << F_OUT)) ||
	    !(q.fds & (1u << F_ERR)) == !q.err_is_out ||
	    n - sizeof(q) < q.n_groups * sizeof(gid_t))
		return -EBADMSG;
	memset(a, 0, sizeof(*a));
	unsigned k = 0;
	for (int f = 0; f < F_COUNT; f++)
		a->fd[f] = q.fds & (1u << f) ? fds[k++] : -1;
	if (q.err_is_out)
		a->fd[F_ERR] = a->fd[F_OUT];
	const char *p = buf + sizeof(q);
	const char *end = buf + n;
	/* The groups, aligned for the kernel: moved to the strings' area. */
	gid_t *groups = (gid_t *)(void *)(ptrs + q.argc + q.envc + 2);
	memcpy(groups, p, q.n_groups * sizeof(gid_t));
	p += q.n_groups * sizeof(gid_t);
	char *path[2];
	if (!(p = take_strings(p, end, 1, path)) || !(p = take_strings(p, end, q.argc, ptrs)) ||
	    !take_strings(p, end, q.envc, ptrs + q.argc + 1))
		return -EBADMSG;
	a->path = path[0];
	a->argv = ptrs;
	a->envp = ptrs + q.argc + 1;
	struct sandbox_child *c = &a->c;
	c->cgroup_fd = -1;
	c->cgroup_procs_fd = a->fd[F_CGROUP];
	c->netns_fd = a->fd[F_NETNS];
	c->mntns_fd = a->fd[F_MNTNS];
	c->landlock_fd = a->fd[F_LL1];
	c->landlock_fd2 = a->fd[F_LL2];
	c->userns_fd = -1;
	c->cap_last = -1;
	c->set_ids = q.set_ids;
	c->uid = q.uid;
	c->gid = q.gid;
	c->groups = groups;
	c->n_groups = q.n_groups;
	c->subreaper = q.subreaper;
	/* What sandbox_child_apply() would set, from what the child starts
	 * with: the soft limit on open files (child_set_fd_limit), then each
	 * limit lowered, never raised. */
	struct spawner_rlimit want[RLIM_NLIMITS];
	uint32_t touched = 0;
	memcpy(want, spawner_rl, sizeof(want));
	if (q.fd_soft) {
		want[RLIMIT_NOFILE].cur = MIN(q.fd_soft, want[RLIMIT_NOFILE].max);
		touched |= 1u << RLIMIT_NOFILE;
	}
	for (unsigned i = 0; i < q.n_rlimits; i++) {
		int r = q.rlimits[i].resource;
		if (r < 0 || r >= RLIM_NLIMITS)
			return -EBADMSG;
		want[r].max = MIN(want[r].max, q.rlimits[i].value);
		want[r].cur = MIN(want[r].cur, want[r].max);
		touched |= 1u << r;
	}
	for (int r = 0; r < RLIM_NLIMITS; r++)
		if ((touched & (1u << r)) && memcmp(&want[r], &spawner_rl[r], sizeof(want[r])) != 0) {
			a->lim[a->n_lim].resource = r;
			a->lim[a->n_lim++].rl = want[r];
		}
	return 0;
}

/* Says the spawner is ready (one byte, 1) or not (0), with the listener
 * of its program's notifications when it has one (SCM_RIGHTS; the
 * program hands no sendmsg() to the daemon, which waits for this). */
static int say_ready(int sock, char ready, int listener)
{
	return send_with_fd(sock, &ready, 1, ready && listener >= 0 ? listener : -1) == 1 ? 0 : -1;
}

/* The spawner: sets itself up, says so (one byte), then starts a child
 * per request until the daemon's end of the socket closes. */
__attribute__((noreturn)) static void spawner_main(int sock, pid_t daemon, int cap_last, const void *prog)
{
	/* It goes with the daemon; the daemon may have gone already. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != daemon)
		syscall(SYS_exit_group, 1);
	(void)prctl(PR_SET_NAME, "toolcalld-spawn");
	spawner_daemon = daemon;
	/* Every signal at its default (the kernel's struct sigaction, all
	 * zero: SIG_DFL), blocked (since the fork) until the child's exec. */
	const uint64_t dfl[4] = {0};
	for (int sig = 1; sig <= 64; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)syscall(SYS_rt_sigaction, sig, dfl, NULL, sizeof(uint64_t));
	/* 0-2 on /dev/null, where they are not open; nothing else but the
	 * socket. */
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			syscall(SYS_exit_group, 1);
	if (sock < 3)
		syscall(SYS_exit_group, 1);
	if (sock > 3)
		(void)syscall(SYS_close_range, 3U, (unsigned)sock - 1, 0U);
	(void)syscall(SYS_close_range, (unsigned)sock + 1, ~0U, 0U);
	/* The socket on 3, /dev/null on 4: every fd above is a request's
	 * (or its child's pidfd), all closed at once when it is answered. */
	if (sock != SPAWNER_SOCK_FD && (dup3(sock, SPAWNER_SOCK_FD, O_CLOEXEC) != SPAWNER_SOCK_FD || close(sock) < 0))
		syscall(SYS_exit_group, 1);
	sock = SPAWNER_SOCK_FD;
	spawner_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (spawner_null != SPAWNER_NULL_FD)
		syscall(SYS_exit_group, 1);
	for (int r = 0; r < RLIM_NLIMITS; r++)
		if (syscall(SYS_prlimit64, 0, r, NULL, &spawner_rl[r]) < 0)
			syscall(SYS_exit_group, 1);
	size_t ptrs_size = (2 * SPAWNER_STRINGS_MAX + 2) * sizeof(char *) + SPAWNER_GROUPS_MAX * sizeof(gid_t);
	char *buf = mmap(NULL, SPAWNER_MSG_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char **ptrs = mmap(NULL, ptrs_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* The child's stack: it needs some 5 KiB (apply.c reads its working
	 * directory's path). */
	static _Alignas(16) char stack[32768];
	char ready = 1;
	int listener = -1;
	if (buf == MAP_FAILED || ptrs == MAP_FAILED || sandbox_spawner_setup(cap_last, prog, &listener) < 0)
		ready = 0;
	if (say_ready(sock, ready, listener) < 0 || !ready)
		syscall(SYS_exit_group, 1);
	if (listener >= 0)
		close(listener);	/* the daemon's now */

	for (;;) {
		union {
			char buf[CMSG_SPACE(F_COUNT * sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { .iov_base = buf, .iov_len = SPAWNER_MSG_MAX };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
				     .msg_controllen = sizeof(u.buf) };
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			syscall(SYS_exit_group, 0);
		int fds[F_COUNT];
		unsigned n_fds = 0;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (n_fds < F_COUNT)
					fds[n_fds++] = fd;
				else
					close(fd);
			}
		}
		struct spawned_args a;
		struct spawner_answer ans = {0};
		int r = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? -EMSGSIZE
			: parse(buf, (size_t)n, fds, n_fds, ptrs, &a);
		if (r < 0) {
			ans.err = -r;
		} else {
			a.cwd = cwd_path(&a);
			/* No CLONE_PIDFD: the daemon opens the pidfd of its
			 * own unreaped child itself (pidfd_open), cheaper
			 * than one made here and passed over the socket. */
			int flags = CLONE_VM | CLONE_VFORK | CLONE_PARENT | SIGCHLD;
			pid_t pid = clone(spawned_child, stack + sizeof(stack), flags, &a);
			if (pid < 0) {
				ans.err = errno;
			} else {
				ans.pid = pid;
				ans.err = a.err;
				ans.failed = (uint64_t)(uintptr_t)a.c.failed;
			}
		}
		/* The request's fds closed before the answer: the daemon
		 * may run as soon as it is sent (it has waited), and a
		 * child that is gone by then must find its output pipe at
		 * its end, not still held here (which costs the daemon
		 * another wakeup before it can answer its call). Bounded:
		 * close_range walks every slot of the range, and the table
		 * is as large as the daemon's was. */
		int top = -1;
		for (unsigned i = 0; i < n_fds; i++)
			top = MAX(top, fds[i]);
		if (top > SPAWNER_NULL_FD)
			(void)syscall(SYS_close_range, SPAWNER_NULL_FD + 1U, (unsigned)top, 0U);
		answer(sock, &ans);
	}
}

/* ---- the daemon's side ------------------------------------------------- */

/* Waits for sock to be readable, up to ms; false on timeout. */
static bool wait_readable(int sock, int ms)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	uint64_t end = mono_ms() + (uint64_t)ms;
	for (;;) {
		int left = (int)(end > mono_ms() ? end - mono_ms() : 0);
		int k = poll(&p, 1, left);
		if (k > 0)
			return true;
		if (k == 0 || (k < 0 && errno != EINTR))
			return false;
	}
}

/* Ends a spawner: kills and reaps it. */
static void spawner_end(struct spawner *s)
{
	if (s->pid <= 0)
		return;
	close(s->sock);
	s->sock = -1;
	(void)kill(s->pid, SIGKILL);
	while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
		;
	child_untrack(s->pid);
	s->pid = 0;
}

/* Starts the spawner of a program; false if it cannot be. */
static bool spawner_start(struct spawner *s, const void *bpf, int cap_last)
{
	const void *prog = seccomp_spawner_prog(bpf);
	int sv[2];
	if (!prog || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return false;
	int size = SPAWNER_MSG_MAX + 4096;
	if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
		(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	if (setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	pid_t daemon = getpid();
	sigset_t all, old;
	sigfillset(&all);
	(void)sigprocmask(SIG_SETMASK, &all, &old);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		spawner_main(sv[1], daemon, cap_last, prog);
	}
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return false;
	}
	child_track(pid);
	s->pid = pid;
	s->sock = sv[0];
	char ready = 0;
	ssize_t n = -1;
	int listener = -1;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &ready, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	if (wait_readable(s->sock, SPAWNER_ANSWER_MS))
		while ((n = recvmsg(s->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT)) < 0 && errno == EINTR)
			;
	for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&listener, CMSG_DATA(cm), sizeof(int));
	/* A program that hands calls to the daemon without its listener
	 * watched would keep its children waiting: not used. */
	bool notifies = seccomp_prog_notifies(prog);
	if (n != 1 || !ready || (mh.msg_flags & MSG_CTRUNC) || notifies != (listener >= 0) ||
	    (listener >= 0 && sandbox_netnotif_add(TAKE_FD(listener), prog) < 0)) {
		closep(&listener);
		spawner_end(s);
		return false;
	}
	/* Answers are waited for in recvmsg itself, bounded by the socket
	 * (read_answer()). */
	struct timeval tv = { .tv_sec = SPAWNER_ANSWER_MS / 1000, .tv_usec = SPAWNER_ANSWER_MS % 1000 * 1000 };
	if (setsockopt(s->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		spawner_end(s);
		return false;
	}
	return true;
}

/* Whether a spawner is the one of a program. */
static bool spawner_is(const struct spawner *s, const struct sock_fprog *prog)
{
	return s->key.filter && s->key.len == prog->len &&
	       memcmp(s->key.filter, prog->filter, prog->len * sizeof(*prog->filter)) == 0;
}

/* The spawner of a program, started if need be; NULL if none can be. */
static struct spawner *spawner_get(const void *bpf, int cap_last)
{
	const struct sock_fprog *prog = bpf;
	struct spawner *slot = NULL;
	for (size_t i = 0; i < ELEMENTSOF(spawners) && !slot; i++)
		if (spawner_is(&spawners[i], prog))
			slot = &spawners[i];
	for (size_t i = 0; i < ELEMENTSOF(spawners) && !slot; i++)
		if (!spawners[i].key.filter)
			slot = &spawners[i];
	if (!slot || slot->broken)
		return NULL;
	if (slot->pid > 0)
		return slot;
	if (!slot->key.filter) {
		slot->key.len = prog->len;
		slot->key.filter = xmemdup(prog->filter, prog->len * sizeof(*prog->filter));
	}
	if (!spawner_start(slot, bpf, cap_last)) {
		slot->broken = true;
		return NULL;
	}
	return slot;
}

/* Appends n bytes to the request being built. */
static void put(char **p, const void *src, size_t n)
{
	memcpy(*p, src, n);
	*p += n;
}

/* Builds the request of a call; NULL when it is too large for one. */
static char *build_request(const struct spawner_call *call, size_t *ret_len, int *fds, unsigned *ret_n_fds)
{
	const struct sandbox_child *c = call->sandbox;
	struct spawner_req q = {0};
	size_t len = sizeof(q) + c->n_groups * sizeof(gid_t) + strlen(call->path) + 1;
	for (char *const *v = call->argv; *v; v++, q.argc++)
		len += strlen(*v) + 1;
	for (char *const *v = call->envp; v && *v; v++, q.envc++)
		len += strlen(*v) + 1;
	if (len > SPAWNER_MSG_MAX || q.argc > SPAWNER_STRINGS_MAX || q.envc > SPAWNER_STRINGS_MAX ||
	    c->n_groups > SPAWNER_GROUPS_MAX || c->n_rlimits > ELEMENTSOF(q.rlimits))
		return NULL;
	int all[F_COUNT] = {
		[F_CWD] = call->cwd_fd, [F_IN] = call->in_fd, [F_OUT] = call->out_fd, [F_ERR] = call->err_fd,
		[F_CGROUP] = c->cgroup_procs_fd, [F_NETNS] = c->netns_fd, [F_MNTNS] = c->mntns_fd,
		[F_LL1] = c->landlock_fd, [F_LL2] = c->landlock_fd2, [F_EXEC] = call->exec_fd,
	};
	/* One fd less to pass and to close when both streams share one. */
	if (call->err_fd == call->out_fd) {
		q.err_is_out = 1;
		all[F_ERR] = -1;
	}
	unsigned n_fds = 0;
	for (int f = 0; f < F_COUNT; f++)
		if (all[f] >= 0) {
			q.fds |= 1u << f;
			fds[n_fds++] = all[f];
		}
	q.len = (uint32_t)len;
	q.fd_soft = call->fd_soft;
	q.uid = c->uid;
	q.gid = c->gid;
	q.set_ids = c->set_ids;
	q.n_groups = (uint32_t)c->n_groups;
	q.subreaper = c->subreaper;
	q.n_rlimits = c->n_rlimits;
	for (unsigned i = 0; i < c->n_rlimits; i++) {
		q.rlimits[i].resource = c->rlimits[i].resource;
		q.rlimits[i].value = c->rlimits[i].value;
	}
	char *msg = xmalloc(len), *p = msg;
	put(&p, &q, sizeof(q));
	if (c->n_groups)
		put(&p, c->groups, c->n_groups * sizeof(gid_t));
	put(&p, call->path, strlen(call->path) + 1);
	for (char *const *v = call->argv; *v; v++)
		put(&p, *v, strlen(*v) + 1);
	for (char *const *v = call->envp; v && *v; v++)
		put(&p, *v, strlen(*v) + 1);
	*ret_len = len;
	*ret_n_fds = n_fds;
	return msg;
}

/* Sends a request with its fds: 0 or a negative errno. */
static int send_request(int sock, const char *msg, size_t len, const int *fds, unsigned n_fds)
{
	union {
		char buf[CMSG_SPACE(F_COUNT * sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n_fds) {
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, n_fds * sizeof(int));
	}
	ssize_t n;
	while ((n = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

/* Reads the answer (no fds: the kernel closes any and says so with
 * MSG_CTRUNC): 0 or a negative errno. */
static int read_answer(int sock, struct spawner_answer *ans)
{
	struct iovec iov = { .iov_base = ans, .iov_len = sizeof(*ans) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	/* Blocking, up to SO_RCVTIMEO (spawner_start()): one system call
	 * where a poll and a recvmsg were two. */
	ssize_t n;
	while ((n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
	if (n != (ssize_t)sizeof(*ans) || (mh.msg_flags & MSG_CTRUNC) || (!ans->err && ans->pid <= 0))
		return n == 0 ? -EPIPE : -EBADMSG;
	return 0;
}

int spawner_spawn(const struct spawner_call *call, pid_t *ret_pid)
{
	struct sandbox_child *c = call->sandbox;
	if (!sandbox_child_spawnable(c) || c->cap_last != sandbox_cap_last())
		return SPAWNER_NONE;
	int fds[F_COUNT];
	unsigned n_fds;
	size_t len;
	_cleanup_free_ char *msg = build_request(call, &len, fds, &n_fds);
	if (!msg)
		return SPAWNER_NONE;
	struct spawner *s = spawner_get(c->bpf, c->cap_last);
	if (!s)
		return SPAWNER_NONE;
	int r = send_request(s->sock, msg, len, fds, n_fds);
	if (r == -EMSGSIZE || r == -ENOBUFS)
		return SPAWNER_NONE;	/* too large for the socket: directly */
	if (r < 0) {
		/* Gone before it got the request: a new one for the next
		 * call, this one directly. */
		spawner_end(s);
		return SPAWNER_NONE;
	}
	struct spawner_answer ans;
	if ((r = read_answer(s->sock, &ans)) < 0) {
		/* Gone or stuck with the request: whether the command
		 * started is not known, so the call fails. */
		spawner_end(s);
		c->failed = "starting the child through the spawner, which ended before it answered";
		return r;
	}
	if (ans.err) {
		c->failed = (const char *)(uintptr_t)ans.failed;
		if (ans.pid > 0)
			while (waitpid(ans.pid, NULL, 0) < 0 && errno == EINTR)
				;
		return -ans.err;
	}
	*ret_pid = ans.pid;
	return 0;
}
