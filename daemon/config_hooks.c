/* SPDX-License-Identifier: MIT */
/*
 * The "hooks" section of the config file: "pre_call" and "post_call", each
 * a list of {match: GLOB, command: [argv], timeout_ms}. A command's first
 * word with a '/' in it is resolved against the file's directory; a bare
 * name is looked up in the hook's PATH.
 */
#include "daemon/config_hooks.h"

#include <string.h>

#include "daemon/config.h"
#include "lib/hooks/hooks.h"

/* Checks one {match, command, timeout_ms} into h. */
static int want_hook(struct cfg_parse *p, const char *key, const struct json *v, struct hook *h)
{
	int r = cfg_want_object(p, key, v);
	if (r < 0)
		return r;
	const struct json *match = NULL, *command = NULL;
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = cfg_key_path(key, m);
		if (cfg_key_is(m, "match"))
			match = m->value;
		else if (cfg_key_is(m, "command"))
			command = m->value;
		else if (cfg_key_is(m, "timeout_ms")) {
			r = cfg_want_uint(p, k, m->value, 1, MS_MAX, &h->timeout_ms);
			if (r < 0)
				return r;
		} else
			return cfg_fail(p, cfg_key_offset(p, m->value), k,
					"unknown key (expected match, command, timeout_ms)");
	}
	if (!command)
		return cfg_fail(p, v->off, key, "\"command\" is required");
	const char *s = "*";
	if (match) {
		_cleanup_free_ char *k = xasprintf("%s.match", key);
		r = cfg_want_string(p, k, match, &s);
		if (r < 0)
			return r;
	}
	h->match = xstrdup(s);
	_cleanup_free_ char *k = xasprintf("%s.command", key);
	size_t n = 0;
	r = cfg_want_strv(p, k, command, false, &h->argv, &n);
	if (r < 0)
		return r;
	if (n == 0)
		return cfg_fail(p, command->off, k, "expected the program and its arguments, got []");
	if (strchr(h->argv[0], '/')) {
		char *abs = config_resolve_path(p->base_dir, h->argv[0]);
		free(h->argv[0]);
		h->argv[0] = abs;
	}
	return 0;
}

/* Checks a list of hooks, replacing *list. */
static int want_hooks(struct cfg_parse *p, const char *key, const struct json *v,
		      struct hook **list, size_t *n)
{
	if (v->type != JSON_ARRAY)
		return cfg_fail(p, v->off, key, "expected an array of hooks, got %s", cfg_got(v));
	if (v->u.arr.n > HOOKS_MAX)
		return cfg_fail(p, v->off, key, "at most %d hooks", HOOKS_MAX);
	struct hooks_config tmp = {0};
	tmp.pre = xcalloc(v->u.arr.n + 1, sizeof(struct hook));
	for (size_t i = 0; i < v->u.arr.n; i++) {
		_cleanup_free_ char *k = xasprintf("%s[%zu]", key, i);
		tmp.n_pre = i + 1;
		int r = want_hook(p, k, v->u.arr.items[i], &tmp.pre[i]);
		if (r < 0) {
			hooks_config_clear(&tmp);
			return r;
		}
	}
	/* The old list goes through the same destructor. */
	struct hooks_config old = { .pre = *list, .n_pre = *n };
	hooks_config_clear(&old);
	*list = tmp.pre;
	*n = tmp.n_pre;
	return 0;
}

static int parse_pre_call(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	return want_hooks(p, key, v, &c->hooks.pre, &c->hooks.n_pre);
}

static int parse_post_call(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	return want_hooks(p, key, v, &c->hooks.post, &c->hooks.n_post);
}

const struct field config_hooks_fields[] = {
	CUSTOM("pre_call", parse_pre_call),
	CUSTOM("post_call", parse_post_call),
	{},
};
