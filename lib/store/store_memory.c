/* SPDX-License-Identifier: MIT */
/*
 * The memory store: idempotency records and tasks of one daemon, in its
 * memory. A record is running (its claim is held; later claims join it) or
 * done (its outcome is kept ttl_ms and replayed). Kept outcomes are bounded
 * per uid by count (one uid's keys never evict another's) and in all by
 * bytes, oldest first. Answers come at once, inside the call that asks,
 * except a join, which comes when the holder completes or releases.
 *
 * Tasks go when their time is up, looked at or not: a timer is armed for
 * the first to expire (none while there are none).
 *
 * The Redis store keeps one of these to fall back on while Redis is away.
 */
#include "lib/store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/base/map.h"
#include "proto/json.h"
#include "proto/base/util.h"

struct mem_store;

struct uid_state {
	struct list lru;		/* struct mem_entry.uid_node, done entries, oldest first */
	size_t n;			/* entries of this uid, running or done */
	struct list tasks;		/* struct mem_task.node, by order */
	size_t n_tasks;
	char *name;
};

struct mem_entry {
	struct mem_store *m;
	struct uid_state *u;
	char *key;
	char *tool;
	uint8_t hash[STORE_HASH_LEN];
	struct store_claim *claim;	/* while running */
	struct list waiters;		/* struct store_wait.node, while running */
	void *value;			/* done */
	size_t bytes;
	uint64_t expires;
	struct list lru;		/* m->lru while done */
	struct list uid_node;		/* u->lru while done */
};

struct store_claim {
	const struct store_ops *ops;	/* first, as in every handle */
	struct mem_entry *e;		/* NULL: the entry went away (store freed) */
};

struct store_wait {
	const struct store_ops *ops;
	struct list node;		/* entry->waiters */
	struct mem_store *m;
	struct store_key k;		/* strings owned */
	uint8_t hash[STORE_HASH_LEN];
	store_cb cb;
	void *arg;
};

struct mem_task {
	struct list node;		/* uid_state.tasks */
	struct uid_state *u;
	char *key;			/* uid \x1f id */
	char *meta;
	size_t meta_len;
	uint64_t order;
	uint64_t expires;
};

struct mem_store {
	struct store base;
	struct tc_loop *loop;
	struct store_config cfg;
	const struct store_value_ops *vops;
	struct map *entries;		/* key -> struct mem_entry */
	struct map *uids;		/* uid -> struct uid_state */
	struct map *tasks;		/* uid \x1f id -> struct mem_task */
	struct map *sessions;		/* uid \x1f id -> struct mem_session */
	struct list lru;		/* done entries, oldest first */
	uint64_t bytes;
	uint64_t hits, joins;
	struct tc_timer *task_timer;	/* for the first task to expire */
	uint64_t task_due;		/* when it fires; 0: not armed */
};

#define MEM(s) ((struct mem_store *)(s))

/* Names a uid's key in the map: a key holding NUL bytes is named by its
 * hash, so "a\0b" and "a\0c" stay apart. */
static char *entry_name(const struct store_key *k)
{
	if (!memchr(k->key, '\0', k->key_len))
		return xasprintf("%u\x1f%s", (unsigned)k->uid, k->key);
	uint8_t h[STORE_HASH_LEN];
	store_sha256(k->key, k->key_len, h);
	char hex[2 * STORE_HASH_LEN + 1];
	for (size_t i = 0; i < STORE_HASH_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	return xasprintf("%u\x1e%s", (unsigned)k->uid, hex);
}

static struct uid_state *uid_get(struct mem_store *m, uid_t uid)
{
	char name[24];
	snprintf(name, sizeof(name), "%u", (unsigned)uid);
	struct uid_state *u = map_get(m->uids, name);
	if (!u) {
		u = xcalloc(1, sizeof(*u));
		list_init(&u->lru);
		list_init(&u->tasks);
		u->name = xstrdup(name);
		map_put(m->uids, name, u);
	}
	return u;
}

/* Forgets a uid that holds nothing any more. */
static void uid_put(struct mem_store *m, struct uid_state *u)
{
	if (u->n || u->n_tasks)
		return;
	map_remove(m->uids, u->name);
	free(u->name);
	free(u);
}

static void entry_free(struct mem_entry *e)
{
	struct mem_store *m = e->m;
	if (list_linked(&e->lru)) {
		list_remove(&e->lru);
		list_remove(&e->uid_node);
		m->bytes -= e->bytes;
	}
	if (e->claim)
		e->claim->e = NULL;
	map_remove(m->entries, e->key);
	if (e->value)
		m->vops->unref(e->value);
	e->u->n--;
	uid_put(m, e->u);
	free(e->key);
	free(e->tool);
	free(e);
}

/* Drops kept outcomes past their time. */
static void expire(struct mem_store *m, uint64_t now)
{
	while (!list_empty(&m->lru)) {
		struct mem_entry *e = list_first(&m->lru, struct mem_entry, lru);
		if (e->expires > now)
			break;
		entry_free(e);
	}
}

static void answer_done(struct mem_store *m, struct mem_entry *e, bool joined, store_cb cb, void *arg)
{
	if (joined)
		m->joins++;
	else
		m->hits++;
	/* Most recently used goes last. */
	list_remove(&e->lru);
	list_insert_tail(&m->lru, &e->lru);
	list_remove(&e->uid_node);
	list_insert_tail(&e->u->lru, &e->uid_node);
	void *v = m->vops->ref(e->value);
	cb(arg, &(struct store_answer){ .result = STORE_DONE, .value = v, .joined = joined });
	m->vops->unref(v);
}

static struct store_wait *mem_claim(struct store *s, const struct store_key *k, store_cb cb, void *arg)
{
	struct mem_store *m = MEM(s);
	uint64_t now = tc_now(m->loop);
	expire(m, now);
	_cleanup_free_ char *name = entry_name(k);
	struct mem_entry *e = map_get(m->entries, name);
	if (e && !e->claim && e->expires <= now) {
		entry_free(e);
		e = NULL;
	}
	if (e) {
		if (!str_eq(e->tool, k->tool) || memcmp(e->hash, k->hash, STORE_HASH_LEN)) {
			cb(arg, &(struct store_answer){ .result = STORE_CONFLICT,
							.same_tool = str_eq(e->tool, k->tool) });
			return NULL;
		}
		if (!e->claim) {
			answer_done(m, e, false, cb, arg);
			return NULL;
		}
		struct store_wait *w = xcalloc(1, sizeof(*w));
		w->ops = s->ops;
		w->m = m;
		w->k = *k;
		w->k.key = xmemdup(k->key, k->key_len + 1);
		w->k.tool = xstrdup(k->tool);
		memcpy(w->hash, k->hash, STORE_HASH_LEN);
		w->k.hash = w->hash;
		w->cb = cb;
		w->arg = arg;
		list_insert_tail(&e->waiters, &w->node);
		return w;
	}
	e = xcalloc(1, sizeof(*e));
	e->m = m;
	e->u = uid_get(m, k->uid);
	e->u->n++;
	e->key = TAKE_PTR(name);
	e->tool = xstrdup(k->tool);
	memcpy(e->hash, k->hash, STORE_HASH_LEN);
	list_init(&e->waiters);
	list_init(&e->lru);
	list_init(&e->uid_node);
	map_put(m->entries, e->key, e);
	struct store_claim *c = xcalloc(1, sizeof(*c));
	c->ops = s->ops;
	c->e = e;
	e->claim = c;
	cb(arg, &(struct store_answer){ .result = STORE_CLAIMED, .claim = c });
	return NULL;
}

static void wait_free(struct store_wait *w)
{
	free((char *)w->k.key);
	free((char *)w->k.tool);
	free(w);
}

static void mem_wait_cancel(struct store_wait *w)
{
	list_remove(&w->node);
	wait_free(w);
}

/* Keeps e's outcome, then bounds the uid's count and everyone's bytes. */
static void keep(struct mem_store *m, struct mem_entry *e, void *value)
{
	e->value = m->vops->ref(value);
	e->bytes = m->vops->bytes(value) + strlen(e->key) + strlen(e->tool) + sizeof(*e);
	e->expires = tc_now(m->loop) + m->cfg.ttl_ms;
	m->bytes += e->bytes;
	list_insert_tail(&m->lru, &e->lru);
	list_insert_tail(&e->u->lru, &e->uid_node);
	struct uid_state *u = e->u;
	while (u->n > m->cfg.max_entries && !list_empty(&u->lru))
		entry_free(list_first(&u->lru, struct mem_entry, uid_node));
	while (m->bytes > m->cfg.max_bytes && !list_empty(&m->lru))
		entry_free(list_first(&m->lru, struct mem_entry, lru));
}

/* Takes the waiters off an entry that just ended. */
static void take_waiters(struct mem_entry *e, struct list *ret)
{
	list_init(ret);
	if (list_empty(&e->waiters))
		return;
	*ret = e->waiters;
	ret->next->prev = ret;
	ret->prev->next = ret;
	list_init(&e->waiters);
}

/* Frees a claim: its entry (NULL when the store went first) with the
 * entry's waiters moved to *waiters. */
static struct mem_entry *claim_take(struct store_claim *c, struct list *waiters)
{
	struct mem_entry *e = c->e;
	free(c);
	list_init(waiters);
	if (e) {
		e->claim = NULL;
		take_waiters(e, waiters);
	}
	return e;
}

static void mem_complete(struct store_claim *c, void *value)
{
	struct list waiters;
	struct mem_entry *e = claim_take(c, &waiters);
	if (!e)
		return;
	struct mem_store *m = e->m;
	if (m->cfg.ttl_ms)
		keep(m, e, value);
	else
		entry_free(e);
	/* Joiners get the outcome itself: a bound may have dropped it already. */
	while (!list_empty(&waiters)) {
		struct store_wait *w = list_first(&waiters, struct store_wait, node);
		list_remove(&w->node);
		m->joins++;
		w->cb(w->arg, &(struct store_answer){ .result = STORE_DONE, .value = value, .joined = true });
		wait_free(w);
	}
}

static void mem_release(struct store_claim *c)
{
	struct list waiters;
	struct mem_entry *e = claim_take(c, &waiters);
	if (!e)
		return;
	struct mem_store *m = e->m;
	entry_free(e);
	/* The key is free: the first waiter claims it, the others join that
	 * claim with the handles they hold. */
	while (!list_empty(&waiters)) {
		struct store_wait *w = list_first(&waiters, struct store_wait, node);
		list_remove(&w->node);
		_cleanup_free_ char *name = entry_name(&w->k);
		struct mem_entry *n = map_get(m->entries, name);
		if (n && n->claim && str_eq(n->tool, w->k.tool) && !memcmp(n->hash, w->hash, STORE_HASH_LEN)) {
			list_insert_tail(&n->waiters, &w->node);
			continue;
		}
		mem_claim(&m->base, &w->k, w->cb, w->arg);
		wait_free(w);
	}
}

/* --- tasks ------------------------------------------------------------- */

static void task_free(struct mem_store *m, struct mem_task *t)
{
	list_remove(&t->node);
	map_remove(m->tasks, t->key);
	t->u->n_tasks--;
	uid_put(m, t->u);
	free(t->key);
	free(t->meta);
	free(t);
}

/* Drops the uid's tasks past their time. */
static void tasks_expire(struct mem_store *m, struct uid_state *u, uint64_t now)
{
	struct list *p, *tmp;
	list_foreach_safe(p, tmp, &u->tasks) {
		struct mem_task *t = list_entry(p, struct mem_task, node);
		if (t->expires <= now)
			task_free(m, t);
	}
}

/* Arms the task timer for a task expiring then, unless it fires sooner. */
static void tasks_arm(struct mem_store *m, uint64_t expires)
{
	if (m->task_due && m->task_due <= expires)
		return;
	m->task_due = expires;
	uint64_t now = tc_now(m->loop);
	tc_timer_start(m->task_timer, expires > now ? expires - now : 0);
}

/* Drops every task past its time, and arms the timer for the next. */
static void tasks_sweep(void *arg)
{
	struct mem_store *m = arg;
	m->task_due = 0;
	uint64_t now = tc_now(m->loop), next = 0;
	size_t n = 0, it = 0;
	void *v;
	_cleanup_free_ struct mem_task **gone = xcalloc(map_size(m->tasks) + 1, sizeof(*gone));
	while (map_next(m->tasks, &it, NULL, &v)) {
		struct mem_task *t = v;
		if (t->expires <= now)
			gone[n++] = t;
		else if (!next || t->expires < next)
			next = t->expires;
	}
	for (size_t i = 0; i < n; i++)
		task_free(m, gone[i]);
	if (next)
		tasks_arm(m, next);
}

static struct store_wait *mem_task_put(struct store *s, uid_t uid, const char *id, const char *meta,
				       size_t meta_len, uint64_t order, uint64_t keep_ms, bool create,
				       store_put_cb cb, void *arg)
{
	struct mem_store *m = MEM(s);
	uint64_t now = tc_now(m->loop);
	_cleanup_free_ char *key = xasprintf("%u\x1f%s", (unsigned)uid, id);
	struct mem_task *t = map_get(m->tasks, key);
	if (t && t->expires <= now) {
		task_free(m, t);
		t = NULL;
	}
	if (!t) {
		struct uid_state *u = uid_get(m, uid);
		tasks_expire(m, u, now);
		if (create && u->n_tasks >= m->cfg.max_tasks) {
			uid_put(m, u);
			if (cb)
				cb(arg, -EBUSY, NULL, 0);
			return NULL;
		}
		t = xcalloc(1, sizeof(*t));
		t->u = u;
		t->key = TAKE_PTR(key);
		t->order = order;
		u->n_tasks++;
		/* Orders grow: the new task goes last, unless a clock said otherwise. */
		struct list *at = &u->tasks;
		while (at->prev != &u->tasks && list_entry(at->prev, struct mem_task, node)->order > order)
			at = at->prev;
		list_insert_tail(at, &t->node);
		map_put(m->tasks, t->key, t);
	}
	free(t->meta);
	t->meta = xmemdup(meta, meta_len + 1);
	t->meta[meta_len] = '\0';
	t->meta_len = meta_len;
	t->expires = now + keep_ms;
	tasks_arm(m, t->expires);
	if (cb)
		cb(arg, 0, NULL, 0);
	return NULL;
}

/* Compare and set: one daemon's memory has no one to tell. */
static struct store_wait *mem_task_swap(struct store *s, uid_t uid, const char *id, const char *old,
					size_t old_len, const char *meta, size_t meta_len, uint64_t keep_ms,
					store_put_cb cb, void *arg)
{
	struct mem_store *m = MEM(s);
	_cleanup_free_ char *key = xasprintf("%u\x1f%s", (unsigned)uid, id);
	struct mem_task *t = map_get(m->tasks, key);
	if (!t || t->expires <= tc_now(m->loop)) {
		cb(arg, -ENOENT, NULL, 0);
		return NULL;
	}
	if (t->meta_len != old_len || memcmp(t->meta, old, old_len)) {
		cb(arg, -ESTALE, t->meta, t->meta_len);
		return NULL;
	}
	return mem_task_put(s, uid, id, meta, meta_len, t->order, keep_ms, false, cb, arg);
}

static void mem_hear_cancels(struct store *s, void (*fn)(void *arg, uid_t uid, const char *id), void *arg) {}

static void mem_reconfigure(struct store *s, const struct store_config *c)
{
	MEM(s)->cfg.max_tasks = c->max_tasks;
}

static struct store_wait *mem_task_get(struct store *s, uid_t uid, const char *id,
				       void (*cb)(void *arg, int r, const char *meta, size_t n), void *arg)
{
	struct mem_store *m = MEM(s);
	_cleanup_free_ char *key = xasprintf("%u\x1f%s", (unsigned)uid, id);
	struct mem_task *t = map_get(m->tasks, key);
	if (t && t->expires <= tc_now(m->loop)) {
		task_free(m, t);
		t = NULL;
	}
	if (!t)
		cb(arg, -ENOENT, NULL, 0);
	else
		cb(arg, 0, t->meta, t->meta_len);
	return NULL;
}

static struct store_wait *mem_task_list(struct store *s, uid_t uid, uint64_t after, size_t limit,
					void (*cb)(void *arg, int r, char **metas, size_t n, uint64_t next),
					void *arg)
{
	struct mem_store *m = MEM(s);
	char name[24];
	snprintf(name, sizeof(name), "%u", (unsigned)uid);
	struct uid_state *u = map_get(m->uids, name);
	size_t n = 0;
	uint64_t next = 0;
	char **metas = NULL;
	if (u) {
		tasks_expire(m, u, tc_now(m->loop));
		metas = xcalloc(limit + 1, sizeof(char *));
		struct list *p;
		for (p = u->tasks.next; p != &u->tasks; p = p->next) {
			struct mem_task *t = list_entry(p, struct mem_task, node);
			if (t->order <= after)
				continue;
			if (n == limit) {
				next = list_entry(p->prev, struct mem_task, node)->order;
				break;
			}
			metas[n++] = t->meta;
		}
	}
	cb(arg, 0, metas, n, next);
	free(metas);
	/* tasks_expire may have emptied the uid. */
	if (u)
		uid_put(m, u);
	return NULL;
}

static void mem_write_stats(struct store *s, struct jgen *g)
{
	struct mem_store *m = MEM(s);
	jgen_kv_str(g, "kind", "memory");
	jgen_kv_bool(g, "connected", true);
	jgen_kv_int(g, "entries", (int64_t)map_size(m->entries));
	jgen_kv_int(g, "tasks", (int64_t)map_size(m->tasks));
	jgen_kv_int(g, "bytes", (int64_t)m->bytes);
}

static void mem_set_limits(struct store *s, uint64_t ttl_ms, size_t max_entries, uint64_t max_bytes)
{
	struct mem_store *m = MEM(s);
	m->cfg.ttl_ms = ttl_ms;
	m->cfg.max_entries = max_entries;
	m->cfg.max_bytes = max_bytes;
}

static size_t mem_entries(struct store *s) { return map_size(MEM(s)->entries); }

static void mem_sweep(struct store *s)
{
	struct mem_store *m = MEM(s);
	expire(m, tc_now(m->loop));
}

static uint64_t mem_next_expiry(struct store *s)
{
	struct mem_store *m = MEM(s);
	/* One TTL for all: the oldest done entry expires first. */
	return list_empty(&m->lru) ? 0 : list_first(&m->lru, struct mem_entry, lru)->expires;
}

/* --- session records ----------------------------------------------------- */

struct mem_session {
	char *key;			/* uid \x1f id */
	char *rec;
	size_t n;
	uint64_t expires;
};

/* Session records one daemon keeps at most; past it, a put drops the
 * expired ones, then is dropped itself. */
#define MEM_SESSIONS_MAX 65536

static void session_free(struct mem_store *m, struct mem_session *e)
{
	map_remove(m->sessions, e->key);
	free(e->key);
	free(e->rec);
	free(e);
}

static void mem_session_put(struct store *s, uid_t uid, const char *id, const char *rec, size_t n,
			    uint64_t keep_ms)
{
	struct mem_store *m = MEM(s);
	uint64_t now = tc_now(m->loop);
	if (!m->sessions)
		m->sessions = map_new();
	_cleanup_free_ char *key = xasprintf("%u\x1f%s", (unsigned)uid, id);
	struct mem_session *e = map_get(m->sessions, key);
	if (!e && map_size(m->sessions) >= MEM_SESSIONS_MAX) {
		size_t it = 0;
		void *v;
		while (map_next(m->sessions, &it, NULL, &v))
			if (((struct mem_session *)v)->expires <= now)
				session_free(m, v);
		if (map_size(m->sessions) >= MEM_SESSIONS_MAX)
			return;
	}
	if (!e) {
		e = xcalloc(1, sizeof(*e));
		e->key = TAKE_PTR(key);
		map_put(m->sessions, e->key, e);
	}
	free(e->rec);
	e->rec = xmalloc(n + 1);
	memcpy(e->rec, rec, n);
	e->rec[n] = '\0';
	e->n = n;
	e->expires = now + keep_ms;
}

static struct store_wait *mem_session_get(struct store *s, uid_t uid, const char *id,
					  void (*cb)(void *arg, int r, const char *rec, size_t n), void *arg)
{
	struct mem_store *m = MEM(s);
	_cleanup_free_ char *key = xasprintf("%u\x1f%s", (unsigned)uid, id);
	struct mem_session *e = m->sessions ? map_get(m->sessions, key) : NULL;
	if (e && e->expires <= tc_now(m->loop)) {
		session_free(m, e);
		e = NULL;
	}
	if (!e)
		cb(arg, -ENOENT, NULL, 0);
	else
		cb(arg, 0, e->rec, e->n);
	return NULL;
}

static void mem_free(struct store *s)
{
	struct mem_store *m = MEM(s);
	const char *key;
	void *v;
	size_t it = 0;
	while ((it = 0, map_next(m->entries, &it, &key, &v))) {
		struct mem_entry *e = v;
		while (!list_empty(&e->waiters)) {
			struct store_wait *w = list_first(&e->waiters, struct store_wait, node);
			list_remove(&w->node);
			wait_free(w);
		}
		entry_free(e);
	}
	while ((it = 0, map_next(m->tasks, &it, &key, &v)))
		task_free(m, v);
	while (m->sessions && (it = 0, map_next(m->sessions, &it, &key, &v)))
		session_free(m, v);
	map_free(m->sessions);
	map_free(m->entries);
	map_free(m->tasks);
	map_free(m->uids);
	tc_timer_free(m->task_timer);
	free(m);
}

static int mem_open(struct tc_loop *loop, const struct store_config *cfg, const struct store_value_ops *vops,
		    struct store **ret)
{
	struct mem_store *m = xcalloc(1, sizeof(*m));
	m->base.ops = &store_memory_ops;
	m->loop = loop;
	m->cfg = *cfg;
	m->vops = vops;
	m->entries = map_new();
	m->uids = map_new();
	m->tasks = map_new();
	m->task_timer = tc_timer_new(loop, tasks_sweep, m);
	list_init(&m->lru);
	*ret = &m->base;
	return 0;
}

const struct store_ops store_memory_ops = {
	.name = "memory",
	.open = mem_open,
	.free = mem_free,
	.claim = mem_claim,
	.wait_cancel = mem_wait_cancel,
	.complete = mem_complete,
	.release = mem_release,
	.task_put = mem_task_put,
	.task_swap = mem_task_swap,
	.hear_cancels = mem_hear_cancels,
	.reconfigure = mem_reconfigure,
	.task_get = mem_task_get,
	.task_list = mem_task_list,
	.write_stats = mem_write_stats,
	.set_limits = mem_set_limits,
	.entries = mem_entries,
	.sweep = mem_sweep,
	.next_expiry = mem_next_expiry,
	.session_put = mem_session_put,
	.session_get = mem_session_get,
};
