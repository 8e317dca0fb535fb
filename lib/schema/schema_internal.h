/* SPDX-License-Identifier: MIT */
/*
 * Inside the JSON Schema module, shared by schema_compile.c (which builds
 * the node graph) and schema_validate.c (which walks it): the compiled
 * schema's layout and the small helpers both sides use for names and
 * messages. Nothing outside lib/schema*.c includes this header.
 */
#ifndef TC_SCHEMA_INTERNAL_H
#define TC_SCHEMA_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "lib/regex/regex.h"
#include "lib/schema/schema.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"

/* Bytes of a name or value quoted in a message. */
#define SHOW_MAX 120

enum {
	TB_NULL = 1u << 0,
	TB_BOOLEAN = 1u << 1,
	TB_OBJECT = 1u << 2,
	TB_ARRAY = 1u << 3,
	TB_NUMBER = 1u << 4,
	TB_STRING = 1u << 5,
	TB_INTEGER = 1u << 6,
};


enum node_kind {
	NODE_SCHEMA,
	NODE_TRUE,
	NODE_FALSE,
};

struct name {
	const char *s;
	size_t len;
};

struct prop {
	struct name name;
	struct node *schema;
};

struct node {
	enum node_kind kind;
	size_t id;			/* index in schema->nodes */
	const struct json *src;		/* where it is written, for $ref */
	char *where;			/* its JSON pointer in the schema */
	bool checks;			/* has any validation keyword */

	struct node *ref;		/* when set, the only thing that applies */
	struct name ref_text;

	unsigned types;			/* TB_*; 0: any */
	char *types_text;		/* "string or null" */

	struct prop *props;		/* sorted by length, then bytes */
	size_t n_props;
	struct node *additional;
	char *allowed_hint;		/* " (allowed: a, b)" when additional is false */
	struct name *required;
	size_t n_required;

	struct node *items;
	struct node **tuple;
	size_t n_tuple;
	size_t min_items, max_items;
	bool unique;

	const struct json *enum_v;
	char *enum_text;
	const struct json *const_v;
	char *const_text;

	const struct json *minimum, *maximum, *xminimum, *xmaximum;

	size_t min_len, max_len;
	struct regex *re;
	char *pattern_text;

	struct node **all_of, **any_of, **one_of;
	size_t n_all, n_any, n_one;
	struct node *not;
};

struct schema {
	struct json_doc *doc;		/* our copy of the schema text */
	struct node **nodes;
	size_t n_nodes, cap_nodes;
	struct node *root;
};

/* Copies a name for a message: shortened, NULs made visible. */
static inline char *show_name(const char *s, size_t n)
{
	struct buf b = {};
	size_t keep = utf8_cut(s, n, SHOW_MAX);

	for (size_t i = 0; i < keep; i++) {
		if (s[i] == '\0')
			buf_puts(&b, "\\u0000");
		else
			buf_putc(&b, s[i]);
	}
	if (keep < n)
		buf_puts(&b, "...");
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/* True for a number with an integral value (1, 1.0, 1e2, bignums). */
static inline bool is_integral(const struct json *v)
{
	double d;

	if (v->u.num.is_int)
		return true;
	d = v->u.num.d;
	return isinf(d) || json_double_integral(d);
}

/* The instance's JSON type as a message names it: "number" for every
 * number, as in "/path: expected string, got number" (CONTRACT, 4). */
static inline const char *kind_name(const struct json *v)
{
	switch (v->type) {
	case JSON_NULL:
		return "null";
	case JSON_BOOL:
		return "boolean";
	case JSON_NUMBER:
		return "number";
	case JSON_STRING:
		return "string";
	case JSON_ARRAY:
		return "array";
	case JSON_OBJECT:
		return "object";
	}
	return "value";
}

static inline int name_cmp(const struct name *a, const struct name *b)
{
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return memcmp(a->s, b->s, a->len);
}

static inline int prop_cmp(const void *a, const void *b)
{
	return name_cmp(&((const struct prop *)a)->name, &((const struct prop *)b)->name);
}

#endif
