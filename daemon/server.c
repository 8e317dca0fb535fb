/* SPDX-License-Identifier: MIT */
/*
 * The server's life cycle: start-up, the loop's housekeeping (flushing
 * output, trimming memory after a crowd), signals, readiness and watchdog
 * notification, and the graceful stop. The listening socket and accepting
 * live in server_listen.c, configuration and reload in server_reload.c,
 * the checks --check-config shares with start-up in preflight.c.
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
#include <unistd.h>

#include "daemon/client_session.h"
#include "daemon/conn.h"
#include "daemon/store_binding.h"
#include "daemon/load.h"
#include "daemon/log.h"
#include "daemon/systemd.h"
#include "daemon/methods.h"
#include "daemon/preflight.h"
#include "daemon/server_internal.h"
#include "daemon/providers.h"
#include "lib/base/audit.h"
#include "lib/process/process.h"
#include "lib/dispatch/dispatch.h"
#include "lib/store/store.h"
#include "lib/tasks/tasks.h"
#include "lib/base/iopool.h"
#include "lib/base/loop.h"
#include "lib/registry.h"
#include "daemon/egress.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "proto/json.h"
#include "tools/mcp/mcp.h"


/* What a call still in flight when the daemon stops is answered
 * (`cancelled`, with `data.restart: true`). */
#define MSG_STOPPED "toolcalld is stopping (a restart or a shutdown), so this call was cancelled before it " \
		    "finished; retry it when toolcalld is back"

/* A program the config names, refused (lib/sandbox/program.c). */
static void log_program_refusal(const char *message)
{
	log_warning("%s", message);
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
	/* Lines already read are requests accepted: they are handled too;
	 * and what the calls wrote to the shared store (outcomes, tasks,
	 * sessions) reaches it before the daemon goes (within the grace
	 * period; the store's own timeout ends an outage's wait). */
	if (!s->stopping || dispatch_inflight(s->dispatcher) > 0 || (!s->grace_over && !list_empty(&s->conns.backlog)))
		return;
	if (!s->sessions_saved) {
		/* The budget the last calls spent: a session taken back by
		 * the next daemon has no more left than this one had. */
		client_sessions_save_all(s);
		s->sessions_saved = true;
	}
	if (!tasks_writing(s->tasks) && !store_writing(dispatch_store(s->dispatcher)))
		ev_break(s->ev, EVBREAK_ALL);
}

/* Runs before the loop blocks: the connections serve the backlog within
 * what is left of the turn, write what was queued and start the next
 * turn; then the crowd is noted and a stop looked at. */
static void on_prepare(struct ev_loop *ev, ev_prepare *w, int revents)
{
	struct server *s = container_of(w, struct server, flush_w);
	conns_before_poll(&s->conns);
	if (!ev_is_active(&s->trim_w))
		server_note_crowd(s, s->conns.n_pendings);
	check_stopped(s);
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
	unsigned now = MAX(s->conns.n, dispatch_inflight(s->dispatcher));
	if (now > s->peak_conns)
		s->peak_conns = now;
	if (s->peak_conns >= SERVER_TRIM_CROWD && now < s->peak_conns / 2) {
		malloc_trim(0);
		s->trims++;
		s->peak_conns = now;
	}
	/* No crowd left to watch: sleep until the next one. */
	if (s->peak_conns < SERVER_TRIM_CROWD)
		ev_timer_stop(ev, w);
}

static void on_watchdog(struct ev_loop *ev, ev_timer *w, int revents)
{
	systemd_notify("WATCHDOG=1");
}

static void on_store_wait_over(struct ev_loop *ev, ev_timer *w, int revents)
{
	log_warning("the shared store did not take the last writes in time; stopping anyway");
	ev_break(ev, EVBREAK_ALL);
}

/* The grace period is over: the calls left end `cancelled`, marked with
 * data.restart (the daemon's stop, not the caller's cancel); what
 * they changed (budget spent, claims released) still goes to the shared
 * store, for at most STORE_WAIT_S. */
#define STORE_WAIT_S 2.0
static void on_grace(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct server *s = container_of(w, struct server, grace_w);
	log_info("grace period over: stopping %u calls", dispatch_inflight(s->dispatcher));
	dispatch_stop_all(s->dispatcher, MSG_STOPPED);
	s->grace_over = true;
	ev_timer_stop(ev, w);
	ev_init(w, on_store_wait_over);
	ev_timer_set(w, STORE_WAIT_S, 0.0);
	ev_timer_start(ev, w);
	check_stopped(s);
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
	systemd_notify("STOPPING=1");
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

static void on_signal(struct ev_loop *ev, ev_signal *w, int revents)
{
	struct server *s = w->data;
	if (w->signum == SIGHUP) {
		server_reload_and_log(s, "reload failed, the previous configuration stays in force", "reloaded");
		if (s->audit && audit_reopen(s->audit) < 0)
			log_error("cannot reopen the audit log %s", s->cfg.audit_log);
		return;
	}
	server_stop(s);
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

/* Says what the daemons that died without cleaning up left and this one
 * removed (sandbox_reap_dead()): one line of counts, one per process killed. */
static void log_reaped(const struct sandbox_reaped *r)
{
	if (!r->killed && !r->cgroups && !r->cgroups_left && !r->tmp_dirs && !r->tmp_left)
		return;
	log_warning("reaped what daemons that died left: %u processes killed, %u call cgroups removed%s, "
		    "%u directories of TMPDIRs removed%s",
		    r->killed, r->cgroups, r->cgroups_left ? " (some could not be)" : "", r->tmp_dirs,
		    r->tmp_left ? " (some not whole)" : "");
	for (unsigned i = 0; i < r->n_procs; i++)
		log_warning("reaped process %d (uid %u) left by the dead daemon %d: %s", (int)r->procs[i].pid,
			    (unsigned)r->procs[i].uid, (int)r->procs[i].daemon, r->procs[i].command);
	if (r->killed > r->n_procs)
		log_warning("reaped %u more processes, not named", r->killed - r->n_procs);
}

/* The audit line ("process.reaped") of a process killed because its
 * daemon had died, into b. */
static void reaped_line(const struct sandbox_reaped_proc *p, struct buf *b)
{
	struct jgen *g = jgen_new(b);
	char tbuf[32];
	format_time(wall_ms(), tbuf);
	jgen_obj_open(g);
	jgen_kv_str(g, "time", tbuf);
	jgen_kv_str(g, "event", "process.reaped");
	jgen_kv_int(g, "uid", (int64_t)p->uid);
	jgen_kv_int(g, "pid", (int64_t)p->pid);
	jgen_kv_int(g, "daemonPid", (int64_t)p->daemon);
	jgen_kv_str(g, "command", p->command);
	jgen_kv_str(g, "outcome", "killed: its daemon had died without ending it");
	jgen_obj_close(g);
	jgen_free(g);
}

/* An audit line per process killed at the start. */
static void audit_reaped(struct audit *a, const struct sandbox_reaped *r)
{
	for (unsigned i = 0; a && i < r->n_procs; i++) {
		struct buf b = {0};
		reaped_line(&r->procs[i], &b);
		audit_record(a, buf_head(&b), buf_size(&b));
		buf_free(&b);
	}
}

/* The audit log's path, for the watchdog: the daemon and its queue gone,
 * it appends its lines itself (the path does not change on reload). */
static const char *watchdog_audit_path;

/* What the watchdog reports once the daemon has died: the log lines, and
 * an audit line per process. */
static void watchdog_report(const struct sandbox_reaped *r)
{
	log_reaped(r);
	if (!watchdog_audit_path || !r->n_procs)
		return;
	_cleanup_close_ int fd = open(watchdog_audit_path, O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		log_warning("audit log %s: %s: the processes reaped are in this log only", watchdog_audit_path,
			    strerror(errno));
		return;
	}
	struct buf b = {0};
	for (unsigned i = 0; i < r->n_procs; i++) {
		reaped_line(&r->procs[i], &b);
		buf_putc(&b, '\n');
	}
	if (write(fd, buf_head(&b), buf_size(&b)) != (ssize_t)buf_size(&b) || fdatasync(fd) < 0)
		log_warning("audit log %s: %s: the processes reaped are in this log only", watchdog_audit_path,
			    strerror(errno));
	buf_free(&b);
}

int server_init(struct server *s, char **ret_err)
{
	s->listen_fd = -1;
	s->inotify_fd = -1;
	s->uid = getuid();
	s->started_ms = mono_ms();
	list_init(&s->deferred);
	peers_init(&s->peers);
	event_bus_init(&s->bus);
	/* Not the default loop: that one reaps every child on SIGCHLD, racing
	 * lib/child.c's waitid on the pidfd, which then loses the exit status. */
	s->ev = ev_loop_new(EVFLAG_AUTO);
	conns_init(&s->conns, s->ev, &s->peers, methods_handle);
	s->loop = tc_loop_ev_new(s->ev);
	s->sessions = session_table_new();
	client_sessions_init(s);

	/* Before any thread (unshare() refuses a process that has some) and
	 * before any directory is opened (an fd of one stays in the namespace
	 * it was opened in: a child's cwd there would have no path). */
	sandbox_set_warn(warn_log);
	int r = sandbox_private_mounts();
	if (r < 0 && r != -EPERM)
		log_debug("no mount namespace of its own (%s): TMPDIRs stay on the disk", strerror(-r));
	r = preflight_workspace(s->cfg.workspace, ret_err);
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
	sandbox_program_set_log(log_program_refusal);
	/* Before any child: also makes the daemon child subreaper. */
	_cleanup_free_ char *line = sandbox_features_line(sandbox_probe(s->cfg.sandbox.cgroup_dir));
	log_info("%s", line);
	/* What a daemon that died left (its calls' processes, cgroups,
	 * TMPDIRs): gone before this one starts a child. */
	_cleanup_free_ struct sandbox_reaped *reaped = xmalloc(sizeof(*reaped));
	sandbox_reap_dead(reaped);
	log_reaped(reaped);
	/* And what this one leaves if it dies so: reaped at once by a
	 * watchdog, a process of its own (before any thread). */
	pid_t watchdog;
	watchdog_audit_path = s->cfg.audit_log;
	r = sandbox_watchdog_start(watchdog_report, &watchdog);
	if (r < 0)
		log_info("crash watchdog: none (%s): what a crash of this daemon leaves running is killed at its next "
			 "start", strerror(-r));
	else
		log_info("crash watchdog: pid %d", (int)watchdog);
	if (sandbox_kaudit_start(s->loop, sandbox_probe(NULL)->landlock_abi) == 0)
		log_info("sandbox notes: from the kernel's audit records of Landlock's refusals");
	else
		log_info("sandbox notes: from the sandbox's plan, without Landlock's audit records (%s)",
			 sandbox_kaudit_why());
	if (sandbox_netnotif_start(s->loop) == 0)
		log_info("sandbox notes: the network a tool without it tries is seen by the daemon");
	else
		log_info("sandbox notes: the network a tool without it tries is not seen (%s): notes say it may "
			 "have been refused", sandbox_netnotif_why());
	r = registry_build(&s->cfg, NULL, &s->providers, &s->registry, ret_err);
	if (r < 0)
		return r;
	server_apply_config(s);
	r = daemon_net_init(s, ret_err);
	if (r < 0)
		return r;
	r = store_binding_open(s, ret_err);
	if (r < 0)
		return r;
	static const struct methods_ops ops = { .reload = server_reload };
	methods_init(s, &ops);
	server_setup_providers(s);
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
		process_table_set_audit(s->env.processes, s->audit);
		audit_reaped(s->audit, reaped);
	}

	r = server_listen(s, ret_err);
	if (r < 0)
		return r;

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
	ev_init(&s->trim_w, on_trim);
	s->trim_w.repeat = 5.0;
	server_watch_init(s);

	uint64_t usec = 0;
	if (systemd_watchdog_enabled(&usec)) {
		ev_timer_init(&s->watchdog_w, on_watchdog, (double)usec / 2e6, (double)usec / 2e6);
		ev_timer_start(s->ev, &s->watchdog_w);
	}
	return 0;
}

int server_run(struct server *s)
{
	char status[PATH_MAX + 64];
	snprintf(status, sizeof(status), "READY=1\nSTATUS=Serving %zu tools on %s", s->registry->n,
		 s->socket_path ? s->socket_path : "the socket systemd passed");
	systemd_notify(status);
	log_info("serving %zu tools on %s, workspace %s", s->registry->n,
		 s->socket_path ? s->socket_path : "(socket activation)", s->default_ws->root);
	ev_run(s->ev, 0);
	/* Stopped: every call has been answered or cancelled; let the
	 * answers out. Lines still in the backlog (the grace period ran out)
	 * are not started now. */
	conns_drop_backlog(&s->conns);
	dispatch_stop_all(s->dispatcher, MSG_STOPPED);
	/* Background processes end with the daemon, their trees with them. */
	s->env.processes = process_table_free(s->env.processes);
	on_prepare(s->ev, &s->flush_w, 0);
	/* Queued answers get a last chance to reach their clients. */
	conns_drain(&s->conns, 2000);
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
	conns_done(&s->conns);
	store_binding_close(s);
	s->env.processes = process_table_free(s->env.processes);
	s->dispatcher = dispatcher_free(s->dispatcher);
	providers_clear(&s->providers);
	s->audit = audit_close(s->audit);
	s->iopool = iopool_free(s->iopool);
	sandbox_kaudit_stop();
	sandbox_netnotif_stop();
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
	client_sessions_done(s);
	s->sessions = session_table_free(s->sessions);
	peers_done(&s->peers);
	daemon_net_free(s);
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
	free(s->file_socket);
	free(s->file_workspace);
	config_free(&s->cfg);
}
