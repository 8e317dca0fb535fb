/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the wire: bytes arrive in chunks through
 * framer_next, each line goes through json_parse and jrpc_parse_request,
 * and every answer the daemon could write for it (result, error,
 * notification, batch) is written and parsed back.
 *
 * The first two bytes are options: the framer's size limit (small limits
 * exercise the over-long path) and the size of the chunks the rest is fed
 * in (so lines arrive split at every possible byte). What must hold:
 *   - a line handed out has no newline, is not blank and fits the limit;
 *   - a parse failure has an offset inside the text and a message;
 *   - an id accepted by jrpc_parse_request is echoed into answers that
 *     parse as JSON and whose "id" equals the request's;
 *   - every answer written is one line of valid JSON, whatever the
 *     message (invalid UTF-8 included);
 *   - the canonical form and the generator round-trip: reparsing gives an
 *     equal value, and the canonical form of that is the same bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/base/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DEPTH 64

/* Aborts with a message: libFuzzer saves the input. */
static void fail(const char *what, const char *text, size_t n)
{
	fprintf(stderr, "fuzz_jsonrpc: %s: %.*s\n", what, (int)MIN(n, 400), text);
	abort();
}

/* Parses an answer we wrote; it must be one line of valid JSON. */
static struct json_doc *must_parse(const struct buf *out)
{
	const char *s = buf_head(out);
	size_t n = buf_size(out);
	if (memchr(s, '\n', n))
		fail("an answer holds a raw newline", s, n);
	struct json_doc *doc = NULL;
	struct json_err err;
	/* Answers nest the request's id only (a scalar): depth stays small. */
	if (json_parse(s, n, 0, DEPTH + 4, &doc, &err) < 0)
		fail(err.msg, s, n);
	return doc;
}

/* Checks that an answer's "id" equals the request's id value. */
static void check_id(const struct buf *out, const struct json *want)
{
	struct json_doc *doc = must_parse(out);
	const struct json *root = json_doc_root(doc);
	const struct json *id = json_get(root, "id");
	if (!id || !json_str(json_get(root, "jsonrpc")))
		fail("an answer lacks id or jsonrpc", buf_head(out), buf_size(out));
	if (want ? !json_equal(id, want) : id->type != JSON_NULL)
		fail("the id was not echoed", buf_head(out), buf_size(out));
	json_doc_unref(doc);
}

/* True when every string and key in v is strict UTF-8 (a "\udc00"
 * escape decodes to an encoded surrogate, which is not). */
static bool strict_utf8(const struct json *v)
{
	switch (v->type) {
	case JSON_STRING:
		return utf8_valid(v->u.str.s, v->u.str.len);
	case JSON_ARRAY:
		for (size_t i = 0; i < v->u.arr.n; i++)
			if (!strict_utf8(v->u.arr.items[i]))
				return false;
		return true;
	case JSON_OBJECT:
		for (size_t i = 0; i < v->u.obj.n; i++)
			if (!utf8_valid(v->u.obj.members[i].key, v->u.obj.members[i].key_len) ||
			    !strict_utf8(v->u.obj.members[i].value))
				return false;
		return true;
	default:
		return true;
	}
}

/* Round-trips v through the canonical form and the generator. The
 * generator writes strict UTF-8 only, replacing what is not: for such a
 * value its text must still parse, as strict UTF-8, but may differ. */
static void check_codec(const struct json *v)
{
	struct buf canon = {0};
	json_canonical(v, &canon);
	struct json_doc *d1 = NULL;
	if (json_parse(buf_head(&canon), buf_size(&canon), 0, DEPTH, &d1, NULL) < 0)
		fail("the canonical form does not parse", buf_head(&canon), buf_size(&canon));
	if (!json_equal(v, json_doc_root(d1)))
		fail("the canonical form is not equal to the value", buf_head(&canon), buf_size(&canon));
	struct buf again = {0};
	json_canonical(json_doc_root(d1), &again);
	if (buf_size(&again) != buf_size(&canon) || memcmp(buf_head(&again), buf_head(&canon), buf_size(&canon)))
		fail("the canonical form is not stable", buf_head(&again), buf_size(&again));

	struct buf gen = {0};
	struct jgen *g = jgen_new(&gen);
	jgen_value(g, v);
	jgen_free(g);
	struct json_doc *d2 = NULL;
	if (json_parse(buf_head(&gen), buf_size(&gen), 0, DEPTH, &d2, NULL) < 0)
		fail("the generated text does not parse", buf_head(&gen), buf_size(&gen));
	if (!utf8_valid(buf_head(&gen), buf_size(&gen)))
		fail("the generated text is not strict UTF-8", buf_head(&gen), buf_size(&gen));
	if (strict_utf8(v) && !json_equal(v, json_doc_root(d2)))
		fail("the generated text is not equal to the value", buf_head(&gen), buf_size(&gen));
	if (memchr(buf_head(&gen), '\n', buf_size(&gen)))
		fail("the generator wrote a raw newline", buf_head(&gen), buf_size(&gen));

	json_doc_unref(d1);
	json_doc_unref(d2);
	buf_free(&canon);
	buf_free(&again);
	buf_free(&gen);
}

/* Handles one element as the daemon does; writes its answer into batch. */
static void handle_value(const struct json *v, const char *src, struct buf *batch)
{
	struct jrpc_req req;
	const char *why = NULL;
	int r = jrpc_parse_request(v, src, &req, &why);
	struct buf out = {0};
	const struct json *want = NULL;
	struct json_doc *id_doc = NULL;
	if (req.id) {
		/* The id's text must itself be one JSON value. */
		if (json_parse(req.id, req.id_len, 0, 1, &id_doc, NULL) < 0)
			fail("the id's text is not a value", req.id, req.id_len);
		want = json_doc_root(id_doc);
	}
	if (r < 0) {
		if (r != JRPC_INVALID_REQUEST || !why || !*why)
			fail("an invalid request without a reason", src, strlen(src));
		/* Answered with id null, as any value that is not a request. */
		char *msg = xasprintf("Invalid Request: %s", why);
		jrpc_write_error(&out, NULL, 0, JRPC_INVALID_REQUEST, msg, NULL, 0);
		free(msg);
		want = NULL;
	} else {
		if (!req.method || strlen(req.method) != json_get(v, "method")->u.str.len)
			fail("a request without its whole method", src, strlen(src));
		if (req.params && req.params->type != JSON_OBJECT && req.params->type != JSON_ARRAY)
			fail("params neither object nor array", src, strlen(src));
		if (!req.id) {
			/* A notification: what the server would send as one. */
			struct buf params = {0};
			if (req.params)
				json_canonical(req.params, &params);
			jrpc_write_notification(&out, req.method, req.params ? buf_head(&params) : NULL,
						buf_size(&params));
			buf_free(&params);
			json_doc_unref(must_parse(&out));
			buf_free(&out);
			return;
		}
		/* The method name goes back in a message, as "not found" does. */
		char *msg = xasprintf("Method not found: '%.200s'", req.method);
		if (req.method[0] & 1)
			jrpc_write_result(&out, req.id, req.id_len, "{}", 2);
		else
			jrpc_write_error(&out, req.id, req.id_len, JRPC_METHOD_NOT_FOUND, msg,
					 "{\"kind\":\"not_found\"}", 20);
		free(msg);
	}
	check_id(&out, want);
	if (batch) {
		if (buf_size(batch) > 1)
			buf_putc(batch, ',');
		buf_append(batch, buf_head(&out), buf_size(&out));
	}
	buf_free(&out);
	json_doc_unref(id_doc);
}

/* Handles one framed line. */
static void handle_line(const char *line, size_t len, size_t max)
{
	if (len > max || memchr(line, '\n', len))
		fail("the framer handed out a bad line", line, len);
	size_t blank = 0;
	while (blank < len && (line[blank] == ' ' || line[blank] == '\t' || line[blank] == '\r'))
		blank++;
	if (blank == len)
		fail("the framer handed out a blank line", line, len);

	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(line, len, 0, DEPTH, &doc, &err) < 0) {
		if (err.offset > len || !err.msg[0] || !memchr(err.msg, '\0', sizeof(err.msg)))
			fail("a parse error without offset or message", line, len);
		/* The daemon's answer quotes the parser's message. */
		char *msg = xasprintf("Parse error: %s at byte %zu", err.msg, err.offset);
		struct buf out = {0};
		jrpc_write_error(&out, NULL, 0, JRPC_PARSE_ERROR, msg, NULL, 0);
		check_id(&out, NULL);
		free(msg);
		buf_free(&out);
		return;
	}
	const struct json *root = json_doc_root(doc);
	const char *src = json_doc_text(doc);
	check_codec(root);
	if (root->type == JSON_ARRAY && root->u.arr.n > 0) {
		struct buf batch = {0};
		buf_putc(&batch, '[');
		for (size_t i = 0; i < root->u.arr.n; i++)
			handle_value(root->u.arr.items[i], src, &batch);
		buf_putc(&batch, ']');
		json_doc_unref(must_parse(&batch));
		buf_free(&batch);
	} else {
		handle_value(root, src, NULL);
	}
	json_doc_unref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2 || size > (1u << 20))
		return 0;
	/* Limits from 16 bytes up, or (byte 0 is 0xff) the daemon's 8 MiB. */
	size_t max = data[0] == 0xff ? 8u << 20 : 16 + (size_t)data[0] * 8;
	size_t chunk = 1 + data[1];
	data += 2;
	size -= 2;

	/* Messages the daemon writes whatever the client sent: a message
	 * made of the input's bytes must come out as valid JSON too. */
	struct buf out = {0};
	char *msg = xstrndup((const char *)data, MIN(size, 4096));
	jrpc_write_error(&out, "7", 1, JRPC_INTERNAL_ERROR, msg, NULL, 0);
	json_doc_unref(must_parse(&out));
	free(msg);
	buf_free(&out);

	struct framer f = { .max = max };
	struct buf in = {0};
	size_t fed = 0;
	for (;;) {
		const char *line;
		size_t len;
		enum frame_result r = framer_next(&f, &in, &line, &len);
		if (r == FRAME_LINE) {
			handle_line(line, len, max);
			continue;
		}
		if (r == FRAME_TOO_LONG)
			continue;
		if (fed == size)
			break;
		size_t n = MIN(chunk, size - fed);
		buf_append(&in, data + fed, n);
		fed += n;
	}
	/* What is left is an unterminated line: shorter than the limit plus
	 * the newline, or being discarded. */
	if (!f.discarding && buf_size(&in) > max + 1)
		fail("the framer holds more than a message", buf_head(&in), buf_size(&in));
	buf_free(&in);
	return 0;
}
