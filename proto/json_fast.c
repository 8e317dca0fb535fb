/* SPDX-License-Identifier: MIT */
/*
 * The fast path of json_parse: a hand-written, non-recursive parser for a
 * strict subset of JSON, tried before yajl.
 *
 * Why it exists: a profile of the daemon answering `ping` showed json_parse
 * at about half of its CPU per call, spent in yajl's per-parse setup, its
 * byte-at-a-time lexer and the callbacks. Nearly every request is plain,
 * small JSON; for those this builds the tree in one pass, allocating
 * nothing but the document's arena (its work stacks are kept per thread
 * from one parse to the next).
 *
 * What it builds is exactly what the yajl path in json_parse.c builds for the
 * same text: node types, source spans (that path's quirks included: a
 * top-level string's span runs to the end of the text), numbers filled by
 * the same json_set_number, decoded strings, member order, everything in
 * the one arena. tests/unit/test_json.c and the differential harness
 * tests/fuzz/fuzz_json.c hold it to that.
 *
 * Why declining is always safe: whenever the text leaves the subset (a
 * comment, a \u escape, a control byte or invalid UTF-8 in a string, any
 * syntax error, a duplicate key, nesting past the limit, white space other
 * than space, tab, CR and LF, an empty text, anything after the value) it
 * gives up, rewinds the arena, and yajl parses the text from the start as
 * it always did. So the subset only decides speed: every error with its
 * message and offset, and every value outside the subset, stay yajl's.
 * The subset is drawn inside what yajl accepts (the number grammar is
 * yajl's lexer's, strict UTF-8 is narrower than yajl's check), so what the
 * fast path accepts, yajl would have accepted with the same result.
 */
#include "proto/json_internal.h"

#include <stdlib.h>
#include <string.h>

#include "proto/base/util.h"

/* A container still open: its node, and where its values start on the
 * value stack. */
struct open {
	struct json *node;
	size_t base;
};

/* The work stacks, kept from one parse to the next so that parsing
 * allocates nothing once they have grown to the traffic's shape: the
 * values (with keys, in objects) of the open containers, the open
 * containers (at most max_depth), and room to sort a large object's keys. */
struct stacks {
	struct json_member *m;
	size_t m_cap;
	struct open *o;
	size_t o_cap;
	const struct json_member **sorted;
	size_t sorted_cap;
};

static __thread struct stacks stacks;

/* Beyond these, a stack grown by one huge document is freed after it. */
#define KEEP_VALUES 4096
#define KEEP_OPEN 1024

enum {
	STR_ESCAPES = 1 << 0,	/* holds a backslash escape */
	STR_HIGH = 1 << 1,	/* may hold bytes >= 0x80: check the UTF-8 */
};

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* Skips the white space JSON allows (yajl also skips \f and \v: those
 * are left for it, and stop the fast path). The text's NUL stops it. */
static inline size_t skip_ws(const unsigned char *s, size_t i)
{
	while (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')
		i++;
	return i;
}

/* Allocates a node with extra bytes after it (a string's, a number's text). */
static inline struct json *new_node(struct json_doc *doc, enum json_type type, size_t off, size_t len,
				    size_t extra)
{
	struct json *v = json_arena_alloc(doc, sizeof(*v) + extra);
	memset(v, 0, sizeof(*v));
	v->type = type;
	v->off = (uint32_t)off;
	v->len = (uint32_t)len;
	return v;
}

/* Finds the closing quote of the string whose contents start at s[i]:
 * returns its index, or 0 to decline (a control byte, the end of the
 * text, an escape other than \" \\ \/ \b \f \n \r \t). */
static inline __attribute__((always_inline))
size_t string_end(const unsigned char *s, size_t n, size_t i, unsigned *ret_flags)
{
	unsigned flags = 0;
	uint64_t high = 0;
	for (;;) {
		/* Eight bytes at a time up to a quote, backslash or control
		 * byte; bytes >= 0x80 are only noted, for the UTF-8 check. */
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			high |= w;
			uint64_t d = json_word_dirty(w);
			if (d) {
				i += (size_t)__builtin_ctzll(d) >> 3;
				goto special;
			}
			i += 8;
		}
		/* The tail: the NUL after the text stops this loop. */
		while (s[i] >= 0x20 && s[i] != '"' && s[i] != '\\')
			high |= s[i++];
special:
		if (s[i] == '"')
			break;
		if (s[i] != '\\')
			return 0;
		switch (s[i + 1]) {
		case '"': case '\\': case '/':
		case 'b': case 'f': case 'n': case 'r': case 't':
			break;
		default:	/* \u (yajl's), anything invalid, the end */
			return 0;
		}
		flags |= STR_ESCAPES;
		i += 2;
	}
	if (high & 0x8080808080808080ULL)
		flags |= STR_HIGH;
	*ret_flags = flags;
	return i;
}

/* Room to ask for a copy of n bytes and its NUL: at least SHORT, so that
 * copy_bytes may move short runs whole. */
#define SHORT 16
static inline size_t room(size_t n)
{
	return n + 1 > SHORT ? n + 1 : SHORT;
}

/* Copies n bytes from src, which has readable bytes readable, to out,
 * which has room(n): a short run as one 16-byte move rather than a call
 * to memcpy (keys and ids are short; this is a visible share of a small
 * parse). */
static inline void copy_bytes(char *out, const unsigned char *src, size_t n, size_t readable)
{
	if (n <= SHORT && readable >= SHORT)
		memcpy(out, src, SHORT);
	else
		memcpy(out, src, n);
}

/* Copies the string contents s[start, end) of the text of n bytes to out
 * (room(end - start)), decoding the escapes string_end let through.
 * Returns the length written before the NUL it adds. */
static inline size_t string_copy(char *out, const unsigned char *s, size_t n, size_t start, size_t end,
				 unsigned flags)
{
	if (!(flags & STR_ESCAPES)) {
		/* The text's NUL is readable too. */
		copy_bytes(out, s + start, end - start, n + 1 - start);
		out[end - start] = '\0';
		return end - start;
	}
	size_t o = 0, i = start;
	for (;;) {
		const unsigned char *bs = memchr(s + i, '\\', end - i);
		size_t run = (bs ? (size_t)(bs - s) : end) - i;
		memcpy(out + o, s + i, run);
		o += run;
		i += run;
		if (i == end)
			break;
		unsigned char c = s[i + 1];
		out[o++] = c == 'b' ? '\b' : c == 'f' ? '\f' : c == 'n' ? '\n' :
			   c == 'r' ? '\r' : c == 't' ? '\t' : (char)c;	/* " \ / */
		i += 2;
	}
	out[o] = '\0';
	return o;
}

/* Finds the end of the number starting at s[i], by the grammar yajl's
 * lexer accepts (RFC 8259's: no '+', no leading zeros, digits on both
 * sides of '.', digits after the exponent): its index, or 0 to decline. */
static size_t number_end(const unsigned char *s, size_t i)
{
	if (s[i] == '-')
		i++;
	if (s[i] == '0')
		i++;
	else if (s[i] >= '1' && s[i] <= '9')
		while (is_digit(s[i]))
			i++;
	else
		return 0;
	if (s[i] == '.') {
		i++;
		if (!is_digit(s[i]))
			return 0;
		while (is_digit(s[i]))
			i++;
	}
	if (s[i] == 'e' || s[i] == 'E') {
		i++;
		if (s[i] == '+' || s[i] == '-')
			i++;
		if (!is_digit(s[i]))
			return 0;
		while (is_digit(s[i]))
			i++;
	}
	/* What follows (a digit after a lone 0, a second '.') is checked as
	 * the next token, and declined there. */
	return i;
}

static inline bool same_key(const struct json_member *a, const struct json_member *b)
{
	return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

static int key_cmp(const void *a, const void *b)
{
	const struct json_member *x = *(const struct json_member *const *)a;
	const struct json_member *y = *(const struct json_member *const *)b;
	int c = memcmp(x->key, y->key, MIN(x->key_len, y->key_len));
	if (c)
		return c;
	return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

/* True when two of the n members share a key. */
static bool has_duplicate(struct stacks *st, const struct json_member *m, size_t n)
{
	if (n <= 16) {
		for (size_t i = 1; i < n; i++)
			for (size_t j = 0; j < i; j++)
				if (same_key(&m[i], &m[j]))
					return true;
		return false;
	}
	/* Large objects: n log n, in the kept sorting room. */
	if (st->sorted_cap < n) {
		free(st->sorted);
		st->sorted_cap = MAX(n, (size_t)64);
		st->sorted = xreallocarray(NULL, st->sorted_cap, sizeof(*st->sorted));
	}
	for (size_t i = 0; i < n; i++)
		st->sorted[i] = &m[i];
	qsort(st->sorted, n, sizeof(*st->sorted), key_cmp);
	for (size_t i = 1; i < n; i++)
		if (same_key(st->sorted[i], st->sorted[i - 1]))
			return true;
	return false;
}

/* Makes room for one more value on the value stack. */
static inline void reserve_value(struct stacks *st, size_t top)
{
	if (__builtin_expect(top == st->m_cap, 0)) {
		st->m_cap = st->m_cap ? st->m_cap * 2 : 64;
		st->m = xreallocarray(st->m, st->m_cap, sizeof(*st->m));
	}
}

/* Lets go of stacks one huge document grew. */
static void trim(struct stacks *st)
{
	if (st->m_cap > KEEP_VALUES) {
		free(st->m);
		st->m = NULL;
		st->m_cap = 0;
	}
	if (st->o_cap > KEEP_OPEN) {
		free(st->o);
		st->o = NULL;
		st->o_cap = 0;
	}
	if (st->sorted_cap > KEEP_VALUES) {
		free(st->sorted);
		st->sorted = NULL;
		st->sorted_cap = 0;
	}
}

bool json_fast_build(struct json_doc *doc, unsigned max_depth)
{
	const unsigned char *s = (const unsigned char *)doc->text;
	size_t n = doc->text_len;
	/* Spans are 32 bits: longer texts are yajl's. */
	if (n >= UINT32_MAX)
		return false;
	if (!max_depth)
		max_depth = JSON_DEFAULT_MAX_DEPTH;
	/* Where to rewind the arena to when declining. */
	struct chunk *mark = doc->chunks;
	size_t mark_used = mark->used;

	struct stacks *st = &stacks;
	size_t top = 0;		/* values on st->m */
	unsigned depth = 0;	/* containers on st->o */
	struct json *v;
	unsigned sf;
	size_t end;
	size_t i = skip_ws(s, 0);

value:
	switch (s[i]) {
	case '{':
	case '[':
		if (depth >= max_depth)
			goto decline;	/* yajl reports the depth */
		if (depth == st->o_cap) {
			st->o_cap = st->o_cap ? st->o_cap * 2 : 32;
			st->o = xreallocarray(st->o, st->o_cap, sizeof(*st->o));
		}
		v = new_node(doc, s[i] == '{' ? JSON_OBJECT : JSON_ARRAY, i, 0, 0);
		st->o[depth++] = (struct open){ .node = v, .base = top };
		i = skip_ws(s, i + 1);
		if (v->type == JSON_OBJECT)
			goto key_or_close;
		if (s[i] == ']')
			goto close;
		goto value;
	case '"':
		end = string_end(s, n, i + 1, &sf);
		if (!end || ((sf & STR_HIGH) && !utf8_valid((const char *)s + i + 1, end - i - 1)))
			goto decline;
		/* The yajl path spans a top-level string from its quote to the
		 * end of the text (first_value_off, text_len); others from
		 * quote to quote. */
		v = new_node(doc, JSON_STRING, i, depth ? end + 1 - i : n - i, room(end - i - 1));
		v->u.str.s = (char *)(v + 1);
		v->u.str.len = string_copy((char *)(v + 1), s, n, i + 1, end, sf);
		i = end + 1;
		break;
	case 't':
		if (s[i + 1] != 'r' || s[i + 2] != 'u' || s[i + 3] != 'e')
			goto decline;
		v = new_node(doc, JSON_BOOL, i, 4, 0);
		v->u.b = true;
		i += 4;
		break;
	case 'f':
		if (s[i + 1] != 'a' || s[i + 2] != 'l' || s[i + 3] != 's' || s[i + 4] != 'e')
			goto decline;
		v = new_node(doc, JSON_BOOL, i, 5, 0);
		i += 5;
		break;
	case 'n':
		if (s[i + 1] != 'u' || s[i + 2] != 'l' || s[i + 3] != 'l')
			goto decline;
		v = new_node(doc, JSON_NULL, i, 4, 0);
		i += 4;
		break;
	case '-':
	case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		end = number_end(s, i);
		if (!end)
			goto decline;
		v = new_node(doc, JSON_NUMBER, i, end - i, room(end - i));
		char *raw = (char *)(v + 1);
		copy_bytes(raw, s + i, end - i, n + 1 - i);
		raw[end - i] = '\0';
		json_set_number(v, raw, end - i);
		i = end;
		break;
	default:	/* '/', \f, \v, NUL, the end of the text, any error */
		goto decline;
	}

got_value:
	if (depth == 0) {
		/* One value, then only white space (yajl would call anything
		 * else trailing garbage). */
		if (skip_ws(s, i) != n)
			goto decline;
		doc->root = v;
		trim(st);
		return true;
	} else {
		struct json *parent = st->o[depth - 1].node;
		if (parent->type == JSON_ARRAY) {
			reserve_value(st, top);
			st->m[top++] = (struct json_member){ .value = v };
		} else {
			st->m[top - 1].value = v;	/* its key is there */
		}
		i = skip_ws(s, i);
		if (s[i] == ',') {
			i = skip_ws(s, i + 1);
			if (parent->type == JSON_OBJECT)
				goto key;
			goto value;
		}
		if (s[i] == (parent->type == JSON_OBJECT ? '}' : ']'))
			goto close;
		goto decline;
	}

key_or_close:
	if (s[i] == '}')
		goto close;
key:
	if (s[i] != '"')
		goto decline;
	end = string_end(s, n, i + 1, &sf);
	if (!end || ((sf & STR_HIGH) && !utf8_valid((const char *)s + i + 1, end - i - 1)))
		goto decline;
	reserve_value(st, top);
	char *key = json_arena_alloc(doc, room(end - i - 1));
	st->m[top].key = key;
	st->m[top].key_len = string_copy(key, s, n, i + 1, end, sf);
	st->m[top].value = NULL;
	top++;
	i = skip_ws(s, end + 1);
	if (s[i] != ':')
		goto decline;
	i = skip_ws(s, i + 1);
	goto value;

close: {
	/* s[i] closes the innermost open container. */
	struct open *o = &st->o[--depth];
	struct json *c = o->node;
	size_t count = top - o->base;
	c->len = (uint32_t)(i + 1 - c->off);
	if (c->type == JSON_OBJECT) {
		/* (The value stack may not exist yet: no pointer into it
		 * unless there are members.) */
		if (count > 1 && has_duplicate(st, st->m + o->base, count))
			goto decline;	/* yajl names the key */
		/* "+ 1" as the yajl path does: never a zero-size block. */
		c->u.obj.members = json_arena_alloc(doc, count * sizeof(struct json_member) + 1);
		if (count)
			memcpy(c->u.obj.members, st->m + o->base, count * sizeof(struct json_member));
		c->u.obj.n = count;
	} else {
		c->u.arr.items = json_arena_alloc(doc, count * sizeof(struct json *) + 1);
		for (size_t k = 0; k < count; k++)
			c->u.arr.items[k] = st->m[o->base + k].value;
		c->u.arr.n = count;
	}
	top = o->base;
	v = c;
	i++;
	goto got_value;
}

decline:
	json_arena_rewind(doc, mark, mark_used);
	trim(st);
	return false;
}

int json_parse_fast(const char *text, size_t len, unsigned flags, unsigned max_depth,
		    struct json_doc **ret)
{
	if (flags & JSON_ALLOW_COMMENTS)
		return 0;
	struct json_doc *doc = json_doc_new(text, len);
	if (!json_fast_build(doc, max_depth)) {
		json_doc_unref(doc);
		return 0;
	}
	*ret = doc;
	return 1;
}
