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
static int want_mode(struct cfg_parse *p, const char *key, const struct json *v, enum confirm_mode *ret)
{
	int m = confirm_mode_from_name(json_str(v));
	if (m < 0 || strlen(v->u.str.s) != v->u.str.len) {
		if (v->type != JSON_STRING)
			return cfg_fail(p, v->off, key, "expected \"auto\", \"prompt\", \"deny\" or \"sandboxed\", got %s", cfg_got(v));
		return cfg_fail(p, v->off, key, "expected \"auto\", \"prompt\", \"deny\" or \"sandboxed\"");
	}
	*ret = (enum confirm_mode)m;
	return 0;
}

/* The side-effect class a key names, or a located error. */
static int want_class(struct cfg_parse *p, const char *key, const struct json_member *m, int *ret)
{
	int cls = cfg_key_plain(m) ? side_effect_from_name(m->key) : -1;
	if (cls < 0)
		return cfg_fail(p, cfg_key_offset(p, m->value), key,
			    "unknown side-effect class (expected none, read, write, execute or network)");
	*ret = cls;
	return 0;
}

/* "confirmation.no_approver": "deny" or "wait". */
static int parse_no_approver(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	const char *s = json_str(v);
	if (s && strlen(s) == v->u.str.len && (str_eq(s, "deny") || str_eq(s, "wait"))) {
		c->confirmation.no_approver_wait = str_eq(s, "wait");
		return 0;
	}
	return cfg_fail(p, v->off, key, "expected \"deny\" or \"wait\"%s%s", s ? "" : ", got ", s ? "" : cfg_got(v));
}

/* "confirmation.default": { class: mode }, merged with the defaults. */
static int parse_confirm_default(struct cfg_parse *p, const char *key, const struct json *v,
				 struct config *c)
{
	int r = cfg_want_object(p, key, v);
	if (r < 0)
		return r;
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = cfg_key_path(key, m);
		int cls = 0;
		r = want_class(p, k, m, &cls);
		if (r < 0)
			return r;
		r = want_mode(p, k, m->value, &c->confirmation.by_class[cls]);
		if (r < 0)
			return r;
	}
	return 0;
}

/* "confirmation.trusted_workspace_overrides": { class: mode }, replacing
 * the default overrides. */
static int parse_trusted_overrides(struct cfg_parse *p, const char *key, const struct json *v,
				   struct config *c)
{
	int r = cfg_want_object(p, key, v);
	if (r < 0)
		return r;

	bool has[SIDE_MAX] = {};
	enum confirm_mode mode[SIDE_MAX] = {};
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = cfg_key_path(key, m);
		int cls = 0;
		r = want_class(p, k, m, &cls);
		if (r < 0)
			return r;
		r = want_mode(p, k, m->value, &mode[cls]);
		if (r < 0)
			return r;
		has[cls] = true;
	}
	memcpy(c->confirmation.has_override, has, sizeof(has));
	memcpy(c->confirmation.trusted_override, mode, sizeof(mode));
	return 0;
}

/* "confirmation.per_tool": { "tool": mode }. */
static int parse_per_tool_mode(struct cfg_parse *p, const char *key, const struct json *v,
			       struct config *c)
{
	int r = cfg_want_object(p, key, v);
	if (r < 0)
		return r;

	size_t n = v->u.obj.n;
	struct policy_tool_mode *modes = xcalloc(n ? n : 1, sizeof(*modes));
	for (size_t i = 0; i < n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = cfg_key_path(key, m);
		if (!cfg_key_plain(m))
			r = cfg_fail(p, cfg_key_offset(p, m->value), k, "expected a tool name");
		else
			r = want_mode(p, k, m->value, &modes[i].mode);
		if (r < 0) {
			for (size_t j = 0; j < i; j++)
				free(modes[j].name);
			free(modes);
			return r;
		}
		modes[i].name = xstrdup(m->key);
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
static int parse_trusted(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	char **strv;
	size_t n;
	int r = cfg_want_strv(p, key, v, true, &strv, &n);
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
	cfg_strv_free(pc->trusted_workspaces, pc->n_trusted);
	pc->trusted_workspaces = strv;
	pc->n_trusted = n;
	return 0;
}

const struct field config_confirmation_fields[] = {
	U64("timeout_ms", confirmation.timeout_ms, 1, MS_MAX),
	CUSTOM("no_approver", parse_no_approver),
	CUSTOM("default", parse_confirm_default),
	CUSTOM("per_tool", parse_per_tool_mode),
	CUSTOM("trusted_workspaces", parse_trusted),
	CUSTOM("trusted_workspace_overrides", parse_trusted_overrides),
	{},
};
