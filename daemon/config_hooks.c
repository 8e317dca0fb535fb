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
#include "proto/base/strv.h"

/* "command": the program and its arguments; a program with a '/' in it
 * is resolved against the file's directory. */
static int parse_command(struct bind *p, const char *key, const struct json *v, void *at)
{
	char **argv;
	size_t n = 0;
	int r = bind_want_strv(p, key, v, false, &argv, &n);
	if (r < 0)
		return r;
	if (n == 0) {
		bind_strv_free(argv, n);
		return bind_fail(p, v->off, key, "expected the program and its arguments, got []");
	}
	if (strchr(argv[0], '/')) {
		char *abs = bind_resolve_path(p->base_dir, argv[0]);
		free(argv[0]);
		argv[0] = abs;
	}
	strv_free(*(char ***)at);
	*(char ***)at = argv;
	return 0;
}

static const struct bind_field hook_fields[] = {
	B_STRING(struct hook, "match", match, 1, 0),
	{ .key = "command", .kind = BIND_CUSTOM, .required = true, .off = offsetof(struct hook, argv),
	  .parse = parse_command },
	B_U64(struct hook, "timeout_ms", timeout_ms, 1, MS_MAX),
	{},
};

/* Checks a list of hooks, replacing *list. */
static int want_hooks(struct bind *p, const char *key, const struct json *v,
		      struct hook **list, size_t *n)
{
	if (v->type != JSON_ARRAY)
		return bind_fail(p, v->off, key, "expected an array of hooks, got %s", bind_got(v));
	if (v->u.arr.n > HOOKS_MAX)
		return bind_fail(p, v->off, key, "at most %d hooks", HOOKS_MAX);
	struct hooks_config tmp = {0};
	tmp.pre = xcalloc(v->u.arr.n + 1, sizeof(struct hook));
	tmp.n_pre = v->u.arr.n;
	int r = 0;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		_cleanup_free_ char *k = bind_index_path(key, i);
		tmp.pre[i].match = xstrdup("*");
		if (bind_object(p, k, v->u.arr.items[i], hook_fields, "unknown key (expected match, command, timeout_ms)",
				&tmp.pre[i]) < 0)
			r = -EINVAL;	/* the next hook may be wrong too */
	}
	if (r < 0) {
		hooks_config_clear(&tmp);
		return r;
	}
	/* The old list goes through the same destructor. */
	struct hooks_config old = { .pre = *list, .n_pre = *n };
	hooks_config_clear(&old);
	*list = tmp.pre;
	*n = tmp.n_pre;
	return 0;
}

static int parse_pre_call(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	return want_hooks(p, key, v, &c->hooks.pre, &c->hooks.n_pre);
}

static int parse_post_call(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	return want_hooks(p, key, v, &c->hooks.post, &c->hooks.n_post);
}

const struct bind_field config_hooks_fields[] = {
	CUSTOM("pre_call", parse_pre_call),
	CUSTOM("post_call", parse_post_call),
	{},
};
