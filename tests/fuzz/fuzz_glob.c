/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the glob matcher (lib/glob/glob.c): the input is a
 * pattern, a NUL byte and a path. Whatever the bytes, compiling either
 * succeeds or fails with -EINVAL and a message; a match costs a bounded
 * number of steps; every directory above a matching path may hold a match
 * (pruning never loses one); and on patterns made only of "a b c / . * ?"
 * with no "**", over ASCII paths (fnmatch counts bytes, the matcher
 * characters), the matcher agrees with fnmatch(FNM_PATHNAME).
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/glob/glob.h"
#include "proto/base/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether fnmatch means the same as the matcher for this pattern. */
static bool plain(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr("abc/.*?", p[i]) || p[i] == '\0')
			return false;
	return !memmem(p, n, "**", 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	const char *nul = memchr(s, '\0', size);
	size_t pn = nul ? (size_t)(nul - s) : size;
	const char *path = nul ? nul + 1 : "";
	size_t n = nul ? size - pn - 1 : 0;
	if (memchr(path, '\0', n))
		n = strnlen(path, n);

	struct glob *g = NULL;
	char *err = NULL;
	int r = glob_compile(s, pn, &g, &err);
	if (r < 0) {
		if (r != -EINVAL || !err)
			abort();
		free(err);
		return 0;
	}
	if (err)
		abort();
	bool match = glob_match(g, path, n);
	if (match) {
		for (size_t k = 0; k < n; k++)
			if (path[k] == '/' && !glob_may_match_below(g, path, k))
				abort();
		if (!glob_may_match_below(g, "", 0))
			abort();
	}
	bool ascii = true;
	for (size_t k = 0; k < n; k++)
		ascii = ascii && (unsigned char)path[k] < 0x80;
	if (ascii && plain(s, pn)) {
		char *p = xstrndup(s, pn), *q = xstrndup(path, n);
		if ((fnmatch(p, q, FNM_PATHNAME) == 0) != match) {
			fprintf(stderr, "'%s' on '%s': fnmatch disagrees\n", p, q);
			abort();
		}
		free(p);
		free(q);
	}
	glob_free(g);
	return 0;
}
