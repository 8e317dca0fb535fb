/* SPDX-License-Identifier: MIT */
/*
 * Compiling a JSON Schema (the subset of lib/schema/schema.h) into a graph of
 * nodes: every keyword is checked (anything outside the subset is refused,
 * naming the schema location), "pattern" regexes are compiled by
 * lib/regex*.c (ECMA-262, matched without backtracking, in time linear in
 * the string), "$ref"s are resolved to the node they point at and checked
 * for cycles that would never consume input. The schema keeps its own copy
 * of the JSON text: property names, const and enum values point into it.
 * Validation is schema_validate.c.
 *
 * Long because the keyword compilers, $ref resolution and the cycle check
 * share the compiler's state and its error position; apart they would
 * pass it all through a header.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/schema/schema_internal.h"

/* Limits on what a schema may ask for. */
#define COMPILE_DEPTH_MAX 128		/* schemas nested in schemas */
#define COPY_DEPTH_MAX 128		/* JSON nesting of a schema text */
#define PATTERN_LEN_MAX REGEX_PATTERN_MAX	/* bytes of one "pattern" */

static const struct {
	const char *name;
	unsigned bit;
} type_names[] = {
	{ "null", TB_NULL },
	{ "boolean", TB_BOOLEAN },
	{ "object", TB_OBJECT },
	{ "array", TB_ARRAY },
	{ "number", TB_NUMBER },
	{ "string", TB_STRING },
	{ "integer", TB_INTEGER },
};


/* Appends a value as compact JSON text, shortened, for a message. */
static void show_value(struct buf *out, const struct json *v)
{
	struct buf b = {};
	size_t keep;

	json_canonical(v, &b);
	keep = utf8_cut(buf_head(&b), buf_size(&b), SHOW_MAX);
	buf_append(out, buf_head(&b), keep);
	if (keep < buf_size(&b))
		buf_puts(out, "...");
	buf_free(&b);
}

/* Same, as a new string. */
static char *show_value_str(const struct json *v)
{
	struct buf b = {};

	show_value(&b, v);
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

static int name_qcmp(const void *a, const void *b)
{
	return name_cmp(a, b);
}

/* ------------------------------------------------------------------------
 * Compiling.
 */

struct compiler {
	struct schema *s;
	struct buf where;	/* JSON pointer of the schema being compiled */
	char *err;
	unsigned depth;
};

/* The current schema location, NUL-terminated. */
static const char *where_str(struct compiler *c)
{
	buf_reserve(&c->where, 1);
	c->where.data[c->where.len] = '\0';
	return c->where.data;
}

static int fail_at(struct compiler *c, const char *where, const char *fmt, ...) PRINTF(3, 4);
static int fail_at(struct compiler *c, const char *where, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	if (c->err)
		return -EINVAL;
	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	c->err = xasprintf("%s: %s", where[0] ? where : "(root)", msg);
	return -EINVAL;
}

#define fail(c, ...) fail_at((c), where_str(c), __VA_ARGS__)

/* Appends a segment to the current location; returns the length to restore. */
static size_t where_push(struct compiler *c, const char *seg, size_t len)
{
	size_t saved = c->where.len;

	buf_putc(&c->where, '/');
	for (size_t i = 0; i < len; i++) {
		if (seg[i] == '~')
			buf_puts(&c->where, "~0");
		else if (seg[i] == '/')
			buf_puts(&c->where, "~1");
		else if (seg[i] == '\0')
			buf_puts(&c->where, "\\u0000");
		else
			buf_putc(&c->where, seg[i]);
	}
	return saved;
}

static void where_pop(struct compiler *c, size_t saved)
{
	c->where.len = saved;
}

/* Allocates a node for the schema at the current location. */
static struct node *node_new(struct compiler *c, const struct json *src)
{
	struct schema *s = c->s;
	struct node *n = xcalloc(1, sizeof(*n));

	if (s->n_nodes == s->cap_nodes) {
		s->cap_nodes = s->cap_nodes ? s->cap_nodes * 2 : 16;
		s->nodes = xreallocarray(s->nodes, s->cap_nodes, sizeof(*s->nodes));
	}
	n->id = s->n_nodes;
	n->src = src;
	n->where = xstrdup(where_str(c));
	n->max_len = SIZE_MAX;
	n->max_items = SIZE_MAX;
	s->nodes[s->n_nodes++] = n;
	return n;
}

static int compile_node(struct compiler *c, const struct json *v, struct node **ret);

/* Compiles the schema at <where>/<seg>. */
static int compile_sub(struct compiler *c, const char *seg, size_t len, const struct json *v,
		       struct node **ret)
{
	size_t saved = where_push(c, seg, len);
	int r = compile_node(c, v, ret);

	where_pop(c, saved);
	return r;
}

/* Compiles the schema at <where>/<kw>/<index>. */
static int compile_indexed(struct compiler *c, const char *kw, size_t index, const struct json *v,
			   struct node **ret)
{
	char num[32];
	size_t saved = where_push(c, kw, strlen(kw));
	int r;

	snprintf(num, sizeof(num), "%zu", index);
	r = compile_sub(c, num, strlen(num), v, ret);
	where_pop(c, saved);
	return r;
}

typedef int (*kw_fn)(struct compiler *c, struct node *n, const char *kw, const struct json *v);

/* "type": a name or an array of distinct names. */
static int kw_type(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	const struct json *const *list;
	struct buf text = {};
	const struct json *one = v;
	size_t count;

	if (v->type == JSON_STRING) {
		list = &one;
		count = 1;
	} else if (v->type == JSON_ARRAY && v->u.arr.n > 0) {
		list = (const struct json *const *)v->u.arr.items;
		count = v->u.arr.n;
	} else
		return fail(c, "'type' must be a type name or a non-empty array of type names");

	for (size_t i = 0; i < count; i++) {
		unsigned bit = 0;

		if (list[i]->type == JSON_STRING)
			for (size_t k = 0; k < ELEMENTSOF(type_names); k++)
				if (str_eq(list[i]->u.str.s, type_names[k].name) &&
				    strlen(type_names[k].name) == list[i]->u.str.len)
					bit = type_names[k].bit;
		if (!bit) {
			_cleanup_free_ char *shown = show_value_str(list[i]);

			buf_free(&text);
			return fail(c, "'type': unknown type %s (expected null, boolean, object, array, "
				    "number, string or integer)", shown);
		}
		if (n->types & bit) {
			buf_free(&text);
			return fail(c, "'type' lists '%s' twice", list[i]->u.str.s);
		}
		n->types |= bit;
		if (i > 0)
			buf_puts(&text, i + 1 == count ? " or " : ", ");
		buf_puts(&text, list[i]->u.str.s);
	}
	buf_putc(&text, '\0');
	n->types_text = buf_steal(&text);
	n->checks = true;
	return 0;
}

/* "properties": one schema per property name (names are not keywords). */
static int kw_properties(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	size_t saved;
	int r = 0;

	if (v->type != JSON_OBJECT)
		return fail(c, "'properties' must be an object mapping names to schemas");
	n->props = xcalloc(MAX(v->u.obj.n, (size_t)1), sizeof(*n->props));
	saved = where_push(c, kw, strlen(kw));
	for (size_t i = 0; i < v->u.obj.n && r >= 0; i++) {
		const struct json_member *m = &v->u.obj.members[i];

		n->props[i].name = (struct name){ m->key, m->key_len };
		r = compile_sub(c, m->key, m->key_len, m->value, &n->props[i].schema);
		n->n_props = i + 1;
	}
	where_pop(c, saved);
	if (r < 0)
		return r;
	qsort(n->props, n->n_props, sizeof(*n->props), prop_cmp);
	n->checks = true;
	return 0;
}

/* "required": distinct property names. */
static int kw_required(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	struct name *sorted;

	if (v->type != JSON_ARRAY)
		return fail(c, "'required' must be an array of property names");
	n->required = xcalloc(MAX(v->u.arr.n, (size_t)1), sizeof(*n->required));
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct json *e = v->u.arr.items[i];

		if (e->type != JSON_STRING)
			return fail(c, "'required' must be an array of property names (item %zu is not a string)", i);
		n->required[i] = (struct name){ e->u.str.s, e->u.str.len };
		n->n_required = i + 1;
	}
	sorted = xmemdup(n->required, MAX(n->n_required, (size_t)1) * sizeof(*sorted));
	qsort(sorted, n->n_required, sizeof(*sorted), name_qcmp);
	for (size_t i = 1; i < n->n_required; i++)
		if (name_cmp(&sorted[i - 1], &sorted[i]) == 0) {
			_cleanup_free_ char *shown = show_name(sorted[i].s, sorted[i].len);

			free(sorted);
			return fail(c, "'required' lists '%s' twice", shown);
		}
	free(sorted);
	n->checks = true;
	return 0;
}

/* "additionalProperties": a schema (false closes the object). */
static int kw_additional(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	n->checks = true;
	return compile_sub(c, kw, strlen(kw), v, &n->additional);
}

/* "items": one schema for all items, or an array of them (tuple form). */
static int kw_items(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	n->checks = true;
	if (v->type != JSON_ARRAY)
		return compile_sub(c, kw, strlen(kw), v, &n->items);
	if (v->u.arr.n == 0)
		return fail(c, "'items' must be a schema or a non-empty array of schemas");
	n->tuple = xcalloc(v->u.arr.n, sizeof(*n->tuple));
	for (size_t i = 0; i < v->u.arr.n; i++) {
		int r = compile_indexed(c, kw, i, v->u.arr.items[i], &n->tuple[i]);

		n->n_tuple = i + 1;
		if (r < 0)
			return r;
	}
	return 0;
}

/* "enum": a non-empty array of values (data, not schemas). */
static int kw_enum(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	struct buf text = {};

	if (v->type != JSON_ARRAY || v->u.arr.n == 0)
		return fail(c, "'enum' must be a non-empty array of values");
	for (size_t i = 0; i < v->u.arr.n; i++) {
		if (i > 0)
			buf_puts(&text, ", ");
		if (text.len > 4 * SHOW_MAX) {
			buf_puts(&text, "...");
			break;
		}
		show_value(&text, v->u.arr.items[i]);
	}
	buf_putc(&text, '\0');
	n->enum_v = v;
	n->enum_text = buf_steal(&text);
	n->checks = true;
	return 0;
}

/* "const": any value (data, not a schema). */
static int kw_const(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	n->const_v = v;
	n->const_text = show_value_str(v);
	n->checks = true;
	return 0;
}

/* minimum, maximum, exclusiveMinimum, exclusiveMaximum: numbers. */
static int kw_number(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	if (v->type != JSON_NUMBER) {
		if (v->type == JSON_BOOL && str_has_prefix(kw, "exclusive"))
			return fail(c, "'%s' must be a number (the boolean form of Draft 4 is not supported)", kw);
		return fail(c, "'%s' must be a number", kw);
	}
	if (str_eq(kw, "minimum"))
		n->minimum = v;
	else if (str_eq(kw, "maximum"))
		n->maximum = v;
	else if (str_eq(kw, "exclusiveMinimum"))
		n->xminimum = v;
	else
		n->xmaximum = v;
	n->checks = true;
	return 0;
}

/* minLength, maxLength, minItems, maxItems: non-negative integers. */
static int kw_count(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	size_t count;
	int64_t i;

	if (v->type != JSON_NUMBER)
		return fail(c, "'%s' must be a non-negative integer", kw);
	if (json_get_int(v, &i)) {
		if (i < 0)
			return fail(c, "'%s' must be a non-negative integer, not %" PRId64, kw, i);
		count = (uint64_t)i > SIZE_MAX ? SIZE_MAX : (size_t)i;
	} else if (v->u.num.d > 0 && is_integral(v))
		count = SIZE_MAX;	/* larger than anything */
	else
		return fail(c, "'%s' must be a non-negative integer", kw);

	if (str_eq(kw, "minLength"))
		n->min_len = count;
	else if (str_eq(kw, "maxLength"))
		n->max_len = count;
	else if (str_eq(kw, "minItems"))
		n->min_items = count;
	else
		n->max_items = count;
	n->checks = true;
	return 0;
}

/* "pattern": an ECMA-262 regex, compiled now. */
static int kw_pattern(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	_cleanup_free_ char *why = NULL;

	if (v->type != JSON_STRING)
		return fail(c, "'pattern' must be a string");
	n->pattern_text = show_name(v->u.str.s, v->u.str.len);
	if (v->u.str.len > PATTERN_LEN_MAX)
		return fail(c, "'pattern' is longer than %d bytes", PATTERN_LEN_MAX);
	if (memchr(v->u.str.s, '\0', v->u.str.len))
		return fail(c, "'pattern' contains a NUL character (write \\u0000 as \\\\0)");
	if (regex_compile(v->u.str.s, v->u.str.len, &n->re, &why) < 0)
		return fail(c, "invalid pattern '%s': %s", n->pattern_text, why);
	n->checks = true;
	return 0;
}

/* "uniqueItems": a boolean. */
static int kw_unique(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	if (v->type != JSON_BOOL)
		return fail(c, "'uniqueItems' must be a boolean");
	n->unique = v->u.b;
	n->checks = true;
	return 0;
}

/* allOf, anyOf, oneOf: non-empty arrays of schemas. */
static int kw_schema_list(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	struct node ***list;
	size_t *count;

	if (v->type != JSON_ARRAY || v->u.arr.n == 0)
		return fail(c, "'%s' must be a non-empty array of schemas", kw);
	if (str_eq(kw, "allOf")) {
		list = &n->all_of;
		count = &n->n_all;
	} else if (str_eq(kw, "anyOf")) {
		list = &n->any_of;
		count = &n->n_any;
	} else {
		list = &n->one_of;
		count = &n->n_one;
	}
	*list = xcalloc(v->u.arr.n, sizeof(**list));
	n->checks = true;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		int r = compile_indexed(c, kw, i, v->u.arr.items[i], &(*list)[i]);

		*count = i + 1;
		if (r < 0)
			return r;
	}
	return 0;
}

/* "not": a schema. */
static int kw_not(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	n->checks = true;
	return compile_sub(c, kw, strlen(kw), v, &n->not);
}

/* "$ref": kept as text, resolved once the whole schema is compiled. */
static int kw_ref(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	if (v->type != JSON_STRING)
		return fail(c, "'$ref' must be a string");
	n->ref_text = (struct name){ v->u.str.s, v->u.str.len };
	return 0;
}

/* "definitions": schemas reached through $ref. */
static int kw_definitions(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	size_t saved;
	int r = 0;

	if (v->type != JSON_OBJECT)
		return fail(c, "'definitions' must be an object mapping names to schemas");
	saved = where_push(c, kw, strlen(kw));
	for (size_t i = 0; i < v->u.obj.n && r >= 0; i++) {
		struct node *unused;

		/* Reached through $ref only: compiled so refs can find it. */
		r = compile_sub(c, v->u.obj.members[i].key, v->u.obj.members[i].key_len,
				v->u.obj.members[i].value, &unused);
	}
	where_pop(c, saved);
	return r;
}

/* Annotations that must be strings. */
static int kw_string(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	if (v->type != JSON_STRING)
		return fail(c, "'%s' must be a string", kw);
	return 0;
}

/* "examples": an array of values. */
static int kw_examples(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	if (v->type != JSON_ARRAY)
		return fail(c, "'examples' must be an array");
	return 0;
}

/* "default": any value. */
static int kw_any(struct compiler *c, struct node *n, const char *kw, const struct json *v)
{
	return 0;
}

static const struct keyword {
	const char *name;
	kw_fn compile;
} keywords[] = {
	{ "type", kw_type },
	{ "properties", kw_properties },
	{ "required", kw_required },
	{ "additionalProperties", kw_additional },
	{ "items", kw_items },
	{ "enum", kw_enum },
	{ "const", kw_const },
	{ "minimum", kw_number },
	{ "maximum", kw_number },
	{ "exclusiveMinimum", kw_number },
	{ "exclusiveMaximum", kw_number },
	{ "minLength", kw_count },
	{ "maxLength", kw_count },
	{ "minItems", kw_count },
	{ "maxItems", kw_count },
	{ "pattern", kw_pattern },
	{ "uniqueItems", kw_unique },
	{ "allOf", kw_schema_list },
	{ "anyOf", kw_schema_list },
	{ "oneOf", kw_schema_list },
	{ "not", kw_not },
	{ "$ref", kw_ref },
	{ "definitions", kw_definitions },
	/* Annotations: checked for shape, otherwise ignored. */
	{ "title", kw_string },
	{ "description", kw_string },
	{ "format", kw_string },
	{ "$schema", kw_string },
	{ "$comment", kw_string },
	{ "default", kw_any },
	{ "examples", kw_examples },
};

/* Finds a keyword of the subset by name (the key may hold NULs). */
static const struct keyword *keyword_find(const char *key, size_t len)
{
	for (size_t i = 0; i < ELEMENTSOF(keywords); i++)
		if (strlen(keywords[i].name) == len && memcmp(keywords[i].name, key, len) == 0)
			return &keywords[i];
	return NULL;
}

/* Builds the " (allowed: a, b)" hint of a closed object. */
static void make_allowed_hint(struct node *n)
{
	struct buf b = {};

	if (!n->additional || n->additional->kind != NODE_FALSE)
		return;
	if (n->n_props == 0) {
		n->allowed_hint = xstrdup(" (no properties are allowed)");
		return;
	}
	buf_puts(&b, " (allowed: ");
	for (size_t i = 0; i < n->n_props; i++) {
		_cleanup_free_ char *shown = NULL;

		if (i > 0)
			buf_puts(&b, ", ");
		if (i == 12) {
			buf_puts(&b, "...");
			break;
		}
		shown = show_name(n->props[i].name.s, n->props[i].name.len);
		buf_puts(&b, shown);
	}
	buf_puts(&b, ")");
	buf_putc(&b, '\0');
	n->allowed_hint = buf_steal(&b);
}

/* Compiles the schema v at the current location. */
static int compile_node(struct compiler *c, const struct json *v, struct node **ret)
{
	struct node *n = node_new(c, v);
	int r = 0;

	*ret = n;
	if (v->type == JSON_BOOL) {
		n->kind = v->u.b ? NODE_TRUE : NODE_FALSE;
		return 0;
	}
	if (v->type != JSON_OBJECT)
		return fail(c, "a schema must be an object or a boolean, not %s", kind_name(v));
	if (c->depth >= COMPILE_DEPTH_MAX)
		return fail(c, "schemas nested more than %d deep", COMPILE_DEPTH_MAX);

	c->depth++;
	for (size_t i = 0; i < v->u.obj.n && r >= 0; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		const struct keyword *kw = keyword_find(m->key, m->key_len);

		if (!kw) {
			_cleanup_free_ char *shown = show_name(m->key, m->key_len);

			r = fail(c, "unsupported keyword '%s'", shown);
		} else
			r = kw->compile(c, n, kw->name, m->value);
	}
	c->depth--;
	if (r < 0)
		return r;
	make_allowed_hint(n);
	return 0;
}

static int node_src_cmp(const void *a, const void *b)
{
	const struct node *x = *(const struct node *const *)a, *y = *(const struct node *const *)b;
	uintptr_t p = (uintptr_t)x->src, q = (uintptr_t)y->src;

	return p < q ? -1 : p > q;
}

/* The value of a hex digit, or -1. */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes the %XX escapes of a URI fragment. */
static int percent_decode(const char *s, size_t n, struct buf *out)
{
	for (size_t i = 0; i < n; i++) {
		int h, l;

		if (s[i] != '%') {
			buf_putc(out, s[i]);
			continue;
		}
		h = i + 1 < n ? hexval(s[i + 1]) : -1;
		l = i + 2 < n ? hexval(s[i + 2]) : -1;
		if (h < 0 || l < 0)
			return -EINVAL;
		buf_putc(out, (char)(h * 16 + l));
		i += 2;
	}
	return 0;
}

/* Walks the JSON pointer p (decoded, "" or "/a/b") from root. */
static const struct json *pointer_walk(const struct json *root, const char *p, size_t n)
{
	const struct json *v = root;
	size_t i = 0;

	while (i < n) {
		struct buf tok = {};
		const struct json *next = NULL;

		if (p[i] != '/')
			return NULL;
		i++;
		while (i < n && p[i] != '/') {
			if (p[i] == '~') {
				if (i + 1 < n && p[i + 1] == '0')
					buf_putc(&tok, '~');
				else if (i + 1 < n && p[i + 1] == '1')
					buf_putc(&tok, '/');
				else {
					buf_free(&tok);
					return NULL;
				}
				i += 2;
			} else
				buf_putc(&tok, p[i++]);
		}
		if (v->type == JSON_OBJECT) {
			for (size_t k = 0; k < v->u.obj.n; k++)
				if (v->u.obj.members[k].key_len == tok.len &&
				    memcmp(v->u.obj.members[k].key, buf_head(&tok), tok.len) == 0) {
					next = v->u.obj.members[k].value;
					break;
				}
		} else if (v->type == JSON_ARRAY && tok.len > 0 && tok.len < 19 &&
			   (tok.len == 1 || tok.data[0] != '0')) {
			size_t idx = 0;
			bool digits = true;

			for (size_t k = 0; k < tok.len; k++) {
				if (tok.data[k] < '0' || tok.data[k] > '9')
					digits = false;
				else
					idx = idx * 10 + (size_t)(tok.data[k] - '0');
			}
			if (digits && idx < v->u.arr.n)
				next = v->u.arr.items[idx];
		}
		buf_free(&tok);
		if (!next)
			return NULL;
		v = next;
	}
	return v;
}

/* Points every $ref node at the node it names. */
static int resolve_refs(struct compiler *c)
{
	struct schema *s = c->s;
	_cleanup_free_ struct node **by_src = xmemdup(s->nodes, s->n_nodes * sizeof(*by_src));
	const struct json *root = json_doc_root(s->doc);

	qsort(by_src, s->n_nodes, sizeof(*by_src), node_src_cmp);
	for (size_t i = 0; i < s->n_nodes; i++) {
		struct node *n = s->nodes[i], key, *keyp = &key, **found;
		_cleanup_free_ char *shown = NULL;
		struct buf ptr = {};
		const struct json *target;

		if (!n->ref_text.s)
			continue;
		shown = show_name(n->ref_text.s, n->ref_text.len);
		if (n->ref_text.len == 0 || n->ref_text.s[0] != '#')
			return fail_at(c, n->where, "$ref '%s' is not a local reference: only references "
				       "into this schema ('#', '#/definitions/name') are supported", shown);
		if (percent_decode(n->ref_text.s + 1, n->ref_text.len - 1, &ptr) < 0) {
			buf_free(&ptr);
			return fail_at(c, n->where, "$ref '%s': invalid %%-escape", shown);
		}
		if (ptr.len > 0 && ptr.data[0] != '/') {
			buf_free(&ptr);
			return fail_at(c, n->where, "$ref '%s': only JSON-pointer fragments are supported "
				       "(such as '#/definitions/name')", shown);
		}
		target = pointer_walk(root, buf_head(&ptr), ptr.len);
		buf_free(&ptr);
		if (!target)
			return fail_at(c, n->where, "$ref '%s' points to nothing in this schema", shown);
		key.src = target;
		found = bsearch(&keyp, by_src, s->n_nodes, sizeof(*by_src), node_src_cmp);
		if (!found)
			return fail_at(c, n->where, "$ref '%s' does not point to a schema", shown);
		n->ref = *found;
	}
	return 0;
}

/* The i-th schema applied to the same instance as n (no input consumed). */
static const struct node *in_place_edge(const struct node *n, size_t i)
{
	if (n->ref)
		return i == 0 ? n->ref : NULL;
	if (i < n->n_all)
		return n->all_of[i];
	i -= n->n_all;
	if (i < n->n_any)
		return n->any_of[i];
	i -= n->n_any;
	if (i < n->n_one)
		return n->one_of[i];
	i -= n->n_one;
	return i == 0 ? n->not : NULL;
}

/* Refuses cycles of $ref, allOf, anyOf, oneOf and not that come back to a
 * schema without consuming any of the instance: validation would never end. */
static int check_cycles(struct compiler *c)
{
	struct schema *s = c->s;
	_cleanup_free_ unsigned char *color = xcalloc(MAX(s->n_nodes, (size_t)1), 1);
	_cleanup_free_ size_t *stack_node = xcalloc(MAX(s->n_nodes, (size_t)1), sizeof(size_t));
	_cleanup_free_ size_t *stack_edge = xcalloc(MAX(s->n_nodes, (size_t)1), sizeof(size_t));

	for (size_t start = 0; start < s->n_nodes; start++) {
		size_t sp = 0;

		if (color[start])
			continue;
		color[start] = 1;
		stack_node[sp] = start;
		stack_edge[sp] = 0;
		sp++;
		while (sp > 0) {
			const struct node *n = s->nodes[stack_node[sp - 1]];
			const struct node *next = in_place_edge(n, stack_edge[sp - 1]++);

			if (!next) {
				color[n->id] = 2;
				sp--;
				continue;
			}
			if (color[next->id] == 1)
				return fail_at(c, next->where, "$ref cycle that never consumes input "
					       "(validation would not end)");
			if (color[next->id] == 0) {
				color[next->id] = 1;
				stack_node[sp] = next->id;
				stack_edge[sp] = 0;
				sp++;
			}
		}
	}
	return 0;
}

/* Compiles from our own document. */
static int compile_doc(struct json_doc *doc, struct schema **ret, char **ret_err)
{
	struct compiler c = {};
	struct schema *s = xcalloc(1, sizeof(*s));
	int r;

	s->doc = doc;
	c.s = s;
	r = compile_node(&c, json_doc_root(doc), &s->root);
	if (r >= 0)
		r = resolve_refs(&c);
	if (r >= 0)
		r = check_cycles(&c);
	buf_free(&c.where);
	if (r < 0) {
		schema_free(s);
		if (ret_err)
			*ret_err = TAKE_PTR(c.err);
		free(c.err);
		return r;
	}
	*ret = s;
	return 0;
}

int schema_compile_text(const char *text, size_t len, struct schema **ret, char **ret_err)
{
	struct json_doc *doc = NULL;
	struct json_err jerr = {};
	int r;

	r = json_parse(text, len, 0, COPY_DEPTH_MAX, &doc, &jerr);
	if (r < 0) {
		if (ret_err)
			*ret_err = xasprintf("the schema is not valid JSON: %s (at byte %zu)", jerr.msg,
					     jerr.offset);
		return -EINVAL;
	}
	return compile_doc(doc, ret, ret_err);
}

/* True when v nests more than max containers (checked before copying). */
static bool json_deeper_than(const struct json *v, unsigned max)
{
	if (v->type != JSON_ARRAY && v->type != JSON_OBJECT)
		return false;
	if (max == 0)
		return true;
	for (size_t i = 0; i < (v->type == JSON_ARRAY ? v->u.arr.n : v->u.obj.n); i++)
		if (json_deeper_than(v->type == JSON_ARRAY ? v->u.arr.items[i] : v->u.obj.members[i].value,
				     max - 1))
			return true;
	return false;
}

int schema_compile(const struct json *root, struct schema **ret, char **ret_err)
{
	struct buf text = {};
	struct jgen *g;
	int r;

	if (!root) {
		if (ret_err)
			*ret_err = xstrdup("no schema");
		return -EINVAL;
	}
	if (json_deeper_than(root, COPY_DEPTH_MAX)) {
		if (ret_err)
			*ret_err = xasprintf("the schema nests more than %d levels", COPY_DEPTH_MAX);
		return -EINVAL;
	}
	/* Keep a private copy: names, const and enum values point into it. */
	g = jgen_new(&text);
	jgen_value(g, root);
	jgen_free(g);
	r = schema_compile_text(buf_head(&text), buf_size(&text), ret, ret_err);
	buf_free(&text);
	return r;
}

struct schema *schema_free(struct schema *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n_nodes; i++) {
		struct node *n = s->nodes[i];

		free(n->where);
		free(n->types_text);
		free(n->props);
		free(n->allowed_hint);
		free(n->required);
		free(n->tuple);
		free(n->enum_text);
		free(n->const_text);
		regex_free(n->re);
		free(n->pattern_text);
		free(n->all_of);
		free(n->any_of);
		free(n->one_of);
		free(n);
	}
	free(s->nodes);
	json_doc_unref(s->doc);
	free(s);
	return NULL;
}
