/* SPDX-License-Identifier: MIT */
/*
 * The daemon's state: the listening socket, the connections, the
 * dispatcher they feed, the registry, sessions, tasks and configuration.
 * The methods (and the tasks) read it, finding the server a
 * connection belongs to with server_of(); its life cycle is server.h's.
 */
#ifndef TC_SERVER_STATE_H
#define TC_SERVER_STATE_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "daemon/config.h"
#include "daemon/conn.h"
#include "daemon/peers.h"
#include "daemon/providers.h"
#include "lib/events.h"
#include "lib/base/list.h"
#include "lib/tool.h"
#include "proto/base/buf.h"
#include "proto/jsonrpc.h"

struct audit;
struct caller;
struct methods_ops;
struct dispatcher;
struct registry;
struct session;
struct session_table;
struct kept_sessions;
struct tc_loop;
struct workspace;
struct ws_roots;

struct server {
	struct ev_loop *ev;
	struct tc_loop *loop;
	struct config cfg;
	char *config_path;		/* NULL: defaults only */
	/* socket and workspace as the config file gave them when the daemon
	 * started (NULL: not given): a reload that finds them changed says
	 * that the change waits for a restart. */
	char *file_socket, *file_workspace;
	char *socket_path;
	bool socket_owned;		/* we created it: unlink at exit */
	int listen_fd;
	int spare_fd;			/* kept open to survive EMFILE on accept */
	ev_io accept_w;
	unsigned accept_budget;		/* accepts the last wake-up took whole (0: it emptied the queue) */
	unsigned accept_iter;		/* the loop iteration of that wake-up */
	ev_timer accept_retry;
	ev_prepare flush_w;		/* writes queued output once per loop iteration */
	ev_signal sig_term, sig_int, sig_hup;
	ev_timer grace_w;
	ev_timer watchdog_w;
	ev_timer trim_w;		/* gives memory back after a crowd has gone */
	unsigned peak_conns;		/* most connections (or calls) since the last trim */
	uint64_t trims;			/* times a crowd's memory was given back */
	ev_io inotify_w;
	ev_timer reload_debounce;
	int inotify_fd;
	int parent_wd;		/* watch on tools_dir's parent */
	char *tools_name;	/* tools_dir's name in it */

	struct conns conns;		/* the clients' connections */
	struct peers peers;		/* what each peer uid holds */
	uint64_t progress_dropped;	/* notifications/progress left out (client not reading) */
	uint64_t conns_refused;

	struct dispatcher *dispatcher;
	struct tasks *tasks;		/* MCP tasks (opened by daemon/store_binding.c) */
	struct session_table *sessions;
	struct kept_sessions *kept;	/* sessions kept for their clients to come back */
	struct event_bus bus;
	struct registry *registry;
	struct providers providers;	/* MCP servers the tool files declare */
	struct list deferred;		/* requests waiting for providers to start (methods.c) */
	const struct methods_ops *methods_ops;	/* the server's operations the methods call */
	struct workspace *default_ws;
	struct ws_roots *ws_roots;	/* default_ws and workspaces.allowed, resolved at (re)load */
	struct audit *audit;
	struct iopool *iopool;		/* worker threads for blocking file work (limits.io_threads) */
	struct tool_env env;
	uid_t uid;			/* the daemon's own */
	bool stopping;
	bool grace_over;		/* calls left were stopped; the store's writes go out */
	bool sessions_saved;		/* the sessions' last records went to the store */
	bool winding_down;		/* stopped; waiting for children of cancelled calls */
	uint64_t started_ms;
	uint64_t reloads;
};

/* The server a connection belongs to. */
static inline struct server *server_of(const struct conn *c)
{
	return container_of(c->conns, struct server, conns);
}

#endif
