/* SPDX-License-Identifier: MIT */
/*
 * Child processes, the shell tool and the "command" tool kind, driven the
 * way the dispatcher drives them: a struct tool_call handed to the tool's
 * exec on a real libev loop, run until on_finish fires. Covers exit codes
 * and signals, capture with head and tail, invalid UTF-8, environment
 * scrubbing, the working directory, SIGTERM then SIGKILL on cancel with no
 * survivor, zombies and fd hygiene, streaming, and the command kind's argv
 * substitution, outcome mapping and declaration checks.
 */
#include <check.h>
#include <dirent.h>
#include <ev.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <linux/capability.h>

#include "lib/child/child.h"
#include "lib/sandbox/sandbox.h"
#include "lib/base/loop.h"
#include "lib/tool.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "proto/json.h"
#include "tools/command.h"
#include "tools/tools.h"
#include "tests/unit/check_main.h"
#include "tests/unit/golden.h"
#include "tests/unit/deny_syscall.h"

/* --- fixture ------------------------------------------------------------- */

static char tmpdir[PATH_MAX];
static struct workspace *ws;
static struct ev_loop *ev;
static struct tc_loop *loop;
static struct tool *shell;
static struct tool_env env;

static void setup(void)
{
	strcpy(tmpdir, "/tmp/tc-child-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(ws_open(tmpdir, &ws), 0);
	ev = ev_loop_new(0);
	ck_assert_ptr_nonnull(ev);
	loop = tc_loop_ev_new(ev);
	char *err = NULL;
	int r = tool_new(&tool_shell, tool_shell.name, tool_shell.description, tool_shell.input_schema,
			 NULL, &shell, &err);
	ck_assert_msg(r == 0, "shell schema: %s", err ? err : "?");
	env = (struct tool_env){ 0 };
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void teardown(void)
{
	tool_unref(shell);
	tc_loop_ev_free(loop);
	ev_loop_destroy(ev);
	ws_unref(ws);
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	sandbox_program_cache_clear();
}

/* --- running calls ------------------------------------------------------- */

struct run {
	struct tool_call c;
	struct json_doc *args;
	struct buf streamed[CHILD_NSTREAMS];
	uint64_t first_output_ms;	/* when "first" was streamed */
	uint64_t finish_ms;
	uint64_t cancel_ms;
	pid_t pids[2];			/* "pids A B" printed by the command */
	bool cancel_on_pids;
	bool finished;
};

static void on_finish(struct tool_call *c)
{
	struct run *run = c->owner;
	run->finished = true;
	run->finish_ms = mono_ms();
}

static void on_output(struct tool_call *c, const char *stream, const char *data, size_t n)
{
	struct run *run = c->owner;
	int s = strcmp(stream, "stdout") == 0 ? CHILD_STDOUT : CHILD_STDERR;
	ck_assert(strcmp(stream, "stdout") == 0 || strcmp(stream, "stderr") == 0);
	buf_append(&run->streamed[s], data, n);
	const char *all = buf_head(&run->streamed[CHILD_STDOUT]);
	if (!run->first_output_ms && strstr(all, "first"))
		run->first_output_ms = mono_ms();
	const char *p = strstr(all, "pids ");
	if (run->cancel_on_pids && !run->cancel_ms && p && strchr(p, '\n')) {
		ck_assert_int_eq(sscanf(p, "pids %d %d", &run->pids[0], &run->pids[1]), 2);
		/* Cancel from inside the output callback, as a timeout could. */
		run->cancel_ms = mono_ms();
		c->tool->def->cancel(c);
	}
}

static void on_deadline(void *arg)
{
	*(bool *)arg = true;
}

/* Runs the loop until every run has finished; fails after timeout_ms. */
static void wait_runs(struct run *runs, size_t n, uint64_t timeout_ms)
{
	bool expired = false;
	struct tc_timer *t = tc_timer_new(loop, on_deadline, &expired);
	tc_timer_start(t, timeout_ms);
	for (;;) {
		size_t done = 0;
		for (size_t i = 0; i < n; i++)
			done += runs[i].finished;
		if (done == n)
			break;
		ck_assert_msg(!expired, "calls still running after %llu ms", (unsigned long long)timeout_ms);
		ev_run(ev, EVRUN_ONCE);
	}
	tc_timer_free(t);
	/* What a call leaves for the end of the loop's turn, after its
	 * answer (its child's fds closed, its state freed): one more turn. */
	ev_run(ev, EVRUN_NOWAIT);
}

/* Starts one call of tool t with arguments given as JSON text. */
static void start(struct run *run, struct tool *t, const char *args)
{
	struct json_err err;
	memset(run, 0, sizeof(*run));
	ck_assert_msg(json_parse(args, strlen(args), 0, 0, &run->args, &err) == 0, "args: %s", err.msg);
	run->c = (struct tool_call){
		.tool = t,
		.args = json_doc_root(run->args),
		.ws = ws,
		.loop = loop,
		.env = &env,
		.call_id = "test",
		.on_finish = on_finish,
		.on_output = on_output,
		.owner = run,
	};
	if (t->def->exec(&run->c) == TOOL_DONE) {
		run->finished = true;
		run->finish_ms = mono_ms();
	}
}

static void run_call(struct run *run, struct tool *t, const char *args)
{
	start(run, t, args);
	wait_runs(run, 1, 20000);
}

static void run_done(struct run *run)
{
	tool_call_clear(&run->c);
	json_doc_unref(run->args);
	for (int s = 0; s < CHILD_NSTREAMS; s++)
		buf_free(&run->streamed[s]);
}

/* The call's structuredContent, parsed (it must be valid JSON). */
static struct json_doc *structured(struct run *run)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	ck_assert_ptr_nonnull(run->c.structured);
	ck_assert_msg(json_parse(run->c.structured, strlen(run->c.structured), 0, 0, &doc, &err) == 0,
		      "structuredContent is not JSON (%s): %s", err.msg, run->c.structured);
	return doc;
}

static const char *sget(struct json_doc *doc, const char *key)
{
	const struct json *v = json_get(json_doc_root(doc), key);
	ck_assert_msg(v && v->type == JSON_STRING, "%s is not a string", key);
	return v->u.str.s;
}

static int64_t iget(struct json_doc *doc, const char *key)
{
	int64_t v = 0;
	ck_assert_msg(json_get_int(json_get(json_doc_root(doc), key), &v), "%s is not an integer", key);
	return v;
}

/* Runs a shell command and returns its parsed structuredContent. */
static struct json_doc *shell_ok(struct run *run, const char *args)
{
	run_call(run, shell, args);
	ck_assert_msg(run->c.kind == TC_OK, "kind %s: %s", tc_kind_name(run->c.kind),
		      run->c.message ? run->c.message : "");
	return structured(run);
}

/* {"command": cmd} with cmd quoted as JSON. */
static char *shell_args(const char *cmd)
{
	struct buf b = { 0 };
	buf_puts(&b, "{\"command\":");
	json_quote(&b, cmd, strlen(cmd));
	buf_putc(&b, '}');
	return buf_steal(&b);
}

/* --- /proc helpers ------------------------------------------------------- */

/* The state letter of a process, 0 when it is gone. */
static char proc_state(pid_t pid, pid_t *ret_ppid)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(line, 1, sizeof(line) - 1, f);
	fclose(f);
	line[n] = '\0';
	char *p = strrchr(line, ')');
	char state = 0;
	int ppid = 0;
	if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2)
		return 0;
	if (ret_ppid)
		*ret_ppid = ppid;
	return state;
}

/* True once the process is gone or dead (a zombie awaiting its reaper). */
static bool pid_dead(pid_t pid)
{
	uint64_t end = mono_ms() + 2000;
	for (;;) {
		char st = proc_state(pid, NULL);
		if (st == 0 || st == 'Z' || st == 'X')
			return true;
		if (mono_ms() >= end)
			return false;
		usleep(10000);	/* the interval of a poll with a deadline */
	}
}

/* Children of this process, zombies included. */
static int count_children(void)
{
	DIR *d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t pid = (pid_t)atoi(de->d_name), ppid = 0;
		if (pid > 0 && proc_state(pid, &ppid) && ppid == getpid())
			n++;
	}
	closedir(d);
	return n;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;	/* the directory's own fd */
}

/* --- shell: outcome ------------------------------------------------------ */

START_TEST(shell_exit_codes)
{
	struct run run;
	struct json_doc *doc = shell_ok(&run, "{\"command\":\"true\"}");
	ck_assert(!run.c.is_error);
	ck_assert_int_eq(iget(doc, "exit_code"), 0);
	ck_assert_int_eq(json_get(json_doc_root(doc), "signal")->type, JSON_NULL);
	ck_assert_str_eq(run.c.text, "(no output)");
	ck_assert_str_eq(run.c.command, "true");
	json_doc_unref(doc);
	run_done(&run);

	/* Non-zero exit: a successful dispatch, with is_error set. */
	doc = shell_ok(&run, "{\"command\":\"echo partial; exit 3\"}");
	ck_assert(run.c.is_error);
	ck_assert_int_eq(iget(doc, "exit_code"), 3);
	ck_assert_str_eq(sget(doc, "stdout"), "partial\n");
	ck_assert_ptr_nonnull(strstr(run.c.text, "[exit code 3]"));
	ck_assert_int_ge(iget(doc, "duration_ms"), 0);
	json_doc_unref(doc);
	run_done(&run);
	ck_assert_int_eq(count_children(), 0);
}
END_TEST

/* A child without a sandbox plan (a hook or MCP server where no sandbox
 * is configured) holds no capability either, also as root. */
struct caps_run {
	bool done;
	char *out;
};

static void caps_done(void *arg, struct child *ch, struct child_result *r)
{
	struct caps_run *cr = arg;
	cr->out = strdup(r->out[CHILD_STDOUT] ? r->out[CHILD_STDOUT] : "");
	cr->done = true;
}

START_TEST(no_plan_no_capability)
{
	char *argv[] = { "grep", "^Cap", "/proc/self/status", NULL };
	char **envp = child_env_new(NULL);
	struct caps_run cr = { 0 };
	struct child_opts o = { .argv = argv, .envp = envp, .cwd_fd = -1, .on_done = caps_done, .arg = &cr };
	struct child *ch = NULL;
	ck_assert_int_eq(child_spawn(loop, &o, &ch), 0);
	uint64_t end = mono_ms() + 10000;
	while (!cr.done && mono_ms() < end)
		ev_run(ev, EVRUN_ONCE);
	ck_assert(cr.done);
	static const char *const sets[] = { "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000",
					    "CapEff:\t0000000000000000", "CapAmb:\t0000000000000000" };
	for (size_t i = 0; i < ELEMENTSOF(sets); i++)
		ck_assert_msg(strstr(cr.out, sets[i]), "no %s in %s", sets[i], cr.out);
	/* Emptied where the test may (root: CAP_SETPCAP). */
	if (geteuid() == 0)
		ck_assert_msg(strstr(cr.out, "CapBnd:\t0000000000000000"), "%s", cr.out);
	free(cr.out);
	child_free(ch);
	child_env_free(envp);
}
END_TEST

/* The daemon empties its own bounding set at start: it keeps its
 * effective capabilities, and its children, which then have nothing to
 * drop, still start without any. */
START_TEST(bounding_set_dropped_ahead)
{
	if (geteuid() != 0) {
		ck_assert_int_lt(child_drop_bounding_set(), 0);
		return;
	}
	ck_assert_int_eq(child_drop_bounding_set(), 0);
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		ck_assert_int_eq(prctl(PR_CAPBSET_READ, (unsigned long)cap, 0, 0, 0), 0);
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	ck_assert_int_eq(syscall(SYS_capget, &hdr, data), 0);
	ck_assert(data[0].effective & (1U << CAP_SETPCAP));
	ck_assert(data[0].effective & (1U << CAP_SYS_ADMIN));

	char *argv[] = { "grep", "^Cap", "/proc/self/status", NULL };
	char **envp = child_env_new(NULL);
	struct caps_run cr = { 0 };
	struct child_opts o = { .argv = argv, .envp = envp, .cwd_fd = -1, .on_done = caps_done, .arg = &cr };
	struct child *ch = NULL;
	ck_assert_int_eq(child_spawn(loop, &o, &ch), 0);
	uint64_t end = mono_ms() + 10000;
	while (!cr.done && mono_ms() < end)
		ev_run(ev, EVRUN_ONCE);
	ck_assert(cr.done);
	static const char *const sets[] = { "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000",
					    "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000",
					    "CapAmb:\t0000000000000000" };
	for (size_t i = 0; i < ELEMENTSOF(sets); i++)
		ck_assert_msg(strstr(cr.out, sets[i]), "no %s in %s", sets[i], cr.out);
	free(cr.out);
	child_free(ch);
	child_env_free(envp);
}
END_TEST

static void check_child_fds(const char *out);

START_TEST(without_close_range)
{
	/* Before Linux 5.9: the child copies the whole fd table instead, and
	 * close-on-exec alone keeps the daemon's fds out. */
	if (!deny_syscall_or_skip("without_close_range", SYS_close_range))
		return;
	ck_assert_int_eq(syscall(SYS_close_range, 1000U, 1001U, 0U), -1);
	ck_assert_int_eq(errno, ENOSYS);
	int high = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 1000);
	ck_assert_int_ge(high, 1000);

	struct run run;
	struct json_doc *doc = shell_ok(&run, "{\"command\":\"ls -l /proc/self/fd; exit 3\"}");
	ck_assert(run.c.is_error);
	ck_assert_int_eq(iget(doc, "exit_code"), 3);
	check_child_fds(sget(doc, "stdout"));
	json_doc_unref(doc);
	run_done(&run);
	ck_assert_int_eq(count_children(), 0);
	close(high);
}
END_TEST

/* Without pidfd_open (kernels before 5.3, or valgrind) the leader is
 * polled (waitid WNOWAIT on our own unreaped child): exit codes, the group
 * kill at exit and cancel all behave the same, and nothing is left behind. */
START_TEST(without_pidfd_open)
{
	if (!deny_syscall_or_skip("without_pidfd_open", SYS_pidfd_open))
		return;
	ck_assert_int_eq(syscall(SYS_pidfd_open, getpid(), 0), -1);
	ck_assert_int_eq(errno, ENOSYS);
	/* Nor CLONE_PIDFD (Linux 5.2, a release before pidfd_open). */
	ck_assert(deny_syscall_flags(SYS_clone, 0, CLONE_PIDFD, EINVAL));

	struct run run;
	struct json_doc *doc = shell_ok(&run, "{\"command\":\"echo out; exit 3\"}");
	ck_assert(run.c.is_error);
	ck_assert_int_eq(iget(doc, "exit_code"), 3);
	ck_assert_str_eq(sget(doc, "stdout"), "out\n");
	json_doc_unref(doc);
	run_done(&run);

	doc = shell_ok(&run, "{\"command\":\"sleep 300 & echo \\\"pids $$ $!\\\"\"}");
	int leader = 0, bg = 0;
	ck_assert_int_eq(sscanf(sget(doc, "stdout"), "pids %d %d", &leader, &bg), 2);
	ck_assert(pid_dead(bg));
	json_doc_unref(doc);
	run_done(&run);
	ck_assert_int_eq(count_children(), 0);
}
END_TEST

START_TEST(shell_capture)
{
	struct run run;
	/* The text and output hold both streams in the order they were
	 * written: they share one pipe. */
	struct json_doc *doc = shell_ok(&run, "{\"command\":\"echo out; echo err >&2; printf tail\"}");
	ck_assert_str_eq(sget(doc, "stdout"), "out\nerr\ntail");
	ck_assert_str_eq(sget(doc, "stderr"), "");
	ck_assert(json_is_true(json_get(json_doc_root(doc), "stderr_in_stdout")));
	ck_assert_int_eq(json_get(json_doc_root(doc), "truncated")->u.b, false);
	ck_assert_str_eq(run.c.text, "out\nerr\ntail");
	json_doc_unref(doc);
	run_done(&run);

	/* With the exit status last. */
	doc = shell_ok(&run, "{\"command\":\"echo err >&2; sleep 0.3; echo out; exit 2\"}");
	ck_assert_str_eq(run.c.text, "err\nout\n[exit code 2]");
	struct buf text = {0};
	buf_puts(&text, run.c.text);
	golden("shell_exit", &text);
	buf_free(&text);
	json_doc_unref(doc);
	run_done(&run);
}
END_TEST

START_TEST(shell_signals)
{
	/* The daemon ignores SIGPIPE and may block signals: the child must
	 * start with default dispositions and an empty mask all the same. */
	signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);

	static const struct { const char *cmd, *sig; } cases[] = {
		{ "{\"command\":\"kill -KILL $$\"}", "SIGKILL" },
		{ "{\"command\":\"kill -PIPE $$\"}", "SIGPIPE" },
		{ "{\"command\":\"kill -USR1 $$\"}", "SIGUSR1" },
		{ "{\"command\":\"kill -TERM $$\"}", "SIGTERM" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct run run;
		struct json_doc *doc = shell_ok(&run, cases[i].cmd);
		ck_assert(run.c.is_error);
		ck_assert_int_eq(json_get(json_doc_root(doc), "exit_code")->type, JSON_NULL);
		ck_assert_str_eq(sget(doc, "signal"), cases[i].sig);
		char want[32];
		snprintf(want, sizeof(want), "[killed by %s]", cases[i].sig);
		ck_assert_ptr_nonnull(strstr(run.c.text, want));
		json_doc_unref(doc);
		run_done(&run);
	}
	char buf[16];
	ck_assert_str_eq(child_signal_name(SIGSEGV, buf), "SIGSEGV");
	ck_assert_str_eq(child_signal_name(SIGRTMIN + 2, buf), "SIGRTMIN+2");
}
END_TEST

/* --- shell: caps and encoding -------------------------------------------- */

START_TEST(shell_text_head_tail)
{
	struct run run;
	env.shell_text_cap = 1000;
	/* 5008 bytes of both streams: the text keeps 500 from each end of the
	 * two together; structuredContent keeps each stream whole. */
	struct json_doc *doc = shell_ok(&run,
		"{\"command\":\"printf HEAD; sleep 0.3; head -c 2500 /dev/zero | tr '\\\\0' x >&2; sleep 0.3; "
		"head -c 2500 /dev/zero | tr '\\\\0' y; printf TAIL; exit 1\"}");
	env.shell_text_cap = 0;
	struct buf want = {0};
	buf_puts(&want, "HEAD");
	for (int i = 0; i < 496; i++)
		buf_putc(&want, 'x');
	buf_puts(&want, "\n[... 4008 bytes omitted ...]\n");
	for (int i = 0; i < 496; i++)
		buf_putc(&want, 'y');
	buf_puts(&want, "TAIL\n[exit code 1]");
	ck_assert_str_eq(run.c.text, buf_head(&want));
	golden("shell_head_tail", &want);
	ck_assert_uint_eq(strlen(sget(doc, "stdout")), 5008);
	ck_assert_int_eq(json_get(json_doc_root(doc), "truncated")->u.b, false);
	buf_free(&want);
	json_doc_unref(doc);
	run_done(&run);
}
END_TEST

static struct tool *command_tool(const char *decl_text);

/* Writes that alternate between stdout and stderr come back in the exact
 * order they were made, every run: both are one pipe. A command tool
 * keeps the two apart. */
START_TEST(shell_output_order_exact)
{
	struct buf want = {0};
	for (int i = 1; i <= 200; i++)
		buf_printf(&want, "out%d\nerr%d\n", i, i);
	for (int k = 0; k < 20; k++) {
		struct run run;
		struct json_doc *doc = shell_ok(&run, "{\"command\":\"for i in $(seq 200); do echo out$i; "
						      "echo err$i >&2; done\"}");
		ck_assert_str_eq(sget(doc, "stdout"), buf_head(&want));
		ck_assert_str_eq(run.c.text, buf_head(&want));
		ck_assert_str_eq(buf_head(&run.streamed[CHILD_STDOUT]), buf_head(&want));
		json_doc_unref(doc);
		run_done(&run);
	}
	buf_free(&want);

	struct tool *t = command_tool("{\"name\":\"both\",\"argv\":[\"sh\",\"-c\",\"echo out; echo err >&2\"],"
				      "\"side_effects\":\"read\"}");
	struct run run;
	run_call(&run, t, "{}");
	ck_assert_msg(run.c.kind == TC_OK, "%s", run.c.message ? run.c.message : "");
	struct json_doc *doc = structured(&run);
	ck_assert_str_eq(sget(doc, "stdout"), "out\n");
	ck_assert_str_eq(sget(doc, "stderr"), "err\n");
	ck_assert_ptr_null(json_get(json_doc_root(doc), "output"));
	json_doc_unref(doc);
	run_done(&run);
	tool_unref(t);
}
END_TEST

START_TEST(shell_cap_head_tail)
{
	struct run run;
	env.output_cap = 1000;
	/* 5008 bytes: HEAD, 5000 x, TAIL; 500 kept from each end. */
	struct json_doc *doc = shell_ok(&run,
		"{\"command\":\"printf HEAD; head -c 5000 /dev/zero | tr '\\\\0' x; printf TAIL; echo small >&2\"}");
	struct buf want = {0};
	buf_puts(&want, "HEAD");
	for (int i = 0; i < 496; i++)
		buf_putc(&want, 'x');
	buf_puts(&want, "\n[... 4014 bytes omitted ...]\n");
	for (int i = 0; i < 490; i++)
		buf_putc(&want, 'x');
	buf_puts(&want, "TAILsmall\n");
	ck_assert_str_eq(sget(doc, "stdout"), buf_head(&want));
	ck_assert_int_eq(json_get(json_doc_root(doc), "truncated")->u.b, true);
	buf_free(&want);
	/* Everything was streamed, even what the cap left out. */
	ck_assert_uint_eq(buf_size(&run.streamed[CHILD_STDOUT]), 5014);
	json_doc_unref(doc);
	run_done(&run);

	/* Exactly at the cap: kept whole, not truncated. */
	doc = shell_ok(&run, "{\"command\":\"head -c 1000 /dev/zero | tr '\\\\0' y\"}");
	ck_assert_uint_eq(strlen(sget(doc, "stdout")), 1000);
	ck_assert_int_eq(json_get(json_doc_root(doc), "truncated")->u.b, false);
	json_doc_unref(doc);
	run_done(&run);
}
END_TEST

/* Output still sitting in the pipes when the command exits is all read:
 * here both pipes are full to the brim (64 KiB, what Linux pipes hold by
 * default) when the shell exits, with nothing read before. */
START_TEST(shell_output_left_at_exit)
{
	struct run run;
	env.output_cap = 1 << 20;
	struct json_doc *doc = shell_ok(&run,
		"{\"command\":\"head -c 65536 /dev/zero | tr '\\\\0' o; head -c 65536 /dev/zero | tr '\\\\0' e >&2\"}");
	/* One pipe: the stderr half waits for the daemon to read the first. */
	const char *out = sget(doc, "stdout");
	ck_assert_uint_eq(strlen(out), 131072);
	ck_assert_int_eq(out[65535], 'o');
	ck_assert_int_eq(out[65536], 'e');
	ck_assert_uint_eq(buf_size(&run.streamed[CHILD_STDOUT]), 131072);
	json_doc_unref(doc);
	run_done(&run);
}
END_TEST

START_TEST(shell_invalid_utf8)
{
	struct run run;
	/* Bytes that are not UTF-8, a NUL, and characters cut by the cap. */
	env.output_cap = 64;
	char *args = shell_args("printf 'ab\\377\\376cd\\000ef' >&2");
	struct json_doc *doc = shell_ok(&run, args);
	free(args);
	ck_assert(utf8_valid(run.c.structured, strlen(run.c.structured)));
	const struct json *out = json_get(json_doc_root(doc), "stdout");
	ck_assert_ptr_nonnull(strstr(out->u.str.s, "ab"));
	ck_assert_ptr_nonnull(strstr(out->u.str.s, "\xEF\xBF\xBD"));	/* U+FFFD */
	ck_assert_uint_eq(out->u.str.len, strlen("ab") + 2 * 3 + strlen("cd") + 1 + strlen("ef"));
	json_doc_unref(doc);
	run_done(&run);
	/* Head and tail were cut on character boundaries: no U+FFFD. */
	args = shell_args("printf x; printf '\\303\\251%.0s' $(seq 100); printf y");
	doc = shell_ok(&run, args);
	free(args);
	const char *err = sget(doc, "stdout");
	ck_assert_ptr_null(strstr(err, "\xEF\xBF\xBD"));
	ck_assert(utf8_valid(err, strlen(err)));
	ck_assert_ptr_nonnull(strstr(err, "bytes omitted"));
	ck_assert_int_eq(err[0], 'x');
	ck_assert_int_eq(err[strlen(err) - 1], 'y');
	ck_assert(json_get(json_doc_root(doc), "truncated")->u.b);
	ck_assert(utf8_valid(run.c.text, strlen(run.c.text)));
	json_doc_unref(doc);
	run_done(&run);
}
END_TEST

/* --- shell: environment and working directory ----------------------------- */

START_TEST(shell_env_scrubbed)
{
	struct run run;
	setenv("TC_TEST_SECRET", "leaked", 1);
	setenv("TC_TEST_ALLOWED", "yes", 1);
	static const char *const allow[] = { "PATH", "TC_TEST_ALLOWED", NULL };
	env.shell_env_allow = allow;
	struct json_doc *doc = shell_ok(&run, "{\"command\":\"env\"}");
	const char *out = sget(doc, "stdout");
	ck_assert_ptr_nonnull(strstr(out, "TC_TEST_ALLOWED=yes\n"));
	ck_assert_ptr_null(strstr(out, "TC_TEST_SECRET"));
	ck_assert_ptr_null(strstr(out, "HOME="));
	json_doc_unref(doc);
	run_done(&run);

	/* No allow-list: PATH, LANG, HOME, TERM. */
	env.shell_env_allow = NULL;
	setenv("HOME", "/nonexistent-home", 1);
	doc = shell_ok(&run, "{\"command\":\"env\"}");
	out = sget(doc, "stdout");
	ck_assert_ptr_nonnull(strstr(out, "HOME=/nonexistent-home\n"));
	ck_assert_ptr_null(strstr(out, "TC_TEST_ALLOWED"));
	ck_assert_ptr_null(strstr(out, "TC_TEST_SECRET"));
	json_doc_unref(doc);
	run_done(&run);

	/* No PATH in the daemon's environment: a safe default. */
	unsetenv("PATH");
	doc = shell_ok(&run, "{\"command\":\"echo \\\"$PATH\\\"\"}");
	ck_assert_str_eq(sget(doc, "stdout"), CHILD_SAFE_PATH "\n");
	json_doc_unref(doc);
	run_done(&run);
}
END_TEST

START_TEST(shell_cwd)
{
	struct run run;
	char sub[PATH_MAX + 8];
	snprintf(sub, sizeof(sub), "%s/sub", ws->root);
	ck_assert_int_eq(mkdir(sub, 0755), 0);

	struct json_doc *doc = shell_ok(&run, "{\"command\":\"pwd -P\"}");
	char want[PATH_MAX + 16];
	snprintf(want, sizeof(want), "%s\n", ws->root);
	ck_assert_str_eq(sget(doc, "stdout"), want);
	json_doc_unref(doc);
	run_done(&run);

	doc = shell_ok(&run, "{\"command\":\"pwd -P\",\"cwd\":\"sub\"}");
	snprintf(want, sizeof(want), "%s/sub\n", ws->root);
	ck_assert_str_eq(sget(doc, "stdout"), want);
	json_doc_unref(doc);
	run_done(&run);

	/* Escapes are refused before anything runs. */
	static const char *const bad[] = {
		"{\"command\":\"touch escaped\",\"cwd\":\"..\"}",
		"{\"command\":\"touch escaped\",\"cwd\":\"sub/../..\"}",
		"{\"command\":\"touch escaped\",\"cwd\":\"/tmp\"}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		run_call(&run, shell, bad[i]);
		ck_assert_int_eq(run.c.kind, TC_PERMISSION_DENIED);
		ck_assert_ptr_nonnull(run.c.message);
		ck_assert_ptr_null(run.c.command);
		run_done(&run);
	}
	ck_assert_int_eq(access("/tmp/escaped", F_OK), -1);

	/* A cwd that does not exist is the tool's failure, not an escape. */
	run_call(&run, shell, "{\"command\":\"true\",\"cwd\":\"missing\"}");
	ck_assert_int_eq(run.c.kind, TC_EXECUTION_ERROR);
	run_done(&run);
}
END_TEST

/* --- shell: stopping ----------------------------------------------------- */

/* The leader traps TERM and keeps going; a grandchild ignores TERM. Both
 * print their pids, and only SIGKILL of the group ends them. */
#define STUBBORN \
	"trap 'echo got-term' TERM; (trap '' TERM; exec sleep 300) & " \
	"echo \"pids $$ $!\"; while :; do sleep 0.05; done"


START_TEST(shell_cancel_term_then_kill)
{
	struct run run;
	char *args = shell_args(STUBBORN);
	start(&run, shell, args);
	free(args);
	run.cancel_on_pids = true;
	wait_runs(&run, 1, 15000);

	ck_assert_int_ne(run.cancel_ms, 0);
	ck_assert_int_eq(run.c.kind, TC_CANCELLED);
	ck_assert_ptr_nonnull(strstr(run.c.message, "SIGKILL"));
	/* What it wrote before it was stopped is kept. */
	ck_assert_msg(strstr(run.c.message, "Output before it was stopped:\npids "), "%s", run.c.message);
	ck_assert_ptr_nonnull(run.c.error_data);
	ck_assert_msg(strstr(run.c.error_data, "\"output\":\"pids "), "%s", run.c.error_data);
	/* SIGTERM came first (the trap ran), SIGKILL after the 5 s delay. */
	ck_assert_ptr_nonnull(strstr(buf_head(&run.streamed[CHILD_STDOUT]), "got-term"));
	uint64_t waited = run.finish_ms - run.cancel_ms;
	ck_assert_msg(waited >= 4900 && waited < 8000, "SIGKILL after %llu ms", (unsigned long long)waited);
	ck_assert(pid_dead(run.pids[0]));
	ck_assert(pid_dead(run.pids[1]));
	ck_assert_int_eq(count_children(), 0);
	run_done(&run);
}
END_TEST

struct child_wait {
	bool done;
	uint64_t done_ms;
	struct buf out;
	struct child_result r;
};

static void cw_output(void *arg, enum child_stream s, const char *data, size_t n)
{
	struct child_wait *w = arg;
	if (s == CHILD_STDOUT)
		buf_append(&w->out, data, n);
}

static void cw_done(void *arg, struct child *ch, struct child_result *r)
{
	struct child_wait *w = arg;
	w->done = true;
	w->done_ms = mono_ms();
	w->r = *r;
	w->r.out[0] = w->r.out[1] = NULL;
}

static void cw_run(struct child_wait *w, uint64_t timeout_ms)
{
	uint64_t end = mono_ms() + timeout_ms;
	while (!w->done) {
		ck_assert_msg(mono_ms() < end, "child still running");
		ev_run(ev, EVRUN_ONCE);
	}
}

START_TEST(child_short_kill_delay)
{
	struct child_wait w = { 0 };
	char *argv[] = { "/bin/sh", "-c", STUBBORN, NULL };
	char **envp = child_env_new(NULL);
	struct child_opts o = {
		.path = "/bin/sh", .argv = argv, .envp = envp, .cwd_fd = ws->dirfd,
		.kill_delay_ms = 200, .on_output = cw_output, .on_done = cw_done, .arg = &w,
	};
	struct child *ch = NULL;
	ck_assert_int_eq(child_spawn(loop, &o, &ch), 0);
	child_env_free(envp);
	ck_assert_int_eq(getpgid(child_pid(ch)), child_pid(ch));

	int leader = 0, grandchild = 0;
	while (!strchr(buf_head(&w.out), '\n'))
		ev_run(ev, EVRUN_ONCE);
	ck_assert_int_eq(sscanf(buf_head(&w.out), "pids %d %d", &leader, &grandchild), 2);
	ck_assert_int_eq(leader, child_pid(ch));
	ck_assert(child_running(ch));

	uint64_t t0 = mono_ms();
	child_terminate(ch);
	child_terminate(ch);	/* idempotent */
	cw_run(&w, 5000);
	uint64_t waited = w.done_ms - t0;
	ck_assert_msg(waited >= 180 && waited < 2000, "SIGKILL after %llu ms", (unsigned long long)waited);
	ck_assert(w.r.cancelled);
	ck_assert_int_eq(w.r.signal, SIGKILL);
	ck_assert_int_eq(w.r.exit_code, -1);
	ck_assert_ptr_nonnull(strstr(buf_head(&w.out), "got-term"));
	ck_assert(!child_running(ch));
	child_free(ch);
	ck_assert(pid_dead(leader));
	ck_assert(pid_dead(grandchild));
	ck_assert_int_eq(count_children(), 0);
	buf_free(&w.out);
}
END_TEST

START_TEST(child_free_running)
{
	/* Freeing a child that still runs kills and reaps it: no zombie. */
	struct child_wait w = { 0 };
	char *argv[] = { "sleep", "300", NULL };
	char **envp = child_env_new(NULL);
	struct child_opts o = {
		.argv = argv, .envp = envp, .cwd_fd = -1, .on_done = cw_done, .arg = &w,
	};
	struct child *ch = NULL;
	ck_assert_int_eq(child_spawn(loop, &o, &ch), 0);
	child_env_free(envp);
	pid_t pid = child_pid(ch);
	ck_assert_int_eq(proc_state(pid, NULL) != 0, 1);
	child_free(ch);
	ck_assert_int_eq(proc_state(pid, NULL), 0);
	ck_assert(!w.done);
	ck_assert_int_eq(count_children(), 0);

	/* A program that does not exist. */
	char *argv2[] = { "tc-no-such-program", NULL };
	envp = child_env_new(NULL);
	o.argv = argv2;
	o.envp = envp;
	ck_assert_int_eq(child_spawn(loop, &o, &ch), -ENOENT);
	child_env_free(envp);
}
END_TEST

static void on_usr1(int sig)
{
	(void)sig;
}

/* The value of a "SigXxx:" line of /proc/PID/status text. */
static unsigned long long status_mask(const char *status, const char *key)
{
	const char *p = strstr(status, key);
	ck_assert_msg(p, "no %s in %s", key, status);
	return strtoull(p + strlen(key), NULL, 16);
}

static void write_file_mode(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

START_TEST(child_starts_clean)
{
	/* Whatever the daemon catches, ignores or blocks, the program starts
	 * with every signal at its default and none blocked, and the daemon
	 * keeps its own dispositions and mask. */
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	signal(SIGUSR2, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	/* As glibc's posix_spawn leaves them in what it starts (make's
	 * recipes): glibc's own signals ignored, which only the system call
	 * can set. */
	struct { void (*handler)(int); unsigned long flags; void (*restorer)(void); uint64_t mask; }
		ign = { .handler = SIG_IGN };
	ck_assert_int_eq(syscall(SYS_rt_sigaction, 32, &ign, NULL, sizeof(ign.mask)), 0);
	ck_assert_int_eq(syscall(SYS_rt_sigaction, 33, &ign, NULL, sizeof(ign.mask)), 0);
	sigset_t set, mask;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);

	struct child_wait w = { 0 };
	char *argv[] = { "cat", "/proc/self/status", NULL };
	char **envp = child_env_new(NULL);
	struct child_opts o = {
		.argv = argv, .envp = envp, .cwd_fd = -1, .on_output = cw_output, .on_done = cw_done, .arg = &w,
	};
	struct child *ch = NULL;
	ck_assert_int_eq(child_spawn(loop, &o, &ch), 0);
	child_env_free(envp);
	cw_run(&w, 5000);
	ck_assert_int_eq(w.r.exit_code, 0);
	const char *status = buf_head(&w.out);
	ck_assert_uint_eq(status_mask(status, "SigBlk:"), 0);
	ck_assert_uint_eq(status_mask(status, "SigIgn:"), 0);
	ck_assert_uint_eq(status_mask(status, "SigCgt:"), 0);
	child_free(ch);
	buf_free(&w.out);

	struct sigaction now;
	ck_assert_int_eq(sigaction(SIGUSR1, NULL, &now), 0);
	ck_assert(now.sa_handler == on_usr1);
	ck_assert_int_eq(sigaction(SIGUSR2, NULL, &now), 0);
	ck_assert(now.sa_handler == SIG_IGN);
	sigprocmask(SIG_BLOCK, NULL, &mask);
	ck_assert_int_eq(sigismember(&mask, SIGTERM), 1);
	ck_assert_int_eq(sigismember(&mask, SIGUSR1), 0);
}
END_TEST

START_TEST(child_exec_errors)
{
	/* A program that cannot be run is an error of child_spawn, with the
	 * errno of the exec (or of the step before it), and no child left. */
	char path_noexec[PATH_MAX + 16], path_junk[PATH_MAX + 16], path_file[PATH_MAX + 16];
	snprintf(path_noexec, sizeof(path_noexec), "%s/noexec", tmpdir);
	snprintf(path_junk, sizeof(path_junk), "%s/junk", tmpdir);
	snprintf(path_file, sizeof(path_file), "%s/file", tmpdir);
	write_file_mode(path_noexec, "#!/bin/sh\ntrue\n", 0644);
	write_file_mode(path_junk, "\x01\x02\x03 not a program\n", 0755);
	write_file_mode(path_file, "x", 0644);
	int file_fd = open(path_file, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(file_fd, 3);

	static const struct { const char *path; bool file_cwd; int err; } cases[] = {
		{ "/nonexistent/program", false, -ENOENT },
		{ NULL, false, -EACCES },	/* path_noexec */
		{ NULL, false, -ENOEXEC },	/* path_junk */
		{ "/bin/true", true, -ENOTDIR },
	};
	const char *paths[] = { cases[0].path, path_noexec, path_junk, cases[3].path };
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char *argv[] = { (char *)paths[i], NULL };
		char **envp = child_env_new(NULL);
		struct child_opts o = {
			.path = paths[i], .argv = argv, .envp = envp,
			.cwd_fd = cases[i].file_cwd ? file_fd : -1,
		};
		struct child *ch = NULL;
		ck_assert_int_eq(child_spawn(loop, &o, &ch), cases[i].err);
		ck_assert_ptr_null(ch);
		child_env_free(envp);
		ck_assert_int_eq(count_children(), 0);
	}
	close(file_fd);
}
END_TEST

/* Runs argv with the program of exec_fd; returns its stdout (owned). */
static char *run_exec_fd(char **argv, int exec_fd)
{
	struct child_wait w = { 0 };
	char **envp = child_env_new(NULL);
	struct child_opts o = {
		.argv = argv, .envp = envp, .cwd_fd = -1, .exec_fd = exec_fd,
		.on_output = cw_output, .on_done = cw_done, .arg = &w,
	};
	struct child *ch = NULL;
	ck_assert_int_eq(child_spawn(loop, &o, &ch), 0);
	cw_run(&w, 10000);
	child_free(ch);
	child_env_free(envp);
	buf_putc(&w.out, '\0');
	return buf_steal(&w.out);
}

START_TEST(child_runs_the_checked_fd)
{
	/* What runs is the file checked and opened, not what is at its
	 * name when the child starts: a script replaced after the check. */
	char prog[PATH_MAX + 16], other[PATH_MAX + 16];
	snprintf(prog, sizeof(prog), "%s/prog", tmpdir);
	snprintf(other, sizeof(other), "%s/other", tmpdir);
	write_file_mode(prog, "#!/bin/sh\necho checked\n", 0755);
	char **envp = child_env_new(NULL);
	int fd = -1;
	char *why = NULL;
	ck_assert_int_eq(sandbox_program_open(prog, envp, -1, geteuid(), &fd, &why), 0);
	write_file_mode(other, "#!/bin/sh\necho swapped\n", 0755);
	ck_assert_int_eq(rename(other, prog), 0);
	char *argv[] = { prog, NULL };
	char *out = run_exec_fd(argv, fd);
	ck_assert_str_eq(out, "checked\n");
	free(out);
	close(fd);

	/* A binary, found in PATH: it gets no fd of the daemon's (ls's own
	 * directory is its 3). */
	ck_assert_int_eq(sandbox_program_open("ls", envp, -1, geteuid(), &fd, &why), 0);
	char *ls[] = { "ls", "/proc/self/fd", NULL };
	out = run_exec_fd(ls, fd);
	ck_assert_str_eq(out, "0\n1\n2\n3\n");
	free(out);
	close(fd);

	/* Writable by group or other: refused, saying so. */
	ck_assert_int_eq(chmod(prog, 0775), 0);
	ck_assert_int_eq(sandbox_program_open(prog, envp, -1, geteuid(), &fd, &why), -EPERM);
	ck_assert_msg(strstr(why, prog) && strstr(why, "writable by group or other (mode 0775)"), "%s", why);
	free(why);
	ck_assert_int_eq(fd, -1);
	/* In a directory others may write to: refused unless sticky. */
	char dir[PATH_MAX + 16], inner[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s/open", tmpdir);
	snprintf(inner, sizeof(inner), "%s/prog", dir);
	ck_assert_int_eq(mkdir(dir, 0777), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	write_file_mode(inner, "#!/bin/sh\necho inner\n", 0755);
	ck_assert_int_eq(sandbox_program_open(inner, envp, -1, geteuid(), &fd, &why), -EPERM);
	ck_assert_msg(strstr(why, "directory") && strstr(why, dir) && strstr(why, "mode 0777"), "%s", why);
	free(why);
	ck_assert_int_eq(chmod(dir, 01777), 0);
	ck_assert_int_eq(sandbox_program_open(inner, envp, -1, geteuid(), &fd, &why), 0);
	close(fd);
	/* A link leading through a link of a directory others may write to
	 * (who could point it at another program): refused, though the
	 * program it ends at is root's. */
	char mid[PATH_MAX + 16], link1[PATH_MAX + 16], link2[PATH_MAX + 32];
	snprintf(mid, sizeof(mid), "%s/mid", tmpdir);
	snprintf(link1, sizeof(link1), "%s/link1", tmpdir);
	snprintf(link2, sizeof(link2), "%s/link2", mid);
	ck_assert_int_eq(mkdir(mid, 0755), 0);
	ck_assert_int_eq(symlink("/bin/sh", link2), 0);
	ck_assert_int_eq(symlink("mid/link2", link1), 0);
	ck_assert_int_eq(sandbox_program_open(link1, envp, -1, geteuid(), &fd, &why), 0);
	close(fd);
	ck_assert_int_eq(chmod(mid, 0777), 0);
	ck_assert_int_eq(sandbox_program_open(link1, envp, -1, geteuid(), &fd, &why), -EPERM);
	ck_assert_msg(strstr(why, "directory") && strstr(why, "mid") && strstr(why, "mode 0777"), "%s", why);
	free(why);
	/* Not there at all, and not a regular file. */
	ck_assert_int_eq(sandbox_program_open("tc-no-such-program", envp, -1, geteuid(), &fd, &why), -ENOENT);
	ck_assert_int_eq(sandbox_program_open(dir, envp, -1, geteuid(), &fd, &why), -EPERM);
	ck_assert_msg(strstr(why, "not a regular file"), "%s", why);
	free(why);
	child_env_free(envp);
}
END_TEST

/* --- kept checks of programs --------------------------------------------- */

/* Opens name (PATH from envp) until a kept check answers (its files must
 * be older than the clock's tick), within 5 s: a change made next meets
 * that kept check. */
static void open_until_kept(const char *name, char **envp)
{
	uint64_t t0 = mono_ms();
	for (;;) {
		uint64_t hits = sandbox_program_cache_hits();
		int fd = -1;
		char *why = NULL;
		ck_assert_msg(sandbox_program_open(name, envp, -1, geteuid(), &fd, &why) == 0, "%s: %s", name,
			      why ? why : "refused");
		close(fd);
		if (sandbox_program_cache_hits() > hits)
			return;
		ck_assert_msg(mono_ms() - t0 < 5000, "%s: no check kept", name);
		usleep(20 * 1000);
	}
}

/* name is refused now by a full check, why naming file and needle. */
static void assert_now_refused(const char *name, char **envp, const char *file, const char *needle)
{
	uint64_t hits = sandbox_program_cache_hits();
	int fd = -1;
	char *why = NULL;
	ck_assert_int_eq(sandbox_program_open(name, envp, -1, geteuid(), &fd, &why), -EPERM);
	ck_assert_msg(why && strstr(why, file) && strstr(why, needle), "%s", why ? why : "(none)");
	ck_assert_uint_eq(sandbox_program_cache_hits(), hits);
	ck_assert_int_eq(fd, -1);
	free(why);
}

/* Opens name, which passes: answered by a kept check or not (kept). */
static void assert_kept(const char *name, char **envp, bool kept)
{
	uint64_t hits = sandbox_program_cache_hits();
	int fd = -1;
	char *why = NULL;
	ck_assert_msg(sandbox_program_open(name, envp, -1, geteuid(), &fd, &why) == 0, "%s: %s", name,
		      why ? why : "refused");
	close(fd);
	ck_assert_msg(sandbox_program_cache_hits() == hits + kept, "%s: %s", name, kept ? "not kept" : "kept");
}

static char *tmp_path(const char *rel)
{
	return xasprintf("%s/%s", tmpdir, rel);
}

START_TEST(kept_check_unchanged)
{
	/* Unchanged, a program is answered by its kept check, with the fd
	 * of that very file; named relative to a directory too. Dropped
	 * with the sandbox's caches. */
	_cleanup_free_ char *bin = tmp_path("bin"), *prog = tmp_path("bin/tool");
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	write_file_mode(prog, "#!/bin/sh\necho tool\n", 0755);
	char **envp = child_env_new(NULL);
	open_until_kept(prog, envp);
	uint64_t hits = sandbox_program_cache_hits();
	int fd = -1;
	char *why = NULL;
	ck_assert_int_eq(sandbox_program_open(prog, envp, -1, geteuid(), &fd, &why), 0);
	ck_assert_uint_eq(sandbox_program_cache_hits(), hits + 1);
	struct stat a, b;
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(stat(prog, &b), 0);
	ck_assert(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
	close(fd);
	int dir = open(tmpdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dir, 0);
	uint64_t t0 = mono_ms();
	do {
		hits = sandbox_program_cache_hits();
		ck_assert_int_eq(sandbox_program_open("bin/tool", envp, dir, geteuid(), &fd, &why), 0);
		close(fd);
		ck_assert_uint_lt(mono_ms() - t0, 5000);
	} while (sandbox_program_cache_hits() == hits);
	close(dir);
	sandbox_cache_clear();
	hits = sandbox_program_cache_hits();
	ck_assert_int_eq(sandbox_program_open(prog, envp, -1, geteuid(), &fd, &why), 0);
	ck_assert_uint_eq(sandbox_program_cache_hits(), hits);
	close(fd);
	child_env_free(envp);
}
END_TEST

START_TEST(kept_check_link_repointed)
{
	/* The link re-pointed at a program writable by others. */
	_cleanup_free_ char *good = tmp_path("good"), *evil = tmp_path("evil"), *link = tmp_path("tool");
	write_file_mode(good, "#!/bin/sh\necho good\n", 0755);
	write_file_mode(evil, "#!/bin/sh\necho evil\n", 0775);
	ck_assert_int_eq(symlink("good", link), 0);
	char **envp = child_env_new(NULL);
	open_until_kept(link, envp);
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(symlink("evil", link), 0);
	assert_now_refused(link, envp, evil, "writable by group or other (mode 0775)");
	/* A link on the way re-pointed at a directory writable by others. */
	_cleanup_free_ char *v1 = tmp_path("v1"), *v2 = tmp_path("v2"), *dist = tmp_path("dist");
	_cleanup_free_ char *t1 = tmp_path("v1/tool"), *t2 = tmp_path("v2/tool"), *prog = tmp_path("dist/tool");
	ck_assert_int_eq(mkdir(v1, 0755), 0);
	ck_assert_int_eq(mkdir(v2, 0755), 0);
	ck_assert_int_eq(chmod(v2, 0775), 0);
	write_file_mode(t1, "#!/bin/sh\necho v1\n", 0755);
	write_file_mode(t2, "#!/bin/sh\necho v2\n", 0755);
	ck_assert_int_eq(symlink("v1", dist), 0);
	open_until_kept(prog, envp);
	ck_assert_int_eq(unlink(dist), 0);
	ck_assert_int_eq(symlink("v2", dist), 0);
	assert_now_refused(prog, envp, dist, "writable by group or other (mode 0775)");
	child_env_free(envp);
}
END_TEST

START_TEST(kept_check_dir_made_writable)
{
	/* A directory on the way made writable by its group. */
	_cleanup_free_ char *dir = tmp_path("d"), *prog = tmp_path("d/tool");
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	write_file_mode(prog, "#!/bin/sh\necho tool\n", 0755);
	char **envp = child_env_new(NULL);
	open_until_kept(prog, envp);
	ck_assert_int_eq(chmod(dir, 0775), 0);
	assert_now_refused(prog, envp, dir, "writable by group or other (mode 0775)");
	child_env_free(envp);
}
END_TEST

START_TEST(kept_check_program_chowned)
{
	/* The program given to another uid. */
	if (geteuid() != 0)
		TC_SKIP("needs root to give a file to another uid");
	_cleanup_free_ char *prog = tmp_path("tool");
	write_file_mode(prog, "#!/bin/sh\necho tool\n", 0755);
	char **envp = child_env_new(NULL);
	open_until_kept(prog, envp);
	ck_assert_int_eq(chown(prog, 12345, 12345), 0);
	assert_now_refused(prog, envp, prog, "is owned by uid 12345");
	child_env_free(envp);
}
END_TEST

START_TEST(kept_check_program_replaced)
{
	/* Another file renamed into the program's place: that file is what
	 * is checked and opened, then one writable by others is refused. */
	_cleanup_free_ char *prog = tmp_path("tool"), *other = tmp_path("other");
	write_file_mode(prog, "#!/bin/sh\necho tool\n", 0755);
	char **envp = child_env_new(NULL);
	open_until_kept(prog, envp);
	write_file_mode(other, "#!/bin/sh\necho other\n", 0755);
	struct stat o;
	ck_assert_int_eq(stat(other, &o), 0);
	ck_assert_int_eq(rename(other, prog), 0);
	int fd = -1;
	char *why = NULL;
	ck_assert_int_eq(sandbox_program_open(prog, envp, -1, geteuid(), &fd, &why), 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert(st.st_ino == o.st_ino);
	close(fd);
	open_until_kept(prog, envp);
	write_file_mode(other, "#!/bin/sh\necho evil\n", 0757);
	ck_assert_int_eq(rename(other, prog), 0);
	assert_now_refused(prog, envp, prog, "writable by group or other (mode 0757)");
	child_env_free(envp);
}
END_TEST

START_TEST(kept_check_path_shadowed)
{
	/* A name of the PATH shadowed by a new file in an earlier
	 * directory, writable by others: refused, not passed over. */
	_cleanup_free_ char *early = tmp_path("early"), *late = tmp_path("late");
	_cleanup_free_ char *prog = tmp_path("late/tc-kept-tool"), *shadow = tmp_path("early/tc-kept-tool");
	ck_assert_int_eq(mkdir(early, 0755), 0);
	ck_assert_int_eq(mkdir(late, 0755), 0);
	write_file_mode(prog, "#!/bin/sh\necho tool\n", 0755);
	_cleanup_free_ char *path = xasprintf("PATH=%s:%s", early, late);
	char *envp[] = { path, NULL };
	open_until_kept("tc-kept-tool", envp);
	write_file_mode(shadow, "#!/bin/sh\necho shadow\n", 0775);
	assert_now_refused("tc-kept-tool", envp, shadow, "writable by group or other (mode 0775)");
}
END_TEST

START_TEST(kept_check_mounted_over)
{
	/* A directory on the way hidden by a mount of another, holding a
	 * program writable by others. */
	if (geteuid() != 0)
		TC_SKIP("needs root to mount");
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		TC_SKIP("no mount namespace of its own: %s", strerror(errno));
	_cleanup_free_ char *d = tmp_path("d"), *e = tmp_path("e");
	_cleanup_free_ char *prog = tmp_path("d/tool"), *other = tmp_path("e/tool");
	ck_assert_int_eq(mkdir(d, 0755), 0);
	ck_assert_int_eq(mkdir(e, 0755), 0);
	write_file_mode(prog, "#!/bin/sh\necho d\n", 0755);
	write_file_mode(other, "#!/bin/sh\necho e\n", 0775);
	char **envp = child_env_new(NULL);
	open_until_kept(prog, envp);
	ck_assert_int_eq(mount(e, d, NULL, MS_BIND, NULL), 0);
	assert_now_refused(prog, envp, prog, "writable by group or other (mode 0775)");
	ck_assert_int_eq(umount2(d, MNT_DETACH), 0);
	child_env_free(envp);
}
END_TEST

START_TEST(kept_checks_bounded)
{
	/* 32 checks are kept, the least recently used goes first. */
	_cleanup_free_ char *many = tmp_path("many");
	ck_assert_int_eq(mkdir(many, 0755), 0);
	char *progs[33];
	for (int i = 0; i < 33; i++) {
		progs[i] = xasprintf("%s/p%d", many, i);
		write_file_mode(progs[i], "#!/bin/sh\n", 0755);
	}
	char **envp = child_env_new(NULL);
	/* The last one made settled: so did its directory and the others. */
	open_until_kept(progs[32], envp);
	for (int i = 0; i < 31; i++)
		assert_kept(progs[i], envp, false);
	assert_kept(progs[32], envp, true);
	assert_kept(progs[31], envp, false);	/* p0 goes */
	assert_kept(progs[0], envp, false);	/* p1 goes */
	assert_kept(progs[32], envp, true);
	assert_kept(progs[31], envp, true);
	assert_kept(progs[2], envp, true);
	assert_kept(progs[1], envp, false);
	for (int i = 0; i < 33; i++)
		free(progs[i]);
	child_env_free(envp);
}
END_TEST

START_TEST(kept_checks_bounded_in_size)
{
	/* A way of over 16 KiB of names is checked at each start, not kept;
	 * one of over 1024 names is refused. */
	char *prog = xstrdup(tmpdir);
	char part[201];
	memset(part, 'd', 200);
	part[200] = '\0';
	for (int i = 0; i < 13; i++) {
		char *next = xasprintf("%s/%s", prog, part);
		free(prog);
		prog = next;
		ck_assert_int_eq(mkdir(prog, 0755), 0);
	}
	char *next = xasprintf("%s/tool", prog);
	free(prog);
	prog = next;
	write_file_mode(prog, "#!/bin/sh\n", 0755);
	char **envp = child_env_new(NULL);
	uint64_t t0 = mono_ms();
	while (mono_ms() - t0 < 150) {
		assert_kept(prog, envp, false);
		usleep(20 * 1000);
	}
	assert_kept(prog, envp, false);
	free(prog);

	int base = open(tmpdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(base, 0);
	struct buf deep = { 0 };
	for (int i = 0; i < 1100; i++) {
		buf_puts(&deep, "a");
		buf_putc(&deep, '\0');
		ck_assert_int_eq(mkdirat(base, deep.data, 0755), 0);
		deep.len--;
		buf_putc(&deep, '/');
	}
	buf_puts(&deep, "tool");
	buf_putc(&deep, '\0');
	int fd = openat(base, deep.data, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
	ck_assert_int_ge(fd, 0);
	close(fd);
	char *why = NULL;
	fd = -1;
	ck_assert_int_eq(sandbox_program_open(deep.data, envp, base, geteuid(), &fd, &why), -EPERM);
	ck_assert_msg(why && strstr(why, "too many names"), "%s", why ? why : "(none)");
	free(why);
	buf_free(&deep);
	close(base);
	child_env_free(envp);
}
END_TEST

START_TEST(shell_background_killed_at_exit)
{
	/* When the leader exits, the rest of its group goes with it: the
	 * call does not wait for a background job holding the pipes. */
	struct run run;
	uint64_t t0 = mono_ms();
	struct json_doc *doc = shell_ok(&run, "{\"command\":\"sleep 300 & echo \\\"pids $$ $!\\\"\"}");
	ck_assert_uint_lt(mono_ms() - t0, 900);
	int leader = 0, bg = 0;
	ck_assert_int_eq(sscanf(sget(doc, "stdout"), "pids %d %d", &leader, &bg), 2);
	ck_assert(pid_dead(bg));
	json_doc_unref(doc);
	run_done(&run);

	/* One that escapes the group (setsid) cannot be killed; its pipes are
	 * given up after the drain delay instead of holding the call. */
	t0 = mono_ms();
	doc = shell_ok(&run, "{\"command\":\"setsid sh -c 'echo \\\"pids $$\\\"; exec sleep 3' & sleep 0.2\"}");
	uint64_t took = mono_ms() - t0;
	ck_assert_msg(took >= 1000 && took < 2800, "took %llu ms", (unsigned long long)took);
	int esc = 0;
	ck_assert_int_eq(sscanf(sget(doc, "stdout"), "pids %d", &esc), 1);
	ck_assert_int_gt(esc, 1);
	kill(esc, SIGKILL);
	json_doc_unref(doc);
	run_done(&run);
}
END_TEST

/* --- shell: streaming, zombies, fds -------------------------------------- */

START_TEST(shell_streams_while_running)
{
	struct run run;
	struct json_doc *doc = shell_ok(&run, "{\"command\":\"echo first; sleep 0.5; echo second >&2\"}");
	ck_assert_int_ne(run.first_output_ms, 0);
	ck_assert_msg(run.finish_ms - run.first_output_ms >= 300,
		      "output came only %llu ms before the end",
		      (unsigned long long)(run.finish_ms - run.first_output_ms));
	ck_assert_str_eq(buf_head(&run.streamed[CHILD_STDOUT]), "first\nsecond\n");
	json_doc_unref(doc);
	run_done(&run);
}
END_TEST

static void note_fired(void *arg)
{
	*(uint64_t *)arg = mono_ms();
}

/* Where the kernel's pipes refuse a read with RWF_NOWAIT (older kernels),
 * they are made non-blocking and read so: output streams as it comes and
 * the loop never waits in a read (a timer due while the command sleeps
 * fires then, not once it has printed again). */
START_TEST(without_rwf_nowait)
{
	if (!deny_syscall_or_skip("without_rwf_nowait", SYS_preadv2))
		return;
	for (int i = 0; i < 2; i++) {
		uint64_t fired = 0;
		struct tc_timer *t = tc_timer_new(loop, note_fired, &fired);
		tc_timer_start(t, 250);
		struct run run;
		struct json_doc *doc =
			shell_ok(&run, "{\"command\":\"echo first; sleep 0.8; echo second >&2\"}");
		ck_assert_str_eq(buf_head(&run.streamed[CHILD_STDOUT]), "first\nsecond\n");
		ck_assert_int_ne(fired, 0);
		ck_assert_msg(run.finish_ms - fired >= 300, "the timer fired %llu ms before the end",
			      (unsigned long long)(run.finish_ms - fired));
		json_doc_unref(doc);
		run_done(&run);
		tc_timer_free(t);
	}
}
END_TEST

/* The turn's events in order: w the writer (a prepare watcher of the
 * default priority, as the daemon's that writes answers), p the poll's end
 * (a check watcher), t the callback that starts the deferred work, d it. */
struct turn_log {
	char seen[64];
	size_t n;
	ev_prepare writer;
	ev_check polled;
	struct tc_defer *d;
};

static void turn_note(struct turn_log *t, char c)
{
	if (t->n + 1 < sizeof(t->seen))
		t->seen[t->n++] = c;
}

static void turn_writer(struct ev_loop *l, ev_prepare *w, int revents)
{
	turn_note(w->data, 'w');
}

static void turn_polled(struct ev_loop *l, ev_check *w, int revents)
{
	turn_note(w->data, 'p');
}

static void turn_deferred(void *arg)
{
	turn_note(arg, 'd');
}

/* Starts the deferred work twice, then the writer: the writer's priority,
 * not the order they were started in, puts it first. */
static void turn_start(void *arg)
{
	struct turn_log *t = arg;
	turn_note(t, 't');
	tc_defer_start(t->d);
	tc_defer_start(t->d);
	ev_prepare_start(ev, &t->writer);
}

START_TEST(loop_defer_after_writer_before_poll)
{
	struct turn_log t = { 0 };
	ev_prepare_init(&t.writer, turn_writer);
	t.writer.data = &t;
	ev_check_init(&t.polled, turn_polled);
	t.polled.data = &t;
	ev_check_start(ev, &t.polled);
	t.d = tc_defer_new(loop, turn_deferred, &t);
	struct tc_timer *tm = tc_timer_new(loop, turn_start, &t);
	tc_timer_start(tm, 0);
	for (int i = 0; i < 4; i++)
		ev_run(ev, EVRUN_NOWAIT);
	t.seen[t.n] = '\0';
	/* Once, in the turn after it was started: after the writer, before
	 * that turn's poll. */
	const char *start = strchr(t.seen, 't');
	ck_assert_ptr_nonnull(start);
	start++;
	if (*start == 'p')
		start++;
	ck_assert_msg(strncmp(start, "wdp", 3) == 0, "turns: %s", t.seen);
	ck_assert_ptr_eq(strchr(t.seen, 'd'), strrchr(t.seen, 'd'));
	tc_timer_free(tm);
	tc_defer_free(t.d);
	ev_prepare_stop(ev, &t.writer);
	ev_check_stop(ev, &t.polled);
}
END_TEST

/* A fed watcher: its callback runs in the turn that fed it, after the
 * callback that fed it and before that turn's poll, with what was fed,
 * though its fd (an empty pipe) is not ready and the watcher was never
 * started. */
struct feed_log {
	struct turn_log t;
	struct tc_io *io;
	int revents;
};

static void feed_fired(void *arg, int revents)
{
	struct feed_log *f = arg;
	f->revents = revents;
	turn_note(&f->t, 'f');
	f->io = tc_io_free(f->io);
}

static void feed_start(void *arg)
{
	struct feed_log *f = arg;
	turn_note(&f->t, 't');
	ck_assert(tc_io_feed(f->io, TC_IO_READ));
	turn_note(&f->t, 'r');
}

START_TEST(loop_feed_same_turn_before_poll)
{
	struct feed_log f = { 0 };
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ev_check_init(&f.t.polled, turn_polled);
	f.t.polled.data = &f.t;
	ev_check_start(ev, &f.t.polled);
	f.io = tc_io_new(loop, p[0], TC_IO_READ, feed_fired, &f);
	struct tc_timer *tm = tc_timer_new(loop, feed_start, &f);
	tc_timer_start(tm, 0);
	for (int i = 0; i < 4; i++)
		ev_run(ev, EVRUN_NOWAIT);
	f.t.seen[f.t.n] = '\0';
	ck_assert_msg(strstr(f.t.seen, "trf") && !strstr(f.t.seen, "trpf"), "turns: %s", f.t.seen);
	ck_assert_ptr_eq(strchr(f.t.seen, 'f'), strrchr(f.t.seen, 'f'));
	ck_assert_int_eq(f.revents, TC_IO_READ);
	ck_assert_ptr_null(f.io);
	tc_timer_free(tm);
	ev_check_stop(ev, &f.t.polled);
	close(p[0]);
	close(p[1]);
}
END_TEST

/* Fed before the loop runs (a call started outside its callbacks): the
 * next turn invokes it without waiting in the poll for something else. */
START_TEST(loop_feed_outside_not_held_by_the_poll)
{
	struct feed_log f = { 0 };
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	f.io = tc_io_new(loop, p[0], TC_IO_READ, feed_fired, &f);
	bool late = false;
	struct tc_timer *tm = tc_timer_new(loop, on_deadline, &late);
	tc_timer_start(tm, 5000);
	uint64_t t0 = mono_ms();
	ck_assert(tc_io_feed(f.io, TC_IO_READ));
	ev_run(ev, EVRUN_ONCE);
	ck_assert_int_eq(f.revents, TC_IO_READ);
	ck_assert_ptr_null(f.io);
	ck_assert(!late);
	ck_assert_uint_lt(mono_ms() - t0, 1000);
	/* And the loop blocks again once nothing is fed. */
	ev_run(ev, EVRUN_NOWAIT);
	tc_timer_free(tm);
	close(p[0]);
	close(p[1]);
}
END_TEST

#define N_CONCURRENT 200

START_TEST(shell_fd_hygiene)
{
	/* One call first: what the daemon opens once for all its children
	 * (/dev/null for their stdin) is not a call's. */
	struct run first;
	struct json_doc *fdoc = shell_ok(&first, "{\"command\":\"true\"}");
	json_doc_unref(fdoc);
	run_done(&first);
	int before = count_fds();
	struct run *runs = calloc(N_CONCURRENT, sizeof(*runs));
	ck_assert_ptr_nonnull(runs);
	for (int i = 0; i < N_CONCURRENT; i++) {
		char args[96];
		snprintf(args, sizeof(args), "{\"command\":\"echo %d; echo e%d >&2\"}", i, i);
		start(&runs[i], shell, args);
		ck_assert(!runs[i].finished);
	}
	ck_assert_int_ge(count_fds(), before + N_CONCURRENT);
	wait_runs(runs, N_CONCURRENT, 25000);
	for (int i = 0; i < N_CONCURRENT; i++) {
		char want[32];
		ck_assert_int_eq(runs[i].c.kind, TC_OK);
		ck_assert(!runs[i].c.is_error);
		struct json_doc *doc = structured(&runs[i]);
		snprintf(want, sizeof(want), "%d\ne%d\n", i, i);
		ck_assert_str_eq(sget(doc, "stdout"), want);
		json_doc_unref(doc);
		run_done(&runs[i]);
	}
	free(runs);
	ck_assert_int_eq(count_fds(), before);
	ck_assert_int_eq(count_children(), 0);
}
END_TEST

/* Checks `ls -l /proc/self/fd` output: 0 is /dev/null, 1 and 2 pipes, and
 * the only other fd is the one ls opened on the directory it lists. */
static void check_child_fds(const char *out)
{
	char *copy = strdup(out), *save = NULL;
	int seen = 0;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *arrow = strstr(line, " -> ");
		if (!arrow)
			continue;
		*arrow = '\0';
		const char *num = strrchr(line, ' ');
		int fd = atoi(num ? num + 1 : line);
		const char *target = arrow + 4;
		if (fd == 0)
			ck_assert_str_eq(target, "/dev/null");
		else if (fd <= 2)
			ck_assert_msg(strncmp(target, "pipe:", 5) == 0, "fd %d -> %s", fd, target);
		else
			ck_assert_msg(strncmp(target, "/proc/", 6) == 0 &&
				      strcmp(target + strlen(target) - 3, "/fd") == 0,
				      "fd %d leaked into the child: %s", fd, target);
		seen++;
	}
	free(copy);
	ck_assert_int_le(seen, 4);
	ck_assert_int_ge(seen, 3);
}

START_TEST(child_sees_only_stdio)
{
	/* Even an fd someone opened without O_CLOEXEC stays out, low or
	 * high (the child copies only the fds below its own: the high one
	 * must be left behind, not copied). */
	int leaky = open("/dev/null", O_RDONLY);
	ck_assert_int_ge(leaky, 3);
	int leaky_high = fcntl(leaky, F_DUPFD, 1000);
	ck_assert_int_ge(leaky_high, 1000);
	struct run run;
	struct json_doc *doc = shell_ok(&run, "{\"command\":\"ls -l /proc/self/fd\"}");
	check_child_fds(sget(doc, "stdout"));
	json_doc_unref(doc);
	run_done(&run);
	close(leaky);
	close(leaky_high);

	/* A daemon started with stdin closed still gives /dev/null. */
	close(STDIN_FILENO);
	doc = shell_ok(&run, "{\"command\":\"ls -l /proc/self/fd\"}");
	check_child_fds(sget(doc, "stdout"));
	json_doc_unref(doc);
	run_done(&run);
}
END_TEST

/* --- command kind -------------------------------------------------------- */

static struct tool *command_tool(const char *decl_text)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	ck_assert_msg(json_parse(decl_text, strlen(decl_text), 0, 0, &doc, &err) == 0, "decl: %s", err.msg);
	struct tool *t = NULL;
	char *msg = NULL;
	int r = command_tool_from_json(json_doc_root(doc), "/etc/toolcalld/tools.d/t.json", &t, &msg);
	ck_assert_msg(r == 0, "declaration refused: %s", msg ? msg : "?");
	json_doc_unref(doc);
	return t;
}

static char *command_error(const char *decl_text)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	ck_assert_msg(json_parse(decl_text, strlen(decl_text), 0, 0, &doc, &err) == 0, "decl: %s", err.msg);
	struct tool *t = NULL;
	char *msg = NULL;
	ck_assert_int_eq(command_tool_from_json(json_doc_root(doc), "t.json", &t, &msg), -EINVAL);
	ck_assert_ptr_null(t);
	ck_assert_ptr_nonnull(msg);
	json_doc_unref(doc);
	return msg;
}

#define ECHO_DECL \
	"{\"name\":\"echo_args\",\"kind\":\"command\",\"description\":\"Echo\"," \
	"\"argv\":[\"printf\",\"%s|\",\"{{a}}\",\"{{b}}\",\"x{{opt}}y\",\"{{opt}}\",\"{{n}}\",\"{{flag}}\",\"{{list}}\"]," \
	"\"side_effects\":\"read\",\"idempotent\":true,\"timeout_ms\":10000,\"max_attempts\":2," \
	"\"input_schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}," \
	"\"b\":{\"type\":\"string\"},\"opt\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}," \
	"\"flag\":{\"type\":\"boolean\"},\"list\":{\"type\":\"array\"}},\"required\":[\"a\",\"b\"]}}"

START_TEST(command_argv_literal)
{
	struct tool *t = command_tool(ECHO_DECL);
	ck_assert_str_eq(t->name, "echo_args");
	ck_assert_int_eq(t->side_effects, SIDE_READ);
	ck_assert(t->idempotent);
	ck_assert_uint_eq(t->timeout_ms, 10000);
	ck_assert_uint_eq(t->max_attempts, 2);
	ck_assert_str_eq(t->source, "/etc/toolcalld/tools.d/t.json");
	ck_assert_ptr_nonnull(t->fingerprint);
	ck_assert_ptr_eq(t->def, &tool_kind_command);

	struct run run;
	run_call(&run, t, "{\"a\":\"; rm -rf / #\",\"b\":\"$(touch pwned) `touch pwned2`\","
		 "\"n\":42,\"flag\":true,\"list\":[1,\"x\"]}");
	ck_assert_msg(run.c.kind == TC_OK, "%s", run.c.message ? run.c.message : "");
	struct json_doc *doc = structured(&run);
	/* A missing optional element is dropped; inside a longer one, empty. */
	ck_assert_str_eq(sget(doc, "stdout"), "; rm -rf / #|$(touch pwned) `touch pwned2`|xy|42|true|[1,\"x\"]|");
	ck_assert_int_eq(iget(doc, "exit_code"), 0);
	ck_assert_ptr_null(json_get(json_doc_root(doc), "signal"));
	json_doc_unref(doc);
	/* The audit line quotes each element. */
	ck_assert_ptr_nonnull(strstr(run.c.command, "printf '%s|' '; rm -rf / #' '$(touch pwned) `touch pwned2`' xy 42 true"));
	run_done(&run);

	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/pwned", ws->root);
	ck_assert_int_eq(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/pwned2", ws->root);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(access("pwned", F_OK), -1);
	tool_unref(t);
}
END_TEST

START_TEST(command_outcomes)
{
	struct run run;
	struct tool *t = command_tool(
		"{\"name\":\"run_sh\",\"argv\":[\"sh\",\"-c\",\"{{script}}\"],\"side_effects\":\"execute\","
		"\"env\":{\"TC_FIXED\":\"fixed value\"},"
		"\"input_schema\":{\"type\":\"object\",\"properties\":{\"script\":{\"type\":\"string\"}}}}");
	ck_assert_uint_eq(t->timeout_ms, 600000);

	/* EX_TEMPFAIL: transient. */
	run_call(&run, t, "{\"script\":\"echo busy >&2; exit 75\"}");
	ck_assert_int_eq(run.c.kind, TC_TRANSIENT);
	ck_assert_ptr_nonnull(strstr(run.c.message, "busy"));
	run_done(&run);

	/* Other status: execution_error quoting stderr under its name. */
	run_call(&run, t, "{\"script\":\"head -c 3000 /dev/zero | tr '\\\\0' z >&2; echo oops-END >&2; exit 3\"}");
	ck_assert_int_eq(run.c.kind, TC_EXECUTION_ERROR);
	ck_assert_msg(strncmp(run.c.message, "Command 'sh' exited with status 3:\n[stderr]\nzzz", 47) == 0, "%s",
		      run.c.message);
	ck_assert_str_eq(run.c.message + strlen(run.c.message) - 8, "oops-END");
	ck_assert_uint_eq(strlen(run.c.message), 44 + 3000 + 8);
	ck_assert_ptr_nonnull(run.c.error_data);
	ck_assert_ptr_nonnull(strstr(run.c.error_data, "\"exitCode\":3"));
	run_done(&run);

	/* Killed by a signal. */
	run_call(&run, t, "{\"script\":\"kill -SEGV $$\"}");
	ck_assert_int_eq(run.c.kind, TC_EXECUTION_ERROR);
	ck_assert_ptr_nonnull(strstr(run.c.message, "killed by signal SIGSEGV"));
	run_done(&run);

	/* Declared environment on top of the scrubbed one. */
	setenv("TC_TEST_SECRET", "leaked", 1);
	run_call(&run, t, "{\"script\":\"echo \\\"$TC_FIXED/$TC_TEST_SECRET\\\"\"}");
	ck_assert_int_eq(run.c.kind, TC_OK);
	struct json_doc *doc = structured(&run);
	ck_assert_str_eq(sget(doc, "stdout"), "fixed value/\n");
	json_doc_unref(doc);
	run_done(&run);
	tool_unref(t);

	/* A program that does not exist. */
	t = command_tool("{\"name\":\"nope\",\"argv\":[\"tc-no-such-program\"],\"side_effects\":\"read\"}");
	run_call(&run, t, "{}");
	ck_assert_int_eq(run.c.kind, TC_EXECUTION_ERROR);
	ck_assert_str_eq(run.c.message, "Command 'tc-no-such-program' not found");
	run_done(&run);
	tool_unref(t);
	ck_assert_int_eq(count_children(), 0);
}
END_TEST

START_TEST(command_stdout_json)
{
	struct run run;
	struct tool *t = command_tool(
		"{\"name\":\"emit\",\"argv\":[\"printf\",\"%s\",\"{{text}}\"],\"side_effects\":\"none\",\"stdout\":\"json\","
		"\"input_schema\":{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}}}}");

	run_call(&run, t, "{\"text\":\" {\\\"a\\\": 1, \\\"b\\\": [true, null]}\\n\"}");
	ck_assert_msg(run.c.kind == TC_OK, "%s", run.c.message ? run.c.message : "");
	ck_assert_str_eq(run.c.structured, "{\"a\":1,\"b\":[true,null]}");
	run_done(&run);

	run_call(&run, t, "{\"text\":\"[1,2]\"}");
	ck_assert_int_eq(run.c.kind, TC_OK);
	ck_assert_str_eq(run.c.structured, "{\"result\":[1,2]}");
	run_done(&run);

	run_call(&run, t, "{\"text\":\"not json\"}");
	ck_assert_int_eq(run.c.kind, TC_EXECUTION_ERROR);
	ck_assert_ptr_nonnull(strstr(run.c.message, "did not print valid JSON"));
	run_done(&run);
	tool_unref(t);
}
END_TEST

START_TEST(command_sees_only_stdio)
{
	int leaky = open("/dev/null", O_RDONLY);
	ck_assert_int_ge(leaky, 3);
	struct tool *t = command_tool("{\"name\":\"fds\",\"argv\":[\"ls\",\"-l\",\"/proc/self/fd\"],\"side_effects\":\"read\"}");
	struct run run;
	run_call(&run, t, "{}");
	ck_assert_int_eq(run.c.kind, TC_OK);
	struct json_doc *doc = structured(&run);
	check_child_fds(sget(doc, "stdout"));
	json_doc_unref(doc);
	run_done(&run);
	tool_unref(t);
	close(leaky);
}
END_TEST

START_TEST(command_cancel)
{
	struct tool *t = command_tool("{\"name\":\"wait\",\"argv\":[\"sleep\",\"300\"],\"side_effects\":\"none\"}");
	struct run run;
	start(&run, t, "{}");
	/* Plain sleep dies of SIGTERM at once. */
	uint64_t t0 = mono_ms();
	t->def->cancel(&run.c);
	wait_runs(&run, 1, 3000);
	ck_assert_int_eq(run.c.kind, TC_CANCELLED);
	ck_assert_uint_lt(mono_ms() - t0, 2000);
	run_done(&run);
	tool_unref(t);
	ck_assert_int_eq(count_children(), 0);
}
END_TEST

START_TEST(command_declaration_errors)
{
	static const struct { const char *decl, *want; } cases[] = {
		{ "[]", "object" },
		{ "{\"argv\":[\"ls\"],\"side_effects\":\"read\"}", "name: missing" },
		{ "{\"name\":\"bad name\",\"argv\":[\"ls\"],\"side_effects\":\"read\"}", "name:" },
		{ "{\"name\":\"t\",\"side_effects\":\"read\"}", "argv: missing" },
		{ "{\"name\":\"t\",\"argv\":[],\"side_effects\":\"read\"}", "argv:" },
		{ "{\"name\":\"t\",\"argv\":\"ls -l\",\"side_effects\":\"read\"}", "argv:" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\",1],\"side_effects\":\"read\"}", "argv[1]: expected a string" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\",\"{{pth}}\"],\"side_effects\":\"read\","
		  "\"input_schema\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}",
		  "argv[1]: placeholder '{{pth}}' names no property of input_schema" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\",\"--\",\"x{{path\"],\"side_effects\":\"read\","
		  "\"input_schema\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}",
		  "argv[2]:" },
		{ "{\"name\":\"t\",\"argv\":[\"{{prog}}\"],\"side_effects\":\"read\","
		  "\"input_schema\":{\"type\":\"object\",\"properties\":{\"prog\":{\"type\":\"string\"}}}}",
		  "argv[0]:" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\"]}", "side_effects: missing" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\"],\"side_effects\":\"destroy\"}", "side_effects:" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\"],\"side_effects\":\"read\",\"kind\":\"mcp\"}", "kind:" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\"],\"side_effects\":\"read\",\"timeout_ms\":0}", "timeout_ms:" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\"],\"side_effects\":\"read\",\"idempotent\":\"yes\"}", "idempotent:" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\"],\"side_effects\":\"read\",\"stdout\":\"xml\"}", "stdout:" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\"],\"side_effects\":\"read\",\"env\":{\"A=B\":\"x\"}}", "env:" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\"],\"side_effects\":\"read\",\"shell\":true}", "shell: unknown key" },
		{ "{\"name\":\"t\",\"argv\":[\"ls\"],\"side_effects\":\"read\",\"input_schema\":{\"type\":\"object\",\"patternProperties\":{}}}",
		  "input_schema:" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char *msg = command_error(cases[i].decl);
		ck_assert_msg(strstr(msg, cases[i].want), "case %zu: got '%s', want '%s'", i, msg, cases[i].want);
		free(msg);
	}
}
END_TEST

START_TEST(command_cwd_beneath)
{
	char sub[PATH_MAX + 8];
	snprintf(sub, sizeof(sub), "%s/src", ws->root);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	struct tool *t = command_tool("{\"name\":\"where\",\"argv\":[\"pwd\",\"-P\"],\"side_effects\":\"none\",\"cwd\":\"src\"}");
	struct run run;
	run_call(&run, t, "{}");
	ck_assert_int_eq(run.c.kind, TC_OK);
	struct json_doc *doc = structured(&run);
	char want[PATH_MAX + 16];
	snprintf(want, sizeof(want), "%s/src\n", ws->root);
	ck_assert_str_eq(sget(doc, "stdout"), want);
	json_doc_unref(doc);
	run_done(&run);
	tool_unref(t);

	t = command_tool("{\"name\":\"out\",\"argv\":[\"pwd\"],\"side_effects\":\"none\",\"cwd\":\"../..\"}");
	run_call(&run, t, "{}");
	ck_assert_int_eq(run.c.kind, TC_PERMISSION_DENIED);
	run_done(&run);
	tool_unref(t);
}
END_TEST

static Suite *child_suite(void)
{
	Suite *s = suite_create("child");
	TCase *tc = tcase_create("shell");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, shell_exit_codes);
	tcase_add_test(tc, loop_defer_after_writer_before_poll);
	tcase_add_test(tc, loop_feed_same_turn_before_poll);
	tcase_add_test(tc, loop_feed_outside_not_held_by_the_poll);
	tcase_add_test(tc, no_plan_no_capability);
	tcase_add_test(tc, bounding_set_dropped_ahead);
	tcase_add_test(tc, without_pidfd_open);
	tcase_add_test(tc, without_close_range);
	tcase_add_test(tc, without_rwf_nowait);
	tcase_add_test(tc, shell_capture);
	tcase_add_test(tc, shell_output_order_exact);
	tcase_add_test(tc, shell_signals);
	tcase_add_test(tc, shell_cap_head_tail);
	tcase_add_test(tc, shell_text_head_tail);
	tcase_add_test(tc, shell_output_left_at_exit);
	tcase_add_test(tc, shell_invalid_utf8);
	tcase_add_test(tc, shell_env_scrubbed);
	tcase_add_test(tc, shell_cwd);
	tcase_add_test(tc, shell_cancel_term_then_kill);
	tcase_add_test(tc, shell_background_killed_at_exit);
	tcase_add_test(tc, shell_streams_while_running);
	tcase_add_test(tc, shell_fd_hygiene);
	tcase_add_test(tc, child_sees_only_stdio);
	suite_add_tcase(s, tc);

	tc = tcase_create("child");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, child_short_kill_delay);
	tcase_add_test(tc, child_free_running);
	tcase_add_test(tc, child_starts_clean);
	tcase_add_test(tc, child_exec_errors);
	tcase_add_test(tc, child_runs_the_checked_fd);
	tcase_add_test(tc, kept_check_unchanged);
	tcase_add_test(tc, kept_check_link_repointed);
	tcase_add_test(tc, kept_check_dir_made_writable);
	tcase_add_test(tc, kept_check_program_chowned);
	tcase_add_test(tc, kept_check_program_replaced);
	tcase_add_test(tc, kept_check_path_shadowed);
	tcase_add_test(tc, kept_check_mounted_over);
	tcase_add_test(tc, kept_checks_bounded);
	tcase_add_test(tc, kept_checks_bounded_in_size);
	suite_add_tcase(s, tc);

	tc = tcase_create("command");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, command_argv_literal);
	tcase_add_test(tc, command_outcomes);
	tcase_add_test(tc, command_stdout_json);
	tcase_add_test(tc, command_sees_only_stdio);
	tcase_add_test(tc, command_cancel);
	tcase_add_test(tc, command_declaration_errors);
	tcase_add_test(tc, command_cwd_beneath);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(child_suite());
}
