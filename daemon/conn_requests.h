/* SPDX-License-Identifier: MIT */
/*
 * The requests one connection's daemon side sent its client (roots/list,
 * elicitation/create) and waits on: the table conn.c keeps in each
 * connection, below it. It knows no connection: the line of a request is
 * written into a buffer its caller sends, and answers are handed in.
 */
#ifndef TC_CONN_REQUESTS_H
#define TC_CONN_REQUESTS_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/list.h"

struct buf;
struct json;

/*
 * What became of a request the daemon sent its client: r 0 with result
 * (the "result" member) or error (the "error" object, checked to hold an
 * integer code and a string message), -ETIMEDOUT when the deadline
 * passed, -ECONNRESET when the connection went. Called once.
 */
typedef void (*conn_reply_fn)(void *arg, int r, const struct json *result, const struct json *error);

/* Requests a connection may have sent and not yet had answered. */
#define CONN_OUTREQS_MAX 16

/* A request the daemon sent its client, waiting for the client's answer. */
struct outreq {
	struct list node;		/* outreqs->list */
	struct outreqs *table;
	uint64_t n;			/* its id is "tc-<n>" */
	ev_timer timer;
	conn_reply_fn fn;
	void *arg;
	void (*arg_free)(void *arg);	/* frees arg after fn (or when forgotten) */
};

/* The requests of one connection waiting for answers. */
struct outreqs {
	struct list list;		/* struct outreq, oldest first */
	unsigned n;
	uint64_t counter;		/* the last id given */
	struct ev_loop *ev;		/* where their deadlines run */
};

void outreqs_init(struct outreqs *t, struct ev_loop *ev);
/*
 * Files a request (params: JSON object text, or NULL) answered within
 * timeout_ms, and writes its line (no newline) into line for the caller
 * to send: fn(arg, ...) is called once with what became of it, then
 * arg_free(arg) (may be NULL). -EBUSY when CONN_OUTREQS_MAX are already
 * waiting (then nothing is called and arg stays the caller's).
 */
int outreqs_add(struct outreqs *t, const char *method, const char *params, size_t n, uint64_t timeout_ms,
		conn_reply_fn fn, void *arg, void (*arg_free)(void *arg), struct buf *line, struct outreq **ret);
/* Forgets a request sent: a later answer is ignored; fn is not called,
 * arg is freed. NULL: nothing. */
void conn_request_forget(struct outreq *o);
/* True for a response: an object with a result or an error and no method. */
bool conn_is_response(const struct json *v);
/* Routes a client's answer to the request it names. An answer to no
 * request waiting is ignored; a malformed one ends its request with
 * -EPROTO (both logged at debug level, naming fd). */
void outreqs_take(struct outreqs *t, const struct json *v, int fd);
/* Ends every request still waiting, with -ECONNRESET. */
void outreqs_end(struct outreqs *t);

#endif
