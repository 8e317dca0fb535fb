/* SPDX-License-Identifier: MIT */
/*
 * Status, rename, delete and mkdir beneath a workspace root (see
 * workspace_ops.h). Each resolves the directory holding the last component
 * with ws_open_parent() and acts on the last component relative to that
 * fd, with the *at() calls that do not follow it. The recursive delete
 * walks down with ws_open_nofollow(), so a symlink met on the way is
 * removed as itself and never entered.
 */
#include "lib/workspace_ops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/workspace.h"
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

/* Deletes every entry of the open directory fd, depth levels below the top. */
static int delete_entries(int fd, unsigned depth, uint64_t *deleted)
{
	if (depth > DELETE_DEPTH_MAX)
		return -ELOOP;
	int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (dupfd < 0)
		return -errno;
	DIR *d = fdopendir(dupfd);
	if (!d) {
		int r = -errno;
		close(dupfd);
		return r;
	}
	int r = 0;
	struct dirent *de;
	for (errno = 0; r == 0 && (de = readdir(d)); errno = 0) {
		if (str_eq(de->d_name, ".") || str_eq(de->d_name, ".."))
			continue;
		bool dir = de->d_type == DT_DIR;
		if (de->d_type == DT_UNKNOWN) {
			struct stat st;
			if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno == ENOENT)
					continue;
				r = -errno;
				break;
			}
			dir = S_ISDIR(st.st_mode);
		}
		if (dir) {
			_cleanup_close_ int sub = -1;
			r = ws_open_nofollow(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, &sub);
			if (r == -ENOENT) {
				r = 0;
				continue;
			}
			if (r < 0)
				break;
			r = delete_entries(sub, depth + 1, deleted);
			if (r < 0)
				break;
		}
		if (unlinkat(fd, de->d_name, dir ? AT_REMOVEDIR : 0) < 0) {
			if (errno == ENOENT)
				continue;
			r = -errno;
			break;
		}
		(*deleted)++;
	}
	if (r == 0 && errno)
		r = -errno;
	closedir(d);
	return r;
}

int ws_delete(const struct workspace *ws, const char *path, size_t len, bool recursive, uint64_t *ret_deleted)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *name = NULL;
	*ret_deleted = 0;
	int r = open_last(ws, path, len, false, &dirfd, &name);
	if (r < 0)
		return r;
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0)
			return -errno;
		*ret_deleted = 1;
		return 0;
	}
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0) {
		*ret_deleted = 1;
		return 0;
	}
	r = -errno;
	if ((r != -ENOTEMPTY && r != -EEXIST) || !recursive)
		return r == -EEXIST ? -ENOTEMPTY : r;

	_cleanup_close_ int fd = -1;
	r = ws_open_nofollow(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, &fd);
	if (r < 0)
		return r;
	/* readdir may miss entries of a directory changed while it reads:
	 * another pass removes what is left. */
	for (int pass = 0;; pass++) {
		r = delete_entries(fd, 0, ret_deleted);
		if (r < 0)
			return r;
		if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
			break;
		if ((errno != ENOTEMPTY && errno != EEXIST) || pass == 3)
			return -errno;
	}
	(*ret_deleted)++;
	return 0;
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
