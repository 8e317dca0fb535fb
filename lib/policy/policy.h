/* SPDX-License-Identifier: MIT */
/*
 * The confirmation policy (contract §7): for each call, whether it runs at
 * once (auto), waits for an approver (prompt) or is refused (deny). The
 * decision depends on the tool's name, its side-effect class and the
 * session's workspace root; mode "sandboxed" runs a call at once when it
 * will run sandboxed without network and asks otherwise, which is the
 * setting for an autonomous loop with nobody to approve. The daemon fills a struct policy_config from the
 * "confirmation" section of its config file; the dispatcher asks
 * policy_decide() before every call.
 */
#ifndef TC_POLICY_H
#define TC_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/tool.h"

struct identity;
struct sandbox_config;

enum confirm_mode {
	CONFIRM_AUTO,
	CONFIRM_PROMPT,
	CONFIRM_DENY,
	CONFIRM_SANDBOXED,	/* auto when sandboxed without network, else prompt */
	CONFIRM_MODE_MAX,
};

/* One "per_tool" entry: { "git_status": "auto" } or { "fs_read_*": "auto" }. */
struct policy_tool_mode {
	char *name;
	enum confirm_mode mode;
};

struct policy_config {
	/* "default": the mode of each side-effect class. */
	enum confirm_mode by_class[SIDE_MAX];
	/* "per_tool": wins over everything else. */
	struct policy_tool_mode *per_tool;
	size_t n_per_tool;
	/* "trusted_workspaces": canonical absolute paths (resolved at load). */
	char **trusted_workspaces;
	size_t n_trusted;
	/* "trusted_workspace_overrides": modes of the classes it names, applied
	 * when the session's root is, or lies beneath, a trusted workspace. */
	bool has_override[SIDE_MAX];
	enum confirm_mode trusted_override[SIDE_MAX];
	/* "timeout_ms": how long a prompt waits for an answer. */
	uint64_t timeout_ms;
	/* "no_approver": "wait" (true) or "deny" (false) when nobody listens. */
	bool no_approver_wait;
};

/* confirmation.timeout_ms when the config does not say: five minutes. */
#define POLICY_CONFIRM_TIMEOUT_MS 300000

/* Fills p with the contract's defaults (write, execute, network prompt). */
void policy_config_init(struct policy_config *p);
/* Frees what p holds and leaves it empty (not re-initialised). */
void policy_config_free(struct policy_config *p);

/* "auto", "prompt", "deny", "sandboxed". */
const char *confirm_mode_name(enum confirm_mode m);
/* Returns the mode named s, or -1. */
int confirm_mode_from_name(const char *s);
/* The modes' names by enum confirm_mode, NULL-terminated. */
extern const char *const confirm_mode_names[];

/* True when a per_tool key is a glob (holds * ? or [). */
bool policy_key_is_glob(const char *key);
/* True when a per_tool key (a name or a glob) matches a tool name. */
bool policy_key_matches(const char *key, const char *name);
/* The characters of a key that are not wildcards: among globs that match,
 * the one with the most is the most specific. */
size_t policy_key_literal(const char *key);
/*
 * The per_tool entry for a tool: the entry of its exact name, else the
 * matching glob with the most characters that are not wildcards (the first
 * in the file on a tie), else NULL.
 */
const struct policy_tool_mode *policy_per_tool(const struct policy_config *p, const char *tool_name);

/* True when root equals a trusted workspace or lies beneath one. */
bool policy_workspace_trusted(const struct policy_config *p, const char *root);

/*
 * Decides how a call of tool_name (of class cls) in a session rooted at
 * workspace_root (canonical; may be NULL) is confirmed. Precedence: a
 * per_tool entry (policy_per_tool()), then the trusted-workspace override of the class, then
 * the default of the class.
 */
enum confirm_mode policy_decide(const struct policy_config *p, const char *tool_name,
				enum side_effect cls, const char *workspace_root);

/* Settles mode "sandboxed" for tool t: auto when its calls run sandboxed
 * without network, prompt otherwise. Other modes are returned as they are. */
enum confirm_mode policy_settle_sandboxed(enum confirm_mode m, const struct tool *t, const struct sandbox_config *sb);
/* True when a call of t with args may write a protected path of ws
 * (sandbox.protect in sb; a path argument of a tool that writes, as the
 * kernel resolves it now, with id's rights when id->change):
 * "sandboxed" never lets such a call run unasked, though the tool refuses
 * it anyway. */
bool policy_writes_protected(const struct tool *t, const struct json *args, const struct workspace *ws,
			     const struct sandbox_config *sb, const struct identity *id);
/* The sandbox profile a tool's processes run under ("workspace-write",
 * "read-only", "off"; *ret_network whether they have network), or NULL for
 * a tool that starts none. sb NULL: unconfined. */
const char *policy_sandbox_profile(const struct tool *t, const struct sandbox_config *sb, bool *ret_network);

#endif
