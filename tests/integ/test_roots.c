/* SPDX-License-Identifier: MIT */
/*
 * MCP roots (CONTRACT §12), with a fake MCP client that declares the roots
 * capability and answers the daemon's roots/list: allowed roots become the
 * session's workspaces (the first the primary, relative paths resolve
 * there, absolute paths may name any), a root outside workspaces.allowed
 * is left out and reported in a session.roots event, list_changed asks
 * again, shell runs in the primary and may write in every root, and an
 * answer with no allowed root keeps initialize's workspace.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define CFG "{\"workspaces\":{\"allowed\":[\"@DIR@/allowed\"]},\"socket_mode\":\"0600\"," \
	    "\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}}}"

/* Answers the daemon's roots/list with the roots (JSON array text). */
static void answer_roots(struct tcc *c, const char *roots)
{
	const struct json *rq = tcc_wait_daemon_request(c, "roots/list", 5000);
	ck_assert_msg(rq, "the daemon never asked for the roots");
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"roots\":%s}}",
			    tcc_raw(c, tj(rq, "id")), roots));
}

static void mkdir_in(struct tcd *d, const char *rel)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", d->dir, rel);
	ck_assert_int_eq(mkdir(p, 0755), 0);
}

static bool exists_in(struct tcd *d, const char *rel)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", d->dir, rel);
	return access(p, F_OK) == 0;
}

static const struct json *write_file(struct tcc *c, const char *path, const char *content)
{
	_cleanup_free_ char *q = tj_quote(path);
	return tcc_call(c, "write_file", tcc_fmt(c, "{\"path\":%s,\"content\":\"%s\"}", q, content));
}

/* Starts the daemon with DIR/allowed/{a,b c} and DIR/elsewhere made. */
static void start_with(struct tcd *d, const char *config)
{
	const struct tcd_opts o = { .config = config };
	tcd_prepare(d, &o);
	mkdir_in(d, "allowed");
	mkdir_in(d, "allowed/a");
	mkdir_in(d, "allowed/b c");
	mkdir_in(d, "elsewhere");
	tcd_spawn(d, &o);
	ck_assert_int_eq(tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS), 0);
}

static void start(struct tcd *d)
{
	start_with(d, CFG);
}

/* Connects a client declaring roots, through initialize and initialized. */
static struct tcc *roots_client(struct tcd *d)
{
	struct tcc *c = tcc_connect(d);
	tc_assert_ok(tcc_request(c, "initialize", "{\"protocolVersion\":\"2025-11-25\","
				 "\"capabilities\":{\"roots\":{\"listChanged\":true}},"
				 "\"clientInfo\":{\"name\":\"fake-host\",\"version\":\"1\"}}"));
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	return c;
}

START_TEST(roots_become_workspaces)
{
	struct tcd d;
	start(&d);
	struct tcc *ev = tcc_connect(&d);
	tc_assert_ok(tcc_request(ev, "events/subscribe", "{\"types\":[\"session.roots\"]}"));
	struct tcc *c = roots_client(&d);
	answer_roots(c, tcc_fmt(c, "[{\"uri\":\"file://%s/allowed/a\",\"name\":\"a\"},"
				"{\"uri\":\"file://localhost%s/allowed/b%%20c\"},"
				"{\"uri\":\"file://%s/elsewhere\"},{\"uri\":\"https://example.com/\"},"
				"{\"name\":\"no uri\"}]", d.dir, d.dir, d.dir));

	const struct json *e = tcc_wait_event(ev, "session.roots", 5000);
	ck_assert_msg(e, "no session.roots event");
	_cleanup_free_ char *t = tj_text(e);
	ck_assert_msg(tj_len(e, "workspaces") == 2, "%s", t);
	const struct json *w = e;
	_cleanup_free_ char *a = xasprintf("%s/allowed/a", d.dir), *b = xasprintf("%s/allowed/b c", d.dir);
	_cleanup_free_ char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
	ck_assert_str_eq(tj_str(w, "workspaces.0"), ra);
	ck_assert_str_eq(tj_str(w, "workspaces.1"), rb);
	ck_assert_msg(tj_len(w, "refused") == 3, "%s", t);
	ck_assert_msg(strstr(tj_str(w, "refused.0.uri"), "/elsewhere"), "%s", t);
	ck_assert_msg(strstr(tj_str(w, "refused.0.reason"), "workspaces.allowed"), "%s", t);
	_cleanup_free_ char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "left out"), "%s", log);

	/* Relative paths: the primary; absolute ones: any root, none else. */
	tc_assert_ok(write_file(c, "rel.txt", "1"));
	ck_assert(exists_in(&d, "allowed/a/rel.txt"));
	_cleanup_free_ char *in_b = xasprintf("%s/abs.txt", rb);
	tc_assert_ok(write_file(c, in_b, "2"));
	ck_assert(exists_in(&d, "allowed/b c/abs.txt"));
	_cleanup_free_ char *out = xasprintf("%s/elsewhere/no.txt", d.dir);
	tc_assert_kind(write_file(c, out, "3"), "permission_denied");
	ck_assert(!exists_in(&d, "elsewhere/no.txt"));
	const struct json *r = tcc_call(c, "read_file", tcc_fmt(c, "{\"path\":\"%s/abs.txt\"}", rb));
	tc_assert_ok(r);

	/* Shell: cwd is the primary; every root is writable. */
	r = tcc_shell(c, "pwd");
	tc_assert_ok(r);
	_cleanup_free_ char *pwd = xasprintf("%s\n", ra);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), pwd);
	_cleanup_free_ char *cmd = xasprintf("echo s > '%s/sh.txt'", rb);
	r = tcc_shell(c, cmd);
	tc_assert_ok(r);
	ck_assert_msg(!tj_bool(r, "result.isError"), "%s", tj_str(r, "result.content.0.text"));
	ck_assert(exists_in(&d, "allowed/b c/sh.txt"));
	/* Sandboxed: a directory that is no root stays read-only. */
	_cleanup_free_ char *enforced = tj_text(tj(r, "result.structuredContent.sandbox.enforced"));
	if (strstr(enforced, "landlock")) {
		_cleanup_free_ char *cmd2 = xasprintf("echo s > '%s/elsewhere/sh.txt'", d.dir);
		r = tcc_shell(c, cmd2);
		ck_assert(tj_bool(r, "result.isError"));
		ck_assert(!exists_in(&d, "elsewhere/sh.txt"));
	} else {
		fprintf(stderr, "roots_become_workspaces: no landlock here, the write outside is not tried\n");
	}

	/* list_changed: asked again; now b c alone. */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}");
	answer_roots(c, tcc_fmt(c, "[{\"uri\":\"file://%s/allowed/b%%20c\"}]", d.dir));
	e = tcc_wait_event(ev, "session.roots", 5000);
	ck_assert_msg(e, "no session.roots event after list_changed");
	w = e;
	ck_assert_int_eq(tj_len(w, "workspaces"), 1);
	ck_assert_str_eq(tj_str(w, "workspaces.0"), rb);
	tc_assert_ok(write_file(c, "second.txt", "4"));
	ck_assert(exists_in(&d, "allowed/b c/second.txt"));

	/* No allowed root: initialize's workspace again. */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}");
	answer_roots(c, tcc_fmt(c, "[{\"uri\":\"file://%s/elsewhere\"}]", d.dir));
	e = tcc_wait_event(ev, "session.roots", 5000);
	ck_assert_msg(e, "no session.roots event for a list with nothing allowed");
	w = e;
	_cleanup_free_ char *rws = realpath(d.ws, NULL);
	ck_assert_str_eq(tj_str(w, "workspaces.0"), rws);
	tc_assert_ok(write_file(c, "back.txt", "5"));
	_cleanup_free_ char *back = tcd_ws_path(&d, "back.txt");
	ck_assert_int_eq(access(back, F_OK), 0);

	tcc_close(c);
	tcc_close(ev);
	tcd_finish(&d);
}
END_TEST

/* The audit file's text (empty when there is none yet). */
static char *audit_text(const struct tcd *d)
{
	_cleanup_free_ char *path = xasprintf("%s/audit.log", d->dir);
	char *t = access(path, F_OK) == 0 ? tcd_read(d, path, NULL) : NULL;
	return t ? t : xstrdup("");
}

/* With several roots, policy, hooks and the audit see them all: a trusted
 * primary does not vouch for an untrusted second root, a pre-call hook
 * gets every root, and the audit line lists them. */
START_TEST(roots_seen_by_policy_hooks_audit)
{
	struct tcd d;
	start_with(&d, "{\"workspaces\":{\"allowed\":[\"@DIR@/allowed\"]},\"socket_mode\":\"0600\","
		       "\"audit_log\":\"@DIR@/audit.log\",\"audit_fsync_ms\":50,"
		       "\"confirmation\":{\"trusted_workspaces\":[\"@DIR@/allowed/a\"],"
		       "\"trusted_workspace_overrides\":{\"write\":\"auto\"}},"
		       "\"hooks\":{\"pre_call\":[{\"match\":\"stat\",\"command\":[\"/bin/sh\",\"@DIR@/hook.sh\"]}]}}");
	_cleanup_free_ char *a = xasprintf("%s/allowed/a", d.dir), *b = xasprintf("%s/allowed/b c", d.dir);
	_cleanup_free_ char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
	/* The hook denies, saying whether its input named both roots. */
	_cleanup_free_ char *hook = xasprintf("%s/hook.sh", d.dir);
	_cleanup_free_ char *script = xasprintf(
		"in=$(cat)\ncase \"$in\" in\n*'\"workspaces\":[\"%s\",\"%s\"]'*) r=both-roots ;;\n*) r=not-both ;;\nesac\n"
		"echo \"{\\\"decision\\\":\\\"deny\\\",\\\"reason\\\":\\\"$r\\\"}\"\n", ra, rb);
	tc_write_file_atomic(hook, script, strlen(script));
	struct tcc *ev = tcc_connect(&d);
	tc_assert_ok(tcc_request(ev, "events/subscribe", "{\"types\":[\"session.roots\"]}"));
	struct tcc *c = roots_client(&d);
	answer_roots(c, tcc_fmt(c, "[{\"uri\":\"file://%s/allowed/a\"}]", d.dir));
	ck_assert_ptr_nonnull(tcc_wait_event(ev, "session.roots", 5000));
	/* Trusted alone: writes run without asking. */
	tc_assert_ok(write_file(c, "t.txt", "1"));
	ck_assert(exists_in(&d, "allowed/a/t.txt"));

	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}");
	answer_roots(c, tcc_fmt(c, "[{\"uri\":\"file://%s/allowed/a\"},{\"uri\":\"file://%s/allowed/b%%20c\"}]",
				d.dir, d.dir));
	ck_assert_ptr_nonnull(tcc_wait_event(ev, "session.roots", 5000));
	/* With an untrusted root beside it, a write needs confirmation
	 * (and nobody is there to give it). */
	const struct json *r = write_file(c, "u.txt", "2");
	tc_assert_kind(r, "user_denied");
	ck_assert(!exists_in(&d, "allowed/a/u.txt"));

	r = tcc_call(c, "stat", "{\"path\":\".\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "both-roots"), "%s", tj_str(r, "error.message"));

	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"t.txt\"}"));
	_cleanup_free_ char *want = xasprintf("\"workspaces\":[\"%s\",\"%s\"]", ra, rb);
	char *text = NULL;
	bool seen = tc_wait_until((free(text), text = audit_text(&d), strstr(text, "\"read_file\"") != NULL), 5000);
	ck_assert_msg(seen && strstr(text, want), "%s", text);
	free(text);
	tcc_close(ev);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Hostile answers: junk ids and malformed answers change nothing and
 * break nothing; a client that never answers keeps its workspace. */
START_TEST(roots_hostile_answers)
{
	struct tcd d;
	start(&d);
	struct tcc *c = roots_client(&d);
	const struct json *rq = tcc_wait_daemon_request(c, "roots/list", 5000);
	ck_assert_ptr_nonnull(rq);
	ck_assert_msg(tj_str(rq, "id") && !strncmp(tj_str(rq, "id"), "tc-", 3), "id: %s", tcc_raw(c, tj(rq, "id")));
	/* Answers to nothing, then a malformed answer to the real request. */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"tc-999\",\"result\":{\"roots\":[]}}");
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"tc-1x\",\"result\":{}}");
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"roots\":7},\"error\":{}}",
			    tcc_raw(c, tj(rq, "id"))));
	ck_assert(tcc_quiet(c, 300));
	tc_assert_ok(write_file(c, "still.txt", "1"));
	_cleanup_free_ char *p = tcd_ws_path(&d, "still.txt");
	ck_assert_int_eq(access(p, F_OK), 0);
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A client without the capability is never asked. */
START_TEST(roots_not_asked_without_capability)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	tcc_initialize(c, NULL);
	ck_assert(tcc_quiet(c, 300));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("integ_roots");
	TCase *tc = tcase_create("roots");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, roots_become_workspaces);
	tcase_add_test(tc, roots_seen_by_policy_hooks_audit);
	tcase_add_test(tc, roots_hostile_answers);
	tcase_add_test(tc, roots_not_asked_without_capability);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
