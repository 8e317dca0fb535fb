/* SPDX-License-Identifier: MIT */
/*
 * Content search on top of the linear-time matcher (see regex_find.h). The
 * matcher answers "is there a match in this text"; locating one is done by
 * bisection, which holds because for a pattern without anchors a text that
 * contains a match keeps containing it when it grows: the shortest prefix
 * with a match ends where the first match to end does, and the shortest
 * suffix of that prefix with a match starts where that match starts.
 */
#include "lib/regex_find.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lib/regex.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"

struct regex_finder {
	struct regex *re;
	char *lit;		/* the plain string, or NULL */
	size_t lit_len;
	char *req;		/* a string every match holds, or NULL */
	size_t req_len;
	bool begin, end;	/* the pattern has "^", "$" */
};

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

void regex_fold_ascii(char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] >= 'A' && s[i] <= 'Z')
			s[i] = (char)(s[i] + 32);
}

/*
 * Finds the longest string every match must hold: a run of literal
 * characters outside groups, none of them made optional by "?", "*" or
 * "{" (a "+" keeps the character but ends the run). Any "|" outside a
 * class at the top level, and the run is not required: none is kept.
 */
static void required(struct regex_finder *f, const char *p, size_t n)
{
	size_t best = 0, depth = 0;
	struct buf run = {}, keep = {};
	bool in_class = false;

	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		bool literal = false;
		size_t next = i + 1;
		if (in_class) {
			if (c == '\\')
				i++;
			else if (c == ']')
				in_class = false;
			continue;
		}
		if (c == '\\' && i + 1 < n) {
			next = i + 2;
			c = p[i + 1];
			literal = !is_alnum(c) && (unsigned char)c < 0x80;
		} else if (c == '[') {
			in_class = true;
		} else if (c == '(') {
			depth++;
		} else if (c == ')') {
			if (depth)
				depth--;
		} else if (c == '{') {
			/* A quantifier's bounds are no text: skip to its '}'. */
			size_t j = i + 1;
			while (j < n && ((p[j] >= '0' && p[j] <= '9') || p[j] == ','))
				j++;
			if (j < n && p[j] == '}')
				next = j + 1;
		} else if (c == '|') {
			if (depth == 0) {
				buf_free(&run);
				buf_free(&keep);
				return;
			}
		} else if (!strchr("^$.?*+{}", c)) {
			literal = true;
		}
		char q = next < n ? p[next] : '\0';
		bool optional = q == '?' || q == '*' || q == '{';
		if (literal && depth == 0 && !optional)
			buf_putc(&run, c);
		if (!literal || depth > 0 || optional || q == '+') {
			if (buf_size(&run) > best) {
				best = buf_size(&run);
				buf_clear(&keep);
				buf_append(&keep, buf_head(&run), best);
			}
			buf_clear(&run);
		}
		i = next - 1;
	}
	if (buf_size(&run) > best) {
		buf_clear(&keep);
		buf_append(&keep, buf_head(&run), buf_size(&run));
	}
	buf_free(&run);
	if (buf_size(&keep)) {
		f->req_len = buf_size(&keep);
		f->req = buf_steal(&keep);
	}
	buf_free(&keep);
}

/*
 * Looks at the pattern: its plain string when it has no special character
 * (an escaped punctuation character counts as itself), and whether "^" or
 * "$" occur outside a class.
 */
static void scan(struct regex_finder *f, const char *p, size_t n)
{
	static const char special[] = "^$.|?*+()[]{}";
	bool plain = n > 0, in_class = false;
	char *lit = xmalloc(n + 1);
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (c == '\\' && i + 1 < n) {
			i++;
			if (is_alnum(p[i]) || (unsigned char)p[i] >= 0x80)
				plain = false;	/* \d, \n, \u0041...: a class or an escape */
			lit[k++] = p[i];
			continue;
		}
		if (in_class) {
			if (c == ']')
				in_class = false;
			continue;
		}
		if (c == '[') {
			in_class = true;
			plain = false;
			continue;
		}
		if (c == '^')
			f->begin = true;
		if (c == '$')
			f->end = true;
		if (strchr(special, c))
			plain = false;
		lit[k++] = c;
	}
	if (plain) {
		f->lit = lit;
		f->lit_len = k;
		f->req = xmemdup(lit, k + 1);
		f->req_len = k;
	} else {
		free(lit);
		required(f, p, n);
	}
}

int regex_finder_new(const char *pattern, size_t len, bool icase, struct regex_finder **ret, char **ret_err)
{
	_cleanup_free_ char *p = xmemdup(pattern, len + 1);
	p[len] = '\0';
	if (icase) {
		/* Fold letters, but not the letter of an escape (\D, \S, \W). */
		for (size_t i = 0; i < len; i++) {
			if (p[i] == '\\')
				i++;
			else if (p[i] >= 'A' && p[i] <= 'Z')
				p[i] = (char)(p[i] + 32);
		}
	}
	struct regex *re = NULL;
	int r = regex_compile(p, len, &re, ret_err);
	if (r < 0)
		return r;
	struct regex_finder *f = xcalloc(1, sizeof(*f));
	f->re = re;
	scan(f, p, len);
	*ret = f;
	return 0;
}

struct regex_finder *regex_finder_free(struct regex_finder *f)
{
	if (!f)
		return NULL;
	regex_free(f->re);
	free(f->lit);
	free(f->req);
	free(f);
	return NULL;
}

bool regex_finder_is_literal(const struct regex_finder *f)
{
	return f->lit != NULL;
}

/* Runs the matcher with a budget that always suffices. */
static bool test(const struct regex_finder *f, const char *s, size_t n)
{
	uint64_t budget = UINT64_MAX;
	return regex_search(f->re, s, n, &budget) > 0;
}

bool regex_finder_may_match(const struct regex_finder *f, const char *s, size_t n)
{
	if (f->req)
		return memmem(s, n, f->req, f->req_len) != NULL;
	if (f->begin || f->end)
		return true;	/* anchors mean line ends, not the text's */
	return test(f, s, n);
}

bool regex_finder_next(const struct regex_finder *f, const char *s, size_t n, size_t *ret_at)
{
	if (!f->req) {
		*ret_at = 0;
		return true;
	}
	const char *m = memmem(s, n, f->req, f->req_len);
	if (!m)
		return false;
	*ret_at = (size_t)(m - s);
	return true;
}

int regex_finder_line(const struct regex_finder *f, const char *s, size_t n, size_t *ret_col)
{
	if (f->lit) {
		const char *m = memmem(s, n, f->lit, f->lit_len);
		if (!m)
			return 0;
		*ret_col = (size_t)(m - s);
		return 1;
	}
	if (!test(f, s, n))
		return 0;
	if (f->begin || n > REGEX_FIND_BISECT_MAX) {
		*ret_col = 0;
		return 1;
	}
	/* The end of the first match to end: the shortest prefix with a
	 * match. "$" ties every match to the end of the line. */
	size_t lo = 0, hi = n;
	if (!f->end) {
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (test(f, s, mid))
				hi = mid;
			else
				lo = mid + 1;
		}
	}
	size_t e = hi;
	/* Its start: the shortest suffix of s[0..e) with a match. */
	lo = 0;
	hi = e;
	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;
		if (test(f, s + mid, e - mid))
			lo = mid;
		else
			hi = mid - 1;
	}
	*ret_col = lo;
	return 1;
}
