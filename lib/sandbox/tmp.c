/* SPDX-License-Identifier: MIT */
/*
 * Private TMPDIRs. The daemon makes one directory (mode 0711) holding a
 * parent per identity its children run as (mode 0711 too, the daemon's),
 * which the Landlock rules of that identity make writable, and in it a
 * directory "c" (the same) where each call gets a directory of its own
 * (mode 0700, the child's), named by 128 random bits, emptied of all it
 * holds, and itself, when the call ends. So a ruleset serves every call of
 * an identity, no call can list "c" (nor chmod it, unless it runs as the
 * daemon's own uid) or guess a neighbour's name. Where the child has a
 * mount namespace (the protected paths of a workspace exist, or a user
 * namespace is the daemon's way) "c" is covered with an empty tmpfs but
 * for the call's own directory (apply.c): the other calls' TMPDIRs are not
 * there at all. Otherwise, for a daemon running as root, a second
 * Landlock layer grants nothing beneath this whole directory but the
 * call's own TMPDIR (hide.c). ("c" and not the parent itself: Landlock
 * does not look at a rule on a covered mount point, and the rule is on
 * the parent.) Under /var/tmp, directories left by daemons that were
 * killed are removed by the next one (tmp_base_sweep).
 *
 * A daemon running as root first takes a mount namespace of its own
 * (sandbox_private_mounts()) and mounts a tmpfs on its directory of
 * TMPDIRs there: making and removing a call's directory on a journalled
 * disk cost a few hundred microseconds a call; on the tmpfs, a few. The
 * mount is seen by the daemon and its children only, and goes with the
 * daemon, however it ends. Like /dev/shm it may grow to half the memory;
 * what a call keeps there counts in its cgroup's memory.max where one is
 * delegated, and goes when the call ends.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/util.h"

/* How deep a TMPDIR is removed; deeper is left in place. */
#define RM_DEPTH_MAX 128
#define PARENTS_MAX 256

static char *tmp_base;
static int tmp_base_lock = -1;	/* held while the daemon lives */
static bool private_mounts;	/* the daemon's own mount namespace */
static bool base_on_tmpfs;
static struct {
	uid_t uid;
	char *path;
} parents[PARENTS_MAX];
static size_t n_parents;

/* Removes name in parent and, for a directory, all it holds. Never
 * follows a symlink: directories are opened with O_NOFOLLOW. */
static void rm_tree_at(int parent, const char *name, unsigned depth);

bool tmp_empty_dir(int fd)
{
	for (int pass = 0; pass < 2; pass++) {
		int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
		if (!d) {
			if (dup_fd >= 0)
				close(dup_fd);
			return false;
		}
		bool any = false;
		struct dirent *e;
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
				any = true;
				if (pass == 0)
					rm_tree_at(fd, e->d_name, 1);
			}
		closedir(d);
		if (!any)
			return true;
	}
	return false;
}

/* Entries rm_tree_at() may still remove, or -1: no bound. */
static long rm_left = -1;

static void rm_tree_at(int parent, const char *name, unsigned depth)
{
	if (rm_left == 0)
		return;
	if (rm_left > 0)
		rm_left--;
	if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return;
	if (errno == ENOTDIR) {
		(void)unlinkat(parent, name, 0);
		return;
	}
	if (depth >= RM_DEPTH_MAX)
		return;
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			rm_tree_at(dirfd(d), e->d_name, depth + 1);
	closedir(d);
	(void)unlinkat(parent, name, AT_REMOVEDIR);
}

/* Where the directory of TMPDIRs goes: $TMPDIR; else, for a daemon
 * running as root (whose calls hide the other TMPDIRs with Landlock, at a
 * cost per entry of the directories on the way, hide.c), /var/tmp, which
 * holds few entries where /tmp may hold thousands; else /tmp. */
const char *tmp_base_parent(void)
{
	const char *t = getenv("TMPDIR");
	struct stat st;
	if (t && t[0] == '/')
		return t;
	if (geteuid() == 0 && stat("/var/tmp", &st) == 0 && S_ISDIR(st.st_mode))
		return "/var/tmp";
	return "/tmp";
}

int sandbox_private_mounts(void)
{
	if (geteuid() != 0)
		return -EPERM;
	if (!private_mounts) {
		if (unshare(CLONE_NEWNS) < 0)
			return -errno;
		/* Nothing mounted here reaches the namespace the daemon
		 * started in; what is mounted there still reaches here. (The
		 * type is ignored; a string keeps valgrind from reading it as
		 * a bad pointer.) */
		if (mount(NULL, "/", "none", MS_REC | MS_SLAVE, NULL) < 0)
			return -errno;
		private_mounts = true;
		/* Then the children's namespaces can be made ahead. */
		(void)sandbox_nsmaker_start();
	}
	return 0;
}

bool tmp_private_mounts(void)
{
	return private_mounts;
}

/* The daemon's directory of TMPDIRs: made once, mode 0711, so each child
 * can reach its own and list none; named by its canonical path (the
 * Landlock rules of hide.c follow the way to it); locked (flock) while the
 * daemon lives. */
static int tmp_base_get(const char **ret)
{
	if (!tmp_base) {
		const char *parent = tmp_base_parent();
		_cleanup_free_ char *tmpl = xasprintf("%s/toolcalld.%d.XXXXXX", parent, (int)getpid());
		if (!mkdtemp(tmpl))
			return -errno;
		/* The lock is on the directory on the disk, which the sweeps
		 * of other daemons see, not on the tmpfs mounted over it. */
		tmp_base_lock = open(tmpl, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (tmp_base_lock >= 0)
			(void)flock(tmp_base_lock, LOCK_EX | LOCK_NB);
		base_on_tmpfs = private_mounts &&
				mount("tmpfs", tmpl, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0711") == 0;
		char *real = realpath(tmpl, NULL);
		if (!real || chmod(tmpl, 0711) < 0) {
			int e = -errno;
			if (base_on_tmpfs)
				(void)umount2(tmpl, MNT_DETACH | UMOUNT_NOFOLLOW);
			base_on_tmpfs = false;
			(void)rmdir(tmpl);
			free(real);
			if (tmp_base_lock >= 0)
				close(tmp_base_lock);
			tmp_base_lock = -1;
			return e;
		}
		tmp_base = real;
	}
	*ret = tmp_base;
	return 0;
}

/* The directory of TMPDIRs, or NULL before the first call made one. */
const char *tmp_base_path(void)
{
	return tmp_base;
}

/* Finds or makes the TMPDIR parent of an identity: the daemon's, 0711. */
int tmp_parent_get(uid_t uid, const char **ret, char **ret_msg)
{
	for (size_t i = 0; i < n_parents; i++)
		if (parents[i].uid == uid) {
			*ret = parents[i].path;
			return 0;
		}
	const char *base = NULL;
	int r = tmp_base_get(&base);
	_cleanup_free_ char *path = r >= 0 ? xasprintf("%s/u%u", base, (unsigned)uid) : NULL;
	_cleanup_free_ char *calls = r >= 0 ? xasprintf("%s/c", path) : NULL;
	/* chmod: mkdir's mode went through the umask. */
	for (int i = 0; i < 2 && r >= 0; i++)
		if ((mkdir(i ? calls : path, 0711) < 0 && errno != EEXIST) || chmod(i ? calls : path, 0711) < 0)
			r = -errno;
	if (r >= 0 && n_parents == PARENTS_MAX)
		r = -ENOSPC;
	if (r < 0) {
		*ret_msg = xasprintf("Could not make a private TMPDIR: %s", strerror(-r));
		return r;
	}
	parents[n_parents].uid = uid;
	parents[n_parents].path = TAKE_PTR(path);
	*ret = parents[n_parents++].path;
	return 0;
}

/* Names a call's TMPDIR beneath its identity's parent, under a name no
 * other call can guess; made (mkdir) only with make, owned by the child
 * (chown_it) or the daemon. */
int tmp_call_name(const char *parent, uid_t uid, gid_t gid, bool chown_it, bool make, char **ret, char **ret_msg)
{
	uint64_t name[2];
	if (getrandom(name, sizeof(name), 0) != (ssize_t)sizeof(name)) {
		*ret_msg = xasprintf("Could not make a private TMPDIR: no random bytes (%s)", strerror(errno));
		return -EAGAIN;
	}
	char *path = xasprintf("%s/c/%016" PRIx64 "%016" PRIx64, parent, name[0], name[1]);
	int r = make ? tmp_call_mkdir(path, uid, gid, chown_it, ret_msg) : 0;
	if (r < 0) {
		free(path);
		return r;
	}
	*ret = path;
	return 0;
}

int tmp_call_make(const char *parent, uid_t uid, gid_t gid, bool chown_it, char **ret, char **ret_msg)
{
	return tmp_call_name(parent, uid, gid, chown_it, true, ret, ret_msg);
}

/* Makes a TMPDIR named by tmp_call_name(). */
int tmp_call_mkdir(const char *path, uid_t uid, gid_t gid, bool chown_it, char **ret_msg)
{
	int r = 0;
	if (mkdir(path, 0700) < 0)
		r = -errno;
	else if (chown_it && chown(path, uid, gid) < 0)
		r = -errno;
	if (r < 0) {
		*ret_msg = xasprintf("Could not make a private TMPDIR: %s", strerror(-r));
		(void)rmdir(path);
	}
	return r;
}

/* Removes a call's TMPDIR and all it holds. */
void tmp_rm_tree(int parent, const char *name, long max_entries)
{
	rm_left = max_entries;
	rm_tree_at(parent, name, 0);
	rm_left = -1;
}

void tmp_call_rm(const char *path)
{
	if (path)
		rm_tree_at(AT_FDCWD, path, 0);
}

void tmp_call_remove(char *path)
{
	tmp_call_rm(path);
	free(path);
}

/* Removes the directory of TMPDIRs, at exit. */
void tmp_base_remove(void)
{
	for (size_t i = 0; i < n_parents; i++) {
		free(parents[i].path);
	}
	n_parents = 0;
	if (tmp_base) {
		if (base_on_tmpfs)
			(void)umount2(tmp_base, MNT_DETACH | UMOUNT_NOFOLLOW);
		base_on_tmpfs = false;
		rm_tree_at(AT_FDCWD, tmp_base, 0);
		free(tmp_base);
		tmp_base = NULL;
	}
	if (tmp_base_lock >= 0) {
		close(tmp_base_lock);
		tmp_base_lock = -1;
	}
}
