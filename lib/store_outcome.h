/* SPDX-License-Identifier: MIT */
/*
 * Outcomes as the values of a store (lib/store.h): what the dispatcher
 * hands store_open so kept outcomes can be counted, shared and read back.
 */
#ifndef TC_STORE_OUTCOME_H
#define TC_STORE_OUTCOME_H

#include <stddef.h>

#include "lib/store.h"

struct outcome;

extern const struct store_value_ops outcome_store_ops;

/* What an outcome holds in memory, roughly: for the store's byte bound. */
size_t outcome_size(const struct outcome *o);

#endif
