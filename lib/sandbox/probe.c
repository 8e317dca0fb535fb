/* SPDX-License-Identifier: MIT */
/*
 * What the kernel enforces here, looked at once: the Landlock ABI, seccomp
 * filters, no_new_privs, child subreaper, a cgroup v2 directory calls can
 * be made in (delegated to the daemon, or configured, or a fake one of
 * plain files for tests), private mount namespaces (for the protected
 * paths, and the TMPDIRs where Landlock cannot hide them), changing a
 * child's uid. Also the one reader of the small files
 * the kernel answers in (/proc, cgroupfs) that the sandbox looks at.
 */
#include "lib/sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/seccomp.h>

#include "lib/sandbox/sandbox_internal.h"
#include "proto/base/util.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

/* sandbox_cgroup_fake(): the cgroup directory is plain files. */
static bool cg_fake;

void sandbox_cgroup_fake(bool on)
{
	cg_fake = on;
}

bool sandbox_cgroup_is_fake(void)
{
	return cg_fake;
}

/* Reads a small file the kernel answers in one read. */
ssize_t read_small(int dir_fd, const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return n;
}

static struct sandbox_features features;
static bool probed;

int sandbox_cap_last(void)
{
	static int last = -2;
	if (last == -2) {
		struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
		struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
		char buf[16];
		last = -1;
		if (syscall(SYS_capget, &hdr, data) == 0 && (data[0].effective & (1U << CAP_SETPCAP)))
			last = read_small(AT_FDCWD, "/proc/sys/kernel/cap_last_cap", buf, sizeof(buf)) > 0
				       ? atoi(buf)
				       : 63;
	}
	return last;
}

/* The highest Landlock ABI, or 0. */
static int probe_landlock(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	return abi > 0 ? (int)abi : 0;
}

/* Whether seccomp filters that return an errno can be installed. */
static bool probe_seccomp(void)
{
	uint32_t action = SECCOMP_RET_ERRNO;
	if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0)
		return true;
	/* Before 4.14: no GET_ACTION_AVAIL, but filters may still be there. */
	return errno == EINVAL && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
}

/* Whether a child can have a private mount namespace (needs CAP_SYS_ADMIN;
 * tried in a short-lived child, so the daemon's own namespace is kept). */
static bool probe_mountns(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(syscall(SYS_unshare, CLONE_NEWNS) == 0 ? 0 : 1);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/*
 * Whether a child can protect paths without CAP_SYS_ADMIN: a user
 * namespace of its own mapping only its uid and gid, with a mount
 * namespace where it binds a directory read-only. Tried in a short-lived
 * child the whole way, as calls will do it: unprivileged user namespaces
 * may be off (user.max_user_namespaces 0, a distribution's sysctl), or
 * allowed without the capabilities inside (an LSM's policy).
 */
static bool probe_userns(void)
{
	char uid_map[64], gid_map[64];
	snprintf(uid_map, sizeof(uid_map), "%u %u 1\n", (unsigned)geteuid(), (unsigned)geteuid());
	snprintf(gid_map, sizeof(gid_map), "%u %u 1\n", (unsigned)getegid(), (unsigned)getegid());
	/* A directory with nothing mounted beneath (binding one that has,
	 * such as "/", is refused in a user namespace). */
	const char *t = getenv("TMPDIR");
	_cleanup_free_ char *dir = xasprintf("%s/toolcalld-probe.XXXXXX", t && t[0] == '/' ? t : "/tmp");
	if (!mkdtemp(dir))
		return false;
	pid_t pid = fork();
	if (pid < 0) {
		(void)rmdir(dir);
		return false;
	}
	if (pid == 0) {
		struct statfs st;
		bool ok = syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS) == 0 &&
			  sandbox_userns_map(uid_map, gid_map) == 0 &&
			  mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0 && mount(dir, dir, NULL, MS_BIND, NULL) == 0 &&
			  statfs(dir, &st) == 0 &&
			  mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
				(st.f_flags & MS_NOEXEC), NULL) == 0;
		_exit(ok ? 0 : 1);
	}
	int st;
	int r;
	while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
		;
	(void)rmdir(dir);
	return r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Finds the daemon's cgroup v2 directory: the "0::" line of
 * /proc/self/cgroup under the cgroup2 mount of /proc/self/mountinfo. */
static char *own_cgroup_dir(void)
{
	_cleanup_free_ char *rel = NULL, *mnt = NULL;
	char line[4096];
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			rel = xstrdup(line + 3);
			break;
		}
	fclose(f);
	if (!rel || strstr(rel, "(deleted)"))
		return NULL;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return NULL;
	while (!mnt && fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint options... - fstype source ... */
		char *dash = strstr(line, " - cgroup2 ");
		if (!dash)
			continue;
		char root[1024], point[1024];
		if (sscanf(line, "%*d %*d %*s %1023s %1023s", root, point) == 2 && strcmp(root, "/") == 0)
			mnt = xstrdup(point);
	}
	fclose(f);
	if (!mnt)
		return NULL;
	return strcmp(rel, "/") == 0 ? TAKE_PTR(mnt) : xasprintf("%s%s", mnt, rel);
}

/* Whether calls can get cgroups in dir: a cgroup2 directory where a
 * subdirectory can be made, with cgroup.kill (Linux 5.14). */
static bool probe_cgroup(const char *dir)
{
	_cleanup_free_ char *probe = xasprintf("%s/tc-probe-%d", dir, (int)getpid());
	if (mkdir(probe, 0755) < 0)
		return false;
	_cleanup_free_ char *kill_path = xasprintf("%s/cgroup.kill", probe);
	bool ok = cg_fake || access(kill_path, W_OK) == 0;
	(void)rmdir(probe);
	return ok;
}

/* Whether the controller is enabled for dir's children. */
static bool controller_on(const char *dir, const char *name)
{
	_cleanup_free_ char *path = xasprintf("%s/cgroup.subtree_control", dir);
	char buf[512];
	if (read_small(AT_FDCWD, path, buf, sizeof(buf)) <= 0)
		return false;
	for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n"))
		if (strcmp(tok, name) == 0)
			return true;
	return false;
}

/* Reads a small cgroup file into buf; false when it cannot. */
static bool cg_read(const char *dir, const char *file, char *buf, size_t size)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
	return read_small(AT_FDCWD, path, buf, size) >= 0;
}

static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
			return true;
	return false;
}

/*
 * Under Delegate=yes the daemon's cgroup is its own, but the kernel gives
 * a cgroup's children controllers only while it holds no process itself:
 * the daemon moves into a leaf of its own ("daemon") and enables memory
 * and pids for the calls' cgroups, its siblings. Nothing is done when the
 * controllers are not offered or are on already.
 */
static void enable_controllers(const char *dir)
{
	char avail[512], on[512], members[64];
	if (!cg_read(dir, "cgroup.controllers", avail, sizeof(avail)) ||
	    !cg_read(dir, "cgroup.subtree_control", on, sizeof(on)) ||
	    !cg_read(dir, "cgroup.procs", members, sizeof(members)))
		return;
	/* Only a cgroup the daemon has to itself (a service's): never
	 * rearrange a shared one, such as a login session's. */
	if (strtol(members, NULL, 10) != getpid() || strchr(members, '\n') != members + strlen(members) - 1)
		return;
	struct buf want = {0};
	if (has_word(avail, "memory") && !has_word(on, "memory"))
		buf_puts(&want, "+memory ");
	if (has_word(avail, "pids") && !has_word(on, "pids"))
		buf_puts(&want, "+pids ");
	if (!buf_size(&want))
		return;
	_cleanup_free_ char *leaf = xasprintf("%s/daemon", dir);
	_cleanup_free_ char *procs = xasprintf("%s/daemon/cgroup.procs", dir);
	_cleanup_free_ char *control = xasprintf("%s/cgroup.subtree_control", dir);
	int fd;
	if ((mkdir(leaf, 0755) == 0 || errno == EEXIST) && (fd = open(procs, O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, "0", 1) == 1) {
			int cfd = open(control, O_WRONLY | O_CLOEXEC);
			if (cfd >= 0) {
				(void)!write(cfd, buf_head(&want), buf_size(&want) - 1);
				close(cfd);
			}
		}
		close(fd);
	}
	buf_free(&want);
}

/* Whether open_tree and mount_setattr are there (Linux 5.12): given a
 * bad fd, each answers EBADF, or EPERM without CAP_SYS_ADMIN (the child
 * has it in its user namespace), or nothing at all when asked to change
 * nothing, where a kernel without them answers ENOSYS. */
static bool probe_ro_mounts(void)
{
	struct mount_attr_probe {
		uint64_t attr_set, attr_clr, propagation, userns_fd;
	} a = {0};
	if (syscall(SYS_open_tree, -1, "", AT_EMPTY_PATH) < 0 && errno == ENOSYS)
		return false;
	return syscall(SYS_mount_setattr, -1, "", AT_EMPTY_PATH, &a, sizeof(a)) == 0 || errno != ENOSYS;
}

/* Looks at what the kernel offers, once. */
const struct sandbox_features *sandbox_probe(const char *cgroup_dir)
{
	if (probed)
		return &features;
	probed = true;
	features.landlock_abi = probe_landlock();
	features.seccomp = probe_seccomp();
	features.no_new_privs = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) >= 0;
	features.subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
	features.setid = geteuid() == 0;
	features.mountns = probe_mountns();
	features.userns = !features.mountns && probe_userns();
	features.ro_mounts = (features.mountns || features.userns) && probe_ro_mounts();
	char *dir = cgroup_dir ? (*cgroup_dir ? xstrdup(cgroup_dir) : NULL) : own_cgroup_dir();
	if (dir && probe_cgroup(dir)) {
		if (!cgroup_dir)
			enable_controllers(dir);
		features.cgroup = true;
		features.cgroup_dir = dir;
		features.cgroup_memory = controller_on(dir, "memory");
		features.cgroup_pids = controller_on(dir, "pids");
	} else {
		free(dir);
	}
	return &features;
}

/* Forgets the probe: the next sandbox_probe() looks again. */
void probe_forget(void)
{
	free(features.cgroup_dir);
	features = (struct sandbox_features){0};
	probed = false;
}

/* Says what the kernel enforces, on one line. */
char *sandbox_features_line(const struct sandbox_features *f)
{
	struct buf b = {0};
	buf_puts(&b, "sandbox: ");
	if (f->landlock_abi)
		buf_printf(&b, "landlock ABI %d", f->landlock_abi);
	else
		buf_puts(&b, "landlock: no");
	buf_puts(&b, f->seccomp ? ", seccomp" : ", seccomp: no");
	buf_puts(&b, f->no_new_privs ? ", no_new_privs" : ", no_new_privs: no");
	if (f->cgroup)
		buf_printf(&b, ", cgroup v2 delegated: %s (memory.max: %s, pids.max: %s)", f->cgroup_dir,
			   f->cgroup_memory ? "yes" : "no", f->cgroup_pids ? "yes" : "no");
	else
		buf_puts(&b, ", cgroup v2 delegated: no");
	buf_puts(&b, f->subreaper ? ", subreaper" : ", subreaper: no");
	buf_puts(&b, f->mountns ? ", protect: mount namespace"
			 : f->userns ? ", protect: user namespace" : ", protect: not enforced");
	/* How the other calls' TMPDIRs are hidden (run.c, hide.c): Landlock
	 * only for a peer of another uid, which only a root daemon has. */
	buf_puts(&b, f->ro_mounts ? ", other TMPDIRs: mount namespace (TMPDIR a tmpfs of the call's own)"
		 : f->mountns && f->landlock_abi && f->setid
			 ? ", other TMPDIRs: landlock for other uids (mount namespace for root, the daemon's uid, where protect binds)"
		 : f->mountns ? ", other TMPDIRs: mount namespace"
		 : f->userns ? ", other TMPDIRs: user namespace" : ", other TMPDIRs: modes only");
	buf_puts(&b, f->ro_mounts ? ", outside the writable paths: read-only mounts"
			 : ", outside the writable paths: read-only mounts not enforced");
	buf_puts(&b, f->ro_mounts ? ", unix sockets: /run/user/UID, /run/dbus, /tmp/.X11-unix hidden (others reachable)"
			 : ", unix sockets: not hidden");
	buf_puts(&b, f->landlock_abi >= 6 ? ", abstract unix sockets: scoped" : ", abstract unix sockets: not scoped");
	buf_puts(&b, f->setid ? ", run_as peer: yes" : ", run_as peer: no (not root)");
	buf_puts(&b, sandbox_cap_last() >= 0 ? ", children: no capabilities, bounding set empty, securebits locked"
					     : ", children: no capabilities (bounding set kept: no CAP_SETPCAP)");
	/* Where lib/child/child_spawner.c starts sandboxed children from
	 * (sandbox_child_spawnable()): the same protections either way. */
	if (RUNNING_ON_VALGRIND)
		buf_puts(&b, ", spawner: no (valgrind)");
	else if (f->seccomp && f->no_new_privs)
		buf_puts(&b, ", spawner: yes (bounding set, no_new_privs and seccomp filter set once per filter; "
			     "children of a mount namespace made ahead start from it)");
	else
		buf_puts(&b, ", spawner: no (children set up their sandbox themselves)");
	return buf_steal(&b);
}
