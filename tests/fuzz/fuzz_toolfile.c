/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for tool and provider files, as the binder reads them
 * (tools/command.c, tools/mcp.c, the sandbox section): any bytes give
 * either a tool, a provider, or located errors (every one at FILE:LINE:COL),
 * never a crash or a leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bind/bind.h"
#include "lib/tool.h"
#include "proto/json.h"
#include "tools/command.h"
#include "tools/mcp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_doc *doc = NULL;
	struct json_err jerr;
	if (json_parse((const char *)data, size, JSON_ALLOW_COMMENTS, 64, &doc, &jerr) < 0)
		return 0;
	const struct json *decl = json_doc_root(doc);
	struct bind b = { .name = "fuzz.json", .text = (const char *)data, .len = size };
	struct tool *t = NULL;
	struct mcp_provider *p = NULL;
	int r;
	if (str_eq(json_str(json_get(decl, "kind")), "mcp")) {
		r = mcp_provider_bind(&b, decl, "fuzz.json", &p);
		if (r == 0)
			mcp_provider_unref(p);
	} else {
		r = command_tool_bind(&b, decl, "fuzz.json", &t);
		if (r == 0)
			tool_unref(t);
	}
	char *err = bind_errors(&b);
	/* A refusal always says why, and where. */
	if ((r < 0) != (err != NULL) || (err && strncmp(err, "fuzz.json:", 10) != 0))
		abort();
	free(err);
	json_doc_unref(doc);
	return 0;
}
