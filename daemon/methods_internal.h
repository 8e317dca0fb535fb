/* SPDX-License-Identifier: MIT */
/*
 * Inside the JSON-RPC methods: the helpers every method file answers
 * with, and the entries each method file exports (methods.c,
 * methods_session.c, methods_events.c, methods_admin.c, methods_tasks.c), which
 * methods.c lists in its one table.
 */
#ifndef TC_METHODS_INTERNAL_H
#define TC_METHODS_INTERNAL_H

#include <stddef.h>

#include "daemon/conn.h"
#include "proto/base/util.h"

struct jgen;

/* The method answers requests only: a notification of it is ignored
 * before its handler runs. */
#define METHOD_REQUEST_ONLY 0x1u

/* One method: its name, handler (p NULL: a notification) and flags. */
struct method {
	const char *name;
	void (*exec)(struct conn *c, const struct jrpc_req *req, struct pending *p);
	unsigned flags;		/* METHOD_* */
};

/* The entries of each method file, ended by one without a name. */
extern const struct method session_methods[];
extern const struct method event_methods[];
extern const struct method admin_methods[];
extern const struct method task_methods[];	/* methods_tasks.c */
extern const struct method process_methods[];

/* The MCP versions answered, the newest first (server/discover lists them,
 * initialize echoes any of them); initialize asking for none or another
 * gets METHODS_LATEST_VERSION, the newest with the initialize handshake. */
#define METHODS_LATEST_VERSION "2025-11-25"
extern const char *const methods_versions[];
extern const size_t methods_n_versions;

/* Answers a params error (-32602, kind validation_error); p NULL: nothing. */
void methods_invalid_params(struct pending *p, const char *fmt, ...) PRINTF(2, 3);
/* Answers with the generated object in b, which is freed. */
void methods_answer(struct pending *p, struct buf *b);
/* Writes {name, version} of the daemon. */
void methods_write_server_info(struct jgen *g);
/* Parks a request until the MCP providers being started have settled; it
 * is then handled again, methods_resumed() true. */
void methods_defer(struct conn *c, const struct jrpc_req *req, struct pending *p);
bool methods_resumed(const struct pending *p);

#endif
