/* SPDX-License-Identifier: MIT */
/*
 * How a tool call is answered, for every method that runs calls
 * (tools/call and tools/dispatch in methods*.c, tasks/result in
 * methods_tasks.c): its result, or its failure as a JSON-RPC error carrying the
 * envelope, or as an isError result for a client that asked for
 * toolErrors "result".
 */
#ifndef TC_ANSWER_H
#define TC_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;
struct outcome;
struct pending;

/* The message a failed call tells: the outcome's own, its kind's name
 * when it has none, never an internal error's details (those are logged). */
struct conn;

const char *answer_error_message(const struct outcome *o);
/* Writes a CallResult with isError: msg as its text, and the envelope's
 * data object (data_len bytes) whole under structuredContent.error. */
void answer_write_error_result(struct buf *out, const char *msg, const char *data, size_t data_len);
/* Answers a request with what a tools/call ending with o answers. */
void answer_outcome(struct pending *p, const struct outcome *o, bool replayed);
/* Answers a malformed tools/call with the validation envelope (tool NULL:
 * no name known). */
void answer_invalid_call(struct pending *p, const char *tool, const char *msg);
/* Answers invalid params of another method: validation_error, with the
 * message in data.errors too. */
void answer_invalid_params(struct pending *p, const char *msg);
/* Sends c notifications/progress for a call's output (stream "stdout" or
 * "stderr"), with the related task in _meta when task_id is not NULL.
 * Progress is a courtesy: for a client that does not read, it is dropped
 * rather than queued without bound (false: dropped, for the caller to
 * count); the result still holds the output. A closed c: true, nothing. */
bool answer_progress(struct conn *c, const char *task_id, const char *token, size_t token_len,
		     uint64_t progress, const char *stream, const char *data, size_t n);

#endif
