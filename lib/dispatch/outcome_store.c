/* SPDX-License-Identifier: MIT */
/*
 * Outcomes as store values (outcome_store_ops, in dispatch.h): references,
 * their size, and a JSON form for the shared store. What comes back from
 * there is hostile: it is parsed with the depth bound, every member is
 * checked for its type, kinds and side effects must be known names, and
 * text holding NUL bytes is refused.
 */
#include "lib/dispatch/dispatch.h"

#include <errno.h>
#include <string.h>

#include "lib/store/store.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"

#define MAX_FILES 100000

static void *o_ref(void *v) { return outcome_ref(v); }
static void o_unref(void *v) { outcome_unref(v); }

static size_t o_bytes(const void *v) { return outcome_bytes(v); }

static void o_encode(const void *v, struct buf *out)
{
	const struct outcome *o = v;
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	jgen_kv_str(g, "k", tc_kind_name(o->kind));
	if (o->is_error)
		jgen_kv_bool(g, "e", true);
	if (o->text_json)
		jgen_kv_raw(g, "tj", o->text_json, strlen(o->text_json));
	else if (o->text)
		jgen_kv_str(g, "t", o->text);
	if (o->structured)
		jgen_kv_raw(g, "s", o->structured, strlen(o->structured));
	if (o->content)
		jgen_kv_raw(g, "ct", o->content, strlen(o->content));
	if (o->message)
		jgen_kv_str(g, "m", o->message);
	if (o->error_data)
		jgen_kv_raw(g, "d", o->error_data, strlen(o->error_data));
	if (o->call_id)
		jgen_kv_str(g, "c", o->call_id);
	if (o->tool)
		jgen_kv_str(g, "n", o->tool);
	jgen_kv_str(g, "se", side_effect_name(o->side_effects));
	if (o->idempotent)
		jgen_kv_bool(g, "i", true);
	jgen_kv_int(g, "a", o->attempts);
	jgen_kv_int(g, "ms", (int64_t)o->duration_ms);
	if (o->retry_after_ms)
		jgen_kv_int(g, "ra", (int64_t)o->retry_after_ms);
	if (o->n_files) {
		jgen_key(g, "f");
		jgen_arr_open(g);
		for (size_t i = 0; i < o->n_files; i++)
			jgen_str(g, o->files[i]);
		jgen_arr_close(g);
	}
	if (o->command)
		jgen_kv_str(g, "x", o->command);
	jgen_obj_close(g);
	jgen_free(g);
}

/* A string member without NUL bytes, copied. */
static int take_str(const struct json *v, char **ret)
{
	if (v->type != JSON_STRING || memchr(v->u.str.s, '\0', v->u.str.len))
		return -EINVAL;
	free(*ret);
	*ret = xstrndup(v->u.str.s, v->u.str.len);
	return 0;
}

/* A member's source text, copied (the parser checked it). */
static int take_raw(const char *text, const struct json *v, enum json_type want, char **ret)
{
	if (v->type != want || v->len == 0)
		return -EINVAL;
	if (want == JSON_STRING && memchr(v->u.str.s, '\0', v->u.str.len))
		return -EINVAL;
	free(*ret);
	*ret = xstrndup(text + v->off, v->len);
	return 0;
}

static int take_u64(const struct json *v, uint64_t *ret)
{
	int64_t i;
	if (!json_get_int(v, &i) || i < 0)
		return -EINVAL;
	*ret = (uint64_t)i;
	return 0;
}

/* The content array's source text, copied: items are objects naming their type. */
static int take_content(const char *text, const struct json *v, char **ret)
{
	if (v->type != JSON_ARRAY || v->u.arr.n == 0)
		return -EINVAL;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct json *type = json_get(v->u.arr.items[i], "type");
		if (!type || type->type != JSON_STRING)
			return -EINVAL;
	}
	return take_raw(text, v, JSON_ARRAY, ret);
}

/* The kind named s, or -1. */
static int kind_from_name(const char *s)
{
	for (int k = 0; k < TC_KIND_MAX; k++)
		if (str_eq(tc_kind_name((enum tc_kind)k), s))
			return k;
	return -1;
}

static int decode_member(struct outcome *o, const char *text, const char *key, const struct json *v)
{
	uint64_t u;
	int r;
	if (str_eq(key, "k")) {
		if (v->type != JSON_STRING)
			return -EINVAL;
		int k = kind_from_name(v->u.str.s);
		if (k < 0)
			return -EINVAL;
		o->kind = (enum tc_kind)k;
		return 0;
	}
	if (str_eq(key, "se")) {
		int se = v->type == JSON_STRING ? side_effect_from_name(v->u.str.s) : -1;
		if (se < 0)
			return -EINVAL;
		o->side_effects = (enum side_effect)se;
		return 0;
	}
	if (str_eq(key, "e") || str_eq(key, "i")) {
		if (v->type != JSON_BOOL)
			return -EINVAL;
		*(str_eq(key, "e") ? &o->is_error : &o->idempotent) = v->u.b;
		return 0;
	}
	if (str_eq(key, "t"))
		return take_str(v, &o->text);
	if (str_eq(key, "tj"))
		return take_raw(text, v, JSON_STRING, &o->text_json);
	if (str_eq(key, "s"))
		return take_raw(text, v, JSON_OBJECT, &o->structured);
	if (str_eq(key, "ct"))
		return take_content(text, v, &o->content);
	if (str_eq(key, "d"))
		return take_raw(text, v, JSON_OBJECT, &o->error_data);
	if (str_eq(key, "m"))
		return take_str(v, &o->message);
	if (str_eq(key, "c"))
		return take_str(v, &o->call_id);
	if (str_eq(key, "n"))
		return take_str(v, &o->tool);
	if (str_eq(key, "x"))
		return take_str(v, &o->command);
	if (str_eq(key, "a")) {
		if ((r = take_u64(v, &u)) < 0 || u > 1000)
			return -EINVAL;
		o->attempts = (unsigned)u;
		return 0;
	}
	if (str_eq(key, "ms"))
		return take_u64(v, &o->duration_ms);
	if (str_eq(key, "ra"))
		return take_u64(v, &o->retry_after_ms);
	if (str_eq(key, "f")) {
		if (v->type != JSON_ARRAY || v->u.arr.n > MAX_FILES || o->files)
			return -EINVAL;
		o->files = xcalloc(v->u.arr.n + 1, sizeof(char *));
		for (size_t i = 0; i < v->u.arr.n; i++) {
			if ((r = take_str(v->u.arr.items[i], &o->files[i])) < 0)
				return r;
			o->n_files++;
		}
		return 0;
	}
	return 0;	/* a newer daemon's member: ignored */
}

static int o_decode(const char *s, size_t n, void **ret)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	/* Room for the structured content's own depth limit. */
	if (json_parse(s, n, 0, 72, &doc, &err) < 0)
		return -EINVAL;
	const struct json *root = json_doc_root(doc);
	const char *text = json_doc_text(doc);
	int r = root->type == JSON_OBJECT && json_get(root, "k") ? 0 : -EINVAL;
	struct outcome *o = outcome_new(TC_OK);
	for (size_t i = 0; r == 0 && i < root->u.obj.n; i++)
		r = decode_member(o, text, root->u.obj.members[i].key, root->u.obj.members[i].value);
	json_doc_unref(doc);
	if (r < 0) {
		outcome_unref(o);
		return r;
	}
	*ret = o;
	return 0;
}

const struct store_value_ops outcome_store_ops = {
	.ref = o_ref,
	.unref = o_unref,
	.bytes = o_bytes,
	.encode = o_encode,
	.decode = o_decode,
};
