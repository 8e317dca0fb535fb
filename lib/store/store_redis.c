/* SPDX-License-Identifier: MIT */
/*
 * The Redis store: idempotency records and tasks shared by every daemon
 * that uses the same Redis and prefix, spoken asynchronously on the
 * daemon's own loop (hiredis and its libev adapter, given the ev_loop the
 * loop seam wraps). The claims and the ends of one loop turn go in few
 * script calls (CLAIMS_PER_EVAL, ENDS_PER_EVAL to a call); a full call's
 * worth is written at once, so that Redis works on it while the daemon
 * goes on with the turn, and the rest leaves when the turn ends.
 *
 * The parts: store_redis_internal.h. Calls go one way, down: this file
 * (the store) over the task records, the claims, the ends and, at the
 * bottom, the connection, which reports up through struct rconn_events.
 *
 * Keys, under the prefix P and the peer uid U:
 *   P idem:U:H        the record: "R" (running) or "D" (done) or "X" (done,
 *                     outcome too large to share), then the holder's token
 *                     (32 hex), the arguments' hash (64 hex), the tool, "\n",
 *                     and for "D" the encoded outcome. H is the SHA-256 of
 *                     the client's key, so key bytes never reach Redis.
 *   P idem:U:H:lease  the holder's token while its lease runs (SET NX PX
 *                     lease_ms, renewed every third of it while the call
 *                     runs); the channel P idem:U:H hears when it ends.
 *   P idem:U:H:T      the outcome record of the holder with token T, for
 *                     the moment between its SET and the script that
 *                     renames it to P idem:U:H (or drops it).
 *   P idems:U         a sorted set of U's records, oldest first, to keep
 *                     U within idempotency.max_entries.
 *   P task:U:ID       a task's JSON;  P tasks:U  a sorted set of U's tasks.
 * A record outlives a dead holder's lease by the idempotency TTL, so its key
 * keeps answering "outcome unknown" to non-idempotent tools instead of
 * running them twice. Leases are timed by Redis alone: daemons' clocks
 * never meet.
 *
 * Faults: no reply within timeout_ms, a closed connection, an error reply
 * or a reply of the wrong shape is an outage: the connections are dropped,
 * every pending request is answered from the local memory store ("local")
 * or as unavailable ("fail"), and reconnection is tried with backoff.
 *
 * This daemon's own records: every claim is first made in the local memory
 * store, which so holds the keys this daemon runs and the outcomes it
 * recorded (within the TTL and the entry and byte bounds), whether Redis
 * was there or not; only then does the claim go to Redis. A key this
 * daemon recorded is replayed from there, with Redis up or away, and a
 * key it runs is joined there: an outage never makes it run a key twice,
 * nor wait for or report "unknown" a claim of its own. What it recorded
 * alone (outcomes and claims of an outage, ends Redis did not hear) is
 * written back when Redis answers again, before anything else on that
 * connection: an outcome takes the place of no record or of its own
 * running one, never of another daemon's; a claim still running is
 * claimed in Redis again with its token.
 */
#include "lib/store/store.h"

#include "lib/store/store_redis_internal.h"

/* --- the store --------------------------------------------------------- */

static size_t list_count(const struct list *l)
{
	size_t n = 0;
	for (const struct list *p = l->next; p != l; p = p->next)
		n++;
	return n;
}

static void rs_write_stats(struct store *s, struct jgen *g)
{
	struct rstore *r = RS(s);
	jgen_kv_str(g, "kind", "redis");
	jgen_kv_str(g, "address", r->address);
	jgen_kv_bool(g, "connected", r->up);
	jgen_kv_int(g, "rttUs", (int64_t)r->rtt_us);
	jgen_kv_int(g, "outages", (int64_t)r->outages);
	jgen_kv_int(g, "commands", (int64_t)r->commands);
	jgen_kv_int(g, "pending", (int64_t)list_count(&r->pending));
	jgen_kv_int(g, "claimsHeld", (int64_t)list_count(&r->claims));
	jgen_kv_int(g, "leasesLost", (int64_t)r->lost_leases);
	jgen_kv_int(g, "writeBackPending", (int64_t)r->n_own);
	jgen_kv_int(g, "writtenBack", (int64_t)r->written_back);
	jgen_kv_int(g, "writeBackDropped", (int64_t)r->own_dropped);
	jgen_kv_int(g, "hits", (int64_t)r->hits);
	jgen_kv_int(g, "joins", (int64_t)r->joins);
	jgen_key(g, "local");
	jgen_obj_open(g);
	store_write_stats(r->local, g);
	jgen_obj_close(g);
}

static void rs_set_limits(struct store *s, uint64_t ttl_ms, size_t max_entries, uint64_t max_bytes)
{
	struct rstore *r = RS(s);
	r->cfg.ttl_ms = ttl_ms;
	r->cfg.max_entries = max_entries;
	r->cfg.max_bytes = max_bytes;
	store_set_limits(r->local, ttl_ms, max_entries, max_bytes);
}

static size_t rs_entries(struct store *s) { return store_entries(RS(s)->local); }
static void rs_sweep(struct store *s) { store_sweep(RS(s)->local); }
static uint64_t rs_next_expiry(struct store *s) { return store_next_expiry(RS(s)->local); }

static bool rs_writing(struct store *s)
{
	struct rstore *r = RS(s);
	return r->cmd && (!list_empty(&r->pending) || r->n_ends > 0);
}

static void rs_free(struct store *s)
{
	struct rstore *r = RS(s);
	/* Held claims outlive the store as empty handles. */
	while (!list_empty(&r->claims)) {
		struct store_claim *c = list_first(&r->claims, struct store_claim, node);
		list_remove(&c->node);
		tc_timer_stop(c->renew);
		if (c->adopt)
			TAKE_PTR(c->adopt)->arg = NULL;
		if (c->renewing)
			TAKE_PTR(c->renewing)->arg = NULL;
		c->r = NULL;
	}
	/* Nobody waits on the local store first: letting its claims go
	 * below then hands them to no one. */
	struct list *p;
	for (p = r->waits.next; p != &r->waits; p = p->next) {
		struct store_wait *w = list_entry(p, struct store_wait, node);
		store_wait_cancel(TAKE_PTR(w->local));
	}
	while (!list_empty(&r->waits))
		rs_wait_free(list_first(&r->waits, struct store_wait, node));
	while (!list_empty(&r->own))
		rs_own_free(r, list_first(&r->own, struct own, node));
	r->closing = true;
	/* Ends not yet handed to hiredis would not have been written
	 * either: the connection closes without a flush. */
	ev_prepare_stop(r->ev, &r->flush);
	while (!list_empty(&r->ends)) {
		struct end *e = list_first(&r->ends, struct end, node);
		list_remove(&e->node);
		r->n_ends--;
		rs_end_free(e);
	}
	rs_drop(r);
	tc_timer_free(r->retry);
	tc_timer_free(r->watchdog);
	map_free(r->chans);
	buf_free(&r->resp);
	store_free(r->local);
	free(r->address);
	free(r->prefix);
	free(r->cancel_chan);
	free(r->host);
	free(r->path);
	free(r);
}

/* Reads "unix:/path" or "HOST:PORT" ("[v6]:PORT"). */
static int parse_address(struct rstore *r, const char *a)
{
	if (!a || !*a)
		return -EINVAL;
	if (str_has_prefix(a, "unix:")) {
		if (a[5] != '/' || strlen(a + 5) >= 108)
			return -EINVAL;
		r->path = xstrdup(a + 5);
		return 0;
	}
	const char *colon = strrchr(a, ':');
	if (!colon || colon == a || !colon[1])
		return -EINVAL;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port <= 0 || port > 65535)
		return -EINVAL;
	const char *h = a;
	size_t n = (size_t)(colon - a);
	if (h[0] == '[') {
		if (n < 3 || h[n - 1] != ']')
			return -EINVAL;
		h++;
		n -= 2;
	}
	r->host = xstrndup(h, n);
	r->port = (int)port;
	return 0;
}

/*
 * Sends what the loop turn queued, claims first: Redis answers them
 * before it copies the turn's outcomes, so the calls waiting for a claim
 * run here while Redis stores the outcomes of those that ended (a claim
 * of a key that ended in the same turn joins it, and hears its end).
 */
static void flush_fire(struct ev_loop *ev, ev_prepare *w, int revents)
{
	struct rstore *r = container_of(w, struct rstore, flush);
	ev_prepare_stop(ev, w);
	rs_claims_send(r);
	rs_ends_send(r);
}

/* What the connection tells the layers above it. */
static const struct rconn_events conn_events = {
	.message = rs_on_message,
	.ready = rs_own_flush,
	.down = rs_waits_down,
};

static int rs_open(struct tc_loop *loop, const struct store_config *cfg, const struct store_value_ops *vops,
		   struct store **ret)
{
	struct ev_loop *ev = tc_loop_ev_raw(loop);
	if (!ev)
		return -EOPNOTSUPP;
	struct rstore *r = xcalloc(1, sizeof(*r));
	r->base.ops = &store_redis_ops;
	if (parse_address(r, cfg->address) < 0 || (cfg->prefix && strlen(cfg->prefix) > 256)) {
		free(r->host);
		free(r->path);
		free(r);
		return -EINVAL;
	}
	r->loop = loop;
	r->ev = ev;
	r->cfg = *cfg;
	r->address = xstrdup(cfg->address);
	struct store_config d;
	store_config_defaults(&d);
	r->prefix = xstrdup(cfg->prefix ? cfg->prefix : d.prefix);
	r->cfg.address = r->address;
	r->cfg.prefix = r->prefix;
	r->cancel_chan = xasprintf("%stask-cancel", r->prefix);
	if (!r->cfg.lease_ms)
		r->cfg.lease_ms = d.lease_ms;
	if (!r->cfg.timeout_ms)
		r->cfg.timeout_ms = d.timeout_ms;
	r->poll_ms = MIN(MAX(r->cfg.lease_ms / 4, 100), 2000);
	r->vops = vops;
	struct store_config lc = *cfg;
	lc.kind = "memory";
	list_init(&r->pending);
	list_init(&r->waits);
	list_init(&r->claims);
	list_init(&r->ends);
	list_init(&r->claims_out);
	list_init(&r->own);
	ev_prepare_init(&r->flush, flush_fire);
	r->events = &conn_events;
	r->chans = map_new();
	r->retry = tc_timer_new(loop, rs_retry_fire, r);
	r->watchdog = tc_timer_new(loop, rs_watchdog_fire, r);
	int k = store_memory_ops.open(loop, &lc, vops, &r->local);
	if (k < 0) {
		rs_free(&r->base);
		return k;
	}
	rs_connect_now(r);
	*ret = &r->base;
	return 0;
}

const struct store_ops store_redis_ops = {
	.writing = rs_writing,
	.session_put = rs_session_put,
	.session_get = rs_session_get,
	.name = "redis",
	.open = rs_open,
	.free = rs_free,
	.claim = rs_claim,
	.wait_cancel = rs_wait_cancel,
	.complete = rs_complete,
	.release = rs_release,
	.task_put = rs_task_put,
	.task_swap = rs_task_swap,
	.hear_cancels = rs_hear_cancels,
	.reconfigure = rs_reconfigure,
	.task_get = rs_task_get,
	.task_list = rs_task_list,
	.write_stats = rs_write_stats,
	.set_limits = rs_set_limits,
	.entries = rs_entries,
	.sweep = rs_sweep,
	.next_expiry = rs_next_expiry,
};

