/* SPDX-License-Identifier: MIT */
/*
 * Inside the JSON-RPC methods: the helpers every method file answers
 * with, and the tables of the method files by subject (methods_session.c,
 * methods_events.c, methods_admin.c) that methods_handle() looks through
 * after its own (the hot ones: tools/call, ping).
 */
#ifndef TC_METHODS_INTERNAL_H
#define TC_METHODS_INTERNAL_H

#include <stddef.h>

#include "daemon/conn.h"
#include "proto/base/util.h"

struct jgen;

/* One method: its name and handler (p NULL: a notification). */
struct method_def {
	const char *name;
	void (*fn)(struct conn *c, const struct jrpc_req *req, struct pending *p);
};

/* NULL-terminated tables. */
extern const struct method_def session_methods[];
extern const struct method_def event_methods[];
extern const struct method_def admin_methods[];
extern const struct method_def process_methods[];

/* The MCP versions answered, the latest first. */
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
