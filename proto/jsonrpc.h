/* SPDX-License-Identifier: MIT */
/*
 * JSON-RPC 2.0 over newline-delimited JSON: line framing with a size
 * limit, classification of a parsed message into requests, notifications,
 * batches and invalid values, and the writing of responses. Knows nothing
 * of tools or sockets.
 */
#ifndef TC_JSONRPC_H
#define TC_JSONRPC_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/base/buf.h"
#include "proto/json.h"

enum {
	JRPC_PARSE_ERROR = -32700,
	JRPC_INVALID_REQUEST = -32600,
	JRPC_METHOD_NOT_FOUND = -32601,
	JRPC_INVALID_PARAMS = -32602,
	JRPC_INTERNAL_ERROR = -32603,
};

/*
 * Line framing over an input buffer. Lines end with "\n" ("\r\n" too);
 * blank lines are skipped. A line longer than max is reported once as
 * FRAME_TOO_LONG and the rest of it is discarded as it arrives.
 */
struct framer {
	size_t max;		/* bytes in one message, newline excluded */
	size_t scanned;		/* bytes of the buffer already searched for "\n" */
	bool discarding;	/* inside an over-long line */
};

enum frame_result {
	FRAME_NONE,		/* need more input */
	FRAME_LINE,		/* *line, *len: one message (without the newline) */
	FRAME_TOO_LONG,		/* answer -32600 once; the line is being discarded */
};

/*
 * Finds the next message in in. A returned line stays valid until the next
 * call, which consumes it from in.
 */
enum frame_result framer_next(struct framer *f, struct buf *in, const char **line, size_t *len);

/* One request (or notification) inside a message. */
struct jrpc_req {
	const struct json *msg;
	const char *src;		/* the text msg was parsed from */
	struct json_doc *doc;		/* its document, when the caller sets it */
	const char *method;
	size_t method_len;
	const struct json *params;	/* NULL when absent */
	const char *id;			/* the id's text as sent; NULL: a notification */
	size_t id_len;
};

/*
 * Checks that v is a request object. Returns 0 and fills req, or
 * JRPC_INVALID_REQUEST with *why set; then req->id is the id when it could
 * be read (else NULL, to be answered with id null). src is the text v was
 * parsed from (ids are echoed from it byte for byte).
 */
int jrpc_parse_request(const struct json *v, const char *src, struct jrpc_req *req, const char **why);

/* Writes one response object (no newline) to out. id NULL means null. */
void jrpc_write_result(struct buf *out, const char *id, size_t id_len, const char *result, size_t result_len);
/* The start of a result answer, up to and including "result":; the caller
 * appends the value and the closing brace (so a large value is written in
 * place rather than copied in). */
void jrpc_write_result_head(struct buf *out, const char *id, size_t id_len);
void jrpc_write_error(struct buf *out, const char *id, size_t id_len, int code, const char *message,
		      const char *data, size_t data_len);
/* Writes a notification object (no newline) with params as JSON text. */
void jrpc_write_notification(struct buf *out, const char *method, const char *params, size_t params_len);

#endif
