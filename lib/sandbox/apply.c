/* SPDX-License-Identifier: MIT */
/*
 * The sandbox as the spawned child carries it out, between its clone and
 * its exec. It runs on a stack of the spawn, in the daemon's memory (see
 * spawn_child() in lib/child/child_spawn.c), so it makes raw system calls only
 * and reads nothing but the plan the daemon prepared.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>

/* The kernel's struct rlimit64 for prlimit64(2). */
struct raw_rlimit {
	uint64_t cur;
	uint64_t max;
};

/* The file system type of a bind mount, a remount or a propagation change:
 * the kernel ignores it; a string rather than NULL keeps memory checkers
 * (valgrind) from reading the argument as a bad pointer. */
#define MOUNT_NO_TYPE "none"

/* Self-binds each path (read-only when ro) in the child's private mount
 * namespace. A path gone since the daemon looked has nothing to protect.
 * The remount keeps noexec where the mount had it: in a user namespace a
 * flag of the mount it comes from cannot be dropped (EPERM). */
__attribute__((no_sanitize("address"))) static int bind_all(const char *const *paths, bool ro)
{
	for (; paths && *paths; paths++) {
		if (syscall(SYS_mount, *paths, *paths, MOUNT_NO_TYPE, MS_BIND, NULL) < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		struct statfs st;
		if (ro && syscall(SYS_statfs, *paths, &st) < 0)
			return -errno;
		if (ro && syscall(SYS_mount, NULL, *paths, MOUNT_NO_TYPE,
				  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | (st.f_flags & MS_NOEXEC),
				  NULL) < 0)
			return -errno;
	}
	return 0;
}

/* Covers each denied path (landlock.c says which): a directory with an
 * empty read-only tmpfs, a file with /dev/null bound read-only and
 * without devices (it cannot be opened). What is beneath stays out of
 * reach, and a workspace's top writable; a mount point cannot be removed
 * or renamed over from inside the namespace (EBUSY). */
__attribute__((no_sanitize("address"))) static int cover_all(const char *const *paths)
{
	for (; paths && *paths; paths++) {
		if (syscall(SYS_mount, "tmpfs", *paths, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			    "size=4k,nr_inodes=1,mode=0555") == 0)
			continue;
		if (errno == ENOENT)
			continue;	/* gone since the daemon looked */
		if (errno != ENOTDIR)
			return -errno;
		if (syscall(SYS_mount, "/dev/null", *paths, MOUNT_NO_TYPE, MS_BIND, NULL) < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		if (syscall(SYS_mount, NULL, *paths, MOUNT_NO_TYPE, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
			    NULL) < 0)
			return -errno;
	}
	return 0;
}

/* Writes text into a file (of /proc/self), raw. */
__attribute__((no_sanitize("address"))) static int write_text(const char *path, const char *text)
{
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = 0;
	while (text[n])
		n++;
	long w = syscall(SYS_write, fd, text, n);
	int e = errno;
	(void)syscall(SYS_close, fd);
	errno = e;
	return w < 0 ? -e : 0;
}

/*
 * Maps, in the user namespace the child was cloned into, its own uid and
 * gid onto themselves and nothing else (setgroups denied first, as the
 * kernel requires of an unprivileged gid_map). Inside it the child has
 * capabilities over its own mount namespace only, and loses them at exec
 * (its uid there is not 0); files of unmapped owners are out of their
 * reach.
 */
__attribute__((no_sanitize("address"))) int sandbox_userns_map(const char *uid_map, const char *gid_map)
{
	int r;
	if ((r = write_text("/proc/self/setgroups", "deny")) < 0 || (r = write_text("/proc/self/uid_map", uid_map)) < 0 ||
	    (r = write_text("/proc/self/gid_map", gid_map)) < 0)
		return r;
	return 0;
}

/* Writes "/proc/self/fd/N" into src (32 bytes). */
__attribute__((no_sanitize("address"))) static void proc_fd_path(char *src, long fd)
{
	static const char prefix[] = "/proc/self/fd/";
	char digits[12];
	int nd = 0, len = 0;
	while (prefix[len]) {
		src[len] = prefix[len];
		len++;
	}
	for (long v = fd; nd == 0 || v; v /= 10)
		digits[nd++] = (char)('0' + v % 10);
	while (nd)
		src[len++] = digits[--nd];
	src[len] = '\0';
}

/*
 * Hides the other calls' TMPDIRs: an empty tmpfs over the parent they
 * share, with the call's own directory put back at its place: a copy of
 * its mount taken (open_tree) before the tmpfs covers it, moved there
 * after (a bind from /proc/self/fd of a covered directory, the way of a
 * kernel without open_tree, costs about twenty times more). The path is
 * the same, and the neighbours are not there to list or open.
 */
__attribute__((no_sanitize("address"))) static int hide_tmp(const char *parent, const char *own)
{
	bool tree = true;
	long fd = syscall(SYS_open_tree, AT_FDCWD, own, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (fd < 0 && errno == ENOSYS) {
		tree = false;
		fd = syscall(SYS_openat, AT_FDCWD, own, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	int r = 0;
	if (syscall(SYS_mount, "tmpfs", parent, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    "mode=0711,size=4k,nr_inodes=4") < 0 ||
	    syscall(SYS_mkdirat, AT_FDCWD, own, 0700) < 0)
		r = -errno;
	else if (tree && syscall(SYS_move_mount, fd, "", AT_FDCWD, own, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		r = -errno;
	else if (!tree) {
		char src[32];
		proc_fd_path(src, fd);
		if (syscall(SYS_mount, src, own, MOUNT_NO_TYPE, MS_BIND, NULL) < 0)
			r = -errno;
	}
	(void)syscall(SYS_close, fd);
	errno = -r;
	return r;
}

/*
 * Takes away for good what would let the child, or anything it execs,
 * hold a capability: the bounding set emptied (cap 0 to last_cap) and the
 * securebits locked so that uid 0 means no capability at exec
 * (SECBIT_NOROOT), a change of uid keeps none it could raise
 * (SECBIT_NO_SETUID_FIXUP with an empty bounding set), KEEP_CAPS stays
 * off and no ambient capability can be raised; both need CAP_SETPCAP.
 * Before the change of uid, which needs CAP_SETUID still in effect.
 */
__attribute__((no_sanitize("address"))) int sandbox_caps_bound(int last_cap)
{
	for (long cap = 0; cap <= last_cap; cap++)
		if (syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break;	/* past the kernel's last */
			return -errno;
		}
	const unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
				   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
				   SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (syscall(SYS_prctl, PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* Empties the ambient, inheritable, permitted and effective sets: the
 * last privileged step (a lowering capset needs no capability). The
 * kernel keeps in the ambient set only what stays both permitted and
 * inheritable, so the capset empties it too, without a
 * PR_CAP_AMBIENT_CLEAR_ALL of its own. */
__attribute__((no_sanitize("address"))) int sandbox_caps_clear(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

/* Enters the working directory again by its path: after a change of
 * mounts beneath it (or of namespace) it is the directory mounted there
 * now. */
__attribute__((no_sanitize("address"))) static int chdir_again(void)
{
	char cwd[4096];
	long len = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/cwd", cwd, sizeof(cwd) - 1);
	if (len < 0 || len == (long)sizeof(cwd) - 1)
		return len < 0 ? -errno : -ENAMETOOLONG;
	cwd[len] = '\0';
	return syscall(SYS_chdir, cwd) < 0 ? -errno : 0;
}

/*
 * Makes everything read-only but the writable paths and the call's own
 * TMPDIR (a tmpfs of the size tmp_opts says, or the daemon's directory):
 * a copy of each (open_tree, with what is mounted beneath) taken first,
 * the other calls' TMPDIRs and the directories of sockets out of reach
 * (hide_dirs) covered with an empty tmpfs (as hide_tmp()), every mount
 * of the namespace made read-only at once (mount_setattr), then the
 * copies, still writable, moved back onto their paths, parents first.
 * chmod, chown, utimes, xattrs, links, renames and new files outside
 * fail with EROFS, whatever the child's uid; device nodes, FIFOs and
 * sockets there still open for writing, as on any read-only mount.
 */
__attribute__((no_sanitize("address"))) static int readonly_rest(const struct sandbox_child *c)
{
	long fds[SANDBOX_WRITABLE_MAX];
	long own = -1;
	unsigned n = 0;
	int r = 0;
	for (const char *const *p = c->writable; *p && n < SANDBOX_WRITABLE_MAX; p++) {
		fds[n] = syscall(SYS_open_tree, AT_FDCWD, *p, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		if (fds[n] < 0 && errno != ENOENT) {
			r = -errno;
			goto out;
		}
		n++;
	}
	if (c->tmp_own) {
		if (!c->tmp_opts)
			own = syscall(SYS_open_tree, AT_FDCWD, c->tmp_own,
				      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
		if ((!c->tmp_opts && own < 0) ||
		    syscall(SYS_mount, "tmpfs", c->tmp_parent, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			    "mode=0711,size=4k,nr_inodes=4") < 0 ||
		    syscall(SYS_mkdirat, AT_FDCWD, c->tmp_own, 0700) < 0) {
			r = -errno;
			goto out;
		}
	}
	for (const char *const *d = c->hide_dirs; d && *d; d++)
		if (syscall(SYS_mount, "tmpfs", *d, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			    "mode=0755,size=4k,nr_inodes=1") < 0 && errno != ENOENT) {
			r = -errno;
			goto out;
		}
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) < 0) {
		r = -errno;
		goto out;
	}
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0 && syscall(SYS_move_mount, fds[i], "", AT_FDCWD, c->writable[i], MOVE_MOUNT_F_EMPTY_PATH) < 0) {
			r = -errno;
			goto out;
		}
	if (own >= 0 && syscall(SYS_move_mount, own, "", AT_FDCWD, c->tmp_own, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		r = -errno;
		goto out;
	}
	/* Or a TMPDIR of its own size (limits.tmp_mb), which goes with the
	 * namespace. */
	if (c->tmp_own && c->tmp_opts &&
	    syscall(SYS_mount, "tmpfs", c->tmp_own, "tmpfs", MS_NOSUID | MS_NODEV, c->tmp_opts) < 0) {
		r = -errno;
		goto out;
	}
	/* The working directory is still on the mount made read-only,
	 * beneath the copy moved over it: entered again by its path once the
	 * rest is mounted (sandbox_mounts_make()). */
out:
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			(void)syscall(SYS_close, fds[i]);
	if (own >= 0)
		(void)syscall(SYS_close, own);
	errno = -r;
	return r;
}

/*
 * Joins a mount namespace prepared ahead (nspool.c), which moves the
 * working directory to its root: the one the child is to work in (the
 * directory of cwd_fd, or its own when -1) is entered again by its path,
 * now on that namespace's mounts. The path is path, or read from
 * /proc/self/cwd when NULL (some 11 µs in a child just cloned, whose
 * /proc entries are all new: a spawner gives it). Entered by path with
 * the privileges the child still holds, it must lead to that same
 * directory (device and inode; a copy of its mount there is the same
 * directory): a link swapped in on the way since the path was read fails
 * the step rather than taking the child somewhere its peer could not go.
 */
__attribute__((no_sanitize("address"))) static int join_mounts(int fd, const char *path, int cwd_fd)
{
	char cwd[4096];
	struct statx want, got;
	if (syscall(SYS_statx, cwd_fd >= 0 ? cwd_fd : AT_FDCWD, cwd_fd >= 0 ? "" : ".", AT_EMPTY_PATH, STATX_INO, &want) < 0)
		return -1;
	if (!path) {
		long len = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/cwd", cwd, sizeof(cwd) - 1);
		if (len < 0 || len == (long)sizeof(cwd) - 1) {
			errno = len < 0 ? errno : ENAMETOOLONG;
			return -1;
		}
		cwd[len] = '\0';
		path = cwd;
	}
	if (syscall(SYS_setns, fd, CLONE_NEWNS) < 0 || syscall(SYS_chdir, path) < 0 ||
	    syscall(SYS_statx, AT_FDCWD, ".", 0, STATX_INO, &got) < 0)
		return -1;
	if (got.stx_ino != want.stx_ino || got.stx_dev_major != want.stx_dev_major ||
	    got.stx_dev_minor != want.stx_dev_minor) {
		errno = ESTALE;
		return -1;
	}
	return 0;
}

bool sandbox_child_needs_mounts(const struct sandbox_child *c)
{
	return c->userns || (c->binds && *c->binds) || (c->ro_binds && *c->ro_binds) || (c->covers && *c->covers) ||
	       c->tmp_own || c->writable;
}

#define MOUNT_STEP(name, call) \
	do { \
		if ((call) < 0) { \
			c->failed = name; \
			return -errno; \
		} \
	} while (0)

/* Makes the mounts of the plan in the mount namespace the caller has just
 * made its own: the spawned child, or the maker of namespaces ahead
 * (nspool.c). */
__attribute__((no_sanitize("address"))) int sandbox_mounts_make(struct sandbox_child *c)
{
	/* Nothing mounted here may propagate back to the daemon's (with a
	 * namespace of the daemon's own, its mounts are slaves already, and
	 * so are their copies here). */
	if (!c->mounts_slave)
		MOUNT_STEP("making mounts private", syscall(SYS_mount, NULL, "/", MOUNT_NO_TYPE, MS_REC | MS_SLAVE, NULL));
	if (c->writable)
		MOUNT_STEP("making the file system read-only but the writable paths", readonly_rest(c));
	int r = bind_all(c->binds, false);
	if (r == 0)
		r = bind_all(c->ro_binds, true);
	if (r == 0)
		r = cover_all(c->covers);
	if (r < 0) {
		c->failed = "mounting the protected paths read-only";
		errno = -r;
		return r;
	}
	if (c->tmp_own && !c->writable)
		MOUNT_STEP("hiding the other calls' TMPDIRs", hide_tmp(c->tmp_parent, c->tmp_own));
	/* The working directory, entered before, is still on the mounts
	 * beneath those made since (the copy made read-only, a protected
	 * path's place, a private path's under its cover): entered again by
	 * its path, it is on what is mounted there now, and a child started
	 * in a covered directory finds it empty, not what it covers. */
	if (c->writable || (c->binds && *c->binds) || (c->ro_binds && *c->ro_binds) || (c->covers && *c->covers)) {
		r = chdir_again();
		if (r < 0) {
			c->failed = "entering the working directory again";
			errno = -r;
			return r;
		}
	}
	return 0;
}

#define STEP(name, call) \
	do { \
		if ((call) < 0) { \
			c->failed = name; \
			return -errno; \
		} \
	} while (0)

/* Sends the listener fd on sock (SCM_RIGHTS): system calls only, no
 * libc call (the child runs in the daemon's memory). */
__attribute__((no_sanitize("address"))) static long send_listener(int sock, int fd)
{
	char byte = 1;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct {
		struct cmsghdr hdr;
		int fd;
	} ctl = { .hdr = { .cmsg_len = CMSG_LEN(sizeof(int)), .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS },
		  .fd = fd };
	_Static_assert(offsetof(__typeof__(ctl), fd) == CMSG_LEN(0) && sizeof(ctl) == CMSG_SPACE(sizeof(int)),
		       "the layout of one fd's control message");
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof(ctl) };
	return syscall(SYS_sendmsg, sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Carries out the plan, in the order that needs the privileges it drops
 * last: cgroup, network namespace, subreaper, user namespace maps, mounts, rlimits, bounding
 * set and securebits, groups/gid/uid, every capability, no_new_privs,
 * Landlock, seccomp. */
__attribute__((no_sanitize("address"))) int sandbox_child_apply(struct sandbox_child *c)
{
	if (c->cgroup_procs_fd >= 0)
		STEP("joining the call's cgroup", syscall(SYS_write, c->cgroup_procs_fd, "0", 1));
	if (c->userns_fd >= 0)
		STEP("joining the user namespace of the call's network", syscall(SYS_setns, c->userns_fd, CLONE_NEWUSER));
	if (c->netns_fd >= 0)
		STEP("joining the call's network namespace", syscall(SYS_setns, c->netns_fd, CLONE_NEWNET));
	if (c->subreaper)
		STEP("becoming subreaper", syscall(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0));
	if (c->userns)
		STEP("mapping the user namespace", sandbox_userns_map(c->uid_map, c->gid_map));
	if (c->mntns_fd >= 0)
		STEP("joining the mount namespace prepared for it", join_mounts(c->mntns_fd, NULL, -1));
	else if (sandbox_child_needs_mounts(c)) {
		/* Here, not at the clone: the child has moved to its working
		 * directory, which the new namespace then holds in its copy of
		 * the mounts (a directory entered later, by an fd of the
		 * daemon's, would stay in the daemon's namespace). */
		STEP("making a mount namespace", syscall(SYS_unshare, CLONE_NEWNS));
		int r = sandbox_mounts_make(c);
		if (r < 0)
			return r;
	}
	for (unsigned i = 0; i < c->n_rlimits; i++) {
		/* Lowered, never raised: a soft limit below stays (the fd
		 * limit children keep, child_set_fd_limit). */
		struct raw_rlimit old, rl;
		uint64_t v = c->rlimits[i].value;
		STEP("reading a resource limit", syscall(SYS_prlimit64, 0, c->rlimits[i].resource, NULL, &old));
		rl.max = old.max < v ? old.max : v;
		rl.cur = old.cur < rl.max ? old.cur : rl.max;
		STEP("setting a resource limit", syscall(SYS_prlimit64, 0, c->rlimits[i].resource, &rl, NULL));
	}
	if (c->cap_last >= 0)
		STEP("emptying the capability bounding set", sandbox_caps_bound(c->cap_last));
	if (c->set_ids) {
		STEP("setting the groups", syscall(SYS_setgroups, c->n_groups, c->groups));
		STEP("setting the gid", syscall(SYS_setresgid, c->gid, c->gid, c->gid));
		STEP("setting the uid", syscall(SYS_setresuid, c->uid, c->uid, c->uid));
	}
	STEP("dropping the capabilities", sandbox_caps_clear());
	if (c->no_new_privs)
		STEP("setting no_new_privs", syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	if (c->landlock_fd >= 0)
		STEP("enforcing Landlock", syscall(SYS_landlock_restrict_self, c->landlock_fd,
										  sandbox_landlock_restrict_flags));
	if (c->landlock_fd2 >= 0)
		STEP("enforcing Landlock (its second layer)", syscall(SYS_landlock_restrict_self, c->landlock_fd2,
										  sandbox_landlock_restrict_flags));
	if (c->bpf && !c->listen)
		STEP("loading the seccomp filter", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, c->bpf));
	if (c->bpf && c->listen) {
		/* The last step: from here the child makes only calls its
		 * filter lets through (sendmsg, close, then exec's), none
		 * handed to the daemon, which waits for its exec. */
		long fd;
		STEP("loading the seccomp filter",
		     fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				  SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, c->bpf));
		STEP("handing its network's listener to the daemon", send_listener(c->notes_sock, (int)fd));
		(void)syscall(SYS_close, fd);
	}
	return 0;
}

/*
 * Whether a spawner (lib/child/child_spawner.c) can start the child of a
 * plan, which then carries out only sandbox_child_apply_spawned(): the
 * plan has a seccomp program and sets no_new_privs (what the spawner did
 * once, with the bounding set where the plan empties it), and needs no
 * step the spawner's filter refuses: no user namespace to make or join
 * (a daemon that is not root), no mount namespace to make (one made
 * ahead is joined).
 */
bool sandbox_child_spawnable(const struct sandbox_child *c)
{
	return c && c->bpf && c->no_new_privs && !c->userns && c->userns_fd < 0 &&
	       (c->mntns_fd >= 0 || !sandbox_child_needs_mounts(c));
}

/*
 * What a spawner does once, for every child it will start, whose plans
 * have the seccomp program prog (seccomp_prog_get()): the bounding set
 * emptied and the securebits locked where cap_last is not -1 (as the
 * plans' cap_last; its own capabilities stay in effect,
 * which its children use and drop), no_new_privs, and the spawner's
 * variant of the program loaded (seccomp_spawner_prog(), built before
 * the spawner is forked: spawner_prog).
 */
__attribute__((no_sanitize("address"))) int sandbox_spawner_setup(int cap_last, const void *spawner_prog,
								   int *ret_listener)
{
	int r;
	*ret_listener = -1;
	if (!spawner_prog)
		return -EINVAL;
	if (cap_last >= 0 && (r = sandbox_caps_bound(cap_last)) < 0)
		return r;
	/* A program that hands calls to the daemon comes with its
	 * listener; its tasks' waits for an answer end only by a fatal
	 * signal once the daemon has the call (WAIT_KILLABLE_RECV), so that
	 * no other signal makes the call be handed over again. */
	unsigned flags = seccomp_prog_notifies(spawner_prog)
				 ? SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
				 : 0;
	if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, spawner_prog);
	if (fd < 0)
		return -errno;
	if (flags)
		*ret_listener = (int)fd;
	return 0;
}

/* The plan, carried out by the child of a spawner set up for it
 * (sandbox_child_spawnable(), sandbox_spawner_setup()): what
 * sandbox_child_apply() does but the bounding set, no_new_privs and the
 * seccomp filter, which the child has from the spawner. Its working
 * directory is cwd_fd's (or its own when -1), whose path cwd is (or NULL:
 * read here). */
__attribute__((no_sanitize("address"))) int sandbox_child_apply_spawned(struct sandbox_child *c, const char *cwd,
									  int cwd_fd)
{
	if (c->cgroup_procs_fd >= 0)
		STEP("joining the call's cgroup", syscall(SYS_write, c->cgroup_procs_fd, "0", 1));
	if (c->netns_fd >= 0)
		STEP("joining the call's network namespace", syscall(SYS_setns, c->netns_fd, CLONE_NEWNET));
	if (c->subreaper)
		STEP("becoming subreaper", syscall(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0));
	if (c->mntns_fd >= 0)
		STEP("joining the mount namespace prepared for it", join_mounts(c->mntns_fd, cwd, cwd_fd));
	for (unsigned i = 0; i < c->n_rlimits; i++) {
		struct raw_rlimit old, rl;
		uint64_t v = c->rlimits[i].value;
		STEP("reading a resource limit", syscall(SYS_prlimit64, 0, c->rlimits[i].resource, NULL, &old));
		rl.max = old.max < v ? old.max : v;
		rl.cur = old.cur < rl.max ? old.cur : rl.max;
		STEP("setting a resource limit", syscall(SYS_prlimit64, 0, c->rlimits[i].resource, &rl, NULL));
	}
	if (c->set_ids) {
		STEP("setting the groups", syscall(SYS_setgroups, c->n_groups, c->groups));
		STEP("setting the gid", syscall(SYS_setresgid, c->gid, c->gid, c->gid));
		STEP("setting the uid", syscall(SYS_setresuid, c->uid, c->uid, c->uid));
	}
	STEP("dropping the capabilities", sandbox_caps_clear());
	if (c->landlock_fd >= 0)
		STEP("enforcing Landlock", syscall(SYS_landlock_restrict_self, c->landlock_fd,
										  sandbox_landlock_restrict_flags));
	if (c->landlock_fd2 >= 0)
		STEP("enforcing Landlock (its second layer)", syscall(SYS_landlock_restrict_self, c->landlock_fd2,
										  sandbox_landlock_restrict_flags));
	return 0;
}
