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
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/bind/bind.h"
#include "lib/net/net.h"
#include "proto/base/strv.h"
#include "proto/json.h"
#include "proto/base/util.h"

#define LIST_MAX 256
#define LIMIT_MAX (INT64_C(1) << 40)

const char *const sandbox_profile_names[] = {
	[SANDBOX_WORKSPACE_WRITE] = "workspace-write",
	[SANDBOX_READ_ONLY] = "read-only",
	[SANDBOX_OFF] = "off",
	NULL,
};

const char *sandbox_profile_name(enum sandbox_profile p)
{
	return (unsigned)p < ELEMENTSOF(sandbox_profile_names) - 1 ? sandbox_profile_names[p] : "?";
}

int sandbox_profile_from_name(const char *s)
{
	for (size_t i = 0; s && sandbox_profile_names[i]; i++)
		if (strcmp(s, sandbox_profile_names[i]) == 0)
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
	cfg->read_only = strv_free(cfg->read_only);
	cfg->write_extra = strv_free(cfg->write_extra);
	cfg->unix_sockets = strv_free(cfg->unix_sockets);
	free(cfg->cgroup_dir);
	cfg->cgroup_dir = NULL;
}

void sandbox_tool_clear(struct sandbox_tool *t)
{
	t->write_extra = strv_free(t->write_extra);
	t->net = net_policy_unref(t->net);
}

/* Resolves one call's profile and settings. */
void sandbox_req_init(struct sandbox_req *req, const struct sandbox_config *cfg, const char *tool_name,
		      bool network_tool, const struct sandbox_tool *tool)
{
	*req = (struct sandbox_req){ .profile = SANDBOX_OFF, .network = true, .limits = SANDBOX_LIMITS_DEFAULT };
	if (!cfg)
		return;
	req->profile = cfg->profile;
	int network = network_tool ? SANDBOX_NET_FULL : cfg->network;
	for (size_t i = 0; i < cfg->n_per_tool; i++)
		if (tool_name && strcmp(cfg->per_tool[i].tool, tool_name) == 0) {
			if (cfg->per_tool[i].profile >= 0)
				req->profile = (enum sandbox_profile)cfg->per_tool[i].profile;
			if (cfg->per_tool[i].network >= 0)
				network = cfg->per_tool[i].network;
		}
	if (tool && tool->profile >= 0)
		req->profile = (enum sandbox_profile)tool->profile;
	if (tool && tool->network >= 0)
		network = tool->network;
	req->network = network == SANDBOX_NET_FULL;
	req->net_proxy = network == SANDBOX_NET_PROXY;
	req->net_policy = tool ? tool->net : NULL;
	req->require = cfg->require;
	req->limits = cfg->limits;
	if (tool)
		sandbox_limits_merge(&req->limits, &tool->limits);
	req->deny_read = (const char *const *)cfg->deny_read;
	req->write_extra = (const char *const *)cfg->write_extra;
	req->write_extra_tool = tool ? (const char *const *)tool->write_extra : NULL;
	req->protect = (const char *const *)cfg->protect;
	req->read_only = (const char *const *)cfg->read_only;
	req->unix_sockets = (const char *const *)cfg->unix_sockets;
}

/* Reads an array of strings (no NUL, not empty) into *at: absolute paths
 * or "~/" ones when kind is 1, relative ones without ".." when 2. */
static int str_list(struct bind *b, const char *path, const struct json *v, int kind, char ***at)
{
	if (v->type != JSON_ARRAY || v->u.arr.n > LIST_MAX)
		return bind_fail(b, v->off, path, "expected an array of at most %d strings", LIST_MAX);
	char **list = xcalloc(v->u.arr.n + 1, sizeof(*list));
	int r = 0;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct json *s = v->u.arr.items[i];
		const char *str = json_str(s);
		bool ok = str && *str && strlen(str) == s->u.str.len;
		if (ok && kind == 1)	/* absolute, or from the home */
			ok = str[0] == '/' || (str[0] == '~' && (str[1] == '/' || !str[1]));
		if (ok && kind == 2)	/* beneath a workspace */
			ok = str[0] != '/' && !strstr(str, "..");
		if (!ok) {
			_cleanup_free_ char *k = bind_index_path(path, i);
			r = bind_fail(b, s->off, k, "expected %s",
				      kind == 1 ? "an absolute path or one starting with ~/"
						: "a path relative to the workspace, without ..");
			continue;
		}
		list[i] = xstrdup(str);
	}
	if (r < 0) {
		for (size_t i = 0; i < v->u.arr.n; i++)
			free(list[i]);
		free(list);
		return r;
	}
	strv_free(*at);
	*at = list;
	return 0;
}

static int parse_abs_list(struct bind *b, const char *path, const struct json *v, void *at)
{
	return str_list(b, path, v, 1, at);
}

static int parse_rel_list(struct bind *b, const char *path, const struct json *v, void *at)
{
	return str_list(b, path, v, 2, at);
}

/* A limit: a positive integer, or null for none (-1). */
int sandbox_limit_bind(struct bind *b, const char *path, const struct json *v, void *at)
{
	int64_t n;
	if (v->type == JSON_NULL) {
		*(int64_t *)at = -1;
		return 0;
	}
	if (!json_get_int(v, &n) || n < 1 || n > LIMIT_MAX)
		return bind_fail(b, v->off, path, "expected a positive integer or null (no limit)");
	*(int64_t *)at = n;
	return 0;
}

#define LIMIT(k) B_CUSTOM(struct sandbox_limits, #k, k, sandbox_limit_bind)
static const struct bind_field limits_fields[] = {
	LIMIT(memory_mb), LIMIT(pids), LIMIT(file_size_mb), LIMIT(nofile), LIMIT(cpu_s), LIMIT(tmp_mb),
	{},
};

/* A network value: false, true or "proxy" (enum sandbox_network). */
static int want_network(struct bind *b, const char *path, const struct json *v, int *ret, bool policy_ok)
{
	if (v->type == JSON_BOOL) {
		*ret = v->u.b ? SANDBOX_NET_FULL : SANDBOX_NET_NONE;
		return 0;
	}
	if (str_eq(json_str(v), "proxy") && v->u.str.len == 5) {
		*ret = SANDBOX_NET_PROXY;
		return 0;
	}
	return bind_fail(b, v->off, path, "expected true, false or \"proxy\"%s",
			 policy_ok ? ", or an object such as {\"allow\": [\"registry.npmjs.org\"]}" : "");
}

static int parse_cfg_network(struct bind *b, const char *path, const struct json *v, void *at)
{
	return want_network(b, path, v, at, false);
}

/* A tool's network (at: its struct sandbox_tool): a value, or a policy
 * object that lib/net checks, meaning "proxy" with those hosts added. */
int sandbox_tool_network_bind(struct bind *b, const char *path, const struct json *v, void *at)
{
	struct sandbox_tool *t = at;
	if (v->type != JSON_OBJECT)
		return want_network(b, path, v, &t->network, true);
	struct net_policy *pol = NULL;
	int r = net_policy_bind_tool(b, path, v, &pol);
	if (r < 0)
		return r;
	net_policy_unref(t->net);
	t->net = pol;
	t->network = SANDBOX_NET_PROXY;
	return 0;
}

/* One "tool" of per_tool, added to those the config has: a profile, or
 * {"profile": …, "network": false | true | "proxy"}. */
static int parse_pt_profile(struct bind *b, const char *path, const struct json *v, void *at)
{
	return bind_want_name(b, path, v, sandbox_profile_names, at);
}

static const struct bind_field per_tool_fields[] = {
	B_CUSTOM(struct sandbox_per_tool, "profile", profile, parse_pt_profile),
	B_CUSTOM(struct sandbox_per_tool, "network", network, parse_cfg_network),
	{},
};

static int tool_profile(struct bind *b, const char *path, const struct json_member *e, size_t i, void *arg)
{
	struct sandbox_config *cfg = arg;
	struct sandbox_per_tool pt = { .profile = -1, .network = -1 };
	int r = e->value->type == JSON_OBJECT ? bind_object(b, path, e->value, per_tool_fields, NULL, &pt)
					      : bind_want_name(b, path, e->value, sandbox_profile_names, &pt.profile);
	if (r < 0)
		return r;
	pt.tool = xstrdup(e->key);
	cfg->per_tool = xreallocarray(cfg->per_tool, cfg->n_per_tool + 1, sizeof(*cfg->per_tool));
	cfg->per_tool[cfg->n_per_tool++] = pt;
	return 0;
}

static int parse_per_tool(struct bind *b, const char *path, const struct json *v, void *at)
{
	return bind_members(b, path, v, LIST_MAX, tool_profile, at);
}

/* "cgroup": an absolute path, or "" for none. */
static int parse_cgroup(struct bind *b, const char *path, const struct json *v, void *at)
{
	const char *s = json_str(v);
	if (!s || strlen(s) != v->u.str.len || (*s && *s != '/'))
		return bind_fail(b, v->off, path, "expected an absolute path, or \"\" for none");
	free(*(char **)at);
	*(char **)at = xstrdup(s);
	return 0;
}

const char *const sandbox_run_as_names[] = { "daemon", "peer", NULL };

const struct bind_field sandbox_config_fields[] = {
	B_NAME(struct sandbox_config, "default", profile, sandbox_profile_names),
	B_WHOLE("per_tool", parse_per_tool),
	B_CUSTOM(struct sandbox_config, "network", network, parse_cfg_network),
	B_BOOL(struct sandbox_config, "require", require),
	B_CUSTOM(struct sandbox_config, "deny_read", deny_read, parse_abs_list),
	B_CUSTOM(struct sandbox_config, "write_extra", write_extra, parse_abs_list),
	B_CUSTOM(struct sandbox_config, "protect", protect, parse_rel_list),
	B_CUSTOM(struct sandbox_config, "unix_sockets", unix_sockets, parse_abs_list),
	B_OBJECT(struct sandbox_config, "limits", limits, limits_fields, NULL),
	B_CUSTOM(struct sandbox_config, "cgroup", cgroup_dir, parse_cgroup),
	{},
};

const struct bind_field sandbox_tool_fields[] = {
	B_NAME(struct sandbox_tool, "profile", profile, sandbox_profile_names),
	B_WHOLE("network", sandbox_tool_network_bind),
	B_CUSTOM(struct sandbox_tool, "write_extra", write_extra, parse_abs_list),
	B_OBJECT(struct sandbox_tool, "limits", limits, limits_fields, NULL),
	{},
};

/* Checks v against fields without a file: messages name the key alone. */
static int from_json(const struct json *v, const struct bind_field *fields, void *obj, char **ret_err)
{
	struct bind b = {0};
	int r = bind_object(&b, "sandbox", v, fields, NULL, obj);
	if (r < 0)
		*ret_err = bind_errors(&b);
	return r;
}

int sandbox_tool_from_json(const struct json *v, struct sandbox_tool *t, char **ret_err)
{
	return from_json(v, sandbox_tool_fields, t, ret_err);
}

int sandbox_config_from_json(const struct json *v, struct sandbox_config *cfg, char **ret_err)
{
	return from_json(v, sandbox_config_fields, cfg, ret_err);
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

/* Whether a program runs the file its first operand names (an
 * interpreter: sh, python3, node ...). */
static bool interpreter(const char *prog)
{
	static const char *const names[] = { "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "node", "nodejs",
					     "deno", "bun", "ruby", "perl", "php", "lua", "luajit", "tclsh", "Rscript",
					     "pypy", "pypy3", "osascript", "java" };
	const char *base = strrchr(prog, '/');
	base = base ? base + 1 : prog;
	if (strncmp(base, "python", 6) == 0)
		return true;
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (strcmp(base, names[i]) == 0)
			return true;
	return false;
}

/* The file word names, canonical, when it is a regular file: a program
 * named without a slash searched in $PATH, a relative name taken from cwd
 * (NULL: not resolved). *ret_named: the path as named, absolute, when it
 * is not the canonical one (a link on the way, or at its end). */
static char *argv_file(const char *word, bool program, const char *cwd, char **ret_named)
{
	_cleanup_free_ char *abs = NULL;
	if (word[0] == '/') {
		abs = xstrdup(word);
	} else if (program && !strchr(word, '/')) {
		const char *path = getenv("PATH");
		for (const char *d = path; d && *d && !abs;) {
			size_t n = strcspn(d, ":");
			if (n && d[0] == '/') {
				char *c = xasprintf("%.*s/%s", (int)n, d, word);
				if (access(c, X_OK) == 0)
					abs = c;
				else
					free(c);
			}
			d += n + (d[n] == ':');
		}
	} else if (cwd && cwd[0] == '/') {
		abs = xasprintf("%s/%s", cwd, word);
	}
	char *real = abs ? realpath(abs, NULL) : NULL;
	struct stat st;
	if (real && (stat(real, &st) < 0 || !S_ISREG(st.st_mode))) {
		free(real);
		real = NULL;
	}
	*ret_named = real && strcmp(real, abs) != 0 ? TAKE_PTR(abs) : NULL;
	return real;
}

/* Adds path to read_only, once, where one of roots holds it (taking
 * it). */
static void read_only_push(struct sandbox_config *cfg, char *path, const char *const *roots)
{
	bool inside = false;
	for (const char *const *r = roots; path && r && *r && !inside; r++) {
		size_t n = strlen(*r);
		inside = strncmp(path, *r, n) == 0 && path[n] == '/';
	}
	size_t n = 0;
	while (inside && cfg->read_only && cfg->read_only[n] && strcmp(cfg->read_only[n], path) != 0)
		n++;
	if (!inside || (cfg->read_only && cfg->read_only[n])) {
		free(path);
		return;
	}
	cfg->read_only = xreallocarray(cfg->read_only, n + 2, sizeof(char *));
	cfg->read_only[n] = path;
	cfg->read_only[n + 1] = NULL;
}

/* How an interpreter's options read: those after which the program text
 * is an argument, not a file (sh -c, python -c/-m, node -e), and those
 * that take the next argument as their value (python -W, node -r). */
struct interp_opts {
	const char *names;		/* space-separated program names */
	const char *code;		/* space-separated options giving code */
	const char *valued;		/* options whose value is the next argument */
	char code_letter;		/* a short option cluster holding it gives code */
	bool plus;			/* "+x" is an option too (a shell's) */
};

static const struct interp_opts interp_table[] = {
	{ " sh bash dash zsh ksh mksh ", "", " -o +o -O +O ", 'c', true },
	{ " fish ", " --command ", " -C --init-command ", 'c', false },
	{ " node nodejs bun deno ", " -e --eval -p --print ", " -r --require --import ", 0, false },
	{ " ruby ", " -e ", " -r -I -C ", 0, false },
	{ " perl ", " -e -E ", " -I -M -m ", 0, false },
	{ " php ", " -r ", " -d -c ", 0, false },
	{ " lua luajit ", " -e ", " -l ", 0, false },
	{ " Rscript osascript ", " -e ", "", 0, false },
	{ " java ", "", " -cp -classpath --class-path -p --module-path ", 0, false },
	{ " python pypy ", " -m ", " -W -X ", 'c', false },
};

/* Whether word is one of the space-separated words of list. */
static bool word_in(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = strstr(list, word); p; p = strstr(p + 1, word))
		if (p > list && p[-1] == ' ' && p[n] == ' ')
			return true;
	return false;
}

/* Whether a cluster of short options ("ec" of "-ec") holds letter before
 * any option that takes the rest as its value (python's -W/-X, a shell's
 * -o/-O). */
static bool cluster_has(const char *cluster, char letter)
{
	for (const char *c = cluster; *c; c++) {
		if (*c == letter)
			return true;
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) || strchr("WXoO", *c))
			return false;
	}
	return false;
}

const char *sandbox_argv_script(const char *const *argv)
{
	if (!argv || !argv[0] || !interpreter(argv[0]))
		return NULL;
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	const struct interp_opts *o = NULL;
	for (size_t i = 0; i < ELEMENTSOF(interp_table) && !o; i++)
		if (word_in(interp_table[i].names, base) ||
		    (strstr(interp_table[i].names, " python ") && strncmp(base, "python", 6) == 0) ||
		    (strstr(interp_table[i].names, " pypy ") && strncmp(base, "pypy", 4) == 0))
			o = &interp_table[i];
	/* The script an interpreter runs: its first operand, unless an
	 * option gave the program text itself (then there is no file). */
	for (size_t i = 1; argv[i]; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			return argv[i + 1];
		if (strcmp(a, "-") == 0)
			return NULL;	/* the program on stdin */
		if (a[0] != '-' && !(a[0] == '+' && o && o->plus))
			return a;
		if (!o)
			continue;
		if (word_in(o->code, a))
			return NULL;
		if (o->code_letter && a[0] == '-' && cluster_has(a + 1, o->code_letter))
			return NULL;
		if (word_in(o->valued, a) && argv[i + 1])
			i++;
	}
	return NULL;
}

void sandbox_read_only_argv(struct sandbox_config *cfg, const char *const *argv, const char *cwd,
			    const char *const *roots)
{
	if (!argv || !argv[0])
		return;
	const char *words[2] = { argv[0], sandbox_argv_script(argv) };
	for (size_t i = 0; i < ELEMENTSOF(words) && words[i]; i++) {
		char *named = NULL;
		char *f = argv_file(words[i], i == 0, cwd, &named);
		read_only_push(cfg, f, roots);
		/* Reached through a link: the name too, for the file tools
		 * (a link cannot be mounted over). */
		read_only_push(cfg, named, roots);
	}
}
