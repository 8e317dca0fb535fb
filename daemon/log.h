/* SPDX-License-Identifier: MIT */
/*
 * Logging: to journald with structured fields when stderr is connected to
 * the journal (under systemd), to stderr otherwise. Programs log; lib/ does
 * not.
 */
#ifndef TC_LOG_H
#define TC_LOG_H

#include <syslog.h>

#include "proto/base/util.h"

/* Detects journald (JOURNAL_STREAM matches stderr) and sets the level. */
void log_init(int max_level);
void log_set_level(int max_level);
/* Logs a message; session, call and tool become fields when not NULL. */
void log_call(int prio, const char *session, const char *call_id, const char *tool,
	      const char *fmt, ...) PRINTF(5, 6);
#define log_msg(prio, ...) log_call((prio), NULL, NULL, NULL, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERR, __VA_ARGS__)

#endif
