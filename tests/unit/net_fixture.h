/* SPDX-License-Identifier: MIT */
/*
 * The proxy tests' fixture: an origin and an echo on loopback, a proxy on
 * a real libev loop with a policy that reaches them by name, every
 * connection's record kept, and clients run in a thread while the test's
 * thread turns the loop until a condition holds or a deadline passes.
 */
#ifndef TC_NET_FIXTURE_H
#define TC_NET_FIXTURE_H

#include <ev.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/base/loop.h"
#include "lib/net/net.h"
#include "tests/unit/net_servers.h"

#define MAX_RECORDS 64

struct record {
	enum net_proto proto;
	char host[256];
	uint16_t port;
	char address[64];
	enum net_decision decision;
	char rule[NET_RULE_MAX];
	char error[32];
	uint64_t up, down;
};

struct fx {
	struct ev_loop *ev;
	struct tc_loop *loop;
	struct net_proxy *proxy;
	struct net_origin origin;
	struct net_echo echo;
	uint16_t http_port, socks_port;
	struct record rec[MAX_RECORDS];
	_Atomic unsigned n_rec;
	struct net_ask *ask;		/* the pending ask */
	char ask_host[256];
	uint16_t ask_port;
	unsigned asks, cancels;
	_Atomic unsigned active;	/* mirrored from the proxy for the client thread */
	_Atomic bool client_done;
	_Atomic int stage;		/* client/loop handshakes */
	_Atomic unsigned go;		/* the loop's thread lets the client on */
	void (*client)(struct fx *f);
};


/* Starts origin, echo and proxy (lim NULL: the defaults). The policy:
 * allow origin.test, echo.test on the echo's port, meta.test (mapped to
 * 169.254.169.254), ten.test (::ffff:10.0.0.1), localhost, *.invalid and
 * ::1; deny *.evil.test; unknown "ask"; allow_private 127.0.0.0/8; hosts
 * mapping those names and ask.test. */
void start(struct fx *f, struct net_limits *lim);
void stop(struct fx *f);
void *client_main(void *arg);
/* Whether the client thread finished; mirrors the proxy's active count. */
bool client_finished(void *arg);
/* Runs fn in a client thread while the loop turns, until it returns. */
void run_client(struct fx *f, void (*fn)(struct fx *f));
/* Waits (loop turning) until n records are in. */
void wait_records(struct fx *f, unsigned n);
/* The first record whose host (and error, when not NULL) match, or NULL:
 * connections that overlap end in no fixed order. */
struct record *find_record(struct fx *f, const char *host, const char *error);
/* The first record with this rule, or NULL. */
struct record *find_rule(struct fx *f, const char *rule);
/* Waits from the client thread until *v == want (set by the loop's thread). */
bool client_wait(_Atomic unsigned *v, unsigned want);

#endif
