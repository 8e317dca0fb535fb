/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for ignore files (lib/ignore/ignore.c): the input is the text
 * of an ignore file, a NUL byte and a path. Whatever the bytes, parsing
 * gives patterns or none, and matching the path (as a file and as a
 * directory, and each directory above it) gives one of the three verdicts
 * in bounded time; a file of one literal name excludes exactly that name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ignore/ignore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(enum ignore_verdict v)
{
	if (v != IGNORE_NONE && v != IGNORE_EXCLUDE && v != IGNORE_INCLUDE)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	const char *nul = memchr(s, '\0', size);
	size_t tn = nul ? (size_t)(nul - s) : size;
	const char *path = nul ? nul + 1 : "";
	size_t n = nul ? size - tn - 1 : 0;
	if (memchr(path, '\0', n))
		n = strnlen(path, n);

	struct ignore *ig = ignore_parse(s, tn);
	check(ignore_match(ig, path, n, false));
	check(ignore_match(ig, path, n, true));
	for (size_t k = 0; k < n; k++)
		if (path[k] == '/')
			check(ignore_match(ig, path, k, true));
	ignore_free(ig);

	/* A literal name (no special character) excludes itself, anywhere. */
	if (n > 0 && n < 64 && !memchr(path, '/', n) && strcspn(path, "*?[\\!# \r\n") >= n) {
		char text[80];
		memcpy(text, path, n);
		text[n] = '\n';
		ig = ignore_parse(text, n + 1);
		if (!ig || ignore_match(ig, path, n, false) != IGNORE_EXCLUDE)
			abort();
		ignore_free(ig);
	}
	return 0;
}
