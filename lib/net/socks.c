/* SPDX-License-Identifier: MIT */
/*
 * SOCKS5 (RFC 1928) messages, without sockets: the method greeting (only
 * "no authentication" is served) and the CONNECT request with a domain
 * name, an IPv4 or an IPv6 address. Every length is checked against the
 * bytes at hand before it is used.
 */
#include <errno.h>
#include <string.h>

#include "lib/net/net_internal.h"

int net_socks_greeting(const uint8_t *data, size_t len, bool *noauth)
{
	if (len < 2)
		return 0;
	if (data[0] != 5 || data[1] == 0)
		return -1;
	size_t need = 2 + (size_t)data[1];
	if (len < need)
		return 0;
	*noauth = memchr(data + 2, 0x00, data[1]) != NULL;
	return (int)need;
}

int net_socks_request(const uint8_t *data, size_t len, struct net_socks_req *req)
{
	size_t need;

	memset(req, 0, sizeof(*req));
	if (len < 4)
		return 0;
	if (data[0] != 5 || data[2] != 0)
		return -SOCKS_FAIL;
	switch (data[3]) {
	case 1:
		need = 4 + 4 + 2;
		break;
	case 3:
		if (len < 5)
			return 0;
		need = 4 + 1 + (size_t)data[4] + 2;
		break;
	case 4:
		need = 4 + 16 + 2;
		break;
	default:
		return -SOCKS_ATYP;
	}
	if (len < need)
		return 0;
	/* The command is judged once the request is whole, so that the
	 * reply goes to a complete message. */
	if (data[1] != 1)
		return -SOCKS_CMD;
	req->port = (uint16_t)(data[need - 2] << 8 | data[need - 1]);
	if (req->port == 0)
		return -SOCKS_FAIL;
	if (data[3] == 3) {
		size_t n = data[4];
		if (n == 0 || memchr(data + 5, '\0', n) ||
		    net_host_normalize((const char *)data + 5, n, req->host) < 0)
			return -SOCKS_FAIL;
		/* A name that is an IP literal is treated as the address. */
		if (net_addr_parse(req->host, &req->addr) == 0)
			req->is_addr = true;
		return (int)need;
	}
	req->is_addr = true;
	if (data[3] == 1) {
		req->addr.family = AF_INET;
		memcpy(&req->addr.v4, data + 4, 4);
	} else {
		req->addr.family = AF_INET6;
		memcpy(&req->addr.v6, data + 4, 16);
	}
	net_addr_format(&req->addr, req->host);
	return (int)need;
}

size_t net_socks_reply(uint8_t code, uint8_t out[10])
{
	static const uint8_t tail[7] = { 1, 0, 0, 0, 0, 0, 0 };	/* ATYP IPv4, 0.0.0.0:0 */

	out[0] = 5;
	out[1] = code;
	out[2] = 0;
	memcpy(out + 3, tail, sizeof(tail));
	return 10;
}
