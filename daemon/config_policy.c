/* SPDX-License-Identifier: MIT */
/*
 * The "confirmation" section of the config file: modes per side-effect
 * class and per tool, trusted workspaces and their overrides, and what
 * happens when no approver is connected.
 */
#include "daemon/config_policy.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"
#include "lib/policy/policy.h"

/* Checks a mode string: "auto", "prompt", "deny" or "sandboxed". */
static int want_mode(struct bind *p, const char *key, const struct json *v, enum confirm_mode *ret)
{
	int m;
	int r = bind_want_name(p, key, v, confirm_mode_names, &m);
	if (r < 0)
		return r;
	*ret = (enum confirm_mode)m;
	return 0;
}

/* The side-effect class a key names, or a located error. */
static int want_class(struct bind *p, const char *key, const struct json_member *m, int *ret)
{
	int cls = bind_key_plain(m) ? side_effect_from_name(m->key) : -1;
	if (cls < 0)
		return bind_fail(p, bind_key_offset(p, m->value), key,
			    "unknown side-effect class (expected none, read, write, execute or network)");
	*ret = cls;
	return 0;
}

static const char *const no_approver_names[] = { "deny", "wait", NULL };

/* One class: mode into the modes of arg (has[] set beside). */
struct class_modes {
	enum confirm_mode *mode;
	bool *has;
};

static int class_mode(struct bind *p, const char *key, const struct json_member *m, size_t i, void *arg)
{
	struct class_modes *cm = arg;
	int cls = 0;
	int r = want_class(p, key, m, &cls);
	if (r == 0)
		r = want_mode(p, key, m->value, &cm->mode[cls]);
	if (r == 0 && cm->has)
		cm->has[cls] = true;
	return r;
}

/* "confirmation.default": { class: mode }, merged with the defaults. */
static int parse_confirm_default(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	struct class_modes cm = { .mode = c->confirmation.by_class };
	return bind_members(p, key, v, 0, class_mode, &cm);
}

/* "confirmation.trusted_workspace_overrides": { class: mode }, replacing
 * the default overrides. */
static int parse_trusted_overrides(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	bool has[SIDE_MAX] = {};
	enum confirm_mode mode[SIDE_MAX] = {};
	struct class_modes cm = { .mode = mode, .has = has };
	int r = bind_members(p, key, v, 0, class_mode, &cm);
	if (r < 0)
		return r;
	memcpy(c->confirmation.has_override, has, sizeof(has));
	memcpy(c->confirmation.trusted_override, mode, sizeof(mode));
	return 0;
}

/* One "tool": mode of confirmation.per_tool. */
static int tool_mode(struct bind *p, const char *key, const struct json_member *m, size_t i, void *arg)
{
	struct policy_tool_mode *modes = arg;
	if (!bind_key_plain(m))
		return bind_fail(p, bind_key_offset(p, m->value), key, "expected a tool name");
	int r = want_mode(p, key, m->value, &modes[i].mode);
	if (r == 0)
		modes[i].name = xstrdup(m->key);
	return r;
}

/* "confirmation.per_tool": { "tool": mode }. */
static int parse_per_tool_mode(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	size_t n = v->type == JSON_OBJECT ? v->u.obj.n : 0;
	struct policy_tool_mode *modes = xcalloc(n ? n : 1, sizeof(*modes));
	int r = bind_members(p, key, v, 0, tool_mode, modes);
	if (r < 0) {
		for (size_t j = 0; j < n; j++)
			free(modes[j].name);
		free(modes);
		return r;
	}
	struct policy_config *pc = &c->confirmation;
	for (size_t i = 0; i < pc->n_per_tool; i++)
		free(pc->per_tool[i].name);
	free(pc->per_tool);
	pc->per_tool = modes;
	pc->n_per_tool = n;
	return 0;
}

/* "confirmation.trusted_workspaces": paths, made canonical when they exist
 * so they compare equal to the canonical roots of sessions. */
static int parse_trusted(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	char **strv;
	size_t n;
	int r = bind_want_strv(p, key, v, true, &strv, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		char *real = realpath(strv[i], NULL);
		if (real) {
			free(strv[i]);
			strv[i] = real;
		}
	}
	struct policy_config *pc = &c->confirmation;
	bind_strv_free(pc->trusted_workspaces, pc->n_trusted);
	pc->trusted_workspaces = strv;
	pc->n_trusted = n;
	return 0;
}

const struct bind_field config_confirmation_fields[] = {
	U64("timeout_ms", confirmation.timeout_ms, 1, MS_MAX),
	B_NAME(struct config, "no_approver", confirmation.no_approver_wait, no_approver_names),
	CUSTOM("default", parse_confirm_default),
	CUSTOM("per_tool", parse_per_tool_mode),
	CUSTOM("trusted_workspaces", parse_trusted),
	CUSTOM("trusted_workspace_overrides", parse_trusted_overrides),
	{},
};
