/* SPDX-License-Identifier: MIT */
/*
 * The config file: its defaults (the dispatcher's own, from
 * dispatch_config_defaults(), plus the daemon's), the table of keys per
 * section with the parsers of the daemon's own keys, and reading the file
 * with a size cap. The generic binder is lib/bind; the confirmation
 * section is config_policy.c.
 */
#include "daemon/config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/config_bind.h"
#include "daemon/config_hooks.h"
#include "daemon/config_policy.h"
#include "daemon/config_store.h"
#include "daemon/default_socket.h"
#include "lib/base/audit.h"
#include "lib/dispatch/dispatch.h"
#include "lib/net/net.h"
#include "lib/store/store.h"
#include "lib/tasks/tasks.h"
#include "lib/tool.h"
#include "proto/base/buf.h"
#include "proto/base/fileio.h"
#include "proto/json.h"

static const char *const builtin_names[CONFIG_TOOL_MAX] = {
	[CONFIG_TOOL_READ_FILE] = "read_file",
	[CONFIG_TOOL_WRITE_FILE] = "write_file",
	[CONFIG_TOOL_PATCH_FILE] = "patch_file",
	[CONFIG_TOOL_LIST_DIR] = "list_dir",
	[CONFIG_TOOL_SHELL] = "shell",
};

static const char *const default_env_allow[] = { "PATH", "LANG", "HOME", "TERM" };

static const struct {
	const char *name;
	int level;
} log_levels[] = {
	{ "debug", LOG_DEBUG },
	{ "info", LOG_INFO },
	{ "warning", LOG_WARNING },
	{ "error", LOG_ERR },
};

int config_builtin_from_name(const char *name)
{
	for (int i = 0; i < CONFIG_TOOL_MAX; i++)
		if (name && strcmp(builtin_names[i], name) == 0)
			return i;
	return -1;
}

const char *config_log_level_name(int level)
{
	for (size_t i = 0; i < ELEMENTSOF(log_levels); i++)
		if (log_levels[i].level == level)
			return log_levels[i].name;
	return "?";
}

char *config_default_socket(void)
{
	return default_socket_path();
}

char *config_default_memory_dir(void)
{
	const char *sd = getenv("STATE_DIRECTORY");
	if (sd && sd[0] == '/')
		return xasprintf("%.*s/memory", (int)strcspn(sd, ":"), sd);
	if (geteuid() == 0)
		return xstrdup("/var/lib/toolcalld/memory");
	const char *state = getenv("XDG_STATE_HOME");
	if (state && state[0] == '/')
		return xasprintf("%s/toolcalld/memory", state);
	const char *home = getenv("HOME");
	if (home && home[0] == '/')
		return xasprintf("%s/.local/state/toolcalld/memory", home);
	return NULL;
}

/* Sets every key to its default; the dispatcher's keys take its own. */
void config_init(struct config *c)
{
	struct dispatch_config d;
	dispatch_config_defaults(&d);
	struct store_config sd;
	store_config_defaults(&sd);
	struct tasks_config td;
	tasks_config_defaults(&td);
	*c = (struct config) {
		.socket_mode = 0660,
		.workspace = xstrdup("."),
		.audit_fsync_ms = 1000,
		.grace_ms = 10000,
		.log_level = LOG_INFO,
		.providers_retry_s = 30,
		.limits = {
			.tmp_mb = INT64_MIN,
			.max_message_bytes = 8388608,
			.max_json_depth = d.max_json_depth,
			.max_batch = 1000,
			.max_concurrent = d.max_concurrent,
			.session_concurrency = d.session_concurrency,
			.queue_max = d.queue_max,
			.queue_max_total = d.queue_max_total,
			.per_uid_queue = d.per_uid_queue,
			.session_confirmations = d.session_confirmations,
			.max_connections = 16384,
			.max_output_bytes = 16u << 20,
			.max_client_memory = UINT64_C(1) << 30,
			.per_uid_connections = 1024,
			.per_uid_memory = UINT64_C(256) << 20,
			.turn_budget_us = 1000,
			.io_threads = 4,
			.idle_timeout_ms = 0,
			.session_resume_s = 300,
			.event_queue = 1024,
			.read_default_lines = 2000,
			.read_default_bytes = 256 << 10,
			.shell_output_kb = 64,
			.per_uid_processes = 8,
			.process_buffer_kb = 1024,
			.process_idle_s = 900,
			.process_lifetime_s = 86400,
			.process_keep_s = 300,
			.process_keep_max = 32,
			.kill_grace_ms = 5000,
			.net_connections = 64,
		},
		.retry = { .max_attempts = d.max_attempts, .base_delay_ms = d.base_delay_ms,
			   .max_delay_ms = d.max_delay_ms },
		.idempotency = { .ttl_ms = d.idem_ttl_ms, .max_entries = d.idem_max_entries,
				 .max_bytes = d.idem_max_bytes },
		.circuit = { .failures = d.circuit_failures, .window_ms = d.circuit_window_ms,
			     .open_ms = d.circuit_open_ms },
		.store = { .kind = xstrdup(sd.kind), .address = xstrdup(sd.address), .prefix = xstrdup(sd.prefix),
			   .lease_ms = sd.lease_ms, .timeout_ms = sd.timeout_ms, .server_uid = sd.server_uid,
			   .task_ttl_ms = td.default_ttl_ms, .max_tasks = td.max_per_uid },
		.tools = {
			.timeout_ms = { [CONFIG_TOOL_SHELL] = tool_default_timeout(SIDE_EXECUTE) },
			.shell_output_cap = 1048576,
			.read_file_limit = 1048576,
		},
		.memory = { .max_file_kb = 64, .max_total_kb = 1024 },
	};
	policy_config_init(&c->confirmation);

	size_t n = ELEMENTSOF(default_env_allow);
	c->tools.shell_env_allow = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		c->tools.shell_env_allow[i] = xstrdup(default_env_allow[i]);
	c->tools.n_shell_env_allow = n;
	sandbox_config_init(&c->sandbox);
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->socket);
	free(c->workspace);
	bind_strv_free(c->workspaces_allowed, c->n_workspaces_allowed);
	free(c->tools_dir);
	free(c->tools_dir_at);
	free(c->audit_log);
	free(c->memory.dir);
	for (size_t i = 0; i < c->limits.n_per_tool; i++)
		free(c->limits.per_tool[i].name);
	free(c->limits.per_tool);
	policy_config_free(&c->confirmation);
	hooks_config_clear(&c->hooks);
	bind_strv_free(c->tools.shell_env_allow, c->tools.n_shell_env_allow);
	free(c->peers.uids);
	free(c->peers.gids);
	free(c->store.kind);
	free(c->store.address);
	free(c->store.prefix);
	sandbox_config_clear(&c->sandbox);
	net_policy_unref(c->network);
	*c = (struct config) {};
}

uint32_t config_tool_timeout(const struct config *c, const char *name)
{
	int b = config_builtin_from_name(name);
	return b < 0 ? 0 : c->tools.timeout_ms[b];
}

uint32_t config_tool_concurrency(const struct config *c, const char *name)
{
	for (size_t i = 0; i < c->limits.n_per_tool; i++)
		if (strcmp(c->limits.per_tool[i].name, name) == 0)
			return c->limits.per_tool[i].max;
	return 0;
}

/* --- the key tables ------------------------------------------------------ */

/* "socket": a path short enough for sun_path, or null. */
static int parse_socket(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	char *s = NULL;
	if (v->type != JSON_NULL) {
		int r = bind_want_path(p, key, v, &s);
		if (r < 0)
			return r;
		if (strlen(s) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
			free(s);
			return bind_fail(p, v->off, key, "socket path longer than %zu bytes",
				    sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
		}
	}
	free(c->socket);
	c->socket = s;
	return 0;
}

/* "socket_mode": a string of octal digits, "0660". */
static int parse_socket_mode(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	const char *s = json_str(v);
	static const char want[] = "expected a string of 3 or 4 octal digits such as \"0660\"";

	if (!s)
		return bind_fail(p, v->off, key, "%s, got %s", want, bind_got(v));
	size_t n = v->u.str.len;
	if (n < 3 || n > 4 || strspn(s, "01234567") != n)
		return bind_fail(p, v->off, key, "%s", want);
	unsigned long mode = strtoul(s, NULL, 8);
	if (mode > 0777)
		return bind_fail(p, v->off, key, "setuid, setgid and sticky bits make no sense on a socket");
	c->socket_mode = (mode_t)mode;
	return 0;
}

/* "log_level": a name mapped to a syslog priority. */
static int parse_log_level(struct bind *p, const char *key, const struct json *v, void *obj)
{
	static const char *const names[] = { "debug", "info", "warning", "error", NULL };
	_Static_assert(ELEMENTSOF(names) == ELEMENTSOF(log_levels) + 1, "one name a level");
	struct config *c = obj;
	int i;
	int r = bind_want_name(p, key, v, names, &i);
	if (r < 0)
		return r;
	c->log_level = log_levels[i].level;
	return 0;
}

static const char *const memory_scopes[] = { "uid", "workspace", NULL };

static const struct bind_field audit_fields[] = {
	B_NAME(struct config, "on_error", audit_on_error, audit_on_error_names),
	{},
};

/* One "tool": N of limits.per_tool_concurrency. */
static int tool_cap(struct bind *p, const char *key, const struct json_member *m, size_t i, void *arg)
{
	struct config_tool_cap *caps = arg;
	uint64_t max = 0;
	if (!bind_key_plain(m))
		return bind_fail(p, bind_key_offset(p, m->value), key, "expected a tool name");
	int r = bind_want_uint(p, key, m->value, 1, 1000000, &max);
	if (r == 0)
		caps[i] = (struct config_tool_cap) { xstrdup(m->key), (uint32_t)max };
	return r;
}

/* "limits.per_tool_concurrency": { "tool": N }. */
static int parse_per_tool_concurrency(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	size_t n = v->type == JSON_OBJECT ? v->u.obj.n : 0;
	struct config_tool_cap *caps = xcalloc(n ? n : 1, sizeof(*caps));
	int r = bind_members(p, key, v, 0, tool_cap, caps);
	if (r < 0) {
		for (size_t j = 0; j < n; j++)
			free(caps[j].name);
		free(caps);
		return r;
	}
	for (size_t i = 0; i < c->limits.n_per_tool; i++)
		free(c->limits.per_tool[i].name);
	free(c->limits.per_tool);
	c->limits.per_tool = caps;
	c->limits.n_per_tool = n;
	return 0;
}

/* "tools.shell.env_allow": names of variables passed to commands. */
static int parse_env_allow(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	char **strv;
	size_t n;
	int r = bind_want_strv(p, key, v, false, &strv, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (strchr(strv[i], '='))
			r = bind_fail(p, v->u.arr.items[i]->off, key, "expected a variable name, without '='");
	if (r < 0) {
		bind_strv_free(strv, n);
		return r;
	}
	bind_strv_free(c->tools.shell_env_allow, c->tools.n_shell_env_allow);
	c->tools.shell_env_allow = strv;
	c->tools.n_shell_env_allow = n;
	return 0;
}

/* Checks one user or group id, or a name looked up now. */
int config_want_id(struct bind *p, const char *key, const struct json *item, bool groups, uint32_t *ret)
{
	const char *name = json_str(item);
	if (name) {
		const char *s;
		int r = bind_want_string(p, key, item, &s);
		if (r < 0)
			return r;
		if (groups) {
			struct group *g = getgrnam(name);
			if (!g)
				return bind_fail(p, item->off, key, "no such group '%s'", name);
			*ret = g->gr_gid;
		} else {
			struct passwd *pw = getpwnam(name);
			if (!pw)
				return bind_fail(p, item->off, key, "no such user '%s'", name);
			*ret = pw->pw_uid;
		}
		return 0;
	}
	uint64_t id;
	/* (uid_t)-1 means "no id" to the kernel: never a real peer. */
	int r = bind_want_uint(p, key, item, 0, UINT32_MAX - 1, &id);
	if (r == 0)
		*ret = (uint32_t)id;
	return r;
}

/* Checks a list of user or group ids, or names. */
static int want_ids(struct bind *p, const char *key, const struct json *v, bool groups,
		    uint32_t **ret, size_t *ret_n)
{
	if (v->type != JSON_ARRAY)
		return bind_fail(p, v->off, key, "expected an array of %s, got %s",
			    groups ? "group ids or names" : "user ids or names", bind_got(v));

	size_t n = v->u.arr.n;
	_cleanup_free_ uint32_t *ids = xcalloc(n ? n : 1, sizeof(uint32_t));
	int r = 0;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *k = bind_index_path(key, i);
		if (config_want_id(p, k, v->u.arr.items[i], groups, &ids[i]) < 0)
			r = -EINVAL;	/* the next one may be wrong too */
	}
	if (r < 0)
		return r;
	*ret = TAKE_PTR(ids);
	*ret_n = n;
	return 0;
}

/* "peers.allow_uids". */
static int parse_allow_uids(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	uint32_t *ids;
	size_t n;
	_Static_assert(sizeof(uid_t) == sizeof(uint32_t), "uid_t is 32 bits");
	int r = want_ids(p, key, v, false, &ids, &n);
	if (r < 0)
		return r;
	free(c->peers.uids);
	c->peers.uids = (uid_t *)ids;
	c->peers.n_uids = n;
	return 0;
}

/* "peers.allow_gids". */
static int parse_allow_gids(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	uint32_t *ids;
	size_t n;
	_Static_assert(sizeof(gid_t) == sizeof(uint32_t), "gid_t is 32 bits");
	int r = want_ids(p, key, v, true, &ids, &n);
	if (r < 0)
		return r;
	free(c->peers.gids);
	c->peers.gids = (gid_t *)ids;
	c->peers.n_gids = n;
	return 0;
}

/* "network": the egress policy of sandboxes with network "proxy",
 * checked by lib/net (every mistake, each where it is). */
static int parse_network(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	struct net_policy *pol = NULL;
	int r = net_policy_bind(p, key, v, &pol);
	if (r < 0)
		return r;
	net_policy_unref(c->network);
	c->network = pol;
	return 0;
}

#define TOOL_TIMEOUT(b) U32("timeout_ms", tools.timeout_ms[b], 1, MS_MAX)

static const struct bind_field workspaces_fields[] = {
	PATHS("allowed", workspaces_allowed, n_workspaces_allowed),
	{},
};

/* "limits.tmp_mb": the daemon-wide size of a call's TMPDIR, as
 * sandbox.limits.tmp_mb takes it (applied in load_text()). */
static int parse_limits_tmp_mb(struct bind *p, const char *key, const struct json *v, void *obj)
{
	struct config *c = obj;
	return sandbox_limit_bind(p, key, v, &c->limits.tmp_mb);
}

static const struct bind_field limits_fields[] = {
	U64("max_message_bytes", limits.max_message_bytes, 256, GIB),
	U32("max_json_depth", limits.max_json_depth, 2, 1024),
	U32("max_batch", limits.max_batch, 1, 1000000),
	U32("max_concurrent", limits.max_concurrent, 1, 1000000),
	U32("session_concurrency", limits.session_concurrency, 1, 1000000),
	U32("per_uid_running", limits.per_uid_running, 1, 1000000),
	U32("queue_max", limits.queue_max, 0, 1000000),
	U32("queue_max_total", limits.queue_max_total, 0, 100000000),
	U32("max_connections", limits.max_connections, 1, 1000000),
	U64("max_output_bytes", limits.max_output_bytes, 4096, 1024 * GIB),
	U64("max_client_memory", limits.max_client_memory, 1 << 20, 1024 * GIB),
	U32("per_uid_connections", limits.per_uid_connections, 1, 1000000),
	U64("per_uid_memory", limits.per_uid_memory, 1 << 20, 1024 * GIB),
	U32("turn_budget_us", limits.turn_budget_us, 0, 1000000),
	U64("idle_timeout_ms", limits.idle_timeout_ms, 0, MS_MAX),
	CUSTOM("per_tool_concurrency", parse_per_tool_concurrency),
	CUSTOM("tmp_mb", parse_limits_tmp_mb),
	U32("event_queue", limits.event_queue, 1, 1000000),
	U32("io_threads", limits.io_threads, 1, 64),
	U32("read_default_lines", limits.read_default_lines, 1, 10000000),
	U64("read_default_bytes", limits.read_default_bytes, 1024, GIB),
	U32("shell_output_kb", limits.shell_output_kb, 1, 1048576),
	U32("per_uid_queue", limits.per_uid_queue, 0, 100000000),
	U32("session_confirmations", limits.session_confirmations, 1, 1000000),
	U32("session_resume_s", limits.session_resume_s, 0, 86400),
	U32("per_uid_processes", limits.per_uid_processes, 1, 100000),
	U32("process_buffer_kb", limits.process_buffer_kb, 1, 1048576),
	U64("process_idle_s", limits.process_idle_s, 1, 31536000),
	U64("process_lifetime_s", limits.process_lifetime_s, 1, 31536000),
	U64("process_keep_s", limits.process_keep_s, 0, 31536000),
	U32("process_keep_max", limits.process_keep_max, 1, 100000),
	U32("kill_grace_ms", limits.kill_grace_ms, 1, 600000),
	U32("net_connections", limits.net_connections, 1, 100000),
	U64("net_mb", limits.net_mb, 0, 1024 * 1024),
	{},
};

static const struct bind_field retry_fields[] = {
	U32("max_attempts", retry.max_attempts, 1, 100),
	U64("base_delay_ms", retry.base_delay_ms, 0, 3600000),
	U64("max_delay_ms", retry.max_delay_ms, 0, 3600000),
	{},
};

static const struct bind_field idempotency_fields[] = {
	U64("ttl_ms", idempotency.ttl_ms, 0, MS_MAX),
	U64("max_entries", idempotency.max_entries, 1, 100000000),
	U64("max_bytes", idempotency.max_bytes, 1 << 20, 1024 * GIB),
	{},
};

static const struct bind_field circuit_fields[] = {
	U32("failures", circuit.failures, 1, 1000000),
	U64("window_ms", circuit.window_ms, 1, MS_MAX),
	U64("open_ms", circuit.open_ms, 1, MS_MAX),
	{},
};

static const struct bind_field shell_fields[] = {
	TOOL_TIMEOUT(CONFIG_TOOL_SHELL),
	CUSTOM("env_allow", parse_env_allow),
	U64("output_cap", tools.shell_output_cap, 1, GIB),
	{},
};

static const struct bind_field read_file_fields[] = {
	TOOL_TIMEOUT(CONFIG_TOOL_READ_FILE),
	U64("limit", tools.read_file_limit, 1, GIB),
	{},
};

static const struct bind_field write_file_fields[] = { TOOL_TIMEOUT(CONFIG_TOOL_WRITE_FILE), {} };
static const struct bind_field patch_file_fields[] = { TOOL_TIMEOUT(CONFIG_TOOL_PATCH_FILE), {} };
static const struct bind_field list_dir_fields[] = { TOOL_TIMEOUT(CONFIG_TOOL_LIST_DIR), {} };

static const struct bind_field tools_fields[] = {
	SECTION("read_file", read_file_fields, NULL),
	SECTION("write_file", write_file_fields, NULL),
	SECTION("patch_file", patch_file_fields, NULL),
	SECTION("list_dir", list_dir_fields, NULL),
	SECTION("shell", shell_fields, NULL),
	{},
};

static const struct bind_field providers_fields[] = {
	U32("retry_s", providers_retry_s, 0, 86400),
	{},
};

static const struct bind_field memory_fields[] = {
	PATH_NULL("dir", memory.dir),
	B_NAME(struct config, "scope", memory.per_workspace, memory_scopes),
	U32("max_file_kb", memory.max_file_kb, 1, 1 << 20),
	U32("max_total_kb", memory.max_total_kb, 1, 1 << 24),
	{},
};

static const struct bind_field peers_fields[] = {
	CUSTOM("allow_uids", parse_allow_uids),
	CUSTOM("allow_gids", parse_allow_gids),
	{},
};

static const struct bind_field root_fields[] = {
	CUSTOM("socket", parse_socket),
	CUSTOM("socket_mode", parse_socket_mode),
	PATH("workspace", workspace),
	SECTION("workspaces", workspaces_fields, NULL),
	PATH_NULL("tools_dir", tools_dir),
	PATH_NULL("audit_log", audit_log),
	U64("audit_fsync_ms", audit_fsync_ms, 0, MS_MAX),
	U64("grace_ms", grace_ms, 0, MS_MAX),
	CUSTOM("log_level", parse_log_level),
	B_NAME(struct config, "run_as", sandbox.run_as_peer, sandbox_run_as_names),
	SECTION("audit", audit_fields, NULL),
	SECTION("limits", limits_fields, NULL),
	SECTION("retry", retry_fields, NULL),
	SECTION("idempotency", idempotency_fields, NULL),
	SECTION("circuit", circuit_fields, NULL),
	SECTION("store", config_store_fields, NULL),
	SECTION("tasks", config_tasks_fields, NULL),
	SECTION("confirmation", config_confirmation_fields, NULL),
	SECTION("tools", tools_fields,
		"not a built-in tool (read_file, write_file, patch_file, list_dir, shell); "
		"tool files set their own timeout_ms"),
	SECTION("peers", peers_fields, NULL),
	SECTION("providers", providers_fields, NULL),
	SECTION("memory", memory_fields, NULL),
	B_OBJECT(struct config, "sandbox", sandbox, sandbox_config_fields, NULL),
	CUSTOM("network", parse_network),
	SECTION("hooks", config_hooks_fields, NULL),
	{},
};

/* config_load_text; with partial, mistakes inside the file still leave
 * in c what could be read, for what uses it to be checked too. */
static int load_text(struct config *c, const char *name, const char *base_dir, const char *text, size_t len,
		     bool partial, char **ret_err)
{
	_cleanup_(json_doc_unrefp) struct json_doc *doc = NULL;
	struct bind p = { .name = name, .text = text, .len = len, .base_dir = base_dir };
	struct json_err jerr = {};

	if (len > CONFIG_MAX_BYTES) {
		*ret_err = xasprintf("%s: larger than %u bytes", name, CONFIG_MAX_BYTES);
		return -EFBIG;
	}

	int r = json_parse(text, len, JSON_ALLOW_COMMENTS, CONFIG_MAX_DEPTH, &doc, &jerr);
	if (r < 0) {
		bind_fail(&p, jerr.offset, NULL, "%s", jerr.msg);
		*ret_err = bind_errors(&p);
		return -EINVAL;
	}

	struct config tmp;
	config_init(&tmp);
	r = bind_object(&p, NULL, json_doc_root(doc), root_fields, NULL, &tmp);
	if (r < 0) {
		*ret_err = bind_errors(&p);
		if (partial) {
			config_free(c);
			*c = tmp;
			return 1;
		}
		config_free(&tmp);
		return r;
	}
	/* limits.tmp_mb is the default of sandbox.limits.tmp_mb: the more
	 * specific key, when the file gives it, wins (and a tool's own
	 * sandbox.limits over both). */
	const struct json *sb = json_get(json_doc_root(doc), "sandbox");
	const struct json *sbl = sb ? json_get(sb, "limits") : NULL;
	if (tmp.limits.tmp_mb != INT64_MIN && !(sbl && json_get(sbl, "tmp_mb")))
		tmp.sandbox.limits.tmp_mb = tmp.limits.tmp_mb;
	/* tools_dir is read at every (re)load: a directory that cannot be
	 * opened then is reported at its line in this file. */
	const struct json *td = json_get(json_doc_root(doc), "tools_dir");
	if (td && tmp.tools_dir) {
		unsigned line, col;
		json_line_col(text, len, bind_key_offset(&p, td), &line, &col);
		tmp.tools_dir_at = xasprintf("%s:%u:%u", name, line, col);
	}
	/* What holds the daemon's settings is never a sandboxed child's to
	 * read: the config file itself, the tool files, the audit log; nor
	 * the memory of every peer (children of all peers run as the daemon
	 * where it is not root). */
	_cleanup_free_ char *self = name && base_dir ? bind_resolve_path(base_dir, strrchr(name, '/') ?
								       strrchr(name, '/') + 1 : name) : NULL;
	_cleanup_free_ char *memory = tmp.memory.dir ? NULL : config_default_memory_dir();
	const char *own[] = { self, tmp.tools_dir, tmp.audit_log, tmp.memory.dir ? tmp.memory.dir : memory };
	for (size_t i = 0; i < ELEMENTSOF(own); i++) {
		if (!own[i] || own[i][0] != '/')
			continue;
		size_t n = 0;
		while (tmp.sandbox.deny_read[n])
			n++;
		tmp.sandbox.deny_read = xreallocarray(tmp.sandbox.deny_read, n + 2, sizeof(char *));
		tmp.sandbox.deny_read[n] = xstrdup(own[i]);
		tmp.sandbox.deny_read[n + 1] = NULL;
	}
	config_free(c);
	*c = tmp;
	return 0;
}

int config_load_text(struct config *c, const char *name, const char *base_dir,
		     const char *text, size_t len, char **ret_err)
{
	return load_text(c, name, base_dir, text, len, false, ret_err);
}

static int load(struct config *c, const char *path, bool partial, char **ret_err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;

	int r = read_file_capped(path, CONFIG_MAX_BYTES, 0, &text, &len);
	if (r == -EFBIG) {
		*ret_err = xasprintf("%s: larger than %u bytes", path, CONFIG_MAX_BYTES);
		return r;
	}
	if (r < 0) {
		*ret_err = xasprintf("%s: %s", path, strerror(-r));
		return r;
	}

	/* Relative paths in the file are relative to the file's directory. */
	_cleanup_free_ char *abspath = NULL;
	if (path[0] == '/') {
		abspath = xstrdup(path);
	} else {
		_cleanup_free_ char *cwd = getcwd(NULL, 0);
		if (!cwd) {
			r = -errno;
			*ret_err = xasprintf("%s: cannot determine the working directory: %s",
					     path, strerror(-r));
			return r;
		}
		abspath = xasprintf("%s/%s", cwd, path);
	}
	char *slash = strrchr(abspath, '/');
	if (slash == abspath)
		slash[1] = '\0';	/* a file in "/" */
	else
		*slash = '\0';

	return load_text(c, path, abspath, text, len, partial, ret_err);
}

int config_load(struct config *c, const char *path, char **ret_err)
{
	return load(c, path, false, ret_err);
}

int config_check(struct config *c, const char *path, char **ret_err)
{
	return load(c, path, true, ret_err);
}
