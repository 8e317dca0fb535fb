/* SPDX-License-Identifier: MIT */
/*
 * Requests the daemon sends its clients (roots/list, elicitation/create):
 * ids of the daemon's own ("tc-N"), a deadline each, at most
 * CONN_OUTREQS_MAX waiting per connection, and the client's answers routed
 * back to whoever asked, after checking them. An answer to no request
 * waiting is ignored; the requests of a connection that closes end with
 * -ECONNRESET. The table knows no connection: conn.c sends the lines and
 * hands the answers in.
 */
#include "daemon/conn_requests.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "proto/base/util.h"
#include "proto/base/buf.h"
#include "proto/json.h"

void outreqs_init(struct outreqs *t, struct ev_loop *ev)
{
	list_init(&t->list);
	t->ev = ev;
}

/* Ends a request the daemon sent: tells its sender (unless fn is NULL), frees it. */
static void outreq_end(struct outreq *o, int r, const struct json *result, const struct json *error)
{
	struct outreqs *t = o->table;
	list_remove(&o->node);
	t->n--;
	ev_timer_stop(t->ev, &o->timer);
	if (o->fn)
		o->fn(o->arg, r, result, error);
	if (o->arg_free)
		o->arg_free(o->arg);
	free(o);
}

static void on_outreq_timeout(struct ev_loop *ev, ev_timer *w, int revents)
{
	outreq_end(container_of(w, struct outreq, timer), -ETIMEDOUT, NULL, NULL);
}

int outreqs_add(struct outreqs *t, const char *method, const char *params, size_t n, uint64_t timeout_ms,
		conn_reply_fn fn, void *arg, void (*arg_free)(void *arg), struct buf *line, struct outreq **ret)
{
	if (t->n >= CONN_OUTREQS_MAX)
		return -EBUSY;
	struct outreq *o = xcalloc(1, sizeof(*o));
	o->table = t;
	o->n = ++t->counter;
	o->fn = fn;
	o->arg = arg;
	o->arg_free = arg_free;
	list_insert_tail(&t->list, &o->node);
	t->n++;
	ev_timer_init(&o->timer, on_outreq_timeout, (double)timeout_ms / 1000.0, 0.);
	ev_timer_start(t->ev, &o->timer);
	/* Ids of the daemon's own, strings a client's answer must echo. */
	buf_printf(line, "{\"jsonrpc\":\"2.0\",\"id\":\"tc-%llu\",\"method\":", (unsigned long long)o->n);
	json_quote(line, method, strlen(method));
	if (params) {
		buf_append(line, ",\"params\":", 10);
		buf_append(line, params, n);
	}
	buf_putc(line, '}');
	if (ret)
		*ret = o;
	return 0;
}

void conn_request_forget(struct outreq *o)
{
	if (!o)
		return;
	o->fn = NULL;
	outreq_end(o, -ECANCELED, NULL, NULL);
}

bool conn_is_response(const struct json *v)
{
	return v && v->type == JSON_OBJECT && !json_get(v, "method") &&
	       (json_get(v, "result") || json_get(v, "error"));
}

void outreqs_take(struct outreqs *t, const struct json *v, int fd)
{
	const struct json *id = json_get(v, "id"), *result = json_get(v, "result"), *error = json_get(v, "error");
	struct outreq *o = NULL;
	if (id && id->type == JSON_STRING && id->u.str.len > 3 && id->u.str.len < 24 &&
	    memcmp(id->u.str.s, "tc-", 3) == 0) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(id->u.str.s + 3, &end, 10);
		if (!errno && end == id->u.str.s + id->u.str.len && id->u.str.s[3] >= '0' && id->u.str.s[3] <= '9')
			for (struct list *pos = t->list.next; pos != &t->list; pos = pos->next) {
				struct outreq *x = list_entry(pos, struct outreq, node);
				if (x->n == n) {
					o = x;
					break;
				}
			}
	}
	if (!o) {
		log_debug("an answer to no request of ours (fd %d) ignored", fd);
		return;
	}
	const char *ver = json_str(json_get(v, "jsonrpc"));
	bool ok = ver && str_eq(ver, "2.0") && !(result && error);
	if (ok && error)
		ok = error->type == JSON_OBJECT && json_is_int(json_get(error, "code")) &&
		     json_str(json_get(error, "message"));
	if (!ok) {
		log_debug("a malformed answer to request tc-%llu (fd %d)", (unsigned long long)o->n, fd);
		outreq_end(o, -EPROTO, NULL, NULL);
		return;
	}
	outreq_end(o, 0, result, error);
}

void outreqs_end(struct outreqs *t)
{
	while (!list_empty(&t->list))
		outreq_end(list_first(&t->list, struct outreq, node), -ECONNRESET, NULL, NULL);
}
