/* SPDX-License-Identifier: MIT */
/*
 * The JSON Schema subset validator (Draft 7 keywords listed in the
 * contract, §8). schema_compile() checks a schema at registration and
 * refuses any keyword outside the subset; schema_validate() checks an
 * instance at every call and reports every error with a JSON-pointer path.
 */
#ifndef TC_SCHEMA_H
#define TC_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

struct json;
struct schema;

struct schema_error {
	char *path;		/* JSON pointer into the instance: "" is the root, "/a/0" */
	char *message;		/* "expected string, got number" */
};

struct schema_errors {
	struct schema_error *v;
	size_t n;
};

/*
 * Compiles the schema given as JSON text. Returns 0, or -EINVAL with a
 * message in *ret_err naming where the schema is wrong ("/properties/x:
 * unsupported keyword 'patternProperties'").
 */
int schema_compile_text(const char *text, size_t len, struct schema **ret, char **ret_err);
/* Same, from a parsed value (the schema copies what it keeps). */
int schema_compile(const struct json *root, struct schema **ret, char **ret_err);
/* Accepts NULL; returns NULL. */
struct schema *schema_free(struct schema *s);
/* True when valid; otherwise appends every error to errs (if not NULL). */
bool schema_validate(const struct schema *s, const struct json *instance, struct schema_errors *errs);
void schema_errors_clear(struct schema_errors *errs);

#endif
