/* SPDX-License-Identifier: MIT */
/*
 * What a kept plan (run.c) depends on in the workspaces, watched: for
 * each path the plan looked at (a protected path, whether it exists or
 * not, a git directory, a daemon's own path, a covered one), every
 * directory on the way from its workspace, with the one name in it that
 * leads on; for a denied path outside every workspace (covered or split
 * around as it exists or not), every directory on the way from "/". An entry of that name made, removed or renamed in one of
 * them, a watched directory itself moved or removed, or the queue
 * overflowing, counts as a change (plan_watch_gen()); any change drops
 * every kept plan, which is made again at its next call. Other entries
 * of those directories (git's index.lock in .git, a file written in the
 * workspace's top) change nothing.
 *
 * A plan is kept only when every (directory, name) it depends on was
 * watched before it was made (plan_watch_way() says so): a change made
 * while it was being made, or before the watch existed, cannot go
 * unseen. The first call of a plan therefore adds the watches, the
 * second keeps it.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/util.h"

/* The most (directory, name) pairs watched: past it, every watch goes and
 * the kept plans with them. */
#define PAIRS_MAX 1024

#define MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | \
	      IN_DONT_FOLLOW)

static struct pair {
	int wd;
	char *name;
} pairs[PAIRS_MAX];
static unsigned n_pairs;
/* The most events matched against the pairs in one read: past it (a
 * build writing many files in the workspace's top) the plans count as
 * changed, which costs each one plan made again instead of a long match
 * here. */
#define EVENTS_MATCHED 256

/* The inotify fd (-1: not made, -2: none to be had). */
static int fd = -1;
static uint64_t gen = 1;

/* Whether an event on wd naming name concerns a watched pair (a pair
 * whose name is "" stands for every name). */
static bool matters(int wd, const char *name)
{
	for (unsigned i = 0; i < n_pairs; i++)
		if (pairs[i].wd == wd && (!pairs[i].name[0] || strcmp(pairs[i].name, name) == 0))
			return true;
	return false;
}

/* Forgets the pairs of a watch the kernel removed. */
static void forget(int wd)
{
	for (unsigned i = 0; i < n_pairs;)
		if (pairs[i].wd == wd) {
			free(pairs[i].name);
			pairs[i] = pairs[--n_pairs];
		} else {
			i++;
		}
}

uint64_t plan_watch_gen(void)
{
	if (fd < 0)
		return gen;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;
	unsigned seen = 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_IGNORED) {
				forget(ev->wd);
				gen++;
			} else if (ev->wd == -1 || (ev->mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF)) ||
				   ++seen > EVENTS_MATCHED || (ev->len && matters(ev->wd, ev->name))) {
				gen++;
			}
		}
	return gen;
}

void plan_watch_clear(void)
{
	for (unsigned i = 0; i < n_pairs; i++)
		free(pairs[i].name);
	n_pairs = 0;
	if (fd >= 0)
		close(fd);
	fd = -1;
	gen++;
}

/* Watches the pair (dir, name): true when it was watched already. */
static bool pair_watch(const char *dir, const char *name, size_t len, bool *ok)
{
	if (fd == -1) {
		fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (fd < 0)
			fd = -2;
	}
	if (fd < 0 || len > NAME_MAX) {
		*ok = false;
		return false;
	}
	int wd = inotify_add_watch(fd, dir, MASK);
	if (wd < 0) {
		*ok = false;
		return false;
	}
	for (unsigned i = 0; i < n_pairs; i++)
		if (pairs[i].wd == wd && strncmp(pairs[i].name, name, len) == 0 && !pairs[i].name[len])
			return true;
	if (n_pairs == PAIRS_MAX) {
		plan_watch_clear();
		*ok = false;
		return false;
	}
	pairs[n_pairs++] = (struct pair){ .wd = wd, .name = xstrndup(name, len) };
	return false;
}

bool plan_watch_way(const char *ws, const char *path)
{
	size_t n = strlen(ws);
	if (strncmp(path, ws, n) != 0 || (path[n] != '/' && path[n]))
		return false;
	bool ok = true, old = true;
	_cleanup_free_ char *dir = xstrdup(path);
	/* Each directory from the workspace down, and the name in it (every
	 * name of the last, for a path written with a final "/"). */
	for (size_t at = n; dir[at] == '/' && ok;) {
		const char *name = dir + at + 1;
		size_t len = strcspn(name, "/");
		dir[at] = '\0';
		old = pair_watch(at ? dir : "/", name, len, &ok) && old;
		dir[at] = '/';
		at += 1 + len;
		/* The next only where this one is a directory (not a link):
		 * a missing one is watched for in its parent. */
		struct stat st;
		if (path[at] != '/')
			break;
		dir[at] = '\0';
		int k = lstat(dir, &st);
		dir[at] = '/';
		if (k < 0 && errno == ENOENT)
			break;
		/* A link or a file on the way: what lies past it is not
		 * watched. */
		if (k < 0 || !S_ISDIR(st.st_mode))
			ok = false;
	}
	return ok && old;
}
