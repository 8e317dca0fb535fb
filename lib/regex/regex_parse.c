/* SPDX-License-Identifier: MIT */
/*
 * Parsing an ECMA-262 pattern for JSON Schema "pattern" into a tree over
 * code points (rx_parse); regex_compile.c makes it a program and
 * regex_search.c runs it. What lib/regex/regex.h accepts:
 *
 * Supported: literals, ., [...] and [^...] with ranges, the escapes \d \D
 * \w \W \s \S \n \r \t \v \f \0 \cX \xHH \uHHHH (surrogate pairs joined)
 * and escaped punctuation, groups ( ) (?: ) (?<name> ), alternation,
 * anchors ^ $ (without the m flag: the subject's start and end),
 * quantifiers * + ? {n} {n,} {n,m} (lazy forms match the same strings).
 * Refused: lookaround, backreferences, \b \B, \p{...}, \u{...}, octal
 * escapes, flags.
 *
 * Every node knows the program units it compiles to, repetitions
 * expanded, so a pattern too large is refused before anything is expanded.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/regex/regex.h"
#include "lib/regex/regex_internal.h"
#include "proto/json.h"
#include "proto/base/util.h"

#define REGEX_GROUPS_MAX 64		/* nested groups in a pattern */
#define REGEX_REPEAT_MAX 32767		/* the largest count of {n,m} */


/* ------------------------------------------------------------------------
 * Code point sets.
 */

struct cp_set {
	struct rx_range *r;
	size_t n, cap;
};

static void cp_set_add(struct cp_set *s, uint32_t lo, uint32_t hi)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 8;
		s->r = xreallocarray(s->r, s->cap, sizeof(*s->r));
	}
	s->r[s->n++] = (struct rx_range){ lo, hi };
}

static int cp_range_cmp(const void *a, const void *b)
{
	const struct rx_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges overlapping and adjacent ranges. */
static void cp_set_normalize(struct cp_set *s)
{
	size_t k = 0;

	if (s->n == 0)
		return;
	qsort(s->r, s->n, sizeof(*s->r), cp_range_cmp);
	for (size_t i = 1; i < s->n; i++) {
		if (s->r[i].lo <= s->r[k].hi + 1) {
			if (s->r[i].hi > s->r[k].hi)
				s->r[k].hi = s->r[i].hi;
		} else
			s->r[++k] = s->r[i];
	}
	s->n = k + 1;
}

/* Replaces a normalized set by its complement in [0, CP_MAX]. */
static void cp_set_complement(struct cp_set *s)
{
	struct cp_set c = {};
	uint32_t next = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (s->r[i].lo > next)
			cp_set_add(&c, next, s->r[i].lo - 1);
		next = s->r[i].hi + 1;
	}
	if (next <= CP_MAX)
		cp_set_add(&c, next, CP_MAX);
	free(s->r);
	*s = c;
}

/* Adds the class \d, \w, \s or their negations. */
static void cp_set_add_class(struct cp_set *s, char c)
{
	struct cp_set t = {};

	switch (c) {
	case 'd':
	case 'D':
		cp_set_add(&t, '0', '9');
		break;
	case 'w':
	case 'W':
		cp_set_add(&t, '0', '9');
		cp_set_add(&t, 'A', 'Z');
		cp_set_add(&t, '_', '_');
		cp_set_add(&t, 'a', 'z');
		break;
	case 's':
	case 'S':
		/* WhiteSpace and LineTerminator of ECMA-262. */
		cp_set_add(&t, 0x09, 0x0D);
		cp_set_add(&t, 0x20, 0x20);
		cp_set_add(&t, 0xA0, 0xA0);
		cp_set_add(&t, 0x1680, 0x1680);
		cp_set_add(&t, 0x2000, 0x200A);
		cp_set_add(&t, 0x2028, 0x2029);
		cp_set_add(&t, 0x202F, 0x202F);
		cp_set_add(&t, 0x205F, 0x205F);
		cp_set_add(&t, 0x3000, 0x3000);
		cp_set_add(&t, 0xFEFF, 0xFEFF);
		break;
	}
	cp_set_normalize(&t);
	if (c >= 'A' && c <= 'Z')
		cp_set_complement(&t);
	for (size_t i = 0; i < t.n; i++)
		cp_set_add(s, t.r[i].lo, t.r[i].hi);
	free(t.r);
}

/* ------------------------------------------------------------------------
 * Parsing: ECMA-262 pattern to tree. Every node knows the program units it
 * compiles to, repetitions expanded, so a pattern too large is refused
 * before anything is expanded.
 */

struct rx_parser {
	const char *p;		/* the pattern */
	size_t n, i;
	const char *err;	/* why the pattern is refused */
	size_t err_at;		/* at which byte of it */
	struct rx_tree *t;
	bool icase;		/* sets closed under case folding */
};

static int rx_fail(struct rx_parser *r, size_t at, const char *msg)
{
	if (!r->err) {
		r->err = msg;
		r->err_at = at;
	}
	return -EINVAL;
}

static struct rx_node *rx_new(struct rx_parser *r, enum rx_kind kind)
{
	struct rx_tree *t = r->t;
	struct rx_node *n = xcalloc(1, sizeof(*n));

	if (t->n_all == t->cap_all) {
		t->cap_all = t->cap_all ? t->cap_all * 2 : 16;
		t->all = xreallocarray(t->all, t->cap_all, sizeof(*t->all));
	}
	t->all[t->n_all++] = n;
	n->kind = kind;
	return n;
}

static void rx_add_kid(struct rx_node *n, struct rx_node *kid)
{
	if (n->n_kids == 0 || (n->n_kids & (n->n_kids - 1)) == 0)
		n->kids = xreallocarray(n->kids, n->n_kids ? n->n_kids * 2 : 2, sizeof(*n->kids));
	n->kids[n->n_kids++] = kid;
}

/* A node matching one code point of a set (taking the set). */
/* Whether cp is in the normalized set s. */
static bool cp_set_has(const struct cp_set *s, uint32_t cp)
{
	size_t a = 0, z = s->n;

	while (a < z) {
		size_t m = a + (z - a) / 2;

		if (s->r[m].hi < cp)
			a = m + 1;
		else
			z = m;
	}
	return a < s->n && s->r[a].lo <= cp;
}

/* Closes a set under simple case folding: with a code point, what it
 * folds to and every code point that folds to the same. */
static void cp_set_fold_close(struct cp_set *s)
{
	cp_set_normalize(s);
	/* What members fold to, then everything folding to a member. */
	for (int pass = 0; pass < 2; pass++) {
		size_t n = s->n;
		struct cp_set orig = { .r = xmemdup(s->r, n * sizeof(*s->r)), .n = n, .cap = n };

		for (size_t i = 0; i < rx_fold_count; i++) {
			uint32_t from = rx_fold_table[i][0], to = rx_fold_table[i][1];

			if (pass == 0 && cp_set_has(&orig, from))
				cp_set_add(s, to, to);
			else if (pass == 1 && cp_set_has(&orig, to))
				cp_set_add(s, from, from);
		}
		free(orig.r);
		cp_set_normalize(s);
	}
}

static struct rx_node *rx_set_node(struct rx_parser *r, struct cp_set *s)
{
	struct rx_node *n = rx_new(r, RX_SET);

	if (r->icase)
		cp_set_fold_close(s);
	cp_set_normalize(s);
	n->set = s->r;
	n->n_set = s->n;
	*s = (struct cp_set){};
	n->frag = rx_frag_build(n->set, n->n_set);
	n->size = n->frag->n_nodes + n->frag->n_edges;
	return n;
}

static struct rx_node *rx_literal(struct rx_parser *r, uint32_t cp)
{
	struct cp_set s = {};

	cp_set_add(&s, cp, cp);
	return rx_set_node(r, &s);
}

static bool rx_more(const struct rx_parser *r)
{
	return r->i < r->n;
}

static char rx_peek(const struct rx_parser *r, size_t ahead)
{
	return r->i + ahead < r->n ? r->p[r->i + ahead] : '\0';
}

/* Reads one code point of the pattern (valid UTF-8). */
static int rx_next(struct rx_parser *r, uint32_t *ret)
{
	/* Overlong forms, surrogates and code points above U+10FFFF are not
	 * characters: no subject can hold them. */
	size_t len = utf8_decode(r->p + r->i, r->n - r->i, ret);

	if (!len)
		return rx_fail(r, r->i, "invalid UTF-8");
	r->i += len;
	return 0;
}

/* Reads n hex digits. */
static int rx_hex(struct rx_parser *r, unsigned n, uint32_t *ret)
{
	uint32_t v = 0;

	for (unsigned k = 0; k < n; k++) {
		char c = rx_peek(r, k);

		if (!isxdigit((unsigned char)c))
			return -EINVAL;
		v = v * 16 + (uint32_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	r->i += n;
	*ret = v;
	return 0;
}

/*
 * Reads an escape after its backslash. Returns 0 with a code point in
 * *ret_cp, 1 when it is a class (\d, \w, \s, negated or not; the letter in
 * *ret_class), or a negative errno.
 */
static int rx_escape(struct rx_parser *r, bool in_class, uint32_t *ret_cp, char *ret_class)
{
	size_t at = r->i - 1;
	uint32_t cp;
	char c;

	if (!rx_more(r))
		return rx_fail(r, at, "the pattern ends with a lone backslash");
	c = r->p[r->i];
	if ((unsigned char)c >= 0x80) {
		/* An identity escape of a non-ASCII character. */
		return rx_next(r, ret_cp);
	}
	r->i++;
	switch (c) {
	case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
		*ret_class = c;
		return 1;
	case 'n':
		*ret_cp = '\n';
		return 0;
	case 'r':
		*ret_cp = '\r';
		return 0;
	case 't':
		*ret_cp = '\t';
		return 0;
	case 'v':
		*ret_cp = '\v';
		return 0;
	case 'f':
		*ret_cp = '\f';
		return 0;
	case 'b':
		if (in_class) {
			*ret_cp = '\b';
			return 0;
		}
		return rx_fail(r, at, "a word boundary (\\b) cannot stand here");
	case 'B':
		return rx_fail(r, at, "a word boundary (\\B) cannot stand in a class");
	case '0':
		if (rx_peek(r, 0) >= '0' && rx_peek(r, 0) <= '9')
			return rx_fail(r, at, "octal escapes are not supported");
		*ret_cp = 0;
		return 0;
	case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
		return rx_fail(r, at, "backreferences are not supported");
	case 'k':
		return rx_fail(r, at, "named backreferences (\\k) are not supported");
	case 'p':
	case 'P':
		return rx_fail(r, at, "Unicode property escapes (\\p, \\P) are not supported");
	case 'c': {
		char l = rx_peek(r, 0);

		if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')))
			return rx_fail(r, at, "\\c must be followed by a letter");
		r->i++;
		*ret_cp = (uint32_t)l % 32;
		return 0;
	}
	case 'x':
		if (rx_hex(r, 2, &cp) < 0)
			return rx_fail(r, at, "\\x must be followed by two hex digits");
		*ret_cp = cp;
		return 0;
	case 'u':
		if (rx_peek(r, 0) == '{')
			return rx_fail(r, at, "\\u{...} escapes are not supported (they need the u flag)");
		if (rx_hex(r, 4, &cp) < 0)
			return rx_fail(r, at, "\\u must be followed by four hex digits");
		if (cp >= 0xD800 && cp <= 0xDBFF) {
			uint32_t lo;
			size_t save = r->i;

			if (rx_peek(r, 0) == '\\' && rx_peek(r, 1) == 'u') {
				r->i += 2;
				if (rx_hex(r, 4, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
					*ret_cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					return 0;
				}
				r->i = save;
			}
			return rx_fail(r, at, "a lone surrogate (\\uD800-\\uDFFF) cannot be matched");
		}
		if (cp >= 0xDC00 && cp <= 0xDFFF)
			return rx_fail(r, at, "a lone surrogate (\\uD800-\\uDFFF) cannot be matched");
		*ret_cp = cp;
		return 0;
	}
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
		return rx_fail(r, at, "unknown escape");
	/* Escaped punctuation, space or control character: itself. */
	*ret_cp = (unsigned char)c;
	return 0;
}

/* Reads one class atom: a code point (returns 0) or a class escape (1). */
static int rx_class_atom(struct rx_parser *r, uint32_t *ret_cp, char *ret_class)
{
	uint32_t cp;
	int k;

	k = rx_next(r, &cp);
	if (k < 0)
		return k;
	if (cp != '\\') {
		*ret_cp = cp;
		return 0;
	}
	return rx_escape(r, true, ret_cp, ret_class);
}

/* Parses "[...]" (after the "[") into a set. */
static int rx_class(struct rx_parser *r, struct cp_set *set)
{
	size_t at = r->i - 1;
	bool negate = false;

	if (rx_peek(r, 0) == '^') {
		negate = true;
		r->i++;
	}
	for (;;) {
		uint32_t a, b;
		char ca = 0, cb = 0;
		int ka, kb;

		if (!rx_more(r))
			return rx_fail(r, at, "missing ']'");
		if (r->p[r->i] == ']') {
			r->i++;
			break;
		}
		ka = rx_class_atom(r, &a, &ca);
		if (ka < 0)
			return ka;
		if (rx_peek(r, 0) != '-' || r->i + 1 >= r->n || rx_peek(r, 1) == ']') {
			if (ka == 1)
				cp_set_add_class(set, ca);
			else
				cp_set_add(set, a, a);
			continue;
		}
		r->i++;		/* the "-" */
		kb = rx_class_atom(r, &b, &cb);
		if (kb < 0)
			return kb;
		if (ka == 1 || kb == 1) {
			/* [\d-z]: the "-" is itself (Annex B). */
			if (ka == 1)
				cp_set_add_class(set, ca);
			else
				cp_set_add(set, a, a);
			cp_set_add(set, '-', '-');
			if (kb == 1)
				cp_set_add_class(set, cb);
			else
				cp_set_add(set, b, b);
			continue;
		}
		if (a > b)
			return rx_fail(r, at, "range out of order in character class");
		cp_set_add(set, a, b);
	}
	cp_set_normalize(set);
	if (negate) {
		/* [^a] with the flag matches neither "a" nor "A". */
		if (r->icase)
			cp_set_fold_close(set);
		cp_set_complement(set);
	}
	return 0;
}

/* Parses {n}, {n,} or {n,m} after the "{"; false (nothing consumed) when
 * the brace does not start a quantifier, and so stands for itself. */
static bool rx_braces(struct rx_parser *r, unsigned long *ret_min, unsigned long *ret_max, bool *ret_has_max)
{
	size_t i = r->i;
	unsigned long min = 0, max = 0;
	bool has_max = false, digits = false;

	while (i < r->n && r->p[i] >= '0' && r->p[i] <= '9') {
		min = MIN(min * 10 + (unsigned long)(r->p[i] - '0'), 1000000ul);
		digits = true;
		i++;
	}
	if (!digits)
		return false;
	if (i < r->n && r->p[i] == ',') {
		i++;
		digits = false;
		while (i < r->n && r->p[i] >= '0' && r->p[i] <= '9') {
			max = MIN(max * 10 + (unsigned long)(r->p[i] - '0'), 1000000ul);
			digits = true;
			i++;
		}
		has_max = digits;
		if (!digits)
			max = 0;
	} else {
		max = min;
		has_max = true;
	}
	if (i >= r->n || r->p[i] != '}')
		return false;
	r->i = i + 1;
	*ret_min = min;
	*ret_max = max;
	*ret_has_max = has_max;
	return true;
}

/* Parses the group opening after "(". */
static int rx_group_open(struct rx_parser *r, size_t at, unsigned depth)
{
	if (depth >= REGEX_GROUPS_MAX)
		return rx_fail(r, at, "groups nested too deeply");
	if (rx_peek(r, 0) == '?') {
		char k = rx_peek(r, 1);

		if (k == ':')
			r->i += 2;
		else if (k == '=' || k == '!')
			return rx_fail(r, at, "lookahead assertions are not supported");
		else if (k == '<' && (rx_peek(r, 2) == '=' || rx_peek(r, 2) == '!'))
			return rx_fail(r, at, "lookbehind assertions are not supported");
		else if (k == '<') {
			size_t i = r->i + 2, start = i;

			while (i < r->n && (((unsigned char)r->p[i] >= 0x80) ||
					    (r->p[i] >= 'a' && r->p[i] <= 'z') ||
					    (r->p[i] >= 'A' && r->p[i] <= 'Z') ||
					    (r->p[i] >= '0' && r->p[i] <= '9') ||
					    r->p[i] == '_' || r->p[i] == '$'))
				i++;
			if (i == start || i >= r->n || r->p[i] != '>')
				return rx_fail(r, at, "invalid group name");
			r->i = i + 1;
		} else
			return rx_fail(r, at, "invalid group");
	}
	return 0;
}

/* Appends an item to a sequence, within the size limit. */
static int rx_push(struct rx_parser *r, struct rx_node *cat, struct rx_node *item, size_t at)
{
	rx_add_kid(cat, item);
	cat->size += item->size;
	if (cat->size > REGEX_SIZE_MAX)
		return rx_fail(r, at, "the pattern is too large");
	return 0;
}

/*
 * Applies a quantifier to the last item of a sequence. The program holds
 * min copies of the item, then max - min optional ones (one instruction
 * more each), or a loop: the size is known before anything is expanded.
 */
static int rx_quantify(struct rx_parser *r, struct rx_node *cat, bool can_repeat, size_t at, uint32_t min,
		       uint32_t max)
{
	struct rx_node *kid, *n;
	uint64_t s, size;

	if (!can_repeat)
		return rx_fail(r, at, "nothing to repeat");
	kid = cat->kids[cat->n_kids - 1];
	s = kid->size;
	if (s == 0 || max == 0)
		n = rx_new(r, RX_EMPTY);	/* matches the empty string only */
	else if (min == 1 && max == 1)
		n = kid;
	else {
		/* s <= REGEX_SIZE_MAX and min, max <= REGEX_REPEAT_MAX: no overflow. */
		if (max == RX_INF)
			size = min == 0 ? s + 2 : min * s + 1;
		else
			size = min * s + (uint64_t)(max - min) * (s + 1);
		if (size > REGEX_SIZE_MAX)
			return rx_fail(r, at, "the pattern is too large");
		n = rx_new(r, RX_REPEAT);
		rx_add_kid(n, kid);
		n->min = min;
		n->max = max;
		n->size = (size_t)size;
	}
	cat->kids[cat->n_kids - 1] = n;
	cat->size = cat->size - kid->size + n->size;
	if (cat->size > REGEX_SIZE_MAX)
		return rx_fail(r, at, "the pattern is too large");
	/* A lazy quantifier matches the same strings. */
	if (rx_peek(r, 0) == '?')
		r->i++;
	return 0;
}

static int parse_alt(struct rx_parser *r, unsigned depth, struct rx_node **ret);

/* Parses a sequence up to "|", ")" or the end of the pattern. */
static int parse_cat(struct rx_parser *r, unsigned depth, struct rx_node **ret)
{
	struct rx_node *cat = rx_new(r, RX_CAT);
	bool can_repeat = false;
	size_t k;
	int e;

	while (rx_more(r) && r->p[r->i] != '|' && r->p[r->i] != ')') {
		size_t at = r->i;
		struct rx_node *atom = NULL;
		unsigned long min, max;
		bool has_max;
		uint32_t cp;
		char cls = 0;

		e = rx_next(r, &cp);
		if (e < 0)
			return e;
		switch (cp) {
		case '^':
		case '$':
			atom = rx_new(r, cp == '^' ? RX_BEGIN : RX_END);
			atom->size = 1;
			e = rx_push(r, cat, atom, r->i);
			if (e < 0)
				return e;
			can_repeat = false;
			continue;
		case '(':
			e = rx_group_open(r, at, depth);
			if (e < 0)
				return e;
			e = parse_alt(r, depth + 1, &atom);
			if (e < 0)
				return e;
			if (!rx_more(r))
				return rx_fail(r, r->n, "missing ')'");
			r->i++;		/* the ")" */
			break;
		case '*':
		case '+':
		case '?':
			e = rx_quantify(r, cat, can_repeat, at, cp == '+' ? 1 : 0, cp == '?' ? 1 : RX_INF);
			if (e < 0)
				return e;
			can_repeat = false;
			continue;
		case '{':
			if (rx_braces(r, &min, &max, &has_max)) {
				if (has_max && min > max)
					return rx_fail(r, at, "numbers out of order in {} quantifier");
				if (min > REGEX_REPEAT_MAX || max > REGEX_REPEAT_MAX)
					return rx_fail(r, at, "repeat count above 32767");
				e = rx_quantify(r, cat, can_repeat, at, (uint32_t)min,
						has_max ? (uint32_t)max : RX_INF);
				if (e < 0)
					return e;
				can_repeat = false;
				continue;
			}
			atom = rx_literal(r, '{');
			break;
		case '.': {
			struct cp_set set = {};

			cp_set_add(&set, '\n', '\n');
			cp_set_add(&set, '\r', '\r');
			cp_set_add(&set, 0x2028, 0x2029);
			cp_set_normalize(&set);
			cp_set_complement(&set);
			atom = rx_set_node(r, &set);
			break;
		}
		case '[': {
			struct cp_set set = {};

			e = rx_class(r, &set);
			if (e < 0) {
				free(set.r);
				return e;
			}
			atom = rx_set_node(r, &set);
			break;
		}
		case '\\':
			if (rx_peek(r, 0) == 'b' || rx_peek(r, 0) == 'B') {
				/* An assertion: matches no character, cannot repeat. */
				atom = rx_new(r, rx_peek(r, 0) == 'b' ? RX_WORDB : RX_NWORDB);
				atom->size = 1;
				r->i++;
				e = rx_push(r, cat, atom, r->i);
				if (e < 0)
					return e;
				can_repeat = false;
				continue;
			}
			e = rx_escape(r, false, &cp, &cls);
			if (e < 0)
				return e;
			if (e == 1) {
				struct cp_set set = {};

				cp_set_add_class(&set, cls);
				atom = rx_set_node(r, &set);
			} else
				atom = rx_literal(r, cp);
			break;
		default:
			/* Literals, "]" and "}" included (Annex B). */
			atom = rx_literal(r, cp);
			break;
		}
		e = rx_push(r, cat, atom, r->i);
		if (e < 0)
			return e;
		can_repeat = true;
	}

	/* Items matching only the empty string add nothing. */
	k = 0;
	for (size_t i = 0; i < cat->n_kids; i++)
		if (cat->kids[i]->size > 0)
			cat->kids[k++] = cat->kids[i];
	cat->n_kids = k;
	if (k == 0)
		cat->kind = RX_EMPTY;
	*ret = k == 1 ? cat->kids[0] : cat;
	return 0;
}

/* Parses alternatives up to ")" or the end of the pattern. */
static int parse_alt(struct rx_parser *r, unsigned depth, struct rx_node **ret)
{
	struct rx_node *alt = rx_new(r, RX_ALT), *kid;
	int e;

	e = parse_cat(r, depth, &kid);
	if (e < 0)
		return e;
	rx_add_kid(alt, kid);
	alt->size = kid->size;
	while (rx_more(r) && r->p[r->i] == '|') {
		r->i++;
		e = parse_cat(r, depth, &kid);
		if (e < 0)
			return e;
		rx_add_kid(alt, kid);
		/* A split and a jump more per alternative. */
		alt->size += kid->size + 2;
		if (alt->size > REGEX_SIZE_MAX)
			return rx_fail(r, r->i, "the pattern is too large");
	}
	*ret = alt->n_kids == 1 ? alt->kids[0] : alt;
	return 0;
}

static int parse(const char *pattern, size_t len, bool icase, struct rx_tree **ret, char **ret_err)
{
	struct rx_parser r = { .p = pattern, .n = len, .icase = icase };
	struct rx_node *root = NULL;
	int e;

	if (len > REGEX_PATTERN_MAX) {
		*ret_err = xasprintf("the pattern is longer than %d bytes (at offset %d)", REGEX_PATTERN_MAX,
				     REGEX_PATTERN_MAX);
		return -EINVAL;
	}
	r.t = xcalloc(1, sizeof(*r.t));
	e = parse_alt(&r, 0, &root);
	if (e == 0 && rx_more(&r))
		e = rx_fail(&r, r.i, "unmatched ')'");
	/* The program ends with one instruction more. */
	if (e == 0 && root->size + 1 > REGEX_SIZE_MAX)
		e = rx_fail(&r, r.n, "the pattern is too large");
	if (e < 0) {
		rx_tree_free(r.t);
		*ret_err = xasprintf("%s (at offset %zu)", r.err, r.err_at);
		return e;
	}
	r.t->root = root;
	*ret = r.t;
	return 0;
}

struct rx_tree *rx_tree_free(struct rx_tree *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->n_all; i++) {
		free(t->all[i]->kids);
		free(t->all[i]->set);
		rx_frag_free(t->all[i]->frag);
		free(t->all[i]);
	}
	free(t->all);
	free(t);
	return NULL;
}

int rx_parse(const char *pattern, size_t len, struct rx_tree **ret, char **ret_err)
{
	return parse(pattern, len, false, ret, ret_err);
}

int rx_parse_icase(const char *pattern, size_t len, struct rx_tree **ret, char **ret_err)
{
	return parse(pattern, len, true, ret, ret_err);
}
