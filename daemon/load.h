/* SPDX-License-Identifier: MIT */
/*
 * Building a registry from the configuration: the built-in tools, then
* every tools_dir/ *.json file, each validated whole before anything is
 * swapped in.
 */
#ifndef TC_LOAD_H
#define TC_LOAD_H

#include <stddef.h>

#include "daemon/providers.h"

struct config;
struct mcp_provider;
struct registry;


/*
 * Builds a registry. Providers of prev whose declaration is unchanged are
 * kept (their server keeps running); the providers of the new registry are
 * stored in next (which the caller clears). Returns 0, or -EINVAL with
 * "FILE:LINE:COL: message" in *ret_err: one line for each tool file that
 * is wrong (every file is read).
 */
int registry_build(const struct config *cfg, const struct providers *prev, struct providers *next,
		   struct registry **ret, char **ret_err);

#endif
