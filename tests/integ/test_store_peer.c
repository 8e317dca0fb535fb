/* SPDX-License-Identifier: MIT */
/*
 * Who serves the Redis store's Unix socket: a redis-server running as
 * another uid (65534, as a second user, or a sandboxed child, could run
 * one where the real Redis's socket should be) is refused before it hears
 * a word. The daemon says so in its log (the socket, the uid found, the
 * uids accepted), admin/stats counts an outage, keyed calls go on from
 * this daemon's memory, the memory tool fails transient, and that Redis
 * stays empty. With store.server_uid naming that user, the same server is
 * the shared store.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/integ/memory_calls.h"
#include "tests/unit/check_main.h"
#include "tests/unit/redis_server.h"

#define NOBODY 65534

static struct redis_server rs;

/* Starts a daemon on the Redis of another uid; extra: more store members. */
static void start(struct tcd *d, const char *extra)
{
	char *config = xasprintf("{\"store\":{\"kind\":\"redis\",\"address\":\"unix:%s\",\"prefix\":\"it:\"%s%s},"
				 "\"memory\":{\"dir\":\"mem\"},"
				 "\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}}}",
				 rs.sock, extra ? "," : "", extra ? extra : "");
	tcd_start(d, config);
	free(config);
}

/* A keyed shell call: its answer. */
static const struct json *keyed(struct tcc *c, const char *key)
{
	return tcc_request(c, "tools/call", tcc_fmt(c, "{\"name\":\"shell\",\"arguments\":{\"command\":\"echo ran\"},"
						   "\"_meta\":{\"idempotencyKey\":\"%s\"}}", key));
}

/* Runs a keyed call, then replays it. */
static void run_and_replay(struct tcc *c, const char *key)
{
	const struct json *r = keyed(c, key);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "ran\n");
	ck_assert(!tj_bool(r, "result._meta.toolcalld/replayed"));
	r = keyed(c, key);
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result._meta.toolcalld/replayed"));
}

/* The first line of the log holding needle (malloc'd), or NULL. */
static char *log_line(struct tcd *d, const char *needle)
{
	char *log = tcd_log(d);
	char *at = strstr(log, needle), *line = NULL;
	if (at) {
		char *start = at, *end = strchr(at, '\n');
		while (start > log && start[-1] != '\n')
			start--;
		line = xstrndup(start, end ? (size_t)(end - start) : strlen(start));
	}
	free(log);
	return line;
}

static void setup(void)
{
	if (rs.pid <= 0) {
		rs.uid = NOBODY;
		redis_server_start(&rs);
	}
	redis_server_flush(&rs);
}

START_TEST(other_uid_refused)
{
	struct tcd d;
	start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	ck_assert_msg(tcd_wait_log(&d, "runs as uid 65534", 1, 5000), "no refusal logged:\n%s", tcd_log(&d));
	char *line = log_line(&d, "runs as uid 65534");
	char *want = xasprintf("store: unix:%s is unreachable (cannot connect to unix:%s: refused: the server on %s "
			       "runs as uid 65534; accepted are uid 0 (root); store.server_uid may name one more); "
			       "keyed calls work on this daemon alone", rs.sock, rs.sock, rs.sock);
	ck_assert_msg(strstr(line, want), "%s", line);
	free(want);
	free(line);
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	ck_assert(!tj_bool(st, "result.store.connected"));
	ck_assert_int_ge(tj_int(st, "result.store.outages"), 1);
	/* Degraded, as with Redis away: keyed calls run and replay here. */
	run_and_replay(c, "refused-1");
	const struct json *r = tcc_call(c, "memory", "{\"command\":\"view\",\"path\":\"/memories\"}");
	tc_assert_kind(r, "transient");
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "cannot be reached"));
	/* Reconnections are refused too: still away, one warning. */
	tc_pause_ms(600);
	st = tcc_request(c, "admin/stats", NULL);
	ck_assert(!tj_bool(st, "result.store.connected"));
	ck_assert_int_eq(tj_int(st, "result.store.outages"), 1);
	ck_assert(tcd_wait_log(&d, "runs as uid 65534", 1, 100));
	char *log = tcd_log(&d);
	ck_assert_msg(!strstr(strstr(log, "runs as uid 65534") + 1, "runs as uid 65534"), "%s", log);
	free(log);
	/* Nothing reached that Redis. */
	ck_assert_int_eq(redis_server_keys(&rs), 0);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(configured_uid_trusted)
{
	struct tcd d;
	/* By name, looked up as the config is read. */
	start(&d, "\"server_uid\":\"nobody\"");
	struct tcc *c = tcc_connect(&d);
	ck_assert(tc_wait_until(tj_bool(tcc_request(c, "admin/stats", NULL), "result.store.connected"),
				tc_wait_scaled(5000)));
	run_and_replay(c, "trusted-1");
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"a\"}");
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/a.md\"}"),
			 "Here's the content of /memories/a.md with line numbers:\n     1\ta");
	/* The record and the memory are in that Redis. */
	ck_assert_int_ge(redis_server_keys(&rs), 2);
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	ck_assert_int_eq(tj_int(st, "result.store.outages"), 0);
	char *log = tcd_log(&d);
	/* (The refusal's own words: other lines may say "refused", the
	 * start-up line of a kernel without seccomp notification under
	 * valgrind among them.) */
	ck_assert_msg(!strstr(log, "runs as uid"), "%s", log);
	free(log);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	const char *why;
	if (!redis_server_available(&why)) {
		fprintf(stderr, "SKIP %s\n", why);
		return TC_EXIT_SKIP;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP running redis-server as uid %d needs root\n", NOBODY);
		return TC_EXIT_SKIP;
	}
	Suite *s = suite_create("integ_store_peer");
	TCase *tc = tcase_create("store server uid");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, other_uid_refused);
	tcase_add_test(tc, configured_uid_trusted);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	/* One redis-server for both cases: they run in this process. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	redis_server_free(&rs);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
