/* SPDX-License-Identifier: MIT */
/*
 * Glob patterns over relative paths (as "*.{c,h}", or "src/" then "**" then
 * "/x.c"), matched without backtracking. "*" matches any run of characters
 * but "/", "?" one character but "/", "[abc]", "[a-z]" and "[!a]" (or "[^a]") one character
 * of a set, "{a,b}" either alternative (nested, at most GLOB_ALTS_MAX after
 * expansion), "**" as a whole component any number of components (none
 * too), and "\\" makes the next character literal. A "[" or "{" that is not
 * closed is literal. Characters are UTF-8 code points; names starting with
 * "." are matched like any other.
 *
 * A compiled pattern is a set of small NFAs, one per brace alternative; a
 * match costs at most (path length) x (pattern length) steps per
 * alternative, whatever the pattern.
 */
#ifndef TC_GLOB_H
#define TC_GLOB_H

#include <stdbool.h>
#include <stddef.h>

#define GLOB_PATTERN_MAX 4096	/* bytes of a pattern */
#define GLOB_ALTS_MAX 256	/* alternatives after brace expansion */

struct glob;

/* Compiles a pattern; -EINVAL with a message in *ret_err when it is too
 * long, holds a NUL or expands to too many alternatives. */
int glob_compile(const char *pattern, size_t len, struct glob **ret, char **ret_err);
/* Whether the whole of path (a relative path, "/" separated) matches. */
bool glob_match(const struct glob *g, const char *path, size_t len);
/* Whether some path beneath the directory dir ("src/lib", no trailing
 * slash; "" for the top) may match: for pruning a walk. */
bool glob_may_match_below(const struct glob *g, const char *dir, size_t len);
/* Whether the pattern may match paths of any depth (it holds "**"). */
bool glob_any_depth(const struct glob *g);
/* Accepts NULL; returns NULL. */
struct glob *glob_free(struct glob *g);

#endif
