/* SPDX-License-Identifier: MIT */
/*
 * How a background process starts (shell with background): its limits
 * checked, its sandbox prepared as a shell call's is, a pseudo-terminal
 * made for it when asked, the child spawned through lib/child/child.h, and its
 * stdin and terminal handled until it ends.
 */
#include "lib/process/process_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "lib/child/child.h"
#include "lib/files/identity.h"
#include "lib/base/loop.h"
#include "lib/regex/regex.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "proto/json.h"

#define READ_CHUNK 65536
#define READS_PER_WAKEUP 4

/* Output of a child without a terminal (stdout and stderr alike). */
static void on_pipe_output(void *arg, enum child_stream s, const char *data, size_t n)
{
	proc_output(arg, data, n);
}

/* Reads what the terminal has; stops watching it at its end (EIO once
 * no process holds the terminal side any more). */
static void read_master(struct process *p, unsigned rounds)
{
	char chunk[READ_CHUNK];
	for (unsigned i = 0; i < rounds && p->master_fd >= 0; i++) {
		ssize_t n = read(p->master_fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			tc_io_stop(p->master_io);
			return;
		}
		proc_output(p, chunk, (size_t)n);
	}
}

static void on_master(void *arg, int revents)
{
	read_master(arg, READS_PER_WAKEUP);
}

void proc_drain_tty(struct process *p)
{
	if (p->master_fd >= 0)
		read_master(p, 64);
}

void proc_close_io(struct process *p)
{
	p->input_io = tc_io_free(p->input_io);
	/* Nothing reads it any more. */
	p->input_lost += buf_size(&p->input);
	buf_free(&p->input);
	p->eof_pending = false;
	p->master_io = tc_io_free(p->master_io);
	if (p->master_fd >= 0)
		close(p->master_fd);
	p->master_fd = -1;
	if (p->stdin_fd >= 0)
		close(p->stdin_fd);
	p->stdin_fd = -1;
	if (p->slave_fd >= 0)
		close(p->slave_fd);
	p->slave_fd = -1;
}

static void on_child_done(void *arg, struct child *ch, struct child_result *r)
{
	proc_ended(arg, r->exit_code, r->signal);
}

/* Opens a pseudo-terminal of cols x rows: its master (non-blocking, ours)
 * and its terminal side, both close-on-exec and above fd 2. */
static int open_pty(unsigned cols, unsigned rows, const struct identity *id, int *ret_master, int *ret_slave,
		    char name[static 64])
{
	_cleanup_close_ int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -errno;
	if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, 64) != 0)
		return -errno;
	_cleanup_close_ int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		return -errno;
	struct winsize ws = { .ws_col = (unsigned short)cols, .ws_row = (unsigned short)rows };
	(void)ioctl(m, TIOCSWINSZ, &ws);
	if (fcntl(m, F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	/* The terminal is the peer's, as one it opened itself would be. */
	if (id && id->change)
		(void)fchown(s, id->uid, (gid_t)-1);
	if (s <= 2) {
		int k = fcntl(s, F_DUPFD_CLOEXEC, 3);
		if (k < 0)
			return -errno;
		close(s);
		s = k;
	}
	*ret_master = TAKE_FD(m);
	*ret_slave = TAKE_FD(s);
	return 0;
}

static bool arg_bool(const struct json *args, const char *key)
{
	const struct json *v = json_get(args, key);
	return v && v->type == JSON_BOOL && v->u.b;
}

int64_t proc_arg_int(const struct json *args, const char *key, int64_t dflt)
{
	int64_t v;
	const struct json *j = json_get(args, key);
	return j && json_get_int(j, &v) ? v : dflt;
}

int proc_compile_until(struct tool_call *c, struct regex **ret)
{
	const struct json *u = json_get(c->args, "until");
	*ret = NULL;
	if (!u || u->type != JSON_STRING)
		return 0;
	_cleanup_free_ char *err = NULL;
	if (regex_compile(u->u.str.s, u->u.str.len, ret, &err) < 0) {
		tool_call_invalid(c, "until", "%s", err ? err : "not a valid pattern");
		return -EINVAL;
	}
	/* Each look at new output runs on the loop: the program stays small. */
	if (regex_size(*ret) > PROC_UNTIL_SIZE_MAX) {
		tool_call_invalid(c, "until",
			       "the pattern is too large (%zu units, at most %u); "
			       "match a shorter piece of the output", regex_size(*ret),
			       PROC_UNTIL_SIZE_MAX);
		*ret = regex_free(*ret);
		return -EINVAL;
	}
	return 0;
}

int process_shell_mode(struct tool_call *c)
{
	static const char *const opts[] = { "yield_ms", "until", "tty", "raw", "cols", "rows", NULL };
	if (arg_bool(c->args, "background"))
		return 1;
	for (const char *const *o = opts; *o; o++)
		if (json_get(c->args, *o)) {
			tool_call_invalid(c, *o, "only with \"background\": true");
			return -1;
		}
	return 0;
}

/* Fails c for a sandbox that cannot be had, as a shell call would. */
static void fail_sandbox(struct tool_call *c, int r, const char *msg)
{
	if (r == -EPERM)
		tool_call_fail(c, TC_PERMISSION_DENIED, "%s", msg ? msg : strerror(-r));
	else
		tool_call_fail(c, r == -ENOMEM || r == -EMFILE || r == -ENFILE || r == -ENOSPC ? TC_TRANSIENT
											: TC_EXECUTION_ERROR,
			       "%s", msg ? msg : strerror(-r));
}

enum tool_ret process_shell_start(struct tool_call *c, const char *command, const struct child_opts *opts,
				  const struct sandbox_req *req)
{
	struct process_table *t = c->env ? c->env->processes : NULL;
	struct regex *until = NULL;
	int r;

	if (!t) {
		tool_call_fail(c, TC_EXECUTION_ERROR, "Background processes are not available here");
		return TOOL_DONE;
	}
	uid_t uid = proc_call_uid(c);
	/* Only running ones count against per_uid: an ended one stays
	 * listed, its output readable, for keep_ms. */
	if (proc_count(t, uid, false) >= t->limits.per_uid) {
		t->stats.refused++;
		tool_call_fail(c, TC_OVERLOADED,
			       "Too many processes: this user has %u running, the limit (limits.per_uid_processes); "
			       "end one with process_kill",
			       t->limits.per_uid);
		return TOOL_DONE;
	}
	if (proc_compile_until(c, &until) < 0)
		return TOOL_DONE;

	/* Ended ones are kept up to keep_max: beyond, the start forgets one
	 * (read out ones first) and its answer says which. */
	_cleanup_free_ char *forgot = NULL;
	char gone[32];
	while (proc_count(t, uid, true) >= t->limits.keep_max && proc_forget_one(t, uid, gone)) {
		char *more = xasprintf("%s%s'%s'", forgot ? forgot : "", forgot ? ", " : "", gone);
		free(forgot);
		forgot = more;
	}
	struct process *p = proc_new(t, c, command);
	if (forgot)
		p->start_note = xasprintf("[ended process %s forgotten to keep at most %u ended processes listed "
					  "(limits.process_keep_max), those whose output was read first]",
					  forgot, t->limits.keep_max);
	p->tty = arg_bool(c->args, "tty");
	p->raw = arg_bool(c->args, "raw");
	struct child_opts o = *opts;
	/* A tool has no fd of the root (lib/files/workspace_path.h). */
	if (o.cwd_fd < 0 && c->ws)
		o.cwd_fd = c->ws->dirfd;
	char **env = child_env_dup(o.envp);
	_cleanup_close_ int slave = -1;
	_cleanup_free_ char *msg = NULL;

	if (req) {
		struct sandbox_req rq = *req;
		const char *ws[WS_GROUP_MAX + 1];
		ws_group_roots(c->ws, ws, WS_GROUP_MAX + 1);
		if (!rq.workspaces)
			rq.workspaces = ws;
		if (!rq.id)
			rq.id = c->ident;
		/* Its network, as its namespace, lives as long as the process. */
		struct sandbox_net_who who = {
			.loop = c->loop, .uid = uid, .session = c->session ? c->session->id : NULL,
			.call_id = c->call_id, .process_id = p->id, .tool = c->tool ? c->tool->name : NULL,
		};
		rq.net_who = &who;
		rq.lasting = true;
		if ((r = sandbox_prepare(&rq, &p->run, &msg)) < 0) {
			fail_sandbox(c, r, msg);
			goto fail;
		}
		child_env_put_lines(&env, sandbox_run_net_env(p->run));
		if (sandbox_run_tmpdir(p->run))
			child_env_put(&env, "TMPDIR", sandbox_run_tmpdir(p->run));
		if (rq.id && rq.id->change && rq.id->home)
			child_env_put(&env, "HOME", rq.id->home);
		p->profile = xstrdup(sandbox_profile_name(sandbox_run_profile(p->run)));
		struct buf sj = {0};
		sandbox_run_json(p->run, &sj);
		p->sandbox_json = buf_steal(&sj);
		o.sandbox = p->run;
	}
	if (p->tty) {
		unsigned cols = (unsigned)proc_arg_int(c->args, "cols", 80);
		unsigned rows = (unsigned)proc_arg_int(c->args, "rows", 24);
		if ((r = open_pty(cols, rows, req && req->id ? req->id : c->ident, &p->master_fd, &slave,
				  p->input_link)) < 0) {
			tool_call_fail(c, TC_TRANSIENT, "Could not open a terminal: %s", strerror(-r));
			goto fail;
		}
		if (!child_env_get(env, "TERM"))
			child_env_put(&env, "TERM", p->raw ? "xterm" : "dumb");
		o.tty = true;
		o.tty_fd = slave;
	} else {
		o.ret_stdin_fd = &p->stdin_fd;
	}
	o.envp = env;
	o.output_cap = 2;	/* the ring keeps the output, not the child */
	o.kill_delay_ms = t->limits.kill_grace_ms ? t->limits.kill_grace_ms : 1;
	o.on_output = on_pipe_output;
	o.merge_output = true;	/* one ring, in the order written */
	o.on_eof = NULL;
	o.on_done = on_child_done;
	o.arg = p;
	r = child_spawn(c->loop, &o, &p->ch);
	child_env_free(env);
	env = NULL;
	if (r < 0) {
		const struct sandbox_child *sc = sandbox_run_child(p->run);
		if (sc && sc->failed)
			tool_call_fail(c, TC_EXECUTION_ERROR, "The sandbox could not be set up (%s): %s", sc->failed,
				       strerror(-r));
		else if (r == -EAGAIN || r == -EMFILE || r == -ENFILE || r == -ENOMEM)
			tool_call_fail(c, TC_TRANSIENT, "Could not start the shell: %s", strerror(-r));
		else
			tool_call_fail(c, TC_EXECUTION_ERROR, "Could not start the shell: %s", strerror(-r));
		goto fail;
	}
	if (p->master_fd >= 0) {
		p->master_io = tc_io_new(c->loop, p->master_fd, TC_IO_READ, on_master, p);
		tc_io_start(p->master_io);
		/* Kept to see the input the process has not read yet. */
		p->slave_fd = TAKE_FD(slave);
	}
	struct stat st;
	if (p->stdin_fd >= 0 && fstat(p->stdin_fd, &st) == 0)
		snprintf(p->input_link, sizeof(p->input_link), "pipe:[%lu]", (unsigned long)st.st_ino);
	tool_call_acts(c);
	proc_started(p);
	return proc_wait(p, c, PROC_WAIT_SHELL, (uint64_t)proc_arg_int(c->args, "yield_ms", 1000), until,
			 t->limits.output_max, 0);
fail:
	child_env_free(env);
	regex_free(until);
	proc_abandon(p);
	return TOOL_DONE;
}

/* Writes input to the process's stdin or terminal: as much as it takes
 * without blocking. Returns the bytes written, or a negative errno. */
static ssize_t write_input(struct process *p, const char *s, size_t n)
{
	int fd = p->tty ? p->master_fd : p->stdin_fd;
	size_t done = 0;
	if (fd < 0)
		return -EPIPE;
	while (done < n) {
		ssize_t k = write(fd, s + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (k < 0)
			return done ? (ssize_t)done : -errno;
		done += (size_t)k;
	}
	return (ssize_t)done;
}

static void end_input(struct process *p);

/* Its input is writable again: what is queued goes on; the end of input
 * asked after it follows it. */
static void on_input_writable(void *arg, int revents)
{
	struct process *p = arg;
	ssize_t k = write_input(p, buf_head(&p->input), buf_size(&p->input));
	if (k < 0) {
		/* It closed its input: the rest is lost, and the next
		 * result says how much. */
		p->input_lost += buf_size(&p->input);
		buf_clear(&p->input);
	} else
		buf_consume(&p->input, (size_t)k);
	if (buf_size(&p->input))
		return;
	tc_io_stop(p->input_io);
	if (p->eof_pending) {
		p->eof_pending = false;
		end_input(p);
	}
}

int proc_send_input(struct process *p, const char *s, size_t n)
{
	int fd = p->tty ? p->master_fd : p->stdin_fd;
	if (fd < 0)
		return -EPIPE;
	/* Behind input queued already, or beyond what fits: all or none. */
	if (buf_size(&p->input) || p->eof_pending) {
		if (p->eof_pending)
			return -EPIPE;
		if (buf_size(&p->input) + n > PROC_INPUT_MAX)
			return -ENOBUFS;
	} else {
		ssize_t k = write_input(p, s, n);
		if (k < 0)
			return (int)k;
		s += k;
		n -= (size_t)k;
	}
	if (!n)
		return 0;
	buf_append(&p->input, s, n);
	if (!p->input_io)
		p->input_io = tc_io_new(p->t->loop, fd, TC_IO_WRITE, on_input_writable, p);
	tc_io_start(p->input_io);
	return 0;
}

/* Ends the input, after what is queued. */
void proc_input_eof(struct process *p)
{
	if (buf_size(&p->input))
		p->eof_pending = true;
	else
		end_input(p);
}

/* Ends the input: closes the stdin pipe, or sends the terminal's EOF
 * character (at the start of a line, it ends the reader's input). */
static void end_input(struct process *p)
{
	if (p->tty) {
		struct termios tio;
		char eof = 4;
		if (p->master_fd >= 0 && tcgetattr(p->master_fd, &tio) == 0 && tio.c_cc[VEOF])
			eof = (char)tio.c_cc[VEOF];
		(void)write_input(p, &eof, 1);
		return;
	}
	p->input_io = tc_io_free(p->input_io);
	if (p->stdin_fd >= 0)
		close(p->stdin_fd);
	p->stdin_fd = -1;
}

void proc_resize(struct process *p, unsigned cols, unsigned rows)
{
	struct winsize ws = {0};
	if (p->master_fd < 0 || ioctl(p->master_fd, TIOCGWINSZ, &ws) < 0)
		return;
	if (cols)
		ws.ws_col = (unsigned short)cols;
	if (rows)
		ws.ws_row = (unsigned short)rows;
	(void)ioctl(p->master_fd, TIOCSWINSZ, &ws);
}
