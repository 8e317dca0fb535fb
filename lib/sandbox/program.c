/* SPDX-License-Identifier: MIT */
/*
 * The programs the config makes the daemon run (a hook's script, a
 * command tool's program, an MCP server's), checked as ssh's StrictModes
 * checks a user's files, then held open so that what runs is what was
 * checked (see sandbox.h, sandbox_program_open()).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/util.h"
#include "lib/sandbox/sandbox.h"

static void (*refusal_log)(const char *message);

void sandbox_program_set_log(void (*fn)(const char *message))
{
	refusal_log = fn;
}

/* Tells of a refusal once among the last 64 different ones (by hash). */
static void log_refusal(const char *why)
{
	static uint64_t seen[64];
	static unsigned next;
	if (!refusal_log)
		return;
	uint64_t h = 1469598103934665603ULL;
	for (const unsigned char *p = (const unsigned char *)why; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	h |= 1;
	for (unsigned i = 0; i < ELEMENTSOF(seen); i++)
		if (seen[i] == h)
			return;
	seen[next++ % ELEMENTSOF(seen)] = h;
	_cleanup_free_ char *m = xasprintf("refused to run a program: %s", why);
	refusal_log(m);
}

/* Whether uid may own what a program's run goes through. */
static bool trusted_owner(uid_t owner, uid_t run_uid)
{
	return owner == 0 || owner == geteuid() || owner == run_uid;
}

/* Why st (of what, at path) is not fit: NULL when it is. A directory
 * writable by group or other is fit only with the sticky bit, where no one
 * but an entry's owner (checked on the next step) can rename or remove it. */
static char *unfit(const char *path, const struct stat *st, uid_t run_uid)
{
	const char *what = S_ISDIR(st->st_mode) ? "directory" : S_ISLNK(st->st_mode) ? "link" : "program";
	if (!trusted_owner(st->st_uid, run_uid))
		return xasprintf("%s %s is owned by uid %u, not by root, the daemon (uid %u) or whom it runs as (uid %u)",
				 what, path, (unsigned)st->st_uid, (unsigned)geteuid(), (unsigned)run_uid);
	if (S_ISLNK(st->st_mode))
		return NULL;
	if (S_ISDIR(st->st_mode)) {
		if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
			return xasprintf("directory %s is writable by group or other (mode %04o)", path,
					 (unsigned)(st->st_mode & 07777));
		return NULL;
	}
	if (!S_ISREG(st->st_mode))
		return xasprintf("%s is not a regular file", path);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return xasprintf("program %s is writable by group or other (mode %04o)", path,
				 (unsigned)(st->st_mode & 07777));
	return NULL;
}

static char *unfit_dirs(int base_fd, const char *path, uid_t run_uid, bool *links, int depth);

/* Where the link at path (its owner checked) leads: the directories and
 * links on the way to its target, and a link there, each in turn, up to
 * the kernel's 40. Checks all but the last target itself. */
static char *unfit_target(int base_fd, const char *path, uid_t run_uid, int depth)
{
	if (depth > 40)
		return xasprintf("%s leads through too many links", path);
	char t[PATH_MAX];
	ssize_t n = readlinkat(base_fd, path, t, sizeof(t) - 1);
	if (n <= 0)
		return xasprintf("%s cannot be checked: %s", path, n < 0 ? strerror(errno) : "empty link");
	t[n] = '\0';
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *target = t[0] == '/' || !slash ? xstrdup(t)
				      : xasprintf("%.*s/%s", (int)(slash - path), path, t);
	bool links = false;
	char *why = unfit_dirs(base_fd, target, run_uid, &links, depth + 1);
	struct stat lst;
	if (!why && fstatat(base_fd, target, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode) &&
	    !(why = unfit(target, &lst, run_uid)))
		why = unfit_target(base_fd, target, run_uid, depth + 1);
	return why;
}

/* Checks each directory on the way to path's last component (relative
 * ones from base_fd), and each link on it with where it leads, not the
 * last component (the caller checks it). Sets *links when a component is
 * a link. NULL when all are fit. */
static char *unfit_dirs(int base_fd, const char *path, uid_t run_uid, bool *links, int depth)
{
	size_t n = strlen(path);
	_cleanup_free_ char *p = xstrdup(path);
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '/' || (i == 0 && path[0] == '/'))
			continue;
		p[i] = '\0';
		struct stat st;
		const char *name = i == 0 ? "/" : p;
		if (fstatat(base_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return xasprintf("%s cannot be checked: %s", name, strerror(errno));
		char *why = unfit(name, &st, run_uid);
		if (!why && S_ISLNK(st.st_mode)) {
			*links = true;
			why = unfit_target(base_fd, name, run_uid, depth + 1);
			if (!why && fstatat(base_fd, name, &st, 0) < 0)
				return xasprintf("%s cannot be checked: %s", name, strerror(errno));
			if (!why)
				why = unfit(name, &st, run_uid);
		}
		p[i] = '/';
		if (why)
			return why;
	}
	if (path[0] == '/') {
		struct stat st;
		if (stat("/", &st) < 0)
			return xasprintf("/ cannot be checked: %s", strerror(errno));
		return unfit("/", &st, run_uid);
	}
	return NULL;
}

/* Opens and checks path (relative: from base_fd); see sandbox.h. */
static int open_checked(int base_fd, const char *path, uid_t run_uid, int *ret_fd, char **ret_why)
{
	_cleanup_close_ int fd = openat(base_fd, path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fd <= 2) {
		/* Above the standard streams, where child_opts.exec_fd is. */
		int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (high < 0)
			return -errno;
		close(fd);
		fd = high;
	}
	struct stat st, lst;
	if (fstat(fd, &st) < 0)
		return -errno;
	char *why = NULL;
	/* A link as the last component: who could replace it. */
	bool links = fstatat(base_fd, path, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode);
	if (links && !(why = unfit(path, &lst, run_uid)))
		why = unfit_target(base_fd, path, run_uid, 0);
	if (!why)
		why = unfit_dirs(base_fd, path, run_uid, &links, 0);
	/* Where it really is, when that is not path: named so, and the
	 * directories there checked too. */
	char real[PATH_MAX];
	const char *name = path;
	if (!why && (links || path[0] != '/')) {
		char proc[32];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(proc, real, sizeof(real) - 1);
		if (n <= 0 || real[0] != '/') {
			why = xasprintf("%s cannot be checked: where it lies is unknown", path);
		} else {
			real[n] = '\0';
			name = real;
			bool more = false;
			why = unfit_dirs(AT_FDCWD, real, run_uid, &more, 0);
		}
	}
	if (!why && !S_ISREG(st.st_mode))
		why = xasprintf("%s is not a regular file", name);
	if (!why)
		why = unfit(name, &st, run_uid);
	if (why) {
		log_refusal(why);
		*ret_why = why;
		return -EPERM;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int sandbox_program_open(const char *name, char *const *envp, int cwd_fd, uid_t run_uid, int *ret_fd,
			 char **ret_why)
{
	*ret_fd = -1;
	*ret_why = NULL;
	if (!name || !*name)
		return -ENOENT;
	int base = cwd_fd >= 0 ? cwd_fd : AT_FDCWD;
	if (strchr(name, '/'))
		return open_checked(base, name, run_uid, ret_fd, ret_why);
	/* Searched as execvp does, in envp's PATH: the first found is the
	 * one checked, a refused one is not passed over for a later one. */
	const char *path = NULL;
	for (char *const *e = envp; e && *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			path = *e + 5;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	int last = -ENOENT;
	size_t nl = strlen(name);
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dl = (size_t)(end - p);
		if (dl + nl + 2 <= PATH_MAX) {
			_cleanup_free_ char *full = dl ? xasprintf("%.*s/%s", (int)dl, p, name) : xasprintf("./%s", name);
			int r = open_checked(base, full, run_uid, ret_fd, ret_why);
			if (r == 0 || r == -EPERM)
				return r;
			if (r == -EACCES)
				last = r;
			else if (r != -ENOENT && r != -ENOTDIR)
				return r;
		}
		if (!*end)
			break;
		p = end;
	}
	return last;
}

int sandbox_script_check(char *const *argv, int cwd_fd, uid_t run_uid, char **ret_why)
{
	*ret_why = NULL;
	const char *script = sandbox_argv_script((const char *const *)argv);
	if (!script)
		return 0;
	_cleanup_close_ int fd = -1;
	int r = open_checked(cwd_fd >= 0 ? cwd_fd : AT_FDCWD, script, run_uid, &fd, ret_why);
	return r == -EPERM ? r : 0;
}
