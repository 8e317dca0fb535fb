/* SPDX-License-Identifier: MIT */
/*
 * The "store" and "tasks" sections of the config file.
 */
#include "daemon/config_store.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"

/* Replaces a string member with a checked copy of v. */
static int take(struct cfg_parse *p, const char *key, const struct json *v, char **member)
{
	const char *s;
	int r = cfg_want_string(p, key, v, &s);
	if (r < 0)
		return r;
	free(*member);
	*member = xstrdup(s);
	return 0;
}

/* "store.kind": "memory" or "redis". */
static int parse_kind(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	const char *s = json_str(v);
	if (s && strlen(s) == v->u.str.len && (str_eq(s, "memory") || str_eq(s, "redis")))
		return take(p, key, v, &c->store.kind);
	return cfg_fail(p, v->off, key, "expected \"memory\" or \"redis\"%s%s", s ? "" : ", got ",
			s ? "" : cfg_got(v));
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
static int parse_address(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	const char *s = json_str(v);
	if (s && strlen(s) == v->u.str.len && strlen(s) < 256 &&
	    ((str_has_prefix(s, "unix:/") && strlen(s) < 5 + 108) || (!str_has_prefix(s, "unix:") && host_port(s))))
		return take(p, key, v, &c->store.address);
	return cfg_fail(p, v->off, key, "expected \"unix:/path/to/redis.sock\" or \"HOST:PORT\"%s%s",
			s ? "" : ", got ", s ? "" : cfg_got(v));
}

/* "store.prefix": what every key starts with; at most 256 bytes. */
static int parse_prefix(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	if (v->type == JSON_STRING && v->u.str.len > 256)
		return cfg_fail(p, v->off, key, "at most 256 bytes");
	return take(p, key, v, &c->store.prefix);
}

/* "store.on_unavailable": "local" or "fail". */
static int parse_unavailable(struct cfg_parse *p, const char *key, const struct json *v, struct config *c)
{
	const char *s = json_str(v);
	if (s && strlen(s) == v->u.str.len && (str_eq(s, "local") || str_eq(s, "fail"))) {
		c->store.fail = str_eq(s, "fail");
		return 0;
	}
	return cfg_fail(p, v->off, key, "expected \"local\" or \"fail\"%s%s", s ? "" : ", got ",
			s ? "" : cfg_got(v));
}

const struct field config_store_fields[] = {
	CUSTOM("kind", parse_kind),
	CUSTOM("address", parse_address),
	CUSTOM("prefix", parse_prefix),
	U64("lease_ms", store.lease_ms, 100, 3600000),
	U64("timeout_ms", store.timeout_ms, 10, 600000),
	CUSTOM("on_unavailable", parse_unavailable),
	{},
};

const struct field config_tasks_fields[] = {
	U64("ttl_ms", store.task_ttl_ms, 1000, 86400000),
	U64("max_per_uid", store.max_tasks, 1, 1000000),
	{},
};
