/* SPDX-License-Identifier: MIT */
/*
 * The sandbox of everything the daemon starts (shell, command tools, MCP
 * servers, hooks): what the kernel can enforce here (probed once), the
 * profiles, and the plan one spawned child carries out before exec.
 *
 * Everything expensive is made in the daemon: the Landlock rules per
 * (workspace set, identity, profile) are resolved once and kept as O_PATH
 * fds (probe.c, landlock.c), the seccomp program per (network, identity
 * kind) is built with libseccomp once and kept as BPF (seccomp.c). A call
 * then only makes its private TMPDIR, a ruleset fd from the kept rules and,
 * with a delegated cgroup v2 subtree, a cgroup of its own (run.c). The
 * child, spawned with clone(CLONE_VM | CLONE_VFORK), carries out the plan
 * with raw system calls (apply.c): cgroup, mount namespace (for the
 * protected paths, and then also to hide the other calls' TMPDIRs; without
 * CAP_SYS_ADMIN inside a user namespace the child is cloned into, mapping
 * only its own uid and gid), rlimits, groups/gid/uid, no_new_privs,
 * Landlock (one layer, or two where a per-call layer hides the other
 * calls' TMPDIRs instead of a mount namespace: hide.c), seccomp, in that
 * order, then execs.
 *
 * Cleanup: the daemon is child subreaper and each call's leader is one
 * too, so every process a call starts stays its descendant while it runs
 * and comes back to the daemon when it exits; lib/child/child_spawn.c then kills
 * and reaps what is not a tracked child. With a cgroup, cgroup.kill ends
 * the call's processes first.
 */
#ifndef TC_SANDBOX_H
#define TC_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/bind/bind.h"
#include "lib/files/identity.h"
#include "proto/base/buf.h"

enum sandbox_profile {
	SANDBOX_WORKSPACE_WRITE,
	SANDBOX_READ_ONLY,
	SANDBOX_OFF,
};

const char *sandbox_profile_name(enum sandbox_profile p);
/* Returns the profile named s, or -1. */
int sandbox_profile_from_name(const char *s);

/* Per call limits; a negative value means none. */
struct sandbox_limits {
	int64_t memory_mb;
	int64_t pids;
	int64_t file_size_mb;
	int64_t nofile;
	int64_t cpu_s;
	int64_t tmp_mb;			/* the size of the call's TMPDIR */
};

#define SANDBOX_LIMITS_DEFAULT \
	((struct sandbox_limits){ .memory_mb = 4096, .pids = 512, .file_size_mb = 4096, .nofile = 1024, .cpu_s = -1, \
				  .tmp_mb = 1024 })
/* A limits object with every member unset, to be merged over another. */
#define SANDBOX_LIMITS_UNSET \
	((struct sandbox_limits){ .memory_mb = INT64_MIN, .pids = INT64_MIN, .file_size_mb = INT64_MIN, \
				  .nofile = INT64_MIN, .cpu_s = INT64_MIN, .tmp_mb = INT64_MIN })
/* Sets in *base what over sets (members not INT64_MIN). */
void sandbox_limits_merge(struct sandbox_limits *base, const struct sandbox_limits *over);

/* What the kernel enforces here. */
struct sandbox_features {
	int landlock_abi;		/* 0: no Landlock */
	bool seccomp;
	bool no_new_privs;
	bool subreaper;
	bool cgroup;			/* a cgroup v2 directory calls can be made in */
	bool cgroup_memory;		/* its memory controller is enabled for them */
	bool cgroup_pids;
	bool mountns;			/* protect: a private mount namespace per call */
	bool userns;			/* protect without CAP_SYS_ADMIN: a user namespace
					 * mapping only the child's own uid and gid */
	bool setid;			/* the daemon can change a child's uid */
	bool ro_mounts;			/* a child's mount namespace can be made
					 * read-only but for its writable paths
					 * (open_tree, mount_setattr) */
	char *cgroup_dir;		/* where call cgroups are made, or NULL */
};

/*
 * Probes the kernel, once: Landlock ABI, seccomp, no_new_privs, the
 * cgroup v2 directory (cgroup_dir when not NULL, else the daemon's own
 * cgroup when it is writable), mount namespaces; and makes the daemon
 * child subreaper. Later calls return the first result. cgroup_dir "" turns
 * the cgroup off.
 */
const struct sandbox_features *sandbox_probe(const char *cgroup_dir);
/*
 * For tests: the cgroup_dir given to sandbox_probe() is a directory of
 * plain files standing in for a delegated cgroup v2 (the test writes its
 * cgroup.subtree_control): control files are made by their first write,
 * and when a call ends each is appended to <cgroup_dir>/writes.log as
 * "name=content" and removed before the directory is.
 */
void sandbox_cgroup_fake(bool on);
bool sandbox_cgroup_is_fake(void);
/*
 * What daemons that died without cleaning up (SIGKILL, a crash) left, as
 * sandbox_reap_dead() found and removed it at this daemon's start: their
 * calls' cgroups, the processes still in them or still in their
 * TMPDIRs (killed), their directories of TMPDIRs. A live daemon's (another
 * instance) is never touched. Call it after sandbox_probe() and before
 * any child is started.
 */
#define SANDBOX_REAPED_NAMED 32
struct sandbox_reaped_proc {
	pid_t pid;
	uid_t uid;
	pid_t daemon;			/* the dead daemon's pid */
	char command[160];		/* its command line, cut */
};
struct sandbox_reaped {
	unsigned killed;		/* processes killed */
	unsigned cgroups;		/* cgroups removed */
	unsigned cgroups_left;		/* that could not be emptied or removed */
	unsigned tmp_dirs;		/* directories of TMPDIRs removed */
	unsigned tmp_left;		/* that could not be removed whole */
	unsigned n_procs;		/* the first of the killed, described */
	struct sandbox_reaped_proc procs[SANDBOX_REAPED_NAMED];
};
void sandbox_reap_dead(struct sandbox_reaped *ret);
/*
 * Starts the daemon's watchdog (*ret_pid): a process outside the daemon's
 * tree that, once the daemon has ended however it did, does what
 * sandbox_reap_dead() does and hands it to report (in the watchdog: it
 * may only log), then exits. Call it after sandbox_reap_dead(), before
 * any thread. A negative errno where it cannot be (no pidfd_open, Linux
 * 5.3; a daemon that is a pid namespace's init cannot clone a sibling).
 */
int sandbox_watchdog_start(void (*report)(const struct sandbox_reaped *r), pid_t *ret_pid);
/* The daemon's start time (clock ticks after boot), which its cgroups'
 * names carry. */
uint64_t sandbox_self_start(void);

/* "sandbox: landlock ABI 7, seccomp, no_new_privs, cgroup v2 delegated: no, ..." */
char *sandbox_features_line(const struct sandbox_features *f);

/* A child's network: none, all of it (unfiltered), or only through the
 * daemon's proxy (a network namespace of its own, netns.c and net.c). */
enum sandbox_network {
	SANDBOX_NET_NONE,
	SANDBOX_NET_FULL,
	SANDBOX_NET_PROXY,
};
const char *sandbox_network_name(enum sandbox_network n);

struct net_policy;

/* sandbox.per_tool: a profile by tool name. */
struct sandbox_per_tool {
	char *tool;
	int profile;				/* enum sandbox_profile, or -1: the default */
	int network;				/* enum sandbox_network, or -1: the default */
};

/* Settings shared by every call (the config's "sandbox" object). */
struct sandbox_config {
	enum sandbox_profile profile;		/* the default */
	struct sandbox_per_tool *per_tool;
	size_t n_per_tool;
	int network;				/* enum sandbox_network: the default for
						 * tools not of side effect network */
	char **deny_read;			/* NULL-terminated; "~/" is the identity's home */
	char **write_extra;			/* absolute paths */
	char **protect;				/* relative to each workspace */
	char **read_only;			/* absolute: the daemon's own (its
						 * config's directory), read-only where
						 * a writable workspace holds them */
	char **unix_sockets;			/* sockets (or their directories) a
						 * child may reach where it otherwise
						 * finds them hidden */
	struct sandbox_limits limits;
	bool require;
	bool run_as_peer;
	char *cgroup_dir;			/* NULL: detect */
};

/* A tool file's "sandbox" object; members unset are -1, NULL or
 * SANDBOX_LIMITS_UNSET. */
struct sandbox_tool {
	int profile;
	int network;				/* enum sandbox_network, or -1 */
	struct net_policy *net;			/* "network": {"allow": [...]}: hosts
						 * added to the config's policy, or NULL */
	char **write_extra;
	struct sandbox_limits limits;
	int run_as_peer;
};

#define SANDBOX_TOOL_UNSET \
	((struct sandbox_tool){ .profile = -1, .network = -1, .limits = SANDBOX_LIMITS_UNSET, .run_as_peer = -1 })
void sandbox_tool_clear(struct sandbox_tool *t);

struct json;
/* The keys of the config's "sandbox" object (over struct sandbox_config,
 * whose defaults sandbox_config_init() sets) and of a tool or provider
 * file's (over struct sandbox_tool, from SANDBOX_TOOL_UNSET), for the
 * binder. */
extern const struct bind_field sandbox_config_fields[];
extern const struct bind_field sandbox_tool_fields[];
/* The profiles' names by enum sandbox_profile, NULL-terminated. */
extern const char *const sandbox_profile_names[];
/* The values of "run_as": "daemon" (0) and "peer" (1), NULL-terminated. */
extern const char *const sandbox_run_as_names[];
/* The same tables checked outside a file: -EINVAL with every message,
 * each naming its key. */
int sandbox_tool_from_json(const struct json *v, struct sandbox_tool *t, char **ret_err);
/* A tool or provider file's top-level "network", for the binder (at: its
 * struct sandbox_tool): false, true, "proxy" or a policy object
 * ({"allow": [...]}, lib/net's net_policy_parse()), which means "proxy"
 * with those hosts added to the config's policy. */
struct bind;
int sandbox_tool_network_bind(struct bind *b, const char *path, const struct json *v, void *at);
/* A member of limits (at: its int64_t): a positive integer, or null
 * (no limit: -1). */
int sandbox_limit_bind(struct bind *b, const char *path, const struct json *v, void *at);
int sandbox_config_from_json(const struct json *v, struct sandbox_config *cfg, char **ret_err);

/* The defaults of CONTRACT §10 (deny_read, protect, limits, require). */
void sandbox_config_init(struct sandbox_config *cfg);
void sandbox_config_clear(struct sandbox_config *cfg);
/*
 * The entry of protect (sandbox.protect) that a write to rel touches, or
 * NULL: rel is a canonical path relative to a workspace root ("." for the
 * root), as the kernel resolved it. rel is the entry or lies beneath it;
 * with whole (a delete or a move takes rel with all it holds), an entry
 * beneath rel counts too (not beneath the root, which is never taken). When protect names a path beneath .git, a file
 * written at ".git" (a "gitdir:" pointer; not a directory: dir) is
 * protected too, and ".git" returned. The same holds in every repository
 * nested in the workspace ("sub/.git/hooks") and in submodules' git
 * directories (".git/modules/NAME/hooks").
 */
const char *sandbox_protected(const char *const *protect, const char *rel, bool whole, bool dir);

/*
 * Adds to read_only the files argv makes the daemon run, where one of
 * roots (canonical: the workspaces it serves) holds them: its program
 * (searched in $PATH when named without a slash) and, for an interpreter
 * (sh, python3, node ...), the script its first operand names; relative
 * names are taken from cwd. Regular files only, canonical, and the name
 * as written too where a link leads to the file (the file tools refuse
 * it; no mount can hold a link).
 */
void sandbox_read_only_argv(struct sandbox_config *cfg, const char *const *argv, const char *cwd,
			    const char *const *roots);

/* Reads a provider file's "run_as": "daemon" (ret left the daemon's:
 * change false), or a user name, looked up now (identity_from_user()).
 * -EINVAL with a message for an unknown one. Clear with identity_clear(). */
int sandbox_run_as_user_from_json(const struct json *v, struct identity *ret, char **ret_err);

/* One call's wish: profile and settings resolved from config and tool. */
struct sandbox_req {
	enum sandbox_profile profile;
	bool network;				/* all of it, unfiltered */
	bool net_proxy;				/* through the daemon's proxy (network false) */
	const struct net_policy *net_policy;	/* the tool's hosts added, or NULL */
	const struct sandbox_net_who *net_who;	/* whose connections they are, or NULL */
	bool require;
	struct sandbox_limits limits;
	const char *const *workspaces;		/* canonical absolute roots */
	const char *const *deny_read;
	const char *const *write_extra;		/* the config's */
	const char *const *write_extra_tool;	/* the tool's */
	const char *const *protect;
	const char *const *read_only;
	const char *const *unix_sockets;
	const struct identity *id;		/* whom the child runs as (id->change); NULL: the daemon's own */
	const char *call_name;			/* for the cgroup's and TMPDIR's name */
	const char *cwd;			/* the child's working directory (canonical)
						 * when known: its note judges relative paths there */
	bool lasting;				/* it outlives its call (an MCP server, a
						 * background process): Landlock keeps
						 * every deny_read path, as a mount would
						 * not cover one replaced while it runs */
};

/*
 * Resolves a call's request: the profile from the tool file, else
 * sandbox.per_tool, else the default; network from the tool file, else
 * true for tools of side effect network, else sandbox.network; limits the
 * config's with the tool's over them. Workspaces and identity are left for
 * the caller. Pointers refer to cfg and tool (either may be NULL: then
 * profile off, nothing confined).
 */
void sandbox_req_init(struct sandbox_req *req, const struct sandbox_config *cfg, const char *tool_name,
		      bool network_tool, const struct sandbox_tool *tool);

/* The plan the spawned child carries out (apply.c), in memory it shares
 * with the daemon: raw values and fds only. */
struct sandbox_child {
	int cgroup_fd;				/* the call's cgroup dir, or -1 */
	int cgroup_procs_fd;			/* its cgroup.procs, or -1 */
	bool userns;				/* cloned into a user namespace (CLONE_NEWUSER),
						 * where it makes its mount namespace */
	const char *uid_map;			/* userns: "uid uid 1\n", written by the child */
	const char *gid_map;
	const char *const *binds;		/* self-bind rw (keeps them in place) */
	const char *const *ro_binds;		/* self-bind read-only */
	const char *const *writable;		/* everything else read-only: these
						 * (canonical, parents first) kept
						 * as they are, or NULL */
	const char *const *hide_dirs;		/* covered with an empty read-only
						 * tmpfs (the sockets in them out of
						 * reach), with writable */
	const char *const *covers;		/* denied paths (in a writable workspace,
						 * or every one that exists where
						 * the daemon is root): an empty
						 * read-only mount over each */
	const char *tmp_parent;			/* the calls' TMPDIRs, hidden under an */
	const char *tmp_own;			/* empty tmpfs but for this call's own */
	const char *tmp_opts;			/* a tmpfs of this size (its mount
						 * options) on tmp_own instead of the
						 * daemon's directory, or NULL */
	bool mounts_slave;			/* the daemon's are: no need to make them so */
	int mntns_fd;				/* a mount namespace made ahead with
						 * the mounts above (nspool.c), joined
						 * instead of making them, or -1 */
	int cap_last;				/* the bounding set to empty, 0 to
						 * this, and securebits to lock (the
						 * daemon has CAP_SETPCAP), or -1 */
	bool set_ids;
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	size_t n_groups;
	struct { int resource; uint64_t value; } rlimits[6];
	unsigned n_rlimits;
	bool subreaper;
	bool no_new_privs;
	int landlock_fd;			/* -1: none */
	int landlock_fd2;			/* a second layer, enforced after
						 * landlock_fd, or -1; landlock_fd is
						 * the higher (the spawn keeps the fds
						 * up to it) */
	const void *bpf;			/* struct sock_fprog, or NULL */
	bool listen;				/* bpf is seccomp_notes_prog()'s: loaded
						 * with its listener, which is sent
						 * (SCM_RIGHTS) on notes_sock */
	int notes_sock;				/* with listen: the child's end of the
						 * daemon's socket pair */
	int netns_fd;				/* a network namespace to join first, or -1 */
	int userns_fd;				/* the user namespace owning it, joined
						 * before it (a daemon that is not root), or -1 */
	const char *failed;			/* set by the child: the step that failed */
};

struct sandbox_run;

/*
 * Prepares one child's sandbox: TMPDIR (mode 0700, owned by the child's
 * uid), the Landlock ruleset, the seccomp program, the cgroup. With
 * req->require and a missing feature the profile needs, fails -EPERM with
 * what is missing in *ret_msg. Other errors: negative errno, *ret_msg says
 * what failed. Profile off: a run with nothing to apply.
 */
int sandbox_prepare(const struct sandbox_req *req, struct sandbox_run **ret, char **ret_msg);
/* The plan for the spawn, or NULL for profile off. */
struct sandbox_child *sandbox_run_child(struct sandbox_run *run);
/* Once the child has started: prepares what the next call of its
 * identity needs, while it runs. */
void sandbox_run_spawned(struct sandbox_run *run);
/* The private temporary directory, or NULL. */
const char *sandbox_run_tmpdir(const struct sandbox_run *run);
/* Kills every process of the run's cgroup (no-op without one). */
void sandbox_run_kill(struct sandbox_run *run);
/* The same once the child's leader has exited: nothing when the cgroup
 * says it is empty, and then true: no process of the run is left (what
 * it starts stays in its cgroup). */
bool sandbox_run_kill_rest(struct sandbox_run *run);
/* Ends the run: kills what is left in its cgroup, removes the cgroup and
 * TMPDIR. Accepts NULL; returns NULL. What prepares the next call of its
 * plan may wait for sandbox_ahead(). */
struct sandbox_run *sandbox_run_end(struct sandbox_run *run);
/* Prepares the next calls of the runs ended since: called once a call's
 * answer is sent (and by sandbox_prepare()). */
void sandbox_ahead(void);
/* The cgroup.events "populated" state is 0 or the cgroup is gone. */
bool sandbox_run_empty(const struct sandbox_run *run);

/* Appends {"profile","network","enforced":[...]} for structuredContent. */
void sandbox_run_json(const struct sandbox_run *run, struct buf *out);
/* What the limits were the child hit, from how it ended and its stderr, as
 * "memory limit (4096 MB)"; NULL when none. */
char *sandbox_run_limit_hit(const struct sandbox_run *run, int exit_code, int sig,
			    const char *err, size_t err_len);
/* "the temporary space limit of $TMPDIR (N MB, limits.tmp_mb)" when the
 * call's own TMPDIR is full, as the daemon sees it (not by what the child
 * wrote), whatever the exit status; else NULL. Until sandbox_run_end(). */
char *sandbox_run_tmp_hit(const struct sandbox_run *run);
/*
 * The kernel's word on what the sandbox refused (kaudit.c): Landlock's
 * audit records, read on the loop when the kernel writes them (Landlock
 * ABI 7), audit is on and the daemon may read them (CAP_AUDIT_READ); the
 * machine's audit settings are never changed. sandbox_kaudit_start()
 * returns 0 when subscribed, else a negative errno and
 * sandbox_kaudit_why() says why; notes then come from the sandbox's plan
 * alone (refusal.c), until audit is found on.
 */
struct tc_loop;
int sandbox_kaudit_start(struct tc_loop *loop, int landlock_abi);
void sandbox_kaudit_stop(void);
bool sandbox_kaudit_on(void);
const char *sandbox_kaudit_why(void);
/* The refusals recorded for the Landlock domains the process pid made
 * ("writing /dev/tty; signalling a process outside the sandbox"), taken
 * (owned), or NULL. For a call that failed: with none yet, waits up to
 * SANDBOX_KAUDIT_WAIT_MS while the kernel's audit queue holds records
 * still to be sent (or, where the queue cannot be asked, with wait, for
 * one to come). Audit's state is asked again at most every
 * SANDBOX_KAUDIT_RECHECK_MS (admin/stats, notes). */
#define SANDBOX_KAUDIT_WAIT_MS 50
#define SANDBOX_KAUDIT_RECHECK_MS 1000
char *sandbox_kaudit_take(pid_t pid, bool wait);
/* The same of what was already read, taken: for a call that did not fail,
 * with no system call (what is still on its way is not waited for). */
char *sandbox_kaudit_take_kept(pid_t pid);
/* The same, kept; *ret_seen: how many denials it counts. */
char *sandbox_kaudit_peek(pid_t pid, uint64_t *ret_seen);
/* Handles one record's text as if read (type AUDIT_LANDLOCK_ACCESS or
 * _DOMAIN, 1423 or 1424): for tests. */
void sandbox_kaudit_feed(int type, const char *text, size_t len);
/* Appends "sandboxNotes": {from ("audit" or "plan"), why?, records,
 * dropped, notes, waited, paths}. */
struct jgen;
void sandbox_kaudit_write_stats(struct jgen *g);
/*
 * What a child without network tried to reach, seen by the daemon
 * (netnotif.c): the spawners' programs hand its socket(), connect(),
 * sendto() of the network to the daemon, which records them
 * for the call whose child (watched) the task descends from, and refuses
 * them; those of a child with the network "proxy" hand its connect() and
 * sendto(), recorded where they bypass the proxy and will fail, and left
 * to the kernel. sandbox_netnotif_start(): 0, or a negative errno when the kernel
 * cannot (sandbox_netnotif_why() says why; spawners' programs are then
 * the plain ones). sandbox_netnotif_add(): watches a listener (taken) of
 * the program prog (seccomp_spawner_prog()'s or seccomp_notes_prog()'s).
 * sandbox_netnotif_watch(): a call's child, and the call's own
 * cgroup (a path, or NULL), by which its tasks are found; proxy: its
 * network is the proxy, in the namespace whose NETLINK_SOCK_DIAG socket
 * is diag_fd (lent until sandbox_netnotif_forget(), or -1). sandbox_netnotif_take(): "connect to 1.1.1.1:80 refused: this
 * tool has no network" (or "...: this tool reaches the network only
 * through the daemon's proxy (...)") for what a watched child's tasks tried (owned,
 * taken), or NULL. sandbox_netnotif_peek(): the same, not taken;
 * *ret_seen counts the destinations named and attempts elsewhere, growing
 * with each new one (not with a repeated one).
 */
int sandbox_netnotif_start(struct tc_loop *loop);
void sandbox_netnotif_stop(void);
bool sandbox_netnotif_on(void);
const char *sandbox_netnotif_why(void);
int sandbox_netnotif_add(int listener, const void *prog);
/* Whether a listener more can be watched; counted when not. */
bool sandbox_netnotif_room(void);
void sandbox_netnotif_watch(pid_t pid, const char *cgroup, bool proxy, int diag_fd);
void sandbox_netnotif_forget(pid_t pid);
char *sandbox_netnotif_take(pid_t pid);
char *sandbox_netnotif_peek(pid_t pid, uint64_t *ret_seen);
/* Appends "sandboxNetworkNotes": {on, why?, listeners, watched,
 * notifications, recorded, byCgroup, sockets, gone, unread, unmatched,
 * unwatched}. */
void sandbox_netnotif_write_stats(struct jgen *g);
/* The pid of the run's child, once spawned: whose refusals its note names. */
void sandbox_run_set_pid(struct sandbox_run *run, pid_t pid);

/* For a failed call: the line telling the model what the sandbox refused
 * (the network a child without it tried, Landlock's records, the paths
 * err names judged against the plan) and
 * what the profile allows, or that it may have been the sandbox where
 * nothing decides; else NULL. */
char *sandbox_run_denial_note(const struct sandbox_run *run, const char *err, size_t err_len);
/* For a call that did not fail: the same line, only where the daemon saw
 * a refusal (the network a child without it tried, Landlock's records
 * already read), never from its stderr; else NULL. No system call. */
char *sandbox_run_seen_note(const struct sandbox_run *run);
/* For a child still running (a background process): the line
 * sandbox_run_seen_note() would give now, without taking what it names
 * (the line at its end names it again); *ret_seen counts the refusals
 * named, growing with each new one, not with one repeated. NULL when
 * nothing was seen. No system call. */
char *sandbox_run_seen_so_far(const struct sandbox_run *run, uint64_t *ret_seen);
/* The canonical path of the directory a child starts in, cwd_fd or else
 * root (a workspace's), for its note to judge relative paths in
 * (sandbox_req.cwd); NULL when it cannot be told. */
char *sandbox_start_dir(const char *root, int cwd_fd);
enum sandbox_profile sandbox_run_profile(const struct sandbox_run *run);

/*
 * Network "proxy" (net.c): the child's namespace has loopback only, and
 * the daemon serves an HTTP proxy on 127.0.0.1:SANDBOX_PROXY_HTTP_PORT and
 * a SOCKS5 one on 127.0.0.1:SANDBOX_PROXY_SOCKS_PORT there, through the
 * ops set with sandbox_net_set_ops() (the daemon's: policy, audit,
 * events, confirmation). The sandbox only makes the namespace and hands
 * the listening sockets over.
 */
#define SANDBOX_PROXY_HTTP_PORT 3128
#define SANDBOX_PROXY_SOCKS_PORT 1080
/* The largest TCP segment on a proxy namespace's lo (netns.c). */
#define SANDBOX_LO_GSO_MAX 524280

/* Whose connections a run's proxy carries, for its audit lines, events
 * and questions; the strings are copied. */
struct tc_loop;
struct sandbox_net_who {
	struct tc_loop *loop;
	uid_t uid;
	const char *session;		/* its id, or NULL */
	const char *call_id;		/* the call's id, or NULL */
	const char *process_id;		/* a background process's id, or NULL */
	const char *tool;		/* the tool or provider, or NULL */
};

/* What the ops are given to serve one run's proxy. */
struct sandbox_net_serve {
	/* Listening, non-blocking, lent to the ops until stop (the
	 * namespace keeps them for a later call: never closed by the ops). */
	int http_fd;
	int socks_fd;
	const struct net_policy *tool_policy;	/* added to the config's, or NULL */
	const struct sandbox_net_who *who;
};

struct sandbox_net_ops {
	/* Starts serving; returns the served proxy (freed by stop), or NULL
	 * with *ret_msg set. */
	void *(*start)(void *arg, const struct sandbox_net_serve *s, char **ret_msg);
	/* Stops and frees what start returned. */
	void (*stop)(void *arg, void *served);
	/* The note for the call's result naming each refused host:port and
	 * its rule, or NULL when none was refused (owned). */
	char *(*note)(void *arg, void *served);
};
/* Sets the ops (NULL: "proxy" is refused, saying no proxy is served). */
void sandbox_net_set_ops(const struct sandbox_net_ops *ops, void *arg);
/* Whether the kernel and the daemon can give a child a network
 * namespace of its own (*ret_why says why not). Probed once. */
bool sandbox_netns_capable(const char **ret_why);
/* How many namespaces are kept ready (default 4). */
void sandbox_netns_pool_size(unsigned n);
/* The environment a run's child gets for its network ("HTTP_PROXY=…"
 * and the others, upper and lower case), NULL-terminated, or NULL. */
const char *const *sandbox_run_net_env(const struct sandbox_run *run);
/* The served proxy of a run (the ops' start), or NULL. */
void *sandbox_run_net_served(const struct sandbox_run *run);
/* The note naming what the proxy refused (see the ops), or NULL. */
char *sandbox_run_net_note(const struct sandbox_run *run);

/* Gives a daemon running as root a mount namespace of its own (a slave of
 * the one it started in, so mounts made there still reach it), where its
 * calls' TMPDIRs go on a tmpfs that ends with it. Before any thread. 0 or
 * a negative errno (-EPERM: not root): the TMPDIRs then stay on the disk
 * (slower, as safe). */
int sandbox_private_mounts(void);
/* Starts the process that makes the children's mount namespaces ahead
 * (nspool.c); sandbox_private_mounts() calls it. 0 or a negative errno. */
int sandbox_nsmaker_start(void);
/* Drops the cached rulesets and programs (on reload). */
void sandbox_cache_clear(void);
/* At exit: removes the directory of TMPDIRs and the call cgroups left,
 * drops the caches and forgets the probe (tests that emulate another
 * kernel call it to probe again). */
void sandbox_shutdown(void);

/*
 * Carries out the plan in the spawned child: raw system calls only, on its
 * stack. Returns 0, or a negative errno with c->failed naming the step.
 * Every plan ends without a capability (see below).
 */
int sandbox_child_apply(struct sandbox_child *c);

/*
 * Children started by a spawner (lib/child/child_spawner.c), a process of
 * the daemon's that has done once what every child of a seccomp program
 * does (sandbox_spawner_setup(): bounding set, securebits, no_new_privs,
 * the program in its spawner variant, which lets setns join a mount or
 * network namespace, useless without capabilities), so that its children
 * inherit that and carry out the rest of their plan only
 * (sandbox_child_apply_spawned(): its working directory that of cwd_fd,
 * or its own when -1, cwd its path or NULL). sandbox_child_spawnable(): whether a
 * plan can be carried out so. seccomp_spawner_prog(): the spawner's
 * program for a plan's (its bpf), or NULL.
 */
bool sandbox_child_spawnable(const struct sandbox_child *c);
const void *seccomp_spawner_prog(const void *prog);
/* Whether a spawner's program hands calls to the daemon (netnotif.c). */
bool seccomp_prog_notifies(const void *spawner_prog);
/* Whether a program handing calls to the daemon is the network "proxy"'s. */
bool seccomp_prog_proxied(const void *prog);
/* The variant of the no-network or "proxy" program a child started without a
 * spawner loads with its own listener (sandbox_child.listen), or NULL. */
const void *seccomp_notes_prog(const void *prog);
/* Loads the program; *ret_listener: its seccomp notification listener,
 * where the program hands calls to the daemon (netnotif.c), else -1. */
int sandbox_spawner_setup(int cap_last, const void *spawner_prog, int *ret_listener);
int sandbox_child_apply_spawned(struct sandbox_child *c, const char *cwd, int cwd_fd);

/*
 * No child holds a capability, whatever its uid: each empties its
 * bounding set and locks the securebits (SECBIT_NOROOT and the others:
 * no capability comes back through exec of a setuid or file-capability
 * binary, nor as uid 0) where the daemon holds CAP_SETPCAP, then clears
 * its ambient, inheritable, permitted and effective sets, after the
 * privileged steps of its plan and before exec. sandbox_cap_last(): the
 * highest capability the kernel knows, to drop up to, or -1 when the
 * daemon has no CAP_SETPCAP (a child of an unprivileged daemon has no
 * capability to lose, and no_new_privs keeps a sandboxed one from
 * gaining any); looked up once. The other two are raw, for the spawned
 * child (apply.c).
 */
int sandbox_cap_last(void);
int sandbox_caps_bound(int last_cap);
int sandbox_caps_clear(void);

/*
 * True when pid is a process the daemon started (a descendant of the
 * daemon) or lives in one of its call cgroups: such a peer of the socket
 * is refused. pidfd (or -1) pins the process against pid reuse.
 */
bool sandbox_pid_confined(pid_t pid, int pidfd);

/* How often a refused sandboxed peer is logged, at most. */
#define SANDBOX_REFUSAL_LOG_MS 60000
/*
 * Whether a refusal of a sandboxed peer is to be logged now: the first,
 * then at most one every interval_ms; *ret_more (set when true) counts the
 * refusals not logged since the last line.
 */
bool sandbox_refusal_due(uint64_t now_ms, uint64_t interval_ms, unsigned *ret_more);

/* Where the sandbox's warnings go (the program logs them; NULL: nowhere):
 * a workspace whose scan for nested repositories stopped at its bound. */
void sandbox_set_warn(void (*fn)(const char *msg));
/* Scans for nested repositories that stopped at their bound, since the
 * start. */
uint64_t sandbox_repos_bounded(void);

/*
 * The program a child is to run, checked as ssh's StrictModes checks a
 * user's files, and opened (O_PATH, close-on-exec) for the child to run
 * that very file (child_opts.exec_fd): no link, rename or file put in its
 * place between the check and the exec changes what runs. name is a path
 * (relative ones from cwd_fd, or the daemon's working directory when -1)
 * or a name without a slash, searched in envp's PATH (the first found is
 * the one checked: one refused is not passed over). It is refused unless
 * it is a regular file owned by root, by the daemon's uid or by run_uid
 * (whom it runs as) and not writable by group or other; every link and
 * directory on its way, as written and where it really lies, must be owned
 * by one of them too, and a directory must not be writable by group or
 * other unless sticky (where only an entry's owner can rename or remove
 * it): else someone else could move another file into its place; a way
 * of over 1024 names (links followed) is refused. Returns
 * 0 with the fd (above 2) in *ret_fd, -EPERM with why (naming the file; owned) in
 * *ret_why when refused, or the open's negative errno (-ENOENT, -EACCES).
 */
int sandbox_program_open(const char *name, char *const *envp, int cwd_fd, uid_t run_uid, int *ret_fd,
			 char **ret_why);
/*
 * The script that argv's interpreter (sh, python3, node ...) runs, its
 * first operand, or NULL; and that script checked by the same rule (a
 * relative name from cwd_fd): 0, -EPERM with why when refused, or 0 too
 * when it does not exist (the operand may not be a file at all). It is not
 * run from an fd: the rule on its directories already keeps anyone else
 * from putting another file in its place, and an interpreter given
 * /dev/fd/N would no longer know where its script lies.
 */
const char *sandbox_argv_script(const char *const *argv);
/* Where a refusal of those two, and the sandbox's other warnings (a
 * directory too crowded to split around a deny_read path), are told (the
 * daemon's log), once per message among the last 64 different ones: a
 * peer calling again and again does not fill the log. NULL: nowhere. */
void sandbox_program_set_log(void (*fn)(const char *message));
int sandbox_script_check(char *const *argv, int cwd_fd, uid_t run_uid, char **ret_why);
/*
 * Those two keep the last checks passed, with the identity of every name
 * each looked at, and answer a check again by looking at those names
 * once more (program.c): sandbox_program_cache_clear() drops them
 * (sandbox_cache_clear() calls it); sandbox_program_cache_hits(): how
 * many checks were so answered since the start.
 */
void sandbox_program_cache_clear(void);
uint64_t sandbox_program_cache_hits(void);

#endif
