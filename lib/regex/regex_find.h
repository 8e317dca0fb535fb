/* SPDX-License-Identifier: MIT */
/*
 * Finding where a pattern matches, for content search: a compiled pattern
 * (lib/regex/regex.h) with what a search needs on top of regex_search()'s yes or
 * no. A pattern with no special characters is searched as a plain string,
 * and a string every match must hold (as "_ops" in "struct \w+_ops") is
 * looked for first, so that only the lines holding it are matched;
 * case-insensitive search compiles the pattern with Unicode simple case
 * folding (regex_compile_icase) and looks for the strings ignoring the case
 * of ASCII letters, in the subject as it is; the column of a match in a line is found by
 * bisecting with regex_search(), so it stays linear in the pattern and
 * n log n in the line.
 */
#ifndef TC_REGEX_FIND_H
#define TC_REGEX_FIND_H

#include <stdbool.h>
#include <stddef.h>

struct regex_finder;

/*
 * Compiles a pattern for searching, ignoring case with icase (Unicode
 * simple case folding). -EINVAL with a message in *ret_err, as
 * regex_compile().
 */
int regex_finder_new(const char *pattern, size_t len, bool icase, struct regex_finder **ret, char **ret_err);
/* Accepts NULL; returns NULL. */
struct regex_finder *regex_finder_free(struct regex_finder *f);
/*
 * Whether some line of the text s may match: false only when none can (a
 * quick test over a whole file before looking at its lines).
 */
bool regex_finder_may_match(const struct regex_finder *f, const char *s, size_t n);
/*
 * Finds where in s the next match may be: false when none can be; else
 * *ret_at is the offset of the next occurrence of a string that every match
 * holds (0 when the pattern has none), so the line holding it is the first
 * that may match.
 */
bool regex_finder_next(const struct regex_finder *f, const char *s, size_t n, size_t *ret_at);
/* Lines longer than this get column 0 for a pattern that is no plain string:
 * bisecting would cost n log n over them. */
#define REGEX_FIND_BISECT_MAX ((size_t)64 << 10)

/*
 * Searches one line (without its newline): 1 and the byte offset of a
 * match in *ret_col (the first to end, starting as late as it can; for a
 * plain string, the first; 0 for a pattern anchored by "^" or a line over
 * REGEX_FIND_BISECT_MAX bytes), or 0.
 */
int regex_finder_line(const struct regex_finder *f, const char *s, size_t n, size_t *ret_col);
/* Whether the pattern is searched as a plain string. */
bool regex_finder_is_literal(const struct regex_finder *f);
/* Lowercases the ASCII letters of s in place. */
void regex_fold_ascii(char *s, size_t n);

#endif
