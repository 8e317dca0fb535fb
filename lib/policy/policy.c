/* SPDX-License-Identifier: MIT */
/*
 * The confirmation policy: defaults, the mode names of the config file, and
 * the decision for one call ("sandboxed" settled by what the tool runs under).
 * "per_tool" keys are names or globs (fnmatch(3): * ? [...]).
 */
#include "lib/policy/policy.h"

#include <fnmatch.h>
#include <string.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/identity.h"
#include "lib/sandbox/sandbox.h"
#include "lib/tool.h"
#include "proto/json.h"

const char *const confirm_mode_names[CONFIRM_MODE_MAX + 1] = {
	[CONFIRM_AUTO] = "auto",
	[CONFIRM_PROMPT] = "prompt",
	[CONFIRM_DENY] = "deny",
	[CONFIRM_SANDBOXED] = "sandboxed",
	NULL,
};

const char *confirm_mode_name(enum confirm_mode m)
{
	return (unsigned)m < CONFIRM_MODE_MAX ? confirm_mode_names[m] : "?";
}

int confirm_mode_from_name(const char *s)
{
	for (int i = 0; i < CONFIRM_MODE_MAX; i++)
		if (s && strcmp(confirm_mode_names[i], s) == 0)
			return i;
	return -1;
}

void policy_config_init(struct policy_config *p)
{
	*p = (struct policy_config) {
		.by_class = {
			[SIDE_NONE] = CONFIRM_AUTO,
			[SIDE_READ] = CONFIRM_AUTO,
			[SIDE_WRITE] = CONFIRM_PROMPT,
			[SIDE_EXECUTE] = CONFIRM_PROMPT,
			[SIDE_NETWORK] = CONFIRM_PROMPT,
		},
		/* The contract's example: a trusted workspace may write without
		 * asking, but running commands still asks. */
		.has_override = { [SIDE_WRITE] = true, [SIDE_EXECUTE] = true },
		.trusted_override = {
			[SIDE_WRITE] = CONFIRM_AUTO,
			[SIDE_EXECUTE] = CONFIRM_PROMPT,
		},
		.timeout_ms = POLICY_CONFIRM_TIMEOUT_MS,
		.no_approver_wait = false,
	};
}

void policy_config_free(struct policy_config *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_per_tool; i++)
		free(p->per_tool[i].name);
	free(p->per_tool);
	p->per_tool = NULL;
	p->n_per_tool = 0;
	for (size_t i = 0; i < p->n_trusted; i++)
		free(p->trusted_workspaces[i]);
	free(p->trusted_workspaces);
	p->trusted_workspaces = NULL;
	p->n_trusted = 0;
}

/* True when path is dir or lies beneath it (both canonical, no trailing "/"). */
static bool path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	/* "/" holds everything; otherwise a prefix must end at a component
	 * boundary, so "/ws-evil" is not beneath "/ws". */
	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	while (n > 1 && dir[n - 1] == '/')
		n--;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool policy_workspace_trusted(const struct policy_config *p, const char *root)
{
	if (!root)
		return false;
	for (size_t i = 0; i < p->n_trusted; i++)
		if (path_within(root, p->trusted_workspaces[i]))
			return true;
	return false;
}

bool policy_key_is_glob(const char *key)
{
	return strpbrk(key, "*?[") != NULL;
}

bool policy_key_matches(const char *key, const char *name)
{
	return policy_key_is_glob(key) ? fnmatch(key, name, 0) == 0 : strcmp(key, name) == 0;
}

size_t policy_key_literal(const char *glob)
{
	size_t n = 0;
	for (const char *c = glob; *c; c++)
		n += *c != '*' && *c != '?' && *c != '[';
	return n;
}

const struct policy_tool_mode *policy_per_tool(const struct policy_config *p, const char *tool_name)
{
	const struct policy_tool_mode *best = NULL;
	size_t best_literal = 0;
	for (size_t i = 0; tool_name && i < p->n_per_tool; i++) {
		const char *key = p->per_tool[i].name;
		if (!policy_key_is_glob(key)) {
			if (strcmp(key, tool_name) == 0)
				return &p->per_tool[i];
			continue;
		}
		size_t lit = policy_key_literal(key);
		if (fnmatch(key, tool_name, 0) == 0 && (!best || lit > best_literal)) {
			best = &p->per_tool[i];
			best_literal = lit;
		}
	}
	return best;
}

enum confirm_mode policy_decide(const struct policy_config *p, const char *tool_name,
				enum side_effect cls, const char *workspace_root)
{
	const struct policy_tool_mode *pt = policy_per_tool(p, tool_name);
	if (pt)
		return pt->mode;
	/* The memory tool reaches nothing but the peer's own memory
	 * directory: it runs at once unless per_tool says otherwise. */
	if (strcmp(tool_name, "memory") == 0)
		return CONFIRM_AUTO;

	/* An unknown class is treated as the most dangerous one. */
	if ((unsigned)cls >= SIDE_MAX)
		cls = SIDE_NETWORK;

	if (p->has_override[cls] && policy_workspace_trusted(p, workspace_root))
		return p->trusted_override[cls];
	return p->by_class[cls];
}

const char *policy_sandbox_profile(const struct tool *t, const struct sandbox_config *sb, bool *ret_network)
{
	if (!t || !t->def->runs_children)
		return NULL;
	struct sandbox_req req;
	sandbox_req_init(&req, sb, t->name, t->side_effects == SIDE_NETWORK, t->sandbox);
	if (ret_network)
		*ret_network = req.network;
	return sandbox_profile_name(req.profile);
}

enum confirm_mode policy_settle_sandboxed(enum confirm_mode m, const struct tool *t, const struct sandbox_config *sb)
{
	if (m != CONFIRM_SANDBOXED)
		return m;
	/* Tools that start no process act beneath the workspace through the
	 * kernel's confined lookups, with no network: confined already. */
	bool network = false;
	const char *profile = policy_sandbox_profile(t, sb, &network);
	if (!profile)
		return t && t->side_effects < SIDE_NETWORK ? CONFIRM_AUTO : CONFIRM_PROMPT;
	return strcmp(profile, "off") != 0 && !network ? CONFIRM_AUTO : CONFIRM_PROMPT;
}

struct protected_probe {
	const struct tool *t;
	const struct json *args;
	const struct workspace *ws;
	const char *const *protect;
};

/* With the rights of the thread: 1 when a path argument touches a protected path. */
static int probe_protected(void *arg)
{
	const struct protected_probe *p = arg;
	for (const char *const *pa = p->t->def->path_args; pa && *pa; pa++) {
		const struct json *v = json_get(p->args, *pa);
		if (!v || v->type != JSON_STRING)
			continue;
		/* Whatever the tool does with it: its content, or the path
		 * taken away with all it holds. */
		if (fsjob_protected_in(p->ws, p->protect, v->u.str.s, v->u.str.len, FSJOB_WRITE) ||
		    fsjob_protected_in(p->ws, p->protect, v->u.str.s, v->u.str.len, FSJOB_TAKE))
			return 1;
	}
	return 0;
}

bool policy_writes_protected(const struct tool *t, const struct json *args, const struct workspace *ws,
			     const struct sandbox_config *sb, const struct identity *id)
{
	if (!t || !sb || !ws || t->side_effects < SIDE_WRITE || !t->def->path_args || !sb->protect || !*sb->protect)
		return false;
	struct protected_probe p = { t, args, ws, (const char *const *)sb->protect };
	/* Looked at as the call will act: what the peer cannot see tells
	 * nothing (an identity that cannot be taken counts as protected:
	 * the call is asked). */
	int r = id && id->change ? identity_run(id, probe_protected, &p) : probe_protected(&p);
	return r != 0;
}
