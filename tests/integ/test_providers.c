/* SPDX-License-Identifier: MIT */
/*
 * MCP providers as an operator sees them: the provider file overrides what
 * its imported tools declare (exact names before globs), confirmation
 * per_tool keys take globs, a server that fails to start says why (the
 * last lines of its stderr) and its tools fail as transient naming it,
 * its stderr is in the daemon's log, admin/stats lists providers, and
 * --check-config warns about per_tool keys that match no tool. A root
 * daemon runs a provider as each calling peer (one instance per uid, as
 * /proc tells, stopped when idle), "user:NAME" and "root" run one shared
 * instance (root with a warning in the log); a start stopped by a limit
 * or a refusal of its sandbox names it, and calls within
 * providers.retry_s fail at once with the same error, one uid's failure
 * holding back no other uid.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Starts the daemon with config and the test server as provider "demo"
 * (prefix demo_, side effects side, more keys in extra); arg, when not
 * NULL, is passed to the server. */
static void start_demo(struct tcd *d, const char *config, const char *side, const char *extra, const char *arg)
{
	tcd_prepare(d, &(struct tcd_opts){ .config = config });
	const char *server = getenv("TC_MCP_SERVER");
	ck_assert_ptr_nonnull(server);
	char *decl = xasprintf("{ \"name\": \"demo\", \"kind\": \"mcp\", \"command\": [\"%s\"%s%s%s],"
			       "  \"prefix\": \"demo_\", \"side_effects\": \"%s\"%s%s,"
			       "  \"sandbox\": {\"limits\": {\"memory_mb\": null}} }", server,
			       arg ? ", \"" : "", arg ? arg : "", arg ? "\"" : "", side, extra ? ", " : "",
			       extra ? extra : "");
	tcd_write_tool(d, "demo.json", decl);
	free(decl);
	tcd_spawn(d, &(struct tcd_opts){ .config = config });
	ck_assert_int_eq(tcd_wait_socket(d, d->sock, 5000), 0);
}

/* The tools/list entry of a tool, or NULL. */
static const struct json *listed(const struct json *r, const char *name)
{
	const struct json *tools = tj(r, "result.tools");
	for (size_t i = 0; tools && i < tools->u.arr.n; i++)
		if (str_eq(json_str(json_get(tools->u.arr.items[i], "name")), name))
			return tools->u.arr.items[i];
	return NULL;
}

static const char *side_of(const struct json *r, const char *name)
{
	const struct json *t = listed(r, name);
	ck_assert_msg(t, "%s is not listed", name);
	return tj_str(t, "_meta.toolcalld/sideEffects");
}

START_TEST(overrides_per_imported_tool)
{
	struct tcd d;
	start_demo(&d, "{\"retry\":{\"max_attempts\":1}}", "write",
		   "\"tools\": {\"echo\": {\"side_effects\": \"read\", \"timeout_ms\": 1234,"
		   "                      \"description\": \"Echo, overridden\"},"
		   "          \"a*\": {\"side_effects\": \"none\"},"
		   "          \"add\": {\"side_effects\": \"execute\", \"idempotent\": true},"
		   "          \"ba*\": {\"side_effects\": \"none\"}, \"bad*\": {\"side_effects\": \"read\"},"
		   "          \"nomatch_*\": {\"side_effects\": \"read\"}}",
		   NULL);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "tools/list", "{}");
	ck_assert_str_eq(side_of(r, "demo_echo"), "read");
	ck_assert_int_eq(tj_int(listed(r, "demo_echo"), "_meta.toolcalld/timeoutMs"), 1234);
	ck_assert_str_eq(tj_str(listed(r, "demo_echo"), "description"), "Echo, overridden");
	/* The exact name wins over a glob that matches too. */
	ck_assert_str_eq(side_of(r, "demo_add"), "execute");
	ck_assert(tj_bool(listed(r, "demo_add"), "_meta.toolcalld/idempotent"));
	/* Among globs, the one with more literal characters. */
	ck_assert_str_eq(side_of(r, "demo_badutf"), "read");
	/* Not named: the file's side effects. */
	ck_assert_str_eq(side_of(r, "demo_pid"), "write");
	/* A key that matches none of the server's tools is logged. */
	ck_assert(tcd_wait_log(&d, "match none of its tools: \"nomatch_*\"", 1, 5000));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(overrides_are_checked)
{
	struct tcd d;
	tcd_prepare(&d, &(struct tcd_opts){ 0 });
	tcd_write_tool(&d, "demo.json", "{\"name\":\"demo\",\"kind\":\"mcp\",\"command\":[\"true\"],"
					"\"side_effects\":\"read\",\"tools\":{\"x*\":{\"side_effects\":\"loud\"}}}");
	const char *argv[] = { tc_daemon_path(), "--check-config", "--config", d.config, NULL };
	char *out = NULL, *err = NULL;
	int status = tc_run(argv, NULL, d.dir, &out, &err, 10000);
	ck_assert_int_eq(status, 1);
	ck_assert_msg(strstr(err, "tools.x*.side_effects"), "stderr: %s", err);
	free(out);
	free(err);
	tcd_free(&d);
}
END_TEST

START_TEST(per_tool_globs)
{
	struct tcd d;
	start_demo(&d, "{\"retry\":{\"max_attempts\":1},\"confirmation\":{\"no_approver\":\"deny\","
		       "\"per_tool\":{\"demo_*\":\"deny\",\"demo_ec*\":\"auto\",\"demo_fail\":\"auto\","
		       "\"demo_f*\":\"deny\"}}}", "write", NULL, NULL);
	struct tcc *c = tcc_connect(&d);
	/* The glob with more literal characters wins over a shorter one. */
	tc_assert_ok(tcc_call(c, "demo_echo", "{\"text\":\"hi\"}"));
	/* The exact name wins over any glob. */
	tc_assert_ok(tcc_call(c, "demo_fail", "{}"));
	const struct json *r = tcc_call(c, "demo_add", "{\"a\":1,\"b\":2}");
	ck_assert_msg(!tj_has(r, "result"), "demo_add ran: %s", tcc_raw(c, r));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(failed_start_says_why)
{
	struct tcd d;
	start_demo(&d, "{\"retry\":{\"max_attempts\":1}}", "read", NULL, "failstart");
	struct tcc *c = tcc_connect(&d);
	_cleanup_free_ char *first = NULL;
	for (int i = 0; i < 2; i++) {
		/* Twice: the second call, within providers.retry_s, fails at
		 * once with the same reason (no second start), and is not
		 * not_found. */
		const struct json *r = tcc_call(c, "demo_echo", "{\"text\":\"hi\"}");
		tc_assert_kind(r, "transient");
		/* Named as every failed call is (CONTRACT §4). */
		ck_assert_msg(str_eq(tj_str(r, "error.data.tool"), "demo_echo") && tj_has(r, "error.data.attempts") &&
			      tj_has(r, "error.data.durationMs") && tj_str(r, "error.data.callId") &&
			      strncmp(tj_str(r, "error.data.callId"), "c-", 2) == 0, "%s", tcc_raw(c, r));
		const char *m = tj_str(r, "error.message");
		ck_assert_msg(strstr(m, "MCP server 'demo' exited with status 1 while starting") &&
			      strstr(m, "Last lines of its stderr:\nstarting test server\n"
					"fatal: cannot open /nonexistent/config.toml"), "%s", m);
		if (first)
			ck_assert_str_eq(m, first);
		else
			first = xstrdup(m);
	}
	/* Its stderr is in the log, line by line. */
	ck_assert(tcd_wait_log(&d, "MCP server 'demo' stderr: fatal: cannot open /nonexistent/config.toml", 1,
			       5000));
	const struct json *r = tcc_request(c, "admin/stats", "{}");
	ck_assert_str_eq(tj_str(r, "result.providers.0.name"), "demo");
	ck_assert_str_eq(tj_str(r, "result.providers.0.state"), "failed");
	ck_assert(tj_has(r, "result.providers.0.pid") && tj(r, "result.providers.0.pid")->type == JSON_NULL);
	ck_assert_int_eq(tj_int(r, "result.providers.0.restarts"), 0);
	ck_assert(strstr(tj_str(r, "result.providers.0.lastError"), "fatal: cannot open"));
	/* A name no provider's prefix carries stays not_found. */
	tc_assert_kind(tcc_call(c, "nosuch_tool", "{}"), "not_found");
	/* A reload tries again at the next call. */
	tc_assert_ok(tcc_reload(c));
	tc_assert_kind(tcc_call(c, "demo_echo", "{\"text\":\"hi\"}"), "transient");
	r = tcc_request(c, "admin/stats", "{}");
	ck_assert_int_eq(tj_int(r, "result.providers.0.restarts"), 1);
	tcc_close(c);
	tcd_finish(&d);

	/* With providers.retry_s 0 each call starts it again. */
	start_demo(&d, "{\"retry\":{\"max_attempts\":1},\"providers\":{\"retry_s\":0}}", "read", NULL, "failstart");
	c = tcc_connect(&d);
	for (int i = 0; i < 2; i++)
		tc_assert_kind(tcc_call(c, "demo_echo", "{\"text\":\"hi\"}"), "transient");
	r = tcc_request(c, "admin/stats", "{}");
	ck_assert_int_eq(tj_int(r, "result.providers.0.restarts"), 1);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A provider that imported its tools and then fails to restart keeps them
 * listed; their calls fail as transient with the failure. */
START_TEST(known_tools_of_a_down_provider)
{
	struct tcd d;
	/* The server runs in the workspace: "down" is a file there. */
	start_demo(&d, "{\"retry\":{\"max_attempts\":1}}", "read", NULL, "failif=down");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "demo_echo", "{\"text\":\"up\"}"));
	tcd_put(&d, "down", "");
	tc_assert_kind(tcc_call(c, "demo_crash", "{}"), "transient");
	const struct json *r = tcc_call(c, "demo_echo", "{\"text\":\"down\"}");
	tc_assert_kind(r, "transient");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "fatal: cannot open"), "%s", tcc_raw(c, r));
	r = tcc_request(c, "tools/list", "{}");
	ck_assert(listed(r, "demo_echo"));
	r = tcc_request(c, "admin/stats", "{}");
	ck_assert_str_eq(tj_str(r, "result.providers.0.state"), "failed");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A server the sandbox stops from starting: the error says what the
 * sandbox refused, then what the server printed. */
START_TEST(sandbox_refusal_is_named)
{
	struct tcd d;
	tcd_prepare(&d, &(struct tcd_opts){ 0 });
	char *outside = xasprintf("%s/outside", d.dir);
	char *decl = xasprintf("{\"name\":\"demo\",\"kind\":\"mcp\",\"prefix\":\"demo_\",\"side_effects\":\"read\","
			       "\"command\":[\"sh\",\"-c\",\"echo x > %s; exit 1\"]}", outside);
	tcd_write_tool(&d, "demo.json", decl);
	free(decl);
	tcd_spawn(&d, &(struct tcd_opts){ 0 });
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 5000), 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "demo_echo", "{}");
	const char *m = tj_str(r, "error.message");
	ck_assert_msg(m, "%s", tcc_raw(c, r));
	bool confined = access(outside, F_OK) < 0 && !strstr(m, "cannot be started");
	if (confined) {
		tc_assert_kind(r, "transient");
		char *want = xasprintf("exited with status 1 while starting\n[sandbox] The sandbox refused writing "
				       "%s (read-only in the sandbox", outside);
		ck_assert_msg(strstr(m, want) && strstr(m, "Last lines of its stderr:\n"), "%s", m);
		free(want);
	}
	/* else the sandbox does not confine here, or refuses to run at all. */
	free(outside);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(stderr_and_stats)
{
	struct tcd d;
	start_demo(&d, "{\"retry\":{\"max_attempts\":1}}", "read", NULL, NULL);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "demo_stderr", "{}"));
	ck_assert(tcd_wait_log(&d, "MCP server 'demo' stderr: a note on stderr, 0", 1, 5000));
	/* A flood is logged within a budget: 20 lines per 10 s, then a note. */
	tc_assert_ok(tcc_call(c, "demo_stderr", "{\"lines\":200}"));
	ck_assert(tcd_wait_log(&d, "(more lines of stderr within 10 s are not logged)", 1, 5000));
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "a note on stderr, 18") && !strstr(log, "a note on stderr, 19\n"), "%s", log);
	free(log);
	const struct json *r = tcc_request(c, "admin/stats", "{}");
	ck_assert_str_eq(tj_str(r, "result.providers.0.state"), "ready");
	ck_assert_int_gt(tj_int(r, "result.providers.0.pid"), 0);
	ck_assert_int_eq(tj_int(r, "result.providers.0.restarts"), 0);
	tc_assert_kind(tcc_call(c, "demo_crash", "{}"), "transient");
	tc_assert_ok(tcc_call(c, "demo_pid", "{}"));
	r = tcc_request(c, "admin/stats", "{}");
	ck_assert_str_eq(tj_str(r, "result.providers.0.state"), "ready");
	ck_assert_int_eq(tj_int(r, "result.providers.0.restarts"), 1);
	ck_assert_msg(strstr(tj_str(r, "result.providers.0.lastError"), "exited with status 3"), "%s",
		      tcc_raw(c, r));
	r = tcc_request(c, "admin/metrics", "{}");
	ck_assert(strstr(tj_str(r, "result.text"), "toolcalld_provider_restarts_total{provider=\"demo\"} 1"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(check_config_warns_about_per_tool_keys)
{
	struct tcd d;
	tcd_prepare(&d, &(struct tcd_opts){
		.config = "{\"confirmation\":{\"per_tool\":{\"nosuch_tool\":\"auto\",\"read_*\":\"auto\","
			  "\"demo_x*\":\"auto\",\"shell\":\"prompt\"}},"
			  "\"sandbox\":{\"per_tool\":{\"nosuch2\":\"read-only\"}}}" });
	tcd_write_tool(&d, "demo.json", "{\"name\":\"demo\",\"kind\":\"mcp\",\"command\":[\"true\"],"
					"\"prefix\":\"demo_\",\"side_effects\":\"read\"}");
	const char *argv[] = { tc_daemon_path(), "--check-config", "--config", d.config, NULL };
	char *out = NULL, *err = NULL;
	int status = tc_run(argv, NULL, d.dir, &out, &err, 10000);
	ck_assert_msg(status == 0, "status %d: %s", status, err);
	ck_assert_msg(strstr(err, "warning: confirmation.per_tool: \"nosuch_tool\" matches no tool"), "%s", err);
	ck_assert_msg(strstr(err, "warning: sandbox.per_tool: \"nosuch2\" matches no tool"), "%s", err);
	ck_assert_msg(!strstr(err, "read_*") && !strstr(err, "shell"), "%s", err);
	ck_assert_msg(strstr(out, "\"demo_x*\" is checked when MCP server 'demo' runs"), "%s", out);
	free(out);
	free(err);
	tcd_free(&d);
}
END_TEST

/* toolcallctl's default timeout covers a provider's start: a list right
 * after start-up waits for a server that takes 11 s to initialize. */
START_TEST(ctl_waits_for_a_provider_to_start)
{
	struct tcd d;
	start_demo(&d, NULL, "read", NULL, "slowinit11");
	const char *argv[] = { tc_ctl_path(), "-s", d.sock, "list", NULL };
	char *out = NULL, *err = NULL;
	int status = tc_run(argv, NULL, d.dir, &out, &err, 30000);
	ck_assert_msg(status == 0, "status %d: %s", status, err);
	ck_assert_msg(strstr(out, "demo_echo"), "%s", out);
	free(out);
	free(err);
	tcd_finish(&d);
}
END_TEST

/* --- whom a provider runs as ------------------------------------------------ */

#define NOBODY 65534
#define CFG_SHARED "{\"socket_mode\":\"0666\",\"retry\":{\"max_attempts\":1}," \
		   "\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}}}"

/* Starts the daemon as start_demo() does, reachable by uid 65534. */
static void start_shared_demo(struct tcd *d, const char *extra)
{
	start_demo(d, CFG_SHARED, "read", extra, NULL);
	ck_assert(chmod(d->dir, 0711) == 0);
	ck_assert(chmod(d->ws, 0777) == 0);
}

/* The pid the demo server answers with, called by c. */
static pid_t server_pid(struct tcc *c)
{
	const struct json *r = tcc_call(c, "demo_pid", "{}");
	tc_assert_ok(r);
	return (pid_t)atol(tj_str(r, "result.content.0.text"));
}

/* The real uid of process pid, from /proc/PID/status; -1 when it is gone. */
static long uid_of(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long uid = -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Uid:", 4) == 0)
			uid = strtol(line + 4, NULL, 10);
	fclose(f);
	return uid;
}

/* True once process pid is gone (or a zombie), waiting up to timeout_ms. */
static bool wait_gone(pid_t pid, int timeout_ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
	for (;;) {
		char path[64], line[256];
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
		FILE *f = fopen(path, "r");
		bool gone = !f;
		while (f && fgets(line, sizeof(line), f))
			if (strncmp(line, "State:", 6) == 0 && strchr(line, 'Z'))
				gone = true;
		if (f)
			fclose(f);
		if (gone)
			return true;
		if (mono_ms() > deadline)
			return false;
		usleep(20000);
	}
}

/* A root daemon runs a provider as each calling peer: one instance per
 * uid, started by that uid's first call, stopped after idle_s without
 * calls; command tools run as the peer too. */
START_TEST(one_instance_per_peer)
{
	TC_SKIP_UNDER_VALGRIND("a server run as another uid cannot write valgrind's log");
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared_demo(&d, "\"idle_s\": 5");
	tcd_write_tool(&d, "whoami.json",
		       "{\"name\":\"whoami\",\"kind\":\"command\",\"side_effects\":\"read\",\"argv\":[\"id\",\"-u\"]}");
	struct tcc *root = tcc_connect(&d);
	tc_assert_ok(tcc_reload(root));
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);

	pid_t rp = server_pid(root);
	ck_assert_int_eq(uid_of(rp), 0);
	/* The second uid's first call starts a second instance, as it. */
	pid_t np = server_pid(n);
	ck_assert_int_ne(np, rp);
	ck_assert_int_eq(uid_of(np), NOBODY);
	ck_assert_int_eq(server_pid(n), np);
	ck_assert_int_eq(server_pid(root), rp);
	/* Both list the same tools. */
	const struct json *r = tcc_request(n, "tools/list", "{}");
	ck_assert(listed(r, "demo_echo") && listed(r, "demo_pid"));
	r = tcc_request(root, "admin/stats", "{}");
	ck_assert_int_eq(tj_len(r, "result.providers.0.instances"), 2);
	/* A command tool runs as the peer too. */
	r = tcc_call(n, "whoami", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "65534\n");

	/* Without calls for idle_s, each instance stops; the next call starts
	 * a new one. */
	ck_assert_msg(wait_gone(np, 30000), "the instance of uid %d is still running", NOBODY);
	ck_assert_msg(wait_gone(rp, 30000), "the instance of uid 0 is still running");
	r = tcc_request(root, "admin/stats", "{}");
	ck_assert_str_eq(tj_str(r, "result.providers.0.instances.0.state"), "idle");
	pid_t again = server_pid(n);
	ck_assert_int_ne(again, np);
	ck_assert_int_eq(uid_of(again), NOBODY);
	tcc_close(n);
	tcc_close(root);
	tcd_finish(&d);
}
END_TEST

/* One uid's failed start holds back no other uid, and tells it nothing. */
START_TEST(a_failed_instance_is_its_uids_alone)
{
	TC_SKIP_UNDER_VALGRIND("a server run as another uid cannot write valgrind's log");
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_demo(&d, CFG_SHARED, "read", NULL, "failuid=0");
	ck_assert(chmod(d.dir, 0711) == 0);
	ck_assert(chmod(d.ws, 0777) == 0);
	struct tcc *root = tcc_connect(&d);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	const struct json *r = tcc_call(root, "demo_echo", "{\"text\":\"x\"}");
	tc_assert_kind(r, "transient");
	ck_assert(strstr(tj_str(r, "error.message"), "fatal: not for uid 0"));
	/* Within providers.retry_s of root's failure, uid 65534's call starts
	 * its own instance. */
	r = tcc_call(n, "demo_echo", "{\"text\":\"mine\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "mine");
	/* Root's calls still fail at once with its own reason. */
	r = tcc_call(root, "demo_echo", "{\"text\":\"x\"}");
	tc_assert_kind(r, "transient");
	ck_assert(strstr(tj_str(r, "error.message"), "fatal: not for uid 0"));
	tcc_close(n);
	tcc_close(root);
	tcd_finish(&d);

	/* While another uid's instance is still starting, a failure does not
	 * end the wait of that uid's call. */
	start_demo(&d, CFG_SHARED, "read", NULL, "failuid=0\", \"slowinit2");
	ck_assert(chmod(d.dir, 0711) == 0);
	ck_assert(chmod(d.ws, 0777) == 0);
	root = tcc_connect(&d);
	n = tcc_connect_as(&d, NOBODY, NOBODY);
	int64_t id = tcc_send_request(n, "tools/call", "{\"name\":\"demo_echo\",\"arguments\":{\"text\":\"later\"}}");
	uint64_t deadline = mono_ms() + 10000;
	for (;;) {
		r = tcc_request(root, "admin/stats", "{}");
		if (tj_len(r, "result.providers.0.instances") == 1)
			break;
		ck_assert_msg(mono_ms() < deadline, "no instance started: %s", tcc_raw(root, r));
		usleep(20000);
	}
	ck_assert_str_eq(tj_str(r, "result.providers.0.instances.0.state"), "starting");
	tc_assert_kind(tcc_call(root, "demo_echo", "{\"text\":\"x\"}"), "transient");
	r = tcc_wait_id(n, tcc_fmt(n, "%lld", (long long)id), 20000);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "later");
	tcc_close(n);
	tcc_close(root);
	tcd_finish(&d);
}
END_TEST

/* "user:NAME" shares one instance run as that user; "root" runs one as
 * uid 0 and says so in the log, at start and at each reload. */
START_TEST(run_as_user_and_root)
{
	TC_SKIP_UNDER_VALGRIND("a server run as another uid cannot write valgrind's log");
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared_demo(&d, "\"run_as\": \"user:nobody\"");
	struct tcc *root = tcc_connect(&d);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	pid_t p = server_pid(root);
	ck_assert_int_eq(uid_of(p), NOBODY);
	ck_assert_int_eq(server_pid(n), p);
	tcc_close(n);
	tcc_close(root);
	tcd_finish(&d);

	start_shared_demo(&d, "\"run_as\": \"root\"");
	ck_assert(tcd_wait_log(&d, "MCP server 'demo' (", 1, 5000));
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "warning: MCP server 'demo' (") && strstr(log, "runs as root"), "%s", log);
	free(log);
	root = tcc_connect(&d);
	n = tcc_connect_as(&d, NOBODY, NOBODY);
	p = server_pid(n);
	ck_assert_int_eq(uid_of(p), 0);
	ck_assert(tcd_wait_log(&d, "warning: MCP server 'demo': starting as root", 1, 5000));
	ck_assert_int_eq(server_pid(root), p);
	tc_assert_ok(tcc_reload(root));
	ck_assert(tcd_wait_log(&d, "runs as root", 2, 5000));
	tcc_close(n);
	tcc_close(root);
	tcd_finish(&d);

	/* Another way to say root is refused. */
	tcd_prepare(&d, &(struct tcd_opts){ 0 });
	tcd_write_tool(&d, "demo.json", "{\"name\":\"demo\",\"kind\":\"mcp\",\"command\":[\"true\"],"
					"\"prefix\":\"demo_\",\"side_effects\":\"read\",\"run_as\":\"user:root\"}");
	const char *argv[] = { tc_daemon_path(), "--check-config", "--config", d.config, NULL };
	char *out = NULL, *err = NULL;
	int status = tc_run(argv, NULL, d.dir, &out, &err, 10000);
	ck_assert_msg(status != 0 && strstr(err, "say \"root\" to mean it"), "status %d: %s", status, err);
	free(out);
	free(err);
	tcd_free(&d);
}
END_TEST

/* A start stopped by its sandbox says why: a limit it hit, or network it
 * was refused; a call within providers.retry_s gets the same at once. */
START_TEST(start_failures_say_why)
{
	TC_SKIP_UNDER_VALGRIND("children run there without the sandbox and its limits");
#if defined(__SANITIZE_ADDRESS__)
	TC_SKIP("a data size limit leaves ASan no room for its shadow memory");
#endif
	/* Something to connect to, so that only the sandbox can refuse it. */
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	ck_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 8) == 0 &&
		  getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
	struct tcd d;
	tcd_prepare(&d, &(struct tcd_opts){ .config = "{\"retry\":{\"max_attempts\":1}}" });
	const char *server = getenv("TC_MCP_SERVER");
	static const struct {
		const char *prefix, *arg, *limits;
	} servers[] = {
		{ "mem", "alloc=64", "\"memory_mb\":16" },
		{ "net", "connect=%u", "\"memory_mb\":null" },
		{ "big", "bigfile", "\"memory_mb\":null,\"file_size_mb\":1" },
	};
	for (size_t i = 0; i < ELEMENTSOF(servers); i++) {
		_cleanup_free_ char *arg = xasprintf(servers[i].arg, (unsigned)ntohs(a.sin_port));
		_cleanup_free_ char *decl = xasprintf(
			"{\"name\":\"%s\",\"kind\":\"mcp\",\"command\":[\"%s\",\"%s\"],\"prefix\":\"%s_\","
			"\"side_effects\":\"read\",\"sandbox\":{\"limits\":{%s}}}", servers[i].prefix, server, arg,
			servers[i].prefix, servers[i].limits);
		_cleanup_free_ char *file = xasprintf("%s.json", servers[i].prefix);
		tcd_write_tool(&d, file, decl);
	}
	tcd_spawn(&d, &(struct tcd_opts){ .config = "{\"retry\":{\"max_attempts\":1}}" });
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 5000), 0);
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "mem_echo", "{\"text\":\"x\"}");
	tc_assert_kind(r, "transient");
	_cleanup_free_ char *mem = xstrdup(tj_str(r, "error.message"));
	ck_assert_msg(strstr(mem, "MCP server 'mem' exited with status 1 while starting: it hit the memory limit "
				  "(16 MB)"), "%s", mem);
	/* Again, within providers.retry_s: the same reason, without a start
	 * (restarts stays 0, below). */
	r = tcc_call(c, "mem_echo", "{\"text\":\"x\"}");
	ck_assert_str_eq(tj_str(r, "error.message"), mem);

	r = tcc_call(c, "net_echo", "{\"text\":\"x\"}");
	tc_assert_kind(r, "transient");
	const char *m = tj_str(r, "error.message");
	/* Named as the daemon saw it where its spawner hands it the
	 * network's calls (sandboxNetworkNotes), else guessed from stderr. */
	_cleanup_free_ char *seen = xasprintf("MCP server 'net' exited with status 1 while starting\n[sandbox] connect "
					      "to 127.0.0.1:%u refused: this tool has no network (profile",
					      (unsigned)ntohs(a.sin_port));
	ck_assert_msg((strstr(m, seen) && strstr(m, "Network is unreachable")) ||
			      (strstr(m, "MCP server 'net' exited with status 1 while starting\n[sandbox] This may have "
					 "been refused by the sandbox") && strstr(m, "no network access") &&
			       strstr(m, "Permission denied")),
		      "%s", m);

	r = tcc_call(c, "big_echo", "{\"text\":\"x\"}");
	tc_assert_kind(r, "transient");
	m = tj_str(r, "error.message");
	ck_assert_msg(strstr(m, "MCP server 'big' was killed by SIGXFSZ while starting: it hit the file size limit "
				"(1 MB)"), "%s", m);

	r = tcc_request(c, "admin/stats", "{}");
	for (size_t i = 0; i < 3; i++) {
		const struct json *pv = tj(r, tcc_fmt(c, "result.providers.%zu", i));
		ck_assert_str_eq(tj_str(pv, "state"), "failed");
		ck_assert_int_eq(tj_int(pv, "restarts"), 0);
	}
	tcc_close(c);
	close(lfd);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("providers");
	TCase *tc = tcase_create("providers");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, overrides_per_imported_tool);
	tcase_add_test(tc, overrides_are_checked);
	tcase_add_test(tc, per_tool_globs);
	tcase_add_test(tc, failed_start_says_why);
	tcase_add_test(tc, known_tools_of_a_down_provider);
	tcase_add_test(tc, sandbox_refusal_is_named);
	tcase_add_test(tc, stderr_and_stats);
	tcase_add_test(tc, check_config_warns_about_per_tool_keys);
	tcase_add_test(tc, ctl_waits_for_a_provider_to_start);
	tcase_add_test(tc, one_instance_per_peer);
	tcase_add_test(tc, run_as_user_and_root);
	tcase_add_test(tc, a_failed_instance_is_its_uids_alone);
	tcase_add_test(tc, start_failures_say_why);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
