/* SPDX-License-Identifier: MIT */
/*
 * Call hooks (lib/hooks/hooks.c): the glob that picks the tools a hook sees and
 * the decisions a pre-call hook may print (anything else is refused, so
 * the call is denied).
 */
#include <check.h>
#include <string.h>

#include "lib/hooks/hooks.h"
#include "proto/json.h"
#include "tests/unit/check_main.h"

START_TEST(glob_matching)
{
	ck_assert(hook_glob_match("*", "shell"));
	ck_assert(hook_glob_match("read_*", "read_file"));
	ck_assert(!hook_glob_match("read_*", "write_file"));
	ck_assert(hook_glob_match("?hell", "shell"));
	ck_assert(!hook_glob_match("?hell", "sshell"));
	ck_assert(hook_glob_match("[rw]*_file", "write_file"));
	ck_assert(!hook_glob_match("[!rw]*_file", "write_file"));
	ck_assert(hook_glob_match("fs.*", "fs.read"));
	ck_assert(!hook_glob_match("shell", "shell2"));
	/* No escapes: a backslash is a plain character. */
	ck_assert(hook_glob_match("a\\*", "a\\bc"));
	ck_assert(!hook_glob_match("a\\*", "a*"));
}
END_TEST

static enum hook_decision parse_ok(const char *text, struct hook_verdict *v)
{
	char *err = NULL;
	int r = hook_parse_verdict(text, strlen(text), v, &err);
	if (r < 0)
		ck_abort_msg("'%s' refused: %s", text, err);
	return v->decision;
}

START_TEST(decisions)
{
	struct hook_verdict v;
	ck_assert_int_eq(parse_ok("", &v), HOOK_NONE);
	ck_assert_int_eq(parse_ok(" \n\t", &v), HOOK_NONE);
	ck_assert_int_eq(parse_ok("{\"decision\":\"allow\"}\n", &v), HOOK_ALLOW);
	ck_assert_ptr_null(v.args_doc);
	hook_verdict_clear(&v);
	ck_assert_int_eq(parse_ok("{\"decision\":\"prompt\"}", &v), HOOK_PROMPT);
	ck_assert_int_eq(parse_ok("{\"decision\":\"deny\",\"reason\":\"not here\"}", &v), HOOK_DENY);
	ck_assert_str_eq(v.message, "not here");
	hook_verdict_clear(&v);
	ck_assert_int_eq(parse_ok("{\"decision\":\"allow\",\"arguments\":{\"path\":\"b\"}}", &v), HOOK_ALLOW);
	ck_assert_ptr_nonnull(v.args_doc);
	ck_assert_str_eq(json_str(json_get(v.args, "path")), "b");
	hook_verdict_clear(&v);
}
END_TEST

START_TEST(refused_output)
{
	static const char *const bad[] = {
		"hello",
		"[]",
		"{}",
		"{\"decision\":\"maybe\"}",
		"{\"decision\":1}",
		"{\"decision\":\"allow\\u0000\"}",
		"{\"decision\":\"deny\",\"reason\":5}",
		"{\"decision\":\"allow\",\"arguments\":[1]}",
		"{\"decision\":\"allow\",\"extra\":true}",
		"{\"decision\":\"allow\"} {\"decision\":\"deny\"}",
		"{\"decision\":\"allow\",\"decision\":\"deny\"}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct hook_verdict v;
		char *err = NULL;
		int r = hook_parse_verdict(bad[i], strlen(bad[i]), &v, &err);
		if (r >= 0)
			ck_abort_msg("'%s' accepted", bad[i]);
		ck_assert_ptr_nonnull(err);
		ck_assert_ptr_null(v.args_doc);
		free(err);
	}
}
END_TEST

static Suite *hooks_suite(void)
{
	Suite *s = suite_create("hooks");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, glob_matching);
	tcase_add_test(tc, decisions);
	tcase_add_test(tc, refused_output);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(hooks_suite());
}
