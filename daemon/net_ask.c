/* SPDX-License-Identifier: MIT */
/*
 * Confirmation requests of kind network.connect: a connection to a host
 * no rule names, under "unknown": "ask".
 */
#include "daemon/net_internal.h"

void net_ask_start(void *ctx, const char *host, uint16_t port, struct net_ask *ask)
{
	(void)ctx;
	(void)host;
	(void)port;
	net_ask_answer(ask, false, "unknown:ask");
}

void net_ask_cancel(void *ctx, struct net_ask *ask)
{
	(void)ctx;
	(void)ask;
}

void net_ask_clear(void)
{
}
