/* SPDX-License-Identifier: MIT */
/*
 * The workspace path engine. Every path a client names is made relative to the
 * root (an absolute path must spell the canonical root, compared by whole
 * components) and opened beneath the root's O_PATH fd. Code here never
 * follows a path from anywhere but that fd: files are created and replaced
 * through directory fds resolved beneath the root, one final component at a
 * time.
 *
 * The rule: symlinks are followed while they stay beneath the root. A
 * relative target is resolved from the link's directory; an absolute target
 * is inside when it names the canonical root or a place under it (by whole
 * components: "/ws-evil/x" is not under "/ws") and is then resolved from the
 * root. ".." never climbs above the root. Any other absolute target, a
 * relative one climbing out, and /proc magic links lead out: -EXDEV. At most
 * 40 symlinks are followed: -ELOOP.
 *
 * Two walks apply it. The fast one hands the whole path to openat2() with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: the kernel refuses "..", symlinks
 * leading out and magic links with no window between check and use, but
 * also every absolute symlink, even one pointing inside (ws/link ->
 * /home/u/ws/src, as users and scripts make them). What it refuses with
 * EXDEV is walked again by ws_chase(), in the manner of systemd's chaseat():
 * one component at a time, each opened O_PATH | O_NOFOLLOW with openat2
 * RESOLVE_BENEATH beneath the fd of the directory reached so far, symlinks
 * read and their targets spliced into what is left of the path. Every open
 * is relative to an fd beneath the root, so a symlink swapped meanwhile can
 * change which place under the root is reached, never lead out. ws_chase()
 * also makes the directories create_dirs asks for, walking down once.
 *
 * Without openat2 (Linux before 5.6, a seccomp filter refusing it, valgrind
 * up to 3.19 at least; or TOOLCALLD_NO_OPENAT2=1 in the environment), every
 * path is walked by ws_chase(), whose primitives then fall back to plain
 * openat(): each component is opened O_PATH | O_NOFOLLOW beneath the
 * directory fd reached so far, so the kernel never follows a symlink or
 * climbs a ".." for us, and the last one is opened O_NOFOLLOW once ws_chase()
 * knows it is no symlink. Magic links cannot be told apart by the kernel
 * then: a symlink on procfs whose text is absolute or no path at all
 * ("pipe:[42]") is taken for one and refused. The walk is the same; only
 * the two primitives (open one component, open the last) differ.
 *
 * The API (workspace.c) and the atomic write (workspace_write.c) open
 * everything through the functions here; this file knows nothing of them
 * (workspace_internal.h, with the workspace.h it includes, is all it
 * includes of the module).
 */
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

/* openat2 fails with EAGAIN when a rename races a RESOLVE_BENEATH walk. */
#define RETRY_TRIES 16

/*
 * Whether openat2 is used: 0 not known yet, 1 yes, -1 no. Process-wide, as
 * the kernel and the environment are; settled on first use.
 */
static atomic_int openat2_state;

/* Tells whether openat2 is to be used, finding out on the first call. */
bool ws_have_openat2(void)
{
	int s = atomic_load_explicit(&openat2_state, memory_order_relaxed);
	if (s != 0)
		return s > 0;

	const char *e = getenv("TOOLCALLD_NO_OPENAT2");
	if (e && *e && !str_eq(e, "0")) {
		s = -1;
	} else {
		/* ENOSYS: an old kernel (or valgrind). EPERM: a seccomp filter
		 * that denies what it does not know, as older container
		 * runtimes do; opening "/" as O_PATH fails so for nothing else. */
		struct open_how how = { .flags = O_PATH | O_CLOEXEC };
		long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
		if (fd >= 0)
			close((int)fd);
		s = fd < 0 && (errno == ENOSYS || errno == EPERM) ? -1 : 1;
	}
	atomic_store_explicit(&openat2_state, s, memory_order_relaxed);
	return s > 0;
}

void ws_force_fallback(bool on)
{
	atomic_store_explicit(&openat2_state, on ? -1 : 0, memory_order_relaxed);
}

/* Calls openat with O_CLOEXEC, retrying EINTR a bounded number of times. */
static int openat_retry(int dirfd, const char *path, int flags, mode_t mode)
{
	for (unsigned i = 0;; i++) {
		int fd = openat(dirfd, path, flags | O_CLOEXEC, mode);
		if (fd >= 0)
			return fd;
		if (errno == EINTR && i + 1 < RETRY_TRIES)
			continue;
		return -errno;
	}
}

/* Calls openat2, retrying the transient EAGAIN and EINTR a bounded number of times. */
int ws_openat2_retry(int dirfd, const char *path, int flags, mode_t mode, uint64_t resolve)
{
	struct open_how how = {
		.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC),
		/* openat2 insists on mode 0 unless a file is being created. */
		.mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode : 0,
		.resolve = resolve,
	};

	for (unsigned i = 0;; i++) {
		long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if ((errno == EAGAIN || errno == EINTR) && i + 1 < RETRY_TRIES)
			continue;
		return -errno;
	}
}

/* Tells why opening path beneath dirfd failed with ELOOP: -EXDEV for a magic link, else -ELOOP. */
static int eloop_cause(int dirfd, const char *path, int flags)
{
	/* ELOOP means either a symlink loop or a /proc magic link refused by
	 * RESOLVE_NO_MAGICLINKS. A scoped lookup without that flag refuses magic
	 * links with EXDEV instead, so asking again (O_PATH: nothing is read)
	 * tells an escape from a loop without following anything. */
	int probe = ws_openat2_retry(dirfd, path, O_PATH | (flags & O_NOFOLLOW), 0, RESOLVE_BENEATH);
	if (probe >= 0)
		close(probe);
	return probe == -EXDEV ? -EXDEV : -ELOOP;
}

/* Opens path beneath dirfd; a magic link met on the way fails with -EXDEV. */
static int openat_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	int fd = ws_openat2_retry(dirfd, path, flags, mode, RESOLVE_WS);
	if (fd != -ELOOP)
		return fd;
	return eloop_cause(dirfd, path, flags);
}

/* Tells whether following the symlink name in dirfd meets a /proc magic link. */
static bool meets_magic_link(int dirfd, const char *name)
{
	/* Followed alone beneath dirfd, a magic link fails with ELOOP as it
	 * is followed (RESOLVE_NO_MAGICLINKS is checked before the scope is),
	 * while an ordinary link is read, an absolute one then failing with
	 * EXDEV and a relative one walked on. Only ELOOP needs a second look,
	 * to tell a loop further on from a magic link. A magic link's target
	 * string (readlink) must not be taken for a path: it names an object
	 * ("/" for /proc/self/root, "pipe:[42]" for an fd). */
	int fd = ws_openat2_retry(dirfd, name, O_PATH, 0, RESOLVE_WS);
	if (fd >= 0) {
		close(fd);
		return false;
	}
	return fd == -ELOOP && eloop_cause(dirfd, name, 0) == -EXDEV;
}

/* Reads the symlink name in dirfd ("" for dirfd itself), newly allocated. */
static int readlink_alloc(int dirfd, const char *name, char **ret)
{
	char buf[PATH_MAX];
	ssize_t k = readlinkat(dirfd, name, buf, sizeof(buf));
	if (k < 0)
		return -errno;
	if ((size_t)k >= sizeof(buf))
		return -ENAMETOOLONG;
	*ret = xstrndup(buf, (size_t)k);
	return 0;
}

/*
 * Reads the symlink name in dirfd, or linkfd (the link itself, O_PATH) when
 * not -1, newly allocated; a /proc magic link fails with -EXDEV.
 */
int ws_read_link(int dirfd, const char *name, int linkfd, char **ret)
{
	if (ws_have_openat2() && meets_magic_link(dirfd, name))
		return -EXDEV;
	_cleanup_free_ char *target = NULL;
	int fd = linkfd >= 0 ? linkfd : dirfd;
	int r = readlink_alloc(fd, linkfd >= 0 ? "" : name, &target);
	if (r < 0)
		return r;
	if (!ws_have_openat2() && (target[0] == '/' || strchr(target, ':'))) {
		/* Without openat2 the kernel cannot say. Magic links live on
		 * procfs and read as an absolute path or as no path at all
		 * ("pipe:[42]", "net:[4026531840]"), while its ordinary links
		 * read as relative paths ("self/mounts"); taking the rare
		 * absolute ordinary one for magic only refuses more. */
		struct statfs sf;
		if (fstatfs(fd, &sf) < 0)
			return -errno;
		if (sf.f_type == PROC_SUPER_MAGIC)
			return -EXDEV;
	}
	*ret = TAKE_PTR(target);
	return 0;
}

/* Opens the single component name in dirfd with flags, following no symlink in it without openat2. */
int ws_open_one(int dirfd, const char *name, int flags, mode_t mode)
{
	if (ws_have_openat2())
		return ws_openat2_retry(dirfd, name, flags, mode, RESOLVE_WS);
	/* name holds no "/" and is neither "." nor "..": nothing but the
	 * entry itself is looked up, beneath dirfd. */
	return openat_retry(dirfd, name, flags | O_NOFOLLOW, mode);
}

/*
 * Opens the last component of a path, final, in dirfd with the caller's
 * flags. With openat2 the kernel follows a symlink put there meanwhile
 * while it stays beneath dirfd; without, ws_chase() has followed the links
 * already, so the name is opened O_NOFOLLOW (and holds no trailing slash,
 * which would follow one).
 */
static int open_last(int dirfd, const char *final, int flags, mode_t mode)
{
	if (ws_have_openat2())
		return openat_beneath(dirfd, final, flags, mode);
	return openat_retry(dirfd, final, flags | O_NOFOLLOW, mode);
}

/*
 * Opens rel beneath dirfd with flags without openat2, one component at a
 * time, following no symlink: each directory on the way is opened
 * O_PATH | O_NOFOLLOW relative to the one before, and a symlink anywhere
 * fails with -ELOOP, as RESOLVE_NO_SYMLINKS does (the last one is opened
 * itself with O_PATH | O_NOFOLLOW). ".." is refused with -EXDEV: it is
 * never needed by the callers, and nothing else could climb.
 */
static int walk_nofollow(int dirfd, const char *rel, int flags)
{
	_cleanup_close_ int fd = -1;
	const char *p = rel;
	if (!*rel)
		return -ENOENT;
	for (;;) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/'), *next = e;
		while (*next == '/')
			next++;
		size_t n = (size_t)(e - p);
		int cur = fd >= 0 ? fd : dirfd;
		if (n == 0)	/* rel names a directory reached (or dirfd itself) */
			return openat_retry(cur, ".", flags | O_NOFOLLOW, 0);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -EXDEV;
		if (n > NAME_MAX)
			return -ENAMETOOLONG;
		char name[NAME_MAX + 1];
		memcpy(name, p, n);
		name[n] = '\0';
		p = next;
		if (str_eq(name, "."))
			continue;
		if (!*next && *e != '/') {
			int last = openat_retry(cur, name, flags | O_NOFOLLOW, 0);
			/* O_DIRECTORY | O_NOFOLLOW on a symlink: a symlink met, as the kernel says. */
			struct stat st;
			if (last == -ENOTDIR && fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
				return -ELOOP;
			return last;
		}

		int step = openat_retry(cur, name, O_PATH | O_NOFOLLOW, 0);
		if (step < 0)
			return step;
		struct stat st;
		if (fstat(step, &st) < 0) {
			int r = -errno;
			close(step);
			return r;
		}
		if (fd >= 0)
			close(fd);
		fd = step;
		if (S_ISLNK(st.st_mode))
			return -ELOOP;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
	}
}

/* Opens the directory rel beneath dirfd as O_PATH, rel naming real directories only (no symlinks, no ".."). */
static int open_walked(int dirfd, const char *rel)
{
	if (ws_have_openat2())
		return ws_openat2_retry(dirfd, rel, O_PATH | O_DIRECTORY, 0, RESOLVE_WS);
	return walk_nofollow(dirfd, rel, O_PATH | O_DIRECTORY);
}

int ws_opendir_nofollow(int dirfd, const char *rel, DIR **ret)
{
	int fd = -1;
	int r = ws_open_nofollow(dirfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, &fd);
	if (r < 0)
		return r;
	if (!(*ret = fdopendir(fd))) {
		r = -errno;
		close(fd);
	}
	return r;
}

int ws_open_nofollow(int dirfd, const char *rel, int flags, int *ret_fd)
{
	if (flags & O_CREAT)
		return -EINVAL;
	if (!ws_have_openat2()) {
		/* One component at a time: no length limit but NAME_MAX. */
		int fd = walk_nofollow(dirfd, rel, flags);
		if (fd < 0)
			return fd;
		*ret_fd = fd;
		return 0;
	}
	/* A path the kernel finds too long (a deep tree found by reading
	 * directories) is opened a piece at a time, each piece beneath the
	 * directory the one before reached: as strict as one walk. */
	const uint64_t resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	_cleanup_close_ int cur = -1;
	const char *p = rel;
	size_t len = strlen(p);
	while (len >= PATH_MAX) {
		const char *cut = memrchr(p, '/', PATH_MAX - 1);
		if (!cut || cut == p)
			return -ENAMETOOLONG;
		_cleanup_free_ char *piece = xstrndup(p, (size_t)(cut - p));
		int fd = ws_openat2_retry(cur >= 0 ? cur : dirfd, piece, O_PATH | O_DIRECTORY, 0, resolve);
		if (fd < 0)
			return fd;
		if (cur >= 0)
			close(cur);
		cur = fd;
		p = cut + 1;
		len = strlen(p);
	}
	int fd = ws_openat2_retry(cur >= 0 ? cur : dirfd, *p ? p : ".", flags, 0, resolve);
	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

/*
 * Makes path relative to the root, newly allocated: NUL bytes are refused,
 * an absolute path must start with the root's components (so "/ws-evil/x"
 * is not inside "/ws"), and an empty path is ".".
 */
/* Strips root (absolute, with no "." or "..") from the front of the
 * absolute path[0..len), by whole components: the rest, newly allocated
 * ("." when nothing is left), or -EXDEV when path is not under root. */
static int strip_root(const char *root, const char *path, size_t len, char **ret)
{
	const char *p = path, *end = path + len, *q = root;
	for (;;) {
		while (*q == '/')
			q++;
		if (!*q)
			break;
		const char *qe = strchrnul(q, '/');

		/* The path's next component, skipping empty ones and "."; ".."
		 * never matches a component of the canonical root. */
		const char *pe;
		for (;;) {
			while (p < end && *p == '/')
				p++;
			pe = memchr(p, '/', (size_t)(end - p));
			if (!pe)
				pe = end;
			if (pe - p == 1 && *p == '.') {
				p = pe;
				continue;
			}
			break;
		}
		if (pe - p != qe - q || memcmp(p, q, (size_t)(qe - q)) != 0)
			return -EXDEV;
		p = pe;
		q = qe;
	}
	while (p < end && *p == '/')
		p++;
	*ret = p < end ? xstrndup(p, (size_t)(end - p)) : xstrdup(".");
	return 0;
}

/* Makes a client's path relative to the root (see workspace_internal.h). */
int ws_relative(const struct workspace *ws, const char *path, size_t len, char **ret)
{
	if (!path)
		len = 0;
	if (len > 0 && memchr(path, 0, len))
		return -EINVAL;
	if (len >= PATH_MAX)
		return -ENAMETOOLONG;
	if (len == 0) {
		*ret = xstrdup(".");
		return 0;
	}
	if (path[0] != '/') {
		*ret = xstrndup(path, len);
		return 0;
	}
	/* Only the prefix is compared: what follows is resolved beneath the
	 * root's fd either way, so the alias (never walked itself) cannot
	 * lead anywhere else. */
	int r = strip_root(ws->root, path, len, ret);
	if (r == -EXDEV && ws->alias)
		r = strip_root(ws->alias, path, len, ret);
	return r;
}

/*
 * Splits a relative path into its directory ("." when none) and its last
 * component. A path that names a directory by its form ("a/", ".", "a/..")
 * has no file name: -EISDIR.
 */
static int split_path(const char *rel, char **ret_dir, char **ret_name)
{
	size_t n = strlen(rel);
	if (n > 0 && rel[n - 1] == '/')
		return -EISDIR;
	const char *slash = memrchr(rel, '/', n);
	const char *name = slash ? slash + 1 : rel;
	if (str_eq(name, ".") || str_eq(name, "..") || !*name)
		return -EISDIR;

	size_t dlen = slash ? (size_t)(slash - rel) : 0;
	while (dlen > 0 && rel[dlen - 1] == '/')
		dlen--;
	*ret_dir = dlen ? xstrndup(rel, dlen) : xstrdup(slash ? "/" : ".");
	*ret_name = xstrdup(name);
	return 0;
}

/* Returns the length of rel without its last component (and the slashes before it). */
static size_t drop_last(const char *rel, size_t n)
{
	while (n > 0 && rel[n - 1] == '/')
		n--;
	while (n > 0 && rel[n - 1] != '/')
		n--;
	while (n > 0 && rel[n - 1] == '/')
		n--;
	return n;
}

/*
 * Opens rel (relative to the root) the slow way, one component at a time,
 * for what the kernel refused with EXDEV: an escape, or an absolute symlink
 * that may name a place under the root. Each component is opened
 * O_PATH | O_NOFOLLOW beneath the directory reached so far; a symlink is
 * read and its target put in front of what is left: a relative one walked
 * on from the link's directory, an absolute one inside rewritten relative
 * to the root and walked from the root fd. ".." goes back to the parent of
 * the directory reached, never above the root. The last component is opened
 * with the caller's flags (after its symlinks, unless they are not to be
 * followed), beneath the directory that holds it.
 *
 * With create, missing directories are made on the way (and the last one),
 * as "mkdir -p" would: only those the caller named, never the missing
 * target of a dangling symlink.
 */
int ws_chase(const struct workspace *ws, const char *rel, int flags, mode_t mode, bool create)
{
	_cleanup_free_ char *todo = xstrdup(rel);	/* what is left, from todo + at */
	_cleanup_(buf_free) struct buf done = {};	/* the directory reached, relative to the root */
	_cleanup_close_ int dfd = -1;			/* its fd; -1 for the root itself */
	size_t at = 0, named = 0;			/* todo from named on is the caller's own path */
	unsigned hops = 0;
	/* As the kernel: O_CREAT | O_EXCL never follows a last symlink. */
	bool follow = !(flags & O_NOFOLLOW) && (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL);
	int r;

	for (;;) {
		int cur = dfd >= 0 ? dfd : ws->dirfd;
		const char *p = todo + at;
		while (*p == '/')
			p++;
		if (!*p)	/* the path ends at a directory: the one reached */
			return open_last(cur, ".", flags, mode);
		const char *e = strchrnul(p, '/'), *next = e;
		while (*next == '/')
			next++;
		size_t n = (size_t)(e - p);
		bool last = !*next, slash = *e == '/';
		at = (size_t)(e - todo);

		if (n == 1 && p[0] == '.')
			continue;
		if (n > NAME_MAX)
			return -ENAMETOOLONG;
		char name[NAME_MAX + 1];
		memcpy(name, p, n);
		name[n] = '\0';

		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (buf_size(&done) == 0)
				return -EXDEV;
			/* The parent is found again from the root, by the names
			 * walked (real directories, no symlinks): an fd cannot
			 * climb beneath itself. */
			done.len = drop_last(done.data, done.len);
			if (dfd >= 0)
				close(TAKE_FD(dfd));
			if (buf_size(&done) > 0) {
				_cleanup_free_ char *up = xstrndup(buf_head(&done), buf_size(&done));
				dfd = open_walked(ws->dirfd, up);
				if (dfd < 0)
					return dfd;
			}
			continue;
		}

		/* The last component as opened with the caller's flags: a
		 * trailing slash follows a symlink and wants a directory. */
		char final[NAME_MAX + 2];
		snprintf(final, sizeof(final), "%s%s", name, slash ? "/" : "");
		if (last && !follow && !slash)
			return open_last(cur, final, flags, mode);
		/* Without openat2 a last name is never opened with its
		 * trailing slash (that would follow a symlink put there
		 * meanwhile): the kernel's answers are given here instead.
		 * With O_CREAT it answers "x/" before looking at x. */
		bool kernel_slash = ws_have_openat2() || !slash;
		if (last && !kernel_slash && (flags & O_CREAT))
			return -EISDIR;

		_cleanup_close_ int fd = ws_open_one(cur, name, O_PATH | O_NOFOLLOW, 0);
		if (fd == -ENOENT && create && (size_t)(p - todo) >= named) {
			/* mkdirat never follows a symlink: one made meanwhile
			 * gives EEXIST, and is looked at below. */
			int g = ws_guard_check(ws, cur, name, false, true);
			if (g < 0)
				return g;
			if (mkdirat(cur, name, 0777) < 0 && errno != EEXIST)
				return -errno;
			fd = ws_open_one(cur, name, O_PATH | O_NOFOLLOW, 0);
		}
		if (fd == -ENOENT && last)	/* the caller's flags say whether to create it */
			return kernel_slash ? open_last(cur, final, flags, mode) : -ENOENT;
		if (fd < 0)
			return fd;
		struct stat st;
		if (fstat(fd, &st) < 0)
			return -errno;

		if (S_ISLNK(st.st_mode)) {
			if (++hops > SYMLINK_HOPS)
				return -ELOOP;
			_cleanup_free_ char *target = NULL, *inside = NULL;
			/* The link just looked at, not whatever took its name since. */
			r = ws_read_link(cur, name, fd, &target);
			if (r < 0)
				return r;
			if (!*target)
				return -ENOENT;
			if (target[0] == '/') {
				/* Inside only when it names the root or a place under it. */
				r = ws_relative(ws, target, strlen(target), &inside);
				if (r < 0)
					return r;
				if (dfd >= 0)
					close(TAKE_FD(dfd));
				buf_clear(&done);
			}
			const char *lead = inside ? inside : target;
			char *spliced = xasprintf("%s%s", lead, todo + at);
			free(todo);
			todo = spliced;
			named = strlen(lead) + (named > at ? named - at : 0);
			at = 0;
			if (strlen(todo) >= PATH_MAX)
				return -ENAMETOOLONG;
			continue;
		}

		if (last && kernel_slash)
			/* Not a symlink (should one take its place now, the kernel
			 * refuses it unless it stays beneath cur, or without
			 * openat2 refuses it outright). */
			return open_last(cur, final, flags, mode);
		/* Not last, or "dir/" without openat2: walked into, and opened
		 * as "." on the next turn. */
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		if (buf_size(&done) > 0)
			buf_putc(&done, '/');
		buf_append(&done, name, n);
		if (dfd >= 0)
			close(dfd);
		dfd = TAKE_FD(fd);
	}
}

/*
 * Opens rel (relative to the root) beneath the root with flags. The kernel
 * walks it first; only what it refuses with EXDEV, as it refuses every
 * absolute symlink, is walked again by ws_chase() to tell the links pointing
 * inside from the escapes.
 */
static int open_rel(const struct workspace *ws, const char *rel, int flags, mode_t mode)
{
	if (!ws_have_openat2())
		return ws_chase(ws, rel, flags, mode, false);
	int fd = ws_openat2_retry(ws->dirfd, rel, flags, mode, RESOLVE_WS);
	if (fd == -EXDEV)
		return ws_chase(ws, rel, flags, mode, false);
	if (fd == -ELOOP)
		return eloop_cause(ws->dirfd, rel, flags);
	return fd;
}

/* What was opened is looked at as it is (its path, through the links that
 * led there) against what the work may not read. */
int ws_open_rel(const struct workspace *ws, const char *rel, int flags, mode_t mode)
{
	int fd = open_rel(ws, rel, flags, mode);
	if (fd >= 0 && ws_guard_reads_denied()) {
		int r = ws_guard_read_check(ws, fd, NULL);
		if (r < 0) {
			close(fd);
			return r;
		}
	}
	return fd;
}

/*
 * Finds how much of rel exists (*ret_n bytes, whole components), resolving
 * it beneath the root. A walk that meets a missing component fails there
 * whatever follows, so existence only shrinks as the prefix grows: a binary
 * search over the components needs a logarithmic number of walks, where
 * trying each would be quadratic in the path's length.
 */
static int existing_prefix(const struct workspace *ws, const char *rel, size_t *ret_n)
{
	size_t full = strlen(rel);
	int fd = ws_open_rel(ws, full ? rel : ".", O_PATH, 0);
	if (fd >= 0) {
		close(fd);
		*ret_n = full;
		return 0;
	}
	if (fd != -ENOENT)
		return fd;

	/* ends[k]: where the k-th component ends; ends[0] = 0 is the root. */
	_cleanup_free_ size_t *ends = xreallocarray(NULL, full / 2 + 2, sizeof(size_t));
	size_t k = 0;
	ends[k++] = 0;
	for (size_t i = 0; i < full;) {
		while (i < full && rel[i] == '/')
			i++;
		while (i < full && rel[i] != '/')
			i++;
		if (i > ends[k - 1] && rel[i - 1] != '/')
			ends[k++] = i;
	}
	/* ends[lo] exists (the root does), ends[hi] does not (the whole path). */
	size_t lo = 0, hi = k - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		_cleanup_free_ char *prefix = xstrndup(rel, ends[mid]);
		fd = ws_open_rel(ws, prefix, O_PATH, 0);
		if (fd >= 0) {
			close(fd);
			lo = mid;
		} else if (fd == -ENOENT) {
			hi = mid;
		} else {
			return fd;
		}
	}
	*ret_n = ends[lo];
	return 0;
}

/* Checks that rel, as far as it exists, resolves beneath the root, and that the rest would too. */
int ws_check_rel(const struct workspace *ws, const char *rel)
{
	size_t n, full = strlen(rel);
	int r = existing_prefix(ws, rel, &n);
	if (r < 0)
		return r;
	if (n == full)
		return 0;

	/* What does not exist yet would be created as plain directories, so
	 * its ".." are lexical: if they climb above the existing prefix, the
	 * kernel judges where they land. */
	int depth = 0, lowest = 0;
	for (size_t i = n; i < full;) {
		while (i < full && rel[i] == '/')
			i++;
		size_t e = i;
		while (e < full && rel[e] != '/')
			e++;
		if (e - i == 2 && rel[i] == '.' && rel[i + 1] == '.')
			depth--;
		else if (e > i && !(e - i == 1 && rel[i] == '.'))
			depth++;
		lowest = MIN(lowest, depth);
		i = e;
	}
	if (lowest == 0)
		return 0;

	struct buf b = {};
	buf_append(&b, n ? rel : ".", n ? n : 1);
	for (int k = lowest; k < 0; k++)
		buf_puts(&b, "/..");
	buf_putc(&b, '\0');
	int fd = ws_open_rel(ws, buf_head(&b), O_PATH, 0);
	buf_free(&b);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* Splits rel as split_path() does; a directory by its form that leads out ("..") is an escape first. */
int ws_split_beneath(const struct workspace *ws, const char *rel, char **ret_dir, char **ret_name)
{
	int r = split_path(rel, ret_dir, ret_name);
	if (r == -EISDIR && ws_check_rel(ws, rel) == -EXDEV)
		return -EXDEV;
	return r;
}

/* Opens the directory rel beneath the root for creating files in it (readable, so it can be fsynced). */
int ws_open_dir(const struct workspace *ws, const char *rel, bool create, int *ret_fd)
{
	int fd = ws_open_rel(ws, rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd == -ENOENT && create) {
		/* Nothing is created for a path that would lead out. */
		int r = ws_check_rel(ws, rel);
		if (r < 0)
			return r;
		fd = ws_chase(ws, rel, O_RDONLY | O_DIRECTORY, 0, true);
	}
	if (fd == -EACCES) {
		/* A write-only directory: still usable, without fsync. One
		 * that could not be made stays refused (not "missing"). */
		int path_fd = ws_open_rel(ws, rel, O_PATH | O_DIRECTORY, 0);
		if (path_fd >= 0)
			fd = path_fd;
	}
	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

/* True when path holds a "." or ".." component. */
bool ws_has_dot_component(const char *path)
{
	for (const char *p = path; *p;) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/');
		if ((e - p == 1 && p[0] == '.') || (e - p == 2 && p[0] == '.' && p[1] == '.'))
			return true;
		p = e;
	}
	return false;
}
