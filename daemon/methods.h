/* SPDX-License-Identifier: MIT */
/*
 * The JSON-RPC methods: MCP (initialize, tools/list, tools/call, ping,
 * cancellation), toolcalld's own (events, confirmations, sessions) and the
 * admin ones. Each request arrives from the connection layer and is
 * answered through it.
 */
#ifndef TC_METHODS_H
#define TC_METHODS_H

#include "daemon/conn.h"

struct server;

/* What the methods ask of the server that owns them, which hands them
 * these (the methods do not call the server's life cycle themselves). */
struct methods_ops {
	/* admin/reload: 0 with a summary in *ret_result, or a negative errno
	 * with *ret_err; the strings are the caller's to free. */
	int (*reload)(struct server *s, char **ret_result, char **ret_err);
};

/* Handles one request (p NULL: a notification): the connections'
 * on_request. */
void methods_handle(struct conn *c, const struct jrpc_req *req, struct pending *p);
/* Takes the server's operations (kept in s->methods_ops), sorts the
 * method table and hooks the methods into the closing of connections: a
 * connection's calls are detached, its subscription and session let go. */
void methods_init(struct server *s, const struct methods_ops *ops);
void methods_broadcast_list_changed(struct server *s);
/* Answers requests that waited for providers, once none is starting. */
void methods_resume(struct server *s);

#endif
