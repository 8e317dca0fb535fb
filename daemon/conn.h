/* SPDX-License-Identifier: MIT */
/*
 * The connection layer, at the bottom of the daemon: one client socket
 * each, JSON-RPC lines framed in and answers queued out, batches, ids in
 * flight, output back-pressure, idle timeouts, the memory bounds across
 * clients, and the turn budget that keeps one busy client from starving
 * the others. It knows nothing of the layers above but what its owner
 * gives it (struct conns): the bounds, one function each request goes to,
 * and hooks run as a connection closes. conn.c holds a connection's life
 * and its output, conn_read.c its input and the turn, conn_evict.c the
 * memory bounds, conn_requests.c the daemon's own requests to its client.
 */
#ifndef TC_CONN_H
#define TC_CONN_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "daemon/conn_requests.h"
#include "lib/base/list.h"
#include "proto/base/buf.h"
#include "proto/jsonrpc.h"

struct caller;
struct client_state;
struct map;
struct peer;
struct peers;

struct batch;
struct conn;

/* A request waiting for its answer. */
struct pending {
	struct list node;		/* conn->pendings */
	struct conn *conn;
	struct batch *batch;
	size_t index;
	char *id;			/* raw id text; NULL: answered with id null */
	size_t id_len;
	bool tracked;			/* counted in conn->ids (in flight) */
	bool answered;			/* ended: answered, dropped, or its connection closed */
	unsigned refs;			/* the request until it ends, and code up the stack (conn_read.c) */
	/* The layer above's: the call running for it (NULL: none), and state
	 * kept for it (methods: a request parked while MCP providers start),
	 * freed with it by upper_free. */
	struct caller *caller;
	void *upper;
	void (*upper_free)(void *upper);
	/* How the layer above writes a failure of this request as a result
	 * (a tools/call with toolErrors "result"), or NULL: as an error. */
	void (*write_error_result)(struct buf *out, const char *msg, const char *data, size_t data_len);
	size_t id_cap;			/* room in id_text */
	char id_text[];			/* where id points: one allocation per request */
};

/* Handles one request (p NULL: a notification): the layer above's. */
typedef void (*conn_request_fn)(struct conn *c, const struct jrpc_req *req, struct pending *p);

/* What a layer above does as a connection closes, each run in the order
 * the hooks were added (either may be NULL). */
struct conn_hook {
	/* The connection is dead (its socket closed), its requests still
	 * stand: let go of the work behind them. */
	void (*closing)(void *arg, struct conn *c);
	/* Its requests are freed and the daemon's own have ended. */
	void (*closed)(void *arg, struct conn *c);
};

#define CONN_HOOKS_MAX 4
/* Flushed output buffers kept for reuse, and the largest kept. */
#define SPARE_OUTS 16
#define SPARE_OUT_MAX ((size_t)128 << 10)

/* The bounds the connection layer keeps (limits.* of the configuration). */
struct conn_limits {
	uint64_t max_message_bytes;
	uint32_t max_json_depth;
	uint32_t max_batch;
	uint64_t max_output_bytes;
	uint64_t max_client_memory;
	uint64_t per_uid_memory;
	uint32_t turn_budget_us;
	uint64_t idle_timeout_ms;	/* 0: none */
	uint32_t event_queue;		/* 0: 1024 */
};

/* All connections of one owner, and what that owner gave them. */
struct conns {
	struct ev_loop *ev;
	struct conn_limits limits;
	conn_request_fn on_request;
	struct {
		const struct conn_hook *hook;
		void *arg;
	} hooks[CONN_HOOKS_MAX];
	unsigned n_hooks;
	struct peers *peers;		/* the uid table, charged with what each connection holds */

	struct list all;		/* struct conn, open */
	struct list dirty;		/* connections with output to flush */
	struct list backlog;		/* connections with lines left for a later turn */
	struct list graveyard;		/* closed connections, freed before the loop blocks */
	struct list spare_pendings;	/* freed pendings kept for reuse, at most SPARE_PENDINGS */
	unsigned n_spare_pendings;
	/* Output buffers of flushed answers kept for the next large ones (at
	 * most SPARE_OUTS of at most SPARE_OUT_MAX bytes; none while no
	 * connection is open). */
	struct buf spare_outs[SPARE_OUTS];
	unsigned n_spare_outs;
	ev_idle kick;			/* keeps the next poll from blocking (lines wait) */
	uint64_t turn_start_ns;		/* the first tool call of this loop turn (0: none yet) */
	bool turn_over;			/* this turn's budget for tool calls is spent */

	/* Counted here, read by the owner. */
	unsigned n;			/* open */
	uint64_t total;			/* ever accepted */
	uint64_t evicted;		/* closed for holding too much memory */
	uint64_t memory;		/* bytes of buffers held by open connections */
	unsigned n_pendings;		/* requests of all connections waiting for answers */
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
	struct list node;		/* conns->all, then conns->graveyard */
	struct list dirty_node;		/* conns->dirty */
	struct list backlog_node;	/* conns->backlog */
	struct list peer_node;		/* peer->members */
	struct peer *peer;		/* its uid's entry in the uid table */
	struct conns *conns;
	int fd;
	struct ucred cred;
	ev_io rw;
	ev_io ww;
	ev_timer idle_w;
	struct buf in;
	struct buf out;
	struct framer framer;
	struct outreqs outreqs;		/* the daemon's requests awaiting answers */
	struct map *ids;		/* ids in flight -> struct pending */
	struct list pendings;
	bool paused;			/* not reading: too much output queued */
	bool backlogged;		/* not reading: lines wait for a later turn */
	bool input_waits;		/* not reading: a request waits (conn_wait_input) */
	bool read_closed;		/* the peer shut its sending side; answers still go out */
	bool dead;
	uint64_t queued_total;		/* bytes ever queued to out */
	uint64_t written_total;		/* bytes ever written */
	uint64_t *ev_ends;		/* ring: stream offsets where queued events end */
	unsigned ev_head;
	unsigned ev_count;
	unsigned ev_cap;
	size_t memory;			/* its buffers and held answers, as counted in conns->memory */
	size_t held;			/* bytes of batch answers held until their batch is written */
	unsigned refs;			/* code up the stack that still looks at it: not freed meanwhile */

	/* The MCP layer's state for its client (struct client_state,
	 * client_session.h): made with the first request, freed by that
	 * layer as the connection closes. */
	struct client_state *client;
	/* Set by the layer above while the client waits for events
	 * silently (a subscription): it is not idle. */
	bool listening;
};

/* --- the connections (conn.c) ------------------------------------------ */

/* Starts with no connection: requests go to on_request, what connections
 * hold is charged to peers. The bounds are set by conns_set_limits. */
void conns_init(struct conns *cs, struct ev_loop *ev, struct peers *peers, conn_request_fn on_request);
/* Sets the bounds (at start and at each reload; a connection's line limit
 * is taken when it opens). */
void conns_set_limits(struct conns *cs, const struct conn_limits *limits);
/* Adds what a layer above does as a connection closes (at most
 * CONN_HOOKS_MAX); arg is handed back. */
void conns_add_hook(struct conns *cs, const struct conn_hook *hook, void *arg);
/* Closes every connection and frees what is kept. */
void conns_done(struct conns *cs);
/* Gives queued answers a last chance to reach their clients, for at most
 * timeout_ms. */
void conns_drain(struct conns *cs, int timeout_ms);
/* Frees closed connections. */
void conns_reap(struct conns *cs);

void conn_close(struct conn *c);
/* Queues one JSON line (newline added). */
void conn_send(struct conn *c, const char *json, size_t n);
/* Queues a notification, written straight into the output queue. */
void conn_notify(struct conn *c, const char *method, const char *params, size_t n);
/* True when the connection is gone, or its client does not read (more
 * than limits.max_output_bytes queued): what it may do without is best
 * left out. */
bool conn_congested(const struct conn *c);
/* Queues an event (notifications/event) unless the client lags behind:
 * limits.event_queue events unwritten, or its output over the bound.
 * The event bus's delivery function (ctx: the connection). */
bool conn_deliver_event(void *ctx, const char *params, size_t n);
/* Writes what is queued; stops at what the socket does not take now. */
void conn_flush(struct conn *c);
/*
 * Sends the client a request (params: JSON object text) answered within
 * timeout_ms: fn(arg, ...) is called once with what became of it, then
 * arg_free(arg) (may be NULL). -ENOTCONN when the connection is going,
 * -EBUSY when CONN_OUTREQS_MAX are already waiting (then nothing is
 * called and arg stays the caller's). conn_request_forget() forgets it.
 */
int conn_request(struct conn *c, const char *method, const char *params, size_t n, uint64_t timeout_ms,
		 conn_reply_fn fn, void *arg, void (*arg_free)(void *arg), struct outreq **ret);
/* The request in flight with this id (as written), or NULL: none, or one
 * answered inside a batch not yet written. */
struct pending *conn_pending_by_id(struct conn *c, const char *id);
/* Forgets a request without answering it (a cancelled call). */
void conn_drop(struct pending *p);
/* Answers an error (no data when data is NULL). */
void conn_error(struct pending *p, int code, const char *message, const char *data);
void conn_result(struct pending *p, const char *result, size_t n);
/* Answers a result that write() appends to the buffer it is given: in
 * place in the output queue when it can be, so a large result is written
 * once instead of built aside and copied. */
void conn_result_with(struct pending *p, void (*write)(const void *arg, struct buf *out), const void *arg);

/* The tool call an answer stands for: when a batch's answers go past
 * limits.max_output_bytes, the error that replaces this answer carries
 * its callId, tool, attempts and durationMs, as every failed call's does. */
struct answer_call {
	const char *call_id;
	const char *tool;
	unsigned attempts;
	uint64_t duration_ms;
};
/* conn_error, conn_result and conn_result_with for the answer of a call. */
void conn_call_error(struct pending *p, const struct answer_call *call, int code, const char *message,
		     const char *data);
void conn_call_result(struct pending *p, const struct answer_call *call, const char *result, size_t n);
void conn_call_result_with(struct pending *p, const struct answer_call *call,
			   void (*write)(const void *arg, struct buf *out), const void *arg);

/* --- input and the turn (conn_read.c) ---------------------------------- */

/* Holds the connection's next lines back until conn_go_on_input: a
 * request answered later that the lines after it depend on (an initialize
 * waiting for the shared store's record of its session). */
void conn_wait_input(struct conn *c);
void conn_go_on_input(struct conn *c);

/* Takes a connection accepted on fd and starts reading it. */
void conns_accept(struct conns *cs, int fd, const struct ucred *cred);
/* Runs before the loop blocks: serves the backlog within what is left of
 * the turn, writes what was queued, brings memory under the bounds, frees
 * closed connections and starts the next turn. */
void conns_before_poll(struct conns *cs);
/* Forgets the lines waiting in the backlog (the daemon is stopping). */
void conns_drop_backlog(struct conns *cs);
/* Bracket a tool call started from a request of c: file tools run in the
 * loop, and their time counts against the turn's budget. */
void conn_work_begin(struct conn *c);
void conn_work_end(struct conn *c);

/* --- the memory bounds (conn_evict.c) ---------------------------------- */

/* Brings memory back under the bounds: while a uid holds more than
 * limits.per_uid_memory, disconnects that uid's largest connection; while
 * all clients hold more than limits.max_client_memory, the largest
 * connection of the uid holding the most. */
void conns_evict(struct conns *cs);

#endif
