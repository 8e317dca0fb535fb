/* SPDX-License-Identifier: MIT */
/*
 * ECMA-262 regular expressions for JSON Schema "pattern", matched in time
 * linear in the subject.
 *
 * A pattern is parsed into a tree over code points (rx_parse), then
 * compiled into a Thompson NFA over UTF-8 bytes: a character class becomes
 * a small byte automaton accepting exactly the UTF-8 encodings of its code
 * points, so matching works on bytes whatever the process locale, and NUL
 * is a byte like any other. Subjects are meant to be valid UTF-8 (JSON
 * strings are); on other bytes the search is still safe and bounded.
 *
 * Supported: literals, ., [...] and [^...] with ranges, the escapes \d \D
 * \w \W \s \S \n \r \t \v \f \0 \cX \xHH \uHHHH (surrogate pairs joined)
 * and escaped punctuation, groups ( ) (?: ) (?<name> ), alternation,
 * anchors ^ $ (without the m flag: the subject's start and end),
 * quantifiers * + ? {n} {n,} {n,m} (lazy forms match the same strings).
 * Refused: lookaround, backreferences, \b \B, \p{...}, \u{...}, octal
 * escapes, flags.
 *
 * Cost. Nothing backtracks: the search keeps the set of NFA threads alive
 * after each byte of the subject, entering each instruction at most once
 * per byte. The set after a byte costs 1 + T + I steps (T threads looked
 * at, I instructions entered), at most 1 + 2 * instructions. Sets are
 * cached as DFA states: a byte whose transition is known costs one step, a
 * new state one more per 16 byte classes (of which there are at most
 * 2 * ranges + 1). A search of len bytes thus costs at most
 * (len + 2) * (2 * regex_size() + 1) steps (a closure more at the start
 * and at the end), each a small constant amount of work. The cache belongs
 * to the search and is bounded in memory (emptied when full): the steps
 * depend only on the pattern and the subject. Programs are bounded at
 * compile time (REGEX_SIZE_MAX units, repetitions expanded), and so is
 * compiling: the sizes in the tree are known, and checked, before
 * anything is expanded.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/regex.h"
#include "lib/regex_internal.h"
#include "proto/json.h"
#include "proto/util.h"

#define REGEX_GROUPS_MAX 64		/* nested groups in a pattern */
#define REGEX_REPEAT_MAX 32767		/* the largest count of {n,m} */

/* Memory of the DFA states one search may cache; when full, it is emptied. */
#define DFA_CACHE_MAX (256u * 1024)

#define CP_MAX 0x10FFFFu
#define NONE UINT32_MAX

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
 * The UTF-8 byte automaton of a code point set.
 *
 * Node 0 reads the first byte: ASCII bytes of the set lead out, lead bytes
 * lead to a node for the next byte. A node reading a continuation byte
 * splits its block of code points into 64 sub-blocks: those wholly in the
 * set share one node accepting any continuation bytes, those partly in it
 * get a node of their own. Only well-formed encodings are accepted
 * (no overlong forms, nothing above U+10FFFF); surrogates are not excluded,
 * as valid UTF-8 never holds them. Edges of a node are sorted and disjoint.
 */

#define FRAG_EXIT NONE

struct frag_edge {
	uint8_t lo, hi;
	uint32_t to;		/* node index, or FRAG_EXIT; in a program: pc */
};

struct frag_node {
	uint32_t first, n;	/* its edges */
};

struct rx_frag {
	struct frag_node *nodes;
	size_t n_nodes, cap_nodes;
	struct frag_edge *edges;
	size_t n_edges, cap_edges;
	uint32_t full[4];	/* node reading any k continuation bytes; 0: none yet */
};

/* Builds the automaton of one set. Blocks of code points are visited in
 * increasing order, so a cursor into the set's ranges only moves on. */
struct frag_builder {
	struct rx_frag *f;
	const struct rx_range *r;
	size_t n, cur;
	uint32_t rlo, rhi;	/* code points encoded with as many bytes as now */
};

enum { COVER_NONE, COVER_SOME, COVER_ALL };

/* How much of lo..hi the set holds (counting only rlo..rhi: a block that
 * reaches outside is never all in). lo never goes down between calls. */
static int cover(struct frag_builder *b, uint32_t lo, uint32_t hi)
{
	uint32_t l = MAX(lo, b->rlo), h = MIN(hi, b->rhi);

	if (l > h)
		return COVER_NONE;
	while (b->cur < b->n && b->r[b->cur].hi < l)
		b->cur++;
	if (b->cur == b->n || b->r[b->cur].lo > h)
		return COVER_NONE;
	if (b->r[b->cur].lo <= lo && b->r[b->cur].hi >= hi && l == lo && h == hi)
		return COVER_ALL;
	return COVER_SOME;
}

/* Gives node i these edges. */
static void frag_edges(struct rx_frag *f, uint32_t i, const struct frag_edge *e, size_t n)
{
	if (f->n_edges + n > f->cap_edges) {
		f->cap_edges = MAX(f->cap_edges * 2, f->n_edges + n);
		f->edges = xreallocarray(f->edges, f->cap_edges, sizeof(*f->edges));
	}
	if (n > 0)
		memcpy(f->edges + f->n_edges, e, n * sizeof(*e));
	f->nodes[i] = (struct frag_node){ (uint32_t)f->n_edges, (uint32_t)n };
	f->n_edges += n;
}

/* Appends a node with these edges; returns its index. */
static uint32_t frag_add(struct rx_frag *f, const struct frag_edge *e, size_t n)
{
	if (f->n_nodes == f->cap_nodes) {
		f->cap_nodes = f->cap_nodes ? f->cap_nodes * 2 : 4;
		f->nodes = xreallocarray(f->nodes, f->cap_nodes, sizeof(*f->nodes));
	}
	frag_edges(f, (uint32_t)f->n_nodes, e, n);
	return (uint32_t)f->n_nodes++;
}

/* The node reading any k continuation bytes (FRAG_EXIT for none). */
static uint32_t frag_full(struct rx_frag *f, unsigned k)
{
	struct frag_edge e;

	if (k == 0)
		return FRAG_EXIT;
	if (f->full[k] == 0) {
		e = (struct frag_edge){ 0x80, 0xBF, frag_full(f, k - 1) };
		f->full[k] = frag_add(f, &e, 1);
	}
	return f->full[k];
}

/* Adds an edge for byte b, merged with the previous one when contiguous
 * and going to the same node. */
static void edge_put(struct frag_edge *e, size_t *n, unsigned b, uint32_t to)
{
	if (*n > 0 && e[*n - 1].hi + 1u == b && e[*n - 1].to == to)
		e[*n - 1].hi = (uint8_t)b;
	else
		e[(*n)++] = (struct frag_edge){ (uint8_t)b, (uint8_t)b, to };
}

/* The node reading the next continuation byte for the code points of the
 * set in base .. base + 64^conts - 1. */
static uint32_t frag_cont(struct frag_builder *b, uint32_t base, unsigned conts)
{
	uint32_t sub = 1u << (6 * (conts - 1));
	struct frag_edge e[64];
	size_t k = 0;

	for (unsigned v = 0; v < 64; v++) {
		uint32_t lo = base + v * sub;
		int c = cover(b, lo, lo + sub - 1);

		if (c == COVER_NONE)
			continue;
		/* With conts == 1 a sub-block is one code point: in or out. */
		edge_put(e, &k, 0x80 + v, c == COVER_ALL ? frag_full(b->f, conts - 1) : frag_cont(b, lo, conts - 1));
	}
	return frag_add(b->f, e, k);
}

/* Builds the automaton of a normalized set. */
static struct rx_frag *frag_build(const struct rx_range *r, size_t n)
{
	static const struct {
		uint8_t first, last;	/* lead bytes */
		uint8_t mask;		/* their payload bits */
		unsigned conts;		/* continuation bytes after them */
		uint32_t lo, hi;	/* code points encoded so */
	} leads[] = {
		{ 0xC2, 0xDF, 0x1F, 1, 0x80, 0x7FF },
		{ 0xE0, 0xEF, 0x0F, 2, 0x800, 0xFFFF },
		{ 0xF0, 0xF4, 0x07, 3, 0x10000, CP_MAX },
	};
	struct frag_builder b = { .f = xcalloc(1, sizeof(*b.f)), .r = r, .n = n };
	struct frag_edge e[128];
	size_t k = 0;

	/* Node 0 is the entry: reserve it, give it its edges last. */
	frag_add(b.f, NULL, 0);
	for (size_t i = 0; i < n && r[i].lo < 0x80; i++)
		e[k++] = (struct frag_edge){ (uint8_t)r[i].lo, (uint8_t)MIN(r[i].hi, 0x7Fu), FRAG_EXIT };
	for (size_t l = 0; l < ELEMENTSOF(leads); l++) {
		b.rlo = leads[l].lo;
		b.rhi = leads[l].hi;
		for (unsigned lead = leads[l].first; lead <= leads[l].last; lead++) {
			uint32_t base = (lead & leads[l].mask) << (6 * leads[l].conts);
			int c = cover(&b, base, base + (1u << (6 * leads[l].conts)) - 1);

			if (c == COVER_NONE)
				continue;
			edge_put(e, &k, lead,
				 c == COVER_ALL ? frag_full(b.f, leads[l].conts) : frag_cont(&b, base, leads[l].conts));
		}
	}
	frag_edges(b.f, 0, e, k);
	return b.f;
}

static void frag_free(struct rx_frag *f)
{
	if (!f)
		return;
	free(f->nodes);
	free(f->edges);
	free(f);
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
static struct rx_node *rx_set_node(struct rx_parser *r, struct cp_set *s)
{
	struct rx_node *n = rx_new(r, RX_SET);

	cp_set_normalize(s);
	n->set = s->r;
	n->n_set = s->n;
	*s = (struct cp_set){};
	n->frag = frag_build(n->set, n->n_set);
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
		return rx_fail(r, at, "word boundaries (\\b) are not supported");
	case 'B':
		return rx_fail(r, at, "word boundaries (\\B) are not supported");
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
	if (negate)
		cp_set_complement(set);
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

int rx_parse(const char *pattern, size_t len, struct rx_tree **ret, char **ret_err)
{
	struct rx_parser r = { .p = pattern, .n = len };
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
		frag_free(t->all[i]->frag);
		free(t->all[i]);
	}
	free(t->all);
	free(t);
	return NULL;
}

/* ------------------------------------------------------------------------
 * Compiling: tree to program.
 */

enum op {
	OP_RANGES,	/* reads a byte: edges ranges[x .. x + y) say where to */
	OP_SPLIT,	/* goes on at x and at y */
	OP_JMP,		/* goes on at x */
	OP_BEGIN,	/* goes on at x at the start of the subject */
	OP_END,		/* goes on at x at its end */
	OP_MATCH,
};

struct insn {
	uint32_t op, x, y;
};

struct regex {
	struct insn *insns;
	uint32_t n_insns;
	struct frag_edge *ranges;	/* .to: a pc */
	uint32_t n_ranges;
	uint8_t byte_class[256];	/* bytes no instruction tells apart share a class */
	uint32_t n_classes;
	bool restart;			/* a match may start after the first byte */
	size_t cap_insns, cap_ranges;
};

static uint32_t prog_add(struct regex *re, uint32_t op, uint32_t x, uint32_t y)
{
	if (re->n_insns == re->cap_insns) {
		re->cap_insns = re->cap_insns ? re->cap_insns * 2 : 16;
		re->insns = xreallocarray(re->insns, re->cap_insns, sizeof(*re->insns));
	}
	re->insns[re->n_insns] = (struct insn){ op, x, y };
	return re->n_insns++;
}

/* Appends the automaton of a set; its exits go to the next instruction. */
static void emit_frag(struct regex *re, const struct rx_frag *f)
{
	uint32_t base = re->n_insns, exit = base + (uint32_t)f->n_nodes;

	if (re->n_ranges + f->n_edges > re->cap_ranges) {
		re->cap_ranges = MAX(re->cap_ranges * 2, re->n_ranges + f->n_edges);
		re->ranges = xreallocarray(re->ranges, re->cap_ranges, sizeof(*re->ranges));
	}
	for (size_t j = 0; j < f->n_nodes; j++) {
		const struct frag_node *fn = &f->nodes[j];

		prog_add(re, OP_RANGES, re->n_ranges, fn->n);
		for (uint32_t k = 0; k < fn->n; k++) {
			struct frag_edge e = f->edges[fn->first + k];

			e.to = e.to == FRAG_EXIT ? exit : base + e.to;
			re->ranges[re->n_ranges++] = e;
		}
	}
}

/* Points a chain of jumps (linked through x) or splits (through y) at pc. */
static void patch(struct regex *re, uint32_t list, bool via_y, uint32_t pc)
{
	while (list != NONE) {
		uint32_t *slot = via_y ? &re->insns[list].y : &re->insns[list].x;

		list = *slot;
		*slot = pc;
	}
}

/* Appends the program of a node: it goes on at the next instruction. */
static void emit(struct regex *re, const struct rx_node *n)
{
	uint32_t pc, list = NONE;

	switch (n->kind) {
	case RX_EMPTY:
		break;
	case RX_SET:
		emit_frag(re, n->frag);
		break;
	case RX_BEGIN:
	case RX_END:
		pc = re->n_insns;
		prog_add(re, n->kind == RX_BEGIN ? OP_BEGIN : OP_END, pc + 1, 0);
		break;
	case RX_CAT:
		for (size_t i = 0; i < n->n_kids; i++)
			emit(re, n->kids[i]);
		break;
	case RX_ALT:
		for (size_t i = 0; i + 1 < n->n_kids; i++) {
			pc = re->n_insns;
			prog_add(re, OP_SPLIT, pc + 1, 0);
			emit(re, n->kids[i]);
			list = prog_add(re, OP_JMP, list, 0);
			re->insns[pc].y = re->n_insns;
		}
		emit(re, n->kids[n->n_kids - 1]);
		patch(re, list, false, re->n_insns);
		break;
	case RX_REPEAT:
		if (n->max == RX_INF && n->min == 0) {
			pc = re->n_insns;
			prog_add(re, OP_SPLIT, pc + 1, 0);
			emit(re, n->kids[0]);
			prog_add(re, OP_JMP, pc, 0);
			re->insns[pc].y = re->n_insns;
		} else if (n->max == RX_INF) {
			for (uint32_t i = 0; i + 1 < n->min; i++)
				emit(re, n->kids[0]);
			pc = re->n_insns;
			emit(re, n->kids[0]);
			prog_add(re, OP_SPLIT, pc, re->n_insns + 1);
		} else {
			for (uint32_t i = 0; i < n->min; i++)
				emit(re, n->kids[0]);
			/* x{0,m} as (x(x(x)?)?)?: every split leaves to the end. */
			for (uint32_t i = n->min; i < n->max; i++) {
				pc = re->n_insns;
				prog_add(re, OP_SPLIT, pc + 1, list);
				list = pc;
				emit(re, n->kids[0]);
			}
			patch(re, list, true, re->n_insns);
		}
		break;
	}
}

/* ------------------------------------------------------------------------
 * Searching.
 */

struct run {
	const struct regex *re;
	uint32_t *mark;		/* per instruction: the generation that entered it */
	uint32_t gen;
	uint32_t *stack;
	uint64_t steps;
	bool matched;
};

/* Starts a new set of instructions entered. */
static void new_gen(struct run *r)
{
	if (++r->gen == 0) {
		memset(r->mark, 0, r->re->n_insns * sizeof(*r->mark));
		r->gen = 1;
	}
}

/*
 * Enters pc and everything reachable from it without reading a byte,
 * appending the threads (instructions that wait for a byte, or for the end)
 * to out. Each instruction is entered once per generation: one step.
 * at_end: the subject is over, "$" holds and nothing waits.
 */
static void closure(struct run *r, uint32_t pc, bool at_begin, bool at_end, uint32_t *out, size_t *n_out)
{
	const struct insn *insns = r->re->insns;
	uint32_t *stack = r->stack;
	size_t sp = 0;

#define ENTER(t)                                   \
	do {                                       \
		uint32_t t_ = (t);                 \
		if (r->mark[t_] != r->gen) {       \
			r->mark[t_] = r->gen;      \
			r->steps++;                \
			stack[sp++] = t_;          \
		}                                  \
	} while (0)

	ENTER(pc);
	while (sp > 0) {
		const struct insn *in = &insns[stack[--sp]];

		switch (in->op) {
		case OP_RANGES:
			if (!at_end)
				out[(*n_out)++] = (uint32_t)(in - insns);
			break;
		case OP_END:
			if (at_end)
				ENTER(in->x);
			else
				out[(*n_out)++] = (uint32_t)(in - insns);
			break;
		case OP_BEGIN:
			if (at_begin)
				ENTER(in->x);
			break;
		case OP_JMP:
			ENTER(in->x);
			break;
		case OP_SPLIT:
			ENTER(in->y);
			ENTER(in->x);
			break;
		case OP_MATCH:
			r->matched = true;
			return;
		}
	}
#undef ENTER
}

/* The threads at the start of the subject. */
static void start(struct run *r, uint32_t *out, size_t *n_out)
{
	new_gen(r);
	*n_out = 0;
	closure(r, 0, true, false, out, n_out);
}

/* The threads after reading byte b with threads from. */
static void step(struct run *r, const uint32_t *from, size_t n_from, uint8_t b, uint32_t *out, size_t *n_out)
{
	const struct regex *re = r->re;

	new_gen(r);
	*n_out = 0;
	r->steps += 1 + n_from;
	for (size_t i = 0; i < n_from; i++) {
		const struct insn *in = &re->insns[from[i]];
		const struct frag_edge *e;
		size_t a = 0, z;

		/* An empty class ([]) has no edges, and the program then
		 * perhaps no edge array at all. */
		if (in->op != OP_RANGES || in->y == 0)
			continue;
		e = re->ranges + in->x;
		z = in->y;
		/* The edges are sorted and disjoint. */
		while (a < z) {
			size_t m = a + (z - a) / 2;

			if (e[m].hi < b)
				a = m + 1;
			else
				z = m;
		}
		if (a < in->y && e[a].lo <= b) {
			closure(r, e[a].to, false, false, out, n_out);
			if (r->matched)
				return;
		}
	}
	/* An unanchored search: a match may also start here. */
	if (re->restart)
		closure(r, 0, false, false, out, n_out);
}

/* Whether threads waiting at the end of the subject lead to a match. */
static void finish(struct run *r, const uint32_t *from, size_t n_from, bool at_begin)
{
	new_gen(r);
	r->steps += n_from;
	for (size_t i = 0; i < n_from && !r->matched; i++)
		if (r->re->insns[from[i]].op == OP_END)
			closure(r, r->re->insns[from[i]].x, at_begin, true, NULL, NULL);
}

/* Searches by state sets alone; a and b have room for a set of threads. */
static int search_nfa(struct run *r, const uint8_t *s, size_t len, uint64_t budget, uint32_t *a, uint32_t *b)
{
	size_t na, nb;

	start(r, a, &na);
	for (size_t i = 0; i < len; i++) {
		uint32_t *t;

		if (r->matched)
			return 1;
		if (r->steps > budget)
			return -E2BIG;
		if (na == 0)
			return 0;	/* anchored, and nothing alive */
		step(r, a, na, s[i], b, &nb);
		t = a;
		a = b;
		b = t;
		na = nb;
	}
	if (!r->matched)
		finish(r, a, na, len == 0);
	if (r->matched)
		return 1;
	return r->steps > budget ? -E2BIG : 0;
}

/* A cached set of threads, its transitions in next[]. */
struct dstate {
	uint32_t at, n;		/* its threads: pcs[at .. at + n) */
	uint32_t slot;		/* in the table */
	uint32_t hash;
};

/* Room for the first states of a search: short searches do not allocate. */
#define DFA_LOCAL_STATES 64
#define DFA_LOCAL_PCS 512
#define DFA_LOCAL_NEXT 1024

struct dfa {
	uint32_t n_classes;
	uint32_t *pcs;
	size_t n_pcs, cap_pcs;
	int32_t *next;		/* per state and byte class: a state, or -1 */
	size_t cap_next;
	struct dstate *st;
	size_t n_st, cap_st;
	int32_t *table;		/* open addressing over st; -1: free */
	size_t cap_table;	/* a power of two */
	size_t bytes, max_bytes;
	uint32_t added;		/* steps the last new state cost beyond its set */
	uint32_t pcs_local[DFA_LOCAL_PCS];
	int32_t next_local[DFA_LOCAL_NEXT];
	struct dstate st_local[DFA_LOCAL_STATES];
	int32_t table_local[2 * DFA_LOCAL_STATES];
};

/* Makes room for need elements in an array that may start in local storage. */
static void *grow(void *p, const void *local, size_t *cap, size_t need, size_t size)
{
	size_t c = MAX(*cap * 2, need);
	void *q;

	if (need <= *cap)
		return p;
	if (p == local) {
		q = xreallocarray(NULL, c, size);
		memcpy(q, p, *cap * size);
	} else
		q = xreallocarray(p, c, size);
	*cap = c;
	return q;
}

static uint32_t set_hash(const uint32_t *pcs, size_t n)
{
	uint64_t h = n;

	for (size_t i = 0; i < n; i++)
		h = (h ^ pcs[i]) * 0x9E3779B97F4A7C15ull;
	return (uint32_t)(h ^ (h >> 32));
}

/* Places state i in the table. */
static void dfa_place(struct dfa *d, uint32_t i)
{
	size_t mask = d->cap_table - 1, slot = d->st[i].hash & mask;

	while (d->table[slot] >= 0)
		slot = (slot + 1) & mask;
	d->table[slot] = (int32_t)i;
	d->st[i].slot = (uint32_t)slot;
}

/* Forgets every state (the cache is full). */
static void dfa_flush(struct dfa *d)
{
	for (size_t i = 0; i < d->n_st; i++)
		d->table[d->st[i].slot] = -1;
	d->n_st = 0;
	d->n_pcs = 0;
	d->bytes = 0;
}

/* The state of a set of threads, added if new; *ret_flushed when the
 * cache had to be emptied for it (other state numbers are then void). */
static int32_t dfa_state(struct dfa *d, const uint32_t *pcs, size_t n, bool *ret_flushed)
{
	uint32_t hash = set_hash(pcs, n);
	size_t mask = d->cap_table - 1, need;

	*ret_flushed = false;
	d->added = 0;
	for (size_t slot = hash & mask; d->table[slot] >= 0; slot = (slot + 1) & mask) {
		const struct dstate *st = &d->st[d->table[slot]];

		if (st->hash == hash && st->n == n && memcmp(d->pcs + st->at, pcs, n * sizeof(*pcs)) == 0)
			return d->table[slot];
	}
	need = n * sizeof(*pcs) + d->n_classes * sizeof(*d->next) + sizeof(struct dstate) + 2 * sizeof(*d->table);
	if (d->n_st > 0 && d->bytes + need > d->max_bytes) {
		dfa_flush(d);
		*ret_flushed = true;
	}
	if (2 * (d->n_st + 1) > d->cap_table) {
		d->cap_table *= 2;
		if (d->table == d->table_local)
			d->table = xreallocarray(NULL, d->cap_table, sizeof(*d->table));
		else
			d->table = xreallocarray(d->table, d->cap_table, sizeof(*d->table));
		memset(d->table, 0xff, d->cap_table * sizeof(*d->table));
		for (size_t i = 0; i < d->n_st; i++)
			dfa_place(d, (uint32_t)i);
	}
	d->st = grow(d->st, d->st_local, &d->cap_st, d->n_st + 1, sizeof(*d->st));
	d->pcs = grow(d->pcs, d->pcs_local, &d->cap_pcs, d->n_pcs + n, sizeof(*d->pcs));
	d->next = grow(d->next, d->next_local, &d->cap_next, (d->n_st + 1) * d->n_classes, sizeof(*d->next));
	memcpy(d->pcs + d->n_pcs, pcs, n * sizeof(*pcs));
	memset(d->next + d->n_st * d->n_classes, 0xff, d->n_classes * sizeof(*d->next));
	d->st[d->n_st] = (struct dstate){ .at = (uint32_t)d->n_pcs, .n = (uint32_t)n, .hash = hash };
	dfa_place(d, (uint32_t)d->n_st);
	d->n_pcs += n;
	d->bytes += need;
	/* Clearing its transitions costs a step per 16 classes. There are at
	 * most 2 * ranges + 1 classes: still within the bound. */
	d->added = d->n_classes / 16;
	return (int32_t)d->n_st++;
}

/* Searches with the sets cached as DFA states: one step per byte while
 * the transitions are known. set has room for a set of threads. */
static int search_dfa(struct run *r, const uint8_t *s, size_t len, uint64_t budget, uint32_t *set,
		      size_t max_bytes)
{
	const struct regex *re = r->re;
	struct dfa d;
	const struct dstate *st;
	size_t n, i = 0;
	int32_t cur, to;
	bool flushed;
	int k = 0;

	d.n_classes = re->n_classes;
	d.pcs = d.pcs_local;
	d.n_pcs = 0;
	d.cap_pcs = DFA_LOCAL_PCS;
	d.next = d.next_local;
	d.cap_next = DFA_LOCAL_NEXT;
	d.st = d.st_local;
	d.n_st = 0;
	d.cap_st = DFA_LOCAL_STATES;
	d.table = d.table_local;
	d.cap_table = 2 * DFA_LOCAL_STATES;
	memset(d.table, 0xff, sizeof(d.table_local));
	d.bytes = 0;
	d.max_bytes = max_bytes;
	d.added = 0;

	start(r, set, &n);
	if (r->matched || n == 0 || r->steps > budget) {
		k = r->matched ? 1 : n == 0 ? 0 : -E2BIG;
		goto out;
	}
	/* States are named by their offset in next[]: no multiplication
	 * on the fast path. */
	cur = dfa_state(&d, set, n, &flushed) * (int32_t)d.n_classes;
	r->steps += d.added;
	for (;;) {
		const int32_t *next = d.next;
		const uint8_t *cls = re->byte_class;
		uint64_t steps = r->steps;
		size_t t = 0;

		/* Known transitions: a step each. */
		for (; i < len; i++) {
			t = (size_t)cur + cls[s[i]];
			to = next[t];
			if (to < 0)
				break;
			cur = to;
			if (++steps > budget)
				break;
		}
		r->steps = steps;
		if (steps > budget) {
			k = -E2BIG;
			goto out;
		}
		if (i == len)
			break;
		/* A new one: the step of the state set. */
		st = &d.st[cur / d.n_classes];
		step(r, d.pcs + st->at, st->n, s[i++], set, &n);
		if (r->matched || n == 0 || r->steps > budget) {
			/* n == 0: anchored, and nothing alive. */
			k = r->matched ? 1 : n == 0 ? 0 : -E2BIG;
			goto out;
		}
		to = dfa_state(&d, set, n, &flushed) * (int32_t)d.n_classes;
		r->steps += d.added;
		if (!flushed)
			d.next[t] = to;
		cur = to;
	}
	st = &d.st[cur / d.n_classes];
	finish(r, d.pcs + st->at, st->n, len == 0);
	if (r->matched)
		k = 1;
	else if (r->steps > budget)
		k = -E2BIG;
out:
	if (d.pcs != d.pcs_local)
		free(d.pcs);
	if (d.next != d.next_local)
		free(d.next);
	if (d.st != d.st_local)
		free(d.st);
	if (d.table != d.table_local)
		free(d.table);
	return k;
}

int rx_search(const struct regex *re, const char *s, size_t len, uint64_t *budget, enum rx_mode mode)
{
	/* Small programs search without allocating. */
	uint32_t local[4 * 256];
	_cleanup_free_ uint32_t *heap = NULL;
	uint32_t *mem = local;
	size_t n = re->n_insns;
	struct run r = { .re = re };
	int k;

	if (n > 256)
		mem = heap = xreallocarray(NULL, 4 * n, sizeof(*mem));
	r.mark = mem;
	r.stack = mem + n;
	memset(r.mark, 0, n * sizeof(*r.mark));
	if (mode == RX_MODE_NFA)
		k = search_nfa(&r, (const uint8_t *)s, len, *budget, mem + 2 * n, mem + 3 * n);
	else
		k = search_dfa(&r, (const uint8_t *)s, len, *budget, mem + 2 * n,
			       mode == RX_MODE_DFA_TINY ? 1 : DFA_CACHE_MAX);
	/* Whatever it found, a search that took more than its budget failed:
	 * the outcome depends only on the steps it needs. */
	if (r.steps > *budget) {
		*budget = 0;
		return -E2BIG;
	}
	*budget -= r.steps;
	return k;
}

int regex_search(const struct regex *re, const char *s, size_t len, uint64_t *budget)
{
	return rx_search(re, s, len, budget, RX_MODE_DFA);
}

/* Numbers the byte classes: bytes no edge tells apart behave alike. */
static void make_classes(struct regex *re)
{
	bool cut[257] = {};
	uint32_t c = 0;

	for (size_t i = 0; i < re->n_ranges; i++) {
		cut[re->ranges[i].lo] = true;
		cut[re->ranges[i].hi + 1] = true;
	}
	for (unsigned b = 0; b < 256; b++) {
		if (b > 0 && cut[b])
			c++;
		re->byte_class[b] = (uint8_t)c;
	}
	re->n_classes = c + 1;
}

/* Whether a match can start past the first byte: is anything reachable
 * from the start without "^"? */
static bool can_restart(const struct regex *re)
{
	_cleanup_free_ uint32_t *mem = xcalloc(3 * (size_t)re->n_insns, sizeof(*mem));
	struct run r = { .re = re, .mark = mem, .stack = mem + re->n_insns };
	size_t n = 0;

	new_gen(&r);
	closure(&r, 0, false, false, mem + 2 * re->n_insns, &n);
	return n > 0 || r.matched;
}

int regex_compile(const char *pattern, size_t len, struct regex **ret, char **ret_err)
{
	struct rx_tree *t = NULL;
	struct regex *re;
	int k;

	k = rx_parse(pattern, len, &t, ret_err);
	if (k < 0)
		return k;
	re = xcalloc(1, sizeof(*re));
	emit(re, t->root);
	prog_add(re, OP_MATCH, 0, 0);
	rx_tree_free(t);
	make_classes(re);
	re->restart = can_restart(re);
	*ret = re;
	return 0;
}

size_t regex_size(const struct regex *re)
{
	return (size_t)re->n_insns + re->n_ranges;
}

struct regex *regex_free(struct regex *re)
{
	if (!re)
		return NULL;
	free(re->insns);
	free(re->ranges);
	free(re);
	return NULL;
}
