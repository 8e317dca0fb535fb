/* SPDX-License-Identifier: MIT */
/*
 * What toolcallctl prints: pure functions from parsed daemon messages to
 * text, kept apart from the socket code so they are unit-tested alone.
 *
 * Text that came from the daemon but was written by someone else (tool
 * descriptions, event fields, input summaries) is printed with control
 * characters replaced, so nothing a model or a tool file wrote can move the
 * cursor, recolour the terminal or forge a prompt on the approver's screen.
 * The output of a successful call is printed as is, like cat would.
 */
#ifndef TC_CTL_FORMAT_H
#define TC_CTL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/base/buf.h"
#include "proto/json.h"

/* Appends v as JSON indented by two spaces, ending with a newline. */
void ctl_pretty(const struct json *v, struct buf *out);

/* Appends the text of every text item of a CallResult's content, each
 * ending with a newline. Returns whether the result says isError. */
bool ctl_call_text(const struct json *result, struct buf *out);

/* Appends "error: <kind>: <message>" and, for a validation_error, one
 * "  <path>: <message>" line per entry of data.errors. An error without a
 * kind (a JSON-RPC error outside calls) shows its code instead. */
void ctl_error_lines(const struct json *error, struct buf *out);

/* Appends one aligned line per tool of a tools/list result: name, side
 * effects, first line of the description. */
void ctl_tool_lines(const struct json *const *tools, size_t n, struct buf *out);

/* Appends one line for the params of a notifications/event: time, type,
 * tool, then callId, sessionId, kind and every other member as key=value. */
void ctl_event_line(const struct json *event, struct buf *out);

/*
 * Appends the question for a tool.confirmation_requested event. With the
 * arguments (the daemon's "input"), every byte of what will run, never a
 * prefix, one argument a line (strings with their length):
 *     Allow shell (execute):
 *       command (600 bytes): make ...
 *       files: NOTES.md -> .git/config
 *     Allow it? [y]es/[n]o/[a]lways:
 * With only a summary: "Allow <tool> (<side effect>) <summary>? [y]es/...".
 */
void ctl_confirm_prompt(const struct json *event, struct buf *out);

/* The id a confirmation event carries, for confirmations/resolve. */
const struct json *ctl_confirm_request_id(const struct json *event);

/* Maps an answer line ("y", "No", "always", with white space) to the
 * decision of confirmations/resolve, or NULL when it is no answer. */
const char *ctl_parse_answer(const char *line, size_t len);

/* Appends s with control characters replaced by '?' (at most max bytes of
 * it, then "..."). */
void ctl_sanitize(const char *s, size_t n, size_t max, struct buf *out);

/* Appends every byte of s so that it reads unambiguously and moves no
 * cursor: "\\" "\n" "\t" "\r" escaped, other control characters (C0,
 * C1, line separators, bidirectional overrides: utf8_is_control()) as
 * \u{XXXX}, bytes that are not UTF-8 as \xHH. */
void ctl_escape(const char *s, size_t n, struct buf *out);

#endif
