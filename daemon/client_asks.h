/* SPDX-License-Identifier: MIT */
/*
 * What the daemon asks an MCP client (CONTRACT §12): its roots
 * (roots/list, after notifications/initialized and on
 * notifications/roots/list_changed), which become the session's
 * workspaces, and its user's confirmation of a call (elicitation/create),
 * answered alongside the approvers, first answer winning.
 */
#ifndef TC_CLIENT_ASKS_H
#define TC_CLIENT_ASKS_H

#include <stdbool.h>

struct conn;
struct confirm_question;
struct json;

/* Notes what initialize's capabilities declare: roots, elicitation (form). */
void asks_capabilities(struct conn *c, const struct json *capabilities);
/* Asks the client for its roots (again: an answer still awaited is
 * forgotten), when it declared the capability. */
void asks_roots(struct conn *c);
/* caller_ops.ask of a tools/call: ctx is its pending request. */
bool asks_confirm(void *ctx, const struct confirm_question *q);
/* Takes down a confirmation question put to the client of ctx (a struct
 * pending) and still unanswered: notifications/cancelled for it, and its
 * answer, should one come, is ignored (caller_ops.withdraw). */
void asks_withdraw(void *ctx, const char *request_id);

#endif
