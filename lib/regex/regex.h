/* SPDX-License-Identifier: MIT */
/*
 * ECMA-262 regular expressions, the subset JSON Schema "pattern" needs,
 * matched without backtracking. regex_compile() turns a pattern into a
 * program over UTF-8 bytes (a Thompson NFA); regex_search() runs it over
 * the subject as a set of states, one byte at a time. Both are bounded
 * whatever the pattern and the subject: a pattern is at most 4096 bytes and
 * compiles to at most REGEX_SIZE_MAX units, and a search of len bytes costs
 * at most (len + 2) * (2 * regex_size() + 1) steps, each a small constant
 * amount of work, charged to the caller's budget.
 */
#ifndef TC_REGEX_H
#define TC_REGEX_H

#include <stddef.h>
#include <stdint.h>

#define REGEX_PATTERN_MAX 4096		/* bytes of a pattern */
#define REGEX_SIZE_MAX (1u << 14)	/* program units: instructions and byte ranges */

struct regex;

/*
 * Compiles an ECMA-262 pattern (UTF-8, without the slashes and flags).
 * Returns 0, or -EINVAL with "why (at offset N)" in *ret_err when the
 * pattern is invalid, uses what is not supported (lookaround,
 * backreferences, \p, flags...) or is too large. \b and \B are
 * supported: between a word character ([A-Za-z0-9_]) and another, or not.
 */
int regex_compile(const char *pattern, size_t len, struct regex **ret, char **ret_err);
/* The same, ignoring case as the "i" flag does, by Unicode simple case
 * folding: "k" also matches "K" and the Kelvin sign, "[^é]" neither "é"
 * nor "É". */
int regex_compile_icase(const char *pattern, size_t len, struct regex **ret, char **ret_err);

/*
 * Searches s (len bytes, NULs allowed; meant for valid UTF-8) for a match
 * anywhere, as ECMA-262 RegExp.prototype.test() without flags does. Returns
 * 1 on a match, 0 on none, or -E2BIG when *budget steps did not suffice.
 * *budget is decreased by the steps taken (to 0 on -E2BIG).
 */
int regex_search(const struct regex *re, const char *s, size_t len, uint64_t *budget);

/* Program units of a compiled pattern (at most REGEX_SIZE_MAX). */
size_t regex_size(const struct regex *re);

/* Accepts NULL; returns NULL. */
struct regex *regex_free(struct regex *re);

#endif
