/* SPDX-License-Identifier: MIT */
/*
 * The server's life cycle: start, run, reload, stop. The server owns both
 * layers below it: the connections (conn.h), given their bounds and the
 * method table (methods.h) as where each request goes, and the methods,
 * which read the daemon's state (server_state.h).
 */
#ifndef TC_SERVER_H
#define TC_SERVER_H

#include "daemon/server_state.h"

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
