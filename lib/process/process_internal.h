/* SPDX-License-Identifier: MIT */
/*
 * What the parts of lib/process/ share: the table, one process, a read
 * position, a waiting call.
 */
#ifndef TC_PROCESS_INTERNAL_H
#define TC_PROCESS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include "lib/base/list.h"
#include "lib/process/process.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"

struct jgen;
struct json;
struct regex;
struct regex_stream;
struct tc_defer;

/* Safe against removal of the current node. */
#define PROC_FOREACH(n, tmp, head) \
	for (struct list *n = (head)->next, *tmp = n->next; n != (head); n = tmp, tmp = n->next)

#define PROC_FORGOTTEN_MAX 64

struct process_table {
	struct tc_loop *loop;
	struct event_bus *bus;
	struct audit *audit;
	struct process_limits limits;
	struct list procs;		/* struct process.node, oldest first */
	uint64_t counter;
	uint32_t id_key[4];		/* hides the count in the ids (id_hide()) */
	struct process_stats stats;
	/* Looks of until at output, taken in turn (process.c). */
	struct list looking;		/* struct proc_waiter.look_node, next first */
	uint64_t turn_left;		/* steps they may still take in this loop turn */
	struct tc_defer *turn_end;	/* gives the next turn its steps */
	struct tc_timer *resume;	/* goes on with them after a rest */
	bool resuming;			/* resume is armed */
	/* The last ended processes forgotten over keep_max, to say so. */
	struct proc_forgotten {
		char id[32];
		uid_t uid;
	} forgotten[PROC_FORGOTTEN_MAX];
	unsigned n_forgotten;		/* ever: the next goes at n % MAX */
};

enum proc_end {
	PROC_END_EXIT,			/* on its own */
	PROC_END_KILLED,
	PROC_END_IDLE,
	PROC_END_LIFETIME,
	PROC_END_STOPPED,
	PROC_END_CANCELLED,		/* the shell call that started it was cancelled */
};

struct proc_reader {
	char *session;
	uint64_t pos;			/* the next byte of the output it reads */
	uint64_t used_ms;
	uint64_t seen;			/* refusals its answers named while running */
};

enum proc_wait {
	PROC_WAIT_SHELL,		/* the shell call that started it */
	PROC_WAIT_IO,
	PROC_WAIT_KILL,
};

struct proc_waiter {
	struct list node;		/* in struct process.waiters */
	struct process *p;
	struct tool_call *c;
	enum proc_wait kind;
	struct regex *until;		/* owned, or NULL */
	struct regex_stream *stream;	/* until's search, fed the output from `from` */
	uint64_t from;			/* where until starts to look */
	uint64_t checked;		/* output fed to stream (or to text) */
	struct buf text;		/* a terminal's output without escapes, */
	size_t text_at;			/* fed to stream up to here */
	bool fed;			/* since the last look at the end */
	struct list look_node;		/* in the table's looking, when queued */
	bool queued;
	uint64_t spent;			/* steps until has taken */
	size_t max_bytes;
	struct tc_timer *timer;
};

struct process {
	struct list node;
	struct process_table *t;
	char id[32];
	uid_t uid;
	char *session_id;		/* of the session that started it */
	char *call_id;
	char *command;
	char *profile;			/* its sandbox profile, or NULL */
	char *sandbox_json;		/* {profile, network, enforced}, or NULL */
	char *end_note;			/* a limit hit or a denial, once ended; or NULL */
	char *start_note;		/* an ended one its start made room for; or NULL */
	uint64_t start_ms, end_ms, start_wall_ms;
	struct child *ch;
	struct sandbox_run *run;
	/* Pipes: our end of its stdin. */
	int stdin_fd;
	/* Input accepted and not written yet (it was not reading), written
	 * as it reads; the end of input asked after it; what could not be
	 * written because it closed its input. */
	struct buf input;
	struct tc_io *input_io;
	bool eof_pending;
	uint64_t input_lost;
	/* Its stdin or terminal as /proc/PID/fd shows it, to tell its reads. */
	char input_link[64];
	/* tty: the pseudo-terminal's master and the terminal's device. */
	bool tty, raw;
	int master_fd;
	int slave_fd;			/* the terminal side, ours: its pending input */
	struct tc_io *master_io;
	/* Output: the ring holds [total - ring_len, total). */
	char *ring;
	size_t ring_cap, ring_head, ring_len;
	uint64_t total;
	struct proc_reader *readers;
	size_t n_readers;
	struct list waiters;
	unsigned n_waiters;
	struct tc_timer *idle_timer, *life_timer, *grace_timer, *keep_timer;
	bool ended;
	enum proc_end end;
	int exit_code, sig;
};

uint64_t proc_ring_start(const struct process *p);
void proc_ring_copy(const struct process *p, uint64_t from, uint64_t to, struct buf *out);
struct proc_reader *proc_reader(struct process *p, const char *session);
const char *proc_session_key(const struct tool_call *c);
uid_t proc_call_uid(const struct tool_call *c);
const char *proc_end_name(enum proc_end e);
/* exit_code (exitCode when camel), signal and, once ended, reason. */
void proc_write_end(struct jgen *g, const struct process *p, bool camel);

struct process *proc_new(struct process_table *t, const struct tool_call *c, const char *command);
/* Frees a process that never started. */
void proc_abandon(struct process *p);
void proc_started(struct process *p);
void proc_output(struct process *p, const char *s, size_t n);
void proc_ended(struct process *p, int exit_code, int sig);
void proc_signal(struct process *p, int sig, enum proc_end why);
void proc_touch(struct process *p);
void proc_event(struct process *p, const char *type);
struct process *proc_find(struct process_table *t, const char *id, uid_t uid, bool all);
/* The processes of uid that run, or (ended) those that have ended. */
unsigned proc_count(const struct process_table *t, uid_t uid, bool ended);
/* Forgets an ended process of uid that no call waits on, one whose output
 * every session that read has read (or with none) first, else the
 * oldest: its id into ret_id; false when it has none. */
bool proc_forget_one(struct process_table *t, uid_t uid, char ret_id[static 32]);
/* Whether id was uid's and forgotten over keep_max. */
bool proc_was_forgotten(const struct process_table *t, const char *id, uid_t uid);
bool proc_waiting(struct process *p);

/* The bytes of s that hold no escape sequence or UTF-8 character cut at
 * the end (the rest may be completed by output to come). */
size_t proc_terminal_whole(const char *s, size_t n);

/* process_spawn.c: arguments, input, and the terminal. */
int64_t proc_arg_int(const struct json *args, const char *key, int64_t dflt);
/* Calls waiting on one process at once. */
#define PROC_WAITERS_MAX 16
/* The largest until program (lib/regex/regex.h units). */
#define PROC_UNTIL_SIZE_MAX 2048
/* Compiles the call's until (NULL when absent); fails c on a bad one. */
int proc_compile_until(struct tool_call *c, struct regex **ret);
/* Input queued for a process at most (bytes not written yet). */
#define PROC_INPUT_MAX (256 * 1024)
/* Writes input to the process's stdin or terminal, queueing what it does
 * not take now (written as it reads): 0, -ENOBUFS when the queue cannot
 * take it (nothing written), or a negative errno when its input is closed
 * (nothing written). All or nothing: a client may send it again. */
int proc_send_input(struct process *p, const char *s, size_t n);
/* Ends the input, after what is queued. */
void proc_input_eof(struct process *p);
/* Resizes the terminal; 0 keeps that dimension. */
void proc_resize(struct process *p, unsigned cols, unsigned rows);
/* Reads what the terminal still has, and closes the
 * process's stdin and terminal. */
void proc_drain_tty(struct process *p);
void proc_close_io(struct process *p);

/* process_wait.c: the waiting calls, and until's looks. */
void proc_looks_init(struct process_table *t);
void proc_looks_free(struct process_table *t);
/* Lets a waiting call go, unanswered. */
void proc_waiter_free(struct proc_waiter *w);
/* Answers the call a waiter holds (pending) and lets it go. */
void proc_waiter_answer(struct proc_waiter *w);
/* New output: the waiters with until look at it. */
void proc_waiters_output(struct process *p);
/*
 * Makes c wait on p: answers it at once (TOOL_DONE) when p has ended,
 * until matches what is there or wait_ms is 0 (not for kill, which waits
 * for the end), else when one of these happens (TOOL_PENDING). until
 * looks at the output from the session's read position, or from
 * match_from when that is later (after input just written). Takes until.
 */
int proc_wait(struct process *p, struct tool_call *c, enum proc_wait kind, uint64_t wait_ms,
	      struct regex *until, size_t max_bytes, uint64_t match_from);
/* Sets c's outcome: the output new to its session (at most max bytes) and
 * the state of p (process_tools.c). */
void proc_result(struct tool_call *c, struct process *p, enum proc_wait kind, size_t max);

static inline int ioctl_fionread(int fd, int *ret)
{
	return ioctl(fd, FIONREAD, ret);
}

#endif
