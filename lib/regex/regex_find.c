/* SPDX-License-Identifier: MIT */
/*
 * Content search on top of the linear-time matcher (see regex.h). The
 * matcher answers "is there a match in this text"; locating one is done by
 * bisection, which holds because for a pattern without anchors a text that
 * contains a match keeps containing it when it grows: the shortest prefix
 * with a match ends where the first match to end does, and the shortest
 * suffix of that prefix with a match starts where that match starts.
 */
#include "lib/regex/regex.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "proto/base/buf.h"
#include "proto/base/util.h"

struct regex_finder {
	struct regex *re;
	char *lit;		/* the plain string, or NULL */
	size_t lit_len;
	char *req;		/* a string every match holds, or NULL */
	size_t req_len;
	bool begin, end;	/* the pattern has "^", "$" */
	bool icase;		/* lit and req are ASCII, in lower case: looked
				 * for ignoring the case of ASCII letters */
	size_t anchor;		/* icase: the byte of req looked for first */
};

static inline char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

/* Whether a byte may be looked for as itself when case is ignored: ASCII,
 * and not "k" or "s", which the Kelvin sign and the long s fold to. */
static bool icase_plain(char c)
{
	char l = lower(c);
	return (unsigned char)c < 0x80 && l != 'k' && l != 's';
}

/* How common a byte is in text and code, roughly (higher: more). */
static unsigned byte_rank(unsigned char c)
{
	static const char common[] = " etaoinsrhldcumfpgwybvkxjqz_.,;()=-\"'/*#{}";
	const char *p = c ? strchr(common, lower((char)c)) : NULL;
	return p ? (unsigned)(sizeof(common) - (size_t)(p - common)) : 0;
}

/* The byte of needle to look for first: the rarest. */
static size_t pick_anchor(const char *needle, size_t m)
{
	size_t best = 0;
	for (size_t i = 1; i < m; i++)
		if (byte_rank((unsigned char)needle[i]) < byte_rank((unsigned char)needle[best]))
			best = i;
	return best;
}

/* memmem of an ASCII needle in lower case, ignoring the case of ASCII
 * letters in hay: memchr for the anchor byte in either case, then a
 * comparison around it. */
static const char *ci_memmem(const char *hay, size_t n, const char *needle, size_t m, size_t k)
{
	if (m == 0)
		return hay;
	if (m > n)
		return NULL;
	char lo = needle[k], up = lo >= 'a' && lo <= 'z' ? (char)(lo - 32) : lo;
	/* Candidates for the anchor lie in hay[k .. n - m + k]. */
	const char *p = hay + k, *end = hay + n - m + k + 1;
	const char *next_lo = memchr(p, lo, (size_t)(end - p));
	const char *next_up = up != lo ? memchr(p, up, (size_t)(end - p)) : NULL;
	for (;;) {
		const char *c = !next_up || (next_lo && next_lo < next_up) ? next_lo : next_up;
		if (!c)
			return NULL;
		const char *start = c - k;
		size_t i = 0;
		while (i < m && lower(start[i]) == needle[i])
			i++;
		if (i == m)
			return start;
		p = c + 1;
		if (c == next_lo)
			next_lo = p < end ? memchr(p, lo, (size_t)(end - p)) : NULL;
		else
			next_up = p < end ? memchr(p, up, (size_t)(end - p)) : NULL;
	}
}

/* Looks for the required string (or the plain one), as the case asks. */
static const char *find(const struct regex_finder *f, const char *s, size_t n, const char *needle, size_t m)
{
	if (f->icase)
		return ci_memmem(s, n, needle, m, needle == f->req ? f->anchor : pick_anchor(needle, m));
	return memmem(s, n, needle, m);
}

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
	/* Ignoring case, only ASCII is looked for as bytes (folded). */
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
			literal = !f->icase || icase_plain(c);
		}
		char q = next < n ? p[next] : '\0';
		bool optional = q == '?' || q == '*' || q == '{';
		if (literal && depth == 0 && !optional)
			buf_putc(&run, f->icase ? lower(c) : c);
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
			lit[k++] = f->icase ? lower(p[i]) : p[i];
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
		if (strchr(special, c) || (f->icase && !icase_plain(c)))
			plain = false;
		lit[k++] = f->icase ? lower(c) : c;
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
	struct regex *re = NULL;
	int r = icase ? regex_compile_icase(pattern, len, &re, ret_err) : regex_compile(pattern, len, &re, ret_err);
	if (r < 0)
		return r;
	struct regex_finder *f = xcalloc(1, sizeof(*f));
	f->re = re;
	f->icase = icase;
	scan(f, pattern, len);
	if (f->req)
		f->anchor = pick_anchor(f->req, f->req_len);
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
		return find(f, s, n, f->req, f->req_len) != NULL;
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
	const char *m = find(f, s, n, f->req, f->req_len);
	if (!m)
		return false;
	*ret_at = (size_t)(m - s);
	return true;
}

int regex_finder_line(const struct regex_finder *f, const char *s, size_t n, size_t *ret_col)
{
	if (f->lit) {
		const char *m = find(f, s, n, f->lit, f->lit_len);
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
