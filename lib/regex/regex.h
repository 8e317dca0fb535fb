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

#include <stdbool.h>
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

/* --- a search fed piece by piece -----------------------------------------
 * For a subject that arrives over time (the output of a process): the
 * state of regex_search() kept between pieces, by state sets alone
 * (nothing cached), so each byte is looked at once whatever the pieces, at
 * a cost of at most 4 * regex_size() + 4 steps, and a feed may stop
 * between any two bytes when its budget runs out and go on later. What
 * was fed so far, as a subject, matches as regex_search() says when
 * regex_stream_feed() or regex_stream_at_end() returns 1. re must outlive
 * the stream.
 */
struct regex_stream;

struct regex_stream *regex_stream_new(const struct regex *re);
/* Accepts NULL; returns NULL. */
struct regex_stream *regex_stream_free(struct regex_stream *st);
/* Starts over: what comes next is the start of the subject. */
void regex_stream_reset(struct regex_stream *st);
/*
 * Feeds s (len bytes): 1 when a match ends before the last byte fed (or
 * matched before), 0 when none does yet (every byte fed), -E2BIG when
 * *budget ran out first. *ret_used is how many bytes of s were fed (feed
 * the rest later); *budget is decreased by the steps taken (to 0 when they
 * reached it; one byte may overshoot it by its cost).
 */
int regex_stream_feed(struct regex_stream *st, const char *s, size_t len, uint64_t *budget, size_t *ret_used);
/* Whether what was fed matches were the subject to end there ("$", "\b"
 * at the end); changes nothing. Costs at most 2 * regex_size() + 2 steps,
 * taken from *budget (down to 0). */
int regex_stream_at_end(struct regex_stream *st, uint64_t *budget);

/* Program units of a compiled pattern (at most REGEX_SIZE_MAX). */
size_t regex_size(const struct regex *re);

/* Accepts NULL; returns NULL. */
struct regex *regex_free(struct regex *re);

/* --- regex_find.c ----------------------------------------------------------
 * Finding where a pattern matches, for content search: a compiled pattern
 * with what a search needs on top of regex_search()'s yes or no. A pattern
 * with no special characters is searched as a plain string, and a string
 * every match must hold (as "_ops" in "struct \w+_ops") is looked for
 * first, so that only the lines holding it are matched; case-insensitive
 * search compiles the pattern with Unicode simple case folding
 * (regex_compile_icase) and looks for the strings ignoring the case of
 * ASCII letters, in the subject as it is; the column of a match in a line
 * is found by bisecting with regex_search(), so it stays linear in the
 * pattern and n log n in the line.
 */
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
