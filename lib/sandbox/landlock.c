/* SPDX-License-Identifier: MIT */
/*
 * Landlock rules for the file system, made in the daemon and kept.
 *
 * Landlock only grants, and a right granted on a directory holds for all
 * beneath it. "Readable except deny_read" is therefore granted around each
 * denied path: along the way from "/" to it, each directory gets only
 * READ_DIR (its names can be listed) and every other entry of it gets the
 * full right; the denied entry gets nothing. Entries created later in a
 * directory along such a way are not covered by any rule, so they are not
 * readable until the rules are made again (on reload): the safe side. The
 * same split applies to a writable root that holds a denied path (a
 * workspace that is a home directory): the directories on the way are then
 * not writable themselves, only their other entries.
 *
 * The rules are kept as paths with their rights, and made into one
 * ruleset fd per entry of the cache (the TMPDIR parent of the identity
 * among them), which every call of that set then enforces.
 *
 * Symbolic links among the entries get no rule (access is checked where a
 * link leads, by that place's own rules); denied paths are taken as they
 * resolve (a denied ~/.ssh that links elsewhere denies the target).
 *
 * That split costs a rule for every entry of every directory on the way
 * to a denied path (/etc's, /tmp's), which the kernel copies into the
 * child's domain at each landlock_restrict_self() and frees after it. So
 * where the child has a mount namespace of its own (LL_COVER_DENY: a root
 * daemon's), each denied path that exists is left out of the split and
 * covered in that namespace instead, with an empty read-only mount
 * (apply.c): the ruleset is then a handful of rules whatever the
 * siblings. The split stays for what a mount cannot hold: a denied path
 * that does not exist (Landlock keeps one made later unreadable; a mount
 * needs a place), and one beneath a write_extra path or the TMPDIRs, or
 * holding a path the child is granted (a mount there would hide it). The
 * rules then depend on which denied paths exist: the cache checks that
 * again (an lstat() each) before it serves them.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/base/util.h"

/* Bounds what one list may hold (a directory along a denied path with a
 * huge number of entries would otherwise cost a rule each). */
#define RULES_MAX 4096
/* Kept for what follows a split (the workspaces, writable paths, other
 * denied paths' ways): a directory whose entries would leave less is not
 * split (grant_ways()). */
#define RULES_RESERVE 512
#define CACHE_MAX 32
/* The most denied paths covered by a mount (the rest are split around):
 * each is a mount in the child's namespace, and a plan's entry of the
 * namespaces made ahead (nspool.c). */
#define COVERS_MAX 48

struct ll_rule {
	char *path;
	uint64_t access;
};

struct ll_rules {
	char *key;
	struct ll_rule *v;
	size_t n;
	int ruleset_fd;		/* made once from the rules and the TMPDIR parent */
	char **covers;		/* denied paths the child covers (NULL-terminated), or NULL */
	size_t n_covers;
	bool split_writable;	/* a writable directory holds a denied path: it is not writable itself */
	char **denied;		/* the denied paths, canonical (NULL-terminated) */
	bool *there;		/* whether each existed (not as a link) when the rules were made */
	size_t n_denied;
	uint64_t handled;
	unsigned refs;		/* the cache's, and each run's that holds them */
};

static struct ll_rules *cache[CACHE_MAX];
static size_t n_cache;

uint64_t ll_fs_rights(int abi)
{
	uint64_t r = (LL_FS_MAKE_SYM << 1) - 1;	/* ABI 1 */
	if (abi >= 2)
		r |= LL_FS_REFER;
	if (abi >= 3)
		r |= LL_FS_TRUNCATE;
	return r;
}

static void rules_free(struct ll_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].path);
	for (size_t i = 0; i < r->n_covers; i++)
		free(r->covers[i]);
	free(r->covers);
	for (size_t i = 0; i < r->n_denied; i++)
		free(r->denied[i]);
	free(r->denied);
	free(r->there);
	if (r->ruleset_fd >= 0)
		close(r->ruleset_fd);
	free(r->v);
	free(r->key);
	free(r);
}

void ll_cache_clear(void)
{
	for (size_t i = 0; i < n_cache; i++)
		ll_rules_release(cache[i]);
	n_cache = 0;
}

const struct ll_rules *ll_rules_hold(const struct ll_rules *rules)
{
	if (rules)
		((struct ll_rules *)rules)->refs++;
	return rules;
}

void ll_rules_release(const struct ll_rules *rules)
{
	struct ll_rules *r = (struct ll_rules *)rules;
	if (r && --r->refs == 0)
		rules_free(r);
}

/* As Landlock grants: a rule on a directory holds for all beneath it, and
 * what the ruleset does not handle is allowed. */
uint64_t ll_rules_allowed(const struct ll_rules *rules, const char *path)
{
	uint64_t a = ~rules->handled;
	for (size_t i = 0; i < rules->n; i++) {
		const char *r = rules->v[i].path;
		size_t n = strlen(r);
		if (strncmp(path, r, n) == 0 && (path[n] == '\0' || path[n] == '/' || (n == 1 && r[0] == '/')))
			a |= rules->v[i].access;
	}
	return a;
}

/* A path made absolute and canonical as far as it exists: "~/" expanded
 * with home, the existing prefix resolved, the rest appended. NULL when it
 * cannot be made absolute (no home). */
char *ll_canonical(const char *p, const char *home)
{
	_cleanup_free_ char *abs = NULL;
	if (p[0] == '~' && (p[1] == '/' || !p[1])) {
		if (!home || home[0] != '/')
			return NULL;
		abs = xasprintf("%s%s", home, p + 1);
	} else if (p[0] == '/') {
		abs = xstrdup(p);
	} else {
		return NULL;
	}
	/* Resolve the longest prefix that exists. */
	size_t len = strlen(abs);
	for (size_t cut = len; cut > 0;) {
		char save = abs[cut];
		abs[cut] = '\0';
		char *real = realpath(abs, NULL);
		abs[cut] = save;
		if (real) {
			char *r = strcmp(real, "/") == 0 && cut < len ? xstrdup(abs + cut)
								       : xasprintf("%s%s", real, abs + cut);
			free(real);
			return r;
		}
		while (cut > 0 && abs[cut - 1] != '/')
			cut--;
		if (cut > 0)
			cut--;	/* drop the slash too */
	}
	return xstrdup(abs);
}

struct builder {
	struct ll_rules *r;
	char **deny;
	size_t n_deny;
	uint64_t handled;
	int err;
};

/* Adds a rule on a path, its rights cut to what the file type takes. */
static void add_rule(struct builder *b, const char *path, const struct stat *st, uint64_t access)
{
	if (!S_ISDIR(st->st_mode))
		access &= LL_FILE_RIGHTS;
	access &= b->handled;
	if (!access)
		return;
	if (b->r->n >= RULES_MAX) {
		b->err = -E2BIG;
		return;
	}
	b->r->v = xreallocarray(b->r->v, b->r->n + 1, sizeof(*b->r->v));
	b->r->v[b->r->n++] = (struct ll_rule){ .path = xstrdup(path), .access = access };
}

/* Whether path is denied, or has a denied path beneath it. */
static int deny_state(const struct builder *b, const char *path)
{
	size_t n = strlen(path);
	int state = 0;
	for (size_t i = 0; i < b->n_deny; i++) {
		const char *d = b->deny[i];
		if (strcmp(d, path) == 0)
			return 2;
		if (strcmp(path, "/") == 0 || (strncmp(d, path, n) == 0 && d[n] == '/'))
			state = 1;
	}
	return state;
}

static void grant(struct builder *b, const char *path, uint64_t access);

/* Whether a directory has more than max entries (up to max + 1 read). */
static bool more_entries_than(const char *path, size_t max)
{
	DIR *d = opendir(path);
	if (!d)
		return false;
	size_t n = 0;
	struct dirent *e;
	while (n <= max && (e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n > max;
}

/*
 * A directory on the way to a denied path whose entries would take more
 * rules than are left (a home of thousands of files, a /home of
 * thousands of users): only its entries on the way to a denied path get
 * rules, split around in turn; its other entries get none, unreadable to
 * the child but where another rule grants them (a workspace, a writable
 * path): the safe side, said once, rather than every sandboxed call
 * refused.
 */
static void grant_ways(struct builder *b, const char *path, uint64_t access)
{
	bool top = strcmp(path, "/") == 0;
	size_t n = strlen(path);
	for (size_t i = 0; i < b->n_deny && !b->err; i++) {
		const char *d = b->deny[i];
		const char *rest = top ? d + 1 : strncmp(d, path, n) == 0 && d[n] == '/' ? d + n + 1 : NULL;
		size_t k = rest ? strcspn(rest, "/") : 0;
		if (!rest || !rest[k])
			continue;	/* not beneath, or an entry itself: denied */
		bool again = false;
		for (size_t j = 0; j < i && !again; j++)
			again = strncmp(b->deny[j], d, (size_t)(rest - d) + k) == 0 &&
				b->deny[j][(rest - d) + k] == '/';
		if (again)
			continue;
		_cleanup_free_ char *sub = xasprintf("%s%s%.*s", path, top ? "" : "/", (int)k, rest);
		grant(b, sub, access);
	}
	_cleanup_free_ char *m = xasprintf("%s holds more entries than the Landlock rules around the deny_read "
					   "paths beneath it may take (%d in all): sandboxed children can read "
					   "only its entries on the way to them, and workspaces and writable "
					   "paths in it", path, RULES_MAX);
	sandbox_warn_once(m);
}

/* Grants access on path, around the denied paths beneath it. */
static void grant(struct builder *b, const char *path, uint64_t access)
{
	int state = deny_state(b, path);
	if (state == 2 || b->err)
		return;
	struct stat st;
	if (lstat(path, &st) < 0 || S_ISLNK(st.st_mode))
		return;		/* gone, not ours to see, or a link: no rule */
	if (state == 0 || !S_ISDIR(st.st_mode)) {
		add_rule(b, path, &st, access);
		return;
	}
	add_rule(b, path, &st, access & LL_FS_READ_DIR);
	if (access & LL_FS_MAKE_REG)
		b->r->split_writable = true;
	if (b->r->n + RULES_RESERVE >= RULES_MAX ||
	    more_entries_than(path, RULES_MAX - RULES_RESERVE - b->r->n)) {
		grant_ways(b, path, access);
		return;
	}
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && !b->err) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		_cleanup_free_ char *sub = strcmp(path, "/") == 0 ? xasprintf("/%s", e->d_name)
								 : xasprintf("%s/%s", path, e->d_name);
		grant(b, sub, access);
	}
	closedir(d);
}

/*
 * Grants a writable workspace whole, its top included, leaving out only
 * the denied paths above or at it; those beneath it that exist the child
 * covers with an empty read-only mount (Landlock alone cannot keep a
 * denied path beneath a writable directory: a right on a directory holds
 * for all beneath it, so its top would have to stay unwritable).
 */
static void grant_covered(struct builder *b, const char *ws)
{
	size_t n = strlen(ws);
	char **keep = xcalloc(b->n_deny + 1, sizeof(*keep));
	size_t n_keep = 0;
	for (size_t i = 0; i < b->n_deny; i++) {
		const char *d = b->deny[i];
		struct stat st;
		if (strncmp(d, ws, n) != 0 || d[n] != '/' || lstat(d, &st) < 0 || S_ISLNK(st.st_mode)) {
			keep[n_keep++] = b->deny[i];
			continue;
		}
		bool known = false;
		for (size_t j = 0; j < b->r->n_covers; j++)
			known |= strcmp(b->r->covers[j], d) == 0;
		if (!known) {
			b->r->covers = xreallocarray(b->r->covers, b->r->n_covers + 2, sizeof(char *));
			b->r->covers[b->r->n_covers++] = xstrdup(d);
			b->r->covers[b->r->n_covers] = NULL;
		}
	}
	char **all = b->deny;
	size_t n_all = b->n_deny;
	b->deny = keep;
	b->n_deny = n_keep;
	grant(b, ws, b->handled);
	b->deny = all;
	b->n_deny = n_all;
	free(keep);
}

/* Whether path is dir or lies beneath it. */
static bool within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/'));
}

/* Whether a denied path exists as something a mount can stand on (not a
 * link, which the child's mount would follow elsewhere). */
static bool there(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && !S_ISLNK(st.st_mode);
}

/* Notes the denied paths and whether each is there, for the cache to see
 * when that changed. */
static void note_denied(struct builder *b)
{
	b->r->n_denied = b->n_deny;
	b->r->denied = xcalloc(b->n_deny + 1, sizeof(char *));
	b->r->there = xcalloc(b->n_deny + 1, sizeof(bool));
	for (size_t i = 0; i < b->n_deny; i++) {
		b->r->denied[i] = xstrdup(b->deny[i]);
		b->r->there[i] = there(b->deny[i]);
	}
}

/*
 * Takes out of the split each denied path that the child's mount
 * namespace covers instead (LL_COVER_DENY): one that exists (not as a
 * link), lies beneath no writable path but a workspace (the
 * workspace's covers are pinned in place, run.c's covers_pin(); nothing
 * would pin them beneath write_extra or the TMPDIRs), and holds none of
 * the paths the child is granted (granted, which a mount would hide).
 */
static void cover_denied(struct builder *b, const char *const *granted, const char *const *writable)
{
	size_t n_keep = 0;
	for (size_t i = 0; i < b->n_deny; i++) {
		char *d = b->deny[i];
		bool cover = b->r->n_covers < COVERS_MAX && there(d);
		for (const char *const *g = granted; cover && *g; g++)
			cover = !within(*g, d);
		for (const char *const *w = writable; cover && *w; w++)
			cover = !within(d, *w);
		for (size_t j = 0; cover && j < b->r->n_covers; j++)
			cover = strcmp(b->r->covers[j], d) != 0;
		if (!cover) {
			b->deny[n_keep++] = d;
			continue;
		}
		b->r->covers = xreallocarray(b->r->covers, b->r->n_covers + 2, sizeof(char *));
		b->r->covers[b->r->n_covers++] = d;
		b->r->covers[b->r->n_covers] = NULL;
	}
	b->n_deny = n_keep;
}

/* Whether the denied paths stand as they did when the rules were made
 * (each there or not): what was covered, and what was split around. */
static bool denied_still(const struct ll_rules *r)
{
	for (size_t i = 0; i < r->n_denied; i++)
		if (there(r->denied[i]) != r->there[i])
			return false;
	return true;
}

const char *const *ll_rules_denied(const struct ll_rules *rules)
{
	return (const char *const *)rules->denied;
}

size_t ll_rules_count(const struct ll_rules *rules)
{
	return rules->n;
}

bool ll_rules_split_writable(const struct ll_rules *rules)
{
	return rules->split_writable;
}

const char *const *ll_rules_covers(const struct ll_rules *rules)
{
	return (const char *const *)rules->covers;
}

/* The cache key of a request: everything the rules depend on. */
static char *rules_key(const struct sandbox_req *req, int abi, int cover)
{
	struct buf k = {0};
	const char *env_home = getenv("HOME");
	buf_printf(&k, "%d\n%d\n%d\n%s\n%d\n%s\n", abi, (int)req->profile, cover,
		   req->id && req->id->home ? req->id->home : "", req->id && req->id->change,
		   env_home ? env_home : "");
	for (const char *const *p = req->workspaces; p && *p; p++)
		buf_printf(&k, "w%s\n", *p);
	for (const char *const *p = req->write_extra; p && *p; p++)
		buf_printf(&k, "x%s\n", *p);
	for (const char *const *p = req->write_extra_tool; p && *p; p++)
		buf_printf(&k, "x%s\n", *p);
	for (const char *const *p = req->deny_read; p && *p; p++)
		buf_printf(&k, "d%s\n", *p);
	return buf_steal(&k);
}

/* Finds the rules of a request in the cache, or builds them with their
 * ruleset (tmp_parent writable). */
int ll_rules_get(const struct sandbox_req *req, int abi, const char *tmp_parent, int cover,
		 const struct ll_rules **ret, char **ret_msg)
{
	_cleanup_free_ char *key0 = rules_key(req, abi, cover);
	_cleanup_free_ char *key = xasprintf("%s\nt%s", key0, tmp_parent ? tmp_parent : "");
	for (size_t i = 0; i < n_cache; i++)
		if (strcmp(cache[i]->key, key) == 0) {
			if (cover == LL_COVER_DENY && !denied_still(cache[i])) {
				/* A denied path made, removed or made a link
				 * since: covered or split around, as it is now. */
				ll_rules_release(cache[i]);
				memmove(cache + i, cache + i + 1, (n_cache - i - 1) * sizeof(*cache));
				n_cache--;
				break;
			}
			*ret = cache[i];
			return 0;
		}

	struct builder b = { .handled = ll_fs_rights(abi) };
	b.r = xcalloc(1, sizeof(*b.r));
	b.r->ruleset_fd = -1;
	b.r->handled = b.handled;
	b.r->refs = 1;
	/* "~" is the home of whom the child runs as: the peer's passwd entry,
	 * or $HOME for the daemon's own user. A child running as a peer is
	 * kept from the daemon's user's home entries too. */
	const char *home = req->id && (req->id->change || req->id->home) ? req->id->home : getenv("HOME");
	const char *homes[] = { home, req->id && req->id->change ? getenv("HOME") : NULL };
	for (size_t h = 0; h < ELEMENTSOF(homes); h++)
		for (const char *const *p = req->deny_read; p && *p; p++) {
			if (h > 0 && (!homes[h] || (*p)[0] != '~'))
				continue;
			char *c = ll_canonical(*p, homes[h]);
			if (!c)
				continue;	/* "~/..." with no home: nothing to deny */
			b.deny = xreallocarray(b.deny, b.n_deny + 1, sizeof(*b.deny));
			b.deny[b.n_deny++] = c;
		}
	note_denied(&b);
	/* The write_extra paths, canonical. */
	char **extra = NULL;
	size_t n_extra = 0;
	const char *const *extra_lists[] = { req->write_extra, req->write_extra_tool };
	for (size_t i = 0; req->profile == SANDBOX_WORKSPACE_WRITE && i < ELEMENTSOF(extra_lists); i++)
		for (const char *const *p = extra_lists[i]; p && *p; p++) {
			char *c = ll_canonical(*p, home);
			if (!c)
				continue;
			extra = xreallocarray(extra, n_extra + 2, sizeof(char *));
			extra[n_extra++] = c;
			extra[n_extra] = NULL;
		}
	if (cover == LL_COVER_DENY) {
		/* What the child is granted, which no cover may hide; what
		 * it may write but the workspaces, beneath which none is
		 * made. */
		size_t n_ws = 0;
		while (req->workspaces && req->workspaces[n_ws])
			n_ws++;
		const char **granted = xcalloc(n_ws + n_extra + 3, sizeof(char *));
		const char **writable = xcalloc(n_extra + 2, sizeof(char *));
		size_t g = 0, w = 0;
		for (size_t i = 0; i < n_ws; i++)
			granted[g++] = req->workspaces[i];
		for (size_t i = 0; i < n_extra; i++)
			granted[g++] = writable[w++] = extra[i];
		granted[g++] = "/dev/null";
		if (tmp_parent)
			granted[g++] = writable[w++] = tmp_parent;
		cover_denied(&b, granted, writable);
		free(granted);
		free(writable);
	}
	grant(&b, "/", LL_READ);
	if (req->profile == SANDBOX_WORKSPACE_WRITE) {
		for (const char *const *p = req->workspaces; p && *p; p++) {
			if (cover)
				grant_covered(&b, *p);
			else
				grant(&b, *p, b.handled);
		}
		for (size_t i = 0; i < n_extra; i++)
			grant(&b, extra[i], b.handled);
	}
	for (size_t i = 0; i < n_extra; i++)
		free(extra[i]);
	free(extra);
	grant(&b, "/dev/null", LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_TRUNCATE);
	if (tmp_parent)
		grant(&b, tmp_parent, b.handled);
	for (size_t i = 0; i < b.n_deny; i++)
		free(b.deny[i]);
	free(b.deny);
	if (b.err < 0) {
		*ret_msg = xasprintf("more than %d Landlock rules would be needed around the deny_read paths",
				     RULES_MAX);
		rules_free(b.r);
		return b.err;
	}
	int r = ll_ruleset_make(b.r, abi, &b.r->ruleset_fd);
	if (r < 0) {
		*ret_msg = xasprintf("Could not make the Landlock ruleset: %s", strerror(-r));
		rules_free(b.r);
		return r;
	}
	b.r->key = TAKE_PTR(key);
	if (n_cache == CACHE_MAX) {
		ll_rules_release(cache[0]);
		memmove(cache, cache + 1, (CACHE_MAX - 1) * sizeof(*cache));
		n_cache--;
	}
	cache[n_cache++] = b.r;
	*ret = b.r;
	return 0;
}

/* Makes a ruleset from the rules, each path opened without following a
 * final symlink (one swapped in since is skipped). */
int ll_ruleset_make(const struct ll_rules *rules, int abi, int *ret_fd)
{
	struct ll_ruleset_attr attr = { .handled_access_fs = ll_fs_rights(abi) };
	size_t size = sizeof(attr.handled_access_fs);
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	_cleanup_close_ int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (fd < 0)
		return -errno;
	for (size_t i = 0; i < rules->n; i++) {
		_cleanup_close_ int pfd = open(rules->v[i].path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (pfd < 0 || fstat(pfd, &st) < 0 || S_ISLNK(st.st_mode))
			continue;
		uint64_t access = rules->v[i].access;
		if (!S_ISDIR(st.st_mode))
			access &= LL_FILE_RIGHTS;
		struct ll_path_beneath_attr pb = { .allowed_access = access, .parent_fd = pfd };
		if (access && syscall(SYS_landlock_add_rule, fd, LL_RULE_PATH_BENEATH, &pb, 0) < 0)
			return -errno;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int ll_rules_fd(const struct ll_rules *rules)
{
	return rules->ruleset_fd;
}
