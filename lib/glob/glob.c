/* SPDX-License-Identifier: MIT */
/*
 * The glob matcher (see glob.h). Braces are expanded first, into at most
 * GLOB_ALTS_MAX plain patterns; each is compiled into a short list of
 * tokens, one NFA state per token, and a path is matched by moving the set
 * of live states over its code points, so "*a*a*a*b" costs no more than
 * its length times the path's.
 */
#include "lib/glob/glob.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "proto/json.h"
#include "proto/utf8.h"
#include "proto/base/util.h"

/* Bytes of all alternatives together. */
#define GLOB_EXPANDED_MAX ((size_t)1 << 16)

enum gop {
	G_LIT,		/* one code point */
	G_ANY,		/* "?": one code point but '/' */
	G_SET,		/* "[...]": one of a set, never '/' */
	G_STAR,		/* "*": any run without '/' */
	G_DIRS_A,	/* "**" then "/": entry, may skip the whole "(.* /)?" */
	G_DIRS_B,	/* its loop: any code point, leaving after a '/' */
	G_ALL,		/* a final "**": anything, '/' included */
};

struct gtok {
	enum gop op;
	uint32_t cp;		/* G_LIT */
	uint32_t set, n_set;	/* G_SET: ranges[set .. set + n_set) */
	bool neg;
};

struct galt {
	struct gtok *tok;
	size_t n;		/* tokens; state n accepts */
	char suffix[16];	/* the literal text a match must end with (UTF-8) */
	size_t n_suffix;
	/* "**" + "/" then tokens that never match a "/": the alternative
	 * matches a path when base (those tokens) matches its last name. */
	bool base_only;
	/* base is "*" then literals that the suffix holds whole: the suffix
	 * alone decides. */
	bool star_suffix;
	struct galt *base;	/* the tokens after "**" + "/" (sharing tok) */
};

struct glob {
	struct galt *alts;
	size_t n_alts;
	uint32_t (*ranges)[2];
	size_t n_ranges;
	bool any_depth;
};

/* Decodes one code point; a byte that is not UTF-8 stands for itself as 0xDC00 + byte. */
static size_t next_cp(const char *s, size_t n, uint32_t *cp)
{
	unsigned char c = (unsigned char)s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	size_t k = utf8_decode(s, n, cp);
	if (k == 0) {
		*cp = 0xDC00 + c;
		k = 1;
	}
	return k;
}

/* Finds the "]" closing a set that starts at s[i] == '[', or returns 0. */
static size_t set_end(const char *s, size_t n, size_t i)
{
	size_t j = i + 1;
	if (j < n && (s[j] == '!' || s[j] == '^'))
		j++;
	if (j < n && s[j] == ']')
		j++;		/* a leading ']' is a member */
	for (; j < n; j++) {
		if (s[j] == '\\' && j + 1 < n)
			j++;
		else if (s[j] == ']')
			return j;
	}
	return 0;
}

struct expand {
	char **v;
	size_t *len;
	size_t n, bytes;
	bool over;
};

static void expand_add(struct expand *x, const char *s, size_t n)
{
	if (x->n >= GLOB_ALTS_MAX || x->bytes + n > GLOB_EXPANDED_MAX) {
		x->over = true;
		return;
	}
	x->v = xreallocarray(x->v, x->n + 1, sizeof(*x->v));
	x->len = xreallocarray(x->len, x->n + 1, sizeof(*x->len));
	x->v[x->n] = xmemdup(s, n + 1);
	x->v[x->n][n] = '\0';
	x->len[x->n++] = n;
	x->bytes += n;
}

/* Expands the first brace group with a comma found at or after from, recursively. */
static void expand(struct expand *x, const char *s, size_t n, size_t from, unsigned depth)
{
	if (x->over)
		return;
	if (depth > 64) {
		x->over = true;
		return;
	}
	for (size_t i = from; i < n; i++) {
		if (s[i] == '\\') {
			i++;
			continue;
		}
		if (s[i] == '[') {
			size_t e = set_end(s, n, i);
			if (e)
				i = e;
			continue;
		}
		if (s[i] != '{')
			continue;
		/* Find the matching '}' and the commas at this level. */
		size_t level = 0, close = 0, n_commas = 0;
		for (size_t j = i + 1; j < n && !close; j++) {
			if (s[j] == '\\') {
				j++;
			} else if (s[j] == '[') {
				size_t e = set_end(s, n, j);
				if (e)
					j = e;
			} else if (s[j] == '{') {
				level++;
			} else if (s[j] == '}') {
				if (level == 0)
					close = j;
				else
					level--;
			} else if (s[j] == ',' && level == 0) {
				n_commas++;
			}
		}
		if (!close || n_commas == 0)
			continue;	/* literal '{' */
		/* One pattern per alternative: prefix + alternative + suffix. */
		size_t start = i + 1;
		level = 0;
		for (size_t j = i + 1; j <= close && !x->over; j++) {
			if (j < close && s[j] == '\\') {
				j++;
				continue;
			}
			if (j < close && s[j] == '[') {
				size_t e = set_end(s, n, j);
				if (e)
					j = e;
				continue;
			}
			if (j < close && s[j] == '{')
				level++;
			else if (j < close && s[j] == '}')
				level--;
			if (j == close || (s[j] == ',' && level == 0)) {
				size_t alen = j - start, tail = n - close - 1;
				_cleanup_free_ char *t = xmalloc(i + alen + tail + 1);
				memcpy(t, s, i);
				memcpy(t + i, s + start, alen);
				memcpy(t + i + alen, s + close + 1, tail);
				t[i + alen + tail] = '\0';
				expand(x, t, i + alen + tail, i, depth + 1);
				start = j + 1;
			}
		}
		return;
	}
	expand_add(x, s, n);
}

static void add_tok(struct galt *a, struct gtok t)
{
	a->tok = xreallocarray(a->tok, a->n + 1, sizeof(*a->tok));
	a->tok[a->n++] = t;
}

/* Compiles one pattern without braces into a->tok. */
static void compile_alt(struct glob *g, const char *s, size_t n, struct galt *a)
{
	for (size_t i = 0; i < n;) {
		bool comp_start = i == 0 || s[i - 1] == '/';
		if (s[i] == '*' && i + 1 < n && s[i + 1] == '*' && comp_start &&
		    (i + 2 == n || s[i + 2] == '/')) {
			g->any_depth = true;
			if (i + 2 == n) {
				add_tok(a, (struct gtok){ .op = G_ALL });
				i += 2;
			} else {
				add_tok(a, (struct gtok){ .op = G_DIRS_A });
				add_tok(a, (struct gtok){ .op = G_DIRS_B });
				i += 3;
			}
			continue;
		}
		if (s[i] == '*') {
			/* "**" inside a component is one "*"; runs of stars too. */
			if (!a->n || a->tok[a->n - 1].op != G_STAR)
				add_tok(a, (struct gtok){ .op = G_STAR });
			i++;
			continue;
		}
		if (s[i] == '?') {
			add_tok(a, (struct gtok){ .op = G_ANY });
			i++;
			continue;
		}
		if (s[i] == '[') {
			size_t e = set_end(s, n, i);
			if (e) {
				struct gtok t = { .op = G_SET, .set = (uint32_t)g->n_ranges };
				size_t j = i + 1;
				if (s[j] == '!' || s[j] == '^') {
					t.neg = true;
					j++;
				}
				while (j < e) {
					uint32_t lo, hi;
					if (s[j] == '\\' && j + 1 < e)
						j++;
					j += next_cp(s + j, e - j, &lo);
					hi = lo;
					if (j + 1 < e && s[j] == '-') {
						size_t k = j + 1;
						if (s[k] == '\\' && k + 1 < e)
							k++;
						k += next_cp(s + k, e - k, &hi);
						j = k;
					}
					if (hi < lo)
						continue;	/* an empty range, as [z-a] */
					g->ranges = xreallocarray(g->ranges, g->n_ranges + 1, sizeof(*g->ranges));
					g->ranges[g->n_ranges][0] = lo;
					g->ranges[g->n_ranges][1] = hi;
					g->n_ranges++;
				}
				t.n_set = (uint32_t)(g->n_ranges - t.set);
				add_tok(a, t);
				i = e + 1;
				continue;
			}
		}
		if (s[i] == '\\' && i + 1 < n)
			i++;
		uint32_t cp;
		i += next_cp(s + i, n - i, &cp);
		add_tok(a, (struct gtok){ .op = G_LIT, .cp = cp });
	}
}

/* The number of literal tokens the suffix holds, counted from the end. */
static size_t suffix_tokens(const struct galt *a)
{
	size_t k = 0, bytes = 0;
	for (size_t i = a->n; i > 0 && a->tok[i - 1].op == G_LIT; i--) {
		uint32_t cp = a->tok[i - 1].cp;
		size_t m = (cp >= 0xDC80 && cp <= 0xDCFF) || cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
		if (bytes + m > a->n_suffix)
			break;
		bytes += m;
		k++;
	}
	return k;
}

/* Notes the literal tokens that end an alternative: a quick test before running it. */
static void set_suffix(struct galt *a)
{
	char tmp[16];
	size_t k = sizeof(tmp);
	for (size_t i = a->n; i > 0 && a->tok[i - 1].op == G_LIT; i--) {
		uint32_t cp = a->tok[i - 1].cp;
		char u[4];
		size_t m;
		if (cp >= 0xDC80 && cp <= 0xDCFF) {
			u[0] = (char)(cp - 0xDC00);	/* a byte that is not UTF-8 */
			m = 1;
		} else if (cp < 0x80) {
			u[0] = (char)cp;
			m = 1;
		} else if (cp < 0x800) {
			u[0] = (char)(0xC0 | cp >> 6);
			u[1] = (char)(0x80 | (cp & 0x3F));
			m = 2;
		} else if (cp < 0x10000) {
			u[0] = (char)(0xE0 | cp >> 12);
			u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
			u[2] = (char)(0x80 | (cp & 0x3F));
			m = 3;
		} else {
			u[0] = (char)(0xF0 | cp >> 18);
			u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
			u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
			u[3] = (char)(0x80 | (cp & 0x3F));
			m = 4;
		}
		if (m > k)
			break;
		k -= m;
		memcpy(tmp + k, u, m);
	}
	a->n_suffix = sizeof(tmp) - k;
	memcpy(a->suffix, tmp + k, a->n_suffix);
}

/* Notes whether an alternative is "**" + "/" then one name's pattern, which
 * the last name of a path alone decides: no state machine over the whole
 * path for the most common patterns ("**" + "/" + "*.c"). */
static void set_base_only(struct galt *a)
{
	if (a->n < 2 || a->tok[0].op != G_DIRS_A)
		return;
	size_t lits = 0;
	for (size_t i = 2; i < a->n; i++) {
		const struct gtok *t = &a->tok[i];
		if (t->op == G_DIRS_A || t->op == G_DIRS_B || t->op == G_ALL || (t->op == G_LIT && t->cp == '/'))
			return;
		if (t->op == G_LIT)
			lits++;
	}
	a->base_only = true;
	a->base = xcalloc(1, sizeof(*a->base));
	a->base->tok = a->tok + 2;
	a->base->n = a->n - 2;
	/* "*" then literals that are all in the suffix (each literal at least a byte). */
	a->star_suffix = a->n >= 3 && a->tok[2].op == G_STAR && lits == a->n - 3 &&
			 a->n_suffix >= lits && suffix_tokens(a) == lits;
}

int glob_compile(const char *pattern, size_t len, struct glob **ret, char **ret_err)
{
	if (len > GLOB_PATTERN_MAX) {
		*ret_err = xasprintf("the pattern is longer than %d bytes", GLOB_PATTERN_MAX);
		return -EINVAL;
	}
	if (memchr(pattern, '\0', len)) {
		*ret_err = xstrdup("the pattern holds a NUL character");
		return -EINVAL;
	}
	struct expand x = {};
	expand(&x, pattern, len, 0, 0);
	if (x.over) {
		for (size_t i = 0; i < x.n; i++)
			free(x.v[i]);
		free(x.v);
		free(x.len);
		*ret_err = xasprintf("the braces expand to more than %d patterns", GLOB_ALTS_MAX);
		return -EINVAL;
	}
	struct glob *g = xcalloc(1, sizeof(*g));
	g->alts = xcalloc(x.n, sizeof(*g->alts));
	g->n_alts = x.n;
	for (size_t i = 0; i < x.n; i++) {
		compile_alt(g, x.v[i], x.len[i], &g->alts[i]);
		set_suffix(&g->alts[i]);
		set_base_only(&g->alts[i]);
		free(x.v[i]);
	}
	free(x.v);
	free(x.len);
	*ret = g;
	return 0;
}

static inline void set_add(const struct galt *a, uint64_t *w, size_t i)
{
	/* Adds state i and what it reaches without consuming (its closure). */
	for (;;) {
		if (w[i / 64] & (1ull << (i % 64)))
			return;
		w[i / 64] |= 1ull << (i % 64);
		if (i == a->n)
			return;
		switch (a->tok[i].op) {
		case G_STAR:
		case G_ALL:
			i++;
			continue;
		case G_DIRS_A:
			set_add(a, w, i + 2);
			i++;
			continue;
		default:
			return;
		}
	}
}

static bool in_set(const struct glob *g, const struct gtok *t, uint32_t cp)
{
	bool in = false;
	for (uint32_t k = 0; k < t->n_set && !in; k++)
		in = cp >= g->ranges[t->set + k][0] && cp <= g->ranges[t->set + k][1];
	return in != t->neg;
}

/*
 * Runs one alternative over s; returns 1 when the end is reached in the
 * accepting state, 2 when some state is still live (with prefix), else 0.
 */
static int run_alt(const struct glob *g, const struct galt *a, const char *s, size_t n)
{
	size_t words = (a->n + 1 + 63) / 64;
	/* A token takes at least a byte: GLOB_PATTERN_MAX + 1 states at most. */
	uint64_t cur_w[GLOB_PATTERN_MAX / 64 + 1], next_w[GLOB_PATTERN_MAX / 64 + 1];
	uint64_t *cur = cur_w, *next = next_w;

	memset(cur, 0, words * sizeof(*cur));
	set_add(a, cur, 0);
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		i += next_cp(s + i, n - i, &cp);
		memset(next, 0, words * sizeof(*next));
		bool live = false;
		for (size_t wi = 0; wi < words; wi++) {
			for (uint64_t bits = cur[wi]; bits; bits &= bits - 1) {
				size_t st = wi * 64 + (size_t)__builtin_ctzll(bits);
				if (st == a->n)
					continue;
				const struct gtok *t = &a->tok[st];
				switch (t->op) {
				case G_LIT:
					if (cp == t->cp)
						set_add(a, next, st + 1);
					break;
				case G_ANY:
					if (cp != '/')
						set_add(a, next, st + 1);
					break;
				case G_SET:
					if (cp != '/' && in_set(g, t, cp))
						set_add(a, next, st + 1);
					break;
				case G_STAR:
					if (cp != '/')
						set_add(a, next, st);
					break;
				case G_DIRS_A:
					break;
				case G_DIRS_B:
					set_add(a, next, st);
					if (cp == '/')
						set_add(a, next, st + 1);
					break;
				case G_ALL:
					set_add(a, next, st);
					break;
				}
			}
		}
		for (size_t wi = 0; wi < words && !live; wi++)
			live = next[wi] != 0;
		if (!live)
			return 0;
		uint64_t *tmp = cur;
		cur = next;
		next = tmp;
	}
	return (cur[a->n / 64] >> (a->n % 64)) & 1 ? 1 : 2;
}

bool glob_match(const struct glob *g, const char *path, size_t len)
{
	for (size_t i = 0; i < g->n_alts; i++) {
		const struct galt *a = &g->alts[i];
		if (a->n_suffix > len || memcmp(path + len - a->n_suffix, a->suffix, a->n_suffix) != 0)
			continue;
		if (a->base_only) {
			const char *slash = memrchr(path, '/', len);
			const char *base = slash ? slash + 1 : path;
			size_t base_len = len - (size_t)(base - path);
			if (a->star_suffix ? base_len >= a->n_suffix : run_alt(g, a->base, base, base_len) == 1)
				return true;
			continue;
		}
		if (run_alt(g, a, path, len) == 1)
			return true;
	}
	return false;
}

bool glob_may_match_below(const struct glob *g, const char *dir, size_t len)
{
	if (len == 0)
		return g->n_alts > 0;
	for (size_t i = 0; i < g->n_alts; i++)
		if (g->alts[i].base_only)
			return true;	/* "**" + "/": any depth */
	char stack[512];
	_cleanup_free_ char *heap = len + 1 > sizeof(stack) ? xmalloc(len + 1) : NULL;
	char *s = heap ? heap : stack;
	memcpy(s, dir, len);
	s[len] = '/';
	for (size_t i = 0; i < g->n_alts; i++)
		if (run_alt(g, &g->alts[i], s, len + 1) != 0)
			return true;
	return false;
}

bool glob_any_depth(const struct glob *g)
{
	return g->any_depth;
}

struct glob *glob_free(struct glob *g)
{
	if (!g)
		return NULL;
	for (size_t i = 0; i < g->n_alts; i++) {
		free(g->alts[i].tok);
		free(g->alts[i].base);
	}
	free(g->alts);
	free(g->ranges);
	free(g);
	return NULL;
}
