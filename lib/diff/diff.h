/* SPDX-License-Identifier: MIT */
/*
 * Unified diffs of two texts, line by line, in the form `diff -u` and
 * `patch` use: "--- a" / "+++ b" headers, "@@ -l,n +l,n @@" hunks with
 * context lines, and "\ No newline at end of file" after a last line that
 * lacks one. The edit script is Myers' shortest one while it is cheap to
 * find; past a bound on the edit distance (scaled to the texts' size) the
 * differing middle is reported as one replacement, still a correct diff,
 * so time and memory stay bounded for any input.
 */
#ifndef TC_DIFF_H
#define TC_DIFF_H

#include <stddef.h>

struct buf;

struct diff_stats {
	size_t added, removed;	/* lines */
	size_t hunks;
};

/*
 * Appends the unified diff from a (an bytes) to b to out, with context lines
 * around each change (3 as diff -u does) and labels for the headers
 * ("a/src/x.c"). Nothing is appended when the texts are equal. *ret_stats
 * may be NULL.
 */
void diff_unified(const char *a, size_t an, const char *b, size_t bn, const char *label_a, const char *label_b,
		  unsigned context, struct buf *out, struct diff_stats *ret_stats);

#endif
