/* SPDX-License-Identifier: MIT */
/*
 * The "hooks" section of the config file: the pre_call and post_call
 * lists of programs (lib/dispatch/hooks.h).
 */
#ifndef TC_CONFIG_HOOKS_H
#define TC_CONFIG_HOOKS_H

#include "daemon/config_bind.h"

/* The keys of "hooks", NULL-key terminated. */
extern const struct bind_field config_hooks_fields[];

#endif
