/* SPDX-License-Identifier: MIT */
/*
 * Whether the sandbox refused a path that a failed child named, decided
 * from what the daemon built and what the kernel holds, not from the
 * child's wording: the wording only points at the path and the errno.
 *
 * The kernel tells no one what it refused but through audit (Landlock's
 * records, kaudit.c), and nothing at all for the refusals a mount makes
 * (a read-only mount, a directory covered empty). So for the absolute
 * path that a line of stderr names right beside "Read-only file system",
 * "Permission denied", "No such file or directory" or "Device or resource
 * busy", the daemon asks what the kernel would have done, in the kernel's
 * own order:
 *
 *  - EROFS comes only from a read-only mount. The sandbox refused the
 *    write when the path is beneath one of its own: a protected path, a
 *    covered private path, or (with the read-only mounts of its mount
 *    namespace) a path outside the writable ones whose mount is writable
 *    in the daemon's namespace. A file system read-only anyway is not the
 *    sandbox's doing.
 *  - EBUSY: the path is one of its mounts (a protected path that git
 *    renames its lock file over).
 *  - ENOENT is the sandbox's when the path is beneath a directory it
 *    covered empty (the unix sockets of $XDG_RUNTIME_DIR, /run/dbus, X's)
 *    or a covered private path, and the path exists in the daemon's
 *    namespace.
 *  - EACCES: for each access that could have been refused (reading,
 *    writing, running or listing it, removing it, making it when it is
 *    missing), the checks are replayed in the kernel's order for that
 *    access: the permission bits as the child's identity (uid, gid,
 *    groups, no capability: children hold none), the read-only mounts,
 *    Landlock's rules (ll_rules_allowed()); opening checks the bits
 *    before Landlock, making and removing Landlock before the bits. The
 *    sandbox refused it when some access fails by Landlock and every
 *    access that fails is one Landlock refuses (named by the access when
 *    only one can fail, else "accessing"); it did not when none fails by
 *    Landlock; else it cannot be told.
 *
 * A path the child's identity could not have reached (a directory on the
 * way it may not search) is never judged refused: the line tells nothing
 * of what exists beyond.
 *
 * The path is resolved by the daemon one component at a time, without
 * following a link blindly (a link is read and walked, 40 at most), and
 * never into a file system whose server could keep the daemon waiting
 * (FUSE, network file systems, autofs: their mount ids are read from
 * /proc/self/mountinfo first); its attributes are taken as cached
 * (AT_STATX_DONT_SYNC). A file with an ACL leaves the bits unknown. What
 * is decided is the file's state when the call ends.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "proto/base/util.h"
#include "proto/utf8.h"

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

#define RF_PATHS 32		/* paths looked at per note */
#define RF_SHOWN 8		/* refusals named */
#define RF_LINKS 40		/* links followed while resolving one path */
#define RF_MOUNTS_BYTES (1024 * 1024)

enum verdict { RF_NOT, RF_UNSURE, RF_SANDBOX };

uint64_t sandbox_refusal_notes;

struct mount_of {
	uint64_t id;
	bool ro;		/* read-only, by its mount or its super block */
	bool wary;		/* not looked into (wary_type()) */
};

struct mounts {
	struct mount_of *v;
	size_t n;
	bool read;
};

struct walked {
	char *path;		/* canonical, as far as it exists; the rest as written */
	bool exists;
	bool parent_only;	/* all but the last component exists */
	bool wary;		/* a file system not entered, or the walk failed */
	bool searchable;	/* the bits let the child search every directory on the way */
	bool acl;
	struct statx st;	/* the path's, when it exists */
	struct statx parent;	/* its directory's */
	uint64_t mnt_id;	/* the mount of the last existing component */
};

/* A file system the daemon does not look into for a child: one whose
 * server could keep it waiting (FUSE, network file systems, autofs), and
 * proc, whose /proc/self is the daemon's own, not the child's. */
static bool wary_type(const char *t)
{
	static const char *const types[] = { "fuse", "nfs", "cifs", "smb", "9p", "ceph", "gluster", "afs",
					      "autofs", "virtiofs", "sshfs", "davfs", "lustre", "gfs2", "ocfs2",
					      "ncp", "coda", "orangefs" };
	if (strcmp(t, "proc") == 0)
		return true;
	for (size_t i = 0; i < ELEMENTSOF(types); i++)
		if (strncmp(t, types[i], strlen(types[i])) == 0)
			return true;
	return false;
}

/* Whether a comma-separated option list holds "ro". */
static bool opt_ro(const char *o, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t k = i;
		while (k < n && o[k] != ',')
			k++;
		if (k - i == 2 && o[i] == 'r' && o[i + 1] == 'o')
			return true;
		i = k + 1;
	}
	return false;
}

/* "36 35 98:0 /root /mnt rw,noatime master:1 - ext4 /dev/x rw,errors=continue" */
static void mounts_read(struct mounts *m)
{
	if (m->read)
		return;
	m->read = true;
	_cleanup_close_ int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	struct buf b = {0};
	char chunk[8192];
	ssize_t k;
	while (buf_size(&b) < RF_MOUNTS_BYTES && (k = read(fd, chunk, sizeof(chunk))) > 0)
		buf_append(&b, chunk, (size_t)k);
	buf_putc(&b, '\0');
	for (char *line = b.data; line && *line;) {
		char *end = strchr(line, '\n');
		if (end)
			*end = '\0';
		char *f[6] = {0};
		char *p = line;
		for (int i = 0; i < 6 && p; i++) {
			f[i] = p;
			p = strchr(p, ' ');
			if (p)
				*p++ = '\0';
		}
		char *dash = p ? strstr(p, "- ") : NULL;
		if (f[5] && dash && (dash == p || dash[-1] == ' ')) {
			char *type = dash + 2, *src = strchr(type, ' ');
			char *super = src ? strchr(src + 1, ' ') : NULL;
			if (src)
				*src = '\0';
			m->v = xreallocarray(m->v, m->n + 1, sizeof(*m->v));
			m->v[m->n++] = (struct mount_of){
				.id = strtoull(f[0], NULL, 10),
				.ro = opt_ro(f[5], strlen(f[5])) || (super && opt_ro(super + 1, strlen(super + 1))),
				.wary = wary_type(type),
			};
		}
		line = end ? end + 1 : NULL;
	}
	buf_free(&b);
}

static const struct mount_of *mount_find(const struct mounts *m, uint64_t id)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].id == id)
			return &m->v[i];
	return NULL;
}

static bool in_groups(const struct sandbox_refusal_plan *p, gid_t g)
{
	if (g == p->gid)
		return true;
	for (size_t i = 0; i < p->n_groups; i++)
		if (p->groups[i] == g)
			return true;
	return false;
}

/* Whether the permission bits give the child every one of want (4 read,
 * 2 write, 1 search or run): the owner's, the group's or the others',
 * whichever class it is in, as the kernel checks them without a
 * capability. */
static bool bits(const struct sandbox_refusal_plan *p, const struct statx *st, unsigned want)
{
	unsigned shift = st->stx_uid == p->uid ? 6 : in_groups(p, st->stx_gid) ? 3 : 0;
	return ((st->stx_mode >> shift) & want) == want;
}

static bool has_acl(int fd)
{
	char proc[40];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return getxattr(proc, "system.posix_acl_access", NULL, 0) >= 0 ||
	       getxattr(proc, "system.posix_acl_default", NULL, 0) >= 0;
}

static bool stat_fd(int fd, struct statx *st)
{
	return statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
		     STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID | STATX_MNT_ID, st) == 0;
}

/* Keeps the first n bytes of b. */
static void buf_cut(struct buf *b, size_t n)
{
	if (b->data && n < buf_size(b)) {
		b->len = b->off + n;
		b->data[b->len] = '\0';
	}
}

/* Drops the last component of a canonical path ("" for "/"). */
static void path_up(struct buf *c)
{
	size_t n = buf_size(c);
	while (n > 0 && buf_head(c)[n - 1] != '/')
		n--;
	buf_cut(c, n ? n - 1 : 0);
}

/*
 * Resolves path (absolute) one component at a time from "/", as the
 * daemon sees it: each directory's mount checked before a name is looked
 * up in it, the bits for the child noted on the way.
 */
static void walk(const struct sandbox_refusal_plan *p, struct mounts *m, const char *path, struct walked *w)
{
	*w = (struct walked){ .searchable = true };
	struct buf c = {0};		/* canonical so far, "" for "/" */
	_cleanup_free_ char *todo = xstrdup(path);
	size_t at = 0;
	unsigned links = 0;
	int cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct statx cst;
	if (cur < 0 || !stat_fd(cur, &cst)) {
		w->wary = true;
		goto out;
	}
	mounts_read(m);
	for (;;) {
		while (todo[at] == '/')
			at++;
		if (!todo[at]) {
			w->exists = true;
			w->st = cst;
			break;
		}
		size_t len = strcspn(todo + at, "/");
		char name[NAME_MAX + 1];
		if (len > NAME_MAX) {
			w->wary = true;
			break;
		}
		memcpy(name, todo + at, len);
		name[len] = '\0';
		at += len;
		if (strcmp(name, ".") == 0)
			continue;
		/* A directory to look a name up in: its mount first. */
		const struct mount_of *mo = mount_find(m, cst.stx_mnt_id);
		w->mnt_id = cst.stx_mnt_id;
		if (!mo || mo->wary || !S_ISDIR(cst.stx_mode)) {
			w->wary = true;
			break;
		}
		if (!bits(p, &cst, 1))
			w->searchable = false;
		w->acl |= has_acl(cur);
		w->parent = cst;
		int next = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct statx nst;
		if (next < 0 || !stat_fd(next, &nst)) {
			bool missing = next < 0 && errno == ENOENT;
			if (next >= 0)
				close(next);
			if (!missing) {
				w->wary = true;
				break;
			}
			/* The rest as written. */
			w->parent_only = !strchr(todo + at, '/') || !todo[at + strspn(todo + at, "/")];
			buf_printf(&c, "/%s%s", name, todo + at);
			break;
		}
		if (S_ISLNK(nst.stx_mode)) {
			char target[PATH_MAX];
			ssize_t tl = readlinkat(next, "", target, sizeof(target) - 1);
			close(next);
			if (tl <= 0 || ++links > RF_LINKS || (size_t)tl + strlen(todo + at) + 2 > PATH_MAX) {
				w->wary = true;
				break;
			}
			target[tl] = '\0';
			char *rest = xasprintf("%s/%s", target, todo + at);
			free(todo);
			todo = rest;
			at = 0;
			if (target[0] == '/') {
				close(cur);
				cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				buf_cut(&c, 0);
				if (cur < 0 || !stat_fd(cur, &cst)) {
					w->wary = true;
					break;
				}
			}
			continue;
		}
		close(cur);
		cur = next;
		cst = nst;
		if (strcmp(name, "..") == 0)
			path_up(&c);
		else
			buf_printf(&c, "/%s", name);
	}
	if (w->exists) {
		/* The path may be the root of a mount not to be entered. */
		const struct mount_of *mo = mount_find(m, w->st.stx_mnt_id);
		w->mnt_id = w->st.stx_mnt_id;
		if (!mo || mo->wary)
			w->wary = true;
		else
			w->acl |= has_acl(cur);
	}
out:
	if (cur >= 0)
		close(cur);
	if (!buf_size(&c))
		buf_putc(&c, '/');
	buf_putc(&c, '\0');
	w->path = buf_steal(&c);
}

/* Whether path is dir or beneath it. */
static bool beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/'));
}

static const char *beneath_any(const char *path, const char *const *dirs, bool strictly)
{
	for (; dirs && *dirs; dirs++)
		if (beneath(path, *dirs) && (!strictly || strcmp(path, *dirs) != 0))
			return *dirs;
	return NULL;
}

/* The sandbox made path read-only (in its mount namespace). */
static bool made_read_only(const struct sandbox_refusal_plan *p, const char *path)
{
	if (!p->writable)
		return false;
	if (beneath_any(path, p->writable, false) || (p->tmpdir && beneath(path, p->tmpdir)))
		return false;
	return true;
}

#define OP_READ 1
#define OP_WRITE 2
#define OP_RUN 4
#define OP_MAKE 8
#define OP_LIST 16
#define OP_REMOVE 32

static const char *op_verb(unsigned op)
{
	switch (op) {
	case OP_READ: return "reading";
	case OP_WRITE: return "writing";
	case OP_RUN: return "running";
	case OP_MAKE: return "creating";
	case OP_LIST: return "listing";
	case OP_REMOVE: return "removing";
	default: return "accessing";
	}
}

/*
 * EACCES on a path: which accesses would fail, and by whom, in the
 * kernel's order. Opening (reading, writing, running, listing) checks the
 * bits first, then the mount's read-only state (EROFS), then Landlock
 * (its file_open hook); making or removing an entry checks the mount
 * first, then Landlock (its path hooks), then the bits of the directory.
 */
static enum verdict eacces(const struct sandbox_refusal_plan *p, const struct walked *w, unsigned *ret_ops,
			   bool *ret_private)
{
	if (!w->searchable)
		return RF_NOT;		/* refused on the way, by the bits */
	if (!p->rules)
		return RF_NOT;		/* no Landlock: nothing of the sandbox answers EACCES */
	struct {
		unsigned op;
		bool entry;		/* making or removing: Landlock before the bits */
		bool bits_ok;
		uint64_t right;
		const char *at;		/* where Landlock checks it */
		bool ro;		/* its mount read-only: EROFS, not EACCES, once the bits pass */
	} ops[4];
	size_t n = 0;
	_cleanup_free_ char *parent = xstrdup(w->path);
	char *slash = strrchr(parent, '/');
	if (slash)
		slash[slash == parent ? 1 : 0] = '\0';
	bool parent_ro = made_read_only(p, parent);
	if (!w->exists) {
		if (!w->parent_only)
			return RF_NOT;	/* a directory on the way is missing: ENOENT's */
		ops[n++] = (typeof(ops[0])){ OP_MAKE, true, bits(p, &w->parent, 3), LL_FS_MAKE_REG, parent, parent_ro };
	} else {
		bool dir = S_ISDIR(w->st.stx_mode);
		bool ro = made_read_only(p, w->path);
		if (dir) {
			ops[n++] = (typeof(ops[0])){ OP_LIST, false, bits(p, &w->st, 4), LL_FS_READ_DIR, w->path, false };
			ops[n++] = (typeof(ops[0])){ OP_MAKE, true, bits(p, &w->st, 3), LL_FS_MAKE_REG, w->path, ro };
		} else {
			ops[n++] = (typeof(ops[0])){ OP_READ, false, bits(p, &w->st, 4), LL_FS_READ_FILE, w->path, false };
			ops[n++] = (typeof(ops[0])){ OP_WRITE, false, bits(p, &w->st, 2), LL_FS_WRITE_FILE, w->path, ro };
			ops[n++] = (typeof(ops[0])){ OP_RUN, false, bits(p, &w->st, 1), LL_FS_EXECUTE, w->path, false };
		}
		if (strcmp(w->path, "/") != 0)
			ops[n++] = (typeof(ops[0])){ OP_REMOVE, true, bits(p, &w->parent, 3),
						     dir ? LL_FS_REMOVE_DIR : LL_FS_REMOVE_FILE, parent, parent_ro };
	}
	bool all_refused = true;
	unsigned failing = 0, by_sandbox = 0;
	for (size_t i = 0; i < n; i++) {
		bool allowed = (ll_rules_allowed(p->rules, ops[i].at) & ops[i].right) == ops[i].right;
		bool fails_bits, fails_sandbox;
		if (ops[i].entry) {
			if (ops[i].ro)
				continue;	/* EROFS */
			fails_sandbox = !allowed;
			fails_bits = allowed && !ops[i].bits_ok;
		} else {
			fails_bits = !ops[i].bits_ok;
			if (!fails_bits && ops[i].ro)
				continue;	/* EROFS */
			fails_sandbox = !fails_bits && !allowed;
		}
		if (!fails_bits && !fails_sandbox)
			continue;	/* it passes */
		failing |= ops[i].op;
		if (fails_sandbox)
			by_sandbox |= ops[i].op;
		all_refused &= !allowed;
	}
	if (!by_sandbox)
		return RF_NOT;
	/* The one access that can have failed, or "accessing". */
	*ret_ops = failing;
	*ret_private = !(ll_rules_allowed(p->rules, w->exists ? w->path : parent) &
			 (w->exists && S_ISDIR(w->st.stx_mode) ? LL_FS_READ_DIR : LL_FS_READ_FILE));
	return all_refused ? RF_SANDBOX : RF_UNSURE;
}

enum rf_errno { RF_EROFS, RF_EACCES, RF_ENOENT, RF_EBUSY };

/* What the sandbox did to path for an error of kind e; *ret_what, when
 * it refused it, says so ("writing /usr/x (...)"). */
static enum verdict judge(const struct sandbox_refusal_plan *p, struct mounts *m, const char *path, enum rf_errno e,
			  char **ret_what)
{
	struct walked w;
	walk(p, m, path, &w);
	_cleanup_free_ char *c = w.path;
	enum verdict v = RF_NOT;
	const char *d;
	if (w.wary) {
		v = e == RF_ENOENT || e == RF_EBUSY ? RF_NOT : RF_UNSURE;
	} else if (!w.searchable) {
		/* Refused on the way by the bits (EACCES): nothing of the
		 * sandbox's, and nothing to tell of what lies beyond. */
		v = RF_NOT;
	} else if (e == RF_EBUSY) {
		/* A mount of the sandbox's stands there: it can be neither
		 * replaced nor removed (git's rename of config.lock). */
		if (w.exists && (d = beneath_any(c, p->ro_binds, false)) && str_eq(c, d)) {
			v = RF_SANDBOX;
			*ret_what = xasprintf("replacing %s (a protected path, sandbox.protect)", c);
		} else if (w.exists && (d = beneath_any(c, p->covers, false)) && str_eq(c, d)) {
			v = RF_SANDBOX;
			*ret_what = xasprintf("replacing %s (a private path, sandbox.deny_read)", c);
		} else if (w.exists && (d = beneath_any(c, p->hide_dirs, false)) && str_eq(c, d)) {
			v = RF_SANDBOX;
			*ret_what = xasprintf("replacing %s (hidden: the sandbox covers it)", c);
		}
	} else if ((d = beneath_any(c, p->covers, false)) && (w.exists || (e != RF_ENOENT && strcmp(c, d) != 0))) {
		/* Its place holds an empty read-only mount: whatever was asked. */
		v = RF_SANDBOX;
		*ret_what = xasprintf("%s %s (a private path, sandbox.deny_read)",
				      e == RF_EROFS ? "writing" : e == RF_ENOENT ? "reaching" : "accessing", c);
	} else if (e == RF_ENOENT) {
		if ((d = beneath_any(c, p->hide_dirs, true)) && w.exists) {
			v = RF_SANDBOX;
			*ret_what = xasprintf("reaching %s (hidden: the sandbox covers %s, where sockets such as "
					      "the session bus and agents live)", c, d);
		}
	} else if (e == RF_EROFS) {
		const struct mount_of *mo = mount_find(m, w.mnt_id);
		if (beneath_any(c, p->ro_binds, false)) {
			v = RF_SANDBOX;
			*ret_what = xasprintf("writing %s (a protected path, sandbox.protect)", c);
		} else if (made_read_only(p, c) && mo && !mo->ro) {
			v = RF_SANDBOX;
			*ret_what = xasprintf("writing %s (read-only in the sandbox: outside the paths it may write)", c);
		}
	} else if (w.acl) {
		v = RF_UNSURE;
	} else {
		unsigned ops = 0;
		bool private = false;
		v = eacces(p, &w, &ops, &private);
		if (v == RF_SANDBOX)
			*ret_what = xasprintf("%s %s (%s)", op_verb(ops), c,
					      private ? "a private path, sandbox.deny_read" : "outside the paths it may write");
	}
	return v;
}

/* A quote as programs write them (', ", `, and the UTF-8 bytes of ‘’“”). */
static bool quote_byte(unsigned char c)
{
	return c == '\'' || c == '"' || c == '`' || c == 0xe2 || c == 0x80 || c == 0x98 || c == 0x99 ||
	       c == 0x9c || c == 0x9d;
}

/* What may stand between a path and the words after it: quotes, ':' and
 * spaces ("'/x': Read-only", "/x: Permission denied"). */
static bool gap_before(const char *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!quote_byte((unsigned char)g[i]) && g[i] != ':' && g[i] != ' ')
			return false;
	return n <= 8;
}

/* What may stand between the words and a path after them: those, ',',
 * and one word naming the call ("denied: '/x'", "denied, open '/x'"). */
static bool gap_after(const char *g, size_t n)
{
	unsigned words = 0;
	bool in = false;
	for (size_t i = 0; i < n; i++) {
		char c = g[i];
		bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
		if (letter && !in)
			words++;
		in = letter;
		if (!letter && !quote_byte((unsigned char)c) && c != ':' && c != ' ' && c != ',')
			return false;
	}
	return n <= 24 && words <= 1;
}

/*
 * The absolute path a line names for the error whose words are at
 * [words, words + wlen) (bare, or quoted as programs quote), only where
 * nothing but quotes and punctuation stands between: the one right
 * before the words ("sh: 1: cannot create /x: Read-only file system",
 * not the "/bin/sh" before it), else the one right after them
 * ("Permission denied: '/x'", "EACCES: permission denied, open '/x'");
 * NULL when none ("sh: 1: cannot create x/y: ...": a relative path).
 */
static char *line_path(const char *s, size_t n, size_t words, size_t wlen)
{
	size_t best = 0, best_len = 0;
	bool found = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '/')
			continue;
		char prev = i ? s[i - 1] : ' ';
		char close = 0;
		if (prev == '\'' || prev == '"' || prev == '`')
			close = prev == '`' ? '\'' : prev;
		else if (i >= 3 && (unsigned char)s[i - 3] == 0xe2 && (unsigned char)s[i - 2] == 0x80 &&
			 ((unsigned char)s[i - 1] == 0x98 || (unsigned char)s[i - 1] == 0x9c))
			close = 1;	/* ‘...’ or “...” */
		else if (!strchr(" \t(=:[<,", prev))
			continue;
		size_t e = i;
		while (e < n) {
			unsigned char ch = (unsigned char)s[e];
			if (close == 1 ? ch == 0xe2 : close ? ch == (unsigned char)close
							   : (ch == ' ' || ch == '\t' || ch == '\'' || ch == '"' ||
							      ch == ',' || ch == ')' || ch == ']' || ch == '>' ||
							      (ch == ':' && (e + 1 == n || s[e + 1] == ' '))))
				break;
			e++;
		}
		size_t len = e - i;
		while (len > 1 && s[i + len - 1] == ':')
			len--;
		bool ok = len > 1 && len < PATH_MAX;
		for (size_t j = i; ok && j < i + len; j++)
			ok = (unsigned char)s[j] >= 0x20 && s[j] != 0x7f;
		if (ok && i + len <= words && gap_before(s + i + len, words - (i + len))) {
			best = i;	/* right before the words */
			best_len = len;
			found = true;
		} else if (ok && !found && i >= words + wlen && gap_after(s + words + wlen, i - (words + wlen))) {
			best = i;	/* right after them, none before */
			best_len = len;
			found = true;
			break;
		}
		if (i >= words + wlen && found)
			break;
		i = e;
	}
	return found ? xstrndup(s + best, best_len) : NULL;
}

/* Where words are in the line, matched without regard to case (Go and
 * Node write "permission denied"), or NULL. */
static const char *find_words(const char *line, size_t len, const char *words)
{
	size_t n = strlen(words);
	for (size_t i = 0; i + n <= len; i++)
		if (strncasecmp(line + i, words, n) == 0)
			return line + i;
	return NULL;
}

/* Whether a list of refusals ("reading /x; writing /y (...)") names path. */
static bool names(const char *list, const char *path)
{
	size_t n = strlen(path);
	for (const char *k = list; k && (k = strstr(k, path)); k++)
		if ((k == list || k[-1] == ' ') && (k[n] == '\0' || k[n] == ' ' || k[n] == ';'))
			return true;
	return false;
}

char *sandbox_refusal_check(const struct sandbox_refusal_plan *p, const char *err, size_t n, const char *known,
			    bool *ret_unsure)
{
	static const struct { const char *words; enum rf_errno e; } kinds[] = {
		{ "Read-only file system", RF_EROFS },
		{ "Permission denied", RF_EACCES },
		{ "No such file or directory", RF_ENOENT },
		{ "Device or resource busy", RF_EBUSY },
	};
	*ret_unsure = false;
	struct mounts m = {0};
	struct buf out = {0};
	unsigned looked = 0, shown = 0, more = 0;
	for (size_t at = 0; err && at < n;) {
		const char *line = err + at;
		const char *nl = memchr(line, '\n', n - at);
		size_t len = nl ? (size_t)(nl - line) : n - at;
		at += len + 1;
		int kind = -1;
		size_t words = 0;
		for (size_t i = 0; i < ELEMENTSOF(kinds) && kind < 0; i++) {
			const char *w = find_words(line, len, kinds[i].words);
			if (w) {
				kind = (int)i;
				words = (size_t)(w - line);
			}
		}
		if (kind < 0)
			continue;
		_cleanup_free_ char *path = line_path(line, len, words, strlen(kinds[kind].words));
		bool refused = false, unsure = !path;
		if (path) {
			char *what = NULL;
			enum verdict v = looked++ < RF_PATHS ? judge(p, &m, path, kinds[kind].e, &what) : RF_UNSURE;
			if (v == RF_SANDBOX) {
				refused = true;
				/* Named already by the kernel's record, or by another line. */
				const char *named = strchr(what, ' ') + 1;
				_cleanup_free_ char *canon = xstrndup(named, strcspn(named, " "));
				if (names(known, canon) || names(buf_head(&out), canon))
					;
				else if (shown < RF_SHOWN) {
					if (shown++)
						buf_puts(&out, "; ");
					utf8_sanitize(what, strlen(what), &out);
				} else {
					more++;
				}
			} else if (v == RF_UNSURE) {
				unsure = true;
			}
			free(what);
		}
		/* A refusal named without a path that can be judged: no word
		 * either way, unless it is only a missing file. */
		if (!refused && unsure && kinds[kind].e != RF_ENOENT && kinds[kind].e != RF_EBUSY)
			*ret_unsure = true;
	}
	free(m.v);
	if (!shown) {
		buf_free(&out);
		return NULL;
	}
	if (more)
		buf_printf(&out, " (and %u more)", more);
	sandbox_refusal_notes++;
	return buf_steal(&out);
}
