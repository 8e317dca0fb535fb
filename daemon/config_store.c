/* SPDX-License-Identifier: MIT */
/*
 * The "store" and "tasks" sections of the config file.
 */
#include "daemon/config_store.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"

/* Replaces a string member with a checked copy of v. */
static int take(struct bind *p, const char *key, const struct json *v, char **member)
{
	const char *s;
	int r = bind_want_string(p, key, v, &s);
	if (r < 0)
		return r;
	free(*member);
	*member = xstrdup(s);
	return 0;
}

/* "store.kind": "memory" or "redis". */
static int parse_kind(struct bind *p, const char *key, const struct json *v, void *obj)
{
	static const char *const kinds[] = { "memory", "redis", NULL };
	struct config *c = obj;
	int i;
	int r = bind_want_name(p, key, v, kinds, &i);
	if (r < 0)
		return r;
	free(c->store.kind);
	c->store.kind = xstrdup(kinds[i]);
	return 0;
}

/* True for "HOST:PORT" (a bracketed IPv6 host too) with a port 1..65535. */
static bool host_port(const char *s)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || !colon[1] || strlen(colon + 1) > 5)
		return false;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	return !*end && port > 0 && port <= 65535 && (s[0] != '[' || colon[-1] == ']');
}

/* "store.address": "unix:/path" or "HOST:PORT". */
static int parse_address(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	const char *s = json_str(v);
	if (s && strlen(s) == v->u.str.len && strlen(s) < 256 &&
	    ((str_has_prefix(s, "unix:/") && strlen(s) < 5 + 108) || (!str_has_prefix(s, "unix:") && host_port(s))))
		return take(p, key, v, &c->store.address);
	return bind_fail(p, v->off, key, "expected \"unix:/path/to/redis.sock\" or \"HOST:PORT\"%s%s",
			s ? "" : ", got ", s ? "" : bind_got(v));
}

/* "store.prefix": what every key starts with; at most 256 bytes. */
static int parse_prefix(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	if (v->type == JSON_STRING && v->u.str.len > 256)
		return bind_fail(p, v->off, key, "at most 256 bytes");
	return take(p, key, v, &c->store.prefix);
}

/* "store.server_uid": a uid or a user name (looked up now) whose Redis
 * server on a Unix socket is trusted besides root and the daemon's euid. */
static int parse_server_uid(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	return config_want_id(p, key, v, false, &c->store.server_uid);
}

static const char *const on_unavailable_names[] = { "local", "fail", NULL };

const struct bind_field config_store_fields[] = {
	CUSTOM("kind", parse_kind),
	CUSTOM("address", parse_address),
	CUSTOM("prefix", parse_prefix),
	U64("lease_ms", store.lease_ms, 100, 3600000),
	U64("timeout_ms", store.timeout_ms, 10, 600000),
	B_NAME(struct config, "on_unavailable", store.fail, on_unavailable_names),
	CUSTOM("server_uid", parse_server_uid),
	{},
};

const struct bind_field config_tasks_fields[] = {
	U64("ttl_ms", store.task_ttl_ms, 1000, 86400000),
	U64("max_per_uid", store.max_tasks, 1, 1000000),
	{},
};
