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

/* Handles one request (p NULL: a notification). */
void methods_handle(struct conn *c, const struct jrpc_req *req, struct pending *p);
void methods_broadcast_list_changed(struct server *s);
/* Answers a request with what a tools/call ending with o answers. */
struct outcome;
void methods_answer_outcome(struct pending *p, const struct outcome *o, bool replayed);
/* Answers requests that waited for providers, once none is starting. */
void methods_resume(struct server *s);
/* Resolves the workspaces initialize may choose: the default workspace and
 * workspaces.allowed (those that cannot be opened are logged and left out). */
struct ws_roots *methods_resolve_roots(struct server *s);
/* Opens the workspace (or MCP root) a client names, judged by the
 * directory opened: 0, -EINVAL (not absolute), or -EACCES for every
 * refusal. */
struct workspace;
int methods_open_workspace(struct conn *c, const char *path, struct workspace **ret);

#endif
