/* SPDX-License-Identifier: MIT */
/*
 * The "mcp" tool kind: a stdio MCP server declared in a tool file,
 *
 *   { "name": "fs", "kind": "mcp", "command": ["node", "server.js", "/srv"],
 *     "prefix": "fs_", "side_effects": "write",
 *     "tools": { "read_*": { "side_effects": "read" } } }
 *
 * is a provider. It is spawned lazily (when a client first lists the
 * tools, or calls a name with its prefix), initialized as an MCP client
 * would, and its tools are imported under the prefix. Calls are sent to it
 * over its stdin and matched to answers by JSON-RPC id, so any number run at
 * once. When the server dies its pending calls fail as transient and the
 * next call spawns it again. "tools" overrides what the file says for the
 * imported tools it names (exact names win over globs).
 *
 * A root daemon runs the server as each calling peer ("run_as": "peer", the
 * default): one instance per peer uid, started by that uid's first call
 * and stopped after "idle_s" without calls, each an mcp_provider of its
 * own beneath the one the file declares, which holds the tool list every
 * peer sees (the first instance's, replaced when one says its list
 * changed). "run_as": "user:NAME" or "root" runs one instance for all.
 */
#ifndef TC_MCP_H
#define TC_MCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/tool.h"

struct json;
struct registry;
struct tc_loop;
struct mcp_provider;

enum mcp_state {
	MCP_IDLE,	/* not started (or stopped after a crash, tools known) */
	MCP_STARTING,	/* spawned; initializing or listing tools */
	MCP_READY,	/* tools imported, calls flow */
	MCP_FAILED,	/* the last start failed; see mcp_provider_error() */
};

extern const struct tool_def tool_kind_mcp;

struct bind;
/* Checks a declaration of kind "mcp" with the binder: every mistake is
 * recorded in b, each naming its key ("prefix: ..."). */
int mcp_provider_bind(struct bind *b, const struct json *decl, const char *source, struct mcp_provider **ret);
/* The same outside a file: the messages in *ret_err, one a line. */
int mcp_provider_from_json(const struct json *decl, const char *source, struct mcp_provider **ret,
			   char **ret_err);
struct mcp_provider *mcp_provider_ref(struct mcp_provider *p);
/* The last reference stops the server. Accepts NULL; returns NULL. */
struct mcp_provider *mcp_provider_unref(struct mcp_provider *p);

const char *mcp_provider_name(const struct mcp_provider *p);
const char *mcp_provider_prefix(const struct mcp_provider *p);
const char *mcp_provider_source(const struct mcp_provider *p);
/* The canonical declaration: equal fingerprints mean the same provider. */
const char *mcp_provider_fingerprint(const struct mcp_provider *p);
/* The server's argv, as its file declares it. */
const char *const *mcp_provider_argv(const struct mcp_provider *p);
enum mcp_state mcp_provider_state(const struct mcp_provider *p);
const char *mcp_provider_error(const struct mcp_provider *p);
/* What the last import or registration left out (tools not offered, and
 * why), for the daemon to log; NULL when nothing. */
const char *mcp_provider_notes(const struct mcp_provider *p);
/* The last failure (to start, or a crash), kept after a restart; NULL. */
const char *mcp_provider_last_error(const struct mcp_provider *p);
/* Spawns after the first; the server's pid while it runs, else 0. */
unsigned mcp_provider_restarts(const struct mcp_provider *p);
int mcp_provider_pid(const struct mcp_provider *p);
/* The keys of the file's "tools" that match no imported tool, as
 * "\"a\", \"b_*\"" (to be freed); NULL when all match or nothing was
 * imported yet. */
char *mcp_provider_unmatched(const struct mcp_provider *p);
/* True once a tool list was imported (the provider may be idle again). */
bool mcp_provider_imported(const struct mcp_provider *p);

/*
 * Where the provider runs: the loop, the settings of tool calls (for the
 * environment allow-list) and the directory it starts in. on_settled is
 * called each time an import ends, ready or failed (and when the server
 * says its tool list changed and the new one is in).
 */
void mcp_provider_setup(struct mcp_provider *p, struct tc_loop *loop, const struct tool_env *env,
			const char *cwd, void (*on_settled)(void *arg, struct mcp_provider *p), void *arg);
/* Where the provider's log goes: each line of the server's stderr (cut at
 * 512 bytes, at most 20 lines per 10 s, then a line saying so, and with the
 * next line logged how many were not), and warnings (warning true) such as "tools" keys that match
 * none of its tools. */
void mcp_provider_set_log(struct mcp_provider *p,
			  void (*on_log)(void *arg, struct mcp_provider *p, bool warning, const char *line));
/* Spawns the server and imports its tools, unless running already (or
 * its last start failed within the retry time). A provider run as each
 * peer (the default for a root daemon) starts only as one: */
void mcp_provider_start(struct mcp_provider *p);
/* Starts the instance that serves ident (p itself when one instance serves
 * every peer). Until p has a tool list it is starting with it. */
struct identity;
void mcp_provider_start_for(struct mcp_provider *p, const struct identity *ident);
/* The failure of the last start for ident (its own instance's, when p runs
 * as each peer: another uid's is not told); NULL when it did not fail. */
const char *mcp_provider_error_for(const struct mcp_provider *p, const struct identity *ident);
/* Whether that failure is its program's refusal (sandbox_program_open()). */
bool mcp_provider_refused_for(const struct mcp_provider *p, const struct identity *ident);
/* How long a failed start is not tried again (providers.retry_s); the next
 * call tries again at once (set at each reload). */
void mcp_provider_set_retry(struct mcp_provider *p, uint32_t retry_s);
/* True when the file says "run_as": "root". */
bool mcp_provider_runs_as_root(const struct mcp_provider *p);
/* The instances run as each peer, each with the state and pid accessors
 * above, and the uid it runs for. */
size_t mcp_provider_n_instances(const struct mcp_provider *p);
const struct mcp_provider *mcp_provider_instance(const struct mcp_provider *p, size_t i);
unsigned mcp_provider_uid(const struct mcp_provider *inst);
/* Registers the imported tools ("<prefix><name>") into r. */
int mcp_provider_register(struct mcp_provider *p, struct registry *r, char **ret_err);

#endif
