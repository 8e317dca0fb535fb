/* SPDX-License-Identifier: MIT */
/*
 * Whether a process waits for input, from the kernel's view rather than
 * from its prompt: some process of its tree is blocked in a system call
 * that reads (read, readv, pread64) its stdin pipe or terminal, or waits
 * for it to be readable (poll, ppoll, select, pselect6, epoll_wait,
 * epoll_pwait). /proc/PID/syscall tells the call and its arguments of a
 * blocked process; the fds a poll or select waits on are read from its
 * memory (process_vm_readv: the daemon may trace its own children), an
 * epoll set's from /proc/PID/fdinfo; /proc/PID/fd/N tells which file an fd
 * is. A server blocked in poll on its sockets is not waiting for input. The
 * tree is walked through /proc/PID/task/PID/children.
 */
#include "lib/process/process_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <poll.h>
#include <unistd.h>

/* Processes of a tree looked at, at most. */
#define TREE_MAX 256

static bool is_read_call(long nr)
{
	return nr == SYS_read
#ifdef SYS_readv
	       || nr == SYS_readv
#endif
#ifdef SYS_pread64
	       || nr == SYS_pread64
#endif
		;
}

static bool is_wait_call(long nr)
{
	return false
#ifdef SYS_poll
	       || nr == SYS_poll
#endif
#ifdef SYS_select
	       || nr == SYS_select
#endif
#ifdef SYS_ppoll
	       || nr == SYS_ppoll
#endif
#ifdef SYS_pselect6
	       || nr == SYS_pselect6
#endif
#ifdef SYS_epoll_wait
	       || nr == SYS_epoll_wait
#endif
#ifdef SYS_epoll_pwait
	       || nr == SYS_epoll_pwait
#endif
#ifdef SYS_epoll_pwait2
	       || nr == SYS_epoll_pwait2
#endif
		;
}

/* Whether fd of pid is the stdin pipe or terminal, whose link in
 * /proc/PID/fd is target ("pipe:[123]", "/dev/pts/4"). Only the link is
 * read: nothing the process opened is looked at (a stat could block on a
 * file system it serves). */
static bool fd_is(pid_t pid, long fd, const char *target)
{
	char path[64], link[128];
	snprintf(path, sizeof(path), "/proc/%d/fd/%ld", (int)pid, fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	return strcmp(link, target) == 0;
}

/* Reads a small /proc file of pid into buf; its length, or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* fds a poll or select looks at, at most. */
#define WAIT_FDS_MAX 1024

static bool read_mem(pid_t pid, unsigned long addr, void *buf, size_t n)
{
	struct iovec local = { buf, n }, remote = { (void *)addr, n };
	return addr && process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)n;
}

enum wait_kind { WAIT_POLL, WAIT_SELECT, WAIT_EPOLL };

static int wait_kind(long nr)
{
#ifdef SYS_poll
	if (nr == SYS_poll)
		return WAIT_POLL;
#endif
#ifdef SYS_ppoll
	if (nr == SYS_ppoll)
		return WAIT_POLL;
#endif
#ifdef SYS_select
	if (nr == SYS_select)
		return WAIT_SELECT;
#endif
#ifdef SYS_pselect6
	if (nr == SYS_pselect6)
		return WAIT_SELECT;
#endif
	return WAIT_EPOLL;
}

/* Whether the poll, select or epoll_wait pid is blocked in (arguments a)
 * waits for the stdin or terminal to be readable. */
static bool waits_on_input(pid_t pid, long nr, const unsigned long a[3], const char *target)
{
	switch (wait_kind(nr)) {
	case WAIT_POLL: {
		struct pollfd fds[64];
		unsigned long n = MIN(a[1], (unsigned long)WAIT_FDS_MAX);
		for (unsigned long off = 0; off < n; off += ELEMENTSOF(fds)) {
			size_t k = MIN(n - off, ELEMENTSOF(fds));
			if (!read_mem(pid, a[0] + off * sizeof(struct pollfd), fds, k * sizeof(struct pollfd)))
				return false;
			for (size_t i = 0; i < k; i++)
				if (fds[i].fd >= 0 && (fds[i].events & POLLIN) && fd_is(pid, fds[i].fd, target))
					return true;
		}
		return false;
	}
	case WAIT_SELECT: {
		unsigned char set[WAIT_FDS_MAX / 8];
		unsigned long n = MIN(a[0], (unsigned long)WAIT_FDS_MAX);
		if (!n || !read_mem(pid, a[1], set, (n + 7) / 8))
			return false;
		for (unsigned long fd = 0; fd < n; fd++)
			if ((set[fd / 8] >> (fd % 8) & 1) && fd_is(pid, (long)fd, target))
				return true;
		return false;
	}
	case WAIT_EPOLL: {
		char name[64], buf[4096];
		snprintf(name, sizeof(name), "fdinfo/%lu", a[0]);
		if (read_proc(pid, name, buf, sizeof(buf)) <= 0)
			return false;
		for (char *p = buf; (p = strstr(p, "tfd:")) != NULL;) {
			char *end;
			long fd = strtol(p + 4, &end, 10);
			p = end;
			if (fd_is(pid, fd, target))
				return true;
		}
		return false;
	}
	}
	return false;
}

static bool blocked_on_input(pid_t pid, const char *target)
{
	char buf[512];
	if (read_proc(pid, "syscall", buf, sizeof(buf)) <= 0)
		return false;
	char *end;
	long nr = strtol(buf, &end, 10);
	if (end == buf || nr < 0)
		return false;	/* "running", or not in a system call */
	unsigned long a[3];
	for (int i = 0; i < 3; i++)
		a[i] = strtoul(end, &end, 16);
	if (is_read_call(nr))
		return fd_is(pid, (long)a[0], target);
	if (is_wait_call(nr))
		return waits_on_input(pid, nr, a, target);
	return false;
}

bool process_tree_waiting(pid_t pid, const char *target)
{
	pid_t todo[TREE_MAX];
	size_t n = 0, i = 0;
	todo[n++] = pid;
	for (; i < n; i++) {
		if (blocked_on_input(todo[i], target))
			return true;
		char name[64], buf[4096];
		snprintf(name, sizeof(name), "task/%d/children", (int)todo[i]);
		if (read_proc(todo[i], name, buf, sizeof(buf)) <= 0)
			continue;
		for (char *p = buf, *e; *p && n < TREE_MAX; p = e) {
			long child = strtol(p, &e, 10);
			if (e == p)
				break;
			if (child > 0)
				todo[n++] = (pid_t)child;
		}
	}
	return false;
}
