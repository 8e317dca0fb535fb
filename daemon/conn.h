/* SPDX-License-Identifier: MIT */
/*
 * The connection layer: one client socket each, JSON-RPC lines framed in
 * and answers queued out, batches, ids in flight, output back-pressure,
 * idle timeouts and the memory cap across clients, and the turn budget
 * that keeps one busy client from starving the others. Each request is
 * handed to the server's request sink; what it means is not known here.
 */
#ifndef TC_CONN_H
#define TC_CONN_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/list.h"
#include "proto/base/buf.h"
#include "proto/jsonrpc.h"

struct caller;
struct map;
struct peer;
struct server;
struct session;
struct subscriber;

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
	/* State the layer above keeps for this request (methods: a request
	 * parked while MCP providers start), freed with it by upper_free. */
	void *upper;
	void (*upper_free)(void *upper);
	size_t id_cap;			/* room in id_text */
	char id_text[];			/* where id points: one allocation per request */
};

/*
 * What became of a request the daemon sent its client: r 0 with result
 * (the "result" member) or error (the "error" object, checked to hold an
 * integer code and a string message), -ETIMEDOUT when the deadline
 * passed, -ECONNRESET when the connection went. Called once; src is the
 * text result and error were parsed from.
 */
typedef void (*conn_reply_fn)(void *arg, int r, const struct json *result, const struct json *error);

/* A request the daemon sent its client, waiting for the client's answer. */
struct outreq {
	struct list node;		/* conn->outreqs */
	struct conn *conn;
	uint64_t n;			/* its id is "tc-<n>" */
	ev_timer timer;
	conn_reply_fn fn;
	void *arg;
	void (*arg_free)(void *arg);	/* frees arg after fn (or when forgotten) */
};

/* Requests a connection may have sent and not yet had answered. */
#define CONN_OUTREQS_MAX 16

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
	struct list peer_node;		/* peer->members */
	struct peer *peer;		/* its uid's entry in the uid table */
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
	bool tool_errors_result;	/* initialize toolErrors "result": failed calls answer isError results */
	bool roots_cap;			/* initialize declared capabilities.roots */
	bool elicit_cap;		/* initialize declared capabilities.elicitation (form mode) */
	struct list outreqs;		/* struct outreq: the daemon's requests awaiting answers */
	unsigned n_outreqs;
	uint64_t outreq_counter;
	struct outreq *roots_req;	/* roots/list in flight, or NULL */
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
	size_t memory;			/* its buffers and held answers, as counted in client_memory */
	size_t held;			/* bytes of batch answers held until their batch is written */
};

/* Brings memory back under the bounds: while a uid holds more than
 * limits.per_uid_memory, disconnects that uid's largest connection; while
 * all clients hold more than limits.max_client_memory, the largest
 * connection of the uid holding the most. */
void conn_evict(struct server *s);
/* Lets connections in the backlog handle more of their lines. */
void conn_run_backlog(struct server *s);
/* Bracket a tool call started from a request: file tools run in the loop,
 * and their time counts against the turn's budget. */
void conn_work_begin(struct server *s);
void conn_work_end(struct server *s);
/* Starts the next turn: its budget is whole again. */
void conn_turn_reset(struct server *s);
void conn_new(struct server *s, int fd, const struct ucred *cred);
/* Gives a session made for this connection, once, its peer's identity:
 * whom its children, hooks and file tools act as. */
void conn_session_peer(struct conn *c, struct session *s);
void conn_close(struct conn *c);
/* Frees closed connections. */
void conn_reap(struct server *s);
/* Frees the pendings kept for reuse. */
void conn_free_spares(struct server *s);
/* Queues one JSON line (newline added). */
void conn_send(struct conn *c, const char *json, size_t n);
/*
 * Sends the client a request (params: JSON object text) answered within
 * timeout_ms: fn(arg, ...) is called once with what became of it, then
 * arg_free(arg) (may be NULL). -ENOTCONN when the connection is going,
 * -EBUSY when CONN_OUTREQS_MAX are already waiting (then nothing is
 * called and arg stays the caller's).
 */
int conn_request(struct conn *c, const char *method, const char *params, size_t n, uint64_t timeout_ms,
		 conn_reply_fn fn, void *arg, void (*arg_free)(void *arg), struct outreq **ret);
/* Forgets a request sent: a later answer is ignored; fn is not called,
 * arg is freed. */
void conn_request_forget(struct outreq *o);
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

#endif
