/* SPDX-License-Identifier: MIT */
/*
 * Tree identity for the JSON parser's two paths (tests/unit/test_json.c and
 * tests/fuzz/fuzz_json.c): stricter than json_equal, which compares values
 * only. Two trees are the same when every node has the same type and the
 * same source span, numbers the same text and the same d/i/is_int, strings
 * and keys the same bytes, length and terminating NUL, and containers the
 * same members in the same order.
 */
#ifndef TC_TESTS_JSON_SAME_H
#define TC_TESTS_JSON_SAME_H

#include <stdio.h>
#include <string.h>

#include "proto/json.h"

/* Returns NULL when a and b are the same tree, else what differs first
 * (written into why, which needs 200 bytes). */
static inline const char *json_same_tree(const struct json *a, const struct json *b, char *why)
{
#define DIFF(...) do { snprintf(why, 200, __VA_ARGS__); return why; } while (0)
	if (!a || !b) {
		if (a != b)
			DIFF("one tree is missing");
		return NULL;
	}
	if (a->type != b->type)
		DIFF("type %d vs %d at %u", (int)a->type, (int)b->type, a->off);
	if (a->off != b->off || a->len != b->len)
		DIFF("span %u+%u vs %u+%u", a->off, a->len, b->off, b->len);
	switch (a->type) {
	case JSON_NULL:
		return NULL;
	case JSON_BOOL:
		if (a->u.b != b->u.b)
			DIFF("boolean at %u", a->off);
		return NULL;
	case JSON_NUMBER:
		if (a->u.num.raw_len != b->u.num.raw_len ||
		    memcmp(a->u.num.raw, b->u.num.raw, a->u.num.raw_len) != 0)
			DIFF("number text at %u", a->off);
		/* Bit for bit: -0.0 is not 0.0 here. */
		if (memcmp(&a->u.num.d, &b->u.num.d, sizeof(double)) != 0 ||
		    a->u.num.is_int != b->u.num.is_int ||
		    (a->u.num.is_int && a->u.num.i != b->u.num.i))
			DIFF("number value at %u", a->off);
		return NULL;
	case JSON_STRING:
		if (a->u.str.len != b->u.str.len || memcmp(a->u.str.s, b->u.str.s, a->u.str.len) != 0)
			DIFF("string bytes at %u", a->off);
		if (a->u.str.s[a->u.str.len] != '\0' || b->u.str.s[b->u.str.len] != '\0')
			DIFF("string not NUL-terminated at %u", a->off);
		return NULL;
	case JSON_ARRAY:
		if (a->u.arr.n != b->u.arr.n)
			DIFF("array of %zu vs %zu at %u", a->u.arr.n, b->u.arr.n, a->off);
		if (!a->u.arr.items || !b->u.arr.items)
			DIFF("array without items at %u", a->off);
		for (size_t i = 0; i < a->u.arr.n; i++) {
			const char *w = json_same_tree(a->u.arr.items[i], b->u.arr.items[i], why);
			if (w)
				return w;
		}
		return NULL;
	case JSON_OBJECT:
		if (a->u.obj.n != b->u.obj.n)
			DIFF("object of %zu vs %zu at %u", a->u.obj.n, b->u.obj.n, a->off);
		if (!a->u.obj.members || !b->u.obj.members)
			DIFF("object without members at %u", a->off);
		for (size_t i = 0; i < a->u.obj.n; i++) {
			const struct json_member *x = &a->u.obj.members[i], *y = &b->u.obj.members[i];
			if (x->key_len != y->key_len || memcmp(x->key, y->key, x->key_len) != 0)
				DIFF("key %zu of the object at %u", i, a->off);
			if (x->key[x->key_len] != '\0' || y->key[y->key_len] != '\0')
				DIFF("key %zu not NUL-terminated at %u", i, a->off);
			const char *w = json_same_tree(x->value, y->value, why);
			if (w)
				return w;
		}
		return NULL;
	}
	DIFF("unknown type %d", (int)a->type);
#undef DIFF
}

#endif
