/* SPDX-License-Identifier: MIT */
/*
 * The daemon's life from the outside: command line, --check-config and its
 * FILE:LINE:COL messages, where the socket goes and with which mode, stale
 * and live sockets at start, graceful stop on SIGTERM (calls within the
 * grace period answered, the rest `cancelled` with data.restart, the
 * socket removed, exit 0),
 * bounded memory for a client that stops reading, hot reload (admin/reload,
 * invalid tool files, inotify) with list_changed notifications, and
 * admin/stats (CONTRACT §2, §3, §8, §9).
 */
#include <check.h>
#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define CFG_SHELL_AUTO "{\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}}}"

/* A command tool file: echoes its msg argument. */
#define ECHO_TOOL(name, desc)                                                                           \
	"{ \"name\": \"" name "\", \"kind\": \"command\", \"description\": \"" desc "\",\n"             \
	"  \"argv\": [\"echo\", \"{{msg}}\"], \"side_effects\": \"none\", \"idempotent\": true,\n"     \
	"  \"input_schema\": { \"type\": \"object\", \"properties\": { \"msg\": { \"type\": \"string\" } },\n" \
	"                    \"required\": [\"msg\"], \"additionalProperties\": false } }\n"

static bool path_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* True when the JSON array at path of v holds the string s. */
static bool array_has(const struct json *v, const char *path, const char *s)
{
	const struct json *a = tj(v, path);
	for (size_t i = 0; a && a->type == JSON_ARRAY && i < a->u.arr.n; i++)
		if (str_eq(json_str(a->u.arr.items[i]), s))
			return true;
	return false;
}

/* True when tools/list on c names the tool. */
static bool listed(struct tcc *c, const char *name)
{
	const struct json *r = tcc_request(c, "tools/list", NULL);
	tc_assert_ok(r);
	for (long i = 0; i < tj_len(r, "result.tools"); i++)
		if (str_eq(tj_str(r, tcc_fmt(c, "result.tools.%ld.name", i)), name))
			return true;
	return false;
}

/* Waits up to ms for name to be listed (want true) or not (want false). */
static bool wait_listed(struct tcc *c, const char *name, bool want, int ms)
{
	return tc_wait_until(listed(c, name) == want, ms);
}

/* What a run of toolcalld to its end wrote. */
struct run {
	char *out, *err;
};

/* Lets go of what the last run wrote. */
static void run_done(struct run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* Runs argv in cwd to its end and asserts that it exits with want; r
 * keeps what it wrote until the next run or run_done. */
static void run_at(struct run *r, const char *const argv[], const char *cwd, int want, int line)
{
	run_done(r);
	int status = tc_run(argv, NULL, cwd, &r->out, &r->err, 10000);
	ck_assert_msg(status == want, "line %d: toolcalld %s exited %d, not %d; stderr: %s", line, argv[1], status,
		      want, r->err);
}
/* Runs the daemon with the arguments that follow want. */
#define run_daemon(r, cwd, want, ...) \
	run_at((r), (const char *const[]){ tc_daemon_path(), __VA_ARGS__, NULL }, (cwd), (want), __LINE__)
/* Runs --check-config on d's config. */
#define check_config_run(r, d, want) run_daemon((r), (d)->dir, (want), "--check-config", "--config", (d)->config)

/* Whether the last run's stderr names d's config with at after it (e.g.
 * ":3:3: bogus"). */
static bool err_names_config(const struct run *r, const struct tcd *d, const char *at)
{
	char *want = xasprintf("%s%s", d->config, at);
	bool found = strstr(r->err, want) != NULL;
	free(want);
	return found;
}

/* Replaces d's config with text. */
static void put_config(struct tcd *d, const char *text)
{
	tc_write_file_atomic(d->config, text, strlen(text));
}

/* Spawns d's prepared daemon as o says and waits for its socket at sock. */
static void spawn_at(struct tcd *d, const struct tcd_opts *o, const char *sock)
{
	tcd_spawn(d, o);
	ck_assert_msg(tcd_wait_socket(d, sock, TCD_START_TIMEOUT_MS) == 0, "no socket at %s", sock);
}

/* The answer to request id sent on c; fails the case, naming what was
 * asked, when none comes in time. */
static const struct json *answer_to(struct tcc *c, int64_t id, const char *what)
{
	const struct json *r = tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)id), TCC_TIMEOUT_MS);
	ck_assert_msg(r, "%s got no answer", what);
	return r;
}

/* Starts a daemon on the defaults and connects a client that initialized,
 * so that it hears notifications/tools/list_changed. */
static struct tcc *start_listening(struct tcd *d)
{
	tcd_start(d, NULL);
	struct tcc *c = tcc_connect(d);
	tcc_initialize(c, NULL);
	return c;
}

/* Asserts that c hears list_changed within 3 s of what happened. */
static void assert_list_changed(struct tcc *c, const char *after)
{
	ck_assert_msg(tcc_wait_notification(c, "notifications/tools/list_changed", 3000),
		      "no list_changed within 3 s of %s", after);
}

/* Removes the tool file tools_dir/file. */
static void remove_tool(struct tcd *d, const char *file)
{
	char *p = xasprintf("%s/%s", d->tools_dir, file);
	ck_assert_msg(unlink(p) == 0, "unlink %s", p);
	free(p);
}

/* --- the command line ---------------------------------------------------- */

START_TEST(flags_help_version_unknown)
{
	struct run r = {};
	run_daemon(&r, NULL, 0, "--help");
	ck_assert_msg(strstr(r.out, "Usage: toolcalld") && strstr(r.out, "--check-config") && strstr(r.out, "--socket"),
		      "help: %s", r.out);
	run_daemon(&r, NULL, 0, "-h");
	ck_assert_msg(strstr(r.out, "Usage: toolcalld"), "-h: %s", r.out);
	run_daemon(&r, NULL, 0, "--version");
	ck_assert_msg(str_has_prefix(r.out, "toolcalld ") && strchr(r.out, '.') && r.out[strlen(r.out) - 1] == '\n',
		      "version: %s", r.out);

	/* an unknown flag: exit 2, usage on stderr, nothing started */
	run_daemon(&r, NULL, 2, "--frobnicate");
	ck_assert_msg(strstr(r.err, "Usage") || strstr(r.err, "usage"), "stderr: %s", r.err);
	ck_assert_str_eq(r.out, "");
	run_daemon(&r, NULL, 2, "stray-argument");
	ck_assert_msg(strstr(r.err, "stray-argument"), "stderr: %s", r.err);
	run_daemon(&r, NULL, 2, "--config");
	run_done(&r);
}
END_TEST

START_TEST(check_config)
{
	struct tcd d;
	struct tcd_opts o = { .config = "{ // comments are allowed\n  \"grace_ms\": 100 }" };
	tcd_prepare(&d, &o);
	tcd_write_tool(&d, "echo.json", ECHO_TOOL("echo", "Echo a message"));
	struct run r = {};
	check_config_run(&r, &d, 0);
	ck_assert_msg(strstr(r.out, "OK") && strstr(r.out, "17 tools"), "stdout: %s", r.out);
	ck_assert_msg(!path_exists(d.sock), "--check-config created the socket");

	/* a value of the wrong type: FILE:LINE:COL: key: message, exit 1 */
	put_config(&d, "{\n  \"limits\": {\n    \"max_json_depth\": \"x\"\n  }\n}\n");
	check_config_run(&r, &d, 1);
	ck_assert_msg(err_names_config(&r, &d, ":3:23: limits.max_json_depth:"), "stderr: %s", r.err);

	/* an unknown key */
	put_config(&d, "{\n  \"grace_ms\": 10,\n  \"bogus\": 1\n}\n");
	check_config_run(&r, &d, 1);
	ck_assert_msg(err_names_config(&r, &d, ":3:3: bogus"), "stderr: %s", r.err);

	/* a syntax error: the line, and a column at the bad token */
	put_config(&d, "{\n  \"grace_ms\": 10,\n  oops\n}\n");
	check_config_run(&r, &d, 1);
	ck_assert_msg(err_names_config(&r, &d, ":3:3: ") || err_names_config(&r, &d, ":3:4: "), "stderr: %s", r.err);

	/* a tools_dir that cannot be opened: named at its line in the config */
	put_config(&d, "{\n  \"tools_dir\": \"missing.d\"\n}\n");
	check_config_run(&r, &d, 1);
	ck_assert_msg(err_names_config(&r, &d, ":2:3: tools_dir: cannot open") && strstr(r.err, "missing.d"),
		      "stderr: %s", r.err);

	/* a config that does not exist */
	run_daemon(&r, d.dir, 1, "--check-config", "--config", "/nonexistent/toolcalld.json");
	ck_assert_msg(strstr(r.err, "/nonexistent/toolcalld.json"), "stderr: %s", r.err);

	/* a good config with a bad tool file: the tool file is named with
	 * line and column */
	put_config(&d, "{ \"tools_dir\": \"tools.d\" }\n");
	tcd_write_tool(&d, "broken.json",
		       "{ \"name\": \"broken\", \"kind\": \"command\", \"description\": \"x\",\n"
		       "  \"argv\": 5, \"side_effects\": \"none\",\n"
		       "  \"input_schema\": { \"type\": \"object\" } }\n");
	check_config_run(&r, &d, 1);
	ck_assert_msg(strstr(r.err, "broken.json:2:11: argv"), "stderr: %s", r.err);
	/* a tool file that is not JSON */
	tcd_write_tool(&d, "broken.json", "{ \"name\": \"broken\",\n  \"kind\": \"command\" ]\n");
	check_config_run(&r, &d, 1);
	ck_assert_msg(strstr(r.err, "broken.json:2:"), "stderr: %s", r.err);
	/* a schema outside the supported subset */
	tcd_write_tool(&d, "broken.json",
		       "{ \"name\": \"broken\", \"kind\": \"command\", \"description\": \"x\",\n"
		       "  \"argv\": [\"true\"], \"side_effects\": \"none\",\n"
		       "  \"input_schema\": { \"type\": \"object\", \"patternProperties\": {} } }\n");
	check_config_run(&r, &d, 1);
	ck_assert_msg(strstr(r.err, "broken.json:") && strstr(r.err, "patternProperties"), "stderr: %s", r.err);
	/* a duplicate name */
	tcd_write_tool(&d, "broken.json", ECHO_TOOL("echo", "again"));
	check_config_run(&r, &d, 1);
	ck_assert_msg(strstr(r.err, "echo") && strstr(r.err, "duplicate"), "stderr: %s", r.err);
	/* named at the "name" of the file read second (by name: echo.json) */
	ck_assert_msg(strstr(r.err, "echo.json:1:"), "stderr: %s", r.err);
	/* and the daemon refuses to start on it */
	run_daemon(&r, d.dir, 1, "--config", d.config);
	ck_assert_msg(strstr(r.err, "duplicate"), "stderr: %s", r.err);
	ck_assert_msg(!path_exists(d.sock), "the socket was left behind");
	run_done(&r);
	tcd_free(&d);
}
END_TEST

/* --- the socket ---------------------------------------------------------- */

/* With no flags and no config, the socket is $TOOLCALLD_SOCKET, else
 * $XDG_RUNTIME_DIR/toolcalld.sock, and the workspace is the cwd. */
START_TEST(default_socket_paths)
{
	struct tcd d;
	tcd_prepare(&d, NULL);
	char *env_sock = xasprintf("%s/env.sock", d.dir);
	char *xdg = xasprintf("%s/xdg", d.dir);
	char *xdg_sock = xasprintf("%s/toolcalld.sock", xdg);
	ck_assert(mkdir(xdg, 0700) == 0);
	char *set_sock = xasprintf("TOOLCALLD_SOCKET=%s", env_sock);
	char *set_xdg = xasprintf("XDG_RUNTIME_DIR=%s", xdg);

	/* $TOOLCALLD_SOCKET wins over $XDG_RUNTIME_DIR */
	const char *env1[] = { set_sock, set_xdg, NULL };
	struct tcd_opts o = { .no_config_flag = true, .env = env1, .cwd = d.ws, .no_wait = true };
	spawn_at(&d, &o, env_sock);
	ck_assert(!path_exists(xdg_sock));
	struct tcc *c = tcc_connect_path(env_sock);
	const struct json *r = tcc_initialize(c, NULL);
	char *ws = realpath(d.ws, NULL);
	ck_assert_pstr_eq(tj_str(r, "workspace"), ws);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	ck_assert_msg(!path_exists(env_sock), "socket not removed at exit");

	/* $XDG_RUNTIME_DIR/toolcalld.sock */
	const char *env2[] = { set_xdg, NULL };
	o.env = env2;
	spawn_at(&d, &o, xdg_sock);
	c = tcc_connect_path(xdg_sock);
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);

	/* --socket wins over the environment and the config */
	const char *env3[] = { set_sock, NULL };
	char *flag_sock = xasprintf("%s/flag.sock", d.dir);
	const char *args[] = { "--socket", flag_sock, NULL };
	struct tcd_opts o3 = { .env = env3, .args = args, .no_wait = true };
	spawn_at(&d, &o3, flag_sock);
	ck_assert(!path_exists(env_sock));
	ck_assert(!path_exists(d.sock));
	ck_assert_int_eq(tcd_stop(&d), 0);

	free(flag_sock);
	free(ws);
	free(set_sock);
	free(set_xdg);
	free(env_sock);
	free(xdg_sock);
	free(xdg);
	tcd_free(&d);
}
END_TEST

START_TEST(socket_mode)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct stat st;
	ck_assert(lstat(d.sock, &st) == 0);
	ck_assert_msg(S_ISSOCK(st.st_mode), "not a socket");
	ck_assert_msg((st.st_mode & 07777) == 0660, "mode %o", st.st_mode & 07777);
	tcd_finish(&d);

	tcd_start(&d, "{\"socket_mode\":\"0600\"}");
	ck_assert(lstat(d.sock, &st) == 0);
	ck_assert_msg((st.st_mode & 07777) == 0600, "mode %o", st.st_mode & 07777);
	tcd_finish(&d);
}
END_TEST

START_TEST(stale_and_live_sockets)
{
	struct tcd d;
	tcd_prepare(&d, NULL);
	/* a socket file nobody listens on */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, d.sock);
	ck_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	ck_assert(path_exists(d.sock));
	tcd_spawn(&d, NULL);
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "the stale socket was not replaced");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "ping", NULL));

	/* a second daemon on the same live socket refuses to start */
	struct run run = {};
	uint64_t t0 = tc_now_ms();
	run_daemon(&run, d.dir, 1, "--config", d.config);
	ck_assert_uint_lt(tc_now_ms() - t0, tc_wait_scaled(5000));
	ck_assert_msg(strstr(run.err, d.sock) && strstr(run.err, "already"), "stderr: %s", run.err);
	/* and did not disturb the first */
	ck_assert(path_exists(d.sock));
	tc_assert_ok(tcc_request(c, "ping", NULL));
	struct tcc *c2 = tcc_connect(&d);
	tc_assert_ok(tcc_request(c2, "ping", NULL));
	tcc_close(c2);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);

	/* a regular file in the socket's place is not removed */
	tc_write_file_atomic(d.sock, "data", 4);
	run_daemon(&run, d.dir, 1, "--config", d.config);
	ck_assert_msg(strstr(run.err, d.sock), "stderr: %s", run.err);
	char *got = tcd_read(&d, d.sock, NULL);
	ck_assert_pstr_eq(got, "data");
	free(got);
	run_done(&run);
	tcd_free(&d);
}
END_TEST

/* --- stopping ------------------------------------------------------------- */

START_TEST(sigterm_lets_calls_finish)
{
	struct tcd d;
	tcd_start(&d, CFG_SHELL_AUTO);
	struct tcc *c = tcc_connect(&d);
	int64_t id = tcc_send_request(c, "tools/call",
				      "{\"name\":\"shell\",\"arguments\":{\"command\":\"sleep 1; echo done\"}}");
	/* an idle second client */
	struct tcc *idle = tcc_connect(&d);
	tc_assert_ok(tcc_request(idle, "ping", NULL));
	ck_assert(tcd_wait_stat(&d, "result.running", 1, 5000));
	uint64_t t0 = tc_now_ms();
	tcd_kill(&d, SIGTERM);
	/* it stops accepting and removes the socket at once */
	tc_wait_until(!path_exists(d.sock), 2000);
	ck_assert_msg(!path_exists(d.sock), "socket still there during the grace period");
	/* the call in flight is answered, not cancelled */
	const struct json *r = answer_to(c, id, "the call in flight");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.stdout"), "done\n");
	ck_assert_int_eq(tcd_wait_exit(&d, TCD_STOP_TIMEOUT_MS), 0);
	/* it waited for the call, not for the full grace period */
	ck_assert_uint_lt(tc_now_ms() - t0, 5000);
	ck_assert(!path_exists(d.sock));
	tcc_close(idle);
	tcc_close(c);
	tcd_free(&d);
}
END_TEST

START_TEST(sigterm_cancels_after_grace)
{
	struct tcd d;
	tcd_start(&d, "{\"grace_ms\":200,\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}}}");
	struct tcc *c = tcc_connect(&d);
	int64_t id = tcc_send_request(c, "tools/call",
				      "{\"name\":\"shell\",\"arguments\":{\"command\":\"echo $$ > pid; echo started; "
				      "exec sleep 30\"}}");
	/* wait until the shell runs */
	char *pidfile = tcd_ws_path(&d, "pid");
	uint64_t deadline = tc_now_ms() + 5000;
	char *pidtext = NULL;
	while (!(pidtext = tcd_read(&d, pidfile, NULL)) || !*pidtext) {
		free(pidtext);
		pidtext = NULL;
		ck_assert_msg(tc_now_ms() < deadline, "the shell did not start");
		tc_pause_ms(TC_POLL_MS);
	}
	pid_t child = (pid_t)atoi(pidtext);
	free(pidtext);
	ck_assert_int_gt(child, 1);

	uint64_t t0 = tc_now_ms();
	tcd_kill(&d, SIGTERM);
	const struct json *r = answer_to(c, id, "the long call");
	/* Cancelled by the stop (CONTRACT §3, §9), not retryable as every
	 * cancelled call; data.restart tells it from the caller's own
	 * cancel: it may be sent again to the next daemon. */
	tc_assert_kind(r, "cancelled");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_pstr_eq(tj_str(r, "error.data.tool"), "shell");
	ck_assert(tj_has(r, "error.data.retryable") && !tj_bool(r, "error.data.retryable"));
	ck_assert(tj_bool(r, "error.data.restart"));
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 1);
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "toolcalld is stopping"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "retry"));
	/* The output it had produced is kept, beside the mark of the stop. */
	ck_assert_pstr_eq(tj_str(r, "error.data.output"), "started\n");
	ck_assert_int_eq(tcd_wait_exit(&d, 5000), 0);
	ck_assert_uint_lt(tc_now_ms() - t0, 4000);
	ck_assert(!path_exists(d.sock));
	/* the command was stopped too */
	tc_wait_until(kill(child, 0) < 0, 3000);
	ck_assert_msg(kill(child, 0) < 0 && errno == ESRCH, "the command (pid %d) still runs", (int)child);
	free(pidfile);
	tcc_close(c);
	tcd_free(&d);
}
END_TEST

/* --- a client that stops reading ------------------------------------------ */

/* Bytes sent on c that the daemon has not read yet (an AF_UNIX socket's
 * send queue holds them until the peer reads them, or closes). */
static int unread_by_peer(struct tcc *c)
{
	int n = 0;
	ck_assert_int_eq(ioctl(tcc_fd(c), SIOCOUTQ, &n), 0);
	return n;
}

/* Many clients each holding an unfinished line (within the line limit)
 * could together take all memory: beyond limits.max_client_memory the
 * client holding the most is told why and disconnected, until the rest
 * fit; everyone else is served as before. */
START_TEST(client_memory_bounded)
{
	struct tcd d;
	/* The bound is at least what two connections may hold: 4 x 256 KiB
	 * of input and 4 x 4 KiB of output here, so 1 MiB is taken as is. */
	tcd_start(&d, "{\"limits\":{\"max_message_bytes\":262144,\"max_output_bytes\":4096,"
		      "\"max_client_memory\":1048576}}");
	enum { N = 12 };
	struct tcc *c[N];
	char *partial = xmalloc(200 * 1024);
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"pad\":\"";
	memcpy(partial, head, strlen(head));
	memset(partial + strlen(head), 'x', 200 * 1024 - strlen(head));
	for (int i = 0; i < N; i++) {
		c[i] = tcc_connect(&d);
		ck_assert_int_eq(tcc_send_raw(c[i], partial, 200 * 1024), 0);
		/* The daemon takes them in one by one (or drops one). */
		ck_assert_msg(tc_wait_until(unread_by_peer(c[i]) == 0, tc_wait_scaled(10000)),
			      "the daemon did not read connection %d", i);
	}
	free(partial);
	/* Every connection holds 256 KiB of buffer: 3 MiB in all. Those
	 * disconnected got one error line, then the end; the others got
	 * nothing. The daemon has read everything, so what it evicts is
	 * decided, and counted, by the time it answers the next request. */
	struct tcc *other = tcc_connect(&d);
	const struct json *r = tcc_request(other, "admin/stats", NULL);
	tc_assert_ok(r);
	int evicted = (int)tj_int(r, "result.connections.evicted");
	ck_assert_msg(tc_wait_until(({
		int told = 0;
		for (int i = 0; i < N; i++)
			told += !tcc_quiet(c[i], 0);
		told == evicted;
	}), tc_wait_scaled(5000)), "%d connections evicted, not all were told", evicted);
	for (int i = 0; i < N; i++) {
		if (tcc_quiet(c[i], 0))
			continue;
		size_t n;
		const char *line = tcc_recv_line(c[i], 2000, &n);
		ck_assert_ptr_nonnull(line);
		ck_assert_msg(strstr(line, "limits.max_client_memory") && strstr(line, "\"id\":null"), "%s", line);
		ck_assert_ptr_null(tcc_recv_line(c[i], 2000, NULL));
		ck_assert(tcc_eof(c[i]));
	}
	ck_assert_msg(evicted >= N - 4 && evicted < N, "%d of %d connections evicted", evicted, N);
	/* The others finish their line and are answered. */
	for (int i = 0; i < N; i++) {
		if (tcc_eof(c[i]))
			continue;
		ck_assert_int_eq(tcc_send_raw(c[i], "\"}}\n", 4), 0);
		const struct json *answer = tcc_wait_id(c[i], "1", 5000);
		ck_assert_ptr_nonnull(answer);
		tc_assert_ok(answer);
	}
	r = tcc_request(other, "admin/stats", NULL);
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.connections.evicted"), evicted);
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "disconnecting the one holding the most"), "log: %s", log);
	free(log);
	tcc_close(other);
	for (int i = 0; i < N; i++)
		tcc_close(c[i]);
	tcd_finish(&d);
}
END_TEST

#if defined(__SANITIZE_ADDRESS__)
#define TC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_ASAN 1
#endif
#endif

#ifndef TC_ASAN
/* After a crowd of connections has come and gone, the memory they used is
 * given back within seconds (malloc alone keeps freed pages for reuse). */
START_TEST(memory_given_back_after_a_crowd)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"per_uid_connections\":4096}}");
	long rss0 = tcd_rss_kb(&d);
	enum { N = 3000 };
	struct tcc **c = xcalloc(N, sizeof(*c));
	for (int i = 0; i < N; i++) {
		c[i] = tcc_connect(&d);
		tcc_send(c[i], "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
			       "\"params\":{\"name\":\"list_dir\",\"arguments\":{}}}");
	}
	for (int i = 0; i < N; i++)
		ck_assert_ptr_nonnull(tcc_wait_id(c[i], "1", 10000));
	long rss_full = tcd_rss_kb(&d);
	ck_assert_msg(rss_full > rss0 + 2048, "RSS %ld KiB with %d connections, %ld KiB before", rss_full, N, rss0);
	for (int i = 0; i < N; i++)
		tcc_close(c[i]);
	free(c);
	long rss = rss_full;
	tc_wait_until((rss = tcd_rss_kb(&d)) <= rss0 + (rss_full - rss0) / 2, 10000);
	ck_assert_msg(rss <= rss0 + (rss_full - rss0) / 2, "RSS %ld KiB 10 s after %d connections went "
		      "(%ld KiB with them, %ld KiB before)", rss, N, rss_full, rss0);
	tcd_finish(&d);
}
END_TEST
#endif

START_TEST(slow_reader_bounded)
{
	struct tcd d;
	struct tcd_opts o = { .config = "{}" };
	/* Under AddressSanitizer freed memory sits in a quarantine of 256 MB
	 * by default; keep it small so RSS measures what is live. */
	const char *asan = getenv("ASAN_OPTIONS");
	char *asan_env = xasprintf("ASAN_OPTIONS=%s%squarantine_size_mb=16", asan ? asan : "", asan ? ":" : "");
	const char *env[] = { asan_env, NULL };
	o.env = env;
	tcd_start_opts(&d, &o);
	char *big = xmalloc(65536);
	for (size_t i = 0; i < 65536; i++)
		big[i] = (char)('a' + i % 26);
	free(tcd_write_ws(&d, "big.txt", big, 65536, 0));
	free(big);
	long rss0 = tcd_rss_kb(&d);
	ck_assert_int_gt(rss0, 0);

	struct tcc *slow = tcc_connect(&d);
	/* a small receive buffer so the daemon's writes block early */
	int small = 4096;
	setsockopt(tcc_fd(slow), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	struct buf reqs = {};
	for (int i = 0; i < 2000; i++)
		buf_printf(&reqs, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
				  "\"read_file\",\"arguments\":{\"path\":\"big.txt\"}}}\n", i);
	/* Send what the socket takes, never reading; stop when it takes no
	 * more for a while (the daemon stopped reading us) or all is sent. */
	size_t sent = 0;
	uint64_t stalled_since = 0, deadline = tc_now_ms() + 10000;
	long peak = rss0;
	while (sent < buf_size(&reqs) && tc_now_ms() < deadline) {
		ssize_t k = tcc_send_nb(slow, buf_head(&reqs) + sent, buf_size(&reqs) - sent);
		ck_assert_int_ge(k, 0);
		if (k > 0) {
			sent += (size_t)k;
			stalled_since = 0;
		} else {
			if (!stalled_since)
				stalled_since = tc_now_ms();
			if (tc_now_ms() - stalled_since > 1500)
				break;
			tc_pause_ms(20);	/* the stall is measured: 1.5 s of no progress */
		}
		long rss = tcd_rss_kb(&d);
		if (rss > peak)
			peak = rss;
	}
	/* let the daemon do what it will with what it has */
	for (int i = 0; i < 20; i++) {
		tc_pause_ms(50);	/* a window: the peak is sampled across it */
		long rss = tcd_rss_kb(&d);
		if (rss > peak)
			peak = rss;
	}
	ck_assert_msg(peak < 200 * 1024, "RSS grew to %ld KiB (from %ld KiB) for a client that does not read",
		      peak, rss0);

	/* other clients are served meanwhile: nobody reads the slow one
	 * until they are, so a daemon stuck on it would never answer them */
	struct tcc *other = tcc_connect(&d);
	tc_assert_ok(tcc_request(other, "ping", NULL));
	const struct json *r = tcc_call(other, "read_file", "{\"path\":\"big.txt\",\"limit\":10}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "abcdefghij");

	/* now read: every request sent gets exactly one answer */
	size_t want = 0;
	for (size_t i = 0; i < sent; i++)
		want += buf_head(&reqs)[i] == '\n';
	buf_free(&reqs);
	size_t lines = 0;
	char tmp[65536];
	deadline = tc_now_ms() + tc_wait_scaled(30000);
	while (lines < want && tc_now_ms() < deadline) {
		struct pollfd pfd = { tcc_fd(slow), POLLIN, 0 };
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		ssize_t n = read(tcc_fd(slow), tmp, sizeof(tmp));
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			lines += tmp[i] == '\n';
	}
	ck_assert_msg(lines == want, "%zu answers for %zu requests", lines, want);
	ck_assert_msg(tcc_quiet(slow, 100), "more answers than requests");
	tcc_close(slow);
	tc_assert_ok(tcc_request(other, "ping", NULL));
	tcc_close(other);
	ck_assert_int_eq(tcd_stop(&d), 0);
	free(asan_env);
	tcd_free(&d);
}
END_TEST

/* --- reload ------------------------------------------------------------ */

/* True when a reload summary ({tools, added, removed, changed}) names no
 * change. */
static bool summary_empty(const struct json *sum)
{
	return tj_len(sum, "added") == 0 && tj_len(sum, "removed") == 0 && tj_len(sum, "changed") == 0;
}

/* The last occurrence of needle in [from, to), or NULL. */
static const char *last_in(const char *from, const char *to, const char *needle)
{
	const char *found = NULL;
	for (const char *q = from; (q = strstr(q, needle)) && q < to; q++)
		found = q;
	return found;
}

/*
 * admin/reload after the tool files changed; returns the summary
 * ({tools, added, removed, changed}) of that change. The daemon also
 * watches tools_dir and reloads on its own 200 ms after a change: on a
 * loaded machine that reload may come first, and admin/reload then rightly
 * finds nothing new. The change is then the one the watch logged after the
 * previous admin/reload and before this one: either way it is reported
 * exactly once, and only by a reload.
 */
static const struct json *reload_change(struct tcd *d, struct tcc *a)
{
	const struct json *r = tcc_reload(a);
	tc_assert_ok(r);
	const struct json *sum = tj(r, "result");
	if (!summary_empty(sum))
		return sum;
	static const char admin[] = "admin/reload by uid", watch[] = "tool files changed, reloaded: ";
	char *log = tcd_log(d);
	const char *end = log + strlen(log);
	const char *ours = last_in(log, end, admin);
	ck_assert_msg(ours, "admin/reload was not logged: %s", log);
	const char *prev = last_in(log, ours, admin);
	for (const char *w = prev ? prev : log; (w = strstr(w, watch)) && w < ours; w++) {
		const char *text = w + strlen(watch);
		const char *nl = strchr(text, '\n');
		const struct json *logged = tcc_parse(a, text, nl ? (size_t)(nl - text) : strlen(text));
		if (!summary_empty(logged))
			sum = logged;
	}
	free(log);
	return sum;
}

START_TEST(admin_reload)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *a = tcc_connect(&d);	/* initialized: hears list changes */
	struct tcc *b = tcc_connect(&d);	/* not initialized: does not */
	tcc_initialize(a, NULL);
	tc_assert_ok(tcc_request(b, "ping", NULL));

	/* nothing changed */
	const struct json *r = tcc_reload(a);
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.tools"), 16);
	ck_assert_int_eq(tj_len(r, "result.added"), 0);
	ck_assert_int_eq(tj_len(r, "result.removed"), 0);
	ck_assert_int_eq(tj_len(r, "result.changed"), 0);
	tcc_clear_queue(a);

	/* a tool file added */
	tcd_write_tool(&d, "echo.json", ECHO_TOOL("echo", "Echo a message"));
	const struct json *sum = reload_change(&d, a);
	ck_assert_int_eq(tj_int(sum, "tools"), 17);
	ck_assert_int_eq(tj_len(sum, "added"), 1);
	ck_assert(array_has(sum, "added", "echo"));
	ck_assert_int_eq(tj_len(sum, "removed"), 0);
	ck_assert_msg(tcc_wait_notification(a, "notifications/tools/list_changed", 2000), "no list_changed");
	ck_assert(listed(a, "echo"));
	r = tcc_call(a, "echo", "{\"msg\":\"hi there\"}");
	tc_assert_ok(r);
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "hi there"), "%s", tj_str(r, "result.content.0.text"));
	/* the uninitialized client heard nothing */
	ck_assert(listed(b, "echo"));
	ck_assert_int_eq(tcc_count_notifications(b, NULL), 0);
	ck_assert_msg(tcc_quiet(b, 300), "a client that did not initialize got: %s", tcc_recv_line(b, 0, NULL));

	/* changed */
	tcc_clear_queue(a);
	tcd_write_tool(&d, "echo.json", ECHO_TOOL("echo", "Echo a message, louder"));
	sum = reload_change(&d, a);
	ck_assert_int_eq(tj_len(sum, "added"), 0);
	ck_assert_int_eq(tj_len(sum, "changed"), 1);
	ck_assert_pstr_eq(tj_str(sum, "changed.0"), "echo");

	/* an invalid tool file: an error naming file:line:col, and the old
	 * registry still serves (the watch's own reload fails the same way,
	 * whichever comes first) */
	tcd_write_tool(&d, "zbad.json", "{ \"name\": \"zbad\", \"kind\": \"command\",\n  \"argv\": [\"true\"],, }\n");
	r = tcc_reload(a);
	ck_assert_msg(tj_has(r, "error"), "an invalid tool file was accepted");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	const char *msg = tj_str(r, "error.message");
	char *want = xasprintf("%s/zbad.json:2:", d.tools_dir);
	ck_assert_msg(msg && strstr(msg, want), "message: %s (want %s)", msg, want);
	free(want);
	ck_assert_msg(tj_str(r, "error.data.kind"), "no data.kind");
	ck_assert(listed(a, "echo"));
	ck_assert(!listed(a, "zbad"));
	tc_assert_ok(tcc_call(a, "echo", "{\"msg\":\"still here\"}"));
	tc_assert_ok(tcc_call(a, "list_dir", "{}"));

	/* removed (and the bad file with it) */
	remove_tool(&d, "zbad.json");
	remove_tool(&d, "echo.json");
	sum = reload_change(&d, a);
	ck_assert_int_eq(tj_len(sum, "removed"), 1);
	ck_assert_pstr_eq(tj_str(sum, "removed.0"), "echo");
	ck_assert_int_eq(tj_int(sum, "tools"), 16);
	r = tcc_call(a, "echo", "{\"msg\":\"gone\"}");
	tc_assert_kind(r, "not_found");

	tcc_close(a);
	tcc_close(b);
	tcd_finish(&d);
}
END_TEST

/* A call in flight finishes on the definition it started with. */
START_TEST(reload_during_call)
{
	struct tcd d;
	tcd_start(&d, NULL);
	tcd_write_tool(&d, "slow.json",
		       "{ \"name\": \"slow\", \"kind\": \"command\", \"description\": \"Sleep then print\",\n"
		       "  \"argv\": [\"sh\", \"-c\", \"sleep 0.5; echo v1\"], \"side_effects\": \"none\",\n"
		       "  \"input_schema\": { \"type\": \"object\" } }\n");
	struct tcc *c = tcc_connect(&d);
	tcc_initialize(c, NULL);
	tc_assert_ok(tcc_request(c, "admin/reload", NULL));
	int64_t id = tcc_send_request(c, "tools/call", "{\"name\":\"slow\",\"arguments\":{}}");
	ck_assert(tcd_wait_stat(&d, "result.running", 1, 3000));
	remove_tool(&d, "slow.json");
	struct tcc *c2 = tcc_connect(&d);
	const struct json *r = tcc_request(c2, "admin/reload", NULL);
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.removed.0"), "slow");
	r = answer_to(c, id, "the call in flight");
	tc_assert_ok(r);
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "v1"), "%s", tj_str(r, "result.content.0.text"));
	tcc_close(c2);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(live_reload_inotify)
{
	struct tcd d;
	struct tcc *c = start_listening(&d);
	ck_assert(!listed(c, "live"));
	tcd_write_tool(&d, "live.json", ECHO_TOOL("live", "Appears by itself"));
	assert_list_changed(c, "writing a tool file");
	ck_assert(listed(c, "live"));
	tc_assert_ok(tcc_call(c, "live", "{\"msg\":\"x\"}"));

	/* a broken file written live: the old registry stays */
	tcc_clear_queue(c);
	tcd_write_tool(&d, "live.json", "{ \"name\": \"live\", oops }\n");
	ck_assert(tcd_wait_log(&d, "live.json:1:", 1, 3000));
	ck_assert(listed(c, "live"));
	tc_assert_ok(tcc_call(c, "live", "{\"msg\":\"x\"}"));
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "live.json:1:"), "the log does not name the bad file: %s", log);
	free(log);

	/* removed live */
	remove_tool(&d, "live.json");
	assert_list_changed(c, "removing a tool file");
	ck_assert(!listed(c, "live"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* tools_dir replaced by a new directory (moved away, made again, as
 * deployment tools do): the new one is read and then watched in its turn;
 * the old one, now elsewhere, is not. */
START_TEST(live_reload_follows_a_replaced_tools_dir)
{
	struct tcd d;
	struct tcc *c = start_listening(&d);
	tcd_write_tool(&d, "one.json", ECHO_TOOL("one", "In the first directory"));
	assert_list_changed(c, "writing a tool file");
	ck_assert(listed(c, "one"));

	/* Moved away: the reload fails (no tools_dir), the registry stays. */
	char *old = xasprintf("%s.old", d.tools_dir);
	ck_assert_int_eq(rename(d.tools_dir, old), 0);
	ck_assert(tcd_wait_log(&d, "do not load", 1, 3000));
	ck_assert(listed(c, "one"));
	/* A directory made in its place is read, then watched. */
	ck_assert_int_eq(mkdir(d.tools_dir, 0755), 0);
	tcd_write_tool(&d, "two.json", ECHO_TOOL("two", "In the second directory"));
	ck_assert_msg(wait_listed(c, "two", true, 3000), "the new tools_dir was not read within 3 s");
	ck_assert(!listed(c, "one"));
	tcd_write_tool(&d, "three.json", ECHO_TOOL("three", "Also in the second directory"));
	ck_assert_msg(wait_listed(c, "three", true, 3000), "a file of the new tools_dir was not seen within 3 s");
	tc_assert_ok(tcc_call(c, "three", "{\"msg\":\"x\"}"));
	/* Reloads that change nothing but tools do not warn about the rest. */
	char *log = tcd_log(&d);
	ck_assert_msg(!strstr(log, "audit_log changes"), "a reload warned about an audit_log it did not change: %s",
		      log);
	free(log);

	/* The old directory, now elsewhere, is not watched any more. */
	tcc_clear_queue(c);
	char *p = xasprintf("%s/four.json", old);
	tc_write_file_atomic(p, ECHO_TOOL("four", "Outside"), strlen(ECHO_TOOL("four", "Outside")));
	ck_assert(tcc_quiet(c, 600));
	ck_assert(!listed(c, "four"));
	unlink(p);
	free(p);
	p = xasprintf("%s/one.json", old);
	unlink(p);
	free(p);
	rmdir(old);
	free(old);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(sighup_reloads)
{
	struct tcd d;
	struct tcc *c = start_listening(&d);
	/* a file written elsewhere and renamed in (one event), then SIGHUP */
	tcd_write_tool(&d, "hup.json", ECHO_TOOL("hup", "Reloaded by SIGHUP"));
	tcd_kill(&d, SIGHUP);
	assert_list_changed(c, "SIGHUP");
	ck_assert(listed(c, "hup"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* What a reload cannot change (the socket, the default workspace) stays,
 * and the reload says so in the log instead of passing over it. */
START_TEST(reload_says_what_waits_for_a_restart)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_reload(c));
	char *log = tcd_log(&d);
	ck_assert_msg(!strstr(log, "take effect at restart"), "%s", log);
	free(log);
	char *text = tcd_read(&d, d.config, NULL);
	char *other = xasprintf("%s/other", d.dir);
	ck_assert_int_eq(mkdir(other, 0755), 0);
	char *other_sock = xasprintf("%s/other.sock", d.dir);
	struct buf b = {0};
	for (const char *p = text; *p;) {
		if (strncmp(p, d.ws, strlen(d.ws)) == 0 && p[strlen(d.ws)] == '"') {
			buf_puts(&b, other);
			p += strlen(d.ws);
		} else if (strncmp(p, d.sock, strlen(d.sock)) == 0 && p[strlen(d.sock)] == '"') {
			buf_puts(&b, other_sock);
			p += strlen(d.sock);
		} else {
			buf_putc(&b, *p++);
		}
	}
	tc_write_file_atomic(d.config, buf_head(&b), buf_size(&b));
	tc_assert_ok(tcc_reload(c));
	ck_assert(tcd_wait_log(&d, "workspace changes take effect at restart", 1, 3000));
	ck_assert(tcd_wait_log(&d, "socket changes take effect at restart", 1, 3000));
	/* New sessions start where they did, on the socket they did. */
	struct tcc *n = tcc_connect(&d);
	ck_assert_str_eq(tj_str(tcc_initialize(n, NULL), "workspace"), d.ws);
	tcc_close(n);
	buf_free(&b);
	free(other_sock);
	free(other);
	free(text);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- stats --------------------------------------------------------------- */

START_TEST(admin_stats)
{
	struct tcd d;
	tcd_start(&d, NULL);
	tcd_put(&d, "a.txt", "a");
	struct tcc *c = tcc_connect(&d);
	struct tcc *c2 = tcc_connect(&d);
	tcc_initialize(c2, NULL);
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_kind(tcc_call(c, "read_file", "{\"path\":\"nope.txt\"}"), "execution_error");
	tc_assert_kind(tcc_call(c, "read_file", "{\"path\":5}"), "validation_error");
	tc_assert_kind(tcc_call(c, "nosuch", "{}"), "not_found");

	const struct json *r = tcc_request(c, "admin/stats", NULL);
	tc_assert_ok(r);
	const struct json *s = tj(r, "result");
	ck_assert_int_ge(tj_int(s, "uptimeMs"), 0);
	ck_assert_int_eq(tj_int(s, "connections.open"), 2);
	ck_assert_int_ge(tj_int(s, "connections.total"), 2);
	ck_assert_int_ge(tj_int(s, "sessions"), 1);
	ck_assert_int_eq(tj_int(s, "registeredTools"), 16);
	ck_assert_int_eq(tj_int(s, "inFlight"), 0);
	ck_assert_int_eq(tj_int(s, "calls"), 5);
	ck_assert_int_eq(tj_int(s, "errors.execution_error"), 1);
	ck_assert_int_eq(tj_int(s, "errors.validation_error"), 1);
	ck_assert_int_eq(tj_int(s, "errors.not_found"), 1);
	ck_assert_int_eq(tj_int(s, "tools.read_file.calls"), 4);
	ck_assert_int_eq(tj_int(s, "tools.read_file.errors"), 2);
	ck_assert_int_eq(tj_int(s, "tools.read_file.errorsByKind.execution_error"), 1);
	ck_assert_msg(tj(s, "tools.read_file.latencyMs.p50") && tj(s, "tools.read_file.latencyMs.p99"),
		      "no latency percentiles");
	ck_assert_int_ge(tj_int(s, "idempotency.entries"), 0);
	ck_assert_int_ge(tj_int(s, "idempotency.hits"), 0);
	ck_assert_int_ge(tj_int(s, "idempotency.joins"), 0);

	tcc_close(c2);
	/* a closed connection is no longer counted as open */
	uint64_t deadline = tc_now_ms() + 2000;
	int64_t open;
	do {
		r = tcc_request(c, "admin/stats", NULL);
		open = tj_int(r, "result.connections.open");
	} while (open != 1 && tc_now_ms() < deadline);
	ck_assert_int_eq(open, 1);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Writes d's config: head (keys with a trailing comma, lines counted from
 * line 2), then the daemon's socket, workspace and tools_dir. */
static void write_config(struct tcd *d, const char *head)
{
	char *conf = xasprintf("{\n%s  \"socket\": \"%s\",\n  \"workspace\": \"%s\",\n  \"tools_dir\": \"%s\"\n}\n",
			       head, d->sock, d->ws, d->tools_dir);
	tc_write_file_atomic(d->config, conf, strlen(conf));
	free(conf);
}

/* Asserts that one run of --check-config, and one admin/reload (n_all
 * errors, each an item of data.errors), report every one of want, and
 * that the daemon goes on with what it had. */
static void assert_all_reported(struct tcd *d, const char *const *want, size_t n_want, size_t n_all)
{
	char *out = NULL, *err = NULL;
	const char *argv[] = { tc_daemon_path(), "--check-config", "--config", d->config, NULL };
	ck_assert_int_eq(tc_run(argv, NULL, d->dir, &out, &err, 10000), 1);
	for (size_t i = 0; i < n_want; i++)
		ck_assert_msg(strstr(err, want[i]), "stderr lacks %s: %s", want[i], err);
	free(out);
	free(err);

	struct tcc *c = tcc_connect(d);
	const struct json *r = tcc_reload(c);
	ck_assert_str_eq(tj_str(r, "error.data.kind"), "execution_error");
	ck_assert_str_eq(tj_str(r, "error.data.reason"), "invalid_config");
	ck_assert_int_eq(tj_len(r, "error.data.errors"), n_all);
	for (size_t i = 0; i < n_want; i++) {
		bool found = false;
		for (size_t k = 0; k < n_all && !found; k++)
			found = strstr(tj_str(r, tcc_fmt(c, "error.data.errors.%zu", k)), want[i]) != NULL;
		ck_assert_msg(found, "%s lacks %s", tj_text(tj(r, "error.data.errors")), want[i]);
	}
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
}

/* Several mistakes in the config and in two tool files: one run of
 * --check-config, and one admin/reload, report them all. */
START_TEST(every_mistake_at_once)
{
	struct tcd d;
	tcd_start(&d, "{}");
	tcd_write_tool(&d, "good.json", ECHO_TOOL("echo", "Echo a message"));
	tcd_write_tool(&d, "bad1.json", "{\"kind\":\"command\",\n \"name\":\"x\", \"bogus\": 1}");
	tcd_write_tool(&d, "bad2.json", "{\"kind\":\"mcp\",\n \"nope\"");
	write_config(&d, "  \"grace_ms\": \"soon\",\n  \"bogus\": 1,\n  \"limits\": {\"max_batch\": 0, \"wat\": true},\n");
	const char *want[] = { ":2:15: grace_ms:", ":3:3: bogus", ":4:27: limits.max_batch:", ":4:30: limits.wat",
			       "bad1.json:2:", "bad2.json:2:" };
	/* bad1.json also lacks argv and side_effects: 8 in all */
	assert_all_reported(&d, want, ELEMENTSOF(want), 8);
	tcd_finish(&d);
}
END_TEST

/* Seven mistakes, in the confirmation, hooks, store and sandbox sections
 * of the config (which once stopped at their first), in a command tool
 * file (two) and in a provider file: one run of --check-config and one
 * admin/reload report all seven, each at its file, line and column. */
START_TEST(seven_mistakes_at_once)
{
	struct tcd d;
	tcd_start(&d, "{}");
	tcd_write_tool(&d, "good.json", ECHO_TOOL("echo", "Echo a message"));
	tcd_write_tool(&d, "cmd.json", "{\"kind\": \"command\", \"name\": \"c\", \"side_effects\": \"read\",\n"
				       " \"argv\": [\"true\"], \"shel\": true,\n"
				       " \"timeout_ms\": 0}\n");
	tcd_write_tool(&d, "prov.json", "{\"kind\": \"mcp\", \"name\": \"p\", \"command\": [\"true\"],\n"
					"  \"side_effects\": \"read\",\n"
					"  \"tools\": {\"x\": {\"max_attempts\": 99}}}\n");
	write_config(&d, "  \"confirmation\": {\"default\": {\"write\": \"never\"}},\n"
			 "  \"hooks\": {\"pre_call\": [{\"command\": []}]},\n"
			 "  \"store\": {\"kind\": \"disk\"},\n"
			 "  \"sandbox\": {\"limits\": {\"swap\": 1}},\n");
	const char *want[] = {
		"config.json:2:41: confirmation.default.write: expected \"auto\"",
		"config.json:3:38: hooks.pre_call[0].command: expected the program and its arguments",
		"config.json:4:21: store.kind: expected \"memory\" or \"redis\"",
		"config.json:5:26: sandbox.limits.swap: unknown key",
		"cmd.json:2:20: shel: unknown key",
		"cmd.json:3:16: timeout_ms: expected a positive integer",
		"prov.json:3:35: tools.x.max_attempts: expected a positive integer of at most 10",
	};
	assert_all_reported(&d, want, ELEMENTSOF(want), ELEMENTSOF(want));
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("integ_lifecycle");
	TCase *tc = tcase_create("cli");
	tcase_add_test(tc, flags_help_version_unknown);
	tcase_add_test(tc, check_config);
	suite_add_tcase(s, tc);

	tc = tcase_create("socket");
	tcase_add_test(tc, default_socket_paths);
	tcase_add_test(tc, socket_mode);
	tcase_add_test(tc, stale_and_live_sockets);
	suite_add_tcase(s, tc);

	tc = tcase_create("stop");
	tcase_add_test(tc, sigterm_lets_calls_finish);
	tcase_add_test(tc, sigterm_cancels_after_grace);
	suite_add_tcase(s, tc);

	tc = tcase_create("backpressure");
	tcase_add_test(tc, slow_reader_bounded);
	tcase_add_test(tc, client_memory_bounded);
	suite_add_tcase(s, tc);

#ifndef TC_ASAN
	/* Measures the daemon's RSS as malloc gives pages back: not what
	 * AddressSanitizer's allocator or valgrind's does (make valgrind
	 * leaves "timing" out). */
	tc = tcase_create("memory");
	tcase_set_tags(tc, "timing");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, memory_given_back_after_a_crowd);
	suite_add_tcase(s, tc);
#endif

	tc = tcase_create("reload");
	tcase_add_test(tc, admin_reload);
	tcase_add_test(tc, reload_during_call);
	tcase_add_test(tc, live_reload_inotify);
	tcase_add_test(tc, live_reload_follows_a_replaced_tools_dir);
	tcase_add_test(tc, sighup_reloads);
	tcase_add_test(tc, reload_says_what_waits_for_a_restart);
	tcase_add_test(tc, admin_stats);
	tcase_add_test(tc, every_mistake_at_once);
	tcase_add_test(tc, seven_mistakes_at_once);
	suite_add_tcase(s, tc);

	return run_suite(s);
}
