/* SPDX-License-Identifier: MIT */
/*
 * The proxy of one call: the two listeners the daemon hands over (HTTP
 * and SOCKS5, inside the call's network namespace), the connection limit
 * checked at accept, the byte budget, the list of refused destinations
 * for the result's note, and the end of everything at once when the call
 * is over, each connection reported exactly once.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/net/net_internal.h"
#include "proto/base/util.h"

/* Connections taken per listener wakeup: others' turns come in between. */
#define ACCEPT_BURST 16
/* Out of file descriptors: try accepting again after this. */
#define ACCEPT_RETRY_MS 100

void net_limits_default(struct net_limits *l)
{
	*l = (struct net_limits) {
		.max_connections = 64,
		.header_bytes = 16384,
		.header_timeout_ms = 10000,
		.connect_timeout_ms = 10000,
		.idle_timeout_ms = 300000,
		.ask_timeout_ms = 120000,
		.max_bytes = 0,
	};
}

bool net_proxy_over_budget(struct net_proxy *p)
{
	return p->limits.max_bytes && p->bytes_total >= p->limits.max_bytes;
}

void net_proxy_note_refusal(struct net_proxy *p, const char *host, uint16_t port, const char *rule)
{
	for (size_t i = 0; i < p->n_refused; i++) {
		if (p->refused[i].port == port && strcmp(p->refused[i].host, host) == 0) {
			p->refused[i].count++;
			return;
		}
	}
	if (p->n_refused == NET_REFUSED_MAX) {
		p->refused_more++;
		return;
	}
	size_t i = p->n_refused++;
	snprintf(p->refused_host[i], sizeof(p->refused_host[i]), "%s", host);
	snprintf(p->refused_rule[i], sizeof(p->refused_rule[i]), "%s", rule);
	p->refused[i] = (struct net_refusal) {
		.host = p->refused_host[i],
		.port = port,
		.rule = p->refused_rule[i],
		.count = 1,
	};
}

size_t net_proxy_refused(const struct net_proxy *p, const struct net_refusal **ret, size_t *ret_more)
{
	*ret = p->refused;
	if (ret_more)
		*ret_more = p->refused_more;
	return p->n_refused;
}

void net_proxy_stats(const struct net_proxy *p, struct net_proxy_stats *ret)
{
	*ret = p->stats;
}

/* Turns away a connection over the limit at once: 503, or SOCKS5's "no
 * acceptable method" (the greeting is not even read), and reports it. */
static void reject_over_limit(struct net_proxy *p, int fd, bool socks)
{
	static const char http503[] =
		"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
		"Content-Length: 56\r\nConnection: close\r\n\r\n"
		"toolcalld: too many connections (limit:net_connections)\n";
	static const uint8_t socks_none[2] = { 5, 0xff };
	ssize_t n;

	if (socks)
		n = send(fd, socks_none, sizeof(socks_none), MSG_NOSIGNAL | MSG_DONTWAIT);
	else
		n = send(fd, http503, sizeof(http503) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)n;
	shutdown(fd, SHUT_WR);
	close(fd);
	p->stats.accepted++;
	p->stats.denied++;
	struct net_conn_record rec = {
		.proto = socks ? NET_PROTO_SOCKS5 : NET_PROTO_HTTP,
		.host = "",
		.address = "",
		.decision = NET_DENY,
		.rule = "limit:net_connections",
		.error = "limit",
	};
	p->ops->connection_done(p->ctx, &rec);
}

/* Whether a connection waits on listener fd: a poll costs a tenth of an
 * accept4 that finds none (which makes and drops a socket first). */
static bool pending(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	return poll(&pfd, 1, 0) > 0;
}

static void on_accept(void *arg, int revents)
{
	struct listener *l = arg;
	struct net_proxy *p = l->p;

	(void)revents;
	for (int i = 0; i < ACCEPT_BURST; i++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Leave the backlog be for a while rather than spin. */
				for (int k = 0; k < 2; k++)
					if (p->listeners[k].io)
						tc_io_stop(p->listeners[k].io);
				tc_timer_start(p->accept_retry, ACCEPT_RETRY_MS);
			}
			return;
		}
		if (p->stats.active >= p->limits.max_connections)
			reject_over_limit(p, fd, l->socks);
		else if (!net_conn_new(p, fd, l->socks))
			close(fd);
		if (!pending(l->fd))
			return;
	}
}

static void on_accept_retry(void *arg)
{
	struct net_proxy *p = arg;

	for (int k = 0; k < 2; k++)
		if (p->listeners[k].io)
			tc_io_start(p->listeners[k].io);
}

int net_proxy_new(const struct net_proxy_config *cfg, struct net_proxy **ret)
{
	struct net_proxy *p;
	int fds[2] = { cfg->http_fd, cfg->socks_fd };
	int r;

	if (!cfg->loop || !cfg->ops || !cfg->ops->connection_done || (fds[0] < 0 && fds[1] < 0))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->loop = cfg->loop;
	p->policy = cfg->policy ? net_policy_ref(cfg->policy) : net_policy_new();
	/* A bound left 0 takes its default; only max_bytes means "none" at 0. */
	struct net_limits d;
	net_limits_default(&d);
	p->limits = cfg->limits;
	if (!p->limits.max_connections)
		p->limits.max_connections = d.max_connections;
	if (!p->limits.header_bytes)
		p->limits.header_bytes = d.header_bytes;
	if (!p->limits.header_timeout_ms)
		p->limits.header_timeout_ms = d.header_timeout_ms;
	if (!p->limits.connect_timeout_ms)
		p->limits.connect_timeout_ms = d.connect_timeout_ms;
	if (!p->limits.idle_timeout_ms)
		p->limits.idle_timeout_ms = d.idle_timeout_ms;
	if (!p->limits.ask_timeout_ms)
		p->limits.ask_timeout_ms = d.ask_timeout_ms;
	p->ops = cfg->ops;
	p->ctx = cfg->ctx;
	list_init(&p->conns);
	p->resolver = cfg->resolver;
	if (!p->resolver) {
		r = net_resolver_new(p->loop, p->limits.connect_timeout_ms, &p->resolver);
		if (r < 0)
			goto fail;
		p->own_resolver = true;
	}
	r = -ENOMEM;
	p->accept_retry = tc_timer_new(p->loop, on_accept_retry, p);
	if (!p->accept_retry || !p->policy)
		goto fail;
	for (int k = 0; k < 2; k++) {
		struct listener *l = &p->listeners[k];
		l->p = p;
		l->fd = -1;
		l->socks = k == 1;
		if (fds[k] < 0)
			continue;
		int fl = cfg->borrowed ? O_NONBLOCK : fcntl(fds[k], F_GETFL);
		if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fds[k], F_SETFL, fl | O_NONBLOCK) < 0)) {
			r = -errno;
			goto fail;
		}
		l->io = tc_io_new(p->loop, fds[k], TC_IO_READ, on_accept, l);
		if (!l->io) {
			r = -ENOMEM;
			goto fail;
		}
	}
	/* Only now the fds become the proxy's. */
	p->borrowed = cfg->borrowed;
	for (int k = 0; k < 2; k++) {
		p->listeners[k].fd = fds[k];
		if (p->listeners[k].io)
			tc_io_start(p->listeners[k].io);
	}
	*ret = p;
	return 0;
fail:
	for (int k = 0; k < 2; k++)
		tc_io_free(p->listeners[k].io);
	tc_timer_free(p->accept_retry);
	if (p->own_resolver)
		net_resolver_free(p->resolver);
	net_policy_unref(p->policy);
	free(p);
	return r;
}

struct net_proxy *net_proxy_free(struct net_proxy *p)
{
	if (!p)
		return NULL;
	p->freeing = true;
	for (int k = 0; k < 2; k++) {
		p->listeners[k].io = tc_io_free(p->listeners[k].io);
		if (p->listeners[k].fd >= 0 && !p->borrowed)
			close(TAKE_FD(p->listeners[k].fd));
	}
	while (!list_empty(&p->conns)) {
		struct conn *c = container_of(p->conns.next, struct conn, node);
		net_conn_end(c, "closed");
	}
	tc_timer_free(p->accept_retry);
	if (p->own_resolver)
		net_resolver_free(p->resolver);
	net_policy_unref(p->policy);
	free(p);
	return NULL;
}
