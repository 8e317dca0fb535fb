/* SPDX-License-Identifier: MIT */
/*
 * tools/dispatch, in the formats of LLM providers: the tool calls of an
 * OpenAI or Anthropic assistant message, run and answered as messages
 * ready to append (see methods_llm.c).
 */
#ifndef TC_METHODS_LLM_H
#define TC_METHODS_LLM_H

#include <stdbool.h>

#include "daemon/conn.h"

void m_tools_dispatch(struct conn *c, const struct jrpc_req *req, struct pending *p);
/* Cancels the calls of a tools/dispatch request (notifications/cancelled)
 * and drops it unanswered; false when p is not one. */
bool methods_llm_cancel(struct pending *p);

#endif
