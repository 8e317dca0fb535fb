/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the JSON Schema subset validator. The input is a
 * schema text, then (after the first NUL or newline) an instance text: the
 * schema is compiled and, when it compiles and the instance parses, the
 * instance validated both ways (collecting errors and not), which must
 * agree. Everything is freed: LeakSanitizer checks it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/schema/schema.h"
#include "proto/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *nul = memchr(text, '\0', size), *nl = memchr(text, '\n', size);
	const char *sep = !nul ? nl : !nl ? nul : nul < nl ? nul : nl;
	size_t schema_len = sep ? (size_t)(sep - text) : size;
	struct schema *s = NULL;
	struct json_doc *doc = NULL;
	struct json_err jerr;
	char *err = NULL;

	if (schema_compile_text(text, schema_len, &s, &err) < 0) {
		/* A refusal always says why. */
		if (!err || s)
			abort();
		free(err);
		return 0;
	}
	if (!s || err)
		abort();
	if (sep && json_parse(sep + 1, size - schema_len - 1, 0, 0, &doc, &jerr) == 0) {
		struct schema_errors errs = { 0 };
		bool full = schema_validate(s, json_doc_root(doc), &errs);
		bool quick = schema_validate(s, json_doc_root(doc), NULL);

		if (full != quick || full != (errs.n == 0))
			abort();
		for (size_t i = 0; i < errs.n; i++)
			if (!errs.v[i].path || !errs.v[i].message || !errs.v[i].message[0])
				abort();
		schema_errors_clear(&errs);
		json_doc_unref(doc);
	}
	schema_free(s);
	return 0;
}
