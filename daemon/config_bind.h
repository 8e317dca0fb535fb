/* SPDX-License-Identifier: MIT */
/*
 * The generic binder of the config file: a table of keys per section
 * (struct field), each naming a member of struct config and how to check
 * its value; one range check for numbers, one resolver for paths, and one
 * function that prefixes every complaint with FILE:LINE:COL.
 */
#ifndef TC_CONFIG_BIND_H
#define TC_CONFIG_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/json.h"
#include "proto/base/util.h"

/* The binder stores into it by offsets (CFG); only daemon/config.h, which
 * includes this header, knows its members. */
struct config;

/*
 * Returns path made absolute against base_dir when it is relative (and
 * base_dir is not NULL), with "." components and repeated and trailing
 * slashes removed; ".." stays for the kernel to resolve (a component may
 * be a symbolic link). Always a new string.
 */
char *config_resolve_path(const char *base_dir, const char *path);

struct cfg_parse {
	const char *name;	/* the file's name, for messages */
	const char *text;
	size_t len;
	const char *base_dir;	/* NULL: leave relative paths as written */
	char *err;		/* every error found, one a line (at most CFG_MAX_ERRORS) */
	unsigned n_errors;	/* errors found, also those beyond the bound */
};

/* Errors of one file written out; the others are counted. */
#define CFG_MAX_ERRORS 50

enum field_kind {
	F_U32,		/* uint32_t in [min, max] */
	F_U64,		/* uint64_t in [min, max] */
	F_PATH,		/* char *, resolved */
	F_PATH_NULL,	/* char *, resolved, or null */
	F_PATHS,	/* char ** and size_t at off_n, resolved */
	F_SECTION,	/* an object checked against another table */
	F_CUSTOM,
};

struct field {
	const char *key;
	enum field_kind kind;
	size_t off;
	size_t off_n;
	uint64_t min, max;
	const struct field *section;	/* NULL-key terminated */
	const char *unknown;		/* F_SECTION: message for an unknown key */
	int (*parse)(struct cfg_parse *p, const char *key, const struct json *v, struct config *c);
};

#define CFG(m) offsetof(struct config, m)
#define U32(k, m, lo, hi) { .key = k, .kind = F_U32, .off = CFG(m), .min = lo, .max = hi }
#define U64(k, m, lo, hi) { .key = k, .kind = F_U64, .off = CFG(m), .min = lo, .max = hi }
#define PATH(k, m) { .key = k, .kind = F_PATH, .off = CFG(m) }
#define PATH_NULL(k, m) { .key = k, .kind = F_PATH_NULL, .off = CFG(m) }
#define PATHS(k, m, n) { .key = k, .kind = F_PATHS, .off = CFG(m), .off_n = CFG(n) }
#define SECTION(k, t, u) { .key = k, .kind = F_SECTION, .section = t, .unknown = u }
#define CUSTOM(k, f) { .key = k, .kind = F_CUSTOM, .parse = f }

#define MS_MAX UINT32_MAX
#define GIB (UINT64_C(1) << 30)

/* Records an error, located at byte off of the text (a section goes on
 * with its next key, so that one run finds every mistake). Returns
 * -EINVAL. */
int cfg_fail(struct cfg_parse *p, size_t off, const char *key, const char *fmt, ...) PRINTF(4, 5);
/*
 * Finds where a member's key starts: the tree keeps only the value's
 * offset, so walk back over ':' and white space to the key's closing quote,
 * then to its opening quote. A comment between key and value defeats
 * this; the value's offset is then close enough.
 */
size_t cfg_key_offset(const struct cfg_parse *p, const struct json *value);
/* Appends a key to a dotted path, made printable (keys come from the file
 * and end up on a terminal or in the journal). */
char *cfg_key_path(const char *parent, const struct json_member *m);
/* True when a key is a plain C string equal to s. */
bool cfg_key_is(const struct json_member *m, const char *s);
/* True when a key holds no NUL byte (it names a tool or a class). */
bool cfg_key_plain(const struct json_member *m);
/* The type of a value as messages name it ("integer", "string"). */
const char *cfg_got(const struct json *v);
/* Checks an integer in [min, max]. */
int cfg_want_uint(struct cfg_parse *p, const char *key, const struct json *v,
		     uint64_t min, uint64_t max, uint64_t *ret);
/* Checks a non-empty string without NUL bytes. */
int cfg_want_string(struct cfg_parse *p, const char *key, const struct json *v, const char **ret);
/* Checks a path and resolves it against the file's directory. */
int cfg_want_path(struct cfg_parse *p, const char *key, const struct json *v, char **ret);
/* Checks an array of strings (paths when resolve). */
int cfg_want_strv(struct cfg_parse *p, const char *key, const struct json *v, bool resolve,
		     char ***ret, size_t *ret_n);
/* Checks that a value is an object. */
int cfg_want_object(struct cfg_parse *p, const char *key, const struct json *v);
/* Checks an object against a table of keys. */
int cfg_bind_section(struct cfg_parse *p, const char *key, const struct json *v,
		     const struct field *fields, const char *unknown, struct config *c);
void cfg_strv_free(char **v, size_t n);

#endif
