/* SPDX-License-Identifier: MIT */
/*
 * Ignore files, git's rules (see lib/ignore/ignore.h).
 */
#include "lib/ignore/ignore.h"

#include <string.h>

#include "lib/glob/glob.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"

enum pat_kind {
	PAT_LITERAL,	/* the subject is the text */
	PAT_SUFFIX,	/* "*" + text: the subject ends with the text */
	PAT_GLOB,
};

struct pat {
	bool negate, dir_only, anchored;
	enum pat_kind kind;
	char *text;		/* PAT_LITERAL, PAT_SUFFIX */
	size_t len;
	struct glob *glob;	/* PAT_GLOB */
};

struct ignore {
	struct pat *v;
	size_t n;
};

/* True when s holds a character the glob syntax gives a meaning. */
static bool has_special(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '*' || s[i] == '?' || s[i] == '[' || s[i] == '\\')
			return true;
	return false;
}

/* Drops trailing spaces that are not escaped with a backslash. */
static size_t trim_spaces(const char *s, size_t n)
{
	while (n > 0 && s[n - 1] == ' ') {
		size_t bs = 0;
		while (bs + 1 < n && s[n - 2 - bs] == '\\')
			bs++;
		if (bs % 2)
			break;	/* "\ ": a space kept */
		n--;
	}
	return n;
}

/* Parses one line into p; false when it holds no pattern. */
static bool parse_line(const char *s, size_t n, struct pat *p)
{
	if (n && s[n - 1] == '\r')
		n--;
	if (!n || s[0] == '#' || n > IGNORE_LINE_MAX)
		return false;
	n = trim_spaces(s, n);
	*p = (struct pat){0};
	if (n && s[0] == '!') {
		p->negate = true;
		s++;
		n--;
	}
	if (n && s[n - 1] == '/') {
		p->dir_only = true;
		n--;
	}
	if (!n)
		return false;
	p->anchored = memchr(s, '/', n) != NULL;
	if (s[0] == '/') {
		s++;
		n--;
		if (!n)
			return false;
	}
	if (!has_special(s, n)) {
		p->kind = PAT_LITERAL;
		p->text = xmemdup(s, n);
		p->len = n;
		return true;
	}
	if (s[0] == '*' && n > 1 && !has_special(s + 1, n - 1) && !p->anchored) {
		p->kind = PAT_SUFFIX;
		p->text = xmemdup(s + 1, n - 1);
		p->len = n - 1;
		return true;
	}
	/* lib/glob/glob.c's syntax but for braces, which are literal here. */
	struct buf g = {0};
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 1 < n) {
			buf_append(&g, s + i, 2);
			i++;
			continue;
		}
		if (s[i] == '{' || s[i] == '}' || s[i] == ',')
			buf_putc(&g, '\\');
		buf_putc(&g, s[i]);
	}
	_cleanup_free_ char *err = NULL;
	int r = glob_compile(buf_head(&g), buf_size(&g), &p->glob, &err);
	buf_free(&g);
	if (r < 0)
		return false;
	p->kind = PAT_GLOB;
	return true;
}

struct ignore *ignore_parse(const char *text, size_t n)
{
	struct ignore *ig = xcalloc(1, sizeof(*ig));
	size_t alloc = 0;
	n = MIN(n, IGNORE_FILE_MAX);
	for (size_t off = 0; off < n;) {
		const char *nl = memchr(text + off, '\n', n - off);
		size_t len = nl ? (size_t)(nl - text) - off : n - off;
		struct pat p;
		if (parse_line(text + off, len, &p)) {
			if (ig->n == alloc) {
				alloc = alloc ? 2 * alloc : 16;
				ig->v = xreallocarray(ig->v, alloc, sizeof(*ig->v));
			}
			ig->v[ig->n++] = p;
		}
		off += len + 1;
	}
	if (!ig->n)
		return ignore_free(ig);
	return ig;
}

/* Whether the pattern matches the subject (a path or a name). */
static bool pat_match(const struct pat *p, const char *s, size_t n)
{
	switch (p->kind) {
	case PAT_LITERAL:
		return n == p->len && memcmp(s, p->text, n) == 0;
	case PAT_SUFFIX:
		return n >= p->len && memcmp(s + n - p->len, p->text, p->len) == 0 &&
		       !memchr(s, '/', n - p->len);
	case PAT_GLOB:
		return glob_match(p->glob, s, n);
	}
	return false;
}

enum ignore_verdict ignore_match(const struct ignore *ig, const char *path, size_t len, bool is_dir)
{
	if (!ig)
		return IGNORE_NONE;
	const char *slash = memrchr(path, '/', len);
	const char *base = slash ? slash + 1 : path;
	size_t base_len = len - (size_t)(base - path);
	for (size_t i = ig->n; i-- > 0;) {
		const struct pat *p = &ig->v[i];
		if (p->dir_only && !is_dir)
			continue;
		if (p->anchored ? pat_match(p, path, len) : pat_match(p, base, base_len))
			return p->negate ? IGNORE_INCLUDE : IGNORE_EXCLUDE;
	}
	return IGNORE_NONE;
}

struct ignore *ignore_free(struct ignore *ig)
{
	if (!ig)
		return NULL;
	for (size_t i = 0; i < ig->n; i++) {
		free(ig->v[i].text);
		glob_free(ig->v[i].glob);
	}
	free(ig->v);
	free(ig);
	return NULL;
}
