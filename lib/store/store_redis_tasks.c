/* SPDX-License-Identifier: MIT */
/*
 * The Redis store's task and session records: put, swapped (a cancel),
 * read back and listed; what comes back is checked before it is used.
 */
#include "lib/store/store_redis_internal.h"

/* --- tasks ------------------------------------------------------------- */

static void task_put_reply(struct rstore *r, redisReply *reply, void *arg);

/* Sends w's put (or swap): false when it cannot be sent. */
static bool put_send(struct store_wait *w, const char *old, size_t old_len)
{
	struct rstore *r = w->r;
	char uidtxt[24];
	snprintf(uidtxt, sizeof(uidtxt), "%u", (unsigned)w->uid);
	_cleanup_free_ char *key = rs_uid_key(r, "task", w->uid, w->id);
	char keep[24];
	snprintf(keep, sizeof(keep), "%" PRIu64, MAX(w->keep_ms, 1));
	if (w->swap) {
		_cleanup_free_ char *who = xasprintf("%s:%s", uidtxt, w->id);
		const char *kv[] = { key, r->cancel_chan, old, w->meta, keep, who };
		size_t lens[] = { strlen(key), strlen(r->cancel_chan), old_len, w->meta_len, strlen(keep), strlen(who) };
		w->cmd = rs_send_eval(r, task_put_reply, w, S_TASK_SWAP, 2, 4, kv, lens);
		return w->cmd != NULL;
	}
	_cleanup_free_ char *set = xasprintf("%stasks:%s", r->prefix, uidtxt);
	_cleanup_free_ char *pre = rs_uid_key(r, "task", w->uid, "");
	_cleanup_free_ char *cancelled = xasprintf("{\"task\":{\"taskId\":\"%s\",\"status\":\"cancelled\"", w->id);
	char ord[24], max[24];
	snprintf(ord, sizeof(ord), "%" PRIu64, w->order);
	snprintf(max, sizeof(max), "%zu", MAX(r->cfg.max_tasks, 1));
	const char *kv[] = { key, set, w->meta, keep, ord, w->id, max, cancelled, w->create ? "1" : "0", pre };
	size_t lens[] = { strlen(key), strlen(set), w->meta_len, strlen(keep), strlen(ord), strlen(w->id),
			  strlen(max), strlen(cancelled), 1, strlen(pre) };
	w->cmd = rs_send_eval(r, task_put_reply, w, S_TASK_PUT, 2, 8, kv, lens);
	return w->cmd != NULL;
}

static struct store_wait *put_new(struct rstore *r, uid_t uid, const char *id, const char *meta, size_t meta_len,
				  uint64_t order, uint64_t keep_ms, store_put_cb cb, void *arg)
{
	struct store_wait *w = rs_wait_new(r, NULL, arg);
	w->put_cb = cb;
	w->uid = uid;
	w->id = xstrdup(id);
	w->meta = xmemdup(meta, meta_len + 1);
	w->meta[meta_len] = '\0';
	w->meta_len = meta_len;
	w->order = order;
	w->keep_ms = keep_ms;
	return w;
}

static void put_ignored(void *arg, int r, const char *kept, size_t n) {}

struct store_wait *rs_task_put(struct store *s, uid_t uid, const char *id, const char *meta,
			       size_t meta_len, uint64_t order, uint64_t keep_ms, bool create,
			       store_put_cb cb, void *arg)
{
	struct rstore *r = RS(s);
	if (!r->cmd) {
		if (cb && r->cfg.fail_unavailable) {
			cb(arg, -EIO, NULL, 0);
			return NULL;
		}
		return store_task_put(r->local, uid, id, meta, meta_len, order, keep_ms, create, cb, arg);
	}
	struct store_wait *w = put_new(r, uid, id, meta, meta_len, order, keep_ms, cb ? cb : put_ignored, arg);
	w->create = create;
	if (put_send(w, NULL, 0))
		return cb ? w : NULL;
	rs_wait_fallback(w);
	return NULL;
}

struct store_wait *rs_task_swap(struct store *s, uid_t uid, const char *id, const char *old,
				size_t old_len, const char *meta, size_t meta_len, uint64_t keep_ms,
				store_put_cb cb, void *arg)
{
	struct rstore *r = RS(s);
	if (!r->cmd) {
		cb(arg, -EIO, NULL, 0);
		return NULL;
	}
	struct store_wait *w = put_new(r, uid, id, meta, meta_len, 0, keep_ms, cb, arg);
	w->swap = true;
	if (put_send(w, old, old_len))
		return w;
	rs_wait_fallback(w);
	return NULL;
}

static void task_put_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct store_wait *w = rs_reply_wait(arg, reply);
	if (!w)
		return;
	long long code = -1;
	if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 && reply->element[0]->type == REDIS_REPLY_INTEGER)
		code = reply->element[0]->integer;
	/* put: 1 stored, 0 refused, 2 cancelled; swap: 2 swapped, 1 stale, 0 none. */
	bool with_rec = w->swap ? code == 1 : code == 2;
	const redisReply *rec = with_rec && reply->elements == 2 ? reply->element[1] : NULL;
	if (code < 0 || code > 2 || reply->elements != (with_rec ? 2u : 1u) ||
	    (with_rec && (rec->type != REDIS_REPLY_STRING || rec->len > r->cfg.max_value_bytes + MAX_TASK_META))) {
		rs_outage(r, "unexpected reply to a task write: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong shape");
		rs_wait_fallback(w);
		return;
	}
	int res = w->swap ? (code == 2 ? 0 : code == 1 ? -ESTALE : -ENOENT)
			  : (code == 1 ? 0 : code == 0 ? -EBUSY : -ECANCELED);
	store_put_cb cb = w->put_cb;
	void *cb_arg = w->arg;
	rs_wait_free(w);
	cb(cb_arg, res, rec ? rec->str : NULL, rec ? rec->len : 0);
}

void rs_hear_cancels(struct store *s, void (*fn)(void *arg, uid_t uid, const char *id), void *arg)
{
	RS(s)->task_fn = fn;
	RS(s)->task_arg = arg;
}

void rs_reconfigure(struct store *s, const struct store_config *c)
{
	struct rstore *r = RS(s);
	struct store_config d;
	store_config_defaults(&d);
	r->cfg.lease_ms = c->lease_ms ? c->lease_ms : d.lease_ms;
	r->cfg.timeout_ms = c->timeout_ms ? c->timeout_ms : d.timeout_ms;
	r->cfg.fail_unavailable = c->fail_unavailable;
	r->cfg.max_tasks = c->max_tasks;
	r->cfg.server_uid = c->server_uid;	/* from the next connect on */
	r->poll_ms = MIN(MAX(r->cfg.lease_ms / 4, 100), 2000);
	store_reconfigure(r->local, c);
}

/* A task's JSON read back: an object of bounded size, or nothing. */
static bool task_meta_ok(const struct rstore *r, const redisReply *m)
{
	if (m->type != REDIS_REPLY_STRING || m->len == 0 || m->len > r->cfg.max_value_bytes + MAX_TASK_META)
		return false;
	struct json_doc *doc = NULL;
	struct json_err err;
	/* Deep enough for an outcome's structured content inside. */
	if (json_parse(m->str, m->len, 0, 96, &doc, &err) < 0)
		return false;
	bool ok = json_doc_root(doc)->type == JSON_OBJECT;
	json_doc_unref(doc);
	return ok;
}

/* A GET of one record answered: cb gets it, or -ENOENT; one that valid
 * says this store did not write is an outage (the local store answers). */
static void record_reply(struct rstore *r, redisReply *reply, void *arg,
			 bool (*valid)(const struct rstore *, const redisReply *), const char *what)
{
	struct store_wait *w = rs_reply_wait(arg, reply);
	if (!w)
		return;
	void (*cb)(void *, int, const char *, size_t) = w->get_cb;
	void *cb_arg = w->arg;
	if (reply->type == REDIS_REPLY_NIL) {
		rs_wait_free(w);
		cb(cb_arg, -ENOENT, NULL, 0);
		return;
	}
	if (!valid(r, reply)) {
		rs_outage(r, "%s", what);
		rs_wait_fallback(w);
		return;
	}
	rs_wait_free(w);
	cb(cb_arg, 0, reply->str, reply->len);
}

/* Sends the GET of uid's record id of kind; NULL when it could not leave
 * (the local store has answered). */
static struct store_wait *record_get(struct rstore *r, const char *kind, uid_t uid, const char *id,
				     void (*fn)(struct rstore *, redisReply *, void *),
				     void (*cb)(void *arg, int r, const char *rec, size_t n), void *arg)
{
	struct store_wait *w = rs_wait_new(r, NULL, arg);
	w->get_cb = cb;
	_cleanup_free_ char *key = rs_uid_key(r, kind, uid, id);
	const char *argv[] = { "GET", key };
	w->cmd = rs_send_cmd(r, fn, w, 2, argv, NULL);
	if (!w->cmd) {
		rs_wait_fallback(w);
		return NULL;
	}
	return w;
}

static void task_get_reply(struct rstore *r, redisReply *reply, void *arg)
{
	record_reply(r, reply, arg, task_meta_ok, "a task record is not one this store wrote");
}

struct store_wait *rs_task_get(struct store *s, uid_t uid, const char *id,
			       void (*cb)(void *arg, int r, const char *meta, size_t n), void *arg)
{
	struct rstore *r = RS(s);
	if (!r->cmd)
		return store_task_get(r->local, uid, id, cb, arg);
	return record_get(r, "task", uid, id, task_get_reply, cb, arg);
}

static void task_list_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct store_wait *w = rs_reply_wait(arg, reply);
	if (!w)
		return;
	bool ok = reply->type == REDIS_REPLY_ARRAY && reply->elements % 2 == 0 &&
		  reply->elements <= 2 * (w->limit + 1);
	size_t n = ok ? reply->elements / 2 : 0;
	_cleanup_free_ char **metas = xcalloc(n + 1, sizeof(char *));
	_cleanup_free_ uint64_t *orders = xcalloc(n + 1, sizeof(uint64_t));
	for (size_t i = 0; ok && i < n; i++) {
		const redisReply *o = reply->element[2 * i], *m = reply->element[2 * i + 1];
		char *end = NULL;
		double d = o->type == REDIS_REPLY_STRING ? strtod(o->str, &end) : -1;
		if (!end || *end || d < 0 || d > 9007199254740992.0 || !task_meta_ok(r, m)) {
			ok = false;
			break;
		}
		orders[i] = (uint64_t)d;
		metas[i] = m->str;
	}
	if (!ok) {
		rs_outage(r, "unexpected reply to a task list");
		rs_wait_fallback(w);
		return;
	}
	uint64_t next = 0;
	if (n > w->limit) {
		n = w->limit;
		next = orders[n - 1];
	}
	void (*cb)(void *, int, char **, size_t, uint64_t) = w->list_cb;
	void *cb_arg = w->arg;
	rs_wait_free(w);
	cb(cb_arg, 0, metas, n, next);
}

struct store_wait *rs_task_list(struct store *s, uid_t uid, uint64_t after, size_t limit,
				void (*cb)(void *arg, int r, char **metas, size_t n, uint64_t next),
				void *arg)
{
	struct rstore *r = RS(s);
	if (!r->cmd)
		return store_task_list(r->local, uid, after, limit, cb, arg);
	struct store_wait *w = rs_wait_new(r, NULL, arg);
	w->list_cb = cb;
	w->limit = limit ? limit : 1;
	_cleanup_free_ char *set = xasprintf("%stasks:%u", r->prefix, (unsigned)uid);
	_cleanup_free_ char *pre = rs_uid_key(r, "task", uid, "");
	char aft[24], lim[24];
	snprintf(aft, sizeof(aft), "%" PRIu64, after);
	snprintf(lim, sizeof(lim), "%zu", w->limit + 1);
	const char *kv[] = { set, aft, lim, pre };
	w->cmd = rs_send_eval(r, task_list_reply, w, S_LIST, 1, 3, kv, NULL);
	if (!w->cmd) {
		rs_wait_fallback(w);
		return NULL;
	}
	return w;
}

/* --- session records ----------------------------------------------------- */

void rs_session_put(struct store *s, uid_t uid, const char *id, const char *rec, size_t n,
		    uint64_t keep_ms)
{
	struct rstore *r = RS(s);
	char buf[24];
	const char *px = rs_u64_str(buf, keep_ms ? keep_ms : 1);
	_cleanup_free_ char *key = rs_uid_key(r, "session", uid, id);
	const char *argv[] = { "SET", key, rec, "PX", px };
	const size_t lens[] = { 3, strlen(key), n, 2, strlen(px) };
	if (!rs_send_cmd(r, rs_ignore_reply, NULL, 5, argv, lens))
		store_session_put(r->local, uid, id, rec, n, keep_ms);
}

/* A session record read back: a string of bounded size. */
static bool session_rec_ok(const struct rstore *r, const redisReply *m)
{
	return m->type == REDIS_REPLY_STRING && m->len <= STORE_SESSION_MAX;
}

static void session_get_reply(struct rstore *r, redisReply *reply, void *arg)
{
	record_reply(r, reply, arg, session_rec_ok, "a session record is not one this store wrote");
}

struct store_wait *rs_session_get(struct store *s, uid_t uid, const char *id,
				  void (*cb)(void *arg, int r, const char *rec, size_t n), void *arg)
{
	struct rstore *r = RS(s);
	if (!r->cmd)
		return store_session_get(r->local, uid, id, cb, arg);
	return record_get(r, "session", uid, id, session_get_reply, cb, arg);
}

