/* SPDX-License-Identifier: MIT */
/*
 * The table of processes that outlive a call: ownership, the ring of
 * output with a read position per session, the limits and their timers,
 * the end of a process, and the calls that wait on one (waiters). How a
 * process starts is process_spawn.c; the tools' bodies process_tools.c.
 */
#include "lib/process/process_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/audit.h"
#include "lib/child/child.h"
#include "lib/events.h"
#include "lib/base/loop.h"
#include "lib/regex/regex.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "proto/json.h"
#include "proto/utf8.h"

/* Read positions kept per process: the least recently used goes first. */
#define READERS_MAX 32
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

static void on_turn_end(void *arg);
static void on_resume(void *arg);

struct process_table *process_table_new(struct tc_loop *loop, struct event_bus *bus)
{
	struct process_table *t = xcalloc(1, sizeof(*t));
	t->loop = loop;
	t->bus = bus;
	t->limits = PROCESS_LIMITS_DEFAULT;
	list_init(&t->procs);
	list_init(&t->looking);
	t->turn_left = UNTIL_TURN;
	t->turn_end = tc_defer_new(loop, on_turn_end, t);
	t->resume = tc_timer_new(loop, on_resume, t);
	return t;
}

void process_table_set_limits(struct process_table *t, const struct process_limits *l)
{
	t->limits = *l;
}

void process_table_set_audit(struct process_table *t, struct audit *a)
{
	t->audit = a;
}

void process_table_stats(const struct process_table *t, struct process_stats *ret)
{
	*ret = t->stats;
	ret->running = 0;
	ret->listed = 0;
	PROC_FOREACH(n, n_next, &t->procs) {
		const struct process *p = container_of(n, struct process, node);
		ret->listed++;
		if (!p->ended)
			ret->running++;
	}
}

/* --- ring and readers --------------------------------------------------- */

/* The oldest byte the ring still holds, as a position in the output. */
uint64_t proc_ring_start(const struct process *p)
{
	return p->total - p->ring_len;
}

/* Copies the bytes [from, to) of the output, which the ring holds. */
void proc_ring_copy(const struct process *p, uint64_t from, uint64_t to, struct buf *out)
{
	if (to <= from)
		return;
	size_t n = (size_t)(to - from);
	size_t at = (size_t)((p->ring_head + (from - proc_ring_start(p))) % p->ring_cap);
	size_t first = MIN(n, p->ring_cap - at);
	buf_append(out, p->ring + at, first);
	buf_append(out, p->ring, n - first);
}

/* Adds output to the ring, dropping the oldest bytes when it is full. */
static void ring_add(struct process *p, const char *s, size_t n)
{
	struct process_table *t = p->t;
	if (!p->ring_cap)
		return;
	if (!p->ring)
		p->ring = xmalloc(p->ring_cap);
	p->total += n;
	t->stats.bytes += n;
	if (n >= p->ring_cap) {
		s += n - p->ring_cap;
		n = p->ring_cap;
		p->ring_head = 0;
		p->ring_len = 0;
	}
	size_t end = (p->ring_head + p->ring_len) % p->ring_cap;
	size_t first = MIN(n, p->ring_cap - end);
	memcpy(p->ring + end, s, first);
	memcpy(p->ring, s + first, n - first);
	p->ring_len += n;
	if (p->ring_len > p->ring_cap) {
		size_t over = p->ring_len - p->ring_cap;
		p->ring_head = (p->ring_head + over) % p->ring_cap;
		p->ring_len = p->ring_cap;
	}
}

/* Cuts the ring of a process that has ended (no more output comes) to
 * what it holds, in order: kept ended processes cost their output only. */
static void ring_shrink(struct process *p)
{
	if (!p->ring || p->ring_len == p->ring_cap)
		return;
	char *ring = p->ring_len ? xmalloc(p->ring_len) : NULL;
	size_t first = MIN(p->ring_len, p->ring_cap - p->ring_head);
	if (ring) {
		memcpy(ring, p->ring + p->ring_head, first);
		memcpy(ring + first, p->ring, p->ring_len - first);
	}
	free(p->ring);
	p->ring = ring;
	p->ring_head = 0;
	if (ring)
		p->ring_cap = p->ring_len;
}

/* The read position of a session, made at the start of the output (what
 * the ring still holds) on its first read. */
struct proc_reader *proc_reader(struct process *p, const char *session)
{
	struct proc_reader *lru = NULL;
	uint64_t now = tc_now(p->t->loop);
	for (size_t i = 0; i < p->n_readers; i++) {
		struct proc_reader *r = &p->readers[i];
		if (strcmp(r->session, session) == 0) {
			r->used_ms = now;
			return r;
		}
		if (!lru || r->used_ms < lru->used_ms)
			lru = r;
	}
	if (p->n_readers == READERS_MAX) {
		free(lru->session);
		*lru = (struct proc_reader){ .session = xstrdup(session), .used_ms = now };
		return lru;
	}
	p->readers = xreallocarray(p->readers, p->n_readers + 1, sizeof(*p->readers));
	struct proc_reader *r = &p->readers[p->n_readers++];
	*r = (struct proc_reader){ .session = xstrdup(session), .used_ms = now };
	return r;
}

const char *proc_session_key(const struct tool_call *c)
{
	return c->session ? c->session->id : "";
}

uid_t proc_call_uid(const struct tool_call *c)
{
	if (c->session)
		return c->session->uid;
	return c->ident ? c->ident->uid : getuid();
}

/* --- waiters ------------------------------------------------------------- */

static void waiter_free(struct proc_waiter *w)
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
	waiter_free(w);
	proc_result(c, p, kind, max);
	if (finish)
		tool_call_finish(c);
}

static void waiter_answer(struct proc_waiter *w)
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
	waiter_free(w);
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
	waiter_answer(arg);
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
			waiter_answer(w);
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
static void waiters_output(struct process *p)
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
	waiter_free(w);
	if (kill_it)
		proc_signal(p, SIGKILL, PROC_END_CANCELLED);
	tool_call_fail(c, TC_CANCELLED, "The call was stopped before it finished");
	tool_call_finish(c);
}

/* --- the end ------------------------------------------------------------- */

static const char *const end_names[] = {
	[PROC_END_EXIT] = "exit",
	[PROC_END_KILLED] = "killed",
	[PROC_END_IDLE] = "idle",
	[PROC_END_LIFETIME] = "lifetime",
	[PROC_END_STOPPED] = "daemon_stopped",
	[PROC_END_CANCELLED] = "cancelled",
};

const char *proc_end_name(enum proc_end e)
{
	return end_names[e];
}

void proc_write_end(struct jgen *g, const struct process *p, bool camel)
{
	char sig[16];
	jgen_key(g, camel ? "exitCode" : "exit_code");
	if (!p->ended || p->sig)
		jgen_null(g);
	else
		jgen_int(g, p->exit_code);
	jgen_kv_str(g, "signal", p->ended && p->sig ? child_signal_name(p->sig, sig) : NULL);
	if (p->ended)
		jgen_kv_str(g, "reason", proc_end_name(p->end));
}

/* The member of an event on a process. */
static void extra_process(struct jgen *g, void *arg)
{
	struct process *p = arg;
	jgen_kv_str(g, "processId", p->id);
	jgen_kv_str(g, "command", p->command);
	if (p->ended) {
		proc_write_end(g, p, true);
		jgen_kv_int(g, "durationMs", (int64_t)(p->end_ms - p->start_ms));
		jgen_kv_int(g, "bytes", (int64_t)p->total);
	}
}

void proc_event(struct process *p, const char *type)
{
	struct process_table *t = p->t;
	if (!t->bus)
		return;
	/* Events are scoped by the session's id and uid, which the process
	 * keeps: the session itself may be gone. */
	struct session s = { .id = p->session_id, .uid = p->uid };
	event_emit(t->bus, type, &s, p->call_id, "shell", extra_process, p);
}

/* The audit line of a process's start (the shell call that started it
 * has its own line too, with the same callId) or end. */
static void audit_process(struct process *p, const char *event)
{
	if (!p->t->audit)
		return;
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	char tbuf[32];
	format_time(wall_ms(), tbuf);
	jgen_obj_open(g);
	jgen_kv_str(g, "time", tbuf);
	jgen_kv_str(g, "event", event);
	jgen_kv_str(g, "session", p->session_id);
	jgen_kv_int(g, "uid", (int64_t)p->uid);
	jgen_kv_str(g, "callId", p->call_id);
	jgen_kv_str(g, "processId", p->id);
	jgen_kv_str(g, "tool", "shell");
	jgen_kv_str(g, "command", p->command);
	jgen_kv_bool(g, "tty", p->tty);
	if (p->ended) {
		proc_write_end(g, p, true);
		jgen_kv_int(g, "durationMs", (int64_t)(p->end_ms - p->start_ms));
		jgen_kv_int(g, "bytes", (int64_t)p->total);
	}
	if (p->profile)
		jgen_kv_str(g, "sandbox", p->profile);
	jgen_obj_close(g);
	jgen_free(g);
	audit_record(p->t->audit, buf_head(&b), buf_size(&b));
	buf_free(&b);
}

/* Frees an ended process (or, at shutdown, one that was just killed). */
static void proc_free(struct process *p)
{
	list_remove(&p->node);
	PROC_FOREACH(n, tmp, &p->waiters) {
		struct proc_waiter *w = container_of(n, struct proc_waiter, node);
		struct tool_call *c = w->c;
		waiter_free(w);
		tool_call_fail(c, TC_CANCELLED, "The process was ended by the daemon's stop");
		tool_call_finish(c);
	}
	child_free(p->ch);
	proc_close_io(p);
	sandbox_run_end(p->run);
	tc_timer_free(p->idle_timer);
	tc_timer_free(p->life_timer);
	tc_timer_free(p->grace_timer);
	tc_timer_free(p->keep_timer);
	for (size_t i = 0; i < p->n_readers; i++)
		free(p->readers[i].session);
	free(p->readers);
	free(p->ring);
	free(p->command);
	free(p->session_id);
	free(p->call_id);
	free(p->profile);
	free(p->sandbox_json);
	free(p->end_note);
	free(p->start_note);
	free(p);
}

static void on_keep_timer(void *arg)
{
	proc_free(arg);
}

/* What the rings let go that no session had read. */
static uint64_t unread_dropped(const struct process *p)
{
	uint64_t start = proc_ring_start(p), least = start;
	for (size_t i = 0; i < p->n_readers; i++)
		least = MIN(least, p->readers[i].pos);
	return start - least;
}

/* For a command that failed on its own: the line naming the limit of its
 * sandbox it hit, or saying the sandbox refused what it tried, as shell's
 * text ends with (lib/child/child.h), read from the end of its output. */
static void end_note(struct process *p)
{
	struct buf tail = {0};
	uint64_t from = MAX(proc_ring_start(p), p->total > 4096 ? p->total - 4096 : 0);
	proc_ring_copy(p, from, p->total, &tail);
	char *limit = sandbox_run_limit_hit(p->run, p->exit_code, p->sig, buf_head(&tail), buf_size(&tail));
	if (limit)
		p->end_note = xasprintf("[limit] The command was stopped by %s of its sandbox.", limit);
	else
		p->end_note = sandbox_run_denial_note(p->run, buf_head(&tail), buf_size(&tail));
	free(limit);
	buf_free(&tail);
}

/* The leader is reaped and the output read: records how it ended, takes
 * down its sandbox, tells and answers everyone waiting, and keeps it
 * listed for keep_ms. */
void proc_ended(struct process *p, int exit_code, int sig)
{
	struct process_table *t = p->t;
	p->ended = true;
	p->exit_code = exit_code;
	p->sig = sig;
	p->end_ms = tc_now(t->loop);
	p->ch = child_free(p->ch);
	proc_drain_tty(p);
	proc_close_io(p);
	ring_shrink(p);
	if (p->end == PROC_END_EXIT && (exit_code != 0 || sig))
		end_note(p);
	else /* only what the daemon saw refused, not its output's words, */
		p->end_note = sandbox_run_seen_note(p->run);
	/* and a TMPDIR it filled, however it ended (a failure's line names
	 * it already). */
	if (p->end != PROC_END_EXIT || (exit_code == 0 && !sig)) {
		char *tmp = child_tmp_note(p->run);
		if (tmp && p->end_note) {
			char *both = xasprintf("%s\n%s", tmp, p->end_note);
			free(tmp);
			tmp = both;
		}
		if (tmp) {
			free(p->end_note);
			p->end_note = tmp;
		}
	}
	/* What its network proxy refused, however it ended. */
	char *net = sandbox_run_net_note(p->run);
	if (net) {
		char *both = p->end_note ? xasprintf("%s\n%s", p->end_note, net) : NULL;
		free(p->end_note);
		p->end_note = both ? both : TAKE_PTR(net);
		free(net);
	}
	p->run = sandbox_run_end(p->run);
	p->idle_timer = tc_timer_free(p->idle_timer);
	p->life_timer = tc_timer_free(p->life_timer);
	p->grace_timer = tc_timer_free(p->grace_timer);
	t->stats.exited++;
	t->stats.dropped += unread_dropped(p);
	if (p->end == PROC_END_IDLE)
		t->stats.idle_ended++;
	else if (p->end == PROC_END_LIFETIME)
		t->stats.lifetime_ended++;
	else if (p->end == PROC_END_KILLED)
		t->stats.killed++;
	audit_process(p, "process.exited");
	proc_event(p, "process.exited");
	PROC_FOREACH(n, tmp, &p->waiters)
		waiter_answer(container_of(n, struct proc_waiter, node));
	p->keep_timer = tc_timer_new(t->loop, on_keep_timer, p);
	tc_timer_start(p->keep_timer, t->limits.keep_ms);
}

/* Output from the process: into the ring, then to the waiters. */
void proc_output(struct process *p, const char *s, size_t n)
{
	ring_add(p, s, n);
	waiters_output(p);
}

static void on_grace_timer(void *arg)
{
	struct process *p = arg;
	if (p->ended || !p->ch || !child_running(p->ch))
		return;
	sandbox_run_kill(p->run);
	(void)kill(-child_pid(p->ch), SIGKILL);
}

/* Sends sig to the process's group (its session, with a terminal), and
 * SIGKILL to its whole tree after the grace delay. */
void proc_signal(struct process *p, int sig, enum proc_end why)
{
	if (p->ended || !p->ch || !child_running(p->ch))
		return;
	if (p->end == PROC_END_EXIT)
		p->end = why;
	pid_t pid = child_pid(p->ch);
	if (sig == SIGKILL)
		sandbox_run_kill(p->run);
	(void)kill(-pid, sig);
	if (sig != SIGKILL && sig != SIGCONT)
		(void)kill(-pid, SIGCONT);
	if (!p->grace_timer)
		p->grace_timer = tc_timer_new(p->t->loop, on_grace_timer, p);
	tc_timer_start(p->grace_timer, sig == SIGKILL ? 0 : p->t->limits.kill_grace_ms);
}

static void on_idle_timer(void *arg)
{
	proc_signal(arg, SIGTERM, PROC_END_IDLE);
}

static void on_life_timer(void *arg)
{
	proc_signal(arg, SIGTERM, PROC_END_LIFETIME);
}

void proc_touch(struct process *p)
{
	if (p->idle_timer)
		tc_timer_start(p->idle_timer, p->t->limits.idle_ms);
}

/* --- the table ----------------------------------------------------------- */

struct process *proc_find(struct process_table *t, const char *id, uid_t uid, bool all)
{
	PROC_FOREACH(n, n_next, &t->procs) {
		struct process *p = container_of(n, struct process, node);
		if (strcmp(p->id, id) == 0 && (all || p->uid == uid))
			return p;
	}
	return NULL;
}

unsigned proc_count(const struct process_table *t, uid_t uid, bool ended)
{
	unsigned k = 0;
	PROC_FOREACH(n, n_next, &t->procs) {
		const struct process *p = container_of(n, struct process, node);
		k += p->uid == uid && p->ended == ended;
	}
	return k;
}

/* Whether nothing of its output is left that a session reading it has
 * not read (a process no one read is not read out, unless silent). */
static bool read_out(const struct process *p)
{
	if (!p->total)
		return true;
	for (size_t i = 0; i < p->n_readers; i++)
		if (p->readers[i].pos >= p->total)
			return true;
	return false;
}

bool proc_forget_one(struct process_table *t, uid_t uid, char ret_id[static 32])
{
	struct process *victim = NULL;
	PROC_FOREACH(n, n_next, &t->procs) {
		struct process *p = container_of(n, struct process, node);
		if (p->uid != uid || !p->ended || !p->keep_timer || p->n_waiters)
			continue;
		if (read_out(p)) {
			victim = p;
			break;
		}
		if (!victim)
			victim = p;
	}
	if (!victim)
		return false;
	struct proc_forgotten *f = &t->forgotten[t->n_forgotten++ % PROC_FORGOTTEN_MAX];
	memcpy(f->id, victim->id, sizeof(f->id));
	f->uid = uid;
	memcpy(ret_id, victim->id, 32);
	t->stats.evicted++;
	proc_free(victim);
	return true;
}

bool proc_was_forgotten(const struct process_table *t, const char *id, uid_t uid)
{
	for (unsigned i = 0; i < MIN(t->n_forgotten, PROC_FORGOTTEN_MAX); i++)
		if (t->forgotten[i].uid == uid && strcmp(t->forgotten[i].id, id) == 0)
			return true;
	return false;
}

struct process *proc_new(struct process_table *t, const struct tool_call *c, const char *command)
{
	struct process *p = xcalloc(1, sizeof(*p));
	p->t = t;
	snprintf(p->id, sizeof(p->id), "p%" PRIu64 "-%04x", ++t->counter, (unsigned)(tc_random(t->loop) & 0xffff));
	p->uid = proc_call_uid(c);
	p->session_id = xstrdup(proc_session_key(c));
	p->call_id = xstrdup(c->call_id ? c->call_id : "");
	p->command = xstrdup(command);
	p->start_ms = tc_now(t->loop);
	p->start_wall_ms = wall_ms();
	p->ring_cap = t->limits.buffer_bytes;
	p->stdin_fd = -1;
	p->master_fd = -1;
	p->slave_fd = -1;
	list_init(&p->waiters);
	list_insert_tail(&t->procs, &p->node);
	return p;
}

/* Arms the limits of a process that has started. */
void proc_started(struct process *p)
{
	struct process_table *t = p->t;
	t->stats.started++;
	p->idle_timer = tc_timer_new(t->loop, on_idle_timer, p);
	tc_timer_start(p->idle_timer, t->limits.idle_ms);
	p->life_timer = tc_timer_new(t->loop, on_life_timer, p);
	tc_timer_start(p->life_timer, t->limits.lifetime_ms);
	audit_process(p, "process.started");
	proc_event(p, "process.started");
}

void proc_abandon(struct process *p)
{
	proc_free(p);
}

struct process_table *process_table_free(struct process_table *t)
{
	if (!t)
		return NULL;
	PROC_FOREACH(n, tmp, &t->procs) {
		struct process *p = container_of(n, struct process, node);
		if (!p->ended) {
			p->end = PROC_END_STOPPED;
			p->exit_code = -1;
			p->sig = SIGKILL;
			p->end_ms = tc_now(t->loop);
			sandbox_run_kill(p->run);
			p->ended = true;
			audit_process(p, "process.exited");
			proc_event(p, "process.exited");
		}
		proc_free(p);
	}
	tc_defer_free(t->turn_end);
	tc_timer_free(t->resume);
	free(t);
	return NULL;
}

bool proc_waiting(struct process *p)
{
	if (p->ended || !p->ch || !child_running(p->ch))
		return false;
	/* Input written and not read yet (on a terminal in canonical mode:
	 * whole lines) means it is not waiting for more. */
	int fd = p->tty ? p->slave_fd : p->stdin_fd, pending = 0;
	if (fd < 0 || buf_size(&p->input) || (ioctl_fionread(fd, &pending) == 0 && pending > 0))
		return false;
	return process_tree_waiting(child_pid(p->ch), p->input_link);
}

void process_table_write_list(struct process_table *t, uid_t uid, bool all, struct jgen *g)
{
	char tbuf[32];
	jgen_arr_open(g);
	PROC_FOREACH(n, n_next, &t->procs) {
		struct process *p = container_of(n, struct process, node);
		if (!all && p->uid != uid)
			continue;
		jgen_obj_open(g);
		jgen_kv_str(g, "id", p->id);
		jgen_kv_int(g, "uid", (int64_t)p->uid);
		jgen_kv_str(g, "command", p->command);
		format_time(p->start_wall_ms, tbuf);
		jgen_kv_str(g, "started", tbuf);
		jgen_kv_bool(g, "running", !p->ended);
		proc_write_end(g, p, false);
		jgen_kv_int(g, "bytes", (int64_t)p->total);
		jgen_kv_int(g, "dropped", (int64_t)proc_ring_start(p));
		jgen_kv_bool(g, "waiting_for_input", proc_waiting(p));
		jgen_kv_bool(g, "tty", p->tty);
		jgen_obj_close(g);
	}
	jgen_arr_close(g);
}

int process_table_kill(struct process_table *t, const char *id, uid_t uid, bool all, int sig)
{
	struct process *p = proc_find(t, id, uid, all);
	if (!p)
		return -ENOENT;
	if (p->ended)
		return -ESRCH;
	proc_signal(p, sig, PROC_END_KILLED);
	return 0;
}
