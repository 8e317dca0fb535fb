/* SPDX-License-Identifier: MIT */
/*
 * tools/dispatch: the tool calls of an OpenAI or Anthropic assistant
 * message, run and answered as messages ready to append (see
 * methods_dispatch.c).
 */
#ifndef TC_METHODS_DISPATCH_H
#define TC_METHODS_DISPATCH_H

#include <stdbool.h>

#include "daemon/conn.h"

void m_tools_dispatch(struct conn *c, const struct jrpc_req *req, struct pending *p);
/* Cancels the calls of a tools/dispatch request (notifications/cancelled)
 * and drops it unanswered; false when p is not one. */
bool methods_dispatch_cancel(struct pending *p);

#endif
