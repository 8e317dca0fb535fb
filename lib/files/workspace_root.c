/* SPDX-License-Identifier: MIT */
/*
 * The allowed workspace roots and the race-free choice of a session's
 * workspace among them: open first, then judge the directory opened by its
 * identity (st_dev, st_ino), walking up with ".." from its fd. The path is
 * looked up, and the directory's search right checked, by the kernel as
 * the peer (lib/files/identity.h).
 */
#include "lib/files/workspace_root.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/files/identity.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_internal.h"
#include "proto/base/util.h"

/* Deeper than this, a directory is not looked for beneath a root (a path
 * of PATH_MAX bytes has at most PATH_MAX / 2 components). */
#define MAX_DEPTH (PATH_MAX / 2)

struct ws_root {
	int fd;			/* O_PATH | O_DIRECTORY, held so the identity stays meaningful */
	dev_t dev;
	ino_t ino;
	bool beneath;		/* subdirectories allowed too */
};

struct ws_roots {
	struct ws_root *v;
	size_t n;
};

struct ws_roots *ws_roots_new(void)
{
	return xcalloc(1, sizeof(struct ws_roots));
}

struct ws_roots *ws_roots_free(struct ws_roots *r)
{
	if (!r)
		return NULL;
	for (size_t i = 0; i < r->n; i++)
		close(r->v[i].fd);
	free(r->v);
	free(r);
	return NULL;
}

size_t ws_roots_count(const struct ws_roots *r)
{
	return r ? r->n : 0;
}

/* Adds the directory fd (taken) as a root. */
static int add_fd(struct ws_roots *r, int fd, bool beneath)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (!S_ISDIR(st.st_mode)) {
		close(fd);
		return -ENOTDIR;
	}
	r->v = xreallocarray(r->v, r->n + 1, sizeof(*r->v));
	r->v[r->n++] = (struct ws_root) { fd, st.st_dev, st.st_ino, beneath };
	return 0;
}

int ws_roots_add(struct ws_roots *r, const char *path, bool beneath)
{
	if (!path || !*path)
		return -EINVAL;
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return add_fd(r, fd, beneath);
}

int ws_roots_add_ws(struct ws_roots *r, const struct workspace *ws)
{
	int fd = fcntl(ws->dirfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	return add_fd(r, fd, false);
}

/* Finds the root with st's identity; with beneath_only, only a root that
 * allows its subdirectories. */
static const struct ws_root *find_root(const struct ws_roots *r, const struct stat *st, bool beneath_only)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].dev == st->st_dev && r->v[i].ino == st->st_ino &&
		    (r->v[i].beneath || !beneath_only))
			return &r->v[i];
	return NULL;
}

/* Tells whether the directory fd is a root or lies beneath one: its
 * ancestors are reached by "..", each judged by its identity, up to the
 * top (where ".." is the directory itself). */
static bool allowed_fd(const struct ws_roots *r, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	if (find_root(r, &st, false))
		return true;
	_cleanup_close_ int cur = -1;
	int at = fd;
	for (unsigned depth = 0; depth < MAX_DEPTH; depth++) {
		int up = openat(at, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (up < 0)
			return false;
		struct stat ust;
		if (fstat(up, &ust) < 0) {
			close(up);
			return false;
		}
		if (cur >= 0)
			close(cur);
		cur = up;
		at = cur;
		if (find_root(r, &ust, true))
			return true;
		if (ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)
			return false;	/* the top: ".." led back to itself */
		st = ust;
	}
	return false;
}

/* Asks the kernel to look "." up in the directory dirfd, which needs
 * search permission on it (ACLs included); run as the peer, whose fsuid
 * other than 0 has no CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH. */
static int search_dir(int dirfd)
{
	int fd = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -EACCES;
	close(fd);
	return 0;
}

/* The canonical path of the directory fd, checked to name that very
 * directory now. */
static int canonical_path(int fd, const char *asked, char **ret)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	_cleanup_free_ char *path = xmalloc(PATH_MAX + 1);
	ssize_t n = readlink(proc, path, PATH_MAX);
	if (n > 0 && n < PATH_MAX && path[0] == '/') {
		path[n] = '\0';
	} else {
		/* No /proc: the name given, resolved; checked below all the same. */
		free(path);
		path = realpath(asked, NULL);
		if (!path)
			return -EACCES;
	}
	struct stat a, b;
	if (fstat(fd, &a) < 0 || stat(path, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return -EACCES;	/* moved meanwhile, deleted, or out of our view */
	*ret = TAKE_PTR(path);
	return 0;
}

/* Opens the directory at path as the daemon; magic links (/proc/N/cwd)
 * are not followed where openat2 can say so. */
static int open_dir(const char *path)
{
	if (ws_have_openat2()) {
		int fd = ws_openat2_retry(AT_FDCWD, path, O_PATH | O_DIRECTORY, 0, RESOLVE_NO_MAGICLINKS);
		if (fd != -ENOSYS && fd != -EPERM)
			return fd;
	}
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

struct peer_open {
	const char *path;
	int fd;
};

/* As the peer (identity_run()): opens the directory at path, every
 * component looked up with the peer's rights, and checks it may search
 * the directory itself. */
static int open_searchable(void *arg)
{
	struct peer_open *o = arg;
	int fd = open_dir(o->path);
	if (fd < 0)
		return -EACCES;
	if (search_dir(fd) < 0) {
		close(fd);
		return -EACCES;
	}
	o->fd = fd;
	return 0;
}

/* Opens the directory at path as peer would: a directory the peer could
 * not reach itself (beneath one it may not search) is not reached for it.
 * A daemon that is not root, or a peer that is root, opens as the daemon. */
static int open_as_peer(const char *path, const struct identity *peer)
{
	if (!identity_needs_switch(peer))
		return open_dir(path);
	struct peer_open o = { path, -1 };
	if (identity_run(peer, open_searchable, &o) < 0)
		return -EACCES;
	return o.fd;
}

int ws_open_allowed(const struct ws_roots *r, const char *path, const struct identity *peer,
		    struct workspace **ret)
{
	if (!path || path[0] != '/')
		return -EINVAL;
	int fd = open_as_peer(path, peer);
	if (fd < 0)
		return -EACCES;
	_cleanup_close_ int dirfd = fd;
	if (!r || !allowed_fd(r, dirfd))
		return -EACCES;

	/* The workspace is the directory checked: its path now, and the
	 * spelling asked for as an alias (ws_open), both checked to name it. */
	_cleanup_free_ char *canon = NULL;
	if (canonical_path(dirfd, path, &canon) < 0)
		return -EACCES;
	struct workspace *ws = NULL;
	if (ws_open(canon, &ws) < 0)
		return -EACCES;
	struct stat a, b;
	if (fstat(ws->dirfd, &a) < 0 || fstat(dirfd, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		ws_unref(ws);
		return -EACCES;	/* swapped between the two opens */
	}
	/* Absolute paths in calls may use the spelling the client gave, when
	 * it names the same directory. */
	struct stat c;
	if (!str_eq(path, canon) && stat(path, &c) == 0 && c.st_dev == a.st_dev && c.st_ino == a.st_ino) {
		size_t n = strlen(path);
		while (n > 1 && path[n - 1] == '/')
			n--;
		if (!(n == strlen(canon) && strncmp(path, canon, n) == 0) && !ws_has_dot_component(path)) {
			free(ws->alias);
			ws->alias = xstrndup(path, n);
		}
	}
	*ret = ws;
	return 0;
}
