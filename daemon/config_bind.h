/* SPDX-License-Identifier: MIT */
/*
 * The config file's key tables are tables of the binder (lib/bind/bind.h)
 * over struct config: these shorthands name a member of struct config and
 * its bounds; a section or parser named by CUSTOM works on the whole
 * struct config.
 */
#ifndef TC_CONFIG_BIND_H
#define TC_CONFIG_BIND_H

#include "lib/bind/bind.h"

/* The tables store into it by offsets; only daemon/config.h, which
 * includes this header, knows its members. */
struct config;

#define U32(k, m, lo, hi) B_U32(struct config, k, m, lo, hi)
#define U64(k, m, lo, hi) B_U64(struct config, k, m, lo, hi)
#define PATH(k, m) B_PATH(struct config, k, m)
#define PATH_NULL(k, m) B_PATH_NULL(struct config, k, m)
#define PATHS(k, m, n) B_PATHS(struct config, k, m, n)
#define SECTION(k, t, u) B_SECTION(k, t, u)
#define CUSTOM(k, f) B_WHOLE(k, f)

/* Checks a user id (a group id when groups) or a name looked up now,
 * never (uid_t)-1 (config.c). */
int config_want_id(struct bind *p, const char *key, const struct json *item, bool groups, uint32_t *ret);

#define MS_MAX UINT32_MAX
#define GIB (UINT64_C(1) << 30)

#endif
