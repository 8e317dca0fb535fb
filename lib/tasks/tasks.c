/* SPDX-License-Identifier: MIT */
/*
 * MCP tasks: this daemon's tasks in a map by uid and id, each written to
 * the store as {"task": {...}, "outcome": {...}} when it is made and when
 * it ends (and refreshed while it runs, so a task whose daemon died goes
 * away instead of working forever), so that any daemon sharing the store
 * answers tasks/get, tasks/result and tasks/list for the same uid. What is
 * read back from the store is parsed again and checked.
 *
 * A task is answered to its creator only once the store has it, so any
 * daemon knows it from then on. tasks/cancel of a task running elsewhere
 * swaps its record for a cancelled one in the store, which tells the
 * daemons; the one running it cancels the call and keeps the store's
 * record (the store never lets a cancelled task be written over, which
 * also tells a daemon that missed the message at its next write).
 *
 * While the shared store is away, only this daemon's own tasks are told
 * of (another daemon's may exist: -EIO, never -ENOENT); when it is back,
 * every task held here is written again, so what changed meanwhile, or
 * what a restarted Redis lost, is shared again.
 *
 * Requests that go to the store start from a timer of their own (a fresh
 * stack), and the memory store's answers come inside the call: a request
 * may be gone when the call returns (req_store).
 *
 * Long because a task's life and its store requests share one set of states.
 */
#include "lib/tasks/tasks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/dispatch/dispatch.h"
#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/base/map.h"
#include "lib/store/store.h"
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
	struct outcome *adopted;	/* the store's cancelled outcome, to end with */
	bool made;			/* its creator heard of it */
};

enum req_kind { REQ_GET, REQ_LIST, REQ_MADE, REQ_SAVE, REQ_CANCEL };

struct task_req {
	struct tasks *t;
	enum req_kind kind;
	struct list node;		/* task->waiters, or t->reqs */
	uid_t uid;
	char *id;
	bool wait;
	task_cb cb;			/* GET, CANCEL */
	task_list_cb list_cb;		/* LIST */
	task_made_cb made_cb;		/* MADE */
	void *arg;
	struct store_wait *sw;
	struct tc_timer *poll;
	void (*step)(struct task_req *q);	/* what the timer starts */
	bool *freed;			/* set when q is freed (req_store asks) */
	uint64_t after;
	char *rec;			/* CANCEL: the record to swap */
	size_t rec_len;
	unsigned tries;
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
	bool away;			/* the shared store cannot be reached */
};

void tasks_config_defaults(struct tasks_config *c)
{
	struct store_config sc;
	store_config_defaults(&sc);
	*c = (struct tasks_config){
		.default_ttl_ms = 3600000,
		.max_ttl_ms = 86400000,
		.poll_interval_ms = 1000,
		.max_per_uid = sc.max_tasks,	/* the store keeps as many */
	};
}

static void refresh_fire(void *arg);
static void task_free(struct task *k);
static char *task_json(const struct task *k);
static void cancel_heard(void *arg, uid_t uid, const char *id);

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

void tasks_set_store(struct tasks *t, struct store *s)
{
	if (t->store)
		store_hear_cancels(t->store, NULL, NULL);
	t->store = s;
	if (s)
		store_hear_cancels(s, cancel_heard, t);
}

void tasks_reconfigure(struct tasks *t, const struct tasks_config *cfg) { t->cfg = *cfg; }

static void task_save(struct task *k, struct task_req *q);

void tasks_store_state(struct tasks *t, bool up)
{
	bool was_away = t->away;
	t->away = !up;
	if (!up || !was_away)
		return;
	/* What changed while the store was away (a task ended or was
	 * cancelled here, made with "local"; or a restarted Redis lost it)
	 * reaches the other daemons now rather than at the next refresh, or
	 * never for a task that ended. */
	struct list *p;
	for (p = t->all.next; p != &t->all; p = p->next) {
		struct task *k = list_entry(p, struct task, node);
		if (k->made)
			task_save(k, NULL);
	}
}

const char *task_id(const struct task *k) { return k->id; }

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

static struct task *task_find(struct tasks *t, uid_t uid, const char *id)
{
	_cleanup_free_ char *key = xasprintf("%u\x1f%s", (unsigned)uid, id);
	return map_get(t->by_key, key);
}

/* The task's record: {"task": {...}, "outcome": {...}}. */
static void task_record(const struct task *k, struct buf *b)
{
	buf_puts(b, "{\"task\":");
	char *j = task_json(k);
	buf_puts(b, j);
	free(j);
	if (k->o) {
		buf_puts(b, ",\"outcome\":");
		outcome_store_ops.encode(k->o, b);
	}
	buf_putc(b, '}');
}

static struct task_req *req_new(struct tasks *t, enum req_kind kind, uid_t uid, const char *id, void *arg)
{
	struct task_req *q = xcalloc(1, sizeof(*q));
	q->t = t;
	q->kind = kind;
	q->uid = uid;
	q->id = id ? xstrdup(id) : NULL;
	q->arg = arg;
	list_insert_tail(&t->reqs, &q->node);
	return q;
}

static void req_free(struct task_req *q)
{
	if (q->freed)
		*q->freed = true;
	list_remove(&q->node);
	store_wait_cancel(q->sw);
	tc_timer_free(q->poll);
	free(q->id);
	free(q->rec);
	free(q);
}

/* Makes a store call for q (from q's timer: never nested); the memory
 * store answers inside it, and the answer may free q. */
static void req_store(struct task_req *q, struct store_wait *sw_of(struct task_req *q))
{
	bool freed = false;
	q->freed = &freed;
	struct store_wait *sw = sw_of(q);
	if (freed)
		return;
	q->freed = NULL;
	q->sw = sw;
}

static void step_fire(void *arg)
{
	struct task_req *q = arg;
	q->step(q);
}

/* Runs step for q from a timer, outside the caller's stack. */
static void req_later(struct task_req *q, void (*step)(struct task_req *q))
{
	if (!q->poll)
		q->poll = tc_timer_new(q->t->loop, step_fire, q);
	q->step = step;
	tc_timer_start(q->poll, 0);
}

static void adopt(struct task *k, const char *rec, size_t n);
static void req_answer_local(struct task_req *q, const struct task *k);

/* The store's answer to a task write. */
static void saved(void *arg, int r, const char *kept, size_t n)
{
	struct task_req *q = arg;
	q->sw = NULL;
	struct tasks *t = q->t;
	struct task *k = task_find(t, q->uid, q->id);
	if (q->kind == REQ_MADE) {
		task_made_cb cb = q->made_cb;
		void *cb_arg = q->arg;
		req_free(q);
		if (k && r < 0) {
			task_free(k);
			k = NULL;
		}
		if (k)
			k->made = true;
		cb(cb_arg, k ? 0 : r < 0 ? r : -EIO, k);
		return;
	}
	if (r == -ECANCELED && k)
		adopt(k, kept, n);
	if (q->kind == REQ_CANCEL && k) {
		req_answer_local(q, k);
		return;
	}
	if (q->kind == REQ_CANCEL) {
		task_cb cb = q->cb;
		void *cb_arg = q->arg;
		req_free(q);
		cb(cb_arg, -ENOENT, NULL, 0, NULL);
		return;
	}
	req_free(q);
}

/* How long an ended task is kept from now: ttl after its end. */
static uint64_t ttl_left(const struct task *k)
{
	uint64_t gone = wall_ms() - MIN(k->updated, wall_ms());
	return gone < k->ttl_ms ? k->ttl_ms - gone : 1;
}

static struct store_wait *put_of(struct task_req *q)
{
	struct task *k = task_find(q->t, q->uid, q->id);
	if (!k) {
		saved(q, -ENOENT, NULL, 0);
		return NULL;
	}
	struct buf b = {0};
	task_record(k, &b);
	uint64_t keep = k->st == TS_WORKING ? MAX(WORKING_KEEP_MS, 3 * REFRESH_MS) : ttl_left(k);
	struct store_wait *sw = store_task_put(q->t->store, k->uid, k->id, buf_head(&b), buf_size(&b), k->order, keep,
					       q->kind == REQ_MADE, saved, q);
	buf_free(&b);
	return sw;
}

static void put_step(struct task_req *q) { req_store(q, put_of); }

/* Writes the task's record to the store; q (NULL: a request of its own)
 * hears when it landed. */
static void task_save(struct task *k, struct task_req *q)
{
	if (!k->t->store)
		return;
	if (!q)
		q = req_new(k->t, REQ_SAVE, k->uid, k->id, NULL);
	req_later(q, put_step);
}

/* Keeps the records of working tasks alive in the store. */
static void refresh_fire(void *arg)
{
	struct tasks *t = arg;
	struct list *p;
	for (p = t->all.next; p != &t->all; p = p->next) {
		struct task *k = list_entry(p, struct task, node);
		if (k->st == TS_WORKING)
			task_save(k, NULL);
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
	outcome_unref(k->adopted);
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

struct task_req *tasks_create(struct tasks *t, uid_t uid, int64_t ttl_ms, task_made_cb cb, void *arg)
{
	if (uid_tasks(t, uid) >= t->cfg.max_per_uid) {
		cb(arg, -EBUSY, NULL);
		return NULL;
	}
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
	if (!t->store) {
		k->made = true;
		cb(arg, 0, k);
		return NULL;
	}
	struct task_req *q = req_new(t, REQ_MADE, uid, k->id, arg);
	q->made_cb = cb;
	task_save(k, q);
	return q;
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

void task_req_cancel(struct task_req *q)
{
	if (!q)
		return;
	/* A task whose creator went before hearing of it: nobody knows its
	 * id, so it never runs; its record goes. */
	struct tasks *t = q->t;
	struct task *k = q->kind == REQ_MADE ? task_find(t, q->uid, q->id) : NULL;
	req_free(q);
	if (k) {
		k->st = TS_CANCELLED;
		k->ttl_ms = 1;
		t->working--;
		task_save(k, NULL);
		tc_timer_start(k->expire, 1000);
	}
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

static void task_tell(struct task *k)
{
	if (k->wops) {
		_cleanup_free_ char *j = task_json(k);
		k->wops->status(k->wctx, j, strlen(j));
	}
}

/* The task's call ended with o (or, cancelled through another daemon, with
 * the store's outcome). */
static void task_end(void *ctx, const struct outcome *o, bool replayed)
{
	struct task *k = ctx;
	struct tasks *t = k->t;
	k->caller = NULL;
	if (k->st != TS_WORKING)
		return;
	if (k->adopted)
		o = k->adopted;
	k->o = outcome_ref((struct outcome *)o);
	k->st = o->kind == TC_OK ? TS_COMPLETED : o->kind == TC_CANCELLED ? TS_CANCELLED : TS_FAILED;
	if (k->st != TS_COMPLETED)
		k->message = xstrdup(o->message ? o->message : tc_kind_name(o->kind));
	k->updated = wall_ms();
	t->working--;
	if (!k->adopted)
		task_save(k, NULL);
	tc_timer_start(k->expire, k->ttl_ms);
	task_tell(k);
	while (!list_empty(&k->waiters))
		req_answer_local(list_first(&k->waiters, struct task_req, node), k);
}

/* Output of the task's call: to the creating connection while it is
 * there (MCP: the request's progressToken holds for the task's life). */
static void task_progress(void *ctx, const char *token, size_t token_len, uint64_t progress,
			  const char *stream, const char *data, size_t n)
{
	struct task *k = ctx;
	if (k->st == TS_WORKING && k->wops && k->wops->progress)
		k->wops->progress(k->wctx, k->id, token, token_len, progress, stream, data, n);
}

const struct caller_ops task_caller_ops = {
	.complete = task_end,
	.progress = task_progress,
};

static int record_parse(const char *rec, size_t n, char **ret_task, struct outcome **ret_o, bool *ret_done);

/* The store keeps k cancelled (through another daemon): k ends so, with
 * the store's outcome, whatever its call did. */
static void adopt(struct task *k, const char *rec, size_t n)
{
	_cleanup_free_ char *task = NULL;
	struct outcome *o = NULL;
	bool done;
	if (record_parse(rec, n, &task, &o, &done) < 0 || !o)
		return;
	if (k->st == TS_WORKING) {
		outcome_unref(k->adopted);
		k->adopted = o;
		if (k->caller)
			dispatch_cancel(TAKE_PTR(k->caller), true);
		else
			task_end(k, o, false);
		return;
	}
	bool changed = k->st != TS_CANCELLED;
	outcome_unref(k->o);
	k->o = o;
	k->st = TS_CANCELLED;
	free(k->message);
	k->message = xstrdup(o->message ? o->message : "cancelled");
	if (changed) {
		k->updated = wall_ms();
		task_tell(k);
	}
}

/* Another daemon cancelled a task through the store: if it runs here, its
 * call is cancelled (its write then finds the store's record and keeps it). */
static void cancel_heard(void *arg, uid_t uid, const char *id)
{
	struct tasks *t = arg;
	struct task *k = task_find(t, uid, id);
	if (k && k->st == TS_WORKING && k->caller)
		dispatch_cancel(TAKE_PTR(k->caller), true);
}

/* --- lookups through the store ----------------------------------------- */

/* A task this daemon does not hold: -ENOENT when nobody else can have it
 * (no shared store), -EIO when the shared store, which alone can tell
 * whether another daemon has it, is away; 0: ask the store. */
static int not_here(const struct tasks *t)
{
	return !t->store ? -ENOENT : t->away ? -EIO : 0;
}

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

static void store_got(void *arg, int r, const char *meta, size_t n)
{
	struct task_req *q = arg;
	q->sw = NULL;
	_cleanup_free_ char *task = NULL;
	struct outcome *o = NULL;
	bool done = false;
	if (r == 0)
		r = record_parse(meta, n, &task, &o, &done);
	else if (r == -ENOENT && q->t->away)
		r = -EIO;	/* answered by this daemon's memory alone */
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

static struct store_wait *get_of(struct task_req *q)
{
	return store_task_get(q->t->store, q->uid, q->id, store_got, q);
}

static void get_step(struct task_req *q) { req_store(q, get_of); }

struct task_req *tasks_get(struct tasks *t, uid_t uid, const char *id, bool wait, task_cb cb, void *arg)
{
	struct task *k = task_find(t, uid, id);
	int miss = k ? 0 : not_here(t);
	if (miss < 0) {
		cb(arg, miss, NULL, 0, NULL);
		return NULL;
	}
	struct task_req *q = req_new(t, REQ_GET, uid, id, arg);
	q->wait = wait;
	q->cb = cb;
	if (k) {
		if (wait && k->st == TS_WORKING) {
			list_remove(&q->node);
			list_insert_tail(&k->waiters, &q->node);
			return q;
		}
		req_answer_local(q, k);
		return NULL;
	}
	/* The poll timer asks the store again while a waited task works. */
	req_later(q, get_step);
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

static struct store_wait *list_of(struct task_req *q)
{
	return store_task_list(q->t->store, q->uid, q->after, LIST_PAGE, store_listed, q);
}

static void list_step(struct task_req *q) { req_store(q, list_of); }

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
	/* The list is the shared store's: what this daemon holds alone
	 * would be a part of it passed off as the whole. */
	if (t->away) {
		cb(arg, -EIO, NULL, 0, NULL);
		return NULL;
	}
	struct task_req *q = req_new(t, REQ_LIST, uid, NULL, arg);
	q->list_cb = cb;
	q->after = after;
	req_later(q, list_step);
	return q;
}

/* --- cancellation ------------------------------------------------------ */

static void cancel_answer(struct task_req *q, int r, const char *task, size_t n)
{
	task_cb cb = q->cb;
	void *arg = q->arg;
	req_free(q);
	cb(arg, r, task, n, NULL);
}

/* The task record rec with status "cancelled", as of now. */
static char *cancelled_record(const char *task, size_t n, size_t *ret_len, uint64_t *ret_ttl)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(task, n, 0, 8, &doc, &err) < 0)
		return NULL;
	const struct json *root = json_doc_root(doc);
	char now[32];
	format_time(wall_ms(), now);
	struct buf b = {0};
	buf_puts(&b, "{\"task\":");
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	int64_t ttl = 0;
	for (size_t i = 0; root->type == JSON_OBJECT && i < root->u.obj.n; i++) {
		const struct json_member *m = &root->u.obj.members[i];
		if (str_eq(m->key, "statusMessage"))
			continue;
		if (str_eq(m->key, "status")) {
			jgen_kv_str(g, "status", "cancelled");
			jgen_kv_str(g, "statusMessage", "The task was cancelled by request");
		} else if (str_eq(m->key, "lastUpdatedAt")) {
			jgen_kv_str(g, "lastUpdatedAt", now);
		} else {
			if (str_eq(m->key, "ttl"))
				json_get_int(m->value, &ttl);
			jgen_kv_raw(g, m->key, task + m->value->off, m->value->len);
		}
	}
	jgen_obj_close(g);
	jgen_free(g);
	json_doc_unref(doc);
	_cleanup_(outcome_unrefp) struct outcome *o = outcome_error(TC_CANCELLED, "The task was cancelled by request");
	buf_puts(&b, ",\"outcome\":");
	outcome_store_ops.encode(o, &b);
	buf_putc(&b, '}');
	*ret_len = buf_size(&b);
	*ret_ttl = ttl > 0 ? (uint64_t)ttl : 1;
	return buf_steal(&b);
}

static void swap_step(struct task_req *q);

static void cancel_swapped(void *arg, int r, const char *kept, size_t n);

/* The task's record as the store has it: swaps it for a cancelled one. */
static void cancel_got(void *arg, int r, const char *rec, size_t n)
{
	struct task_req *q = arg;
	q->sw = NULL;
	_cleanup_free_ char *task = NULL;
	struct outcome *o = NULL;
	bool done = false;
	if (r == 0)
		r = record_parse(rec, n, &task, &o, &done);
	else if (r == -ENOENT && q->t->away)
		r = -EIO;
	outcome_unref(o);
	if (r < 0 || done) {
		cancel_answer(q, r < 0 ? r : -EALREADY, NULL, 0);
		return;
	}
	free(q->rec);
	q->rec = xmemdup(rec, n + 1);
	q->rec[n] = '\0';
	q->rec_len = n;
	req_later(q, swap_step);
}

static struct store_wait *swap_of(struct task_req *q)
{
	_cleanup_free_ char *task = NULL;
	struct outcome *o = NULL;
	bool done;
	if (record_parse(q->rec, q->rec_len, &task, &o, &done) < 0) {
		cancel_answer(q, -EIO, NULL, 0);
		return NULL;
	}
	outcome_unref(o);
	size_t len;
	uint64_t ttl;
	_cleanup_free_ char *rec = cancelled_record(task, strlen(task), &len, &ttl);
	if (!rec) {
		cancel_answer(q, -EIO, NULL, 0);
		return NULL;
	}
	return store_task_swap(q->t->store, q->uid, q->id, q->rec, q->rec_len, rec, len, ttl, cancel_swapped, q);
}

static void swap_step(struct task_req *q) { req_store(q, swap_of); }

static void cancel_swapped(void *arg, int r, const char *kept, size_t n)
{
	struct task_req *q = arg;
	q->sw = NULL;
	/* The task changed meanwhile (it ended, or was refreshed): again. */
	if (r == -ESTALE && q->tries++ < 5) {
		cancel_got(q, 0, kept, n);
		return;
	}
	if (r < 0) {
		cancel_answer(q, r == -ESTALE ? -EIO : r, NULL, 0);
		return;
	}
	/* Read back what now stands: the cancelled task. */
	q->wait = false;
	q->kind = REQ_GET;
	req_later(q, get_step);
}

static struct store_wait *fetch_of(struct task_req *q)
{
	return store_task_get(q->t->store, q->uid, q->id, cancel_got, q);
}

static void fetch_step(struct task_req *q) { req_store(q, fetch_of); }

struct task_req *tasks_cancel(struct tasks *t, uid_t uid, const char *id, task_cb cb, void *arg)
{
	struct task *k = task_find(t, uid, id);
	int miss = k ? 0 : not_here(t);
	if (miss < 0) {
		cb(arg, miss, NULL, 0, NULL);
		return NULL;
	}
	if (k && (k->st != TS_WORKING || !k->caller)) {
		cb(arg, -EALREADY, NULL, 0, NULL);
		return NULL;
	}
	struct task_req *q = req_new(t, REQ_CANCEL, uid, id, arg);
	q->cb = cb;
	if (!k) {
		req_later(q, fetch_step);
		return q;
	}
	dispatch_cancel(TAKE_PTR(k->caller), true);
	/* Answered once the store has it cancelled (a write after the one
	 * the end made lands after it). */
	if (!t->store) {
		req_answer_local(q, k);
		return NULL;
	}
	task_save(k, q);
	return q;
}

void tasks_write_stats(const struct tasks *t, struct jgen *g)
{
	jgen_kv_int(g, "tasks", (int64_t)map_size(t->by_key));
	jgen_kv_int(g, "working", (int64_t)t->working);
}

void tasks_write_stats_of(struct tasks *t, uid_t uid, struct jgen *g)
{
	size_t working = 0;
	struct list *pos;
	for (pos = t->all.next; pos != &t->all; pos = pos->next) {
		const struct task *k = list_entry(pos, struct task, node);
		if (k->uid == uid && k->st == TS_WORKING)
			working++;
	}
	jgen_kv_int(g, "tasks", (int64_t)uid_tasks(t, uid));
	jgen_kv_int(g, "working", (int64_t)working);
}

/* Answers a request the tasks' end leaves unanswered. */
static void req_drop(struct task_req *q)
{
	if (q->kind == REQ_GET || q->kind == REQ_CANCEL)
		q->cb(q->arg, -ECANCELED, NULL, 0, NULL);
	else if (q->kind == REQ_LIST)
		q->list_cb(q->arg, -ECANCELED, NULL, 0, NULL);
	else if (q->kind == REQ_MADE)
		q->made_cb(q->arg, -ECANCELED, NULL);
	req_free(q);
}

struct tasks *tasks_free(struct tasks *t)
{
	if (!t)
		return NULL;
	if (t->store)
		store_hear_cancels(t->store, NULL, NULL);
	while (!list_empty(&t->reqs))
		req_drop(list_first(&t->reqs, struct task_req, node));
	while (!list_empty(&t->all)) {
		struct task *k = list_first(&t->all, struct task, node);
		while (!list_empty(&k->waiters))
			req_drop(list_first(&k->waiters, struct task_req, node));
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

bool tasks_writing(const struct tasks *t)
{
	if (!t)
		return false;
	for (const struct list *p = t->reqs.next; p != &t->reqs; p = p->next) {
		const struct task_req *q = list_entry(p, struct task_req, node);
		if (q->kind == REQ_SAVE)
			return true;
	}
	return false;
}
