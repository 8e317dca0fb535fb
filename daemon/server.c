/* SPDX-License-Identifier: MIT */
/*
 * The server: the listening socket (ours, or systemd's), accepting with
 * peer checks and fd-exhaustion recovery, signals, readiness and watchdog
 * notification, live reload of the tool files, and the graceful stop.
 *
 * Long because the daemon's life cycle (start-up, reload, stop) touches
 * every subsystem it owns, and reads best as one sequence; the checks
 * --check-config shares with start-up live in preflight.c.
 */
#include "daemon/server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "daemon/durable.h"
#include "daemon/load.h"
#include "daemon/log.h"
#include "daemon/methods.h"
#include "daemon/preflight.h"
#include "daemon/providers.h"
#include "lib/audit.h"
#include "lib/dispatch.h"
#include "lib/iopool.h"
#include "lib/loop.h"
#include "lib/registry.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "lib/workspace.h"
#include "lib/workspace_root.h"
#include "proto/json.h"
#include "tools/mcp.h"

#define ACCEPT_BURST 64

/* --- the listening socket ---------------------------------------------- */

/* Removes a socket file nobody listens on; refuses a live one. */
static int clear_stale(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	close(fd);
	if (r == 0)
		return -EADDRINUSE;
	if (e != ECONNREFUSED)
		return -e;
	return unlink(path) < 0 ? -errno : 0;
}

static int listen_on(struct server *s, const char *path, char **ret_err)
{
	/* Checks the length, and makes the directory when it is a per-daemon
	 * one that does not exist yet. */
	int r = preflight_socket(path, true, ret_err);
	if (r < 0)
		return r;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, path);

	r = clear_stale(path);
	if (r == -EADDRINUSE) {
		*ret_err = xasprintf("%s: another toolcalld is already listening there", path);
		return r;
	}
	if (r == -EEXIST) {
		*ret_err = xasprintf("%s: exists and is not a socket", path);
		return r;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*ret_err = xasprintf("socket: %s", strerror(errno));
		return -errno;
	}
	/* Create the socket file with its final mode: no window in which a
	 * wider mode lets someone else connect. */
	mode_t old = umask(~s->cfg.socket_mode & 0777);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	umask(old);
	if (r < 0) {
		*ret_err = xasprintf("%s: bind: %s", path, strerror(e));
		close(fd);
		return -e;
	}
	if (chmod(path, s->cfg.socket_mode) < 0)
		log_warning("chmod %s: %s", path, strerror(errno));
	if (listen(fd, SOMAXCONN) < 0) {
		e = errno;
		*ret_err = xasprintf("%s: listen: %s", path, strerror(e));
		close(fd);
		unlink(path);
		return -e;
	}
	s->listen_fd = fd;
	s->socket_owned = true;
	return 0;
}

/* Takes the socket systemd passed, if any. */
static int listen_activated(struct server *s)
{
	int n = sd_listen_fds(1);
	if (n <= 0)
		return 0;
	int fd = SD_LISTEN_FDS_START;
	if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
		log_error("the fd systemd passed is not a listening Unix stream socket");
		return -EINVAL;
	}
	for (int i = 1; i < n; i++)
		close(SD_LISTEN_FDS_START + i);
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		int e = errno;
		log_error("the socket systemd passed: fcntl: %s", strerror(e));
		return -e;
	}
	s->listen_fd = fd;
	s->socket_owned = false;
	return 1;
}

/* --- accepting --------------------------------------------------------- */

/* True when a listed group is the peer's primary group (SO_PEERCRED) or
 * one of its supplementary groups (SO_PEERGROUPS, Linux 4.13): both as
 * they were when it connected, from the kernel. */
static bool peer_in_groups(const struct server *s, int fd, gid_t primary)
{
	for (size_t i = 0; i < s->cfg.peers.n_gids; i++)
		if (s->cfg.peers.gids[i] == primary)
			return true;
	gid_t small[64];
	_cleanup_free_ gid_t *big = NULL;
	gid_t *groups = small;
	socklen_t len = sizeof(small);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
		if (errno != ERANGE)
			return false;
		/* The kernel said how much room the list needs. */
		groups = big = xmalloc(len);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
			return false;
	}
	for (size_t k = 0; k < len / sizeof(gid_t); k++)
		for (size_t i = 0; i < s->cfg.peers.n_gids; i++)
			if (s->cfg.peers.gids[i] == groups[k])
				return true;
	return false;
}

static bool peer_allowed(const struct server *s, int fd, const struct ucred *cred)
{
	if (!s->cfg.peers.n_uids && !s->cfg.peers.n_gids)
		return true;
	if (cred->uid == s->uid)
		return true;
	for (size_t i = 0; i < s->cfg.peers.n_uids; i++)
		if (s->cfg.peers.uids[i] == cred->uid)
			return true;
	return s->cfg.peers.n_gids && peer_in_groups(s, fd, cred->gid);
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* True when the peer is a process some call started (a descendant of the
 * daemon, or in a call's cgroup): it could approve its own confirmations
 * or reach unconfined tools. The peer's pidfd (Linux 6.5) pins it while
 * its ancestry is read. */
static bool peer_sandboxed(int fd, const struct ucred *cred)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
		pidfd = -1;
	bool r = sandbox_pid_confined(cred->pid, pidfd);
	if (pidfd >= 0)
		close(pidfd);
	return r;
}

/*
 * Connections live at fds CONN_FD_FLOOR and above when the fd limit
 * allows, so that the fds below (the listener, pipes and pidfds of
 * children, files being read) stay few: a child copies only the fds below
 * its own (lib/child.c), so spawning costs the same with ten thousand
 * connections open. Where the limit is lower, the fd stays where it is.
 */
#define CONN_FD_FLOOR 1024

static int fd_move_high(int fd)
{
	if (fd >= CONN_FD_FLOOR)
		return fd;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, CONN_FD_FLOOR);
	if (high < 0)
		return fd;
	close(fd);
	return high;
}

static void on_accept_retry(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct server *s = container_of(w, struct server, accept_retry);
	if (!s->stopping)
		ev_io_start(ev, &s->accept_w);
}

/* Refuses a connection of a uid that has as many as it may: one error
 * line says why (the socket is new: it has room for it), then it is closed.
 * The uid's other connections, and other uids', are untouched. */
static void refuse_over_uid(struct server *s, int fd, const struct peer *p)
{
	s->conns_refused++;
	_cleanup_free_ char *msg = xasprintf("Connection refused: uid %u has %u connections open, as many as "
					     "limits.per_uid_connections allows; close some first",
					     (unsigned)p->uid, p->conns);
	struct buf b = {0};
	jrpc_write_error(&b, NULL, 0, JRPC_INVALID_REQUEST, msg, "{\"kind\":\"overloaded\",\"retryable\":true}", 38);
	buf_putc(&b, '\n');
	(void)!send(fd, buf_head(&b), buf_size(&b), MSG_NOSIGNAL | MSG_DONTWAIT);
	buf_free(&b);
	close(fd);
	log_debug("refusing a connection of uid %u: %u open (limits.per_uid_connections)", (unsigned)p->uid,
		  p->conns);
}

/* A crowd (connections or calls) this large arms the trim timer. */
#define TRIM_CROWD 64

/* Remembers the largest crowd since the last trim, and arms the timer
 * that gives its memory back once it has gone: only then, so that an
 * idle daemon is never woken for nothing. */
static void note_crowd(struct server *s, unsigned now)
{
	if (now > s->peak_conns)
		s->peak_conns = now;
	if (s->peak_conns >= TRIM_CROWD && !ev_is_active(&s->trim_w))
		ev_timer_again(s->ev, &s->trim_w);
}

static void on_accept(struct ev_loop *ev, ev_io *w, int revents)
{
	struct server *s = container_of(w, struct server, accept_w);
	for (int i = 0; i < ACCEPT_BURST; i++) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return;
			if (errno == EMFILE || errno == ENFILE) {
				/* Out of fds: use the spare to take the connection
				 * off the queue and close it, so the listener does
				 * not spin, then pause accepting briefly. */
				if (s->spare_fd >= 0) {
					close(s->spare_fd);
					int victim = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
					if (victim >= 0)
						close(victim);
					s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				}
				s->conns_refused++;
				log_warning("out of file descriptors; refusing connections for 100 ms");
				ev_io_stop(ev, &s->accept_w);
				ev_timer_set(&s->accept_retry, 0.1, 0.0);
				ev_timer_start(ev, &s->accept_retry);
				return;
			}
			log_warning("accept: %s", strerror(errno));
			return;
		}
		struct ucred cred;
		socklen_t len = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
			close(fd);
			continue;
		}
		if (peer_sandboxed(fd, &cred)) {
			log_warning("refusing connection from pid %d (uid %u): a process started by a tool call "
				    "(sandboxed) may not be a peer of the daemon", (int)cred.pid, (unsigned)cred.uid);
			s->conns_refused++;
			close(fd);
			continue;
		}
		if (!peer_allowed(s, fd, &cred)) {
			log_info("refusing connection from uid %u gid %u pid %d", (unsigned)cred.uid,
				 (unsigned)cred.gid, (int)cred.pid);
			s->conns_refused++;
			close(fd);
			continue;
		}
		if (s->n_conns >= s->cfg.limits.max_connections) {
			s->conns_refused++;
			close(fd);
			continue;
		}
		const struct peer *p = peers_find(&s->peers, cred.uid);
		if (p && p->conns >= s->cfg.limits.per_uid_connections) {
			refuse_over_uid(s, fd, p);
			continue;
		}
		conn_new(s, fd_move_high(fd), &cred);
		note_crowd(s, s->n_conns);
	}
}

/* --- the loop's housekeeping ------------------------------------------- */

static void check_stopped(struct server *s)
{
	if (s->winding_down) {
		/* Cancelled children are being killed: wait for them to go. */
		if (dispatch_abandoned(s->dispatcher) == 0)
			ev_break(s->ev, EVBREAK_ALL);
		return;
	}
	/* Lines already read are requests accepted: they are handled too. */
	if (s->stopping && dispatch_inflight(s->dispatcher) == 0 && list_empty(&s->backlog))
		ev_break(s->ev, EVBREAK_ALL);
}

/* Runs before the loop blocks: serve the backlog within what is left of
 * the turn, write what was queued, start the next turn. */
static void on_prepare(struct ev_loop *ev, ev_prepare *w, int revents)
{
	struct server *s = container_of(w, struct server, flush_w);
	if (!list_empty(&s->backlog))
		conn_run_backlog(s);
	while (!list_empty(&s->dirty)) {
		struct conn *c = list_first(&s->dirty, struct conn, dirty_node);
		list_remove(&c->dirty_node);
		conn_flush(c);
	}
	conn_evict(s);
	conn_reap(s);
	conn_turn_reset(s);
	if (!ev_is_active(&s->trim_w))
		note_crowd(s, s->n_pendings);
	/* Lines still waiting: the next poll must not block. */
	if (!list_empty(&s->backlog))
		ev_idle_start(ev, &s->kick);
	check_stopped(s);
}

static void on_kick(struct ev_loop *ev, ev_idle *w, int revents)
{
	ev_idle_stop(ev, w);
}

/*
 * Once the connections (or calls) have fallen below half of their peak,
 * hands the memory they used back to the system: malloc keeps freed pages
 * for reuse, so after 16,000 connections came and went the daemon would
 * keep their memory for good.
 */
static void on_trim(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct server *s = container_of(w, struct server, trim_w);
	unsigned now = MAX(s->n_conns, dispatch_inflight(s->dispatcher));
	if (now > s->peak_conns)
		s->peak_conns = now;
	if (s->peak_conns >= TRIM_CROWD && now < s->peak_conns / 2) {
		malloc_trim(0);
		s->peak_conns = now;
	}
	/* No crowd left to watch: sleep until the next one. */
	if (s->peak_conns < TRIM_CROWD)
		ev_timer_stop(ev, w);
}

static void on_watchdog(struct ev_loop *ev, ev_timer *w, int revents)
{
	sd_notify(0, "WATCHDOG=1");
}

static void on_grace(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct server *s = container_of(w, struct server, grace_w);
	log_info("grace period over: cancelling %u calls", dispatch_inflight(s->dispatcher));
	dispatch_cancel_all(s->dispatcher, "toolcalld is shutting down; the call was cancelled");
	ev_break(ev, EVBREAK_ALL);
}

static void on_wind_down_timeout(struct ev_loop *ev, ev_timer *w, int revents)
{
	log_warning("children of cancelled calls are still running; exiting anyway");
	ev_break(ev, EVBREAK_ALL);
}

void server_stop(struct server *s)
{
	if (s->stopping)
		return;
	s->stopping = true;
	sd_notify(0, "STOPPING=1");
	log_info("stopping: %u calls in flight, grace %llu ms", dispatch_inflight(s->dispatcher),
		 (unsigned long long)s->cfg.grace_ms);
	ev_io_stop(s->ev, &s->accept_w);
	ev_timer_stop(s->ev, &s->accept_retry);
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		s->listen_fd = -1;
	}
	if (s->socket_owned) {
		unlink(s->socket_path);
		s->socket_owned = false;
	}
	ev_timer_set(&s->grace_w, (double)s->cfg.grace_ms / 1000.0, 0.0);
	ev_timer_start(s->ev, &s->grace_w);
	check_stopped(s);
}

/* Reloads and logs the outcome: "FAILED: error" or "DONE: what changed". */
static void reload_and_log(struct server *s, const char *failed, const char *done)
{
	_cleanup_free_ char *result = NULL, *err = NULL;
	if (server_reload(s, &result, &err) < 0)
		log_error("%s: %s", failed, err);
	else
		log_info("%s: %s", done, result);
}

static void on_signal(struct ev_loop *ev, ev_signal *w, int revents)
{
	struct server *s = w->data;
	if (w->signum == SIGHUP) {
		reload_and_log(s, "reload failed, the previous configuration stays in force", "reloaded");
		if (s->audit && audit_reopen(s->audit) < 0)
			log_error("cannot reopen the audit log %s", s->cfg.audit_log);
		return;
	}
	server_stop(s);
}

/* --- configuration and reload ------------------------------------------ */

static void apply_config(struct server *s)
{
	struct config *c = &s->cfg;
	struct dispatch_config dc;
	dispatch_config_defaults(&dc);
	dc.max_concurrent = c->limits.max_concurrent;
	dc.session_concurrency = c->limits.session_concurrency;
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
	dc.confirm_timeout_ms = c->confirmation.timeout_ms;
	dc.no_approver_wait = c->confirmation.no_approver_wait;
	dc.max_json_depth = c->limits.max_json_depth;
	s->env.shell_env_allow = (const char *const *)c->tools.shell_env_allow;
	s->env.output_cap = (size_t)c->tools.shell_output_cap;
	s->env.read_cap = (size_t)c->tools.read_file_limit;
	s->env.sandbox = &c->sandbox;
	/* The rules are made again from the new settings (and pick up
	 * entries created since along the denied paths). */
	sandbox_cache_clear();
	s->env.run_as_peer = c->sandbox.run_as_peer;
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
	s->ws_roots = ws_roots_free(s->ws_roots);
	s->ws_roots = methods_resolve_roots(s);
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

static void setup_providers(struct server *s)
{
	providers_setup(&s->providers, s->loop, &s->env, s->default_ws->root, on_provider_settled, s);
}

int server_reload(struct server *s, char **ret_result, char **ret_err)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)mono_ms() * 1000ULL);
	sd_notify(0, buf);

	struct config fresh;
	config_init(&fresh);
	struct config *cfg = &s->cfg;
	if (s->config_path) {
		int r = config_load(&fresh, s->config_path, ret_err);
		if (r < 0) {
			config_free(&fresh);
			sd_notify(0, "READY=1");
			return r;
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
		sd_notify(0, "READY=1");
		return r;
	}

	if (s->config_path) {
		/* What cannot change while running stays: the socket and the
		 * flags given on the command line. */
		free(fresh.socket);
		fresh.socket = s->cfg.socket ? xstrdup(s->cfg.socket) : NULL;
		free(fresh.workspace);
		fresh.workspace = xstrdup(s->cfg.workspace);
		if (!(fresh.audit_log == s->cfg.audit_log || str_eq(fresh.audit_log, s->cfg.audit_log)))
			log_warning("audit_log changes take effect at restart");
		free(fresh.audit_log);
		fresh.audit_log = s->cfg.audit_log ? xstrdup(s->cfg.audit_log) : NULL;
		config_free(&s->cfg);
		s->cfg = fresh;
		apply_config(s);
	} else {
		config_free(&fresh);
	}

	providers_clear(&s->providers);
	s->providers = next;
	setup_providers(s);
	*ret_result = swap_registry(s, reg, true);
	watch_tools_dir(s);
	sd_notify(0, "READY=1");
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
	reload_and_log(s, "tool files changed but do not load, the previous registry stays",
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

/* --- life cycle -------------------------------------------------------- */

/* Logs the audit log's outages (their start and their end). */
static void on_audit_log(void *userdata, bool error, const char *msg)
{
	log_msg(error ? LOG_ERR : LOG_NOTICE, "%s", msg);
}

static void warn_log(const char *msg)
{
	log_warning("%s", msg);
}

int server_init(struct server *s, char **ret_err)
{
	s->listen_fd = -1;
	s->inotify_fd = -1;
	s->uid = getuid();
	s->started_ms = mono_ms();
	list_init(&s->conns);
	list_init(&s->dirty);
	list_init(&s->backlog);
	list_init(&s->spare_pendings);
	list_init(&s->graveyard);
	list_init(&s->deferred);
	peers_init(&s->peers);
	s->sink = methods_handle;
	event_bus_init(&s->bus);
	/* Not the default loop: that one reaps every child on SIGCHLD, racing
	 * lib/child.c's waitid on the pidfd, which then loses the exit status. */
	s->ev = ev_loop_new(EVFLAG_AUTO);
	s->loop = tc_loop_ev_new(s->ev);
	s->sessions = session_table_new();

	int r = preflight_workspace(s->cfg.workspace, ret_err);
	if (r < 0)
		return r;
	r = preflight_allowed(&s->cfg, warn_log, ret_err);
	if (r < 0)
		return r;
	if (s->cfg.audit_log) {
		r = preflight_audit_log(s->cfg.audit_log, ret_err);
		if (r < 0)
			return r;
	}
	r = ws_open(s->cfg.workspace, &s->default_ws);
	if (r < 0) {
		*ret_err = xasprintf("workspace %s: %s", s->cfg.workspace, strerror(-r));
		return r;
	}
	/* Before any child: also makes the daemon child subreaper. */
	_cleanup_free_ char *line = sandbox_features_line(sandbox_probe(s->cfg.sandbox.cgroup_dir));
	log_info("%s", line);
	r = registry_build(&s->cfg, NULL, &s->providers, &s->registry, ret_err);
	if (r < 0)
		return r;
	apply_config(s);
	r = durable_open(s, ret_err);
	if (r < 0)
		return r;
	setup_providers(s);
	dispatch_set_registry(s->dispatcher, s->registry);
	r = iopool_new(s->loop, s->cfg.limits.io_threads, &s->iopool);
	if (r < 0) {
		*ret_err = xasprintf("io threads: %s", strerror(-r));
		return r;
	}
	s->env.pool = s->iopool;
	if (s->cfg.audit_log) {
		const struct audit_opts ao = {
			.flush_ms = s->cfg.audit_fsync_ms,
			.pool = s->iopool,
			.on_error = s->cfg.audit_on_error,
			.log = on_audit_log,
		};
		r = audit_open_with(s->cfg.audit_log, s->loop, &ao, &s->audit);
		if (r < 0) {
			*ret_err = xasprintf("audit log %s: %s", s->cfg.audit_log, strerror(-r));
			return r;
		}
		dispatch_set_audit(s->dispatcher, s->audit);
	}

	s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	r = listen_activated(s);
	if (r < 0) {
		*ret_err = xstrdup("unusable socket from systemd");
		return r;
	}
	if (r == 0) {
		s->socket_path = s->cfg.socket ? xstrdup(s->cfg.socket) : config_default_socket();
		r = listen_on(s, s->socket_path, ret_err);
		if (r < 0)
			return r;
	}

	ev_io_init(&s->accept_w, on_accept, s->listen_fd, EV_READ);
	ev_io_start(s->ev, &s->accept_w);
	ev_init(&s->accept_retry, on_accept_retry);
	ev_idle_init(&s->kick, on_kick);
	ev_prepare_init(&s->flush_w, on_prepare);
	ev_prepare_start(s->ev, &s->flush_w);
	ev_init(&s->grace_w, on_grace);
	ev_signal_init(&s->sig_term, on_signal, SIGTERM);
	ev_signal_init(&s->sig_int, on_signal, SIGINT);
	ev_signal_init(&s->sig_hup, on_signal, SIGHUP);
	s->sig_term.data = s->sig_int.data = s->sig_hup.data = s;
	ev_signal_start(s->ev, &s->sig_term);
	ev_signal_start(s->ev, &s->sig_int);
	ev_signal_start(s->ev, &s->sig_hup);
	ev_init(&s->reload_debounce, on_reload_debounce);
	ev_init(&s->trim_w, on_trim);
	s->trim_w.repeat = 5.0;
	watch_tools_dir(s);

	uint64_t usec = 0;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		ev_timer_init(&s->watchdog_w, on_watchdog, (double)usec / 2e6, (double)usec / 2e6);
		ev_timer_start(s->ev, &s->watchdog_w);
	}
	return 0;
}

/* Gives queued answers a last chance to reach their clients. */
static void drain_output(struct server *s, int timeout_ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
	for (;;) {
		bool pending = false;
		struct list *pos, *tmp;
		list_foreach_safe(pos, tmp, &s->conns) {
			struct conn *c = list_entry(pos, struct conn, node);
			conn_flush(c);
			if (!c->dead && buf_size(&c->out))
				pending = true;
		}
		conn_reap(s);
		if (!pending || mono_ms() >= deadline)
			return;
		struct pollfd pfds[256];
		nfds_t n = 0;
		list_foreach_safe(pos, tmp, &s->conns) {
			struct conn *c = list_entry(pos, struct conn, node);
			if (buf_size(&c->out) && n < ELEMENTSOF(pfds))
				pfds[n++] = (struct pollfd){ .fd = c->fd, .events = POLLOUT };
		}
		poll(pfds, n, 50);
	}
}

int server_run(struct server *s)
{
	char status[PATH_MAX + 64];
	snprintf(status, sizeof(status), "READY=1\nSTATUS=Serving %zu tools on %s", s->registry->n,
		 s->socket_path ? s->socket_path : "the socket systemd passed");
	sd_notify(0, status);
	log_info("serving %zu tools on %s, workspace %s", s->registry->n,
		 s->socket_path ? s->socket_path : "(socket activation)", s->default_ws->root);
	ev_run(s->ev, 0);
	/* Stopped: every call has been answered or cancelled; let the
	 * answers out. Lines still in the backlog (the grace period ran out)
	 * are not started now. */
	while (!list_empty(&s->backlog))
		list_remove(s->backlog.next);
	dispatch_cancel_all(s->dispatcher, "toolcalld is shutting down; the call was cancelled");
	on_prepare(s->ev, &s->flush_w, 0);
	drain_output(s, 2000);
	/* Children of cancelled calls get SIGTERM, then SIGKILL after 5 s:
	 * keep the loop turning until they are gone (bounded), so none is
	 * left behind and nothing they hold is lost. */
	if (dispatch_abandoned(s->dispatcher) > 0) {
		s->winding_down = true;
		ev_timer_stop(s->ev, &s->grace_w);
		ev_init(&s->grace_w, on_wind_down_timeout);
		ev_timer_set(&s->grace_w, 7.0, 0.0);
		ev_timer_start(s->ev, &s->grace_w);
		ev_run(s->ev, 0);
	}
	return 0;
}

void server_free(struct server *s)
{
	while (!list_empty(&s->conns))
		conn_close(list_first(&s->conns, struct conn, node));
	conn_reap(s);
	conn_free_spares(s);
	durable_close(s);
	s->dispatcher = dispatcher_free(s->dispatcher);
	providers_clear(&s->providers);
	s->audit = audit_close(s->audit);
	s->iopool = iopool_free(s->iopool);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->socket_owned)
		unlink(s->socket_path);
	if (s->inotify_fd >= 0)
		close(s->inotify_fd);
	free(s->tools_name);
	if (s->spare_fd >= 0)
		close(s->spare_fd);
	registry_unref(s->registry);
	ws_unref(s->default_ws);
	s->ws_roots = ws_roots_free(s->ws_roots);
	s->sessions = session_table_free(s->sessions);
	peers_done(&s->peers);
	sandbox_shutdown();
	tc_loop_ev_free(s->loop);
	if (s->ev) {
		ev_signal_stop(s->ev, &s->sig_term);
		ev_signal_stop(s->ev, &s->sig_int);
		ev_signal_stop(s->ev, &s->sig_hup);
		ev_loop_destroy(s->ev);
		s->ev = NULL;
	}
	free(s->socket_path);
	free(s->config_path);
	config_free(&s->cfg);
}
