/* SPDX-License-Identifier: MIT */
/*
 * The programs the config makes the daemon run (a hook's script, a
 * command tool's program, an MCP server's), checked as ssh's StrictModes
 * checks a user's files, then held open so that what runs is what was
 * checked (see sandbox.h, sandbox_program_open()).
 *
 * A check looks at every directory and link on the program's way, as
 * named and where it really lies, once each: a name met again (/ at the
 * end of each walk, /bin of /bin/sh and again of /bin/dash where its link
 * leads, the directories of the real path that the links led through) is
 * answered from what the check noted of it. A way of more than SEEN_MAX
 * names is refused.
 *
 * The last KEPT_MAX checks passed are kept (the least recently used goes
 * first; all dropped by sandbox_cache_clear(), on reload and at exit),
 * each under the name checked, the directory a relative one starts from
 * (its device and inode) and run_uid, with the identity of every name it
 * looked at (device, inode, mode, owner and ctime to the nanosecond, from
 * lstat) and of the file opened. The next check of that name still opens
 * it (O_PATH: that fd is what runs) and looks at each of those names
 * again, once, without a readlink or a walk: when all are as noted, what
 * the check judged is unchanged, for a chmod or chown changes a mode or
 * an owner (and the ctime), a rename or a new entry changes the ctime of
 * its directory and brings another inode, a link is replaced (never
 * modified), and a mount over a name shows another device or inode. Any difference or error, and the
 * full check is made again, before this call goes on. What is not looked
 * at is as before: the program's content rewritten in place by its
 * owner, who is trusted. A name searched in PATH is kept per candidate
 * path: an earlier directory of the PATH that gains the name is found
 * there (its open succeeds) and that file gets a full check. A check
 * whose names take more than KEPT_BYTES_MAX is not kept. Checks run on
 * the daemon's loop only: what is kept has no lock.
 *
 * A ctime comes from the clock's coarse tick, or whole seconds on some
 * file systems: a change made in the same tick as the one before it may
 * leave the ctime as it was, and a new inode may reuse a number. A name
 * is young when it changed less than YOUNG_NS (2 s where the ctime has
 * no nanoseconds) before the check began; a check is not kept when a
 * young name lies in a young directory (check_young()). Otherwise
 * anything put in a name's place after the check bears a later ctime,
 * on itself or on its directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proto/base/util.h"
#include "lib/sandbox/sandbox.h"
#include "lib/sandbox/sandbox_internal.h"

#define LINKS_MAX 40		/* links followed in turn, as the kernel's limit */
#define SEEN_MAX 1024		/* names one check looks at */
#define KEPT_MAX 32		/* checks kept */
#define KEPT_BYTES_MAX 16384	/* of names, in one check kept */
#define YOUNG_NS (50 * 1000000LL)	/* a few ticks of the coarse clock */
#define YOUNG_WHOLE_NS (2 * 1000000000LL)

static void (*refusal_log)(const char *message);

void sandbox_program_set_log(void (*fn)(const char *message))
{
	refusal_log = fn;
}

/* FNV-1a of s. */
static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

void sandbox_warn_once(const char *message)
{
	static uint64_t seen[64];
	static unsigned next;
	if (!refusal_log)
		return;
	uint64_t h = hash_str(message) | 1;
	for (unsigned i = 0; i < ELEMENTSOF(seen); i++)
		if (seen[i] == h)
			return;
	seen[next++ % ELEMENTSOF(seen)] = h;
	refusal_log(message);
}

/* Tells of a refusal once among the last 64 different warnings. */
static void log_refusal(const char *why)
{
	_cleanup_free_ char *m = xasprintf("refused to run a program: %s", why);
	sandbox_warn_once(m);
}

/* A name one check looked at: its lstat, and the stat of where it leads
 * in the end (a link's last target; else its own). */
struct seen {
	char *path;
	uint64_t hash;	/* of path, compared first */
	struct stat st;
	struct stat final;
	bool done;	/* false while its link is followed */
};

/* One check: the names it looked at (relative ones from base_fd). */
struct check {
	int base_fd;
	uid_t run_uid;
	uid_t euid;	/* (uid_t)-1 until asked */
	struct seen *v;
	size_t n, cap;
};

static void check_done(struct check *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].path);
	free(c->v);
	c->v = NULL;
	c->n = c->cap = 0;
}

/* The daemon's uid, asked once per check and only when needed. */
static uid_t check_euid(struct check *c)
{
	if (c->euid == (uid_t)-1)
		c->euid = geteuid();
	return c->euid;
}

/* Whether uid may own what a program's run goes through. */
static bool trusted_owner(struct check *c, uid_t owner)
{
	return owner == 0 || owner == c->run_uid || owner == check_euid(c);
}

/* Why st (of what, at path) is not fit: NULL when it is. A directory
 * writable by group or other is fit only with the sticky bit, where no one
 * but an entry's owner (checked on the next step) can rename or remove it. */
static char *unfit(struct check *c, const char *path, const struct stat *st)
{
	const char *what = S_ISDIR(st->st_mode) ? "directory" : S_ISLNK(st->st_mode) ? "link" : "program";
	if (!trusted_owner(c, st->st_uid))
		return xasprintf("%s %s is owned by uid %u, not by root, the daemon (uid %u) or whom it runs as (uid %u)",
				 what, path, (unsigned)st->st_uid, (unsigned)check_euid(c), (unsigned)c->run_uid);
	if (S_ISLNK(st->st_mode))
		return NULL;
	if (S_ISDIR(st->st_mode)) {
		if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
			return xasprintf("directory %s is writable by group or other (mode %04o)", path,
					 (unsigned)(st->st_mode & 07777));
		return NULL;
	}
	if (!S_ISREG(st->st_mode))
		return xasprintf("%s is not a regular file", path);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return xasprintf("program %s is writable by group or other (mode %04o)", path,
				 (unsigned)(st->st_mode & 07777));
	return NULL;
}

static char *look(struct check *c, const char *name, int depth, struct stat *ret_final);

/* Checks each directory on the way to path's last component, and each
 * link on it with where it leads, not the last component (the caller
 * checks it). NULL when all are fit. */
static char *unfit_dirs(struct check *c, const char *path, int depth)
{
	size_t n = strlen(path);
	_cleanup_free_ char *p = xstrdup(path);
	for (size_t i = 1; i < n; i++) {
		if (p[i] != '/')
			continue;
		p[i] = '\0';
		struct stat final;
		char *why = look(c, p, depth, &final);
		if (!why)
			why = unfit(c, p, &final);
		p[i] = '/';
		if (why)
			return why;
	}
	if (path[0] == '/') {
		struct stat final;
		char *why = look(c, "/", depth, &final);
		return why ? why : unfit(c, "/", &final);
	}
	return NULL;
}

/* Where the link at path (its owner checked) leads: the directories and
 * links on the way to its target, and a link there, each in turn, up to
 * the kernel's 40. Checks all but the last target itself, whose stat is
 * *ret_final. */
static char *unfit_target(struct check *c, const char *path, int depth, struct stat *ret_final)
{
	if (depth > LINKS_MAX)
		return xasprintf("%s leads through too many links", path);
	char t[PATH_MAX];
	ssize_t n = readlinkat(c->base_fd, path, t, sizeof(t) - 1);
	if (n <= 0)
		return xasprintf("%s cannot be checked: %s", path, n < 0 ? strerror(errno) : "empty link");
	t[n] = '\0';
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *target = t[0] == '/' || !slash ? xstrdup(t)
				      : xasprintf("%.*s/%s", (int)(slash - path), path, t);
	char *why = unfit_dirs(c, target, depth + 1);
	return why ? why : look(c, target, depth + 1, ret_final);
}

/* Looks at name, once per check (lstat; a name met again is answered
 * from the first look): a link's owner and where it leads, its last
 * target's stat in *ret_final (else name's own). Judges nothing else: the
 * caller judges *ret_final, as a directory on the way or as the program. */
static char *look(struct check *c, const char *name, int depth, struct stat *ret_final)
{
	uint64_t h = hash_str(name);
	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i].hash != h || strcmp(c->v[i].path, name) != 0)
			continue;
		if (!c->v[i].done)
			return xasprintf("%s leads through a loop of links", name);
		*ret_final = c->v[i].final;
		return NULL;
	}
	if (c->n >= SEEN_MAX)
		return xasprintf("%s lies beyond too many names to check", name);
	struct stat st;
	if (fstatat(c->base_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return xasprintf("%s cannot be checked: %s", name, strerror(errno));
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 16;
		c->v = xreallocarray(c->v, c->cap, sizeof(*c->v));
	}
	size_t k = c->n++;	/* by index: following the link may move c->v */
	c->v[k] = (struct seen){ .path = xstrdup(name), .hash = h, .st = st };
	struct stat final = st;
	if (S_ISLNK(st.st_mode)) {
		char *why = unfit(c, name, &st);
		if (!why)
			why = unfit_target(c, name, depth, &final);
		if (why)
			return why;
	}
	c->v[k].final = final;
	c->v[k].done = true;
	*ret_final = final;
	return NULL;
}

/* What a kept check noted of a name or of the file opened. */
struct ident {
	dev_t dev;
	ino_t ino;
	mode_t mode;
	uid_t uid;
	struct timespec ctim;
};

struct kept_name {
	char *path;
	struct ident id;
};

/* A check passed, under its key: the name checked, run_uid, and for a
 * relative name the directory it starts from. */
struct kept {
	char *path;	/* NULL: a free slot */
	uid_t run_uid;
	dev_t base_dev;
	ino_t base_ino;
	uint64_t used;	/* kept_clock at its last use */
	struct ident prog;
	struct kept_name *names;
	size_t n;
};

static struct kept kept[KEPT_MAX];
static uint64_t kept_clock;
static uint64_t kept_hits;

static struct ident ident_of(const struct stat *st)
{
	return (struct ident){ .dev = st->st_dev, .ino = st->st_ino, .mode = st->st_mode, .uid = st->st_uid,
			       .ctim = st->st_ctim };
}

static bool ident_is(const struct ident *id, const struct stat *st)
{
	return id->dev == st->st_dev && id->ino == st->st_ino && id->mode == st->st_mode && id->uid == st->st_uid &&
	       id->ctim.tv_sec == st->st_ctim.tv_sec && id->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

/* Whether st changed so shortly before start that a change after it
 * could bear the same ctime. */
static bool young(const struct stat *st, const struct timespec *start)
{
	int64_t ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
	int64_t start_ns = (int64_t)start->tv_sec * 1000000000LL + start->tv_nsec;
	return ctime_ns + (st->st_ctim.tv_nsec ? YOUNG_NS : YOUNG_WHOLE_NS) >= start_ns;
}

static void kept_drop(struct kept *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->names[i].path);
	free(k->names);
	free(k->path);
	*k = (struct kept){ 0 };
}

void sandbox_program_cache_clear(void)
{
	for (size_t i = 0; i < KEPT_MAX; i++)
		kept_drop(&kept[i]);
}

uint64_t sandbox_program_cache_hits(void)
{
	return kept_hits;
}

/* The kept check of path for run_uid (base: the stat of the directory a
 * relative path starts from), or NULL. */
static struct kept *kept_find(const char *path, uid_t run_uid, const struct stat *base)
{
	for (size_t i = 0; i < KEPT_MAX; i++) {
		struct kept *k = &kept[i];
		if (k->path && k->run_uid == run_uid && !strcmp(k->path, path) &&
		    (path[0] == '/' || (k->base_dev == base->st_dev && k->base_ino == base->st_ino)))
			return k;
	}
	return NULL;
}

/* Whether k still holds for the file opened (st): every name it looked
 * at is as it noted, looked at once more. */
static bool kept_holds(const struct kept *k, int base_fd, const struct stat *st)
{
	if (!ident_is(&k->prog, st))
		return false;
	for (size_t i = 0; i < k->n; i++) {
		struct stat now;
		if (fstatat(base_fd, k->names[i].path, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !ident_is(&k->names[i].id, &now))
			return false;
	}
	return true;
}

/* The name c noted as name's directory (written before its last
 * component; / for a name at the top), or NULL. Its final is the
 * directory that holds name's entry, where it is a link. */
static const struct seen *seen_dir(const struct check *c, const char *name)
{
	const char *slash = strrchr(name, '/');
	if (!slash)
		return NULL;	/* in the base directory, noted by its real path */
	size_t n = slash == name ? 1 : (size_t)(slash - name);
	for (size_t i = 0; i < c->n; i++)
		if (strlen(c->v[i].path) == n && !strncmp(c->v[i].path, name, n))
			return &c->v[i];
	return NULL;
}

/* Whether a later change of what c noted could go unseen: a name that
 * changed in the check's tick (young), and so did its directory, which
 * would have to change for the name to lead elsewhere. A young name in a
 * settled directory is safe: another file or link put in its place
 * changes the directory's ctime. A change of mode or owner is seen in
 * st_mode and st_uid whatever the ctime; "/" is replaced by nothing. */
static bool check_young(const struct check *c, const struct timespec *start)
{
	for (size_t i = 0; i < c->n; i++) {
		if (!young(&c->v[i].st, start) || !strcmp(c->v[i].path, "/"))
			continue;
		const struct seen *dir = seen_dir(c, c->v[i].path);
		if (!dir || young(&dir->final, start))
			return true;
	}
	return false;
}

/* Keeps the check c passed (of path, the file opened st), in place of
 * the least recently used, unless what it noted is too young or too
 * long (links of a workspace can make a way of many long names). */
static void kept_put(const char *path, uid_t run_uid, const struct stat *base, const struct check *c,
		     const struct stat *st, const struct timespec *start)
{
	size_t bytes = strlen(path);
	for (size_t i = 0; i < c->n; i++)
		bytes += strlen(c->v[i].path);
	if (bytes > KEPT_BYTES_MAX || check_young(c, start))
		return;
	struct kept *k = &kept[0];
	for (size_t i = 0; i < KEPT_MAX && k->path; i++)
		if (!kept[i].path || kept[i].used < k->used)
			k = &kept[i];
	kept_drop(k);
	k->path = xstrdup(path);
	k->run_uid = run_uid;
	if (path[0] != '/') {
		k->base_dev = base->st_dev;
		k->base_ino = base->st_ino;
	}
	k->used = ++kept_clock;
	k->prog = ident_of(st);
	k->names = xreallocarray(NULL, c->n ? c->n : 1, sizeof(*k->names));
	k->n = c->n;
	for (size_t i = 0; i < c->n; i++)
		k->names[i] = (struct kept_name){ .path = xstrdup(c->v[i].path), .id = ident_of(&c->v[i].st) };
}

/* The full check of path, opened as fd (its stat st): why it is not fit,
 * or NULL. */
static char *check_full(struct check *c, const char *path, int fd, const struct stat *st)
{
	/* The last component: when a link, who could replace it and where
	 * it leads. */
	struct stat final;
	char *why = look(c, path, 0, &final);
	if (!why)
		why = unfit_dirs(c, path, 0);
	bool links = false;
	for (size_t i = 0; i < c->n; i++)
		links |= S_ISLNK(c->v[i].st.st_mode);
	/* Where it really is, when that is not path: named so, and the
	 * directories there checked too (those the links led through
	 * already are). */
	char real[PATH_MAX];
	const char *name = path;
	if (!why && (links || path[0] != '/')) {
		char proc[32];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(proc, real, sizeof(real) - 1);
		if (n <= 0 || real[0] != '/') {
			why = xasprintf("%s cannot be checked: where it lies is unknown", path);
		} else {
			real[n] = '\0';
			name = real;
			why = unfit_dirs(c, real, 0);
		}
	}
	if (!why && !S_ISREG(st->st_mode))
		why = xasprintf("%s is not a regular file", name);
	if (!why)
		why = unfit(c, name, st);
	return why;
}

/* Opens and checks path (relative: from base_fd); see sandbox.h. A kept
 * check that still holds answers for the full one. */
static int open_checked(int base_fd, const char *path, uid_t run_uid, int *ret_fd, char **ret_why)
{
	struct timespec start;
	clock_gettime(CLOCK_REALTIME, &start);
	_cleanup_close_ int fd = openat(base_fd, path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fd <= 2) {
		/* Above the standard streams, where child_opts.exec_fd is. */
		int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (high < 0)
			return -errno;
		close(fd);
		fd = high;
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	struct stat base = { 0 };
	bool keyed = path[0] == '/' || fstatat(base_fd, ".", &base, 0) == 0;
	struct kept *k = keyed ? kept_find(path, run_uid, &base) : NULL;
	if (k && kept_holds(k, base_fd, &st)) {
		k->used = ++kept_clock;
		kept_hits++;
		*ret_fd = TAKE_FD(fd);
		return 0;
	}
	if (k)
		kept_drop(k);
	struct check c = { .base_fd = base_fd, .run_uid = run_uid, .euid = (uid_t)-1 };
	char *why = check_full(&c, path, fd, &st);
	if (!why && keyed)
		kept_put(path, run_uid, &base, &c, &st, &start);
	check_done(&c);
	if (why) {
		log_refusal(why);
		*ret_why = why;
		return -EPERM;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}
int sandbox_program_open(const char *name, char *const *envp, int cwd_fd, uid_t run_uid, int *ret_fd,
			 char **ret_why)
{
	*ret_fd = -1;
	*ret_why = NULL;
	if (!name || !*name)
		return -ENOENT;
	int base = cwd_fd >= 0 ? cwd_fd : AT_FDCWD;
	if (strchr(name, '/'))
		return open_checked(base, name, run_uid, ret_fd, ret_why);
	/* Searched as execvp does, in envp's PATH: the first found is the
	 * one checked, a refused one is not passed over for a later one. */
	const char *path = NULL;
	for (char *const *e = envp; e && *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			path = *e + 5;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	int last = -ENOENT;
	size_t nl = strlen(name);
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dl = (size_t)(end - p);
		if (dl + nl + 2 <= PATH_MAX) {
			_cleanup_free_ char *full = dl ? xasprintf("%.*s/%s", (int)dl, p, name) : xasprintf("./%s", name);
			int r = open_checked(base, full, run_uid, ret_fd, ret_why);
			if (r == 0 || r == -EPERM)
				return r;
			if (r == -EACCES)
				last = r;
			else if (r != -ENOENT && r != -ENOTDIR)
				return r;
		}
		if (!*end)
			break;
		p = end;
	}
	return last;
}

int sandbox_script_check(char *const *argv, int cwd_fd, uid_t run_uid, char **ret_why)
{
	*ret_why = NULL;
	const char *script = sandbox_argv_script((const char *const *)argv);
	if (!script)
		return 0;
	_cleanup_close_ int fd = -1;
	int r = open_checked(cwd_fd >= 0 ? cwd_fd : AT_FDCWD, script, run_uid, &fd, ret_why);
	return r == -EPERM ? r : 0;
}
