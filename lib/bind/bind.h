/* SPDX-License-Identifier: MIT */
/*
 * The strict JSON binder: every file the daemon reads (the config, tool
 * files, provider files, and their sandbox, hooks, confirmation and store
 * sections) is checked against a table of keys (struct bind_field), each
 * naming a member of a C struct by offset and how its value is checked.
 * An unknown key, a missing required key, a value of the wrong type or out
 * of range is reported as "FILE:LINE:COL: json.path: message", and checking
 * goes on: one run collects every mistake of a file (at most
 * BIND_MAX_ERRORS written out, the others counted).
 *
 * A value the table does not know how to check (a policy, an argv
 * template) goes to a parser of its own through BIND_CUSTOM: it gets the
 * binder, the value's JSON path for its messages and the value itself, and
 * reports with bind_fail() at the value's offset.
 */
#ifndef TC_BIND_H
#define TC_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/base/util.h"
#include "proto/json.h"

/* One text being checked, and what was found wrong in it. */
struct bind {
	const char *name;	/* the file's name, for messages */
	const char *text;	/* NULL: messages carry no FILE:LINE:COL */
	size_t len;
	const char *base_dir;	/* paths: NULL leaves relative ones as written */
	char *err;		/* every error found, one a line (at most BIND_MAX_ERRORS) */
	unsigned n_errors;	/* errors found, also those beyond the bound */
};

/* Errors of one file written out; the others are counted. */
#define BIND_MAX_ERRORS 50

enum bind_kind {
	BIND_U32,	/* uint32_t in [min, max] */
	BIND_U64,	/* uint64_t in [min, max] */
	BIND_INT,	/* int in [min, max] */
	BIND_BOOL,	/* bool */
	BIND_TRISTATE,	/* int: 1 for true, 0 for false (unset stays as it was) */
	BIND_STRING,	/* char *, a copy; non-empty unless min is 0, at most max bytes when max */
	BIND_PATH,	/* char *, resolved against base_dir */
	BIND_PATH_NULL,	/* char *, resolved, or null */
	BIND_PATHS,	/* char ** and size_t at off_n, resolved */
	BIND_NAME,	/* int (or bool, for two names): the index of the string in names */
	BIND_VALUE,	/* const struct json *: kept for a later pass */
	BIND_OBJECT,	/* an object checked against the table section, at off */
	BIND_CUSTOM,	/* parse(binder, path, value, the member at off) */
};

struct bind_field {
	const char *key;
	enum bind_kind kind;
	bool required;			/* "missing" when absent */
	size_t off;
	size_t off_n;			/* BIND_PATHS: the count */
	uint64_t min, max;
	const char *const *names;	/* BIND_NAME: NULL-terminated */
	size_t size;			/* BIND_NAME: of the member */
	const struct bind_field *section;	/* BIND_OBJECT: NULL-key terminated */
	const char *unknown;		/* BIND_OBJECT: message for an unknown key */
	int (*parse)(struct bind *b, const char *path, const struct json *v, void *at);
};

/* Designated initializers of the table of a struct T. */
#define BIND_F(T, m) offsetof(T, m)
#define B_U32(T, k, m, lo, hi) { .key = k, .kind = BIND_U32, .off = BIND_F(T, m), .min = lo, .max = hi }
#define B_U64(T, k, m, lo, hi) { .key = k, .kind = BIND_U64, .off = BIND_F(T, m), .min = lo, .max = hi }
#define B_INT(T, k, m, lo, hi) { .key = k, .kind = BIND_INT, .off = BIND_F(T, m), .min = lo, .max = hi }
#define B_BOOL(T, k, m) { .key = k, .kind = BIND_BOOL, .off = BIND_F(T, m) }
#define B_TRISTATE(T, k, m) { .key = k, .kind = BIND_TRISTATE, .off = BIND_F(T, m) }
#define B_STRING(T, k, m, lo, hi) { .key = k, .kind = BIND_STRING, .off = BIND_F(T, m), .min = lo, .max = hi }
#define B_PATH(T, k, m) { .key = k, .kind = BIND_PATH, .off = BIND_F(T, m) }
#define B_PATH_NULL(T, k, m) { .key = k, .kind = BIND_PATH_NULL, .off = BIND_F(T, m) }
#define B_PATHS(T, k, m, n) { .key = k, .kind = BIND_PATHS, .off = BIND_F(T, m), .off_n = BIND_F(T, n) }
#define B_NAME(T, k, m, list) \
	{ .key = k, .kind = BIND_NAME, .off = BIND_F(T, m), .names = list, .size = sizeof(((T *)0)->m) }
#define B_VALUE(T, k, m) { .key = k, .kind = BIND_VALUE, .off = BIND_F(T, m) }
#define B_OBJECT(T, k, m, t, u) { .key = k, .kind = BIND_OBJECT, .off = BIND_F(T, m), .section = t, .unknown = u }
#define B_CUSTOM(T, k, m, f) { .key = k, .kind = BIND_CUSTOM, .off = BIND_F(T, m), .parse = f }
/* A section or parser over the whole struct (offset 0). */
#define B_SECTION(k, t, u) { .key = k, .kind = BIND_OBJECT, .section = t, .unknown = u }
#define B_WHOLE(k, f) { .key = k, .kind = BIND_CUSTOM, .parse = f }

/* As the unknown message of a section: "unknown key (known: a, b, c)". */
extern const char bind_list_known[];

/*
 * Checks the object v against fields and stores what it holds into obj
 * (members not named keep their defaults). path names v in messages
 * (NULL for the top level). Returns 0, or -EINVAL when anything was wrong,
 * having recorded every error in b.
 */
int bind_object(struct bind *b, const char *path, const struct json *v, const struct bind_field *fields,
		const char *unknown, void *obj);

/*
 * Checks an object of free keys (tool names, classes, variables): each
 * member goes to each() with its path and index, and checking goes on past
 * a wrong one. At most max members (0: any). Returns 0 or -EINVAL.
 */
int bind_members(struct bind *b, const char *path, const struct json *v, size_t max,
		 int (*each)(struct bind *b, const char *path, const struct json_member *m, size_t i, void *arg),
		 void *arg);

/* Checks an object of NAME: value strings (an environment; at most max
 * variables) into a NULL-terminated array of "NAME=value". */
int bind_want_env(struct bind *b, const char *path, const struct json *v, size_t max, char ***ret,
		  size_t *ret_n);

/* Records an error located at byte off of the text, path its JSON path
 * (NULL: none). Returns -EINVAL. */
int bind_fail(struct bind *b, size_t off, const char *path, const char *fmt, ...) PRINTF(4, 5);
/* Takes every error recorded, with a line counting those left out (NULL
 * when none), and starts the count again. */
char *bind_errors(struct bind *b);
/*
 * Where a member's key starts: the tree keeps only the value's offset, so
 * walk back over ':' and white space to the key's quotes. A comment between
 * key and value defeats this; the value's offset is then close enough.
 */
size_t bind_key_offset(const struct bind *b, const struct json *value);
/* The path of a member, its key made printable (keys come from the file
 * and end up on a terminal or in the journal). */
char *bind_key_path(const char *parent, const struct json_member *m);
/* The path of an array's item: "parent[i]". */
char *bind_index_path(const char *parent, size_t i);
/* True when a key is a plain C string equal to s. */
bool bind_key_is(const struct json_member *m, const char *s);
/* True when a key is not empty and holds no NUL byte (it names a tool). */
bool bind_key_plain(const struct json_member *m);
/* The type of a value as messages name it ("integer", "string"). */
const char *bind_got(const struct json *v);

/* Checks an integer in [min, max]. */
int bind_want_uint(struct bind *b, const char *path, const struct json *v, uint64_t min, uint64_t max,
		   uint64_t *ret);
/* Checks true or false. */
int bind_want_bool(struct bind *b, const char *path, const struct json *v, bool *ret);
/* Checks a non-empty string without NUL bytes. */
int bind_want_string(struct bind *b, const char *path, const struct json *v, const char **ret);
/* Checks a path and resolves it against the file's directory. */
int bind_want_path(struct bind *b, const char *path, const struct json *v, char **ret);
/* Checks an array of strings (paths when resolve); NULL-terminated. */
int bind_want_strv(struct bind *b, const char *path, const struct json *v, bool resolve, char ***ret,
		   size_t *ret_n);
/* Checks that a value is an object. */
int bind_want_object(struct bind *b, const char *path, const struct json *v);
/* Checks one of the strings of names (NULL-terminated) and stores its
 * index: 'expected "a", "b" or "c"'. */
int bind_want_name(struct bind *b, const char *path, const struct json *v, const char *const *names, int *ret);

/* A path made absolute against base_dir when relative (and base_dir is
 * not NULL), "." components and repeated and trailing slashes removed;
 * ".." stays for the kernel (a component may be a symbolic link). */
char *bind_resolve_path(const char *base_dir, const char *path);
void bind_strv_free(char **v, size_t n);

#endif
