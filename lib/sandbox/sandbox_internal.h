/* SPDX-License-Identifier: MIT */
/*
 * What the files of lib/sandbox/ share: the Landlock ABI (defined here, as
 * the system headers may predate the kernel), the kept rule lists, the
 * kept seccomp programs, and the reader of small kernel files.
 */
#ifndef TC_SANDBOX_INTERNAL_H
#define TC_SANDBOX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/sandbox/sandbox.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* landlock_restrict_self()'s flags for every child (kaudit.c: logging
 * after exec while the daemon reads the records). */
extern unsigned sandbox_landlock_restrict_flags;

#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_REFER (1ULL << 13)		/* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14)		/* ABI 3 */
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)	/* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)		/* ABI 6 */

#define LL_READ (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
/* Rights that make sense on a file, not only on a directory. */
#define LL_FILE_RIGHTS (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

/* A path made absolute and canonical as far as it exists ("~/" expanded
 * with home), or NULL (landlock.c). */
char *ll_canonical(const char *p, const char *home);

/* The most writable paths a child's read-only mounts keep. */
#define SANDBOX_WRITABLE_MAX 64

/* The file system rights an ABI handles. */
uint64_t ll_fs_rights(int abi);

/* A kept list of rules: O_PATH fds of the paths and their rights. */
struct ll_rules;

/* What the child's mount namespace covers of deny_read (ll_rules_get()). */
enum {
	LL_COVER_NONE = 0,	/* nothing: no mount namespace */
	LL_COVER_WORKSPACES,	/* the denied paths beneath a writable workspace */
	LL_COVER_DENY,		/* every denied path that exists and can be */
};
/*
 * Finds or builds the rules of a request (read everywhere but deny_read,
 * write on the workspaces and write_extra unless read-only, /dev/null,
 * tmp_parent) and their ruleset. Kept until sandbox_cache_clear().
 * Negative errno, *ret_msg set. With cover (the child has a mount
 * namespace), a denied path beneath a writable workspace is left to the
 * child to cover with an empty read-only mount (ll_rules_covers()), and
 * the workspace is writable whole, its top included (a home directory);
 * with LL_COVER_DENY, every denied path that exists is (but those that
 * must stay split, landlock.c says which), and the rules are made again
 * when one is made or removed.
 */
int ll_rules_get(const struct sandbox_req *req, int abi, const char *tmp_parent, int cover,
		 const struct ll_rules **ret, char **ret_msg);
/* The paths the child covers (NULL-terminated), or NULL for none. */
const char *const *ll_rules_covers(const struct ll_rules *rules);
/* Every denied path, canonical, covered or not (NULL-terminated): what
 * the rules depend on. */
const char *const *ll_rules_denied(const struct ll_rules *rules);
/* How many rules the ruleset holds. */
size_t ll_rules_count(const struct ll_rules *rules);
/* Tells message where sandbox_program_set_log() said, once among the last
 * 64 different ones (program.c). */
void sandbox_warn_once(const char *message);
/* Whether a writable directory is not writable itself, only what it holds
 * but a denied path (no mount namespace to cover that path). */
bool ll_rules_split_writable(const struct ll_rules *rules);
/* The ruleset of the rules. */
int ll_rules_fd(const struct ll_rules *rules);
/* Keeps the rules past the cache's dropping them (a run's note replays
 * them); released once per hold. */
const struct ll_rules *ll_rules_hold(const struct ll_rules *rules);
void ll_rules_release(const struct ll_rules *rules);
/*
 * What a run's sandbox did, for deciding whether it refused a path a
 * failed child named (refusal.c): the Landlock rules (held), the
 * read-only mounts' writable paths (NULL: none made read-only), the
 * protected and covered paths, the directories covered empty, and the
 * child's identity.
 */
struct sandbox_refusal_plan {
	const struct ll_rules *rules;
	const char *const *writable;
	const char *tmpdir;
	const char *const *ro_binds;
	const char *const *covers;
	const char *const *hide_dirs;
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	size_t n_groups;
	const char *cwd;	/* where the child started (canonical), or NULL: its
				 * relative paths are judged there, see refusal.c */
	bool seccomp;		/* seccomp.c's filter in force: its EPERMs are the sandbox's */
	bool no_caps;		/* the child holds no capability, even as uid 0 */
};
/* The refusals of the paths that the lines of err name beside "Read-only
 * file system", "Permission denied", "No such file or directory", "Device
 * or resource busy" or "Operation not permitted" (or the calls they name) which
 * the sandbox made ("writing /usr/x (read-only in the sandbox: ...)";
 * "; "-joined, those already in known left out), or NULL; *ret_unsure
 * when such a line names no path that could be judged either way. */
char *sandbox_refusal_check(const struct sandbox_refusal_plan *p, const char *err, size_t n, const char *known,
			    bool *ret_unsure);
/* How many of them named a refusal (admin/stats). */
extern uint64_t sandbox_refusal_notes;
/* The rights the rules leave a canonical path (those of the rules on it
 * and on the directories above it, and every right not handled). */
uint64_t ll_rules_allowed(const struct ll_rules *rules, const char *path);
int ll_ruleset_make(const struct ll_rules *rules, int abi, int *ret_fd);
void ll_cache_clear(void);

/* Private TMPDIRs (tmp.c): a parent per identity (mode 0711, the
 * daemon's), writable in the rules; a directory per call beneath it,
 * under a random name, the child's (chown_it) with mode 0700. */
int tmp_parent_get(uid_t uid, const char **ret, char **ret_msg);
int tmp_call_make(const char *parent, uid_t uid, gid_t gid, bool chown_it, char **ret, char **ret_msg);
/* The same, made only with make: a call that joins a namespace made ahead
 * with a TMPDIR of its own (a tmpfs there) needs no directory in the
 * daemon's; tmp_call_mkdir() makes it when it turns out to. */
int tmp_call_name(const char *parent, uid_t uid, gid_t gid, bool chown_it, bool make, char **ret, char **ret_msg);
int tmp_call_mkdir(const char *path, uid_t uid, gid_t gid, bool chown_it, char **ret_msg);
void tmp_call_remove(char *path);
/* The same, the path kept. */
void tmp_call_rm(const char *path);
/* Empties the directory of fd (never through a link); true when nothing
 * is left in it. */
bool tmp_empty_dir(int fd);
void tmp_base_remove(void);
/* Where the directory of TMPDIRs is made ($TMPDIR, /var/tmp for root, /tmp). */
const char *tmp_base_parent(void);
/* Removes name in parent with all it holds, following no link, looking
 * at no more than max_entries entries. */
void tmp_rm_tree(int parent, const char *name, long max_entries);
/* The directory of all TMPDIRs (canonical), or NULL before the first. */
const char *tmp_base_path(void);
/* Whether the daemon has a mount namespace of its own (its mounts are
 * slaves: nothing mounted in a copy of it propagates back). */
bool tmp_private_mounts(void);

/*
 * The second Landlock layer that hides the other calls' TMPDIRs (hide.c):
 * a ruleset granting every right of the ABI everywhere but beneath base,
 * and there only own; the directories on the way to base get READ_DIR
 * (for a child base's modes keep out: neither root nor the daemon's uid,
 * run.c decides). Negative errno (-E2BIG: too many entries
 * along the way). hide_covers(): whether writable (a path the first layer
 * makes writable) is base or holds it, which this layer would take away.
 * ret_gen (may be NULL): the state of the way the layer was made from.
 */
int hide_ruleset(const char *base, const char *own, int abi, int *ret_fd, unsigned *ret_gen);
/* Whether a ruleset hide_ruleset() made when it said gen still holds (the
 * chain has not changed since). */
bool hide_still(const char *base, int abi, unsigned gen);
bool hide_covers(const char *base, const char *writable);
void hide_clear(void);

/* Whether the plan needs a mount namespace of the child's own; makes its
 * mounts in the namespace the caller has just made (apply.c). */
bool sandbox_child_needs_mounts(const struct sandbox_child *c);
int sandbox_mounts_make(struct sandbox_child *c);

/*
 * Mount namespaces made ahead (nspool.c). nspool_key(): what a made
 * namespace must match to serve a call (the plan but the TMPDIR, the
 * inodes of its paths), freed by the caller. nspool_take_tmpdir(): a
 * namespace made for the identity, with its TMPDIR (returned, the
 * caller's) and key (*ret_key, the caller's to free) and fd (*ret_fd, the
 * caller's: nspool_give_back() when the call ends, nspool_dispose() at
 * once when the key is not the call's), the watch on its TMPDIR
 * (*ret_wd, for nspool_keep(), or -1) and its root (*ret_tmp_fd, the
 * caller's, or -1), and when it was first made
 * (*ret_born_ms), or NULL. nspool_ask(): asks for the next namespace
 * of a plan, whose TMPDIR will be tmpdir (taken: made for it with
 * tmp_call_make()).
 */
struct stat;
/* hide_st: the lstat() of each of c->hide_dirs, taken by the caller just
 * before, or NULL to take them here. */
char *nspool_key(const struct sandbox_child *c, uid_t uid, gid_t gid, const struct stat *hide_st);
bool nspool_key_eq(const char *a, const char *b);
char *nspool_take_tmpdir(uid_t uid, gid_t gid, int *ret_fd, int *ret_wd, int *ret_tmp_fd, char **ret_key,
			 uint64_t *ret_born_ms, bool *ret_made);
void nspool_ask(const struct sandbox_child *c, const char *key, uid_t uid, gid_t gid, char *tmpdir);
/* A namespace given back (nspool_give_back()'s values, its fd taken). */
struct nspool_given {
	int fd;
	const char *own;
	uint64_t born_ms;
	bool clean;
};
/* nspool_ask(), the next namespace made from the one given back by the
 * call that ended (g, or NULL), in one message to the maker; made: the
 * TMPDIR exists in the daemon's namespace (nspool_take_tmpdir() tells). */
void nspool_pass(const struct sandbox_child *c, const char *key, uid_t uid, gid_t gid, char *tmpdir, bool made,
		 const struct nspool_given *g);
void nspool_dispose(int fd);
/* Gives back the namespace a call joined, when it ends: the maker keeps
 * it for the next call of the plan (key), which gets it with a new
 * TMPDIR instead of its TMPDIR own; or closes it (too old, no key).
 * clean: nothing of the call is left running (its cgroup is empty), so
 * that its TMPDIR's tmpfs may be emptied and moved to the next call's
 * path rather than unmounted and made anew. */
void nspool_give_back(int fd, const char *key, uid_t uid, gid_t gid, const char *own, uint64_t born_ms, bool clean);
/* Keeps the namespace a call joined, with its TMPDIR (a tmpfs of the
 * namespace, at the path tmpdir), as it is for the next call of its plan
 * and identity, when nothing touched that TMPDIR since the maker handed
 * it over (wd, its watch: not a file made, removed, opened or listed
 * there, nor its root changed) and the call left nothing running (the
 * caller knows): the next call then finds it as the maker made it, with
 * no work of the maker's. True when kept (fd, tmp_fd, its TMPDIR's root
 * or -1, and tmpdir taken). */
bool nspool_keep(int fd, int wd, int tmp_fd, const char *key, uid_t uid, gid_t gid, char *tmpdir, uint64_t born_ms);
/* Drops what is made or asked for; with stop, lets the maker go. */
void nspool_clear(bool stop);

/*
 * The git directories of a workspace in which protect holds for children
 * (repos.c): git[i] is one (the workspace's .git first, then its
 * submodules'; n_top of them), base[i] the directory of its repository
 * (the workspace, or an entry of its top), from where the directories on
 * the way are bound onto themselves. pointers: the .git files of
 * entries of its top (submodules' "gitdir:" pointers).
 */
struct repo_dirs {
	char **git;
	char **base;
	size_t n, n_base, n_top;
	char **pointers;	/* .git files one level down, held read-only */
	size_t n_pointers;
	bool top_file;		/* the workspace's own .git is a file, */
	bool top_none;		/* or there is none (top_stub: none git would take, */
	bool top_stub;		/* an empty directory, as run.c makes one) */
	int ws_fd;		/* the workspace, opened following no link, or -1 */
};
void repos_get(const char *ws, struct repo_dirs *ret);
/* Opens the directory rel beneath dir_fd, or the workspace ws (absolute,
 * canonical), following no symbolic link on the way and none at its end
 * (openat2() RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or one name at a time
 * with O_NOFOLLOW): an fd, or -1 with errno. */
int repos_open_below(int dir_fd, const char *rel);
int repos_open_ws(const char *ws);
void repo_dirs_clear(struct repo_dirs *r);
void repos_clear(void);
/* Changes when what repos_get() finds may have (a scan found changed,
 * made again or dropped). */
uint64_t repos_gen(void);

/*
 * What kept plans depend on, watched (plan.c). plan_watch_way(): watches
 * each directory on the way from the workspace ws ("" for "/") to path (beneath it)
 * for the name in it that leads on (every name in the last one when path
 * ends with "/"); true when each was watched already
 * (and could be). plan_watch_gen(): changes when one of those names was
 * made, removed or renamed since (or a watched directory went).
 */
bool plan_watch_way(const char *ws, const char *path);
uint64_t plan_watch_gen(void);
void plan_watch_clear(void);

/* Maps the child's own uid and gid in its new user namespace (apply.c). */
int sandbox_userns_map(const char *uid_map, const char *gid_map);

/* Reads the small file path (relative to dir_fd) in one read, as /proc
 * and cgroupfs answer, at most size - 1 bytes, into buf, NUL-terminated
 * (probe.c). Returns the bytes read, or a negative errno. */
ssize_t read_small(int dir_fd, const char *path, char *buf, size_t size);
/* A process's start time (clock ticks after boot, /proc/PID/stat), or 0. */
uint64_t proc_start_ticks(pid_t pid);
/* Forgets the probe (probe.c; sandbox_shutdown()). */
void probe_forget(void);

/*
 * What netnotif.c records of a call's attempts to reach the network, the
 * seam its tests use. netnotif_describe(): what a connect() or sendto()
 * is named, verb then destination ("connect to 1.1.1.1:80", "sending to
 * [2606:4700::1111]:443", " (DNS)" after port 53), into out of
 * NETNOTIF_WHAT_SIZE bytes. netnotif_record(): one attempt, so named, for
 * the watched call task belongs to (counted as unmatched when none);
 * netnotif_record_socket(): one socket() of the network's families.
 */
#define NETNOTIF_WHAT_SIZE 96
struct sockaddr_storage;
void netnotif_describe(const char *verb, const struct sockaddr_storage *ss, char *out, size_t size);
void netnotif_record(pid_t task, const char *what);
void netnotif_record_socket(pid_t task);

/* The seccomp program for a network kind (enum sandbox_network; kept),
 * or NULL with *ret_msg set. */
const void *seccomp_prog_get(int network, char **ret_msg);
void seccomp_cache_clear(void);

/* A network namespace made ahead (netns.c): its fd and the daemon's
 * listening sockets in it. */
struct sandbox_netns {
	int user_fd;		/* the user namespace owning it (a daemon that is
				 * not root), or -1 */
	int ns_fd;
	int http_fd;
	int socks_fd;
	int diag_fd;		/* a NETLINK_SOCK_DIAG socket there (netnotif.c asks
				 * it whether a port of its loopback is taken), or -1 */
};
#define SANDBOX_NETNS_NONE \
	((struct sandbox_netns){ .user_fd = -1, .ns_fd = -1, .http_fd = -1, .socks_fd = -1, .diag_fd = -1 })
/* Takes a namespace ready (waiting for the pool's thread when none is). 0,
 * or a negative errno with *ret_msg (-EPERM: none can be made here). */
int sandbox_netns_take(struct sandbox_netns *ret, uid_t uid, char **ret_msg);
/* Keeps the namespace of a call that ended, all its processes gone, for
 * the next call of uid (or closes it). */
void sandbox_netns_keep(struct sandbox_netns *ns, uid_t uid);
/* Closes what is left of it (the fds not handed on are -1). */
void sandbox_netns_release(struct sandbox_netns *ns);
/* Stops the pool's thread and closes the namespaces ready. */
void sandbox_netns_shutdown(void);

/* One run's network (net.c): the namespace, the served proxy, the
 * environment. */
struct sandbox_net;
int sandbox_net_prepare(const struct sandbox_req *req, struct sandbox_net **ret, char **ret_msg);
int sandbox_net_ns_fd(const struct sandbox_net *n);
int sandbox_net_user_fd(const struct sandbox_net *n);
int sandbox_net_diag_fd(const struct sandbox_net *n);
const char *const *sandbox_net_env(const struct sandbox_net *n);
void *sandbox_net_served(const struct sandbox_net *n);
char *sandbox_net_note(const struct sandbox_net *n);
/* Ends the run's network; with reuse (its processes are all gone) its
 * namespace serves the next call of its uid. */
struct sandbox_net *sandbox_net_end(struct sandbox_net *n, bool reuse);

#endif
