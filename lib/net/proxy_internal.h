/* SPDX-License-Identifier: MIT */
/*
 * The proxy's objects, shared by proxy.c (listeners, limits, records,
 * lifetime) and conn.c (one connection from its first byte to its end).
 */
#ifndef TC_NET_PROXY_INTERNAL_H
#define TC_NET_PROXY_INTERNAL_H

#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/net/net_internal.h"

enum conn_state {
	ST_HEAD,		/* reading an HTTP request head */
	ST_SOCKS_HELLO,		/* reading the SOCKS5 method greeting */
	ST_SOCKS_REQ,		/* reading the SOCKS5 request */
	ST_ASK,			/* held: the daemon decides */
	ST_RESOLVE,
	ST_CONNECT,
	ST_RELAY,
};

struct conn {
	struct list node;
	struct net_proxy *p;
	enum conn_state state;
	enum net_proto proto;
	bool socks;
	int cfd, ufd;
	struct tc_io *cio;		/* client readable, before the relay */
	struct tc_io *uio;		/* upstream writable while connecting */
	struct tc_timer *timer;		/* the deadline of the state; 0 ms: resume */
	struct buf in;			/* client bytes before the relay */
	char host[NET_HOST_MAX + 1];
	uint16_t port;
	char address[NET_ADDR_STRLEN];
	char rule[NET_RULE_MAX];
	enum net_decision decision;
	const char *error;
	struct net_http_req req;	/* ST_HEAD's result, for forwarded requests */
	size_t consumed;		/* bytes of in that the head or SOCKS request took */
	struct net_addr addrs[NET_RESOLVE_MAX];
	size_t n_addrs, next_addr;
	struct net_lookup *lookup;
	struct net_ask *ask;
	bool answered, answer_allow;	/* ask answered: resume from the timer */
	struct net_relay *relay;
	uint64_t start_ms, last_ms;
	uint64_t bytes_up, bytes_down;
};

struct net_ask {
	struct conn *c;
	bool allow;
	char rule[NET_RULE_MAX];
};

struct listener {
	struct net_proxy *p;
	int fd;
	bool socks;
	struct tc_io *io;
};

struct net_proxy {
	struct tc_loop *loop;
	struct net_policy *policy;
	struct net_resolver *resolver;
	bool own_resolver;
	struct net_limits limits;
	const struct net_proxy_ops *ops;
	void *ctx;
	struct listener listeners[2];
	struct tc_timer *accept_retry;	/* out of fds: accept again later */
	struct list conns;
	struct net_proxy_stats stats;
	uint64_t bytes_total;
	struct net_refusal refused[NET_REFUSED_MAX];
	char refused_host[NET_REFUSED_MAX][NET_HOST_MAX + 1];
	char refused_rule[NET_REFUSED_MAX][NET_RULE_MAX];
	size_t n_refused, refused_more;
	bool freeing;
};

/* conn.c */
struct conn *net_conn_new(struct net_proxy *p, int fd, bool socks);
/* Ends c: reports it through connection_done, closes and frees. */
void net_conn_end(struct conn *c, const char *error);
/* Whether a new byte moved puts p over its budget. */
bool net_proxy_over_budget(struct net_proxy *p);
/* Records a refusal for net_proxy_refused. */
void net_proxy_note_refusal(struct net_proxy *p, const char *host, uint16_t port, const char *rule);

#endif
