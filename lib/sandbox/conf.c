/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's settings: the profiles' names, the defaults of CONTRACT
 * §10, one call's request resolved from config and tool; and the same as
 * JSON: the config's "sandbox" object, the "sandbox" object and "run_as"
 * of a tool or provider file, checked strictly (unknown keys, wrong types
 * and out-of-range values are errors naming the key).
 */
#include "lib/sandbox/sandbox.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "proto/base/strv.h"
#include "proto/json.h"
#include "proto/base/util.h"

#define LIST_MAX 256
#define LIMIT_MAX (INT64_C(1) << 40)

static const char *const profile_names[] = {
	[SANDBOX_WORKSPACE_WRITE] = "workspace-write",
	[SANDBOX_READ_ONLY] = "read-only",
	[SANDBOX_OFF] = "off",
};

const char *sandbox_profile_name(enum sandbox_profile p)
{
	return (unsigned)p < ELEMENTSOF(profile_names) ? profile_names[p] : "?";
}

int sandbox_profile_from_name(const char *s)
{
	for (size_t i = 0; s && i < ELEMENTSOF(profile_names); i++)
		if (strcmp(s, profile_names[i]) == 0)
			return (int)i;
	return -1;
}

/* Copies the members of over that are set. */
void sandbox_limits_merge(struct sandbox_limits *base, const struct sandbox_limits *over)
{
	if (over->memory_mb != INT64_MIN)
		base->memory_mb = over->memory_mb;
	if (over->pids != INT64_MIN)
		base->pids = over->pids;
	if (over->file_size_mb != INT64_MIN)
		base->file_size_mb = over->file_size_mb;
	if (over->nofile != INT64_MIN)
		base->nofile = over->nofile;
	if (over->cpu_s != INT64_MIN)
		base->cpu_s = over->cpu_s;
	if (over->tmp_mb != INT64_MIN)
		base->tmp_mb = over->tmp_mb;
}

/* Sets the defaults of CONTRACT §10. */
void sandbox_config_init(struct sandbox_config *cfg)
{
	static const char *const deny[] = {
		"~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.docker",
		"~/.kube", "~/.netrc", NULL,
	};
	static const char *const protect[] = {
		".git/hooks", ".git/config", ".git/commondir", ".git/info", ".git/modules", NULL,
	};
	static const char *const none[] = { NULL };

	*cfg = (struct sandbox_config){
		.profile = SANDBOX_WORKSPACE_WRITE,
		.limits = SANDBOX_LIMITS_DEFAULT,
		.require = true,
		.run_as_peer = true,
	};
	cfg->deny_read = strv_dup(deny);
	cfg->protect = strv_dup(protect);
	cfg->write_extra = strv_dup(none);
	cfg->unix_sockets = strv_dup(none);
}

/* Whether the canonical relative path a (n bytes) is b or lies beneath it. */
static bool path_within(const char *a, size_t n, const char *b, size_t m)
{
	return n >= m && strncmp(a, b, m) == 0 && (n == m || a[m] == '/');
}

/* The entry of protect that a write to rel touches, rel taken as relative
 * to the top of a repository. */
static const char *protected_at(const char *const *protect, const char *rel, bool whole, bool dir)
{
	size_t n = strlen(rel);
	bool git = false;
	for (const char *const *p = protect; p && *p; p++) {
		const char *e = *p;
		while (e[0] == '.' && e[1] == '/')
			e += 2;
		size_t m = strlen(e);
		while (m > 0 && e[m - 1] == '/')
			m--;
		if (m == 0)
			continue;
		if (path_within(rel, n, e, m) || (whole && !str_eq(rel, ".") && path_within(e, m, rel, n)))
			return *p;
		git = git || path_within(e, m, ".git", 4);
	}
	/* A .git file (a "gitdir:" pointer) sends git to another repository,
	 * with its hooks and config: protected with the paths beneath .git. */
	if (git && !dir && str_eq(rel, ".git"))
		return ".git";
	return NULL;
}

/*
 * Also in the repositories nested in the workspace, at any depth: rel from
 * each ".git" component on ("sub/.git/hooks/x" as ".git/hooks/x"), and in
 * a submodule's git directory, which git keeps in .git/modules/NAME
 * (".git/modules/NAME/config" as ".git/config", ".git/modules/NAME" as
 * ".git"). A path beneath protect
 * whose ".git" is nested is refused as the top's is.
 */
const char *sandbox_protected(const char *const *protect, const char *rel, bool whole, bool dir)
{
	const char *r = protected_at(protect, rel, whole, dir);
	for (const char *s = rel; !r && s; s = strchr(s + 1, '/')) {
		const char *g = *s == '/' ? s + 1 : s;
		if (strncmp(g, ".git", 4) != 0 || (g[4] != '\0' && g[4] != '/'))
			continue;
		if (g != rel)
			r = protected_at(protect, g, whole, dir);
		/* .git/modules/NAME/REST as .git/REST. */
		if (!r && strncmp(g, ".git/modules/", 13) == 0) {
			const char *rest = strchr(g + 13, '/');
			if (g[13] && (!rest || rest[1])) {
				char *as_top = xasprintf(".git%s", rest ? rest : "");
				r = protected_at(protect, as_top, whole, dir);
				free(as_top);
			}
		}
	}
	return r;
}

void sandbox_config_clear(struct sandbox_config *cfg)
{
	for (size_t i = 0; i < cfg->n_per_tool; i++)
		free(cfg->per_tool[i].tool);
	free(cfg->per_tool);
	cfg->per_tool = NULL;
	cfg->n_per_tool = 0;
	cfg->deny_read = strv_free(cfg->deny_read);
	cfg->protect = strv_free(cfg->protect);
	cfg->write_extra = strv_free(cfg->write_extra);
	cfg->unix_sockets = strv_free(cfg->unix_sockets);
	free(cfg->cgroup_dir);
	cfg->cgroup_dir = NULL;
}

void sandbox_tool_clear(struct sandbox_tool *t)
{
	t->write_extra = strv_free(t->write_extra);
}

/* Resolves one call's profile and settings. */
void sandbox_req_init(struct sandbox_req *req, const struct sandbox_config *cfg, const char *tool_name,
		      bool network_tool, const struct sandbox_tool *tool)
{
	*req = (struct sandbox_req){ .profile = SANDBOX_OFF, .network = true, .limits = SANDBOX_LIMITS_DEFAULT };
	if (!cfg)
		return;
	req->profile = cfg->profile;
	for (size_t i = 0; i < cfg->n_per_tool; i++)
		if (tool_name && strcmp(cfg->per_tool[i].tool, tool_name) == 0)
			req->profile = cfg->per_tool[i].profile;
	if (tool && tool->profile >= 0)
		req->profile = (enum sandbox_profile)tool->profile;
	req->network = tool && tool->network >= 0 ? tool->network != 0 : network_tool || cfg->network;
	req->require = cfg->require;
	req->limits = cfg->limits;
	if (tool)
		sandbox_limits_merge(&req->limits, &tool->limits);
	req->deny_read = (const char *const *)cfg->deny_read;
	req->write_extra = (const char *const *)cfg->write_extra;
	req->write_extra_tool = tool ? (const char *const *)tool->write_extra : NULL;
	req->protect = (const char *const *)cfg->protect;
	req->unix_sockets = (const char *const *)cfg->unix_sockets;
}

/* Refuses keys not in known. */
static int check_keys(const struct json *obj, const char *const *known, const char *where, char **ret_err)
{
	for (size_t i = 0; i < obj->u.obj.n; i++) {
		const char *key = obj->u.obj.members[i].key;
		bool ok = false;
		for (const char *const *k = known; *k && !ok; k++)
			ok = strcmp(*k, key) == 0 && strlen(key) == obj->u.obj.members[i].key_len;
		if (!ok)
			return set_errorf(ret_err, "%s.%s: unknown key", where, key);
	}
	return 0;
}

/* Reads an array of strings (no NUL, not empty); absolute paths or "~/"
 * ones when paths, relative ones without ".." when relative. */
static int str_list(const struct json *v, const char *where, int kind, char ***ret, char **ret_err)
{
	if (v->type != JSON_ARRAY || v->u.arr.n > LIST_MAX)
		return set_errorf(ret_err, "%s: expected an array of at most %d strings", where, LIST_MAX);
	char **list = xcalloc(v->u.arr.n + 1, sizeof(*list));
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct json *s = v->u.arr.items[i];
		const char *str = json_str(s);
		bool ok = str && *str && strlen(str) == s->u.str.len;
		if (ok && kind == 1)	/* absolute, or from the home */
			ok = str[0] == '/' || (str[0] == '~' && (str[1] == '/' || !str[1]));
		if (ok && kind == 2)	/* beneath a workspace */
			ok = str[0] != '/' && !strstr(str, "..");
		if (!ok) {
			for (size_t k = 0; k < i; k++)
				free(list[k]);
			free(list);
			return set_errorf(ret_err, "%s[%zu]: expected %s", where, i,
				   kind == 1 ? "an absolute path or one starting with ~/"
					     : kind == 2 ? "a path relative to the workspace, without .."
							 : "a non-empty string");
		}
		list[i] = xstrdup(str);
	}
	*ret = list;
	return 0;
}

static void strv_set(char ***dst, char **v)
{
	strv_free(*dst);
	*dst = v;
}

/* Reads a "limits" object over *l. */
static int limits_from_json(const struct json *v, const char *where, struct sandbox_limits *l, char **ret_err)
{
	static const char *const keys[] = { "memory_mb", "pids", "file_size_mb", "nofile", "cpu_s", "tmp_mb", NULL };
	int r;
	if (v->type != JSON_OBJECT)
		return set_errorf(ret_err, "%s: expected an object", where);
	if ((r = check_keys(v, keys, where, ret_err)) < 0)
		return r;
	int64_t *dst[] = { &l->memory_mb, &l->pids, &l->file_size_mb, &l->nofile, &l->cpu_s, &l->tmp_mb };
	for (size_t i = 0; keys[i]; i++) {
		const struct json *m = json_get(v, keys[i]);
		int64_t n;
		if (!m)
			continue;
		if (m->type == JSON_NULL) {
			*dst[i] = -1;	/* none */
			continue;
		}
		if (!json_get_int(m, &n) || n < 1 || n > LIMIT_MAX)
			return set_errorf(ret_err, "%s.%s: expected a positive integer or null (no limit)", where, keys[i]);
		*dst[i] = n;
	}
	return 0;
}

static int profile_from_json(const struct json *v, const char *where, int *ret, char **ret_err)
{
	int p = sandbox_profile_from_name(json_str(v));
	if (p < 0)
		return set_errorf(ret_err, "%s: expected \"workspace-write\", \"read-only\" or \"off\"", where);
	*ret = p;
	return 0;
}

static int bool_from_json(const struct json *v, const char *where, bool *ret, char **ret_err)
{
	if (v->type != JSON_BOOL)
		return set_errorf(ret_err, "%s: expected true or false", where);
	*ret = v->u.b;
	return 0;
}

/* Reads a run_as value: 1 for "peer", 0 for "daemon". */
int sandbox_run_as_from_json(const struct json *v, const char *where, int *ret, char **ret_err)
{
	const char *s = json_str(v);
	if (!str_eq(s, "peer") && !str_eq(s, "daemon"))
		return set_errorf(ret_err, "%s: expected \"peer\" or \"daemon\"", where);
	*ret = str_eq(s, "peer");
	return 0;
}

/* Reads a tool or provider file's "sandbox" object. */
int sandbox_tool_from_json(const struct json *v, struct sandbox_tool *t, char **ret_err)
{
	static const char *const keys[] = { "profile", "network", "write_extra", "limits", NULL };
	const struct json *m;
	int r;
	bool b = false;

	if (v->type != JSON_OBJECT)
		return set_errorf(ret_err, "sandbox: expected an object");
	if ((r = check_keys(v, keys, "sandbox", ret_err)) < 0)
		return r;
	if ((m = json_get(v, "profile")) && (r = profile_from_json(m, "sandbox.profile", &t->profile, ret_err)) < 0)
		return r;
	if ((m = json_get(v, "network"))) {
		if ((r = bool_from_json(m, "sandbox.network", &b, ret_err)) < 0)
			return r;
		t->network = b;
	}
	if ((m = json_get(v, "write_extra"))) {
		char **list;
		if ((r = str_list(m, "sandbox.write_extra", 1, &list, ret_err)) < 0)
			return r;
		strv_set(&t->write_extra, list);
	}
	if ((m = json_get(v, "limits")) && (r = limits_from_json(m, "sandbox.limits", &t->limits, ret_err)) < 0)
		return r;
	return 0;
}

/* Reads the config's "sandbox" object over cfg (defaults set). */
int sandbox_config_from_json(const struct json *v, struct sandbox_config *cfg, char **ret_err)
{
	static const char *const keys[] = {
		"default", "per_tool", "network", "deny_read", "write_extra", "protect", "limits", "require",
		"cgroup", "unix_sockets", NULL,
	};
	const struct json *m;
	char **list;
	int r, p = 0;

	if (v->type != JSON_OBJECT)
		return set_errorf(ret_err, "sandbox: expected an object");
	if ((r = check_keys(v, keys, "sandbox", ret_err)) < 0)
		return r;
	if ((m = json_get(v, "default"))) {
		if ((r = profile_from_json(m, "sandbox.default", &p, ret_err)) < 0)
			return r;
		cfg->profile = (enum sandbox_profile)p;
	}
	if ((m = json_get(v, "per_tool"))) {
		if (m->type != JSON_OBJECT || m->u.obj.n > LIST_MAX)
			return set_errorf(ret_err, "sandbox.per_tool: expected an object of tool name: profile");
		for (size_t i = 0; i < m->u.obj.n; i++) {
			const struct json_member *e = &m->u.obj.members[i];
			_cleanup_free_ char *where = xasprintf("sandbox.per_tool.%s", e->key);
			if ((r = profile_from_json(e->value, where, &p, ret_err)) < 0)
				return r;
			cfg->per_tool = xreallocarray(cfg->per_tool, cfg->n_per_tool + 1, sizeof(*cfg->per_tool));
			cfg->per_tool[cfg->n_per_tool++] = (struct sandbox_per_tool){
				.tool = xstrdup(e->key), .profile = (enum sandbox_profile)p };
		}
	}
	if ((m = json_get(v, "network")) && (r = bool_from_json(m, "sandbox.network", &cfg->network, ret_err)) < 0)
		return r;
	if ((m = json_get(v, "require")) && (r = bool_from_json(m, "sandbox.require", &cfg->require, ret_err)) < 0)
		return r;
	if ((m = json_get(v, "deny_read"))) {
		if ((r = str_list(m, "sandbox.deny_read", 1, &list, ret_err)) < 0)
			return r;
		strv_set(&cfg->deny_read, list);
	}
	if ((m = json_get(v, "write_extra"))) {
		if ((r = str_list(m, "sandbox.write_extra", 1, &list, ret_err)) < 0)
			return r;
		strv_set(&cfg->write_extra, list);
	}
	if ((m = json_get(v, "protect"))) {
		if ((r = str_list(m, "sandbox.protect", 2, &list, ret_err)) < 0)
			return r;
		strv_set(&cfg->protect, list);
	}
	if ((m = json_get(v, "unix_sockets"))) {
		if ((r = str_list(m, "sandbox.unix_sockets", 1, &list, ret_err)) < 0)
			return r;
		strv_set(&cfg->unix_sockets, list);
	}
	if ((m = json_get(v, "limits")) && (r = limits_from_json(m, "sandbox.limits", &cfg->limits, ret_err)) < 0)
		return r;
	if ((m = json_get(v, "cgroup"))) {
		const char *s = json_str(m);
		if (!s || (*s && *s != '/'))
			return set_errorf(ret_err, "sandbox.cgroup: expected an absolute path, or \"\" for none");
		free(cfg->cgroup_dir);
		cfg->cgroup_dir = xstrdup(s);
	}
	return 0;
}

/* Reads "run_as": "daemon", or a user name whose uid, gid, groups and
 * home a server then runs with (when the daemon is root). */
int sandbox_run_as_user_from_json(const struct json *v, struct identity *ret, char **ret_err)
{
	const char *name = json_str(v);
	*ret = (struct identity){0};
	if (!name || !*name || strlen(name) != v->u.str.len)
		return set_errorf(ret_err, "run_as: expected \"daemon\" or a user name");
	if (strcmp(name, "daemon") == 0)
		return 0;
	if (identity_from_user(name, ret) < 0)
		return set_errorf(ret_err, "run_as: no user '%s'", name);
	return 0;
}
