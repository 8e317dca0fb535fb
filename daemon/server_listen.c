/* SPDX-License-Identifier: MIT */
/*
 * The daemon's listening socket (its own, or systemd's) and accepting:
 * peer checks (groups, sandboxed peers refused, per-uid connection caps)
 * and recovery when file descriptors run out.
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

#include "daemon/conn.h"
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
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "lib/files/identity.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "proto/json.h"
#include "tools/mcp/mcp.h"

/* The most connections taken per wake-up of the listener: a flood of
 * connects waits its turn behind the clients already connected, whose
 * events the loop serves between two wake-ups. */
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
	int n = systemd_listen_fds();
	if (n <= 0)
		return 0;
	int fd = SYSTEMD_LISTEN_FDS_START;
	if (!systemd_is_listening_unix_stream(fd)) {
		log_error("the fd systemd passed is not a listening Unix stream socket");
		return -EINVAL;
	}
	for (int i = 1; i < n; i++)
		close(SYSTEMD_LISTEN_FDS_START + i);
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
	_cleanup_(identity_clear) struct identity id = {0};
	if (identity_from_socket(fd, &id) < 0)
		id = (struct identity){ .gid = primary };
	for (size_t i = 0; i < s->cfg.peers.n_gids; i++) {
		if (s->cfg.peers.gids[i] == primary)
			return true;
		for (size_t k = 0; k < id.n_groups; k++)
			if (s->cfg.peers.gids[i] == id.groups[k])
				return true;
	}
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


/* Remembers the largest crowd since the last trim, and arms the timer
 * that gives its memory back once it has gone: only then, so that an
 * idle daemon is never woken for nothing. */
void server_note_crowd(struct server *s, unsigned now)
{
	if (now > s->peak_conns)
		s->peak_conns = now;
	if (s->peak_conns >= SERVER_TRIM_CROWD && !ev_is_active(&s->trim_w))
		ev_timer_again(s->ev, &s->trim_w);
}

/*
 * Takes the connections waiting, at most a budget per wake-up. The
 * listener is level-triggered: connections left in the queue wake the
 * loop again in its next iteration, after the other ready clients are
 * served. Unix sockets do not tell how many wait, and an accept4 beyond
 * the last fails: so a wake-up takes one, the common case of a lone
 * connect then costs no failed accept4; only a wake-up in the iteration
 * right after one that took its whole budget (a burst is queued: a
 * client answered, then connecting again, needs two iterations at
 * least) takes twice as many, up to ACCEPT_BURST, and ends in EAGAIN
 * once the queue is empty.
 */
static void on_accept(struct ev_loop *ev, ev_io *w, int revents)
{
	struct server *s = container_of(w, struct server, accept_w);
	unsigned iter = ev_iteration(ev), budget = 1;
	if (s->accept_budget && iter == s->accept_iter + 1)
		budget = MIN(2 * s->accept_budget, (unsigned)ACCEPT_BURST);
	s->accept_budget = 0;
	for (unsigned i = 0; i < budget; i++) {
		if (i == budget - 1) {
			/* This one takes the budget whole. */
			s->accept_budget = budget;
			s->accept_iter = iter;
		}
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			s->accept_budget = 0;
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
			unsigned more = 0;
			if (sandbox_refusal_due(mono_ms(), SANDBOX_REFUSAL_LOG_MS, &more))
				log_warning("refusing connection from pid %d (uid %u): a process started by a tool call "
					    "(sandboxed) may not be a peer of the daemon (%u more refused since the last "
					    "such line, logged at most once a minute)", (int)cred.pid, (unsigned)cred.uid, more);
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
		if (s->conns.n >= s->cfg.limits.max_connections) {
			s->conns_refused++;
			close(fd);
			continue;
		}
		const struct peer *p = peers_find(&s->peers, cred.uid);
		if (p && p->conns >= s->cfg.limits.per_uid_connections) {
			refuse_over_uid(s, fd, p);
			continue;
		}
		conns_accept(&s->conns, fd_move_high(fd), &cred);
		server_note_crowd(s, s->conns.n);
	}
}

int server_listen(struct server *s, char **ret_err)
{
	s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int r = listen_activated(s);
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
	return 0;
}
