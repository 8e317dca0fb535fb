/* SPDX-License-Identifier: MIT */
/*
 * What the files of the "mcp" tool kind share, and nothing else includes:
 * the provider's state, and the seams between its four parts, each built
 * on the ones listed before it:
 *   mcp.c           the declaration (the tool file), its overrides per
 *                   imported tool, the provider's state and what it tells
 *                   of itself;
 *   mcp_protocol.c  the MCP protocol with the server: JSON-RPC lines
 *                   written to its stdin, initialize and the tool import,
 *                   tools/call requests and their answers;
 *   mcp_proc.c      the server process: spawn, its stdout cut into lines
 *                   for the protocol, its stderr (logged, bounded, its
 *                   tail kept for errors), exit; the instances run as
 *                   each peer; the provider's life (its setup, an
 *                   instance's idle stop, references: the last stops the
 *                   servers);
 *   mcp_tools.c     the tools it offers to the registry, and their calls.
 */
#ifndef TC_MCP_INTERNAL_H
#define TC_MCP_INTERNAL_H

#include <stdint.h>

#include "lib/base/list.h"
#include "lib/sandbox/sandbox.h"
#include "proto/base/buf.h"
#include "tools/mcp/mcp.h"

#define MCP_LINE_MAX (8u << 20)		/* a message from the server */
#define MCP_IMPORT_MS 15000		/* spawn to tool list */
#define MCP_TOOLS_MAX 1024
#define MCP_OVERRIDES_MAX 256
#define MCP_STDERR_TAIL 2048		/* bytes of stderr kept for errors */
#define MCP_IDLE_S 600			/* an instance per peer stops after so long without calls */
#define MCP_RETRY_S 30			/* a failed start is not tried again within (providers.retry_s) */

struct jgen;
struct json;

struct mcp_import {
	char *name;
	char *description;
	char *schema;
	int read_only;			/* its annotations' readOnlyHint: -1 absent, 0, 1 */
	int destructive;		/* destructiveHint: -1 absent, 0, 1 */
};

/* Whom the server runs as (the file's "run_as"). */
enum mcp_run_as {
	MCP_RUN_PEER,			/* "peer" (default): as each calling peer */
	MCP_RUN_USER,			/* "user:NAME": one instance as that user */
	MCP_RUN_ROOT,			/* "root": one instance as the daemon, root */
	MCP_RUN_DAEMON,			/* "daemon": one as the daemon (not root) */
};

/* One entry of the file's "tools": what it changes of the tools it names
 * (a name, or a glob with * ? [...], matched as confirmation.per_tool keys:
 * lib/policy/policy.h). */
struct mcp_override {
	char *pattern;
	bool glob;
	unsigned literal;		/* characters that are not wildcards */
	int side_effects;		/* -1: unchanged */
	int idempotent;			/* -1: unchanged */
	uint32_t timeout_ms;		/* 0: unchanged */
	unsigned max_attempts;		/* 0: unchanged */
	int concurrency;		/* -1: unchanged */
	char *description;		/* NULL: unchanged */
};

/* A call waiting for the server (queued before it is ready, or sent). */
struct mcp_call {
	struct list node;		/* p->queued or p->sent */
	struct mcp_provider *p;		/* the instance it was given to */
	struct tool_call *tc;
	char *remote;
	uint64_t id;			/* 0 until sent */
};

struct mcp_provider {
	unsigned refs;
	char *name;
	char *prefix;
	char *source;
	char *fingerprint;
	char **argv;
	char **env_extra;		/* "NAME=value" */
	enum side_effect side_effects;
	bool idempotent;
	uint32_t timeout_ms;
	struct mcp_override *overrides;	/* the file's "tools" */
	size_t n_overrides;
	struct sandbox_tool sandbox;	/* the file's "sandbox" */
	enum mcp_run_as run_mode;	/* the file's "run_as" */
	struct identity run_as;		/* whom it runs as, when change ("user:NAME", an instance's peer) */
	uint32_t idle_s;		/* an instance per peer stops after so long without calls */
	bool trust_annotations;		/* the server's hints set its tools' side effects */
	struct sandbox_run *run;	/* the running server's sandbox */

	/* Run as each peer (MCP_RUN_PEER, the daemon root): the declaration
	 * holds the tool list and one instance per peer uid, each an
	 * mcp_provider of its own that runs the server. */
	struct mcp_provider *parent;	/* an instance: its declaration */
	struct mcp_provider **inst;
	size_t n_inst;
	uid_t uid;			/* an instance: the peer it runs for */
	struct tc_timer *idle_timer;	/* an instance: stops it when idle */
	uint32_t retry_ms;		/* a failed start is not tried again so soon */
	uint64_t failed_ms;		/* when the last start failed */

	struct tc_loop *loop;
	const struct tool_env *tenv;
	char *cwd;
	void (*on_settled)(void *arg, struct mcp_provider *p);
	void *arg;
	void (*on_log)(void *arg, struct mcp_provider *p, bool warning, const char *line);

	enum mcp_state state;
	char *error;
	bool refused;			/* error: its program was refused (sandbox_program_open) */
	char *last_error;		/* the last failure (start or crash); kept once ready */
	unsigned restarts;		/* spawns after the first */
	unsigned spawns;
	struct child *child;
	int in_fd;
	struct tc_io *in_io;
	struct buf out;			/* to the server */
	struct buf line;		/* from the server, up to a newline */
	bool discarding;		/* dropping the rest of a line too long */
	/* Its stderr: the line being read, the last bytes, the log's budget. */
	struct buf err_line;
	char err_tail[MCP_STDERR_TAIL];
	size_t err_tail_len;
	uint64_t err_window_ms;
	unsigned err_lines;		/* logged in this window */
	unsigned err_dropped;		/* not logged in this window */
	struct buf notes;		/* tools not offered, and why ("; "-joined) */
	size_t import_notes;		/* how much of notes the last tool list made */
	struct tc_timer *import_timer;
	uint64_t next_id;
	uint64_t init_id;
	uint64_t list_id;
	bool initialized;		/* the server answered initialize */
	struct list queued;
	struct list sent;
	/* The imported tools, and the list being read. */
	struct mcp_import *tools;
	size_t n_tools;
	bool imported;
	bool relisted;			/* the last list came after it said its list changed */
	struct mcp_import *next_tools;
	size_t n_next;
};

/* What a registered imported tool points to. */
struct mcp_tool {
	struct mcp_provider *p;
	char *remote;
};

/* mcp.c */
void mcp_imports_free(struct mcp_import *t, size_t n);
/* Notes a tool of the server that is not offered, for the daemon's log. */
void mcp_note(struct mcp_provider *p, const char *fmt, ...) PRINTF(2, 3);
/* The override for an imported tool: the exact name, else the glob with
 * the most literal characters (the first in the file on a tie); NULL. */
const struct mcp_override *mcp_override_for(const struct mcp_provider *p, const char *remote);
/* Tells the daemon an import ended (ready or failed). */
void mcp_settle(struct mcp_provider *p);
/* Frees what the declaration and the provider's state hold; its server is down. */
void mcp_provider_free(struct mcp_provider *p);

/* mcp_protocol.c */
/* Sends a request; returns its id. */
uint64_t mcp_send_request(struct mcp_provider *p, const char *method, void (*params)(struct jgen *g, void *arg),
			  void *arg);
void mcp_send_line(struct mcp_provider *p, const char *line);
/* Sends initialize, the first message to a server just spawned. */
void mcp_send_initialize(struct mcp_provider *p);
/* Sends a queued call (tools/call), moving it to the sent ones. */
void mcp_send_call(struct mcp_provider *p, struct mcp_call *mc);
/*
 * Handles one message (a line) from the server. An answer that ends its
 * start (initialize refused, no tool list while starting) returns -EPROTO
 * with why (to be freed) in *ret_why; anything else 0.
 */
int mcp_on_message(struct mcp_provider *p, const char *line, size_t len, char **ret_why);
/* Ends a waiting call with an outcome already set on its tool_call. */
void mcp_call_end(struct mcp_call *mc);
/* Logs the keys of the file's "tools" that match none of its tools. */
void mcp_warn_unmatched(struct mcp_provider *p);
/* Fails every call that waits, sent or queued, as transient. */
void mcp_calls_fail(struct mcp_provider *p, const char *why);
/* A call of an instance ended or began: its idle time starts again (the
 * timer that stops it is made by mcp_provider_setup()). */
void mcp_instance_touch(struct mcp_provider *inst);

/* mcp_proc.c */
/* The provider that runs calls for ident: p itself when one instance
 * serves every peer, else p's instance for ident's uid (made here, not
 * started). NULL when ident is unknown and p runs as each peer. */
struct mcp_provider *mcp_runner_for(struct mcp_provider *p, const struct identity *ident);
/* True while a failed start is not to be tried again (providers.retry_s). */
bool mcp_start_refused(const struct mcp_provider *p);
/* The server is gone (or being stopped): fail what waits for it. */
void mcp_provider_down(struct mcp_provider *p, const char *why);
/* The start failed: the error (with the last lines of stderr), state FAILED. */
void mcp_import_failed(struct mcp_provider *p, const char *fmt, ...) PRINTF(2, 3);

#endif
