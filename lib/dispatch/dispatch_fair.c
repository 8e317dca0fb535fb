/* SPDX-License-Identifier: MIT */
/*
 * Fair slots. An execution waiting for a concurrency slot waits in its
 * session's queue, oldest first. A session whose queue is not empty and
 * that is below its own cap is in its uid's round of ready sessions; a uid
 * with a ready session is in the dispatcher's round of uids. A free slot
 * goes to the first uid of the round, to that uid's first ready session, to
 * that session's oldest call, and both rounds turn: a uid with a thousand
 * calls queued gets one slot in turn, like a uid with one. A uid running
 * its share of the slots (limits.per_uid_running) leaves the round until
 * one of its calls ends, so slots stay free for the others: another uid's
 * call starts when it arrives, not when someone's call ends.
 *
 * An execution first in its session's line but held back by its tool's
 * own cap is parked on the tool, so that it does not hold up the calls of
 * other tools behind it; a slot of the tool coming free puts the oldest
 * parked one back at the head of its session's queue. Starting a call
 * costs O(1): no queue is ever rescanned.
 *
 * This file chooses; the engine runs: fair_next() hands it the execution
 * whose turn it is, and nothing here calls back into dispatch.c.
 */
#include <stdio.h>

#include "lib/dispatch/dispatch_internal.h"
#include "lib/base/map.h"
#include "lib/session.h"
#include "lib/tool.h"

/* The state of uid, made on first use. It lives as long as the
 * dispatcher: it holds the uid's circuits, and the uids that can connect
 * are the machine's users, not a client's choice. */
struct uid_state *fair_uid(struct dispatcher *d, uid_t uid)
{
	char key[16];
	snprintf(key, sizeof(key), "%u", (unsigned)uid);
	struct uid_state *u = map_get(d->uids, key);
	if (!u) {
		u = xcalloc(1, sizeof(*u));
		u->uid = uid;
		list_init(&u->ready);
		list_init(&u->node);
		u->circuits = map_new();
		stats_init(&u->stats);
		map_put(d->uids, key, u);
	}
	return u;
}

void fair_clear(struct dispatcher *d)
{
	size_t it = 0;
	void *v;
	while (map_next(d->uids, &it, NULL, &v)) {
		struct uid_state *u = v;
		size_t ci = 0;
		void *c;
		while (map_next(u->circuits, &ci, NULL, &c))
			free(c);
		map_free(u->circuits);
		stats_free(&u->stats);
		free(u);
	}
	d->uids = map_free(d->uids);
}

/* Where a member that joins a round goes: a round is kept in the order
 * its members last got a slot, so one served longer ago than the first
 * goes first (a uid that was idle does not queue behind a busy uid that
 * was served just now), any other goes last. */
static struct list *round_place(struct list *round, uint64_t served, uint64_t first_served)
{
	return !list_empty(round) && served < first_served ? round->next : round;
}

unsigned fair_uid_cap(const struct dispatcher *d)
{
	if (d->cfg.per_uid_running)
		return d->cfg.per_uid_running;
	unsigned share = (unsigned)((uint64_t)d->cfg.max_concurrent * 3 / 4);
	return share ? share : 1;
}

/* Puts u in or out of the dispatcher's round, as one of its sessions may
 * start a call now and it is below its share of the slots, or not. */
static void sync_uid(struct dispatcher *d, struct uid_state *u)
{
	bool uid_ready = !list_empty(&u->ready) && u->running < fair_uid_cap(d);
	if (uid_ready && !list_linked(&u->node)) {
		const struct uid_state *first = list_first(&d->ready, struct uid_state, node);
		list_insert_tail(round_place(&d->ready, u->served, first ? first->served : 0), &u->node);
	} else if (!uid_ready && list_linked(&u->node)) {
		list_remove(&u->node);
	}
}

/* Puts s in or out of its uid's round, and the uid in or out of the
 * dispatcher's, as s may start a call now or not. */
static void sync_session(struct dispatcher *d, struct session *s, struct uid_state *u)
{
	bool ready = !list_empty(&s->queue) && s->running < d->cfg.session_concurrency;
	if (ready && !list_linked(&s->ready_node)) {
		const struct session *first = list_first(&u->ready, struct session, ready_node);
		list_insert_tail(round_place(&u->ready, s->served, first ? first->served : 0),
				 &s->ready_node);
	} else if (!ready && list_linked(&s->ready_node)) {
		list_remove(&s->ready_node);
	}
	sync_uid(d, u);
}

void fair_queue(struct exec *e, bool head)
{
	struct session *s = e->session;
	e->state = EX_QUEUED;
	/* Inserting before the first node is inserting at the head. */
	list_insert_tail(head ? s->queue.next : &s->queue, &e->queue_node);
	s->waiting++;
	e->us->waiting++;
	e->d->waiting++;
	sync_session(e->d, s, e->us);
}

void fair_leave(struct exec *e)
{
	if (!list_linked(&e->queue_node))
		return;
	list_remove(&e->queue_node);
	e->parked = false;
	e->session->waiting--;
	e->us->waiting--;
	e->d->waiting--;
	sync_session(e->d, e->session, e->us);
}

/* Moves e, first in its session's line, aside until its tool has a slot. */
static void park(struct exec *e)
{
	list_remove(&e->queue_node);
	list_insert_tail(&e->ts->parked, &e->queue_node);
	e->parked = true;
	sync_session(e->d, e->session, e->us);
}

/* Puts a parked execution back at the head of its session's queue. */
static void unpark(struct dispatcher *d, struct exec *e)
{
	list_remove(&e->queue_node);
	e->parked = false;
	list_insert_tail(e->session->queue.next, &e->queue_node);
	sync_session(d, e->session, e->us);
}

/* Gives e a slot at every level. */
static void take_slot(struct exec *e)
{
	struct dispatcher *d = e->d;
	e->holds_slot = true;
	d->running++;
	e->us->running++;
	e->session->running++;
	e->ts->running++;
	sync_session(d, e->session, e->us);
}

void fair_release(struct exec *e)
{
	if (!e->holds_slot)
		return;
	struct dispatcher *d = e->d;
	e->holds_slot = false;
	d->running--;
	e->us->running--;
	e->session->running--;
	e->ts->running--;
	sync_session(d, e->session, e->us);
	/* The tool has a slot again: its oldest parked call may use it. */
	struct exec *p = list_first(&e->ts->parked, struct exec, queue_node);
	if (p)
		unpark(d, p);
}

bool fair_can_run(struct dispatcher *d, const struct exec *e)
{
	if (d->running >= d->cfg.max_concurrent)
		return false;
	if (e->session->running >= d->cfg.session_concurrency)
		return false;
	if (e->us->running >= fair_uid_cap(d))
		return false;
	if (e->tool->concurrency && e->ts->running >= e->tool->concurrency)
		return false;
	return true;
}

struct exec *fair_next(struct dispatcher *d)
{
	while (d->running < d->cfg.max_concurrent && !list_empty(&d->ready)) {
		struct uid_state *u = list_first(&d->ready, struct uid_state, node);
		struct session *s = list_first(&u->ready, struct session, ready_node);
		struct exec *e = list_first(&s->queue, struct exec, queue_node);
		if (e->tool->concurrency && e->ts->running >= e->tool->concurrency) {
			park(e);
			continue;
		}
		/* Both rounds turn: the next slot goes to the next uid, and
		 * this uid's next one to its next session. */
		list_remove(&u->node);
		list_insert_tail(&d->ready, &u->node);
		list_remove(&s->ready_node);
		list_insert_tail(&u->ready, &s->ready_node);
		u->served = s->served = ++d->slots_given;
		fair_leave(e);
		take_slot(e);
		return e;
	}
	return NULL;
}

void fair_recheck(struct dispatcher *d)
{
	size_t it = 0;
	void *v;
	while (map_next(d->tools, &it, NULL, &v)) {
		struct tool_state *ts = v;
		/* Newest first, each to the head: the oldest ends up first. */
		while (!list_empty(&ts->parked))
			unpark(d, list_entry(ts->parked.prev, struct exec, queue_node));
	}
	struct list *pos;
	for (pos = d->execs.next; pos != &d->execs; pos = pos->next) {
		struct exec *e = list_entry(pos, struct exec, node);
		if (e->state == EX_QUEUED)
			sync_session(d, e->session, e->us);
	}
	/* The share of a uid may have changed too. */
	it = 0;
	while (map_next(d->uids, &it, NULL, &v))
		sync_uid(d, v);
}
