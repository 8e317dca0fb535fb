/* SPDX-License-Identifier: MIT */
/*
 * Ignore files as git reads them (.gitignore, .git/info/exclude; ripgrep's
 * .ignore has the same syntax): one pattern a line; blank lines and lines
 * starting with "#" are skipped ("\#" for a literal one); trailing spaces
 * are dropped unless escaped with "\"; "!" negates (re-includes what an
 * earlier pattern excluded; "\!" for a literal one); a trailing "/" matches
 * directories only; a pattern with a "/" at its start or in its middle is
 * anchored (matched against the path relative to the file's directory),
 * else it matches a name at any depth below it; "*" and "?" do not match
 * "/", "[...]" is a set, "**" as a whole component matches any number of
 * components ("**" + "/x", "a/" + "**" + "/b", "a/" + "**"), and "\" makes
 * the next character literal.
 *
 * The matching itself is lib/glob/glob.c's, without backtracking: a file of
 * hostile patterns costs at most (path length) x (pattern length) per
 * pattern and path. Literal names and "*.ext" patterns take a shortcut.
 *
 * Precedence between files (which the caller keeps): the deepest
 * directory's files first, in each the last matching pattern decides;
 * a directory excluded is not entered, so nothing below it is re-included.
 */
#ifndef TC_IGNORE_H
#define TC_IGNORE_H

#include <stdbool.h>
#include <stddef.h>

/* An ignore file is read up to this many bytes; lines up to this long. */
#define IGNORE_FILE_MAX ((size_t)1 << 20)
#define IGNORE_LINE_MAX 4096

struct ignore;

enum ignore_verdict {
	IGNORE_NONE,		/* no pattern matches */
	IGNORE_EXCLUDE,		/* the last matching pattern excludes */
	IGNORE_INCLUDE,		/* the last matching pattern is a negation */
};

/* Parses the text of an ignore file (at most IGNORE_FILE_MAX bytes are
 * read; longer lines and patterns that do not compile are skipped).
 * NULL when it holds no pattern. */
struct ignore *ignore_parse(const char *text, size_t n);
/* The verdict of the last pattern matching path (relative to the ignore
 * file's directory, "/" separated, no trailing slash). */
enum ignore_verdict ignore_match(const struct ignore *ig, const char *path, size_t len, bool is_dir);
/* Accepts NULL; returns NULL. */
struct ignore *ignore_free(struct ignore *ig);

#endif
