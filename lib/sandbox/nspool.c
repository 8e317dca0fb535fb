/* SPDX-License-Identifier: MIT */
/*
 * Mount namespaces made ahead, so that a child joins one (setns) instead
 * of making its own between its clone and its exec. Making a child's
 * namespace (unshare, a clone of the workspace, the tmpfs over the
 * TMPDIRs and the socket directories, everything made read-only, the
 * call's own TMPDIR tmpfs) and tearing it down when the child exits (the
 * kernel waits for an RCU grace period before it frees the mounts) cost
 * about 200 µs a call, all while the daemon waits for the exec or for the
 * exit. A namespace made ahead costs the child one setns and one chdir.
 *
 * This file is long because both ends of the maker's socket are here:
 * the plan and its messages are one protocol, read best in one place.
 *
 * A maker process, forked from the daemon at start-up when it runs as
 * root with a mount namespace of its own (sandbox_private_mounts()), as
 * it needs CAP_SYS_ADMIN there, and forked twice so that it is not the
 * daemon's child, receives a child's mount plan over a socketpair and
 * makes the namespace from the daemon's (setns back to it, unshare, the
 * same mounts the child would make: sandbox_mounts_make(), apply.c). It
 * sends its fd back by SCM_RIGHTS as soon as it is made, unasked: the
 * daemon reads it when a call takes the namespace, without a round trip
 * to the maker (it waits at most TAKE_WAIT_MS for one still being made),
 * and the maker holds nothing. The daemon keeps that fd while the call
 * runs, so that the child's exit does not free the namespace, and gives
 * it back when the call ends; the maker closes what it is given back,
 * and the teardown is paid there, not on the daemon's path.
 *
 * Each namespace serves one call at a time: it holds that call's TMPDIR
 * (a tmpfs of limits.tmp_mb) and nothing of another's. When a call ends
 * (once its answer is written: sandbox_ahead()), the daemon gives its
 * namespace back with the request for the next namespace of the same
 * plan, in one message (or, where the request cannot be made then, under
 * a tag the request names later): the maker gives the old TMPDIR to the
 * next call's path (a child cannot mount, so its TMPDIR is all a call can
 * change there), which costs a fraction of a new namespace. Where nothing
 * of the old call runs (its cgroup is empty) the tmpfs is moved there and
 * emptied, its root given back its owner and mode; else it is unmounted
 * and a new one mounted (an unmount costs an expedited RCU grace period,
 * which interrupts every CPU). The next call's TMPDIR is then only named
 * in the daemon's namespace, made there only if the call does not join
 * the namespace (tmp_call_name()). The next call of the same identity
 * takes it when its plan is the same, down to the inodes of the paths it
 * mounts (a workspace or a protected path replaced since does not match),
 * and when it was first made at most NSPOOL_MAX_AGE_MS before (mounts
 * made meanwhile in the daemon's namespace beneath the writable paths
 * reach it only through propagation). Any other call makes its own
 * namespace in its child, as before.
 *
 * Most commands never touch their TMPDIR. The maker hands over, with
 * each namespace whose TMPDIR is a tmpfs of its own, that TMPDIR's root,
 * which the daemon watches (inotify: any access, open, change of its
 * entries or of its own attributes is an event; nothing can be made
 * deeper without an entry in it). A call that ends with no event there
 * and nothing of it running (nspool_keep()) leaves its namespace as the
 * maker made it: the daemon keeps it, TMPDIR path and all, for the next
 * call of its plan and identity, and the maker does nothing. Otherwise it
 * goes back to the maker as above, and gets a new path.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/mount.h>
#include <linux/mount.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "proto/base/buf.h"
#include "proto/base/util.h"

/* The most namespaces kept ready or asked for. */
#define NSPOOL_MAX 8
/* How old a namespace may be when a call takes it. */
#define NSPOOL_MAX_AGE_MS 2000
/* The largest plan, and the most entries of each kind in one. */
#define PLAN_MAX 16384
#define PLAN_PATHS 80

enum { MSG_MAKE = 'M', MSG_DISPOSE = 'D' };

struct entry {
	unsigned id;
	char *key;			/* the plan but its TMPDIR, and the inodes */
	char *tmpdir;
	bool tmp_made;			/* it exists in the daemon's namespace */
	uid_t uid;
	gid_t gid;
	uint64_t made_ms;		/* when the namespace was first made */
	bool answered;			/* the maker's answer came: */
	int fd;				/* the namespace, or -1 (not made) */
	int wd;				/* the watch on its TMPDIR, or -1 */
	int tmp_fd;			/* its TMPDIR's root, or -1 */
};

static struct {
	int sock;			/* to the maker, or -1 */
	unsigned next_id;
	struct entry e[NSPOOL_MAX];
	unsigned n;
	/* Namespaces given back, kept by the maker under a tag for the next
	 * call of their plan. */
	struct given {
		uint32_t tag;
		char *key;
		uid_t uid;
		gid_t gid;
		uint64_t born_ms;
	} given[NSPOOL_MAX];
	unsigned n_given;
	/* The watches on the TMPDIRs of the namespaces handed over (one
	 * inotify instance): a TMPDIR no call touched since is as the maker
	 * made it. */
	int ino;
	struct watch {
		int wd;
		bool touched;
	} w[NSPOOL_MAX * 4];
	unsigned n_w;
} pool = { .sock = -1, .ino = -1 };

/* Appends a plan's entry: its kind, then the path with its NUL. */
static void put(struct buf *b, char kind, const char *s)
{
	buf_putc(b, kind);
	buf_append(b, s, strlen(s) + 1);
}

static void put_all(struct buf *b, char kind, const char *const *v)
{
	for (; v && *v; v++)
		put(b, kind, *v);
}

/* The plan of the child's mounts, as the maker reads it; without own, the
 * part that does not change from call to call (the key). */
static void plan_write(struct buf *b, const struct sandbox_child *c, bool own)
{
	put_all(b, 'w', c->writable);
	/* A read-only profile's empty writable list still means "make the
	 * rest read-only", unlike no list. */
	if (c->writable && !*c->writable)
		put(b, 'W', "");
	put_all(b, 'h', c->hide_dirs);
	put_all(b, 'b', c->binds);
	put_all(b, 'r', c->ro_binds);
	put_all(b, 'c', c->covers);
	if (c->tmp_parent)
		put(b, 'p', c->tmp_parent);
	if (own && c->tmp_own)
		put(b, 'o', c->tmp_own);
	if (c->tmp_opts)
		put(b, 't', c->tmp_opts);
	put(b, 's', c->mounts_slave ? "1" : "0");
}

/* How stamp_all() tells one file from another at the same path. */
enum stamp { STAMP_INODE, STAMP_CTIME, STAMP_BIRTH };

/* The generation number of a file or directory at path whose inode is
 * ino (FS_IOC_GETVERSION: ext2/3/4 give each inode made a new one, where
 * the inode number may be a freed one's), opened for it without its
 * access time touched; false where there is none. */
static bool generation_of(const char *path, uint64_t ino, unsigned *ret)
{
	int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	int fd = open(path, flags | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = open(path, flags);
	if (fd < 0)
		return false;
	int gen = 0;
	struct stat st;
	bool ok = ioctl(fd, FS_IOC_GETVERSION, &gen) == 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_ino == ino;
	close(fd);
	*ret = (unsigned)gen;
	return ok;
}

/* Appends the device and inode of each path (lstat, or known[i] when
 * the caller has it), so that a plan made for a path replaced since does
 * not match; with STAMP_CTIME, its change time too: a path removed and
 * made again may get the inode number it had (ext4 gives a freed one
 * again at once), and a namespace holding the old one, detached from it
 * by the removal, must not serve. STAMP_BIRTH tells that by the birth
 * time where the file system keeps one, else by the inode's generation
 * (a file or a directory), else by the change time: a covered path that
 * is written to (the audit log, the memory directory) is still the one
 * its cover stands on, and the namespace still serves. */
static void stamp_all(struct buf *b, const char *const *v, const struct stat *known, enum stamp how)
{
	for (size_t i = 0; v && v[i]; i++) {
		struct stat st;
		struct statx sx;
		unsigned gen;
		char s[96];
		if (known)
			st = known[i];
		if (!known && how == STAMP_BIRTH) {
			if (statx(AT_FDCWD, v[i], AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
				  STATX_TYPE | STATX_INO | STATX_BTIME | STATX_CTIME, &sx) < 0)
				snprintf(s, sizeof(s), "-");
			else if (sx.stx_mask & STATX_BTIME)
				snprintf(s, sizeof(s), "%u:%u:%" PRIu64 ":b%" PRId64 ".%u", sx.stx_dev_major,
					 sx.stx_dev_minor, (uint64_t)sx.stx_ino, (int64_t)sx.stx_btime.tv_sec,
					 sx.stx_btime.tv_nsec);
			else if ((S_ISREG(sx.stx_mode) || S_ISDIR(sx.stx_mode)) &&
				 generation_of(v[i], sx.stx_ino, &gen))
				snprintf(s, sizeof(s), "%u:%u:%" PRIu64 ":g%u", sx.stx_dev_major, sx.stx_dev_minor,
					 (uint64_t)sx.stx_ino, gen);
			else
				snprintf(s, sizeof(s), "%u:%u:%" PRIu64 ":%" PRId64 ".%u", sx.stx_dev_major,
					 sx.stx_dev_minor, (uint64_t)sx.stx_ino, (int64_t)sx.stx_ctime.tv_sec,
					 sx.stx_ctime.tv_nsec);
		} else if (!known && lstat(v[i], &st) < 0)
			snprintf(s, sizeof(s), "-");
		else if (how == STAMP_CTIME)
			snprintf(s, sizeof(s), "%" PRIu64 ":%" PRIu64 ":%" PRId64 ".%ld", (uint64_t)st.st_dev,
				 (uint64_t)st.st_ino, (int64_t)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
		else
			snprintf(s, sizeof(s), "%" PRIu64 ":%" PRIu64, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
		put(b, 'i', s);
	}
}

char *nspool_key(const struct sandbox_child *c, uid_t uid, gid_t gid, const struct stat *hide_st)
{
	struct buf b = {0};
	char id[48];
	snprintf(id, sizeof(id), "%u:%u", (unsigned)uid, (unsigned)gid);
	put(&b, 'u', id);
	plan_write(&b, c, false);
	stamp_all(&b, c->writable, NULL, STAMP_INODE);
	stamp_all(&b, c->binds, NULL, STAMP_INODE);
	stamp_all(&b, c->ro_binds, NULL, STAMP_CTIME);
	stamp_all(&b, c->covers, NULL, STAMP_BIRTH);
	stamp_all(&b, c->hide_dirs, hide_st, STAMP_INODE);
	/* Binary (NULs inside): kept as a length and the bytes. */
	char *key = xmalloc(sizeof(size_t) + buf_size(&b));
	size_t n = buf_size(&b);
	memcpy(key, &n, sizeof(n));
	memcpy(key + sizeof(n), buf_head(&b), n);
	buf_free(&b);
	return key;
}

bool nspool_key_eq(const char *a, const char *b)
{
	size_t na, nb;
	memcpy(&na, a, sizeof(na));
	memcpy(&nb, b, sizeof(nb));
	return na == nb && memcmp(a + sizeof(na), b + sizeof(nb), na) == 0;
}

/* --- the maker --------------------------------------------------------- */

/* Reads a plan into c, its strings pointing into buf (NUL-terminated). */
static int plan_read(char *buf, size_t n, struct sandbox_child *c, const char **vec)
{
	unsigned used = 0;
	memset(c, 0, sizeof(*c));
	c->mntns_fd = -1;
	/* One pass per kind, in the order plan_write() wrote them. */
	const char kinds[] = { 'w', 'h', 'b', 'r', 'c' };
	const char **starts[5];
	for (size_t k = 0; k < sizeof(kinds); k++) {
		starts[k] = vec + used;
		for (size_t off = 0; off < n;) {
			size_t len = strnlen(buf + off + 1, n - off - 1);
			if (off + 1 + len >= n)
				return -EINVAL;
			if (buf[off] == kinds[k]) {
				if (used + 1 >= PLAN_PATHS * 5)
					return -E2BIG;
				vec[used++] = buf + off + 1;
			}
			off += len + 2;
		}
		vec[used++] = NULL;
	}
	c->writable = *starts[0] ? starts[0] : NULL;
	c->hide_dirs = starts[1];
	c->binds = starts[2];
	c->ro_binds = starts[3];
	c->covers = starts[4];
	for (size_t off = 0; off < n;) {
		const char *s = buf + off + 1;
		switch (buf[off]) {
		case 'p': c->tmp_parent = s; break;
		case 'o': c->tmp_own = s; break;
		case 't': c->tmp_opts = s; break;
		case 's': c->mounts_slave = s[0] == '1'; break;
		}
		off += strlen(s) + 2;
	}
	/* The child's writable list is given even when empty (read-only
	 * profile): an empty list still makes the rest read-only. */
	for (size_t off = 0; off < n && !c->writable; off += strlen(buf + off + 1) + 2)
		if (buf[off] == 'W')
			c->writable = starts[0];
	return 0;
}

/* Sends a reply: the id, the result, and the namespace's fd when made,
 * with its TMPDIR's root (dir_fd) when it has one of its own. */
static void reply(int sock, unsigned id, int r, int fd, int dir_fd)
{
	int32_t msg[2] = { (int32_t)id, r };
	struct iovec iov = { msg, sizeof(msg) };
	union { struct cmsghdr h; char b[CMSG_SPACE(2 * sizeof(int))]; } u;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		int fds[2] = { fd, dir_fd };
		size_t n = dir_fd >= 0 ? 2 : 1;
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.b;
		mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	}
	(void)sendmsg(sock, &mh, MSG_NOSIGNAL);
}

/* Makes one namespace from the daemon's (base) by the plan. */
static int make_one(int base, char *plan, size_t n, int *ret_fd)
{
	struct sandbox_child c;
	const char *vec[PLAN_PATHS * 5];
	int r;
	if ((r = plan_read(plan, n, &c, vec)) < 0)
		return r;
	if (setns(base, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0)
		return -errno;
	if ((r = sandbox_mounts_make(&c)) < 0)
		return r;
	int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

/* A namespace a call is done with, kept to serve the next call of its
 * plan: its fd, its tag, the TMPDIR it held. */
struct kept {
	uint32_t tag;
	int fd;
	bool clean;			/* nothing of the call that had it runs */
	char own[PATH_MAX];
};

/* Removes every extended attribute of fd (ACLs among them); false when
 * some may be left. */
static bool xattrs_clear(int fd)
{
	char names[4096];
	ssize_t n = flistxattr(fd, names, sizeof(names));
	if (n < 0)
		return errno == EOPNOTSUPP;
	for (ssize_t off = 0; off < n; off += (ssize_t)strlen(names + off) + 1)
		if (fremovexattr(fd, names + off) < 0 && errno != ENODATA)
			return false;
	return n < (ssize_t)sizeof(names) || flistxattr(fd, names, sizeof(names)) == 0;
}

/* Makes a namespace that served a call serve the next: the call's TMPDIR
 * (a tmpfs, the whole of what a call can change in it: the mounts are
 * the maker's, a child cannot mount) given to the new call's path empty,
 * of the plan's size. When nothing of the old call runs (clean), its
 * tmpfs is moved there and emptied, its root given back its owner and
 * mode, without extended attributes (ACLs): an unmount costs the kernel an expedited RCU grace period (which
 * interrupts every CPU) and a tmpfs made and torn down, some 80 µs a
 * call; a process of the old call that still ran could keep a way into
 * a moved tmpfs, so otherwise (or when emptying fails) it is unmounted
 * and a new one mounted. */
static int recycle(struct kept *k, char *plan, size_t n)
{
	struct sandbox_child c;
	const char *vec[PLAN_PATHS * 5];
	int r;
	if ((r = plan_read(plan, n, &c, vec)) < 0)
		return r;
	if (!c.tmp_own || !c.tmp_opts || !c.writable || !c.tmp_parent)
		return -EINVAL;
	/* The empty tmpfs over the TMPDIRs' parent was made read-only with
	 * the rest: writable for the change of its one entry. */
	struct mount_attr rw = { .attr_clr = MOUNT_ATTR_RDONLY }, ro = { .attr_set = MOUNT_ATTR_RDONLY };
	if (setns(k->fd, CLONE_NEWNS) < 0 || syscall(SYS_mount_setattr, AT_FDCWD, c.tmp_parent, 0, &rw, sizeof(rw)) < 0 ||
	    mkdir(c.tmp_own, 0700) < 0)
		return -errno;
	bool fresh = !k->clean;
	if (!fresh && mount(k->own, c.tmp_own, NULL, MS_MOVE, NULL) < 0)
		fresh = true;
	if (fresh && umount2(k->own, MNT_DETACH) < 0)
		return -errno;
	if (rmdir(k->own) < 0 || syscall(SYS_mount_setattr, AT_FDCWD, c.tmp_parent, 0, &ro, sizeof(ro)) < 0)
		return -errno;
	if (!fresh) {
		unsigned uid, gid;
		const char *u = strstr(c.tmp_opts, "uid="), *g = strstr(c.tmp_opts, ",gid=");
		int fd = open(c.tmp_own, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		fresh = fd < 0 || !u || !g || sscanf(u, "uid=%u", &uid) != 1 || sscanf(g, ",gid=%u", &gid) != 1 ||
			!tmp_empty_dir(fd) || fchown(fd, uid, gid) < 0 || fchmod(fd, 0700) < 0 || !xattrs_clear(fd);
		if (fd >= 0)
			close(fd);
		if (fresh && umount2(c.tmp_own, MNT_DETACH) < 0)
			return -errno;
	}
	if (fresh && mount("tmpfs", c.tmp_own, "tmpfs", MS_NOSUID | MS_NODEV, c.tmp_opts) < 0)
		return -errno;
	return 0;
}

/* The value of a plan's entry of a kind (the last of its kind), or
 * NULL. */
static const char *plan_entry(const char *plan, size_t n, char kind)
{
	const char *found = NULL;
	for (size_t off = 0; off < n;) {
		const char *v = plan + off + 1;
		size_t len = strnlen(v, n - off - 1);
		if (off + 1 + len >= n)
			break;
		if (plan[off] == kind)
			found = v;
		off += len + 2;
	}
	return found;
}

/* The tag of the kept namespace a plan asks to be made from ("R" entry),
 * or 0. */
static uint32_t recycle_tag(const char *plan, size_t n)
{
	const char *v = plan_entry(plan, n, 'R');
	return v ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

/* The maker's loop. MAKE: makes a namespace by the plan (from a kept one
 * when the plan names it and it is kept) and answers at once with its fd
 * (or the error of its making), keeping nothing. DISPOSE (with an fd):
 * keeps it under a tag when the message gives one, else closes it; either
 * way its teardown is paid here. Ends when the daemon's end of the socket
 * closes. Only system calls and the stack. */
static _Noreturn void maker(int sock)
{
	static char plan[PLAN_MAX + 8];
	static struct kept kept[NSPOOL_MAX];
	unsigned n_kept = 0;
	int held = -1;
	/* None of the daemon's fds: a call's pipe held here would keep
	 * its output open after the call. */
	if (sock > 3)
		(void)syscall(SYS_close_range, 3U, (unsigned)sock - 1, 0U);
	(void)syscall(SYS_close_range, (unsigned)sock + 1, ~0U, 0U);
	(void)prctl(PR_SET_NAME, "toolcalld-ns");
	int base = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	for (;;) {
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u;
		struct iovec iov = { plan, sizeof(plan) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		int got = -1;
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&got, CMSG_DATA(cm), sizeof(int));
		/* A namespace given back (DISPOSE) is closed at the next
		 * message, not now: by then the daemon has closed its own copy,
		 * so that this close is the last, and the teardown is paid
		 * here. */
		if (held >= 0)
			close(held);
		held = got;
		if (n < 5 || (size_t)n > PLAN_MAX)
			continue;
		uint32_t id;
		memcpy(&id, plan + 1, sizeof(id));
		if (plan[0] == MSG_DISPOSE) {
			size_t len = strnlen(plan + 5, (size_t)n - 5);
			if (got < 0 || len == 0 || len >= PATH_MAX || 5 + len >= (size_t)n)
				continue;
			/* After the path's NUL, 'C': the call left nothing
			 * running. */
			bool clean = 5 + len + 1 < (size_t)n && plan[5 + len + 1] == 'C';
			if (n_kept == NSPOOL_MAX) {
				close(kept[0].fd);
				kept[0] = kept[--n_kept];
			}
			kept[n_kept].tag = id;
			kept[n_kept].fd = got;
			kept[n_kept].clean = clean;
			memcpy(kept[n_kept].own, plan + 5, len + 1);
			n_kept++;
			held = -1;
			continue;
		}
		if (plan[0] != MSG_MAKE)
			continue;
		int fd = -1, r;
		uint32_t tag = recycle_tag(plan + 5, (size_t)n - 5);
		unsigned k = 0;
		while (tag && k < n_kept && kept[k].tag != tag)
			k++;
		/* A namespace given back with the message (its old TMPDIR
		 * "G", "K" 1 when nothing of its call runs), to be made to
		 * serve the plan: one message and one wake-up where a give
		 * back and a request were two. */
		const char *given = got >= 0 ? plan_entry(plan + 5, (size_t)n - 5, 'G') : NULL;
		const char *clean = plan_entry(plan + 5, (size_t)n - 5, 'K');
		if (given && strlen(given) < PATH_MAX) {
			static struct kept g;
			g.fd = fd = got;
			g.clean = clean && clean[0] == '1';
			memcpy(g.own, given, strlen(given) + 1);
			held = -1;
			if (recycle(&g, plan + 5, (size_t)n - 5) < 0) {
				close(fd);	/* made anew below */
				fd = -1;
			}
		} else if (tag && k < n_kept) {
			fd = kept[k].fd;
			if (recycle(&kept[k], plan + 5, (size_t)n - 5) < 0) {
				close(fd);	/* made anew below */
				fd = -1;
			}
			kept[k] = kept[--n_kept];
		}
		if (fd < 0)
			r = base < 0 ? -ENOENT : make_one(base, plan + 5, (size_t)n - 5, &fd);
		else
			r = 0;
		/* Its TMPDIR's root, which the daemon watches: the maker is
		 * in the namespace it made. */
		const char *own = plan_entry(plan + 5, (size_t)n - 5, 'o');
		int dir_fd = -1;
		if (fd >= 0 && own && plan_entry(plan + 5, (size_t)n - 5, 't'))
			dir_fd = open(own, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		reply(sock, id, r, fd, dir_fd);
		if (dir_fd >= 0)
			close(dir_fd);
		if (fd >= 0)
			close(fd);
	}
}

/*
 * Starts the maker, at start-up: while the daemon has no thread (the maker
 * is a fork of it) and is not yet child subreaper, so that, forked twice,
 * it is not the daemon's child (the daemon kills and reaps every child
 * that is not a call's); it ends when the daemon's end of the socket
 * closes.
 */
int sandbox_nsmaker_start(void)
{
	if (pool.sock >= 0)
		return 0;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(sv[0]);
		close(sv[1]);
		return e;
	}
	if (pid == 0) {
		close(sv[0]);
		if (fork() == 0)
			maker(sv[1]);
		_exit(0);
	}
	close(sv[1]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	(void)fcntl(sv[0], F_SETFL, O_NONBLOCK);
	pool.sock = sv[0];
	return 0;
}

/* Lets the maker go (it exits when its socket closes; its namespaces go
 * with it). */
static void maker_stop(void)
{
	if (pool.sock >= 0)
		close(pool.sock);
	pool.sock = -1;
}

/* --- the daemon's side ------------------------------------------------- */

/* Hands a namespace's fd to the maker to close, or closes it here. */
static void dispose_fd(int fd)
{
	if (fd < 0)
		return;
	if (pool.sock >= 0) {
		char m = MSG_DISPOSE;
		struct iovec iov = { &m, 1 };
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u;
		memset(&u, 0, sizeof(u));
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
		(void)sendmsg(pool.sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	close(fd);
}

void nspool_dispose(int fd)
{
	dispose_fd(fd);
}

static void given_drop(unsigned i)
{
	free(pool.given[i].key);
	pool.given[i] = pool.given[--pool.n_given];
}

void nspool_give_back(int fd, const char *key, uid_t uid, gid_t gid, const char *own, uint64_t born_ms, bool clean)
{
	size_t len = own ? strlen(own) : 0;
	if (fd < 0)
		return;
	if (pool.sock < 0 || !key || !len || len >= PATH_MAX || mono_ms() - born_ms > NSPOOL_MAX_AGE_MS) {
		dispose_fd(fd);
		return;
	}
	uint32_t tag = ++pool.next_id;
	struct buf b = {0};
	buf_putc(&b, MSG_DISPOSE);
	buf_append(&b, &tag, sizeof(tag));
	buf_append(&b, own, len + 1);
	if (clean)
		buf_putc(&b, 'C');
	struct iovec iov = { (void *)buf_head(&b), buf_size(&b) };
	union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u;
	memset(&u, 0, sizeof(u));
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	bool sent = sendmsg(pool.sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0;
	buf_free(&b);
	close(fd);
	if (!sent)
		return;
	/* The maker keeps as many: the oldest goes first on both sides. */
	if (pool.n_given == NSPOOL_MAX)
		given_drop(0);
	size_t kn;
	memcpy(&kn, key, sizeof(kn));
	pool.given[pool.n_given++] = (struct given){
		.tag = tag, .key = xmemdup(key, sizeof(kn) + kn), .uid = uid, .gid = gid, .born_ms = born_ms,
	};
}

static void entry_drop(unsigned i)
{
	struct entry *e = &pool.e[i];
	dispose_fd(e->fd);	/* its answer, if it comes later, is disposed of */
	if (e->tmp_fd >= 0)
		close(e->tmp_fd);
	tmp_call_remove(e->tmpdir);
	free(e->key);
	pool.e[i] = pool.e[--pool.n];
}

/* How long a call waits for the maker to hand over a namespace it is
 * still making (it takes well under a millisecond), before it makes its
 * own. */
#define TAKE_WAIT_MS 2

/* The record of a watch, or NULL. */
static struct watch *watch_find(int wd)
{
	for (unsigned i = 0; i < pool.n_w; i++)
		if (pool.w[i].wd == wd)
			return &pool.w[i];
	return NULL;
}

/* Reads the events that came: each marks its TMPDIR touched (an overflow
 * marks every one); a watch the kernel ended (its tmpfs gone) is
 * forgotten. */
static void watch_scan(void)
{
	if (pool.ino < 0)
		return;
	for (;;) {
		_Alignas(struct inotify_event) char buf[4096];
		ssize_t n = read(pool.ino, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *ev = (const void *)(buf + off);
			off += (ssize_t)sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				for (unsigned i = 0; i < pool.n_w; i++)
					pool.w[i].touched = true;
				continue;
			}
			struct watch *w = watch_find(ev->wd);
			if (w && (ev->mask & IN_IGNORED))
				*w = pool.w[--pool.n_w];
			else if (w)
				w->touched = true;
		}
	}
}

/* Watches the TMPDIR whose root is dir_fd (kept open), as it is now
 * (untouched): the watch's descriptor, or -1. */
static int watch_arm(int dir_fd)
{
	char path[48];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", dir_fd);
	int wd = -1;
	if (pool.ino >= 0 || (pool.ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) >= 0)
		wd = inotify_add_watch(pool.ino, path, IN_ALL_EVENTS | IN_ONLYDIR);
	if (wd < 0)
		return -1;
	/* What the maker did there, and what came before, read first. */
	watch_scan();
	struct watch *w = watch_find(wd);
	if (!w) {
		if (pool.n_w == ELEMENTSOF(pool.w))
			pool.w[0] = pool.w[--pool.n_w];	/* forgotten: touched */
		w = &pool.w[pool.n_w++];
		w->wd = wd;
	}
	w->touched = false;
	return wd;
}

/* Whether nothing touched the TMPDIR of a watch since it was armed. */
static bool watch_untouched(int wd)
{
	if (wd < 0)
		return false;
	watch_scan();
	const struct watch *w = watch_find(wd);
	return w && !w->touched;
}

/* Stops watching every TMPDIR. */
static void watch_stop(void)
{
	if (pool.ino >= 0)
		close(pool.ino);
	pool.ino = -1;
	pool.n_w = 0;
}

/* Reads the maker's answers that came, each into its entry, up to the
 * one for id (0: all that came); one for an entry dropped meanwhile is
 * disposed of. False when the maker is gone. */
static bool answers_read(uint32_t id)
{
	for (;;) {
		int32_t msg[2];
		union { struct cmsghdr h; char b[CMSG_SPACE(2 * sizeof(int))]; } u;
		struct iovec iov = { msg, sizeof(msg) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
		ssize_t n = recvmsg(pool.sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0) {
			maker_stop();	/* gone */
			return false;
		}
		/* The namespace, then its TMPDIR's root when it has one. */
		int fds[2] = { -1, -1 };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(fds, CMSG_DATA(cm), MIN(cm->cmsg_len - CMSG_LEN(0), sizeof(fds)));
		_cleanup_close_ int dir_fd = fds[1];
		int fd = fds[0];
		unsigned i = 0;
		while (n == sizeof(msg) && i < pool.n && (pool.e[i].answered || pool.e[i].id != (uint32_t)msg[0]))
			i++;
		if (n != sizeof(msg) || i == pool.n) {
			dispose_fd(fd);
			continue;
		}
		pool.e[i].answered = true;
		if (msg[1] == 0) {
			pool.e[i].fd = fd;
			pool.e[i].wd = dir_fd >= 0 ? watch_arm(dir_fd) : -1;
			/* Kept, for the call to see whether it filled its
			 * TMPDIR (fstatfs). */
			pool.e[i].tmp_fd = TAKE_FD(dir_fd);
		} else {
			dispose_fd(fd);
		}
		if (pool.e[i].id == id)
			return true;
	}
}

/* The namespace made for entry i (its fd, then its caller's), or -1:
 * waits for the answer at most TAKE_WAIT_MS. */
static int take(unsigned i)
{
	uint64_t deadline = 0;
	uint32_t id = pool.e[i].id;
	for (;;) {
		/* The reading moves no entry. */
		if (!pool.e[i].answered && !answers_read(id))
			return -1;
		if (pool.e[i].answered) {
			int fd = pool.e[i].fd;
			pool.e[i].fd = -1;
			return fd;
		}
		uint64_t now = mono_ms();
		struct pollfd p = { .fd = pool.sock, .events = POLLIN };
		if (!deadline)
			deadline = now + TAKE_WAIT_MS;
		if (now >= deadline)
			return -1;	/* its answer, late, is disposed of */
		if (poll(&p, 1, (int)(deadline - now)) == 0)
			return -1;
	}
}

char *nspool_take_tmpdir(uid_t uid, gid_t gid, int *ret_fd, int *ret_wd, int *ret_tmp_fd, char **ret_key,
			 uint64_t *ret_born_ms, bool *ret_made)
{
	uint64_t now = mono_ms();
	*ret_fd = -1;
	*ret_wd = -1;
	*ret_tmp_fd = -1;
	for (unsigned i = pool.n; i-- > 0;) {
		struct entry *e = &pool.e[i];
		if (e->uid != uid || e->gid != gid)
			continue;
		if (now - e->made_ms > NSPOOL_MAX_AGE_MS || pool.sock < 0) {
			entry_drop(i);
			continue;
		}
		*ret_fd = take(i);
		e = &pool.e[i];
		if (*ret_fd >= 0) {
			*ret_wd = e->wd;
			*ret_tmp_fd = TAKE_FD(e->tmp_fd);
		} else if (e->tmp_fd >= 0) {
			close(TAKE_FD(e->tmp_fd));
		}
		char *tmpdir = e->tmpdir;
		*ret_key = e->key;
		*ret_born_ms = e->made_ms;
		*ret_made = e->tmp_made;
		*e = pool.e[--pool.n];
		return tmpdir;
	}
	return NULL;
}

void nspool_ask(const struct sandbox_child *c, const char *key, uid_t uid, gid_t gid, char *tmpdir)
{
	nspool_pass(c, key, uid, gid, tmpdir, true, NULL);
}

void nspool_pass(const struct sandbox_child *c, const char *key, uid_t uid, gid_t gid, char *tmpdir, bool made,
		 const struct nspool_given *back)
{
	/* A namespace given back that cannot serve goes back the usual way
	 * (kept by the maker or closed). */
	if (back && (pool.sock < 0 || !c->tmp_opts || !back->own || strlen(back->own) >= PATH_MAX ||
		  mono_ms() - back->born_ms > NSPOOL_MAX_AGE_MS)) {
		nspool_give_back(back->fd, key, uid, gid, back->own, back->born_ms, back->clean);
		back = NULL;
	}
	if (pool.sock < 0) {
		tmp_call_remove(tmpdir);
		return;
	}
	for (unsigned i = 0; i < pool.n; i++)
		if (pool.e[i].uid == uid && pool.e[i].gid == gid && nspool_key_eq(pool.e[i].key, key)) {
			if (back)
				nspool_give_back(back->fd, key, uid, gid, back->own, back->born_ms, back->clean);
			tmp_call_remove(tmpdir);
			return;		/* one ahead per plan is enough */
		}
	/* The answers that came for entries no call took yet are read (into
	 * their entries): none waits in the socket for a call of its
	 * identity that may never come, and the maker, which waits while
	 * the socket is full, never waits long. */
	bool pending = false;
	for (unsigned i = 0; i < pool.n; i++)
		pending |= !pool.e[i].answered;
	if (pending && !answers_read(0)) {
		if (back)
			dispose_fd(back->fd);
		tmp_call_remove(tmpdir);
		return;
	}
	if (pool.n == NSPOOL_MAX)
		entry_drop(0);		/* the oldest asked for */
	struct sandbox_child own = *c;
	own.tmp_own = tmpdir;
	struct buf b = {0};
	uint32_t id = ++pool.next_id;
	buf_putc(&b, MSG_MAKE);
	buf_append(&b, &id, sizeof(id));
	plan_write(&b, &own, true);
	/* From a namespace given back for the plan, if there is one young
	 * enough: the maker then only changes its TMPDIR. */
	uint64_t born = mono_ms();
	if (back) {
		put(&b, 'G', back->own);
		put(&b, 'K', back->clean ? "1" : "0");
		born = back->born_ms;
	}
	for (unsigned i = pool.n_given; i-- > 0 && !back;) {
		struct given *g = &pool.given[i];
		if (born - g->born_ms > NSPOOL_MAX_AGE_MS) {
			given_drop(i);
			continue;
		}
		if (g->uid == uid && g->gid == gid && nspool_key_eq(g->key, key) && c->tmp_opts) {
			char tag[16];
			snprintf(tag, sizeof(tag), "%u", g->tag);
			put(&b, 'R', tag);
			born = g->born_ms;
			given_drop(i);
			break;
		}
	}
	bool sent = false;
	if (buf_size(&b) <= PLAN_MAX) {
		struct iovec iov = { (void *)buf_head(&b), buf_size(&b) };
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		if (back) {
			memset(&u, 0, sizeof(u));
			mh.msg_control = u.b;
			mh.msg_controllen = sizeof(u.b);
			struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &back->fd, sizeof(int));
		}
		sent = sendmsg(pool.sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0;
	}
	buf_free(&b);
	if (back)
		close(back->fd);	/* the maker's now, or gone */
	if (!sent) {
		tmp_call_remove(tmpdir);
		return;
	}
	size_t kn;
	memcpy(&kn, key, sizeof(kn));
	pool.e[pool.n++] = (struct entry){
		.id = id, .key = xmemdup(key, sizeof(kn) + kn), .tmpdir = tmpdir, .tmp_made = made,
		.uid = uid, .gid = gid, .made_ms = born, .fd = -1, .wd = -1, .tmp_fd = -1,
	};
}

bool nspool_keep(int fd, int wd, int tmp_fd, const char *key, uid_t uid, gid_t gid, char *tmpdir, uint64_t born_ms)
{
	if (pool.sock < 0 || fd < 0 || !key || !tmpdir || mono_ms() - born_ms > NSPOOL_MAX_AGE_MS ||
	    !watch_untouched(wd))
		return false;
	/* One ahead per plan is enough: this one, ready, rather than one
	 * asked for meanwhile (by a call that ran beside this one). */
	for (unsigned i = pool.n; i-- > 0;)
		if (pool.e[i].uid == uid && pool.e[i].gid == gid && nspool_key_eq(pool.e[i].key, key))
			entry_drop(i);
	if (pool.n == NSPOOL_MAX)
		entry_drop(0);
	size_t kn;
	memcpy(&kn, key, sizeof(kn));
	pool.e[pool.n++] = (struct entry){
		.id = ++pool.next_id, .key = xmemdup(key, sizeof(kn) + kn), .tmpdir = tmpdir, .uid = uid, .gid = gid,
		.made_ms = born_ms, .answered = true, .fd = fd, .wd = wd, .tmp_fd = tmp_fd,
	};
	return true;
}

void nspool_clear(bool stop)
{
	if (pool.sock >= 0 && pool.n)
		(void)answers_read(0);
	while (pool.n)
		entry_drop(pool.n - 1);
	while (pool.n_given)
		given_drop(pool.n_given - 1);
	if (stop) {
		maker_stop();
		watch_stop();
	}
}
