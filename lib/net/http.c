/* SPDX-License-Identifier: MIT */
/*
 * The HTTP side of the proxy, without sockets: a request head read with
 * nodejs/http-parser (Debian's libhttp-parser) inside our own bounds (the
 * whole head in one buffer of at most 16 KiB, CRLF line ends, no folded
 * lines, at most HEADERS_MAX fields), turned into the head sent upstream:
 * origin-form, Host from the request's URL, hop-by-hop fields removed
 * (Connection and the fields it names, Keep-Alive, Proxy-*, TE, Trailer,
 * Upgrade; Transfer-Encoding stays, since the body goes through as sent),
 * "Connection: close". A second parser fed with that same head then finds
 * where the body ends, so that the origin sees exactly one message.
 */
#include <errno.h>
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/net/net_internal.h"
#include "proto/base/util.h"

#define HEADERS_MAX 128

struct span {
	const char *p;
	size_t n;
};

struct head_parse {
	struct span url;
	struct span name[HEADERS_MAX], value[HEADERS_MAX];
	size_t n;
	bool last_was_value;
	bool too_many;
	bool folded;
	bool headers_done;
	bool message_done;
};

static int on_url(http_parser *hp, const char *at, size_t len)
{
	struct head_parse *h = hp->data;

	if (h->url.p)
		return -1;	/* split: cannot happen with the head in one buffer */
	h->url = (struct span){ at, len };
	return 0;
}

static int on_field(http_parser *hp, const char *at, size_t len)
{
	struct head_parse *h = hp->data;

	if (h->n >= HEADERS_MAX) {
		h->too_many = true;
		return -1;
	}
	h->name[h->n] = (struct span){ at, len };
	h->value[h->n] = (struct span){ "", 0 };
	h->n++;
	h->last_was_value = false;
	return 0;
}

static int on_value(http_parser *hp, const char *at, size_t len)
{
	struct head_parse *h = hp->data;

	if (h->n == 0 || h->last_was_value) {
		h->folded = true;	/* obs-fold continuation line */
		return -1;
	}
	h->value[h->n - 1] = (struct span){ at, len };
	h->last_was_value = true;
	return 0;
}

static int on_headers_complete(http_parser *hp)
{
	struct head_parse *h = hp->data;

	h->headers_done = true;
	return 0;
}

static int on_message_complete(http_parser *hp)
{
	struct head_parse *h = hp->data;

	h->message_done = true;
	return 0;
}

static bool span_is(struct span s, const char *lit)
{
	return s.n == strlen(lit) && strncasecmp(s.p, lit, s.n) == 0;
}

/* Whether a field is well formed (RFC 9110): its name a token, its value
 * visible characters, spaces, tabs and obs-text. http-parser lets some
 * odd bytes through that an origin might read otherwise. */
static bool field_ok(struct span name, struct span value)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~";

	if (name.n == 0)
		return false;
	for (size_t i = 0; i < name.n; i++) {
		unsigned char ch = (unsigned char)name.p[i];
		if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch && strchr(tchar, ch))))
			return false;
	}
	for (size_t i = 0; i < value.n; i++) {
		unsigned char ch = (unsigned char)value.p[i];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return false;
	}
	return true;
}

/* Whether a header field name appears, as a token, in a Connection value. */
static bool listed_in(struct span list, struct span name)
{
	const char *p = list.p, *end = list.p + list.n;

	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
			p++;
		const char *start = p;
		while (p < end && *p != ',' && *p != ' ' && *p != '\t')
			p++;
		if ((size_t)(p - start) == name.n && name.n && strncasecmp(start, name.p, name.n) == 0)
			return true;
	}
	return false;
}

/* Whether a field is hop-by-hop: it concerns this connection only. */
static bool hop_by_hop(const struct head_parse *h, size_t i)
{
	static const char *const names[] = {
		"connection", "keep-alive", "te", "trailer", "upgrade", "host",
	};
	for (size_t k = 0; k < ELEMENTSOF(names); k++)
		if (span_is(h->name[i], names[k]))
			return true;
	/* Proxy-Authorization, Proxy-Connection, ...: all meant for us. */
	if (h->name[i].n >= 6 && strncasecmp(h->name[i].p, "proxy-", 6) == 0)
		return true;
	for (size_t k = 0; k < h->n; k++)
		if (span_is(h->name[k], "connection") && listed_in(h->value[k], h->name[i]))
			return true;
	return false;
}

/* Writes the host and port of the URL into req; the authority for Host. */
static int url_target(const struct span url, bool connect, struct net_http_req *req, char *msg,
		      size_t msg_size, struct http_parser_url *u)
{
	http_parser_url_init(u);
	if (url.n == 0 || url.n > UINT16_MAX ||
	    http_parser_parse_url(url.p, url.n, connect, u) != 0 || !(u->field_set & (1 << UF_HOST))) {
		snprintf(msg, msg_size, connect ? "CONNECT needs host:port" :
			 "a proxy request needs an absolute URL (http://host/path)");
		return -400;
	}
	if (!connect) {
		struct span scheme = { url.p + u->field_data[UF_SCHEMA].off, u->field_data[UF_SCHEMA].len };
		if (!(u->field_set & (1 << UF_SCHEMA)) || !span_is(scheme, "http")) {
			snprintf(msg, msg_size, "only http:// is forwarded; use CONNECT for https");
			return -400;
		}
		if (u->field_set & (1 << UF_USERINFO)) {
			snprintf(msg, msg_size, "user information in the URL is refused");
			return -400;
		}
	}
	const char *host = url.p + u->field_data[UF_HOST].off;
	size_t host_len = u->field_data[UF_HOST].len;
	if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
		host++;
		host_len -= 2;
	}
	if (net_host_normalize(host, host_len, req->host) < 0) {
		snprintf(msg, msg_size, "'%.*s' is not a host name", (int)MIN(host_len, 80), host);
		return -400;
	}
	req->port = (u->field_set & (1 << UF_PORT)) ? u->port : 80;
	if (req->port == 0) {
		snprintf(msg, msg_size, "port 0");
		return -400;
	}
	return 0;
}

/* Builds the head sent upstream. */
static void forward_head(const struct head_parse *h, const http_parser *hp, const struct span url,
			 const struct http_parser_url *u, struct net_http_req *req)
{
	struct buf *b = &req->head;
	bool v6 = strchr(req->host, ':') != NULL;

	buf_puts(b, http_method_str((enum http_method)hp->method));
	buf_putc(b, ' ');
	if (u->field_set & (1 << UF_PATH))
		buf_append(b, url.p + u->field_data[UF_PATH].off, u->field_data[UF_PATH].len);
	else
		buf_putc(b, '/');
	if (u->field_set & (1 << UF_QUERY)) {
		buf_putc(b, '?');
		buf_append(b, url.p + u->field_data[UF_QUERY].off, u->field_data[UF_QUERY].len);
	}
	/* The client's own version: an HTTP/1.0 client must not get a
	 * chunked answer it cannot read. */
	buf_printf(b, " HTTP/1.%u\r\nHost: ", hp->http_minor ? 1u : 0u);
	buf_printf(b, v6 ? "[%s]" : "%s", req->host);
	if (req->port != 80)
		buf_printf(b, ":%u", req->port);
	buf_puts(b, "\r\n");
	for (size_t i = 0; i < h->n; i++) {
		if (hop_by_hop(h, i))
			continue;
		buf_append(b, h->name[i].p, h->name[i].n);
		buf_puts(b, ": ");
		buf_append(b, h->value[i].p, h->value[i].n);
		buf_puts(b, "\r\n");
	}
	buf_puts(b, "Connection: close\r\n\r\n");
}

int net_http_parse_head(const char *data, size_t len, size_t max, struct net_http_req *req,
			char *msg, size_t msg_size)
{
	static http_parser_settings settings = {
		.on_url = on_url,
		.on_header_field = on_field,
		.on_header_value = on_value,
		.on_headers_complete = on_headers_complete,
		.on_message_complete = on_message_complete,
	};
	struct head_parse h = { 0 };
	struct http_parser_url u;
	http_parser hp;
	size_t head_len = 0;
	int r;

	memset(req, 0, sizeof(*req));
	msg[0] = '\0';
	/* Find the blank line within the bound; every line ends in CRLF. */
	for (size_t i = 0; i < MIN(len, max); i++) {
		if (data[i] != '\n')
			continue;
		if (i == 0 || data[i - 1] != '\r') {
			snprintf(msg, msg_size, "lines end in CRLF");
			return -400;
		}
		if (i >= 3 && data[i - 2] == '\n' && data[i - 3] == '\r') {
			head_len = i + 1;
			break;
		}
		if (i == 1) {
			snprintf(msg, msg_size, "empty request line");
			return -400;
		}
	}
	if (!head_len) {
		if (len >= max) {
			snprintf(msg, msg_size, "request line and headers exceed %zu bytes", max);
			return -431;
		}
		return NET_HTTP_INCOMPLETE;
	}
	http_parser_init(&hp, HTTP_REQUEST);
	hp.data = &h;
	size_t done = http_parser_execute(&hp, &settings, data, head_len);
	if (h.too_many) {
		snprintf(msg, msg_size, "more than %d header fields", HEADERS_MAX);
		return -431;
	}
	if (h.folded) {
		snprintf(msg, msg_size, "folded header lines are refused");
		return -400;
	}
	if (HTTP_PARSER_ERRNO(&hp) != HPE_OK || !h.headers_done || (done != head_len && !hp.upgrade)) {
		snprintf(msg, msg_size, "malformed request: %s",
			 HTTP_PARSER_ERRNO(&hp) != HPE_OK ? http_errno_description(HTTP_PARSER_ERRNO(&hp)) :
			 "incomplete head");
		return -400;
	}
	if (hp.http_major != 1) {
		snprintf(msg, msg_size, "HTTP/1.x only");
		return -400;
	}
	for (size_t i = 0; i < h.n; i++)
		if (!field_ok(h.name[i], h.value[i])) {
			snprintf(msg, msg_size, "malformed header field");
			return -400;
		}
	req->connect = hp.method == HTTP_CONNECT;
	r = url_target(h.url, req->connect, req, msg, msg_size, &u);
	if (r < 0)
		return r;
	req->head_len = head_len;
	if (req->connect)
		return NET_HTTP_OK;
	for (size_t i = 0; i < h.n; i++)
		if (span_is(h.name[i], "transfer-encoding") && !span_is(h.value[i], "chunked")) {
			snprintf(msg, msg_size, "Transfer-Encoding other than chunked is refused");
			return -400;
		}
	forward_head(&h, &hp, h.url, &u, req);
	req->has_body = !h.message_done || (hp.upgrade && ((hp.flags & F_CHUNKED) ||
					    (hp.content_length > 0 && hp.content_length != UINT64_MAX)));
	return NET_HTTP_OK;
}

void net_http_req_done(struct net_http_req *req)
{
	buf_free(&req->head);
}

struct net_http_body {
	http_parser hp;
	bool done;
};

static int body_complete(http_parser *hp)
{
	struct net_http_body *b = hp->data;

	b->done = true;
	http_parser_pause(hp, 1);
	return 0;
}

struct net_http_body *net_http_body_new(const char *head, size_t head_len)
{
	static http_parser_settings settings = { .on_message_complete = body_complete };
	struct net_http_body *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	http_parser_init(&b->hp, HTTP_REQUEST);
	b->hp.data = b;
	http_parser_execute(&b->hp, &settings, head, head_len);
	if (HTTP_PARSER_ERRNO(&b->hp) != HPE_OK && !b->done)
		return net_http_body_free(b);
	return b;
}

long net_http_body_feed(struct net_http_body *b, const char *data, size_t len, bool *done)
{
	static http_parser_settings settings = { .on_message_complete = body_complete };

	if (b->done) {
		*done = true;
		return 0;
	}
	size_t n = http_parser_execute(&b->hp, &settings, data, len);
	if (b->done) {
		*done = true;
		return (long)n;
	}
	if (HTTP_PARSER_ERRNO(&b->hp) != HPE_OK)
		return -1;
	*done = false;
	return (long)n;
}

struct net_http_body *net_http_body_free(struct net_http_body *b)
{
	free(b);
	return NULL;
}
