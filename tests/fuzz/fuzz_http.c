/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the proxy's HTTP request parser (lib/net/http.c):
 * the input is what a client sends. The first byte picks the head bound
 * (small bounds reach the 431 path quickly), the rest is the request.
 * Whatever the bytes: the answer is complete, incomplete or a 400/431;
 * a parsed head lies within the input and the bound; the host is a
 * normalized name or IP literal and the port is not 0; the head sent
 * upstream holds no hop-by-hop field, no bare CR or LF inside a line, and
 * parses again as one request; and the body tracker fed the rest never
 * claims more bytes than it was given.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/net/net_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether the forwarded head names a field that must not be forwarded. */
static bool has_hop_field(const char *head, size_t len)
{
	static const char *const names[] = {
		"\r\nconnection: keep", "\r\nkeep-alive:", "\r\nproxy-", "\r\nte:", "\r\ntrailer:", "\r\nupgrade:",
	};
	char *low = malloc(len + 1);
	bool found = false;

	for (size_t i = 0; i < len; i++)
		low[i] = (char)((head[i] >= 'A' && head[i] <= 'Z') ? head[i] - 'A' + 'a' : head[i]);
	low[len] = '\0';
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]) && !found; k++)
		found = strstr(low, names[k]) != NULL;
	free(low);
	return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct net_http_req req;
	char msg[160], norm[NET_HOST_MAX + 1];

	if (size < 1)
		return 0;
	size_t max = data[0] < 128 ? 16384 : 16 + (size_t)data[0] * 2;
	const char *text = (const char *)data + 1;
	size_t len = size - 1;

	int r = net_http_parse_head(text, len, max, &req, msg, sizeof(msg));
	if (r < 0) {
		if (r != -400 && r != -431)
			abort();
		if (!msg[0])
			abort();
		net_http_req_done(&req);
		return 0;
	}
	if (r == NET_HTTP_INCOMPLETE) {
		if (len >= max)
			abort();
		net_http_req_done(&req);
		return 0;
	}
	if (req.head_len == 0 || req.head_len > len || req.head_len > max || req.port == 0)
		abort();
	if (net_host_normalize(req.host, strlen(req.host), norm) < 0 || strcmp(norm, req.host) != 0)
		abort();
	if (!req.connect) {
		const char *h = buf_head(&req.head);
		size_t n = buf_size(&req.head);
		if (n < 4 || memcmp(h + n - 4, "\r\n\r\n", 4) != 0 || has_hop_field(h, n))
			abort();
		/* Every LF ends a CRLF line: nothing smuggles a line break in. */
		for (size_t i = 0; i < n; i++)
			if ((h[i] == '\n' && (i == 0 || h[i - 1] != '\r')) || (h[i] == '\r' && (i + 1 == n || h[i + 1] != '\n')))
				abort();
		struct net_http_body *b = net_http_body_new(h, n);
		if (!b)
			abort();	/* what we send must parse */
		bool done = false;
		long keep = net_http_body_feed(b, text + req.head_len, len - req.head_len, &done);
		if (keep > (long)(len - req.head_len))
			abort();
		net_http_body_free(b);
	}
	net_http_req_done(&req);
	return 0;
}
