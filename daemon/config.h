/* SPDX-License-Identifier: MIT */
/*
 * The daemon's configuration file: one JSON object (// and block comments
 * allowed), every key optional, every key checked. An unknown key, a value
 * of the wrong type or a number out of range is an error reported as
 * "FILE:LINE:COL: key.path: message"; so is a JSON syntax error.
 *
 * Keys (contract §8 plus the daemon's own):
 *
 *   key                                   type            default
 *   socket                                path|null       null: see config_default_socket()
 *   socket_mode                           "octal" string  "0660" (at most 0777)
 *   workspace                             path            "." (the daemon's working directory)
 *   workspaces.allowed                    [path]          []: roots a client may ask for
 *   tools_dir                             path|null       null: no tool files
 *   audit_log                             path|null       null: no audit log
 *   audit_fsync_ms                        0..2^32-1       1000: fsync the audit log at most this
 *                                                         often (0: after every record)
 *   audit.on_error                        string          "log": keep serving while the audit log
 *                                                         cannot be written; "refuse": calls fail
 *                                                         internal until it can
 *   grace_ms                              0..2^32-1       10000: SIGTERM waits this long for calls
 *   log_level                             string          "info": "debug"|"info"|"warning"|"error"
 *   limits.max_message_bytes              256..1 GiB      8388608
 *   limits.max_json_depth                 2..1024         64
 *   limits.max_batch                      1..1000000      1000: requests in one batch
 *   limits.max_concurrent                 1..1000000      64: calls running at once, daemon-wide
 *   limits.session_concurrency            1..1000000      4: calls running at once per session
 *   limits.per_uid_running                1..1000000      three quarters of max_concurrent (at
 *                                                         least 1): calls running at once per uid
 *   limits.queue_max                      0..1000000      256: calls waiting per session
 *   limits.queue_max_total                0..100000000    8192: calls waiting daemon-wide
 *   limits.max_connections                1..1000000      16384
 *   limits.max_output_bytes               4096..1 TiB     16777216: output queued for one client
 *                                                         before its requests stop being read
 *   limits.max_client_memory              1 MiB..1 TiB    1 GiB: input and output buffered for
 *                                                         all clients; beyond, the largest
 *                                                         connection of the uid holding the most
 *                                                         is disconnected
 *   limits.per_uid_connections            1..1000000      1024: connections of one peer uid
 *   limits.per_uid_memory                 1 MiB..1 TiB    268435456: input, output and batch
 *                                                         answers held for one peer uid; beyond,
 *                                                         that uid's largest connection goes
 *   limits.turn_budget_us                 0..1000000      1000: time tool calls may take in one
 *                                                         loop turn before further tools/call
 *                                                         lines wait for a later turn
 *   limits.per_uid_queue                  0..100000000    4096: calls waiting per peer uid
 *   limits.session_confirmations          1..1000000      64: confirmations pending per session
 *   limits.session_resume_s               0..86400        300: a session is kept this long after
 *                                                         its last connection closed, for its
 *                                                         client to come back (initialize sessionId)
 *   limits.io_threads                     1..64           4: worker threads for blocking file work
 *   limits.idle_timeout_ms                0..2^32-1       0: never disconnect idle clients
 *   limits.per_tool_concurrency           {tool: 1..}     {}: no per-tool cap
 *   limits.event_queue                    1..1000000      1024: events held for a slow
 *                                                         subscriber before some are dropped
 *   limits.read_default_lines             1..10000000     2000: read_file's default window
 *   limits.read_default_bytes             1 KiB..1 GiB    262144: read_file's default text window
 *   limits.shell_output_kb                1..1048576      64: output shown in shell's text
 *   limits.per_uid_processes              1..100000       8: background processes of one uid
 *   limits.process_buffer_kb              1..1048576      1024: output kept per process
 *   limits.process_idle_s                 1..31536000     900: ended without process_io
 *   limits.process_lifetime_s             1..31536000     86400
 *   limits.process_keep_s                 0..31536000     300: an ended process stays listed
 *   limits.process_keep_max               1..100000       32: ended processes one uid has listed
 *   limits.kill_grace_ms                  1..600000       5000: a background process's end signal
 *                                                         (process_kill, idle, lifetime) to SIGKILL
 *   limits.net_connections                1..100000       64: connections at once through one
 *                                                         call's network proxy
 *   limits.net_mb                         0..1048576      0 (none): MB up and down through one
 *                                                         call's network proxy
 *   limits.tmp_mb                         1..2^40|null    1024: a call's TMPDIR in MB, the default
 *                                                         of sandbox.limits.tmp_mb, which wins
 *                                                         when both are given
 *   retry.max_attempts                    1..100          3
 *   retry.base_delay_ms                   0..3600000      100
 *   retry.max_delay_ms                    0..3600000      10000: the longest wait between attempts
 *   idempotency.ttl_ms                    0..2^32-1       60000
 *   idempotency.max_entries               1..100000000    10000
 *   idempotency.max_bytes                 1 MiB..1 TiB    268435456: of kept outcomes
 *   store.kind                            string          "memory" | "redis"
 *   store.address                         string          "127.0.0.1:6379" | "unix:/path"
 *   store.prefix                          string          "toolcalld:": of every Redis key
 *   store.lease_ms                        100..3600000    10000: a claim's lease, renewed
 *   store.timeout_ms                      10..600000      2000: no reply means Redis is away
 *   store.on_unavailable                  string          "local" | "fail"
 *   store.server_uid                      uid | user      none: a Unix socket's server may run
 *                                                         as root or the daemon's euid only
 *   tasks.ttl_ms                          1000..86400000  3600000: kept after they end
 *   tasks.max_per_uid                     1..1000000      1000
 *   circuit.failures                      1..1000000      5
 *   circuit.window_ms                     1..2^32-1       30000
 *   circuit.open_ms                       1..2^32-1       30000
 *   confirmation.timeout_ms               1..2^32-1       300000
 *   confirmation.no_approver              string          "deny" | "wait"
 *   confirmation.default.<class>          mode            none, read: "auto"; write, execute,
 *                                                         network: "prompt"
 *   confirmation.per_tool                 {tool: mode}    {}
 *   confirmation.trusted_workspaces       [path]          []
 *   confirmation.trusted_workspace_overrides {class: mode} {"write": "auto", "execute": "prompt"}
 *   tools.<built-in>.timeout_ms           1..2^32-1       the tool's own (shell: 600000)
 *   tools.shell.env_allow                 [string]        ["PATH", "LANG", "HOME", "TERM"]
 *   tools.shell.output_cap                1..1 GiB        1048576: bytes kept per stream
 *   tools.read_file.limit                 1..1 GiB        1048576: read_file's default limit
 *   peers.allow_uids                      [uid|name]      []: with both lists empty, anyone
 *   peers.allow_gids                      [gid|name]      []  who can open the socket
 *   memory.dir                            path|null       null: $STATE_DIRECTORY/memory, else
 *                                                         /var/lib/toolcalld/memory for
 *                                                         root, else $XDG_STATE_HOME (or
 *                                                         ~/.local/state)/toolcalld/memory
 *   memory.scope                          string          "uid" | "workspace": one memory per
 *                                                         peer uid, or per uid and workspace
 *   memory.max_file_kb                    1..1048576      64: the largest memory file
 *   memory.max_total_kb                   1..16777216     1024: all files of one memory
 *   run_as                                "peer"|"daemon" "peer": children run as the peer when
 *                                                         the daemon is root
 *   sandbox.*                             object          see lib/sandbox/sandbox.h and
 *                                                         toolcalld.conf(5); deny_read always
 *                                                         gets the config file, tools_dir,
 *                                                         audit_log and memory.dir added
 *                                                         (and, by the server, the socket and
 *                                                         its directory in the workspace)
 *   network                               object          the policy of sandbox network "proxy":
 *                                                         allow, deny, unknown, allow_private,
 *                                                         hosts (lib/net/net.h, toolcalld.conf(5))
 *
 * A mode is "auto", "prompt" or "deny"; a class is "none", "read", "write",
 * "execute" or "network". confirmation.default merges with the defaults key
 * by key; trusted_workspace_overrides, when present, replaces the default
 * overrides as a whole (classes it leaves out follow confirmation.default).
 *
 * Relative paths: every relative path written in the file (socket,
 * workspace, workspaces.allowed, tools_dir, audit_log, trusted_workspaces)
 * is taken relative to the directory that holds the config file, so a
 * config means the same whatever the daemon's working directory. Defaults
 * that are not written in the file ("workspace": ".") stay relative to the
 * daemon's working directory. Trusted workspaces are made canonical
 * (realpath) at load when they exist, and normalised lexically otherwise.
 */
#ifndef TC_CONFIG_H
#define TC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/hooks/hooks.h"
#include "lib/policy/policy.h"
#include "lib/sandbox/sandbox.h"

/* The largest config file read, and its nesting limit. */
#define CONFIG_MAX_BYTES (16u << 20)
#define CONFIG_MAX_DEPTH 64

/* The built-in tools whose timeout the config may set, with "tools.<name>". */
enum config_builtin {
	CONFIG_TOOL_READ_FILE,
	CONFIG_TOOL_WRITE_FILE,
	CONFIG_TOOL_PATCH_FILE,
	CONFIG_TOOL_LIST_DIR,
	CONFIG_TOOL_SHELL,
	CONFIG_TOOL_MAX,
};

/* One "limits.per_tool_concurrency" entry. */
struct config_tool_cap {
	char *name;
	uint32_t max;
};

struct config {
	char *socket;			/* NULL: config_default_socket() */
	mode_t socket_mode;
	char *workspace;
	char **workspaces_allowed;
	size_t n_workspaces_allowed;
	char *tools_dir;		/* NULL: none */
	char *tools_dir_at;		/* "FILE:LINE:COL" of its key, for messages; NULL: not from a file */
	char *audit_log;		/* NULL: none */
	uint64_t audit_fsync_ms;
	int audit_on_error;		/* enum audit_on_error */
	uint64_t grace_ms;
	int log_level;			/* syslog priority: LOG_DEBUG .. LOG_ERR */
	uint32_t providers_retry_s;	/* a provider's failed start is not tried again within */

	struct {
		uint64_t max_message_bytes;
		uint32_t max_json_depth;
		uint32_t max_batch;
		uint32_t max_concurrent;
		uint32_t session_concurrency;
		uint32_t per_uid_running;	/* 0: three quarters of max_concurrent */
		uint32_t queue_max;
		uint32_t queue_max_total;
		uint32_t max_connections;
		uint64_t max_output_bytes;
		uint64_t max_client_memory;
		uint32_t per_uid_connections;
		uint64_t per_uid_memory;
		uint32_t turn_budget_us;	/* tool call time in one loop turn */
		uint64_t idle_timeout_ms;	/* 0: none */
		unsigned io_threads;		/* worker threads for file work */
		uint32_t per_uid_queue;		/* calls waiting per uid */
		uint32_t session_confirmations;	/* confirmations pending per session */
		uint32_t session_resume_s;	/* a session outlives its last connection */
		struct config_tool_cap *per_tool;
		size_t n_per_tool;
		uint32_t event_queue;
		uint32_t read_default_lines;	/* read_file's default window in lines */
		uint64_t read_default_bytes;	/* ... and in bytes */
		uint32_t shell_output_kb;	/* shell's text: head and tail kept */
		uint32_t per_uid_processes;	/* background processes of one uid */
		uint32_t process_buffer_kb;	/* the output ring of each */
		uint64_t process_idle_s;	/* ended after this long without process_io */
		uint64_t process_lifetime_s;
		uint64_t process_keep_s;	/* listed after they end */
		uint32_t process_keep_max;	/* ended ones one uid has listed */
		uint32_t kill_grace_ms;		/* process_kill: its signal to SIGKILL */
		uint32_t net_connections;	/* a call's proxy: connections at once */
		uint64_t net_mb;		/* ... and MB up and down in all; 0: no bound */
		int64_t tmp_mb;			/* as given, INT64_MIN: not; applied to sandbox.limits */
	} limits;

	struct {
		uint32_t max_attempts;
		uint64_t base_delay_ms;
		uint64_t max_delay_ms;
	} retry;

	struct {
		uint64_t ttl_ms;
		uint64_t max_entries;
		uint64_t max_bytes;
	} idempotency;

	struct {
		uint32_t failures;
		uint64_t window_ms;
		uint64_t open_ms;
	} circuit;

	struct {
		char *kind;			/* "memory" or "redis" */
		char *address;			/* "unix:/path" or "HOST:PORT" */
		char *prefix;
		uint64_t lease_ms;
		uint64_t timeout_ms;
		bool fail;			/* on_unavailable "fail" */
		uint32_t server_uid;		/* trusted besides root and the euid; UINT32_MAX: none */
		uint64_t task_ttl_ms;		/* tasks.ttl_ms */
		uint64_t max_tasks;		/* tasks.max_per_uid */
	} store;

	struct policy_config confirmation;
	struct hooks_config hooks;

	struct {
		/* Indexed by enum config_builtin; 0: the tool's own default. */
		uint32_t timeout_ms[CONFIG_TOOL_MAX];
		char **shell_env_allow;		/* NULL-terminated */
		size_t n_shell_env_allow;
		uint64_t shell_output_cap;
		uint64_t read_file_limit;
	} tools;

	struct {
		char *dir;			/* NULL: the default for the daemon's user */
		bool per_workspace;		/* scope "workspace" (else "uid") */
		uint32_t max_file_kb;
		uint32_t max_total_kb;
	} memory;

	struct {
		uid_t *uids;
		size_t n_uids;
		gid_t *gids;
		size_t n_gids;
	} peers;
	struct sandbox_config sandbox;	/* run_as is its run_as_peer */
	struct net_policy *network;	/* "network" (lib/net/net.h); NULL: deny all */
};

/* Fills c with every default. */
void config_init(struct config *c);
/* Frees what c holds (accepts NULL); c must be re-initialised to be reused. */
void config_free(struct config *c);

/*
 * Reads and checks the file at path (at most CONFIG_MAX_BYTES). On success
 * replaces the contents of c (which must hold a config, e.g. from
 * config_init) and returns 0. On failure leaves c untouched, returns a
 * negative errno and stores a message in *ret_err: "FILE:LINE:COL: message"
 * for anything wrong inside the file (every mistake found, one a line; a
 * JSON syntax error stops the reading there), "FILE: reason" when it
 * cannot be read.
 */
int config_load(struct config *c, const char *path, char **ret_err);
/*
 * Same, but when the file could be parsed and only its values are wrong,
 * c gets what could be read (defaults for the rest) and 1 is returned:
 * what depends on it (the tool files of its tools_dir) can then be checked
 * in the same run. *ret_err holds every error, one a line.
 */
int config_check(struct config *c, const char *path, char **ret_err);

/*
 * Same, from text in memory. name is used in messages; relative paths are
 * resolved against base_dir (NULL: left as written).
 */
int config_load_text(struct config *c, const char *name, const char *base_dir,
		     const char *text, size_t len, char **ret_err);

/* The default socket (daemon/default_socket.h: $TOOLCALLD_SOCKET, else
 * $XDG_RUNTIME_DIR/toolcalld.sock, else /run/toolcalld/toolcalld.sock or
 * /tmp/toolcalld-UID/toolcalld.sock). A new string. */
char *config_default_socket(void);

/* memory.dir when the config does not say: $STATE_DIRECTORY/memory (a
 * systemd service's StateDirectory=), else /var/lib/toolcalld/memory for
 * root, else $XDG_STATE_HOME/toolcalld/memory or
 * ~/.local/state/toolcalld/memory; NULL when there is no home. A new
 * string. */
char *config_default_memory_dir(void);

/* The index of a built-in tool the config knows by name ("shell"); -1
 * when not a built-in. */
int config_builtin_from_name(const char *name);

/* The timeout configured for a tool (0: none configured). */
uint32_t config_tool_timeout(const struct config *c, const char *name);
/* The per-tool concurrency cap of a tool (0: none). */
uint32_t config_tool_concurrency(const struct config *c, const char *name);
/* "debug", "info", "warning", "error" for a syslog priority. */
const char *config_log_level_name(int level);

#endif
