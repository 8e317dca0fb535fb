/* SPDX-License-Identifier: MIT */
/*
 * The "store" and "tasks" sections of the config file: where idempotency
 * records and tasks are kept (this daemon's memory, or a Redis shared by
 * many daemons) and how tasks are bounded.
 */
#ifndef TC_CONFIG_STORE_H
#define TC_CONFIG_STORE_H

#include "daemon/config_bind.h"

/* The keys of "store" and of "tasks", NULL-key terminated. */
extern const struct bind_field config_store_fields[];
extern const struct bind_field config_tasks_fields[];

#endif
