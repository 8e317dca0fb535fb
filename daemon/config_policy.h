/* SPDX-License-Identifier: MIT */
/*
 * The "confirmation" section of the config file: the keys that set the
 * confirmation policy (lib/dispatch/policy.h).
 */
#ifndef TC_CONFIG_POLICY_H
#define TC_CONFIG_POLICY_H

#include "daemon/config_bind.h"

/* The keys of "confirmation", NULL-key terminated. */
extern const struct bind_field config_confirmation_fields[];

#endif
