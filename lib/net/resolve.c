/* SPDX-License-Identifier: MIT */
/*
 * Name resolution on the loop: a c-ares channel whose sockets are watched
 * by tc_io watchers (told through c-ares' socket state callback) and whose
 * retransmissions are driven by one timer. Each lookup has its own deadline;
 * a lookup given up (deadline, cancel) stays allocated until c-ares lets go
 * of it, its callback silenced.
 */
#include <ares.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/net/net_internal.h"
#include "proto/base/util.h"

/* Sockets c-ares may hold at once (UDP and TCP per server). */
#define WATCH_MAX 32

struct watch {
	struct net_resolver *r;
	int fd;
	struct tc_io *io;
};

struct net_resolver {
	struct tc_loop *loop;
	ares_channel channel;
	struct tc_timer *timer;		/* c-ares' next retransmission */
	struct watch *watches[WATCH_MAX];
	struct list lookups;		/* answered inside net_resolve, not yet delivered */
	uint32_t timeout_ms;
};

struct net_lookup {
	struct list node;		/* in r->lookups while an early answer waits */
	struct net_resolver *r;
	net_resolve_cb cb;
	void *arg;
	struct tc_timer *timer;		/* deadline, or delivery of an early answer */
	bool silenced;			/* cancelled or timed out: no callback */
	bool in_ares;			/* c-ares still holds it */
	bool starting;			/* inside net_resolve */
	bool have_result;		/* answered during net_resolve: deliver from the loop */
	int result;
	struct net_addr addrs[NET_RESOLVE_MAX];
	size_t n;
};

static void lookup_deliver(struct net_lookup *l);
static void lookup_free(struct net_lookup *l);

/* Re-arms the retransmission timer from c-ares' next deadline. */
static void resolver_arm(struct net_resolver *r)
{
	struct timeval tv, *t = ares_timeout(r->channel, NULL, &tv);

	if (!t) {
		tc_timer_stop(r->timer);
		return;
	}
	tc_timer_start(r->timer, (uint64_t)t->tv_sec * 1000 + (uint64_t)(t->tv_usec + 999) / 1000);
}

static void on_io(void *arg, int revents)
{
	struct watch *w = arg;
	struct net_resolver *r = w->r;
	int fd = w->fd;

	/* w may be freed inside (the socket closed): only fd and r are used. */
	ares_process_fd(r->channel, (revents & TC_IO_READ) ? fd : ARES_SOCKET_BAD,
			(revents & TC_IO_WRITE) ? fd : ARES_SOCKET_BAD);
	resolver_arm(r);
}

static void on_timer(void *arg)
{
	struct net_resolver *r = arg;

	ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	resolver_arm(r);
}

/* c-ares opens, changes or closes a socket: keep one watcher per socket. */
static void on_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
	struct net_resolver *r = data;
	int events = (readable ? TC_IO_READ : 0) | (writable ? TC_IO_WRITE : 0);
	int slot = -1, free_slot = -1;

	for (int i = 0; i < WATCH_MAX; i++) {
		if (r->watches[i] && r->watches[i]->fd == fd)
			slot = i;
		else if (!r->watches[i] && free_slot < 0)
			free_slot = i;
	}
	if (slot >= 0) {
		tc_io_free(r->watches[slot]->io);
		if (!events) {
			free(r->watches[slot]);
			r->watches[slot] = NULL;
			return;
		}
	} else {
		if (!events || free_slot < 0)
			return;	/* beyond WATCH_MAX: c-ares' own timeouts still end it */
		slot = free_slot;
		r->watches[slot] = calloc(1, sizeof(struct watch));
		if (!r->watches[slot])
			return;
		r->watches[slot]->r = r;
		r->watches[slot]->fd = fd;
	}
	r->watches[slot]->io = tc_io_new(r->loop, fd, events, on_io, r->watches[slot]);
	if (r->watches[slot]->io)
		tc_io_start(r->watches[slot]->io);
}

int net_resolver_new(struct tc_loop *loop, uint32_t timeout_ms, struct net_resolver **ret)
{
	static bool initialized;
	struct ares_options o = { 0 };
	struct net_resolver *r;
	int status;

	if (!initialized) {
		if (ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS)
			return -EIO;
		initialized = true;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->loop = loop;
	list_init(&r->lookups);
	r->timeout_ms = timeout_ms ? timeout_ms : 5000;
	r->timer = tc_timer_new(loop, on_timer, r);
	if (!r->timer) {
		free(r);
		return -ENOMEM;
	}
	o.sock_state_cb = on_sock_state;
	o.sock_state_cb_data = r;
	o.timeout = (int)MIN(r->timeout_ms / 2 + 1, 2000u);
	o.tries = 2;
	status = ares_init_options(&r->channel, &o, ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
	if (status != ARES_SUCCESS) {
		tc_timer_free(r->timer);
		free(r);
		return status == ARES_ENOMEM ? -ENOMEM : -EIO;
	}
	*ret = r;
	return 0;
}

struct net_resolver *net_resolver_free(struct net_resolver *r)
{
	if (!r)
		return NULL;
	/* Runs every pending lookup's c-ares callback with ARES_EDESTRUCTION. */
	ares_destroy(r->channel);
	/* Answers that wait for the loop to deliver them are cancelled too. */
	while (!list_empty(&r->lookups)) {
		struct net_lookup *l = container_of(r->lookups.next, struct net_lookup, node);
		list_remove(&l->node);
		list_init(&l->node);
		l->result = -ECANCELED;
		l->n = 0;
		lookup_deliver(l);
		lookup_free(l);
	}
	for (int i = 0; i < WATCH_MAX; i++) {
		if (r->watches[i]) {
			tc_io_free(r->watches[i]->io);
			free(r->watches[i]);
		}
	}
	tc_timer_free(r->timer);
	free(r);
	return NULL;
}

static void lookup_free(struct net_lookup *l)
{
	if (list_linked(&l->node))
		list_remove(&l->node);
	tc_timer_free(l->timer);
	free(l);
}

/* Hands the result to the caller, once. */
static void lookup_deliver(struct net_lookup *l)
{
	net_resolve_cb cb = l->cb;

	if (l->silenced)
		return;
	l->silenced = true;
	tc_timer_stop(l->timer);
	cb(l->arg, l->result, l->addrs, l->n);
}

static void on_lookup_timer(void *arg)
{
	struct net_lookup *l = arg;

	if (!l->have_result) {
		l->result = -ETIMEDOUT;
		l->n = 0;
	}
	lookup_deliver(l);
	if (!l->in_ares)
		lookup_free(l);
}

static int status_errno(int status)
{
	switch (status) {
	case ARES_SUCCESS: return 0;
	case ARES_ENOTFOUND:
	case ARES_ENODATA:
	case ARES_ENONAME:
	case ARES_EBADNAME: return -ENOENT;
	case ARES_ETIMEOUT: return -ETIMEDOUT;
	case ARES_ECANCELLED:
	case ARES_EDESTRUCTION: return -ECANCELED;
	case ARES_ENOMEM: return -ENOMEM;
	default: return -EIO;
	}
}

static void on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct net_lookup *l = arg;

	(void)timeouts;
	l->in_ares = false;
	l->result = status_errno(status);
	l->n = 0;
	/* IPv4 first: the loopback-only tests and most origins prefer it. */
	for (int family = 0; family < 2 && res; family++) {
		for (struct ares_addrinfo_node *n = res->nodes; n && l->n < NET_RESOLVE_MAX; n = n->ai_next) {
			struct net_addr *a = &l->addrs[l->n];
			if (family == 0 && n->ai_family == AF_INET) {
				a->family = AF_INET;
				a->v4 = ((struct sockaddr_in *)n->ai_addr)->sin_addr;
				l->n++;
			} else if (family == 1 && n->ai_family == AF_INET6) {
				a->family = AF_INET6;
				a->v6 = ((struct sockaddr_in6 *)n->ai_addr)->sin6_addr;
				l->n++;
			}
		}
	}
	if (res)
		ares_freeaddrinfo(res);
	if (l->result == 0 && l->n == 0)
		l->result = -ENOENT;
	if (l->silenced) {
		/* Timed out or cancelled earlier: nobody waits. */
		lookup_free(l);
		return;
	}
	if (l->starting) {
		/* Answered from inside ares_getaddrinfo: deliver from the loop. */
		l->have_result = true;
		list_insert_tail(&l->r->lookups, &l->node);
		tc_timer_start(l->timer, 0);
		return;
	}
	lookup_deliver(l);
	lookup_free(l);
}

struct net_lookup *net_resolve(struct net_resolver *r, const char *name, net_resolve_cb cb, void *arg)
{
	struct ares_addrinfo_hints hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct net_lookup *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	list_init(&l->node);
	l->r = r;
	l->cb = cb;
	l->arg = arg;
	l->timer = tc_timer_new(r->loop, on_lookup_timer, l);
	if (!l->timer) {
		free(l);
		return NULL;
	}
	tc_timer_start(l->timer, r->timeout_ms);
	l->in_ares = true;
	l->starting = true;
	ares_getaddrinfo(r->channel, name, NULL, &hints, on_addrinfo, l);
	l->starting = false;
	resolver_arm(r);
	return l;
}

void net_lookup_cancel(struct net_lookup *l)
{
	if (!l)
		return;
	l->silenced = true;
	if (l->in_ares)
		tc_timer_stop(l->timer);	/* freed when c-ares lets go */
	else
		lookup_free(l);
}
