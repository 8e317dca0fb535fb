/* SPDX-License-Identifier: MIT */
/*
 * Validating an instance against a compiled schema (schema_compile.c):
 * schema_validate() walks the nodes and reports every error with a JSON
 * pointer into the instance. Whatever the schema and the instance, it is
 * bounded in stack depth, $ref depth, work (schema nodes visited and,
 * separately, regex steps) and number of errors reported.
 *
 * Draft 7 semantics throughout; in particular a schema holding "$ref" is
 * validated by the referenced schema alone: its sibling keywords are
 * checked when compiling but ignored when validating (Draft 7, 8.3).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/schema/schema_internal.h"

/* Limits on one validation. */
#define REF_DEPTH_MAX 256
#define EVAL_DEPTH_MAX 1024
#define STEPS_BASE (1u << 20)	/* schema nodes visited, whatever the instance */
#define STEPS_PER_VALUE 32u	/* and so many more per value of the instance */
#define ERRORS_MAX 100

/*
 * Steps of the pattern matcher, for all the strings of one validation. A
 * search costs at most (2 * size + 1) steps per byte (lib/regex/regex.h), a few
 * nanoseconds each: unbounded, the worst patterns on a long string would
 * take minutes. 2^26 steps stop the worst ones found after 0.15 to 0.35 s
 * on a 2-core x86-64 machine. Ordinary patterns cost 1 to 3 steps per byte
 * of a long string (the DFA states are cached) and up to about 7 per byte
 * of short ones, each searched afresh: even a whole message of the default
 * largest size (8 MiB) of strings, each matched against an ordinary
 * pattern, stays within it.
 */
#define REGEX_STEPS (UINT64_C(1) << 26)


/* Bytes of a key in a path. */
#define PATH_KEY_MAX 256

/* The TB_* bits of a value: an integral number is also an integer. */
static unsigned type_bits(const struct json *v)
{
	switch (v->type) {
	case JSON_NULL:
		return TB_NULL;
	case JSON_BOOL:
		return TB_BOOLEAN;
	case JSON_NUMBER:
		return is_integral(v) ? TB_NUMBER | TB_INTEGER : TB_NUMBER;
	case JSON_STRING:
		return TB_STRING;
	case JSON_ARRAY:
		return TB_ARRAY;
	case JSON_OBJECT:
		return TB_OBJECT;
	}
	return 0;
}

static bool name_eq(const struct name *a, const char *s, size_t len)
{
	return a->len == len && memcmp(a->s, s, len) == 0;
}

/* ------------------------------------------------------------------------
 * Validating.
 */

struct seg {
	const char *key;	/* NULL: an array index */
	size_t len;		/* key length, or the index */
};

struct vctx {
	const struct schema *s;
	const struct json *instance;
	struct schema_errors *errs;	/* NULL: stop at the first error */
	size_t added;			/* errors added by this validation */
	struct seg *path;
	size_t n_path, cap_path;
	struct seg path_inline[16];
	unsigned depth, ref_depth;
	size_t steps, budget;
	bool budget_grown;
	uint64_t regex_budget;		/* steps left for matching patterns */
	bool stop;			/* a limit was hit: everything fails */
	char *limit_path, *limit_msg;
};

/* Enters a member or an item of the instance. */
static void path_push(struct vctx *x, const char *key, size_t len)
{
	if (x->n_path == x->cap_path) {
		size_t cap = x->cap_path * 2;

		if (x->path == x->path_inline) {
			x->path = xmemdup(x->path_inline, sizeof(x->path_inline));
			x->path = xreallocarray(x->path, cap, sizeof(*x->path));
		} else
			x->path = xreallocarray(x->path, cap, sizeof(*x->path));
		x->cap_path = cap;
	}
	x->path[x->n_path++] = (struct seg){ key, len };
}

static void path_pop(struct vctx *x)
{
	x->n_path--;
}

/* Formats the current instance location as a JSON pointer (RFC 6901). */
static char *path_format(const struct vctx *x)
{
	struct buf b = {};

	for (size_t i = 0; i < x->n_path; i++) {
		const struct seg *g = &x->path[i];
		size_t keep;

		buf_putc(&b, '/');
		if (!g->key) {
			buf_printf(&b, "%zu", g->len);
			continue;
		}
		/* A client's keys can be megabytes long and appear in every
		 * error below them: shorten them. */
		keep = utf8_cut(g->key, g->len, PATH_KEY_MAX);
		for (size_t k = 0; k < keep; k++) {
			if (g->key[k] == '~')
				buf_puts(&b, "~0");
			else if (g->key[k] == '/')
				buf_puts(&b, "~1");
			else
				buf_putc(&b, g->key[k]);
		}
		if (keep < g->len)
			buf_puts(&b, "...");
	}
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/* Appends one error, taking both strings. */
static void errors_append(struct schema_errors *errs, char *path, char *message)
{
	errs->v = xreallocarray(errs->v, errs->n + 1, sizeof(*errs->v));
	errs->v[errs->n++] = (struct schema_error){ .path = path, .message = message };
}

/* Records an error at the current location (when collecting). */
static void add_error(struct vctx *x, const char *fmt, ...) PRINTF(2, 3);
static void add_error(struct vctx *x, const char *fmt, ...)
{
	va_list ap;

	if (!x->errs || x->stop)
		return;
	if (x->added == ERRORS_MAX) {
		/* Enough to act on; the rest would only bloat the reply. */
		errors_append(x->errs, xstrdup(""),
			      xasprintf("too many errors: only the first %d are reported", ERRORS_MAX));
		x->stop = true;
		return;
	}
	va_start(ap, fmt);
	errors_append(x->errs, path_format(x), xvasprintf(fmt, ap));
	va_end(ap);
	x->added++;
}

/* Stops the validation: a limit was reached. */
static void hit_limit(struct vctx *x, const char *msg)
{
	if (!x->limit_msg) {
		x->limit_path = path_format(x);
		x->limit_msg = xstrdup(msg);
	}
	x->stop = true;
}

static bool validate(struct vctx *x, const struct node *n, const struct json *v);

/* Validates without collecting errors (for anyOf, oneOf, not). */
static bool probe(struct vctx *x, const struct node *n, const struct json *v)
{
	struct schema_errors *saved = x->errs;
	bool ok;

	x->errs = NULL;
	ok = validate(x, n, v);
	x->errs = saved;
	return ok;
}

/* Compares two numbers by value. */
static int num_cmp(const struct json *a, const struct json *b)
{
	long double p, q;

	if (a->u.num.is_int && b->u.num.is_int)
		return (a->u.num.i > b->u.num.i) - (a->u.num.i < b->u.num.i);
	/* long double holds every int64 exactly. */
	p = a->u.num.is_int ? (long double)a->u.num.i : (long double)a->u.num.d;
	q = b->u.num.is_int ? (long double)b->u.num.i : (long double)b->u.num.d;
	return (p > q) - (p < q);
}

static const char *num_text(const struct json *v, int *ret_len)
{
	*ret_len = (int)MIN(v->u.num.raw_len, (size_t)64);
	return v->u.num.raw;
}

/* Checks the numeric bounds. */
static bool validate_number(struct vctx *x, const struct node *n, const struct json *v)
{
	bool ok = true;
	int len;
	const char *t;

	if (n->minimum && num_cmp(v, n->minimum) < 0) {
		t = num_text(n->minimum, &len);
		add_error(x, "must be >= %.*s", len, t);
		ok = false;
	}
	if (n->maximum && num_cmp(v, n->maximum) > 0) {
		t = num_text(n->maximum, &len);
		add_error(x, "must be <= %.*s", len, t);
		ok = false;
	}
	if (n->xminimum && num_cmp(v, n->xminimum) <= 0) {
		t = num_text(n->xminimum, &len);
		add_error(x, "must be > %.*s", len, t);
		ok = false;
	}
	if (n->xmaximum && num_cmp(v, n->xmaximum) >= 0) {
		t = num_text(n->xmaximum, &len);
		add_error(x, "must be < %.*s", len, t);
		ok = false;
	}
	return ok;
}

/* Checks the length in code points and the pattern. */
static bool validate_string(struct vctx *x, const struct node *n, const struct json *v)
{
	size_t bytes = v->u.str.len;
	bool ok = true;

	/* Code points lie between bytes/4 and bytes: count only when needed. */
	if (bytes > n->max_len || bytes / 4 < n->min_len) {
		size_t cps = utf8_length(v->u.str.s, bytes);

		if (cps < n->min_len) {
			add_error(x, "must be at least %zu characters long", n->min_len);
			ok = false;
		}
		if (cps > n->max_len) {
			add_error(x, "must be at most %zu characters long", n->max_len);
			ok = false;
		}
	}
	if (n->re) {
		int r = regex_search(n->re, v->u.str.s, bytes, &x->regex_budget);

		if (r == -E2BIG) {
			_cleanup_free_ char *msg = xasprintf("validation stopped: pattern '%s' is too expensive "
							     "to match against this value", n->pattern_text);

			hit_limit(x, msg);
			return false;
		}
		if (r == 0) {
			add_error(x, "must match pattern '%s'", n->pattern_text);
			ok = false;
		}
	}
	return ok;
}

/* Mixes the bits of a hash (the murmur3 finalizer). */
static uint64_t hash_mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Hashes bytes (FNV-1a). */
static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

/* Hashes a value consistently with json_equal: numbers by value, objects
 * whatever their key order. */
static uint64_t value_hash(const struct json *v, unsigned depth)
{
	uint64_t h;

	if (depth > 128)
		return 7;
	switch (v->type) {
	case JSON_NULL:
		return 1;
	case JSON_BOOL:
		return v->u.b ? 2 : 3;
	case JSON_NUMBER: {
		double d = v->u.num.is_int ? (double)v->u.num.i : v->u.num.d;
		uint64_t bits;

		if (d == 0)
			d = 0;	/* -0 equals 0 */
		memcpy(&bits, &d, sizeof(bits));
		return hash_mix(bits ^ 4);
	}
	case JSON_STRING:
		return hash_mix(hash_bytes(v->u.str.s, v->u.str.len) ^ 5);
	case JSON_ARRAY:
		h = 6;
		for (size_t i = 0; i < v->u.arr.n; i++)
			h = hash_mix(h * 31 + value_hash(v->u.arr.items[i], depth + 1));
		return h;
	case JSON_OBJECT:
		h = 8;
		for (size_t i = 0; i < v->u.obj.n; i++) {
			const struct json_member *m = &v->u.obj.members[i];

			h += hash_mix(hash_bytes(m->key, m->key_len) * 31 +
				      value_hash(m->value, depth + 1));
		}
		return hash_mix(h);
	}
	return 0;
}

struct hashed {
	uint64_t hash;
	size_t index;
};

static int hashed_cmp(const void *a, const void *b)
{
	const struct hashed *x = a, *y = b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return (x->index > y->index) - (x->index < y->index);
}

/* Finds two equal items; sorts by hash so that long arrays cost n log n. */
static bool find_duplicate(const struct json *v, size_t *ret_a, size_t *ret_b)
{
	size_t n = v->u.arr.n;
	struct json **it = v->u.arr.items;
	_cleanup_free_ struct hashed *h = NULL;
	bool found = false;

	if (n <= 8) {
		for (size_t i = 0; i < n; i++)
			for (size_t j = i + 1; j < n; j++)
				if (json_equal(it[i], it[j])) {
					*ret_a = i;
					*ret_b = j;
					return true;
				}
		return false;
	}
	h = xreallocarray(NULL, n, sizeof(*h));
	for (size_t i = 0; i < n; i++)
		h[i] = (struct hashed){ value_hash(it[i], 0), i };
	qsort(h, n, sizeof(*h), hashed_cmp);
	*ret_a = *ret_b = SIZE_MAX;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n && h[j].hash == h[i].hash; j++)
			if (json_equal(it[h[i].index], it[h[j].index])) {
				/* Report the pair that ends first in the array. */
				if (!found || h[j].index < *ret_b ||
				    (h[j].index == *ret_b && h[i].index < *ret_a)) {
					*ret_a = h[i].index;
					*ret_b = h[j].index;
				}
				found = true;
				break;
			}
	return found;
}

/* Checks the item count, the items and their uniqueness. */
static bool validate_array(struct vctx *x, const struct node *n, const struct json *v)
{
	size_t count = v->u.arr.n, a, b;
	bool ok = true;

	if (count < n->min_items) {
		add_error(x, "must have at least %zu items", n->min_items);
		ok = false;
		if (!x->errs)
			return false;
	}
	if (count > n->max_items) {
		add_error(x, "must have at most %zu items", n->max_items);
		ok = false;
		if (!x->errs)
			return false;
	}
	if (n->items || n->tuple) {
		size_t upto = n->items ? count : MIN(count, n->n_tuple);

		for (size_t i = 0; i < upto; i++) {
			const struct node *sub = n->items ? n->items : n->tuple[i];

			if (sub->kind == NODE_TRUE)
				continue;
			path_push(x, NULL, i);
			if (!validate(x, sub, v->u.arr.items[i]))
				ok = false;
			path_pop(x);
			if (!ok && (!x->errs || x->stop))
				return false;
		}
	}
	if (n->unique && count > 1 && find_duplicate(v, &a, &b)) {
		add_error(x, "must not contain duplicate items (items %zu and %zu are equal)", a, b);
		ok = false;
	}
	return ok;
}

/* Finds the schema of a property by name (binary search). */
static const struct prop *prop_find(const struct node *n, const char *key, size_t len)
{
	struct prop k = { .name = { key, len } };

	if (n->n_props == 0)
		return NULL;
	return bsearch(&k, n->props, n->n_props, sizeof(*n->props), prop_cmp);
}

/* True when the object has a member of that name. */
static bool has_member(const struct json *v, const struct name *name)
{
	for (size_t i = 0; i < v->u.obj.n; i++)
		if (name_eq(name, v->u.obj.members[i].key, v->u.obj.members[i].key_len))
			return true;
	return false;
}

/* Checks required properties, then every property against its schema. */
static bool validate_object(struct vctx *x, const struct node *n, const struct json *v)
{
	bool ok = true;

	for (size_t i = 0; i < n->n_required; i++) {
		if (has_member(v, &n->required[i]))
			continue;
		if (x->errs) {
			_cleanup_free_ char *shown = show_name(n->required[i].s, n->required[i].len);

			add_error(x, "missing required property '%s'", shown);
		}
		ok = false;
		if (!x->errs || x->stop)
			return false;
	}
	if (n->n_props == 0 && !n->additional)
		return ok;
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		const struct prop *p = prop_find(n, m->key, m->key_len);
		const struct node *sub = p ? p->schema : n->additional;
		bool good;

		if (!sub || sub->kind == NODE_TRUE)
			continue;
		path_push(x, m->key, m->key_len);
		if (sub->kind == NODE_FALSE) {
			if (x->errs) {
				_cleanup_free_ char *shown = show_name(m->key, m->key_len);

				add_error(x, "property '%s' is not allowed%s", shown,
					  !p && n->allowed_hint ? n->allowed_hint : "");
			}
			good = false;
		} else
			good = validate(x, sub, m->value);
		path_pop(x);
		if (!good) {
			ok = false;
			if (!x->errs || x->stop)
				return false;
		}
	}
	return ok;
}

/* Applies the keywords of one schema node. */
static bool validate_keywords(struct vctx *x, const struct node *n, const struct json *v)
{
	bool ok = true;

#define CHECK(cond)                                             \
	do {                                                    \
		if (!(cond)) {                                  \
			ok = false;                             \
			if (!x->errs || x->stop)                \
				return false;                   \
		}                                               \
	} while (0)

	if (n->types && !(n->types & type_bits(v))) {
		add_error(x, "expected %s, got %s", n->types_text, kind_name(v));
		CHECK(false);
	}
	switch (v->type) {
	case JSON_NUMBER:
		CHECK(validate_number(x, n, v));
		break;
	case JSON_STRING:
		CHECK(validate_string(x, n, v));
		break;
	case JSON_ARRAY:
		CHECK(validate_array(x, n, v));
		break;
	case JSON_OBJECT:
		CHECK(validate_object(x, n, v));
		break;
	default:
		break;
	}
	if (n->enum_v) {
		bool found = false;

		for (size_t i = 0; i < n->enum_v->u.arr.n && !found; i++)
			found = json_equal(n->enum_v->u.arr.items[i], v);
		if (!found)
			add_error(x, "must be one of: %s", n->enum_text);
		CHECK(found);
	}
	if (n->const_v && !json_equal(n->const_v, v)) {
		add_error(x, "must be equal to %s", n->const_text);
		CHECK(false);
	}
	for (size_t i = 0; i < n->n_all; i++)
		CHECK(validate(x, n->all_of[i], v));
	if (n->n_any) {
		bool any = false;

		for (size_t i = 0; i < n->n_any && !any; i++)
			any = probe(x, n->any_of[i], v);
		if (x->stop)
			return false;
		if (!any)
			add_error(x, "must match at least one schema in anyOf");
		CHECK(any);
	}
	if (n->n_one) {
		unsigned matched = 0;

		for (size_t i = 0; i < n->n_one && matched < 2; i++)
			matched += probe(x, n->one_of[i], v);
		if (x->stop)
			return false;
		if (matched != 1)
			add_error(x, "must match exactly one schema in oneOf (matched %u%s)", matched,
				  matched > 1 ? " or more" : "");
		CHECK(matched == 1);
	}
	if (n->not) {
		bool matched = probe(x, n->not, v);

		if (x->stop)
			return false;
		if (matched)
			add_error(x, "must not match the schema in 'not'");
		CHECK(!matched);
	}
#undef CHECK
	return ok;
}

/* Counts the values of an instance (saturating at limit). */
static size_t count_values(const struct json *v, size_t limit, unsigned depth)
{
	size_t n = 1, k;

	if (depth > EVAL_DEPTH_MAX)
		return n;
	k = v->type == JSON_ARRAY ? v->u.arr.n : v->type == JSON_OBJECT ? v->u.obj.n : 0;
	for (size_t i = 0; i < k && n < limit; i++)
		n += count_values(v->type == JSON_ARRAY ? v->u.arr.items[i] : v->u.obj.members[i].value,
				  limit - n, depth + 1);
	return n;
}

/* The work allowed grows with the size of the instance: once, when the
 * base budget is spent (so small validations never count). */
static bool grow_budget(struct vctx *x)
{
	if (x->budget_grown)
		return false;
	x->budget_grown = true;
	x->budget += STEPS_PER_VALUE * count_values(x->instance, SIZE_MAX / (2 * STEPS_PER_VALUE), 0);
	return x->steps <= x->budget;
}

/* Validates v against node n, within the limits. */
static bool validate(struct vctx *x, const struct node *n, const struct json *v)
{
	bool ok;

	if (x->stop)
		return false;
	if (n->kind == NODE_TRUE)
		return true;
	if (n->kind == NODE_FALSE) {
		add_error(x, "no value is allowed here");
		return false;
	}
	if (++x->steps > x->budget && !grow_budget(x)) {
		hit_limit(x, "validation stopped: the schema is too expensive for this value");
		return false;
	}
	if (x->depth >= EVAL_DEPTH_MAX) {
		hit_limit(x, "validation stopped: schemas nested too deeply for this value");
		return false;
	}
	if (n->ref) {
		if (x->ref_depth >= REF_DEPTH_MAX) {
			hit_limit(x, "validation stopped: $ref recursion deeper than 256 levels");
			return false;
		}
		x->ref_depth++;
		x->depth++;
		ok = validate(x, n->ref, v);
		x->depth--;
		x->ref_depth--;
		return ok;
	}
	if (!n->checks)
		return true;
	x->depth++;
	ok = validate_keywords(x, n, v);
	x->depth--;
	return ok;
}

bool schema_validate(const struct schema *s, const struct json *instance, struct schema_errors *errs)
{
	struct vctx x = {
		.s = s,
		.instance = instance,
		.errs = errs,
		.budget = STEPS_BASE,
		.regex_budget = REGEX_STEPS,
	};
	bool ok;

	x.path = x.path_inline;
	x.cap_path = ELEMENTSOF(x.path_inline);
	ok = validate(&x, s->root, instance);
	if (x.limit_msg) {
		ok = false;
		if (errs)
			errors_append(errs, TAKE_PTR(x.limit_path), TAKE_PTR(x.limit_msg));
	}
	free(x.limit_path);
	free(x.limit_msg);
	if (x.path != x.path_inline)
		free(x.path);
	return ok;
}

void schema_errors_clear(struct schema_errors *errs)
{
	if (!errs)
		return;
	for (size_t i = 0; i < errs->n; i++) {
		free(errs->v[i].path);
		free(errs->v[i].message);
	}
	free(errs->v);
	errs->v = NULL;
	errs->n = 0;
}
