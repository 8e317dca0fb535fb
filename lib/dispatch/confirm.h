/* SPDX-License-Identifier: MIT */
/*
 * Confirmation: a call whose policy says "prompt" waits for an approver
 * (a subscriber to tool.confirmation_requested of the same uid) to allow or
 * deny it. The request shows the whole input and the files the call names
 * as they resolve ("NOTES.md -> .git/config"). Requests are answered once
 * (first write wins), time out, fail when no approver is left, are
 * cancelled with their call (each end is told by
 * tool.confirmation_resolved), and are shown again to an approver that
 * comes late. Resolved requests are kept a while so a second answer learns the
 * first.
 */
#ifndef TC_CONFIRM_H
#define TC_CONFIRM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct dispatcher;
struct exec;
struct subscriber;

/*
 * Answers confirmation request id for uid: decision "allow", "deny" or
 * "always_allow". First write wins: *ret_accepted is false when it was
 * already decided, and *ret_decision is the decision in force. -ENOENT for
 * an unknown request (or another uid's), -EINVAL for a bad decision.
 */
int dispatch_resolve(struct dispatcher *d, uid_t uid, const char *request_id, const char *decision,
		     bool *ret_accepted, const char **ret_decision);

/* An approver went away: confirmation requests that no approver can see
 * any more fail with user_denied, as a call finding none does (unless
 * confirmation.no_approver is "wait"). */
void dispatch_approvers_left(struct dispatcher *d);

/* The client asked to confirm request_id (MCP elicitation) will not
 * answer: when no approver can see it either, the call fails user_denied
 * saying the user gave no answer. */
void dispatch_elicit_failed(struct dispatcher *d, const char *request_id);

/* Sends a new subscriber the confirmation requests still open that it may
 * see, so an approver that arrives late can answer them. */
void dispatch_replay_confirmations(struct dispatcher *d, struct subscriber *sub);

/*
 * Counts what open requests hold (the whole input, the files, the diff)
 * against their uid: charge(arg, uid, delta) is called with the bytes when
 * a request is made (a negative errno refuses it: the call fails
 * overloaded) and with their negation when it is resolved, cancelled,
 * timed out or forgotten. NULL: nothing is counted.
 */
typedef int (*confirm_charge_fn)(void *arg, uid_t uid, int64_t delta);
void dispatch_set_confirm_charge(struct dispatcher *d, confirm_charge_fn charge, void *arg);

/*
 * Confirmation requests that are not a call's own (a network.connect of a
 * call's sandboxed child, daemon/net_ask.c), kept by whoever makes them:
 * confirmations/resolve and elicitation answers whose id the dispatcher
 * does not know go to resolve; a new subscriber's replay, approvers
 * leaving and a failed elicitation reach them too.
 */
struct confirm_other_ops {
	int (*resolve)(void *arg, uid_t uid, const char *request_id, const char *decision, bool *ret_accepted,
		       const char **ret_decision);
	void (*replay)(void *arg, struct subscriber *sub);
	void (*approvers_left)(void *arg);
	void (*elicit_failed)(void *arg, const char *request_id);
};
void dispatch_set_confirm_other(struct dispatcher *d, const struct confirm_other_ops *ops, void *arg);
struct confirm_question;
/* Asks the clients waiting for call call_id (MCP elicitation) question q,
 * which is not the call's own; true when one was asked. NULL q: whether
 * one could be. */
bool dispatch_ask_call(struct dispatcher *d, const char *call_id, const struct confirm_question *q);
/* Takes question request_id down from the clients of call call_id. */
void dispatch_withdraw_call(struct dispatcher *d, const char *call_id, const char *request_id);

/* For the engine: asks for confirmation of e (or fails it at once when no
 * approver is connected and none is waited for). */
void confirm_ask(struct exec *e);
/* For the engine: e is cancelled while it waits; its request is settled
 * and tool.confirmation_resolved (decision "cancelled") tells approvers. */
void confirm_cancel(struct exec *e);
/* For the engine: e is freed; a request still open is forgotten. */
void confirm_forget(struct exec *e);
/* Forgets resolved requests kept past their time. */
void confirm_sweep(struct dispatcher *d, uint64_t now);
/* When the first resolved request is to be forgotten; 0: none is kept. */
uint64_t confirm_next_expiry(struct dispatcher *d);
/* Forgets every resolved request (the dispatcher is freed). */
void confirm_clear(struct dispatcher *d);

#endif
