/* SPDX-License-Identifier: MIT */
/*
 * Differential libFuzzer harness for json_parse's two paths: the fast path
 * (proto/json_fast.c) against yajl, the parser of record. The whole input
 * is the JSON text, parsed with flags 0 and with JSON_ALLOW_COMMENTS, and
 * with the default depth limit and a small one taken from the first byte.
 * What must hold, each time:
 *   - when the fast path takes a text, yajl takes it too, and both trees
 *     are identical: types, spans, numbers, string bytes, member order;
 *   - so when yajl refuses a text, the fast path has declined it;
 *   - json_parse (the fast path, then yajl on what it declines) gives
 *     exactly what yajl alone gives: the result, the error (code, offset,
 *     message) and the tree.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/json.h"
#include "proto/json_internal.h"
#include "proto/base/util.h"
#include "tests/unit/json_same.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with a message: libFuzzer saves the input. */
static void fail(const char *what, const char *detail, const char *text, size_t n)
{
	fprintf(stderr, "fuzz_json: %s (%s): %.*s\n", what, detail ? detail : "", (int)MIN(n, 400), text);
	abort();
}

/* Runs the three parses of text with one flags and depth, and compares. */
static void differ(const char *text, size_t len, unsigned flags, unsigned depth)
{
	char why[200];
	struct json_doc *fast = NULL, *slow = NULL, *both = NULL;
	struct json_err es, eb;
	/* Garbage first: each parse must set what it reports. */
	memset(&es, 0x55, sizeof(es));
	memset(&eb, 0x55, sizeof(eb));

	int rf = json_parse_fast(text, len, flags, depth, &fast);
	int rs = json_parse_yajl(text, len, flags, depth, &slow, &es);
	if (rf) {
		if (rs < 0)
			fail("the fast path took a text yajl refuses", es.msg, text, len);
		const char *w = json_same_tree(json_doc_root(fast), json_doc_root(slow), why);
		if (w)
			fail("the fast path's tree differs from yajl's", w, text, len);
		if (memcmp(json_doc_text(fast), text, len) != 0 || json_doc_text(fast)[len] != '\0')
			fail("the fast path's document lost the text", NULL, text, len);
		if (flags & JSON_ALLOW_COMMENTS)
			fail("the fast path took a text with comments allowed", NULL, text, len);
	}

	int rb = json_parse(text, len, flags, depth, &both, &eb);
	if (rb != rs)
		fail("json_parse and yajl disagree", rb < 0 ? eb.msg : es.msg, text, len);
	/* No error on success, the same error on failure. */
	if (eb.code != es.code || eb.offset != es.offset || strncmp(eb.msg, es.msg, sizeof(eb.msg)) != 0)
		fail("json_parse's error differs from yajl's", NULL, text, len);
	if (rb == 0) {
		const char *w = json_same_tree(json_doc_root(both), json_doc_root(slow), why);
		if (w)
			fail("json_parse's tree differs from yajl's", w, text, len);
	}
	json_doc_unref(fast);
	json_doc_unref(slow);
	json_doc_unref(both);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (1u << 16))
		return 0;
	const char *text = (const char *)data;
	unsigned small = size ? 1 + data[0] % 6 : 1;
	differ(text, size, 0, 0);
	differ(text, size, 0, small);
	differ(text, size, JSON_ALLOW_COMMENTS, 0);
	differ(text, size, JSON_ALLOW_COMMENTS, small);
	return 0;
}
