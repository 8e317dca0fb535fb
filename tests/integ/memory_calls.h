/* SPDX-License-Identifier: MIT */
/*
 * Calls of the memory tool for its integration tests (test_memory.c,
 * test_memory_store.c): each returns the result's text, the call itself
 * having succeeded, and asserts whether the result is an error.
 */
#ifndef TC_TEST_MEMORY_CALLS_H
#define TC_TEST_MEMORY_CALLS_H

#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "tests/integ/harness.h"

/* Runs the memory tool with args; returns the result's text and sets
 * *is_error. */
static inline const char *mem(struct tcc *c, const char *args, bool *is_error)
{
	const struct json *r = tcc_call(c, "memory", args);
	tc_assert_ok(r);
	*is_error = tj_bool(r, "result.isError");
	const char *text = tj_str(r, "result.content.0.text");
	ck_assert_ptr_nonnull(text);
	return text;
}

/* As mem(), asserting the result is not an error. */
static inline const char *mem_ok(struct tcc *c, const char *args)
{
	bool err;
	const char *text = mem(c, args, &err);
	ck_assert_msg(!err, "memory %s failed: %s", args, text);
	return text;
}

/* As mem(), asserting an error whose text holds want. */
static inline void mem_err(struct tcc *c, const char *args, const char *want)
{
	bool err;
	const char *text = mem(c, args, &err);
	ck_assert_msg(err, "memory %s did not fail: %s", args, text);
	ck_assert_msg(strstr(text, want), "memory %s: '%s' lacks '%s'", args, text, want);
}

#endif
