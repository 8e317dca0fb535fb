/* SPDX-License-Identifier: MIT */
/*
 * JSON parsing into an arena-backed tree through yajl's callback API, with a
 * depth counter (yajl's own tree parser has no depth limit and frees
 * recursively: a 1,000,000-deep "[[[[" must be an error, not a crash),
 * duplicate-key rejection, and the source span of every value. yajl is the
 * parser of record; json_parse first offers the text to the fast path in
 * json_fast.c, which builds the same tree for the plain requests that make
 * up nearly all traffic and declines anything else. Also the arena, value
 * comparison, canonical form, UTF-8 helpers and the generator.
 */
#include "proto/json.h"
#include "proto/json_internal.h"

#include <errno.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <yajl/yajl_parse.h>

/* --- arena ------------------------------------------------------------ */

#define CHUNK_SMALL ((size_t)4096 - sizeof(struct chunk))

/* One spare first-size chunk: most documents (a request, a small answer)
 * fit in one, so parsing one after another allocates nothing. The daemon
 * is single-threaded; the cache is per thread all the same. */
static __thread struct chunk *spare_chunk;

struct chunk *json_arena_grow(struct json_doc *doc, size_t n)
{
	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	struct chunk *c = doc->chunks;
	size_t cap = MAX(n, CHUNK_SMALL);
	if (c && c->cap * 2 > cap && c->cap < 1u << 20)
		cap = MAX(cap, c->cap * 2);
	if (cap == CHUNK_SMALL && spare_chunk)
		c = TAKE_PTR(spare_chunk);
	else
		c = xmalloc(sizeof(struct chunk) + cap);
	c->next = doc->chunks;
	c->used = 0;
	c->cap = cap;
	doc->chunks = c;
	return c;
}

/* Frees one chunk, or keeps it as the spare. */
static void chunk_release(struct chunk *c)
{
	if (c->cap == CHUNK_SMALL && !spare_chunk)
		spare_chunk = c;
	else
		free(c);
}

void json_arena_rewind(struct json_doc *doc, struct chunk *mark, size_t used)
{
	while (doc->chunks != mark) {
		struct chunk *c = doc->chunks;
		doc->chunks = c->next;
		chunk_release(c);
	}
	mark->used = used;
}

struct json_doc *json_doc_new(const char *text, size_t len)
{
	/* The document, its copy of the text and its nodes share the arena:
	 * a small message costs one (usually cached) chunk in all. */
	struct json_doc tmp = {0};
	struct json_doc *doc = json_arena_alloc(&tmp, sizeof(struct json_doc));
	/* Field by field: copying tmp whole right after arena_alloc wrote
	 * into it stalls on store forwarding, a measurable part of a small
	 * parse. */
	doc->refs = 1;
	doc->chunks = tmp.chunks;
	doc->root = NULL;
	doc->text = json_arena_strndup(doc, text, len);
	doc->text_len = len;
	return doc;
}

/* --- parser ----------------------------------------------------------- */

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

/* Reads eight ASCII digits at p as a number: false if one is not a digit.
 * The combining multiplications are those of Lemire's "fast integer
 * parsing" (little-endian; elsewhere the caller's loop does the work). */
static inline bool digits8(const char *p, uint32_t *ret)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t w;
	memcpy(&w, p, 8);
	if ((w & 0xF0F0F0F0F0F0F0F0ull) != 0x3030303030303030ull ||
	    ((w + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) != 0x3030303030303030ull)
		return false;
	w -= 0x3030303030303030ull;
	w = w * 10 + (w >> 8);	/* pairs of digits in every other byte */
	w = ((w & 0x000000FF000000FFull) * (100 + (1000000ull << 32)) +
	     ((w >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32))) >> 32;
	*ret = (uint32_t)w;
	return true;
#else
	(void)p;
	(void)ret;
	return false;
#endif
}

/* Fills a number node from its text. */
void json_set_number(struct json *v, const char *raw, size_t n)
{
	char tmp[64];
	char *heap = NULL;
	char *s = tmp;

	v->u.num.raw = raw;
	v->u.num.raw_len = n;
	/* Fast path: short integers (ids, counts) need neither strtod nor
	 * strtoll. */
	if (n <= 18) {
		size_t i = raw[0] == '-';
		int64_t x = 0;
		size_t k = i;
		uint32_t eight;
		/* Eight digits at a time while eight remain (ids are often
		 * long: times, sequence numbers), then one by one. */
		while (n - k >= 8 && digits8(raw + k, &eight)) {
			x = x * 100000000 + eight;
			k += 8;
		}
		for (; k < n; k++) {
			unsigned d = (unsigned char)raw[k] - (unsigned)'0';
			if (d > 9)
				break;
			x = x * 10 + d;
		}
		if (i < n && k == n) {
			v->u.num.i = i ? -x : x;
			v->u.num.d = (double)v->u.num.i;
			v->u.num.is_int = true;
			return;
		}
	}
	if (n >= sizeof(tmp))
		s = heap = xmalloc(n + 1);
	memcpy(s, raw, n);
	s[n] = '\0';
	v->u.num.d = strtod(s, NULL);
	if (!strpbrk(s, ".eE")) {
		errno = 0;
		long long i = strtoll(s, NULL, 10);
		if (errno == 0) {
			v->u.num.i = i;
			v->u.num.is_int = true;
		}
	} else if (isfinite(v->u.num.d) && v->u.num.d == floor(v->u.num.d) &&
		   fabs(v->u.num.d) < 9.2e18) {
		v->u.num.i = (int64_t)v->u.num.d;
		v->u.num.is_int = true;
	}
	free(heap);
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

static int key_cmp(const void *a, const void *b)
{
	const struct json_member *x = *(const struct json_member *const *)a;
	const struct json_member *y = *(const struct json_member *const *)b;
	size_t n = MIN(x->key_len, y->key_len);
	int c = memcmp(x->key, y->key, n);
	if (c)
		return c;
	return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

static bool same_key(const struct json_member *a, const struct json_member *b)
{
	return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

/* Returns the later member of the first repeated key, or NULL. */
static const struct json_member *find_duplicate(struct json_member *m, size_t n)
{
	if (n <= 16) {
		for (size_t i = 1; i < n; i++)
			for (size_t j = 0; j < i; j++)
				if (same_key(&m[i], &m[j]))
					return &m[i];
		return NULL;
	}
	/* Large objects: sort pointers so a hostile object of 100,000 keys
	 * costs n log n, not n squared. */
	const struct json_member **v = xreallocarray(NULL, n, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = &m[i];
	qsort(v, n, sizeof(*v), key_cmp);
	const struct json_member *dup = NULL;
	for (size_t i = 1; i < n && !dup; i++)
		if (same_key(v[i], v[i - 1]))
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

struct json *json_doc_root(const struct json_doc *doc)
{
	return doc ? doc->root : NULL;
}

const char *json_doc_text(const struct json_doc *doc)
{
	return doc ? doc->text : NULL;
}

struct json_doc *json_doc_ref(struct json_doc *doc)
{
	if (doc)
		doc->refs++;
	return doc;
}

struct json_doc *json_doc_unref(struct json_doc *doc)
{
	if (!doc || --doc->refs > 0)
		return NULL;
	/* The document itself lives in its oldest chunk, the last freed. */
	struct chunk *c = doc->chunks;
	while (c) {
		struct chunk *next = c->next;
		chunk_release(c);
		c = next;
	}
	return NULL;
}

/* --- accessors -------------------------------------------------------- */

const struct json *json_get(const struct json *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	size_t n = strlen(key);
	for (size_t i = 0; i < obj->u.obj.n; i++) {
		const struct json_member *m = &obj->u.obj.members[i];
		if (m->key_len == n && memcmp(m->key, key, n) == 0)
			return m->value;
	}
	return NULL;
}

const char *json_str(const struct json *v)
{
	return v && v->type == JSON_STRING ? v->u.str.s : NULL;
}

bool json_is_int(const struct json *v)
{
	if (!v || v->type != JSON_NUMBER)
		return false;
	if (v->u.num.is_int)
		return true;
	double d = v->u.num.d;
	return isfinite(d) && d == floor(d);
}

bool json_get_int(const struct json *v, int64_t *ret)
{
	if (!v || v->type != JSON_NUMBER || !v->u.num.is_int)
		return false;
	*ret = v->u.num.i;
	return true;
}

bool json_is_true(const struct json *v)
{
	return v && v->type == JSON_BOOL && v->u.b;
}

const char *json_type_name(enum json_type t)
{
	static const char *const names[] = {
		[JSON_NULL] = "null", [JSON_BOOL] = "boolean", [JSON_NUMBER] = "number",
		[JSON_STRING] = "string", [JSON_ARRAY] = "array", [JSON_OBJECT] = "object",
	};
	return (unsigned)t < ELEMENTSOF(names) ? names[t] : "?";
}

const char *json_kind_name(const struct json *v)
{
	if (!v)
		return "nothing";
	if (v->type == JSON_NUMBER && json_is_int(v))
		return "integer";
	return json_type_name(v->type);
}

bool json_equal(const struct json *a, const struct json *b)
{
	if (!a || !b)
		return a == b;
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case JSON_NULL:
		return true;
	case JSON_BOOL:
		return a->u.b == b->u.b;
	case JSON_NUMBER:
		if (a->u.num.is_int && b->u.num.is_int)
			return a->u.num.i == b->u.num.i;
		return a->u.num.d == b->u.num.d;
	case JSON_STRING:
		return a->u.str.len == b->u.str.len &&
		       memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
	case JSON_ARRAY:
		if (a->u.arr.n != b->u.arr.n)
			return false;
		for (size_t i = 0; i < a->u.arr.n; i++)
			if (!json_equal(a->u.arr.items[i], b->u.arr.items[i]))
				return false;
		return true;
	case JSON_OBJECT:
		if (a->u.obj.n != b->u.obj.n)
			return false;
		for (size_t i = 0; i < a->u.obj.n; i++) {
			const struct json_member *m = &a->u.obj.members[i];
			bool found = false;
			for (size_t j = 0; j < b->u.obj.n; j++) {
				const struct json_member *o = &b->u.obj.members[j];
				if (same_key(m, o)) {
					if (!json_equal(m->value, o->value))
						return false;
					found = true;
					break;
				}
			}
			if (!found)
				return false;
		}
		return true;
	}
	return false;
}

#ifdef __SSE2__
/* The bytes of a block of 16 that need escaping, as a bit mask. */
static inline unsigned dirty_mask16(__m128i x)
{
	const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
	const __m128i below = _mm_set1_epi8(0x1f);
	/* x <= 0x1f, unsigned: the larger of x and 0x1f is 0x1f. */
	__m128i ctl = _mm_cmpeq_epi8(_mm_max_epu8(x, below), below);
	__m128i hit = _mm_or_si128(ctl, _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)));
	return (unsigned)_mm_movemask_epi8(hit);
}
#endif

/* Index of the first byte at or after i that needs escaping, or n. */
static inline size_t next_dirty(const char *s, size_t i, size_t n)
{
#ifdef __SSE2__
	/* Sixteen bytes at a time where SSE2 is there (all of x86-64): file
	 * contents are quoted whole into answers, and this scan was the
	 * largest share of a read_file call's instructions. */
	while (i + 16 <= n) {
		unsigned m = dirty_mask16(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
		if (m)
			return i + (size_t)__builtin_ctz(m);
		i += 16;
	}
#endif
	while (i + 8 <= n) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		uint64_t d = json_word_dirty(w);
		if (d)
			return i + ((size_t)__builtin_ctzll(d) >> 3);
		i += 8;
	}
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == '"' || c == '\\')
			return i;
		i++;
	}
	return n;
}

void json_quote(struct buf *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	/* One pass: clean runs are copied whole; room for the text plus a
	 * little is reserved up front and grown only when escapes use it. */
	buf_reserve(out, n + n / 16 + 16);
	size_t len = out->len;
	out->data[len++] = '"';
	size_t i = 0;
	while (i < n) {
		size_t d = next_dirty(s, i, n);
		/* The run, one escape (at most 6 bytes) and the closing quote. */
		size_t need = (d - i) + 8;
		if (out->cap - len <= need) {
			out->len = len;
			buf_reserve(out, need + (n - d) + (n - d) / 8);
			len = out->len;	/* reserving may move the contents */
		}
		char *o = out->data + len;
		memcpy(o, s + i, d - i);
		o += d - i;
		if (d < n) {
			unsigned char c = (unsigned char)s[d];
			*o++ = '\\';
			switch (c) {
			case '"': *o++ = '"'; break;
			case '\\': *o++ = '\\'; break;
			case '\n': *o++ = 'n'; break;
			case '\r': *o++ = 'r'; break;
			case '\t': *o++ = 't'; break;
			case '\b': *o++ = 'b'; break;
			case '\f': *o++ = 'f'; break;
			default:
				*o++ = 'u';
				*o++ = '0';
				*o++ = '0';
				*o++ = hex[c >> 4];
				*o++ = hex[c & 15];
			}
		}
		len = (size_t)(o - out->data);
		i = d + 1;
	}
	out->len = len;
	buf_reserve(out, 2);
	out->data[out->len++] = '"';
	out->data[out->len] = '\0';
}

/*
 * Quotes s as JSON text that parses back to the same bytes. A lone
 * surrogate escape ("\udc00") decodes to bytes that are not UTF-8, which
 * the parser would refuse raw: they are written as that escape again.
 * (Input is strict UTF-8, so nothing else invalid can be in a value; were
 * it there, it would come out as U+FFFD.)
 */
static void quote_lossless(struct buf *out, const char *s, size_t n)
{
	if (utf8_valid(s, n)) {
		json_quote(out, s, n);
		return;
	}
	struct buf run = {0};
	buf_putc(out, '"');
	size_t i = 0;
	while (i < n) {
		size_t ok = utf8_valid_prefix(s + i, n - i);
		if (ok) {
			run.len = run.off = 0;
			json_quote(&run, s + i, ok);
			buf_append(out, buf_head(&run) + 1, buf_size(&run) - 2);
			i += ok;
			continue;
		}
		const unsigned char *u = (const unsigned char *)s + i;
		if (n - i >= 3 && u[0] == 0xED && u[1] >= 0xA0 && u[1] <= 0xBF && (u[2] & 0xC0) == 0x80) {
			unsigned cp = 0xD000u | ((unsigned)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
			buf_printf(out, "\\u%04x", cp);
			i += 3;
		} else {
			buf_puts(out, "\xef\xbf\xbd");
			i++;
		}
	}
	buf_putc(out, '"');
	buf_free(&run);
}

void json_canonical(const struct json *v, struct buf *out)
{
	if (!v) {
		buf_puts(out, "null");
		return;
	}
	switch (v->type) {
	case JSON_NULL:
		buf_puts(out, "null");
		break;
	case JSON_BOOL:
		buf_puts(out, v->u.b ? "true" : "false");
		break;
	case JSON_NUMBER:
		buf_append(out, v->u.num.raw, v->u.num.raw_len);
		break;
	case JSON_STRING:
		quote_lossless(out, v->u.str.s, v->u.str.len);
		break;
	case JSON_ARRAY:
		buf_putc(out, '[');
		for (size_t i = 0; i < v->u.arr.n; i++) {
			if (i)
				buf_putc(out, ',');
			json_canonical(v->u.arr.items[i], out);
		}
		buf_putc(out, ']');
		break;
	case JSON_OBJECT: {
		size_t n = v->u.obj.n;
		const struct json_member **m = xreallocarray(NULL, n ? n : 1, sizeof(*m));
		for (size_t i = 0; i < n; i++)
			m[i] = &v->u.obj.members[i];
		qsort(m, n, sizeof(*m), key_cmp);
		buf_putc(out, '{');
		for (size_t i = 0; i < n; i++) {
			if (i)
				buf_putc(out, ',');
			quote_lossless(out, m[i]->key, m[i]->key_len);
			buf_putc(out, ':');
			json_canonical(m[i]->value, out);
		}
		buf_putc(out, '}');
		free(m);
		break;
	}
	}
}

void json_line_col(const char *text, size_t len, size_t off, unsigned *line, unsigned *col)
{
	unsigned l = 1, c = 1;
	for (size_t i = 0; i < off && i < len; i++) {
		if (text[i] == '\n') {
			l++;
			c = 1;
		} else if (((unsigned char)text[i] & 0xC0) != 0x80) {
			c++;
		}
	}
	*line = l;
	*col = c;
}

/* --- UTF-8 ------------------------------------------------------------ */

size_t utf8_decode(const char *str, size_t n, uint32_t *ret_cp)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = s[0];
	if (c < 0x80) {
		*ret_cp = c;
		return 1;
	}
	size_t len;
	uint32_t cp;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
		cp = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		cp = c & 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	*ret_cp = cp;
	return len;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	uint32_t cp;
	return utf8_decode((const char *)s, n, &cp);
}

bool utf8_valid(const char *s, size_t n)
{
	return utf8_valid_prefix(s, n) == n;
}

size_t utf8_valid_prefix(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;
	while (i < n) {
		/* ASCII fast path: 32 bytes at a time with SSE2, then 8. */
#ifdef __SSE2__
		while (i + 32 <= n) {
			__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(u + i));
			__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(u + i + 16));
			if (_mm_movemask_epi8(_mm_or_si128(a, b)))
				break;
			i += 32;
		}
#endif
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, u + i, 8);
			if (w & 0x8080808080808080ULL)
				break;
			i += 8;
		}
		if (i >= n)
			break;
		size_t l = utf8_seq(u + i, n - i);
		if (!l)
			return i;
		i += l;
	}
	return n;
}

void utf8_sanitize(const char *s, size_t n, struct buf *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, start = 0;
	buf_reserve(out, n);
	while (i < n) {
		size_t l = utf8_seq(u + i, n - i);
		if (l) {
			i += l;
			continue;
		}
		buf_append(out, s + start, i - start);
		buf_append(out, "\xEF\xBF\xBD", 3);
		i++;
		start = i;
	}
	buf_append(out, s + start, n - start);
}

size_t utf8_length(const char *s, size_t n)
{
	size_t count = 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			count++;
	return count;
}

/* --- generator -------------------------------------------------------- */

/*
 * Our own, not yajl's: every answer is a handful of keys and values, and
 * yajl_gen escaped them a character at a time through a print callback
 * (about a quarter of a small call's instructions), capped nesting at 128
 * (a parsed value may be nested up to limits.max_json_depth, 1024 at most)
 * and let encoded surrogates through. Here strings are checked as strict
 * UTF-8 and quoted in one pass (json_quote), and a byte of state per open
 * container says which separator comes next.
 */
enum gen_state {
	GEN_ARR_FIRST,		/* in an array, before its first element */
	GEN_ARR_MORE,		/* in an array, after an element: ',' */
	GEN_OBJ_FIRST,		/* in an object, before its first key */
	GEN_OBJ_MORE,		/* in an object, after a member: ',' before the key */
	GEN_OBJ_VALUE,		/* in an object, after a key and ':' */
};

#define GEN_INLINE_DEPTH 32

struct jgen {
	struct buf *out;
	size_t depth, cap;
	uint8_t *st;				/* state per open container */
	uint8_t inline_st[GEN_INLINE_DEPTH];
};

struct jgen *jgen_new(struct buf *out)
{
	struct jgen *g = xmalloc(sizeof(*g));
	g->out = out;
	g->depth = 0;
	g->cap = GEN_INLINE_DEPTH;
	g->st = g->inline_st;
	return g;
}

struct jgen *jgen_free(struct jgen *g)
{
	if (g) {
		if (g->st != g->inline_st)
			free(g->st);
		free(g);
	}
	return NULL;
}

void jgen_reset(struct jgen *g)
{
	g->depth = 0;
}

/* True when the next thing written is an object's key. */
static inline bool gen_at_key(const struct jgen *g)
{
	return g->depth && g->st[g->depth - 1] != GEN_OBJ_VALUE && g->st[g->depth - 1] >= GEN_OBJ_FIRST;
}

/* Writes the separator a value needs where the generator stands. */
static inline void gen_before_value(struct jgen *g)
{
	if (!g->depth)
		return;
	uint8_t *s = &g->st[g->depth - 1];
	switch (*s) {
	case GEN_ARR_FIRST:
		*s = GEN_ARR_MORE;
		break;
	case GEN_ARR_MORE:
		buf_putc(g->out, ',');
		break;
	case GEN_OBJ_VALUE:
		*s = GEN_OBJ_MORE;
		break;
	}
}

static void gen_push(struct jgen *g, enum gen_state s)
{
	if (g->depth == g->cap) {
		size_t cap = g->cap * 2;
		uint8_t *st = xmalloc(cap);
		memcpy(st, g->st, g->depth);
		if (g->st != g->inline_st)
			free(g->st);
		g->st = st;
		g->cap = cap;
	}
	g->st[g->depth++] = (uint8_t)s;
}

void jgen_obj_open(struct jgen *g)
{
	gen_before_value(g);
	buf_putc(g->out, '{');
	gen_push(g, GEN_OBJ_FIRST);
}

void jgen_obj_close(struct jgen *g)
{
	if (g->depth)
		g->depth--;
	buf_putc(g->out, '}');
}

void jgen_arr_open(struct jgen *g)
{
	gen_before_value(g);
	buf_putc(g->out, '[');
	gen_push(g, GEN_ARR_FIRST);
}

void jgen_arr_close(struct jgen *g)
{
	if (g->depth)
		g->depth--;
	buf_putc(g->out, ']');
}

void json_quote_utf8(struct buf *out, const char *s, size_t n)
{
	/* Keys and short values are mostly printable ASCII with nothing to
	 * escape: copied at once, without the scans set up for long text. */
	if (n <= 32) {
		size_t i = 0;
		while (i < n && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x80 && s[i] != '"' &&
		       s[i] != '\\')
			i++;
		if (i == n) {
			buf_reserve(out, n + 2);
			char *o = out->data + out->len;
			o[0] = '"';
			memcpy(o + 1, s, n);
			o[n + 1] = '"';
			out->len += n + 2;
			out->data[out->len] = '\0';
			return;
		}
	}
	if (utf8_valid(s, n)) {
		json_quote(out, s, n);
		return;
	}
	struct buf b = {0};
	utf8_sanitize(s, n, &b);
	json_quote(out, buf_head(&b), buf_size(&b));
	buf_free(&b);
}

/* Writes an object key and its ':'. */
static void gen_key(struct jgen *g, const char *key, size_t n)
{
	if (g->depth) {
		uint8_t *s = &g->st[g->depth - 1];
		if (*s == GEN_OBJ_MORE)
			buf_putc(g->out, ',');
		*s = GEN_OBJ_VALUE;
	}
	json_quote_utf8(g->out, key, n);
	buf_putc(g->out, ':');
}

void jgen_key(struct jgen *g, const char *key)
{
	gen_key(g, key, strlen(key));
}

void jgen_strn(struct jgen *g, const char *s, size_t n)
{
	if (!s) {
		jgen_null(g);
		return;
	}
	/* A string where a key is due is that key, as with yajl. */
	if (gen_at_key(g)) {
		gen_key(g, s, n);
		return;
	}
	gen_before_value(g);
	json_quote_utf8(g->out, s, n);
}

void jgen_str(struct jgen *g, const char *s)
{
	jgen_strn(g, s, s ? strlen(s) : 0);
}

void jgen_int(struct jgen *g, int64_t v)
{
	char tmp[21];
	char *end = tmp + sizeof(tmp);
	/* The magnitude as unsigned: -INT64_MIN does not fit an int64. */
	char *p = fmt_u64(end, v < 0 ? -(uint64_t)v : (uint64_t)v);
	if (v < 0)
		*--p = '-';
	jgen_raw(g, p, (size_t)(end - p));
}

void jgen_double(struct jgen *g, double v)
{
	if (!isfinite(v)) {
		jgen_null(g);
		return;
	}
	char tmp[40];
	int n = snprintf(tmp, sizeof(tmp), "%.15g", v);
	if (strtod(tmp, NULL) != v)
		n = snprintf(tmp, sizeof(tmp), "%.17g", v);
	jgen_raw(g, tmp, (size_t)n);
}

void jgen_bool(struct jgen *g, bool v)
{
	jgen_raw(g, v ? "true" : "false", v ? 4 : 5);
}

void jgen_null(struct jgen *g)
{
	jgen_raw(g, "null", 4);
}

void jgen_raw(struct jgen *g, const char *json, size_t n)
{
	gen_before_value(g);
	buf_append(g->out, json, n);
}

void jgen_value(struct jgen *g, const struct json *v)
{
	if (!v) {
		jgen_null(g);
		return;
	}
	switch (v->type) {
	case JSON_NULL:
		jgen_null(g);
		break;
	case JSON_BOOL:
		jgen_bool(g, v->u.b);
		break;
	case JSON_NUMBER:
		jgen_raw(g, v->u.num.raw, v->u.num.raw_len);
		break;
	case JSON_STRING:
		jgen_strn(g, v->u.str.s, v->u.str.len);
		break;
	case JSON_ARRAY:
		jgen_arr_open(g);
		for (size_t i = 0; i < v->u.arr.n; i++)
			jgen_value(g, v->u.arr.items[i]);
		jgen_arr_close(g);
		break;
	case JSON_OBJECT:
		jgen_obj_open(g);
		for (size_t i = 0; i < v->u.obj.n; i++) {
			gen_key(g, v->u.obj.members[i].key, v->u.obj.members[i].key_len);
			jgen_value(g, v->u.obj.members[i].value);
		}
		jgen_obj_close(g);
		break;
	}
}

void jgen_kv_str(struct jgen *g, const char *key, const char *s)
{
	jgen_key(g, key);
	jgen_str(g, s);
}

void jgen_kv_int(struct jgen *g, const char *key, int64_t v)
{
	jgen_key(g, key);
	jgen_int(g, v);
}

void jgen_kv_bool(struct jgen *g, const char *key, bool v)
{
	jgen_key(g, key);
	jgen_bool(g, v);
}

void jgen_kv_raw(struct jgen *g, const char *key, const char *json, size_t n)
{
	jgen_key(g, key);
	jgen_raw(g, json, n);
}
