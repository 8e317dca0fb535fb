/* SPDX-License-Identifier: MIT */
/*
 * Child processes, supervised from the event loop without SIGCHLD.
 *
 * A child is started with clone(CLONE_VM | CLONE_VFORK) and execve (see
 * spawn() in child.c) in a process group of its own, with stdin on
 * /dev/null, stdout and stderr on non-blocking pipes, a default signal
 * disposition and an empty signal mask, and nothing inherited but fds 0, 1
 * and 2. Its pidfd comes with the clone (CLONE_PIDFD), or is opened right
 * after (an unreaped child's pid cannot be recycled, so this is race-free),
 * and is watched through the loop
 * seam; output is read as it comes, passed to a callback chunk by chunk,
 * and kept per stream up to a cap: the head and the tail, with a marker
 * line saying how much was left out between them.
 *
 * Process-group rule: the group is signalled (kill(-pgid)) only while the
 * leader is not reaped, because the leader's pid, zombie or not, holds the
 * group id, so a recycled pgid is never signalled. When the leader exits,
 * the rest of its group is killed with SIGKILL before the leader is reaped:
 * no background process ("sleep 300 &") outlives the command or keeps its
 * pipes open.
 *
 * Processes that left the group (setsid, a double fork) are caught as
 * child subreaper (set by sandbox_probe()): each leader is made one too,
 * so they stay its descendants while it runs; when it exits they are
 * reparented to the daemon, which then kills and reaps, by pid, every
 * child of its own that is not a leader it tracks, and again for their
 * children. With a call cgroup (lib/sandbox/), cgroup.kill ends them first.
 * Pipes still held after that are given up after a short drain delay. The
 * rules hold only if nothing else reaps these children: the daemon must not
 * call waitpid(-1) or set SIGCHLD to SIG_IGN, and starts children only
 * through child_spawn().
 *
 * Stopping (child_terminate): SIGTERM (and SIGCONT) to the group, then
 * SIGKILL to the group after a delay if the leader has not exited.
 *
 * Before exec, the child carries out its sandbox's plan (child_opts
 * .sandbox; see lib/sandbox/sandbox.h).
 *
 * On top, a thin layer runs a child as one tool call (the shell tool and the
 * "command" tool kind share it): output streamed through
 * tool_call_output(), cancel through the tool's .cancel, the outcome set by
 * the tool from the child's result, then tool_call_finish().
 */
#ifndef TC_CHILD_H
#define TC_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/errors.h"
#include "proto/base/buf.h"

struct child;
struct sandbox_req;
struct sandbox_run;
struct tc_loop;
struct tool_call;

enum child_stream {
	CHILD_STDOUT,
	CHILD_STDERR,
	CHILD_NSTREAMS,
};

#define CHILD_OUTPUT_CAP_DEFAULT (1024 * 1024)
#define CHILD_KILL_DELAY_DEFAULT 5000
#define CHILD_DRAIN_DEFAULT 1000
/* PATH given to children when the allowed environment has none. */
#define CHILD_SAFE_PATH "/usr/local/bin:/usr/bin:/bin"

/* How a child ended, and what it wrote. Owned by the child. */
struct child_result {
	int exit_code;			/* -1 when killed by a signal */
	int signal;			/* the terminating signal, 0 when it exited */
	bool cancelled;			/* child_terminate() ran before the leader exited */
	uint64_t duration_ms;		/* from spawn to the leader's exit */
	/* Per stream: what was kept (head, marker line, tail; NUL-terminated,
	 * may hold NUL bytes and invalid UTF-8), its length, whether bytes
	 * were left out, and how many bytes the stream carried in all. */
	char *out[CHILD_NSTREAMS];
	size_t out_len[CHILD_NSTREAMS];
	bool truncated[CHILD_NSTREAMS];
	uint64_t total[CHILD_NSTREAMS];
};

struct child_opts {
	/* The program: an absolute or relative path (relative to the child's
	 * working directory), or NULL to search argv[0] in the PATH of envp. */
	const char *path;
	char *const *argv;		/* NULL-terminated, argv[0] set */
	char *const *envp;		/* NULL-terminated; see child_env_new() */
	/* The child's working directory as a directory fd (O_PATH is fine),
	 * or negative to keep the daemon's. Used only during child_spawn(). */
	int cwd_fd;
	size_t output_cap;		/* bytes kept per stream; 0: 1 MiB */
	uint32_t kill_delay_ms;		/* SIGTERM to SIGKILL; 0: 5000 */
	uint32_t drain_ms;		/* after the leader's exit, how long to wait for
					 * pipes held by escaped processes; 0: 1000 */
	/* Each chunk read, as it comes (may be NULL). Must not free the child. */
	void (*on_output)(void *arg, enum child_stream s, const char *data, size_t n);
	/* A stream reached its end (may be NULL). Must not free the child. */
	void (*on_eof)(void *arg, enum child_stream s);
	/* Once: the leader is reaped and the pipes are read to their end or
	 * given up. The result stays valid until child_free(), which this
	 * callback may call, and which closes the fds no longer watched (the
	 * pidfd, the pipes at their end): an owner that answers first and
	 * frees after keeps their closes out of its answer's way. */
	void (*on_done)(void *arg, struct child *ch, struct child_result *r);
	void *arg;
	/* When not NULL: the child's stdin is a pipe instead of /dev/null, and
	 * its write end (non-blocking, close-on-exec, owned by the caller) is
	 * stored here. Stdio servers (MCP providers) are fed this way; their
	 * output pipes then end as soon as the server closes them (no copy of
	 * their write ends is kept until the exit), so on_eof tells of it. */
	int *ret_stdin_fd;
	/* When above 2: the program itself, an fd of sandbox_program_open()
	 * (not owned): the child runs that file (execveat AT_EMPTY_PATH; a
	 * script's interpreter is given it as /dev/fd/N), and path, or
	 * argv[0], only names it. 0: none. */
	int exec_fd;
	/* The sandbox the child is put in before exec (see
	 * lib/sandbox/sandbox.h), or NULL; not owned, kept until the leader
	 * is reaped (or the child freed): its cgroup is killed when the
	 * leader exits. */
	struct sandbox_run *sandbox;
	/* When tty: stdin, stdout and stderr are tty_fd (the terminal side of
	 * a pseudo-terminal; not owned), and the child starts a session of
	 * its own (setsid) with it as controlling terminal instead of a
	 * process group; the session id is its pid, so the group rule holds.
	 * The output pipes then carry nothing: the caller reads the terminal. */
	bool tty;
	int tty_fd;
	/* When merge_output: stderr is the stdout pipe, so what the child
	 * writes to either comes out in the order it was written (the
	 * kernel's); it is all CHILD_STDOUT, and CHILD_STDERR stays empty
	 * (it has no pipe: on_eof is not called for it). */
	bool merge_output;
};

/*
 * Spawns a child and starts watching it on loop. Returns 0, or a negative
 * errno: -ENOENT when the program does not exist, -EACCES when it cannot be
 * run, -EAGAIN/-EMFILE/-ENFILE/-ENOMEM when resources are short.
 */
int child_spawn(struct tc_loop *loop, const struct child_opts *opts, struct child **ret);
/* Asks the child's process group to stop: SIGTERM now, SIGKILL after the
 * kill delay if the leader is still running. Idempotent. */
void child_terminate(struct child *ch);
/* Frees a child. One still running is killed with its group and reaped
 * first (SIGKILL: the wait is short). Accepts NULL; returns NULL. */
struct child *child_free(struct child *ch);
pid_t child_pid(const struct child *ch);
/* True while the leader has not been reaped. */
bool child_running(const struct child *ch);

/*
 * Builds a scrubbed environment: "NAME=value" for each allowed name set in
 * the daemon's environment (allow NULL: PATH, LANG, HOME, TERM), and PATH
 * set to CHILD_SAFE_PATH when it is not among them. NULL-terminated; free
 * with child_env_free().
 */
char **child_env_new(const char *const *allow);
/* A copy of envp (NULL: an empty one), to set variables in; free with
 * child_env_free(). */
char **child_env_dup(char *const *envp);
/* Sets (or replaces) name=value in an environment from child_env_new(). */
void child_env_put(char ***env, const char *name, const char *value);
/* Sets each "NAME=value" of lines (NULL-terminated; NULL: none): the
 * proxy variables of a sandbox (sandbox_run_net_env()). */
void child_env_put_lines(char ***env, const char *const *lines);
/* Looks a name up in an environment; NULL when unset. */
const char *child_env_get(char *const *env, const char *name);
char **child_env_free(char **env);

/*
 * The soft limit on open files that children start with, when the daemon
 * has raised its own (programs that use select() break past 1024); 0, the
 * default, leaves them the daemon's limit. The hard limit is kept.
 */
void child_set_fd_limit(uint64_t soft);

/*
 * Empties the calling thread's capability bounding set, as every child's
 * must be (needs CAP_SETPCAP; 0 or a negative errno). The daemon does it
 * at start, before its threads: only exec reads the bounding set, and it
 * execs nothing but children, so each child then has none left to drop
 * (else 41 prctl calls, each making new credentials, while the daemon
 * waits for the exec). Its effective and permitted sets are untouched.
 */
int child_drop_bounding_set(void);

/* "SIGKILL", "SIGRTMIN+2", or "SIG<n>" for an unknown number, into buf. */
const char *child_signal_name(int sig, char buf[static 16]);

/*
 * Tool calls that run one child. child_call_start() spawns the child for
 * call c (output cap from c->env unless opts sets one; opts' callbacks are
 * replaced), streams its output as tool_call_output(c, "stdout"|"stderr",
 * ...) (all "stdout" with merge_output), and when it is done either fails the call as cancelled (after
 * child_call_cancel()) or hands the result to done, which sets the
 * outcome; then it frees the child and calls tool_call_finish(c). Returns 0
 * (the tool returns TOOL_PENDING) or a negative errno from child_spawn().
 */
typedef void (*child_call_done_fn)(struct tool_call *c, struct child_result *r);
int child_call_start(struct tool_call *c, const struct child_opts *opts, const struct sandbox_req *req,
		     child_call_done_fn done);
/* With req (see sandbox_req_init(); its workspaces default to the call's,
 * its identity to c->ident) the child runs in that sandbox, with TMPDIR its
 * private directory (and HOME the peer's, when it runs as the peer); a
 * sandbox that cannot be had fails the call itself (permission_denied when
 * the profile cannot be enforced), and c->kind is then set. */
/* The sandbox of the call's child, or NULL; valid until done returns. */
struct sandbox_run *child_call_sandbox(struct tool_call *c);
/* child_result_json() with "sandbox": {profile, network, enforced}; for a
 * child started with merge_output, "stdout" holds both streams in the
 * order they were written, "stderr" is empty and "stderr_in_stdout" true. */
char *child_call_json(struct tool_call *c, const struct child_result *r, bool with_signal);
/* The text of the call's child: stdout and stderr in the order they were
 * written (their head and tail beyond the tool_env's shell_text_cap, with a
 * line saying how many bytes were dropped between), then the exit status
 * when not 0, and a line that names the limit the child hit, or says the
 * sandbox refused it, when it failed so. Call from the done callback. */
char *child_call_text(struct tool_call *c, const struct child_result *r);
/* The output the call's child has written so far (all of it, from the
 * done callback), as that text holds it (owned), or NULL when none: what
 * a call stopped early keeps. A child whose streams are apart shows its
 * stdout, then its stderr under a "[stderr]" line, the head and tail of
 * each, both within the cap (the smaller keeps up to half). */
char *child_call_partial(struct tool_call *c);
/* Fails the call with kind and message, followed in the message by the
 * output produced so far, which the error's data.output holds too. */
void child_call_fail_partial(struct tool_call *c, enum tc_kind kind, const char *message);
/* The limit the child hit ("the memory limit (64 MB)"), or NULL. */
char *child_call_limit(struct tool_call *c, const struct child_result *r);
/* The [limit] line of a call whose child filled its TMPDIR and did not
 * fail (sandbox_run_tmp_hit()), or NULL; child_tmp_note() of a run. */
char *child_call_tmp_note(struct tool_call *c);
char *child_tmp_note(const struct sandbox_run *run);
/* The .cancel of tools that run a child. */
void child_call_cancel(struct tool_call *c);

/*
 * Helpers for the outcome of such tools. child_result_json() writes
 * {exit_code, signal?, stdout, stderr, truncated, duration_ms} (signal only
 * when with_signal); exit_code is null when a signal ended the child.
 * child_result_text() is the text for the model: stdout, then stderr under
 * a separator, then the exit status when not 0. Both are valid UTF-8.
 */
char *child_result_json(const struct child_result *r, bool with_signal);
char *child_result_text(const struct child_result *r);
/* Appends the last bytes (at most max, starting on a character boundary,
 * white space trimmed, invalid UTF-8 replaced) of a stream to out. */
void child_result_tail(const struct child_result *r, enum child_stream s, size_t max, struct buf *out);

#endif
