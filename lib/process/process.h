/* SPDX-License-Identifier: MIT */
/*
 * Processes that outlive a call (CONTRACT §19): `shell` with background
 * starts one, `process_io`, `process_kill` and `process_list` use it. The
 * table lives on the loop, as long as the daemon.
 *
 * A process belongs to the uid of the session that started it: any
 * session of that uid sees and uses it, another uid gets the answer of an
 * unknown id. Its output (stdout and stderr interleaved, or the terminal)
 * goes into one ring of limits.buffer_bytes; every session that reads has
 * its own position in it, and what the ring dropped before a session read
 * it is counted in that session's next result. It holds no execution slot:
 * calls that wait on it (the shell call until it yields, process_io until
 * its wait ends) hold timers, not the loop.
 *
 * It runs as `shell` runs (the sandbox's profile, the peer's identity, a
 * cgroup and TMPDIR of its own, kept until it ends), in a process group
 * of its own, or with `tty` a session of its own on a pseudo-terminal. It
 * ends on process_kill, after limits.idle_ms without process_io, after
 * limits.lifetime_ms, or when the table is freed (the daemon stops); then
 * everything it started goes, by its cgroup or as orphans reaped by the
 * daemon (lib/child/child.h). An ended process stays listed, its remaining
 * output readable (its ring cut to what it holds), for limits.keep_ms; a
 * uid keeps at most limits.keep_max ended ones, a start forgetting one
 * beyond (those whose output was read first, then the oldest), which its
 * answer and a later call naming the one forgotten say.
 *
 * waiting_for_input is the kernel's view: some process of its tree is
 * blocked in read/readv/pread on its stdin or terminal, or in
 * poll/select/pselect6/epoll_wait with that among the fds it waits on, and
 * no input is pending there (/proc/PID/syscall; process_kernel.c).
 */
#ifndef TC_PROCESS_H
#define TC_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/tool.h"

struct audit;
struct buf;
struct child_opts;
struct event_bus;
struct jgen;
struct sandbox_req;
struct tc_loop;

struct process_limits {
	unsigned per_uid;		/* processes one uid has running: 8 */
	unsigned keep_max;		/* ended ones one uid has listed: 32 */
	size_t buffer_bytes;		/* the ring of each: 1 MiB */
	uint64_t idle_ms;		/* without process_io: 900 s */
	uint64_t lifetime_ms;		/* 86400 s */
	uint64_t keep_ms;		/* listed after it ended: 300 s */
	uint32_t kill_grace_ms;		/* SIGTERM (or the signal asked) to SIGKILL: 5000 */
	size_t output_max;		/* what one result returns by default: 64 KiB */
};

#define PROCESS_LIMITS_DEFAULT                                                                        \
	((struct process_limits){ .per_uid = 8, .keep_max = 32, .buffer_bytes = 1024 * 1024, .idle_ms = 900000, \
				  .lifetime_ms = 86400000, .keep_ms = 300000, .kill_grace_ms = 5000, \
				  .output_max = 64 * 1024 })

/* Counters for admin/stats and metrics. */
struct process_stats {
	uint64_t started;
	uint64_t exited;		/* ended, however */
	uint64_t killed;		/* by process_kill (or toolcallctl kill) */
	uint64_t idle_ended;
	uint64_t lifetime_ended;
	uint64_t refused;		/* over per_uid */
	uint64_t evicted;		/* ended ones forgotten before keep_ms, over keep_max */
	uint64_t bytes;			/* output produced */
	uint64_t dropped;		/* output the rings let go unread by anyone */
	unsigned running;
	unsigned listed;		/* running and kept */
};

struct process_table;

struct process_table *process_table_new(struct tc_loop *loop, struct event_bus *bus);
void process_table_set_limits(struct process_table *t, const struct process_limits *l);
/* Where the end of each process is audited (may be NULL). */
void process_table_set_audit(struct process_table *t, struct audit *a);
/* Kills every process with its tree, fails the calls waiting on them as
 * cancelled, and frees. Accepts NULL; returns NULL. */
struct process_table *process_table_free(struct process_table *t);
void process_table_stats(const struct process_table *t, struct process_stats *ret);
/* admin/stats' "processes" member, and the toolcalld_processes_* families
 * of admin/metrics (t may be NULL: zeros). */
void process_table_write_stats(const struct process_table *t, struct jgen *g);
void process_table_write_metrics(const struct process_table *t, struct buf *b);
/* Writes the processes of uid (all uids when all) as a JSON array of
 * {id, uid, command, started, running, exit_code, signal, bytes, dropped,
 * waiting_for_input, tty}. */
void process_table_write_list(struct process_table *t, uid_t uid, bool all, struct jgen *g);
/*
 * Kills a process for an administrator: sig to its group, SIGKILL to its
 * tree after the grace delay. 0, or -ENOENT (unknown, or not uid's when
 * !all), or -ESRCH (it has ended already).
 */
int process_table_kill(struct process_table *t, const char *id, uid_t uid, bool all, int sig);

/* The members shell's schema gains, and what its description says of them. */
#define SHELL_BACKGROUND_SCHEMA                                                                               \
	"\"background\":{\"type\":\"boolean\","                                                              \
	"\"description\":\"Run in the background (default false): the call returns when the command ends, "   \
	"until matches its output, or yield_ms passes, with the output so far and, while it runs, process_id "   \
	"for process_io, process_kill and process_list\"},"                                                     \
	"\"yield_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":300000,"                                \
	"\"description\":\"With background: the longest the call waits before returning (default 1000)\"},"  \
	"\"until\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"                                  \
	"\"description\":\"With background: return as soon as the output matches this regular expression "    \
	"(ECMAScript syntax without lookaround or backreferences)\"},"                                          \
	"\"tty\":{\"type\":\"boolean\","                                                                     \
	"\"description\":\"With background: run on a pseudo-terminal (default false), for programs that "      \
	"prompt or need one\"},"                                                                                 \
	"\"raw\":{\"type\":\"boolean\","                                                                     \
	"\"description\":\"With tty: keep terminal escape sequences in the text (default false)\"},"         \
	"\"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,"                                      \
	"\"description\":\"With tty: the terminal's width in columns (default 80)\"},"                        \
	"\"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,"                                      \
	"\"description\":\"With tty: the terminal's height in rows (default 24)\"}"
#define SHELL_BACKGROUND_DESCRIPTION                                                                \
	"With background: true the command keeps running after the call returns (a server, a "     \
	"watcher, a REPL); use process_io to read its output and send input, process_kill to stop " \
	"it, process_list to see yours."

/* 1 when a shell call asks for background, 0 when not; -1 when it gives
 * background's options without it (c is failed). */
int process_shell_mode(struct tool_call *c);

/*
 * `shell` with background: starts the command of opts (argv, envp, cwd_fd;
 * the callbacks are the table's) in the sandbox of req, as c->ident, and
 * waits for it on c's behalf as the arguments of c say (yield_ms, until,
 * tty, raw, cols, rows). Fails c and returns TOOL_DONE when it cannot
 * start.
 */
enum tool_ret process_shell_start(struct tool_call *c, const char *command, const struct child_opts *opts,
				  const struct sandbox_req *req);
/* The tools' bodies and the .cancel they share. */
enum tool_ret process_io_exec(struct tool_call *c);
enum tool_ret process_kill_exec(struct tool_call *c);
enum tool_ret process_list_exec(struct tool_call *c);
void process_call_cancel(struct tool_call *c);

/* The signal named ("TERM", "SIGKILL", "9"), or -1. */
int process_signal_from_name(const char *s);

/*
 * Removes terminal escape sequences (CSI, OSC, other ESC sequences) and
 * control characters but tab and newline from s, turning "\r\n" into
 * "\n"; appends the rest to out as valid UTF-8.
 */
void process_strip_terminal(const char *s, size_t n, struct buf *out);

/* Whether the tree of pid is waiting for input on the stdin or terminal
 * whose /proc/PID/fd link is target ("pipe:[123]", "/dev/pts/4"). */
bool process_tree_waiting(pid_t pid, const char *target);

#endif
