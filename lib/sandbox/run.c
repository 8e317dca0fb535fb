/* SPDX-License-Identifier: MIT */
/*
 * One child's sandbox, from its preparation to its end: what the profile
 * needs and what is missing, the private TMPDIR, the Landlock ruleset made
 * from the kept rules, the seccomp program, the call's cgroup with its
 * limits, the protected paths, the rlimits; how the other calls' TMPDIRs
 * are hidden (a mount namespace where the protected paths need one or a
 * user namespace is the daemon's way, else for a root daemon a second
 * Landlock layer, hide.c); then what was enforced, for the result, and the
 * cleanup (cgroup.kill, rmdir, TMPDIR removed).
 *
 * A call's cgroup that ends empty, its limits never hit, is kept for a
 * later call rather than removed (a few of them): making and removing a
 * cgroup cost a few hundred microseconds a call. It holds no process and
 * no trace of the call that had it; the limits are written again where
 * the next call's differ. It is kept with its open files (the directory,
 * cgroup.procs, cgroup.events, cgroup.kill): a file of a cgroupfs is read
 * again from its start and written again through the same open file, so
 * that a call opens none.
 *
 * This file is long because a child's plan is one sequence whose steps
 * depend on each other (which namespace, which Landlock rules, what the
 * mounts must cover, what is then reported as enforced); the steps that
 * stand alone have their files (landlock.c, seccomp.c, tmp.c, hide.c,
 * apply.c).
 */
#include "lib/sandbox/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "lib/sandbox/sandbox_internal.h"
#include "proto/json.h"
#include "proto/base/strv.h"
#include "proto/base/util.h"

#define ENFORCED_MAX 24

struct sandbox_run {
	enum sandbox_profile profile;
	bool network;
	struct sandbox_net *net;	/* network "proxy" (net.c), or NULL */
	struct sandbox_limits limits;
	char *tmpdir;
	char *cwd;			/* req->cwd, for the note */
	char *cgroup;
	int cgroup_fd;
	int events_fd, kill_fd;		/* its cgroup.events and cgroup.kill, or -1 */
	int64_t cg_memory_max;		/* what its files hold: bytes, 0 "max", */
	int64_t cg_pids_max;		/* -1 never written */
	int hide_fd;
	int spare_fd;			/* a layer made ahead (spare_take), or -1 */
	int mntns_fd;			/* a mount namespace made ahead (nspool.c), or -1 */
	int ns_wd;			/* the watch on its TMPDIR, or -1 */
	int tmp_fd;			/* its TMPDIR's tmpfs, as its child sees it, or -1 */
	char *ns_key;			/* its plan, to ask for the next call's */
	uint64_t ns_born_ms;		/* when the namespace was first made */
	bool ns_clean;			/* nothing of the call ran when it ended */
	bool tmp_made;			/* the TMPDIR exists in the daemon's namespace */
	bool spawned;			/* its child started */
	bool empty_at_exit;		/* its cgroup held nothing once the leader had exited */
	pid_t pid;			/* its child's, once started, or 0 */
	unsigned spare_gen;
	uid_t uid;			/* the child's, and its parent of TMPDIRs */
	gid_t gid;
	const char *tmp_uid_parent;
	struct sandbox_child child;
	char **binds;
	char **ro_binds;
	char **writable;
	char **hide_dirs;
	struct stat hide_st[3];		/* sockets_plan()'s lstat of each, for nspool_key() */
	char **covers;
	const struct ll_rules *rules;	/* held: its note replays them */
	bool split_writable;		/* a writable directory holding a denied path is not writable itself */
	gid_t *groups;
	char *tmp_parent;
	char tmp_opts[96];
	char uid_map[32];
	char gid_map[32];
	struct plan *plan;		/* the kept plan binds, ro_binds, writable,
					 * hide_dirs and covers are of, or NULL */
	char **deps;			/* the paths the plan looked at (plan.c watches) */
	const char *enforced[ENFORCED_MAX];
	unsigned n_enforced;
	const char *not_enforced[ENFORCED_MAX];
	unsigned n_not_enforced;
};

static uint64_t seq;

/* Empty cgroups kept for later calls. */
#define CG_KEPT_MAX 8
static struct cg_kept {
	char *path;
	int fd, procs_fd, events_fd, kill_fd;
	int64_t memory_max, pids_max;
} cg_kept[CG_KEPT_MAX];
static unsigned n_cg_kept;
static void cg_kept_clear(void);
/* Runs ended whose next calls are still to be prepared (sandbox_ahead()):
 * asking the maker for the next namespace wakes it, and making the next
 * TMPDIR costs a few system calls, which need not delay the answer. */
#define AHEAD_MAX 8
static struct sandbox_run *ahead[AHEAD_MAX];
static unsigned n_ahead;
static void run_ahead(struct sandbox_run *run);
/* Cgroups that still had processes when their call ended: removed later. */
static char **pending_rmdir;

/* A TMPDIR and the Landlock layer hiding the others, made for an identity
 * ahead of its next call, while this one's child runs (building the layer
 * takes some forty system calls): one per identity, a few identities. */
#define SPARES_MAX 8
static struct spare {
	uid_t uid;
	gid_t gid;
	char *tmpdir;
	int fd;
	unsigned gen;			/* hide_ruleset()'s, to know it holds */
} spares[SPARES_MAX];
static unsigned n_spares;
static void spares_clear(void);

/*
 * The plans of recent calls, kept for the next calls of the same request
 * (identity, profile, workspaces and the config's lists): the Landlock
 * rules, the protected paths found or made, the read-only mounts' plan,
 * the hidden socket directories and the mount namespace's key. Making
 * them costs some fifty system calls (the repositories' git directories
 * opened and read, each protected path looked up); a kept one is checked
 * with one read of each inotify fd (plan.c, repos.c) and an lstat() of
 * each workspace and socket directory. Only the request with no
 * write_extra or unix_sockets (resolved through links at each call) is
 * kept; a reload drops them all.
 */
#define PLANS_MAX 8
#define SOCKET_DIRS 3
struct dev_ino {
	bool dir;
	dev_t dev;
	ino_t ino;
};
struct plan {
	unsigned refs;
	/* What it is for. */
	enum sandbox_profile profile;
	int cover;			/* ll_rules_get()'s */
	bool change;			/* the identity's (the rules deny both homes) */
	uid_t uid;
	gid_t gid;
	int64_t tmp_mb;
	char *home;
	char *tmp_parent;
	char **workspaces, **protect, **read_only, **deny_read;
	/* What it found, and how things stood when it was made. */
	uint64_t watch_gen, repos_gen;
	struct dev_ino *ws_id;
	struct dev_ino sock[SOCKET_DIRS];
	const struct ll_rules *rules;
	char **binds, **ro_binds, **covers, **writable, **hide_dirs;
	struct stat hide_st[SOCKET_DIRS];
	char *ns_key;
};
static struct plan *plans[PLANS_MAX];
static unsigned n_plans;
static void plans_clear(void);

static void strv_push(char ***v, char *s)
{
	size_t n = 0;
	while (*v && (*v)[n])
		n++;
	*v = xreallocarray(*v, n + 2, sizeof(**v));
	(*v)[n] = s;
	(*v)[n + 1] = NULL;
}

static bool strv_has(char **v, const char *s)
{
	for (; v && *v; v++)
		if (strcmp(*v, s) == 0)
			return true;
	return false;
}

void sandbox_cache_clear(void)
{
	sandbox_ahead();
	nspool_clear(false);
	repos_clear();
	spares_clear();
	cg_kept_clear();
	ll_cache_clear();
	hide_clear();
	seccomp_cache_clear();
	plans_clear();
	sandbox_program_cache_clear();
}

static void rmdir_pending(void);

/* Removes what the daemon made for its calls: the directory of TMPDIRs,
 * the cgroups left busy; drops the caches and forgets the probe. */
void sandbox_shutdown(void)
{
	sandbox_cache_clear();
	nspool_clear(true);
	rmdir_pending();
	tmp_base_remove();
	sandbox_netns_shutdown();
	probe_forget();
}

static void note(struct sandbox_run *run, bool enforced, const char *what)
{
	if (enforced && run->n_enforced < ENFORCED_MAX)
		run->enforced[run->n_enforced++] = what;
	else if (!enforced && run->n_not_enforced < ENFORCED_MAX)
		run->not_enforced[run->n_not_enforced++] = what;
}

/* Adds an rlimit, cut to the daemon's own hard limit (a child cannot be
 * given more than the daemon has). */
static void add_rlimit(struct sandbox_child *c, int resource, int64_t value, uint64_t unit)
{
	/* The daemon's hard limits, looked up once: they do not change. */
	static struct rlimit max[RLIM_NLIMITS];
	static bool known[RLIM_NLIMITS];
	uint64_t v = (uint64_t)value * unit;
	if (!known[resource] && getrlimit(resource, &max[resource]) == 0)
		known[resource] = true;
	if (known[resource] && max[resource].rlim_max != RLIM_INFINITY && v > max[resource].rlim_max)
		v = max[resource].rlim_max;
	c->rlimits[c->n_rlimits].resource = resource;
	c->rlimits[c->n_rlimits].value = v;
	c->n_rlimits++;
}

/* Opens a control file of the call's cgroup for writing (a fake one's is
 * made, or emptied, by each write, as a cgroupfs file holds only the last). */
static int cg_open(int dir_fd, const char *file)
{
	return openat(dir_fd, file, O_WRONLY | O_CLOEXEC | (sandbox_cgroup_is_fake() ? O_CREAT | O_TRUNC : 0), 0644);
}

/* Writes a value into a control file of the call's cgroup. */
static int cg_write(int dir_fd, const char *file, const char *value)
{
	_cleanup_close_ int fd = cg_open(dir_fd, file);
	if (fd < 0)
		return -errno;
	if (write(fd, value, strlen(value)) < 0)
		return -errno;
	return 0;
}

/* A fake cgroup is no cgroupfs, where rmdir takes the control files with
 * it: each file goes, its content appended to "writes.log" beside the
 * call's directory as "name=content", for the test to read. */
static void cg_fake_empty(const char *cgroup)
{
	_cleanup_free_ char *log = xasprintf("%s/../writes.log", cgroup);
	static const char *const files[] = { "cgroup.procs", "memory.max", "pids.max", "cgroup.kill", "cgroup.events" };
	FILE *out = fopen(log, "ae");
	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		_cleanup_free_ char *path = xasprintf("%s/%s", cgroup, files[i]);
		char buf[64];
		if (read_small(AT_FDCWD, path, buf, sizeof(buf)) < 0)
			continue;
		if (out)
			fprintf(out, "%s=%s\n", files[i], buf);
		(void)unlink(path);
	}
	if (out)
		fclose(out);
}

/* Writes a limit into a control file of the call's cgroup unless it holds
 * it already (a kept cgroup): want 0 is "max". True when it holds it. */
static bool cg_limit(struct sandbox_run *run, const char *file, int64_t *has, int64_t want)
{
	char v[32];
	if (*has == want)
		return true;
	if (want > 0)
		snprintf(v, sizeof(v), "%" PRId64, want);
	else
		snprintf(v, sizeof(v), "max");
	*has = -1;
	if (cg_write(run->cgroup_fd, file, v) < 0)
		return false;
	*has = want;
	return true;
}

/* Makes the call's cgroup (or takes a kept one), with memory.max and
 * pids.max where the controllers are on. It is named "tc-PID-START-N" by
 * the daemon's pid and start time: a daemon that finds it after this one
 * died without removing it knows it is no live daemon's (reap.c). */
static int cgroup_make(struct sandbox_run *run, const struct sandbox_features *f, char **ret_msg)
{
	bool kept = n_cg_kept > 0;
	if (kept) {
		struct cg_kept *k = &cg_kept[--n_cg_kept];
		run->cgroup = k->path;
		run->cgroup_fd = k->fd;
		run->child.cgroup_procs_fd = k->procs_fd;
		run->events_fd = k->events_fd;
		run->kill_fd = k->kill_fd;
		run->cg_memory_max = k->memory_max;
		run->cg_pids_max = k->pids_max;
	} else {
		run->cgroup = xasprintf("%s/tc-%d-%" PRIu64 "-%" PRIu64, f->cgroup_dir, (int)getpid(),
					sandbox_self_start(), ++seq);
		run->cg_memory_max = run->cg_pids_max = -1;
		/* One left by an earlier daemon of the same pid, in a shared
		 * directory: the next name. */
		int made;
		for (int i = 0; (made = mkdir(run->cgroup, 0755)) < 0 && errno == EEXIST && i < 16; i++) {
			free(run->cgroup);
			run->cgroup = xasprintf("%s/tc-%d-%" PRIu64 "-%" PRIu64, f->cgroup_dir, (int)getpid(),
					sandbox_self_start(), ++seq);
		}
		if (made < 0) {
			int e = -errno;
			*ret_msg = xasprintf("Could not make the call's cgroup %s: %s", run->cgroup, strerror(-e));
			free(run->cgroup);
			run->cgroup = NULL;
			return e;
		}
	}
	if (run->cgroup_fd < 0)
		run->cgroup_fd = open(run->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (run->cgroup_fd >= 0 && run->child.cgroup_procs_fd < 0)
		run->child.cgroup_procs_fd = cg_open(run->cgroup_fd, "cgroup.procs");
	if (run->cgroup_fd < 0 || run->child.cgroup_procs_fd < 0) {
		*ret_msg = xasprintf("Could not open the call's cgroup %s: %s", run->cgroup, strerror(errno));
		return -errno;
	}
	/* The kernel's file, for a fake cgroup to be kept like one. */
	if (!kept && sandbox_cgroup_is_fake())
		(void)cg_write(run->cgroup_fd, "cgroup.events", "populated 0\n");
	/* Held open to be read and written again (not a fake cgroup's: each
	 * of its writes makes its file anew). */
	if (!kept && !sandbox_cgroup_is_fake()) {
		run->events_fd = openat(run->cgroup_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
		run->kill_fd = openat(run->cgroup_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC);
	}
	run->child.cgroup_fd = run->cgroup_fd;
	note(run, true, "cgroup");
	const struct sandbox_limits *l = &run->limits;
	if (f->cgroup_memory &&
	    cg_limit(run, "memory.max", &run->cg_memory_max, l->memory_mb > 0 ? l->memory_mb * 1024 * 1024 : 0) &&
	    l->memory_mb > 0)
		note(run, true, "memory.max");
	if (f->cgroup_pids && cg_limit(run, "pids.max", &run->cg_pids_max, l->pids > 0 ? l->pids : 0) && l->pids > 0)
		note(run, true, "pids.max");
	return 0;
}

/* Adds a protected path that exists to the plan: read-only, with the
 * directories on its way from its repository's directory (base) bound
 * onto themselves, so that they cannot be renamed away with what they
 * hold. */
static void protect_add(struct sandbox_run *run, const char *ws, char *full)
{
	size_t len = strlen(full);
	while (len > 1 && full[len - 1] == '/')
		full[--len] = '\0';
	for (char *s = full + strlen(ws) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (!strv_has(run->binds, full))
			strv_push(&run->binds, xstrdup(full));
		*s = '/';
	}
	if (!strv_has(run->ro_binds, full))
		strv_push(&run->ro_binds, xstrdup(full));
}

/* The directories on the way from a workspace to each covered path (a
 * deny_read path beneath it: the daemon's config, tools directory, audit
 * log, socket) bound onto themselves, as protect_add does: a child could
 * otherwise rename one away, the cover with it, and put its own config or
 * tool files at the daemon's path for its next reload. */
static void covers_pin(struct sandbox_run *run, const struct sandbox_req *req)
{
	for (char **p = run->covers; p && *p; p++)
		for (const char *const *w = req->workspaces; w && *w; w++) {
			size_t n = strlen(*w);
			if (strncmp(*p, *w, n) != 0 || (*p)[n] != '/')
				continue;
			strv_push(&run->deps, xstrdup(*p));
			_cleanup_free_ char *full = xstrdup(*p);
			for (char *s = full + n + 1; (s = strchr(s, '/')); s++) {
				*s = '\0';
				if (!strv_has(run->binds, full))
					strv_push(&run->binds, xstrdup(full));
				*s = '/';
			}
			break;
		}
}

/* The daemon's own paths beneath a workspace (its config's directory, with
 * what it holds next to the config: tool files, hook scripts), read-only
 * and kept in place as a protected path is. */
static void read_only_plan(struct sandbox_run *run, const struct sandbox_req *req)
{
	for (const char *const *p = req->read_only; p && *p; p++)
		for (const char *const *w = req->workspaces; w && *w; w++) {
			size_t n = strlen(*w);
			struct stat st;
			if (strncmp(*p, *w, n) != 0 || (*p)[n] != '/')
				continue;
			strv_push(&run->deps, xstrdup(*p));
			if (lstat(*p, &st) < 0 || S_ISLNK(st.st_mode))
				break;
			_cleanup_free_ char *full = xstrdup(*p);
			protect_add(run, *w, full);
			break;
		}
}

/*
 * What a missing protected path is made as, so that a read-only mount can
 * hold its place (a mount needs a place): an empty directory for the
 * entries git keeps as directories (hooks, info, modules) or an entry
 * written with a final "/", an empty file for "config" (git reads an
 * empty config as one with nothing set), a "commondir" naming the
 * directory it is in (git refuses an empty one; "." is the common
 * directory a repository without one has); 0 for the rest.
 */
static int stub_kind(const char *rel)
{
	size_t n = strlen(rel);
	const char *base = strrchr(rel, '/');
	base = base ? base + 1 : rel;
	if (n && rel[n - 1] == '/')
		return 'd';
	if (strcmp(base, "hooks") == 0 || strcmp(base, "info") == 0 || strcmp(base, "modules") == 0)
		return 'd';
	if (strcmp(base, "commondir") == 0)
		return 'c';
	return strcmp(base, "config") == 0 ? 'f' : 0;
}

/*
 * Makes a missing protected path, empty, at rel beneath the workspace
 * opened as wsfd, so that it can be mounted over read-only: a call cannot
 * then make it itself. The daemon is root here and the workspace hostile:
 * the parent is reached from wsfd one directory at a time following no
 * link (repos_open_below()), the stub made relative to the parent's fd
 * (mkdirat(), or openat() O_CREAT | O_EXCL, nothing followed at the end),
 * then given the parent's owner and its own mode (0755, 0644) through its
 * fd, and only if the daemon made it: a link anywhere on the way, now or
 * put there meanwhile, makes nothing. True when it exists now.
 */
static bool protect_stub(int wsfd, const char *rel, int kind)
{
	_cleanup_free_ char *parent = xstrdup(rel);
	size_t len = strlen(parent);
	while (len > 1 && parent[len - 1] == '/')
		parent[--len] = '\0';
	char *slash = strrchr(parent, '/');
	const char *name = slash ? slash + 1 : parent;
	if (slash)
		*slash = '\0';
	if (wsfd < 0 || !*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	_cleanup_close_ int dfd = slash ? repos_open_below(wsfd, parent) : fcntl(wsfd, F_DUPFD_CLOEXEC, 3);
	struct stat ds, st;
	if (dfd < 0 || fstat(dfd, &ds) < 0)
		return false;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return true;
	if (kind == 'd' && mkdirat(dfd, name, 0755) < 0)
		return errno == EEXIST;
	_cleanup_close_ int fd = kind == 'd' ? openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
					      : openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return kind != 'd' && errno == EEXIST;
	if (kind == 'c' && write(fd, ".\n", 2) != 2)
		return true;	/* made, if not filled: still held */
	/* What stands there now is the daemon's (not a directory put in
	 * the place of the one it made): its owner and mode. */
	if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && (kind == 'd') == !!S_ISDIR(st.st_mode)) {
		(void)fchown(fd, ds.st_uid, ds.st_gid);
		(void)fchmod(fd, kind == 'd' ? 0755 : 0644);
	}
	return true;
}

/* The workspace ws's rel (full is ws/rel) exists, or its stub of kind
 * could be made (protect_stub(), through rd's fd of the workspace). */
static bool protect_held(struct repo_dirs *rd, const char *ws, const char *full, int kind)
{
	struct stat st;
	if (lstat(full, &st) == 0)
		return true;
	size_t n = strlen(ws);
	if (!kind || strncmp(full, ws, n) != 0 || full[n] != '/')
		return false;
	if (rd->ws_fd < 0)
		rd->ws_fd = repos_open_ws(ws);
	return protect_stub(rd->ws_fd, full + n + 1, kind);
}

/*
 * Lists the protected paths of each workspace that exist, to be mounted
 * read-only: an entry beneath .git in the repository's git directory and
 * in each of its submodules' (.git/modules/NAME), the others beneath the
 * workspace. A mount needs a place, and no kernel mechanism refuses one
 * name in a directory that stays writable (Landlock grants by hierarchy,
 * seccomp sees no paths; git makes its lock files in .git): so a missing
 * entry git would follow (hooks, info, modules, config, commondir) is
 * made empty first (protect_stub()) and held like one that exists, the
 * one change the sandbox makes to a repository, and only beneath the
 * workspace (no link followed); a workspace without a repository gets an
 * empty .git, held read-only whole, where the child has a mount namespace
 * (ns). missing_out says that a path could be neither found nor made.
 */
static void protect_plan(struct sandbox_run *run, const struct sandbox_req *req, bool ns, bool *missing_out)
{
	bool git = false;
	for (const char *const *p = req->protect; p && *p && !git; p++)
		git = strncmp(*p, ".git/", 5) == 0;
	for (const char *const *w = req->workspaces; w && *w; w++) {
		/* A .git file (a "gitdir:" pointer, in a linked worktree or a
		 * submodule) sends git elsewhere: held with the paths beneath
		 * .git (sandbox_protected()). */
		struct repo_dirs rd = { .ws_fd = -1 };
		if (git) {
			repos_get(*w, &rd);
			/* What the plan depends on: the workspace's .git, and
			 * each repository's .git and submodules. */
			strv_push(&run->deps, xasprintf("%s/.git", *w));
			for (size_t i = 0; i < rd.n; i++) {
				size_t k = strlen(rd.git[i]);
				if (k >= 5 && strcmp(rd.git[i] + k - 5, "/.git") == 0)
					strv_push(&run->deps, xasprintf("%s/modules/", rd.git[i]));
			}
		}
		/* A workspace that cannot be opened following no link gets
		 * no stub: said. */
		if (git && rd.ws_fd < 0)
			*missing_out = true;
		if (rd.top_file) {
			char *dot_git = xasprintf("%s/.git", *w);
			if (strv_has(run->ro_binds, dot_git))
				free(dot_git);
			else
				strv_push(&run->ro_binds, dot_git);
		}
		/* No repository at the top: a call could make one there, its
		 * hooks and config included, that git would run outside the
		 * sandbox at the user's next command. Its place is held by an
		 * empty .git directory, read-only to the child (git takes an
		 * empty .git for no repository, and looks on above); made
		 * only where a mount will hold it. */
		if (git && rd.top_none && ns) {
			_cleanup_free_ char *dot_git = xasprintf("%s/.git", *w);
			strv_push(&run->deps, xasprintf("%s/.git/", *w));
			if (rd.top_stub || protect_stub(rd.ws_fd, ".git", 'd'))
				protect_add(run, *w, dot_git);
			else if (errno != EROFS && (errno != EACCES || geteuid() == 0))
				*missing_out = true;	/* what the child could make */
		}
		for (const char *const *p = req->protect; p && *p; p++) {
			if (!**p || **p == '/' || strstr(*p, ".."))
				continue;
			bool under_git = strncmp(*p, ".git/", 5) == 0;
			for (size_t i = 0; under_git && i < rd.n; i++) {
				_cleanup_free_ char *full = xasprintf("%s/%s", rd.git[i], *p + 5);
				strv_push(&run->deps, xstrdup(full));
				if (protect_held(&rd, *w, full, stub_kind(*p + 5)))
					protect_add(run, rd.base[i], full);
				else if (i == 0 && rd.n_top)
					*missing_out = true;
			}
			/* Beneath no .git, or a .git file, nothing exists, and
			 * nothing is made (the stubs are for a git directory
			 * found); a .git link is followed. */
			if (under_git && (rd.n_top || rd.top_none || rd.top_file))
				continue;
			_cleanup_free_ char *full = xasprintf("%s/%s", *w, *p);
			strv_push(&run->deps, xstrdup(full));
			if (protect_held(&rd, *w, full, under_git ? 0 : stub_kind(*p)))
				protect_add(run, *w, full);
		}
		for (size_t i = 0; i < rd.n_pointers; i++)
			if (!strv_has(run->ro_binds, rd.pointers[i]))
				strv_push(&run->ro_binds, xstrdup(rd.pointers[i]));
		repo_dirs_clear(&rd);
	}
}

static int by_length(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? -1 : la > lb;
}

/*
 * Lists the paths the profile makes writable (the workspaces and
 * write_extra for workspace-write, canonical, parents first), which the
 * child keeps as they are while it makes every other mount read-only
 * (apply.c). False when that cannot be: "/" is one of them, or too many.
 */
static bool readonly_plan(struct sandbox_run *run, const struct sandbox_req *req)
{
	if (req->profile == SANDBOX_WORKSPACE_WRITE) {
		const char *home = req->id && (req->id->change || req->id->home) ? req->id->home : getenv("HOME");
		for (const char *const *p = req->workspaces; p && *p; p++)
			if (!strv_has(run->writable, *p))
				strv_push(&run->writable, xstrdup(*p));
		const char *const *extra[] = { req->write_extra, req->write_extra_tool };
		for (size_t i = 0; i < ELEMENTSOF(extra); i++)
			for (const char *const *p = extra[i]; p && *p; p++) {
				char *c = ll_canonical(*p, home);
				if (c && !strv_has(run->writable, c))
					strv_push(&run->writable, c);
				else
					free(c);
			}
	}
	size_t n = 0;
	for (; run->writable && run->writable[n]; n++)
		if (strcmp(run->writable[n], "/") == 0)
			return false;
	if (n > SANDBOX_WRITABLE_MAX)
		return false;
	if (!run->writable)
		run->writable = xcalloc(1, sizeof(char *));
	qsort(run->writable, n, sizeof(char *), by_length);
	return true;
}

/* Whether path is dir or beneath it. */
static bool is_beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/'));
}

/* The directories of sockets sockets_plan() may hide, for uid. */
static void socket_dirs(uid_t uid, char runtime[static 48], const char *ret[static SOCKET_DIRS])
{
	snprintf(runtime, 48, "/run/user/%u", (unsigned)uid);
	ret[0] = runtime;
	ret[1] = "/run/dbus";
	ret[2] = "/tmp/.X11-unix";
}

/* The home "~/" stands for in the rules (ll_rules_get()). */
static const char *req_home(const struct sandbox_req *req)
{
	return req->id && (req->id->change || req->id->home) ? req->id->home : getenv("HOME");
}

/*
 * Lists the directories of sockets the child should not reach, to be
 * covered with an empty read-only tmpfs in its namespace: the runtime
 * directory of its uid (the session bus, ssh-agent and gpg-agent of
 * systemd --user, the user's systemd itself), the system bus and the X
 * server's; each where it is a directory, holds no writable path, and
 * sandbox.unix_sockets names nothing in it. (A pathname socket on a
 * read-only mount still connects: only its absence stops a connect.)
 */
static void sockets_plan(struct sandbox_run *run, const struct sandbox_req *req, uid_t uid)
{
	char runtime[48];
	const char *dirs[SOCKET_DIRS];
	socket_dirs(uid, runtime, dirs);
	const char *home = req_home(req);
	size_t n = 0;
	_Static_assert(ELEMENTSOF(dirs) <= ELEMENTSOF(run->hide_st), "a stat for each directory");
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		struct stat st;
		bool keep = lstat(dirs[i], &st) == 0 && S_ISDIR(st.st_mode) && !is_beneath(run->tmpdir, dirs[i]);
		for (char **w = run->writable; keep && w && *w; w++)
			keep = !is_beneath(*w, dirs[i]) && !is_beneath(dirs[i], *w);
		for (const char *const *u = req->unix_sockets; keep && u && *u; u++) {
			_cleanup_free_ char *c = ll_canonical(*u, home);
			keep = !c || !is_beneath(c, dirs[i]);
		}
		if (keep) {
			strv_push(&run->hide_dirs, xstrdup(dirs[i]));
			run->hide_st[n++] = st;
		}
	}
}

/* Whether the first Landlock layer makes path (a workspace or write_extra
 * entry, "~/" being home) writable where the hiding layer would not: the
 * directory of TMPDIRs or one on the way to it. */
static bool writable_on_the_way(const char *base, const char *path, const char *home)
{
	_cleanup_free_ char *abs = NULL;
	if (path[0] == '~' && (path[1] == '/' || !path[1])) {
		if (!home || home[0] != '/')
			return false;
		abs = xasprintf("%s%s", home, path + 1);
		path = abs;
	}
	/* As the first layer takes it: through its links, where it exists. */
	_cleanup_free_ char *real = realpath(path, NULL);
	return hide_covers(base, path) || (real && hide_covers(base, real));
}

/*
 * Hides the other calls' TMPDIRs with a second Landlock layer (hide.c)
 * instead of a mount namespace, for a child the modes of the daemon's
 * directories keep out (neither root nor the daemon's uid: an ordinary
 * user of a root daemon), when nothing the profile makes writable is on
 * the way to them and the way is not crowded. The directories on the way
 * stay listable (Landlock cannot take that back from the directory of
 * TMPDIRs beneath them; its mode 0711 does). A child that could list it
 * anyway (root passes any mode, the daemon's uid owns it) would have to be
 * refused "/" and all on the way, so it keeps the namespace, and full
 * function. False: the caller uses the namespace.
 */
static bool hide_by_landlock(struct sandbox_run *run, const struct sandbox_req *req,
			     const struct sandbox_features *f, uid_t child_uid)
{
	const char *base = tmp_base_path();
	if (!base || child_uid == 0 || child_uid == geteuid())
		return false;
	const char *home = req->id && (req->id->change || req->id->home) ? req->id->home : getenv("HOME");
	if (req->profile == SANDBOX_WORKSPACE_WRITE) {
		const char *const *lists[] = { req->workspaces, req->write_extra, req->write_extra_tool };
		for (size_t i = 0; i < ELEMENTSOF(lists); i++)
			for (const char *const *p = lists[i]; p && *p; p++)
				if (writable_on_the_way(base, *p, home))
					return false;
	}
	int fd;
	struct sandbox_child *c = &run->child;
	if (run->spare_fd >= 0 && hide_still(base, f->landlock_abi, run->spare_gen))
		fd = TAKE_FD(run->spare_fd);
	else if (hide_ruleset(base, run->tmpdir, f->landlock_abi, &fd, NULL) < 0)
		return false;
	/* landlock_fd is enforced first, and the spawn keeps the fds up to
	 * it: this layer goes there, above the first layer's fd. In that
	 * order the kernel copies the first layer's rules once (merging them
	 * into the domain) and not twice (inheriting them again into the
	 * domain of a later layer): that layer may hold thousands of rules. */
	if (fd < c->landlock_fd) {
		int high = fcntl(fd, F_DUPFD_CLOEXEC, c->landlock_fd + 1);
		close(fd);
		if (high < 0)
			return false;
		fd = high;
	}
	run->hide_fd = fd;
	c->landlock_fd2 = c->landlock_fd;
	c->landlock_fd = fd;
	return true;
}

/* Takes the spare made for an identity, if any: its TMPDIR, and its
 * layer's fd (-1 when none). */
static struct spare spare_take(uid_t uid, gid_t gid)
{
	for (unsigned i = 0; i < n_spares; i++)
		if (spares[i].uid == uid && spares[i].gid == gid) {
			struct spare sp = spares[i];
			spares[i] = spares[--n_spares];
			return sp;
		}
	return (struct spare){ .fd = -1 };
}

/*
 * Opens the tmpfs of limits.tmp_mb that is the TMPDIR of the child pid,
 * which runs its program by now (it was started with CLONE_VFORK): in its
 * mount namespace, where everything on the way is read-only, so that the
 * daemon can see at the call's end whether it filled it
 * (sandbox_run_tmp_hit()). A namespace made ahead came with it already
 * (nspool.c). Where it cannot (the child gone already), stderr's words
 * decide as before.
 */
static void tmp_watch(struct sandbox_run *run, pid_t pid)
{
	char path[PATH_MAX];
	struct statfs sf;
	if (!run->child.tmp_opts || !run->tmpdir || pid <= 0 || run->tmp_fd >= 0 ||
	    snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, run->tmpdir) >= (int)sizeof(path))
		return;
	int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstatfs(fd, &sf) == 0 && sf.f_type == TMPFS_MAGIC)
		run->tmp_fd = fd;
	else if (fd >= 0)
		close(fd);
}

void sandbox_run_set_pid(struct sandbox_run *run, pid_t pid)
{
	if (run) {
		run->pid = pid;
		tmp_watch(run, pid);
	}
	/* What its tasks try of the network, without any or past the
	 * proxy (netnotif.c). */
	if (run && !run->network)
		sandbox_netnotif_watch(pid, run->cgroup, run->net != NULL, sandbox_net_diag_fd(run->net));
}

/* Makes the next call's TMPDIR and layer for the identity of a call that
 * was hidden by the layer, now that its child runs. */
void sandbox_run_spawned(struct sandbox_run *run)
{
	if (run)
		run->spawned = true;
	if (!run || run->hide_fd < 0 || n_spares == SPARES_MAX || !run->tmp_uid_parent)
		return;
	for (unsigned i = 0; i < n_spares; i++)
		if (spares[i].uid == run->uid && spares[i].gid == run->gid)
			return;
	struct spare sp = { .uid = run->uid, .gid = run->gid, .fd = -1 };
	_cleanup_free_ char *msg = NULL;
	if (tmp_call_make(run->tmp_uid_parent, sp.uid, sp.gid, true, &sp.tmpdir, &msg) < 0)
		return;
	if (hide_ruleset(tmp_base_path(), sp.tmpdir, sandbox_probe(NULL)->landlock_abi, &sp.fd, &sp.gen) < 0) {
		tmp_call_remove(sp.tmpdir);
		return;
	}
	spares[n_spares++] = sp;
}

/* Removes the spares (on reload and at exit). */
static void spares_clear(void)
{
	while (n_spares) {
		struct spare *sp = &spares[--n_spares];
		close(sp->fd);
		tmp_call_remove(sp->tmpdir);
	}
}

/* Drops a hold of a kept plan (the cache's, or a run's); frees it with the
 * last. */
static struct plan *plan_unref(struct plan *pl)
{
	if (!pl || --pl->refs)
		return NULL;
	free(pl->home);
	free(pl->tmp_parent);
	strv_free(pl->workspaces);
	strv_free(pl->protect);
	strv_free(pl->read_only);
	strv_free(pl->deny_read);
	free(pl->ws_id);
	ll_rules_release(pl->rules);
	strv_free(pl->binds);
	strv_free(pl->ro_binds);
	strv_free(pl->covers);
	strv_free(pl->writable);
	strv_free(pl->hide_dirs);
	free(pl->ns_key);
	free(pl);
	return NULL;
}

/* Drops every kept plan and the watches (on reload and at exit). */
static void plans_clear(void)
{
	while (n_plans) {
		n_plans--;
		plans[n_plans] = plan_unref(plans[n_plans]);
	}
	plan_watch_clear();
}

/* Whether two string vectors (either NULL for none) hold the same. */
static bool strv_same(char *const *a, const char *const *b)
{
	for (; a && *a && b && *b; a++, b++)
		if (strcmp(*a, *b) != 0)
			return false;
	return !(a && *a) && !(b && *b);
}

/* Notes whether path is a directory, and which (lstat). */
static void dev_ino_of(const char *path, struct dev_ino *ret)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		*ret = (struct dev_ino){ .dir = false };
	else
		*ret = (struct dev_ino){ .dir = S_ISDIR(st.st_mode), .dev = st.st_dev, .ino = st.st_ino };
}

static bool dev_ino_eq(const struct dev_ino *a, const struct dev_ino *b)
{
	return a->dir == b->dir && (!a->dir || (a->dev == b->dev && a->ino == b->ino));
}

/* A copy of a key of nspool_key() (a length, then the bytes). */
static char *key_dup(const char *key)
{
	size_t n;
	memcpy(&n, key, sizeof(n));
	return xmemdup(key, sizeof(n) + n);
}

/* How things stand now for a plan of the request: taken before it is made
 * or checked. */
struct plan_now {
	uint64_t watch_gen, repos_gen;
	struct dev_ino *ws_id;
	struct dev_ino sock[SOCKET_DIRS];
};

/* Whether plans can be kept for the request: a profile whose child gets a
 * mount namespace made ahead, read-only but for its writable paths, and
 * nothing resolved through links at each call. */
static bool plan_keepable(const struct sandbox_req *req, const struct sandbox_features *f)
{
	return req->profile != SANDBOX_OFF && f->mountns && f->ro_mounts && f->landlock_abi &&
	       !(req->write_extra && *req->write_extra) && !(req->write_extra_tool && *req->write_extra_tool) &&
	       !(req->unix_sockets && *req->unix_sockets) && req->workspaces && *req->workspaces;
}

/* Takes how things stand now for the request's plan. */
static void plan_now_take(struct plan_now *now, const struct sandbox_req *req, uid_t uid)
{
	size_t n = 0;
	while (req->workspaces[n])
		n++;
	now->watch_gen = plan_watch_gen();
	now->repos_gen = repos_gen();
	now->ws_id = xcalloc(n, sizeof(*now->ws_id));
	for (size_t i = 0; i < n; i++)
		dev_ino_of(req->workspaces[i], &now->ws_id[i]);
	char runtime[48];
	const char *dirs[SOCKET_DIRS];
	socket_dirs(uid, runtime, dirs);
	for (size_t i = 0; i < SOCKET_DIRS; i++)
		dev_ino_of(dirs[i], &now->sock[i]);
}

/* The kept plan of the request, if it still holds. */
static struct plan *plan_find(const struct sandbox_req *req, const struct plan_now *now, int cover, uid_t uid,
			      gid_t gid, const char *tmp_parent)
{
	for (unsigned i = 0; i < n_plans; i++) {
		struct plan *pl = plans[i];
		if (pl->profile != req->profile || pl->cover != cover || pl->change != (req->id && req->id->change) ||
		    pl->uid != uid || pl->gid != gid ||
		    pl->tmp_mb != req->limits.tmp_mb || strcmp(pl->tmp_parent, tmp_parent) != 0 ||
		    !str_eq(pl->home, req_home(req)) || !strv_same(pl->workspaces, req->workspaces) ||
		    !strv_same(pl->protect, req->protect) || !strv_same(pl->read_only, req->read_only) ||
		    !strv_same(pl->deny_read, req->deny_read))
			continue;
		bool holds = pl->watch_gen == now->watch_gen && pl->repos_gen == now->repos_gen;
		for (size_t k = 0; holds && k < SOCKET_DIRS; k++)
			holds = dev_ino_eq(&pl->sock[k], &now->sock[k]);
		for (size_t k = 0; holds && req->workspaces[k]; k++)
			holds = now->ws_id[k].dir && dev_ino_eq(&pl->ws_id[k], &now->ws_id[k]);
		if (holds)
			return pl;
		/* Out of date: made again by this call. */
		plan_unref(pl);
		plans[i] = plans[--n_plans];
		return NULL;
	}
	return NULL;
}

/* Keeps the plan the run has just made (its lists then the plan's), when
 * every path it looked at was watched before it was made; else watches
 * them, for the next call's plan to be kept. The denied paths, which the
 * rules cover or split around as each exists or not, are watched from
 * "/" where no workspace holds them. */
static void plan_keep(struct sandbox_run *run, const struct sandbox_req *req, struct plan_now *now, int cover,
		      const char *tmp_parent)
{
	bool watched = true;
	char **const lists[] = { run->deps, run->binds, run->ro_binds, run->covers,
				 (char **)ll_rules_denied(run->rules) };
	for (size_t l = 0; l < ELEMENTSOF(lists); l++)
		for (char **p = lists[l]; p && *p; p++) {
			const char *const *w = req->workspaces;
			while (*w && !is_beneath(*p, *w))
				w++;
			/* Outside every workspace: nothing tells of its
			 * changes, but for a denied path. */
			bool denied = l == ELEMENTSOF(lists) - 1 || (l == 3 && strv_has(lists[4], *p));
			if ((!*w && !denied) || !plan_watch_way(*w ? *w : "", *p))
				watched = false;
		}
	if (!watched)
		return;
	if (n_plans == PLANS_MAX) {
		plan_unref(plans[0]);
		memmove(plans, plans + 1, (PLANS_MAX - 1) * sizeof(*plans));
		n_plans--;
	}
	struct plan *pl = xcalloc(1, sizeof(*pl));
	*pl = (struct plan){
		.refs = 2,
		.profile = req->profile,
		.cover = cover,
		.change = req->id && req->id->change,
		.uid = run->uid,
		.gid = run->gid,
		.tmp_mb = req->limits.tmp_mb,
		.home = req_home(req) ? xstrdup(req_home(req)) : NULL,
		.tmp_parent = xstrdup(tmp_parent),
		.workspaces = strv_dup(req->workspaces),
		.protect = strv_dup(req->protect),
		.read_only = strv_dup(req->read_only),
		.deny_read = strv_dup(req->deny_read),
		.watch_gen = now->watch_gen,
		.repos_gen = now->repos_gen,
		.ws_id = TAKE_PTR(now->ws_id),
		.rules = ll_rules_hold(run->rules),
		.binds = run->binds,
		.ro_binds = run->ro_binds,
		.covers = run->covers,
		.writable = run->writable,
		.hide_dirs = run->hide_dirs,
		.ns_key = key_dup(run->ns_key),
	};
	memcpy(pl->sock, now->sock, sizeof(pl->sock));
	memcpy(pl->hide_st, run->hide_st, sizeof(pl->hide_st));
	run->plan = pl;
	plans[n_plans++] = pl;
}

/* Prepares one child's sandbox. */
int sandbox_prepare(const struct sandbox_req *req, struct sandbox_run **ret, char **ret_msg)
{
	/* The namespace of an ended call of this plan, first given back. */
	sandbox_ahead();
	const struct sandbox_features *f = sandbox_probe(NULL);
	struct sandbox_run *run = xcalloc(1, sizeof(*run));
	struct sandbox_child *c = &run->child;
	struct plan_now now = {0};
	int r;

	run->profile = req->profile;
	run->network = req->network;
	run->limits = req->limits;
	run->cwd = req->cwd ? xstrdup(req->cwd) : NULL;
	run->cgroup_fd = run->events_fd = run->kill_fd = run->hide_fd = run->spare_fd = run->mntns_fd = run->ns_wd = -1;
	run->tmp_fd = -1;
	c->cgroup_fd = c->cgroup_procs_fd = c->landlock_fd = c->landlock_fd2 = c->mntns_fd = c->netns_fd = c->userns_fd = -1;
	c->subreaper = f->subreaper;
	c->cap_last = sandbox_cap_last();
	c->mounts_slave = tmp_private_mounts();
	if (req->id && req->id->change) {
		c->set_ids = true;
		c->uid = req->id->uid;
		c->gid = req->id->gid;
		if (req->id->n_groups) {
			run->groups = xmemdup(req->id->groups, req->id->n_groups * sizeof(gid_t));
			c->groups = run->groups;
			c->n_groups = req->id->n_groups;
		}
		note(run, true, "identity");
	}
	if (req->profile == SANDBOX_OFF) {
		*ret = run;
		return 0;
	}

	/* What the profile needs of the kernel. */
	struct buf missing = {0};
	if (!f->landlock_abi)
		buf_puts(&missing, ", Landlock");
	if (!f->seccomp)
		buf_puts(&missing, ", seccomp");
	if (!f->no_new_privs)
		buf_puts(&missing, ", no_new_privs");
	if (buf_size(&missing) && req->require) {
		*ret_msg = xasprintf("The sandbox cannot be enforced on this system: it lacks %s, which the profile "
				     "'%s' needs (sandbox.require is true; the daemon's start-up line says what the "
				     "kernel enforces)", buf_head(&missing) + 2, sandbox_profile_name(req->profile));
		buf_free(&missing);
		sandbox_run_end(run);
		return -EPERM;
	}
	buf_free(&missing);

	bool other = req->id && req->id->change;
	uid_t child_uid = other ? req->id->uid : geteuid();
	gid_t child_gid = other ? req->id->gid : getegid();
	const char *parent;
	struct spare sp = other ? spare_take(child_uid, child_gid) : (struct spare){ .fd = -1 };
	run->spare_fd = sp.fd;
	run->spare_gen = sp.gen;
	run->tmpdir = sp.tmpdir;
	run->uid = child_uid;
	run->gid = child_gid;
	/* Or the TMPDIR of a mount namespace made ahead for the identity,
	 * joined below if it was made for this plan. */
	_cleanup_free_ char *pool_key = NULL;
	run->tmp_made = true;
	if (!run->tmpdir && f->mountns && !f->userns)
		run->tmpdir = nspool_take_tmpdir(child_uid, child_gid, &run->mntns_fd, &run->ns_wd, &run->tmp_fd,
						  &pool_key, &run->ns_born_ms, &run->tmp_made);
	if ((r = tmp_parent_get(child_uid, &parent, ret_msg)) < 0 ||
	    (!run->tmpdir && (r = tmp_call_make(parent, child_uid, child_gid, other, &run->tmpdir, ret_msg)) < 0))
		goto fail;
	run->tmp_uid_parent = parent;
	run->tmp_parent = xasprintf("%s/c", parent);
	const struct ll_rules *rules = NULL;
	/* With a mount namespace to come, denied paths in a writable
	 * workspace are covered there, and the workspace's top is writable;
	 * where a root daemon's child gets one in any case (its read-only
	 * mounts), every denied path that exists is, and Landlock's rules
	 * need not split around them: but for a child that outlives its
	 * call, which a cover would not keep from a denied path replaced
	 * while it runs (an audit log rotated, a config saved anew: the
	 * mount goes with the old file), and whose start is rare. */
	int cover = req->profile == SANDBOX_OFF ? LL_COVER_NONE
		    : f->mountns && f->ro_mounts && !req->lasting ? LL_COVER_DENY
		    : (f->mountns || (f->userns && !c->set_ids)) && req->profile == SANDBOX_WORKSPACE_WRITE
			    ? LL_COVER_WORKSPACES
			    : LL_COVER_NONE;
	/* A plan kept from an earlier call of the request, or how things
	 * stand before this one's is made, to keep it. */
	bool keepable = plan_keepable(req, f);
	if (keepable) {
		plan_now_take(&now, req, child_uid);
		run->plan = plan_find(req, &now, cover, child_uid, child_gid, run->tmp_parent);
	}
	struct plan *pl = run->plan;
	if (pl) {
		pl->refs++;
		rules = pl->rules;
	} else if (f->landlock_abi && (r = ll_rules_get(req, f->landlock_abi, parent, cover, &rules, ret_msg)) < 0) {
		goto fail;
	}
	/* A copy: the cache may drop the rules while the run is kept (its
	 * plan is written again for the next call's namespace). */
	run->covers = pl ? pl->covers : rules && ll_rules_covers(rules) ? strv_dup(ll_rules_covers(rules)) : NULL;
	c->covers = (const char *const *)run->covers;
	run->split_writable = rules && ll_rules_split_writable(rules);
	c->landlock_fd = rules ? ll_rules_fd(rules) : -1;
	run->rules = ll_rules_hold(rules);
	note(run, rules != NULL, "landlock");
	if (f->seccomp) {
		if (!(c->bpf = seccomp_prog_get(req->network ? SANDBOX_NET_FULL : req->net_proxy ? SANDBOX_NET_PROXY
											      : SANDBOX_NET_NONE, ret_msg))) {
			r = -EINVAL;
			goto fail;
		}
		note(run, true, "seccomp");
	} else {
		note(run, false, "seccomp");
	}
	c->no_new_privs = f->no_new_privs;
	note(run, f->no_new_privs, "no_new_privs");
	if (f->cgroup && (r = cgroup_make(run, f, ret_msg)) < 0)
		goto fail;
	if (req->net_proxy && !req->network) {
		if ((r = sandbox_net_prepare(req, &run->net, ret_msg)) < 0)
			goto fail;
		c->netns_fd = sandbox_net_ns_fd(run->net);
		c->userns_fd = sandbox_net_user_fd(run->net);
		note(run, true, "network namespace");
	}

	/* A mount namespace of the child's own: with CAP_SYS_ADMIN, or in a
	 * user namespace of its own (not for a child that changes its uid:
	 * the ids it takes would not be mapped there). */
	bool ns = f->mountns || (f->userns && !c->set_ids);
	bool absent = false;
	if (req->profile == SANDBOX_WORKSPACE_WRITE) {
		if (pl) {
			run->binds = pl->binds;
			run->ro_binds = pl->ro_binds;
		} else {
			protect_plan(run, req, ns, &absent);
		}
		if (absent && ns)
			note(run, false, "protect: paths that do not exist");
		if (run->ro_binds && !ns) {
			run->binds = strv_free(run->binds);
			run->ro_binds = strv_free(run->ro_binds);
			note(run, false, "protect");
		} else if (run->ro_binds) {
			note(run, true, "protect");
		}
		if (ns && !pl) {
			covers_pin(run, req);
			read_only_plan(run, req);
		}
		c->binds = (const char *const *)run->binds;
		c->ro_binds = (const char *const *)run->ro_binds;
	}
	/* Everything but the writable paths read-only, in the child's mount
	 * namespace. */
	if (ns && f->ro_mounts && (pl || readonly_plan(run, req))) {
		if (pl) {
			run->writable = pl->writable;
			run->hide_dirs = pl->hide_dirs;
			memcpy(run->hide_st, pl->hide_st, sizeof(run->hide_st));
		} else {
			sockets_plan(run, req, child_uid);
		}
		c->writable = (const char *const *)run->writable;
		note(run, true, "read-only mounts");
		c->hide_dirs = (const char *const *)run->hide_dirs;
		note(run, true, "unix sockets hidden");
		/* There TMPDIR is a tmpfs of the call's own, of tmp_mb. */
		if (run->limits.tmp_mb > 0) {
			snprintf(run->tmp_opts, sizeof(run->tmp_opts), "mode=0700,uid=%u,gid=%u,size=%" PRId64 "m",
				 (unsigned)child_uid, (unsigned)child_gid, run->limits.tmp_mb);
			c->tmp_opts = run->tmp_opts;
			note(run, true, "tmp_mb");
		}
	} else {
		run->writable = strv_free(run->writable);
		note(run, false, "read-only mounts");
		note(run, false, "unix sockets hidden");
		if (run->limits.tmp_mb > 0)
			note(run, false, "tmp_mb");
	}
	/* Where only the TMPDIRs would need it, a root daemon's child of
	 * another uid gets no mount namespace but a second Landlock layer
	 * (hide.c). */
	/* A TMPDIR named ahead and not made is made now, unless the child
	 * joins the namespace made for it, where its TMPDIR is a tmpfs
	 * (and before the layer that hides the others is built for it). */
	if (!run->tmp_made && !c->writable) {
		if ((r = tmp_call_mkdir(run->tmpdir, child_uid, child_gid, other, ret_msg)) < 0)
			goto fail;
		run->tmp_made = true;
	}
	if (!c->writable && f->mountns && rules && !run->ro_binds && !c->covers && hide_by_landlock(run, req, f, child_uid))
		ns = false;
	else if (ns) {
		c->tmp_parent = run->tmp_parent;
		c->tmp_own = run->tmpdir;
	}
	note(run, ns || run->hide_fd >= 0, "tmpdir hidden");
	if (ns && !f->mountns) {
		c->userns = true;
		/* It holds every capability in its user namespace: it drops
		 * them there as a root daemon's child does. */
		c->cap_last = 63;
		snprintf(run->uid_map, sizeof(run->uid_map), "%u %u 1\n", (unsigned)child_uid, (unsigned)child_uid);
		snprintf(run->gid_map, sizeof(run->gid_map), "%u %u 1\n", (unsigned)child_gid, (unsigned)child_gid);
		c->uid_map = run->uid_map;
		c->gid_map = run->gid_map;
		note(run, true, "user namespace");
	}
	/* The network's user namespace (a daemon that is not root) stands
	 * for the child's own: joined, not made. */
	if (c->userns_fd >= 0) {
		c->userns = false;
		c->cap_last = 63;
	}
	if (ns && f->mountns) {
		run->ns_key = pl ? key_dup(pl->ns_key) : nspool_key(c, child_uid, child_gid, run->hide_dirs ? run->hide_st : NULL);
		if (run->mntns_fd >= 0 && nspool_key_eq(pool_key, run->ns_key))
			c->mntns_fd = run->mntns_fd;
	}
	/* A plan made, where nothing of it was missing, kept for the next
	 * calls. */
	if (keepable && !pl && ns && f->mountns && c->writable && !absent && rules && run->ns_key)
		plan_keep(run, req, &now, cover, run->tmp_parent);
	free(now.ws_id);
	now.ws_id = NULL;
	run->deps = strv_free(run->deps);
	if (run->mntns_fd >= 0 && c->mntns_fd < 0) {
		nspool_dispose(run->mntns_fd);
		run->mntns_fd = -1;
	}
	if (c->mntns_fd < 0 && run->tmp_fd >= 0) {
		close(run->tmp_fd);	/* not the child's TMPDIR */
		run->tmp_fd = -1;
	}
	if (!run->tmp_made && !(c->mntns_fd >= 0 && c->tmp_opts)) {
		if ((r = tmp_call_mkdir(run->tmpdir, child_uid, child_gid, other, ret_msg)) < 0)
			goto fail;
		run->tmp_made = true;
	}

	/* Limits: rlimits always, cgroup limits on top where there are some. */
	const struct sandbox_limits *l = &run->limits;
	if (l->memory_mb > 0) {
		add_rlimit(c, RLIMIT_DATA, l->memory_mb, 1024 * 1024);
		note(run, true, "memory");
	}
	if (l->file_size_mb > 0) {
		add_rlimit(c, RLIMIT_FSIZE, l->file_size_mb, 1024 * 1024);
		note(run, true, "file_size");
	}
	if (l->nofile > 0) {
		add_rlimit(c, RLIMIT_NOFILE, l->nofile, 1);
		note(run, true, "nofile");
	}
	if (l->cpu_s > 0) {
		add_rlimit(c, RLIMIT_CPU, l->cpu_s, 1);
		note(run, true, "cpu");
	}
	if (l->pids > 0) {
		/* RLIMIT_NPROC counts every process of the uid, and root is
		 * exempt from it: for root only a pids cgroup can count. */
		bool cg = f->cgroup && f->cgroup_pids;
		if (child_uid != 0)
			add_rlimit(c, RLIMIT_NPROC, l->pids, 1);
		note(run, cg || child_uid != 0, "pids");
	}
	*ret = run;
	return 0;
fail:
	free(now.ws_id);
	sandbox_run_end(run);
	return r;
}

struct sandbox_child *sandbox_run_child(struct sandbox_run *run)
{
	return run ? &run->child : NULL;
}

const char *sandbox_run_tmpdir(const struct sandbox_run *run)
{
	return run ? run->tmpdir : NULL;
}

enum sandbox_profile sandbox_run_profile(const struct sandbox_run *run)
{
	return run ? run->profile : SANDBOX_OFF;
}

/* Kills every process in the call's cgroup. */
void sandbox_run_kill(struct sandbox_run *run)
{
	if (run && run->kill_fd >= 0)
		(void)pwrite(run->kill_fd, "1", 1, 0);
	else if (run && run->cgroup_fd >= 0)
		(void)cg_write(run->cgroup_fd, "cgroup.kill", "1");
}

static int64_t cg_read_key(const struct sandbox_run *run, const char *file, const char *key);

/* The leader's exit has left the cgroup (cgroup_exit() comes before the
 * exit is told): when nothing else is in it, as for most calls, a read
 * of cgroup.events saves the write to cgroup.kill, which takes the lock
 * that every cgroup operation of the machine takes. */
bool sandbox_run_kill_rest(struct sandbox_run *run)
{
	if (cg_read_key(run, "cgroup.events", "populated") != 0) {
		sandbox_run_kill(run);
		return false;
	}
	run->empty_at_exit = true;	/* nothing can enter it since */
	/* A fake cgroup's (tests) holds no process: it says nothing of
	 * the group. */
	return !sandbox_cgroup_is_fake();
}

/* Reads one "key value" line of a cgroup file; -1 when absent. */
static int64_t cg_read_key(const struct sandbox_run *run, const char *file, const char *key)
{
	if (!run || run->cgroup_fd < 0)
		return -1;
	char buf[1024];
	if (run->events_fd >= 0 && strcmp(file, "cgroup.events") == 0) {
		ssize_t n = pread(run->events_fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			return -1;
		buf[n] = '\0';
	} else if (read_small(run->cgroup_fd, file, buf, sizeof(buf)) <= 0) {
		return -1;
	}
	size_t klen = strlen(key);
	for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
			return strtoll(line + klen + 1, NULL, 10);
	return -1;
}

bool sandbox_run_empty(const struct sandbox_run *run)
{
	return cg_read_key(run, "cgroup.events", "populated") <= 0;
}


/* Removes the cgroups left behind earlier, now that they may be empty. */
static void rmdir_pending(void)
{
	size_t k = 0;
	for (size_t i = 0; pending_rmdir && pending_rmdir[i]; i++) {
		if (rmdir(pending_rmdir[i]) == 0 || errno == ENOENT)
			free(pending_rmdir[i]);
		else
			pending_rmdir[k++] = pending_rmdir[i];
	}
	if (pending_rmdir)
		pending_rmdir[k] = NULL;
}

/* Removes a call's cgroup (taking path), or leaves it to rmdir_pending()
 * while processes killed in it are still going. */
static void cg_remove(char *path)
{
	if (sandbox_cgroup_is_fake())
		cg_fake_empty(path);
	if (rmdir(path) < 0 && errno == EBUSY)
		strv_push(&pending_rmdir, TAKE_PTR(path));
	free(path);
}

/* Keeps an ended call's cgroup for a later call: when it is empty (empty:
 * found so just before), none of its limits was hit (the counts of
 * cgroup.events files only grow) and there is room. */
static bool cg_keep(struct sandbox_run *run, bool empty)
{
	const struct sandbox_features *f = sandbox_probe(NULL);
	if (n_cg_kept == CG_KEPT_MAX || run->cgroup_fd < 0 ||
	    (!empty && cg_read_key(run, "cgroup.events", "populated") != 0) ||
	    (f->cgroup_memory && cg_read_key(run, "memory.events", "oom_kill") > 0) ||
	    (f->cgroup_pids && cg_read_key(run, "pids.events", "max") > 0))
		return false;
	cg_kept[n_cg_kept++] = (struct cg_kept){
		.path = TAKE_PTR(run->cgroup),
		.fd = TAKE_FD(run->cgroup_fd),
		/* A fake one's is written from its start by each call. */
		.procs_fd = sandbox_cgroup_is_fake() ? -1 : TAKE_FD(run->child.cgroup_procs_fd),
		.events_fd = TAKE_FD(run->events_fd),
		.kill_fd = TAKE_FD(run->kill_fd),
		.memory_max = run->cg_memory_max,
		.pids_max = run->cg_pids_max,
	};
	return true;
}

/* Removes the kept cgroups (on reload and at exit). */
static void cg_kept_clear(void)
{
	while (n_cg_kept) {
		struct cg_kept *k = &cg_kept[--n_cg_kept];
		const int fds[] = { k->fd, k->procs_fd, k->events_fd, k->kill_fd };
		for (size_t i = 0; i < ELEMENTSOF(fds); i++)
			if (fds[i] >= 0)
				close(fds[i]);
		cg_remove(k->path);
	}
}

/* Ends a run. */
struct sandbox_run *sandbox_run_end(struct sandbox_run *run)
{
	if (!run)
		return NULL;
	sandbox_netnotif_forget(run->pid);
	/* Its namespaces serve again where nothing of the call is left in
	 * them. */
	bool empty = run->cgroup_fd >= 0 && (run->net || run->mntns_fd >= 0) &&
		     (run->empty_at_exit || cg_read_key(run, "cgroup.events", "populated") == 0);
	run->net = sandbox_net_end(run->net, run->net && empty);
	if (run->cgroup && !cg_keep(run, empty)) {
		sandbox_run_kill(run);
		cg_remove(TAKE_PTR(run->cgroup));
	}
	rmdir_pending();
	const int fds[] = { run->child.cgroup_procs_fd, run->events_fd, run->kill_fd, run->cgroup_fd };
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (run->hide_fd >= 0)
		close(run->hide_fd);
	if (run->spare_fd >= 0)
		close(run->spare_fd);
	if (run->tmp_made)
		tmp_call_rm(run->tmpdir);
	run->ns_clean = empty && !sandbox_cgroup_is_fake();
	/* What prepares the next call of the plan waits for
	 * sandbox_ahead(), after the call's answer. */
	if ((run->mntns_fd >= 0 || (run->ns_key && run->spawned)) && n_ahead < AHEAD_MAX)
		ahead[n_ahead++] = run;
	else
		run_ahead(run);
	return NULL;
}

/* The end of a run that can wait for its call's answer: the next call of
 * the plan is to join a namespace made meanwhile (this call's, with a new
 * TMPDIR, when it had one made ahead); then the run is freed. */
static void run_ahead(struct sandbox_run *run)
{
	char *next;
	_cleanup_free_ char *msg = NULL;
	const struct nspool_given g = {
		.fd = run->mntns_fd, .own = run->child.tmp_opts ? run->tmpdir : NULL,
		.born_ms = run->ns_born_ms, .clean = run->ns_clean,
	};
	/* Its TMPDIR a tmpfs of the namespace, the next call's needs no
	 * directory in the daemon's. */
	bool make = !run->child.tmp_opts;
	/* Its TMPDIR untouched and nothing of it running, the namespace
	 * serves the next call as it is. */
	bool kept = run->ns_key && run->spawned && run->ns_clean && run->child.tmp_opts && run->tmp_parent &&
		    nspool_keep(run->mntns_fd, run->ns_wd, run->tmp_fd, run->ns_key, run->uid, run->gid, run->tmpdir,
				run->ns_born_ms);
	/* Else, before its namespace goes back: a tmpfs held open cannot
	 * be unmounted there. */
	if (!kept && run->tmp_fd >= 0)
		close(run->tmp_fd);
	run->tmp_fd = -1;
	if (kept)
		run->tmpdir = NULL;
	else if (run->ns_key && run->spawned &&
	    tmp_call_name(run->tmp_uid_parent, run->uid, run->gid, run->child.set_ids, make, &next, &msg) == 0)
		nspool_pass(&run->child, run->ns_key, run->uid, run->gid, next, make, g.fd >= 0 ? &g : NULL);
	else if (run->mntns_fd >= 0)
		nspool_give_back(run->mntns_fd, run->ns_key, run->uid, run->gid, g.own, g.born_ms, g.clean);
	free(run->ns_key);
	free(run->tmpdir);
	free(run->cwd);
	free(run->tmp_parent);
	if (run->plan) {
		plan_unref(run->plan);
	} else {
		strv_free(run->binds);
		strv_free(run->ro_binds);
		strv_free(run->writable);
		strv_free(run->hide_dirs);
		strv_free(run->covers);
	}
	strv_free(run->deps);
	ll_rules_release(run->rules);
	free(run->groups);
	free(run);
}

void sandbox_ahead(void)
{
	for (unsigned i = 0; i < n_ahead; i++)
		run_ahead(ahead[i]);
	n_ahead = 0;
}

/* Writes the sandbox member of structuredContent. */
void sandbox_run_json(const struct sandbox_run *run, struct buf *out)
{
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	jgen_key(g, "profile");
	jgen_str(g, sandbox_profile_name(sandbox_run_profile(run)));
	if (run && run->net) {
		jgen_key(g, "network");
		jgen_str(g, "proxy");
	} else {
		jgen_kv_bool(g, "network", run ? run->profile == SANDBOX_OFF || run->network : true);
	}
	jgen_key(g, "enforced");
	jgen_arr_open(g);
	for (unsigned i = 0; run && i < run->n_enforced; i++)
		jgen_str(g, run->enforced[i]);
	jgen_arr_close(g);
	if (run && run->n_not_enforced) {
		jgen_key(g, "not_enforced");
		jgen_arr_open(g);
		for (unsigned i = 0; i < run->n_not_enforced; i++)
			jgen_str(g, run->not_enforced[i]);
		jgen_arr_close(g);
	}
	jgen_obj_close(g);
	jgen_free(g);
}

static bool has(const char *s, size_t n, const char *needle)
{
	return s && memmem(s, n, needle, strlen(needle));
}

static char *tmp_limit_name(const struct sandbox_run *run)
{
	return xasprintf("the temporary space limit of $TMPDIR (%" PRId64 " MB, limits.tmp_mb)", run->limits.tmp_mb);
}

/* Whether the call's TMPDIR is full, as the daemon sees it now: 1, 0, or
 * -1 when it cannot see (no tmpfs of the call's own, or not opened). */
static int tmp_full(const struct sandbox_run *run)
{
	struct statfs sf;
	if (!run || run->profile == SANDBOX_OFF || run->tmp_fd < 0 || fstatfs(run->tmp_fd, &sf) < 0)
		return -1;
	return sf.f_bavail == 0 || (sf.f_files && sf.f_ffree == 0);
}

char *sandbox_run_tmp_hit(const struct sandbox_run *run)
{
	return tmp_full(run) > 0 ? tmp_limit_name(run) : NULL;
}

/* Names the limit a child ran into, if any. */
char *sandbox_run_limit_hit(const struct sandbox_run *run, int exit_code, int sig, const char *err, size_t n)
{
	if (!run || run->profile == SANDBOX_OFF)
		return NULL;
	const struct sandbox_limits *l = &run->limits;
	if (sig == SIGXFSZ && l->file_size_mb > 0)
		return xasprintf("the file size limit (%" PRId64 " MB)", l->file_size_mb);
	if (sig == SIGXCPU && l->cpu_s > 0)
		return xasprintf("the CPU time limit (%" PRId64 " s)", l->cpu_s);
	/* Its TMPDIR full at the end, whatever the exit status; where the
	 * daemon could not look, a failure that says so. */
	int full = run->child.tmp_opts ? tmp_full(run) : 0;
	if (full > 0 || (full < 0 && (sig || exit_code) && has(err, n, "No space left on device")))
		return tmp_limit_name(run);
	if (cg_read_key(run, "memory.events", "oom_kill") > 0 ||
	    (l->memory_mb > 0 && (sig || exit_code) &&
	     (has(err, n, "Cannot allocate memory") || has(err, n, "Out of memory") ||
	      has(err, n, "out of memory") || has(err, n, "MemoryError") || has(err, n, "bad_alloc") ||
	      has(err, n, "memory exhausted") || has(err, n, "Out of space"))))
		return xasprintf("the memory limit (%" PRId64 " MB)", l->memory_mb);
	if (cg_read_key(run, "pids.events", "max") > 0 ||
	    (l->pids > 0 && (sig || exit_code) &&
	     (has(err, n, "fork: Resource temporarily unavailable") || has(err, n, "Cannot fork") ||
	      has(err, n, "can't fork") || has(err, n, "fork: retry") ||
	      has(err, n, "Resource temporarily unavailable"))))
		return xasprintf("the process limit (%" PRId64 " processes)", l->pids);
	if (l->nofile > 0 && (sig || exit_code) && has(err, n, "Too many open files"))
		return xasprintf("the open files limit (%" PRId64 ")", l->nofile);
	if (l->file_size_mb > 0 && (sig || exit_code) && has(err, n, "File too large"))
		return xasprintf("the file size limit (%" PRId64 " MB)", l->file_size_mb);
	return NULL;
}

/* The refusals the sandbox made of the paths err names (refusal.c), as
 * its plan and the kernel's state decide them. */
static char *paths_refused(const struct sandbox_run *run, const char *err, size_t n, const char *known,
			   bool *ret_unsure)
{
	gid_t own[64];
	struct sandbox_refusal_plan p = {
		.rules = run->rules,
		.writable = run->child.writable,
		.tmpdir = run->tmpdir,
		.ro_binds = run->child.ro_binds,
		.covers = run->child.covers,
		.hide_dirs = run->child.hide_dirs,
		.uid = run->uid,
		.gid = run->gid,
		.groups = run->child.groups,
		.n_groups = run->child.n_groups,
		.cwd = run->cwd,
		.seccomp = run->child.bpf != NULL,
		.no_caps = run->child.cap_last >= 0 || run->uid != 0,
	};
	if (!run->child.set_ids) {
		int k = getgroups(ELEMENTSOF(own), own);
		if (k < 0) {
			*ret_unsure = true;
			return NULL;
		}
		p.groups = own;
		p.n_groups = (size_t)k;
	}
	return sandbox_refusal_check(&p, err, n, known, ret_unsure);
}

/* Whether err holds the words of a refusal that no path decides, but
 * "Operation not permitted": the note's judgement of the paths and calls
 * its lines name takes that (refusal.c), and hedges where it cannot. */
static bool worded_beyond_eperm(const struct sandbox_run *run, const char *err, size_t n, const char *const *others,
				size_t k)
{
	for (size_t i = 0; i < k; i++)
		if (!str_eq(others[i], "Operation not permitted") && has(err, n, others[i]))
			return true;
	return run->net && (has(err, n, "Connection refused") || has(err, n, "Name or service not known"));
}

/* The note's line: net (what the daemon saw the child try of the
 * network), paths (what it judged or saw refused of the files), else a
 * hedge (net_worded: naming the network), and what the profile allows. */
static char *note_text(const struct sandbox_run *run, const char *net, const char *paths, bool net_worded)
{
	return xasprintf("[sandbox] %s%s%s%s (profile %s): it allows reading "
			 "files except private ones (such as ~/.ssh), writing only in %s%s, and %s. Work within "
			 "that, or ask the user to loosen the tool's sandbox.",
			 net ? net : "", net && paths ? "; the sandbox refused " : paths ? "The sandbox refused " : "",
			 paths ? paths : "",
			 net || paths	? ""
			 : net_worded	? "This may have been refused by the sandbox: this tool has no network"
					: "This may have been refused by the sandbox",
			 sandbox_profile_name(run->profile),
			 run->profile == SANDBOX_WORKSPACE_WRITE
				 ? "the workspace (not .git/hooks or .git/config), $TMPDIR, /dev/null and sandbox.write_extra"
				 : "$TMPDIR and /dev/null",
			 run->profile == SANDBOX_WORKSPACE_WRITE && run->split_writable
				 ? "; a directory there that holds a private path (the workspace's top, when it is a "
				   "home directory) takes no new entries itself: write in a subdirectory that exists, "
				   "or with the file tools"
				 : "",
			 run->network ? "network access"
			 : run->net   ? "network access only through the daemon's proxy ($HTTP_PROXY, $ALL_PROXY), to "
					"the hosts its policy allows"
				      : "no network access");
}

/*
 * Tells the model what the sandbox refused: where a child without network
 * tried to go, as the daemon saw it (netnotif.c), what Landlock's audit
 * records say it refused the child (kaudit.c), and the paths stderr names
 * that the plan and the kernel's state show it refused (refusal.c). Where
 * neither can tell, stderr's wording of a refusal that no path decides
 * (a network error, a refusal naming no path or call that can be judged)
 * still gives a line, saying it may have been the
 * sandbox; a path judged refused for another reason (the bits of another
 * user's file, a missing file) gives none.
 */
char *sandbox_run_denial_note(const struct sandbox_run *run, const char *err, size_t n)
{
	static const char *const others[] = {
		"Operation not permitted", "Network is unreachable", "Address family not supported",
		"Could not resolve host", "Temporary failure in name resolution",
	};
	if (!run || run->profile == SANDBOX_OFF)
		return NULL;
	bool other = false, net_worded = false;
	for (size_t i = 0; i < ELEMENTSOF(others) && !other; i++)
		other = has(err, n, others[i]);
	/* others[1...]: the network's words, for a tool without any. */
	for (size_t i = 1; i < ELEMENTSOF(others) && !run->network && !run->net && !net_worded; i++)
		net_worded = has(err, n, others[i]);
	/* Behind the proxy, whatever is not the proxy is refused so. */
	if (run->net && !other)
		other = has(err, n, "Connection refused") || has(err, n, "Name or service not known");
	bool worded = other || has(err, n, "Permission denied") || has(err, n, "Read-only file system");
	if (other)
		other = worded_beyond_eperm(run, err, n, others, ELEMENTSOF(others));
	/* What the kernel recorded it refused, waited for a moment while
	 * records are still on their way. */
	_cleanup_free_ char *seen = sandbox_kaudit_take(run->pid, worded);
	bool unsure = false;
	_cleanup_free_ char *paths = paths_refused(run, err, n, seen, &unsure);
	if (seen && paths) {
		char *both = xasprintf("%s; %s", seen, paths);
		free(paths);
		paths = both;
	} else if (seen) {
		paths = TAKE_PTR(seen);
	}
	/* What the daemon saw it try of the network, without any or past
	 * the proxy. */
	_cleanup_free_ char *net = run->network ? NULL : sandbox_netnotif_take(run->pid);
	if (!paths && !other && !unsure && !net)
		return NULL;
	return note_text(run, net, paths, net_worded);
}

/* A call that did not fail: what the daemon saw refused, whatever its
 * stderr says (which alone is not evidence enough when it succeeded). */
char *sandbox_run_seen_note(const struct sandbox_run *run)
{
	if (!run || run->profile == SANDBOX_OFF)
		return NULL;
	_cleanup_free_ char *net = run->network ? NULL : sandbox_netnotif_take(run->pid);
	_cleanup_free_ char *seen = sandbox_kaudit_take_kept(run->pid);
	if (!net && !seen)
		return NULL;
	return note_text(run, net, seen, false);
}

char *sandbox_run_seen_so_far(const struct sandbox_run *run, uint64_t *ret_seen)
{
	uint64_t n = 0, k = 0;
	*ret_seen = 0;
	if (!run || run->profile == SANDBOX_OFF)
		return NULL;
	_cleanup_free_ char *net = run->network ? NULL : sandbox_netnotif_peek(run->pid, &n);
	_cleanup_free_ char *seen = sandbox_kaudit_peek(run->pid, &k);
	*ret_seen = n + k;
	if (!net && !seen)
		return NULL;
	return note_text(run, net, seen, false);
}

const char *const *sandbox_run_net_env(const struct sandbox_run *run)
{
	return run ? sandbox_net_env(run->net) : NULL;
}

void *sandbox_run_net_served(const struct sandbox_run *run)
{
	return run ? sandbox_net_served(run->net) : NULL;
}

char *sandbox_run_net_note(const struct sandbox_run *run)
{
	return run ? sandbox_net_note(run->net) : NULL;
}
