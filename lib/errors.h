/* SPDX-License-Identifier: MIT */
/*
 * The closed set of error kinds a call can end with, and the one table that
 * maps each to its JSON-RPC code, its wire name and whether it is retryable.
 */
#ifndef TC_ERRORS_H
#define TC_ERRORS_H

#include <stdbool.h>

enum tc_kind {
	TC_OK = 0,
	TC_NOT_FOUND,
	TC_VALIDATION_ERROR,
	TC_IDEMPOTENCY_CONFLICT,
	TC_PERMISSION_DENIED,
	TC_USER_DENIED,
	TC_CONFIRMATION_TIMEOUT,
	TC_TIMEOUT,
	TC_TRANSIENT,
	TC_EXECUTION_ERROR,
	TC_CANCELLED,
	TC_BUDGET_EXCEEDED,
	TC_CIRCUIT_OPEN,
	TC_OVERLOADED,
	TC_INTERNAL,
	TC_KIND_MAX,
};

struct tc_kind_info {
	const char *name;	/* "validation_error" */
	int code;		/* -32601, -32602 or -32603 */
	bool retryable;		/* as a rule; timeout depends on the tool */
};

const struct tc_kind_info *tc_kind_info(enum tc_kind kind);
const char *tc_kind_name(enum tc_kind kind);
int tc_kind_code(enum tc_kind kind);

#endif
