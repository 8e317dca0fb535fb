/* SPDX-License-Identifier: MIT */
/*
 * Tests of the pattern matcher (lib/regex*.c): ECMA-262 matching semantics
 * on UTF-8 subjects (NUL bytes included), what is refused and with which
 * message, and the cost bound: every search, whatever the pattern, takes
 * at most (len + 2) * (2 * regex_size() + 1) steps, counted, never timed;
 * when its budget runs out it stops, and schema_validate says so.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/regex/regex.h"
#include "lib/regex/regex_internal.h"
#include "lib/schema/schema.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"

#define MIB (1024 * 1024)

static const enum rx_mode all_modes[] = { RX_MODE_DFA, RX_MODE_NFA, RX_MODE_DFA_TINY };

static struct regex *compile_ok(const char *pattern)
{
	struct regex *re = NULL;
	char *err = NULL;

	ck_assert_msg(regex_compile(pattern, strlen(pattern), &re, &err) == 0, "pattern %s should compile: %s",
		      pattern, err ? err : "(no message)");
	ck_assert_ptr_nonnull(re);
	ck_assert_ptr_null(err);
	return re;
}

/* The bound lib/regex/regex.h promises for a search of len bytes. */
static uint64_t step_bound(const struct regex *re, size_t len)
{
	return ((uint64_t)len + 2) * (2 * (uint64_t)regex_size(re) + 1);
}

/* Feeds s to a stream in pieces of varying sizes, with budgets so small
 * that feeds stop midway and go on: the answer regex_search() gives for
 * the whole, within the stream's bound (lib/regex/regex.h); -1 when a
 * budget of 0 fed nothing. */
static int stream_search(const struct regex *re, const char *pattern, const char *s, size_t len)
{
	struct regex_stream *st = regex_stream_new(re);
	uint64_t steps = 0;
	size_t at = 0, piece = 1;
	int r = 0;

	while (at < len && r != 1) {
		size_t n = MIN(piece, len - at), used = 0;
		uint64_t budget = 1 + (piece * 37) % 200;
		uint64_t before = budget;

		r = regex_stream_feed(st, s + at, n, &budget, &used);
		ck_assert_msg(r == 1 || r == 0 || r == -E2BIG, "pattern %s: feed returned %d", pattern, r);
		ck_assert_msg(r != 0 || used == n, "pattern %s: a feed that ran through fed %zu of %zu", pattern,
			      used, n);
		steps += before - budget;
		at += used;
		piece = piece * 3 % 17 + 1;
	}
	if (r != 1) {
		uint64_t budget = UINT64_MAX;

		r = regex_stream_at_end(st, &budget);
		steps += UINT64_MAX - budget;
	}
	/* A feed may overshoot its budget by one byte's cost. */
	ck_assert_msg(steps <= ((uint64_t)len + 1) * (4 * (uint64_t)regex_size(re) + 4) + 64 * ((uint64_t)len + 1),
		      "pattern %s: the stream took %llu steps for %zu bytes", pattern, (unsigned long long)steps, len);
	regex_stream_free(st);
	return r;
}

/* Searches with every strategy, which must agree and stay within the
 * bound; returns the answer. */
static bool search_all(const struct regex *re, const char *pattern, const char *s, size_t len)
{
	int got = -1;

	for (size_t m = 0; m < ELEMENTSOF(all_modes); m++) {
		uint64_t budget = UINT64_MAX;
		int r = rx_search(re, s, len, &budget, all_modes[m]);

		ck_assert_msg(r == 0 || r == 1, "pattern %s: search returned %d", pattern, r);
		ck_assert_msg(UINT64_MAX - budget <= step_bound(re, len), "pattern %s: %llu steps for %zu bytes",
			      pattern, (unsigned long long)(UINT64_MAX - budget), len);
		ck_assert_msg(got < 0 || r == got, "pattern %s: the search strategies disagree", pattern);
		got = r;
	}
	ck_assert_msg(stream_search(re, pattern, s, len) == got, "pattern %s: the stream disagrees", pattern);
	return got == 1;
}

static bool matches_n(const char *pattern, const char *s, size_t len)
{
	struct regex *re = compile_ok(pattern);
	bool r = search_all(re, pattern, s, len);

	regex_free(re);
	return r;
}

#define assert_match(p, s) ck_assert_msg(matches_n(p, s, strlen(s)), "%s should match \"%s\"", p, s)
#define assert_no_match(p, s) ck_assert_msg(!matches_n(p, s, strlen(s)), "%s should not match \"%s\"", p, s)
/* With a length: the subject may hold NUL bytes. */
#define assert_match_n(p, s) ck_assert_msg(matches_n(p, s, sizeof(s) - 1), "%s should match", p)
#define assert_no_match_n(p, s) ck_assert_msg(!matches_n(p, s, sizeof(s) - 1), "%s should not match", p)

/* Asserts that a pattern is refused with exactly this message. */
static void refused(const char *pattern, size_t len, const char *message)
{
	struct regex *re = NULL;
	char *err = NULL;

	ck_assert_msg(regex_compile(pattern, len, &re, &err) == -EINVAL, "pattern %s should be refused", pattern);
	ck_assert_ptr_null(re);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(str_eq(err, message), "pattern %s: expected \"%s\", got \"%s\"", pattern, message, err);
	free(err);
}

#define assert_refused(p, msg) refused(p, strlen(p), msg)

/* ------------------------------------------------------------------------
 * Semantics.
 */

START_TEST(search_and_anchors)
{
	/* A search: anywhere in the subject. */
	assert_match("b", "abc");
	assert_match("bc", "abc");
	assert_no_match("cb", "abc");
	assert_match("", "");
	assert_match("", "abc");
	assert_match("x*", "abc");
	assert_no_match("a", "");

	/* ^ and $ are the subject's ends, never a line's (no m flag). */
	assert_match("^ab", "abc");
	assert_no_match("^bc", "abc");
	assert_match("bc$", "abc");
	assert_no_match("ab$", "abc");
	assert_no_match("^b", "a\nb");
	assert_no_match("a$", "a\nb");
	assert_no_match("a$", "a\n");
	assert_match("^$", "");
	assert_no_match("^$", "\n");
	/* Anchors anywhere: an assertion, not a character. */
	assert_no_match("a^b", "ab");
	assert_no_match("a$b", "ab");
	assert_match("$^", "");
	assert_no_match("$^", "a");
	assert_match("(^a|b)c", "xbc");
	assert_match("(^a|b)c", "ac");
	assert_no_match("(^a|b)c", "xac");
	assert_match("x|^y", "yz");
	assert_no_match("x|^y", "zy");
	assert_match("^(?:^)*a$", "a");
	assert_match("a(?:$)+", "ba");
	assert_match("(^)?b", "ab");
	assert_match("^a|b$", "xab");
	assert_no_match("^a|b$", "xbx");
}
END_TEST

START_TEST(alternation_and_groups)
{
	assert_match("^(?:ab|cd)+$", "abcdab");
	assert_no_match("^(?:ab|cd)+$", "abc");
	assert_match("^(?<year>\\d{4})-(\\d{2})$", "2024-05");
	/* Empty alternatives match the empty string. */
	assert_match("^(|a|)$", "");
	assert_match("^(|a|)$", "a");
	assert_no_match("^(|a|)$", "aa");
	assert_match("a||b", "zzz");
	assert_match("^(?:)$", "");
	assert_match("^()()a()$", "a");
	assert_match("^(a|)+$", "aaa");
	assert_match("^(?:a|ab)(?:c|bcd)(?:d*)$", "abcd");
	assert_match("^(?:(?:(?:a)))$", "a");
	assert_no_match("^(x|y)$", "xy");
}
END_TEST

START_TEST(quantifiers)
{
	assert_match("^a*$", "");
	assert_match("^a*$", "aaaa");
	assert_no_match("^a+$", "");
	assert_match("^a?b$", "b");
	assert_no_match("^a?b$", "aab");
	/* {n,m} edge cases. */
	assert_match("^a{0}b$", "b");
	assert_no_match("^a{0}b$", "ab");
	assert_match("^a{0,0}$", "");
	assert_match("^a{1,1}$", "a");
	assert_match("^a{0,1}$", "");
	assert_no_match("^a{0,1}$", "aa");
	assert_match("^a{3,}$", "aaaaaaa");
	assert_no_match("^a{3,}$", "aa");
	assert_match("^a{2,3}$", "aa");
	assert_match("^a{2,3}$", "aaa");
	assert_no_match("^a{2,3}$", "a");
	assert_no_match("^a{2,3}$", "aaaa");
	assert_match("^(?:ab){2}$", "abab");
	assert_no_match("^(?:ab){2}$", "aba");
	/* Braces that are no quantifier stand for themselves (Annex B). */
	assert_match("^a{,3}$", "a{,3}");
	assert_match("^a{1$", "a{1");
	assert_match("^a{x}$", "a{x}");
	assert_match("^a]b}c$", "a]b}c");
	/* Lazy forms match the same strings. */
	assert_match("^a{1,2}?b*?c+?d??$", "abbccd");
	assert_match("^a+?$", "aaa");
	/* Nested quantifiers. */
	assert_match("^(a{2}){3}$", "aaaaaa");
	assert_no_match("^(a{2}){3}$", "aaaaa");
	assert_no_match("^(a{2}){3}$", "aaaaaaa");
	assert_match("^((ab)*c)+$", "cabcababc");
	assert_no_match("^((ab)*c)+$", "cabca");
	assert_match("^(a?){3}$", "aa");
	assert_no_match("^(a?){3}$", "aaaa");
	assert_match("^(a*)*$", "aaa");
	assert_match("^(a*)+b$", "b");
	assert_match("^(?:a|b?)*c$", "ababbc");
	assert_match("^(x{1,1000})?$", "xxx");
	assert_match("^(?:a{2,3}){2,3}$", "aaaa");
	assert_match("^(?:a{2,3}){2,3}$", "aaaaaaaaa");
	assert_no_match("^(?:a{2,3}){2,3}$", "aaa");
	assert_no_match("^(?:a{2,3}){2,3}$", "aaaaaaaaaa");
}
END_TEST

START_TEST(nul_bytes)
{
	/* U+0000 is a byte like another, in patterns and in subjects. */
	assert_match_n("a\\0b", "xa\0by");
	assert_no_match_n("a\\0b", "xa\0\0by");
	assert_match_n("^a\\x00b$", "a\0b");
	assert_match_n("^a\\u0000b$", "a\0b");
	assert_match_n("^a.b$", "a\0b");
	assert_no_match_n("^a[^\\0]b$", "a\0b");
	assert_no_match_n("^[^\\0]*$", "ab\0c");
	assert_match_n("^[^\\0]*$", "abc");
	assert_match_n("^\\0*$", "\0\0\0");
	assert_match_n("c$", "ab\0c");
	assert_match_n("^\\0", "\0abc");
	assert_match_n("^x\\0*y$", "xy");
	/* Nothing stands for NUL any more: byte 0xFF is not it. */
	assert_no_match_n("^\\0$", "\xff");
	assert_no_match_n("^a[^b]c$", "a\xff\x63");
	ck_assert(matches_n("a\0b", "xa\0by", 5));	/* a raw NUL in a pattern is itself */
}
END_TEST

START_TEST(utf8_classes)
{
	/* One code point, whatever its length in bytes. */
	assert_match("^.$", "\xc3\xa9");
	assert_match("^.$", "\xe4\xb8\xad");
	assert_match("^.$", "\xf0\x9f\x98\x80");
	assert_no_match("^..$", "\xf0\x9f\x98\x80");
	assert_no_match("^.$", "\n");
	assert_no_match("^.$", "\r");
	assert_no_match("^.$", "\xe2\x80\xa8");	/* U+2028 */
	assert_match("^.$", "\xe2\x80\xa7");	/* U+2027 */
	assert_match("^.$", "\xe2\x80\xaa");	/* U+202A */
	assert_match("^[^]$", "\n");
	assert_no_match("[]", "abc");
	assert_match("^[^a]$", "\xc3\xa9");
	assert_match("^[^a]$", "\xf0\x9f\x98\x80");
	assert_no_match("^[^a]$", "a");

	/* Ranges across encoding lengths, at their edges. */
	assert_match("^[\\u007f-\\u0800]+$", "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80");
	assert_no_match("^[\\u007f-\\u0800]$", "\xe0\xa0\x81");
	assert_no_match("^[\\u007f-\\u0800]$", "~");
	assert_match("^[\\u0800-\\uffff]$", "\xef\xbf\xbf");
	assert_no_match("^[\\u0800-\\uffff]$", "\xf0\x90\x80\x80");
	assert_match("^[\\ud800\\udc00-\\udbff\\udfff]$", "\xf0\x90\x80\x80");	/* U+10000 */
	assert_match("^[\\ud800\\udc00-\\udbff\\udfff]$", "\xf4\x8f\xbf\xbf");	/* U+10FFFF */
	assert_no_match("^[\\ud800\\udc00-\\udbff\\udfff]$", "\xef\xbf\xbf");
	assert_match("^[\xc3\xa0-\xc3\xbf]+$", "\xc3\xa9\xc3\xa8");
	assert_no_match("^[\xc3\xa0-\xc3\xbf]$", "\xc3\x9f");
	assert_match("^[\\u4e00-\\u9fff]+$", "\xe4\xb8\xad\xe6\x96\x87");
	assert_no_match("^[^\\u4e00-\\u9fff]$", "\xe4\xb8\xad");
	assert_match("^[^\\u4e00-\\u9fff]$", "\xe4\xb7\xbf");	/* U+4DFF */
	/* A class with holes inside one lead byte's block. */
	assert_match("^[\\u0101\\u0103\\u0105]+$", "\xc4\x81\xc4\x83\xc4\x85");
	assert_no_match("^[\\u0101\\u0103\\u0105]$", "\xc4\x82");
	assert_match("^[^\\u0101\\u0103]$", "\xc4\x82");
	assert_no_match("^[^\\u0101\\u0103]$", "\xc4\x83");
	/* Class escapes are ASCII, as ECMA-262 defines them; \s is not. */
	assert_match("^\\d+$", "0123456789");
	assert_no_match("^\\d$", "\xd9\xa3");
	assert_no_match("^\\w$", "\xc3\xa9");
	assert_match("^\\W$", "\xc3\xa9");
	assert_match("^\\s+$", " \t\n\r\v\f\xc2\xa0\xe2\x80\x83\xe3\x80\x80\xef\xbb\xbf\xe2\x80\xa8");
	assert_no_match("\\s", "a\xe2\x80\x8b" "b");	/* ZERO WIDTH SPACE */
	assert_match("^[\\d-z]+$", "1-z");
	assert_match("^[\\b]$", "\b");
	assert_match("^\\cJ\\x41\\u0042\\t$", "\nAB\t");
	assert_match("^\\ud83d\\ude00$", "\xf0\x9f\x98\x80");
	assert_match("^\xc3\xa9+$", "\xc3\xa9\xc3\xa9");
	assert_match("^\\\xc3\xa9$", "\xc3\xa9");
	assert_no_match("^\xc3\xa9+$", "\xc3\xa9\xc3");
}
END_TEST

/* \b and \B, as ECMA-262 has them: between [A-Za-z0-9_] and anything
 * else (the subject's ends included), checked with every strategy. */
START_TEST(word_boundaries)
{
	assert_match("\\bfoo\\b", "foo");
	assert_match("\\bfoo\\b", "a foo.");
	assert_match("\\bfoo\\b", "(foo)");
	assert_no_match("\\bfoo\\b", "food");
	assert_no_match("\\bfoo\\b", "afoo");
	assert_no_match("\\bfoo\\b", "foo_");
	assert_match("\\bfoo\\b", "foo_ foo");
	assert_match("\\Boo\\B", "food");
	assert_no_match("\\Boo\\B", "foo");
	assert_match("\\B", "");
	assert_no_match("\\b", "");
	assert_match("\\b", "a");
	assert_no_match("\\b", "  ");
	assert_match("\\B", "  ");
	assert_match("a\\b", "a-");
	assert_no_match("a\\b", "ab");
	assert_match("\\b[a-z]+_ops\\b", "struct file_ops {");
	assert_no_match("\\b[a-z]+_ops\\b", "struct file_opsx {");
	assert_match("^\\bx", "x");
	assert_match("x\\b$", "ax");
	assert_match("(\\bab|cd)\\b", "zab cd");
	assert_no_match("(?:\\bab)+", "xab");
	/* non-ASCII letters are not word characters for \b */
	assert_no_match("\\b\u00e9t\u00e9\\b", "\u00e9t\u00e9");
	assert_match("x\\b", "x\u00e9");
	/* in a class, \b is a backspace; an assertion does not repeat */
	assert_match("[\\b]", "\b");
	assert_refused("\\b*", "nothing to repeat (at offset 2)");
	/* long subjects with many boundaries, through the DFA's cache */
	struct buf b = {0};
	for (int i = 0; i < 5000; i++)
		buf_puts(&b, i % 7 ? "word " : "wordy ");
	buf_puts(&b, "end");
	ck_assert(matches_n("\\bend\\b", buf_head(&b), buf_size(&b)));
	ck_assert(!matches_n("\\bwor\\b", buf_head(&b), buf_size(&b)));
	ck_assert(matches_n("y\\b", buf_head(&b), buf_size(&b)));
	buf_free(&b);
}
END_TEST

START_TEST(refusals)
{
	/* Each with its reason and where. */
	assert_refused("a(?=b)", "lookahead assertions are not supported (at offset 1)");
	assert_refused("a(?!b)", "lookahead assertions are not supported (at offset 1)");
	assert_refused("(?<=a)b", "lookbehind assertions are not supported (at offset 0)");
	assert_refused("(?<!a)b", "lookbehind assertions are not supported (at offset 0)");
	assert_refused("(a)\\1", "backreferences are not supported (at offset 3)");
	assert_refused("(?<n>a)\\k<n>", "named backreferences (\\k) are not supported (at offset 7)");
	assert_refused("\\p{L}", "Unicode property escapes (\\p, \\P) are not supported (at offset 0)");
	assert_refused("ab\\u{1F600}", "\\u{...} escapes are not supported (they need the u flag) (at offset 2)");
	assert_refused("\\ud800", "a lone surrogate (\\uD800-\\uDFFF) cannot be matched (at offset 0)");
	assert_refused("\\udc00", "a lone surrogate (\\uD800-\\uDFFF) cannot be matched (at offset 0)");
	assert_refused("\\a", "unknown escape (at offset 0)");
	assert_refused("\\x4", "\\x must be followed by two hex digits (at offset 0)");
	assert_refused("\\u12", "\\u must be followed by four hex digits (at offset 0)");
	assert_refused("\\012", "octal escapes are not supported (at offset 0)");
	assert_refused("\\c1", "\\c must be followed by a letter (at offset 0)");
	assert_refused("(?i)a", "invalid group (at offset 0)");
	assert_refused("(?<>a)", "invalid group name (at offset 0)");
	assert_refused("(a", "missing ')' (at offset 2)");
	assert_refused("a)", "unmatched ')' (at offset 1)");
	assert_refused("x[a", "missing ']' (at offset 1)");
	assert_refused("[z-a]", "range out of order in character class (at offset 0)");
	assert_refused("*a", "nothing to repeat (at offset 0)");
	assert_refused("a**", "nothing to repeat (at offset 2)");
	assert_refused("^*", "nothing to repeat (at offset 1)");
	assert_refused("a$+", "nothing to repeat (at offset 2)");
	assert_refused("(|+)", "nothing to repeat (at offset 2)");
	assert_refused("{1}", "nothing to repeat (at offset 0)");
	assert_refused("a{0}{2}", "nothing to repeat (at offset 4)");
	assert_refused("a{2,1}", "numbers out of order in {} quantifier (at offset 1)");
	assert_refused("a{40000}", "repeat count above 32767 (at offset 1)");
	assert_refused("a{1,40000}", "repeat count above 32767 (at offset 1)");
	assert_refused("a\\", "the pattern ends with a lone backslash (at offset 1)");
	assert_refused("\xc3", "invalid UTF-8 (at offset 0)");
	assert_refused("a\xed\xa0\x80", "invalid UTF-8 (at offset 1)");
}
END_TEST

START_TEST(size_limits)
{
	char deep[2 * 70 + 2];
	struct buf b = {};

	/* Repetitions expanded, programs are bounded. */
	assert_refused("(.{1000}){1000}", "the pattern is too large (at offset 2)");
	assert_refused("((a?){100}){100}", "the pattern is too large (at offset 11)");
	assert_refused("]{1,22222}", "the pattern is too large (at offset 1)");
	assert_refused("(a{1,1000}){1,60}", "the pattern is too large (at offset 11)");
	assert_refused("a{32767}", "the pattern is too large (at offset 1)");

	/* 64 nested groups, not 65. */
	for (int depth = 64; depth <= 65; depth++) {
		memset(deep, '(', depth);
		deep[depth] = 'a';
		memset(deep + depth + 1, ')', depth);
		deep[2 * depth + 1] = '\0';
		if (depth == 64) {
			regex_free(compile_ok(deep));
		} else
			assert_refused(deep, "groups nested too deeply (at offset 64)");
	}

	/* 4096 bytes of pattern, not one more. */
	for (int i = 0; i < 4096; i++)
		buf_putc(&b, "ab|"[i % 3]);
	regex_free(compile_ok(buf_head(&b)));
	buf_putc(&b, 'x');
	refused(buf_head(&b), buf_size(&b), "the pattern is longer than 4096 bytes (at offset 4096)");
	buf_free(&b);
}
END_TEST

/* CPU time this process has used, in milliseconds: unlike the wall clock,
 * not stretched by other work on a shared machine. */
static uint64_t cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A compile of the hardest 4 KiB patterns takes milliseconds; without the
 * size bound, expanding their repetitions would take minutes and GiBs. The
 * bound is generous for sanitizer builds and still fails without it. */
#define COMPILE_CPU_MS_MAX 3000

/* Compiles what can be compiled of the hardest 4 KiB patterns: compiling is
 * bounded in time, the programs in size, and a search in the steps
 * regex.h promises: (len + 2) * (2 * regex_size() + 1). */
START_TEST(compile_bounded)
{
	struct buf b = {};
	static const char *const bits[] = { "(?:[^\\u0100\\u0102]|(?:a|)?){2,7}", "[\\s\\S]{0,3}",
					    "((((((((a?){2}){2}){2}){2}){2}){2}){2})", "(?:.|\\n)*?",
					    "(.{1000}){1000}" };

	for (size_t k = 0; k < ELEMENTSOF(bits); k++) {
		struct regex *re = NULL;
		char *err = NULL;

		buf_clear(&b);
		while (buf_size(&b) + strlen(bits[k]) <= REGEX_PATTERN_MAX)
			buf_puts(&b, bits[k]);
		uint64_t t0 = cpu_ms();
		int r = regex_compile(buf_head(&b), buf_size(&b), &re, &err);
		uint64_t took = cpu_ms() - t0;
		ck_assert_msg(took <= COMPILE_CPU_MS_MAX, "%s...: compiling took %llu ms of CPU", bits[k],
			      (unsigned long long)took);
		if (r == 0) {
			const uint64_t bound = (3 + 2) * (2 * (uint64_t)regex_size(re) + 1);
			uint64_t budget = bound;

			ck_assert_uint_le(regex_size(re), REGEX_SIZE_MAX);
			/* -E2BIG would mean the promised steps did not suffice. */
			ck_assert_int_ge(regex_search(re, "abc", 3, &budget), 0);
		} else
			ck_assert_msg(strstr(err, "the pattern is too large"), "%s", err);
		free(err);
		regex_free(re);
	}
	/* A class of 896 code points apart, each its own range. */
	buf_clear(&b);
	buf_putc(&b, '[');
	for (uint32_t cp = 0x100; cp < 0x800; cp += 2)
		buf_printf(&b, "%c%c", (char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F)));
	buf_puts(&b, "]+");
	{
		struct regex *re = NULL;
		char *err = NULL;

		ck_assert_msg(regex_compile(buf_head(&b), buf_size(&b), &re, &err) == 0, "big class: %s", err);
		ck_assert(search_all(re, "big class", "x\xc4\x80\xc4\x82y", 6));
		ck_assert(!search_all(re, "big class", "x\xc4\x81y", 4));
		ck_assert(search_all(re, "big class", "\xdf\xbe", 2));
		ck_assert(!search_all(re, "big class", "\xdf\xbf", 2));
		regex_free(re);
	}
	buf_free(&b);
}
END_TEST

/* ------------------------------------------------------------------------
 * The cost bound.
 */

/* A subject of len bytes of a and b, the same at every run. */
static char *random_ab(size_t len)
{
	char *s = xmalloc(len);
	uint32_t x = 2463534242u;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		s[i] = (x & 1) ? 'a' : 'b';
	}
	return s;
}

/* Searches 1 MiB: no match, within the bound, with each strategy. */
static void assert_bounded(const char *pattern, const char *s, size_t len, int want)
{
	static const enum rx_mode modes[] = { RX_MODE_DFA, RX_MODE_NFA };
	struct regex *re = compile_ok(pattern);

	for (size_t m = 0; m < ELEMENTSOF(modes); m++) {
		uint64_t budget = UINT64_MAX, again = UINT64_MAX, steps;
		int r = rx_search(re, s, len, &budget, modes[m]);

		steps = UINT64_MAX - budget;
		ck_assert_msg(r == want, "%s: got %d, expected %d", pattern, r, want);
		ck_assert_msg(steps <= step_bound(re, len), "%s (size %zu): %llu steps for %zu bytes", pattern,
			      regex_size(re), (unsigned long long)steps, len);
		/* The same steps every time. */
		ck_assert_int_eq(rx_search(re, s, len, &again, modes[m]), r);
		ck_assert_uint_eq(again, budget);
		printf("regex: %-14s size %4zu, %s: %9llu steps for %zu bytes (%.1f per byte, bound %llu)\n",
		       pattern, regex_size(re), modes[m] == RX_MODE_NFA ? "nfa" : "dfa", (unsigned long long)steps, len,
		       (double)steps / len,
		       (unsigned long long)step_bound(re, len));
	}
	regex_free(re);
}

START_TEST(bounded_on_a_mebibyte)
{
	_cleanup_free_ char *ab = random_ab(MIB);
	_cleanup_free_ char *a = xmalloc(MIB);
	_cleanup_free_ char *runs = xmalloc(MIB);

	memset(a, 'a', MIB);
	/* Runs of 29 a's: (a?){30}a{30} never finds its 30. */
	for (size_t i = 0; i < MIB; i++)
		runs[i] = i % 30 == 29 ? 'b' : 'a';

	/* Backtracking would take exponential time or build exponential
	 * automata on these; here each costs at most its bound. */
	assert_bounded("a[ab]{20}c", ab, MIB, 0);
	assert_bounded("(a|aa)*b", a, MIB, 0);
	assert_bounded("(a*)*b", a, MIB, 0);
	assert_bounded("(a?){30}a{30}", runs, MIB, 0);
	assert_bounded("(x+x+)+y", a, MIB, 0);
	assert_bounded("^(\\w+\\s?)*$", ab, MIB, 1);
	memset(runs + MIB - 30, 'a', 29);
	runs[MIB - 1] = 'c';
	assert_bounded("(?:a|b)*a{29}c", runs, MIB, 1);
}
END_TEST

/* Ordinary patterns cost about a step per byte on long subjects: the DFA
 * states are cached. */
START_TEST(ordinary_patterns_are_cheap)
{
	static const char *const patterns[] = { "^[^\\n]*$", "^[a-z ]*$", "\\.py$", "^\\S+( \\S+)*$" };
	_cleanup_free_ char *text = xmalloc(MIB);

	for (size_t i = 0; i < MIB; i++)
		text[i] = "lorem ipsum dolor sit amet"[i % 26];
	text[MIB - 1] = 'x';
	for (size_t k = 0; k < ELEMENTSOF(patterns); k++) {
		struct regex *re = compile_ok(patterns[k]);
		uint64_t budget = UINT64_MAX;
		int r = regex_search(re, text, MIB, &budget);

		ck_assert_int_eq(r, (k == 2 ? 0 : 1));
		ck_assert_msg(UINT64_MAX - budget < 2 * MIB, "%s: %llu steps on 1 MiB", patterns[k],
			      (unsigned long long)(UINT64_MAX - budget));
		regex_free(re);
	}
}
END_TEST

START_TEST(budget_exhaustion)
{
	struct regex *re = compile_ok("a[ab]{20}c");
	_cleanup_free_ char *ab = random_ab(64 * 1024);
	uint64_t needed = UINT64_MAX, budget;

	ck_assert_int_eq(regex_search(re, ab, 64 * 1024, &needed), 0);
	needed = UINT64_MAX - needed;

	/* Exactly enough. */
	budget = needed;
	ck_assert_int_eq(regex_search(re, ab, 64 * 1024, &budget), 0);
	ck_assert_uint_eq(budget, 0);
	budget = needed + 5;
	ck_assert_int_eq(regex_search(re, ab, 64 * 1024, &budget), 0);
	ck_assert_uint_eq(budget, 5);
	/* One step short, or far short: stopped, the budget spent. */
	budget = needed - 1;
	ck_assert_int_eq(regex_search(re, ab, 64 * 1024, &budget), -E2BIG);
	ck_assert_uint_eq(budget, 0);
	budget = 1000;
	ck_assert_int_eq(regex_search(re, ab, 64 * 1024, &budget), -E2BIG);
	ck_assert_uint_eq(budget, 0);
	budget = 0;
	ck_assert_int_eq(regex_search(re, "", 0, &budget), -E2BIG);
	regex_free(re);
}
END_TEST

/* A JSON document {"s": "<len bytes of s>"}. */
static struct json_doc *doc_with_string(const char *s, size_t len)
{
	struct buf b = {};
	struct json_doc *doc = NULL;
	struct json_err jerr;

	buf_puts(&b, "{\"s\": \"");
	buf_append(&b, s, len);
	buf_puts(&b, "\"}");
	ck_assert_int_eq(json_parse(buf_head(&b), buf_size(&b), 0, 0, &doc, &jerr), 0);
	buf_free(&b);
	return doc;
}

static struct schema *schema_ok(const char *text)
{
	struct schema *s = NULL;
	char *err = NULL;

	ck_assert_msg(schema_compile_text(text, strlen(text), &s, &err) == 0, "%s", err);
	return s;
}

/* A pattern too expensive for a value stops the validation, whatever the
 * time; an ordinary one on the largest message does not. */
START_TEST(budget_in_validation)
{
	struct schema *s = schema_ok("{\"properties\": {\"s\": {\"pattern\": \"a[ab]{20}c\"}}}");
	struct schema *plain = schema_ok("{\"properties\": {\"s\": {\"pattern\": \"^[^\\\\n]*$\"},"
					 " \"t\": {\"pattern\": \"x\"}}}");
	_cleanup_free_ char *ab = random_ab(8 * MIB);
	struct json_doc *doc = doc_with_string(ab, 8 * MIB);
	struct schema_errors errs = {};

	ck_assert(!schema_validate(s, json_doc_root(doc), &errs));
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_str_eq(errs.v[0].path, "/s");
	ck_assert_str_eq(errs.v[0].message,
			 "validation stopped: pattern 'a[ab]{20}c' is too expensive to match against this value");
	schema_errors_clear(&errs);
	ck_assert(!schema_validate(s, json_doc_root(doc), NULL));
	/* A shorter value is searched in full: the ordinary error. */
	json_doc_unref(doc);
	doc = doc_with_string(ab, 64 * 1024);
	ck_assert(!schema_validate(s, json_doc_root(doc), &errs));
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_str_eq(errs.v[0].message, "must match pattern 'a[ab]{20}c'");
	schema_errors_clear(&errs);

	json_doc_unref(doc);
	doc = doc_with_string(ab, 8 * MIB);
	ck_assert(schema_validate(plain, json_doc_root(doc), &errs));
	ck_assert_uint_eq(errs.n, 0);
	json_doc_unref(doc);
	schema_free(plain);
	schema_free(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("regex");
	TCase *sem = tcase_create("semantics");
	TCase *cost = tcase_create("cost");

	tcase_add_test(sem, search_and_anchors);
	tcase_add_test(sem, alternation_and_groups);
	tcase_add_test(sem, quantifiers);
	tcase_add_test(sem, nul_bytes);
	tcase_add_test(sem, utf8_classes);
	tcase_add_test(sem, refusals);
	tcase_add_test(sem, word_boundaries);
	tcase_add_test(sem, size_limits);
	tcase_add_test(sem, compile_bounded);
	suite_add_tcase(s, sem);
	tcase_set_timeout(cost, 120);
	tcase_add_test(cost, bounded_on_a_mebibyte);
	tcase_add_test(cost, ordinary_patterns_are_cheap);
	tcase_add_test(cost, budget_exhaustion);
	tcase_add_test(cost, budget_in_validation);
	suite_add_tcase(s, cost);
	return run_suite(s);
}
