/* SPDX-License-Identifier: MIT */
/*
 * Inside the server: what its files (server.c the life cycle,
 * server_listen.c the socket and accepting, server_reload.c configuration
 * and reload) call of each other.
 */
#ifndef TC_SERVER_INTERNAL_H
#define TC_SERVER_INTERNAL_H

struct server;

/* After this many connections (or calls) at once, memory is given back
 * once the crowd has gone. */
#define SERVER_TRIM_CROWD 64

/* Listens (or takes systemd's socket) and starts accepting. */
int server_listen(struct server *s, char **ret_err);
/* Notes how many connections (or calls) there are now, for the trim. */
void server_note_crowd(struct server *s, unsigned now);
/* Applies s->cfg to the dispatcher, the registry's users and the limits. */
void server_apply_config(struct server *s);
/* Starts the MCP providers the tool files declare (lazily). */
void server_setup_providers(struct server *s);
/* Reloads and logs the outcome: "FAILED: error" or "DONE: what changed". */
void server_reload_and_log(struct server *s, const char *failed, const char *done);
/* Watches tools_dir for changes (reloads are debounced). */
void server_watch_init(struct server *s);

#endif
