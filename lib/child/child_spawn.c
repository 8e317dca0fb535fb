/* SPDX-License-Identifier: MIT */
/*
 * Child process supervision: spawning into a process group of its own,
 * watching the leader through its pidfd and the output pipes through io
 * watchers of the loop seam, and stopping the group with SIGTERM then
 * SIGKILL. See child.h for the rules on process groups, which are what
 * keep this race-free.
 *
 * Long because the spawn is one sequence that must stay together: the
 * clone, everything the child does between it and exec (fds, sandbox,
 * identity; raw system calls only), and how its failure is reported back,
 * by the shared memory of CLONE_VM or, under valgrind, a pipe.
 */
#include "lib/child/child.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#include "lib/base/loop.h"
#include "lib/tool.h"
#include "proto/json.h"
#include "proto/base/util.h"
#include "lib/child/child_internal.h"
#include "lib/sandbox/sandbox.h"
#include <dirent.h>
#include <sys/prctl.h>

/* How often a leader without a pidfd is looked at. */
#define CHILD_POLL_MS 10

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* Bytes read per wakeup of one pipe: bounded so that one chatty child
 * cannot starve the rest of the loop (the watcher is level-triggered). */
#define READ_CHUNK 65536
#define READS_PER_WAKEUP 4


struct pipe_reader {
	struct child *ch;
	enum child_stream id;
	int fd;
	/* Our copy of the write end, kept until the leader is reaped: the
	 * leader's exit then wakes us once (the pidfd), not once per pipe
	 * it closes on its way out, and the pipes are drained right there. */
	int hold_fd;
	struct tc_io *io;
	bool nonblock;		/* fd is O_NONBLOCK: read() it (see pipe_read()) */
	struct capture cap;
};

struct child {
	struct tc_loop *loop;
	pid_t pid;			/* also the process group id */
	int pidfd;
	struct tc_io *pid_io;
	struct tc_timer *poll_timer;	/* no pidfd: how the leader's exit is noticed */
	struct tc_timer *kill_timer;
	struct tc_timer *drain_timer;
	struct pipe_reader pipes[CHILD_NSTREAMS];
	unsigned open_pipes;
	uint32_t kill_delay_ms;
	uint32_t drain_ms;
	uint64_t start_ms;
	bool reaped;
	bool terminating;
	bool done;
	void (*on_output)(void *arg, enum child_stream s, const char *data, size_t n);
	void (*on_eof)(void *arg, enum child_stream s);
	void (*on_done)(void *arg, struct child *ch, struct child_result *r);
	void *arg;
	struct sandbox_run *sandbox;	/* not owned; not used once reaped */
	struct child_result result;
	/* The pidfd once reaped and the pipes read to their end: no longer
	 * watched, closed by child_free(), so that what the child's owner
	 * answers is not held up by their closes (the last close of a pipe
	 * frees it). */
	int spent[CHILD_NSTREAMS + 1];
	unsigned n_spent;
};


/* The leaders not yet reaped. While the daemon is child subreaper, any
 * other child of it is an orphan some call left behind (a process that
 * left its group, a double fork), reparented to the daemon when its
 * leader exited: reap_orphans() kills and reaps those. */
static pid_t *tracked;
static size_t n_tracked;

void child_track(pid_t pid)
{
	tracked = xreallocarray(tracked, n_tracked + 1, sizeof(*tracked));
	tracked[n_tracked++] = pid;
}

void child_untrack(pid_t pid)
{
	for (size_t i = 0; i < n_tracked; i++)
		if (tracked[i] == pid) {
			tracked[i] = tracked[--n_tracked];
			break;
		}
	if (!n_tracked) {
		free(tracked);
		tracked = NULL;
	}
}

static bool is_tracked(pid_t pid)
{
	for (size_t i = 0; i < n_tracked; i++)
		if (tracked[i] == pid)
			return true;
	return false;
}

/* Kills and reaps one orphan: it is our child, unreaped, so its pid is
 * still its own. A process slow to die is left for the next sweep. */
static void reap_orphan(pid_t pid)
{
	(void)kill(pid, SIGKILL);
	for (int i = 0; i < 50; i++) {
		siginfo_t si = {0};
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (si.si_pid)
			return;
		(void)usleep(1000);
	}
}

/* Whether the daemon is child subreaper: asked until it is (it never
 * stops being one). */
static bool is_subreaper(void)
{
	static bool known;
	int v = 0;
	if (!known)
		known = prctl(PR_GET_CHILD_SUBREAPER, &v, 0, 0, 0) == 0 && v;
	return known;
}

/* Kills and reaps every child of the daemon that is not a tracked leader,
 * over and over while killing them hands their own children to us. The
 * list comes from /proc/self/task/<pid>/children: the kernel hands an
 * orphan to the first live thread of its subreaper, the main one, which
 * also spawns every leader. Only by pid, never waitpid(-1): see child.h.
 * The file stays open, read again from its start each time (opening a
 * /proc file costs more than reading it), while the process is the one
 * that opened it. */
static void reap_orphans(void)
{
	static int fd = -1;
	static pid_t fd_pid;
	if (!is_subreaper())
		return;
	pid_t self = getpid();
	if (fd >= 0 && fd_pid != self) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)self);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return;
		fd_pid = self;
	}
	char buf[4096];
	for (int round = 0; round < 64; round++) {
		bool found = false;
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			return;
		buf[n] = '\0';
		for (char *p = buf, *end; *p; p = end) {
			long pid = strtol(p, &end, 10);
			if (end == p)
				break;
			if (pid > 0 && !is_tracked((pid_t)pid)) {
				reap_orphan((pid_t)pid);
				found = true;
			}
		}
		if (!found)
			return;
	}
}

/* Lets go of our copy of a pipe's write end. */
static void pipe_release(struct pipe_reader *p)
{
	if (p->hold_fd >= 0)
		close(p->hold_fd);
	p->hold_fd = -1;
}

/* Stops watching a pipe and closes it, or, at its end (spent: no writer
 * is left), leaves the close to child_free(). */
static void pipe_close(struct pipe_reader *p, bool spent)
{
	pipe_release(p);
	if (p->fd < 0)
		return;
	/* The watcher goes before the fd: the loop must not watch a closed fd. */
	p->io = tc_io_free(p->io);
	if (spent)
		p->ch->spent[p->ch->n_spent++] = p->fd;
	else
		close(p->fd);
	p->fd = -1;
	p->ch->open_pipes--;
}

/* Calls on_done once the leader is reaped and every pipe is closed. The
 * callback may free the child, so it comes last on every path. */
static void child_maybe_done(struct child *ch)
{
	if (!ch->reaped || ch->open_pipes || ch->done)
		return;
	ch->done = true;
	tc_timer_stop(ch->drain_timer);
	for (int s = 0; s < CHILD_NSTREAMS; s++)
		capture_finish(&ch->pipes[s].cap, &ch->result.out[s], &ch->result.out_len[s],
			       &ch->result.truncated[s]);
	for (int s = 0; s < CHILD_NSTREAMS; s++) {
		ch->result.total[s] = ch->pipes[s].cap.total;
		capture_free(&ch->pipes[s].cap);
	}
	ch->on_done(ch->arg, ch, &ch->result);
}

/* Set once a pipe refused a read with RWF_NOWAIT (older kernels):
 * the next pipes are made non-blocking. */
static bool pipes_block;

/* Reads what a pipe has without waiting: one read with RWF_NOWAIT, or,
 * where the kernel refuses that for pipes, a read of the pipe made
 * non-blocking then (and each pipe made so from then on). */
static ssize_t pipe_read(struct pipe_reader *p, char *buf, size_t n)
{
	if (!p->nonblock) {
		struct iovec v = { .iov_base = buf, .iov_len = n };
		ssize_t k = preadv2(p->fd, &v, 1, -1, RWF_NOWAIT);
		if (k >= 0 || (errno != EOPNOTSUPP && errno != EINVAL && errno != ENOSYS))
			return k;
		if (fcntl(p->fd, F_SETFL, O_NONBLOCK) < 0)
			return -1;
		p->nonblock = true;
		pipes_block = true;
	}
	return read(p->fd, buf, n);
}

/* Reads what a pipe has, up to a bound per call; closes it at its end. */
static void pipe_drain(struct pipe_reader *p)
{
	struct child *ch = p->ch;
	char chunk[READ_CHUNK];

	for (int i = 0; i < READS_PER_WAKEUP && p->fd >= 0; i++) {
		ssize_t n = pipe_read(p, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			/* EOF, or an error a pipe should not give: either way the
			 * stream is over. */
			pipe_close(p, n == 0);
			if (ch->on_eof)
				ch->on_eof(ch->arg, p->id);
			return;
		}
		capture_add(&p->cap, chunk, (size_t)n);
		if (ch->on_output)
			ch->on_output(ch->arg, p->id, chunk, (size_t)n);
	}
}

/* Reads what a pipe has, up to a bound per wakeup. */
static void on_pipe(void *arg, int revents)
{
	struct pipe_reader *p = arg;
	pipe_drain(p);
	if (p->fd < 0)
		child_maybe_done(p->ch);
}

/* Gives up on pipes still held open by processes that left the group. */
static void on_drain_timer(void *arg)
{
	struct child *ch = arg;
	for (int s = 0; s < CHILD_NSTREAMS; s++)
		pipe_close(&ch->pipes[s], false);
	child_maybe_done(ch);
}

/* Sends the SIGKILL that follows SIGTERM after the kill delay. */
static void on_kill_timer(void *arg)
{
	struct child *ch = arg;
	/* Only while the leader is unreaped does its pid hold the group id. */
	if (!ch->reaped)
		(void)kill(-ch->pid, SIGKILL);
}

/* waitid on the leader: through its pidfd, or its pid when the kernel (or
 * valgrind) has no pidfd_open. Either way only our own unreaped child is
 * waited for, whose pid cannot have been recycled. */
static int wait_leader(const struct child *ch, siginfo_t *si, int flags)
{
	if (ch->pidfd >= 0)
		return waitid((idtype_t)P_PIDFD, (id_t)ch->pidfd, si, flags);
	return waitid(P_PID, (id_t)ch->pid, si, flags);
}

/* The leader has exited: kill what is left of its group, then reap it. */
static void on_pidfd(void *arg, int revents)
{
	struct child *ch = arg;
	siginfo_t si = {0};

	/* The zombie still holds the group id, so this cannot reach a
	 * recycled group; it ends background jobs that would otherwise
	 * outlive the command and hold its pipes open. Not needed when the
	 * call's cgroup is empty: its group was all in it. */
	if (!sandbox_run_kill_rest(ch->sandbox))
		(void)kill(-ch->pid, SIGKILL);
	if (wait_leader(ch, &si, WEXITED | WNOHANG) < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return;
		/* ECHILD: reaped behind our back (SIGCHLD ignored by someone);
		 * the status is lost. */
		si.si_code = 0;
		si.si_pid = ch->pid;
	}
	if (si.si_pid == 0)
		return;

	ch->result.duration_ms = mono_ms() - ch->start_ms;
	if (si.si_code == CLD_EXITED) {
		ch->result.exit_code = si.si_status;
	} else if (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) {
		ch->result.exit_code = -1;
		ch->result.signal = si.si_status;
	} else {
		ch->result.exit_code = -1;
	}
	ch->reaped = true;
	child_untrack(ch->pid);
	reap_orphans();
	ch->pid_io = tc_io_free(ch->pid_io);
	ch->poll_timer = tc_timer_free(ch->poll_timer);
	if (ch->pidfd >= 0)
		ch->spent[ch->n_spent++] = ch->pidfd;
	ch->pidfd = -1;
	tc_timer_stop(ch->kill_timer);
	/* With our write ends gone, a pipe no one else holds reads to its
	 * end at once: most commands finish here, in this one wakeup. */
	for (int s = 0; s < CHILD_NSTREAMS; s++) {
		pipe_release(&ch->pipes[s]);
		if (ch->pipes[s].fd >= 0)
			pipe_drain(&ch->pipes[s]);
	}
	if (ch->open_pipes)
		tc_timer_start(ch->drain_timer, ch->drain_ms);
	child_maybe_done(ch);
}

/* Without a pidfd: looks, without reaping, whether the leader has exited. */
static void on_poll_exit(void *arg)
{
	struct child *ch = arg;
	siginfo_t si = {0};
	if (waitid(P_PID, (id_t)ch->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0) {
		tc_timer_start(ch->poll_timer, CHILD_POLL_MS);
		return;
	}
	on_pidfd(ch, 0);
}

/* The kernel's struct sigaction for rt_sigaction(2), which spawn() calls
 * itself: glibc's sigaction() will not touch the signals it keeps for its
 * own use (32 and 33), and the child must not run through wrappers that
 * keep state in memory it shares with the daemon. */
struct kernel_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

#define KERNEL_NSIG 64

/*
 * The signals whose disposition is not the default here, as a bit mask
 * (bit sig - 1): ignored (exec keeps SIG_IGN, so the child must set these
 * back; glibc's own posix_spawn leaves 32 and 33 ignored in what it starts,
 * make's recipes among them) or caught (exec resets these itself, but the
 * child runs in the daemon's memory until it execs, and a handler of ours
 * must never run there). Looked up once, on the first spawn: the daemon
 * sets its dispositions at start and keeps them. Resetting every signal
 * instead, as posix_spawn does, costs the child some 64 sigaction calls
 * before exec, while the daemon waits.
 */
static uint64_t signals_to_reset(void)
{
	static uint64_t set;
	static bool known;
	if (!known) {
		for (int sig = 1; sig <= KERNEL_NSIG; sig++) {
			struct kernel_sigaction ksa;
			if (sig == SIGKILL || sig == SIGSTOP ||
			    syscall(SYS_rt_sigaction, sig, NULL, &ksa, sizeof(ksa.mask)) < 0)
				continue;
			if (ksa.handler != SIG_DFL)
				set |= UINT64_C(1) << (sig - 1);
		}
		known = true;
	}
	return set;
}

/* Moves an fd to 3 or above, so the child's dup3s onto 0-2 cannot clobber
 * it when the daemon runs with a standard fd closed. */
static int fd_above_stdio(int *fd)
{
	if (*fd > 2)
		return 0;
	int n = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
	if (n < 0)
		return -errno;
	close(*fd);
	*fd = n;
	return 0;
}

/* /dev/null for reading, opened once (close-on-exec, above the standard
 * fds), which a child started here dups onto its stdin rather than opening
 * it itself while the daemon waits for its exec; -1 when it cannot be
 * had (the child then opens it). */
static int devnull_fd(void)
{
	static int fd = -1;
	if (fd < 0) {
		int n = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (n >= 0 && fd_above_stdio(&n) < 0) {
			close(n);
			n = -1;
		}
		fd = n;
	}
	return fd;
}

/* Makes a pipe whose read end (ours) is read without blocking. The write
 * end stays blocking: O_NONBLOCK belongs to the open file description,
 * which the child shares, and a child writing to a full non-blocking
 * stdout would get EAGAIN. Our end is read with RWF_NOWAIT (pipe_read()),
 * which needs no fcntl before the spawn, or, where the kernel's pipes do
 * not take it, made O_NONBLOCK here (*ret_nonblock). Both ends are
 * close-on-exec; the child gets its copy by dup2. */
static int make_pipe(int *ret_r, int *ret_w, bool *ret_nonblock)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	_cleanup_close_ int r = p[0], w = p[1];
	int k;
	if ((k = fd_above_stdio(&r)) < 0 || (k = fd_above_stdio(&w)) < 0)
		return k;
	if (pipes_block && fcntl(r, F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	*ret_nonblock = pipes_block;
	*ret_r = TAKE_FD(r);
	*ret_w = TAKE_FD(w);
	return 0;
}

/* A pipe made ahead by child_ahead(), after an answer is written, which
 * the next child takes for its output: making it (some 4 µs) is then off
 * the way of that call. */
static struct {
	int r, w;
	bool nonblock;
} spare = { -1, -1, false };

static int output_pipe(int *ret_r, int *ret_w, bool *ret_nonblock)
{
	if (spare.r < 0)
		return make_pipe(ret_r, ret_w, ret_nonblock);
	*ret_r = spare.r;
	*ret_w = spare.w;
	*ret_nonblock = spare.nonblock;
	spare.r = spare.w = -1;
	return 0;
}

void child_ahead(void)
{
	if (spare.r < 0 && make_pipe(&spare.r, &spare.w, &spare.nonblock) < 0)
		spare.r = spare.w = -1;
}

/*
 * The highest capability left in the bounding set of the spawning thread,
 * up to cap_last, or -1 when none is: what a child without a sandbox plan
 * drops, 0 up to it. Looked up once: the set only ever shrinks, so the
 * figure kept can only be too high, which costs a child drops that change
 * nothing, never a capability kept.
 */
static int bounding_top = -2;

static int bounding_set_top(int cap_last)
{
	if (bounding_top == -2 || bounding_top > cap_last) {
		int top = cap_last;
		while (top >= 0 && prctl(PR_CAPBSET_READ, (unsigned long)top, 0, 0, 0) == 0)
			top--;
		bounding_top = top;
	}
	return bounding_top;
}

int child_drop_bounding_set(void)
{
	int last = sandbox_cap_last();
	if (last < 0)
		return -EPERM;
	for (int cap = 0; cap <= last; cap++)
		if (prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	bounding_top = -2;
	return bounding_set_top(last) < 0 ? 0 : -EPERM;
}

/* child_set_fd_limit(): 0, or the soft limit on open files for children. */
static uint64_t child_fd_soft;

void child_set_fd_limit(uint64_t soft)
{
	child_fd_soft = soft;
}

/* The kernel's struct rlimit64 for prlimit64(2). */
struct kernel_rlimit {
	uint64_t cur;
	uint64_t max;
};

/* What the child of spawn() needs, in memory it shares with the daemon. */
struct spawn_args {
	const char *path;
	char *const *argv;
	char *const *envp;
	int cwd_fd;
	int in_fd;			/* or -1: /dev/null */
	int out_fd;
	int err_fd;
	unsigned keep_below;		/* every fd above is left behind */
	uint64_t fd_soft;		/* 0, or the soft RLIMIT_NOFILE to set */
	uint64_t reset;			/* signals_to_reset() */
	struct sandbox_child *sandbox;	/* or NULL */
	bool subreaper;			/* the daemon is one: so is the child */
	int cap_last;			/* sandbox_cap_last(), for a child without a plan */
	int bounding_top;		/* bounding_set_top(): what it drops, 0 up to this */
	bool new_session;		/* child_opts.tty: setsid, in_fd the controlling terminal */
	int report_fd;			/* or -1: see spawn_report */
	int exec_fd;			/* child_opts.exec_fd */
	pid_t parent;			/* the daemon's pid */
	int err;			/* set by the child when it cannot exec */
};

/*
 * What the child of spawn() tells the daemon when it cannot exec, through
 * report_fd, where its memory is a copy of the daemon's rather than the
 * daemon's own: under valgrind, which runs the clone as a fork. The step
 * named is a string of the daemon's image, at the same address in both.
 */
struct spawn_report {
	const char *failed;		/* the sandbox's step, or NULL */
	int64_t err;			/* no padding: every byte written is set */
};

/* The kernel's struct linux_dirent64, as getdents64(2) fills it. */
struct kernel_dirent64 {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/*
 * Closes every fd from 3 up, reading the list from /proc/self/fd: for the
 * child of spawn() on kernels without close_range (before 5.9), so system
 * calls only, on a buffer of the stack. After closing some, the directory
 * is read again from the start, since its entries moved.
 */
__attribute__((no_sanitize("address"))) static void close_from_3_by_proc(void)
{
	long dfd = syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;	/* no /proc: close-on-exec must do */
	_Alignas(8) char buf[1024];
	for (;;) {
		long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
		if (n <= 0)
			break;
		bool closed = false;
		for (long off = 0; off < n;) {
			const struct kernel_dirent64 *d = (const void *)(buf + off);
			const char *name = d->name;
			long fd = 0;
			for (; *name >= '0' && *name <= '9'; name++)
				fd = fd * 10 + (*name - '0');
			if (!*name && fd >= 3 && fd != dfd) {
				(void)syscall(SYS_close, fd);
				closed = true;
			}
			off += d->reclen;
		}
		if (closed && syscall(SYS_lseek, dfd, 0, SEEK_SET) < 0)
			break;
	}
	(void)syscall(SYS_close, dfd);
}

/* Closes every fd from 3 up but keep and keep2 (-1: none kept), for the
 * child of spawn(). */
__attribute__((no_sanitize("address"))) static void close_from_3(long keep, long keep2)
{
	if (keep < 0 && keep2 < 0) {
		if (syscall(SYS_close_range, 3U, ~0U, 0U) < 0)
			close_from_3_by_proc();
		return;
	}
	/* With a fd kept: kernels with close_range only. */
	long lo = keep < keep2 ? keep : keep2, hi = keep < keep2 ? keep2 : keep;
	long from = 3;
	if (lo >= 3) {
		if (lo > from)
			(void)syscall(SYS_close_range, (unsigned)from, (unsigned)lo - 1, 0U);
		from = lo + 1;
	}
	if (hi > from)
		(void)syscall(SYS_close_range, (unsigned)from, (unsigned)hi - 1, 0U);
	(void)syscall(SYS_close_range, (unsigned)(hi + 1 > from ? hi + 1 : from), ~0U, 0U);
}

/* Runs the program of exec_fd (see child_opts.exec_fd): close-on-exec
 * for a binary; a script, whose interpreter opens it as /dev/fd/N, is
 * refused that way (ENOENT) and given the fd. Returns only on failure. */
__attribute__((no_sanitize("address"))) static void exec_fd_run(int fd, char *const *argv, char *const *envp)
{
	(void)syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH);
	if (errno == ENOENT && syscall(SYS_fcntl, fd, F_SETFD, 0) == 0)
		(void)syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH);
}

/*
 * The child, until exec. It runs on a stack of spawn()'s, in the daemon's
 * memory and at first on its fd table, so it makes system calls only (no
 * libc state, no sanitizer bookkeeping) and touches no fd before it has a
 * table of its own: close_range(CLOSE_RANGE_UNSHARE) gives it a copy of the
 * fds below keep_below and nothing else, which costs the same with ten or
 * ten thousand connections open above. Then it sets back the signals that
 * are not at their default, takes its own process group, moves to its
 * working directory, gets back the soft limit on open files the daemon was
 * given (child_set_fd_limit), puts its fds on 0-2, carries out its
 * sandbox plan or, without one, drops every capability (sandbox.h),
 * closes the rest, unblocks every signal and execs.
 */
__attribute__((no_sanitize("address"))) static int spawn_child(void *arg)
{
	struct spawn_args *a = arg;
	const struct kernel_sigaction dfl = { .handler = SIG_DFL };
	const uint64_t none = 0;
	long in = a->in_fd;

	/* Before Linux 5.9 (no close_range): a copy of the whole table. */
	if (syscall(SYS_close_range, a->keep_below, ~0U, CLOSE_RANGE_UNSHARE) < 0 &&
	    syscall(SYS_unshare, CLONE_FILES) < 0)
		goto fail;
	for (int sig = 1; sig <= KERNEL_NSIG; sig++)
		if (a->reset & (UINT64_C(1) << (sig - 1)))
			(void)syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
	if ((a->new_session ? syscall(SYS_setsid) : syscall(SYS_setpgid, 0, 0)) < 0 ||
	    (a->cwd_fd >= 0 && syscall(SYS_fchdir, a->cwd_fd) < 0))
		goto fail;
	if (a->fd_soft) {
		struct kernel_rlimit rl;
		if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) < 0)
			goto fail;
		rl.cur = a->fd_soft < rl.max ? a->fd_soft : rl.max;
		if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &rl, NULL) < 0)
			goto fail;
	}
	/* Without close-on-exec: it may land on 0 itself when the daemon
	 * runs with stdin closed; anywhere above 2 it is closed below. */
	if (in < 0 && (in = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY)) < 0)
		goto fail;
	/* The pipes are 3 or above (fd_above_stdio), so each dup3 makes a
	 * new fd, without close-on-exec. */
	if ((in != STDIN_FILENO && syscall(SYS_dup3, in, STDIN_FILENO, 0) < 0) ||
	    syscall(SYS_dup3, a->out_fd, STDOUT_FILENO, 0) < 0 ||
	    syscall(SYS_dup3, a->err_fd, STDERR_FILENO, 0) < 0)
		goto fail;
	if (a->new_session && syscall(SYS_ioctl, STDIN_FILENO, TIOCSCTTY, 0) < 0)
		goto fail;
	/* A leader keeps what it starts as its descendants while it runs,
	 * as the daemon does once it has exited (see reap_orphans). */
	if (a->subreaper && !a->sandbox && syscall(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		goto fail;
	if (a->sandbox && sandbox_child_apply(a->sandbox) < 0)
		goto fail;
	/* A child without a sandbox plan holds no capability either. */
	if (!a->sandbox && ((a->cap_last >= 0 && sandbox_caps_bound(a->bounding_top) < 0) || sandbox_caps_clear() < 0))
		goto fail;
	if (child_die_with_parent(a->parent) < 0)
		goto fail;
	/* Every fd of ours is close-on-exec already; this also covers fds
	 * that libraries may have opened without the flag. */
	close_from_3(a->report_fd, a->exec_fd > 2 ? a->exec_fd : -1);
	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
	if (a->exec_fd > 2)
		exec_fd_run(a->exec_fd, a->argv, a->envp);
	else
		(void)syscall(SYS_execve, a->path, a->argv, a->envp);
fail:
	a->err = errno ? errno : EINVAL;
	if (a->report_fd >= 0) {
		const struct spawn_report rep = { a->sandbox ? a->sandbox->failed : NULL, a->err };
		(void)syscall(SYS_write, a->report_fd, &rep, sizeof(rep));
	}
	syscall(SYS_exit_group, 127);
	return 127;
}

/* Reads what the child of spawn() reported, if anything, into *a: the
 * pipe's write end closes on its exec, or with the child. */
static void read_report(int *report_r, int *report_w, struct spawn_args *a)
{
	struct spawn_report rep;
	ssize_t n;
	closep(report_w);
	*report_w = -1;
	/* Wait for the end of the child: then the read does not block. */
	struct pollfd p = { .fd = *report_r, .events = POLLIN };
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	while ((n = read(*report_r, &rep, sizeof(rep))) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(rep))
		return;
	a->err = (int)rep.err;
	if (a->sandbox)
		a->sandbox->failed = rep.failed;
}

/* Receives, without waiting, the listener a child sent on sock
 * (sandbox_child.listen) of its program prog, and hands it to netnotif.c. */
static void take_listener(int sock, const void *prog)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	_Alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	ssize_t n;
	while ((n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	struct cmsghdr *cm = n == 1 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len != CMSG_LEN(sizeof(int)))
		return;
	int fd;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	(void)sandbox_netnotif_add(fd, prog);	/* taken, even when refused */
}

/*
 * Starts the child with clone(CLONE_VM | CLONE_VFORK), as posix_spawn does:
 * nothing is copied, the daemon is suspended until the child has exec'd or
 * exited, and the exec error comes back through memory. With CLONE_FILES
 * the child also starts on the daemon's fd table and copies only the low
 * fds it needs (see spawn_child). All signals are blocked around the clone
 * so that none is handled in the child. Under valgrind, which runs the
 * clone as a fork, the exec error comes back through a pipe instead
 * (spawn_report). Returns the pid, or a negative errno (the failed exec's
 * among them).
 */
static int spawn(const char *path, const struct child_opts *o, int in_r, int out_w, int err_w, pid_t *ret_pid,
		 int *ret_pidfd)
{
	/* The child needs some 5 KiB (the sandbox reads its working
	 * directory's path, apply.c); the rest is margin. */
	_Alignas(16) char stack[32768];
	struct spawn_args a = {
		.path = path, .argv = o->argv, .envp = o->envp, .cwd_fd = o->cwd_fd,
		.in_fd = in_r, .out_fd = out_w, .err_fd = err_w, .reset = signals_to_reset(),
		.fd_soft = child_fd_soft, .sandbox = sandbox_run_child(o->sandbox), .report_fd = -1,
		.cap_last = sandbox_cap_last(),
		.new_session = o->tty, .exec_fd = o->exec_fd, .parent = getpid(),
	};
	a.bounding_top = a.cap_last >= 0 ? bounding_set_top(a.cap_last) : -1;
	_cleanup_close_ int report_r = -1, report_w = -1;
	int r;
	/* Through the spawner of its seccomp program where the plan allows
	 * (child_spawner.c); under valgrind, which cannot install the
	 * sandbox, and with a terminal, directly. */
	if (a.sandbox && !o->tty && !RUNNING_ON_VALGRIND) {
		const struct spawner_call call = {
			.path = path, .argv = o->argv, .envp = o->envp, .cwd_fd = o->cwd_fd, .in_fd = in_r,
			.out_fd = out_w, .err_fd = err_w, .fd_soft = child_fd_soft, .sandbox = a.sandbox,
			.exec_fd = o->exec_fd > 2 ? o->exec_fd : -1,
		};
		*ret_pidfd = -1;
		r = spawner_spawn(&call, ret_pid);
		if (r <= 0) {
			if (r == 0)
				child_track(*ret_pid);
			return r;
		}
	}
	/* Started here, a plan's child empties the bounding set it has from
	 * this thread (unless it makes or joins a user namespace, where it
	 * holds every capability: its plan says 63): nothing above what is
	 * left of it, and none at all once the daemon has emptied its own
	 * (cap 0 then stands for none: a plan's -1 would leave the
	 * securebits unlocked too). Set back once the clone returns (the
	 * child has exec'd or exited): a plan started again is as it was. */
	int plan_cap_last = a.sandbox ? a.sandbox->cap_last : -1;
	if (a.sandbox && !a.sandbox->userns && a.sandbox->userns_fd < 0 && a.cap_last >= 0 &&
	    a.sandbox->cap_last == a.cap_last)
		a.sandbox->cap_last = MAX(a.bounding_top, 0);
	if (RUNNING_ON_VALGRIND) {
		bool nb;
		if ((r = make_pipe(&report_r, &report_w, &nb)) < 0)
			return r;
		a.report_fd = report_w;
	}
	if (in_r < 0)
		a.in_fd = in_r = devnull_fd();	/* or still -1: the child opens it */
	/* Without network (or with the proxy's), a child started here
	 * loads the program that hands the network's calls to the daemon,
	 * with a listener of its own, sent on notes_w before its exec
	 * (sandbox_child_apply()). */
	_cleanup_close_ int notes_r = -1, notes_w = -1;
	const void *plain_bpf = a.sandbox ? a.sandbox->bpf : NULL;
	const void *notes = a.sandbox && !RUNNING_ON_VALGRIND ? seccomp_notes_prog(plain_bpf) : NULL;
	if (notes && sandbox_netnotif_room()) {
		int sp[2];
		if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sp) == 0) {
			notes_r = sp[0];
			notes_w = sp[1];
			if (fd_above_stdio(&notes_w) == 0) {
				a.sandbox->bpf = notes;
				a.sandbox->listen = true;
				a.sandbox->notes_sock = notes_w;
			}
		}
	}
	int top = MAX(MAX(MAX(in_r, o->cwd_fd), MAX(out_w, err_w)), MAX(report_w, MAX(notes_w, o->exec_fd)));
	if (a.sandbox)
		top = MAX(MAX(top, MAX(a.sandbox->netns_fd, a.sandbox->userns_fd)),
			  MAX(MAX(a.sandbox->cgroup_fd, a.sandbox->cgroup_procs_fd),
			      MAX(a.sandbox->landlock_fd, a.sandbox->mntns_fd)));
	a.subreaper = is_subreaper();
	a.keep_below = (unsigned)top + 1;
	int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
	/* valgrind runs CLONE_VM | CLONE_VFORK as a fork, and refuses it
	 * with CLONE_FILES. */
	if (!RUNNING_ON_VALGRIND)
		flags |= CLONE_FILES;
	/* A child protecting paths without CAP_SYS_ADMIN gets its user
	 * namespace here: unshare(CLONE_NEWUSER) refuses a process that
	 * shares its memory (EINVAL), clone does not. The child writes its
	 * own uid and gid maps, then makes its mount namespace with unshare
	 * (CLONE_NEWNS alone is allowed there), after its chdir
	 * (sandbox_child_apply). */
	if (a.sandbox && a.sandbox->userns)
		flags |= CLONE_NEWUSER;

	/* The pidfd comes with the clone (Linux 5.2; before, the flag is
	 * ignored and pidfd stays -1: child_spawn() opens one if it can). */
	int pidfd = -1;
	if (!RUNNING_ON_VALGRIND)
		flags |= CLONE_PIDFD;

	sigset_t all, old;
	sigfillset(&all);
	if (sigprocmask(SIG_SETMASK, &all, &old) < 0)
		return -errno;
	pid_t pid = clone(spawn_child, stack + sizeof(stack), flags, &a, &pidfd);
	int e = errno;
	if (pid < 0 && e == EINVAL && (flags & CLONE_PIDFD)) {
		pidfd = -1;
		pid = clone(spawn_child, stack + sizeof(stack), flags & ~CLONE_PIDFD, &a);
		e = errno;
	}
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	if (a.sandbox) {
		a.sandbox->cap_last = plan_cap_last;
		a.sandbox->bpf = plain_bpf;
		a.sandbox->listen = false;
		a.sandbox->notes_sock = -1;
	}
	if (pid < 0)
		return -e;
	if (report_r >= 0)
		read_report(&report_r, &report_w, &a);
	if (a.err) {
		/* The child has exited: reap it before its pid means nothing. */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (pidfd >= 0)
			close(pidfd);
		return -a.err;
	}
	/* Sent before its exec, so here once the clone returns; or not at
	 * all, and the call keeps the hedged note. */
	if (notes_r >= 0)
		take_listener(notes_r, notes);
	child_track(pid);
	*ret_pid = pid;
	*ret_pidfd = pidfd;
	return 0;
}

/* Spawns the child, opens its pidfd and starts watching it and its pipes. */
int child_spawn(struct tc_loop *loop, const struct child_opts *o, struct child **ret)
{
	_cleanup_close_ int out_r = -1, out_w = -1, err_r = -1, err_w = -1;
	_cleanup_free_ char *found = NULL;
	const char *path = o->path;
	pid_t pid;
	int r;

	if (!o->argv || !o->argv[0])
		return -EINVAL;
	if (o->exec_fd > 2 && !path)
		path = o->argv[0];	/* a name only: the fd is what runs */
	if (!path) {
		r = find_program(o->argv[0], o->envp, &found);
		if (r < 0)
			return r;
		path = found;
	}
	/* merge_output: both streams on the stdout pipe, and no stderr pipe
	 * at all (its stream is closed from the start). */
	bool nonblock[CHILD_NSTREAMS] = { false, false };
	if ((r = output_pipe(&out_r, &out_w, &nonblock[CHILD_STDOUT])) < 0 ||
	    (!o->merge_output && (r = make_pipe(&err_r, &err_w, &nonblock[CHILD_STDERR])) < 0))
		return r;
	_cleanup_close_ int in_r = -1, in_w = -1;
	if (o->ret_stdin_fd) {
		/* make_pipe's ends swapped: ours (the write end) non-blocking. */
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			return -errno;
		in_r = p[0];
		in_w = p[1];
		if ((r = fd_above_stdio(&in_r)) < 0 || (r = fd_above_stdio(&in_w)) < 0)
			return r;
		if (fcntl(in_w, F_SETFL, O_NONBLOCK) < 0)
			return -errno;
	}

	int pidfd = -1;
	if (o->tty)
		r = spawn(path, o, o->tty_fd, o->tty_fd, o->tty_fd, &pid, &pidfd);
	else
		r = spawn(path, o, in_r, out_w, o->merge_output ? out_w : err_w, &pid, &pidfd);
	if (r < 0)
		return r;
	sandbox_run_spawned(o->sandbox);
	sandbox_run_set_pid(o->sandbox, pid);
	if (o->ret_stdin_fd)
		*o->ret_stdin_fd = TAKE_FD(in_w);
	uint64_t start = mono_ms();

	/* Safe at once: until we reap it, the pid cannot be reused. Without
	 * pidfd_open (kernels before 5.3, valgrind) the leader is polled. */
	if (pidfd < 0)
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 && errno != ENOSYS) {
		r = -errno;
		(void)kill(-pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		child_untrack(pid);
		return r;
	}

	struct child *ch = xcalloc(1, sizeof(*ch));
	ch->loop = loop;
	ch->pid = pid;
	ch->pidfd = pidfd;
	ch->start_ms = start;
	ch->kill_delay_ms = o->kill_delay_ms ? o->kill_delay_ms : CHILD_KILL_DELAY_DEFAULT;
	ch->drain_ms = o->drain_ms ? o->drain_ms : CHILD_DRAIN_DEFAULT;
	ch->on_output = o->on_output;
	ch->on_eof = o->on_eof;
	ch->on_done = o->on_done;
	ch->arg = o->arg;
	ch->sandbox = o->sandbox;
	size_t cap = o->output_cap ? o->output_cap : CHILD_OUTPUT_CAP_DEFAULT;
	int fds[CHILD_NSTREAMS] = { TAKE_FD(out_r), TAKE_FD(err_r) };
	int holds[CHILD_NSTREAMS] = { TAKE_FD(out_w), TAKE_FD(err_w) };
	if (o->ret_stdin_fd) {
		/* A server lives long and may close its output before it
		 * exits: that must be seen when it happens. */
		for (int s = 0; s < CHILD_NSTREAMS; s++) {
			if (holds[s] >= 0)
				close(holds[s]);
			holds[s] = -1;
		}
	}
	for (int s = 0; s < CHILD_NSTREAMS; s++) {
		struct pipe_reader *p = &ch->pipes[s];
		p->ch = ch;
		p->id = (enum child_stream)s;
		p->fd = fds[s];
		p->hold_fd = holds[s];
		p->nonblock = nonblock[s];
		capture_init(&p->cap, cap);
		if (p->fd < 0)
			continue;	/* merge_output's stderr */
		p->io = tc_io_new(loop, p->fd, TC_IO_READ, on_pipe, p);
		tc_io_start(p->io);
		ch->open_pipes++;
	}
	if (pidfd >= 0) {
		ch->pid_io = tc_io_new(loop, pidfd, TC_IO_READ, on_pidfd, ch);
		tc_io_start(ch->pid_io);
		/* A leader gone already (a short command where the CPU it
		 * shares with its spawner ran it to its end before the
		 * spawner's answer) is reaped later in this turn, its pipes
		 * drained then: neither its pidfd nor a pipe closed by then
		 * ever reaches the poller (two epoll_ctl, an epoll_wait and
		 * their removal at close, some 5 µs before the answer). */
		siginfo_t si = {0};
		if (wait_leader(ch, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid)
			(void)tc_io_feed(ch->pid_io, TC_IO_READ);
	} else {
		ch->pidfd = -1;
		ch->poll_timer = tc_timer_new(loop, on_poll_exit, ch);
		tc_timer_start(ch->poll_timer, CHILD_POLL_MS);
	}
	ch->kill_timer = tc_timer_new(loop, on_kill_timer, ch);
	ch->drain_timer = tc_timer_new(loop, on_drain_timer, ch);
	*ret = ch;
	return 0;
}

/* Sends SIGTERM to the group and arms the SIGKILL that follows. */
void child_terminate(struct child *ch)
{
	if (!ch || ch->done)
		return;
	if (ch->reaped) {
		/* Only pipes held by escaped processes remain: stop waiting
		 * for them (from the loop, not from inside this call). */
		tc_timer_start(ch->drain_timer, 0);
		return;
	}
	if (ch->terminating)
		return;
	ch->terminating = true;
	ch->result.cancelled = true;
	(void)kill(-ch->pid, SIGTERM);
	/* A stopped process would not act on SIGTERM until continued. */
	(void)kill(-ch->pid, SIGCONT);
	tc_timer_start(ch->kill_timer, ch->kill_delay_ms);
}

/* Frees a child, killing and reaping it first if it still runs. */
struct child *child_free(struct child *ch)
{
	if (!ch)
		return NULL;
	if (!ch->reaped) {
		siginfo_t si;
		sandbox_run_kill(ch->sandbox);
		(void)kill(-ch->pid, SIGKILL);
		while (wait_leader(ch, &si, WEXITED) < 0 && errno == EINTR)
			;
		child_untrack(ch->pid);
		reap_orphans();
	}
	tc_io_free(ch->pid_io);
	tc_timer_free(ch->poll_timer);
	if (ch->pidfd >= 0)
		close(ch->pidfd);
	tc_timer_free(ch->kill_timer);
	tc_timer_free(ch->drain_timer);
	for (int s = 0; s < CHILD_NSTREAMS; s++) {
		pipe_close(&ch->pipes[s], false);
		capture_free(&ch->pipes[s].cap);
		free(ch->result.out[s]);
	}
	for (unsigned i = 0; i < ch->n_spent; i++)
		close(ch->spent[i]);
	free(ch);
	return NULL;
}

pid_t child_pid(const struct child *ch)
{
	return ch->pid;
}

bool child_running(const struct child *ch)
{
	return !ch->reaped;
}

/* Names a signal as "SIGKILL". */
const char *child_signal_name(int sig, char buf[static 16])
{
	const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
	if (abbrev)
		snprintf(buf, 16, "SIG%s", abbrev);
	else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
		snprintf(buf, 16, "SIGRTMIN+%d", sig - SIGRTMIN);
	else
		snprintf(buf, 16, "SIG%d", sig);
	return buf;
}

