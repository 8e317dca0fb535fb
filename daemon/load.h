/* SPDX-License-Identifier: MIT */
/*
 * Building a registry from the configuration: the built-in tools, then
* every tools_dir/ *.json file, each validated whole before anything is
 * swapped in.
 */
#ifndef TC_LOAD_H
#define TC_LOAD_H

struct config;
struct registry;

/* Returns 0, or -EINVAL with "FILE:LINE:COL: message" in *ret_err. */
int registry_build(const struct config *cfg, struct registry **ret, char **ret_err);

#endif
