/* SPDX-License-Identifier: MIT */
/*
 * The store interface against both backends: claims, joins, replays,
 * conflicts, releases, uid scoping and tasks, each run on the memory store
 * and on the Redis store; then what only a shared store has: two stores
 * (two daemons) on one Redis, a holder that dies, and Redis stalled
 * (SIGSTOP), killed and restarted, or answering what it never stored;
 * a Redis socket served by another uid (65534), refused (at the first
 * connect and at a reconnection) unless store.server_uid names it.
 *
 * The Redis cases start their own redis-server on a Unix socket in a
 * temporary directory; without redis-server they are skipped (exit 77 when
 * nothing else could run).
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/loop.h"
#include "lib/store/store.h"
#include "tests/unit/check_main.h"
#include "tests/unit/redis_server.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"
#include "proto/json.h"

/* --- values: refcounted strings ------------------------------------------ */

struct sv {
	unsigned refs;
	char *s;
};

static struct sv *sv_new(const char *s)
{
	struct sv *v = xcalloc(1, sizeof(*v));
	v->refs = 1;
	v->s = xstrdup(s);
	return v;
}

static void *sv_ref(void *p) { ((struct sv *)p)->refs++; return p; }
static void sv_unref(void *p)
{
	struct sv *v = p;
	if (v && --v->refs == 0) {
		free(v->s);
		free(v);
	}
}
static size_t sv_bytes(const void *p) { return strlen(((const struct sv *)p)->s) + sizeof(struct sv); }
static void sv_encode(const void *p, struct buf *out) { buf_puts(out, ((const struct sv *)p)->s); }
static int sv_decode(const char *s, size_t n, void **ret)
{
	if (memchr(s, '\0', n) || (n && s[0] == '!'))
		return -EINVAL;
	struct sv *v = xcalloc(1, sizeof(*v));
	v->refs = 1;
	v->s = xstrndup(s, n);
	*ret = v;
	return 0;
}

static const struct store_value_ops sv_ops = {
	.ref = sv_ref, .unref = sv_unref, .bytes = sv_bytes, .encode = sv_encode, .decode = sv_decode,
};

/* --- the loop ------------------------------------------------------------ */

static struct ev_loop *ev;
static struct tc_loop *loop;
static ev_timer tick;

static void tick_cb(struct ev_loop *l, ev_timer *w, int revents) {}

/* Runs the loop until *flag is set or ms pass; returns *flag. */
static bool run_until(const bool *flag, int ms)
{
	uint64_t end = mono_ms() + (uint64_t)ms;
	while (!*flag && mono_ms() < end)
		ev_run(ev, EVRUN_ONCE);
	return *flag;
}

static void run_for(int ms)
{
	bool never = false;
	run_until(&never, ms);
}

static struct redis_server rs;

/* --- stores -------------------------------------------------------------- */

static const char *backend;		/* of the current case */
static unsigned downs, ups;

static char last_why[512];		/* of the last outage */

static void on_notify(void *arg, bool up, const char *why)
{
	if (!up)
		snprintf(last_why, sizeof(last_why), "%s", why);
	if (up)
		ups++;
	else
		downs++;
}

/* Opens a store of kind on the Redis at sock, trusting server_uid there. */
static struct store *open_store_at(const char *kind, uint64_t lease_ms, bool fail, const char *sock,
				   uid_t server_uid)
{
	struct store_config c;
	store_config_defaults(&c);
	c.kind = kind;
	c.server_uid = server_uid;
	c.address = xasprintf("unix:%s", sock);
	c.prefix = "test:";
	c.lease_ms = lease_ms;
	c.timeout_ms = 300;
	c.fail_unavailable = fail;
	c.notify = on_notify;
	struct store *s = NULL;
	int r = store_open(loop, &c, &sv_ops, &s);
	free((char *)c.address);
	ck_assert_int_eq(r, 0);
	return s;
}

static struct store *open_store(const char *kind, uint64_t lease_ms, bool fail)
{
	return open_store_at(kind, lease_ms, fail, rs.sock, (uid_t)-1);
}

struct got {
	bool done;
	struct store_answer a;
	char value[64];
	struct store_wait *w;
};

static void got_cb(void *arg, const struct store_answer *a)
{
	struct got *g = arg;
	ck_assert(!g->done);
	g->done = true;
	g->a = *a;
	g->w = NULL;
	if (a->result == STORE_DONE)
		snprintf(g->value, sizeof(g->value), "%s", ((struct sv *)a->value)->s);
}

static void mkkey(struct store_key *k, uid_t uid, const char *key, const char *tool, const char *args,
		  uint8_t hash[static STORE_HASH_LEN])
{
	store_args_hash(tool, args, strlen(args), hash);
	*k = (struct store_key){ .uid = uid, .key = key, .key_len = strlen(key), .tool = tool, .hash = hash,
				 .idempotent = false };
}

/* Asks for a claim and waits at most ms for its answer. */
static void claim(struct store *s, struct store_key *k, struct got *g, int ms)
{
	*g = (struct got){0};
	struct store_wait *w = store_claim(s, k, got_cb, g);
	/* Answered at once: no wait is handed back (the dispatcher keeps
	 * what is returned as the claim's wait, its own to cancel). */
	if (g->done)
		ck_assert_ptr_null(w);
	else
		g->w = w;
	if (ms)
		run_until(&g->done, ms);
}

/* Completes claim c with the outcome value. */
static void complete(struct store_claim *c, const char *value)
{
	struct sv *v = sv_new(value);
	store_complete(c, v);
	sv_unref(v);
}

static struct store *s1;

static void setup_backend(void)
{
	downs = ups = 0;
	if (str_eq(backend, "redis"))
		redis_server_flush(&rs);
	s1 = open_store(backend, 10000, false);
}

static void teardown_backend(void)
{
	s1 = store_free(s1);
}

/* --- both backends --------------------------------------------------------- */

START_TEST(claim_join_replay)
{
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "k1", "read_file", "{\"path\":\"a\"}", h);
	struct got a, b, c;
	claim(s1, &k, &a, 2000);
	ck_assert(a.done);
	ck_assert_int_eq(a.a.result, STORE_CLAIMED);
	claim(s1, &k, &b, 100);
	ck_assert(!b.done);		/* joins the running call */
	complete(a.a.claim, "outcome-1");
	ck_assert(run_until(&b.done, 3000));
	ck_assert_int_eq(b.a.result, STORE_DONE);
	ck_assert(b.a.joined);
	ck_assert_str_eq(b.value, "outcome-1");
	claim(s1, &k, &c, 2000);
	ck_assert_int_eq(c.a.result, STORE_DONE);
	ck_assert(!c.a.joined);
	ck_assert_str_eq(c.value, "outcome-1");
}
END_TEST

START_TEST(conflicts)
{
	uint8_t h[STORE_HASH_LEN], h2[STORE_HASH_LEN], h3[STORE_HASH_LEN];
	struct store_key k, other_args, other_tool;
	mkkey(&k, 1000, "k2", "write_file", "{\"path\":\"a\"}", h);
	mkkey(&other_args, 1000, "k2", "write_file", "{\"path\":\"b\"}", h2);
	mkkey(&other_tool, 1000, "k2", "read_file", "{\"path\":\"a\"}", h3);
	struct got a, b, c;
	claim(s1, &k, &a, 2000);
	ck_assert_int_eq(a.a.result, STORE_CLAIMED);
	/* While running, and once done. */
	for (int round = 0; round < 2; round++) {
		claim(s1, &other_args, &b, 2000);
		ck_assert_int_eq(b.a.result, STORE_CONFLICT);
		ck_assert(b.a.same_tool);
		claim(s1, &other_tool, &c, 2000);
		ck_assert_int_eq(c.a.result, STORE_CONFLICT);
		ck_assert(!c.a.same_tool);
		if (round == 0) {
			complete(a.a.claim, "x");
			run_for(50);
		}
	}
}
END_TEST

START_TEST(release_hands_over)
{
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "k3", "shell", "{}", h);
	struct got a, b, c;
	claim(s1, &k, &a, 2000);
	ck_assert_int_eq(a.a.result, STORE_CLAIMED);
	claim(s1, &k, &b, 100);
	claim(s1, &k, &c, 100);
	ck_assert(!b.done && !c.done);
	store_release(a.a.claim);
	ck_assert(run_until(&b.done, 3000));
	ck_assert_int_eq(b.a.result, STORE_CLAIMED);
	/* The other waiter joins the new holder. */
	run_for(100);
	ck_assert(!c.done);
	complete(b.a.claim, "second");
	ck_assert(run_until(&c.done, 3000));
	ck_assert_int_eq(c.a.result, STORE_DONE);
	ck_assert_str_eq(c.value, "second");
}
END_TEST

/* Runs the loop until every g[i] of n is answered, at most ms. */
static bool run_until_all(struct got *g, int n, int ms)
{
	uint64_t end = mono_ms() + (uint64_t)ms;
	for (;;) {
		int left = 0;
		for (int i = 0; i < n; i++)
			left += !g[i].done;
		if (!left)
			return true;
		if (mono_ms() >= end)
			return false;
		run_for(10);
	}
}

/* Many calls ending in the same loop turn (more than one script call
 * carries): each ends for itself, completed or released. */
START_TEST(ends_together)
{
	enum { N = 40 };
	uint8_t h[N][STORE_HASH_LEN];
	struct store_key k[N];
	char names[N][16];
	struct got a[N], b[N], c[N];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "many-%d", i);
		mkkey(&k[i], 1000, names[i], "shell", "{}", h[i]);
		claim(s1, &k[i], &a[i], 0);
	}
	ck_assert(run_until_all(a, N, 3000));
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(a[i].a.result, STORE_CLAIMED);
		claim(s1, &k[i], &b[i], 0);
	}
	run_for(100);
	for (int i = 0; i < N; i++) {
		ck_assert(!b[i].done);
		if (i % 2)
			store_release(a[i].a.claim);
		else
			complete(a[i].a.claim, names[i]);
	}
	ck_assert(run_until_all(b, N, 3000));
	for (int i = 0; i < N; i++) {
		if (i % 2) {
			ck_assert_int_eq(b[i].a.result, STORE_CLAIMED);
			store_release(b[i].a.claim);
			continue;
		}
		ck_assert_int_eq(b[i].a.result, STORE_DONE);
		ck_assert_str_eq(b[i].value, names[i]);
	}
	run_for(50);
	for (int i = 0; i < N; i++)
		claim(s1, &k[i], &c[i], 0);
	ck_assert(run_until_all(c, N, 3000));
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(c[i].a.result, i % 2 ? STORE_CLAIMED : STORE_DONE);
		if (i % 2)
			store_release(c[i].a.claim);
		else
			ck_assert_str_eq(c[i].value, names[i]);
	}
	ck_assert_uint_eq(downs, 0);
}
END_TEST

START_TEST(cancel_wait)
{
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "k4", "shell", "{}", h);
	struct got a, b;
	claim(s1, &k, &a, 2000);
	claim(s1, &k, &b, 100);
	ck_assert(b.w && !b.done);
	store_wait_cancel(b.w);
	complete(a.a.claim, "x");
	run_for(200);
	ck_assert(!b.done);
}
END_TEST

/* Claims k1 and k2, which must not meet: both are claimed. */
static void claim_apart(struct store_key *k1, struct store_key *k2)
{
	struct got a, b;
	claim(s1, k1, &a, 2000);
	claim(s1, k2, &b, 2000);
	ck_assert_int_eq(a.a.result, STORE_CLAIMED);
	ck_assert_int_eq(b.a.result, STORE_CLAIMED);
	store_release(a.a.claim);
	store_release(b.a.claim);
	run_for(50);
}

START_TEST(uids_apart)
{
	uint8_t h[STORE_HASH_LEN];
	struct store_key k1, k2;
	mkkey(&k1, 1000, "same", "read_file", "{}", h);
	mkkey(&k2, 1001, "same", "read_file", "{}", h);
	claim_apart(&k1, &k2);
}
END_TEST

START_TEST(key_with_nul)
{
	uint8_t h[STORE_HASH_LEN];
	struct store_key k1, k2;
	mkkey(&k1, 1000, "a", "read_file", "{}", h);
	mkkey(&k2, 1000, "a", "read_file", "{}", h);
	k1.key = "a\0b";
	k1.key_len = 3;
	k2.key = "a\0c";
	k2.key_len = 3;
	claim_apart(&k1, &k2);
}
END_TEST

struct got_task {
	bool done;
	int r;
	char meta[256];
	char metas[8][64];
	size_t n;
	uint64_t next;
};

static void task_cb(void *arg, int r, const char *meta, size_t n)
{
	struct got_task *g = arg;
	g->done = true;
	g->r = r;
	if (r == 0)
		snprintf(g->meta, sizeof(g->meta), "%.*s", (int)n, meta);
}

static void list_cb(void *arg, int r, char **metas, size_t n, uint64_t next)
{
	struct got_task *g = arg;
	g->done = true;
	g->r = r;
	g->n = n;
	g->next = next;
	for (size_t i = 0; i < n && i < 8; i++)
		snprintf(g->metas[i], sizeof(g->metas[i]), "%s", metas[i]);
}

/* Gets task id of uid from s into *g; returns its result. */
static int get_task(struct store *s, uid_t uid, const char *id, struct got_task *g)
{
	*g = (struct got_task){0};
	store_task_get(s, uid, id, task_cb, g);
	ck_assert(run_until(&g->done, 2000));
	return g->r;
}

/* Lists uid's tasks after a position into *g; returns how many came. */
static size_t list_tasks(uid_t uid, uint64_t after, size_t limit, struct got_task *g)
{
	*g = (struct got_task){0};
	store_task_list(s1, uid, after, limit, list_cb, g);
	ck_assert(run_until(&g->done, 2000));
	ck_assert_int_eq(g->r, 0);
	return g->n;
}

START_TEST(tasks)
{
	for (int i = 1; i <= 5; i++) {
		char id[8], meta[64];
		snprintf(id, sizeof(id), "t%d", i);
		snprintf(meta, sizeof(meta), "{\"taskId\":\"t%d\"}", i);
		store_task_put(s1, 1000, id, meta, strlen(meta), (uint64_t)i * 10, 60000, false, NULL, NULL);
	}
	store_task_put(s1, 1001, "t9", "{\"taskId\":\"t9\"}", 15, 5, 60000, false, NULL, NULL);
	/* An update keeps the task's place. */
	store_task_put(s1, 1000, "t2", "{\"taskId\":\"t2\",\"s\":1}", 21, 99, 60000, false, NULL, NULL);
	struct got_task g;
	ck_assert_int_eq(get_task(s1, 1000, "t2", &g), 0);
	ck_assert_str_eq(g.meta, "{\"taskId\":\"t2\",\"s\":1}");
	ck_assert_int_eq(get_task(s1, 1001, "t2", &g), -ENOENT);
	ck_assert_int_eq(list_tasks(1000, 0, 2, &g), 2);
	ck_assert_str_eq(g.metas[0], "{\"taskId\":\"t1\"}");
	ck_assert_str_eq(g.metas[1], "{\"taskId\":\"t2\",\"s\":1}");
	ck_assert_uint_eq(g.next, 20);
	ck_assert_int_eq(list_tasks(1000, g.next, 10, &g), 3);
	ck_assert_str_eq(g.metas[2], "{\"taskId\":\"t5\"}");
	ck_assert_uint_eq(g.next, 0);
	/* Kept only keep_ms. */
	store_task_put(s1, 1002, "short", "{}", 2, 1, 50, false, NULL, NULL);
	run_for(150);
	ck_assert_int_eq(get_task(s1, 1002, "short", &g), -ENOENT);
}
END_TEST

/* The store's admin/stats members, as text. */
static char *stats_text(struct store *s)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	store_write_stats(s, g);
	jgen_obj_close(g);
	jgen_free(g);
	return buf_steal(&b);
}

/* Tasks of the memory store (the Redis store's fallback) go on their
 * time, though nobody asks for them again. */
START_TEST(tasks_expire_unasked)
{
	struct store *m = open_store("memory", 10000, false);
	store_task_put(m, 1000, "a", "{}", 2, 1, 50, true, NULL, NULL);
	store_task_put(m, 1000, "b", "{}", 2, 2, 100, true, NULL, NULL);
	store_task_put(m, 1001, "c", "{}", 2, 3, 60000, true, NULL, NULL);
	char *st = stats_text(m);
	ck_assert_msg(strstr(st, "\"tasks\":3"), "%s", st);
	free(st);
	run_for(250);
	st = stats_text(m);
	ck_assert_msg(strstr(st, "\"tasks\":1"), "%s", st);
	free(st);
	store_free(m);
}
END_TEST

struct put {
	bool done;
	int r;
	char kept[256];
};

static void put_cb(void *arg, int r, const char *kept, size_t n)
{
	struct put *p = arg;
	p->done = true;
	p->r = r;
	snprintf(p->kept, sizeof(p->kept), "%.*s", (int)n, kept ? kept : "");
}

/* Puts a task and waits for the store's answer. */
static int put_task(struct store *s, uid_t uid, const char *id, const char *meta, bool create)
{
	struct put p = {0};
	store_task_put(s, uid, id, meta, strlen(meta), 1, 60000, create, put_cb, &p);
	ck_assert(run_until(&p.done, 2000));
	return p.r;
}

/* Claims key for uid and completes it with value. */
static void run_keyed(struct store *s, uid_t uid, const char *key, const char *value)
{
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, uid, key, "read_file", "{}", h);
	struct got g;
	claim(s, &k, &g, 2000);
	ck_assert_int_eq(g.a.result, STORE_CLAIMED);
	complete(g.a.claim, value);
	run_for(20);
}

static enum store_result probe(struct store *s, uid_t uid, const char *key)
{
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, uid, key, "read_file", "{}", h);
	struct got g;
	claim(s, &k, &g, 2000);
	ck_assert(g.done);
	if (g.a.result == STORE_CLAIMED) {
		store_release(g.a.claim);
		run_for(20);
	}
	return g.a.result;
}

/* One uid past its bounds loses its own oldest outcomes and cannot make
 * more tasks; another uid keeps what it has and makes tasks. */
START_TEST(bounds_per_uid)
{
	store_set_limits(s1, 60000, 3, UINT64_C(1) << 30);
	struct store_config c;
	store_config_defaults(&c);
	c.max_tasks = 2;
	store_reconfigure(s1, &c);
	run_keyed(s1, 1001, "other", "kept");
	run_keyed(s1, 1000, "k0", "v0");
	for (int i = 1; i <= 3; i++) {
		char key[8];
		snprintf(key, sizeof(key), "k%d", i);
		run_keyed(s1, 1000, key, "v");
	}
	ck_assert_int_eq(probe(s1, 1000, "k3"), STORE_DONE);
	ck_assert_int_eq(probe(s1, 1000, "k0"), STORE_CLAIMED);
	ck_assert_int_eq(probe(s1, 1001, "other"), STORE_DONE);
	ck_assert_int_eq(put_task(s1, 1000, "t1", "{}", true), 0);
	ck_assert_int_eq(put_task(s1, 1000, "t2", "{}", true), 0);
	ck_assert_int_eq(put_task(s1, 1000, "t3", "{}", true), -EBUSY);
	ck_assert_int_eq(put_task(s1, 1000, "t1", "{\"s\":1}", false), 0);
	ck_assert_int_eq(put_task(s1, 1001, "t1", "{}", true), 0);
}
END_TEST

/* A uid past its bound loses its oldest ended records, never a running
 * one however old, and keeps its newest: Redis drops them in batches (a
 * 64th of the bound at most), the memory store one at a time. */
START_TEST(bound_keeps_running)
{
	const int max = 128, n = max + 10;
	store_set_limits(s1, 60000, (size_t)max, UINT64_C(1) << 30);
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "running", "shell", "{}", h);
	struct got held, join;
	claim(s1, &k, &held, 2000);
	ck_assert_int_eq(held.a.result, STORE_CLAIMED);
	char key[16];
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "b%d", i);
		run_keyed(s1, 1000, key, "v");
	}
	/* Newest first: a probe that claims adds a record. */
	for (int i = n - 1; i >= n - (max - 4); i--) {
		snprintf(key, sizeof(key), "b%d", i);
		ck_assert_msg(probe(s1, 1000, key) == STORE_DONE, "%s went", key);
	}
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "b%d", i);
		ck_assert_msg(probe(s1, 1000, key) == STORE_CLAIMED, "%s stayed", key);
	}
	claim(s1, &k, &join, 200);
	ck_assert_msg(!join.done, "the running call's record went");
	store_wait_cancel(join.w);
	store_release(held.a.claim);
	run_for(20);
}
END_TEST

/* --- two daemons on one Redis ------------------------------------------ */

static unsigned heard;
static char heard_id[64];

static void heard_fn(void *arg, uid_t uid, const char *id)
{
	heard++;
	snprintf(heard_id, sizeof(heard_id), "%u:%s", (unsigned)uid, id);
}

/* A task written on one daemon is known to the other once the write's
 * answer came; cancelled from the other, the first hears of it and can
 * never write it back to working. */
START_TEST(task_cancel_across_stores)
{
	struct store *a = open_store("redis", 10000, false), *b = open_store("redis", 10000, false);
	store_hear_cancels(a, heard_fn, NULL);
	heard = 0;
	const char *working = "{\"task\":{\"taskId\":\"tX\",\"status\":\"working\"}}";
	const char *cancelled = "{\"task\":{\"taskId\":\"tX\",\"status\":\"cancelled\"}}";
	run_for(100);	/* a's subscription */
	for (int i = 0; i < 50; i++) {
		char id[16];
		snprintf(id, sizeof(id), "n%d", i);
		ck_assert_int_eq(put_task(a, 1000, id, "{}", true), 0);
		struct got_task gt;
		ck_assert_int_eq(get_task(b, 1000, id, &gt), 0);
	}
	ck_assert_int_eq(put_task(a, 1000, "tX", working, true), 0);
	struct put p = {0};
	store_task_swap(b, 1000, "tX", "stale", 5, cancelled, strlen(cancelled), 60000, put_cb, &p);
	ck_assert(run_until(&p.done, 2000));
	ck_assert_int_eq(p.r, -ESTALE);
	ck_assert_str_eq(p.kept, working);
	p = (struct put){0};
	store_task_swap(b, 1000, "tX", working, strlen(working), cancelled, strlen(cancelled), 60000, put_cb, &p);
	ck_assert(run_until(&p.done, 2000));
	ck_assert_int_eq(p.r, 0);
	bool got = false;
	uint64_t end = mono_ms() + 2000;
	while (!(got = heard > 0) && mono_ms() < end)
		ev_run(ev, EVRUN_ONCE);
	ck_assert(got);
	ck_assert_str_eq(heard_id, "1000:tX");
	/* The running daemon's next write finds it cancelled and keeps it. */
	p = (struct put){0};
	store_task_put(a, 1000, "tX", working, strlen(working), 1, 60000, false, put_cb, &p);
	ck_assert(run_until(&p.done, 2000));
	ck_assert_int_eq(p.r, -ECANCELED);
	ck_assert_str_eq(p.kept, cancelled);
	p = (struct put){0};
	store_task_swap(b, 1000, "nope", working, strlen(working), cancelled, strlen(cancelled), 60000, put_cb, &p);
	ck_assert(run_until(&p.done, 2000));
	ck_assert_int_eq(p.r, -ENOENT);
	store_free(a);
	store_free(b);
}
END_TEST

static void setup_redis(void)
{
	if (rs.pid <= 0)
		redis_server_start(&rs);
	redis_server_flush(&rs);
	downs = ups = 0;
}

/* Claims k on a, then on b, which waits for a's holder to end. */
static void hold_and_join(struct store *a, struct store *b, struct store_key *k, struct got *ga, struct got *gb)
{
	claim(a, k, ga, 2000);
	ck_assert_int_eq(ga->a.result, STORE_CLAIMED);
	claim(b, k, gb, 300);
	ck_assert(!gb->done);
}

START_TEST(join_across_stores)
{
	struct store *a = open_store("redis", 10000, false), *b = open_store("redis", 10000, false);
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "shared", "shell", "{\"command\":\"x\"}", h);
	struct got ga, gb, gc;
	hold_and_join(a, b, &k, &ga, &gb);
	complete(ga.a.claim, "ran once");
	ck_assert(run_until(&gb.done, 3000));
	ck_assert_int_eq(gb.a.result, STORE_DONE);
	ck_assert(gb.a.joined);
	ck_assert_str_eq(gb.value, "ran once");
	/* Replayed on the other daemon too, and conflicts are seen there. */
	claim(b, &k, &gc, 2000);
	ck_assert_int_eq(gc.a.result, STORE_DONE);
	ck_assert_str_eq(gc.value, "ran once");
	k.tool = "read_file";
	claim(b, &k, &gc, 2000);
	ck_assert_int_eq(gc.a.result, STORE_CONFLICT);
	/* Tasks too. */
	store_task_put(a, 1000, "tA", "{\"taskId\":\"tA\"}", 15, 1, 60000, false, NULL, NULL);
	run_for(50);
	struct got_task gt;
	ck_assert_int_eq(get_task(b, 1000, "tA", &gt), 0);
	store_free(a);
	store_free(b);
	ck_assert_uint_eq(downs, 0);
}
END_TEST

START_TEST(release_across_stores)
{
	struct store *a = open_store("redis", 10000, false), *b = open_store("redis", 10000, false);
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "rel", "shell", "{}", h);
	struct got ga, gb;
	hold_and_join(a, b, &k, &ga, &gb);
	store_release(ga.a.claim);
	ck_assert(run_until(&gb.done, 3000));
	ck_assert_int_eq(gb.a.result, STORE_CLAIMED);
	store_release(gb.a.claim);
	store_free(a);
	store_free(b);
}
END_TEST

/* A holder dies: its lease runs out; an idempotent tool runs again, a
 * non-idempotent one is never run twice under that key. */
START_TEST(dead_holder)
{
	struct store *a = open_store("redis", 300, false), *b = open_store("redis", 300, false);
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "dies", "shell", "{}", h);
	struct got ga, gb, gc;
	claim(a, &k, &ga, 2000);
	ck_assert_int_eq(ga.a.result, STORE_CLAIMED);
	struct store_claim *held = ga.a.claim;
	/* Lease renewal keeps it alive well past lease_ms. */
	claim(b, &k, &gb, 900);
	ck_assert(!gb.done);
	store_wait_cancel(gb.w);
	store_free(a);			/* dies: renewals stop */
	uint64_t t0 = mono_ms();
	claim(b, &k, &gb, 3000);
	ck_assert(gb.done);
	ck_assert_int_eq(gb.a.result, STORE_LOST);
	ck_assert_uint_lt(mono_ms() - t0, 2000);
	/* Still unknown for the next caller: never a second run. */
	claim(b, &k, &gc, 2000);
	ck_assert_int_eq(gc.a.result, STORE_LOST);
	store_release(held);		/* the dead store's handle */

	mkkey(&k, 1000, "dies-idem", "read_file", "{}", h);
	k.idempotent = true;
	struct store *c = open_store("redis", 300, false);
	claim(c, &k, &ga, 2000);
	ck_assert_int_eq(ga.a.result, STORE_CLAIMED);
	held = ga.a.claim;
	store_free(c);
	claim(b, &k, &gb, 3000);
	ck_assert_int_eq(gb.a.result, STORE_CLAIMED);
	store_release(held);
	complete(gb.a.claim, "second run");
	claim(b, &k, &gc, 2000);
	ck_assert_int_eq(gc.a.result, STORE_DONE);
	ck_assert_str_eq(gc.value, "second run");
	store_free(b);
}
END_TEST

/* Waits until a's claims are seen by b again (Redis back in use). */
static bool shared_again(struct store *a, struct store *b, int ms)
{
	uint64_t end = mono_ms() + (uint64_t)ms;
	for (int i = 0; mono_ms() < end; i++) {
		char key[32];
		snprintf(key, sizeof(key), "probe-%d", i);
		uint8_t h[STORE_HASH_LEN];
		struct store_key k;
		mkkey(&k, 1000, key, "shell", "{}", h);
		struct got ga, gb;
		claim(a, &k, &ga, 1000);
		claim(b, &k, &gb, 200);
		bool joined = !gb.done;
		if (ga.done && ga.a.result == STORE_CLAIMED)
			store_release(ga.a.claim);
		if (joined) {
			run_until(&gb.done, 1000);
		}
		if (gb.done && gb.a.result == STORE_CLAIMED)
			store_release(gb.a.claim);
		else if (!gb.done)
			store_wait_cancel(gb.w);
		if (joined)
			return true;
		run_for(100);
	}
	return false;
}

START_TEST(stalled_redis)
{
	struct store *a = open_store("redis", 10000, false), *b = open_store("redis", 10000, false);
	struct store *f = open_store("redis", 10000, true);
	ck_assert(shared_again(a, b, 5000));
	redis_server_pause(&rs, true);
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "during-stall", "shell", "{}", h);
	struct got ga, gf, gl;
	/* "local": the claim is answered from this daemon's memory after the
	 * timeout; "fail": unavailable. */
	claim(a, &k, &ga, 3000);
	ck_assert(ga.done);
	ck_assert_int_eq(ga.a.result, STORE_CLAIMED);
	claim(f, &k, &gf, 3000);
	ck_assert(gf.done);
	ck_assert_int_eq(gf.a.result, STORE_UNAVAILABLE);
	/* Local joins still work while Redis is away. */
	claim(a, &k, &gl, 100);
	ck_assert(!gl.done);
	complete(ga.a.claim, "local");
	ck_assert(run_until(&gl.done, 1000));
	ck_assert_str_eq(gl.value, "local");
	unsigned d = downs;
	ck_assert_uint_ge(d, 2);	/* a and f, once each */
	ck_assert_uint_le(d, 3);
	redis_server_pause(&rs, false);
	ck_assert(shared_again(a, b, 10000));
	ck_assert_uint_ge(ups, 2);
	store_free(a);
	store_free(b);
	store_free(f);
}
END_TEST

START_TEST(killed_redis)
{
	struct store *a = open_store("redis", 10000, false), *b = open_store("redis", 10000, false);
	ck_assert(shared_again(a, b, 5000));
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "joined-then-killed", "shell", "{}", h);
	struct got ga, gb;
	hold_and_join(a, b, &k, &ga, &gb);
	redis_server_kill(&rs);
	/* The joiner cannot know how the call elsewhere ends. */
	ck_assert(run_until(&gb.done, 3000));
	ck_assert_int_eq(gb.a.result, STORE_LOST);
	store_release(ga.a.claim);
	mkkey(&k, 1000, "while-down", "shell", "{}", h);
	claim(a, &k, &ga, 2000);
	ck_assert_int_eq(ga.a.result, STORE_CLAIMED);
	store_release(ga.a.claim);
	redis_server_start(&rs);
	ck_assert(shared_again(a, b, 15000));
	store_free(a);
	store_free(b);
}
END_TEST

/* An outcome this store recorded with Redis up is replayed from its own
 * memory while Redis is stalled: at once, not after the timeout. */
START_TEST(own_outcome_while_stalled)
{
	struct store *a = open_store("redis", 10000, false);
	struct store *f = open_store("redis", 10000, true);
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "own-stalled", "shell", "{}", h);
	struct got g;
	for (int i = 0; i < 2; i++) {
		struct store *s = i ? f : a;
		claim(s, &k, &g, 2000);
		ck_assert_int_eq(g.a.result, i ? STORE_DONE : STORE_CLAIMED);
		if (!i)
			complete(g.a.claim, "before");
	}
	run_for(50);
	redis_server_pause(&rs, true);
	uint64_t t0 = mono_ms();
	claim(a, &k, &g, 0);
	ck_assert(g.done);
	ck_assert_int_eq(g.a.result, STORE_DONE);
	ck_assert_str_eq(g.value, "before");
	ck_assert_uint_lt(mono_ms() - t0, 100);
	/* "fail" replays what it kept too (it replayed it from Redis). */
	claim(f, &k, &g, 0);
	ck_assert(g.done);
	ck_assert_int_eq(g.a.result, STORE_DONE);
	redis_server_pause(&rs, false);
	store_free(a);
	store_free(f);
}
END_TEST

/* Kills and restarts the test's redis-server, empty. */
static void restart_empty(void)
{
	redis_server_kill(&rs);
	redis_server_start(&rs);
	redis_server_flush(&rs);
}

/* A key claimed and completed while Redis is down is written back when
 * it is up again, though it came back empty: another store replays it. */
START_TEST(alone_written_back)
{
	struct store *a = open_store("redis", 10000, false), *b = open_store("redis", 10000, false);
	ck_assert(shared_again(a, b, 5000));
	redis_server_kill(&rs);
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "while-away", "shell", "{}", h);
	struct got g;
	claim(a, &k, &g, 3000);
	ck_assert(g.done);
	ck_assert_int_eq(g.a.result, STORE_CLAIMED);
	complete(g.a.claim, "alone");
	redis_server_start(&rs);
	redis_server_flush(&rs);
	ck_assert(shared_again(a, b, 15000));
	claim(b, &k, &g, 2000);
	ck_assert(g.done);
	ck_assert_int_eq(g.a.result, STORE_DONE);
	ck_assert_str_eq(g.value, "alone");
	claim(a, &k, &g, 0);
	ck_assert_int_eq(g.a.result, STORE_DONE);
	store_free(a);
	store_free(b);
}
END_TEST

/* An end that leaves as Redis dies is not lost: it is written back once
 * Redis is there again (empty), and another store replays it. */
START_TEST(end_lost_written_back)
{
	struct store *a = open_store("redis", 10000, false), *b = open_store("redis", 10000, false);
	ck_assert(shared_again(a, b, 5000));
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "ends-as-it-dies", "shell", "{}", h);
	struct got g;
	claim(a, &k, &g, 2000);
	ck_assert_int_eq(g.a.result, STORE_CLAIMED);
	complete(g.a.claim, "ended");
	redis_server_kill(&rs);
	run_for(300);
	redis_server_start(&rs);
	redis_server_flush(&rs);
	ck_assert(shared_again(a, b, 15000));
	claim(b, &k, &g, 2000);
	ck_assert(g.done);
	ck_assert_int_eq(g.a.result, STORE_DONE);
	ck_assert_str_eq(g.value, "ended");
	store_free(a);
	store_free(b);
}
END_TEST

/* Redis restarts empty while a store holds a claim: the claim is made in
 * Redis again with its token, so another store joins it rather than
 * running the key, and hears its end. */
START_TEST(running_claim_back)
{
	struct store *a = open_store("redis", 300, false), *b = open_store("redis", 300, false);
	ck_assert(shared_again(a, b, 5000));
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "runs-on", "shell", "{}", h);
	struct got ga, gb;
	claim(a, &k, &ga, 2000);
	ck_assert_int_eq(ga.a.result, STORE_CLAIMED);
	restart_empty();
	ck_assert(shared_again(a, b, 15000));
	run_for(300);	/* a renewal finds the record gone and claims it again */
	claim(b, &k, &gb, 500);
	ck_assert_msg(!gb.done, "the other store got %d, not a join", gb.a.result);
	complete(ga.a.claim, "once");
	ck_assert(run_until(&gb.done, 3000));
	ck_assert_int_eq(gb.a.result, STORE_DONE);
	ck_assert_str_eq(gb.value, "once");
	store_free(a);
	store_free(b);
}
END_TEST

/* Makes Redis forget the scripts, as SCRIPT FLUSH or a failover does. */
static void forget_scripts(void)
{
	redisContext *c = redisConnectUnix(rs.sock);
	ck_assert(c && !c->err);
	redisReply *rep = redisCommand(c, "SCRIPT FLUSH");
	ck_assert(rep && rep->type == REDIS_REPLY_STATUS);
	freeReplyObject(rep);
	redisFree(c);
}

/* Scripts go by their SHA-1: a Redis that forgot them is sent their text
 * again, without an outage, and claims still meet across stores. */
START_TEST(scripts_forgotten)
{
	struct store *a = open_store("redis", 10000, false), *b = open_store("redis", 10000, false);
	ck_assert(shared_again(a, b, 5000));
	forget_scripts();
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "after-flush", "shell", "{}", h);
	struct got ga, gb;
	hold_and_join(a, b, &k, &ga, &gb);
	complete(ga.a.claim, "once");
	ck_assert(run_until(&gb.done, 3000));
	ck_assert_int_eq(gb.a.result, STORE_DONE);
	ck_assert_str_eq(gb.value, "once");
	ck_assert_uint_eq(downs, 0);
	store_free(a);
	store_free(b);
}
END_TEST

START_TEST(hostile_records)
{
	struct store *a = open_store("redis", 10000, false);
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, "hostile", "shell", "{}", h);
	uint8_t kh[STORE_HASH_LEN];
	store_sha256("hostile", 7, kh);
	char key[160];
	int n = snprintf(key, sizeof(key), "test:idem:1000:");
	for (int i = 0; i < STORE_HASH_LEN; i++)
		n += snprintf(key + n, sizeof(key) - (size_t)n, "%02x", kh[i]);
	const char *bad[] = {
		"garbage",
		"D0123456789abcdef0123456789abcdefZZZZ",
		/* A well-formed record whose outcome does not decode. */
		NULL,
	};
	char built[256];
	char hhex[65];
	for (int i = 0; i < STORE_HASH_LEN; i++)
		snprintf(hhex + 2 * i, 3, "%02x", h[i]);
	snprintf(built, sizeof(built), "D0123456789abcdef0123456789abcdef%sshell\n!bad", hhex);
	bad[2] = built;
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		redis_server_set(&rs, key, bad[i]);
		unsigned d = downs;
		struct got g;
		claim(a, &k, &g, 3000);
		ck_assert_msg(g.done, "record %zu", i);
		/* Never trusted: answered from the local store as an outage. */
		ck_assert_int_eq(g.a.result, STORE_CLAIMED);
		ck_assert_uint_eq(downs, d + 1);
		store_release(g.a.claim);
		/* Reconnects by itself. */
		uint64_t end = mono_ms() + 5000;
		while (ups < d + 1 && mono_ms() < end)
			run_for(20);
		ck_assert_uint_ge(ups, d + 1);
	}
	store_free(a);
}
END_TEST

/* Many claims asked in one loop turn leave together (in more than one
 * script call, the first before the turn ends): each caller gets its own
 * answer (at once for the keys this store recorded itself); a wait
 * cancelled while its claim is queued or in flight is never answered, and
 * a claim won for it is let go at once. */
START_TEST(claims_together)
{
	enum { N = 80, DONE = 5, DONE2 = 45, CONFLICT = 6, RUNNING = 7, FIRST = 8, SAME = 9, GONE = 1, QUEUED = 70 };
	struct store *a = open_store("redis", 10000, false);
	uint8_t hd[STORE_HASH_LEN], hr[STORE_HASH_LEN], hx[STORE_HASH_LEN], h[N][STORE_HASH_LEN];
	struct store_key kd, kr, kx, k[N];
	struct got pre, run, g[N], again;
	mkkey(&kd, 1000, "turn-done", "shell", "{}", hd);
	claim(a, &kd, &pre, 2000);
	ck_assert_int_eq(pre.a.result, STORE_CLAIMED);
	complete(pre.a.claim, "kept");
	run_for(50);
	mkkey(&kr, 1000, "turn-running", "shell", "{}", hr);
	claim(a, &kr, &run, 2000);
	ck_assert_int_eq(run.a.result, STORE_CLAIMED);
	mkkey(&kx, 1000, "turn-done", "shell", "{\"other\":1}", hx);
	char names[N][16];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "turn-%d", i == SAME ? FIRST : i);
		mkkey(&k[i], i % 3 ? 1000 : 1001, names[i], "shell", "{}", h[i]);
		if (i == SAME)
			k[i].uid = k[FIRST].uid;
	}
	k[DONE] = kd;
	k[DONE2] = kd;
	k[CONFLICT] = kx;
	k[RUNNING] = kr;
	for (int i = 0; i < N; i++) {
		claim(a, &k[i], &g[i], 0);
		/* This daemon's own record answers at once: the outcome it
		 * kept, and a conflict with it. */
		if (i == DONE || i == DONE2 || i == CONFLICT)
			ck_assert(g[i].done && !g[i].w);
		else
			ck_assert(g[i].w && !g[i].done);
	}
	store_wait_cancel(g[GONE].w);	/* in flight: its script call left */
	store_wait_cancel(g[QUEUED].w);	/* still queued */
	g[GONE].done = g[QUEUED].done = g[RUNNING].done = g[SAME].done = true;
	ck_assert(run_until_all(g, N, 3000));
	g[GONE].done = g[QUEUED].done = g[RUNNING].done = g[SAME].done = false;
	for (int i = 0; i < N; i++) {
		if (i == GONE || i == QUEUED || i == RUNNING || i == SAME) {
			ck_assert(!g[i].done);
			continue;
		}
		if (i == DONE || i == DONE2) {
			ck_assert_int_eq(g[i].a.result, STORE_DONE);
			ck_assert_str_eq(g[i].value, "kept");
			ck_assert(!g[i].a.joined);
		} else if (i == CONFLICT) {
			ck_assert_int_eq(g[i].a.result, STORE_CONFLICT);
			ck_assert(g[i].a.same_tool);
		} else {
			ck_assert_int_eq(g[i].a.result, STORE_CLAIMED);
			for (int j = 0; j < i; j++)
				ck_assert_ptr_ne(g[i].a.claim, g[j].a.claim);
		}
	}
	/* The two that wait hear their holders' ends. */
	complete(g[FIRST].a.claim, "first");
	ck_assert(run_until(&g[SAME].done, 3000));
	ck_assert_int_eq(g[SAME].a.result, STORE_DONE);
	ck_assert(g[SAME].a.joined);
	ck_assert_str_eq(g[SAME].value, "first");
	complete(run.a.claim, "ran");
	ck_assert(run_until(&g[RUNNING].done, 3000));
	ck_assert_int_eq(g[RUNNING].a.result, STORE_DONE);
	ck_assert_str_eq(g[RUNNING].value, "ran");
	for (int i = 0; i < N; i++)
		if (i != FIRST && g[i].done && g[i].a.result == STORE_CLAIMED)
			store_release(g[i].a.claim);
	/* Nobody holds the cancelled ones' keys (a lease of 10 s would make
	 * these wait). */
	claim(a, &k[GONE], &again, 2000);
	ck_assert(again.done);
	ck_assert_int_eq(again.a.result, STORE_CLAIMED);
	store_release(again.a.claim);
	claim(a, &k[QUEUED], &again, 2000);
	ck_assert(again.done);
	ck_assert_int_eq(again.a.result, STORE_CLAIMED);
	store_release(again.a.claim);
	ck_assert(!g[GONE].done && !g[QUEUED].done);
	store_free(a);
	ck_assert_uint_eq(downs, 0);
}
END_TEST

/* --- who serves the socket ------------------------------------------------ */

#define NOBODY 65534

/* A redis-server of another uid, on a socket of its own. */
static struct redis_server other;

/* Whether the store's stats say it is connected (its own member, first,
 * not its local store's). */
static bool connected(struct store *s)
{
	char *t = stats_text(s);
	const char *c = strstr(t, "\"connected\":");
	bool up = c && str_has_prefix(c, "\"connected\":true");
	free(t);
	return up;
}

/* Runs the loop until s is connected (or not), at most ms. */
static bool run_until_connected(struct store *s, bool want, int ms)
{
	uint64_t end = mono_ms() + (uint64_t)ms;
	while (connected(s) != want && mono_ms() < end)
		ev_run(ev, EVRUN_ONCE);
	return connected(s) == want;
}

/* Starts other as uid, from scratch. */
static void other_start(uid_t uid)
{
	redis_server_kill(&other);
	other.uid = uid;
	redis_server_start(&other);
	redis_server_flush(&other);
}

/* A key claimed and completed on s: replayed, from wherever s keeps it. */
static void run_and_replay(struct store *s, const char *key)
{
	uint8_t h[STORE_HASH_LEN];
	struct store_key k;
	mkkey(&k, 1000, key, "shell", "{}", h);
	struct got g;
	claim(s, &k, &g, 2000);
	ck_assert_int_eq(g.a.result, STORE_CLAIMED);
	complete(g.a.claim, "ran once");
	claim(s, &k, &g, 2000);
	ck_assert_int_eq(g.a.result, STORE_DONE);
	ck_assert_str_eq(g.value, "ran once");
}

static void teardown_other(void)
{
	redis_server_kill(&other);
}

/* A Redis socket served by another uid is refused before a word is sent:
 * an outage saying why, the local store answering, nothing in that Redis. */
START_TEST(other_uid_refused)
{
	if (geteuid() != 0)
		TC_SKIP("running redis-server as uid %d needs root", NOBODY);
	other_start(NOBODY);
	downs = ups = 0;
	struct store *s = open_store_at("redis", 10000, false, other.sock, (uid_t)-1);
	ck_assert_uint_eq(downs, 1);
	ck_assert_msg(strstr(last_why, other.sock) && strstr(last_why, "runs as uid 65534") &&
		      strstr(last_why, "accepted are uid 0 (root)"), "%s", last_why);
	run_and_replay(s, "refused");
	/* Reconnections (100 ms, 200 ms, ... apart) are refused too, with no
	 * new warning: the same outage. */
	run_for(800);
	ck_assert(!connected(s));
	ck_assert_uint_eq(downs, 1);
	ck_assert_uint_eq(ups, 0);
	ck_assert_int_eq(redis_server_keys(&other), 0);
	/* Another uid trusted, not this one, still refuses it. */
	store_free(s);
	downs = 0;
	s = open_store_at("redis", 10000, false, other.sock, NOBODY - 1);
	ck_assert_uint_eq(downs, 1);
	ck_assert_msg(strstr(last_why, "runs as uid 65534") && strstr(last_why, "65533 (store.server_uid)"),
		      "%s", last_why);
	/* A reload naming it: trusted from the next connect on. */
	struct store_config c;
	store_config_defaults(&c);
	c.server_uid = NOBODY;
	store_reconfigure(s, &c);
	ck_assert(run_until_connected(s, true, 8000));
	ck_assert_uint_eq(ups, 1);
	store_free(s);
}
END_TEST

/* The same server, its uid configured: used as the shared store. */
START_TEST(configured_uid_trusted)
{
	if (geteuid() != 0)
		TC_SKIP("running redis-server as uid %d needs root", NOBODY);
	other_start(NOBODY);
	downs = ups = 0;
	struct store *s = open_store_at("redis", 10000, false, other.sock, NOBODY);
	ck_assert(run_until_connected(s, true, 5000));
	ck_assert_uint_eq(downs, 0);
	run_and_replay(s, "trusted");
	/* The outcome went to that Redis. */
	bool stored = false;
	uint64_t end = mono_ms() + 5000;
	while (!(stored = redis_server_keys(&other) > 0) && mono_ms() < end)
		run_for(20);
	ck_assert(stored);
	store_free(s);
}
END_TEST

/* A trusted server replaced, at the same path, by one of another uid:
 * the reconnection is refused; the trusted one back is used again. */
START_TEST(refused_on_reconnect)
{
	if (geteuid() != 0)
		TC_SKIP("running redis-server as uid %d needs root", NOBODY);
	other_start(0);
	downs = ups = 0;
	struct store *s = open_store_at("redis", 10000, false, other.sock, (uid_t)-1);
	ck_assert(run_until_connected(s, true, 5000));
	other_start(NOBODY);
	ck_assert(run_until_connected(s, false, 5000));
	bool refused = false;
	uint64_t end = mono_ms() + 8000;
	while (!(refused = strstr(last_why, "runs as uid 65534") != NULL) && mono_ms() < end)
		run_for(20);
	ck_assert_msg(refused, "%s", last_why);
	run_for(1000);
	ck_assert(!connected(s));
	ck_assert_uint_eq(ups, 0);
	ck_assert_int_eq(redis_server_keys(&other), 0);
	other_start(0);
	ck_assert(run_until_connected(s, true, 15000));
	ck_assert_uint_eq(ups, 1);
	store_free(s);
}
END_TEST

static Suite *suite(const char *kind)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create(kind);
	tcase_set_timeout(tc, 120);
	if (str_eq(kind, "redis"))
		tcase_add_checked_fixture(tc, setup_redis, NULL);
	tcase_add_checked_fixture(tc, setup_backend, teardown_backend);
	tcase_add_test(tc, claim_join_replay);
	tcase_add_test(tc, conflicts);
	tcase_add_test(tc, release_hands_over);
	tcase_add_test(tc, ends_together);
	tcase_add_test(tc, cancel_wait);
	tcase_add_test(tc, uids_apart);
	tcase_add_test(tc, key_with_nul);
	tcase_add_test(tc, tasks);
	tcase_add_test(tc, tasks_expire_unasked);
	tcase_add_test(tc, bounds_per_uid);
	tcase_add_test(tc, bound_keeps_running);
	suite_add_tcase(s, tc);
	if (str_eq(kind, "redis")) {
		tc = tcase_create("shared");
		tcase_set_timeout(tc, 120);
		tcase_add_checked_fixture(tc, setup_redis, NULL);
		tcase_add_test(tc, join_across_stores);
		tcase_add_test(tc, release_across_stores);
		tcase_add_test(tc, claims_together);
		tcase_add_test(tc, dead_holder);
		tcase_add_test(tc, stalled_redis);
		tcase_add_test(tc, killed_redis);
		tcase_add_test(tc, hostile_records);
		tcase_add_test(tc, task_cancel_across_stores);
		tcase_add_test(tc, scripts_forgotten);
		tcase_add_test(tc, own_outcome_while_stalled);
		tcase_add_test(tc, alone_written_back);
		tcase_add_test(tc, running_claim_back);
		tcase_add_test(tc, end_lost_written_back);
		suite_add_tcase(s, tc);
		tc = tcase_create("server uid");
		tcase_set_timeout(tc, 120);
		tcase_add_checked_fixture(tc, NULL, teardown_other);
		tcase_add_test(tc, other_uid_refused);
		tcase_add_test(tc, configured_uid_trusted);
		tcase_add_test(tc, refused_on_reconnect);
		suite_add_tcase(s, tc);
	}
	return s;
}

/* argv[1] names the backend: "memory" or "redis". The cases run in this
 * process (no fork): the redis-server child and the loop are shared. */
int main(int argc, char **argv)
{
	backend = argc > 1 ? argv[1] : "memory";
	signal(SIGPIPE, SIG_IGN);
	const char *why;
	if (str_eq(backend, "redis") && !redis_server_available(&why)) {
		fprintf(stderr, "skipped: %s\n", why);
		return 77;	/* meson: skipped */
	}
	ev = ev_loop_new(EVFLAG_AUTO);
	loop = tc_loop_ev_new(ev);
	ev_timer_init(&tick, tick_cb, 0.01, 0.01);
	ev_timer_start(ev, &tick);

	SRunner *sr = srunner_create(suite(backend));
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	redis_server_free(&rs);
	redis_server_free(&other);
	tc_loop_ev_free(loop);
	ev_loop_destroy(ev);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
