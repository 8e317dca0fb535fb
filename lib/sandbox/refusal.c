/* SPDX-License-Identifier: MIT */
/*
 * Whether the sandbox refused a path that a failed child named, decided
 * from what the daemon built and what the kernel holds, not from the
 * child's wording: the wording only points at the path and the errno.
 *
 * This file is long because each errno is replayed in the kernel's own
 * order, from the mounts, the bits and ACLs, Landlock's rules and the
 * seccomp filter, and the lines that name the paths are hostile input.
 *
 * The kernel tells no one what it refused but through audit (Landlock's
 * records, kaudit.c), and nothing at all for the refusals a mount makes
 * (a read-only mount, a directory covered empty). So for the path that a
 * line of stderr names right beside "Read-only file system", "Permission
 * denied", "No such file or directory", "Device or resource busy" or
 * "Operation not permitted", the daemon asks what the kernel would have
 * done, in the kernel's own order:
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
 *  - EPERM, which Landlock and read-only mounts never answer, for the
 *    call the line's wording names (eperm()): the seccomp filter's
 *    refusals (a setuid or setgid bit, a device node, a mount, a new
 *    namespace) and those of the capabilities a uid 0 child was
 *    stripped of; never what the peer's uid is refused outside too.
 *
 * A relative path is joined to the directory the child started in (the
 * plan's cwd, given for shell, command tools and MCP servers) and judged only where what is there
 * explains the error (missing for ENOENT, on a read-only mount for EROFS,
 * refused some access for EACCES): a child that moved (cd) names another
 * file by the same words, which the daemon cannot know, and no word is
 * said either way (unless the starting directory happens to explain the
 * error too: where a child moved is not seen). Without a cwd it is not
 * judged.
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
 * (AT_STATX_DONT_SYNC). Their servers decide refusals the daemon cannot
 * replay, so a path there is left unsure (the note's "may have been"),
 * never named the sandbox's refusal. So is proc, whose /proc/self is the daemon's: EROFS there is
 * decided by the mount its words lie on (the child's is the same mount,
 * made read-only; the sandbox mounts no proc of its own and hides no
 * process), EACCES is a check against another process that may be gone.
 * The bits are read with the access ACL, evaluated as the kernel does;
 * one longer than RF_ACL_MAX entries leaves them unknown. What is decided
 * is the file's state when the call ends.
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
	char *point;		/* where it is mounted, as mountinfo writes it */
	bool ro;		/* read-only, by its mount or its super block */
	bool wary;		/* not looked into (wary_type()) */
	bool proc;
};

struct mounts {
	struct mount_of *v;
	size_t n;
	bool read;
};

/* A file's access ACL (system.posix_acl_access), as the kernel keeps it:
 * entries sorted by tag, then by id. */
#define RF_ACL_MAX 64
#define ACL_USER_OBJ 0x01
#define ACL_USER 0x02
#define ACL_GROUP_OBJ 0x04
#define ACL_GROUP 0x08
#define ACL_MASK 0x10
#define ACL_OTHER 0x20
struct acl {
	unsigned n;		/* 0: none, the bits alone decide */
	struct { uint16_t tag, perm; uint32_t id; } e[RF_ACL_MAX];
};

struct walked {
	char *path;		/* canonical, as far as it exists; the rest as written */
	bool exists;
	bool parent_only;	/* all but the last component exists */
	bool wary;		/* a file system not entered, or the walk failed */
	bool searchable;	/* the bits let the child search every directory on the way */
	bool acl;		/* an ACL on the way that could not be read */
	struct statx st;	/* the path's, when it exists */
	struct statx parent;	/* its directory's */
	struct acl st_acl, parent_acl;
	uint64_t mnt_id;	/* the mount of the last existing component */
	char *rest;		/* wary: what was not looked up ("/self/fd/1"), else NULL */
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
				.point = xstrdup(f[4]),
				.ro = opt_ro(f[5], strlen(f[5])) || (super && opt_ro(super + 1, strlen(super + 1))),
				.wary = wary_type(type),
				.proc = strcmp(type, "proc") == 0,
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

static void mounts_free(struct mounts *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].point);
	free(m->v);
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

/* The xattr's form: a version (2), then 8 bytes an entry, little-endian.
 * Returns false for what is not that (or holds more than RF_ACL_MAX). */
static bool acl_parse(const unsigned char *b, size_t n, struct acl *a)
{
	a->n = 0;
	if (n < 4 || (n - 4) % 8 || (n - 4) / 8 > RF_ACL_MAX ||
	    (b[0] | b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24) != 2)
		return false;
	for (size_t i = 4; i < n; i += 8, a->n++) {
		a->e[a->n].tag = (uint16_t)(b[i] | b[i + 1] << 8);
		a->e[a->n].perm = (uint16_t)(b[i + 2] | b[i + 3] << 8);
		a->e[a->n].id = b[i + 4] | b[i + 5] << 8 | (uint32_t)b[i + 6] << 16 | (uint32_t)b[i + 7] << 24;
	}
	return true;
}

/* Reads the access ACL of what fd (O_PATH) is; false when it is there but
 * cannot be read (or is too long): the bits alone would be wrong. A
 * default ACL gives no access by itself and is not read. */
static bool acl_read(int fd, struct acl *a)
{
	char proc[40];
	unsigned char b[4 + 8 * RF_ACL_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	a->n = 0;
	ssize_t n = getxattr(proc, "system.posix_acl_access", b, sizeof(b));
	if (n < 0)
		return errno == ENODATA || errno == EOPNOTSUPP;
	return acl_parse(b, (size_t)n, a);
}

/*
 * posix_acl_permission() of the kernel: the owner's entry for the owner,
 * a named user's or the first group entry (the owning group's or a named
 * one) that grants it all, capped by the mask; with a group entry
 * matching but none granting, refused; else the others'.
 */
static bool acl_allows(const struct sandbox_refusal_plan *p, const struct statx *st, const struct acl *a,
		       unsigned want)
{
	bool found = false;
	size_t i;
	for (i = 0; i < a->n; i++) {
		const unsigned perm = a->e[i].perm;
		switch (a->e[i].tag) {
		case ACL_USER_OBJ:
			if (st->stx_uid == p->uid)
				return (perm & want) == want;
			break;
		case ACL_USER:
			if (a->e[i].id == p->uid)
				goto mask;
			break;
		case ACL_GROUP_OBJ:
		case ACL_GROUP:
			if (in_groups(p, a->e[i].tag == ACL_GROUP ? a->e[i].id : st->stx_gid)) {
				found = true;
				if ((perm & want) == want)
					goto mask;
			}
			break;
		case ACL_MASK:
			break;
		case ACL_OTHER:
			return !found && (perm & want) == want;
		default:
			return false;	/* the kernel: EIO */
		}
	}
	return false;
mask:
	for (size_t k = i + 1; k < a->n; k++)
		if (a->e[k].tag == ACL_MASK)
			return (a->e[i].perm & a->e[k].perm & want) == want;
	return (a->e[i].perm & want) == want;
}

/* Whether the permission bits (and the access ACL, when there is one) give
 * the child every one of want (4 read, 2 write, 1 search or run), as the
 * kernel checks them without a capability (acl_permission_check()): the
 * owner's bits for the owner; the ACL when the group's bits (its mask)
 * are not all clear; else the group's or the others' bits. */
static bool bits(const struct sandbox_refusal_plan *p, const struct statx *st, const struct acl *a, unsigned want)
{
	if (st->stx_uid == p->uid)
		return ((st->stx_mode >> 6) & want) == want;
	if (a && a->n && (st->stx_mode & S_IRWXG))
		return acl_allows(p, st, a, want);
	unsigned shift = in_groups(p, st->stx_gid) ? 3 : 0;
	return ((st->stx_mode >> shift) & want) == want;
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

/* Whether path is dir or beneath it. */
static bool beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/'));
}

/*
 * Resolves path (absolute) one component at a time from "/", as the
 * daemon sees it: each directory's mount checked before a name is looked
 * up in it, the bits for the child noted on the way (but for those above
 * from, where a child that named the path relative was already).
 */
static void walk(const struct sandbox_refusal_plan *p, struct mounts *m, const char *path, const char *from,
		 struct walked *w)
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
			w->rest = xasprintf("/%s%s", name, todo + at);
			break;
		}
		w->acl |= !acl_read(cur, &w->parent_acl);
		/* A relative path is looked up from where the child is
		 * (from): the directories above it are not searched. */
		bool above = from && buf_size(&c) < strlen(from) && beneath(from, buf_size(&c) ? buf_head(&c) : "/");
		if (!above && !bits(p, &cst, &w->parent_acl, 1))
			w->searchable = false;
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
			w->acl |= !acl_read(cur, &w->st_acl);
	}
out:
	if (cur >= 0)
		close(cur);
	if (!buf_size(&c))
		buf_putc(&c, '/');
	buf_putc(&c, '\0');
	w->path = buf_steal(&c);
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
			   bool *ret_private, bool *ret_explained)
{
	*ret_explained = true;
	if (!w->searchable)
		return RF_NOT;		/* refused on the way, by the bits */
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
	const struct acl *sa = &w->st_acl, *pa = &w->parent_acl;
	if (!w->exists) {
		if (!w->parent_only) {
			*ret_explained = false;
			return RF_NOT;	/* a directory on the way is missing: ENOENT's */
		}
		ops[n++] = (typeof(ops[0])){ OP_MAKE, true, bits(p, &w->parent, pa, 3), LL_FS_MAKE_REG, parent, parent_ro };
	} else {
		bool dir = S_ISDIR(w->st.stx_mode);
		bool ro = made_read_only(p, w->path);
		if (dir) {
			ops[n++] = (typeof(ops[0])){ OP_LIST, false, bits(p, &w->st, sa, 4), LL_FS_READ_DIR, w->path, false };
			ops[n++] = (typeof(ops[0])){ OP_MAKE, true, bits(p, &w->st, sa, 3), LL_FS_MAKE_REG, w->path, ro };
		} else {
			ops[n++] = (typeof(ops[0])){ OP_READ, false, bits(p, &w->st, sa, 4), LL_FS_READ_FILE, w->path, false };
			ops[n++] = (typeof(ops[0])){ OP_WRITE, false, bits(p, &w->st, sa, 2), LL_FS_WRITE_FILE, w->path, ro };
			ops[n++] = (typeof(ops[0])){ OP_RUN, false, bits(p, &w->st, sa, 1), LL_FS_EXECUTE, w->path, false };
		}
		if (strcmp(w->path, "/") != 0)
			ops[n++] = (typeof(ops[0])){ OP_REMOVE, true, bits(p, &w->parent, pa, 3),
						     dir ? LL_FS_REMOVE_DIR : LL_FS_REMOVE_FILE, parent, parent_ro };
	}
	bool all_refused = true;
	unsigned failing = 0, by_sandbox = 0;
	for (size_t i = 0; i < n; i++) {
		/* No Landlock: nothing of the sandbox answers EACCES. */
		bool allowed = !p->rules || (ll_rules_allowed(p->rules, ops[i].at) & ops[i].right) == ops[i].right;
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
	*ret_explained = failing != 0;
	if (!by_sandbox)
		return RF_NOT;
	/* The one access that can have failed, or "accessing". */
	*ret_ops = failing;
	*ret_private = !(ll_rules_allowed(p->rules, w->exists ? w->path : parent) &
			 (w->exists && S_ISDIR(w->st.stx_mode) ? LL_FS_READ_DIR : LL_FS_READ_FILE));
	return all_refused ? RF_SANDBOX : RF_UNSURE;
}

enum rf_errno { RF_EROFS, RF_EACCES, RF_ENOENT, RF_EBUSY, RF_EPERM };

/* The call an EPERM line names, by the wording of the programs that make
 * it (coreutils, util-linux): EPERM alone does not say. */
enum rf_call { CALL_NONE, CALL_MODE, CALL_OWNER, CALL_TIMES, CALL_LINK, CALL_NODE, CALL_MOUNT, CALL_NS };

/*
 * EPERM on a path, for the call its line names. Landlock never answers
 * EPERM and a read-only mount answers EROFS; what is left is the kernel's
 * rule that only a file's owner (or a capability) changes its mode or
 * times or links to it unreadable, that only a capability gives a file
 * away or makes a device node, an immutable or append-only file, and the
 * seccomp filter's refusal of setuid and setgid bits and device nodes
 * (seccomp.c, add_mode_rules()). The sandbox refused it when the filter
 * did, or the capabilities it took from a uid 0 child would have allowed
 * it; a refusal the peer's own uid gets outside the sandbox is not its.
 */
static enum verdict eperm(const struct sandbox_refusal_plan *p, const struct walked *w, enum rf_call call,
			  char **ret_what)
{
	bool root = p->uid == 0;
	if (call < CALL_MODE || call > CALL_NODE)
		return RF_UNSURE;	/* a call not told */
	if (call == CALL_NODE) {
		/* A FIFO or socket is made but with a setuid or setgid bit,
		 * which mknod(1) refuses itself: a device node. */
		if (w->exists || !w->parent_only || !p->seccomp)
			return RF_UNSURE;
		if (!root)
			return RF_NOT;	/* a device node takes a privilege it never had */
		*ret_what = xasprintf("making the device node %s (the sandbox makes no device nodes, nor setuid or "
				      "setgid files)", w->path);
		return RF_SANDBOX;
	}
	if (!w->exists)
		return RF_UNSURE;
	if (w->st.stx_attributes & (STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND))
		return RF_NOT;		/* chattr +i or +a: refused to every uid */
	bool owner = w->st.stx_uid == p->uid;
	if (owner && call == CALL_MODE) {
		/* Its owner may set any bit but those the filter refuses. */
		if (!p->seccomp)
			return RF_UNSURE;
		*ret_what = xasprintf("setting a setuid or setgid bit on %s (no file gets one in the sandbox)",
				      w->path);
		return RF_SANDBOX;
	}
	if (owner && call != CALL_OWNER)
		return RF_UNSURE;	/* its owner is refused for a reason not told */
	if (!root)
		return RF_NOT;		/* as it would be outside: the kernel's rule for its uid */
	if (!p->no_caps)
		return RF_UNSURE;
	static const char *const verbs[] = {
		[CALL_MODE] = "changing the mode of", [CALL_OWNER] = "changing the owner of",
		[CALL_TIMES] = "setting the times of", [CALL_LINK] = "linking to",
	};
	*ret_what = xasprintf("%s %s (a sandboxed child holds no capabilities, even as root: %s)", verbs[call], w->path,
			      call == CALL_OWNER ? "it gives no file away" : "only a file's owner may");
	return RF_SANDBOX;
}

/* Whether a path holds the component name. */
static bool has_component(const char *path, const char *name)
{
	size_t n = strlen(name);
	for (const char *k = path; (k = strstr(k, name)); k++)
		if ((k == path || k[-1] == '/') && (k[n] == '\0' || k[n] == '/'))
			return true;
	return false;
}

/* The mount a canonical path lies on by its words alone (the last one
 * mounted on the longest mount point that holds it): for a file system
 * not looked into. */
static const struct mount_of *mount_by_path(const struct mounts *m, const char *path)
{
	const struct mount_of *best = NULL;
	size_t best_len = 0;
	for (size_t i = 0; i < m->n; i++) {
		size_t n = strlen(m->v[i].point);
		if (beneath(path, m->v[i].point) && n >= best_len) {
			best = &m->v[i];
			best_len = n;
		}
	}
	return best;
}

/*
 * EROFS on a path in a proc file system, which is not looked into (its
 * /proc/self is the daemon's, not the child's): the sandbox mounts no proc
 * of its own, so the mount its words lie on is the child's too, made
 * read-only with the rest outside the writable paths. Its links to other
 * files (fd/N, cwd, root, exe, map_files/) lead anywhere, and ".." out of it.
 */
static enum verdict proc_erofs(const struct sandbox_refusal_plan *p, const struct mounts *m, const char *full,
			       char **ret_what)
{
	static const char *const links[] = { "fd", "cwd", "root", "exe", "map_files", ".." };
	for (size_t i = 0; i < ELEMENTSOF(links); i++)
		if (has_component(full, links[i]))
			return RF_UNSURE;
	const struct mount_of *mo = mount_by_path(m, full);
	if (!mo)
		return RF_UNSURE;
	if (mo->ro)
		return RF_NOT;		/* read-only anyway */
	if (!made_read_only(p, full))
		return RF_UNSURE;
	*ret_what = xasprintf("writing %s (read-only in the sandbox: outside the paths it may write)", full);
	return RF_SANDBOX;
}

/* What the sandbox did to path for an error of kind e (of call, for
 * EPERM); *ret_what, when it refused it, says so ("writing /usr/x
 * (...)"). A path that stood relative in the line (relative, joined to
 * the child's working directory) is judged only where what is there
 * explains the error: else the child was elsewhere (a cd), and no word
 * is said either way. */
static enum verdict judge(const struct sandbox_refusal_plan *p, struct mounts *m, const char *path, enum rf_errno e,
			  enum rf_call call, bool relative, char **ret_what)
{
	struct walked w;
	walk(p, m, path, relative ? p->cwd : NULL, &w);
	_cleanup_free_ char *c = w.path;
	_cleanup_free_ char *rest = w.rest;
	enum verdict v = RF_NOT;
	bool explained = true;
	const char *d;
	if (w.wary) {
		const struct mount_of *mo = mount_find(m, w.mnt_id);
		if (e == RF_EROFS && mo && mo->proc && rest) {
			_cleanup_free_ char *full = xasprintf("%s%s", str_eq(c, "/") ? "" : c, rest);
			v = proc_erofs(p, m, full, ret_what);
		} else {
			/* FUSE, network file systems: their servers decide, which
			 * the daemon cannot ask; proc's refusals are checks
			 * against processes it no longer sees. */
			v = e == RF_ENOENT || e == RF_EBUSY ? RF_NOT : RF_UNSURE;
		}
	} else if (!w.searchable) {
		/* Refused on the way by the bits (EACCES): nothing of the
		 * sandbox's, and nothing to tell of what lies beyond. */
		v = RF_NOT;
		explained = e == RF_EACCES;
	} else if (e == RF_EPERM) {
		v = eperm(p, &w, call, ret_what);
	} else if (e == RF_EBUSY) {
		/* A mount of the sandbox's stands there: it can be neither
		 * replaced nor removed (git's rename of config.lock). */
		explained = false;
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
		explained = !w.exists;
		if ((d = beneath_any(c, p->hide_dirs, true)) && w.exists) {
			v = RF_SANDBOX;
			*ret_what = xasprintf("reaching %s (hidden: the sandbox covers %s, where sockets such as "
					      "the session bus and agents live)", c, d);
		}
	} else if (e == RF_EROFS) {
		const struct mount_of *mo = mount_find(m, w.mnt_id);
		explained = mo && mo->ro;
		if (beneath_any(c, p->ro_binds, false)) {
			v = RF_SANDBOX;
			*ret_what = xasprintf("writing %s (a protected path, sandbox.protect)", c);
		} else if (made_read_only(p, c) && mo && !mo->ro) {
			v = RF_SANDBOX;
			*ret_what = xasprintf("writing %s (read-only in the sandbox: outside the paths it may write)", c);
		}
	} else if (w.acl) {
		v = RF_UNSURE;		/* an ACL that could not be read */
	} else {
		unsigned ops = 0;
		bool private = false;
		v = eacces(p, &w, &ops, &private, &explained);
		if (v == RF_SANDBOX)
			*ret_what = xasprintf("%s %s (%s)", op_verb(ops), c,
					      private ? "a private path, sandbox.deny_read" : "outside the paths it may write");
	}
	if (relative && v == RF_NOT && !explained)
		v = RF_UNSURE;
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

/* Whether the bytes before at end an opening quote ('...', "...", `...',
 * ‘...’, “...”): returns its length, else 0. */
static size_t opening_quote(const char *s, size_t at)
{
	if (at >= 1 && (s[at - 1] == '\'' || s[at - 1] == '"' || s[at - 1] == '`'))
		return 1;
	if (at >= 3 && (unsigned char)s[at - 3] == 0xe2 && (unsigned char)s[at - 2] == 0x80 &&
	    ((unsigned char)s[at - 1] == 0x98 || (unsigned char)s[at - 1] == 0x9c))
		return 3;
	return 0;
}

/*
 * The relative path a line names for the error whose words are at
 * [words, words + wlen), where line_path() found no absolute one: the
 * word right before the words (bare or quoted, "cat: secret: Permission
 * denied", "sh: 1: cannot create x/y: ..."; never the line's first word,
 * a program's name), else one quoted right after them ("Permission
 * denied: 'secret'"). NULL when none, or when it holds what paths rarely
 * do and messages often do (parentheses, '=', ',', a leading '-', '~' or
 * '$').
 */
static bool rel_ok(const char *s, size_t b, size_t e)
{
	if (e <= b || e - b >= PATH_MAX || s[b] == '/' || s[b] == '-' || s[b] == '~' || s[b] == '$')
		return false;
	for (size_t j = b; j < e; j++)
		if ((unsigned char)s[j] < 0x20 || s[j] == 0x7f || strchr("()[]=,<>|;&*?", s[j]))
			return false;
	return true;
}

static char *line_rel_path(const char *s, size_t n, size_t words, size_t wlen)
{
	size_t b = 0, e = 0;
	size_t g = words;
	while (g > 0 && words - g < 8 && (s[g - 1] == ' ' || s[g - 1] == ':' || quote_byte((unsigned char)s[g - 1])))
		g--;
	if (g < words && (s[g] == ':' || s[g] == ' ' || quote_byte((unsigned char)s[g]))) {
		e = g;
		b = e;
		while (b > 0 && s[b - 1] != ' ' && s[b - 1] != '\t' && s[b - 1] != '\'' && s[b - 1] != '"' &&
		       s[b - 1] != '`' && !opening_quote(s, b))
			b--;
		/* A quote's bytes inside a word (UTF-8 of another letter): not a path. */
		if (b > 0 && (unsigned char)s[b - 1] >= 0x80 && !opening_quote(s, b))
			b = e;
		if (b == 0)
			b = e;	/* the line's first word */
	}
	if (!rel_ok(s, b, e)) {
		/* Quoted right after the words. */
		size_t i = words + wlen, q = 0;
		for (; i < n && i - (words + wlen) < 24; i++) {
			if (s[i] == '\'' || s[i] == '"' || s[i] == '`') {
				q = 1;
				break;
			}
			if (i + 3 <= n && opening_quote(s, i + 3) == 3) {
				q = 3;
				break;
			}
		}
		if (!q || !gap_after(s + words + wlen, i - (words + wlen)))
			return NULL;
		unsigned char close = q == 3 ? 0xe2 : s[i] == '`' ? '\'' : (unsigned char)s[i];
		b = i + q;
		e = b;
		while (e < n && (unsigned char)s[e] != close)
			e++;
		if (e >= n || !rel_ok(s, b, e))
			return NULL;
	}
	return xstrndup(s + b, e - b);
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

/* What a refusal is known by in a list: its first absolute path, else its
 * words up to " (" ("making a namespace"). */
static char *key_of(const char *what)
{
	const char *k = strstr(what, " /");
	if (k)
		return xstrndup(k + 1, strcspn(k + 1, " "));
	const char *paren = strstr(what, " (");
	return xstrndup(what, paren ? (size_t)(paren - what) : strlen(what));
}

/* Whether the line starts with the program's name ("mknod: ..."). */
static bool said_by(const char *line, size_t len, const char *prog)
{
	size_t n = strlen(prog);
	return len > n + 1 && strncmp(line, prog, n) == 0 && line[n] == ':' && line[n + 1] == ' ';
}

/* The call an "Operation not permitted" line names (coreutils' and
 * util-linux' wording), or CALL_NONE. A mount refused is EPERM, which
 * util-linux words "permission denied". */
static enum rf_call line_call(const char *line, size_t len)
{
	if (said_by(line, len, "mount") || said_by(line, len, "umount"))
		return CALL_MOUNT;
	if (said_by(line, len, "unshare"))
		return CALL_NS;
	if (said_by(line, len, "mknod"))
		return CALL_NODE;
	static const struct { const char *words; enum rf_call call; } calls[] = {
		{ "changing permissions of ", CALL_MODE }, { "changing ownership of ", CALL_OWNER },
		{ "changing group of ", CALL_OWNER }, { "setting times of ", CALL_TIMES },
		{ "failed to create hard link ", CALL_LINK },
	};
	for (size_t i = 0; i < ELEMENTSOF(calls); i++)
		if (find_words(line, len, calls[i].words))
			return calls[i].call;
	return CALL_NONE;
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
		{ "Operation not permitted", RF_EPERM },
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
		enum rf_errno e = kinds[kind].e;
		enum rf_call call = e == RF_EPERM || e == RF_EACCES ? line_call(line, len) : CALL_NONE;
		if (call == CALL_MOUNT)
			e = RF_EPERM;	/* "mount: /mnt: permission denied." */
		else if (e != RF_EPERM)
			call = CALL_NONE;
		size_t wlen = strlen(kinds[kind].words);
		_cleanup_free_ char *path = line_path(line, len, words, wlen);
		bool relative = false;
		if (!path && p->cwd && call != CALL_MOUNT && call != CALL_NS) {
			_cleanup_free_ char *rel = line_rel_path(line, len, words, wlen);
			relative = rel && strlen(p->cwd) + strlen(rel) + 2 <= PATH_MAX;
			if (relative)
				path = xasprintf("%s/%s", p->cwd, rel);
		}
		bool refused = false, unsure = !path;
		char *what = NULL;
		enum verdict v = RF_NOT;
		if (call == CALL_MOUNT || call == CALL_NS) {
			/* Refused by the filter before the kernel looks at
			 * anything: for every call of the kind, whatever its path. */
			v = p->seccomp ? RF_SANDBOX : RF_UNSURE;
			if (v == RF_SANDBOX)
				what = xstrdup(call == CALL_MOUNT
						       ? "mounting (the sandbox's filter refuses every mount call)"
						       : "making a namespace (the sandbox's filter refuses unshare and new "
							 "namespaces)");
		} else if (path) {
			v = looked++ < RF_PATHS ? judge(p, &m, path, e, call, relative, &what) : RF_UNSURE;
		}
		{
			if (v == RF_SANDBOX) {
				refused = true;
				/* Named already by the kernel's record, or by another line. */
				_cleanup_free_ char *canon = key_of(what);
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
		if (!refused && unsure && e != RF_ENOENT && e != RF_EBUSY)
			*ret_unsure = true;
	}
	mounts_free(&m);
	if (!shown) {
		buf_free(&out);
		return NULL;
	}
	if (more)
		buf_printf(&out, " (and %u more)", more);
	sandbox_refusal_notes++;
	return buf_steal(&out);
}

char *sandbox_start_dir(const char *root, int cwd_fd)
{
	if (cwd_fd < 0)
		return root ? xstrdup(root) : NULL;
	char proc[40], path[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", cwd_fd);
	ssize_t n = readlink(proc, path, sizeof(path) - 1);
	return n > 0 && path[0] == '/' ? xstrndup(path, (size_t)n) : NULL;
}
