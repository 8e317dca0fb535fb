/* SPDX-License-Identifier: MIT */
/*
 * Outcomes: how a call ended, shared (by reference) by every caller of one
 * execution and by the idempotency cache. Made from a finished tool call or
 * from an error kind and a message; written to the wire through
 * proto/mcp_result.h.
 */
#ifndef TC_OUTCOME_H
#define TC_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/errors.h"
#include "lib/tool.h"
#include "proto/base/util.h"

struct buf;
struct store_value_ops;

/* How a call ended: shared by every caller of one execution. */
struct outcome {
	unsigned refs;
	enum tc_kind kind;		/* TC_OK on success */
	bool is_error;			/* success with isError (shell exit != 0) */
	char *text;
	char *text_json;		/* text as a JSON string literal, when the tool gave it */
	char *structured;		/* JSON object text */
	char *content;			/* the content array (JSON text) when not one text item */
	char *meta;			/* the tool's own members of _meta (JSON object text), or NULL */
	char *message;
	char *error_data;		/* extra data members: JSON object text */
	char *call_id;
	char *tool;
	enum side_effect side_effects;
	bool idempotent;
	unsigned attempts;
	uint64_t duration_ms;
	uint64_t retry_after_ms;	/* circuit_open */
	char **files;
	size_t n_files;
	char *command;
};

/* A new outcome of kind, with one reference and nothing else set. */
struct outcome *outcome_new(enum tc_kind kind);
/* A new failed outcome with a formatted message. */
struct outcome *outcome_error(enum tc_kind kind, const char *fmt, ...) PRINTF(2, 3);
/* The outcome of a finished tool call, taking what the call holds. */
struct outcome *outcome_from_call(struct tool_call *tc);
struct outcome *outcome_ref(struct outcome *o);
/* Drops one reference; frees at zero. Accepts NULL; returns NULL. */
struct outcome *outcome_unref(struct outcome *o);
DEFINE_CLEANUP_FUNC(struct outcome, outcome_unref)
/* True when the kind is worth retrying (timeout: only idempotent tools). */
bool outcome_retryable(const struct outcome *o);
/* Roughly what an outcome holds in memory, for the cache's byte bound. */
size_t outcome_bytes(const struct outcome *o);
/* Writes the JSON-RPC result object of a success. */
void outcome_write_result(const struct outcome *o, bool replayed, struct buf *out);
/* Writes the error's data object (kind, retryable, attempts, ...; replayed:
 * true for an outcome replayed from the idempotency cache). */
void outcome_write_error_data(const struct outcome *o, bool replayed, struct buf *out);

/* Outcomes as the values of a store (lib/store/store.h, outcome_store.c):
 * what the dispatcher hands store_open so kept outcomes can be counted,
 * shared and read back; tasks keep their outcomes in the same form. */
extern const struct store_value_ops outcome_store_ops;

#endif
