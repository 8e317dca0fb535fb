/* SPDX-License-Identifier: MIT */
/*
 * The wire protocol against the real daemon: JSON-RPC 2.0 exactly as the
 * specification's examples show (section 7), ids echoed byte for byte,
 * framing (CRLF, blank lines, over-long lines, absurd nesting), duplicate
 * ids in flight, MCP initialize negotiation, server/discover, tools/list,
 * and the shape of tools/call successes and errors (CONTRACT §2-§4).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Shell runs without asking: tests here are about the protocol. */
#define CFG_SHELL_AUTO "{\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}}}"

/* Sends a line and returns the one response line it gets, parsed. */
static const struct json *exchange(struct tcc *c, const char *line)
{
	tcc_send(c, line);
	struct json_doc *doc = tcc_recv(c, TCC_TIMEOUT_MS);
	ck_assert_msg(doc, "no answer to %.300s", line);
	return json_doc_root(doc);
}

/* Asserts resp is a JSON-RPC error with this code and id text. */
static void assert_error(struct tcc *c, const struct json *resp, int code, const char *id_raw)
{
	char *t = tj_text(resp);
	ck_assert_msg(resp->type == JSON_OBJECT, "not an object: %s", t);
	ck_assert_msg(str_eq(tj_str(resp, "jsonrpc"), "2.0"), "no jsonrpc 2.0: %s", t);
	ck_assert_msg(tj_has(resp, "error") && !tj_has(resp, "result"), "not an error: %s", t);
	ck_assert_msg(tj_int(resp, "error.code") == code, "code %d expected: %s", code, t);
	ck_assert_msg(tj_str(resp, "error.message") && *tj_str(resp, "error.message"), "no message: %s", t);
	ck_assert_msg(tj_has(resp, "id"), "no id member: %s", t);
	ck_assert_msg(str_eq(tcc_raw(c, tj(resp, "id")), id_raw), "id %s expected: %s", id_raw, t);
	free(t);
}

/* Asserts resp is a success with this id text. */
static void assert_result(struct tcc *c, const struct json *resp, const char *id_raw)
{
	char *t = tj_text(resp);
	ck_assert_msg(resp->type == JSON_OBJECT && tj_has(resp, "result") && !tj_has(resp, "error"),
		      "not a result: %s", t);
	ck_assert_msg(str_eq(tj_str(resp, "jsonrpc"), "2.0"), "no jsonrpc 2.0: %s", t);
	ck_assert_msg(str_eq(tcc_raw(c, tj(resp, "id")), id_raw), "id %s expected: %s", id_raw, t);
	free(t);
}

/* --- the specification's examples (section 7) ------------------------ */

START_TEST(spec_calls_and_notifications)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);

	/* rpc call with positional parameters */
	const struct json *r = exchange(c, "{\"jsonrpc\": \"2.0\", \"method\": \"ping\", \"params\": [], \"id\": 1}");
	assert_result(c, r, "1");
	ck_assert_int_eq(tj_len(r, "result"), 0);
	/* rpc call with named parameters */
	r = exchange(c, "{\"jsonrpc\": \"2.0\", \"method\": \"tools/list\", \"params\": {}, \"id\": 3}");
	assert_result(c, r, "3");
	ck_assert_int_ge(tj_len(r, "result.tools"), 5);
	/* named parameters, members in another order */
	r = exchange(c, "{\"id\": 4, \"params\": {}, \"method\": \"ping\", \"jsonrpc\": \"2.0\"}");
	assert_result(c, r, "4");

	/* a notification: no response, not even for an unknown method */
	tcc_send(c, "{\"jsonrpc\": \"2.0\", \"method\": \"update\", \"params\": [1,2,3,4,5]}");
	tcc_send(c, "{\"jsonrpc\": \"2.0\", \"method\": \"foobar\"}");
	tcc_send(c, "{\"jsonrpc\": \"2.0\", \"method\": \"ping\"}");
	tcc_send(c, "{\"jsonrpc\": \"2.0\", \"method\": \"tools/call\", \"params\": {\"name\": \"nope\"}}");
	ck_assert_msg(tcc_quiet(c, 300), "a notification got an answer: %s", tcc_recv_line(c, 0, NULL));

	/* rpc call of non-existent method */
	r = exchange(c, "{\"jsonrpc\": \"2.0\", \"method\": \"foobar\", \"id\": \"1\"}");
	assert_error(c, r, -32601, "\"1\"");
	/* with a kind, as every error of a request is */
	ck_assert_str_eq(tj_str(r, "error.data.kind"), "not_found");
	/* names beside methods that exist: a prefix, a longer name, another
	 * case, the first and last in byte order, empty */
	static const char *const near[] = {
		"tools/cal", "tools/callx", "tools/call/", "Tools/call", "pin", "pingg",
		"", "!", "~~~", "tasks/", "admin/stat",
	};
	for (size_t i = 0; i < ELEMENTSOF(near); i++) {
		r = exchange(c, tcc_fmt(c, "{\"jsonrpc\": \"2.0\", \"method\": \"%s\", \"id\": 2}", near[i]));
		assert_error(c, r, -32601, "2");
	}

	/* rpc call with invalid JSON */
	r = exchange(c, "{\"jsonrpc\": \"2.0\", \"method\": \"foobar, \"params\": \"bar\", \"baz]");
	assert_error(c, r, -32700, "null");

	/* rpc call with invalid Request object */
	r = exchange(c, "{\"jsonrpc\": \"2.0\", \"method\": 1, \"params\": \"bar\"}");
	assert_error(c, r, -32600, "null");
	/* other values that are not requests */
	r = exchange(c, "{\"method\": \"ping\", \"id\": 9}");	/* no "jsonrpc" */
	ck_assert_int_eq(tj_int(r, "error.code"), -32600);
	r = exchange(c, "{\"jsonrpc\": \"1.0\", \"method\": \"ping\", \"id\": 9}");
	ck_assert_int_eq(tj_int(r, "error.code"), -32600);
	r = exchange(c, "\"ping\"");
	assert_error(c, r, -32600, "null");
	r = exchange(c, "42");
	assert_error(c, r, -32600, "null");
	r = exchange(c, "{\"jsonrpc\": \"2.0\", \"method\": \"ping\", \"id\": {\"a\": 1}}");
	assert_error(c, r, -32600, "null");

	/* the connection is still good */
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(spec_batches)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);

	/* rpc call Batch, invalid JSON: one error object, not an array */
	const struct json *r = exchange(c, "["
		"  {\"jsonrpc\": \"2.0\", \"method\": \"sum\", \"params\": [1,2,4], \"id\": \"1\"},"
		"  {\"jsonrpc\": \"2.0\", \"method\"]");
	assert_error(c, r, -32700, "null");

	/* rpc call with an empty Array: a single error, not an array */
	r = exchange(c, "[]");
	assert_error(c, r, -32600, "null");

	/* rpc call with an invalid Batch (but not empty) */
	r = exchange(c, "[1]");
	ck_assert_int_eq(r->type, JSON_ARRAY);
	ck_assert_int_eq(tj_len(r, ""), 1);
	assert_error(c, tj(r, "0"), -32600, "null");

	/* rpc call with invalid Batch */
	r = exchange(c, "[1,2,3]");
	ck_assert_int_eq(r->type, JSON_ARRAY);
	ck_assert_int_eq(tj_len(r, ""), 3);
	for (int i = 0; i < 3; i++)
		assert_error(c, tj(r, tcc_fmt(c, "%d", i)), -32600, "null");

	/* rpc call Batch: mixed; answers in input order, none for the
	 * notifications */
	r = exchange(c, "["
		"{\"jsonrpc\": \"2.0\", \"method\": \"ping\", \"id\": \"1\"},"
		"{\"jsonrpc\": \"2.0\", \"method\": \"notify_hello\", \"params\": [7]},"
		"{\"jsonrpc\": \"2.0\", \"method\": \"tools/list\", \"params\": {}, \"id\": \"2\"},"
		"{\"foo\": \"boo\"},"
		"{\"jsonrpc\": \"2.0\", \"method\": \"foo.get\", \"params\": {\"name\": \"myself\"}, \"id\": \"5\"},"
		"{\"jsonrpc\": \"2.0\", \"method\": \"ping\", \"id\": \"9\"}"
		"]");
	ck_assert_int_eq(r->type, JSON_ARRAY);
	ck_assert_int_eq(tj_len(r, ""), 5);
	assert_result(c, tj(r, "0"), "\"1\"");
	assert_result(c, tj(r, "1"), "\"2\"");
	ck_assert_int_ge(tj_len(r, "1.result.tools"), 5);
	assert_error(c, tj(r, "2"), -32600, "null");
	assert_error(c, tj(r, "3"), -32601, "\"5\"");
	assert_result(c, tj(r, "4"), "\"9\"");

	/* rpc call Batch (all notifications): nothing at all */
	tcc_send(c, "["
		"{\"jsonrpc\": \"2.0\", \"method\": \"notify_sum\", \"params\": [1,2,4]},"
		"{\"jsonrpc\": \"2.0\", \"method\": \"notify_hello\", \"params\": [7]}"
		"]");
	ck_assert_msg(tcc_quiet(c, 300), "an all-notification batch got an answer: %s",
		      tcc_recv_line(c, 0, NULL));

	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A batch mixing a slow tool call with quick ones is one array, in input
 * order, written once the slow call is done. */
START_TEST(batch_waits_for_all_in_order)
{
	struct tcd d;
	tcd_start(&d, CFG_SHELL_AUTO);
	tcd_put(&d, "a.txt", "A");
	struct tcc *c = tcc_connect(&d);
	uint64_t t0 = tc_now_ms();
	const struct json *r = exchange(c, "["
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		"\"arguments\":{\"command\":\"sleep 0.3; echo slow\"}}},"
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
		"\"arguments\":{\"path\":\"a.txt\"}}},"
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]");
	ck_assert_uint_ge(tc_now_ms() - t0, 250);
	ck_assert_int_eq(r->type, JSON_ARRAY);
	ck_assert_int_eq(tj_len(r, ""), 3);
	assert_result(c, tj(r, "0"), "1");
	ck_assert_str_eq(tj_str(r, "0.result.structuredContent.stdout"), "slow\n");
	assert_result(c, tj(r, "1"), "2");
	ck_assert_str_eq(tj_str(r, "1.result.structuredContent.content"), "A");
	assert_result(c, tj(r, "2"), "3");

	/* A member answered while its batch waits for another keeps its id
	 * taken until the batch is written: no answer with that id can come
	 * before the batch's. */
	tcc_send(c, "["
		"{\"jsonrpc\":\"2.0\",\"id\":\"g\",\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		"\"arguments\":{\"command\":\"sleep 0.3\"}}},"
		"{\"jsonrpc\":\"2.0\",\"id\":\"h\",\"method\":\"ping\"}]");
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":\"h\",\"method\":\"ping\"}");
	ck_assert_msg(r->type == JSON_OBJECT, "the batch came first: %s", tcc_raw(c, r));
	assert_error(c, r, -32600, "\"h\"");
	ck_assert_str_eq(tj_str(r, "error.data.kind"), "duplicate_id");
	struct json_doc *bd = tcc_recv(c, 5000);
	ck_assert_ptr_nonnull(bd);
	r = json_doc_root(bd);
	ck_assert_int_eq(r->type, JSON_ARRAY);
	ck_assert_int_eq(tj_len(r, ""), 2);
	assert_result(c, tj(r, "1"), "\"h\"");
	/* Once the batch is out, the id is free again. */
	assert_result(c, exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":\"h\",\"method\":\"ping\"}"), "\"h\"");

	/* A batch whose only call is cancelled by a notification of the same
	 * batch has no answer left: nothing is sent, not an empty array. */
	tcc_send(c, "["
		"{\"jsonrpc\":\"2.0\",\"id\":\"e1\",\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		"\"arguments\":{\"command\":\"sleep 0.3\"}}},"
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"e1\"}}]");
	ck_assert_msg(tcc_quiet(c, 800), "a batch of cancelled calls got an answer: %s", tcc_recv_line(c, 0, NULL));
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- ids ------------------------------------------------------------- */

START_TEST(ids_echoed_byte_for_byte)
{
	static const char *const ids[] = {
		"\"a\\u0041\\\"b\"", "1.50", "1e3", "1E+3", "12345678901234567890123", "-7", "-0", "0",
		"\"\"", "\"\\u00e9t\\u00E9\"", "\"\\ud83d\\ude00\"", "\"caf\xc3\xa9\"", "\"\\/\\b\\f\\n\\r\\t\"",
		"3.141592653589793238462643383279", "-1.5e-300", "null",
	};
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
		const char *line = tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", ids[i]);
		tcc_send(c, line);
		size_t len;
		const char *got = tcc_recv_line(c, TCC_TIMEOUT_MS, &len);
		ck_assert_msg(got, "no answer for id %s", ids[i]);
		const char *want = tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}", ids[i]);
		ck_assert_msg(str_eq(got, want), "id %s: got %s", ids[i], got);
	}
	/* and in errors, and with white space around the id */
	const struct json *r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\" :  1.50 ,\"method\":\"nope\"}");
	assert_error(c, r, -32601, "1.50");
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":\"x\\u0000y\",\"method\":\"nope\"}");
	assert_error(c, r, -32601, "\"x\\u0000y\"");
	/* an invalid request is answered with id null, even when it holds
	 * an id that could be read */
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":1}");
	assert_error(c, r, -32600, "null");
	r = exchange(c, "{\"jsonrpc\":\"1.0\",\"id\":78,\"method\":\"ping\"}");
	assert_error(c, r, -32600, "null");
	/* a response to no request of the daemon's is ignored (§12: the
	 * daemon sends requests of its own) */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":79,\"result\":{}}");
	ck_assert_msg(tcc_quiet(c, 300), "a stray response got an answer");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- framing ------------------------------------------------------------ */

START_TEST(framing_crlf_and_blank_lines)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	static const char in[] = "\n\r\n \t \n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n\r\n\n"
				 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n\n";
	ck_assert_int_eq(tcc_send_raw(c, in, sizeof(in) - 1), 0);
	const char *l1 = tcc_recv_line(c, TCC_TIMEOUT_MS, NULL);
	const char *l2 = tcc_recv_line(c, TCC_TIMEOUT_MS, NULL);
	ck_assert_pstr_eq(l1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
	ck_assert_pstr_eq(l2, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
	ck_assert_msg(tcc_quiet(c, 200), "blank lines were answered: %s", tcc_recv_line(c, 0, NULL));

	/* a message split across many writes, byte by byte */
	static const char slow[] = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\r\n";
	for (size_t i = 0; i < sizeof(slow) - 1; i++) {
		ck_assert_int_eq(tcc_send_raw(c, slow + i, 1), 0);
		if (i % 8 == 0)
			ck_assert(tcc_quiet(c, 2));
	}
	ck_assert_pstr_eq(tcc_recv_line(c, TCC_TIMEOUT_MS, NULL), "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}");

	/* many messages in one write are all answered, in order */
	struct buf b = {};
	for (int i = 0; i < 200; i++)
		buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}\n", 100 + i);
	ck_assert_int_eq(tcc_send_raw(c, buf_head(&b), buf_size(&b)), 0);
	buf_free(&b);
	for (int i = 0; i < 200; i++) {
		const char *want = tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{}}", 100 + i);
		ck_assert_pstr_eq(tcc_recv_line(c, TCC_TIMEOUT_MS, NULL), want);
	}
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(framing_message_too_long)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"max_message_bytes\":4096}}");
	struct tcc *c = tcc_connect(&d);

	/* just under the limit: served */
	struct buf b = {};
	buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"pad\":\"");
	while (buf_size(&b) < 4000)
		buf_putc(&b, 'x');
	buf_puts(&b, "\"}}");
	buf_putc(&b, '\0');
	const struct json *r = exchange(c, buf_head(&b));
	assert_result(c, r, "1");
	buf_free(&b);

	/* over it (5000 bytes, in one write): -32600, id null */
	buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{\"pad\":\"");
	while (buf_size(&b) < 5000)
		buf_putc(&b, 'x');
	buf_puts(&b, "\"}}");
	buf_putc(&b, '\0');
	r = exchange(c, buf_head(&b));
	assert_error(c, r, -32600, "null");
	buf_free(&b);
	/* the connection still works, and the long line gave one answer */
	assert_result(c, exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}"), "3");

	/* a 1 MiB line in many writes: one answer, the rest discarded */
	char chunk[16384];
	memset(chunk, 'y', sizeof(chunk));
	ck_assert_int_eq(tcc_send_raw(c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":[\"", 50), 0);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(tcc_send_raw(c, chunk, sizeof(chunk)), 0);
	/* the tail holds what would be a valid request if framing were lost */
	static const char tail[] = "\",{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"ping\"}]}\n";
	ck_assert_int_eq(tcc_send_raw(c, tail, sizeof(tail) - 1), 0);
	r = json_doc_root(tcc_recv(c, TCC_TIMEOUT_MS));
	assert_error(c, r, -32600, "null");
	assert_result(c, exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}"), "5");
	ck_assert_msg(tcc_quiet(c, 200), "extra output: %s", tcc_recv_line(c, 0, NULL));

	/* other connections were never disturbed */
	struct tcc *c2 = tcc_connect(&d);
	tc_assert_ok(tcc_request(c2, "ping", NULL));
	tcc_close(c2);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Builds a request whose params nest to a total depth of depth. */
static char *nested_request(int id, int depth)
{
	struct buf b = {};
	/* the request object and its params object count 2 */
	buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\",\"params\":{\"x\":", id);
	for (int i = 0; i < depth - 2; i++)
		buf_putc(&b, '[');
	buf_putc(&b, '1');
	for (int i = 0; i < depth - 2; i++)
		buf_putc(&b, ']');
	buf_puts(&b, "}}");
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

START_TEST(nesting_limits)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);

	/* the default limit is 64: 64 is served, 65 refused */
	char *ok = nested_request(1, 64), *deep = nested_request(2, 65);
	assert_result(c, exchange(c, ok), "1");
	const struct json *r = exchange(c, deep);
	ck_assert_int_eq(tj_int(r, "error.code"), -32600);
	free(ok);
	free(deep);

	/* a 1,000,000-deep [[[[: -32600, no crash */
	size_t n = 1000000;
	char *bomb = xmalloc(n + 1);
	memset(bomb, '[', n);
	bomb[n] = '\n';
	ck_assert_int_eq(tcc_send_raw(c, bomb, n + 1), 0);
	r = json_doc_root(tcc_recv(c, TCC_TIMEOUT_MS));
	assert_error(c, r, -32600, "null");
	/* balanced, and objects */
	struct buf b = {};
	for (size_t i = 0; i < 200000; i++)
		buf_puts(&b, "{\"a\":");
	buf_putc(&b, '1');
	for (size_t i = 0; i < 200000; i++)
		buf_putc(&b, '}');
	buf_putc(&b, '\n');
	ck_assert_int_eq(tcc_send_raw(c, buf_head(&b), buf_size(&b)), 0);
	buf_free(&b);
	r = json_doc_root(tcc_recv(c, TCC_TIMEOUT_MS));
	assert_error(c, r, -32600, "null");
	/* nested inside a batch */
	memset(bomb, '[', n);
	ck_assert_int_eq(tcc_send_raw(c, bomb, n + 1), 0);
	r = json_doc_root(tcc_recv(c, TCC_TIMEOUT_MS));
	ck_assert_int_eq(tj_int(r, "error.code"), -32600);
	free(bomb);

	/* the daemon still serves, this connection and others */
	assert_result(c, exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}"), "3");
	struct tcc *c2 = tcc_connect(&d);
	tc_assert_ok(tcc_request(c2, "ping", NULL));
	tcc_close(c2);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(nesting_limit_configurable)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"max_json_depth\":8}}");
	struct tcc *c = tcc_connect(&d);
	char *ok = nested_request(1, 8), *deep = nested_request(2, 9);
	assert_result(c, exchange(c, ok), "1");
	const struct json *r = exchange(c, deep);
	ck_assert_int_eq(tj_int(r, "error.code"), -32600);
	free(ok);
	free(deep);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A batch longer than limits.max_batch is refused whole, with one error:
 * its answer would grow far beyond the line ("[1,1,...]" of 8 MiB holds
 * four million requests). */
START_TEST(batch_length_limit)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"max_batch\":3}}");
	tcd_put(&d, "a.txt", "A");
	struct tcc *c = tcc_connect(&d);
	const char *call = "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
			   "\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"a.txt\"}}}";
	struct buf b = {0};
	buf_putc(&b, '[');
	for (int i = 1; i <= 3; i++) {
		buf_printf(&b, i > 1 ? "," : "");
		buf_printf(&b, call, i);
	}
	buf_putc(&b, ']');
	const struct json *r = exchange(c, buf_head(&b));
	ck_assert_int_eq(r->type, JSON_ARRAY);
	ck_assert_int_eq(tj_len(r, ""), 3);
	/* One more: a single error, id null, and nothing of it run. */
	b.len--;
	buf_printf(&b, ",");
	buf_printf(&b, call, 4);
	buf_putc(&b, ']');
	r = exchange(c, buf_head(&b));
	assert_error(c, r, -32600, "null");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "limits.max_batch"), "%s", tj_str(r, "error.message"));
	r = tcc_request(c, "admin/stats", NULL);
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.tools.read_file.calls"), 3);
	buf_free(&b);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A batch is written whole, so its answers are held until the last one:
 * past limits.max_output_bytes a large answer is replaced by an error
 * saying so, and small ones still come through. */
START_TEST(batch_answers_bounded)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"max_output_bytes\":65536}}");
	/* 200 lines of 100 bytes: the numbered text is as large as the content. */
	tcd_put_filler(&d, "big.txt", 20000, 100);
	struct tcc *c = tcc_connect(&d);
	const char *call = "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
			   "\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"big.txt\"}}}";
	struct buf b = {0};
	buf_putc(&b, '[');
	for (int i = 1; i <= 3; i++) {
		buf_printf(&b, call, i);
		buf_putc(&b, ',');
	}
	buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}]");
	const struct json *r = exchange(c, buf_head(&b));
	ck_assert_int_eq(r->type, JSON_ARRAY);

	/* A client that takes tool errors as results gets the dropped
	 * answers as results with isError, the error's data in them. */
	struct tcc *h = tcc_connect(&d);
	tcc_initialize(h, "\"toolErrors\":\"result\"");
	const struct json *rh = exchange(h, buf_head(&b));
	buf_free(&b);
	ck_assert_int_eq(tj_len(rh, ""), 4);
	int dropped = 0;
	for (int i = 0; i <= 2; i++) {
		const struct json *e = tj(rh, tcc_fmt(h, "%d", i));
		ck_assert_msg(tj_has(e, "result"), "%s", tj_text(e));
		if (!tj_bool(e, "result.isError"))
			continue;
		dropped++;
		ck_assert_str_eq(tj_str(e, "result.structuredContent.error.kind"), "execution_error");
		ck_assert(tj_bool(e, "result.structuredContent.error.ran"));
		ck_assert_msg(strstr(tj_str(e, "result.content.0.text"), "The call ran"), "%s", tj_text(e));
		/* The fields of the call it stands for (CONTRACT §4). */
		ck_assert_str_eq(tj_str(e, "result.structuredContent.error.tool"), "read_file");
		ck_assert_int_eq(tj_int(e, "result.structuredContent.error.attempts"), 1);
		ck_assert(tj_has(e, "result.structuredContent.error.durationMs"));
		ck_assert_int_eq(strncmp(tj_str(e, "result.structuredContent.error.callId"), "c-", 2), 0);
	}
	ck_assert_int_eq(dropped, 2);
	tcc_close(h);

	ck_assert_int_eq(tj_len(r, ""), 4);
	/* The reads end in any order (on the io threads): the first to end
	 * fits, the two after it do not. */
	int kept = 0;
	for (int i = 0; i <= 2; i++) {
		const struct json *e = tj(r, tcc_fmt(c, "%d", i));
		if (tj_has(e, "result")) {
			assert_result(c, e, tcc_fmt(c, "%d", i + 1));
			ck_assert_uint_eq(strlen(tj_str(e, "result.structuredContent.content")), 20000);
			kept++;
			continue;
		}
		assert_error(c, e, -32603, tcc_fmt(c, "%d", i + 1));
		/* The call ran: a retry would run it again, so the error is
		 * not retryable and says so, and what to do instead. */
		ck_assert_str_eq(tj_str(e, "error.data.kind"), "execution_error");
		ck_assert(!tj_bool(e, "error.data.retryable"));
		ck_assert(tj_bool(e, "error.data.ran"));
		ck_assert_str_eq(tj_str(e, "error.data.limit"), "limits.max_output_bytes");
		ck_assert_int_eq(tj_int(e, "error.data.limitBytes"), 65536);
		ck_assert_int_gt(tj_int(e, "error.data.answerBytes"), 20000);
		/* The fields of the call it stands for (CONTRACT §4). */
		ck_assert_str_eq(tj_str(e, "error.data.tool"), "read_file");
		ck_assert_int_eq(tj_int(e, "error.data.attempts"), 1);
		ck_assert_int_ge(tj_int(e, "error.data.durationMs"), 0);
		ck_assert_int_eq(strncmp(tj_str(e, "error.data.callId"), "c-", 2), 0);
		const char *m = tj_str(e, "error.message");
		ck_assert_msg(strstr(m, "limits.max_output_bytes") && strstr(m, "The call ran") &&
				      strstr(m, "fewer calls per batch") && strstr(m, "smaller outputs"),
			      "%s", m);
	}
	ck_assert_int_eq(kept, 1);
	assert_result(c, tj(r, "3"), "4");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- duplicate ids -------------------------------------------------------- */

START_TEST(duplicate_inflight_id)
{
	struct tcd d;
	tcd_start(&d, CFG_SHELL_AUTO);
	struct tcc *c = tcc_connect(&d);
	uint64_t t0 = tc_now_ms();
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"dup\",\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		    "\"arguments\":{\"command\":\"sleep 1; echo first\"}}}");
	/* the same id, while the first is in flight: refused at once, the
	 * refusal the first line to come, before the first call's answer */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"dup\",\"method\":\"ping\"}");
	const struct json *r = json_doc_root(tcc_recv(c, TCC_TIMEOUT_MS));
	assert_error(c, r, -32600, "\"dup\"");
	ck_assert_pstr_eq(tj_str(r, "error.data.kind"), "duplicate_id");
	/* also inside a batch */
	tcc_send(c, "[{\"jsonrpc\":\"2.0\",\"id\":\"dup\",\"method\":\"ping\"},"
		    "{\"jsonrpc\":\"2.0\",\"id\":\"other\",\"method\":\"ping\"}]");
	r = json_doc_root(tcc_recv(c, TCC_TIMEOUT_MS));
	ck_assert_int_eq(r->type, JSON_ARRAY);
	assert_error(c, tj(r, "0"), -32600, "\"dup\"");
	ck_assert_pstr_eq(tj_str(r, "0.error.data.kind"), "duplicate_id");
	assert_result(c, tj(r, "1"), "\"other\"");

	/* the first call is unaffected */
	r = tcc_wait_id(c, "\"dup\"", TCC_TIMEOUT_MS);
	ck_assert_msg(r, "the first call never answered");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.stdout"), "first\n");
	ck_assert_uint_ge(tc_now_ms() - t0, 900);
	/* once answered, the id is free again */
	assert_result(c, exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":\"dup\",\"method\":\"ping\"}"), "\"dup\"");
	/* the same id on another connection is no duplicate */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		    "\"arguments\":{\"command\":\"sleep 0.3\"}}}");
	struct tcc *c2 = tcc_connect(&d);
	assert_result(c2, exchange(c2, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}"), "5");
	tc_assert_ok(tcc_wait_id(c, "5", TCC_TIMEOUT_MS));
	tcc_close(c2);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- MCP methods ------------------------------------------------------- */

START_TEST(initialize_negotiation)
{
	static const char *const supported[] = { "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25",
						 "2026-07-28" };
	struct tcd d;
	tcd_start(&d, NULL);
	char *ws = realpath(d.ws, NULL);
	for (size_t i = 0; i < ELEMENTSOF(supported) + 3; i++) {
		struct tcc *c = tcc_connect(&d);
		const char *params;
		const char *want;
		if (i < ELEMENTSOF(supported)) {
			params = tcc_fmt(c, "{\"protocolVersion\":\"%s\",\"capabilities\":{},"
					    "\"clientInfo\":{\"name\":\"t\",\"version\":\"0\"}}", supported[i]);
			want = supported[i];
		} else if (i == ELEMENTSOF(supported)) {
			params = "{\"protocolVersion\":\"1999-01-01\",\"capabilities\":{},"
				 "\"clientInfo\":{\"name\":\"t\",\"version\":\"0\"}}";
			want = "2025-11-25";
		} else if (i == ELEMENTSOF(supported) + 1) {
			params = "{\"protocolVersion\":\"2099-01-01\",\"capabilities\":{}}";
			want = "2025-11-25";
		} else {
			params = "{\"capabilities\":{}}";
			want = "2025-11-25";
		}
		const struct json *r = tcc_request(c, "initialize", params);
		tc_assert_ok(r);
		const struct json *res = tj(r, "result");
		ck_assert_pstr_eq(tj_str(res, "protocolVersion"), want);
		ck_assert(tj_bool(res, "capabilities.tools.listChanged"));
		ck_assert_pstr_eq(tj_str(res, "serverInfo.name"), "toolcalld");
		ck_assert_msg(tj_str(res, "serverInfo.version") && *tj_str(res, "serverInfo.version"), "no version");
		ck_assert_msg(tj_str(res, "sessionId") && *tj_str(res, "sessionId"), "no sessionId");
		ck_assert_pstr_eq(tj_str(res, "workspace"), ws);
		/* notifications/initialized is a notification: no answer */
		tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
		ck_assert(tcc_quiet(c, 50));
		tc_assert_ok(tcc_request(c, "ping", NULL));
		tcc_close(c);
	}
	free(ws);

	/* a named session is kept: the same id comes back */
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_initialize(c, "\"sessionId\":\"my-session\"");
	ck_assert_pstr_eq(tj_str(r, "sessionId"), "my-session");
	/* two connections without a sessionId get different sessions */
	struct tcc *a = tcc_connect(&d), *b = tcc_connect(&d);
	const char *sa = tj_str(tcc_initialize(a, NULL), "sessionId");
	const char *sb = tj_str(tcc_initialize(b, NULL), "sessionId");
	ck_assert_msg(sa && sb && !str_eq(sa, sb), "sessions %s and %s", sa, sb);
	/* a bad budget is an invalid-params error */
	r = tcc_request(c, "initialize", "{\"protocolVersion\":\"2025-06-18\",\"budget\":{\"toolCalls\":-1}}");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	tcc_close(a);
	tcc_close(b);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(server_discover_shape)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "server/discover", NULL);
	tc_assert_ok(r);
	const struct json *res = tj(r, "result");
	ck_assert_pstr_eq(tj_str(res, "resultType"), "complete");
	const struct json *vs = tj(res, "supportedVersions");
	ck_assert_msg(vs && vs->type == JSON_ARRAY, "supportedVersions is not an array");
	static const char *const want[] = { "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25" };
	for (size_t i = 0; i < ELEMENTSOF(want); i++) {
		bool found = false;
		for (size_t j = 0; j < vs->u.arr.n; j++)
			found |= str_eq(json_str(vs->u.arr.items[j]), want[i]);
		ck_assert_msg(found, "%s not among supportedVersions", want[i]);
	}
	/* Every version listed is one initialize agrees to: it echoes it. */
	for (size_t j = 0; j < vs->u.arr.n; j++) {
		const char *v = json_str(vs->u.arr.items[j]);
		ck_assert_msg(v, "a version that is not a string");
		struct tcc *ic = tcc_connect(&d);
		const struct json *ir = tcc_request(ic, "initialize",
						    tcc_fmt(ic, "{\"protocolVersion\":\"%s\",\"capabilities\":{}}", v));
		tc_assert_ok(ir);
		ck_assert_pstr_eq(tj_str(ir, "result.protocolVersion"), v);
		tcc_close(ic);
	}
	ck_assert_msg(tj(res, "capabilities") && tj(res, "capabilities")->type == JSON_OBJECT, "no capabilities");
	ck_assert_msg(tj(res, "capabilities.tools"), "no tools capability");
	ck_assert_pstr_eq(tj_str(res, "_meta.serverInfo.name"), "toolcalld");
	ck_assert_msg(tj_str(res, "_meta.serverInfo.version"), "no serverInfo.version");
	/* works before and after initialize alike */
	tcc_initialize(c, NULL);
	tc_assert_ok(tcc_request(c, "server/discover", "{}"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(tools_list_fields)
{
	static const struct {
		const char *name, *side;
		bool idempotent;
		int64_t timeout;
	} want[] = {
		{ "delete_file", "write", false, 60000 },
		{ "edit_file", "write", false, 60000 },
		{ "glob", "read", true, 60000 },
		{ "list_dir", "read", true, 60000 },
		{ "make_dir", "write", true, 60000 },
		{ "memory", "write", false, 60000 },
		{ "move_file", "write", false, 60000 },
		{ "patch_file", "write", false, 60000 },
		{ "process_io", "execute", false, 600000 },
		{ "process_kill", "execute", false, 600000 },
		{ "process_list", "read", true, 60000 },
		{ "read_file", "read", true, 60000 },
		{ "search", "read", true, 60000 },
		{ "shell", "execute", false, 600000 },
		{ "stat", "read", true, 60000 },
		{ "write_file", "write", true, 60000 },
	};
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "tools/list", NULL);
	tc_assert_ok(r);
	ck_assert_int_eq(tj_len(r, "result.tools"), ELEMENTSOF(want));
	ck_assert_msg(!tj_has(r, "result.nextCursor"), "a cursor for 16 tools");
	for (size_t i = 0; i < ELEMENTSOF(want); i++) {
		const struct json *t = tj(r, tcc_fmt(c, "result.tools.%zu", i));
		ck_assert_pstr_eq(tj_str(t, "name"), want[i].name);
		ck_assert_msg(tj_str(t, "description") && strlen(tj_str(t, "description")) > 20,
			      "%s: no description", want[i].name);
		ck_assert_pstr_eq(tj_str(t, "inputSchema.type"), "object");
		ck_assert_msg(tj(t, "inputSchema.properties"), "%s: no properties", want[i].name);
		const struct json *meta = tj(t, "_meta");
		ck_assert_pstr_eq(json_str(json_get(meta, "toolcalld/sideEffects")), want[i].side);
		int64_t ms;
		ck_assert(json_get_int(json_get(meta, "toolcalld/timeoutMs"), &ms));
		ck_assert_int_eq(ms, want[i].timeout);
		const struct json *idem = json_get(meta, "toolcalld/idempotent");
		ck_assert(idem && idem->type == JSON_BOOL && idem->u.b == want[i].idempotent);
		/* annotations derived from the declaration */
		bool ro = str_eq(want[i].side, "none") || str_eq(want[i].side, "read");
		ck_assert_int_eq(tj_bool(t, "annotations.readOnlyHint"), ro);
		ck_assert_int_eq(tj_bool(t, "annotations.destructiveHint"), !ro);
		ck_assert_int_eq(tj_bool(t, "annotations.idempotentHint"), want[i].idempotent);
		ck_assert_int_eq(tj_bool(t, "annotations.openWorldHint"), str_eq(want[i].side, "execute"));
	}
	/* required fields of the schemas a model relies on */
	ck_assert_pstr_eq(tj_str(r, "result.tools.11.inputSchema.required.0"), "path");
	ck_assert_pstr_eq(tj_str(r, "result.tools.13.inputSchema.required.0"), "command");
	ck_assert_pstr_eq(tj_str(r, "result.tools.8.inputSchema.required.0"), "process_id");
	/* a cursor that was never given is refused */
	r = tcc_request(c, "tools/list", "{\"cursor\":\"bogus\"}");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- tools/call -------------------------------------------------------- */

START_TEST(call_without_initialize_and_result_shape)
{
	struct tcd d;
	tcd_start(&d, NULL);
	tcd_put(&d, "hello.txt", "hello world\n");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"hello.txt\"}");
	tc_assert_ok(r);
	const struct json *res = tj(r, "result");
	ck_assert_pstr_eq(tj_str(res, "content.0.type"), "text");
	ck_assert_msg(tj_str(res, "content.0.text"), "no text content");
	ck_assert_pstr_eq(tj_str(res, "structuredContent.content"), "hello world\n");
	ck_assert_pstr_eq(tj_str(res, "structuredContent.path"), "hello.txt");
	ck_assert_int_eq(tj_int(res, "structuredContent.size"), 12);
	ck_assert(!tj_bool(res, "structuredContent.truncated"));
	ck_assert(!tj_bool(res, "isError"));
	const struct json *meta = tj(res, "_meta");
	ck_assert_msg(json_str(json_get(meta, "toolcalld/callId")) && *json_str(json_get(meta, "toolcalld/callId")),
		      "no callId");
	int64_t v;
	ck_assert(json_get_int(json_get(meta, "toolcalld/attempts"), &v) && v == 1);
	ck_assert(json_get_int(json_get(meta, "toolcalld/durationMs"), &v) && v >= 0);
	const struct json *rep = json_get(meta, "toolcalld/replayed");
	ck_assert(rep && rep->type == JSON_BOOL && !rep->u.b);
	/* two calls, two call ids */
	const struct json *r2 = tcc_call(c, "read_file", "{\"path\":\"hello.txt\"}");
	ck_assert_str_ne(json_str(json_get(tj(r2, "result._meta"), "toolcalld/callId")),
			 json_str(json_get(meta, "toolcalld/callId")));
	/* arguments absent or null mean {} */
	tc_assert_ok(tcc_request(c, "tools/call", "{\"name\":\"list_dir\"}"));
	tc_assert_ok(tcc_request(c, "tools/call", "{\"name\":\"list_dir\",\"arguments\":null}"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(arguments_as_string)
{
	struct tcd d;
	tcd_start(&d, NULL);
	tcd_put(&d, "a.txt", "AAA");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "\"{\\\"path\\\": \\\"a.txt\\\"}\"");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "AAA");

	/* unparsable: validation_error with the parser's reason and offset */
	r = tcc_call(c, "read_file", "\"{\\\"path\\\": \\\"a.txt\\\",}\"");
	tc_assert_kind(r, "validation_error");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	const char *msg = tj_str(r, "error.message");
	ck_assert_msg(strstr(msg, "Invalid arguments for 'read_file'"), "message: %s", msg);
	/* the offending '}' is byte 17; the parser may count the byte
	 * after it */
	ck_assert_msg(strstr(msg, "byte 17") || strstr(msg, "byte 18"), "no byte offset in: %s", msg);
	ck_assert_msg(strstr(msg, "not valid JSON"), "no reason in: %s", msg);
	ck_assert_int_ge(tj_len(r, "error.data.errors"), 1);

	r = tcc_call(c, "read_file", "\"{\\\"path\\\": \"");
	tc_assert_kind(r, "validation_error");
	msg = tj_str(r, "error.message");
	ck_assert_msg(strstr(msg, "byte 9"), "no byte offset 9 in: %s", msg);
	ck_assert_msg(strstr(msg, "parse error"), "no reason in: %s", msg);

	/* a string holding JSON that is not an object */
	r = tcc_call(c, "read_file", "\"[1,2]\"");
	tc_assert_kind(r, "validation_error");
	/* arguments of another type */
	r = tcc_call(c, "read_file", "42");
	tc_assert_kind(r, "validation_error");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(not_found_lists_tools)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "red_file", "{\"path\":\"x\"}");
	tc_assert_kind(r, "not_found");
	ck_assert_int_eq(tj_int(r, "error.code"), -32601);
	ck_assert_pstr_eq(tj_str(r, "error.message"),
			  "Tool 'red_file' not found. Available: [delete_file, edit_file, glob, list_dir, make_dir, "
			  "memory, move_file, patch_file, process_io, process_kill, process_list, read_file, search, shell, "
			  "stat, write_file]");
	ck_assert(!tj_bool(r, "error.data.retryable"));
	ck_assert_pstr_eq(tj_str(r, "error.data.tool"), "red_file");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
	ck_assert_msg(tj_has(r, "error.data.durationMs"), "no durationMs");
	ck_assert_msg(tj_has(r, "error.data.callId"), "no callId");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(validation_error_reports_all)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":5}");
	tc_assert_kind(r, "validation_error");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	ck_assert_pstr_eq(tj_str(r, "error.message"), "Invalid arguments for 'read_file': /path: expected string, got number");
	ck_assert_int_eq(tj_len(r, "error.data.errors"), 1);
	ck_assert_pstr_eq(tj_str(r, "error.data.errors.0.path"), "/path");
	ck_assert_pstr_eq(tj_str(r, "error.data.errors.0.message"), "expected string, got number");
	ck_assert(!tj_bool(r, "error.data.retryable"));
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);

	/* three problems: all three reported */
	r = tcc_call(c, "read_file", "{\"path\":true,\"limit\":\"x\",\"bogus\":1}");
	tc_assert_kind(r, "validation_error");
	ck_assert_int_eq(tj_len(r, "error.data.errors"), 3);
	const char *msg = tj_str(r, "error.message");
	bool path = false, limit = false, bogus = false;
	for (int i = 0; i < 3; i++) {
		const char *p = tj_str(r, tcc_fmt(c, "error.data.errors.%d.path", i));
		const char *m = tj_str(r, tcc_fmt(c, "error.data.errors.%d.message", i));
		ck_assert_msg(p && m && *m, "error %d lacks path or message", i);
		path |= str_eq(p, "/path");
		limit |= str_eq(p, "/limit");
		bogus |= strstr(p, "bogus") || strstr(m, "bogus");
		ck_assert_msg(strstr(msg, m), "message %s does not include %s", msg, m);
	}
	ck_assert_msg(path && limit && bogus, "not every error reported: %s", msg);
	/* a required member missing */
	r = tcc_call(c, "read_file", "{}");
	tc_assert_kind(r, "validation_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "path"), "%s", tj_str(r, "error.message"));
	/* a tools/call without a name is a validation error too */
	r = tcc_request(c, "tools/call", "{\"arguments\":{}}");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- output encoding ----------------------------------------------------- */

START_TEST(no_raw_newline_in_output)
{
	struct tcd d;
	tcd_start(&d, CFG_SHELL_AUTO);
	static const char text[] = "line1\nline2\r\n\ttab\n\n\x0b\x0c\x1b[0m\xe2\x80\xa8 \xe2\x80\xa9" "end\n";
	tcd_put(&d, "multi.txt", text);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"multi.txt\"}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), text);
	/* the shell writes newlines, CRs and NULs to both streams */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		    "\"arguments\":{\"command\":\"printf 'a\\\\nb\\\\r\\\\n\\\\000c\\\\n'; printf 'e\\\\nf\\\\n' >&2\"}}}");
	size_t len;
	const char *line = tcc_recv_line(c, TCC_TIMEOUT_MS, &len);
	ck_assert_msg(line, "no answer");
	ck_assert_msg(memchr(line, '\r', len) == NULL, "raw CR in %s", line);
	ck_assert_msg(memchr(line, '\0', len) == NULL, "raw NUL in output");
	ck_assert_msg(utf8_valid(line, len), "output is not UTF-8");
	r = tcc_parse(c, line, len);
	tc_assert_ok(r);
	const struct json *out = tj(r, "result.structuredContent.stdout");
	ck_assert(out && out->type == JSON_STRING);
	/* the NUL byte: escaped as \u0000 or replaced by U+FFFD */
	ck_assert_msg((out->u.str.len == 12 && memcmp(out->u.str.s, "a\nb\r\n\0c\ne\nf\n", 12) == 0) ||
			      (out->u.str.len == 14 && memcmp(out->u.str.s, "a\nb\r\n\xef\xbf\xbd" "c\ne\nf\n", 14) == 0),
		      "output: %s", tj_text(out));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(output_is_utf8)
{
	struct tcd d;
	tcd_start(&d, CFG_SHELL_AUTO);
	static const char bad[] = "ok \xff\xfe \xc3\x28 \xed\xa0\x80 end";
	free(tcd_write_ws(&d, "bad.bin", bad, sizeof(bad) - 1, 0));
	struct tcc *c = tcc_connect(&d);

	/* utf8: whatever the answer, it is valid UTF-8 JSON */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
		    "\"arguments\":{\"path\":\"bad.bin\"}}}");
	size_t len;
	const char *line = tcc_recv_line(c, TCC_TIMEOUT_MS, &len);
	ck_assert_msg(line && utf8_valid(line, len), "read_file answer is not UTF-8");
	const struct json *r = tcc_parse(c, line, len);
	if (tj_has(r, "error")) {
		/* refusing is fine if it says to use base64 */
		ck_assert_msg(strstr(tj_str(r, "error.message"), "base64"), "%s", tj_str(r, "error.message"));
	} else if (tj_has(r, "result.structuredContent.binary")) {
		/* so is describing it, saying to use base64 */
		ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "base64"), "%s",
			      tj_str(r, "result.content.0.text"));
	} else {
		const char *s = tj_str(r, "result.structuredContent.content");
		ck_assert_msg(s && strstr(s, "\xef\xbf\xbd") && strstr(s, "end"), "content %s", s);
	}

	/* base64 gives the bytes back exactly */
	r = tcc_call(c, "read_file", "{\"path\":\"bad.bin\",\"encoding\":\"base64\"}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.encoding"), "base64");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "b2sg//4gwygg7aCAIGVuZA==");

	/* a shell printing invalid bytes: replaced, valid UTF-8 on the wire */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		    "\"arguments\":{\"command\":\"printf 'x\\\\377y\\\\300z'; printf '\\\\376' >&2\"}}}");
	line = tcc_recv_line(c, TCC_TIMEOUT_MS, &len);
	ck_assert_msg(line && utf8_valid(line, len), "shell answer is not UTF-8");
	r = tcc_parse(c, line, len);
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.stdout"), "x\xef\xbf\xbdy\xef\xbf\xbdz\xef\xbf\xbd");
	ck_assert_msg(utf8_valid(tj_str(r, "result.content.0.text"), strlen(tj_str(r, "result.content.0.text"))),
		      "text content not UTF-8");

	/* a file name with invalid bytes in list_dir */
	free(tcd_write_ws(&d, "n\xffm.txt", "x", 1, 0));
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"list_dir\"}}");
	line = tcc_recv_line(c, TCC_TIMEOUT_MS, &len);
	ck_assert_msg(line && utf8_valid(line, len), "list_dir answer is not UTF-8");
	tc_assert_ok(tcc_parse(c, line, len));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A request with invalid UTF-8 in it is a parse error, not a crash. */
START_TEST(invalid_utf8_request)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	static const char bad[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi\xffng\"}\n";
	ck_assert_int_eq(tcc_send_raw(c, bad, sizeof(bad) - 1), 0);
	size_t len;
	const char *line = tcc_recv_line(c, TCC_TIMEOUT_MS, &len);
	ck_assert_msg(line && utf8_valid(line, len), "answer not UTF-8");
	const struct json *r = tcc_parse(c, line, len);
	ck_assert_int_eq(tj_int(r, "error.code"), -32700);
	/* a NUL byte inside a line */
	static const char nul[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"\0}\n";
	ck_assert_int_eq(tcc_send_raw(c, nul, sizeof(nul) - 1), 0);
	r = json_doc_root(tcc_recv(c, TCC_TIMEOUT_MS));
	ck_assert_int_eq(tj_int(r, "error.code"), -32700);
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST


/* A client that shuts its sending side (socat at the end of its input)
 * still gets its answers; one that closes both ways has gone away. */
START_TEST(half_close_still_answered)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}}}");
	struct tcc *c = tcc_connect(&d);
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
		    "\"params\":{\"name\":\"shell\",\"arguments\":{\"command\":\"sleep 0.3; echo late\"}}}");
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
	ck_assert_int_eq(shutdown(tcc_fd(c), SHUT_WR), 0);
	const struct json *r = tcc_wait_id(c, "2", 5000);
	ck_assert_ptr_nonnull(r);
	r = tcc_wait_id(c, "1", 5000);
	ck_assert_ptr_nonnull(r);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "late\n");
	/* Then the daemon closes its side. */
	ck_assert_ptr_null(tcc_recv_line(c, 2000, NULL));
	ck_assert(tcc_eof(c));
	tcc_close(c);

	/* A last line without its newline (printf '{...}' | socat ...) is
	 * still a line when the input ends there. */
	c = tcc_connect(&d);
	static const char last[] = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n"
				   "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}";
	ck_assert_int_eq(tcc_send_raw(c, last, sizeof(last) - 1), 0);
	ck_assert_int_eq(shutdown(tcc_fd(c), SHUT_WR), 0);
	ck_assert_ptr_nonnull(tcc_wait_id(c, "3", 5000));
	r = tcc_wait_id(c, "4", 5000);
	ck_assert_ptr_nonnull(r);
	tc_assert_ok(r);
	ck_assert_ptr_null(tcc_recv_line(c, 2000, NULL));
	ck_assert(tcc_eof(c));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A client sends a pipeline of calls the daemon answers synchronously,
 * within the read (batches of file reads, then more lines), and goes away
 * at once: the daemon lets go of the connection wherever it is in the
 * pipeline, touching nothing freed (AddressSanitizer builds say so), and
 * serves on. */
START_TEST(closed_mid_pipeline)
{
	struct tcd d;
	tcd_start(&d, NULL);
	tcd_put_filler(&d, "big.txt", 32 * 1024, 0);
	for (int round = 0; round < 3; round++) {
		struct tcc *c = tcc_connect(&d);
		struct buf text = {0};
		for (int line = 0; line < 20; line++) {
			buf_putc(&text, '[');
			for (int i = 0; i < 10; i++)
				buf_printf(&text, "%s{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
					   "\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"big.txt\"}}}",
					   i ? "," : "", line * 10 + i);
			buf_puts(&text, "]\n");
		}
		buf_puts(&text, "{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}\n");
		ck_assert_int_eq(tcc_send_raw(c, buf_head(&text), buf_size(&text)), 0);
		buf_free(&text);
		/* The first answers are coming: the pipeline is being handled. */
		if (round > 0)
			ck_assert_ptr_nonnull(tcc_recv_line(c, 5000, NULL));
		tcc_close(c);
	}
	struct tcc *o = tcc_connect(&d);
	ck_assert(tc_wait_until(({
		const struct json *st = tcc_request(o, "admin/stats", NULL);
		tj_int(st, "result.connections.open") == 1;
	}), 10000));
	tc_assert_ok(tcc_request(o, "ping", NULL));
	tcc_close(o);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("integ_proto");
	TCase *tc = tcase_create("jsonrpc");
	tcase_add_test(tc, spec_calls_and_notifications);
	tcase_add_test(tc, spec_batches);
	tcase_add_test(tc, batch_waits_for_all_in_order);
	tcase_add_test(tc, ids_echoed_byte_for_byte);
	tcase_add_test(tc, framing_crlf_and_blank_lines);
	tcase_add_test(tc, framing_message_too_long);
	tcase_add_test(tc, nesting_limits);
	tcase_add_test(tc, nesting_limit_configurable);
	tcase_add_test(tc, batch_length_limit);
	tcase_add_test(tc, batch_answers_bounded);
	tcase_add_test(tc, duplicate_inflight_id);
	tcase_add_test(tc, invalid_utf8_request);
	suite_add_tcase(s, tc);

	tc = tcase_create("mcp");
	tcase_add_test(tc, initialize_negotiation);
	tcase_add_test(tc, server_discover_shape);
	tcase_add_test(tc, tools_list_fields);
	tcase_add_test(tc, call_without_initialize_and_result_shape);
	tcase_add_test(tc, arguments_as_string);
	tcase_add_test(tc, not_found_lists_tools);
	tcase_add_test(tc, validation_error_reports_all);
	tcase_add_test(tc, no_raw_newline_in_output);
	tcase_add_test(tc, output_is_utf8);
	tcase_add_test(tc, half_close_still_answered);
	tcase_add_test(tc, closed_mid_pipeline);
	suite_add_tcase(s, tc);

	return run_suite(s);
}
