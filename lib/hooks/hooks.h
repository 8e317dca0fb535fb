/* SPDX-License-Identifier: MIT */
/*
 * Call hooks: programs the administrator configures to look at each call
 * before it runs (pre_call: allow, deny, force a confirmation, rewrite the
 * arguments) and after it ends (post_call: told the outcome). A hook is
 * {match: GLOB on the tool name, command: argv, timeout_ms}; it runs as a
 * child of the loop (lib/child/child.h), gets one JSON object on stdin and, for
 * pre_call, may print one JSON object back. Everything a hook prints is
 * bounded; a pre-call hook that fails in any way denies the call (fail
 * closed). Several matching hooks run one after the other, in the order
 * of the config. With the daemon's sandbox config set, each hook runs in
 * the sandbox profile "read-only" without network, as the call's peer.
 */
#ifndef TC_HOOKS_H
#define TC_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct json;
struct json_doc;
struct sandbox_config;
struct identity;
struct tc_loop;

#define HOOK_TIMEOUT_DEFAULT_MS 5000
#define HOOK_OUTPUT_MAX (1024 * 1024)		/* bytes a hook may print */
#define HOOK_POST_TEXT_MAX (64 * 1024)		/* outcome text given to post_call */
#define HOOKS_MAX 64				/* hooks per list */
#define HOOKS_POST_RUNNING_MAX 256		/* post-call runs in flight */

struct hook {
	char *match;			/* glob on the tool name: * ? [...] */
	char **argv;			/* NULL-terminated, argv[0] set */
	uint64_t timeout_ms;
};

struct hooks_config {
	struct hook *pre;
	size_t n_pre;
	struct hook *post;
	size_t n_post;
};

/* Frees what c holds and zeroes it. */
void hooks_config_clear(struct hooks_config *c);
/* True when a hook's glob matches a tool name (no escapes: '\' is literal). */
bool hook_glob_match(const char *pattern, const char *name);

enum hook_decision {
	HOOK_NONE,			/* nothing printed: no opinion */
	HOOK_ALLOW,			/* skip confirmation */
	HOOK_PROMPT,			/* force confirmation */
	HOOK_DENY,
};

/* What pre-call hooks decided. */
struct hook_verdict {
	enum hook_decision decision;
	char *message;			/* deny: the reason, naming the hook */
	struct json_doc *args_doc;	/* new arguments (holds args), or NULL */
	const struct json *args;
	char *rewrote;			/* the hook that gave args, for messages */
};

void hook_verdict_clear(struct hook_verdict *v);
/*
 * Parses what a pre-call hook printed: white space only is HOOK_NONE, else
 * one object {"decision": "allow"|"deny"|"prompt", "reason"?: string,
 * "arguments"?: object} and nothing else. Returns 0 with *ret filled
 * (message: the reason), or -EINVAL with *ret_error saying what is wrong.
 */
int hook_parse_verdict(const char *text, size_t len, struct hook_verdict *ret, char **ret_error);

/* The call, as hooks see it. */
struct hook_input {
	const char *tool;
	const struct json *arguments;
	const char *session_id;
	uid_t uid;
	pid_t pid;
	const char *const *workspaces;	/* the session's roots, the primary first; NULL: none */
	const char *side_effects;
	const char *call_id;
	const struct identity *peer;	/* whom hooks run as (peer->change); NULL: the daemon */
};

/* The outcome, as post-call hooks see it. */
struct hook_outcome {
	const char *kind;
	bool is_error;
	uint64_t duration_ms;
	unsigned attempts;
	const char *text;		/* NULL: none; truncated to HOOK_POST_TEXT_MAX */
	const char *message;		/* NULL: none */
};

struct hooks;
struct hook_run;

/* Done with the pre-call hooks: v is the caller's to clear. The run is
 * already freed. */
typedef void (*hook_pre_done_fn)(void *arg, struct hook_verdict *v);
/* A post-call hook failed (message names it). */
typedef void (*hook_failed_fn)(void *arg, const char *tool, const char *message);

struct hooks *hooks_new(struct tc_loop *loop);
/* Stops every running hook (killing its child). Accepts NULL; returns NULL. */
struct hooks *hooks_free(struct hooks *h);
/* The config stays the caller's; runs in flight keep copies of their hooks. */
void hooks_set_config(struct hooks *h, const struct hooks_config *c);
void hooks_set_failed_cb(struct hooks *h, hook_failed_fn fn, void *arg);
/* The daemon's sandbox config (stays the caller's), or NULL: hooks run
 * unconfined. Read when each hook starts. */
void hooks_set_sandbox(struct hooks *h, const struct sandbox_config *cfg);

/*
 * Starts the pre-call hooks that match in->tool, in order. Returns NULL
 * when none matches (nothing to wait for); otherwise done is called later,
 * from the loop, never from inside this call.
 */
struct hook_run *hooks_pre_start(struct hooks *h, const struct hook_input *in,
				 hook_pre_done_fn done, void *arg);
/* Stops a run without calling its done (the call went away). Accepts
 * NULL; returns NULL. */
struct hook_run *hook_run_cancel(struct hook_run *r);
/* Starts the post-call hooks that match in->tool; nothing is waited for. */
void hooks_post_start(struct hooks *h, const struct hook_input *in, const struct hook_outcome *o);

#endif
