/* SPDX-License-Identifier: MIT */
/*
 * Tests of the JSON Schema subset validator (lib/schema_*.c): the official
 * JSON-Schema-Test-Suite for Draft 7 (Debian's json-schema-test-suite), then
 * our own cases: what is refused at compile time and with which message,
 * error paths and messages, all-errors reporting, integers, Unicode
 * lengths, ECMA-262 patterns (lib/regex*.c), $ref resolution and
 * cycles, and the bounds on deep or expensive validations.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/schema/schema.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"

#define SUITE_DIR "/usr/share/json-schema-test-suite/tests/draft7"

/* ------------------------------------------------------------------------
 * Helpers.
 */

static struct schema *compile_ok(const char *text)
{
	struct schema *s = NULL;
	char *err = NULL;
	int r = schema_compile_text(text, strlen(text), &s, &err);

	ck_assert_msg(r == 0, "schema %s should compile, got: %s", text, err ? err : "(no message)");
	ck_assert_ptr_nonnull(s);
	free(err);
	return s;
}

/* Asserts that the schema is refused with exactly this message. */
static void refused(const char *text, const char *message)
{
	struct schema *s = NULL;
	char *err = NULL;
	int r = schema_compile_text(text, strlen(text), &s, &err);

	ck_assert_msg(r == -EINVAL, "schema %s should be refused with \"%s\"", text, message);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(str_eq(err, message), "schema %s: expected \"%s\", got \"%s\"", text, message, err);
	free(err);
}

/* Asserts that the schema is refused with a message containing needle. */
static void refused_with(const char *text, const char *needle)
{
	struct schema *s = NULL;
	char *err = NULL;
	int r = schema_compile_text(text, strlen(text), &s, &err);

	ck_assert_msg(r == -EINVAL, "schema %s should be refused (%s)", text, needle);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, needle), "schema %s: expected a message with \"%s\", got \"%s\"", text,
		      needle, err);
	free(err);
}

static struct json_doc *parse(const char *text)
{
	struct json_doc *doc = NULL;
	struct json_err jerr = {};
	int r = json_parse(text, strlen(text), 0, 0, &doc, &jerr);

	ck_assert_msg(r == 0, "test instance %s does not parse: %s", text, jerr.msg);
	return doc;
}

/* Validates both ways (collecting and not) and checks they agree. */
static bool validate_text(const struct schema *s, const char *instance, struct schema_errors *errs)
{
	struct json_doc *doc = parse(instance);
	bool quick = schema_validate(s, json_doc_root(doc), NULL);
	bool full = schema_validate(s, json_doc_root(doc), errs);

	ck_assert_msg(quick == full, "%s: verdicts differ with and without errors", instance);
	ck_assert_msg(full == (errs->n == 0), "%s: verdict %d but %zu errors", instance, full, errs->n);
	json_doc_unref(doc);
	return full;
}

static bool matches(const char *schema, const char *instance)
{
	struct schema *s = compile_ok(schema);
	struct schema_errors errs = {};
	bool ok = validate_text(s, instance, &errs);

	schema_errors_clear(&errs);
	schema_free(s);
	return ok;
}

#define assert_valid(schema, instance) \
	ck_assert_msg(matches(schema, instance), "%s should accept %s", schema, instance)
#define assert_invalid(schema, instance) \
	ck_assert_msg(!matches(schema, instance), "%s should refuse %s", schema, instance)

/* Asserts the exact list of errors: path, message, path, message, ..., NULL. */
static void expect_errors(const char *schema, const char *instance, ...)
{
	struct schema *s = compile_ok(schema);
	struct schema_errors errs = {};
	size_t i = 0;
	va_list ap;

	validate_text(s, instance, &errs);
	va_start(ap, instance);
	for (;;) {
		const char *path = va_arg(ap, const char *), *msg;

		if (!path)
			break;
		msg = va_arg(ap, const char *);
		ck_assert_msg(i < errs.n, "%s against %s: missing error %zu (%s: %s)", instance, schema, i,
			      path, msg);
		ck_assert_msg(str_eq(errs.v[i].path, path) && str_eq(errs.v[i].message, msg),
			      "%s against %s: error %zu is \"%s: %s\", expected \"%s: %s\"", instance, schema,
			      i, errs.v[i].path, errs.v[i].message, path, msg);
		i++;
	}
	va_end(ap);
	ck_assert_msg(i == errs.n, "%s against %s: %zu errors, expected %zu (first extra: %s: %s)", instance,
		      schema, errs.n, i, errs.v[i].path, errs.v[i].message);
	schema_errors_clear(&errs);
	schema_free(s);
}

static char *read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "re");
	struct buf b = {};
	char chunk[65536];
	size_t n;

	ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(&b, chunk, n);
	fclose(f);
	*ret_len = b.len;
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/* ------------------------------------------------------------------------
 * The official test suite.
 */

/* For each file of a supported keyword: how many groups at least must
 * compile and pass (all of them but those using unsupported keywords or
 * remote references, as counted with the suite of Debian 12). */
static const struct {
	const char *file;
	unsigned min_groups;
} supported_files[] = {
	{ "type.json", 8 },
	{ "properties.json", 2 },
	{ "required.json", 3 },
	{ "additionalProperties.json", 3 },
	{ "items.json", 5 },
	{ "enum.json", 3 },
	{ "const.json", 4 },
	{ "minimum.json", 1 },
	{ "maximum.json", 1 },
	{ "exclusiveMinimum.json", 1 },
	{ "exclusiveMaximum.json", 1 },
	{ "minLength.json", 1 },
	{ "maxLength.json", 1 },
	{ "pattern.json", 2 },
	{ "minItems.json", 1 },
	{ "maxItems.json", 1 },
	{ "uniqueItems.json", 1 },
	{ "anyOf.json", 6 },
	{ "oneOf.json", 7 },
	{ "allOf.json", 6 },
	{ "not.json", 6 },
	{ "ref.json", 8 },
	{ "definitions.json", 0 },
	{ "boolean_schema.json", 2 },
	{ "default.json", 2 },
};

struct suite_counts {
	unsigned groups, compiled, refused, tests;
};

static int name_sort(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs one file of the suite; every group that compiles must pass. */
static void run_suite_file(const char *dir, const char *file, struct suite_counts *c)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
	_cleanup_free_ char *text = NULL;
	struct json_doc *doc = NULL;
	struct json_err jerr = {};
	const struct json *groups;
	size_t len;

	text = read_file(path, &len);
	ck_assert_msg(json_parse(text, len, 0, 128, &doc, &jerr) == 0, "%s: %s", path, jerr.msg);
	groups = json_doc_root(doc);
	ck_assert_int_eq(groups->type, JSON_ARRAY);
	for (size_t g = 0; g < groups->u.arr.n; g++) {
		const struct json *group = groups->u.arr.items[g];
		const char *desc = json_str(json_get(group, "description"));
		const struct json *tests = json_get(group, "tests");
		struct schema *s = NULL;
		char *err = NULL;

		c->groups++;
		if (schema_compile(json_get(group, "schema"), &s, &err) < 0) {
			/* Only what the subset leaves out may be refused. */
			ck_assert_msg(err && (strstr(err, "unsupported keyword") ||
					      strstr(err, "is not a local reference")),
				      "%s: group \"%s\" refused for another reason: %s", file, desc,
				      err ? err : "(no message)");
			c->refused++;
			free(err);
			continue;
		}
		c->compiled++;
		for (size_t t = 0; t < tests->u.arr.n; t++) {
			const struct json *test = tests->u.arr.items[t];
			const struct json *data = json_get(test, "data");
			bool valid = json_is_true(json_get(test, "valid"));
			struct schema_errors errs = {};
			bool got = schema_validate(s, data, &errs);

			ck_assert_msg(got == valid, "%s: \"%s\" / \"%s\": expected %s, got %s (%s%s%s)", file,
				      desc, json_str(json_get(test, "description")),
				      valid ? "valid" : "invalid", got ? "valid" : "invalid",
				      errs.n ? errs.v[0].path : "", errs.n ? ": " : "",
				      errs.n ? errs.v[0].message : "");
			ck_assert_msg(got == (errs.n == 0), "%s: \"%s\": errors do not match the verdict",
				      file, desc);
			ck_assert_int_eq(schema_validate(s, data, NULL), got);
			schema_errors_clear(&errs);
			c->tests++;
		}
		schema_free(s);
	}
	json_doc_unref(doc);
}

START_TEST(official_suite)
{
	const char *dir = getenv("TC_SCHEMA_SUITE_DIR") ?: SUITE_DIR;
	struct suite_counts total = {};
	char **names = NULL;
	size_t n_names = 0;
	struct dirent *de;
	DIR *d = opendir(dir);

	ck_assert_msg(d != NULL,
		      "%s: %s. Install json-schema-test-suite (a declared dependency: "
		      "sh packaging/deps.sh, or apt-get install json-schema-test-suite)",
		      dir, strerror(errno));
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len > 5 && str_eq(de->d_name + len - 5, ".json")) {
			names = xreallocarray(names, n_names + 1, sizeof(*names));
			names[n_names++] = xstrdup(de->d_name);
		}
	}
	closedir(d);
	ck_assert_msg(n_names >= 30, "%s holds only %zu files: is json-schema-test-suite complete?", dir,
		      n_names);
	qsort(names, n_names, sizeof(*names), name_sort);

	for (size_t i = 0; i < ELEMENTSOF(supported_files); i++) {
		struct suite_counts c = {};
		bool present = false;

		for (size_t k = 0; k < n_names; k++)
			present |= str_eq(names[k], supported_files[i].file);
		ck_assert_msg(present, "%s/%s is missing", dir, supported_files[i].file);
		run_suite_file(dir, supported_files[i].file, &c);
		printf("schema suite: %-26s %2u groups, %2u compiled and passed (%3u tests), %u refused\n",
		       supported_files[i].file, c.groups, c.compiled, c.tests, c.refused);
		ck_assert_msg(c.compiled >= supported_files[i].min_groups,
			      "%s: only %u groups compiled, expected at least %u", supported_files[i].file,
			      c.compiled, supported_files[i].min_groups);
		total.groups += c.groups;
		total.compiled += c.compiled;
		total.refused += c.refused;
		total.tests += c.tests;
	}
	/* The other keywords' files: whatever compiles must pass too. */
	for (size_t k = 0; k < n_names; k++) {
		struct suite_counts c = {};
		bool supported = false;

		for (size_t i = 0; i < ELEMENTSOF(supported_files); i++)
			supported |= str_eq(names[k], supported_files[i].file);
		if (!supported) {
			run_suite_file(dir, names[k], &c);
			printf("schema suite: %-26s %2u groups, %2u compiled and passed (%3u tests), %u refused "
			       "(outside the subset)\n", names[k], c.groups, c.compiled, c.tests, c.refused);
			total.groups += c.groups;
			total.compiled += c.compiled;
			total.refused += c.refused;
			total.tests += c.tests;
		}
		free(names[k]);
	}
	free(names);
	printf("schema suite: %u groups, %u compiled and passed (%u tests), %u refused\n", total.groups,
	       total.compiled, total.tests, total.refused);
	ck_assert_uint_ge(total.compiled, 77);
	ck_assert_uint_ge(total.tests, 266);
}
END_TEST

/* ------------------------------------------------------------------------
 * Compile-time refusals.
 */

START_TEST(unsupported_keywords)
{
	static const char *const kws[] = {
		"patternProperties", "dependencies", "if", "then", "else", "contains",
		"propertyNames", "$id", "additionalItems", "multipleOf", "minProperties",
		"maxProperties", "contentMediaType", "contentEncoding", "readOnly", "id",
	};

	for (size_t i = 0; i < ELEMENTSOF(kws); i++) {
		_cleanup_free_ char *root = xasprintf("{\"%s\": {}}", kws[i]);
		_cleanup_free_ char *nested = xasprintf("{\"properties\": {\"x\": {\"%s\": {}}}}", kws[i]);
		_cleanup_free_ char *msg_root = xasprintf("(root): unsupported keyword '%s'", kws[i]);
		_cleanup_free_ char *msg_nested = xasprintf("/properties/x: unsupported keyword '%s'", kws[i]);

		refused(root, msg_root);
		refused(nested, msg_nested);
	}
	/* The location is a JSON pointer, escaped as RFC 6901 says. */
	refused("{\"items\": [{}, {\"type\": \"string\", \"if\": true}]}",
		"/items/1: unsupported keyword 'if'");
	refused("{\"definitions\": {\"a/b~c\": {\"anyOf\": [{\"contains\": {}}]}}}",
		"/definitions/a~1b~0c/anyOf/0: unsupported keyword 'contains'");
	refused("{\"not\": {\"additionalProperties\": {\"propertyNames\": {}}}}",
		"/not/additionalProperties: unsupported keyword 'propertyNames'");
	refused("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"additionalItems\": false}",
		"(root): unsupported keyword 'additionalItems'");
	/* Unknown words are not silently ignored either. */
	refused("{\"tpye\": \"string\"}", "(root): unsupported keyword 'tpye'");
}
END_TEST

START_TEST(names_and_data_are_not_keywords)
{
	/* Property and definition names are names. */
	assert_valid("{\"properties\": {\"if\": {\"type\": \"string\"}, \"patternProperties\": {},"
		     " \"$ref\": {\"type\": \"integer\"}}, \"required\": [\"if\"]}",
		     "{\"if\": \"x\", \"$ref\": 1}");
	assert_invalid("{\"properties\": {\"$ref\": {\"type\": \"integer\"}}}", "{\"$ref\": \"x\"}");
	assert_valid("{\"definitions\": {\"contains\": {\"type\": \"null\"}},"
		     " \"$ref\": \"#/definitions/contains\"}", "null");
	/* default, examples, const and enum hold data, not schemas. */
	assert_valid("{\"default\": {\"patternProperties\": 1}, \"examples\": [{\"if\": 2}],"
		     " \"title\": \"t\", \"description\": \"d\", \"format\": \"uri\","
		     " \"$comment\": \"c\", \"$schema\": \"http://json-schema.org/draft-07/schema#\"}",
		     "3");
	assert_valid("{\"const\": {\"if\": {\"then\": 1}}}", "{\"if\": {\"then\": 1.0}}");
	assert_valid("{\"enum\": [{\"additionalItems\": true}, 2]}", "{\"additionalItems\": true}");
	/* format is an annotation: not validated. */
	assert_valid("{\"type\": \"string\", \"format\": \"email\"}", "\"not an email\"");
}
END_TEST

START_TEST(malformed_schemas)
{
	refused("5", "(root): a schema must be an object or a boolean, not number");
	refused("{\"properties\": {\"a\": \"string\"}}",
		"/properties/a: a schema must be an object or a boolean, not string");
	refused("{\"items\": [1]}", "/items/0: a schema must be an object or a boolean, not number");
	refused_with("{\"type\": 5}", "(root): 'type' must be a type name");
	refused_with("{\"type\": []}", "(root): 'type' must be a type name");
	refused_with("{\"type\": \"int\"}", "(root): 'type': unknown type \"int\"");
	refused_with("{\"type\": [\"string\", 3]}", "unknown type 3");
	refused("{\"type\": [\"string\", \"string\"]}", "(root): 'type' lists 'string' twice");
	refused("{\"required\": \"a\"}", "(root): 'required' must be an array of property names");
	refused_with("{\"required\": [\"a\", 1]}", "(item 1 is not a string)");
	refused("{\"required\": [\"a\", \"b\", \"a\"]}", "(root): 'required' lists 'a' twice");
	refused("{\"minLength\": -1}", "(root): 'minLength' must be a non-negative integer, not -1");
	refused("{\"maxLength\": 1.5}", "(root): 'maxLength' must be a non-negative integer");
	refused("{\"minItems\": \"1\"}", "(root): 'minItems' must be a non-negative integer");
	refused("{\"maxItems\": null}", "(root): 'maxItems' must be a non-negative integer");
	refused("{\"maximum\": \"3\"}", "(root): 'maximum' must be a number");
	refused("{\"exclusiveMinimum\": true}",
		"(root): 'exclusiveMinimum' must be a number (the boolean form of Draft 4 is not supported)");
	refused("{\"pattern\": 5}", "(root): 'pattern' must be a string");
	refused("{\"enum\": []}", "(root): 'enum' must be a non-empty array of values");
	refused("{\"enum\": 1}", "(root): 'enum' must be a non-empty array of values");
	refused("{\"items\": []}", "(root): 'items' must be a schema or a non-empty array of schemas");
	refused("{\"allOf\": []}", "(root): 'allOf' must be a non-empty array of schemas");
	refused("{\"anyOf\": {}}", "(root): 'anyOf' must be a non-empty array of schemas");
	refused("{\"oneOf\": [true, 2]}", "/oneOf/1: a schema must be an object or a boolean, not number");
	refused("{\"not\": 5}", "/not: a schema must be an object or a boolean, not number");
	refused("{\"properties\": []}", "(root): 'properties' must be an object mapping names to schemas");
	refused("{\"additionalProperties\": \"no\"}",
		"/additionalProperties: a schema must be an object or a boolean, not string");
	refused("{\"uniqueItems\": 1}", "(root): 'uniqueItems' must be a boolean");
	refused("{\"title\": 5}", "(root): 'title' must be a string");
	refused("{\"description\": []}", "(root): 'description' must be a string");
	refused("{\"examples\": 5}", "(root): 'examples' must be an array");
	refused("{\"definitions\": []}", "(root): 'definitions' must be an object mapping names to schemas");
	refused("{\"$ref\": 5}", "(root): '$ref' must be a string");
	refused_with("{\"type\": \"string\"", "the schema is not valid JSON");
	refused_with("", "the schema is not valid JSON");
}
END_TEST

START_TEST(ref_resolution)
{
	refused("{\"properties\": {\"a\": {\"$ref\": \"#/definitions/missing\"}}}",
		"/properties/a: $ref '#/definitions/missing' points to nothing in this schema");
	refused_with("{\"$ref\": \"http://example.com/schema.json\"}",
		     "(root): $ref 'http://example.com/schema.json' is not a local reference");
	refused_with("{\"$ref\": \"other.json#/definitions/a\"}", "is not a local reference");
	refused_with("{\"$ref\": \"#foo\"}", "only JSON-pointer fragments are supported");
	refused("{\"properties\": {\"a\": {}}, \"$ref\": \"#/properties\"}",
		"(root): $ref '#/properties' does not point to a schema");
	refused("{\"enum\": [{\"a\": 1}], \"$ref\": \"#/enum/0\"}",
		"(root): $ref '#/enum/0' does not point to a schema");
	refused_with("{\"$ref\": \"#/definitions/a%zz\", \"definitions\": {}}", "invalid %-escape");
	refused_with("{\"$ref\": \"#/definitions/a~2\", \"definitions\": {}}", "points to nothing");

	/* "#", "#/definitions/x", pointer escapes and percent-encoding. */
	assert_valid("{\"properties\": {\"next\": {\"$ref\": \"#\"}}, \"additionalProperties\": false}",
		     "{\"next\": {\"next\": {}}}");
	assert_invalid("{\"properties\": {\"next\": {\"$ref\": \"#\"}}, \"additionalProperties\": false}",
		       "{\"next\": {\"next\": {\"x\": 1}}}");
	static const char escaped[] =
		"{\"definitions\": {\"a/b\": {\"type\": \"integer\"}, \"c~d\": {\"type\": \"string\"},"
		" \"e f\": {\"type\": \"null\"}, \"%\": {\"type\": \"boolean\"}},"
		" \"properties\": {\"slash\": {\"$ref\": \"#/definitions/a~1b\"},"
		" \"tilde\": {\"$ref\": \"#/definitions/c~0d\"},"
		" \"space\": {\"$ref\": \"#/definitions/e%20f\"},"
		" \"percent\": {\"$ref\": \"#/definitions/%25\"}}}";
	assert_valid(escaped, "{\"slash\": 1, \"tilde\": \"x\", \"space\": null, \"percent\": true}");
	assert_invalid(escaped, "{\"slash\": \"1\"}");
	assert_invalid(escaped, "{\"tilde\": 1}");
	assert_invalid(escaped, "{\"space\": 1}");
	assert_invalid(escaped, "{\"percent\": 1}");
	/* Any schema location, not only definitions. */
	assert_valid("{\"items\": [{\"type\": \"integer\"}, {\"$ref\": \"#/items/0\"}]}", "[1, 2]");
	assert_invalid("{\"items\": [{\"type\": \"integer\"}, {\"$ref\": \"#/items/0\"}]}", "[1, \"2\"]");
	/* Draft 7: keywords beside $ref are ignored. */
	assert_valid("{\"definitions\": {\"s\": {\"type\": \"string\"}},"
		     " \"properties\": {\"a\": {\"$ref\": \"#/definitions/s\", \"maxLength\": 1}}}",
		     "{\"a\": \"long\"}");
	/* ... but must still be within the subset. */
	refused("{\"definitions\": {\"s\": {}}, \"$ref\": \"#/definitions/s\", \"contains\": {}}",
		"(root): unsupported keyword 'contains'");
	/* Boolean targets. */
	assert_invalid("{\"definitions\": {\"no\": false}, \"$ref\": \"#/definitions/no\"}", "1");
	assert_valid("{\"definitions\": {\"yes\": true}, \"$ref\": \"#/definitions/yes\"}", "1");
}
END_TEST

START_TEST(ref_cycles)
{
	/* Cycles that come back to a schema without consuming input. */
	refused_with("{\"$ref\": \"#\"}", "$ref cycle that never consumes input");
	refused_with("{\"definitions\": {\"a\": {\"$ref\": \"#/definitions/b\"},"
		     " \"b\": {\"$ref\": \"#/definitions/a\"}}, \"type\": \"object\"}",
		     "$ref cycle that never consumes input");
	refused_with("{\"anyOf\": [{\"type\": \"string\"}, {\"$ref\": \"#\"}]}", "$ref cycle");
	refused_with("{\"definitions\": {\"a\": {\"allOf\": [{\"not\": {\"$ref\": \"#/definitions/a\"}}]}},"
		     " \"$ref\": \"#/definitions/a\"}", "$ref cycle");
	refused_with("{\"oneOf\": [{\"oneOf\": [{\"$ref\": \"#/oneOf/0\"}]}]}", "$ref cycle");

	/* Recursion that consumes input is fine: a tree. */
	static const char tree[] =
		"{\"definitions\": {\"node\": {\"type\": \"object\", \"required\": [\"value\"],"
		" \"properties\": {\"value\": {\"type\": \"number\"},"
		" \"children\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/definitions/node\"}}}}},"
		" \"$ref\": \"#/definitions/node\"}";
	assert_valid(tree, "{\"value\": 1, \"children\": [{\"value\": 2}, {\"value\": 3, \"children\": []}]}");
	expect_errors(tree, "{\"value\": 1, \"children\": [{\"value\": 2}, {\"children\": [{\"value\": \"x\"}]}]}",
		      "/children/1", "missing required property 'value'",
		      "/children/1/children/0/value", "expected number, got string", NULL);
}
END_TEST

/* ------------------------------------------------------------------------
 * Validation.
 */

START_TEST(messages_and_paths)
{
	static const char read_file[] =
		"{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\", \"minLength\": 1},"
		" \"offset\": {\"type\": \"integer\", \"minimum\": 0},"
		" \"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 1048576},"
		" \"encoding\": {\"enum\": [\"utf8\", \"base64\"]}},"
		" \"required\": [\"path\"], \"additionalProperties\": false}";

	assert_valid(read_file, "{\"path\": \"a.txt\", \"offset\": 0, \"limit\": 10, \"encoding\": \"utf8\"}");
	expect_errors(read_file, "{\"path\": 5}", "/path", "expected string, got number", NULL);
	expect_errors(read_file, "{}", "", "missing required property 'path'", NULL);
	expect_errors(read_file, "[]", "", "expected object, got array", NULL);
	expect_errors(read_file, "{\"path\": \"\"}", "/path", "must be at least 1 characters long", NULL);
	expect_errors(read_file, "{\"path\": \"a\", \"x\": 1}", "/x",
		      "property 'x' is not allowed (allowed: path, limit, offset, encoding)", NULL);
	expect_errors(read_file, "{\"path\": \"a\", \"offset\": -1, \"limit\": 2000000}",
		      "/offset", "must be >= 0", "/limit", "must be <= 1048576", NULL);
	expect_errors(read_file, "{\"path\": \"a\", \"offset\": 1.5}", "/offset",
		      "expected integer, got number", NULL);
	expect_errors(read_file, "{\"path\": \"a\", \"encoding\": \"utf-16\"}", "/encoding",
		      "must be one of: \"utf8\", \"base64\"", NULL);

	expect_errors("{\"type\": [\"string\", \"null\"]}", "1", "", "expected string or null, got number", NULL);
	expect_errors("{\"type\": [\"string\", \"array\", \"null\"]}", "true", "",
		      "expected string, array or null, got boolean", NULL);
	expect_errors("{\"exclusiveMinimum\": 0, \"exclusiveMaximum\": 10}", "0", "", "must be > 0", NULL);
	expect_errors("{\"exclusiveMinimum\": 0, \"exclusiveMaximum\": 10}", "10", "", "must be < 10", NULL);
	expect_errors("{\"maxLength\": 3}", "\"abcd\"", "", "must be at most 3 characters long", NULL);
	expect_errors("{\"pattern\": \"^[a-z]+$\"}", "\"ABC\"", "", "must match pattern '^[a-z]+$'", NULL);
	expect_errors("{\"minItems\": 2}", "[1]", "", "must have at least 2 items", NULL);
	expect_errors("{\"maxItems\": 1}", "[1, 2]", "", "must have at most 1 items", NULL);
	expect_errors("{\"uniqueItems\": true}", "[1, 2, 1.0]", "",
		      "must not contain duplicate items (items 0 and 2 are equal)", NULL);
	expect_errors("{\"const\": {\"a\": [1, \"x\"]}}", "{\"a\": [1]}", "",
		      "must be equal to {\"a\":[1,\"x\"]}", NULL);
	expect_errors("{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"integer\"}]}", "null", "",
		      "must match at least one schema in anyOf", NULL);
	expect_errors("{\"oneOf\": [{\"type\": \"integer\"}, {\"minimum\": 2}]}", "3", "",
		      "must match exactly one schema in oneOf (matched 2 or more)", NULL);
	expect_errors("{\"oneOf\": [{\"type\": \"integer\"}, {\"minimum\": 2}]}", "1.5", "",
		      "must match exactly one schema in oneOf (matched 0)", NULL);
	expect_errors("{\"not\": {\"type\": \"string\"}}", "\"s\"", "", "must not match the schema in 'not'", NULL);
	expect_errors("false", "1", "", "no value is allowed here", NULL);
	expect_errors("{\"items\": [true, false]}", "[1, 2]", "/1", "no value is allowed here", NULL);
	expect_errors("{\"properties\": {\"old\": false}}", "{\"old\": 1}", "/old", "property 'old' is not allowed",
		      NULL);
	expect_errors("{\"additionalProperties\": false}", "{\"a\": 1}", "/a",
		      "property 'a' is not allowed (no properties are allowed)", NULL);
	expect_errors("{\"additionalProperties\": {\"type\": \"string\"}}", "{\"a\": \"x\", \"b\": 2}", "/b",
		      "expected string, got number", NULL);

	/* Paths escape "~" and "/" (RFC 6901) and index arrays. */
	expect_errors("{\"additionalProperties\": {\"items\": {\"type\": \"string\"}}}",
		      "{\"a/b\": [\"x\", 1], \"c~d\": [2]}",
		      "/a~1b/1", "expected string, got number",
		      "/c~0d/0", "expected string, got number", NULL);
	{
		/* Very long keys are shortened in paths and messages. */
		struct buf b = {};
		_cleanup_free_ char *inst = NULL;
		struct schema *s = compile_ok("{\"additionalProperties\": false}");
		struct schema_errors errs = {};

		buf_puts(&b, "{\"");
		for (int i = 0; i < 100000; i++)
			buf_putc(&b, 'k');
		buf_puts(&b, "\": 1}");
		buf_putc(&b, '\0');
		inst = buf_steal(&b);
		ck_assert(!validate_text(s, inst, &errs));
		ck_assert_uint_eq(errs.n, 1);
		ck_assert_uint_eq(strlen(errs.v[0].path), 1 + 256 + 3);
		ck_assert(str_has_prefix(errs.v[0].path, "/kkk"));
		ck_assert(strstr(errs.v[0].path, "kk..."));
		ck_assert_uint_lt(strlen(errs.v[0].message), 200);
		schema_errors_clear(&errs);
		schema_free(s);
	}
	expect_errors("{\"items\": {\"properties\": {\"k\": {\"items\": [{\"type\": \"null\"}]}}}}",
		      "[{}, {\"k\": [null]}, {\"k\": [0]}]", "/2/k/0", "expected null, got number", NULL);
}
END_TEST

START_TEST(all_errors)
{
	static const char schema[] =
		"{\"type\": \"object\", \"required\": [\"a\", \"b\"],"
		" \"properties\": {\"c\": {\"type\": \"string\", \"minLength\": 5, \"pattern\": \"^x\"},"
		" \"d\": {\"items\": {\"type\": \"integer\"}}},"
		" \"allOf\": [{\"required\": [\"e\"]}, {\"properties\": {\"c\": {\"maxLength\": 1}}}]}";
	struct schema *s;
	struct schema_errors errs = {};
	struct json_doc *doc;
	_cleanup_free_ char *many = NULL;
	struct buf b = {};

	expect_errors(schema, "{\"c\": \"ab\", \"d\": [1, \"2\", 3, \"4\"]}",
		      "", "missing required property 'a'",
		      "", "missing required property 'b'",
		      "/c", "must be at least 5 characters long",
		      "/c", "must match pattern '^x'",
		      "/d/1", "expected integer, got string",
		      "/d/3", "expected integer, got string",
		      "", "missing required property 'e'",
		      "/c", "must be at most 1 characters long", NULL);

	/* Errors are bounded: the first 100, then a note. */
	buf_puts(&b, "[");
	for (int i = 0; i < 500; i++)
		buf_printf(&b, "%s\"%d\"", i ? "," : "", i);
	buf_puts(&b, "]");
	buf_putc(&b, '\0');
	many = buf_steal(&b);
	s = compile_ok("{\"items\": {\"type\": \"integer\"}}");
	ck_assert(!validate_text(s, many, &errs));
	ck_assert_uint_eq(errs.n, 101);
	ck_assert_str_eq(errs.v[0].path, "/0");
	ck_assert_str_eq(errs.v[99].path, "/99");
	ck_assert_str_eq(errs.v[100].message, "too many errors: only the first 100 are reported");
	schema_errors_clear(&errs);
	ck_assert_uint_eq(errs.n, 0);
	ck_assert_ptr_null(errs.v);
	/* Errors append to those already there. */
	doc = parse("[\"a\", 1]");
	ck_assert(!schema_validate(s, json_doc_root(doc), &errs));
	ck_assert(!schema_validate(s, json_doc_root(doc), &errs));
	ck_assert_uint_eq(errs.n, 2);
	ck_assert_str_eq(errs.v[1].path, "/0");
	schema_errors_clear(&errs);
	json_doc_unref(doc);
	schema_free(s);
}
END_TEST

START_TEST(integers_and_numbers)
{
	assert_valid("{\"type\": \"integer\"}", "1");
	assert_valid("{\"type\": \"integer\"}", "1.0");
	assert_valid("{\"type\": \"integer\"}", "-0");
	assert_valid("{\"type\": \"integer\"}", "1e2");
	assert_valid("{\"type\": \"integer\"}", "12345678910111213141516171819202122232425262728293031");
	assert_invalid("{\"type\": \"integer\"}", "1.5");
	assert_invalid("{\"type\": \"integer\"}", "\"1\"");
	assert_valid("{\"type\": \"number\"}", "1");
	assert_valid("{\"type\": \"number\"}", "1.5");
	assert_invalid("{\"type\": \"number\"}", "\"1.5\"");
	assert_invalid("{\"type\": \"number\"}", "true");
	/* Bounds compare values, exactly for large integers. */
	assert_valid("{\"minimum\": 1.0, \"maximum\": 1}", "1");
	assert_invalid("{\"maximum\": 9007199254740992}", "9007199254740993");
	assert_valid("{\"minimum\": 9007199254740992}", "9007199254740993");
	assert_valid("{\"maximum\": 18446744073709551615}", "18446744073709551600");
	assert_invalid("{\"minimum\": 0.5}", "0.25");
	/* Numeric keywords ignore other types; type is a separate check. */
	assert_valid("{\"minimum\": 5}", "\"3\"");
	assert_valid("{\"minLength\": 5.0, \"maxItems\": 1e1}", "\"12345\"");
	/* uniqueItems and enum compare numbers by value. */
	assert_invalid("{\"uniqueItems\": true}", "[1, 1.0]");
	assert_valid("{\"enum\": [1.0]}", "1");
	assert_valid("{\"const\": 100}", "1e2");
}
END_TEST

START_TEST(unicode_lengths)
{
	/* Code points, not bytes: "é" is 2 bytes, "中" 3, "😀" 4 (a surrogate
	 * pair in JSON text). */
	assert_valid("{\"maxLength\": 2}", "\"\xc3\xa9\xc3\xa9\"");
	assert_invalid("{\"maxLength\": 1}", "\"\xc3\xa9\xc3\xa9\"");
	assert_valid("{\"minLength\": 1, \"maxLength\": 1}", "\"\\ud83d\\ude00\"");
	assert_valid("{\"minLength\": 1, \"maxLength\": 1}", "\"\xf0\x9f\x98\x80\"");
	assert_invalid("{\"minLength\": 2}", "\"\xe4\xb8\xad\"");
	assert_valid("{\"minLength\": 2}", "\"\xe4\xb8\xad\xe4\xb8\xad\"");
	assert_invalid("{\"minLength\": 4}", "\"\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad\"");
	assert_valid("{\"maxLength\": 3}", "\"a\\u0000b\"");
	assert_valid("{\"maxLength\": 0}", "\"\"");
	expect_errors("{\"minLength\": 3}", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"", "",
		      "must be at least 3 characters long", NULL);
}
END_TEST

START_TEST(unique_items)
{
	struct buf b = {};
	_cleanup_free_ char *big = NULL;

	assert_valid("{\"uniqueItems\": true}", "[1, \"1\", [1], {\"a\": 1}, null, true, false]");
	assert_invalid("{\"uniqueItems\": true}", "[{\"a\": 1, \"b\": 2}, {\"b\": 2, \"a\": 1}]");
	assert_invalid("{\"uniqueItems\": true}", "[[1, {\"x\": null}], [1.0, {\"x\": null}]]");
	assert_valid("{\"uniqueItems\": true}", "[[1, 2], [2, 1]]");
	assert_valid("{\"uniqueItems\": false}", "[1, 1]");

	/* A long array is checked by hashing; the pair is still reported. */
	buf_puts(&b, "[");
	for (int i = 0; i < 3000; i++)
		buf_printf(&b, "%s{\"k\": [%d, \"v%d\"]}", i ? "," : "", i, i);
	buf_puts(&b, ", {\"k\": [1234.0, \"v1234\"]}]");
	buf_putc(&b, '\0');
	big = buf_steal(&b);
	expect_errors("{\"uniqueItems\": true}", big, "",
		      "must not contain duplicate items (items 1234 and 3000 are equal)", NULL);
}
END_TEST

START_TEST(boolean_and_empty_schemas)
{
	assert_valid("true", "{\"anything\": [1]}");
	assert_invalid("false", "null");
	assert_valid("{}", "\"x\"");
	assert_valid("{\"items\": true, \"properties\": {\"a\": true}, \"additionalProperties\": true}",
		     "{\"a\": [1], \"b\": 2}");
	assert_invalid("{\"not\": true}", "1");
	assert_valid("{\"not\": false}", "1");
	assert_valid("{\"items\": [{\"type\": \"string\"}]}", "[\"a\", 1, null]");
}
END_TEST

/* ------------------------------------------------------------------------
 * Patterns: ECMA-262, matched by lib/regex*.c (more in test_regex.c).
 */

static bool pattern_matches(const char *pattern_json, const char *string_json)
{
	_cleanup_free_ char *schema = xasprintf("{\"pattern\": %s}", pattern_json);

	return matches(schema, string_json);
}

#define assert_match(p, s) ck_assert_msg(pattern_matches(p, s), "pattern %s should match %s", p, s)
#define assert_no_match(p, s) ck_assert_msg(!pattern_matches(p, s), "pattern %s should not match %s", p, s)

START_TEST(regex_translation)
{
	/* Unanchored search; anchors anchor. */
	assert_match("\"a+\"", "\"xxaayy\"");
	assert_no_match("\"^a+$\"", "\"xxaayy\"");
	assert_match("\"^a*$\"", "\"\"");
	assert_match("\"\"", "\"anything\"");
	/* Non-strings are not checked. */
	assert_match("\"^a$\"", "5");

	/* Class escapes, ASCII-only as ECMA-262 defines them. */
	assert_match("\"^\\\\d+$\"", "\"0123456789\"");
	assert_no_match("\"^\\\\d$\"", "\"\xd9\xa3\"");	/* ARABIC-INDIC DIGIT THREE */
	assert_match("\"^\\\\D$\"", "\"x\"");
	assert_no_match("\"\\\\D\"", "\"123\"");
	assert_match("\"^\\\\w+$\"", "\"az_AZ09\"");
	assert_no_match("\"^\\\\w$\"", "\"\xc3\xa9\"");
	assert_match("\"^\\\\W$\"", "\"\xc3\xa9\"");
	assert_no_match("\"\\\\W\"", "\"abc_1\"");
	assert_match("\"^\\\\s+$\"", "\" \\t\\n\\r\\u000b\\f\\u00a0\\u2003\\u3000\\ufeff\\u2028\"");
	assert_no_match("\"\\\\s\"", "\"a\\u200bb\"");		/* ZERO WIDTH SPACE is not space */
	assert_match("\"^\\\\S+$\"", "\"ab\xc3\xa9\"");
	assert_no_match("\"\\\\S\"", "\" \\u00a0 \"");
	assert_match("\"^[\\\\d\\\\s]+$\"", "\"1 2\"");
	assert_match("\"^[^\\\\S]$\"", "\" \"");
	assert_no_match("\"^[^\\\\S]$\"", "\"a\"");
	assert_match("\"^[a\\\\D]$\"", "\"b\"");
	assert_no_match("\"^[a\\\\D]$\"", "\"5\"");
	assert_match("\"^[\\\\d-z]+$\"", "\"1-z\"");	/* Annex B: the "-" is itself */

	/* "." is one code point, not a line terminator. */
	assert_match("\"^.$\"", "\"\xc3\xa9\"");
	assert_match("\"^.$\"", "\"\xf0\x9f\x98\x80\"");
	assert_match("\"^...$\"", "\"a\xe4\xb8\xad\xc3\xa9\"");
	assert_no_match("\"^.$\"", "\"\\n\"");
	assert_no_match("\"^.$\"", "\"\\r\"");
	assert_no_match("\"^.$\"", "\"\\u2028\"");
	assert_match("\"^[^]$\"", "\"\\n\"");
	assert_no_match("\"[]\"", "\"abc\"");

	/* Ranges, negation and non-ASCII classes. */
	assert_match("\"^[a-z0-9_-]{1,16}$\"", "\"my-tool_1\"");
	assert_no_match("\"^[a-z]+$\"", "\"abC\"");
	assert_match("\"^[^a-z]+$\"", "\"ABC\xc3\xa9\"");
	assert_match("\"^[\xc3\xa0-\xc3\xbf]+$\"", "\"\xc3\xa9\xc3\xa8\"");
	assert_no_match("\"^[\xc3\xa0-\xc3\xbf]+$\"", "\"e\"");
	assert_match("\"^[\\\\u4e00-\\\\u9fff]+$\"", "\"\xe4\xb8\xad\xe6\x96\x87\"");
	assert_no_match("\"^[^\\\\u4e00-\\\\u9fff]$\"", "\"\xe4\xb8\xad\"");
	assert_match("\"^[^\\\\u4e00-\\\\u9fff]$\"", "\"\xf0\x9f\x98\x80\"");
	assert_match("\"^[\\\\u0080-\\\\uffff]$\"", "\"\xef\xbf\xbd\"");
	assert_match("\"^[\\\\]\\\\-^[]+$\"", "\"]-^[\"");
	assert_no_match("\"^[\\\\]\\\\-^[]+$\"", "\"a\"");
	assert_match("\"^[-^]$\"", "\"^\"");
	assert_match("\"^[.]$\"", "\".\"");
	assert_no_match("\"^[.]$\"", "\"x\"");
	assert_match("\"^[\\\\b]$\"", "\"\\b\"");

	/* Escapes of literals. */
	assert_match("\"^\\\\.\\\\*\\\\+\\\\?\\\\(\\\\)\\\\[\\\\]\\\\{\\\\}\\\\|\\\\^\\\\$\\\\\\\\\\\\/\\\\-$\"",
		     "\".*+?()[]{}|^$\\\\/-\"");
	assert_match("\"^\\\\x41\\\\u0042\\\\t\\\\n$\"", "\"AB\\t\\n\"");
	assert_match("\"^\\\\u00e9$\"", "\"\xc3\xa9\"");
	assert_match("\"^\\\\ud83d\\\\ude00$\"", "\"\xf0\x9f\x98\x80\"");
	assert_match("\"^\\\\cJ$\"", "\"\\n\"");
	assert_match("\"a\\\\0b\"", "\"a\\u0000b\"");
	assert_match("\"^a.b$\"", "\"a\\u0000b\"");
	assert_no_match("\"^a[^\\\\0]b$\"", "\"a\\u0000b\"");
	assert_match("\"^x\\\\0*y$\"", "\"xy\"");
	/* Annex B literals: "]", "}" and a "{" that is no quantifier. */
	assert_match("\"^a]b}c{d{1,x}$\"", "\"a]b}c{d{1,x}\"");
	assert_match("\"^\xc3\xa9+$\"", "\"\xc3\xa9\xc3\xa9\"");

	/* Groups, alternation, quantifiers (lazy ones match the same). */
	assert_match("\"^(?:ab|cd)+$\"", "\"abcdab\"");
	assert_no_match("\"^(?:ab|cd)+$\"", "\"abc\"");
	assert_match("\"^(?<year>\\\\d{4})-(\\\\d{2})$\"", "\"2024-05\"");
	assert_match("\"^a{2}$\"", "\"aa\"");
	assert_no_match("\"^a{2}$\"", "\"aaa\"");
	assert_match("\"^a{2,}$\"", "\"aaaa\"");
	assert_match("\"^a{1,2}?b*?c+?d??$\"", "\"abbccd\"");
	assert_match("\"^(|x)$\"", "\"\"");
	assert_match("\"^(a|)$\"", "\"a\"");
	assert_match("\"^a{0}b$\"", "\"b\"");
	assert_match("\"\\\\bword\\\\b\"", "\"a word.\"");

	/* Refused at compile time, with the reason. */
	refused_with("{\"pattern\": \"a(?=b)\"}", "lookahead assertions are not supported (at offset 1)");
	refused_with("{\"pattern\": \"a(?!b)\"}", "lookahead assertions are not supported");
	refused_with("{\"pattern\": \"(?<=a)b\"}", "lookbehind assertions are not supported");
	refused_with("{\"pattern\": \"(?<!a)b\"}", "lookbehind assertions are not supported");
	refused_with("{\"pattern\": \"(a)\\\\1\"}", "backreferences are not supported");
	refused_with("{\"pattern\": \"(?<n>a)\\\\k<n>\"}", "named backreferences");
	refused_with("{\"pattern\": \"\\\\p{L}\"}", "Unicode property escapes");
	refused_with("{\"pattern\": \"\\\\u{1F600}\"}", "\\u{...} escapes are not supported");
	refused_with("{\"pattern\": \"\\\\ud800\"}", "lone surrogate");
	refused_with("{\"pattern\": \"\\\\a\"}", "unknown escape");
	refused_with("{\"pattern\": \"\\\\x4\"}", "\\x must be followed by two hex digits");
	refused_with("{\"pattern\": \"\\\\012\"}", "octal escapes are not supported");
	refused_with("{\"pattern\": \"(?i)a\"}", "invalid group");
	refused_with("{\"pattern\": \"(a\"}", "missing ')'");
	refused_with("{\"pattern\": \"a)\"}", "unmatched ')'");
	refused_with("{\"pattern\": \"[a\"}", "missing ']'");
	refused_with("{\"pattern\": \"[z-a]\"}", "range out of order");
	refused_with("{\"pattern\": \"*a\"}", "nothing to repeat");
	refused_with("{\"pattern\": \"a**\"}", "nothing to repeat");
	refused_with("{\"pattern\": \"^*\"}", "nothing to repeat");
	refused_with("{\"pattern\": \"(|+)\"}", "nothing to repeat");
	refused_with("{\"pattern\": \"a{2,1}\"}", "numbers out of order");
	refused_with("{\"pattern\": \"a{40000}\"}", "repeat count above 32767");
	/* Programs too large once repetitions are expanded are refused
	 * before anything is expanded. */
	refused_with("{\"pattern\": \"(.{1000}){1000}\"}", "the pattern is too large");
	refused_with("{\"pattern\": \"((a?){100}){100}\"}", "the pattern is too large");
	refused_with("{\"pattern\": \"]{1,22222}\"}", "the pattern is too large");
	refused_with("{\"pattern\": \"(a{1,1000}){1,60}\"}", "the pattern is too large");
	assert_match("\"^(x{1,1000})?$\"", "\"xxx\"");
	refused_with("{\"pattern\": \"a\\\\\"}", "lone backslash");
	refused_with("{\"pattern\": \"a\\u0000b\"}", "contains a NUL character");
	refused("{\"properties\": {\"p\": {\"pattern\": \"x(?=y)\"}}}",
		"/properties/p: invalid pattern 'x(?=y)': lookahead assertions are not supported (at offset 1)");
}
END_TEST

/* Unanchored searches run in one pass: patterns that would restart at
 * every offset (quadratic: minutes here) take milliseconds; so do long
 * optional repetitions. */
START_TEST(regex_linear_search)
{
	static const char *const patterns[] = {
		"\".*\\\\.py$\"", "\"(a|aa)*b\"", "\"(x+x+)+y\"", "\"^(\\\\w+\\\\s?)*$\"",
		/* Long optional repetitions. */
		"\"^.{0,200}$\"", "\"^[a-z]{0,1000}$\"",
	};
	struct buf b = {};
	_cleanup_free_ char *subject = NULL;
	struct timespec t0, t1;
	double ms;

	buf_putc(&b, '"');
	for (int i = 0; i < 256 * 1024; i++)
		buf_putc(&b, 'a');
	buf_puts(&b, "!\"");
	buf_putc(&b, '\0');
	subject = buf_steal(&b);
	for (size_t i = 0; i < ELEMENTSOF(patterns); i++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ck_assert_msg(!pattern_matches(patterns[i], subject), "%s should not match", patterns[i]);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
		ck_assert_msg(ms < 5000, "%s took %.0f ms on 256 KiB", patterns[i], ms);
	}
}
END_TEST

/* ------------------------------------------------------------------------
 * Compiling from a parsed value; limits.
 */

START_TEST(compile_from_value)
{
	struct json_doc *doc = parse("{\"tools\": {\"x\": {\"enum\": [\"a\", {\"b\": 1}],"
				     " \"properties\": {\"n\": {\"const\": \"c\"}}}}}");
	const struct json *root = json_doc_root(doc);
	struct schema *s = NULL;
	struct schema_errors errs = {};
	char *err = NULL;

	ck_assert_int_eq(schema_compile(json_get(json_get(root, "tools"), "x"), &s, &err), 0);
	ck_assert_ptr_null(err);
	/* The schema keeps its own copy. */
	json_doc_unref(doc);
	ck_assert(validate_text(s, "{\"b\": 1}", &errs));
	ck_assert(!validate_text(s, "{\"n\": \"d\"}", &errs));
	ck_assert_uint_eq(errs.n, 2);
	ck_assert_str_eq(errs.v[0].message, "must be equal to \"c\"");
	ck_assert_str_eq(errs.v[1].message, "must be one of: \"a\", {\"b\":1}");
	schema_errors_clear(&errs);
	schema_free(s);

	doc = parse("{\"type\": \"strin\"}");
	ck_assert_int_eq(schema_compile(json_doc_root(doc), &s, &err), -EINVAL);
	ck_assert_ptr_nonnull(err);
	ck_assert(strstr(err, "unknown type \"strin\""));
	free(err);
	json_doc_unref(doc);

	ck_assert_ptr_null(schema_free(NULL));
	schema_errors_clear(&errs);
	schema_errors_clear(NULL);
}
END_TEST

START_TEST(deep_nesting)
{
	struct buf b = {};
	_cleanup_free_ char *chain = NULL, *deep = NULL, *expo = NULL, *nested = NULL;
	struct schema *s;
	struct schema_errors errs = {};
	struct timespec t0, t1;

	/* A 300-long chain of $refs: validation stops, with an error. */
	buf_puts(&b, "{\"$ref\": \"#/definitions/d0\", \"definitions\": {");
	for (int i = 0; i < 300; i++)
		buf_printf(&b, "%s\"d%d\": {\"$ref\": \"#/definitions/d%d\"}", i ? "," : "", i, i + 1);
	buf_puts(&b, ", \"d300\": {\"type\": \"integer\"}}}");
	buf_putc(&b, '\0');
	chain = buf_steal(&b);
	s = compile_ok(chain);
	ck_assert(!validate_text(s, "1", &errs));
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_str_eq(errs.v[0].message, "validation stopped: $ref recursion deeper than 256 levels");
	schema_errors_clear(&errs);
	schema_free(s);

	/* Recursion through the instance as deep as the parser allows. */
	buf_puts(&b, "{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}}");
	buf_putc(&b, '\0');
	deep = buf_steal(&b);
	for (int i = 0; i < 64; i++)
		buf_putc(&b, '[');
	for (int i = 0; i < 64; i++)
		buf_putc(&b, ']');
	buf_putc(&b, '\0');
	nested = buf_steal(&b);
	s = compile_ok(deep);
	ck_assert(validate_text(s, nested, &errs));
	/* The same with the innermost array replaced by a number. */
	memcpy(nested + 63, "1", 1);
	memmove(nested + 64, nested + 65, 64);
	ck_assert(!validate_text(s, nested, &errs));
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_uint_eq(strlen(errs.v[0].path), 2 * 63);
	ck_assert_str_eq(errs.v[0].message, "expected array, got number");
	schema_errors_clear(&errs);
	schema_free(s);

	/* An exponential schema: each level tries two branches that both fail
	 * at the bottom. Bounded work, with an error, quickly. */
	buf_puts(&b, "{\"$ref\": \"#/definitions/l0\", \"definitions\": {");
	for (int i = 0; i < 40; i++)
		buf_printf(&b, "\"l%d\": {\"anyOf\": [{\"$ref\": \"#/definitions/l%d\"},"
			   " {\"$ref\": \"#/definitions/l%d\"}]},", i, i + 1, i + 1);
	buf_puts(&b, "\"l40\": {\"type\": \"string\"}}}");
	buf_putc(&b, '\0');
	expo = buf_steal(&b);
	s = compile_ok(expo);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert(!validate_text(s, "1", &errs));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_str_eq(errs.v[0].message, "validation stopped: the schema is too expensive for this value");
	printf("schema: exponential schema stopped after %.0f ms (twice: with and without errors)\n",
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	schema_errors_clear(&errs);
	schema_free(s);

	/* Schemas nested deeper than the compiler allows are refused. */
	for (int i = 0; i < 130; i++)
		buf_puts(&b, "{\"not\":");
	buf_puts(&b, "{}");
	for (int i = 0; i < 130; i++)
		buf_putc(&b, '}');
	buf_putc(&b, '\0');
	free(nested);
	nested = buf_steal(&b);
	refused_with(nested, "the schema is not valid JSON: nesting deeper than 128 levels");
}
END_TEST

/* Not a benchmark: prints the rate of a typical validation for the record. */
START_TEST(validation_rate)
{
	struct schema *s = compile_ok(
		"{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\", \"minLength\": 1},"
		" \"offset\": {\"type\": \"integer\", \"minimum\": 0},"
		" \"limit\": {\"type\": \"integer\", \"minimum\": 1},"
		" \"encoding\": {\"enum\": [\"utf8\", \"base64\"]}},"
		" \"required\": [\"path\"], \"additionalProperties\": false}");
	struct json_doc *doc = parse("{\"path\": \"src/main.c\", \"offset\": 0, \"limit\": 4096}");
	struct timespec t0, t1;
	unsigned valid = 0, n = 200000;
	double secs;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; i < n; i++)
		valid += schema_validate(s, json_doc_root(doc), NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ck_assert_uint_eq(valid, n);
	printf("schema: %.0f read_file validations/s\n", n / secs);
	json_doc_unref(doc);
	schema_free(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("schema");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, official_suite);
	tcase_add_test(tc, unsupported_keywords);
	tcase_add_test(tc, names_and_data_are_not_keywords);
	tcase_add_test(tc, malformed_schemas);
	tcase_add_test(tc, ref_resolution);
	tcase_add_test(tc, ref_cycles);
	tcase_add_test(tc, messages_and_paths);
	tcase_add_test(tc, all_errors);
	tcase_add_test(tc, integers_and_numbers);
	tcase_add_test(tc, unicode_lengths);
	tcase_add_test(tc, unique_items);
	tcase_add_test(tc, boolean_and_empty_schemas);
	tcase_add_test(tc, regex_translation);
	tcase_add_test(tc, regex_linear_search);
	tcase_add_test(tc, compile_from_value);
	tcase_add_test(tc, deep_nesting);
	tcase_add_test(tc, validation_rate);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
