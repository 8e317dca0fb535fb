/* SPDX-License-Identifier: MIT */
/*
 * For conn.c: the side of the daemon's own requests (conn_request(), in
 * conn.h) that meets the connection's input and its end.
 */
#ifndef TC_CONN_REQUESTS_H
#define TC_CONN_REQUESTS_H

#include <stdbool.h>

struct conn;
struct json;

/* True for a response: an object with a result or an error and no method. */
bool conn_is_response(const struct json *v);
/* Routes a client's answer to the request of the daemon's it names. An
 * answer to no request waiting is ignored (logged at debug level); a
 * malformed one ends its request with -EPROTO. */
void conn_take_response(struct conn *c, const struct json *v);
/* Ends every request of c still waiting, with -ECONNRESET. */
void conn_requests_end(struct conn *c);

#endif
