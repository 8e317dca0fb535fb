/* SPDX-License-Identifier: MIT */
/*
 * What a daemon that died without cleaning up (SIGKILL, a crash, the OOM
 * killer) left behind, found and removed by the next one at its start:
 *
 *  - its calls' cgroups, "tc-PID-START-N" (PID and START, in clock ticks
 *    after boot, name the daemon that made it; "tc-PID-N" and
 *    "tc-probe-PID" before): every process still in one is killed
 *    (cgroup.kill, or SIGKILL to each pid of cgroup.procs until none is
 *    left) and the cgroup removed;
 *  - its directory of TMPDIRs, "toolcalld.PID.XXXXXX" (tmp.c), of this
 *    daemon's uid, unlocked (a live daemon holds a flock on its own):
 *    every process whose environment still names a TMPDIR beneath it is
 *    killed (without a cgroup, the only mark a call's process carries
 *    that the daemon can read, as root or as the same uid), then the
 *    directory is removed, following no link, bounded.
 *
 * A daemon is dead when no process has its pid, or one has it that
 * started at another time (the pid was reused), or, for the names without
 * a start time, one that is no toolcalld. Nothing of a live daemon's is
 * touched (another instance on another socket): its pid and start time
 * are there, its directory is locked. Every wait is bounded.
 */
#include "lib/sandbox/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/sandbox/sandbox_internal.h"
#include "proto/base/util.h"

/* How long the processes of the dead cgroups, and then those of the dead
 * TMPDIRs, are given to be gone, all together. */
#define REAP_WAIT_MS 3000
/* How many cgroups and TMPDIR directories one start looks at. */
#define REAP_DIRS_MAX 100000
#define REAP_TMP_MAX 256
/* How many entries of a dead directory of TMPDIRs are removed. */
#define REAP_RM_ENTRIES 100000
/* What is read of a cgroup.procs and of an environment. */
#define PROCS_READ_MAX (256 * 1024)
#define ENVIRON_READ_MAX (256 * 1024)

uint64_t proc_start_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(AT_FDCWD, path, buf, sizeof(buf)) <= 0)
		return 0;
	/* The command name may hold spaces and parentheses: the fields
	 * after it follow the last ')', the state (field 3) first. */
	const char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return 0;
	}
	return strtoull(p + 1, NULL, 10);
}

uint64_t sandbox_self_start(void)
{
	/* Read again in a fork (a test's case), which has its own. */
	static uint64_t start;
	static pid_t of;
	pid_t self = getpid();
	if (of != self) {
		start = proc_start_ticks(self);
		of = self;
	}
	return start;
}

/* Whether pid's process is a zombie or gone. */
static bool proc_gone(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(AT_FDCWD, path, buf, sizeof(buf)) <= 0)
		return true;
	const char *p = strrchr(buf, ')');
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

/* Whether the process of pid could be a toolcalld daemon: its name, or
 * its command line (one run under valgrind or another wrapper), says so. */
static bool looks_like_daemon(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (read_small(AT_FDCWD, path, buf, sizeof(buf)) > 0 && strncmp(buf, "toolcalld", 9) == 0)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	ssize_t n = read_small(AT_FDCWD, path, buf, sizeof(buf));
	for (ssize_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	return n > 0 && strstr(buf, "toolcalld");
}

/* Whether the daemon pid, started at start (0: not known), is alive. */
static bool daemon_alive(pid_t pid, uint64_t start)
{
	if (pid <= 0)
		return false;
	if (pid == getpid())
		return start == sandbox_self_start();
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return false;
	if (proc_gone(pid))
		return false;
	if (start)
		return proc_start_ticks(pid) == start;
	return looks_like_daemon(pid);
}

/* Parses a call cgroup's name: "tc-PID-START-N", "tc-PID-N" (start 0) or
 * "tc-probe-PID". False for any other name. */
static bool cgroup_name(const char *name, pid_t *ret_pid, uint64_t *ret_start)
{
	if (strncmp(name, "tc-", 3) != 0)
		return false;
	bool probe = strncmp(name, "tc-probe-", 9) == 0;
	const char *p = name + (probe ? 9 : 3);
	uint64_t v[3];
	int n = 0;
	for (;;) {
		char *end;
		if (*p < '0' || *p > '9' || n == 3)
			return false;
		errno = 0;
		v[n++] = strtoull(p, &end, 10);
		if (errno)
			return false;
		if (!*end)
			break;
		if (*end != '-')
			return false;
		p = end + 1;
	}
	if ((probe ? n != 1 : n < 2) || v[0] == 0 || v[0] > INT_MAX)
		return false;
	*ret_pid = (pid_t)v[0];
	*ret_start = n == 3 ? v[1] : 0;
	return true;
}

/* Notes a process about to be killed: counted, and described while there
 * is room. */
static void note_proc(struct sandbox_reaped *r, pid_t pid, pid_t daemon)
{
	r->killed++;
	if (r->n_procs >= SANDBOX_REAPED_NAMED)
		return;
	struct sandbox_reaped_proc *p = &r->procs[r->n_procs];
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) < 0)
		return;
	p->pid = pid;
	p->uid = st.st_uid;
	p->daemon = daemon;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	ssize_t n = read_small(AT_FDCWD, path, p->command, sizeof(p->command));
	if (n <= 0) {
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		n = read_small(AT_FDCWD, path, p->command, sizeof(p->command));
		if (n > 0 && p->command[n - 1] == '\n')
			p->command[--n] = '\0';
	}
	for (ssize_t i = 0; i + 1 < n; i++)
		if (!p->command[i])
			p->command[i] = ' ';
	for (char *c = p->command; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	r->n_procs++;
}

/* The pids in a cgroup.procs (at most max), or -1. */
static int cgroup_pids(int cg_fd, pid_t *pids, int max)
{
	_cleanup_close_ int fd = openat(cg_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	_cleanup_free_ char *buf = xmalloc(PROCS_READ_MAX + 1);
	size_t len = 0;
	ssize_t n;
	while (len < PROCS_READ_MAX && (n = read(fd, buf + len, PROCS_READ_MAX - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	int k = 0;
	for (char *p = buf; *p && k < max;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (v > 0)
			pids[k++] = (pid_t)v;
		p = end + strspn(end, "\n");
	}
	return k;
}

/* Calls fn on each cgroup beneath the one open in fd (none a call makes:
 * a bound on the depth is enough). */
static void cgroup_children(int fd, unsigned depth, void (*fn)(int fd, const char *name, unsigned depth, void *u),
			    void *u)
{
	if (depth >= 4)
		return;
	int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_type == DT_DIR && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			fn(fd, e->d_name, depth + 1, u);
	closedir(d);
}

struct kill_ctx {
	pid_t daemon;
	struct sandbox_reaped *r;
};

/* Kills every process of the cgroup name in dir_fd and beneath: through
 * cgroup.kill (Linux 5.14), which takes the forks racing with it too, or
 * SIGKILL to each pid (again in cgroup_remove()). */
static void cgroup_kill(int dir_fd, const char *name, unsigned depth, void *u)
{
	struct kill_ctx *k = u;
	_cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	cgroup_children(fd, depth, cgroup_kill, u);
	pid_t pids[512];
	int n = cgroup_pids(fd, pids, (int)ELEMENTSOF(pids));
	for (int i = 0; i < n; i++)
		note_proc(k->r, pids[i], k->daemon);
	if (n <= 0)
		return;
	_cleanup_close_ int kill_fd = openat(fd, "cgroup.kill", O_WRONLY | O_CLOEXEC);
	if (kill_fd >= 0 && write(kill_fd, "1", 1) == 1)
		return;
	for (int i = 0; i < n; i++)
		(void)kill(pids[i], SIGKILL);
}

/* Removes the cgroup name in dir_fd and those beneath, once empty: each
 * waited for until *end (mono_ms()), its processes killed again meanwhile
 * (those forked after cgroup_kill() read its pids). */
static void cgroup_remove(int dir_fd, const char *name, unsigned depth, void *u)
{
	const uint64_t *end = u;
	_cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	cgroup_children(fd, depth, cgroup_remove, u);
	pid_t pids[512];
	int n;
	while ((n = cgroup_pids(fd, pids, (int)ELEMENTSOF(pids))) > 0 && mono_ms() < *end) {
		for (int i = 0; i < n; i++)
			(void)kill(pids[i], SIGKILL);
		(void)poll(NULL, 0, 5);
	}
	(void)unlinkat(dir_fd, name, AT_REMOVEDIR);
}

/* Removes the call cgroups of dead daemons in dir: all are killed first,
 * then each removed once empty, REAP_WAIT_MS in all (a process that does
 * not die, in an uninterruptible sleep, holds back no other). */
static void reap_cgroups(const char *dir, struct sandbox_reaped *r)
{
	_cleanup_close_ int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int dup_fd = dir_fd >= 0 ? fcntl(dir_fd, F_DUPFD_CLOEXEC, 3) : -1;
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return;
	}
	char **dead = NULL;
	size_t n_dead = 0;
	struct dirent *e;
	unsigned seen = 0;
	while ((e = readdir(d)) && seen++ < REAP_DIRS_MAX) {
		pid_t pid;
		uint64_t start;
		if (e->d_type != DT_DIR || !cgroup_name(e->d_name, &pid, &start) || daemon_alive(pid, start))
			continue;
		struct kill_ctx k = { pid, r };
		cgroup_kill(dir_fd, e->d_name, 0, &k);
		dead = xreallocarray(dead, n_dead + 1, sizeof(*dead));
		dead[n_dead++] = xstrdup(e->d_name);
	}
	closedir(d);
	uint64_t end = mono_ms() + REAP_WAIT_MS;
	for (size_t i = 0; i < n_dead; i++) {
		cgroup_remove(dir_fd, dead[i], 0, &end);
		if (faccessat(dir_fd, dead[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
			r->cgroups++;
		else
			r->cgroups_left++;
		free(dead[i]);
	}
	free(dead);
}

/* The dead daemons' directories of TMPDIRs found in parent: their names
 * (beneath parent, locked, kept open in fds) and the pids of their
 * daemons. */
struct dead_tmp {
	char *path;		/* canonical, for the environments */
	char *name;
	int fd;			/* holding the lock while it is reaped */
	pid_t daemon;
};

/* Whether a "toolcalld.PID.XXXXXX" directory in parent is a dead daemon's:
 * this daemon's uid's, not locked (its lock is taken and kept in fd), its
 * daemon not alive, or a minute old (a daemon locks its own right after
 * making it). */
static bool tmp_dead(int parent_fd, const char *name, int *ret_fd, pid_t *ret_pid)
{
	const char *p = name + strlen("toolcalld.");
	char *end;
	long pid = strtol(p, &end, 10);
	if (end == p || *end != '.' || pid <= 0 || pid > INT_MAX)
		return false;
	int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	struct timespec now;
	if (fd < 0)
		return false;
	(void)clock_gettime(CLOCK_REALTIME, &now);
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || flock(fd, LOCK_EX | LOCK_NB) < 0 ||
	    (daemon_alive((pid_t)pid, 0) && now.tv_sec - st.st_ctim.tv_sec <= 60)) {
		close(fd);
		return false;
	}
	*ret_fd = fd;
	*ret_pid = (pid_t)pid;
	return true;
}

/* Whether an environment (NUL-separated) has TMPDIR beneath one of the
 * dead directories; which one in *ret. */
static bool environ_in(const char *env, size_t len, const struct dead_tmp *dead, size_t n, size_t *ret)
{
	for (size_t off = 0; off < len; off += strlen(env + off) + 1) {
		const char *v = env + off;
		if (strncmp(v, "TMPDIR=", 7) != 0)
			continue;
		v += 7;
		for (size_t i = 0; i < n; i++) {
			size_t k = strlen(dead[i].path);
			if (strncmp(v, dead[i].path, k) == 0 && (v[k] == '/' || !v[k])) {
				*ret = i;
				return true;
			}
		}
	}
	return false;
}

/* Kills the processes whose TMPDIR is in a dead directory, until none is
 * left or REAP_WAIT_MS has passed. */
static void reap_environ(const struct dead_tmp *dead, size_t n, struct sandbox_reaped *r)
{
	_cleanup_free_ char *buf = xmalloc(ENVIRON_READ_MAX + 1);
	pid_t self = getpid();
	uint64_t end = mono_ms() + REAP_WAIT_MS;
	/* Noted once each: a pid killed is looked at again until gone. */
	pid_t noted[256];
	size_t n_noted = 0;
	for (;;) {
		DIR *d = opendir("/proc");
		if (!d)
			return;
		bool any = false;
		struct dirent *e;
		while ((e = readdir(d))) {
			char *stop;
			long pid = strtol(e->d_name, &stop, 10);
			if (*stop || pid <= 1 || pid == self)
				continue;
			char path[64];
			snprintf(path, sizeof(path), "/proc/%ld/environ", pid);
			_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			size_t len = 0;
			ssize_t k;
			while (len < ENVIRON_READ_MAX && (k = read(fd, buf + len, ENVIRON_READ_MAX - len)) > 0)
				len += (size_t)k;
			buf[len] = '\0';
			size_t which;
			if (!len || !environ_in(buf, len, dead, n, &which) || proc_gone((pid_t)pid))
				continue;
			bool seen = false;
			for (size_t i = 0; i < n_noted && !seen; i++)
				seen = noted[i] == (pid_t)pid;
			if (!seen) {
				note_proc(r, (pid_t)pid, dead[which].daemon);
				if (n_noted < ELEMENTSOF(noted))
					noted[n_noted++] = (pid_t)pid;
			}
			(void)kill((pid_t)pid, SIGKILL);
			any = true;
		}
		closedir(d);
		if (!any || mono_ms() >= end)
			return;
		(void)poll(NULL, 0, 5);
	}
}

/* Removes the dead daemons' directories of TMPDIRs in parent, after
 * their processes. */
static void reap_tmp(const char *parent, struct sandbox_reaped *r)
{
	_cleanup_free_ char *real = realpath(parent, NULL);
	if (!real)
		return;
	_cleanup_close_ int parent_fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int dup_fd = parent_fd >= 0 ? fcntl(parent_fd, F_DUPFD_CLOEXEC, 3) : -1;
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return;
	}
	struct dead_tmp dead[REAP_TMP_MAX];
	size_t n = 0;
	struct dirent *e;
	unsigned seen = 0;
	while (n < REAP_TMP_MAX && (e = readdir(d)) && seen++ < REAP_DIRS_MAX) {
		if (strncmp(e->d_name, "toolcalld.", 10) != 0)
			continue;
		int fd;
		pid_t pid;
		if (!tmp_dead(parent_fd, e->d_name, &fd, &pid))
			continue;
		dead[n].path = xasprintf("%s/%s", strcmp(real, "/") == 0 ? "" : real, e->d_name);
		dead[n].name = xstrdup(e->d_name);
		dead[n].fd = fd;
		dead[n++].daemon = pid;
	}
	closedir(d);
	if (n)
		reap_environ(dead, n, r);
	for (size_t i = 0; i < n; i++) {
		/* The watchdog, in the dead daemon's mount namespace, finds
		 * its tmpfs there (tmp.c); elsewhere nothing is mounted. */
		if (geteuid() == 0)
			(void)umount2(dead[i].path, MNT_DETACH | UMOUNT_NOFOLLOW);
		tmp_rm_tree(parent_fd, dead[i].name, REAP_RM_ENTRIES);
		if (faccessat(parent_fd, dead[i].name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
			r->tmp_dirs++;
		else
			r->tmp_left++;
		close(dead[i].fd);
		free(dead[i].path);
		free(dead[i].name);
	}
}

void sandbox_reap_dead(struct sandbox_reaped *r)
{
	*r = (struct sandbox_reaped){0};
	const struct sandbox_features *f = sandbox_probe(NULL);
	if (f->cgroup && f->cgroup_dir && !sandbox_cgroup_is_fake())
		reap_cgroups(f->cgroup_dir, r);
	reap_tmp(tmp_base_parent(), r);
}

/*
 * The watchdog: a process of its own, the sibling of the daemon (cloned
 * with CLONE_PARENT, so neither the daemon, a child subreaper that kills
 * the children it does not know, nor its death takes it), that waits for
 * the daemon to end (its pidfd) and then does at once what the next
 * daemon's start would: the daemon's calls' processes killed, their
 * cgroups and its directory of TMPDIRs removed (in the daemon's mount
 * namespace, where it unmounts the tmpfs on that directory first). A
 * daemon that stopped cleanly left nothing: it finds nothing and exits.
 */
int sandbox_watchdog_start(void (*report)(const struct sandbox_reaped *r), pid_t *ret_pid)
{
	pid_t daemon = getpid();
	int pidfd = (int)syscall(SYS_pidfd_open, daemon, 0);
	if (pidfd < 0)
		return -errno;
	/* A fork, without the libc's fork handlers: the daemon has no
	 * thread yet, and the watchdog calls nothing that needs them. */
	sigset_t all, old;
	sigfillset(&all);
	(void)sigprocmask(SIG_SETMASK, &all, &old);
	long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid < 0) {
		int e = -errno;
		(void)sigprocmask(SIG_SETMASK, &old, NULL);
		close(pidfd);
		return e;
	}
	if (pid > 0) {
		(void)sigprocmask(SIG_SETMASK, &old, NULL);
		close(pidfd);
		*ret_pid = (pid_t)pid;
		return 0;
	}
	(void)prctl(PR_SET_NAME, "toolcalld-reap");
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)signal(sig, SIG_DFL);
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	/* Nothing of the daemon's held (its socket, its files), but its
	 * standard output and error, where it logs. */
	if (pidfd != 3 && (dup3(pidfd, 3, O_CLOEXEC) != 3 || close(pidfd) < 0))
		_exit(1);
	(void)syscall(SYS_close_range, 4U, ~0U, 0U);
	/* Nor its working directory kept busy. */
	if (chdir("/") < 0)
		_exit(1);
	struct pollfd p = { .fd = 3, .events = POLLIN };
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	struct sandbox_reaped *r = xmalloc(sizeof(*r));
	sandbox_reap_dead(r);
	if (report)
		report(r);
	free(r);
	_exit(0);
}
