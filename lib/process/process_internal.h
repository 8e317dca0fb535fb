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

/* Safe against removal of the current node. */
#define PROC_FOREACH(n, tmp, head) \
	for (struct list *n = (head)->next, *tmp = n->next; n != (head); n = tmp, tmp = n->next)

struct process_table {
	struct tc_loop *loop;
	struct event_bus *bus;
	struct audit *audit;
	struct process_limits limits;
	struct list procs;		/* struct process.node, oldest first */
	uint64_t counter;
	struct process_stats stats;
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
	uint64_t from;			/* where until starts to look */
	uint64_t checked;		/* how far it has looked */
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
	uint64_t start_ms, end_ms, start_wall_ms;
	struct child *ch;
	struct sandbox_run *run;
	/* Pipes: our end of its stdin. */
	int stdin_fd;
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
unsigned proc_count(const struct process_table *t, uid_t uid);
/* Forgets the oldest ended process of uid that no call waits on, to make
 * room for a new one; false when it has none. */
bool proc_make_room(struct process_table *t, uid_t uid);
bool proc_waiting(struct process *p);

/* process_spawn.c: arguments, input, and the terminal. */
int64_t proc_arg_int(const struct json *args, const char *key, int64_t dflt);
/* Calls waiting on one process at once. */
#define PROC_WAITERS_MAX 16
/* The largest until program (lib/regex/regex.h units). */
#define PROC_UNTIL_SIZE_MAX 2048
/* Compiles the call's until (NULL when absent); fails c on a bad one. */
int proc_compile_until(struct tool_call *c, struct regex **ret);
ssize_t proc_write_input(struct process *p, const char *s, size_t n);
void proc_input_eof(struct process *p);
/* Resizes the terminal; 0 keeps that dimension. */
void proc_resize(struct process *p, unsigned cols, unsigned rows);
/* Reads what the terminal still has, and closes the
 * process's stdin and terminal. */
void proc_drain_tty(struct process *p);
void proc_close_io(struct process *p);

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
