/* SPDX-License-Identifier: MIT */
/*
 * The MCP handshake as a client sends it: the protocol version this
 * project speaks and the params of an "initialize" request. toolcalld
 * sends them to the MCP servers it imports tools from, toolcallctl to
 * toolcalld; both build them here.
 */
#ifndef TC_PROTO_MCP_H
#define TC_PROTO_MCP_H

#include "proto/json.h"

/* The MCP revision a client of this project asks for. */
#define MCP_PROTOCOL_VERSION "2025-06-18"

/* Writes the params object of "initialize": protocolVersion, no client
 * capabilities, and clientInfo naming the client. */
void mcp_initialize_params(struct jgen *g, const char *client_name, const char *client_version);

#endif
