/* SPDX-License-Identifier: MIT */
/*
 * One proxied connection, from its first byte to its end: the request
 * head (HTTP) or greeting and request (SOCKS5) read within their bounds,
 * the policy's decision by name (deny, allow, unknown: deny or ask), the
 * name resolved (or taken from "hosts" or the literal), each address
 * vetted (no loopback, private or metadata address unless allowed), a
 * non-blocking connect to the vetted address only, then the relay. Each
 * state has one deadline on one timer; a client that sends nothing holds
 * only its own connection until then.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/net/net_internal.h"
#include "proto/base/util.h"

static void decide(struct conn *c);
static void resolve_start(struct conn *c);

const char *net_proto_name(enum net_proto p)
{
	switch (p) {
	case NET_PROTO_HTTP: return "http";
	case NET_PROTO_CONNECT: return "connect";
	case NET_PROTO_SOCKS5: return "socks5";
	}
	return "?";
}

void net_refusal_text(const char *host, uint16_t port, const char *rule, char *out, size_t size)
{
	bool v6 = host && strchr(host, ':');

	snprintf(out, size, "toolcalld: connection to %s%s%s:%u refused by rule %s\n", v6 ? "[" : "",
		 host ? host : "", v6 ? "]" : "", port, rule ? rule : "");
}

/*
 * Sends a short answer at once. The socket is fresh (nothing of ours is
 * queued before these bytes), so its send buffer takes them whole; a
 * client that made that impossible loses the answer, not the daemon.
 */
static void send_now(int fd, const void *data, size_t len)
{
	ssize_t n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)n;
}

static const char *status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

/* Answers an HTTP client with status and a one-line text body. */
static void http_answer(int fd, int status, const char *body)
{
	char head[256];
	size_t n = strlen(body);
	int k = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n", status, status_text(status), n);
	struct buf b = { 0 };

	buf_append(&b, head, (size_t)k);
	buf_append(&b, body, n);
	send_now(fd, buf_head(&b), buf_size(&b));
	buf_free(&b);
}

/* How long, and how much, a client's remaining bytes are read and dropped
 * after an answer that ends its connection. */
#define LINGER_MS 2000
#define LINGER_BYTES (1024 * 1024)

static void on_client(void *arg, int revents);
static void ask_withdraw(struct conn *c);

/*
 * Ends the connection after its answer without losing the answer: the
 * write side is shut, and what the client still sends (a request body, the
 * rest of an oversized head) is read and dropped for a while, since a
 * close(2) with unread bytes resets the connection, and a reset can
 * destroy the answer before the client reads it. The connection ends (and
 * is reported) at the client's end of file, after LINGER_BYTES or after
 * LINGER_MS.
 */
static void linger(struct conn *c, const char *error)
{
	shutdown(c->cfd, SHUT_WR);
	c->error = error;
	c->state = ST_LINGER;
	c->linger_bytes = 0;
	ask_withdraw(c);
	net_lookup_cancel(TAKE_PTR(c->lookup));
	c->uio = tc_io_free(c->uio);
	if (c->ufd >= 0)
		close(TAKE_FD(c->ufd));
	if (!c->cio)
		c->cio = tc_io_new(c->p->loop, c->cfd, TC_IO_READ, on_client, c);
	if (!c->cio) {
		net_conn_end(c, error);
		return;
	}
	tc_io_start(c->cio);
	tc_timer_start(c->timer, LINGER_MS);
}

/* Reads and drops what a lingering client sends; ends at its end. */
static void linger_read(struct conn *c)
{
	char sink[16384];

	for (int i = 0; i < 4; i++) {
		ssize_t n = recv(c->cfd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0 || (c->linger_bytes += (size_t)n) >= LINGER_BYTES) {
			net_conn_end(c, c->error);
			return;
		}
	}
}

/* Answers a failure the policy did not decide (bad request, unreachable,
 * timeout) and ends the connection. */
static void fail(struct conn *c, int status, uint8_t socks_code, const char *error, const char *msg)
{
	char body[512];

	if (c->socks) {
		uint8_t reply[10];
		if (c->state == ST_SOCKS_HELLO) {
			static const uint8_t no_method[2] = { 5, 0xff };
			send_now(c->cfd, no_method, sizeof(no_method));
		} else
			send_now(c->cfd, reply, net_socks_reply(socks_code, reply));
	} else {
		snprintf(body, sizeof(body), "toolcalld: %s\n", msg ? msg : error);
		http_answer(c->cfd, status, body);
	}
	linger(c, error);
}

/* Refuses by the policy: 403 naming host, port and rule, or SOCKS 0x02. */
static void refuse(struct conn *c, const char *rule)
{
	char body[NET_HOST_MAX + NET_RULE_MAX + 64];

	c->decision = NET_DENY;
	if (rule != c->rule)
		snprintf(c->rule, sizeof(c->rule), "%s", rule);
	net_proxy_note_refusal(c->p, c->host, c->port, c->rule);
	if (c->socks) {
		uint8_t reply[10];
		send_now(c->cfd, reply, net_socks_reply(SOCKS_RULESET, reply));
	} else {
		net_refusal_text(c->host, c->port, c->rule, body, sizeof(body));
		http_answer(c->cfd, 403, body);
	}
	linger(c, NULL);
}

/* Reads client bytes while the head or SOCKS messages are awaited, up to
 * one byte past the bound (so that "too long" is seen). Returns bytes
 * read, 0 at end of file, or -errno. */
static ssize_t read_some(struct conn *c)
{
	size_t limit = (size_t)c->p->limits.header_bytes + 1;
	size_t have = buf_size(&c->in);

	if (have >= limit)
		return -ENOBUFS;
	buf_reserve(&c->in, limit - have);
	ssize_t n = recv(c->cfd, c->in.data + c->in.len, limit - have, 0);
	if (n < 0)
		return -errno;
	c->in.len += (size_t)n;
	return n;
}

/* Parses what the client sent so far as an HTTP request head. */
static void on_head(struct conn *c)
{
	char msg[160];
	int r = net_http_parse_head(buf_head(&c->in), buf_size(&c->in), c->p->limits.header_bytes,
				    &c->req, msg, sizeof(msg));

	if (r == NET_HTTP_INCOMPLETE)
		return;
	if (r < 0) {
		net_http_req_done(&c->req);
		fail(c, -r, 0, "bad request", msg);
		return;
	}
	c->proto = c->req.connect ? NET_PROTO_CONNECT : NET_PROTO_HTTP;
	snprintf(c->host, sizeof(c->host), "%s", c->req.host);
	c->port = c->req.port;
	c->consumed = c->req.head_len;
	decide(c);
}

/* Parses the SOCKS5 greeting, then the request. */
static void on_socks(struct conn *c)
{
	const uint8_t *data = (const uint8_t *)buf_head(&c->in);
	size_t len = buf_size(&c->in);
	int r;

	if (c->state == ST_SOCKS_HELLO) {
		bool noauth = false;
		r = net_socks_greeting(data, len, &noauth);
		if (r == 0)
			return;
		if (r < 0 || !noauth) {
			fail(c, 0, 0, "bad request", NULL);
			return;
		}
		static const uint8_t chosen[2] = { 5, 0 };
		send_now(c->cfd, chosen, sizeof(chosen));
		buf_consume(&c->in, (size_t)r);
		c->state = ST_SOCKS_REQ;
		data = (const uint8_t *)buf_head(&c->in);
		len = buf_size(&c->in);
	}
	struct net_socks_req req;
	r = net_socks_request(data, len, &req);
	if (r == 0)
		return;
	if (r < 0) {
		fail(c, 0, (uint8_t)-r, "bad request", NULL);
		return;
	}
	c->proto = NET_PROTO_SOCKS5;
	snprintf(c->host, sizeof(c->host), "%s", req.host);
	c->port = req.port;
	c->consumed = (size_t)r;
	decide(c);
}

static void on_client(void *arg, int revents)
{
	struct conn *c = arg;
	char probe;

	(void)revents;
	if (c->state == ST_LINGER) {
		linger_read(c);
		return;
	}
	if (c->state == ST_HEAD || c->state == ST_SOCKS_HELLO || c->state == ST_SOCKS_REQ) {
		ssize_t n = read_some(c);
		if (n == -EAGAIN || n == -EINTR)
			return;
		if (n == -ENOBUFS) {
			/* Over the bound with no complete head. */
			fail(c, 431, SOCKS_FAIL, "bad request", "request line and headers exceed the limit");
			return;
		}
		if (n <= 0) {
			net_conn_end(c, "client closed");
			return;
		}
		if (c->socks)
			on_socks(c);
		else
			on_head(c);
		return;
	}
	/* Held (asking, resolving, connecting): only notice a client that left.
	 * Bytes it sends early wait in the socket for the relay. */
	ssize_t n = recv(c->cfd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		net_conn_end(c, "client closed");
	else if (n > 0)
		tc_io_stop(c->cio);
}

/* Decides by name, once host and port are known. */
static void decide(struct conn *c)
{
	struct net_proxy *p = c->p;
	enum net_decision d;

	tc_timer_stop(c->timer);
	if (net_proxy_over_budget(p)) {
		refuse(c, "limit:net_mb");
		return;
	}
	d = net_policy_decide(p->policy, c->host, c->port, c->rule);
	if (d == NET_DENY) {
		refuse(c, c->rule);
		return;
	}
	if (d == NET_ASK) {
		if (!p->ops->ask) {
			refuse(c, c->rule);
			return;
		}
		c->ask = calloc(1, sizeof(*c->ask));
		if (!c->ask) {
			fail(c, 503, SOCKS_FAIL, "limit", "out of memory");
			return;
		}
		c->ask->c = c;
		c->state = ST_ASK;
		tc_timer_start(c->timer, p->limits.ask_timeout_ms);
		p->ops->ask(p->ctx, c->host, c->port, c->ask);
		return;
	}
	resolve_start(c);
}

void net_ask_answer(struct net_ask *ask, bool allow, const char *rule)
{
	struct conn *c = ask->c;

	c->answered = true;
	c->answer_allow = allow;
	snprintf(c->rule, sizeof(c->rule), "%s", rule ? rule : allow ? "ask:allow" : "ask:deny");
	c->ask = NULL;
	free(ask);
	/* Resume from the loop: the caller may be deep in its own bookkeeping. */
	tc_timer_start(c->timer, 0);
}

/* Withdraws a pending ask. */
static void ask_withdraw(struct conn *c)
{
	struct net_ask *ask = TAKE_PTR(c->ask);

	if (!ask)
		return;
	if (c->p->ops->ask_cancel)
		c->p->ops->ask_cancel(c->p->ctx, ask);
	free(ask);
}

static void connect_next(struct conn *c, int last_error);

/* Keeps the addresses the policy lets the call reach; refuses when none. */
static void vet(struct conn *c, const struct net_addr *addrs, size_t n)
{
	char first_rule[NET_RULE_MAX] = "", rule[NET_RULE_MAX];

	c->n_addrs = c->next_addr = 0;
	for (size_t i = 0; i < n; i++) {
		if (net_policy_address_ok(c->p->policy, &addrs[i], rule)) {
			c->addrs[c->n_addrs++] = addrs[i];
			continue;
		}
		if (!first_rule[0]) {
			memcpy(first_rule, rule, sizeof(rule));
			net_addr_format(&addrs[i], c->address);
		}
	}
	if (c->n_addrs == 0) {
		refuse(c, first_rule[0] ? first_rule : "private:none");
		return;
	}
	connect_next(c, 0);
}

static void on_resolved(void *arg, int r, const struct net_addr *addrs, size_t n)
{
	struct conn *c = arg;

	c->lookup = NULL;
	if (r == -ETIMEDOUT) {
		fail(c, 504, SOCKS_HOST_UNREACH, "timeout", "resolving the name timed out");
		return;
	}
	if (r < 0) {
		fail(c, 502, SOCKS_HOST_UNREACH, "unresolvable", "the name does not resolve");
		return;
	}
	vet(c, addrs, n);
}

/* Finds the addresses: the literal, the "hosts" entry, or DNS. */
static void resolve_start(struct conn *c)
{
	struct net_addr a;
	const struct net_addr *fixed;

	c->state = ST_RESOLVE;
	c->decision = NET_ALLOW;	/* by the policy; an address may still be refused */
	tc_timer_start(c->timer, c->p->limits.connect_timeout_ms);
	if (net_addr_parse(c->host, &a) == 0) {
		vet(c, &a, 1);
		return;
	}
	if ((fixed = net_policy_host(c->p->policy, c->host))) {
		vet(c, fixed, 1);
		return;
	}
	c->lookup = net_resolve(c->p->resolver, c->host, on_resolved, c);
	if (!c->lookup)
		fail(c, 502, SOCKS_FAIL, "unresolvable", "out of memory");
}

static int relay_progress(void *arg, uint64_t up, uint64_t down)
{
	struct conn *c = arg;
	struct net_proxy *p = c->p;

	c->bytes_up += up;
	c->bytes_down += down;
	p->stats.bytes_up += up;
	p->stats.bytes_down += down;
	p->bytes_total += up + down;
	c->last_ms = tc_now(p->loop);
	return net_proxy_over_budget(p) ? -EDQUOT : 0;
}

static void relay_done(void *arg, int r)
{
	struct conn *c = arg;

	net_conn_end(c, r == 0 ? NULL : r == -EDQUOT ? "budget" : "reset");
}

/* Connected: answer the client and start moving bytes. */
static void established(struct conn *c)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	struct net_relay_config rc = {
		.loop = c->p->loop,
		.client_fd = c->cfd,
		.upstream_fd = c->ufd,
		.progress = relay_progress,
		.done = relay_done,
		.arg = c,
	};
	struct buf initial = { 0 };
	const char *rest = buf_head(&c->in) + c->consumed;
	size_t rest_len = buf_size(&c->in) - c->consumed;
	int r;

	c->uio = tc_io_free(c->uio);
	c->cio = tc_io_free(c->cio);
	if (c->proto == NET_PROTO_HTTP) {
		bool done = true;
		rc.body = net_http_body_new(buf_head(&c->req.head), buf_size(&c->req.head));
		if (!rc.body) {
			fail(c, 502, 0, "bad request", "the request's framing is malformed");
			return;
		}
		buf_append(&initial, buf_head(&c->req.head), buf_size(&c->req.head));
		long keep = net_http_body_feed(rc.body, rest, rest_len, &done);
		if (keep < 0) {
			net_http_body_free(rc.body);
			fail(c, 400, 0, "bad request", "malformed request body");
			return;
		}
		buf_append(&initial, rest, (size_t)keep);
		rc.up_done = done;
		rc.end_with_down = true;
	} else {
		if (c->socks) {
			uint8_t reply[10];
			send_now(c->cfd, reply, net_socks_reply(SOCKS_OK, reply));
		} else
			send_now(c->cfd, ok, sizeof(ok) - 1);
		buf_append(&initial, rest, rest_len);
	}
	rc.initial = buf_head(&initial);
	rc.initial_len = buf_size(&initial);
	r = net_relay_start(&rc, &c->relay);
	buf_free(&initial);
	/* The head's bytes went into the relay: a tunnel keeps none of them. */
	buf_free(&c->in);
	net_http_req_done(&c->req);
	if (r < 0) {
		net_conn_end(c, "reset");
		return;
	}
	c->state = ST_RELAY;
	c->last_ms = tc_now(c->p->loop);
	tc_timer_start(c->timer, c->p->limits.idle_timeout_ms);
}

static void on_upstream(void *arg, int revents)
{
	struct conn *c = arg;
	int err = 0;
	socklen_t len = sizeof(err);

	(void)revents;
	if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == EINPROGRESS)
		return;
	if (err) {
		c->uio = tc_io_free(c->uio);
		close(TAKE_FD(c->ufd));
		connect_next(c, err);
		return;
	}
	established(c);
}

/* Connects to the next vetted address; answers the last error when none is left. */
static void connect_next(struct conn *c, int last_error)
{
	struct sockaddr_storage ss;

	c->state = ST_CONNECT;
	while (c->next_addr < c->n_addrs) {
		const struct net_addr *a = &c->addrs[c->next_addr++];
		socklen_t sl = net_addr_sockaddr(a, c->port, &ss);
		int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			last_error = errno;
			continue;
		}
		net_addr_format(a, c->address);
		if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
			last_error = errno;
			close(fd);
			continue;
		}
		c->ufd = fd;
		c->uio = tc_io_new(c->p->loop, fd, TC_IO_WRITE, on_upstream, c);
		if (!c->uio) {
			fail(c, 502, SOCKS_FAIL, "connect refused", "out of memory");
			return;
		}
		tc_io_start(c->uio);
		return;
	}
	if (last_error == ECONNREFUSED)
		fail(c, 502, SOCKS_REFUSED, "connect refused", "the origin refused the connection");
	else if (last_error == ETIMEDOUT)
		fail(c, 504, SOCKS_HOST_UNREACH, "timeout", "connecting timed out");
	else if (last_error == ENETUNREACH)
		fail(c, 502, SOCKS_NET_UNREACH, "unreachable", "the network is unreachable");
	else
		fail(c, 502, SOCKS_HOST_UNREACH, "unreachable", "the host is unreachable");
}

static void on_timer(void *arg)
{
	struct conn *c = arg;
	uint64_t now, idle;

	switch (c->state) {
	case ST_HEAD:
	case ST_SOCKS_HELLO:
	case ST_SOCKS_REQ:
		fail(c, 408, SOCKS_FAIL, "timeout", "the request took too long to arrive");
		return;
	case ST_ASK:
		if (!c->answered) {
			ask_withdraw(c);
			refuse(c, "ask:timeout");
		} else if (c->answer_allow)
			resolve_start(c);
		else
			refuse(c, c->rule);
		return;
	case ST_RESOLVE:
		net_lookup_cancel(TAKE_PTR(c->lookup));
		fail(c, 504, SOCKS_HOST_UNREACH, "timeout", "resolving the name timed out");
		return;
	case ST_CONNECT:
		fail(c, 504, SOCKS_HOST_UNREACH, "timeout", "connecting timed out");
		return;
	case ST_LINGER:
		net_conn_end(c, c->error);
		return;
	case ST_RELAY:
		now = tc_now(c->p->loop);
		idle = now - c->last_ms;
		if (idle >= c->p->limits.idle_timeout_ms) {
			net_conn_end(c, "idle");
			return;
		}
		tc_timer_start(c->timer, c->p->limits.idle_timeout_ms - idle);
		return;
	}
}

struct conn *net_conn_new(struct net_proxy *p, int fd, bool socks)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->p = p;
	c->cfd = fd;
	c->ufd = -1;
	c->socks = socks;
	c->proto = socks ? NET_PROTO_SOCKS5 : NET_PROTO_HTTP;
	c->state = socks ? ST_SOCKS_HELLO : ST_HEAD;
	c->start_ms = c->last_ms = tc_now(p->loop);
	c->cio = tc_io_new(p->loop, fd, TC_IO_READ, on_client, c);
	c->timer = tc_timer_new(p->loop, on_timer, c);
	if (!c->cio || !c->timer) {
		tc_io_free(c->cio);
		tc_timer_free(c->timer);
		free(c);
		return NULL;
	}
	list_init(&c->node);
	list_insert_tail(&p->conns, &c->node);
	p->stats.active++;
	p->stats.accepted++;
	tc_io_start(c->cio);
	tc_timer_start(c->timer, p->limits.header_timeout_ms);
	return c;
}

void net_conn_end(struct conn *c, const char *error)
{
	struct net_proxy *p = c->p;
	struct net_conn_record rec;

	ask_withdraw(c);
	net_lookup_cancel(TAKE_PTR(c->lookup));
	c->relay = net_relay_free(c->relay);
	c->cio = tc_io_free(c->cio);
	c->uio = tc_io_free(c->uio);
	c->timer = tc_timer_free(c->timer);
	if (c->ufd >= 0)
		close(TAKE_FD(c->ufd));
	if (c->cfd >= 0)
		close(TAKE_FD(c->cfd));
	if (c->decision == NET_ALLOW)
		p->stats.allowed++;
	else
		p->stats.denied++;
	rec = (struct net_conn_record) {
		.proto = c->proto,
		.host = c->host,
		.port = c->port,
		.address = c->address,
		.decision = c->decision == NET_ALLOW ? NET_ALLOW : NET_DENY,
		.rule = c->rule,
		.error = error,
		.bytes_up = c->bytes_up,
		.bytes_down = c->bytes_down,
		.duration_ms = tc_now(p->loop) - c->start_ms,
	};
	list_remove(&c->node);
	p->stats.active--;
	p->ops->connection_done(p->ctx, &rec);
	buf_free(&c->in);
	net_http_req_done(&c->req);
	free(c);
}
