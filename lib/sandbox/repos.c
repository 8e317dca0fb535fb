/* SPDX-License-Identifier: MIT */
/*
 * The git directories of a workspace in which sandbox.protect holds for
 * children (run.c mounts the protected entries of each read-only): the
 * repository's own .git, its submodules' git directories (.git/modules/
 * NAME, one readdir), and the .git of each repository nested in the
 * workspace (DIR/.git, or the file a submodule's worktree has there) down
 * to REPOS_DEPTH levels: a/b/c/d/.git is held, a/b/c/d/e/.git is not.
 *
 * The nested repositories are found by reading the workspace's
 * directories level by level, shallowest first, following no symlink and
 * never entering a .git, at most REPOS_DIRS directories and REPOS_SCAN
 * entries a scan: beyond that (a workspace with more directories within
 * REPOS_DEPTH levels) the repositories not reached are not held for
 * children, as none deeper than REPOS_DEPTH are; the file tools hold
 * protect in every repository at any depth, by path (conf.c). A scan that
 * stops at its bound says so once per workspace kept (sandbox_set_warn(),
 * at most one line a second) and counts (sandbox_repos_bounded()).
 *
 * The workspace is hostile and changes while it is read: everything here
 * is reached from the workspace's fd, one directory's fd at a time,
 * following no symbolic link (openat2() RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, O_NOFOLLOW), so that a directory exchanged for a
 * link after it was read cannot lead a later step outside: run.c makes
 * its stubs the same way (repos_open_below()). The paths listed are for
 * the child's mounts.
 *
 * A scan is kept for the next calls while no directory it looked at has
 * changed (an entry made, removed or renamed in it, a .git made by git
 * init of an existing directory included): inotify watches each one, so a
 * call costs one read of the inotify fd; where a directory cannot be
 * watched (no inotify, its watches used up) every one is lstat'ed at each
 * call instead (device, inode, mtime and ctime). A new scan when one
 * changed.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/files/workspace.h"
#include "proto/base/strv.h"
#include "proto/base/util.h"

/* The most git directories of submodules. */
#define MODULES_MAX 32
/* The deepest level a nested repository's top is looked for at (the
 * workspace's own top is level 0). */
#define REPOS_DEPTH 4
/* The most directories a scan looks at (and keeps to check), and entries
 * it reads: a scan runs on the loop (sandbox_prepare()), when a directory
 * it looked at has changed, and costs a few system calls a directory. */
#define REPOS_DIRS 256
#define REPOS_SCAN 8192
/* The workspaces whose nested repositories are kept. */
#define KEPT_MAX 8
/* The fewest milliseconds between two warnings of a bounded scan. */
#define BOUNDED_WARN_MS 1000

/* A directory a scan looked at, as it was then. */
struct seen {
	char *path;		/* absolute */
	struct stat st;
};

static struct kept {
	char *ws;
	struct seen *dirs;	/* the top first */
	size_t n_dirs;
	char **names;		/* the nested repositories, relative to the top */
	int *wds;		/* inotify watches of dirs (-1: none) */
	bool watched;		/* every one of dirs is watched */
	bool changed;		/* an event came for one of them */
	bool bounded;		/* the last scan stopped at REPOS_DIRS or REPOS_SCAN */
	bool warned;		/* a bounded scan of ws was told */
} kept[KEPT_MAX];
static unsigned n_kept;
/* Scans that stopped at their bound, since the start. */
static uint64_t n_bounded;
static uint64_t bounded_warned_ms;
static void (*warn_fn)(const char *msg);
/* The inotify fd of the watches (-1: not made yet, -2: none to be had). */
static int ino_fd = -1;
/* Counts the changes of what nested() would answer (repos_gen()). */
static uint64_t changes = 1;

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | \
		    IN_ONLYDIR | IN_DONT_FOLLOW)

/* True when another kept scan watches wd (the kernel gives one inode one
 * watch, shared by every workspace that holds the directory). */
static bool wd_shared(const struct kept *k, int wd)
{
	for (unsigned i = 0; i < n_kept; i++)
		for (size_t j = 0; &kept[i] != k && j < kept[i].n_dirs; j++)
			if (kept[i].wds && kept[i].wds[j] == wd)
				return true;
	return false;
}

/* The most events matched to their scans in one drain; past it (a build
 * writing many files in watched directories) every scan counts as
 * changed, which costs each a new scan instead of a long match here. */
#define EVENTS_MATCHED 64

/* Reads the events that came: the scans whose directories they concern
 * have changed (all of them when the queue overflowed, or when too many
 * came to match). */
static void drain(void)
{
	if (ino_fd < 0)
		return;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;
	unsigned seen = 0;
	while ((n = read(ino_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			/* A watch gone: removed by kept_clear(), or its
			 * directory deleted, which IN_DELETE_SELF told. */
			if (ev->mask & IN_IGNORED)
				continue;
			bool all = ev->wd == -1 || (ev->mask & IN_Q_OVERFLOW) || ++seen > EVENTS_MATCHED;
			for (unsigned i = 0; i < n_kept; i++)
				for (size_t j = 0; !kept[i].changed && j < kept[i].n_dirs && kept[i].wds; j++)
					if (all || kept[i].wds[j] == ev->wd) {
						kept[i].changed = true;
						changes++;
					}
		}
	}
}

static void push(char ***v, size_t *n, char *s)
{
	*v = xreallocarray(*v, *n + 2, sizeof(**v));
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int repos_open_below(int topfd, const char *rel)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, topfd, rel, &how, sizeof(how));
	if (fd >= 0 || (errno != ENOSYS && errno != EPERM && errno != E2BIG))
		return fd;
	fd = fcntl(topfd, F_DUPFD_CLOEXEC, 3);
	_cleanup_free_ char *p = xstrdup(rel);
	char *save = NULL;
	for (char *c = strtok_r(p, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
		int next = strcmp(c, "..") == 0 ? (errno = EXDEV, -1)
						: openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	return fd;
}

int repos_open_ws(const char *ws)
{
	if (ws[0] != '/') {
		errno = EINVAL;
		return -1;
	}
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, ws, &how, sizeof(how));
	if (fd >= 0 || (errno != ENOSYS && errno != EPERM && errno != E2BIG))
		return fd;
	_cleanup_close_ int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	return ws[1] ? repos_open_below(root, ws + 1) : fcntl(root, F_DUPFD_CLOEXEC, 3);
}

void sandbox_set_warn(void (*fn)(const char *msg))
{
	warn_fn = fn;
}

uint64_t sandbox_repos_bounded(void)
{
	return n_bounded;
}

/* Says that k's scan stopped at its bound: once per workspace kept, at
 * most one line a second whatever the workspaces. */
static void bounded(struct kept *k)
{
	n_bounded++;
	k->bounded = true;
	uint64_t now = mono_ms();
	if (k->warned || !warn_fn || (bounded_warned_ms && now - bounded_warned_ms < BOUNDED_WARN_MS))
		return;
	k->warned = true;
	bounded_warned_ms = now;
	/* A workspace's name is a client's or a user's: its control
	 * characters and backslashes written as \xNN, so that the warning
	 * stays one line. */
	size_t n = strlen(k->ws);
	_cleanup_free_ char *ws = xmalloc(4 * n + 1);
	char *o = ws;
	for (const unsigned char *p = (const unsigned char *)k->ws; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			o += sprintf(o, "\\x%02x", *p);
		else
			*o++ = (char)*p;
	*o = '\0';
	_cleanup_free_ char *msg = xasprintf(
		"sandbox: workspace %s has more than %u directories or %u entries within %u levels: the scan for "
		"nested git repositories stopped there, and protect does not hold for children in the ones "
		"not reached (file tools still hold it at any depth)",
		ws, REPOS_DIRS, REPOS_SCAN, REPOS_DEPTH);
	warn_fn(msg);
}

static void kept_clear(struct kept *k)
{
	changes++;
	for (size_t i = 0; i < k->n_dirs; i++) {
		free(k->dirs[i].path);
		if (k->wds && k->wds[i] >= 0 && ino_fd >= 0 && !wd_shared(k, k->wds[i]))
			(void)inotify_rm_watch(ino_fd, k->wds[i]);
	}
	free(k->wds);
	k->wds = NULL;
	k->watched = k->changed = k->bounded = false;
	free(k->dirs);
	k->dirs = NULL;
	k->n_dirs = 0;
	strv_free(k->names);
	k->names = NULL;
}

/* Watches the directory open as fd (through /proc/self/fd: the
 * directory read, not what its path leads to now), or path where /proc
 * is not mounted. */
static int watch(int fd, const char *path)
{
	char self[40];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	int wd = inotify_add_watch(ino_fd, self, WATCH_MASK & ~(uint32_t)IN_DONT_FOLLOW);
	return wd >= 0 || errno != ENOENT ? wd : inotify_add_watch(ino_fd, path, WATCH_MASK);
}

/* Notes a directory the scan looks at (open as fd), and watches it. */
static void seen_add(struct kept *k, int fd, const char *ws, const char *rel, const struct stat *st)
{
	k->dirs = xreallocarray(k->dirs, k->n_dirs + 1, sizeof(*k->dirs));
	k->wds = xreallocarray(k->wds, k->n_dirs + 1, sizeof(*k->wds));
	char *path = *rel ? xasprintf("%s/%s", ws, rel) : xstrdup(ws);
	int wd = k->watched ? watch(fd, path) : -1;
	if (k->watched && wd < 0) {
		/* Checked by lstat from now on: the ones before too. */
		k->watched = false;
		for (size_t i = 1; i < k->n_dirs; i++)
			if (lstat(k->dirs[i].path, &k->dirs[i].st) < 0)
				k->dirs[i].st = (struct stat){0};
	}
	k->wds[k->n_dirs] = wd;
	k->dirs[k->n_dirs] = (struct seen){ .path = path };
	if (st)
		k->dirs[k->n_dirs].st = *st;
	else if (!k->watched && fstat(fd, &k->dirs[k->n_dirs].st) < 0)
		k->dirs[k->n_dirs].st = (struct stat){0};
	k->n_dirs++;
}

/*
 * Reads ws's directories level by level, down to REPOS_DEPTH, into k: the
 * directories looked at (checked again at each call) and those holding a
 * .git (a directory, or a file: a submodule's "gitdir:" pointer).
 */
static void scan(struct kept *k, int wsfd, const char *ws, const struct stat *top)
{
	if (ino_fd == -1) {
		ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (ino_fd < 0)
			ino_fd = -2;
	}
	k->watched = ino_fd >= 0;
	seen_add(k, wsfd, ws, "", top);
	int topfd = wsfd;
	size_t n_names = 0, entries = 0;
	bool full = false;
	/* The directories of the level being read, relative to the top. */
	char **level = NULL, **next = NULL;
	size_t n_level = 0, n_next = 0;
	push(&level, &n_level, xstrdup(""));
	for (unsigned depth = 0; depth < REPOS_DEPTH && level && *level; depth++) {
		next = NULL;
		n_next = 0;
		for (char **rel = level; *rel && !full; rel++) {
			int fd = **rel ? repos_open_below(topfd, *rel) : fcntl(topfd, F_DUPFD_CLOEXEC, 3);
			DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
			if (!d) {
				if (fd >= 0)
					close(fd);
				continue;
			}
			struct dirent *e;
			while ((e = readdir(d))) {
				/* An entry, or a directory, more than the bound
				 * lets in: the scan ends short of it. */
				if (++entries > REPOS_SCAN) {
					full = true;
					break;
				}
				if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
				    strcmp(e->d_name, ".git") == 0 || (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN))
					continue;
				if (k->n_dirs >= REPOS_DIRS) {
					full = true;
					break;
				}
				/* The directory itself, not what a link put in
				 * its place since readdir() would lead to. */
				_cleanup_close_ int cfd =
					openat(dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (cfd < 0)
					continue;
				struct stat gst;
				char *child = **rel ? xasprintf("%s/%s", *rel, e->d_name) : xstrdup(e->d_name);
				seen_add(k, cfd, ws, child, NULL);
				if (fstatat(cfd, ".git", &gst, AT_SYMLINK_NOFOLLOW) == 0 &&
				    (S_ISDIR(gst.st_mode) || S_ISREG(gst.st_mode)))
					push(&k->names, &n_names, xstrdup(child));
				if (depth + 1 < REPOS_DEPTH)
					push(&next, &n_next, child);
				else
					free(child);
			}
			closedir(d);
		}
		strv_free(level);
		level = next;
	}
	strv_free(level);
	if (full)
		bounded(k);
}

/* True when every directory the scan looked at is as it was: no event
 * came for one, or, where one is not watched, each lstat'ed is. */
static bool still_same(const struct kept *k)
{
	if (k->watched)
		return !k->changed;
	for (size_t i = 1; i < k->n_dirs; i++) {
		struct stat st;
		if (lstat(k->dirs[i].path, &st) < 0 || !same_stat(&k->dirs[i].st, &st))
			return false;
	}
	return true;
}

/* The repositories nested in ws (relative to it), read again when one of
 * the directories the last scan looked at has changed. */
static const char *const *nested(int wsfd, const char *ws)
{
	struct stat st;
	if (fstat(wsfd, &st) < 0)
		return NULL;
	drain();
	unsigned i = 0;
	while (i < n_kept && strcmp(kept[i].ws, ws) != 0)
		i++;
	if (i < n_kept && kept[i].n_dirs && same_stat(&kept[i].dirs[0].st, &st) && still_same(&kept[i]))
		return (const char *const *)kept[i].names;
	if (i == n_kept) {
		if (n_kept == KEPT_MAX) {
			/* The oldest goes. */
			free(kept[0].ws);
			kept_clear(&kept[0]);
			memmove(kept, kept + 1, (KEPT_MAX - 1) * sizeof(*kept));
			i = --n_kept;
		}
		kept[i] = (struct kept){ .ws = xstrdup(ws) };
		n_kept++;
	}
	kept_clear(&kept[i]);
	scan(&kept[i], wsfd, ws, &st);
	return (const char *const *)kept[i].names;
}

uint64_t repos_gen(void)
{
	drain();
	/* A scan checked by lstat tells nothing between its calls. */
	for (unsigned i = 0; i < n_kept; i++)
		if (!kept[i].watched)
			changes++;
	return changes;
}

void repos_clear(void)
{
	while (n_kept) {
		n_kept--;
		free(kept[n_kept].ws);
		kept_clear(&kept[n_kept]);
	}
	if (ino_fd >= 0)
		close(ino_fd);
	ino_fd = -1;
}

/* Adds the git directories of the directory rel of the workspace (ws,
 * opened as wsfd; rel "" for its top): rel/.git when it is a directory,
 * and its submodules'; or rel/.git when it is a file, to the pointers
 * (nested only: the workspace's own is run.c's). Each reached from wsfd
 * following no link. */
static void add_repo(struct repo_dirs *r, int wsfd, const char *ws, const char *rel)
{
	bool nested_repo = *rel;
	_cleanup_close_ int own = nested_repo ? repos_open_below(wsfd, rel) : -1;
	int dfd = nested_repo ? own : wsfd;
	if (dfd < 0)
		return;
	char *dir = nested_repo ? xasprintf("%s/%s", ws, rel) : xstrdup(ws);
	char *top = xasprintf("%s/.git", dir);
	struct stat st;
	int k = fstatat(dfd, ".git", &st, AT_SYMLINK_NOFOLLOW);
	/* The top's .git an empty directory is no repository to git (it
	 * looks on, in the directories above): the place run.c holds where
	 * there is none, as none. */
	if (k == 0 && !nested_repo && S_ISDIR(st.st_mode) && ws_dir_empty(dfd, ".git")) {
		r->top_none = r->top_stub = true;
		free(top);
		free(dir);
		return;
	}
	if (k < 0 || !S_ISDIR(st.st_mode)) {
		if (!nested_repo) {
			r->top_file = k == 0 && S_ISREG(st.st_mode);
			r->top_none = k < 0 && errno == ENOENT;
		}
		if (k == 0 && nested_repo && S_ISREG(st.st_mode))
			push(&r->pointers, &r->n_pointers, top);
		else
			free(top);
		free(dir);
		return;
	}
	push(&r->git, &r->n, top);
	push(&r->base, &r->n_base, dir);
	int fd = repos_open_below(dfd, ".git/modules");
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	for (unsigned n = 0; (e = readdir(d)) && n < MODULES_MAX;)
		if (e->d_type == DT_DIR && e->d_name[0] != '.') {
			push(&r->git, &r->n, xasprintf("%s/modules/%s", top, e->d_name));
			push(&r->base, &r->n_base, xstrdup(dir));
			n++;
		}
	closedir(d);
}

void repos_get(const char *ws, struct repo_dirs *ret)
{
	*ret = (struct repo_dirs){ .ws_fd = repos_open_ws(ws) };
	if (ret->ws_fd < 0)
		return;
	add_repo(ret, ret->ws_fd, ws, "");
	ret->n_top = ret->n;
	for (const char *const *n = nested(ret->ws_fd, ws); n && *n; n++)
		add_repo(ret, ret->ws_fd, ws, *n);
}

void repo_dirs_clear(struct repo_dirs *r)
{
	strv_free(r->git);
	strv_free(r->base);
	strv_free(r->pointers);
	if (r->ws_fd >= 0)
		close(r->ws_fd);
	*r = (struct repo_dirs){ .ws_fd = -1 };
}
