/* SPDX-License-Identifier: MIT */
/*
 * The error-kind table of the contract (§4).
 */
#include "lib/errors.h"

#include "proto/jsonrpc.h"

static const struct tc_kind_info kinds[TC_KIND_MAX] = {
	[TC_OK]                   = { "ok",                   0,                     false },
	[TC_NOT_FOUND]            = { "not_found",            JRPC_METHOD_NOT_FOUND, false },
	[TC_VALIDATION_ERROR]     = { "validation_error",     JRPC_INVALID_PARAMS,   false },
	[TC_IDEMPOTENCY_CONFLICT] = { "idempotency_conflict", JRPC_INVALID_PARAMS,   false },
	[TC_PERMISSION_DENIED]    = { "permission_denied",    JRPC_INTERNAL_ERROR,   false },
	[TC_USER_DENIED]          = { "user_denied",          JRPC_INTERNAL_ERROR,   false },
	[TC_CONFIRMATION_TIMEOUT] = { "confirmation_timeout", JRPC_INTERNAL_ERROR,   false },
	[TC_TIMEOUT]              = { "timeout",              JRPC_INTERNAL_ERROR,   false },
	[TC_TRANSIENT]            = { "transient",            JRPC_INTERNAL_ERROR,   true  },
	[TC_EXECUTION_ERROR]      = { "execution_error",      JRPC_INTERNAL_ERROR,   false },
	[TC_CANCELLED]            = { "cancelled",            JRPC_INTERNAL_ERROR,   false },
	[TC_BUDGET_EXCEEDED]      = { "budget_exceeded",      JRPC_INTERNAL_ERROR,   false },
	[TC_CIRCUIT_OPEN]         = { "circuit_open",         JRPC_INTERNAL_ERROR,   true  },
	[TC_OVERLOADED]           = { "overloaded",           JRPC_INTERNAL_ERROR,   true  },
	[TC_INTERNAL]             = { "internal",             JRPC_INTERNAL_ERROR,   false },
};

const struct tc_kind_info *tc_kind_info(enum tc_kind kind)
{
	if ((unsigned)kind >= TC_KIND_MAX)
		kind = TC_INTERNAL;
	return &kinds[kind];
}

const char *tc_kind_name(enum tc_kind kind)
{
	return tc_kind_info(kind)->name;
}

int tc_kind_code(enum tc_kind kind)
{
	return tc_kind_info(kind)->code;
}
