/* SPDX-License-Identifier: MIT */
/*
 * Configuration and live reload: applying a config to the dispatcher and
 * the connections' limits, rebuilding the registry (SIGHUP, admin/reload,
 * a change in tools_dir seen by inotify, debounced), and the MCP providers
 * whose tools are imported when they start.
 */
#include "daemon/server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/client_session.h"
#include "daemon/conn.h"
#include "daemon/store_binding.h"
#include "daemon/load.h"
#include "daemon/log.h"
#include "daemon/systemd.h"
#include "daemon/methods.h"
#include "daemon/preflight.h"
#include "daemon/providers.h"
#include "daemon/server_internal.h"
#include "lib/base/audit.h"
#include "lib/dispatch/dispatch.h"
#include "lib/base/iopool.h"
#include "lib/base/loop.h"
#include "lib/registry.h"
#include "daemon/egress.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "lib/process/process.h"
#include "lib/files/workspace_root.h"
#include "proto/base/strv.h"
#include "proto/json.h"
#include "tools/command.h"
#include "tools/mcp/mcp.h"

/* --- configuration and reload ------------------------------------------ */

/* Adds path to the sandbox's deny_read, once. */
static void deny_read_add(struct config *c, const char *path)
{
	size_t n = 0;
	for (; c->sandbox.deny_read[n]; n++)
		if (strcmp(c->sandbox.deny_read[n], path) == 0)
			return;
	c->sandbox.deny_read = xreallocarray(c->sandbox.deny_read, n + 2, sizeof(char *));
	c->sandbox.deny_read[n] = xstrdup(path);
	c->sandbox.deny_read[n + 1] = NULL;
}

/* The roots the daemon serves, canonical: its workspace and
 * workspaces.allowed (NULL-terminated). */
static char **served_roots(const struct config *c)
{
	char **v = xcalloc(c->n_workspaces_allowed + 2, sizeof(*v));
	size_t n = 0;
	char *real = c->workspace ? realpath(c->workspace, NULL) : NULL;
	if (real)
		v[n++] = real;
	for (size_t i = 0; i < c->n_workspaces_allowed; i++)
		if ((real = realpath(c->workspaces_allowed[i], NULL)))
			v[n++] = real;
	return v;
}

/*
 * The socket and its directory are the daemon's, as its config is: in a
 * workspace it serves (its own, or a root of workspaces.allowed), where a
 * child may write, both are denied, and covered there,
 * so that a child can neither remove the socket nor change the
 * directory's mode or entries (the workspace's top itself, when it holds
 * the socket, stays the workspace's). Elsewhere they are read-only to
 * children already, and a denied path would cost a Landlock rule for each
 * entry of its parent (/tmp's, /run's).
 */
static void protect_socket(struct server *s)
{
	struct config *c = &s->cfg;
	_cleanup_free_ char *sock = s->socket_path ? xstrdup(s->socket_path)
				  : c->socket ? xstrdup(c->socket) : config_default_socket();
	if (!sock || sock[0] != '/')
		return;
	char *slash = strrchr(sock, '/');
	_cleanup_free_ char *dir = slash == sock ? xstrdup("/") : xstrndup(sock, (size_t)(slash - sock));
	_cleanup_free_ char *real = realpath(dir, NULL);
	const char *d = real ? real : dir;
	_cleanup_(strv_freep) char **roots = served_roots(c);
	for (char **ws = roots; *ws; ws++) {
		size_t n = strlen(*ws);
		if (strncmp(d, *ws, n) != 0 || (d[n] != '/' && d[n] != '\0'))
			continue;
		_cleanup_free_ char *path = xasprintf("%s%s", d, slash);
		deny_read_add(c, path);
		if (d[n] == '/')
			deny_read_add(c, d);
	}
}

/* Adds path to the sandbox's read_only, once. */
static void read_only_add(struct config *c, const char *path)
{
	size_t n = 0;
	for (; c->sandbox.read_only && c->sandbox.read_only[n]; n++)
		if (strcmp(c->sandbox.read_only[n], path) == 0)
			return;
	c->sandbox.read_only = xreallocarray(c->sandbox.read_only, n + 2, sizeof(char *));
	c->sandbox.read_only[n] = xstrdup(path);
	c->sandbox.read_only[n + 1] = NULL;
}

/* The daemon's own files, where a workspace holds them (strictly beneath
 * its top), are read-only to children and refused to the file tools: the
 * config file, and its directory (its tool files and hook scripts usually
 * sit beside it, as in ~/.config/toolcalld under a $HOME workspace; a
 * workspace's top itself stays writable, the config there held alone),
 * tools_dir, the audit log, the socket and its directory, and the Redis
 * store's socket and its directory (a child that put its own socket there
 * would be the store the daemon trusts). */
static void protect_own(struct server *s)
{
	struct config *c = &s->cfg;
	char *slash = s->config_path ? strrchr(s->config_path, '/') : NULL;
	if (s->config_path)
		read_only_add(c, s->config_path);
	if (slash && slash != s->config_path) {
		_cleanup_free_ char *dir = xstrndup(s->config_path, (size_t)(slash - s->config_path));
		read_only_add(c, dir);
	}
	const char *addr = str_eq(c->store.kind, "redis") ? c->store.address : NULL;
	const char *redis = addr && str_has_prefix(addr, "unix:") ? addr + 5 : NULL;
	const char *own[] = { c->tools_dir, c->audit_log, s->socket_path ? s->socket_path : c->socket, redis };
	for (size_t i = 0; i < ELEMENTSOF(own); i++) {
		/* Canonical, made or not yet (the socket is made after this). */
		const char *base = own[i] && own[i][0] == '/' ? strrchr(own[i], '/') : NULL;
		if (!base || !base[1] || base == own[i])
			continue;
		_cleanup_free_ char *dir = xstrndup(own[i], (size_t)(base - own[i]));
		_cleanup_free_ char *real = realpath(dir, NULL);
		if (!real)
			continue;
		_cleanup_free_ char *path = xasprintf("%s%s", real, base);
		read_only_add(c, path);
		if (i >= ELEMENTSOF(own) - 2)
			read_only_add(c, real);	/* a socket's directory too */
	}
}

/*
 * What the config makes the daemon run later, where a workspace it serves
 * holds it, is read-only to children and refused to the file tools, as
 * its own files are: hook scripts, command tools' programs, MCP servers'
 * programs, and the script an interpreter among them runs (sandbox.h's
 * sandbox_read_only_argv()). Else a sandboxed call could rewrite a
 * program that the daemon runs for the next call, maybe as another
 * identity.
 */
static void protect_programs(struct server *s)
{
	struct config *c = &s->cfg;
	_cleanup_(strv_freep) char **roots = served_roots(c);
	const char *const *r = (const char *const *)roots;
	const struct hook *lists[] = { c->hooks.pre, c->hooks.post };
	const size_t counts[] = { c->hooks.n_pre, c->hooks.n_post };
	for (size_t l = 0; l < ELEMENTSOF(lists); l++)
		for (size_t i = 0; i < counts[l]; i++)
			sandbox_read_only_argv(&c->sandbox, (const char *const *)lists[l][i].argv, "/", r);
	for (size_t i = 0; i < s->providers.n; i++)
		sandbox_read_only_argv(&c->sandbox, mcp_provider_argv(s->providers.v[i]), roots[0], r);
	for (size_t i = 0; s->registry && i < s->registry->n; i++) {
		_cleanup_(strv_freep) char **argv = command_tool_argv(s->registry->tools[i]);
		/* A relative name is taken from each root, the calls' working
		 * directory. */
		for (char **ws = roots; argv && *ws; ws++)
			sandbox_read_only_argv(&c->sandbox, (const char *const *)argv, *ws, r);
	}
}

/* The daemon's own paths and the programs it runs, read-only (made again
 * from the config, the registry and the providers in force). */
static void read_only_rebuild(struct server *s)
{
	s->cfg.sandbox.read_only = strv_free(s->cfg.sandbox.read_only);
	protect_own(s);
	protect_programs(s);
}

void server_apply_config(struct server *s)
{
	struct config *c = &s->cfg;
	struct dispatch_config dc;
	dispatch_config_defaults(&dc);
	dc.max_concurrent = c->limits.max_concurrent;
	dc.session_concurrency = c->limits.session_concurrency;
	dc.per_uid_running = c->limits.per_uid_running;
	dc.queue_max = c->limits.queue_max;
	dc.queue_max_total = c->limits.queue_max_total;
	dc.max_attempts = c->retry.max_attempts;
	dc.base_delay_ms = c->retry.base_delay_ms;
	dc.max_delay_ms = c->retry.max_delay_ms;
	dc.per_uid_queue = c->limits.per_uid_queue;
	dc.session_confirmations = c->limits.session_confirmations;
	dc.idem_ttl_ms = c->idempotency.ttl_ms;
	dc.idem_max_entries = (size_t)c->idempotency.max_entries;
	dc.idem_max_bytes = c->idempotency.max_bytes;
	dc.circuit_failures = c->circuit.failures;
	dc.circuit_window_ms = c->circuit.window_ms;
	dc.circuit_open_ms = c->circuit.open_ms;
	dc.max_json_depth = c->limits.max_json_depth;
	s->env.shell_env_allow = (const char *const *)c->tools.shell_env_allow;
	s->env.output_cap = (size_t)c->tools.shell_output_cap;
	s->env.read_cap = (size_t)c->tools.read_file_limit;
	s->env.read_lines = c->limits.read_default_lines;
	s->env.read_bytes = (size_t)c->limits.read_default_bytes;
	s->env.shell_text_cap = (size_t)c->limits.shell_output_kb << 10;
	protect_socket(s);
	read_only_rebuild(s);
	s->env.sandbox = &c->sandbox;
	daemon_net_apply(s);
	if (!c->memory.dir)
		c->memory.dir = config_default_memory_dir();
	s->env.memory_dir = c->memory.dir;
	s->env.memory_per_workspace = c->memory.per_workspace;
	s->env.memory_max_file = (size_t)c->memory.max_file_kb << 10;
	s->env.memory_max_total = (size_t)c->memory.max_total_kb << 10;
	bool redis = str_eq(c->store.kind, "redis");
	s->env.memory_redis = redis ? c->store.address : NULL;
	s->env.memory_redis_prefix = c->store.prefix;
	s->env.memory_redis_timeout_ms = (uint32_t)c->store.timeout_ms;
	s->env.memory_redis_uid = c->store.server_uid;
	if (!s->env.processes)
		s->env.processes = process_table_new(s->loop, &s->bus);
	struct process_limits pl = PROCESS_LIMITS_DEFAULT;
	pl.per_uid = c->limits.per_uid_processes;
	pl.keep_max = c->limits.process_keep_max;
	pl.buffer_bytes = (size_t)c->limits.process_buffer_kb * 1024;
	pl.idle_ms = c->limits.process_idle_s * 1000;
	pl.lifetime_ms = c->limits.process_lifetime_s * 1000;
	pl.keep_ms = c->limits.process_keep_s * 1000;
	pl.kill_grace_ms = c->limits.kill_grace_ms;
	pl.output_max = (size_t)c->limits.shell_output_kb * 1024;
	process_table_set_limits(s->env.processes, &pl);
	/* The rules are made again from the new settings (and pick up
	 * entries created since along the denied paths). */
	sandbox_cache_clear();
	session_table_set_run_as(s->sessions, c->sandbox.run_as_peer);
	if (s->dispatcher) {
		dispatch_set_config(s->dispatcher, &dc);
	} else {
		s->dispatcher = dispatcher_new(s->loop, &dc, &s->bus);
		dispatch_set_confirm_charge(s->dispatcher, peers_charge_uid, &s->peers);
	}
	dispatch_set_policy(s->dispatcher, &c->confirmation);
	dispatch_set_env(s->dispatcher, &s->env);
	dispatch_set_hooks(s->dispatcher, &c->hooks);
	log_set_level(c->log_level);
	const struct conn_limits cl = {
		.max_message_bytes = c->limits.max_message_bytes,
		.max_json_depth = c->limits.max_json_depth,
		.max_batch = c->limits.max_batch,
		.max_output_bytes = c->limits.max_output_bytes,
		.max_client_memory = c->limits.max_client_memory,
		.per_uid_memory = c->limits.per_uid_memory,
		.turn_budget_us = c->limits.turn_budget_us,
		.idle_timeout_ms = c->limits.idle_timeout_ms,
		.event_queue = c->limits.event_queue,
	};
	conns_set_limits(&s->conns, &cl);
	s->ws_roots = ws_roots_free(s->ws_roots);
	s->ws_roots = client_resolve_roots(s);
}

struct reload_arg {
	size_t n;
	const char *added, *removed, *changed;
};

static void extra_reloaded(struct jgen *g, void *arg)
{
	struct reload_arg *r = arg;
	jgen_kv_int(g, "tools", (int64_t)r->n);
	jgen_kv_raw(g, "added", r->added, strlen(r->added));
	jgen_kv_raw(g, "removed", r->removed, strlen(r->removed));
	jgen_kv_raw(g, "changed", r->changed, strlen(r->changed));
}

static void watch_tools_dir(struct server *s);

/* Puts a new registry in force; tells clients and subscribers. Returns
 * the {tools, added, removed, changed} summary. */
static char *swap_registry(struct server *s, struct registry *reg, bool always_notify)
{
	char *added, *removed, *changed;
	registry_diff(s->registry, reg, &added, &removed, &changed);
	bool same = str_eq(added, "[]") && str_eq(removed, "[]") && str_eq(changed, "[]");
	registry_unref(s->registry);
	s->registry = reg;
	read_only_rebuild(s);
	dispatch_set_registry(s->dispatcher, reg);
	s->reloads++;
	struct reload_arg ra = { reg->n, added, removed, changed };
	event_emit(&s->bus, "registry.reloaded", NULL, NULL, NULL, extra_reloaded, &ra);
	if (always_notify || !same)
		methods_broadcast_list_changed(s);
	char *result = xasprintf("{\"tools\":%zu,\"added\":%s,\"removed\":%s,\"changed\":%s}", reg->n, added,
				 removed, changed);
	free(added);
	free(removed);
	free(changed);
	return result;
}

/* An MCP provider finished importing (or failed): offer its tools. */
static void on_provider_settled(void *arg, struct mcp_provider *p)
{
	struct server *s = arg;
	if (mcp_provider_state(p) == MCP_FAILED)
		log_warning("%s", mcp_provider_error(p));
	else
		log_info("MCP server '%s' is ready", mcp_provider_name(p));
	server_refresh(s);
	const char *notes = mcp_provider_notes(p);
	if (notes && mcp_provider_state(p) != MCP_FAILED)
		log_warning("MCP server '%s': tools not offered: %s", mcp_provider_name(p), notes);
	methods_resume(s);
}

void server_setup_providers(struct server *s)
{
	providers_setup(&s->providers, s->loop, &s->env, s->default_ws->root, s->cfg.providers_retry_s,
			on_provider_settled, s);
}

void server_reload_and_log(struct server *s, const char *failed, const char *done)
{
	_cleanup_free_ char *result = NULL, *err = NULL;
	if (server_reload(s, &result, &err) < 0)
		log_error("%s: %s", failed, err);
	else
		log_info("%s: %s", done, result);
}

int server_reload(struct server *s, char **ret_result, char **ret_err)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)mono_ms() * 1000ULL);
	systemd_notify(buf);

	struct config fresh;
	config_init(&fresh);
	struct config *cfg = &s->cfg;
	if (s->config_path) {
		int r = config_check(&fresh, s->config_path, ret_err);
		if (r != 0) {
			/* The tool files' mistakes are reported in the same go. */
			struct registry *reg = NULL;
			struct providers next = {0};
			char *more = NULL;
			if (r > 0 && registry_build(&fresh, NULL, &next, &reg, &more) < 0) {
				char *all = xasprintf("%s\n%s", *ret_err, more);
				free(*ret_err);
				*ret_err = all;
			}
			free(more);
			registry_unref(reg);
			providers_clear(&next);
			config_free(&fresh);
			systemd_notify("READY=1");
			return r < 0 ? r : -EINVAL;
		}
		cfg = &fresh;
	}
	struct registry *reg = NULL;
	struct providers next = {0};
	int r = registry_build(cfg, &s->providers, &next, &reg, ret_err);
	if (r < 0) {
		config_free(&fresh);
		/* The directory may have been replaced: the watch follows. */
		watch_tools_dir(s);
		systemd_notify("READY=1");
		return r;
	}

	if (s->config_path) {
		/* What cannot change while running stays: the socket and the
		 * flags given on the command line. */
		if (!(fresh.socket == s->file_socket || str_eq(fresh.socket, s->file_socket)))
			log_warning("socket changes take effect at restart; the daemon goes on listening on %s",
				    s->socket_path ? s->socket_path : "the socket systemd passed");
		if (!(fresh.workspace == s->file_workspace || str_eq(fresh.workspace, s->file_workspace)))
			log_warning("workspace changes take effect at restart; new sessions go on starting in %s",
				    s->cfg.workspace);
		free(fresh.socket);
		fresh.socket = s->cfg.socket ? xstrdup(s->cfg.socket) : NULL;
		free(fresh.workspace);
		fresh.workspace = xstrdup(s->cfg.workspace);
		if (!(fresh.audit_log == s->cfg.audit_log || str_eq(fresh.audit_log, s->cfg.audit_log)))
			log_warning("audit_log changes take effect at restart");
		free(fresh.audit_log);
		fresh.audit_log = s->cfg.audit_log ? xstrdup(s->cfg.audit_log) : NULL;
		store_binding_reload(s, &fresh);
		config_free(&s->cfg);
		s->cfg = fresh;
		server_apply_config(s);
	} else {
		config_free(&fresh);
	}

	providers_clear(&s->providers);
	s->providers = next;
	server_setup_providers(s);
	*ret_result = swap_registry(s, reg, true);
	watch_tools_dir(s);
	systemd_notify("READY=1");
	return 0;
}

void server_refresh(struct server *s)
{
	struct registry *reg = NULL;
	struct providers next = {0};
	char *err = NULL;
	if (registry_build(&s->cfg, &s->providers, &next, &reg, &err) < 0) {
		log_error("cannot rebuild the registry: %s", err);
		free(err);
		return;
	}
	providers_clear(&s->providers);
	s->providers = next;
	free(swap_registry(s, reg, false));
}

static void on_reload_debounce(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct server *s = container_of(w, struct server, reload_debounce);
	server_reload_and_log(s, "tool files changed but do not load, the previous registry stays",
		       "tool files changed, reloaded");
}

/* True for an inotify event that may change the tool files: anything in
 * tools_dir itself, and in its parent only what happens to its name (the
 * directory replaced, moved away or made). */
static bool tools_event(const struct server *s, const struct inotify_event *ev)
{
	if (ev->wd != s->parent_wd)
		return true;
	return ev->len && str_eq(ev->name, s->tools_name);
}

static void on_inotify(struct ev_loop *ev, ev_io *w, int revents)
{
	struct server *s = container_of(w, struct server, inotify_w);
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool any = false;
	for (;;) {
		ssize_t n = read(s->inotify_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *e = (const struct inotify_event *)(buf + off);
			any |= tools_event(s, e);
			off += (ssize_t)(sizeof(*e) + e->len);
		}
	}
	if (any) {
		/* Editors write in several steps: wait for the dust to settle. */
		ev_timer_stop(ev, &s->reload_debounce);
		ev_timer_set(&s->reload_debounce, 0.2, 0.0);
		ev_timer_start(ev, &s->reload_debounce);
	}
}

/*
 * (Re)arms the watch on tools_dir, on every (re)load: the directory and
 * its parent, so that a tools_dir replaced by another (moved away and made
 * again, as deployment tools do) is noticed and then watched in its turn.
 */
static void watch_tools_dir(struct server *s)
{
	if (s->inotify_fd >= 0) {
		ev_io_stop(s->ev, &s->inotify_w);
		close(s->inotify_fd);
		s->inotify_fd = -1;
	}
	if (!s->cfg.tools_dir)
		return;
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0) {
		log_warning("inotify: %s; tool files reload on SIGHUP only", strerror(errno));
		return;
	}
	const uint32_t names = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM;
	if (inotify_add_watch(fd, s->cfg.tools_dir, names | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF |
				      IN_MOVE_SELF | IN_ONLYDIR) < 0)
		log_warning("cannot watch %s: %s; it is watched again at the next reload", s->cfg.tools_dir,
			    strerror(errno));
	/* The parent and the name in it, trailing slashes aside. */
	_cleanup_free_ char *parent = xstrdup(s->cfg.tools_dir);
	size_t n = strlen(parent);
	while (n > 1 && parent[n - 1] == '/')
		parent[--n] = '\0';
	char *slash = strrchr(parent, '/');
	free(s->tools_name);
	s->tools_name = xstrdup(slash ? slash + 1 : parent);
	if (slash == parent)
		parent[1] = '\0';	/* "/" */
	else if (slash)
		*slash = '\0';
	s->parent_wd = inotify_add_watch(fd, slash ? parent : ".", names | IN_ONLYDIR);
	s->inotify_fd = fd;
	ev_io_init(&s->inotify_w, on_inotify, fd, EV_READ);
	ev_io_start(s->ev, &s->inotify_w);
}

void server_watch_init(struct server *s)
{
	ev_init(&s->reload_debounce, on_reload_debounce);
	watch_tools_dir(s);
}
