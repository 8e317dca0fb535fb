/* SPDX-License-Identifier: MIT */
/*
 * Whether a process waits for input, from the kernel's view rather than
 * from its prompt: some process of its tree is blocked in a system call
 * that reads (read, readv, pread64) its stdin pipe or terminal, or waits
 * for it to be readable (poll, ppoll, select, pselect6, epoll_wait,
 * epoll_pwait) with that as its fd 0. /proc/PID/syscall tells the call and
 * its arguments of a blocked process; /proc/PID/fd/N which file an fd is.
 * The tree is walked through /proc/PID/task/PID/children.
 */
#include "lib/process/process_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

/* Whether fd of pid is the stdin pipe (dev, ino) or the terminal rdev. */
static bool fd_is(pid_t pid, long fd, dev_t dev, ino_t ino, dev_t rdev)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/fd/%ld", (int)pid, fd);
	if (stat(path, &st) < 0)
		return false;
	if (rdev)
		return S_ISCHR(st.st_mode) && st.st_rdev == rdev;
	return S_ISFIFO(st.st_mode) && st.st_dev == dev && st.st_ino == ino;
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

static bool blocked_on_input(pid_t pid, dev_t dev, ino_t ino, dev_t rdev)
{
	char buf[512];
	if (read_proc(pid, "syscall", buf, sizeof(buf)) <= 0)
		return false;
	char *end;
	long nr = strtol(buf, &end, 10);
	if (end == buf || nr < 0)
		return false;	/* "running", or not in a system call */
	if (is_read_call(nr)) {
		long fd = strtol(end, NULL, 16);
		return fd_is(pid, fd, dev, ino, rdev);
	}
	if (is_wait_call(nr))
		return fd_is(pid, 0, dev, ino, rdev);
	return false;
}

bool process_tree_waiting(pid_t pid, dev_t dev, ino_t ino, dev_t rdev)
{
	pid_t todo[TREE_MAX];
	size_t n = 0, i = 0;
	todo[n++] = pid;
	for (; i < n; i++) {
		if (blocked_on_input(todo[i], dev, ino, rdev))
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
