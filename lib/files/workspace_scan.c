/* SPDX-License-Identifier: MIT */
/*
 * The look before a directory is taken whole (deleted or moved): a walk of
 * the tree beneath it that only reads directories, following no symlink,
 * and asks the calling thread's guard (ws_guard_set()) about every entry
 * as if it alone were taken. The first entry the guard refuses (a nested
 * repository's .git, a .git file, a daemon's directory) ends the walk with
 * -EPERM, before the caller has changed anything. In parts, as the delete
 * itself, so that a cancel or the call's timeout stops a large tree.
 *
 * What it promises: an entry the walk saw protected stops the operation
 * before it changes anything, and a delete after a clean look empties the
 * very directory the walk read (ws_scan_take()), not one renamed into its
 * place meanwhile. What it does not: the tree may change while it is
 * read. A .git made (or moved in) beneath the directory after the walk
 * has passed its place is not seen, and the delete or rename that follows
 * takes it. Only the peer's own children and calls can do that, in the
 * peer's own workspace, with the peer's rights (protect keeps them from
 * writing hooks or config into any .git, which is what it guards against).
 */
#include "lib/files/workspace_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/util.h"

/* Directories deeper than this below the scanned one are refused, as a
 * delete refuses them. */
#define SCAN_DEPTH_MAX 256

struct scan_frame {
	DIR *d;
	size_t len;	/* of path without this directory's name */
};

struct ws_scan {
	struct scan_frame *stack;
	unsigned depth;
	char *path;		/* canonical, relative to the root: the directory on top */
	size_t len, cap;
	char *top;		/* the scanned directory itself */
	DIR *kept;		/* and its stream, once looked through */
	char *hit;		/* the entry refused */
	const char *entry;	/* and the protection it touches */
};

/* Appends "/name" (or name, at the root) to the path. */
static void path_push(struct ws_scan *s, const char *name)
{
	size_t n = strlen(name), need = s->len + n + 2;
	if (need > s->cap) {
		s->cap = MAX(need, s->cap * 2);
		s->path = xrealloc(s->path, s->cap);
	}
	if (s->len)
		s->path[s->len++] = '/';
	memcpy(s->path + s->len, name, n + 1);
	s->len += n;
}

static void path_cut(struct ws_scan *s, size_t len)
{
	s->len = len;
	s->path[len] = '\0';
}

/* Opens the directory name in dirfd on top; the path then ends in name. */
static int scan_push(struct ws_scan *s, int dirfd, const char *name, size_t len)
{
	if (s->depth >= SCAN_DEPTH_MAX)
		return -ELOOP;
	DIR *d;
	int r = ws_opendir_nofollow(dirfd, name, &d);
	if (r < 0)
		return r;
	if (!s->stack)
		s->stack = xcalloc(SCAN_DEPTH_MAX, sizeof(*s->stack));
	s->stack[s->depth++] = (struct scan_frame){ d, len };
	return 0;
}

struct ws_scan *ws_scan_free(struct ws_scan *s)
{
	if (!s)
		return NULL;
	while (s->depth)
		closedir(s->stack[--s->depth].d);
	if (s->kept)
		closedir(s->kept);
	free(s->stack);
	free(s->path);
	free(s->top);
	free(s->hit);
	free(s);
	return NULL;
}

int ws_scan_begin_at(const struct workspace *ws, int dirfd, const char *name, struct ws_scan **ret)
{
	*ret = NULL;
	if (!ws_guard_active())
		return 0;	/* nothing is protected */
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;	/* the operation itself tells */
	if (!S_ISDIR(st.st_mode))
		return 0;	/* holds nothing (a symlink is taken as itself) */
	_cleanup_free_ char *base = ws_fd_relative(ws, dirfd);
	if (!base)
		return -EPERM;	/* not beneath the root: never changed */
	struct ws_scan *s = xcalloc(1, sizeof(*s));
	if (!str_eq(base, "."))
		path_push(s, base);
	size_t len = s->len;
	path_push(s, name);
	s->top = xstrdup(s->path);
	int r = scan_push(s, dirfd, name, len);
	if (r < 0) {
		ws_scan_free(s);
		return r;
	}
	*ret = s;
	return WS_MORE;
}

int ws_scan_begin(const struct workspace *ws, const char *path, size_t len, struct ws_scan **ret)
{
	*ret = NULL;
	if (!ws_guard_active())
		return 0;
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *name = NULL;
	ws = ws_pick(ws, path, len);
	int r = ws_open_last(ws, path, len, &dirfd, &name);
	if (r < 0)
		return 0;	/* the operation itself fails, or takes the root: its answer */
	return ws_scan_begin_at(ws, dirfd, name, ret);
}

int ws_scan_step(struct ws_scan *s, uint64_t budget_ms)
{
	if (!s || !s->depth)
		return s && s->hit ? -EPERM : 0;
	uint64_t deadline = budget_ms ? mono_ms() + budget_ms : UINT64_MAX;
	for (unsigned n = 1;; n++) {
		if ((n & 63) == 0 && mono_ms() >= deadline)
			return WS_MORE;
		struct scan_frame *f = &s->stack[s->depth - 1];
		errno = 0;
		struct dirent *de = readdir(f->d);
		if (!de) {
			if (errno)
				return -errno;
			path_cut(s, f->len);
			if (--s->depth == 0) {
				s->kept = f->d;
				return 0;
			}
			closedir(f->d);
			continue;
		}
		if (str_eq(de->d_name, ".") || str_eq(de->d_name, ".."))
			continue;
		size_t len = s->len;
		path_push(s, de->d_name);
		const char *entry = ws_guard_match(s->path, true, false);
		if (entry) {
			s->hit = xstrdup(s->path);
			s->entry = entry;
			while (s->depth)
				closedir(s->stack[--s->depth].d);
			return -EPERM;
		}
		bool dir = de->d_type == DT_DIR;
		if (de->d_type == DT_UNKNOWN) {
			struct stat st;
			dir = fstatat(dirfd(f->d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
		}
		if (dir) {
			int r = scan_push(s, dirfd(f->d), de->d_name, len);
			if (r == 0)
				continue;
			if (r != -ENOENT)
				return r;
		}
		path_cut(s, len);
	}
}

DIR *ws_scan_take(struct ws_scan *s)
{
	DIR *d = s ? s->kept : NULL;
	if (d) {
		s->kept = NULL;
		rewinddir(d);
	}
	return d;
}

const char *ws_scan_top(const struct ws_scan *s)
{
	return s ? s->top : NULL;
}

const char *ws_scan_hit(const struct ws_scan *s, const char **ret_entry)
{
	if (ret_entry)
		*ret_entry = s ? s->entry : NULL;
	return s ? s->hit : NULL;
}
