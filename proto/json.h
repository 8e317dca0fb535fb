/* SPDX-License-Identifier: MIT */
/*
 * JSON values: a depth-limited parser built on yajl's callback API, the tree
 * it builds (every node of one text lives in one arena owned by a refcounted
 * json_doc, so freeing is never recursive), comparison and canonical form,
 * and a generator that writes into a struct buf with UTF-8 validation on.
 *
 * yajl stays behind this header: nothing outside proto/ includes it.
 */
#ifndef TC_JSON_H
#define TC_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/base/buf.h"
#include "proto/utf8.h"

enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

struct json;

struct json_member {
	const char *key;	/* NUL-terminated; may contain NUL, see key_len */
	size_t key_len;
	struct json *value;
};

struct json {
	enum json_type type;
	/* Where the value's text stands in the parsed source (byte offset and
	 * length): used to echo request ids byte for byte and to point at
	 * line:column in config errors. Zero for built values. */
	uint32_t off;
	uint32_t len;
	union {
		bool b;
		struct {
			const char *raw;	/* the number's text as written */
			size_t raw_len;
			double d;		/* its value */
			int64_t i;		/* valid when is_int */
			bool is_int;		/* integral value that fits int64 (1, 1.0, 1e2) */
		} num;
		struct {
			const char *s;		/* NUL-terminated, may contain NUL */
			size_t len;
		} str;
		struct {
			struct json **items;
			size_t n;
		} arr;
		struct {
			struct json_member *members;	/* in input order */
			size_t n;
		} obj;
	} u;
};

struct json_doc;

/* What went wrong in json_parse, for the caller's message. */
enum json_error {
	JSON_ERR_SYNTAX = 1,	/* not JSON (or invalid UTF-8) */
	JSON_ERR_DEPTH,		/* nesting deeper than allowed */
	JSON_ERR_DUPKEY,	/* an object repeats a key */
	JSON_ERR_EMPTY,		/* nothing but white space */
};

struct json_err {
	enum json_error code;
	size_t offset;		/* byte offset of the problem in the text */
	char msg[160];		/* "parse error: ...", without the offset */
};

enum {
	JSON_ALLOW_COMMENTS = 1u << 0,	/* config files: // and block comments */
};

/*
 * Parses one JSON text. max_depth counts containers: "[[1]]" has depth 2;
 * 0 means the default of 64. Returns 0 and a new document in *ret, or a
 * negative errno (-EINVAL) with *err filled. Trailing garbage is an error.
 */
int json_parse(const char *text, size_t len, unsigned flags, unsigned max_depth,
	       struct json_doc **ret, struct json_err *err);
struct json *json_doc_root(const struct json_doc *doc);
/* The source text the document was parsed from (kept inside the doc). */
const char *json_doc_text(const struct json_doc *doc);
struct json_doc *json_doc_ref(struct json_doc *doc);
/* Drops one reference; frees at zero. Accepts NULL; returns NULL. */
struct json_doc *json_doc_unref(struct json_doc *doc);
/* For _cleanup_(json_doc_unrefp). */
DEFINE_CLEANUP_FUNC(struct json_doc, json_doc_unref)

/* Accessors: all accept NULL and return NULL/false when the type differs. */
const struct json *json_get(const struct json *obj, const char *key);
const char *json_str(const struct json *v);
/* Whether d is finite with no fraction (no libm needed). */
bool json_double_integral(double d);
bool json_is_int(const struct json *v);
/* Stores an integral value (1, 1.0, 1e2) that fits int64. */
bool json_get_int(const struct json *v, int64_t *ret);
bool json_is_true(const struct json *v);
const char *json_type_name(enum json_type t);
/* The instance type for messages: "integer" for integral numbers. */
const char *json_kind_name(const struct json *v);

/* Deep equality: numbers by value, objects ignoring key order. */
bool json_equal(const struct json *a, const struct json *b);
/* Writes a canonical text: objects with keys sorted by bytes, no spaces,
 * numbers by value (integral ones as integers, others as %.17g). Used to
 * compare arguments for idempotency. */
void json_canonical(const struct json *v, struct buf *out);
/* Line and column (both from 1) of a byte offset in text. */
void json_line_col(const char *text, size_t len, size_t off, unsigned *line, unsigned *col);


/*
 * The generator. Appends compact JSON (never a raw newline) to out. Strings
 * that are not valid UTF-8 are written with U+FFFD replacements, so
 * generation cannot fail on tool output.
 */
struct jgen;

struct jgen *jgen_new(struct buf *out);
/* Frees the generator (accepts NULL; returns NULL). */
struct jgen *jgen_free(struct jgen *g);
/* Starts a new top-level value (after one was completed). */
void jgen_reset(struct jgen *g);
void jgen_obj_open(struct jgen *g);
void jgen_obj_close(struct jgen *g);
void jgen_arr_open(struct jgen *g);
void jgen_arr_close(struct jgen *g);
void jgen_key(struct jgen *g, const char *key);
void jgen_str(struct jgen *g, const char *s);	/* NULL writes null */
void jgen_strn(struct jgen *g, const char *s, size_t n);
/* Writes a string value the caller knows to be valid UTF-8 (a file's text
 * checked once): quoted straight into the output, not checked again. */
void jgen_strn_valid(struct jgen *g, const char *s, size_t n);
void jgen_int(struct jgen *g, int64_t v);
void jgen_double(struct jgen *g, double v);
void jgen_bool(struct jgen *g, bool v);
void jgen_null(struct jgen *g);
/* Inserts already-valid JSON text as one value (ids, cached results). */
void jgen_raw(struct jgen *g, const char *json, size_t n);
/* Writes a parsed value. */
void jgen_value(struct jgen *g, const struct json *v);

/* key: value shorthands for objects. */
void jgen_kv_str(struct jgen *g, const char *key, const char *s);
void jgen_kv_int(struct jgen *g, const char *key, int64_t v);
void jgen_kv_bool(struct jgen *g, const char *key, bool v);
void jgen_kv_raw(struct jgen *g, const char *key, const char *json, size_t n);

/* Appends a JSON string literal (quotes included) for s to out. */
void json_quote(struct buf *out, const char *s, size_t n);
/* The same for text of any origin (tool output, client strings): strict
 * UTF-8 as it is, anything else with U+FFFD replacements. */
void json_quote_utf8(struct buf *out, const char *s, size_t n);

#endif
