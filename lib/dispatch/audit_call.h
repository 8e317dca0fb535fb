/* SPDX-License-Identifier: MIT */
/*
 * The audit line of one call: who asked (session, uid, pid), what ran
 * (tool, side effect, command, sandbox profile), where (workspace root),
 * what it touched (files written, files read) and how it ended (outcome,
 * attempts, duration, message). Written for every call that reached a
 * tool, whatever ended it: success, failure, timeout, cancellation, a
 * client's disconnect, shutdown. The line goes to lib/base/audit.c, which
 * queues, writes and syncs it.
 */
#ifndef TC_AUDIT_CALL_H
#define TC_AUDIT_CALL_H

#include <stdbool.h>
#include <sys/types.h>

struct audit;
struct sandbox_config;
struct json;
struct outcome;
struct session;
struct tool;

struct audit_call {
	const struct session *session;	/* may be NULL */
	pid_t pid;			/* the client's, 0 when unknown */
	const struct outcome *o;
	bool replayed;			/* answered from the idempotency cache */
	const struct tool *tool;	/* the tool that ran it, or NULL */
	const struct json *args;	/* its validated arguments, or NULL */
	const struct sandbox_config *sandbox;	/* the daemon's, for the profile of children */
};

/* Records the audit line of a call (nothing when a is NULL). */
void audit_call(struct audit *a, const struct audit_call *c);

#endif
