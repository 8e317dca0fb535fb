/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of sharing one daemon between two uids (root and
 * nobody, 65534): one uid's calls, failures, keys and confirmations leave
 * the other's calls unaffected. Connecting as another uid needs root:
 * without it the suite is skipped (exit 77).
 */
#include <check.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

static struct passwd nobody;

/* Looks up nobody; false (and why, on stderr) when the tests cannot run. */
static bool can_switch_uid(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP connecting as a second uid needs root\n");
		return false;
	}
	struct passwd *pw = getpwnam("nobody");
	if (!pw) {
		fprintf(stderr, "SKIP no user nobody\n");
		return false;
	}
	nobody = *pw;
	return true;
}

/* Starts a daemon that root and nobody may use, with extra config members
 * (JSON object members, or ""), and the command tool "exit" (exits with
 * {{code}}). */
static void start_shared(struct tcd *d, const char *extra)
{
	char *cfg = xasprintf("{\"socket_mode\":\"0666\",\"peers\":{\"allow_uids\":[0,%u]},"
			      "\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}}%s%s}",
			      (unsigned)nobody.pw_uid, *extra ? "," : "", extra);
	struct tcd_opts o = { .config = cfg };
	tcd_prepare(d, &o);
	tcd_write_tool(d, "exit.json",
		       "{\"name\":\"exit\",\"kind\":\"command\",\"description\":\"Exits with the status given\","
		       "\"argv\":[\"/bin/sh\",\"-c\",\"exit {{code}}\"],\"side_effects\":\"read\","
		       "\"input_schema\":{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"integer\","
		       "\"minimum\":0,\"maximum\":255}},\"required\":[\"code\"],\"additionalProperties\":false}}");
	tcd_spawn(d, &o);
	if (tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS) < 0)
		ck_abort_msg("the daemon did not start; its log:\n%s", tcd_log(d));
	free(cfg);
	ck_assert(chmod(d->dir, 0711) == 0);
	tcd_put(d, "a.txt", "hello\n");
}

static struct tcc *connect_nobody(struct tcd *d)
{
	return tcc_connect_as(d, nobody.pw_uid, nobody.pw_gid);
}

/* Sends tools/call without waiting; returns the id as text (owned by c). */
static const char *send_call(struct tcc *c, const char *tool, const char *args, const char *meta)
{
	const char *params = meta ? tcc_fmt(c, "{\"name\":\"%s\",\"arguments\":%s,\"_meta\":{%s}}", tool, args, meta)
				  : tcc_fmt(c, "{\"name\":\"%s\",\"arguments\":%s}", tool, args);
	return tcc_fmt(c, "%lld", (long long)tcc_send_request(c, "tools/call", params));
}

/* Waits until admin/stats says at least n calls run; fails after 20 s. */
static void wait_running(struct tcc *admin, int64_t n)
{
	uint64_t end = tc_now_ms() + 20000;
	int64_t running = -1;
	while (tc_now_ms() < end) {
		running = tj_int(tcc_request(admin, "admin/stats", NULL), "result.running");
		if (running >= n)
			return;
		usleep(20000);
	}
	ck_abort_msg("%lld calls run, not %lld", (long long)running, (long long)n);
}

/* Waits until admin/stats says at least n calls are queued. */
static void wait_queued(struct tcc *admin, int64_t n)
{
	uint64_t end = tc_now_ms() + 20000;
	int64_t queued = -1;
	while (tc_now_ms() < end) {
		queued = tj_int(tcc_request(admin, "admin/stats", NULL), "result.queued");
		if (queued >= n)
			return;
		usleep(20000);
	}
	ck_abort_msg("%lld calls queued, not %lld", (long long)queued, (long long)n);
}

/* Root, allowed every slot, fills all 64 with long shells and queues many
 * more behind them; nobody's read_file, queued last, gets the first slot
 * that frees instead of waiting behind root's queue. */
START_TEST(other_uid_gets_a_slot_in_turn)
{
	struct tcd d;
	start_shared(&d, "\"limits\":{\"session_concurrency\":64,\"per_uid_running\":64}");
	struct tcc *a = tcc_connect(&d);
	const char *first = send_call(a, "shell", "{\"command\":\"sleep 60\"}", NULL);
	for (int i = 1; i < 164; i++)
		send_call(a, "shell", "{\"command\":\"sleep 60\"}", NULL);
	struct tcc *admin = tcc_connect(&d);
	wait_running(admin, 64);
	wait_queued(admin, 100);
	struct tcc *b = connect_nobody(&d);
	const char *rid = send_call(b, "read_file", "{\"path\":\"a.txt\"}", NULL);
	wait_queued(admin, 101);
	/* One of root's calls ends: its slot goes to nobody, not to root's
	 * next call in line. */
	tcc_send(a, tcc_fmt(a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			    "\"params\":{\"requestId\":%s}}", first));
	const struct json *r = tcc_wait_id(b, rid, 5000);
	ck_assert_msg(r != NULL, "nobody's read_file waited behind root's queue");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.content"), "hello\n");
	tcc_close(b);
	tcc_close(a);	/* cancels root's calls */
	tcc_close(admin);
	tcd_finish(&d);
}
END_TEST

/* limits.per_uid_running by default: root's long shells take three of the
 * four slots and the rest wait; nobody's echo, sent then, starts at once
 * in the slot left, while every call of root still runs. */
START_TEST(no_uid_takes_every_slot)
{
	struct tcd d;
	start_shared(&d, "\"limits\":{\"max_concurrent\":4,\"session_concurrency\":64}");
	struct tcc *a = tcc_connect(&d);
	for (int i = 0; i < 10; i++)
		send_call(a, "shell", "{\"command\":\"sleep 60\"}", NULL);
	struct tcc *admin = tcc_connect(&d);
	wait_queued(admin, 7);
	const struct json *st = tcc_request(admin, "admin/stats", NULL);
	ck_assert_int_eq(tj_int(st, "result.running"), 3);
	struct tcc *b = connect_nobody(&d);
	const char *id = send_call(b, "shell", "{\"command\":\"echo hi\"}", NULL);
	const struct json *r = tcc_wait_id(b, id, 20000);
	ck_assert_msg(r != NULL, "nobody's echo waited for root's calls to end");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "hi\n");
	st = tcc_request(admin, "admin/stats", NULL);
	ck_assert_int_eq(tj_int(st, "result.running"), 3);
	ck_assert_int_eq(tj_int(st, "result.queued"), 7);
	tcc_close(b);
	tcc_close(a);	/* cancels root's calls */
	tcc_close(admin);
	tcd_finish(&d);
}
END_TEST

/* admin/stats tells nobody of its own calls, sessions and connections
 * alone, and of no provider, store or audit log; root (the daemon's
 * user here) still sees everything. admin/metrics, every uid's numbers,
 * is refused to nobody. */
START_TEST(stats_show_own_uid_only)
{
	struct tcd d;
	start_shared(&d, "");
	struct tcc *a = tcc_connect(&d);
	struct tcc *a2 = tcc_connect(&d);
	tc_assert_ok(tcc_request(a2, "ping", NULL));
	tc_assert_ok(tcc_call(a, "shell", "{\"command\":\"true\"}"));
	tc_assert_kind(tcc_call(a, "exit", "{\"code\":3}"), "execution_error");
	tc_assert_ok(tcc_call(a, "read_file", "{\"path\":\"a.txt\"}"));
	struct tcc *b = connect_nobody(&d);
	tc_assert_ok(tcc_call(b, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_kind(tcc_call(b, "read_file", "{\"path\":\"none.txt\"}"), "execution_error");

	const struct json *st = tj(tcc_request(b, "admin/stats", NULL), "result");
	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(tj_int(st, "uid"), nobody.pw_uid);
	ck_assert_int_eq(tj_int(st, "calls"), 2);
	ck_assert_int_eq(tj_int(st, "errors.execution_error"), 1);
	ck_assert_int_eq(tj_len(st, "tools"), 1);
	ck_assert_int_eq(tj_int(st, "tools.read_file.calls"), 2);
	ck_assert_int_eq(tj_int(st, "connections.open"), 1);
	ck_assert_int_eq(tj_int(st, "sessions"), 1);
	ck_assert_int_eq(tj_int(st, "running"), 0);
	ck_assert_int_eq(tj_int(st, "tasks.tasks"), 0);
	static const char *const hidden[] = { "providers", "store", "audit", "events", "reloads",
					      "storeRestartPending", "connections.total",
					      "connections.refused", "idempotency.entries" };
	for (size_t i = 0; i < ELEMENTSOF(hidden); i++)
		ck_assert_msg(!tj_has(st, hidden[i]), "nobody sees %s", hidden[i]);
	tc_assert_kind(tcc_request(b, "admin/metrics", NULL), "permission_denied");
	/* A call refused before the tool acted is one of its calls, and no
	 * attempt, as its answer says. */
	ck_assert_int_eq(tj_int(st, "attempts"), 2);
	const struct json *r = tcc_call(b, "read_file", "{\"path\":\"../outside.txt\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
	st = tj(tcc_request(b, "admin/stats", NULL), "result");
	ck_assert_int_eq(tj_int(st, "calls"), 3);
	ck_assert_int_eq(tj_int(st, "attempts"), 2);

	st = tj(tcc_request(a, "admin/stats", NULL), "result");
	ck_assert(!tj_has(st, "uid"));
	ck_assert_int_eq(tj_int(st, "calls"), 6);
	ck_assert_int_eq(tj_int(st, "attempts"), 5);
	ck_assert_int_eq(tj_int(st, "tools.read_file.calls"), 4);
	ck_assert_int_eq(tj_int(st, "tools.shell.calls"), 1);
	ck_assert_int_eq(tj_int(st, "connections.open"), 3);
	ck_assert(tj_has(st, "providers") && tj_has(st, "store"));
	tc_assert_ok(tcc_request(a, "admin/metrics", NULL));
	tcc_close(b);
	tcc_close(a2);
	tcc_close(a);
	tcd_finish(&d);
}
END_TEST

/* Sends initialize with sessionId sid as request 1 and returns the answer's
 * line with sid written SID (owned by c). */
static const char *initialize_line(struct tcc *c, const char *sid, const char *extra)
{
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
			    "\"params\":{\"protocolVersion\":\"2025-06-18\",\"sessionId\":\"%s\"%s}}", sid, extra));
	const char *line = tcc_recv_line(c, 10000, NULL);
	ck_assert_ptr_nonnull(line);
	const char *at = strstr(line, sid);
	ck_assert_msg(at, "no %s in %s", sid, line);
	return tcc_fmt(c, "%.*sSID%s", (int)(at - line), line, at + strlen(sid));
}

/* Nobody naming root's session id gets, byte for byte, the answer an id
 * nobody used gets, and a session of its own: root's budget and calls are
 * not its. Nor do events/subscribe and sessions/cancel tell the two apart. */
START_TEST(foreign_session_id_is_unknown)
{
	struct tcd d;
	start_shared(&d, "");
	struct tcc *a = tcc_connect(&d);
	const char *ra = initialize_line(a, "roots-own", ",\"budget\":{\"toolCalls\":1}");
	ck_assert_ptr_nonnull(strstr(ra, "\"result\""));

	struct tcc *b1 = connect_nobody(&d);
	const char *foreign = initialize_line(b1, "roots-own", "");
	struct tcc *b2 = connect_nobody(&d);
	const char *unknown = initialize_line(b2, "never-used", "");
	ck_assert_str_eq(foreign, unknown);
	ck_assert_ptr_nonnull(strstr(foreign, "\"result\""));
	/* Nobody's own session: root's budget of one call is not spent by it. */
	tc_assert_ok(tcc_call(b1, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_ok(tcc_call(b1, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_ok(tcc_call(a, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_kind(tcc_call(a, "read_file", "{\"path\":\"a.txt\"}"), "budget_exceeded");

	/* Root's session id of a session nobody never made is unknown to it. */
	struct tcc *b3 = connect_nobody(&d);
	const struct json *e1 = tcc_request(b3, "sessions/cancel", "{\"sessionId\":\"roots-only\"}");
	struct tcc *a2 = tcc_connect(&d);
	ck_assert_str_eq(tj_str(tcc_initialize(a2, "\"sessionId\":\"roots-only\""), "sessionId"), "roots-only");
	const struct json *e2 = tcc_request(b3, "sessions/cancel", "{\"sessionId\":\"roots-only\"}");
	char *t1 = tj_text(tj(e1, "error")), *t2 = tj_text(tj(e2, "error"));
	ck_assert_str_eq(t1, t2);
	free(t1);
	free(t2);
	tcc_close(a2);
	tcc_close(b3);
	tcc_close(b2);
	tcc_close(b1);
	tcc_close(a);
	tcd_finish(&d);
}
END_TEST

/* Nobody trips the breaker of a command tool; root's calls of it run.
 * Nobody's read_file of missing files never trips read_file's. */
START_TEST(breaker_trips_for_one_uid)
{
	struct tcd d;
	start_shared(&d, "");
	struct tcc *b = connect_nobody(&d);
	for (int i = 0; i < 5; i++)
		tc_assert_kind(tcc_call(b, "exit", "{\"code\":1}"), "execution_error");
	tc_assert_kind(tcc_call(b, "exit", "{\"code\":0}"), "circuit_open");
	for (int i = 0; i < 6; i++)
		tc_assert_kind(tcc_call(b, "read_file", "{\"path\":\"missing.txt\"}"), "execution_error");
	tc_assert_ok(tcc_call(b, "read_file", "{\"path\":\"a.txt\"}"));
	struct tcc *a = tcc_connect(&d);
	tc_assert_ok(tcc_call(a, "exit", "{\"code\":0}"));
	tcc_close(a);
	tcc_close(b);
	tcd_finish(&d);
}
END_TEST

/* Nobody floods more keys than idempotency.max_entries; root's key
 * survives: its retry is replayed and the command ran once. */
START_TEST(keys_flood_evicts_only_own)
{
	struct tcd d;
	start_shared(&d, "\"idempotency\":{\"max_entries\":50}");
	struct tcc *a = tcc_connect(&d);
	static const char once[] = "{\"command\":\"echo ran >> once.log\"}";
	const char *id = send_call(a, "shell", once, "\"idempotencyKey\":\"mine\"");
	const struct json *r = tcc_wait_id(a, id, 10000);
	tc_assert_ok(r);

	struct tcc *b = connect_nobody(&d);
	const char *ids[120];
	for (int i = 0; i < 120; i++)
		ids[i] = send_call(b, "read_file", "{\"path\":\"a.txt\"}",
				   tcc_fmt(b, "\"idempotencyKey\":\"k%d\"", i));
	for (int i = 0; i < 120; i++)
		ck_assert_ptr_nonnull(tcc_wait_id(b, ids[i], 10000));
	/* Nobody's own oldest key is gone, its newest is kept. */
	r = tcc_wait_id(b, send_call(b, "read_file", "{\"path\":\"a.txt\"}", "\"idempotencyKey\":\"k119\""), 10000);
	ck_assert(tj_bool(r, "result._meta.toolcalld/replayed"));

	id = send_call(a, "shell", once, "\"idempotencyKey\":\"mine\"");
	r = tcc_wait_id(a, id, 10000);
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result._meta.toolcalld/replayed"));
	char *path = tcd_ws_path(&d, "once.log");
	char *log = tcd_read(&d, path, NULL);
	ck_assert_str_eq(log, "ran\n");
	free(log);
	free(path);
	tcc_close(a);
	tcc_close(b);
	tcd_finish(&d);
}
END_TEST

/* Nobody leaves 65 confirmations unanswered: the 65th is overloaded (64
 * per session), and root's confirmation and calls go on; pending
 * confirmations hold no slot (two slots, 64 requests pending). */
START_TEST(pending_confirmations_bounded)
{
	struct tcd d;
	start_shared(&d, "\"limits\":{\"max_concurrent\":2}");
	struct tcc *bap = tcc_connect_as(&d, nobody.pw_uid, nobody.pw_gid);
	tc_assert_ok(tcc_request(bap, "events/subscribe", "{\"types\":[\"tool.confirmation_requested\"]}"));
	struct tcc *b = connect_nobody(&d);
	const char *ids[65];
	for (int i = 0; i < 65; i++)
		ids[i] = send_call(b, "write_file", tcc_fmt(b, "{\"path\":\"b%d.txt\",\"content\":\"x\"}", i), NULL);
	const struct json *r = tcc_wait_id(b, ids[64], 10000);
	ck_assert_ptr_nonnull(r);
	tc_assert_kind(r, "overloaded");
	unsigned asked = 0;
	while (asked < 64 && tcc_wait_notification(bap, "notifications/event", 10000))
		asked++;
	ck_assert_uint_eq(asked, 64);

	struct tcc *aap = tcc_connect(&d);
	tc_assert_ok(tcc_request(aap, "events/subscribe", "{\"types\":[\"tool.confirmation_requested\"]}"));
	struct tcc *a = tcc_connect(&d);
	const char *wid = send_call(a, "write_file", "{\"path\":\"root.txt\",\"content\":\"y\"}", NULL);
	const struct json *ev = tcc_wait_notification(aap, "notifications/event", 10000);
	ck_assert_ptr_nonnull(ev);
	const char *req = tj_str(ev, "params.requestId");
	ck_assert_ptr_nonnull(req);
	char *q = tj_quote(req);
	tc_assert_ok(tcc_request(aap, "confirmations/resolve",
				 tcc_fmt(aap, "{\"requestId\":%s,\"decision\":\"allow\"}", q)));
	free(q);
	tc_assert_ok(tcc_wait_id(a, wid, 10000));
	tc_assert_ok(tcc_call(a, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_ok(tcc_call(a, "read_file", "{\"path\":\"root.txt\"}"));
	tcc_close(a);
	tcc_close(aap);
	tcc_close(b);
	tcc_close(bap);
	tcd_finish(&d);
}
END_TEST

/* Puts n hard links to one file of about 1 MiB of text under dir t/ of
 * the workspace: gigabytes to search for little disk and little time. */
static void put_linked_tree(struct tcd *d, int n)
{
	enum { SIZE = 1 << 20 };
	char *text = xmalloc(SIZE + 1);
	for (size_t i = 0; i < SIZE; i++)
		text[i] = i % 64 == 63 ? '\n' : 'a' + (char)(i % 23);
	text[SIZE] = '\0';
	tcd_put(d, "t/f0.txt", text);
	free(text);
	char *first = xasprintf("%s/t/f0.txt", d->ws);
	for (int i = 1; i < n; i++) {
		char *name = xasprintf("%s/t/f%d.txt", d->ws, i);
		ck_assert_msg(link(first, name) == 0, "link %s: %m", name);
		free(name);
	}
	free(first);
}

/* Asserts that nobody's read_file, which needs the one io thread (it
 * acts as nobody), is answered within a few seconds: whatever held the
 * thread has let go of it. */
static void assert_io_free(struct tcc *n)
{
	const char *id = send_call(n, "read_file", "{\"path\":\"a.txt\"}", NULL);
	const struct json *r = tcc_wait_id(n, id, 5000);
	ck_assert_msg(r, "the io thread was still busy 5 s later");
	tc_assert_ok(r);
}

/* Nobody searches 60 GB: the search runs on the io thread as nobody,
 * root's pings are answered meanwhile, and a search cancelled or timed out stops at once (the one
 * io thread is free again long before the search could have ended). */
START_TEST(search_runs_off_the_loop)
{
	struct tcd d;
	start_shared(&d, "\"limits\":{\"io_threads\":1}");
	put_linked_tree(&d, 60000);
	struct tcc *n = connect_nobody(&d), *root = tcc_connect(&d);
	const char *args = "{\"pattern\":\"[q-z]{9}\",\"path\":\"t\"}";
	const char *id = send_call(n, "search", args, NULL);
	wait_running(root, 1);
	for (int i = 0; i < 20; i++)
		tc_assert_ok(tcc_request(root, "ping", NULL));
	/* The pings were answered while it ran (how long each took says
	 * nothing on a loaded machine). */
	ck_assert_int_ge(tj_int(tcc_request(root, "admin/stats", NULL), "result.running"), 1);

	/* Cancelled (no answer is due): it lets go of the io thread. */
	tcc_send(n, tcc_fmt(n, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			       "\"params\":{\"requestId\":%s}}", id));
	assert_io_free(n);

	/* Timed out (each attempt of this idempotent tool): the same. */
	id = send_call(n, "search", args, "\"timeoutMs\":300");
	const struct json *r = tcc_wait_id(n, id, 20000);
	ck_assert_ptr_nonnull(r);
	tc_assert_kind(r, "timeout");
	assert_io_free(n);
	/* A small search goes through as usual. */
	r = tcc_call(n, "search", "{\"pattern\":\"hel+o\",\"path\":\"a.txt\"}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_len(r, "result.structuredContent.matches"), 1);
	tcc_close(n);
	tcc_close(root);
	tcd_finish(&d);
}
END_TEST

/* The same for glob over a wide tree: pings answered meanwhile, and its
 * answer made off the loop too. */
START_TEST(glob_runs_off_the_loop)
{
	struct tcd d;
	start_shared(&d, "\"limits\":{\"io_threads\":1}");
	put_linked_tree(&d, 60000);
	struct tcc *n = connect_nobody(&d), *root = tcc_connect(&d);
	const char *id = send_call(n, "glob", "{\"pattern\":\"**/*.txt\",\"max_results\":100000}", NULL);
	/* Ten pings answered, and the glob still runs: a glob on the loop
	 * would have ended before the loop answered the first (how long each
	 * took says nothing on a loaded machine). */
	for (int i = 0; i < 10; i++)
		tc_assert_ok(tcc_request(root, "ping", NULL));
	ck_assert_int_ge(tj_int(tcc_request(root, "admin/stats", NULL), "result.running"), 1);
	ck_assert_ptr_null(tcc_wait_id(n, id, 0));
	const struct json *r = tcc_wait_id(n, id, 60000);
	ck_assert_ptr_nonnull(r);
	tc_assert_ok(r);
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 60001);
	ck_assert(!tj_bool(r, "result.structuredContent.truncated"));
	tcc_close(n);
	tcc_close(root);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	if (!can_switch_uid())
		return TC_EXIT_SKIP;
	Suite *s = suite_create("fair");
	TCase *tc = tcase_create("two uids");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, other_uid_gets_a_slot_in_turn);
	tcase_add_test(tc, no_uid_takes_every_slot);
	tcase_add_test(tc, stats_show_own_uid_only);
	tcase_add_test(tc, foreign_session_id_is_unknown);
	tcase_add_test(tc, breaker_trips_for_one_uid);
	tcase_add_test(tc, keys_flood_evicts_only_own);
	tcase_add_test(tc, pending_confirmations_bounded);
	tcase_add_test(tc, search_runs_off_the_loop);
	tcase_add_test(tc, glob_runs_off_the_loop);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
