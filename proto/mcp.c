/* SPDX-License-Identifier: MIT */
/*
 * The params of an MCP "initialize" request, written once for every
 * client of the project (see proto/mcp.h).
 */
#include "proto/mcp.h"

void mcp_initialize_params(struct jgen *g, const char *client_name, const char *client_version)
{
	jgen_obj_open(g);
	jgen_kv_str(g, "protocolVersion", MCP_PROTOCOL_VERSION);
	jgen_key(g, "capabilities");
	jgen_obj_open(g);
	jgen_obj_close(g);
	jgen_key(g, "clientInfo");
	jgen_obj_open(g);
	jgen_kv_str(g, "name", client_name);
	jgen_kv_str(g, "version", client_version);
	jgen_obj_close(g);
	jgen_obj_close(g);
}
