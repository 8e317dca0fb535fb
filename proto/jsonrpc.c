/* SPDX-License-Identifier: MIT */
/*
 * JSON-RPC 2.0 framing and codec: newline-delimited messages with a size
 * limit, request validation as the specification's examples show, and
 * response writing with ids echoed byte for byte from the request text.
 */
#include "proto/jsonrpc.h"

#include <string.h>

enum frame_result framer_next(struct framer *f, struct buf *in, const char **line, size_t *len)
{
	for (;;) {
		const char *head = buf_head(in);
		size_t size = buf_size(in);

		/* Consume the line handed out by the previous call. */
		const char *nl = NULL;
		if (f->scanned < size)
			nl = memchr(head + f->scanned, '\n', size - f->scanned);

		if (f->discarding) {
			if (!nl) {
				buf_consume(in, size);
				f->scanned = 0;
				return FRAME_NONE;
			}
			buf_consume(in, (size_t)(nl - head) + 1);
			f->discarding = false;
			f->scanned = 0;
			continue;
		}

		if (!nl) {
			f->scanned = size;
			if (size > f->max + 1) {
				/* Over the limit with no end in sight: report once,
				 * then drop the rest of the line as it arrives. */
				buf_consume(in, size);
				f->scanned = 0;
				f->discarding = true;
				return FRAME_TOO_LONG;
			}
			return FRAME_NONE;
		}

		size_t n = (size_t)(nl - head);
		size_t total = n + 1;
		if (n && head[n - 1] == '\r')
			n--;
		if (n > f->max) {
			buf_consume(in, total);
			f->scanned = 0;
			return FRAME_TOO_LONG;
		}
		/* Blank lines (only white space) are ignored. */
		size_t i = 0;
		while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r'))
			i++;
		if (i == n) {
			buf_consume(in, total);
			f->scanned = 0;
			continue;
		}
		/* Hand the line out; it is consumed now, and the buffer is not
		 * touched again before the next call (consume never moves data). */
		*line = head;
		*len = n;
		buf_consume(in, total);
		f->scanned = 0;
		return FRAME_LINE;
	}
}

int jrpc_parse_request(const struct json *v, const char *src, struct jrpc_req *req, const char **why)
{
	memset(req, 0, sizeof(*req));
	req->msg = v;
	req->src = src;
	if (!v || v->type != JSON_OBJECT) {
		*why = "a request must be an object";
		return JRPC_INVALID_REQUEST;
	}

	/* One pass over the members instead of a lookup per field: this runs
	 * for every request. Keys are unique (the parser refuses repeats). */
	const struct json *id = NULL, *version = NULL, *method = NULL, *params = NULL;
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.members[i];
		switch (m->key_len) {
		case 2:
			if (memcmp(m->key, "id", 2) == 0)
				id = m->value;
			break;
		case 6:
			if (memcmp(m->key, "method", 6) == 0)
				method = m->value;
			else if (memcmp(m->key, "params", 6) == 0)
				params = m->value;
			break;
		case 7:
			if (memcmp(m->key, "jsonrpc", 7) == 0)
				version = m->value;
			break;
		}
	}
	bool id_ok = !id || id->type == JSON_STRING || id->type == JSON_NUMBER || id->type == JSON_NULL;
	if (id && id_ok) {
		req->id = src + id->off;
		req->id_len = id->len;
	}


	if (!id_ok) {
		*why = "id must be a string, a number or null";
		return JRPC_INVALID_REQUEST;
	}
	if (!version || version->type != JSON_STRING || version->u.str.len != 3 ||
	    memcmp(version->u.str.s, "2.0", 3) != 0) {
		*why = "jsonrpc must be exactly \"2.0\"";
		return JRPC_INVALID_REQUEST;
	}
	if (!method || method->type != JSON_STRING) {
		*why = "method must be a string";
		return JRPC_INVALID_REQUEST;
	}
	if (memchr(method->u.str.s, '\0', method->u.str.len)) {
		*why = "method must not contain NUL";
		return JRPC_INVALID_REQUEST;
	}
	if (params && params->type != JSON_OBJECT && params->type != JSON_ARRAY) {
		*why = "params must be an object or an array";
		return JRPC_INVALID_REQUEST;
	}
	req->method = method->u.str.s;
	req->method_len = method->u.str.len;
	req->params = params;
	return 0;
}

static void write_id(struct buf *out, const char *id, size_t id_len)
{
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
	buf_append(out, head, sizeof(head) - 1);
	if (id)
		buf_append(out, id, id_len);
	else
		buf_append(out, "null", 4);
}

void jrpc_write_result_head(struct buf *out, const char *id, size_t id_len)
{
	write_id(out, id, id_len);
	buf_append(out, ",\"result\":", 10);
}

void jrpc_write_result(struct buf *out, const char *id, size_t id_len, const char *result, size_t result_len)
{
	jrpc_write_result_head(out, id, id_len);
	buf_append(out, result, result_len);
	buf_putc(out, '}');
}

void jrpc_write_error(struct buf *out, const char *id, size_t id_len, int code, const char *message,
		      const char *data, size_t data_len)
{
	write_id(out, id, id_len);
	buf_printf(out, ",\"error\":{\"code\":%d,\"message\":", code);
	json_quote_utf8(out, message, strlen(message));
	if (data) {
		buf_puts(out, ",\"data\":");
		buf_append(out, data, data_len);
	}
	buf_puts(out, "}}");
}

void jrpc_write_notification(struct buf *out, const char *method, const char *params, size_t params_len)
{
	buf_puts(out, "{\"jsonrpc\":\"2.0\",\"method\":");
	json_quote_utf8(out, method, strlen(method));
	if (params) {
		buf_puts(out, ",\"params\":");
		buf_append(out, params, params_len);
	}
	buf_putc(out, '}');
}
