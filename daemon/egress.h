/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of the sandbox network "proxy" (CONTRACT §20): for
 * each run whose network is "proxy" (a call, a background process, an MCP
 * server instance) it serves lib/net's proxy on the listening sockets the
 * sandbox made in the run's namespace, with the configured policy and the
 * tool's hosts merged, and reports every connection: an audit line of
 * "type": "network", an event network.connect or network.refused, the
 * counters of admin/metrics, and the note for the call's result naming
 * what was refused. Unknown hosts under "unknown": "ask" become
 * confirmation requests of kind network.connect (daemon/egress_ask.c).
 */
#ifndef TC_DAEMON_EGRESS_H
#define TC_DAEMON_EGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct buf;
struct server;

/* Sets the sandbox's proxy ops (lib/sandbox/sandbox.h). With a sandbox
 * network "proxy" configured where no namespace can be made, fails with
 * a message naming what the daemon or kernel lacks. */
int daemon_net_init(struct server *s, char **ret_err);
/* After a reload: the policy and limits new proxies get. */
void daemon_net_apply(struct server *s);
/* Stops serving (at exit). */
void daemon_net_free(struct server *s);
/* The families toolcalld_network_connections_total and
 * toolcalld_network_bytes_total. */
void daemon_net_metrics(struct server *s, struct buf *b);
struct config;
/* Whether the config asks for the network "proxy" (sandbox.network or
 * sandbox.per_tool; a tool file's is refused at its calls). */
bool daemon_net_wanted(const struct config *cfg);
/* -EPERM with a message naming what the kernel or the daemon lacks when
 * the config asks for "proxy" and no namespace can be made here. */
int daemon_net_check(const struct config *cfg, char **ret_err);

/* The key of a session's always_allow answer to a network.connect
 * question: "network.connect HOST:PORT" (egress_ask.c). */
char *net_allow_key(const char *host, uint16_t port);
/* Whether name is such a key exactly as net_allow_key writes it: a
 * canonical host (lib/net/net.h net_host_canonical), a port 1..65535
 * without leading zeros, nothing else, bounded in length. A session's
 * record in the shared store is read through it. */
bool net_allow_key_valid(const char *name);

#endif
