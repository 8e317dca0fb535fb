/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl mcp: the stdio MCP server that relays a host to the daemon
 * (see mcp.c).
 */
#ifndef TC_CTL_MCP_H
#define TC_CTL_MCP_H

/* Runs the bridge with args (after "mcp"); socket is the default socket.
 * Returns the exit status: 3 when the daemon cannot be reached. */
int ctl_mcp(const char *socket, char **args, int n);

#endif
