/* SPDX-License-Identifier: MIT */
/*
 * Status, rename, delete and mkdir beneath a workspace root (see
 * workspace_internal.h). Each resolves the directory holding the last component
 * with ws_open_parent() and acts on the last component relative to that
 * fd, with the *at() calls that do not follow it. The recursive delete
 * walks down with ws_open_nofollow(), so a symlink met on the way is
 * removed as itself and never entered; it keeps its place in a stack of
 * open directories, so that it can stop after a part and go on later.
 */
#include "lib/files/workspace_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"

/* Directories deeper than this below the deleted one are refused. */
#define DELETE_DEPTH_MAX 256

/* Whether path names the root itself. */
static bool is_root(const struct workspace *ws, const char *path, size_t len)
{
	_cleanup_close_ int fd = -1;
	struct stat a, b;
	ws = ws_pick(ws, path, len);
	if (ws_openat(ws, path, len, O_PATH | O_DIRECTORY, 0, &fd) < 0)
		return false;
	return fstat(fd, &a) == 0 && fstat(ws->dirfd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * Opens the directory holding path's last component, trailing slashes
 * ignored ("dir/" names dir). A path naming the root fails with -EBUSY,
 * one naming a directory through "." or ".." with -EISDIR.
 */
static int open_last(const struct workspace *ws, const char *path, size_t len, bool create_dirs,
		     int *ret_dirfd, char **ret_name)
{
	if (!path || memchr(path, '\0', len))
		return -EINVAL;
	size_t n = len;
	while (n > 1 && path[n - 1] == '/')
		n--;
	_cleanup_free_ char *p = xstrndup(path, n);
	int r = ws_open_parent(ws, p, n, create_dirs, ret_dirfd, ret_name);
	if (r == -EISDIR)
		return is_root(ws, p, n) ? -EBUSY : -EISDIR;
	return r;
}

int ws_open_last(const struct workspace *ws, const char *path, size_t len, int *ret_dirfd, char **ret_name)
{
	return open_last(ws, path, len, false, ret_dirfd, ret_name);
}

int ws_lstat(const struct workspace *ws, const char *path, size_t len, struct stat *ret_st, char **ret_target)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *name = NULL;
	struct stat st;
	int r = open_last(ws, path, len, false, &dirfd, &name);
	if (r == -EBUSY || r == -EISDIR) {
		/* The root or a directory named by its form: stat what it is. */
		_cleanup_close_ int fd = -1;
		r = ws_openat(ws, path, len, O_PATH, 0, &fd);
		if (r < 0)
			return r;
		if (fstat(fd, &st) < 0)
			return -errno;
		if (ret_target)
			*ret_target = NULL;
		*ret_st = st;
		return 0;
	}
	if (r < 0)
		return r;
	if ((r = ws_guard_read_check(ws, dirfd, name)) < 0)
		return r;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	char *target = NULL;
	if (S_ISLNK(st.st_mode) && ret_target) {
		size_t cap = (size_t)MAX(st.st_size, 0) + 1;
		if (cap > 4097)
			cap = 4097;
		target = xmalloc(cap);
		ssize_t k = readlinkat(dirfd, name, target, cap - 1);
		if (k < 0) {
			r = -errno;
			free(target);
			return r;
		}
		target[k] = '\0';
	}
	if (ret_target)
		*ret_target = target;
	*ret_st = st;
	return 0;
}

int ws_rename(const struct workspace *ws, const char *from, size_t from_len, const char *to, size_t to_len,
	      bool overwrite)
{
	_cleanup_close_ int fromfd = -1, tofd = -1;
	_cleanup_free_ char *from_name = NULL, *to_name = NULL;
	int r = open_last(ws, from, from_len, false, &fromfd, &from_name);
	if (r < 0)
		return r;
	r = open_last(ws, to, to_len, false, &tofd, &to_name);
	if (r < 0)
		return r;
	if ((r = ws_guard_check(ws_pick(ws, from, from_len), fromfd, from_name, true, false)) < 0 ||
	    (r = ws_guard_check(ws_pick(ws, to, to_len), tofd, to_name, true, false)) < 0)
		return r;
	if (renameat2(fromfd, from_name, tofd, to_name, overwrite ? 0 : RENAME_NOREPLACE) < 0) {
		r = -errno;
		/* EXDEV from rename means two mounts, not an escape: every
		 * path was resolved beneath the root already. */
		if (r == -EXDEV)
			return -EOPNOTSUPP;
		if (r == -EINVAL && !overwrite) {
			/* No RENAME_NOREPLACE on this file system: check, then rename. */
			struct stat st;
			if (fstatat(tofd, to_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
				return -EEXIST;
			if (renameat(fromfd, from_name, tofd, to_name) < 0)
				return -errno;
		} else {
			return r;
		}
	}
	/* The rename happened: a directory that cannot be fsynced (opened
	 * O_PATH when not readable) is no reason to report a failure. */
	(void)fsync(tofd);
	return 0;
}

/* One directory being emptied: its stream, and its name in the one above. */
struct del_frame {
	DIR *d;
	char *name;
};

struct ws_deleter {
	int dirfd;			/* holds the deleted path's last component */
	char *name;
	struct del_frame *stack;	/* stack[0]: the deleted directory */
	unsigned depth;			/* frames in use */
	unsigned passes;		/* of the top directory, which readdir may not see whole */
	uint64_t deleted;
	/* Before the first entry goes: the look for what the thread's guard
	 * protects in the tree (workspace_scan.c); the delete starts once it
	 * has found nothing. */
	struct ws_scan *scan;
	bool looked;			/* the look was made: the top is the one it read */
	dev_t top_dev;
	ino_t top_ino;
};

/* Opens the directory name in dirfd as a new frame. */
static int del_push(struct ws_deleter *del, int dirfd, const char *name)
{
	if (del->depth > DELETE_DEPTH_MAX)
		return -ELOOP;
	DIR *d;
	int r = ws_opendir_nofollow(dirfd, name, &d);
	if (r < 0)
		return r;
	if (!del->stack)
		del->stack = xcalloc(DELETE_DEPTH_MAX + 2, sizeof(*del->stack));
	del->stack[del->depth++] = (struct del_frame){ d, xstrdup(name) };
	return 0;
}

/* Closes the top frame. */
static void del_pop(struct ws_deleter *del)
{
	struct del_frame *f = &del->stack[--del->depth];
	closedir(f->d);
	free(f->name);
}

struct ws_deleter *ws_delete_free(struct ws_deleter *del)
{
	if (!del)
		return NULL;
	while (del->depth)
		del_pop(del);
	free(del->stack);
	if (del->dirfd >= 0)
		close(del->dirfd);
	free(del->name);
	ws_scan_free(del->scan);
	free(del);
	return NULL;
}

const struct ws_scan *ws_delete_scan(const struct ws_deleter *del)
{
	return del ? del->scan : NULL;
}

uint64_t ws_delete_count(const struct ws_deleter *del)
{
	return del ? del->deleted : 0;
}

int ws_delete_begin(const struct workspace *ws, const char *path, size_t len, bool recursive,
		    struct ws_deleter **ret)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *name = NULL;
	struct ws_deleter *del = xcalloc(1, sizeof(*del));
	del->dirfd = -1;
	*ret = del;
	int r = open_last(ws, path, len, false, &dirfd, &name);
	if (r < 0)
		return r;
	r = ws_guard_check(ws_pick(ws, path, len), dirfd, name, true, false);
	if (r < 0)
		return r;
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0)
			return -errno;
		del->deleted = 1;
		return 0;
	}
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0) {
		del->deleted = 1;
		return 0;
	}
	r = -errno;
	if ((r != -ENOTEMPTY && r != -EEXIST) || !recursive)
		return r == -EEXIST ? -ENOTEMPTY : r;
	r = ws_scan_begin_at(ws_pick(ws, path, len), dirfd, name, &del->scan);
	if (r < 0)
		return r;
	if (!del->scan) {
		r = del_push(del, dirfd, name);
		if (r < 0)
			return r;
	}
	del->dirfd = TAKE_FD(dirfd);
	del->name = TAKE_PTR(name);
	return WS_MORE;
}

/* Removes the emptied directory on top of the stack from the one below
 * (or from where the deleted path lies): 0, WS_MORE when the top one was
 * not empty yet and is read again, or a negative errno. */
static int del_rmdir_top(struct ws_deleter *del)
{
	int parent = del->depth > 1 ? dirfd(del->stack[del->depth - 2].d) : del->dirfd;
	_cleanup_free_ char *name = xstrdup(del->stack[del->depth - 1].name);
	del_pop(del);
	if (unlinkat(parent, name, AT_REMOVEDIR) == 0) {
		del->deleted++;
		return 0;
	}
	int r = -errno;
	if (r == -ENOENT)
		return 0;
	/* readdir may miss entries of a directory changed while it reads:
	 * another pass removes what is left. */
	if ((r == -ENOTEMPTY || r == -EEXIST) && del->passes++ < 3) {
		r = del_push(del, parent, name);
		if (r < 0)
			return r;
		/* The top again: only the directory the look read. */
		struct stat st;
		if (del->depth == 1 && del->looked &&
		    (fstat(dirfd(del->stack[0].d), &st) < 0 || st.st_dev != del->top_dev || st.st_ino != del->top_ino)) {
			del_pop(del);
			return -ENOTEMPTY;
		}
		return WS_MORE;
	}
	return r;
}

int ws_delete_step(struct ws_deleter *del, uint64_t budget_ms)
{
	uint64_t deadline = budget_ms ? mono_ms() + budget_ms : UINT64_MAX;
	if (del && del->scan) {
		int r = ws_scan_step(del->scan, budget_ms);
		if (r != 0)
			return r;	/* more to look at, or refused: nothing deleted */
		/* The directory the look read, not one a rename put in its
		 * place since; what is made beneath it after the look passed
		 * is deleted unseen (see workspace_scan.c). */
		DIR *d = ws_scan_take(del->scan);
		del->scan = ws_scan_free(del->scan);
		struct stat st;
		if (!d || fstat(dirfd(d), &st) < 0) {
			if (d)
				closedir(d);
			return -EIO;
		}
		del->looked = true;
		del->top_dev = st.st_dev;
		del->top_ino = st.st_ino;
		if (!del->stack)
			del->stack = xcalloc(DELETE_DEPTH_MAX + 2, sizeof(*del->stack));
		del->stack[del->depth++] = (struct del_frame){ d, xstrdup(del->name) };
		return WS_MORE;	/* the look is a part of its own */
	}
	if (!del || !del->depth)
		return 0;
	for (unsigned n = 1;; n++) {
		if ((n & 63) == 0 && mono_ms() >= deadline)
			return WS_MORE;
		struct del_frame *f = &del->stack[del->depth - 1];
		int fd = dirfd(f->d);
		errno = 0;
		struct dirent *de = readdir(f->d);
		if (!de) {
			if (errno)
				return -errno;
			int r = del_rmdir_top(del);
			if (r < 0)
				return r;
			if (!del->depth)
				return 0;
			continue;
		}
		if (str_eq(de->d_name, ".") || str_eq(de->d_name, ".."))
			continue;
		bool dir = de->d_type == DT_DIR;
		if (de->d_type == DT_UNKNOWN) {
			struct stat st;
			if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno == ENOENT)
					continue;
				return -errno;
			}
			dir = S_ISDIR(st.st_mode);
		}
		if (dir) {
			int r = del_push(del, fd, de->d_name);
			if (r == -ENOENT)
				continue;
			if (r < 0)
				return r;
			continue;
		}
		if (unlinkat(fd, de->d_name, 0) < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		del->deleted++;
	}
}

int ws_delete(const struct workspace *ws, const char *path, size_t len, bool recursive, uint64_t *ret_deleted)
{
	struct ws_deleter *del = NULL;
	int r = ws_delete_begin(ws, path, len, recursive, &del);
	while (r == WS_MORE)
		r = ws_delete_step(del, 0);
	*ret_deleted = ws_delete_count(del);
	ws_delete_free(del);
	return r;
}

int ws_mkdir(const struct workspace *ws, const char *path, size_t len, bool parents, bool *ret_created)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *name = NULL;
	*ret_created = false;
	int r = open_last(ws, path, len, parents, &dirfd, &name);
	if (r == -EBUSY || r == -EISDIR) {
		/* The root, or a directory named through "." or "..": there already. */
		_cleanup_close_ int fd = -1;
		return ws_openat(ws, path, len, O_PATH | O_DIRECTORY, 0, &fd);
	}
	if (r < 0)
		return r;
	r = ws_guard_check(ws_pick(ws, path, len), dirfd, name, false, true);
	if (r < 0)
		return r;
	if (mkdirat(dirfd, name, 0777) == 0) {
		*ret_created = true;
		return 0;
	}
	r = -errno;
	if (r == -EEXIST) {
		struct stat st;
		/* A symlink to a directory counts as one, as mkdir -p has it. */
		_cleanup_close_ int fd = -1;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
			return 0;
		if (ws_openat(ws, path, len, O_PATH | O_DIRECTORY, 0, &fd) == 0)
			return 0;
	}
	return r;
}

bool ws_dir_empty(int dirfd, const char *rel)
{
	DIR *d = NULL;
	if (ws_opendir_nofollow(dirfd, rel, &d) < 0)
		return false;
	struct dirent *e;
	while ((e = readdir(d)) && (str_eq(e->d_name, ".") || str_eq(e->d_name, "..")))
		;
	closedir(d);
	return !e;
}

char *ws_fd_relative(const struct workspace *ws, int fd)
{
	char proc[64], path[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(proc, path, sizeof(path) - 1);
	if (n <= 0)
		return NULL;
	path[n] = '\0';
	size_t r = strlen(ws->root);
	if (str_eq(path, ws->root))
		return xstrdup(".");
	if (r == 1)
		return xstrdup(path + 1);
	if (strncmp(path, ws->root, r) == 0 && path[r] == '/')
		return xstrdup(path + r + 1);
	return NULL;
}

/* Appends the component name (len bytes) to the canonical relative path
 * in b: "." is nothing, ".." takes the last component off. */
static void rel_push(struct buf *b, const char *name, size_t len)
{
	if (len == 0 || (len == 1 && name[0] == '.'))
		return;
	if (len == 2 && name[0] == '.' && name[1] == '.') {
		const char *s = buf_head(b);
		size_t n = buf_size(b);
		while (n > 0 && s[n - 1] != '/')
			n--;
		b->len = b->off + (n ? n - 1 : 0);
		if (b->data)
			b->data[b->len] = '\0';
		return;
	}
	if (buf_size(b))
		buf_putc(b, '/');
	buf_append(b, name, len);
}

/* Opens rel's deepest directory that exists (O_PATH), the one holding its
 * first missing component, which starts at *ret_cut. */
static int open_deepest(const struct workspace *ws, const char *rel, size_t n, int *ret_fd, size_t *ret_cut)
{
	size_t cut = n;
	while (cut > 0 && rel[cut - 1] != '/')
		cut--;
	for (;;) {
		_cleanup_free_ char *dir = cut ? xstrndup(rel, cut) : xstrdup(".");
		int r = ws_openat(ws, dir, strlen(dir), O_PATH | O_DIRECTORY, 0, ret_fd);
		if (r == 0) {
			*ret_cut = cut;
			return 0;
		}
		if (r != -ENOENT || cut == 0)
			return r;
		/* That directory is missing too: the one above it. */
		cut--;
		while (cut > 0 && rel[cut - 1] == '/')
			cut--;
		while (cut > 0 && rel[cut - 1] != '/')
			cut--;
	}
}

int ws_resolved(const struct workspace *ws, const char *path, size_t len, bool follow, char **ret)
{
	if (!path || memchr(path, '\0', len))
		return -EINVAL;
	ws = ws_pick(ws, path, len);
	_cleanup_free_ char *rel = NULL;
	int r = ws_relative(ws, path, len, &rel);
	if (r < 0)
		return r;
	for (unsigned hops = 0;; hops++) {
		size_t n = strlen(rel);
		while (n > 1 && rel[n - 1] == '/')
			n--;
		rel[n] = '\0';
		_cleanup_close_ int fd = -1;
		if (follow && ws_openat(ws, rel, n, O_PATH, 0, &fd) == 0) {
			char *s = ws_fd_relative(ws, fd);
			if (!s)
				return -EXDEV;
			*ret = s;
			return 0;
		}
		size_t cut = 0;
		r = open_deepest(ws, rel, n, &fd, &cut);
		if (r < 0)
			return r;
		_cleanup_free_ char *base = ws_fd_relative(ws, fd);
		if (!base)
			return -EXDEV;
		size_t end = cut;
		while (end < n && rel[end] != '/')
			end++;
		_cleanup_free_ char *name = xstrndup(rel + cut, end - cut), *target = NULL;
		/* A symlink there leads nowhere yet: what it names would be
		 * made (the last one only when followed). */
		if ((end < n || follow) && hops < SYMLINK_HOPS && ws_read_link(fd, name, -1, &target) == 0) {
			char *next;
			if (target[0] == '/') {
				_cleanup_free_ char *abs = xasprintf("%s%s", target, rel + end);
				if (ws_relative(ws, abs, strlen(abs), &next) < 0)
					return -EXDEV;
			} else {
				next = xasprintf("%s/%s%s", base, target, rel + end);
			}
			free(rel);
			rel = next;
			continue;
		}
		_cleanup_(buf_free) struct buf b = {};
		if (!str_eq(base, "."))
			buf_puts(&b, base);
		for (size_t i = cut; i < n;) {
			size_t j = i;
			while (j < n && rel[j] != '/')
				j++;
			rel_push(&b, rel + i, j - i);
			i = j + 1;
		}
		*ret = buf_size(&b) ? buf_steal(&b) : xstrdup(".");
		return 0;
	}
}

static _Thread_local struct ws_guard *thread_guard;

struct ws_guard *ws_guard_set(struct ws_guard *g)
{
	struct ws_guard *old = thread_guard;
	thread_guard = g;
	return old;
}

bool ws_guard_reads_denied(void)
{
	return thread_guard && thread_guard->deny && *thread_guard->deny;
}

const char *ws_guard_denied(const char *abs, size_t len)
{
	struct ws_guard *g = thread_guard;
	for (const char *const *d = g && g->deny ? g->deny : NULL; d && *d; d++) {
		size_t n = strlen(*d);
		if (len >= n && strncmp(abs, *d, n) == 0 && (len == n || abs[n] == '/'))
			return *d;
	}
	return NULL;
}

bool ws_guard_fd_denied(int fd)
{
	if (!ws_guard_reads_denied())
		return false;
	char proc[64], path[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(proc, path, sizeof(path) - 1);
	return n <= 0 || ws_guard_denied(path, (size_t)n);
}

int ws_guard_read_check(const struct workspace *ws, int fd, const char *name)
{
	if (!ws_guard_reads_denied())
		return 0;
	char proc[64], path[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(proc, path, sizeof(path) - 1);
	if (n <= 0)
		return -EACCES;	/* cannot tell: not read */
	path[n] = '\0';
	(void)ws;
	_cleanup_free_ char *full = name ? xasprintf("%s%s%s", path, str_eq(path, "/") ? "" : "/", name) : NULL;
	const char *p = full ? full : path;
	const char *d = ws_guard_denied(p, strlen(p));
	if (!d)
		return 0;
	if (!thread_guard->denied)
		thread_guard->denied = d;
	return -EACCES;
}

bool ws_guard_active(void)
{
	return thread_guard && thread_guard->list && *thread_guard->list;
}

const char *ws_guard_match(const char *rel, bool whole, bool dir)
{
	struct ws_guard *g = thread_guard;
	if (!g || !g->list || !*g->list)
		return NULL;
	const char *entry = g->match(g, rel, whole, dir);
	if (entry && !g->hit)
		g->hit = entry;
	return entry;
}

int ws_guard_check(const struct workspace *ws, int dirfd, const char *name, bool whole, bool dir)
{
	struct ws_guard *g = thread_guard;
	if (!g || !g->list || !*g->list)
		return 0;
	_cleanup_free_ char *base = ws_fd_relative(ws, dirfd);
	if (!base)
		return -EPERM;	/* not beneath the root: never written */
	_cleanup_(buf_free) struct buf b = {};
	if (!str_eq(base, "."))
		buf_puts(&b, base);
	rel_push(&b, name, strlen(name));
	const char *entry = g->match(g, buf_size(&b) ? buf_head(&b) : ".", whole, dir);
	if (!entry)
		return 0;
	if (!g->hit)
		g->hit = entry;
	return -EPERM;
}
