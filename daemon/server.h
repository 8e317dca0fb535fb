/* SPDX-License-Identifier: MIT */
/*
 * The daemon's state: the listening socket, the connections, the
 * dispatcher they feed, and its life cycle (start, reload, stop). The
 * server owns both layers below it: connections frame JSON-RPC lines
 * (conn.h) and hand each request to the request sink, which the server
 * points at the method table (methods.h).
 */
#ifndef TC_SERVER_H
#define TC_SERVER_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "daemon/config.h"
#include "daemon/providers.h"
#include "lib/events.h"
#include "lib/list.h"
#include "lib/tool.h"
#include "proto/base/buf.h"
#include "proto/jsonrpc.h"

struct conn;
struct pending;

struct audit;
struct caller;
struct dispatcher;
struct registry;
struct session;
struct session_table;
struct tc_loop;
struct workspace;
struct ws_roots;

struct server {
	struct ev_loop *ev;
	struct tc_loop *loop;
	struct config cfg;
	char *config_path;		/* NULL: defaults only */
	char *socket_path;
	bool socket_owned;		/* we created it: unlink at exit */
	int listen_fd;
	int spare_fd;			/* kept open to survive EMFILE on accept */
	ev_io accept_w;
	ev_timer accept_retry;
	ev_prepare flush_w;		/* writes queued output once per loop iteration */
	ev_idle kick;			/* keeps the next poll from blocking (work was fed) */
	ev_signal sig_term, sig_int, sig_hup;
	ev_timer grace_w;
	ev_timer watchdog_w;
	ev_timer trim_w;		/* gives memory back after a crowd has gone */
	unsigned peak_conns;		/* most connections (or calls) since the last trim */
	ev_io inotify_w;
	ev_timer reload_debounce;
	int inotify_fd;
	int parent_wd;		/* watch on tools_dir's parent */
	char *tools_name;	/* tools_dir's name in it */

	struct list conns;
	struct list dirty;		/* connections with output to flush */
	struct list backlog;		/* connections with lines left for a later turn */
	uint64_t turn_start_ns;		/* the first tool call of this loop turn (0: none yet) */
	bool turn_over;			/* this turn's budget for tool calls is spent */
	struct list spare_pendings;	/* freed pendings kept for reuse, at most SPARE_PENDINGS */
	unsigned n_spare_pendings;
	struct list graveyard;		/* closed connections, freed before the loop blocks */
	unsigned n_conns;
	uint64_t conns_total;
	uint64_t client_memory;		/* bytes of buffers held by live connections */
	uint64_t progress_dropped;	/* notifications/progress left out (client not reading) */
	uint64_t conns_evicted;
	uint64_t conns_refused;

	struct dispatcher *dispatcher;
	struct session_table *sessions;
	struct event_bus bus;
	struct registry *registry;
	struct providers providers;	/* MCP servers the tool files declare */
	struct list deferred;		/* requests waiting for providers to start (methods.c) */
	/* Where connections hand each request (methods_handle). */
	void (*sink)(struct conn *c, const struct jrpc_req *req, struct pending *p);
	struct workspace *default_ws;
	struct ws_roots *ws_roots;	/* default_ws and workspaces.allowed, resolved at (re)load */
	struct audit *audit;
	struct iopool *iopool;		/* worker threads for blocking file work (limits.io_threads) */
	struct tool_env env;
	uid_t uid;			/* the daemon's own */
	bool stopping;
	bool winding_down;		/* stopped; waiting for children of cancelled calls */
	uint64_t started_ms;
	uint64_t reloads;
};

/* Opens the workspace, builds the registry, listens (or takes systemd's socket). */
int server_init(struct server *s, char **ret_err);
/* Runs until stopped; returns 0 after a clean stop. */
int server_run(struct server *s);
void server_free(struct server *s);
int server_reload(struct server *s, char **ret_result, char **ret_err);
/* Rebuilds the registry with the same configuration (providers imported). */
void server_refresh(struct server *s);
void server_stop(struct server *s);

#endif
