/* SPDX-License-Identifier: MIT */
/*
 * The generic binder of the config file: checks a JSON object against a
 * table of keys and stores each value in struct config; every mistake is
 * reported once, at its line and column.
 */
#include "daemon/config_bind.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records the first error, located at byte off of the text. Returns -EINVAL. */
int cfg_fail(struct cfg_parse *p, size_t off, const char *key, const char *fmt, ...)
{
	if (++p->n_errors > CFG_MAX_ERRORS)
		return -EINVAL;

	unsigned line, col;
	json_line_col(p->text, p->len, off, &line, &col);

	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = xvasprintf(fmt, ap);
	va_end(ap);

	char *one = key ? xasprintf("%s:%u:%u: %s: %s", p->name, line, col, key, msg)
			: xasprintf("%s:%u:%u: %s", p->name, line, col, msg);
	if (p->err) {
		char *both = xasprintf("%s\n%s", p->err, one);
		free(p->err);
		free(one);
		one = both;
	}
	p->err = one;
	return -EINVAL;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/*
 * Finds where a member's key starts: the tree keeps only the value's
 * offset, so walk back over ':' and white space to the key's closing quote,
 * then to its opening quote. A comment between key and value defeats
 * this; the value's offset is then close enough.
 */
size_t cfg_key_offset(const struct cfg_parse *p, const struct json *value)
{
	size_t i = value->off;

	while (i > 0 && is_blank(p->text[i - 1]))
		i--;
	if (i == 0 || p->text[i - 1] != ':')
		return value->off;
	i--;
	while (i > 0 && is_blank(p->text[i - 1]))
		i--;
	if (i == 0 || p->text[i - 1] != '"')
		return value->off;
	i--;	/* at the closing quote */
	while (i > 0) {
		i--;
		if (p->text[i] != '"')
			continue;
		size_t bs = 0;
		while (bs < i && p->text[i - 1 - bs] == '\\')
			bs++;
		if (bs % 2 == 0)
			return i;
	}
	return value->off;
}

/* Appends a key to a dotted path, made printable (keys come from the file
 * and end up on a terminal or in the journal). */
char *cfg_key_path(const char *parent, const struct json_member *m)
{
	struct buf b = {};

	if (parent) {
		buf_puts(&b, parent);
		buf_putc(&b, '.');
	}
	size_t n = MIN(m->key_len, (size_t)64);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)m->key[i];
		buf_putc(&b, ch < 0x20 || ch == 0x7f ? '?' : (char)ch);
	}
	if (m->key_len > n)
		buf_puts(&b, "...");
	return buf_steal(&b);
}

/* True when a key is a plain C string equal to s. */
bool cfg_key_is(const struct json_member *m, const char *s)
{
	return m->key_len == strlen(s) && memcmp(m->key, s, m->key_len) == 0;
}

/* True when a key holds no NUL byte (it names a tool or a class). */
bool cfg_key_plain(const struct json_member *m)
{
	return m->key_len > 0 && strlen(m->key) == m->key_len;
}

/* The type of a value as messages name it ("integer", "string"). */
const char *cfg_got(const struct json *v)
{
	return json_kind_name(v);
}

/* Checks an integer in [min, max]. */
int cfg_want_uint(struct cfg_parse *p, const char *key, const struct json *v,
		     uint64_t min, uint64_t max, uint64_t *ret)
{
	const char *what = min == 0 ? "a non-negative integer" :
			   min == 1 ? "a positive integer" : "an integer";
	int64_t i;

	if (!json_get_int(v, &i)) {
		if (v->type == JSON_NUMBER)
			return cfg_fail(p, v->off, key, "expected %s, got %.*s", what,
				    (int)MIN(v->u.num.raw_len, (size_t)40), v->u.num.raw);
		return cfg_fail(p, v->off, key, "expected %s, got %s", what, cfg_got(v));
	}
	if (i < 0 || (uint64_t)i < min) {
		if (min <= 1)
			return cfg_fail(p, v->off, key, "expected %s", what);
		return cfg_fail(p, v->off, key, "expected an integer of at least %llu",
			    (unsigned long long)min);
	}
	if ((uint64_t)i > max)
		return cfg_fail(p, v->off, key, "expected %s of at most %llu", what,
			    (unsigned long long)max);
	*ret = (uint64_t)i;
	return 0;
}

/* Checks a non-empty string without NUL bytes. */
int cfg_want_string(struct cfg_parse *p, const char *key, const struct json *v, const char **ret)
{
	if (v->type != JSON_STRING)
		return cfg_fail(p, v->off, key, "expected a string, got %s", cfg_got(v));
	if (v->u.str.len == 0)
		return cfg_fail(p, v->off, key, "expected a non-empty string");
	if (strlen(v->u.str.s) != v->u.str.len)
		return cfg_fail(p, v->off, key, "must not contain NUL bytes");
	*ret = v->u.str.s;
	return 0;
}

/* Checks a path and resolves it against the file's directory. */
int cfg_want_path(struct cfg_parse *p, const char *key, const struct json *v, char **ret)
{
	const char *s;
	int r = cfg_want_string(p, key, v, &s);
	if (r < 0)
		return r;
	if (strlen(s) >= PATH_MAX)
		return cfg_fail(p, v->off, key, "path longer than %d bytes", PATH_MAX - 1);
	*ret = config_resolve_path(p->base_dir, s);
	return 0;
}

/* Checks an array of strings (paths when resolve). */
int cfg_want_strv(struct cfg_parse *p, const char *key, const struct json *v, bool resolve,
		     char ***ret, size_t *ret_n)
{
	if (v->type != JSON_ARRAY)
		return cfg_fail(p, v->off, key, "expected an array of strings, got %s", cfg_got(v));

	size_t n = v->u.arr.n;
	char **strv = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *k = xasprintf("%s[%zu]", key, i);
		const struct json *item = v->u.arr.items[i];
		const char *s;
		int r = resolve ? cfg_want_path(p, k, item, &strv[i]) : cfg_want_string(p, k, item, &s);
		if (r < 0) {
			cfg_strv_free(strv, n);
			return r;
		}
		if (!resolve)
			strv[i] = xstrdup(s);
	}
	*ret = strv;
	*ret_n = n;
	return 0;
}

/* Checks that a value is an object. */
int cfg_want_object(struct cfg_parse *p, const char *key, const struct json *v)
{
	if (v->type != JSON_OBJECT)
		return cfg_fail(p, v->off, key, "expected an object, got %s", cfg_got(v));
	return 0;
}

/* Checks one value against its field and stores it. */
static int parse_field(struct cfg_parse *p, const char *key, const struct json *v,
		       const struct field *f, struct config *c)
{
	void *at = (char *)c + f->off;
	uint64_t u;
	char *s;
	int r;

	switch (f->kind) {
	case F_U32:
		r = cfg_want_uint(p, key, v, f->min, f->max, &u);
		if (r < 0)
			return r;
		*(uint32_t *)at = (uint32_t)u;
		return 0;
	case F_U64:
		r = cfg_want_uint(p, key, v, f->min, f->max, &u);
		if (r < 0)
			return r;
		*(uint64_t *)at = u;
		return 0;
	case F_PATH_NULL:
		if (v->type == JSON_NULL) {
			free(*(char **)at);
			*(char **)at = NULL;
			return 0;
		}
		__attribute__((fallthrough));
	case F_PATH:
		r = cfg_want_path(p, key, v, &s);
		if (r < 0)
			return r;
		free(*(char **)at);
		*(char **)at = s;
		return 0;
	case F_PATHS: {
		char **strv;
		size_t n;
		r = cfg_want_strv(p, key, v, true, &strv, &n);
		if (r < 0)
			return r;
		size_t *at_n = (size_t *)((char *)c + f->off_n);
		cfg_strv_free(*(char ***)at, *at_n);
		*(char ***)at = strv;
		*at_n = n;
		return 0;
	}
	case F_SECTION:
		return cfg_bind_section(p, key, v, f->section, f->unknown, c);
	case F_CUSTOM:
		return f->parse(p, key, v, c);
	}
	return -EINVAL;
}

/* Checks an object against a table of keys. */
int cfg_bind_section(struct cfg_parse *p, const char *key, const struct json *v,
			 const struct field *fields, const char *unknown, struct config *c)
{
	if (v->type != JSON_OBJECT) {
		if (!key)
			return cfg_fail(p, v->off, NULL, "expected an object at the top level, got %s", cfg_got(v));
		return cfg_fail(p, v->off, key, "expected an object, got %s", cfg_got(v));
	}

	int ret = 0;
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = cfg_key_path(key, m);
		const struct field *f = fields;
		while (f->key && !cfg_key_is(m, f->key))
			f++;
		int r = f->key ? parse_field(p, k, m->value, f, c)
			       : cfg_fail(p, cfg_key_offset(p, m->value), k, "%s", unknown ? unknown : "unknown key");
		if (r < 0)
			ret = r;	/* the next key may be wrong too: go on */
	}
	return ret;
}

void cfg_strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Joins and tidies a path the config file names. */
char *config_resolve_path(const char *base_dir, const char *path)
{
	struct buf b = {};

	if (path[0] != '/' && base_dir)
		buf_printf(&b, "%s/", base_dir);
	buf_puts(&b, path);
	_cleanup_free_ char *joined = buf_steal(&b);

	/* Drop "." components and repeated or trailing slashes; ".." stays for
	 * the kernel to resolve, since taking it lexically would be wrong when
	 * a component is a symbolic link. */
	bool is_abs = joined[0] == '/';
	bool first = true;
	if (is_abs)
		buf_putc(&b, '/');
	for (char *s = joined; *s;) {
		while (*s == '/')
			s++;
		char *e = s;
		while (*e && *e != '/')
			e++;
		size_t n = (size_t)(e - s);
		if (n > 0 && !(n == 1 && s[0] == '.')) {
			if (!first)
				buf_putc(&b, '/');
			buf_append(&b, s, n);
			first = false;
		}
		s = e;
	}
	if (buf_size(&b) == 0)
		buf_putc(&b, '.');
	return buf_steal(&b);
}
