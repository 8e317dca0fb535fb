/* SPDX-License-Identifier: MIT */
/*
 * Child processes of the shell and command tools, black-box through the
 * socket of the real daemon, checked against /proc: timeouts that escalate
 * from SIGTERM to SIGKILL, background jobs that do not outlive their
 * command, the three ways a call is cancelled, output caps, the scrubbed
 * environment, streamed progress, hundreds of shells at once without
 * zombies or leaked fds, argv passed without a shell, and the fds a child
 * inherits.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define EXEC_AUTO "\"confirmation\":{\"default\":{\"execute\":\"auto\"}}"

/* The daemon's delay between SIGTERM and SIGKILL (lib/child/child.h). */
#define KILL_DELAY_MS 5000

/* --- /proc ----------------------------------------------------------------- */

/* The state letter and parent of a process, from /proc/PID/stat; false when
 * there is no such process. */
static bool proc_stat(pid_t pid, char *ret_state, pid_t *ret_ppid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name is in parentheses and may hold anything. */
	const char *rp = strrchr(buf, ')');
	int ppid;
	char state;
	if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
		return false;
	if (ret_state)
		*ret_state = state;
	if (ret_ppid)
		*ret_ppid = ppid;
	return true;
}

/* True while pid runs (a zombie is dead: it only waits to be reaped). */
static bool alive(pid_t pid)
{
	char state;
	return proc_stat(pid, &state, NULL) && state != 'Z' && state != 'X';
}

/* Waits until pid is dead; returns how long that took, or -1 after timeout_ms. */
static int64_t wait_dead(pid_t pid, int timeout_ms)
{
	uint64_t t0 = tc_now_ms();
	if (!tc_wait_until(!alive(pid), timeout_ms))
		return -1;
	return (int64_t)(tc_now_ms() - t0);
}

/* Whether pid is one of the daemon's spawners (its name), which it keeps
 * while they serve calls: not a call's child. */
static bool is_spawner(pid_t pid)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool yes = fgets(comm, sizeof(comm), f) && strcmp(comm, "toolcalld-spawn\n") == 0;
	fclose(f);
	return yes;
}

/* A spawner among the children of ppid, or 0. */
static pid_t spawner_of(pid_t ppid)
{
	DIR *dir = opendir("/proc");
	ck_assert(dir);
	pid_t found = 0;
	struct dirent *de;
	while (!found && (de = readdir(dir))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		pid_t parent;
		if (!*end && pid > 0 && proc_stat((pid_t)pid, NULL, &parent) && parent == ppid && is_spawner((pid_t)pid))
			found = (pid_t)pid;
	}
	closedir(dir);
	return found;
}

/* Whether ppid has a spawner among its children. */
static bool has_spawner(pid_t ppid)
{
	return spawner_of(ppid) != 0;
}

/* Children of ppid but its spawners: all of them, and the zombies among
 * them. */
static void count_children(pid_t ppid, unsigned *ret_all, unsigned *ret_zombies)
{
	unsigned all = 0, zombies = 0;
	DIR *dir = opendir("/proc");
	ck_assert(dir);
	struct dirent *de;
	while ((de = readdir(dir))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		char state;
		pid_t parent;
		if (proc_stat((pid_t)pid, &state, &parent) && parent == ppid && !is_spawner((pid_t)pid)) {
			all++;
			zombies += state == 'Z';
		}
	}
	closedir(dir);
	*ret_all = all;
	*ret_zombies = zombies;
}

/* Open fds of a process. */
/* The fds a process holds, those on a cgroup's files (the daemon keeps
 * a few empty cgroups for later calls, each with four files open) counted
 * apart in *cgroup. */
static unsigned count_fds(pid_t pid, unsigned *cgroup, unsigned *mntns)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(path);
	ck_assert_msg(dir, "%s: %s", path, strerror(errno));
	unsigned n = 0;
	*cgroup = *mntns = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		char link[PATH_MAX], fd[64 + 256];
		snprintf(fd, sizeof(fd), "%s/%s", path, de->d_name);
		ssize_t len = readlink(fd, link, sizeof(link) - 1);
		link[len > 0 ? len : 0] = '\0';
		if (strncmp(link, "/sys/fs/cgroup/", 15) == 0)
			(*cgroup)++;
		else if (strncmp(link, "mnt:[", 5) == 0)
			(*mntns)++;
		else
			n++;
	}
	closedir(dir);
	return n;
}

/* --- helpers ---------------------------------------------------------------- */

/* Waits for a workspace file holding a complete line of pids; returns the
 * k-th (from 0). */
static pid_t wait_pid_file(struct tcd *d, const char *rel, int k)
{
	uint64_t end = tc_now_ms() + 5000;
	for (;;) {
		char *text = tcd_read(d, rel, NULL);
		if (text && strchr(text, '\n')) {
			long v[4] = {0};
			int n = sscanf(text, "%ld %ld %ld %ld", &v[0], &v[1], &v[2], &v[3]);
			free(text);
			ck_assert_msg(n > k && v[k] > 0, "bad pid file %s", rel);
			return (pid_t)v[k];
		}
		free(text);
		ck_assert_msg(tc_now_ms() < end, "the command did not write %s", rel);
		tc_pause_ms(TC_POLL_MS);
	}
}

static const char *send_shell(struct tcc *c, const char *command, const char *extra_args, const char *meta)
{
	char *q = tj_quote(command);
	int64_t id = tcc_send_request(c, "tools/call",
		tcc_fmt(c, "{\"name\":\"shell\",\"arguments\":{\"command\":%s%s%s}%s%s%s}", q,
			extra_args ? "," : "", extra_args ? extra_args : "", meta ? ",\"_meta\":{" : "",
			meta ? meta : "", meta ? "}" : ""));
	free(q);
	return tcc_fmt(c, "%lld", (long long)id);
}

static const struct json *shell(struct tcc *c, const char *command)
{
	char *q = tj_quote(command);
	const struct json *r = tcc_call(c, "shell", tcc_fmt(c, "{\"command\":%s}", q));
	free(q);
	return r;
}

static const struct json *wait_response(struct tcc *c, const char *id, int timeout_ms)
{
	const struct json *r = tcc_wait_id(c, id, timeout_ms);
	ck_assert_msg(r != NULL, "no response to request %s within %d ms", id, timeout_ms);
	return r;
}

static void stop_clean(struct tcd *d)
{
	ck_assert_int_eq(tcd_stop(d), 0);
	tcd_free(d);
}

/* --- timeouts and process groups --------------------------------------------- */

/* A command that ignores SIGTERM outlives the timeout by the kill delay,
 * then dies with its whole group: no survivor. */
START_TEST(timeout_sigterm_ignored_then_killed)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO "}");
	struct tcc *c = tcc_connect(&d);
	uint64_t t0 = tc_now_ms();
	const char *id = send_shell(c, "trap '' TERM; sleep 60 & echo $$ $! > pids; wait", "\"timeout_ms\":500", NULL);
	pid_t sh = wait_pid_file(&d, "pids", 0), sleeper = wait_pid_file(&d, "pids", 1);
	const struct json *r = wait_response(c, id, 5000);
	uint64_t answered = tc_now_ms();
	tc_assert_kind(r, "timeout");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 1);
	ck_assert_msg(answered - t0 >= 450 && answered - t0 < 3000, "a 500 ms timeout answered after %llu ms",
		      (unsigned long long)(answered - t0));

	/* SIGTERM is ignored: both still run a second later... */
	tc_pause_ms(1000);	/* a window in which nothing must happen */
	ck_assert_msg(alive(sh) && alive(sleeper), "the group died before the kill delay");
	/* ...and SIGKILL ends both when the kill delay is over. */
	int64_t left = (int64_t)KILL_DELAY_MS + 1500 - (int64_t)(tc_now_ms() - answered);
	ck_assert_msg(wait_dead(sh, (int)left) >= 0, "the shell survived SIGKILL time");
	ck_assert_msg(wait_dead(sleeper, 500) >= 0, "its background child survived");
	ck_assert_uint_ge(tc_now_ms() - answered, KILL_DELAY_MS - 600);
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* Background jobs die with their command, whether it exits or times out. */
START_TEST(grandchildren_die)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO "}");
	struct tcc *c = tcc_connect(&d);

	uint64_t t0 = tc_now_ms();
	const struct json *r = shell(c, "sleep 300 & echo $!");
	tc_assert_ok(r);
	ck_assert_uint_lt(tc_now_ms() - t0, 4000);
	pid_t bg = (pid_t)atol(tj_str(r, "result.structuredContent.stdout"));
	ck_assert_int_gt(bg, 0);
	ck_assert_msg(wait_dead(bg, 2000) >= 0, "a background job outlived its command");

	const char *id = send_shell(c, "sleep 300 & echo $! > gc.pid; wait", "\"timeout_ms\":500", NULL);
	pid_t gc = wait_pid_file(&d, "gc.pid", 0);
	tc_assert_kind(wait_response(c, id, 5000), "timeout");
	ck_assert_msg(wait_dead(gc, 2000) >= 0, "a background job outlived its timed-out command");
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* --- cancellation ------------------------------------------------------------ */

/* notifications/cancelled: no response, and the command dies. */
START_TEST(cancel_by_notification)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO "}");
	struct tcc *c = tcc_connect(&d);
	const char *id = send_shell(c, "sleep 30 & echo $$ $! > c.pid; wait", NULL, NULL);
	pid_t sh = wait_pid_file(&d, "c.pid", 0), sl = wait_pid_file(&d, "c.pid", 1);
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			       "\"params\":{\"requestId\":%s,\"reason\":\"user pressed stop\"}}", id));
	ck_assert_msg(wait_dead(sh, 2000) >= 0 && wait_dead(sl, 500) >= 0, "the cancelled command still runs");
	ck_assert_ptr_null(tcc_wait_id(c, id, 500));
	tc_assert_ok(tcc_request(c, "ping", NULL));
	ck_assert_ptr_null(tcc_wait_id(c, id, 0));
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* sessions/cancel: the call is answered "cancelled" and the command dies. */
START_TEST(cancel_by_session)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO "}");
	struct tcc *c = tcc_connect(&d);
	const char *id = send_shell(c, "sleep 30 & echo $$ $! > s.pid; wait", NULL, NULL);
	pid_t sh = wait_pid_file(&d, "s.pid", 0), sl = wait_pid_file(&d, "s.pid", 1);
	const struct json *r = tcc_request(c, "sessions/cancel", "{}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.cancelled"), 1);
	r = wait_response(c, id, 3000);
	tc_assert_kind(r, "cancelled");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_msg(wait_dead(sh, 2000) >= 0 && wait_dead(sl, 500) >= 0, "the cancelled command still runs");
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* A client that goes away takes its (unkeyed) commands with it. */
START_TEST(cancel_by_disconnect)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO "}");
	struct tcc *c = tcc_connect(&d);
	send_shell(c, "sleep 30 & echo $$ $! > x.pid; wait", NULL, NULL);
	pid_t sh = wait_pid_file(&d, "x.pid", 0), sl = wait_pid_file(&d, "x.pid", 1);
	tcc_close(c);
	ck_assert_msg(wait_dead(sh, 2000) >= 0 && wait_dead(sl, 500) >= 0,
		      "the command of a client that disconnected still runs");
	/* The daemon is fine. */
	c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* A command that times out or is cancelled keeps the output it had
 * produced: in the error's message and in its data.output. */
START_TEST(output_kept_when_stopped)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO "}");
	struct tcc *c = tcc_connect(&d);
	const char *id = send_shell(c, "echo before; sleep 3", "\"timeout_ms\":500", NULL);
	const struct json *r = wait_response(c, id, 5000);
	tc_assert_kind(r, "timeout");
	ck_assert_str_eq(tj_str(r, "error.message"),
			 "Tool 'shell' exceeded its 500 ms limit. Output before it was stopped:\nbefore\n");
	ck_assert_str_eq(tj_str(r, "error.data.output"), "before\n");

	id = send_shell(c, "echo started >&2; sleep 30", NULL, "\"progressToken\":\"p\"");
	ck_assert_ptr_nonnull(tcc_wait_notification(c, "notifications/progress", 5000));
	tc_assert_ok(tcc_request(c, "sessions/cancel", "{}"));
	r = wait_response(c, id, 5000);
	tc_assert_kind(r, "cancelled");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "Output before it was stopped:\nstarted\n"), "%s",
		      tj_str(r, "error.message"));
	ck_assert_str_eq(tj_str(r, "error.data.output"), "started\n");
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* --- output, environment, progress ------------------------------------------- */

/* Past the cap, the head and the tail are kept, with truncated set. */
START_TEST(output_cap_head_and_tail)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO ",\"tools\":{\"shell\":{\"output_cap\":4096}}}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = shell(c, "printf HEAD; head -c 200000 /dev/zero | tr '\\0' x; printf TAIL; echo oops >&2");
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result.structuredContent.truncated"));
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_ptr_nonnull(out);
	size_t n = strlen(out);
	ck_assert_msg(n < 4096 + 200, "kept %zu bytes with a 4096-byte cap", n);
	ck_assert_uint_gt(n, 2048);
	ck_assert_msg(strncmp(out, "HEADxxx", 7) == 0, "the head was not kept");
	/* stderr shares the one stream: it ends the tail. */
	ck_assert_msg(n >= 12 && strcmp(out + n - 12, "xxxTAILoops\n") == 0, "the tail was not kept");
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stderr"), "");
	ck_assert_int_eq(tj_int(r, "result.structuredContent.exit_code"), 0);

	/* Under the cap: all of it, not truncated. */
	r = shell(c, "head -c 1000 /dev/zero | tr '\\0' y");
	ck_assert(!tj_bool(r, "result.structuredContent.truncated"));
	ck_assert_uint_eq(strlen(tj_str(r, "result.structuredContent.stdout")), 1000);
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* The daemon's secrets stay out of the child's environment; PATH is there. */
START_TEST(environment_scrubbed)
{
	static const char *const env[] = { "TC_SECRET_TOKEN=hunter2-do-not-leak", "LANG=C.UTF-8", NULL };
	struct tcd d;
	struct tcd_opts o = { .config = "{" EXEC_AUTO "}", .env = env };
	tcd_start_opts(&d, &o);
	/* The daemon does have it. */
	char *environ_path = xasprintf("/proc/%d/environ", (int)d.pid);
	size_t len = 0;
	char *denv = tcd_read(&d, environ_path, &len);
	ck_assert_ptr_nonnull(denv);
	ck_assert_ptr_nonnull(memmem(denv, len, "hunter2-do-not-leak", 19));
	free(denv);
	free(environ_path);

	struct tcc *c = tcc_connect(&d);
	const struct json *r = shell(c, "env");
	tc_assert_ok(r);
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_ptr_null(strstr(out, "TC_SECRET_TOKEN"));
	ck_assert_ptr_null(strstr(out, "hunter2"));
	ck_assert_msg(strncmp(out, "PATH=", 5) == 0 || strstr(out, "\nPATH="), "no PATH in: %s", out);
	ck_assert_ptr_nonnull(strstr(out, "LANG=C.UTF-8"));
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* With a progress token, output arrives as notifications/progress while the
 * command runs, with increasing progress, before the response. */
START_TEST(progress_streams_before_response)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO "}");
	struct tcc *c = tcc_connect(&d);
	const char *id = send_shell(c, "for i in 1 2 3; do echo line$i; sleep 0.3; done", NULL,
				    "\"progressToken\":\"tok-1\"");
	struct buf seen = {0};
	int64_t last = -1;
	unsigned notes = 0;
	uint64_t first_at = 0, answered_at = 0;
	const struct json *resp = NULL;
	while (!resp) {
		struct json_doc *doc = tcc_recv(c, 5000);
		ck_assert_msg(doc != NULL, "the call neither progressed nor answered");
		const struct json *m = json_doc_root(doc);
		if (str_eq(tj_str(m, "method"), "notifications/progress")) {
			ck_assert_str_eq(tj_str(m, "params.progressToken"), "tok-1");
			int64_t p = tj_int(m, "params.progress");
			ck_assert_int_gt(p, last);
			last = p;
			ck_assert_str_eq(tj_str(m, "params._meta.toolcalld/stream"), "stdout");
			buf_puts(&seen, tj_str(m, "params.message"));
			if (!notes++)
				first_at = tc_now_ms();
			continue;
		}
		ck_assert_str_eq(tcc_raw(c, tj(m, "id")), id);
		resp = m;
		answered_at = tc_now_ms();
	}
	tc_assert_ok(resp);
	ck_assert_uint_ge(notes, 2);
	buf_putc(&seen, '\0');
	ck_assert_str_eq(buf_head(&seen), "line1\nline2\nline3\n");
	buf_free(&seen);
	ck_assert_msg(answered_at - first_at >= 400, "the first progress came %llu ms before the answer",
		      (unsigned long long)(answered_at - first_at));
	ck_assert_str_eq(tj_str(resp, "result.structuredContent.stdout"), "line1\nline2\nline3\n");

	/* An integer token is echoed as an integer; without one, no progress. */
	id = send_shell(c, "echo a", NULL, "\"progressToken\":7");
	const struct json *n = tcc_wait_notification(c, "notifications/progress", 5000);
	ck_assert_ptr_nonnull(n);
	ck_assert_str_eq(tcc_raw(c, tj(n, "params.progressToken")), "7");
	tc_assert_ok(wait_response(c, id, 5000));
	tc_assert_ok(shell(c, "echo b"));
	ck_assert_uint_eq(tcc_count_notifications(c, "notifications/progress"), 0);
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* Progress for a client that does not read is dropped past
 * limits.max_output_bytes, as events are: the result still holds the
 * output, and admin/stats counts what was left out. */
START_TEST(progress_dropped_for_a_client_not_reading)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO ",\"limits\":{\"max_output_bytes\":65536}}");
	struct tcc *c = tcc_connect(&d);
	int small = 4096;
	setsockopt(tcc_fd(c), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	const char *id = send_shell(c, "i=0; while [ $i -lt 400 ]; do head -c 2000 /dev/zero | tr '\\0' x; echo;"
				       " i=$((i+1)); done", NULL, "\"progressToken\":\"p\"");
	/* Not reading while it runs (about 800 kB of output). */
	ck_assert(tcd_wait_stat(&d, "result.calls", 1, 60000));	/* it ended unread */
	ck_assert(tcd_wait_stat(&d, "result.connections.progressDropped", 1, 1000));
	const struct json *r = wait_response(c, id, 20000);
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.exit_code"), 0);
	ck_assert_uint_eq(strlen(tj_str(r, "result.structuredContent.stdout")), 400 * 2001);
	ck_assert_uint_lt(tcc_count_notifications(c, "notifications/progress"), 400);
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* --- many at once -------------------------------------------------------------- */

/* 200 shells at once: all finish, none is left a zombie, and the daemon
 * holds exactly the fds it held before. */
START_TEST(two_hundred_shells)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO ",\"limits\":{\"max_concurrent\":64,\"session_concurrency\":64}}");
	enum { N = 200, CONNS = 4 };
	struct tcc *c[CONNS];
	for (int k = 0; k < CONNS; k++) {
		c[k] = tcc_connect(&d);
		tc_assert_ok(tcc_request(c[k], "ping", NULL));
	}
	/* Calls first: the sandbox keeps a Landlock ruleset fd per rule set,
	 * and the socket of the spawner it starts once the calls' mount
	 * namespace is made ahead (none under valgrind). */
	tc_assert_ok(shell(c[0], "true"));
	for (int i = 0; i < 50 && !getenv("TC_UNDER_VALGRIND") && !has_spawner(d.pid); i++)
		tc_assert_ok(shell(c[0], "true"));
	/* A round trip first: what prepares the next call of a sandboxed
	 * one runs once its answer is written, before the next request. */
	tc_assert_ok(tcc_request(c[0], "ping", NULL));
	unsigned cg_fds, ns_fds;
	unsigned fds_before = count_fds(d.pid, &cg_fds, &ns_fds);

	const char *ids[N];
	for (int i = 0; i < N; i++)
		ids[i] = send_shell(c[i % CONNS], tcc_fmt(c[i % CONNS], "sleep 0.1; echo n%d", i), NULL, NULL);
	for (int i = 0; i < N; i++) {
		struct tcc *cc = c[i % CONNS];
		const struct json *r = wait_response(cc, ids[i], 30000);
		tc_assert_ok(r);
		ck_assert_int_eq(tj_int(r, "result.structuredContent.exit_code"), 0);
		ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), tcc_fmt(cc, "n%d\n", i));
		/* The call's time covers its command's, read on one clock. */
		ck_assert_int_ge(tj_int(r, "result._meta.toolcalld/durationMs"),
				 tj_int(r, "result.structuredContent.duration_ms"));
	}
	unsigned all, zombies;
	count_children(d.pid, &all, &zombies);
	ck_assert_msg(zombies == 0, "%u zombie children of the daemon", zombies);
	ck_assert_msg(all == 0, "%u children of the daemon still there after every call ended", all);
	tc_assert_ok(tcc_request(c[0], "ping", NULL));
	unsigned fds_after = count_fds(d.pid, &cg_fds, &ns_fds);
	ck_assert_msg(fds_after == fds_before, "the daemon held %u fds before and %u after", fds_before, fds_after);
	/* Mount namespaces made ahead or kept for the next calls: as many as
	 * the calls' timing left, at most 8. */
	ck_assert_msg(ns_fds <= 8, "the daemon held %u mount namespaces after", ns_fds);
	/* Between requests a spawner holds 0-2, its socket and /dev/null:
	 * nothing of the calls it started. */
	pid_t spawner = spawner_of(d.pid);
	if (spawner) {
		unsigned sp_cg, sp_ns, sp_fds = count_fds(spawner, &sp_cg, &sp_ns);
		ck_assert_msg(sp_fds + sp_cg + sp_ns == 5, "the spawner held %u fds after", sp_fds + sp_cg + sp_ns);
	}
	/* At most 8 cgroups kept, with four files each. */
	ck_assert_msg(cg_fds <= 8 * 4, "the daemon held %u fds on cgroups after", cg_fds);
	for (int k = 0; k < CONNS; k++)
		tcc_close(c[k]);
	stop_clean(&d);
}
END_TEST

/* --- argv and fds ------------------------------------------------------------ */

/* A command tool passes arguments as argv elements: no shell sees them. */
START_TEST(command_args_literal)
{
	struct tcd d;
	struct tcd_opts o = { .config = "{}" };
	tcd_prepare(&d, &o);
	tcd_write_tool(&d, "echoargs.json",
		       "{\"name\":\"echoargs\",\"kind\":\"command\",\"description\":\"Prints its arguments\","
		       "\"argv\":[\"printf\",\"[%s]\\\\n\",\"{{a}}\",\"{{b}}\",\"--{{c}}\"],\"side_effects\":\"read\","
		       "\"input_schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
		       "\"b\":{\"type\":\"string\"},\"c\":{\"type\":\"string\"}},\"required\":[\"a\",\"b\",\"c\"]}}");
	tcd_write_tool(&d, "lsfd.json",
		       "{\"name\":\"lsfd\",\"kind\":\"command\",\"description\":\"Lists its fds\","
		       "\"argv\":[\"ls\",\"/proc/self/fd\"],\"side_effects\":\"read\"}");
	tcd_spawn(&d, &o);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS), 0);
	char *sentinel = xasprintf("%s/sentinel", d.dir);
	ck_assert(mkdir(sentinel, 0755) == 0);

	struct tcc *c = tcc_connect(&d);
	const char *a = tcc_fmt(c, "x; rm -rf %s", sentinel);
	const char *b = "$(touch pwned) `touch pwned2` | tee pwned3 > pwned4";
	const char *cc = "'\"; touch pwned5 #";
	char *qa = tj_quote(a), *qb = tj_quote(b), *qc = tj_quote(cc);
	const struct json *r = tcc_call(c, "echoargs", tcc_fmt(c, "{\"a\":%s,\"b\":%s,\"c\":%s}", qa, qb, qc));
	free(qa);
	free(qb);
	free(qc);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), tcc_fmt(c, "[%s]\n[%s]\n[--%s]\n", a, b, cc));
	struct stat st;
	ck_assert_msg(stat(sentinel, &st) == 0, "an argument was run by a shell: the sentinel is gone");
	for (int i = 0; i <= 5; i++) {
		const char *name = i ? tcc_fmt(c, "pwned%d", i) : "pwned";
		char *p = tcd_ws_path(&d, name);
		ck_assert_msg(access(p, F_OK) < 0, "an argument was run by a shell: %s exists", name);
		free(p);
		p = xasprintf("%s/%s", d.dir, name);
		ck_assert_msg(access(p, F_OK) < 0, "an argument was run by a shell: %s exists", p);
		free(p);
	}

	/* Nothing but 0, 1 and 2 is inherited (ls adds the one it opens). */
	r = tcc_call(c, "lsfd", "{}");
	tc_assert_ok(r);
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(str_has_prefix(out, "0\n1\n2\n"), "fds: %s", out);
	int n = 0;
	for (const char *p = out; *p; p++)
		n += *p == '\n';
	ck_assert_msg(n == 4, "the command saw fds it should not have:\n%s", out);
	free(sentinel);
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

/* A root daemon empties its own capability bounding set at start (only
 * exec reads it) and keeps its effective set; its children, a sandboxed
 * shell and a command tool whose profile is off (started by the daemon
 * itself, which then drops nothing more), still hold no capability and
 * have their securebits locked (NOROOT, NO_SETUID_FIXUP, KEEP_CAPS,
 * NO_CAP_AMBIENT_RAISE and their locks: 0xef). */
START_TEST(bounding_set_emptied_once)
{
	if (geteuid() != 0)
		TC_SKIP("bounding_set_emptied_once: the daemon empties its bounding set only with CAP_SETPCAP (root)");
	struct tcd d;
	struct tcd_opts o = { .config = "{" EXEC_AUTO "}" };
	tcd_prepare(&d, &o);
	tcd_write_tool(&d, "offsh.json",
		       "{\"name\":\"offsh\",\"kind\":\"command\",\"side_effects\":\"read\","
		       "\"argv\":[\"/bin/sh\",\"-c\",\"{{c}}\"],\"sandbox\":{\"profile\":\"off\"},"
		       "\"input_schema\":{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"string\"}},"
		       "\"required\":[\"c\"]}}");
	tcd_spawn(&d, &o);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS), 0);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)d.pid);
	char *status = tcd_read(&d, path, NULL);
	ck_assert_ptr_nonnull(status);
	ck_assert_msg(strstr(status, "CapBnd:\t0000000000000000"), "%s", status);
	ck_assert_msg(!strstr(status, "CapEff:\t0000000000000000"), "%s", status);
	free(status);

	/* perl's syscall() asks prctl(PR_GET_SECUREBITS) where it can. */
	bool secbits = false;
#if defined(__x86_64__)
	secbits = access("/usr/bin/perl", X_OK) == 0;
#endif
	const char *cmd = secbits ? "grep ^Cap /proc/self/status; perl -e 'print \\\"secbits \\\", syscall(157, 27, 0, 0, 0, 0)'"
				  : "grep ^Cap /proc/self/status";
	struct tcc *c = tcc_connect(&d);
	for (int i = 0; i < 2; i++) {
		const struct json *r = i ? tcc_call(c, "offsh", tcc_fmt(c, "{\"c\":\"%s\"}", cmd))
					  : tcc_call(c, "shell", tcc_fmt(c, "{\"command\":\"%s\"}", cmd));
		tc_assert_ok(r);
		const char *out = tj_str(r, "result.structuredContent.stdout");
		ck_assert_ptr_nonnull(out);
		static const char *const sets[] = { "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000",
						    "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000",
						    "CapAmb:\t0000000000000000" };
		for (size_t k = 0; k < sizeof(sets) / sizeof(*sets); k++)
			ck_assert_msg(strstr(out, sets[k]), "%s: no %s in %s", i ? "offsh" : "shell", sets[k], out);
		if (secbits)
			ck_assert_msg(strstr(out, "secbits 239"), "%s: %s", i ? "offsh" : "shell", out);
	}
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

START_TEST(shell_sees_only_stdio)
{
	struct tcd d;
	tcd_start(&d, "{" EXEC_AUTO ",\"audit_log\":\"@DIR@/audit.log\"}");
	struct tcc *c = tcc_connect(&d);
	/* Busy daemon: other connections and a call in flight hold fds too. */
	struct tcc *busy = tcc_connect(&d);
	const char *bid = send_shell(busy, "sleep 0.5", NULL, NULL);
	const struct json *r = shell(c, "ls /proc/self/fd");
	tc_assert_ok(r);
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(str_has_prefix(out, "0\n1\n2\n"), "fds: %s", out);
	int n = 0;
	for (const char *p = out; *p; p++)
		n += *p == '\n';
	ck_assert_msg(n == 4, "the shell saw fds it should not have:\n%s", out);
	tc_assert_ok(wait_response(busy, bid, 5000));
	tcc_close(busy);
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

START_TEST(fd_limit_raised_commands_keep_theirs)
{
	TC_SKIP_UNDER_VALGRIND("valgrind keeps the limit on open files to itself");
	/* Started with a soft limit on open files below the hard one, as
	 * systemd starts services (1024 of 524288): the daemon serves more
	 * connections than the soft limit, and commands still start with
	 * it (select() breaks past 1024). */
	enum { SOFT = 200, CONNS = 300 };
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rlim_t hard = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 4096 ? 4096 : rl.rlim_max;
	if (hard < 2 * CONNS || rl.rlim_cur < CONNS + 64) {
		TC_SKIP("RLIMIT_NOFILE (%llu/%llu) too low for %d connections",
			(unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, (int)CONNS);
	}
	char script[128];
	snprintf(script, sizeof(script), "ulimit -Sn %d && ulimit -Hn %llu && exec \"$@\"", (int)SOFT,
		 (unsigned long long)hard);
	const char *const wrapper[] = { "sh", "-c", script, "sh", NULL };
	struct tcd d;
	struct tcd_opts o = { .config = "{" EXEC_AUTO "}", .wrapper = wrapper };
	tcd_start_opts(&d, &o);

	struct tcc **conns = calloc(CONNS, sizeof(*conns));
	ck_assert_ptr_nonnull(conns);
	for (int i = 0; i < CONNS; i++) {
		conns[i] = tcc_connect(&d);
		tc_assert_ok(tcc_request_t(conns[i], "ping", NULL, 5000));
	}
	const struct json *r = shell(conns[0], "ulimit -Sn; ulimit -Hn; ls /proc/self/fd | wc -l");
	tc_assert_ok(r);
	char want[64];
	/* The sandbox's nofile limit (1024) caps the hard limit. */
	snprintf(want, sizeof(want), "%d\n%llu\n4\n", (int)SOFT, (unsigned long long)(hard > 1024 ? 1024 : hard));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), want);
	for (int i = 0; i < CONNS; i++)
		tcc_close(conns[i]);
	free(conns);
	stop_clean(&d);
}
END_TEST

static Suite *children_suite(void)
{
	Suite *s = suite_create("integ_children");
	TCase *tc = tcase_create("stopping");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, timeout_sigterm_ignored_then_killed);
	tcase_add_test(tc, grandchildren_die);
	tcase_add_test(tc, cancel_by_notification);
	tcase_add_test(tc, cancel_by_session);
	tcase_add_test(tc, cancel_by_disconnect);
	tcase_add_test(tc, output_kept_when_stopped);
	suite_add_tcase(s, tc);

	tc = tcase_create("running");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, output_cap_head_and_tail);
	tcase_add_test(tc, environment_scrubbed);
	tcase_add_test(tc, progress_streams_before_response);
	tcase_add_test(tc, progress_dropped_for_a_client_not_reading);
	tcase_add_test(tc, two_hundred_shells);
	tcase_add_test(tc, command_args_literal);
	tcase_add_test(tc, shell_sees_only_stdio);
	tcase_add_test(tc, bounding_set_emptied_once);
	tcase_add_test(tc, fd_limit_raised_commands_keep_theirs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(children_suite());
}
