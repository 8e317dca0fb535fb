/* SPDX-License-Identifier: MIT */
/*
 * JSON parsing into an arena-backed tree through yajl's callback API, with a
 * depth counter (yajl's own tree parser has no depth limit and frees
 * recursively: a 1,000,000-deep "[[[[" must be an error, not a crash),
 * duplicate-key rejection, and the source span of every value. yajl is the
 * parser of record; json_parse first offers the text to the fast path in
 * json_fast.c, which builds the same tree for the plain requests that make
 * up nearly all traffic and declines anything else.
 */
#include "proto/json.h"
#include "proto/json_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <yajl/yajl_parse.h>

struct frame {
	struct json *node;
	void *items;		/* struct json * or struct json_member, growing */
	size_t n;
	size_t cap;
	const char *key;	/* objects: the key waiting for its value */
	size_t key_len;
};

struct parser {
	yajl_handle h;
	struct json_doc *doc;
	const char *text;
	size_t text_len;
	unsigned max_depth;
	struct frame *stack;
	unsigned depth;
	unsigned stack_cap;
	struct json_err *err;
	bool failed;
};

/* Offset just past the token yajl is reporting. */
static size_t token_end(struct parser *p)
{
	size_t end = yajl_get_bytes_consumed(p->h);
	return MIN(end, p->text_len);
}

/* Start of the first value in the text (for a top-level scalar, whose
 * callback arrives from yajl_complete_parse, where offsets are reset). */
static size_t first_value_off(struct parser *p)
{
	size_t i = 0;
	while (i < p->text_len && strchr(" \t\r\n", p->text[i]))
		i++;
	return i;
}

static void fail(struct parser *p, enum json_error code, size_t off, const char *msg)
{
	p->failed = true;
	if (p->err) {
		p->err->code = code;
		p->err->offset = off;
		snprintf(p->err->msg, sizeof(p->err->msg), "%s", msg);
	}
}

/* Adds a finished value to the container being built, or makes it the root. */
static int add_value(struct parser *p, struct json *v)
{
	if (p->depth == 0) {
		p->doc->root = v;
		return 1;
	}
	struct frame *f = &p->stack[p->depth - 1];
	if (f->node->type == JSON_ARRAY) {
		if (f->n == f->cap) {
			f->cap = f->cap ? f->cap * 2 : 8;
			f->items = xreallocarray(f->items, f->cap, sizeof(struct json *));
		}
		((struct json **)f->items)[f->n++] = v;
	} else {
		if (f->n == f->cap) {
			f->cap = f->cap ? f->cap * 2 : 8;
			f->items = xreallocarray(f->items, f->cap, sizeof(struct json_member));
		}
		((struct json_member *)f->items)[f->n++] = (struct json_member){
			.key = f->key, .key_len = f->key_len, .value = v,
		};
		f->key = NULL;
	}
	return 1;
}

static struct json *new_node(struct parser *p, enum json_type type, size_t off, size_t len)
{
	struct json *v = json_arena_alloc(p->doc, sizeof(*v));
	memset(v, 0, sizeof(*v));
	v->type = type;
	v->off = (uint32_t)off;
	v->len = (uint32_t)len;
	return v;
}

static int cb_null(void *ctx)
{
	struct parser *p = ctx;
	size_t end = token_end(p);
	size_t off = p->depth ? end - 4 : first_value_off(p);
	return add_value(p, new_node(p, JSON_NULL, off, 4));
}

static int cb_bool(void *ctx, int b)
{
	struct parser *p = ctx;
	size_t len = b ? 4 : 5;
	size_t end = token_end(p);
	size_t off = p->depth ? end - len : first_value_off(p);
	struct json *v = new_node(p, JSON_BOOL, off, len);
	v->u.b = b;
	return add_value(p, v);
}

static int cb_number(void *ctx, const char *s, size_t n)
{
	struct parser *p = ctx;
	size_t end = token_end(p);
	size_t off = p->depth ? end - n : first_value_off(p);
	struct json *v = new_node(p, JSON_NUMBER, off, n);
	json_set_number(v, json_arena_strndup(p->doc, s, n), n);
	return add_value(p, v);
}

/* Finds the opening quote of the string token ending (exclusive) at end. */
static size_t string_start(const char *text, size_t end)
{
	if (end < 2)
		return 0;
	size_t i = end - 1;	/* the closing quote */
	while (i-- > 0) {
		if (text[i] != '"')
			continue;
		/* A quote inside a valid string is escaped by an odd number of
		 * backslashes; the opening quote by an even number. */
		size_t bs = 0;
		while (bs < i && text[i - 1 - bs] == '\\')
			bs++;
		if (bs % 2 == 0)
			return i;
	}
	return 0;
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
	struct parser *p = ctx;
	size_t end = token_end(p);
	size_t off = p->depth ? string_start(p->text, end) : first_value_off(p);
	struct json *v = new_node(p, JSON_STRING, off, p->depth ? end - off : p->text_len - off);
	v->u.str.s = json_arena_strndup(p->doc, s, n);
	v->u.str.len = n;
	return add_value(p, v);
}

static int push(struct parser *p, enum json_type type)
{
	if (p->depth >= p->max_depth) {
		char msg[80];
		snprintf(msg, sizeof(msg), "nesting deeper than %u levels", p->max_depth);
		fail(p, JSON_ERR_DEPTH, token_end(p) - 1, msg);
		return 0;
	}
	size_t end = token_end(p);
	struct json *v = new_node(p, type, end - 1, 0);
	if (p->depth == p->stack_cap) {
		p->stack_cap = p->stack_cap ? p->stack_cap * 2 : 16;
		p->stack = xreallocarray(p->stack, p->stack_cap, sizeof(*p->stack));
	}
	p->stack[p->depth++] = (struct frame){ .node = v };
	return 1;
}

/* Returns the later member of the first repeated key, or NULL. */
static const struct json_member *find_duplicate(struct json_member *m, size_t n)
{
	if (n <= 16) {
		for (size_t i = 1; i < n; i++)
			for (size_t j = 0; j < i; j++)
				if (json_same_key(&m[i], &m[j]))
					return &m[i];
		return NULL;
	}
	/* Large objects: sort pointers so a hostile object of 100,000 keys
	 * costs n log n, not n squared. */
	const struct json_member **v = xreallocarray(NULL, n, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = &m[i];
	qsort(v, n, sizeof(*v), json_key_cmp);
	const struct json_member *dup = NULL;
	for (size_t i = 1; i < n && !dup; i++)
		if (json_same_key(v[i], v[i - 1]))
			dup = v[i] > v[i - 1] ? v[i] : v[i - 1];
	free(v);
	return dup;
}

static int pop(struct parser *p)
{
	struct frame *f = &p->stack[--p->depth];
	struct json *v = f->node;
	v->len = (uint32_t)(token_end(p) - v->off);
	if (v->type == JSON_ARRAY) {
		v->u.arr.n = f->n;
		v->u.arr.items = json_arena_alloc(p->doc, f->n * sizeof(struct json *) + 1);
		if (f->n)
			memcpy(v->u.arr.items, f->items, f->n * sizeof(struct json *));
	} else {
		const struct json_member *dup = find_duplicate(f->items, f->n);
		if (dup) {
			char msg[160];
			snprintf(msg, sizeof(msg), "duplicate key '%.100s'", dup->key);
			fail(p, JSON_ERR_DUPKEY, dup->value->off, msg);
			free(f->items);
			return 0;
		}
		v->u.obj.n = f->n;
		v->u.obj.members = json_arena_alloc(p->doc, f->n * sizeof(struct json_member) + 1);
		if (f->n)
			memcpy(v->u.obj.members, f->items, f->n * sizeof(struct json_member));
	}
	free(f->items);
	return add_value(p, v);
}

static int cb_start_map(void *ctx) { return push(ctx, JSON_OBJECT); }
static int cb_end_map(void *ctx) { return pop(ctx); }
static int cb_start_array(void *ctx) { return push(ctx, JSON_ARRAY); }
static int cb_end_array(void *ctx) { return pop(ctx); }

static int cb_map_key(void *ctx, const unsigned char *s, size_t n)
{
	struct parser *p = ctx;
	struct frame *f = &p->stack[p->depth - 1];
	f->key = json_arena_strndup(p->doc, s, n);
	f->key_len = n;
	return 1;
}

static const yajl_callbacks callbacks = {
	.yajl_null = cb_null,
	.yajl_boolean = cb_bool,
	.yajl_number = cb_number,
	.yajl_string = cb_string,
	.yajl_start_map = cb_start_map,
	.yajl_map_key = cb_map_key,
	.yajl_end_map = cb_end_map,
	.yajl_start_array = cb_start_array,
	.yajl_end_array = cb_end_array,
};

/* Copies yajl's error message without its multi-line context. */
static void yajl_error_message(struct parser *p, const char *text, size_t len)
{
	unsigned char *e = yajl_get_error(p->h, 0, (const unsigned char *)text, len);
	char msg[160];
	snprintf(msg, sizeof(msg), "%s", e ? (const char *)e : "parse error");
	yajl_free_error(p->h, e);
	char *nl = strchr(msg, '\n');
	if (nl)
		*nl = '\0';
	/* yajl says "lexical error: invalid char in json text." and the like. */
	size_t n = strlen(msg);
	while (n && (msg[n - 1] == '.' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	size_t off = yajl_get_bytes_consumed(p->h);
	fail(p, JSON_ERR_SYNTAX, MIN(off, len), msg);
}

/*
 * yajl's own allocations (handle, lexer, buffers) live only during one
 * parse: they come from a scratch area reset after each parse instead of
 * malloc, which a profile showed costing as much as the parse itself for
 * small messages. Requests beyond the area fall back to malloc.
 */
#define SCRATCH_SIZE (64 * 1024)

struct scratch {
	size_t used;
	_Alignas(max_align_t) char mem[SCRATCH_SIZE];
};

static __thread struct scratch *scratch;

struct scratch_hdr {
	size_t size;
	size_t pad;	/* keeps the payload aligned like max_align_t on x86-64 */
};

static bool in_scratch(const void *p)
{
	return scratch && (const char *)p >= scratch->mem && (const char *)p < scratch->mem + SCRATCH_SIZE;
}

static void *scratch_malloc(void *ctx, size_t n)
{
	size_t need = (sizeof(struct scratch_hdr) + n + 15) & ~(size_t)15;
	if (scratch && SCRATCH_SIZE - scratch->used >= need) {
		struct scratch_hdr *h = (struct scratch_hdr *)(scratch->mem + scratch->used);
		scratch->used += need;
		h->size = n;
		return h + 1;
	}
	struct scratch_hdr *h = xmalloc(sizeof(*h) + n);
	h->size = n;
	return h + 1;
}

static void scratch_free(void *ctx, void *p)
{
	if (p && !in_scratch(p))
		free((struct scratch_hdr *)p - 1);
}

static void *scratch_realloc(void *ctx, void *p, size_t n)
{
	if (!p)
		return scratch_malloc(ctx, n);
	struct scratch_hdr *h = (struct scratch_hdr *)p - 1;
	if (!in_scratch(p)) {
		h = xrealloc(h, sizeof(*h) + n);
		h->size = n;
		return h + 1;
	}
	if (n <= h->size)
		return p;
	void *q = scratch_malloc(ctx, n);
	memcpy(q, p, h->size);
	return q;
}

static const yajl_alloc_funcs scratch_funcs = {
	.malloc = scratch_malloc,
	.realloc = scratch_realloc,
	.free = scratch_free,
};

/* Parses doc's text with yajl: the parser of record. Takes doc, which
 * it hands out in *ret or frees. */
static int parse_with_yajl(struct json_doc *doc, unsigned flags, unsigned max_depth,
			   struct json_doc **ret, struct json_err *err)
{
	if (!scratch)
		scratch = xcalloc(1, sizeof(*scratch));
	struct json_err dummy;
	if (!err)
		err = &dummy;
	memset(err, 0, sizeof(*err));

	const char *text = doc->text;
	size_t len = doc->text_len;
	/* JSON text is UTF-8 (RFC 8259 §8.1), which yajl checks loosely:
	 * overlong forms, encoded surrogates and code points past U+10FFFF
	 * pass it. And it takes form feed and vertical tab for white space,
	 * which JSON does not (§2); in a string they are invalid anyway. */
	size_t bad = utf8_valid_prefix(text, len);
	const char *ff = memchr(text, '\f', bad), *vt = memchr(text, '\v', bad);
	if (ff || vt || bad < len) {
		const char *at = ff && (!vt || ff < vt) ? ff : vt;
		err->code = JSON_ERR_SYNTAX;
		err->offset = at ? (size_t)(at - text) : bad;
		snprintf(err->msg, sizeof(err->msg), "%s", at ? "invalid character (form feed or vertical tab)" :
			 "invalid UTF-8");
		json_doc_unref(doc);
		return -EINVAL;
	}
	size_t i = 0;
	while (i < len && strchr(" \t\r\n", text[i]) && text[i])
		i++;
	if (i == len) {
		err->code = JSON_ERR_EMPTY;
		err->offset = len;
		snprintf(err->msg, sizeof(err->msg), "empty input");
		json_doc_unref(doc);
		return -EINVAL;
	}

	struct parser p = {
		.doc = doc,
		.text = doc->text,
		.text_len = len,
		.max_depth = max_depth ? max_depth : JSON_DEFAULT_MAX_DEPTH,
		.err = err,
	};
	/* Parses do not nest (callbacks never parse), so the scratch area is
	 * free at the start of each one. */
	scratch->used = 0;
	p.h = yajl_alloc(&callbacks, (yajl_alloc_funcs *)&scratch_funcs, &p);
	if (flags & JSON_ALLOW_COMMENTS)
		yajl_config(p.h, yajl_allow_comments, 1);

	yajl_status st = yajl_parse(p.h, (const unsigned char *)doc->text, len);
	bool at_end = false;
	if (st == yajl_status_ok) {
		st = yajl_complete_parse(p.h);
		at_end = true;
	}
	if (st == yajl_status_error && !p.failed) {
		yajl_error_message(&p, doc->text, len);
		if (at_end)	/* the text ended too early */
			err->offset = len;
	}
	else if (st != yajl_status_ok && !p.failed)
		fail(&p, JSON_ERR_SYNTAX, len, "parse error");

	/* On failure frames may still hold growing vectors. */
	for (unsigned d = 0; d < p.depth; d++)
		free(p.stack[d].items);
	free(p.stack);
	yajl_free(p.h);

	if (p.failed || !doc->root) {
		if (!p.failed) {
			err->code = JSON_ERR_SYNTAX;
			err->offset = len;
			snprintf(err->msg, sizeof(err->msg), "premature end of input");
		}
		json_doc_unref(doc);
		return -EINVAL;
	}
	*ret = doc;
	return 0;
}

int json_parse_yajl(const char *text, size_t len, unsigned flags, unsigned max_depth,
		    struct json_doc **ret, struct json_err *err)
{
	return parse_with_yajl(json_doc_new(text, len), flags, max_depth, ret, err);
}

int json_parse(const char *text, size_t len, unsigned flags, unsigned max_depth,
	       struct json_doc **ret, struct json_err *err)
{
	struct json_doc *doc = json_doc_new(text, len);
	/* The fast path takes what it is sure of (see json_fast.c); when it
	 * declines, the document is as it was and yajl parses it, so every
	 * error, message and offset is yajl's. Comments are yajl's alone. */
	if (!(flags & JSON_ALLOW_COMMENTS) && json_fast_build(doc, max_depth)) {
		/* No error: code 0, offset 0, an empty message, as the yajl
		 * path leaves it. Field by field: zeroing all 176 bytes costs
		 * a fifth of a small parse (x86 compilers use rep stos). */
		if (err) {
			err->code = 0;
			err->offset = 0;
			err->msg[0] = '\0';
		}
		*ret = doc;
		return 0;
	}
	return parse_with_yajl(doc, flags, max_depth, ret, err);
}
