/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the SOCKS5 messages (lib/net/socks.c): the input
 * is what a client sends, greeting then request, parsed as the proxy does.
 * Whatever the bytes: no read past the input, consumed counts within it,
 * answers only from the reply codes, a parsed host normalized and a port
 * not 0, and feeding the same bytes in two pieces agrees with one piece.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/net/net_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool noauth = false;
	char norm[NET_HOST_MAX + 1];
	struct net_socks_req req, again;
	uint8_t reply[10];

	/* A copy of exactly size bytes, so that ASan sees any read past it. */
	uint8_t *copy = malloc(size ? size : 1);
	memcpy(copy, data, size);
	int g = net_socks_greeting(copy, size, &noauth);
	if (g > (int)size || g < -1)
		abort();
	size_t off = g > 0 ? (size_t)g : 0;
	for (size_t cut = 0; cut <= size - off; cut += 1 + (size - off) / 4) {
		/* An incomplete piece must say "incomplete", never decide. */
		int part = net_socks_request(copy + off, cut, &again);
		int r = net_socks_request(copy + off, size - off, &req);
		if (r > (int)(size - off))
			abort();
		if (part > 0 && part != r)
			abort();
		if (r < 0 && r != -SOCKS_FAIL && r != -SOCKS_CMD && r != -SOCKS_ATYP)
			abort();
		if (r > 0) {
			if (req.port == 0)
				abort();
			if (net_host_normalize(req.host, strlen(req.host), norm) < 0 || strcmp(norm, req.host) != 0)
				abort();
		}
		if (cut == size - off)
			break;
	}
	if (net_socks_reply(SOCKS_RULESET, reply) != 10 || reply[1] != SOCKS_RULESET)
		abort();
	free(copy);
	return 0;
}
