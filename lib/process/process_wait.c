/* SPDX-License-Identifier: MIT */
/*
 * The calls that wait on a process (waiters): the shell call that started
 * it until it yields, process_io until its wait ends, process_kill until
 * the end; and until, looked for in the output as it comes within a
 * bounded share of each turn of the loop.
 */
#include "lib/process/process_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/loop.h"
#include "lib/regex/regex.h"

/*
 * until is matched on the loop, as output comes, by a search fed piece by
 * piece (lib/regex/regex.h): each byte is looked at once per waiting call,
 * whatever the chunks, so a match spans chunks at any distance. The loop
 * time it takes is bounded per loop turn whatever the number of calls and
 * processes: every look takes at most UNTIL_SLICE steps at a time, all of
 * them together UNTIL_TURN steps a turn, and what is left goes on
 * UNTIL_REST_MS later (the loop polls in between), the calls taken in
 * turn. Matching on the io pool instead would move the cost, not bound
 * it: the pool's threads are the file tools' too, and a costly pattern
 * would hold them as it held the loop. A call whose until has taken more
 * than UNTIL_TOTAL steps beyond UNTIL_PER_BYTE a byte looked at fails
 * with a clear error rather than burn on: an ordinary pattern takes a few
 * steps a byte, one that keeps a thousand threads alive thousands.
 * (A step takes about 2.5 ns: a turn's share is about a third of a
 * millisecond, and with the rest the looks take a quarter of the daemon's
 * time at most.)
 */
#define UNTIL_SLICE (UINT64_C(32) << 10)
#define UNTIL_TURN (UINT64_C(128) << 10)
#define UNTIL_TOTAL (UINT64_C(64) << 20)
#define UNTIL_PER_BYTE 64
/* Between two turns' shares when looks are left. */
#define UNTIL_REST_MS 1
/* Output fed at once to a look (a terminal's, stripped of escapes first). */
#define UNTIL_PIECE (16 * 1024)

void proc_waiter_free(struct proc_waiter *w)
{
	w->p->n_waiters--;
	list_remove(&w->node);
	if (w->queued)
		list_remove(&w->look_node);
	tc_timer_free(w->timer);
	regex_stream_free(w->stream);
	regex_free(w->until);
	buf_free(&w->text);
	if (w->c && w->c->state == w)
		w->c->state = NULL;
	free(w);
}

/* Answers the call a waiter holds and lets it go; finish: the call is
 * pending (else its exec is returning TOOL_DONE). */
static void waiter_settle(struct proc_waiter *w, bool finish)
{
	struct tool_call *c = w->c;
	struct process *p = w->p;
	enum proc_wait kind = w->kind;
	size_t max = w->max_bytes;
	proc_waiter_free(w);
	proc_result(c, p, kind, max);
	if (finish)
		tool_call_finish(c);
}

void proc_waiter_answer(struct proc_waiter *w)
{
	waiter_settle(w, true);
}

/* Fails a call whose until has cost too much; its output stays unread.
 * The shell call that started the process answers as it would at
 * yield_ms instead (else no one would learn the id of a process that
 * runs on), its text saying why it did not wait longer. */
static void waiter_too_costly(struct proc_waiter *w, bool finish)
{
	struct tool_call *c = w->c;
	char id[sizeof(w->p->id)];
	memcpy(id, w->p->id, sizeof(id));
	uint64_t looked = w->checked - w->from;
	if (w->kind == PROC_WAIT_SHELL) {
		waiter_settle(w, false);
		char *text = xasprintf("%s\n[until took too long to match against the output (more than %" PRIu64
				       " steps for %" PRIu64 " bytes, no match yet): the call returned without "
				       "waiting longer]", c->text ? c->text : "", UNTIL_TOTAL + UNTIL_PER_BYTE * looked,
				       looked);
		free(c->text);
		c->text = text;
		if (finish)
			tool_call_finish(c);
		return;
	}
	proc_waiter_free(w);
	tool_call_invalid(c, "until",
			  "matching it against the output of process '%s' took too long (more than %" PRIu64
			  " steps for %" PRIu64 " bytes, no match yet); use a simpler pattern (a shorter "
			  "repetition) or read the output without until",
			  id, UNTIL_TOTAL + UNTIL_PER_BYTE * looked, looked);
	if (finish)
		tool_call_finish(c);
}

static void on_waiter_timer(void *arg)
{
	proc_waiter_answer(arg);
}

/* Puts a waiter at the end of the looks to take. */
static void waiter_queue(struct proc_waiter *w)
{
	if (w->queued)
		return;
	list_insert_tail(&w->p->t->looking, &w->look_node);
	w->queued = true;
}

/* Makes the next piece of output ready for the search: 0, or -EAGAIN
 * when there is none yet. The text is searched as the model will read it
 * (without escape sequences on a terminal, unless raw). */
static int waiter_next_piece(struct proc_waiter *w, const char **ret, size_t *ret_len)
{
	struct process *p = w->p;
	if (w->text_at < buf_size(&w->text)) {
		*ret = buf_head(&w->text) + w->text_at;
		*ret_len = buf_size(&w->text) - w->text_at;
		return 0;
	}
	buf_clear(&w->text);
	w->text_at = 0;
	/* What the ring dropped before until looked at it: the search starts
	 * again after the gap (a match cannot span it). */
	if (w->checked < proc_ring_start(p)) {
		w->checked = proc_ring_start(p);
		regex_stream_reset(w->stream);
	}
	if (w->checked >= p->total) {
		/* A call that waits costs little. */
		buf_free(&w->text);
		return -EAGAIN;
	}
	proc_ring_copy(p, w->checked, MIN(p->total, w->checked + UNTIL_PIECE), &w->text);
	size_t n = buf_size(&w->text);
	if (p->tty && !p->raw) {
		/* An escape sequence or character cut at the end waits for
		 * the rest. */
		size_t whole = proc_terminal_whole(buf_head(&w->text), n);
		struct buf text = {0};
		if (!whole) {
			buf_free(&w->text);
			return -EAGAIN;
		}
		process_strip_terminal(buf_head(&w->text), whole, &text);
		buf_free(&w->text);
		w->text = text;
		n = whole;
	}
	w->checked += n;
	if (!buf_size(&w->text))
		return waiter_next_piece(w, ret, ret_len);
	*ret = buf_head(&w->text);
	*ret_len = buf_size(&w->text);
	return 0;
}

/*
 * Looks for until in the output the waiter has not looked at, within
 * *budget steps (decreased by those taken): 1 on a match, 0 when all is
 * looked at without one, -E2BIG when the budget ran out first, -ERANGE
 * when until has taken UNTIL_TOTAL steps.
 */
static int waiter_look(struct proc_waiter *w, uint64_t *budget)
{
	while (*budget > 0) {
		const char *s;
		size_t n, used = 0;
		if (w->spent >= UNTIL_TOTAL + UNTIL_PER_BYTE * (w->checked - w->from))
			return -ERANGE;
		if (waiter_next_piece(w, &s, &n) < 0) {
			/* All looked at: does it match where the output ends
			 * now ("$", "\b")? */
			uint64_t before = *budget;
			int r = w->fed ? regex_stream_at_end(w->stream, budget) : 0;
			w->spent += before - *budget;
			w->fed = false;
			return r;
		}
		uint64_t before = *budget;
		int r = regex_stream_feed(w->stream, s, n, budget, &used);
		w->spent += before - *budget;
		w->text_at += used;
		w->fed = w->fed || used > 0;
		if (r == 1)
			return 1;
	}
	return -E2BIG;
}

/* Takes the looks queued, in turn, while this loop turn's steps last. */
static void looks_run(struct process_table *t)
{
	while (t->turn_left > 0 && !list_empty(&t->looking)) {
		struct proc_waiter *w = container_of(t->looking.next, struct proc_waiter, look_node);
		list_remove(&w->look_node);
		w->queued = false;
		uint64_t budget = MIN(t->turn_left, UNTIL_SLICE), before = budget;
		int r = waiter_look(w, &budget);
		t->turn_left -= MIN(t->turn_left, before - budget);
		tc_defer_start(t->turn_end);
		if (r == 1)
			proc_waiter_answer(w);
		else if (r == -ERANGE)
			waiter_too_costly(w, true);
		else if (r == -E2BIG)
			waiter_queue(w);
	}
}

/* The end of a loop turn in which looks took steps: when they are all
 * done, the next turn gets its share; when some are left (the share is
 * spent), they go on after a rest, so that costly looks take a quarter
 * of the daemon's time at most, and a daemon that mostly waits stays the one
 * the kernel runs first when a request comes. */
static void on_turn_end(void *arg)
{
	struct process_table *t = arg;
	if (list_empty(&t->looking))
		t->turn_left = UNTIL_TURN;
	else if (!t->resuming) {
		/* Not again when armed: calls that keep coming would put
		 * it off. */
		t->resuming = true;
		tc_timer_start(t->resume, UNTIL_REST_MS);
	}
}

static void on_resume(void *arg)
{
	struct process_table *t = arg;
	t->resuming = false;
	t->turn_left = UNTIL_TURN;
	looks_run(t);
}

/* New output: the waiters with until look at it. */
void proc_waiters_output(struct process *p)
{
	PROC_FOREACH(n, tmp, &p->waiters) {
		struct proc_waiter *w = container_of(n, struct proc_waiter, node);
		if (w->until)
			waiter_queue(w);
	}
	looks_run(p->t);
}

int proc_wait(struct process *p, struct tool_call *c, enum proc_wait kind, uint64_t wait_ms,
	      struct regex *until, size_t max_bytes, uint64_t match_from)
{
	if (p->n_waiters >= PROC_WAITERS_MAX && !p->ended) {
		regex_free(until);
		tool_call_fail(c, TC_OVERLOADED, "Too many calls wait on process '%s' (at most %u); let one return first",
			       p->id, PROC_WAITERS_MAX);
		return TOOL_DONE;
	}
	struct proc_waiter *w = xcalloc(1, sizeof(*w));
	p->n_waiters++;
	w->p = p;
	w->c = c;
	w->kind = kind;
	w->until = until;
	w->max_bytes = max_bytes;
	w->from = MAX(proc_reader(p, proc_session_key(c))->pos, match_from);
	w->checked = w->from;
	if (until)
		w->stream = regex_stream_new(until);
	list_insert_tail(&p->waiters, &w->node);
	c->state = w;
	if (p->ended || (kind != PROC_WAIT_KILL && wait_ms == 0)) {
		waiter_settle(w, false);
		return TOOL_DONE;
	}
	/* A first look at what is there, within this turn's steps; the rest
	 * waits its turn. */
	if (until) {
		struct process_table *t = p->t;
		uint64_t budget = MIN(t->turn_left, UNTIL_SLICE), before = budget;
		int r = budget ? waiter_look(w, &budget) : -E2BIG;
		t->turn_left -= MIN(t->turn_left, before - budget);
		tc_defer_start(t->turn_end);
		if (r == 1) {
			waiter_settle(w, false);
			return TOOL_DONE;
		}
		if (r == -ERANGE) {
			waiter_too_costly(w, false);
			return TOOL_DONE;
		}
		if (r == -E2BIG)
			waiter_queue(w);
	}
	if (kind != PROC_WAIT_KILL) {
		w->timer = tc_timer_new(p->t->loop, on_waiter_timer, w);
		tc_timer_start(w->timer, wait_ms);
	}
	/* Last: the slot may start another call right here. */
	tool_call_release_slot(c);
	return TOOL_PENDING;
}

/* The .cancel of the process tools: a waiting call ends as cancelled; a
 * shell call cancelled before it returned its process id takes the
 * process with it (no one could reach it). */
void process_call_cancel(struct tool_call *c)
{
	struct proc_waiter *w = c->state;
	if (!w)
		return;
	struct process *p = w->p;
	bool kill_it = w->kind == PROC_WAIT_SHELL;
	proc_waiter_free(w);
	if (kill_it)
		proc_signal(p, SIGKILL, PROC_END_CANCELLED);
	tool_call_fail(c, TC_CANCELLED, "The call was stopped before it finished");
	tool_call_finish(c);
}

void proc_looks_init(struct process_table *t)
{
	list_init(&t->looking);
	t->turn_left = UNTIL_TURN;
	t->turn_end = tc_defer_new(t->loop, on_turn_end, t);
	t->resume = tc_timer_new(t->loop, on_resume, t);
}

void proc_looks_free(struct process_table *t)
{
	tc_defer_free(t->turn_end);
	tc_timer_free(t->resume);
}
