/* SPDX-License-Identifier: MIT */
/*
 * MCP tasks: this daemon's tasks in a map by uid and id, each written to
 * the store as {"task": {...}, "outcome": {...}} when it is made and when
 * it ends (and refreshed while it runs, so a task whose daemon died goes
 * away instead of working forever), so that any daemon sharing the store
 * answers tasks/get, tasks/result and tasks/list for the same uid. What is
 * read back from the store is parsed again and checked.
 */
#include "lib/tasks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/dispatch.h"
#include "lib/list.h"
#include "lib/loop.h"
#include "lib/map.h"
#include "lib/store.h"
#include "lib/store_outcome.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"

#define LIST_PAGE 100
#define REFRESH_MS 10000
#define WORKING_KEEP_MS 30000

enum task_status { TS_WORKING, TS_COMPLETED, TS_FAILED, TS_CANCELLED };

static const char *const status_names[] = { "working", "completed", "failed", "cancelled" };

struct task {
	struct tasks *t;
	char id[33];
	char *key;			/* uid \x1f id */
	uid_t uid;
	enum task_status st;
	char *message;			/* statusMessage of a failed task */
	uint64_t created, updated;	/* wall clock ms */
	uint64_t ttl_ms;
	uint64_t order;
	struct outcome *o;
	struct caller *caller;
	const struct task_watch_ops *wops;
	void *wctx;
	struct list waiters;		/* struct task_req.node */
	struct list node;		/* t->all */
	struct tc_timer *expire;
};

struct task_req {
	struct tasks *t;
	struct list node;		/* task->waiters, or t->reqs */
	uid_t uid;
	char *id;
	bool wait;
	task_cb cb;
	task_list_cb list_cb;
	void *arg;
	struct store_wait *sw;
	struct tc_timer *poll;
	uint64_t after;
};

struct tasks {
	struct tc_loop *loop;
	struct tasks_config cfg;
	struct store *store;
	struct map *by_key;		/* uid \x1f id -> struct task */
	struct map *per_uid;		/* uid -> count, as a pointer-sized integer */
	struct list all;
	struct list reqs;		/* requests waiting on the store */
	struct tc_timer *refresh;
	uint64_t counter;
	size_t working;
};

void tasks_config_defaults(struct tasks_config *c)
{
	*c = (struct tasks_config){
		.default_ttl_ms = 3600000,
		.max_ttl_ms = 86400000,
		.poll_interval_ms = 1000,
		.max_per_uid = 1000,
	};
}

static void refresh_fire(void *arg);

struct tasks *tasks_new(struct tc_loop *loop, const struct tasks_config *cfg)
{
	struct tasks *t = xcalloc(1, sizeof(*t));
	t->loop = loop;
	t->cfg = *cfg;
	t->by_key = map_new();
	t->per_uid = map_new();
	list_init(&t->all);
	list_init(&t->reqs);
	t->refresh = tc_timer_new(loop, refresh_fire, t);
	return t;
}

void tasks_set_store(struct tasks *t, struct store *s) { t->store = s; }

static void uid_count(struct tasks *t, uid_t uid, int delta)
{
	char name[24];
	snprintf(name, sizeof(name), "%u", (unsigned)uid);
	uintptr_t n = (uintptr_t)map_get(t->per_uid, name) + (uintptr_t)(intptr_t)delta;
	if (n)
		map_put(t->per_uid, name, (void *)n);
	else
		map_remove(t->per_uid, name);
}

static size_t uid_tasks(struct tasks *t, uid_t uid)
{
	char name[24];
	snprintf(name, sizeof(name), "%u", (unsigned)uid);
	return (size_t)(uintptr_t)map_get(t->per_uid, name);
}

void task_write(const struct task *k, struct jgen *g)
{
	char created[32], updated[32];
	format_time(k->created, created);
	format_time(k->updated, updated);
	jgen_obj_open(g);
	jgen_kv_str(g, "taskId", k->id);
	jgen_kv_str(g, "status", status_names[k->st]);
	if (k->message)
		jgen_kv_str(g, "statusMessage", k->message);
	jgen_kv_str(g, "createdAt", created);
	jgen_kv_str(g, "lastUpdatedAt", updated);
	jgen_kv_int(g, "ttl", (int64_t)k->ttl_ms);
	jgen_kv_int(g, "pollInterval", (int64_t)k->t->cfg.poll_interval_ms);
	jgen_obj_close(g);
}

static char *task_json(const struct task *k)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	task_write(k, g);
	jgen_free(g);
	return buf_steal(&b);
}

/* Writes the task's record to the store. */
static void task_save(struct task *k)
{
	if (!k->t->store)
		return;
	struct buf b = {0};
	buf_puts(&b, "{\"task\":");
	char *j = task_json(k);
	buf_puts(&b, j);
	free(j);
	if (k->o) {
		buf_puts(&b, ",\"outcome\":");
		outcome_store_ops.encode(k->o, &b);
	}
	buf_putc(&b, '}');
	uint64_t keep = k->st == TS_WORKING ? MAX(WORKING_KEEP_MS, 3 * REFRESH_MS) : MAX(k->ttl_ms, 1);
	store_task_put(k->t->store, k->uid, k->id, buf_head(&b), buf_size(&b), k->order, keep);
	buf_free(&b);
}

/* Keeps the records of working tasks alive in the store. */
static void refresh_fire(void *arg)
{
	struct tasks *t = arg;
	struct list *p;
	for (p = t->all.next; p != &t->all; p = p->next) {
		struct task *k = list_entry(p, struct task, node);
		if (k->st == TS_WORKING)
			task_save(k);
	}
	if (t->working)
		tc_timer_start(t->refresh, REFRESH_MS);
}

static void task_free(struct task *k)
{
	struct tasks *t = k->t;
	list_remove(&k->node);
	map_remove(t->by_key, k->key);
	uid_count(t, k->uid, -1);
	if (k->st == TS_WORKING)
		t->working--;
	tc_timer_free(k->expire);
	outcome_unref(k->o);
	free(k->message);
	free(k->key);
	free(k);
}

static void expire_fire(void *arg)
{
	struct task *k = arg;
	if (list_empty(&k->waiters))
		task_free(k);
}

static void new_id(struct tasks *t, char out[static 33])
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 32; i += 8) {
		uint32_t x = tc_random(t->loop) ^ (uint32_t)(mono_ns() >> (i / 2));
		for (int j = 0; j < 8; j++)
			out[i + j] = hex[(x >> (4 * j)) & 15];
	}
	out[32] = '\0';
}

int tasks_create(struct tasks *t, uid_t uid, int64_t ttl_ms, struct task **ret)
{
	if (uid_tasks(t, uid) >= t->cfg.max_per_uid)
		return -EBUSY;
	struct task *k = xcalloc(1, sizeof(*k));
	k->t = t;
	do
		new_id(t, k->id);
	while (({
		char *probe = xasprintf("%u\x1f%s", (unsigned)uid, k->id);
		bool taken = map_get(t->by_key, probe) != NULL;
		free(probe);
		taken;
	}));
	k->key = xasprintf("%u\x1f%s", (unsigned)uid, k->id);
	k->uid = uid;
	k->st = TS_WORKING;
	k->created = k->updated = wall_ms();
	k->ttl_ms = ttl_ms < 0 ? t->cfg.default_ttl_ms : MIN((uint64_t)ttl_ms, t->cfg.max_ttl_ms);
	k->order = k->created * 1024 + (t->counter++ & 1023);
	k->expire = tc_timer_new(t->loop, expire_fire, k);
	list_init(&k->waiters);
	list_insert_tail(&t->all, &k->node);
	map_put(t->by_key, k->key, k);
	uid_count(t, uid, 1);
	if (t->working++ == 0)
		tc_timer_start(t->refresh, REFRESH_MS);
	task_save(k);
	*ret = k;
	return 0;
}

void task_watch(struct task *k, const struct task_watch_ops *ops, void *ctx)
{
	k->wops = ops;
	k->wctx = ops ? ctx : NULL;
}

void tasks_unwatch(struct tasks *t, void *ctx)
{
	struct list *p;
	for (p = t->all.next; p != &t->all; p = p->next) {
		struct task *k = list_entry(p, struct task, node);
		if (k->wctx == ctx)
			task_watch(k, NULL, NULL);
	}
}

void task_set_caller(struct task *k, struct caller *c) { k->caller = c; }

static void req_free(struct task_req *q)
{
	list_remove(&q->node);
	store_wait_cancel(q->sw);
	tc_timer_free(q->poll);
	free(q->id);
	free(q);
}

void task_req_cancel(struct task_req *q)
{
	if (q)
		req_free(q);
}

/* Answers q with k's state and frees q. */
static void req_answer_local(struct task_req *q, const struct task *k)
{
	_cleanup_free_ char *j = task_json(k);
	task_cb cb = q->cb;
	void *arg = q->arg;
	req_free(q);
	cb(arg, 0, j, strlen(j), k->st == TS_WORKING ? NULL : k->o);
}

/* The task's call ended with o. */
static void task_end(void *ctx, const struct outcome *o, bool replayed)
{
	struct task *k = ctx;
	struct tasks *t = k->t;
	k->caller = NULL;
	k->o = outcome_ref((struct outcome *)o);
	k->st = o->kind == TC_OK ? TS_COMPLETED : o->kind == TC_CANCELLED ? TS_CANCELLED : TS_FAILED;
	if (k->st == TS_FAILED)
		k->message = xstrdup(o->message ? o->message : tc_kind_name(o->kind));
	k->updated = wall_ms();
	t->working--;
	task_save(k);
	tc_timer_start(k->expire, k->ttl_ms);
	if (k->wops) {
		_cleanup_free_ char *j = task_json(k);
		k->wops->status(k->wctx, j, strlen(j));
	}
	while (!list_empty(&k->waiters))
		req_answer_local(list_first(&k->waiters, struct task_req, node), k);
}

const struct caller_ops task_caller_ops = {
	.complete = task_end,
};

/* --- lookups through the store ----------------------------------------- */

/* Reads a record back: the task's JSON and its outcome, checked. */
static int record_parse(const char *rec, size_t n, char **ret_task, struct outcome **ret_o, bool *ret_done)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(rec, n, 0, 80, &doc, &err) < 0)
		return -EIO;
	const struct json *root = json_doc_root(doc);
	const struct json *task = json_get(root, "task"), *o = json_get(root, "outcome");
	const struct json *st = json_get(task, "status");
	int r = -EIO;
	if (!task || task->type != JSON_OBJECT || !st || st->type != JSON_STRING || !json_get(task, "taskId"))
		goto out;
	bool done = !str_eq(json_str(st), "working");
	struct outcome *out = NULL;
	if (done && (!o || outcome_store_ops.decode(rec + o->off, o->len, (void **)&out) < 0))
		goto out;
	*ret_task = xstrndup(rec + task->off, task->len);
	*ret_o = out;
	*ret_done = done;
	r = 0;
out:
	json_doc_unref(doc);
	return r;
}

static void req_poll(void *arg);

static void store_got(void *arg, int r, const char *meta, size_t n)
{
	struct task_req *q = arg;
	q->sw = NULL;
	_cleanup_free_ char *task = NULL;
	struct outcome *o = NULL;
	bool done = false;
	if (r == 0)
		r = record_parse(meta, n, &task, &o, &done);
	if (r == 0 && q->wait && !done) {
		tc_timer_start(q->poll, q->t->cfg.poll_interval_ms);
		return;
	}
	task_cb cb = q->cb;
	void *cb_arg = q->arg;
	req_free(q);
	cb(cb_arg, r, task, task ? strlen(task) : 0, o);
	outcome_unref(o);
}

static void req_poll(void *arg)
{
	struct task_req *q = arg;
	q->sw = store_task_get(q->t->store, q->uid, q->id, store_got, q);
}

struct task_req *tasks_get(struct tasks *t, uid_t uid, const char *id, bool wait, task_cb cb, void *arg)
{
	_cleanup_free_ char *key = xasprintf("%u\x1f%s", (unsigned)uid, id);
	struct task *k = map_get(t->by_key, key);
	struct task_req *q = xcalloc(1, sizeof(*q));
	q->t = t;
	q->uid = uid;
	q->id = xstrdup(id);
	q->wait = wait;
	q->cb = cb;
	q->arg = arg;
	list_init(&q->node);
	if (k) {
		if (wait && k->st == TS_WORKING) {
			list_insert_tail(&k->waiters, &q->node);
			return q;
		}
		req_answer_local(q, k);
		return NULL;
	}
	if (!t->store) {
		req_free(q);
		cb(arg, -ENOENT, NULL, 0, NULL);
		return NULL;
	}
	list_insert_tail(&t->reqs, &q->node);
	q->poll = tc_timer_new(t->loop, req_poll, q);
	/* The store may answer at once (memory): q is then gone. */
	tc_timer_start(q->poll, 0);
	return q;
}

static void store_listed(void *arg, int r, char **metas, size_t n, uint64_t next)
{
	struct task_req *q = arg;
	q->sw = NULL;
	struct buf b = {0};
	buf_putc(&b, '[');
	size_t listed = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		_cleanup_free_ char *task = NULL;
		struct outcome *o = NULL;
		bool done;
		if (record_parse(metas[i], strlen(metas[i]), &task, &o, &done) < 0)
			continue;	/* one bad record does not hide the others */
		outcome_unref(o);
		if (listed++)
			buf_putc(&b, ',');
		buf_puts(&b, task);
	}
	buf_putc(&b, ']');
	char cursor[24];
	snprintf(cursor, sizeof(cursor), "%" PRIu64, next);
	task_list_cb cb = q->list_cb;
	void *cb_arg = q->arg;
	req_free(q);
	cb(cb_arg, r, buf_head(&b), buf_size(&b), next ? cursor : NULL);
	buf_free(&b);
}

static void list_fire(void *arg)
{
	struct task_req *q = arg;
	q->sw = store_task_list(q->t->store, q->uid, q->after, LIST_PAGE, store_listed, q);
}

struct task_req *tasks_list(struct tasks *t, uid_t uid, const char *cursor, task_list_cb cb, void *arg)
{
	uint64_t after = 0;
	if (cursor) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(cursor, &end, 10);
		if (!*cursor || *end || errno || cursor[0] == '-') {
			cb(arg, -EINVAL, NULL, 0, NULL);
			return NULL;
		}
		after = v;
	}
	if (!t->store) {
		cb(arg, 0, "[]", 2, NULL);
		return NULL;
	}
	struct task_req *q = xcalloc(1, sizeof(*q));
	q->t = t;
	q->uid = uid;
	q->list_cb = cb;
	q->arg = arg;
	q->after = after;
	list_insert_tail(&t->reqs, &q->node);
	q->poll = tc_timer_new(t->loop, list_fire, q);
	tc_timer_start(q->poll, 0);
	return q;
}

int tasks_cancel(struct tasks *t, uid_t uid, const char *id)
{
	_cleanup_free_ char *key = xasprintf("%u\x1f%s", (unsigned)uid, id);
	struct task *k = map_get(t->by_key, key);
	if (!k)
		return -ENOENT;
	if (k->st != TS_WORKING)
		return -EALREADY;
	if (!k->caller)
		return -EALREADY;
	dispatch_cancel(TAKE_PTR(k->caller), true);
	return 0;
}

void tasks_write_stats(const struct tasks *t, struct jgen *g)
{
	jgen_kv_int(g, "tasks", (int64_t)map_size(t->by_key));
	jgen_kv_int(g, "working", (int64_t)t->working);
}

struct tasks *tasks_free(struct tasks *t)
{
	if (!t)
		return NULL;
	while (!list_empty(&t->reqs)) {
		struct task_req *q = list_first(&t->reqs, struct task_req, node);
		if (q->cb)
			q->cb(q->arg, -ECANCELED, NULL, 0, NULL);
		else
			q->list_cb(q->arg, -ECANCELED, NULL, 0, NULL);
		req_free(q);
	}
	while (!list_empty(&t->all)) {
		struct task *k = list_first(&t->all, struct task, node);
		while (!list_empty(&k->waiters)) {
			struct task_req *q = list_first(&k->waiters, struct task_req, node);
			q->cb(q->arg, -ECANCELED, NULL, 0, NULL);
			req_free(q);
		}
		if (k->caller)
			dispatch_detach(TAKE_PTR(k->caller));
		task_free(k);
	}
	tc_timer_free(t->refresh);
	map_free(t->by_key);
	map_free(t->per_uid);
	free(t);
	return NULL;
}
