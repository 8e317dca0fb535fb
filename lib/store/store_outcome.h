/* SPDX-License-Identifier: MIT */
/*
 * Outcomes as the values of a store (lib/store/store.h): what the dispatcher
 * hands store_open so kept outcomes can be counted, shared and read back.
 */
#ifndef TC_STORE_OUTCOME_H
#define TC_STORE_OUTCOME_H

#include "lib/store/store.h"

extern const struct store_value_ops outcome_store_ops;

#endif
