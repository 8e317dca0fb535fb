/* SPDX-License-Identifier: MIT */
/*
 * The memory tool with the Redis store (CONTRACT §22): two real daemons on
 * one redis-server see the same memory for a uid (and none of another
 * uid's), nothing is written to memory.dir, the limits hold there too;
 * 200 concurrent inserts into one file through both daemons lose nothing
 * (every insert answered as done is in the file exactly once, every other
 * was answered that the file changed and is to be viewed again); Redis
 * gone makes a call fail transient, and it is used again once back (its
 * script loaded again, also after SCRIPT FLUSH); a write Redis took but
 * did not answer is not sent again.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/integ/memory_calls.h"
#include "tests/unit/check_main.h"
#include "tests/unit/redis_server.h"

#define NOBODY 65534

static struct redis_server rs;

/* Starts a daemon on the shared Redis. */
static void start(struct tcd *d)
{
	char *config = xasprintf("{\"socket_mode\":\"0666\",\"store\":{\"kind\":\"redis\",\"address\":\"unix:%s\","
				 "\"prefix\":\"it:\",\"timeout_ms\":2000},\"memory\":{\"dir\":\"mem\",\"max_file_kb\":4}}",
				 rs.sock);
	tcd_start(d, config);
	free(config);
	ck_assert(chmod(d->dir, 0711) == 0);
}

static void setup(void)
{
	if (rs.pid <= 0)
		redis_server_start(&rs);
	redis_server_flush(&rs);
}

START_TEST(one_memory_for_the_fleet)
{
	struct tcd a, b;
	start(&a);
	start(&b);
	struct tcc *ca = tcc_connect(&a), *cb = tcc_connect(&b);

	mem_ok(ca, "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"one\\n\"}");
	ck_assert_str_eq(mem_ok(cb, "{\"command\":\"view\",\"path\":\"/memories/a.md\"}"),
			 "Here's the content of /memories/a.md with line numbers:\n     1\tone");
	mem_ok(cb, "{\"command\":\"str_replace\",\"path\":\"/memories/a.md\",\"old_str\":\"one\",\"new_str\":\"two\"}");
	mem_ok(ca, "{\"command\":\"insert\",\"path\":\"/memories/a.md\",\"insert_line\":1,\"insert_text\":\"three\"}");
	ck_assert_str_eq(mem_ok(cb, "{\"command\":\"view\",\"path\":\"/memories/a.md\",\"view_range\":[2,-1]}"),
			 "Here's the content of /memories/a.md with line numbers:\n     2\tthree");
	mem_ok(cb, "{\"command\":\"create\",\"path\":\"/memories/dir/x.md\",\"file_text\":\"xx\"}");
	mem_ok(cb, "{\"command\":\"create\",\"path\":\"/memories/.hidden\",\"file_text\":\"h\"}");
	const char *t = mem_ok(ca, "{\"command\":\"view\",\"path\":\"/memories\"}");
	ck_assert_msg(str_has_prefix(t, "Here're the files and directories up to 2 levels deep in /memories, "
				     "excluding hidden items:\n") &&
		      strstr(t, "\n10B\t/memories/a.md\n2B\t/memories/dir/\n2B\t/memories/dir/x.md") &&
		      !strstr(t, ".hidden"), "%s", t);
	mem_err(ca, "{\"command\":\"str_replace\",\"path\":\"/memories/a.md\",\"old_str\":\"t\",\"new_str\":\"x\"}",
		"Multiple occurrences of old_str `t` in lines: 1, 2.");
	mem_err(ca, "{\"command\":\"create\",\"path\":\"/memories/dir\",\"file_text\":\"x\"}", "is a directory");
	mem_err(ca, "{\"command\":\"create\",\"path\":\"/memories/a.md/x\",\"file_text\":\"x\"}", "is a file");
	mem_err(ca, "{\"command\":\"view\",\"path\":\"/memories/../x\"}", "would escape");

	/* rename and delete, seen from the other daemon. */
	mem_ok(ca, "{\"command\":\"rename\",\"old_path\":\"/memories/a.md\",\"new_path\":\"/memories/dir/sub/b.md\"}");
	mem_err(cb, "{\"command\":\"view\",\"path\":\"/memories/a.md\"}", "does not exist");
	mem_ok(cb, "{\"command\":\"view\",\"path\":\"/memories/dir/sub/b.md\"}");
	mem_err(cb, "{\"command\":\"rename\",\"old_path\":\"/memories/dir\",\"new_path\":\"/memories/dir/in\"}",
		"into itself");
	mem_ok(cb, "{\"command\":\"rename\",\"old_path\":\"/memories/dir\",\"new_path\":\"/memories/moved\"}");
	ck_assert_str_eq(mem_ok(ca, "{\"command\":\"view\",\"path\":\"/memories/moved/sub/b.md\"}"),
			 "Here's the content of /memories/moved/sub/b.md with line numbers:\n     1\ttwo\n     2\tthree");
	ck_assert_str_eq(mem_ok(cb, "{\"command\":\"delete\",\"path\":\"/memories/moved\"}"),
			 "Successfully deleted /memories/moved");
	mem_err(ca, "{\"command\":\"view\",\"path\":\"/memories/moved/sub/b.md\"}", "does not exist");
	mem_err(ca, "{\"command\":\"delete\",\"path\":\"/memories/moved\"}", "does not exist");

	/* The limits hold in the store too. */
	char big[4200];
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	mem_err(ca, tcc_fmt(ca, "{\"command\":\"create\",\"path\":\"/memories/big\",\"file_text\":\"%s\"}", big),
		"memory.max_file_kb (4 KiB)");

	/* Another uid has a memory of its own there. */
	if (geteuid() == 0) {
		struct tcc *n = tcc_connect_as(&b, NOBODY, NOBODY);
		t = mem_ok(n, "{\"command\":\"view\",\"path\":\"/memories\"}");
		ck_assert_msg(!strstr(t, ".md"), "%s", t);
		mem_err(n, "{\"command\":\"view\",\"path\":\"/memories/.hidden\"}", "does not exist");
		mem_ok(n, "{\"command\":\"create\",\"path\":\"/memories/n.md\",\"file_text\":\"n\"}");
		mem_err(ca, "{\"command\":\"view\",\"path\":\"/memories/n.md\"}", "does not exist");
		tcc_close(n);
	}

	/* Nothing was kept in files. */
	char *p = xasprintf("%s/mem", a.dir);
	ck_assert(access(p, F_OK) < 0);
	free(p);
	tcc_close(ca);
	tcc_close(cb);
	ck_assert_int_eq(tcd_stop(&a), 0);
	ck_assert_int_eq(tcd_stop(&b), 0);
	tcd_free(&a);
	tcd_free(&b);
}
END_TEST

/* Sets fields of the hash of uid 0's memory ("it:memory:UID:memories")
 * directly, as a daemon of an older release or a hand may have: n pairs
 * of field and value (values of the given lengths). */
static void hset_raw(size_t n, const char *const *fv, const size_t *lens)
{
	redisContext *rc = redisConnectUnix(rs.sock);
	ck_assert(rc && !rc->err);
	char key[64];
	snprintf(key, sizeof(key), "it:memory:%u:memories", (unsigned)geteuid());
	const char *argv[16] = { "HSET", key };
	size_t argl[16] = { 4, strlen(key) };
	for (size_t i = 0; i < 2 * n && i < 14; i++) {
		argv[2 + i] = fv[i];
		argl[2 + i] = i % 2 ? lens[i / 2] : strlen(fv[i]);
	}
	redisReply *reply = redisCommandArgv(rc, (int)(2 + 2 * n), argv, argl);
	ck_assert(reply && reply->type == REDIS_REPLY_INTEGER);
	freeReplyObject(reply);
	redisFree(rc);
}

/* The same checks of what is written as in files; a file that holds a
 * NUL anyway is shown whole. */
START_TEST(text_only_on_every_write)
{
	struct tcd a;
	start(&a);
	struct tcc *c = tcc_connect(&a);
	mem_assert_text_only(c);
	const char *const fv[] = { "f:nul.md", "a\0b\nc\n\0", "v:nul.md", "1000" };
	const size_t lens[] = { 7, 4 };
	hset_raw(2, fv, lens);
	const char *t = mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/nul.md\"}");
	ck_assert_msg(str_has_prefix(t, "Here's the content of /memories/nul.md with line numbers:\n"
				     "     1\ta\xe2\x90\x80" "b\n     2\tc\n     3\t\xe2\x90\x80\n") &&
		      strstr(t, "2 NUL bytes"), "%s", t);
	/* Edits keep the NULs there are, and add none. */
	mem_ok(c, "{\"command\":\"insert\",\"path\":\"/memories/nul.md\",\"insert_line\":0,\"insert_text\":\"top\"}");
	mem_err(c, "{\"command\":\"insert\",\"path\":\"/memories/nul.md\",\"insert_line\":0,\"insert_text\":\"\\u0000\"}",
		"insert_text holds a NUL byte");
	mem_ok(c, "{\"command\":\"str_replace\",\"path\":\"/memories/nul.md\",\"old_str\":\"c\\n\\u0000\",\"new_str\":\"c\\n\"}");
	mem_ok(c, "{\"command\":\"str_replace\",\"path\":\"/memories/nul.md\",\"old_str\":\"\\u0000\",\"new_str\":\"\"}");
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/nul.md\"}"),
			 "Here's the content of /memories/nul.md with line numbers:\n     1\ttop\n     2\tab\n     3\tc");
	tcc_close(c);
	tcd_finish(&a);
}
END_TEST

/* The same checks of the paths named; names in the store that hold a
 * control character are listed escaped, one line each. */
START_TEST(paths_hold_no_control_characters)
{
	struct tcd a;
	start(&a);
	struct tcc *c = tcc_connect(&a);
	mem_assert_paths_checked(c);
	const char *const fv[] = { "f:fake\n4K\tinjected.md", "x", "d:line\xe2\x80\xa8sep", "1",
				   "f:line\xe2\x80\xa8sep/nel\xc2\x85\x7f.md", "x", "f:bad\xff\r.md", "x" };
	const size_t lens[] = { 1, 1, 1, 1 };
	hset_raw(4, fv, lens);
	mem_assert_names_escaped(c);
	tcc_close(c);
	tcd_finish(&a);
}
END_TEST

#define INSERTS 200

START_TEST(concurrent_inserts_lose_nothing)
{
	struct tcd a, b;
	start(&a);
	start(&b);
	struct tcc *conns[4] = { tcc_connect(&a), tcc_connect(&b), tcc_connect(&a), tcc_connect(&b) };
	mem_ok(conns[0], "{\"command\":\"create\",\"path\":\"/memories/log.md\",\"file_text\":\"\"}");

	const char *ids[INSERTS];
	for (int i = 0; i < INSERTS; i++) {
		struct tcc *c = conns[i % 4];
		ids[i] = tcc_fmt(c, "%lld", (long long)tcc_send_request(c, "tools/call", tcc_fmt(c,
			"{\"name\":\"memory\",\"arguments\":{\"command\":\"insert\",\"path\":\"/memories/log.md\","
			"\"insert_line\":0,\"insert_text\":\"entry-%03d\"}}", i)));
	}
	bool done[INSERTS];
	int n_done = 0, n_stale = 0;
	for (int i = 0; i < INSERTS; i++) {
		const struct json *r = tcc_wait_id(conns[i % 4], ids[i], 60000);
		ck_assert_msg(r, "insert %d got no answer", i);
		tc_assert_ok(r);
		const char *text = tj_str(r, "result.content.0.text");
		done[i] = !tj_bool(r, "result.isError");
		if (done[i]) {
			ck_assert_str_eq(text, "The file /memories/log.md has been edited.");
			n_done++;
		} else {
			ck_assert_msg(strstr(text, "changed after it was read") && strstr(text, "View it again"),
				      "%s", text);
			n_stale++;
		}
	}
	ck_assert_int_gt(n_done, 0);
	ck_assert_int_eq(n_done + n_stale, INSERTS);

	const char *t = mem_ok(conns[1], "{\"command\":\"view\",\"path\":\"/memories/log.md\"}");
	int lines = 0;
	for (const char *p = t; (p = strchr(p, '\n')); p++)
		lines++;
	ck_assert_int_eq(lines, n_done);
	for (int i = 0; i < INSERTS; i++) {
		char want[32];
		snprintf(want, sizeof(want), "\tentry-%03d\n", i);
		/* The last line has no newline after it. */
		const char *at = strstr(t, want);
		if (!at) {
			snprintf(want, sizeof(want), "\tentry-%03d", i);
			at = strstr(t, want);
			if (at && at[strlen(want)] != '\0')
				at = NULL;
		}
		ck_assert_msg(done[i] == (at != NULL), "insert %d: answered %s, %s in the file", i,
			      done[i] ? "done" : "view again", at ? "present" : "absent");
		if (at)
			ck_assert_msg(!strstr(at + 1, want), "insert %d is in the file twice", i);
	}
	fprintf(stderr, "concurrent inserts: %d done, %d asked to view again\n", n_done, n_stale);
	for (int i = 0; i < 4; i++)
		tcc_close(conns[i]);
	ck_assert_int_eq(tcd_stop(&a), 0);
	ck_assert_int_eq(tcd_stop(&b), 0);
	tcd_free(&a);
	tcd_free(&b);
}
END_TEST

START_TEST(redis_gone_and_back)
{
	struct tcd a;
	start(&a);
	struct tcc *c = tcc_connect(&a);
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"a\"}");
	redis_server_kill(&rs);
	const struct json *r = tcc_call(c, "memory", "{\"command\":\"view\",\"path\":\"/memories/a.md\"}");
	tc_assert_kind(r, "transient");
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "cannot be reached"));
	redis_server_start(&rs);
	/* A fresh server: the memory was in the old one's memory alone. */
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/b.md\",\"file_text\":\"b\"}");
	mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/b.md\"}");
	/* Redis forgets its scripts (SCRIPT FLUSH): loaded again. */
	redisContext *rc = redisConnectUnix(rs.sock);
	ck_assert(rc && !rc->err);
	redisReply *reply = redisCommand(rc, "SCRIPT FLUSH");
	ck_assert(reply && reply->type == REDIS_REPLY_STATUS);
	freeReplyObject(reply);
	redisFree(rc);
	for (int i = 0; i < 8; i++)	/* on every io thread's connection */
		mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/b.md\"}");
	tcc_close(c);
	tcd_finish(&a);
}
END_TEST

/*
 * A write Redis takes but does not answer (it stalls as it runs it): the
 * call says its outcome is not known, and no retry sends it again (a
 * second rename would report the change made as failed; a second insert
 * would insert twice). Once Redis is back, the change is there, once.
 */
START_TEST(unanswered_write_is_not_repeated)
{
	struct tcd a;
	/* One io thread, whose connection has loaded the script: the write
	 * is sent whole before Redis stalls. */
	char *config = xasprintf("{\"store\":{\"kind\":\"redis\",\"address\":\"unix:%s\",\"prefix\":\"it:\","
				 "\"timeout_ms\":500},\"memory\":{\"dir\":\"mem\"},\"limits\":{\"io_threads\":1}}",
				 rs.sock);
	tcd_start(&a, config);
	free(config);
	struct tcc *c = tcc_connect(&a);
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/n.md\",\"file_text\":\"one\\n\"}");
	mem_ok(c, "{\"command\":\"str_replace\",\"path\":\"/memories/n.md\",\"old_str\":\"one\",\"new_str\":\"two\"}");
	redis_server_pause(&rs, true);
	const struct json *r = tcc_call(c, "memory",
					"{\"command\":\"rename\",\"old_path\":\"/memories/n.md\",\"new_path\":\"/memories/m.md\"}");
	redis_server_pause(&rs, false);
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_int_eq(tj_int(r, "result._meta.toolcalld/attempts"), 1);
	const char *text = tj_str(r, "result.content.0.text");
	ck_assert_msg(strstr(text, "not known") && strstr(text, "View /memories/n.md"), "%s", text);
	/* Made once: there (once Redis has run what it took while stalled),
	 * and the old name gone. */
	bool err = true;
	ck_assert(tc_wait_until((mem(c, "{\"command\":\"view\",\"path\":\"/memories/m.md\"}", &err), !err),
				tc_wait_scaled(5000)));
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/m.md\"}"),
			 "Here's the content of /memories/m.md with line numbers:\n     1\ttwo");
	mem_err(c, "{\"command\":\"view\",\"path\":\"/memories/n.md\"}", "does not exist");
	tcc_close(c);
	tcd_finish(&a);
}
END_TEST

int main(void)
{
	const char *why;
	if (!redis_server_available(&why)) {
		fprintf(stderr, "SKIP %s\n", why);
		return TC_EXIT_SKIP;
	}
	Suite *s = suite_create("integ_memory_store");
	TCase *tc = tcase_create("memory in redis");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, one_memory_for_the_fleet);
	tcase_add_test(tc, text_only_on_every_write);
	tcase_add_test(tc, paths_hold_no_control_characters);
	tcase_add_test(tc, concurrent_inserts_lose_nothing);
	tcase_add_test(tc, redis_gone_and_back);
	tcase_add_test(tc, unanswered_write_is_not_repeated);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	/* One redis-server for all the cases: they run in this process. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	redis_server_free(&rs);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
