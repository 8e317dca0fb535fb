/* SPDX-License-Identifier: MIT */
/*
 * Tests of the unified diff writer (lib/diff/diff.c) against diff(1) and
 * patch(1): on many generated pairs of texts, the diff applies with patch
 * to give the new text back, and removes and adds as many lines as
 * `diff -u --minimal` does (both are shortest edit scripts; where several
 * exist they may pick different ones); on simple cases, where there is one
 * shortest script, the output is byte for byte diff -u's. Large inputs
 * stay within their time bound and still give a correct diff.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/diff/diff.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"

static char dir[] = "/tmp/tc-diff-XXXXXX";

static void write_file(const char *name, const char *s, size_t n)
{
	char *p = xasprintf("%s/%s", dir, name);
	FILE *f = fopen(p, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(s, 1, n, f), n);
	fclose(f);
	free(p);
}

static char *read_file(const char *name, size_t *ret_n)
{
	char *p = xasprintf("%s/%s", dir, name);
	FILE *f = fopen(p, "rb");
	free(p);
	if (!f)
		return NULL;
	struct buf b = {};
	char tmp[4096];
	size_t k;
	while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0)
		buf_append(&b, tmp, k);
	fclose(f);
	*ret_n = buf_size(&b);
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/* Runs a shell command in dir; its exit status. */
static int run(const char *cmd)
{
	char *full = xasprintf("cd %s && %s", dir, cmd);
	int st = system(full);
	free(full);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void count_lines(const char *d, size_t *plus, size_t *minus)
{
	*plus = *minus = 0;
	for (const char *p = d; *p;) {
		if (*p == '+' && strncmp(p, "+++ ", 4))
			(*plus)++;
		else if (*p == '-' && strncmp(p, "--- ", 4))
			(*minus)++;
		const char *nl = strchr(p, '\n');
		p = nl ? nl + 1 : p + strlen(p);
	}
}

/* Checks the diff of a to b against diff(1) and patch(1); true when it is diff -u's byte for byte. */
static bool check_pair(const char *a, size_t an, const char *b, size_t bn)
{
	struct buf mine = {};
	struct diff_stats st;
	diff_unified(a, an, b, bn, "a/x", "b/x", 3, &mine, &st);
	buf_putc(&mine, '\0');
	write_file("a", a, an);
	write_file("b", b, bn);
	int r = run("diff -u --minimal --label a/x --label b/x a b > gnu.diff");
	ck_assert_int_ne(r, 2);
	size_t gn;
	char *gnu = read_file("gnu.diff", &gn);
	bool same = strcmp(gnu, buf_head(&mine)) == 0;
	if (!same) {
		size_t gp, gm, mp, mm;
		count_lines(gnu, &gp, &gm);
		count_lines(buf_head(&mine), &mp, &mm);
		ck_assert_msg(gp == mp && gm == mm, "+%zu -%zu where diff -u has +%zu -%zu:\n%s\n---- diff -u:\n%s",
			      mp, mm, gp, gm, buf_head(&mine), gnu);
		ck_assert_uint_eq(st.added, mp);
		ck_assert_uint_eq(st.removed, mm);
	}
	ck_assert_msg((r == 0) == (mine.len == 1), "equal texts and an empty diff go together");
	if (r != 0) {
		write_file("mine.diff", buf_head(&mine), strlen(buf_head(&mine)));
		ck_assert_msg(run("patch -s -o out a < mine.diff 2>/dev/null") == 0, "patch refused:\n%s",
			      buf_head(&mine));
		size_t on;
		char *out = read_file("out", &on);
		ck_assert_msg(on == bn && memcmp(out, b, bn) == 0, "patch gave another text for:\n%s", buf_head(&mine));
		free(out);
	}
	free(gnu);
	buf_free(&mine);
	return same;
}

/* A text of up to max lines drawn from a few, so that changes repeat and align in many ways. */
static size_t gen_text(char *out, unsigned *seed, unsigned max)
{
	static const char *const lines[] = { "a\n", "b\n", "c\n", "{\n", "}\n", "\n", "int x;\n", "return 0;\n" };
	unsigned n = (unsigned)rand_r(seed) % (max + 1);
	size_t k = 0;
	for (unsigned i = 0; i < n; i++) {
		const char *l = lines[(unsigned)rand_r(seed) % ELEMENTSOF(lines)];
		memcpy(out + k, l, strlen(l));
		k += strlen(l);
	}
	if (k && rand_r(seed) % 5 == 0)
		k--;	/* no newline at the end */
	return k;
}

/* Derives b from a by a few edits, as a model's edits would. */
static size_t mutate(const char *a, size_t an, char *out, unsigned *seed)
{
	size_t k = 0;
	for (size_t i = 0; i < an;) {
		const char *nl = memchr(a + i, '\n', an - i);
		size_t len = nl ? (size_t)(nl - (a + i)) + 1 : an - i;
		unsigned r = (unsigned)rand_r(seed) % 12;
		if (r == 0) {
			/* drop the line */
		} else if (r == 1) {
			memcpy(out + k, "new\n", 4);
			k += 4;
			memcpy(out + k, a + i, len);
			k += len;
		} else if (r == 2) {
			memcpy(out + k, "changed\n", 8);
			k += 8;
		} else {
			memcpy(out + k, a + i, len);
			k += len;
		}
		i += len;
	}
	if (rand_r(seed) % 4 == 0) {
		memcpy(out + k, "tail\n", 5);
		k += 5;
	}
	return k;
}

START_TEST(against_diff_u)
{
	unsigned seed = 4242;
	char *a = xmalloc(4096), *b = xmalloc(8192);
	unsigned identical = 0, total = 0;
	for (int i = 0; i < 300; i++) {
		size_t an = gen_text(a, &seed, 40);
		size_t bn = i % 3 == 0 ? gen_text(b, &seed, 40) : mutate(a, an, b, &seed);
		identical += check_pair(a, an, b, bn);
		total++;
	}
	free(a);
	free(b);
	/* Most generated cases have one shortest script or both pick alike. */
	ck_assert_msg(identical * 2 > total, "only %u of %u diffs are diff -u's", identical, total);
}
END_TEST

START_TEST(exact_cases)
{
	static const struct {
		const char *a, *b;
	} cases[] = {
		{ "", "" }, { "", "x\n" }, { "x\n", "" }, { "x", "x\n" }, { "x\n", "x" }, { "a\nb\n", "a\nc\n" },
		{ "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\n2\nX\n4\n5\n6\n7\n8\n9\n10\nY\n12\n" },
		{ "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n" },
		{ "a\nb\nc", "a\nb\nd" }, { "only\n", "other\n" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		ck_assert_msg(check_pair(cases[i].a, strlen(cases[i].a), cases[i].b, strlen(cases[i].b)),
			      "case %zu differs from diff -u", i);
}
END_TEST

/* Two unrelated large texts: bounded, and still a diff that patch applies. */
START_TEST(large_bounded)
{
	size_t n = 200000;
	struct buf a = {}, b = {};
	for (size_t i = 0; i < n; i++) {
		buf_printf(&a, "line %zu\n", i * 7 % 1000003);
		buf_printf(&b, "line %zu\n", i % 3 ? i * 7 % 1000003 : i * 13 % 999983);
	}
	uint64_t t0 = mono_ms();
	struct buf d = {};
	struct diff_stats st;
	diff_unified(buf_head(&a), buf_size(&a), buf_head(&b), buf_size(&b), "a/x", "b/x", 3, &d, &st);
	uint64_t took = mono_ms() - t0;
	ck_assert_msg(took < 10000, "a large diff took %llu ms", (unsigned long long)took);
	ck_assert_uint_ge(st.added, n / 3);
	write_file("a", buf_head(&a), buf_size(&a));
	write_file("mine.diff", buf_head(&d), buf_size(&d));
	ck_assert(run("patch -s -o out a < mine.diff 2>/dev/null") == 0);
	size_t on;
	char *out = read_file("out", &on);
	ck_assert(on == buf_size(&b) && memcmp(out, buf_head(&b), on) == 0);
	free(out);
	buf_free(&a);
	buf_free(&b);
	buf_free(&d);
}
END_TEST

int main(void)
{
	if (system("diff --version >/dev/null 2>&1 && patch --version >/dev/null 2>&1") != 0) {
		fprintf(stderr, "diff(1) and patch(1) are needed to check the diff writer\n");
		return TC_EXIT_SKIP;
	}
	if (!mkdtemp(dir))
		return 99;
	Suite *s = suite_create("diff");
	TCase *tc = tcase_create("diff");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, against_diff_u);
	tcase_add_test(tc, exact_cases);
	tcase_add_test(tc, large_bounded);
	suite_add_tcase(s, tc);
	int r = run_suite(s);
	char *rm = xasprintf("rm -rf %s", dir);
	if (system(rm) != 0)
		r = EXIT_FAILURE;
	free(rm);
	return r;
}
