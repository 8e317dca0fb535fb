/* SPDX-License-Identifier: MIT */
/*
 * The workspace file API: opening a workspace root, opening and reading
 * files beneath it, the path shown to the model, and the one place where
 * errnos become messages for the model. Paths are resolved by
 * workspace_path.c; files are replaced by workspace_write.c.
 */
#include "lib/files/workspace.h"
#include "lib/files/workspace_internal.h"
#include "lib/files/workspace_root.h"

#include "lib/tool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "proto/base/buf.h"
#include "proto/utf8.h"
#include "proto/base/util.h"
/* Paths quoted in messages are cut to this many bytes. */
#define MSG_PATH_MAX 300

struct workspace *ws_new_at(int dirfd, const char *root)
{
	struct workspace *ws = xcalloc(1, sizeof(*ws));
	ws->refs = 1;
	ws->dirfd = dirfd;
	ws->root = xstrdup(root);
	return ws;
}

int ws_open(const char *path, struct workspace **ret)
{
	if (!path || !*path)
		return -EINVAL;
	_cleanup_free_ char *root = realpath(path, NULL);
	if (!root)
		return -errno;
	_cleanup_close_ int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;

	/* Make sure the kernel confines lookups beneath this fd. Without
	 * openat2, ws_chase() walks every path itself. */
	if (ws_have_openat2()) {
		int probe = ws_openat2_retry(fd, ".", O_PATH | O_DIRECTORY, 0, RESOLVE_WS);
		if (probe < 0)
			return probe;
		close(probe);
	}

	struct workspace *ws = xcalloc(1, sizeof(*ws));
	ws->refs = 1;
	ws->dirfd = TAKE_FD(fd);
	if (path[0] == '/' && !ws_has_dot_component(path)) {
		/* The spelling the user gave (a symlink on the way): absolute
		 * paths written with it are accepted too. */
		char *alias = xstrdup(path);
		size_t n = strlen(alias);
		while (n > 1 && alias[n - 1] == '/')
			alias[--n] = '\0';
		if (!str_eq(alias, root))
			ws->alias = alias;
		else
			free(alias);
	}
	ws->root = TAKE_PTR(root);
	*ret = ws;
	return 0;
}

struct workspace *ws_ref(struct workspace *ws)
{
	if (ws)
		ws->refs++;
	return ws;
}

struct workspace *ws_group(struct workspace *primary, struct workspace *const *others, size_t n)
{
	struct workspace *ws = xcalloc(1, sizeof(*ws));
	ws->refs = 1;
	ws->dirfd = fcntl(primary->dirfd, F_DUPFD_CLOEXEC, 3);
	if (ws->dirfd < 0) {
		free(ws);
		return NULL;
	}
	ws->root = xstrdup(primary->root);
	ws->alias = primary->alias ? xstrdup(primary->alias) : NULL;
	n = MIN(n, (size_t)WS_GROUP_MAX - 1);
	if (n) {
		ws->others = xcalloc(n, sizeof(*ws->others));
		for (size_t i = 0; i < n; i++)
			ws->others[ws->n_others++] = ws_ref(others[i]);
	}
	return ws;
}

size_t ws_group_roots(const struct workspace *ws, const char **roots, size_t max)
{
	size_t k = 0;
	if (ws && k + 1 < max)
		roots[k++] = ws->root;
	for (size_t i = 0; ws && i < ws->n_others && k + 1 < max; i++)
		roots[k++] = ws->others[i]->root;
	roots[k] = NULL;
	return k;
}

/* How many bytes of path the root (or its alias) of w spells, when path
 * lies beneath it; else 0. */
static size_t root_match(const struct workspace *w, const char *path, size_t len)
{
	_cleanup_free_ char *rel = NULL;
	if (ws_relative(w, path, len, &rel) < 0)
		return 0;
	size_t a = strlen(w->root), b = w->alias ? strlen(w->alias) : 0;
	return MAX(a, b);
}

const struct workspace *ws_pick(const struct workspace *ws, const char *path, size_t len)
{
	if (!ws || !ws->n_others || !path || !len || path[0] != '/')
		return ws;
	const struct workspace *best = ws;
	size_t best_n = root_match(ws, path, len);
	for (size_t i = 0; i < ws->n_others; i++) {
		size_t n = root_match(ws->others[i], path, len);
		if (n > best_n) {
			best = ws->others[i];
			best_n = n;
		}
	}
	return best;
}

struct workspace *ws_unref(struct workspace *ws)
{
	if (!ws || --ws->refs > 0)
		return NULL;
	for (size_t i = 0; i < ws->n_others; i++)
		ws_unref(ws->others[i]);
	free(ws->others);
	if (ws->dirfd >= 0)
		close(ws->dirfd);
	free(ws->root);
	free(ws->alias);
	free(ws);
	return NULL;
}

int ws_openat(const struct workspace *ws, const char *path, size_t len, int flags, mode_t mode, int *ret_fd)
{
	_cleanup_free_ char *rel = NULL;
	ws = ws_pick(ws, path, len);
	int r = ws_relative(ws, path, len, &rel);
	if (r < 0)
		return r;
	int fd = ws_open_rel(ws, rel, flags, mode);
	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

int ws_check(const struct workspace *ws, const char *path, size_t len)
{
	_cleanup_free_ char *rel = NULL;
	ws = ws_pick(ws, path, len);
	int r = ws_relative(ws, path, len, &rel);
	if (r < 0)
		return r;
	return ws_check_rel(ws, rel);
}

int ws_open_parent(const struct workspace *ws, const char *path, size_t len, bool create_dirs,
		   int *ret_dirfd, char **ret_name)
{
	_cleanup_free_ char *rel = NULL, *dir = NULL, *name = NULL;
	ws = ws_pick(ws, path, len);
	int r = ws_relative(ws, path, len, &rel);
	if (r < 0)
		return r;
	r = ws_split_beneath(ws, rel, &dir, &name);
	if (r < 0)
		return r;
	int fd;
	r = ws_open_dir(ws, dir, create_dirs, &fd);
	if (r < 0)
		return r;
	*ret_dirfd = fd;
	*ret_name = TAKE_PTR(name);
	return 0;
}

char *ws_display_path(const struct workspace *ws, const char *path, size_t len)
{
	_cleanup_free_ char *rel = NULL;
	const struct workspace *in = ws_pick(ws, path, len);
	if (ws_relative(in, path, len, &rel) < 0)
		return xstrndup(path ? path : "", path ? strnlen(path, len) : 0);

	/* Drop empty and "." components; ".." stays, as only the kernel knows where it leads. */
	struct buf b = {};
	if (in != ws)
		/* In another root of the session: relative to the primary it
		 * would name another file. */
		buf_append(&b, in->root, strlen(in->root));
	for (const char *p = rel; *p;) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/');
		if (e > p && !(e - p == 1 && *p == '.')) {
			if (buf_size(&b))
				buf_putc(&b, '/');
			buf_append(&b, p, (size_t)(e - p));
		}
		p = e;
	}
	if (!buf_size(&b))
		buf_putc(&b, '.');
	return buf_steal(&b);
}

/* Checks that an open file (or O_PATH look) is a regular file. */
static int check_regular(int fd, struct stat *st)
{
	if (fstat(fd, st) < 0)
		return -errno;
	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode))
		return -ENXIO;
	return 0;
}

int ws_read(const struct workspace *ws, const char *path, size_t len, uint64_t offset, size_t max,
	    struct buf *out, struct stat *ret_st)
{
	return ws_read_small(ws, path, len, offset, max, 0, out, ret_st);
}

int ws_read_small(const struct workspace *ws, const char *path, size_t len, uint64_t offset, size_t max,
		  uint64_t small, struct buf *out, struct stat *ret_st)
{
	_cleanup_free_ char *rel = NULL;
	struct stat st;
	ws = ws_pick(ws, path, len);
	int r = ws_relative(ws, path, len, &rel);
	if (r < 0)
		return r;

	/*
	 * Look before opening: opening a device can have side effects (a
	 * tape rewinds, a watchdog arms). The cheap look is a plain fstatat:
	 * when it sees a regular file, the file is opened at once, beneath the
	 * root as always. Anything else (a symlink, a device, a path that leads
	 * outside, an error) takes the careful way: an O_PATH open beneath the
	 * root and a look at what that found. So what fstatat may have seen
	 * outside the root never shapes an answer; it only saves, for the
	 * common plain file, a second path walk.
	 */
	if (fstatat(ws->dirfd, rel, &st, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) < 0 ||
	    !S_ISREG(st.st_mode)) {
		int pfd = ws_open_rel(ws, rel, O_PATH, 0);
		if (pfd < 0)
			return pfd;
		r = check_regular(pfd, &st);
		close(pfd);
		if (r < 0)
			return r;
	}

	/* O_NONBLOCK: should a FIFO take the file's place meanwhile, opening
	 * it must not wait for a writer. */
	_cleanup_close_ int fd = ws_open_rel(ws, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0)
		return fd;
	if ((r = check_regular(fd, &st)) < 0)
		return r;
	/* Files that report no size (/proc) may be anything: not small. */
	if (small && (st.st_size <= 0 || (uint64_t)st.st_size > small))
		return WS_NOT_SMALL;
	if (offset > (uint64_t)INT64_MAX)
		offset = (uint64_t)INT64_MAX;

	/* Read what the file holds as fstat saw it, in one pread for small
	 * files, rather than reserving the whole limit (1 MiB by default) and
	 * asking again for the end. Files that report no size (/proc) are
	 * read in modest chunks until the end. */
	uint64_t size = (uint64_t)st.st_size;
	size_t got = 0;
	while (got < max) {
		size_t want = MIN(max - got, (size_t)1 << 20);
		uint64_t at = offset + got;
		if (at >= (uint64_t)INT64_MAX)
			break;
		if (size > 0) {
			if (at >= size)
				break;
			want = (size_t)MIN((uint64_t)want, size - at);
		} else {
			want = MIN(want, (size_t)64 * 1024);
		}
		buf_reserve(out, want);
		ssize_t k = pread(fd, out->data + out->len, want, (off_t)at);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			break;
		out->len += (size_t)k;
		got += (size_t)k;
	}
	if (ret_st)
		*ret_st = st;
	return 0;
}

/* Returns path for a message, cut at a UTF-8 boundary when long. */
static char *msg_path(const char *path)
{
	if (!path)
		return xstrdup("");
	size_t n = strlen(path);
	if (n <= MSG_PATH_MAX)
		return xstrdup(path);
	n = utf8_cut(path, n, MSG_PATH_MAX);
	return xasprintf("%.*s...", (int)n, path);
}

enum tc_kind ws_error(int r, const char *path, char **ret_msg)
{
	_cleanup_free_ char *p = msg_path(path);
	enum tc_kind kind = TC_EXECUTION_ERROR;
	char *msg;

	switch (r < 0 ? -r : r) {
	case 0:
		kind = TC_OK;
		msg = NULL;
		break;
	case EXDEV:
		kind = TC_PERMISSION_DENIED;
		msg = xasprintf("Path '%s' escapes the workspace", p);
		break;
	case EINVAL:
		kind = TC_PERMISSION_DENIED;
		msg = xstrdup("Path contains a NUL byte");
		break;
	case ENOENT:
		msg = xasprintf("File '%s' not found", p);
		break;
	case ELOOP:
		msg = xasprintf("Path '%s' has too many levels of symbolic links (a symlink loop?)", p);
		break;
	case ENOTDIR:
		msg = xasprintf("Path '%s' goes through something that is not a directory", p);
		break;
	case EISDIR:
		msg = xasprintf("'%s' is a directory", p);
		break;
	case ENXIO:
		msg = xasprintf("'%s' is not a regular file (a FIFO, socket or device); only regular files can be read or written", p);
		break;
	case EACCES:
	case EPERM:
		/* The kernel refused the peer (file tools act as it). */
		kind = TC_PERMISSION_DENIED;
		msg = xasprintf("Permission denied by the file system on '%s'", p);
		break;
	case EEXIST:
		msg = xasprintf("'%s' already exists", p);
		break;
	case ENOSPC:
	case EDQUOT:
		msg = xasprintf("No space left on the device while writing '%s'; free some space and try again", p);
		break;
	case EFBIG:
		msg = xasprintf("'%s' is too large", p);
		break;
	case ENAMETOOLONG:
		msg = xasprintf("Path '%s' is too long", p);
		break;
	case EROFS:
		msg = xasprintf("'%s' is on a read-only file system", p);
		break;
	case EBUSY:
	case ETXTBSY:
		msg = xasprintf("'%s' is busy", p);
		break;
	case EIO:
		msg = xasprintf("I/O error on '%s'", p);
		break;
	case EAGAIN:
	case EINTR:
	case ENOMEM:
	case ENOBUFS:
	case EMFILE:
	case ENFILE:
		kind = TC_TRANSIENT;
		msg = xasprintf("Temporarily unable to access '%s' (%s); try again", p, strerror(r < 0 ? -r : r));
		break;
	default:
		msg = xasprintf("Cannot access '%s': %s", p, strerror(r < 0 ? -r : r));
		break;
	}
	if (ret_msg)
		*ret_msg = msg;
	else
		free(msg);
	return kind;
}

void ws_fail_call(struct tool_call *call, int r, const char *path, const struct ws_hint *hints)
{
	for (const struct ws_hint *h = hints; h && h->fmt; h++) {
		if (h->err == r) {
			tool_call_fail(call, TC_EXECUTION_ERROR, h->fmt, path);
			return;
		}
	}
	_cleanup_free_ char *msg = NULL;
	enum tc_kind kind = ws_error(r, path, &msg);
	tool_call_fail(call, kind, "%s", msg);
	/* The path check's own refusals (outside the workspace, a NUL
	 * byte) come before the tool touched anything: no attempt ran, as
	 * when the schema refuses a value. The file system's EACCES does
	 * not: the tool acted as the peer and was refused. */
	call->refused = r == -EXDEV || r == -EINVAL;
}
