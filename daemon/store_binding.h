/* SPDX-License-Identifier: MIT */
/*
 * The daemon bound to its store (memory or Redis) and to the table of MCP
 * tasks kept in it: opened, reloaded, closed, counted in admin/stats (see
 * store_binding.c). The task methods are methods_tasks.h's.
 */
#ifndef TC_STORE_BINDING_H
#define TC_STORE_BINDING_H

#include <sys/types.h>

struct config;
struct jgen;
struct server;

/* Opens the configured store (after the dispatcher) and the tasks, whose
 * watchers go with their connections: 0, or a negative errno with a
 * message in *ret_err. */
int store_binding_open(struct server *s, char **ret_err);
void store_binding_close(struct server *s);
/* A reload with fresh: the store's kind, address and prefix wait for a
 * restart (logged, listed in admin/stats' storeRestartPending, and put
 * back in fresh, which stays true about what is in use); lease_ms,
 * timeout_ms, on_unavailable and the tasks section apply at once. */
void store_binding_reload(struct server *s, struct config *fresh);

/* admin/stats' "tasks" member (and storeRestartPending). */
void store_binding_write_stats(struct server *s, struct jgen *g);
/* The tasks member of admin/stats for a peer of uid: its own tasks alone. */
void store_binding_write_stats_of(struct server *s, uid_t uid, struct jgen *g);

#endif
