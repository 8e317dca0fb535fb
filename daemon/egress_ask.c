/* SPDX-License-Identifier: MIT */
/*
 * Confirmation requests of kind network.connect: a sandboxed child's
 * connection to a host no rule names, under "unknown": "ask". The proxy
 * holds the connection while the question is open. It is asked as a
 * tool's confirmation is: tool.confirmation_requested (with kind, host
 * and port) to the approvers of the call's uid and session, and the
 * call's own client through elicitation; answered through
 * confirmations/resolve (the dispatcher hands over the ids it does not
 * know, lib/dispatch/dispatch.h), first answer wins; tool.confirmation_resolved
 * tells everyone. "always_allow" is remembered for the session, host and
 * port together. Nobody to ask (no approver, no elicitation, and
 * confirmation.no_approver "deny"): refused at once. The proxy bounds how
 * long a connection waits (confirmation.timeout_ms).
 *
 * Questions are independent of each other: a connection waits for its
 * own answer alone, whatever else is asked. Connections of one run to a
 * host and port already asked about wait on that question (one question,
 * one answer for all of them); the question ends when it is answered or
 * when the last of them is gone.
 */
#include "daemon/egress_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/egress.h"
#include "daemon/server_state.h"
#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/base/map.h"
#include "lib/dispatch/dispatch.h"
#include "lib/events.h"
#include "lib/session.h"
#include "proto/json.h"
#include "proto/base/util.h"

/* Questions open and settled at once, at most; settled ones are kept
 * this long so that a late second answer learns the first. */
#define QUESTIONS_MAX 4096
#define SETTLED_KEEP_MS 60000

struct question {
	struct list node;
	char *id;
	struct net_served *sv;		/* NULL once settled */
	struct net_ask **asks;		/* the connections waiting; none once settled */
	size_t n_asks;
	char *host;
	uint16_t port;
	uid_t uid;
	char *session;
	char *call_id;
	char *tool;
	const char *decision;		/* NULL while open */
	uint64_t asked;			/* when it was asked */
	uint64_t expires;		/* settled: forgotten then */
	bool elicited;
};

static struct list questions = { &questions, &questions };
static unsigned n_questions;
static uint64_t counter;
/* Open questions, and the connections waiting on them (the metrics). */
static unsigned n_open, n_waiting;

static void question_free(struct question *q)
{
	list_remove(&q->node);
	n_questions--;
	if (!q->decision)
		n_open--;
	n_waiting -= (unsigned)q->n_asks;
	free(q->asks);
	free(q->id);
	free(q->host);
	free(q->session);
	free(q->call_id);
	free(q->tool);
	free(q);
}

static uint64_t now_ms(void)
{
	struct net_service *svc = net_service();
	return svc->loop ? tc_now(svc->loop) : mono_ms();
}

/* Forgets the settled questions kept past their time. */
static void sweep(void)
{
	uint64_t now = now_ms();
	for (struct list *pos = questions.next; pos != &questions;) {
		struct question *q = list_entry(pos, struct question, node);
		pos = pos->next;
		if (q->decision && q->expires <= now)
			question_free(q);
	}
}

/* The session's key of a remembered host and port (no tool name holds a
 * space: it cannot stand for one). Written here alone: net_allow_key_valid
 * recognises what this builds. */
#define ALLOW_PREFIX "network.connect "
#define ALLOW_KEY_MAX (sizeof(ALLOW_PREFIX) - 1 + NET_HOST_MAX + sizeof(":65535") - 1)

char *net_allow_key(const char *host, uint16_t port)
{
	return xasprintf(ALLOW_PREFIX "%s:%u", host, (unsigned)port);
}

bool net_allow_key_valid(const char *key)
{
	const size_t plen = sizeof(ALLOW_PREFIX) - 1;
	size_t len = strnlen(key, ALLOW_KEY_MAX + 1);
	if (len > ALLOW_KEY_MAX || strncmp(key, ALLOW_PREFIX, plen) != 0)
		return false;
	/* The port follows the last colon (an IPv6 literal holds colons). */
	const char *colon = strrchr(key + plen, ':');
	if (!colon || colon == key + plen || (size_t)(key + len - colon - 1) > 5)
		return false;
	unsigned port = 0;
	for (const char *p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		port = port * 10 + (unsigned)(*p - '0');
	}
	if (port == 0 || port > 65535)
		return false;
	char host[NET_HOST_MAX + 1];
	size_t hlen = (size_t)(colon - key) - plen;
	if (hlen > NET_HOST_MAX)
		return false;
	memcpy(host, key + plen, hlen);
	host[hlen] = '\0';
	if (!net_host_canonical(host))
		return false;
	/* Exactly as built: no leading zero, no sign, nothing else. */
	_cleanup_free_ char *again = net_allow_key(host, (uint16_t)port);
	return str_eq(again, key);
}

static struct session *session_of(const struct question *q)
{
	struct server *s = net_service()->server;
	return s && q->session ? session_find(s->sessions, q->uid, q->session) : NULL;
}

/* The session standing for q in events (see net_served_session). */
static const struct session *event_session(const struct question *q, struct session *tmp)
{
	struct session *found = session_of(q);
	if (found)
		return found;
	*tmp = (struct session){ .id = q->session ? q->session : (char *)"", .uid = q->uid };
	return tmp;
}

static char *question_input(const struct question *q)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "host", q->host);
	jgen_kv_int(g, "port", q->port);
	jgen_obj_close(g);
	jgen_free(g);
	return buf_steal(&b);
}

static void extra_requested(struct jgen *g, void *arg)
{
	struct question *q = arg;
	struct server *s = net_service()->server;
	jgen_kv_str(g, "requestId", q->id);
	jgen_kv_str(g, "kind", "network.connect");
	jgen_kv_str(g, "host", q->host);
	jgen_kv_int(g, "port", q->port);
	jgen_kv_str(g, "sideEffect", "network");
	_cleanup_free_ char *in = question_input(q);
	jgen_kv_str(g, "input", in);
	jgen_key(g, "files");
	jgen_arr_open(g);
	jgen_arr_close(g);
	jgen_kv_int(g, "timeoutMs", s ? (int64_t)s->cfg.confirmation.timeout_ms : 0);
}

struct resolved_arg {
	const char *id;
	const char *decision;
};

static void extra_resolved(struct jgen *g, void *arg)
{
	struct resolved_arg *r = arg;
	jgen_kv_str(g, "requestId", r->id);
	jgen_kv_str(g, "kind", "network.connect");
	jgen_kv_str(g, "decision", r->decision);
}

/* Settles q with decision (its connections answered by the caller, or
 * gone), tells the subscribers, takes the elicitation down. */
static void settle(struct question *q, const char *decision)
{
	struct server *s = net_service()->server;
	q->decision = decision;
	q->sv = NULL;
	n_open--;
	q->expires = now_ms() + SETTLED_KEEP_MS;
	if (!s)
		return;
	if (q->elicited) {
		q->elicited = false;
		dispatch_withdraw_call(s->dispatcher, q->call_id, q->id);
	}
	struct session tmp;
	struct resolved_arg r = { q->id, decision };
	event_emit(&s->bus, "tool.confirmation_resolved", event_session(q, &tmp), q->call_id, q->tool,
		   extra_resolved, &r);
}

/* Whether an approver of q's uid and session is subscribed. */
static bool approver_for(const struct question *q)
{
	struct server *s = net_service()->server;
	struct session tmp;
	return s && event_has_subscriber(&s->bus, "tool.confirmation_requested", event_session(q, &tmp));
}

/* Answers every connection waiting on q (settled by then). */
static void answer_all(struct question *q, bool allow, const char *rule)
{
	struct net_ask **asks = TAKE_PTR(q->asks);
	size_t n = q->n_asks;
	q->n_asks = 0;
	n_waiting -= (unsigned)n;
	for (size_t i = 0; i < n; i++)
		net_ask_answer(asks[i], allow, rule);
	free(asks);
}

/* Refuses q's connections: nobody can answer. */
static void refuse_unanswered(struct question *q)
{
	settle(q, "deny");
	answer_all(q, false, "ask:no answer");
}

static void add_ask(struct question *q, struct net_ask *ask)
{
	q->asks = xreallocarray(q->asks, q->n_asks + 1, sizeof(*q->asks));
	q->asks[q->n_asks++] = ask;
	n_waiting++;
}

/* The open question of a run about host and port, if any. */
static struct question *open_question(const struct net_served *sv, const char *host, uint16_t port)
{
	for (struct list *pos = questions.next; pos != &questions; pos = pos->next) {
		struct question *q = list_entry(pos, struct question, node);
		if (!q->decision && q->sv == sv && q->port == port && str_eq(q->host, host))
			return q;
	}
	return NULL;
}

/* Questions open for a uid's session (NULL: its runs without one). */
static unsigned open_for(uid_t uid, const char *session)
{
	unsigned n = 0;
	for (struct list *pos = questions.next; pos != &questions; pos = pos->next) {
		struct question *q = list_entry(pos, struct question, node);
		n += !q->decision && q->uid == uid && (q->session ? str_eq(q->session, session) : !session);
	}
	return n;
}

void net_ask_start(void *ctx, const char *host, uint16_t port, struct net_ask *ask)
{
	struct net_served *sv = ctx;
	struct server *s = sv->svc->server;
	sweep();
	/* Asked already: waits for that answer (the proxy bounds the
	 * connections of a run, so the waiters too). */
	struct question *same = open_question(sv, host, port);
	if (same) {
		add_ask(same, ask);
		return;
	}
	/* As many as a session may have confirmations pending, and a bound
	 * on all (what they hold). */
	if (!s || n_questions >= QUESTIONS_MAX ||
	    open_for(sv->uid, sv->session) >= s->cfg.limits.session_confirmations) {
		net_ask_answer(ask, false, "ask:too many questions");
		return;
	}
	struct question *q = xcalloc(1, sizeof(*q));
	q->id = xasprintf("nc-%" PRIx64 "-%" PRIu64, (uint64_t)tc_random(s->loop), ++counter);
	q->sv = sv;
	q->host = xstrdup(host);
	q->port = port;
	q->uid = sv->uid;
	q->session = sv->session ? xstrdup(sv->session) : NULL;
	q->call_id = sv->call_id ? xstrdup(sv->call_id) : NULL;
	q->tool = sv->tool ? xstrdup(sv->tool) : NULL;
	q->asked = now_ms();
	list_insert_tail(&questions, &q->node);
	n_questions++;
	n_open++;

	/* Allowed for the rest of the session already. */
	struct session *ss = session_of(q);
	_cleanup_free_ char *key = net_allow_key(host, port);
	if (ss && map_get(ss->always_allow, key)) {
		question_free(q);
		net_ask_answer(ask, true, "ask:always_allow");
		return;
	}
	bool elicit = q->call_id && dispatch_ask_call(s->dispatcher, q->call_id, NULL);
	if (!elicit && !approver_for(q) && !s->cfg.confirmation.no_approver_wait) {
		question_free(q);
		net_ask_answer(ask, false, "ask:no approver");
		return;
	}
	add_ask(q, ask);
	struct session tmp;
	event_emit(&s->bus, "tool.confirmation_requested", event_session(q, &tmp), q->call_id, q->tool,
		   extra_requested, q);
	if (elicit) {
		_cleanup_free_ char *in = question_input(q);
		_cleanup_free_ char *text = xasprintf("Allow the tool '%s' to connect to %s:%u through the "
						      "sandbox's network proxy?", q->tool ? q->tool : "?", host,
						      (unsigned)port);
		const struct confirm_question cq = {
			.request_id = q->id, .tool = q->tool ? q->tool : "", .side_effect = "network",
			.input = in, .input_len = strlen(in), .timeout_ms = s->cfg.confirmation.timeout_ms,
			.question = text,
		};
		q->elicited = dispatch_ask_call(s->dispatcher, q->call_id, &cq);
		if (!q->elicited && !approver_for(q) && !s->cfg.confirmation.no_approver_wait)
			refuse_unanswered(q);
	}
}

void net_ask_cancel(void *ctx, struct net_ask *ask)
{
	struct net_served *sv = ctx;
	for (struct list *pos = questions.next; pos != &questions; pos = pos->next) {
		struct question *q = list_entry(pos, struct question, node);
		for (size_t i = 0; !q->decision && i < q->n_asks; i++) {
			if (q->asks[i] != ask)
				continue;
			/* Withdrawn by the proxy: its wait ran out, or the
			 * connection or the call went. The question stays
			 * while another connection waits on it. */
			q->asks[i] = q->asks[--q->n_asks];
			n_waiting--;
			if (q->n_asks)
				return;
			uint32_t limit = sv && sv->svc ? sv->svc->limits.ask_timeout_ms : 0;
			settle(q, limit && now_ms() - q->asked >= limit ? "timeout" : "cancelled");
			return;
		}
	}
}

static struct question *find(const char *id)
{
	for (struct list *pos = questions.next; id && pos != &questions; pos = pos->next) {
		struct question *q = list_entry(pos, struct question, node);
		if (str_eq(q->id, id))
			return q;
	}
	return NULL;
}

/* confirmations/resolve (and an elicitation's answer) for an id the
 * dispatcher does not know. */
static int on_resolve(void *arg, uid_t uid, const char *id, const char *decision, bool *ret_accepted,
		      const char **ret_decision)
{
	(void)arg;
	sweep();
	struct question *q = find(id);
	if (!q || q->uid != uid)
		return -ENOENT;
	enum confirm_choice which;
	int r = confirm_answer(q->decision, decision, ret_accepted, ret_decision, &which);
	if (r != 0)
		return r < 0 ? r : 0;
	const char *dec = *ret_decision;
	if (which == ANSWER_ALWAYS_ALLOW) {
		struct session *ss = session_of(q);
		_cleanup_free_ char *key = net_allow_key(q->host, q->port);
		if (ss)
			map_put(ss->always_allow, key, (void *)1);
	}
	settle(q, dec);
	answer_all(q, which != ANSWER_DENY, which == ANSWER_ALLOW ? "ask:allow"
					     : which == ANSWER_DENY ? "ask:deny"
								     : "ask:always_allow");
	return 0;
}

static void on_replay(void *arg, struct subscriber *sub)
{
	(void)arg;
	struct server *s = net_service()->server;
	for (struct list *pos = questions.next; s && pos != &questions; pos = pos->next) {
		struct question *q = list_entry(pos, struct question, node);
		if (q->decision)
			continue;
		struct session tmp;
		event_emit_to(&s->bus, sub, "tool.confirmation_requested", event_session(q, &tmp), q->call_id, q->tool,
			      extra_requested, q);
	}
}

/* Open questions nobody can answer any more are refused. */
static void on_approvers_left(void *arg)
{
	(void)arg;
	struct server *s = net_service()->server;
	if (!s || s->cfg.confirmation.no_approver_wait)
		return;
	for (struct list *pos = questions.next; pos != &questions;) {
		struct question *q = list_entry(pos, struct question, node);
		pos = pos->next;
		if (!q->decision && !q->elicited && !approver_for(q))
			refuse_unanswered(q);
	}
}

static void on_elicit_failed(void *arg, const char *id)
{
	(void)arg;
	struct server *s = net_service()->server;
	struct question *q = find(id);
	if (!q || q->decision)
		return;
	q->elicited = false;
	if (s && !s->cfg.confirmation.no_approver_wait && !approver_for(q))
		refuse_unanswered(q);
}

static const struct confirm_other_ops other_ops = {
	.resolve = on_resolve,
	.replay = on_replay,
	.approvers_left = on_approvers_left,
	.elicit_failed = on_elicit_failed,
};

void net_ask_init(struct server *s)
{
	if (s->dispatcher)
		dispatch_set_confirm_other(s->dispatcher, &other_ops, NULL);
}

void net_ask_counts(unsigned *open, unsigned *waiting)
{
	*open = n_open;
	*waiting = n_waiting;
}

void net_ask_clear(void)
{
	while (!list_empty(&questions))
		question_free(list_first(&questions, struct question, node));
}
