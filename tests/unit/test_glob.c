/* SPDX-License-Identifier: MIT */
/*
 * Tests of the glob matcher (lib/glob/glob.c): what each form matches, held
 * against fnmatch(FNM_PATHNAME) on many generated patterns and paths where
 * the two agree by definition (no braces, no "**"), brace expansion against
 * matching each alternative alone, pruning (glob_may_match_below never
 * prunes a directory holding a match), the bounds on hostile patterns, and
 * the regex finder's columns (lib/regex/regex_find.c).
 */
#include <check.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "lib/glob/glob.h"
#include "lib/regex/regex.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"

static struct glob *compile_ok(const char *p)
{
	struct glob *g = NULL;
	char *err = NULL;
	ck_assert_msg(glob_compile(p, strlen(p), &g, &err) == 0, "%s: %s", p, err);
	return g;
}

static bool m(const char *pattern, const char *path)
{
	struct glob *g = compile_ok(pattern);
	bool r = glob_match(g, path, strlen(path));
	glob_free(g);
	return r;
}

START_TEST(forms)
{
	static const struct {
		const char *pattern, *path;
		bool match;
	} cases[] = {
		{ "*.c", "a.c", true }, { "*.c", "src/a.c", false }, { "*.c", ".hidden.c", true },
		{ "*", "", true }, { "?", "", false }, { "?", "é", true }, { "?", "/", false },
		{ "a?c", "abc", true }, { "a?c", "a/c", false },
		{ "**/*.c", "a.c", true }, { "**/*.c", "x/y/z/a.c", true }, { "**/*.c", "x/a.h", false },
		{ "src/**/*.h", "src/a.h", true }, { "src/**/*.h", "src/x/y/a.h", true }, { "src/**/*.h", "srcx/a.h", false },
		{ "src/**", "src/a", true }, { "src/**", "src/a/b", true }, { "src/**", "src", false },
		{ "**", "a/b/c", true }, { "a**b", "axxb", true }, { "a**b", "ax/xb", false },
		{ "[abc].c", "b.c", true }, { "[abc].c", "d.c", false }, { "[a-c]x", "cx", true },
		{ "[!a-c]x", "dx", true }, { "[!a-c]x", "ax", false }, { "[^a]", "b", true }, { "[]]", "]", true },
		{ "[!]]", "a", true }, { "[a-]", "-", true }, { "[é-ë]", "ê", true }, { "[/]", "/", false },
		{ "[abc", "[abc", true }, { "{a,b}.c", "b.c", true }, { "{a,b}.c", "c.c", false },
		{ "src/*.{h,c}", "src/x.h", true }, { "{a,{b,c}d}", "cd", true }, { "{a,{b,c}d}", "c", false },
		{ "{a}", "{a}", true }, { "{a,b", "{a,b", true }, { "x{,y}", "x", true }, { "x{,y}", "xy", true },
		{ "\\*", "*", true }, { "\\*", "a", false }, { "\\{a,b}", "{a,b}", true },
		{ "*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false },
		{ "**/**/**/x", "a/b/x", true }, { "a/**/b", "a/b", true }, { "a/**/b", "a/x/y/b", true },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		ck_assert_msg(m(cases[i].pattern, cases[i].path) == cases[i].match, "%s on %s: expected %d",
			      cases[i].pattern, cases[i].path, cases[i].match);
}
END_TEST

/* A random string over a small alphabet that makes glob forms. */
static void gen(char *out, size_t max, const char *alphabet[], size_t n_alpha, unsigned *seed)
{
	size_t len = (size_t)(rand_r(seed) % 7), k = 0;
	out[0] = '\0';
	for (size_t i = 0; i < len; i++) {
		const char *piece = alphabet[(size_t)rand_r(seed) % n_alpha];
		size_t pl = strlen(piece);
		if (k + pl + 1 > max)
			break;
		memcpy(out + k, piece, pl);
		k += pl;
		out[k] = '\0';
	}
}

/* Without braces and "**", the matcher is fnmatch(FNM_PATHNAME). */
START_TEST(against_fnmatch)
{
	static const char *pat_alpha[] = { "a", "b", "/", "*", "?", "[ab]", "[!a]", "[a-b]", "." };
	static const char *path_alpha[] = { "a", "b", "/", ".", "c" };
	unsigned seed = 12345;
	char p[64], s[64];
	size_t checked = 0;
	for (int i = 0; i < 20000; i++) {
		gen(p, sizeof(p), pat_alpha, ELEMENTSOF(pat_alpha), &seed);
		if (strstr(p, "**"))
			continue;
		struct glob *g = compile_ok(p);
		for (int j = 0; j < 10; j++) {
			gen(s, sizeof(s), path_alpha, ELEMENTSOF(path_alpha), &seed);
			bool want = fnmatch(p, s, FNM_PATHNAME) == 0;
			ck_assert_msg(glob_match(g, s, strlen(s)) == want, "'%s' on '%s': fnmatch says %d", p, s, want);
			checked++;
		}
		glob_free(g);
	}
	ck_assert_uint_gt(checked, 100000);
}
END_TEST

/* "**" + "/" + P, with P one name's pattern (matched by the last name alone,
 * or by its suffix for "*.ext"), is P on the path's last name. */
START_TEST(any_depth_name)
{
	static const char *pat_alpha[] = { "a", "b", "*", "?", "[ab]", "[!a]", ".", ".h", "\\*" };
	static const char *path_alpha[] = { "a", "b", "/", ".", "c", ".h", "*" };
	unsigned seed = 4242;
	char p[64], s[64];
	for (int i = 0; i < 20000; i++) {
		gen(p, sizeof(p), pat_alpha, ELEMENTSOF(pat_alpha), &seed);
		if (strstr(p, "**"))
			continue;
		char *any = xasprintf("**/%s", p);
		struct glob *g = compile_ok(any);
		for (int j = 0; j < 10; j++) {
			gen(s, sizeof(s), path_alpha, ELEMENTSOF(path_alpha), &seed);
			const char *slash = strrchr(s, '/');
			bool want = fnmatch(p, slash ? slash + 1 : s, FNM_PATHNAME) == 0;
			ck_assert_msg(glob_match(g, s, strlen(s)) == want, "'%s' on '%s': %d", any, s, want);
			ck_assert(glob_may_match_below(g, s, strlen(s)));
		}
		glob_free(g);
		free(any);
	}
	ck_assert(m("**/*.h", "a/b/c.h") && m("**/*.h", ".h") && m("**/*.h", "x/.h") && !m("**/*.h", "a.h/b"));
	ck_assert(m("**/*.{c,h}", "src/x.c") && m("**/*.{c,h}", "x.h") && !m("**/*.{c,h}", "x.cc"));
	ck_assert(m("**/test_*", "t/test_a") && !m("**/test_*", "test_a/b"));
}
END_TEST

/* {x,y} matches what x or y alone matches; pruning keeps every directory above a match. */
START_TEST(braces_and_pruning)
{
	static const char *alpha[] = { "a", "b", "/", "*", "?", "**/", "**" };
	static const char *path_alpha[] = { "a", "b", "/", "ab" };
	unsigned seed = 777;
	char x[64], y[64], s[64];
	for (int i = 0; i < 5000; i++) {
		gen(x, sizeof(x), alpha, ELEMENTSOF(alpha), &seed);
		gen(y, sizeof(y), alpha, ELEMENTSOF(alpha), &seed);
		char *both = xasprintf("%s{%s,%s}", "", x, y);
		struct glob *gb = compile_ok(both), *gx = compile_ok(x), *gy = compile_ok(y);
		for (int j = 0; j < 10; j++) {
			gen(s, sizeof(s), path_alpha, ELEMENTSOF(path_alpha), &seed);
			size_t n = strlen(s);
			bool want = glob_match(gx, s, n) || glob_match(gy, s, n);
			ck_assert_msg(glob_match(gb, s, n) == want, "%s on %s", both, s);
			if (!want)
				continue;
			/* every proper directory prefix of a match may hold it */
			for (size_t k = 0; k < n; k++)
				if (s[k] == '/')
					ck_assert_msg(glob_may_match_below(gb, s, k), "%s: %.*s pruned above %s", both,
						      (int)k, s, s);
			ck_assert(glob_may_match_below(gb, "", 0));
		}
		glob_free(gb);
		glob_free(gx);
		glob_free(gy);
		free(both);
	}
	/* and prunes what cannot match */
	struct glob *g = compile_ok("src/*/x.c");
	ck_assert(glob_may_match_below(g, "src", 3));
	ck_assert(glob_may_match_below(g, "src/lib", 7));
	ck_assert(!glob_may_match_below(g, "src/lib/deep", 12));
	ck_assert(!glob_may_match_below(g, "doc", 3));
	ck_assert(!glob_any_depth(g));
	glob_free(g);
}
END_TEST

START_TEST(bounds)
{
	struct glob *g = NULL;
	char *err = NULL;
	char *big = xmalloc(GLOB_PATTERN_MAX + 2);
	memset(big, 'a', GLOB_PATTERN_MAX + 1);
	big[GLOB_PATTERN_MAX + 1] = '\0';
	ck_assert_int_eq(glob_compile(big, GLOB_PATTERN_MAX + 1, &g, &err), -EINVAL);
	free(err);
	err = NULL;
	/* the longest pattern works, a star per byte too */
	memset(big, '*', GLOB_PATTERN_MAX);
	big[GLOB_PATTERN_MAX] = '\0';
	g = compile_ok(big);
	ck_assert(glob_match(g, "abc", 3));
	glob_free(g);
	for (size_t i = 0; i < GLOB_PATTERN_MAX; i++)
		big[i] = i % 2 ? '*' : 'a';
	g = compile_ok(big);
	ck_assert(!glob_match(g, "b", 1));
	glob_free(g);
	free(big);
	/* 2^9 alternatives are too many */
	const char *many = "{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}";
	ck_assert_int_eq(glob_compile(many, strlen(many), &g, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "braces"));
	free(err);
	err = NULL;
	ck_assert_int_eq(glob_compile("a\0b", 3, &g, &err), -EINVAL);
	free(err);
}
END_TEST

/* The finder's column: the first match to end, starting as late as it can. */
START_TEST(finder_columns)
{
	static const struct {
		const char *pattern, *line;
		bool icase;
		int col;	/* -1: no match */
	} cases[] = {
		{ "foo", "a foo foo", false, 2 }, { "fo+", "xx fooo", false, 3 }, { "[0-9]+", "ab 123 4", false, 3 },
		{ "^ab", "ab ab", false, 0 }, { "ab$", "ab ab", false, 3 }, { "ab$", "ab abc", false, -1 },
		{ "HeLLo", "say hello", true, 4 }, { "\\.h", "a.h", false, 1 }, { "\\.h", "ah", false, -1 },
		{ "a|bc", "xbc", false, 1 }, { "\\d", "x\\d", false, -1 }, { "\\D", "12a", true, 2 },
		{ "HELLO", "say HeLLo", true, 4 }, { "caf\u00c9", "un caf\u00e9", true, 3 },
		{ "\u00c9t\u00e9", "\u00e9T\u00c9", true, 0 }, { "[^\u00e9]x", "\u00c9x", true, -1 },
		{ "k+", "\u212a", true, 0 }, { "stra\u00dfe", "STRASSE", true, -1 },
		{ "\u03c3", "\u03a3 \u03c2", true, 0 }, { "x\\b", "X-", true, 0 },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct regex_finder *f = NULL;
		char *err = NULL;
		ck_assert_msg(regex_finder_new(cases[i].pattern, strlen(cases[i].pattern), cases[i].icase, &f, &err) == 0,
			      "%s: %s", cases[i].pattern, err);
		char *line = xstrdup(cases[i].line);
		size_t col = 0;
		int r = regex_finder_line(f, line, strlen(line), &col);
		ck_assert_msg(r == (cases[i].col >= 0), "%s on %s: %d", cases[i].pattern, cases[i].line, r);
		if (r)
			ck_assert_msg((int)col == cases[i].col, "%s on %s: column %zu, want %d", cases[i].pattern,
				      cases[i].line, col, cases[i].col);
		ck_assert(regex_finder_may_match(f, line, strlen(line)) || !r);
		free(line);
		regex_finder_free(f);
	}
}
END_TEST

/* The text the finder looks for first is in every match: no line with a
 * match is ever skipped, on many generated patterns and lines. */
START_TEST(finder_never_misses)
{
	static const char *pat_alpha[] = { "a", "b", "ab", "[ab]", "a?", "b*", "(ab)+", "|", "\\.", ".", "+",
					   "x{2}", "b{0,1}", "a{1,}", "(a|b)", "c", "^", "$", "\\d", "[^a]" };
	static const char *line_alpha[] = { "a", "b", ".", "x", "c", "ab", "1" };
	unsigned seed = 99;
	char p[64], l[64];
	size_t checked = 0, matched = 0;
	for (int i = 0; i < 4000; i++) {
		gen(p, sizeof(p), pat_alpha, ELEMENTSOF(pat_alpha), &seed);
		for (int icase = 0; icase < 2; icase++) {
			struct regex_finder *f = NULL;
			struct regex *re = NULL;
			char *err = NULL;
			if (regex_finder_new(p, strlen(p), icase, &f, &err) < 0) {
				free(err);
				continue;
			}
			ck_assert_int_eq(regex_compile(p, strlen(p), &re, &err), 0);
			for (int j = 0; j < 20; j++) {
				gen(l, sizeof(l), line_alpha, ELEMENTSOF(line_alpha), &seed);
				size_t n = strlen(l), col, at;
				uint64_t budget = UINT64_MAX;
				bool want = regex_search(re, l, n, &budget) > 0;
				ck_assert_msg(regex_finder_line(f, l, n, &col) == want, "/%s/ on '%s'", p, l);
				if (want) {
					ck_assert_msg(regex_finder_may_match(f, l, n), "/%s/ skips '%s'", p, l);
					ck_assert_msg(regex_finder_next(f, l, n, &at) && at <= n, "/%s/ skips '%s'", p, l);
					matched++;
				}
				checked++;
			}
			regex_free(re);
			regex_finder_free(f);
		}
	}
	ck_assert_uint_gt(checked, 50000);
	ck_assert_uint_gt(matched, 5000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("glob");
	TCase *tc = tcase_create("glob");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, forms);
	tcase_add_test(tc, against_fnmatch);
	tcase_add_test(tc, any_depth_name);
	tcase_add_test(tc, braces_and_pruning);
	tcase_add_test(tc, bounds);
	tcase_add_test(tc, finder_columns);
	tcase_add_test(tc, finder_never_misses);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
