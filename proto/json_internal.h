/* SPDX-License-Identifier: MIT */
/*
 * Inside the JSON module, shared by json_arena.c, json_parse.c (the yajl
 * parser of record), json_fast.c (the fast path in front of it),
 * json_values.c and json_gen.c: the number filler, the key order, and each parser on
 * its own, which the unit tests and the differential fuzz harness use to
 * prove the two build identical trees. Nothing outside proto/ and those
 * tests includes this header.
 */
#ifndef TC_JSON_INTERNAL_H
#define TC_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto/json.h"
#include "proto/json_arena.h"

#define JSON_DEFAULT_MAX_DEPTH 64

/* Orders two members (pointers to struct json_member *) by key bytes:
 * qsort's comparator for duplicate detection and the canonical form. */
int json_key_cmp(const void *a, const void *b);

/* True when two members have the same key bytes. */
static inline bool json_same_key(const struct json_member *a, const struct json_member *b)
{
	return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

/* Fills a number node from its text (raw must live as long as the doc). */
void json_set_number(struct json *v, const char *raw, size_t n);

/* The bytes of w that need escaping in a JSON string (a control
 * character, '"' or '\\'), as the high bit of each: the "has less than"
 * and "has zero byte" word tricks. Exact up to the first such byte (bits
 * above it may be false), which is all the callers use. */
static inline uint64_t json_word_dirty(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	uint64_t ctl = (w - ones * 0x20) & ~w & highs;
	uint64_t q = w ^ (ones * '"');
	uint64_t bs = w ^ (ones * '\\');
	return ctl | ((q - ones) & ~q & highs) | ((bs - ones) & ~bs & highs);
}

/*
 * The fast path: builds doc's tree from doc's text and returns true, or
 * declines and returns false with the document as it was (no root, the
 * arena rewound). max_depth is json_parse's (0: the default).
 */
bool json_fast_build(struct json_doc *doc, unsigned max_depth);

/* The fast path alone, for tests: 1 and a new document in *ret when it
 * accepts the text, 0 when it declines. */
int json_parse_fast(const char *text, size_t len, unsigned flags, unsigned max_depth,
		    struct json_doc **ret);
/* The yajl path alone: what json_parse does when the fast path declines. */
int json_parse_yajl(const char *text, size_t len, unsigned flags, unsigned max_depth,
		    struct json_doc **ret, struct json_err *err);

#endif
