/* SPDX-License-Identifier: MIT */
/*
 * The daemon's state: the listening socket, the connections, and the
 * dispatcher they feed. Connections frame JSON-RPC lines (conn.c) and hand
 * each request to the method table (methods.c).
 */
#ifndef TC_SERVER_H
#define TC_SERVER_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "daemon/config.h"
#include "daemon/load.h"
#include "lib/events.h"
#include "lib/list.h"
#include "lib/tool.h"
#include "proto/base/buf.h"
#include "proto/jsonrpc.h"

struct audit;
struct caller;
struct dispatcher;
struct registry;
struct session;
struct session_table;
struct tc_loop;
struct workspace;

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
	struct list deferred;		/* requests waiting for providers to start */
	struct workspace *default_ws;
	struct audit *audit;
	struct tool_env env;
	uid_t uid;			/* the daemon's own */
	bool stopping;
	bool winding_down;		/* stopped; waiting for children of cancelled calls */
	uint64_t started_ms;
	uint64_t reloads;
};

struct batch;

/* A request waiting for its answer. */
struct pending {
	struct list node;		/* conn->pendings */
	struct conn *conn;
	struct batch *batch;
	size_t index;
	char *id;			/* raw id text; NULL: answered with id null */
	size_t id_len;
	bool tracked;			/* counted in conn->ids (in flight) */
	struct caller *caller;
	/* Waiting for MCP providers to import their tools. */
	struct list defer_node;		/* server->deferred */
	struct json_doc *defer_doc;
	const struct json *defer_msg;
	bool resumed;
	uint64_t accepted_ms;		/* when it was parked (tc_now), for durationMs */
	size_t id_cap;			/* room in id_text */
	char id_text[];			/* where id points: one allocation per request */
};

struct batch {
	size_t n;
	size_t remaining;
	char **slots;
	size_t *lens;
	char **held;		/* ids of members answered but not yet written */
	size_t n_held;
	size_t bytes;		/* of the answers kept in slots */
};

struct conn {
	struct list node;		/* server->conns */
	struct list dirty_node;		/* server->dirty */
	struct list backlog_node;	/* server->backlog */
	struct server *srv;
	int fd;
	struct ucred cred;
	ev_io rw;
	ev_io ww;
	ev_timer idle_w;
	struct buf in;
	struct buf out;
	struct framer framer;
	struct session *session;
	bool initialized;		/* "initialize" answered: gets list_changed */
	struct map *ids;		/* ids in flight -> struct pending */
	struct list pendings;
	struct subscriber *sub;
	bool paused;			/* not reading: too much output queued */
	bool backlogged;		/* not reading: lines wait for a later turn */
	bool read_closed;		/* the peer shut its sending side; answers still go out */
	bool dead;
	uint64_t queued_total;		/* bytes ever queued to out */
	uint64_t written_total;		/* bytes ever written */
	uint64_t *ev_ends;		/* ring: stream offsets where queued events end */
	unsigned ev_head;
	unsigned ev_count;
	unsigned ev_cap;
	uint64_t requests;
	struct pending *watch;		/* cleared when that request is answered */
	size_t memory;			/* its buffers, as counted in client_memory */
};

/* server.c */
/* Opens the workspace, builds the registry, listens (or takes systemd's socket). */
int server_init(struct server *s, char **ret_err);
/* Runs until stopped; returns 0 after a clean stop. */
int server_run(struct server *s);
void server_free(struct server *s);
int server_reload(struct server *s, char **ret_result, char **ret_err);
/* Rebuilds the registry with the same configuration (providers imported). */
void server_refresh(struct server *s);
void server_stop(struct server *s);
void server_conn_closed(struct server *s);
/* conn.c: disconnects the clients holding the most buffered bytes while
 * all of them hold more than limits.max_client_memory. */
void conn_evict(struct server *s);
/* conn.c: lets connections in the backlog handle more of their lines. */
void conn_run_backlog(struct server *s);
/* Bracket a tool call started from a request: file tools run in the loop,
 * and their time counts against the turn's budget (see server.c). */
void server_work_begin(struct server *s);
void server_work_end(struct server *s);

/* conn.c */
void conn_new(struct server *s, int fd, const struct ucred *cred);
void conn_close(struct conn *c);
/* Frees closed connections. */
void conn_reap(struct server *s);
/* Frees the pendings kept for reuse. */
void conn_free_spares(struct server *s);
/* Queues one JSON line (newline added). */
void conn_send(struct conn *c, const char *json, size_t n);
/* Queues a notification, written straight into the output queue. */
void conn_notify(struct conn *c, const char *method, const char *params, size_t n);
void conn_flush(struct conn *c);
/* The request in flight with this id (as written), or NULL: none, or one
 * answered inside a batch not yet written. */
struct pending *conn_pending_by_id(struct conn *c, const char *id);
/* Forgets a request without answering it (a cancelled call). */
void conn_drop(struct pending *p);
/* The connection's session, made on first use with the default workspace. */
struct session *conn_session(struct conn *c);
bool conn_deliver_event(void *ctx, const char *params, size_t n);
/* Answers an error (no data when data is NULL). */
void conn_error(struct pending *p, int code, const char *message, const char *data);
void conn_result(struct pending *p, const char *result, size_t n);
/* Answers a result that write() appends to the buffer it is given: in
 * place in the output queue when it can be, so a large result is written
 * once instead of built aside and copied. */
void conn_result_with(struct pending *p, void (*write)(const void *arg, struct buf *out), const void *arg);

/* methods.c */
void methods_handle(struct conn *c, const struct jrpc_req *req, struct pending *p);
void methods_broadcast_list_changed(struct server *s);
/* Answers requests that waited for providers, once none is starting. */
void methods_resume(struct server *s);

#endif
