/* SPDX-License-Identifier: MIT */
/*
 * The table of processes that outlive a call: ownership, the ring of
 * output with a read position per session, the limits and their timers,
 * the end of a process. How a process starts is process_spawn.c; the
 * calls that wait on one process_wait.c; the tools' bodies
 * process_tools.c.
 */
#include "lib/process/process_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lib/base/audit.h"
#include "lib/child/child.h"
#include "lib/events.h"
#include "lib/base/loop.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "proto/json.h"
#include "proto/utf8.h"

/* Read positions kept per process: the least recently used goes first. */
#define READERS_MAX 32

struct process_table *process_table_new(struct tc_loop *loop, struct event_bus *bus)
{
	struct process_table *t = xcalloc(1, sizeof(*t));
	t->loop = loop;
	t->bus = bus;
	t->limits = PROCESS_LIMITS_DEFAULT;
	list_init(&t->procs);
	proc_looks_init(t);
	if (getrandom(t->id_key, sizeof(t->id_key), GRND_NONBLOCK) != sizeof(t->id_key))
		for (size_t i = 0; i < ELEMENTSOF(t->id_key); i++)
			t->id_key[i] = tc_random(loop);
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
		proc_waiter_free(w);
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
 * text ends with (lib/child/child.h), read from the end of its output:
 * as much as a shell call's text keeps (output_max), from a line's
 * start. */
static void end_note(struct process *p)
{
	struct buf tail = {0};
	uint64_t keep = p->t->limits.output_max ? p->t->limits.output_max : 4096;
	uint64_t from = MAX(proc_ring_start(p), p->total > keep ? p->total - keep : 0);
	proc_ring_copy(p, from, p->total, &tail);
	const char *nl = from && buf_size(&tail) ? memchr(buf_head(&tail), '\n', buf_size(&tail)) : NULL;
	if (nl)
		buf_consume(&tail, (size_t)(nl + 1 - buf_head(&tail)));
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
		proc_waiter_answer(container_of(n, struct proc_waiter, node));
	p->keep_timer = tc_timer_new(t->loop, on_keep_timer, p);
	tc_timer_start(p->keep_timer, t->limits.keep_ms);
}

/* Output from the process: into the ring, then to the waiters. */
void proc_output(struct process *p, const char *s, size_t n)
{
	ring_add(p, s, n);
	proc_waiters_output(p);
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
	/* Every uid's processes share the count: hidden, so that none
	 * learns how many the others started. */
	snprintf(p->id, sizeof(p->id), "p%016" PRIx64, id_hide(++t->counter, t->id_key));
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
	proc_looks_free(t);
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
