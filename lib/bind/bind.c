/* SPDX-License-Identifier: MIT */
/*
 * The strict JSON binder: checks an object against a table of keys, stores
 * each value in its struct, and records every mistake at its line and
 * column, going on with the next key so that one run finds them all.
 */
#include "lib/bind/bind.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char bind_list_known[] = "unknown key (known: ...)";

int bind_fail(struct bind *b, size_t off, const char *path, const char *fmt, ...)
{
	if (++b->n_errors > BIND_MAX_ERRORS)
		return -EINVAL;

	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = xvasprintf(fmt, ap);
	va_end(ap);

	struct buf one = {};
	if (b->text) {
		unsigned line, col;
		json_line_col(b->text, b->len, off, &line, &col);
		buf_printf(&one, "%s:%u:%u: ", b->name ? b->name : "(input)", line, col);
	}
	if (path)
		buf_printf(&one, "%s: ", path);
	buf_puts(&one, msg);
	if (b->err) {
		char *all = xasprintf("%s\n%s", b->err, buf_head(&one));
		free(b->err);
		b->err = all;
		buf_free(&one);
	} else {
		b->err = buf_steal(&one);
	}
	return -EINVAL;
}

char *bind_errors(struct bind *b)
{
	unsigned n = b->n_errors;
	b->n_errors = 0;
	if (n <= BIND_MAX_ERRORS)
		return TAKE_PTR(b->err);
	char *all = xasprintf("%s\n%s: %u more errors not shown", b->err, b->name ? b->name : "(input)",
			      n - BIND_MAX_ERRORS);
	free(b->err);
	b->err = NULL;
	return all;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

size_t bind_key_offset(const struct bind *b, const struct json *value)
{
	size_t i = value->off;

	if (!b->text || i > b->len)
		return value->off;
	while (i > 0 && is_blank(b->text[i - 1]))
		i--;
	if (i == 0 || b->text[i - 1] != ':')
		return value->off;
	i--;
	while (i > 0 && is_blank(b->text[i - 1]))
		i--;
	if (i == 0 || b->text[i - 1] != '"')
		return value->off;
	i--;	/* at the closing quote */
	while (i > 0) {
		i--;
		if (b->text[i] != '"')
			continue;
		size_t bs = 0;
		while (bs < i && b->text[i - 1 - bs] == '\\')
			bs++;
		if (bs % 2 == 0)
			return i;
	}
	return value->off;
}

char *bind_key_path(const char *parent, const struct json_member *m)
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

char *bind_index_path(const char *parent, size_t i)
{
	return xasprintf("%s[%zu]", parent ? parent : "", i);
}

bool bind_key_is(const struct json_member *m, const char *s)
{
	return m->key_len == strlen(s) && memcmp(m->key, s, m->key_len) == 0;
}

bool bind_key_plain(const struct json_member *m)
{
	return m->key_len > 0 && strlen(m->key) == m->key_len;
}

const char *bind_got(const struct json *v)
{
	return json_kind_name(v);
}

int bind_want_uint(struct bind *b, const char *path, const struct json *v, uint64_t min, uint64_t max,
		   uint64_t *ret)
{
	const char *what = min == 0 ? "a non-negative integer" :
			   min == 1 ? "a positive integer" : "an integer";
	int64_t i;

	if (!json_get_int(v, &i)) {
		if (v->type == JSON_NUMBER && v->u.num.raw)
			return bind_fail(b, v->off, path, "expected %s, got %.*s", what,
					 (int)MIN(v->u.num.raw_len, (size_t)40), v->u.num.raw);
		return bind_fail(b, v->off, path, "expected %s, got %s", what, bind_got(v));
	}
	if (i < 0 || (uint64_t)i < min) {
		if (min <= 1)
			return bind_fail(b, v->off, path, "expected %s", what);
		return bind_fail(b, v->off, path, "expected an integer of at least %llu", (unsigned long long)min);
	}
	if ((uint64_t)i > max)
		return bind_fail(b, v->off, path, "expected %s of at most %llu", what, (unsigned long long)max);
	*ret = (uint64_t)i;
	return 0;
}

int bind_want_bool(struct bind *b, const char *path, const struct json *v, bool *ret)
{
	if (v->type != JSON_BOOL)
		return bind_fail(b, v->off, path, "expected true or false, got %s", bind_got(v));
	*ret = v->u.b;
	return 0;
}

/* Checks a string without NUL bytes of at least min and at most max
 * bytes (max 0: any). */
static int want_text(struct bind *b, const char *path, const struct json *v, uint64_t min, uint64_t max,
		     const char **ret)
{
	if (v->type != JSON_STRING)
		return bind_fail(b, v->off, path, "expected a string, got %s", bind_got(v));
	if (v->u.str.len < min)
		return bind_fail(b, v->off, path, "expected a non-empty string");
	if (max && v->u.str.len > max)
		return bind_fail(b, v->off, path, "expected a string of at most %llu bytes", (unsigned long long)max);
	if (strlen(v->u.str.s) != v->u.str.len)
		return bind_fail(b, v->off, path, "must not contain NUL bytes");
	*ret = v->u.str.s;
	return 0;
}

int bind_want_string(struct bind *b, const char *path, const struct json *v, const char **ret)
{
	return want_text(b, path, v, 1, 0, ret);
}

int bind_want_path(struct bind *b, const char *path, const struct json *v, char **ret)
{
	const char *s;
	int r = bind_want_string(b, path, v, &s);
	if (r < 0)
		return r;
	if (strlen(s) >= PATH_MAX)
		return bind_fail(b, v->off, path, "path longer than %d bytes", PATH_MAX - 1);
	*ret = bind_resolve_path(b->base_dir, s);
	return 0;
}

int bind_want_strv(struct bind *b, const char *path, const struct json *v, bool resolve, char ***ret,
		   size_t *ret_n)
{
	if (v->type != JSON_ARRAY)
		return bind_fail(b, v->off, path, "expected an array of strings, got %s", bind_got(v));

	size_t n = v->u.arr.n;
	char **strv = xcalloc(n + 1, sizeof(char *));
	int ret_r = 0;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *k = bind_index_path(path, i);
		const struct json *item = v->u.arr.items[i];
		const char *s;
		int r = resolve ? bind_want_path(b, k, item, &strv[i]) : bind_want_string(b, k, item, &s);
		if (r < 0)
			ret_r = r;	/* the next item may be wrong too */
		else if (!resolve)
			strv[i] = xstrdup(s);
	}
	if (ret_r < 0) {
		bind_strv_free(strv, n);
		return ret_r;
	}
	*ret = strv;
	*ret_n = n;
	return 0;
}

int bind_want_object(struct bind *b, const char *path, const struct json *v)
{
	if (v->type != JSON_OBJECT)
		return bind_fail(b, v->off, path, "expected an object, got %s", bind_got(v));
	return 0;
}

int bind_want_name(struct bind *b, const char *path, const struct json *v, const char *const *names, int *ret)
{
	const char *s = json_str(v);
	for (int i = 0; s && names[i]; i++)
		if (strlen(s) == v->u.str.len && strcmp(s, names[i]) == 0) {
			*ret = i;
			return 0;
		}
	struct buf m = {};
	buf_puts(&m, "expected ");
	for (size_t i = 0; names[i]; i++)
		buf_printf(&m, "%s\"%s\"", i == 0 ? "" : names[i + 1] ? ", " : " or ", names[i]);
	if (!s)
		buf_printf(&m, ", got %s", bind_got(v));
	_cleanup_free_ char *msg = buf_steal(&m);
	return bind_fail(b, v->off, path, "%s", msg);
}

/* Checks one value against its field and stores it at at. */
static int bind_value(struct bind *b, const char *path, const struct json *v, const struct bind_field *f,
		      void *at)
{
	uint64_t u;
	const char *str = NULL;
	char *s;
	bool yes;
	int r, i;

	switch (f->kind) {
	case BIND_U32:
	case BIND_U64:
	case BIND_INT:
		r = bind_want_uint(b, path, v, f->min, f->max, &u);
		if (r < 0)
			return r;
		if (f->kind == BIND_U32)
			*(uint32_t *)at = (uint32_t)u;
		else if (f->kind == BIND_U64)
			*(uint64_t *)at = u;
		else
			*(int *)at = (int)u;
		return 0;
	case BIND_BOOL:
	case BIND_TRISTATE:
		r = bind_want_bool(b, path, v, &yes);
		if (r < 0)
			return r;
		if (f->kind == BIND_BOOL)
			*(bool *)at = yes;
		else
			*(int *)at = yes;
		return 0;
	case BIND_STRING:
		r = want_text(b, path, v, f->min, f->max, &str);
		if (r < 0)
			return r;
		free(*(char **)at);
		*(char **)at = xstrdup(str);
		return 0;
	case BIND_PATH_NULL:
		if (v->type == JSON_NULL) {
			free(*(char **)at);
			*(char **)at = NULL;
			return 0;
		}
		__attribute__((fallthrough));
	case BIND_PATH:
		r = bind_want_path(b, path, v, &s);
		if (r < 0)
			return r;
		free(*(char **)at);
		*(char **)at = s;
		return 0;
	case BIND_PATHS: {
		char **strv;
		size_t n;
		r = bind_want_strv(b, path, v, true, &strv, &n);
		if (r < 0)
			return r;
		size_t *at_n = (size_t *)((char *)at - f->off + f->off_n);
		bind_strv_free(*(char ***)at, *at_n);
		*(char ***)at = strv;
		*at_n = n;
		return 0;
	}
	case BIND_NAME:
		r = bind_want_name(b, path, v, f->names, &i);
		if (r < 0)
			return r;
		if (f->size == sizeof(bool))
			*(bool *)at = i != 0;
		else
			*(int *)at = i;
		return 0;
	case BIND_VALUE:
		*(const struct json **)at = v;
		return 0;
	case BIND_OBJECT:
		return bind_object(b, path, v, f->section, f->unknown, at);
	case BIND_CUSTOM:
		return f->parse(b, path, v, at);
	}
	return -EINVAL;
}

/* "unknown key (known: a, b, c)" from a table. */
static char *list_known(const struct bind_field *fields)
{
	struct buf m = {};
	buf_puts(&m, "unknown key (known: ");
	for (const struct bind_field *f = fields; f->key; f++)
		buf_printf(&m, "%s%s", f == fields ? "" : ", ", f->key);
	buf_putc(&m, ')');
	return buf_steal(&m);
}

int bind_object(struct bind *b, const char *path, const struct json *v, const struct bind_field *fields,
		const char *unknown, void *obj)
{
	if (v->type != JSON_OBJECT) {
		if (!path)
			return bind_fail(b, v->off, NULL, "expected an object at the top level, got %s", bind_got(v));
		return bind_fail(b, v->off, path, "expected an object, got %s", bind_got(v));
	}

	int ret = 0;
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = bind_key_path(path, m);
		const struct bind_field *f = fields;
		while (f->key && !bind_key_is(m, f->key))
			f++;
		int r;
		if (f->key) {
			r = bind_value(b, k, m->value, f, (char *)obj + f->off);
		} else {
			_cleanup_free_ char *known = unknown == bind_list_known ? list_known(fields) : NULL;
			r = bind_fail(b, bind_key_offset(b, m->value), k, "%s",
				      known ? known : unknown ? unknown : "unknown key");
		}
		if (r < 0)
			ret = r;	/* the next key may be wrong too: go on */
	}
	for (const struct bind_field *f = fields; f->key; f++) {
		if (!f->required || json_get(v, f->key))
			continue;
		_cleanup_free_ char *k = path ? xasprintf("%s.%s", path, f->key) : xstrdup(f->key);
		ret = bind_fail(b, v->off, k, "missing");
	}
	return ret;
}

int bind_members(struct bind *b, const char *path, const struct json *v, size_t max,
		 int (*each)(struct bind *b, const char *path, const struct json_member *m, size_t i, void *arg),
		 void *arg)
{
	int r = bind_want_object(b, path, v);
	if (r < 0)
		return r;
	if (max && v->u.obj.n > max)
		return bind_fail(b, v->off, path, "expected an object of at most %zu keys", max);
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		_cleanup_free_ char *k = bind_key_path(path, m);
		if (each(b, k, m, i, arg) < 0)
			r = -EINVAL;	/* the next member may be wrong too */
	}
	return r;
}

struct env {
	const char *path;
	char **v;
	size_t n;
};

/* One NAME: value of an environment. */
static int env_var(struct bind *b, const char *path, const struct json_member *m, size_t i, void *arg)
{
	struct env *env = arg;
	if (!bind_key_plain(m) || strchr(m->key, '='))
		return bind_fail(b, bind_key_offset(b, m->value), env->path, "'%s' is not a variable name",
				 path + strlen(env->path) + 1);
	if (m->value->type != JSON_STRING || strlen(m->value->u.str.s) != m->value->u.str.len)
		return bind_fail(b, m->value->off, path, "expected a string without NUL characters");
	env->v[env->n++] = xasprintf("%s=%s", m->key, m->value->u.str.s);
	return 0;
}

int bind_want_env(struct bind *b, const char *path, const struct json *v, size_t max, char ***ret,
		  size_t *ret_n)
{
	struct env env = { .path = path };
	env.v = xcalloc(v->type == JSON_OBJECT ? v->u.obj.n + 1 : 1, sizeof(char *));
	int r = bind_members(b, path, v, max, env_var, &env);
	if (r < 0) {
		bind_strv_free(env.v, env.n);
		return r;
	}
	*ret = env.v;
	*ret_n = env.n;
	return 0;
}

void bind_strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

char *bind_resolve_path(const char *base_dir, const char *path)
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
