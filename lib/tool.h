/* SPDX-License-Identifier: MIT */
/*
 * What a tool is. A tool_def is the code of a tool (each built-in exports one
 * const struct tool_def from its own file under tools/; the "command" and
 * "mcp" kinds export one each and are instantiated from tool files). A
 * struct tool is one registered, named tool: a definition plus its compiled
 * schema and settings, immutable and refcounted, so calls in flight keep the
 * definition they started with across a reload. A struct tool_call is one
 * attempt of one tool, handed to the tool's exec; the tool reports how it
 * ended through tool_call_succeed()/tool_call_fail(), and async tools end
 * with tool_call_finish().
 *
 * Tool bodies assume valid input: the dispatcher has validated the arguments
 * against the schema before exec runs.
 */
#ifndef TC_TOOL_H
#define TC_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "lib/errors.h"
#include "proto/base/util.h"

struct fsjob;
struct identity;
struct iopool;
struct json;
struct process_table;
struct sandbox_config;
struct sandbox_tool;
struct schema;
struct session;
struct tc_loop;
struct tool_call;
struct workspace;

/* Side-effect classes, ordered: a tool declares its highest. */
enum side_effect {
	SIDE_NONE,
	SIDE_READ,
	SIDE_WRITE,
	SIDE_EXECUTE,
	SIDE_NETWORK,
	SIDE_MAX,
};

const char *side_effect_name(enum side_effect s);
/* Returns the class named s ("write"), or -1. */
int side_effect_from_name(const char *s);
/* The classes' names by enum side_effect, NULL-terminated. */
extern const char *const side_effect_names[];

enum tool_ret {
	TOOL_DONE = 0,		/* the outcome is set */
	TOOL_PENDING = 1,	/* tool_call_finish() will follow */
};

struct tool_def {
	const char *name;
	const char *description;
	const char *input_schema;	/* JSON text */
	enum side_effect side_effects;
	bool idempotent;
	uint32_t timeout_ms;		/* 0: 60 s, or 600 s for execute and network */
	/* Arguments that name paths beneath the workspace (NULL-terminated):
	 * checked before confirmation and shown as the files a call touches. */
	const char *const *path_args;
	/* The "timeout_ms" argument, when given, sets the attempt's timeout. */
	bool timeout_arg;
	/* Its execution_error is the tool's own sickness (a program or server
	 * that fails), not the caller's mistake (a file that is missing): it
	 * counts toward the circuit breaker. */
	bool errors_trip_circuit;
	/* Runs one attempt. */
	enum tool_ret (*exec)(struct tool_call *call);
	/* Asks a pending attempt to stop (timeout, cancel); the tool still
	 * calls tool_call_finish() once it has stopped. */
	void (*cancel)(struct tool_call *call);
	/* Optional: the output a pending attempt has produced so far, as text
	 * for the model (owned), or NULL: a call that times out or is
	 * cancelled keeps it in its error. */
	char *(*partial)(struct tool_call *call);
	/* Optional: what a call with these (validated) arguments would change,
	 * as a unified diff (owned text), for its confirmation request; NULL
	 * when there is nothing to show or the call would fail. Reads only,
	 * bounded (TOOL_PREVIEW_MAX bytes). Made through fsjob_preview(),
	 * with the rights the call will have; it reaches files through the
	 * job (lib/fsjob/fsjob.h). */
	char *(*preview)(const struct json *args, const struct fsjob *job);
	/* Kinds only: frees struct tool's priv. */
	void (*priv_free)(void *priv);
	/* Runs child processes (in a sandbox: see lib/sandbox/sandbox.h). */
	bool runs_children;
};

/* The most a preview holds; a longer diff is cut with a note. */
#define TOOL_PREVIEW_MAX ((size_t)64 << 10)

/* One registered tool. */
struct tool {
	unsigned refs;
	char *name;
	char *description;
	char *input_schema;		/* JSON text of the schema */
	struct schema *schema;		/* compiled */
	enum side_effect side_effects;
	bool idempotent;
	uint32_t timeout_ms;		/* resolved: never 0 */
	unsigned max_attempts;		/* 0: the configured default */
	unsigned concurrency;		/* 0: no per-tool cap */
	char *fingerprint;		/* canonical declaration, to tell what a reload changed */
	char *source;			/* "built-in" or the tool file's path */
	const struct tool_def *def;
	void *priv;			/* the kind's per-tool data */
	const struct sandbox_tool *sandbox;	/* its file's "sandbox" (in priv), or NULL */
	/* An MCP provider's readOnlyHint and destructiveHint, shown in
	 * tools/list as it gave them; TOOL_HINT_NONE: from side_effects. */
	enum tool_hint { TOOL_HINT_NONE, TOOL_HINT_FALSE, TOOL_HINT_TRUE } read_only_hint, destructive_hint;
};

/*
 * Makes a tool from a definition: compiles the schema (an unsupported
 * keyword or a bad schema fails with -EINVAL and a message in *ret_err).
 */
int tool_new(const struct tool_def *def, const char *name, const char *description,
	     const char *input_schema, void *priv, struct tool **ret, char **ret_err);
struct tool *tool_ref(struct tool *t);
struct tool *tool_unref(struct tool *t);
/* The timeout a tool gets by default for its class. */
uint32_t tool_default_timeout(enum side_effect s);
/* True for a valid tool name: 1 to TOOL_NAME_MAX characters of A-Z a-z 0-9
 * _ - . (as MCP advises). */
#define TOOL_NAME_MAX 128
bool tool_name_valid(const char *s, size_t n);
/* What a tool or provider file may ask for: a timeout of at most a day,
 * at most so many attempts. */
#define TOOL_TIMEOUT_MAX_MS 86400000
#define TOOL_ATTEMPTS_MAX 10

/* Settings the daemon hands every call (from the config). */
struct tool_env {
	const char *const *shell_env_allow;	/* NULL-terminated names */
	size_t output_cap;			/* bytes kept per output stream */
	size_t read_cap;			/* read_file's default limit for base64 */
	size_t read_lines;			/* read_file's default window: lines, */
	size_t read_bytes;			/* and bytes of text (0: the defaults) */
	size_t shell_text_cap;			/* shell output shown in the text (0: 64 KiB) */
	struct iopool *pool;			/* runs blocking file work off the loop; may be NULL */
	const struct sandbox_config *sandbox;	/* NULL: children unconfined */
	/* The memory tool (memory.* in the config); 0 sizes: 64 KiB, 1 MiB. */
	const char *memory_dir;			/* NULL: no memory in files */
	bool memory_per_workspace;		/* memory.scope "workspace" */
	size_t memory_max_file, memory_max_total;	/* bytes */
	const char *memory_redis;		/* the Redis store's address: memory kept there; NULL: in files */
	const char *memory_redis_prefix;
	uint32_t memory_redis_timeout_ms;
	uid_t memory_redis_uid;			/* store.server_uid (0 or (uid_t)-1: none) */
	struct process_table *processes;	/* background processes (lib/process/); may be NULL */
};

struct tool_call {
	/* Inputs, valid for the whole attempt. */
	const struct tool *tool;
	const struct json *args;	/* validated object */
	struct workspace *ws;
	struct tc_loop *loop;
	const struct tool_env *env;
	const char *call_id;
	/* Who asked (the session's peer), NULL when unknown: children run as
	 * it and file tools act as it (lib/fsjob/fsjob.h) when ident->change. */
	const struct identity *ident;
	/* The session that asked, or NULL (tests): whose uid owns the
	 * processes it starts, and whose read positions it moves. */
	const struct session *session;
	void *state;			/* the tool's own per-attempt state */

	/* Set by whoever runs the call (the dispatcher, or a test). */
	void (*on_finish)(struct tool_call *c);
	void (*on_output)(struct tool_call *c, const char *stream, const char *data, size_t n);
	void (*release_slot)(struct tool_call *c);	/* may be NULL */
	void (*acts)(struct tool_call *c);		/* may be NULL */
	void *owner;

	/* The outcome. */
	bool done;
	enum tc_kind kind;		/* TC_OK on success */
	bool is_error;			/* success of the dispatch, failure of the tool (exit != 0) */
	char *text;			/* content[0].text */
	char *text_json;		/* optional: text already as a JSON string literal */
	char *structured;		/* structuredContent: JSON object text */
	char *content;			/* optional: the content array (JSON text) in place of
					 * the text item (images: tool_call_set_content()) */
	char *message;			/* on failure: for the model to read */
	bool refused;			/* on failure: refused before acting (a path the workspace
					 * check refuses): not counted as an attempt */
	bool may_refuse;		/* pending, it may still be refused so (a file job's
					 * path check): the attempt is told to subscribers
					 * only once it is known to count (fsjob_start) */
	char *error_data;		/* on failure: extra members of data, JSON object text */
	char *meta;			/* optional: the tool's own members of the result's _meta
					 * (JSON object text; an MCP provider's) */

	/* What it touched, for the audit log. */
	char **files;
	size_t n_files;
	char *command;
};

/* Sets the content array of a success (JSON array text, owned) in place of
 * the one text item: images ({type: "image", data, mimeType}). */
void tool_call_set_content(struct tool_call *c, char *content);
/* Sets the tool's own members of a success's _meta (JSON object text, owned). */
void tool_call_set_meta(struct tool_call *c, char *meta);
/* Success: takes ownership of text and structured (either may be NULL). */
void tool_call_succeed(struct tool_call *c, char *text, char *structured, bool is_error);
/* Gives the text of a success also as a JSON string literal (quotes
 * included, owned), when the tool has it anyway: the answer then embeds
 * it instead of escaping the text a second time. */
void tool_call_set_text_json(struct tool_call *c, char *literal);
/* Failure with a kind and a message written for the model. */
void tool_call_fail(struct tool_call *c, enum tc_kind kind, const char *fmt, ...) PRINTF(3, 4);
/* Failure with extra members for data (JSON object text, owned). */
void tool_call_fail_data(struct tool_call *c, enum tc_kind kind, char *data, const char *fmt, ...) PRINTF(4, 5);
/* validation_error for the argument arg (a top-level name; NULL: the
 * arguments as a whole): the message reads "Invalid arguments for
 * 'tool': /arg: what", and data.errors holds {path: "/arg", message: what}. */
void tool_call_invalid(struct tool_call *c, const char *arg, const char *fmt, ...) PRINTF(3, 4);
/* The same, with the message as written (a sentence of its own). */
void tool_call_invalid_msg(struct tool_call *c, const char *arg, const char *fmt, ...) PRINTF(3, 4);
/* Async tools: the outcome is set; calls on_finish. */
void tool_call_finish(struct tool_call *c);
/* A pending call that only waits from now on (a timer, another
 * process's output) gives its execution slot back. */
void tool_call_release_slot(struct tool_call *c);
/* The tool acts now, before it tells anyone of it (a background process
 * started, before its process.started): the attempt is told first. */
void tool_call_acts(struct tool_call *c);
/* Streams output while running (stream: "stdout" or "stderr"). */
void tool_call_output(struct tool_call *c, const char *stream, const char *data, size_t n);
void tool_call_note_file(struct tool_call *c, const char *path);
void tool_call_note_command(struct tool_call *c, const char *command);
/* Frees what the outcome holds (not the struct itself). */
void tool_call_clear(struct tool_call *c);

#endif
