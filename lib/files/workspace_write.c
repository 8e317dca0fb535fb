/* SPDX-License-Identifier: MIT */
/*
 * The atomic replacement of a file beneath the workspace, shared by
 * write_file, patch_file, edit_file and memory: the data goes to a new
 * file in the target's directory (opened beneath the root by the path
 * engine in workspace_path.c), which is then renamed over the target.
 * The new file is unnamed (O_TMPFILE) while it is written and synced;
 * then a new target is linked at its name, and a replacement is given a
 * temporary name only to be renamed at once: a crash leaves no file
 * behind but in those few microseconds. Where the file system has no
 * O_TMPFILE (or the unnamed file cannot be linked), it is written under
 * its temporary name from the start. What is written never gains privilege: no setuid or setgid
 * bit, no file capability.
 */
#include "lib/files/workspace.h"
#include "lib/files/workspace_internal.h"

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
#define TEMP_TRIES 16


/* Bytes per write(): a large file goes in steps, each a point where the
 * scheduler may hand the CPU to the loop. */
#define WRITE_STEP ((size_t)1 << 20)

/* Writes all n bytes. */
static int write_all(int fd, const void *data, size_t n)
{
	const char *p = data;
	while (n > 0) {
		ssize_t k = write(fd, p, MIN(n, WRITE_STEP));
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Fills s with n random characters usable in a file name. */
static void random_name(char *s, size_t n)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char rnd[16];

	if (n > sizeof(rnd))
		n = sizeof(rnd);
	if (getrandom(rnd, n, GRND_NONBLOCK) != (ssize_t)n) {
		/* No entropy yet: O_EXCL still makes the name safe, only less unpredictable. */
		uint64_t x = mono_ms() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)s;
		for (size_t i = 0; i < n; i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
			rnd[i] = (unsigned char)(x >> 33);
	}
	for (size_t i = 0; i < n; i++)
		s[i] = alphabet[rnd[i] % (sizeof(alphabet) - 1)];
	s[n] = '\0';
}

/*
 * Finds the file a write to rel lands on: its directory (opened beneath the
 * root) and name, following symlinks by the rule reads follow (a relative
 * target from the link's directory, an absolute one only when it names a
 * place under the root), so reads and writes agree on every link. The link
 * is kept; the file it leads to is what gets replaced.
 */
static int resolve_target(const struct workspace *ws, const char *rel, bool create_dirs,
			  int *ret_dirfd, char **ret_name, struct stat *ret_st, bool *ret_exists)
{
	_cleanup_free_ char *cur = xstrdup(rel);

	for (unsigned hop = 0;; hop++) {
		_cleanup_free_ char *dir = NULL, *name = NULL, *target = NULL;
		int r = ws_split_beneath(ws, cur, &dir, &name);
		if (r < 0)
			return r;
		_cleanup_close_ int dfd = -1;
		r = ws_open_dir(ws, dir, create_dirs, &dfd);
		if (r < 0)
			return r;

		struct stat st;
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				return -errno;
			*ret_exists = false;
		} else if (S_ISLNK(st.st_mode)) {
			if (hop >= SYMLINK_HOPS)
				return -ELOOP;
			r = ws_read_link(dfd, name, -1, &target);
			if (r < 0)
				return r;
			char *next;
			if (target[0] == '/') {
				/* Inside only when it names the root or a place under it. */
				r = ws_relative(ws, target, strlen(target), &next);
				if (r < 0)
					return r;
			} else
				next = xasprintf("%s/%s", dir, target);
			free(cur);
			cur = next;
			if (strlen(cur) >= PATH_MAX)
				return -ENAMETOOLONG;
			continue;
		} else {
			*ret_exists = true;
			*ret_st = st;
		}
		*ret_dirfd = TAKE_FD(dfd);
		*ret_name = TAKE_PTR(name);
		return 0;
	}
}

/*
 * Gives the new file tfd the old file's owner, as far as the writer may,
 * and its mode less the setuid and setgid bits: a write never makes a
 * privileged program. The owner is kept only by a writer that may chown
 * (root acting as itself); a peer keeps the group when it is in it, and
 * otherwise the file is its own. The temporary file is new, so it carries
 * no file capability (security.capability) nor other extended attribute.
 */
static int keep_owner_and_mode(int tfd, const struct stat *old)
{
	struct stat now;
	if (fstat(tfd, &now) < 0)
		return -errno;
	if (now.st_uid != old->st_uid || now.st_gid != old->st_gid) {
		/* Best effort, as the kernel allows: both, else the group alone. */
		if (fchown(tfd, old->st_uid, old->st_gid) < 0 && now.st_gid != old->st_gid)
			(void) !fchown(tfd, (uid_t)-1, old->st_gid);
	}
	/* After the chown, which may clear these bits itself. */
	if (fchmod(tfd, old->st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID)) < 0)
		return -errno;
	return 0;
}

/*
 * Opens a new file in dfd with no name (O_TMPFILE), as the calling thread
 * (its file system identity owns it, as any file it creates). -EOPNOTSUPP
 * when the file system (or the kernel: EISDIR, as O_TMPFILE holds
 * O_DIRECTORY) has none.
 */
static int open_unnamed(int dfd, mode_t mode)
{
	for (unsigned i = 0; i < 8; i++) {
		/* "." is dfd itself: nothing is looked up. */
		int fd = openat(dfd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, mode);
		if (fd >= 0)
			return fd;
		if (errno == EINTR)
			continue;
		if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)
			return -EOPNOTSUPP;
		return -errno;
	}
	return -EINTR;
}

/*
 * Gives the unnamed file tfd the name tmp in dfd; -EEXIST when the name is
 * taken (linkat replaces nothing, follows no symlink there). Through
 * /proc/self/fd, which needs no privilege; AT_EMPTY_PATH where /proc is
 * missing (it needs CAP_DAC_READ_SEARCH, or a recent kernel).
 */
static int name_unnamed(int tfd, int dfd, const char *tmp)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", tfd);
	if (linkat(AT_FDCWD, proc, dfd, tmp, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno != ENOENT && errno != EACCES && errno != EPERM)
		return -errno;
	if (linkat(tfd, "", dfd, tmp, AT_EMPTY_PATH) == 0)
		return 0;
	return -errno;
}

/* A hidden name next to the target, so the rename stays on one file
 * system; the original name is cut to leave room under NAME_MAX. */
static void temp_name(const char *name, char tmp[static NAME_MAX + 1])
{
	char rnd[8];
	random_name(rnd, 6);
	snprintf(tmp, NAME_MAX + 1, ".%.*s.tc-%s", (int)MIN(strlen(name), (size_t)200), name, rnd);
}

/*
 * Writes the new file for name in dfd and puts it in place: unnamed
 * (O_TMPFILE, when unnamed and the file system has it) until it is whole
 * and synced, then linked at name when it is new (old NULL), else linked
 * at a temporary name and renamed over name at once; otherwise under a
 * temporary name from the start. With old, the file gets its owner and
 * mode (less setuid and setgid). -ENOLINK when an unnamed file could not
 * be given a name here (nothing was changed).
 */
static int write_new(int dfd, const char *name, mode_t mode, const struct stat *old, const void *data, size_t n,
		     bool unnamed)
{
	char tmp[NAME_MAX + 1] = "";
	int r;
	_cleanup_close_ int tfd = unnamed ? open_unnamed(dfd, mode) : -EOPNOTSUPP;
	bool named = tfd == -EOPNOTSUPP;
	if (named) {
		/* No O_TMPFILE here: named from the start. */
		for (unsigned i = 0; i < TEMP_TRIES; i++) {
			temp_name(name, tmp);
			tfd = ws_open_one(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
			if (tfd != -EEXIST)
				break;
		}
	}
	if (tfd < 0)
		return tfd;

	if (old) {
		r = keep_owner_and_mode(tfd, old);
		if (r < 0)
			goto fail;
	}
	r = write_all(tfd, data, n);
	if (r < 0)
		goto fail;
	if (fsync(tfd) < 0) {
		r = -errno;
		goto fail;
	}
	if (!named && !old) {
		/* A new file takes its own name at once: no temporary name at
		 * all. Something put there meanwhile is replaced, as below. */
		r = name_unnamed(tfd, dfd, name);
		if (r == 0)
			return 0;
		if (r != -EEXIST)
			goto unlinkable;
	}
	if (!named) {
		/* Named at the last moment, renamed right after. */
		for (unsigned i = 0; i < TEMP_TRIES; i++) {
			temp_name(name, tmp);
			r = name_unnamed(tfd, dfd, tmp);
			if (r != -EEXIST)
				break;
		}
		if (r < 0)
			goto unlinkable;
		named = true;
	}
	if (renameat(dfd, tmp, dfd, name) < 0) {
		r = -errno;
		goto fail;
	}
	return 0;

unlinkable:
	/* The unnamed file goes with its fd. */
	return r == -ENOENT || r == -EPERM || r == -EACCES ? -ENOLINK : r;
fail:
	if (named)
		(void) unlinkat(dfd, tmp, 0);
	return r;
}

int ws_write_atomic(const struct workspace *ws, const char *path, size_t len, const void *data, size_t n,
		    bool create_dirs, bool *ret_created)
{
	_cleanup_free_ char *rel = NULL, *name = NULL;
	_cleanup_close_ int dfd = -1;
	struct stat st = {};
	bool exists = false;

	ws = ws_pick(ws, path, len);
	int r = ws_relative(ws, path, len, &rel);
	if (r < 0)
		return r;
	r = resolve_target(ws, rel, create_dirs, &dfd, &name, &st, &exists);
	if (r < 0)
		return r;
	if (exists && S_ISDIR(st.st_mode))
		return -EISDIR;
	if (exists && !S_ISREG(st.st_mode))
		return -ENXIO;
	r = ws_guard_check(ws, dfd, name, false, false);
	if (r < 0)
		return r;

	/* An existing file's content is never more exposed than before:
	 * 0600 until its own mode is set. A new file gets 0644 less the umask. */
	mode_t mode = exists ? 0600 : 0644;
	bool unnamed = true;
	for (;;) {
		r = write_new(dfd, name, mode, exists ? &st : NULL, data, n, unnamed);
		/* No way to give an unnamed file a name here (no /proc, and
		 * AT_EMPTY_PATH needs a capability): written again, named
		 * from the start. */
		if (unnamed && r == -ENOLINK) {
			unnamed = false;
			continue;
		}
		if (r < 0)
			return r;
		break;
	}
	/* Make the rename durable. An O_PATH fd (write-only directory) and
	 * file systems without directory fsync report EBADF/EINVAL: nothing
	 * more can be done there. */
	if (fsync(dfd) < 0 && errno != EBADF && errno != EINVAL && errno != EROFS)
		return -errno;
	if (ret_created)
		*ret_created = !exists;
	return 0;
}
