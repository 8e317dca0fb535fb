/* SPDX-License-Identifier: MIT */
/*
 * What daemon/egress.c (the proxies served) and daemon/egress_ask.c (the
 * network.connect confirmations) share.
 */
#ifndef TC_DAEMON_EGRESS_INTERNAL_H
#define TC_DAEMON_EGRESS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/net/net.h"

struct server;
struct session;
struct tc_loop;
struct net_count;

struct net_service {
	struct server *server;
	struct tc_loop *loop;
	struct net_policy *policy;	/* the config's "network" */
	struct net_limits limits;
	struct net_resolver *resolver;
	struct net_count *counts;
	size_t n_counts;
	unsigned served;		/* proxies running */
};

/* One run's proxy and whose connections it carries. */
struct net_served {
	struct net_service *svc;
	struct net_proxy *proxy;
	uid_t uid;
	char *session;
	char *call_id;
	char *process_id;
	char *tool;
	/* The limits of its proxy, and the connections they turned away or
	 * cut, for the result's [limit] note. */
	unsigned max_connections;
	uint64_t max_bytes;
	uint64_t over_connections;	/* 503 / SOCKS failure at accept */
	uint64_t over_bytes;		/* refused or closed: limit:net_mb */
};

struct net_service *net_service(void);
/* The session a run's events are scoped to (tmp stands in when it is
 * gone or there is none). */
const struct session *net_served_session(const struct net_served *sv, struct session *tmp);

/* The proxy's ops for "unknown": "ask" (egress_ask.c). */
void net_ask_start(void *ctx, const char *host, uint16_t port, struct net_ask *ask);
void net_ask_cancel(void *ctx, struct net_ask *ask);
/* Lets the dispatcher hand over the answers to these questions. */
void net_ask_init(struct server *s);
/* Questions open now, and the connections waiting on them (a question
 * holds every connection of its run to its host and port). */
void net_ask_counts(unsigned *open, unsigned *waiting);
/* Forgets every open question (at exit). */
void net_ask_clear(void);

#endif
