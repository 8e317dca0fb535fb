/* SPDX-License-Identifier: MIT */
/*
 * The Redis store's claims: a wait for a key is made in the local store
 * first, then sent with the loop turn's other claims in one script call;
 * its answer claims the key, joins its holder (subscribed to its end,
 * polled), or replays its outcome. Pub/sub messages (an end, a task
 * cancelled) are heard here.
 */
#include "lib/store/store_redis_internal.h"

static void wait_send(struct store_wait *w);

/* --- waits ------------------------------------------------------------- */

static void chan_leave(struct store_wait *w)
{
	struct chan *ch = w->chan;
	if (!ch)
		return;
	w->chan = NULL;
	list_remove(&w->chan_node);
	if (!list_empty(&ch->waits))
		return;
	struct rstore *r = w->r;
	if (ch->subscribed && r->sub) {
		const char *argv[] = { "UNSUBSCRIBE", ch->name };
		redisAsyncCommandArgv(r->sub, NULL, NULL, 2, argv, NULL);
	}
	map_remove(r->chans, ch->name);
	free(ch->name);
	free(ch);
}

void rs_wait_free(struct store_wait *w)
{
	if (w->freed)
		*w->freed = true;
	if (w->cmd)
		w->cmd->arg = NULL;
	if (w->queued) {
		list_remove(&w->claim_node);
		w->r->n_claims_out--;
	}
	if (w->batch) {
		struct claims *b = w->batch;
		b->w[w->slot] = NULL;
		b->gone[w->slot] = TAKE_PTR(w->rkey);
		memcpy(b->gone_token[w->slot], w->token, TOKEN_LEN + 1);
	}
	chan_leave(w);
	tc_timer_free(w->poll);
	list_remove(&w->node);
	struct store_claim *lclaim = TAKE_PTR(w->lclaim);
	free((char *)w->k.key);
	free((char *)w->k.tool);
	free(w->rkey);
	free(w->id);
	free(w->meta);
	free(w);
	/* The key is not this daemon's to run after all: the local store
	 * hands it to whoever waits there. */
	if (lclaim)
		store_release(lclaim);
}

void rs_wait_cancel(struct store_wait *w)
{
	store_wait_cancel(w->local);
	rs_wait_free(w);
}

/* Answers the wait and frees it. */
static void wait_answer(struct store_wait *w, const struct store_answer *a)
{
	store_cb cb = w->cb;
	void *arg = w->arg;
	rs_wait_free(w);
	cb(arg, a);
}

static struct store_claim *claim_make(struct rstore *r, struct store_wait *w, bool shared);

/* A claim of w may have reached Redis before it went away: its record
 * there is let go when Redis is back (if it is still w's). */
static void own_forget(struct store_wait *w)
{
	if (!w->token[0])
		return;
	struct buf none = {0};
	rs_own_add(w->r, w->rkey, w->token, &none);
}

/* Redis cannot be asked: w's key is claimed by this daemon alone (its
 * end is written back when Redis answers again), or refused ("fail"). */
static void claim_alone(struct store_wait *w)
{
	struct rstore *r = w->r;
	if (r->cfg.fail_unavailable) {
		own_forget(w);
		wait_answer(w, &(struct store_answer){ .result = STORE_UNAVAILABLE });
		return;
	}
	struct store_claim *c = claim_make(r, w, false);
	wait_answer(w, &(struct store_answer){ .result = STORE_CLAIMED, .claim = c });
}

/* Redis is away: answers from the local store, or as unavailable. */
void rs_wait_fallback(struct store_wait *w)
{
	struct rstore *r = w->r;
	if (w->put_cb) {
		store_put_cb cb = w->put_cb;
		void *arg = w->arg;
		_cleanup_free_ char *id = TAKE_PTR(w->id), *meta = TAKE_PTR(w->meta);
		uid_t uid = w->uid;
		size_t meta_len = w->meta_len;
		uint64_t order = w->order, keep = w->keep_ms;
		bool create = w->create, swap = w->swap;
		rs_wait_free(w);
		/* A cancellation must reach the daemon running the task: this
		 * one's memory cannot. */
		if (r->cfg.fail_unavailable || swap)
			cb(arg, -EIO, NULL, 0);
		else
			store_task_put(r->local, uid, id, meta, meta_len, order, keep, create, cb, arg);
		return;
	}
	if (w->get_cb || w->list_cb) {
		void (*gcb)(void *, int, const char *, size_t) = w->get_cb;
		void (*lcb)(void *, int, char **, size_t, uint64_t) = w->list_cb;
		void *arg = w->arg;
		rs_wait_free(w);
		if (gcb)
			gcb(arg, -EIO, NULL, 0);
		else
			lcb(arg, -EIO, NULL, 0, 0);
		return;
	}
	if (w->joined && !w->k.idempotent && !r->cfg.fail_unavailable) {
		/* Its holder elsewhere may still be running it. */
		own_forget(w);
		wait_answer(w, &(struct store_answer){ .result = STORE_LOST });
		return;
	}
	chan_leave(w);
	tc_timer_stop(w->poll);
	claim_alone(w);
}

static void hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static void new_token(struct rstore *r, char out[static TOKEN_LEN + 1])
{
	uint8_t b[TOKEN_LEN / 2];
	for (size_t i = 0; i < sizeof(b); i += 4) {
		uint32_t x = tc_random(r->loop) ^ (uint32_t)mono_ns();
		memcpy(b + i, &x, MIN(4, sizeof(b) - i));
	}
	hex(b, sizeof(b), out);
}


/* Makes w's claim: held in Redis too (shared, its lease renewed), or by
 * this daemon alone; either way with w's local one. */
static struct store_claim *claim_make(struct rstore *r, struct store_wait *w, bool shared)
{
	struct store_claim *c = xcalloc(1, sizeof(*c));
	c->ops = &store_redis_ops;
	c->r = r;
	c->rkey = xstrdup(w->rkey);
	char hashhex[HASH_HEX + 1];
	hex(w->hash, STORE_HASH_LEN, hashhex);
	c->tail = xasprintf("%s%s\n", hashhex, w->k.tool);
	/* A claim made alone keeps the token of one that may have reached
	 * Redis, so that its end there is recognised as its own. */
	if (!w->token[0])
		new_token(r, w->token);
	memcpy(c->token, w->token, TOKEN_LEN + 1);
	c->local = TAKE_PTR(w->lclaim);
	c->shared = shared;
	c->renew = tc_timer_new(r->loop, rs_renew_fire, c);
	if (shared)
		tc_timer_start(c->renew, MAX(r->cfg.lease_ms / 3, 1));
	list_insert_tail(&r->claims, &c->node);
	return c;
}

static void poll_fire(void *arg)
{
	struct store_wait *w = arg;
	if (!claiming(w))
		wait_send(w);
}

/* Subscribes w to the end of the call that holds its key. */
static void wait_join(struct store_wait *w)
{
	struct rstore *r = w->r;
	w->joined = true;
	if (!w->chan) {
		struct chan *ch = map_get(r->chans, w->rkey);
		if (!ch) {
			ch = xcalloc(1, sizeof(*ch));
			ch->name = xstrdup(w->rkey);
			list_init(&ch->waits);
			map_put(r->chans, ch->name, ch);
		}
		w->chan = ch;
		list_insert_tail(&ch->waits, &w->chan_node);
		if (!ch->subscribed && r->sub) {
			const char *argv[] = { "SUBSCRIBE", ch->name };
			if (redisAsyncCommandArgv(r->sub, rs_on_message, r, 2, argv, NULL) == REDIS_OK)
				ch->subscribed = true;
		}
	}
	/* The poll catches a message lost in a reconnection, and a holder
	 * that died without a word; a wait that never joins needs no timer. */
	if (!w->poll)
		w->poll = tc_timer_new(r->loop, poll_fire, w);
	tc_timer_start(w->poll, r->poll_ms);
}

/* Reads a record: false when it is not one this store wrote. */
static bool parse_record(struct rstore *r, const redisReply *rec, char *ret_state, const char **ret_token,
			 const char **ret_hash, const char **ret_tool, size_t *ret_tool_len,
			 const char **ret_value, size_t *ret_value_len)
{
	if (rec->type != REDIS_REPLY_STRING || rec->len < REC_HEAD + 2 ||
	    rec->len > r->cfg.max_value_bytes + REC_HEAD + MAX_TOOL + 2)
		return false;
	const char *s = rec->str;
	if (s[0] != 'R' && s[0] != 'D' && s[0] != 'X')
		return false;
	if (!rs_is_hex(s + 1, TOKEN_LEN + HASH_HEX))
		return false;
	const char *tool = s + REC_HEAD;
	const char *nl = memchr(tool, '\n', MIN(rec->len - REC_HEAD, MAX_TOOL + 1));
	if (!nl || nl == tool || !utf8_valid(tool, (size_t)(nl - tool)) || memchr(tool, '\0', (size_t)(nl - tool)))
		return false;
	if (s[0] != 'D' && (size_t)(nl + 1 - s) != rec->len)
		return false;
	*ret_state = s[0];
	*ret_token = s + 1;
	*ret_hash = s + 1 + TOKEN_LEN;
	*ret_tool = tool;
	*ret_tool_len = (size_t)(nl - tool);
	*ret_value = nl + 1;
	*ret_value_len = rec->len - (size_t)(nl + 1 - s);
	return true;
}

/* The wait a reply is for, or NULL when there is nothing more to do:
 * nobody waits any more, or the connection went (answered from the
 * fallback). */
struct store_wait *rs_reply_wait(void *arg, const redisReply *reply)
{
	struct store_wait *w = arg;
	if (!w)
		return NULL;
	w->cmd = NULL;
	if (!reply) {
		rs_wait_fallback(w);
		return NULL;
	}
	return w;
}

/* Answers w from its part of a claims reply: false when that part is
 * not one the script makes (then w was answered from the fallback, and
 * Redis is away). */
static bool claim_answer(struct rstore *r, struct store_wait *w, const redisReply *reply)
{
	char state = 0;
	const char *token, *hash, *tool, *value;
	size_t tool_len, value_len;
	long long code = -1, alive = 0;
	if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
	    reply->element[0]->type == REDIS_REPLY_INTEGER)
		code = reply->element[0]->integer;
	if ((code == 0 || code == 2) && reply->elements == 1) {
		struct store_claim *c = claim_make(r, w, true);
		wait_answer(w, &(struct store_answer){ .result = STORE_CLAIMED, .claim = c });
		return true;
	}
	if (code != 1 || reply->elements != 3 || reply->element[2]->type != REDIS_REPLY_INTEGER ||
	    !parse_record(r, reply->element[1], &state, &token, &hash, &tool, &tool_len, &value, &value_len)) {
		chan_leave(w);	/* answered below, not by rs_outage() */
		rs_outage(r, "unexpected reply to a claim: not a record of this store");
		rs_wait_fallback(w);
		return false;
	}
	alive = reply->element[2]->integer;
	char want[HASH_HEX + 1];
	hex(w->hash, STORE_HASH_LEN, want);
	bool same_tool = tool_len == strlen(w->k.tool) && !memcmp(tool, w->k.tool, tool_len);
	if (!same_tool || memcmp(hash, want, HASH_HEX)) {
		wait_answer(w, &(struct store_answer){ .result = STORE_CONFLICT, .same_tool = same_tool });
		return true;
	}
	if (state == 'X') {
		wait_answer(w, &(struct store_answer){ .result = STORE_LOST });
		return true;
	}
	if (state == 'D') {
		void *v = NULL;
		if (r->vops->decode(value, value_len, &v) < 0) {
			chan_leave(w);
			rs_outage(r, "a kept outcome does not decode");
			rs_wait_fallback(w);
			return false;
		}
		if (w->joined)
			r->joins++;
		else
			r->hits++;
		/* Kept here too: replayed while Redis is away. */
		if (w->lclaim)
			store_complete(TAKE_PTR(w->lclaim), v);
		wait_answer(w, &(struct store_answer){ .result = STORE_DONE, .value = v, .joined = w->joined });
		r->vops->unref(v);
		return true;
	}
	if (!alive) {
		/* The holder died (an idempotent tool's claim was taken over
		 * by the script): nobody can say whether it ran. */
		wait_answer(w, &(struct store_answer){ .result = STORE_LOST });
		return true;
	}
	wait_join(w);
	return true;
}

/*
 * Answers each claim a script call carried, in order, from its part of
 * the reply. A reply of the wrong shape, or a part that is, is an
 * outage: the claims not yet answered fall back. A callback may cancel
 * other waits of the batch: their slots empty.
 */
static void claims_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct claims *b = arg;
	bool trusted = reply != NULL;
	if (reply && (reply->type != REDIS_REPLY_ARRAY || reply->elements != b->n)) {
		trusted = false;
		rs_outage(r, "unexpected reply to a claim: %s",
		       reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong shape");
	}
	for (size_t i = 0; i < b->n; i++) {
		struct store_wait *w = b->w[i];
		if (!w) {
			const redisReply *e = trusted && b->gone[i] ? reply->element[i] : NULL;
			if (e && e->type == REDIS_REPLY_ARRAY && e->elements == 1 &&
			    e->element[0]->type == REDIS_REPLY_INTEGER &&
			    (e->element[0]->integer == 0 || e->element[0]->integer == 2)) {
				struct buf none = {0};
				rs_end_claim(r, b->gone[i], b->gone_token[i], &none);
			}
			continue;
		}
		b->w[i] = NULL;
		w->batch = NULL;
		if (!trusted)
			rs_wait_fallback(w);
		else if (!claim_answer(r, w, reply->element[i]))
			trusted = false;
	}
	for (size_t i = 0; i < b->n; i++)
		free(b->gone[i]);
	free(b);
}

/* The strings one claim adds to CLAIM_LUA's keys and args. */
struct claim_args {
	char *lease, *set, *rec;
};

/* Makes w's lease key, uid's set and running record from w->rkey
 * (P idem:U:H), without printf. */
static void claim_args_make(const struct rstore *r, const struct store_wait *w, struct claim_args *ca)
{
	size_t rkey_len = strlen(w->rkey), pre_len = rkey_len - HASH_HEX, tool_len = strlen(w->k.tool);
	size_t idem_len = strlen(r->prefix) + 4;	/* "P idem" */
	ca->lease = xmalloc(rkey_len + sizeof(":lease"));
	memcpy(ca->lease, w->rkey, rkey_len);
	memcpy(ca->lease + rkey_len, ":lease", sizeof(":lease"));
	ca->rec = xmalloc(REC_HEAD + tool_len + 2);	/* R, token, hash, tool, "\n" */
	ca->rec[0] = 'R';
	memcpy(ca->rec + 1, w->token, TOKEN_LEN);
	hex(w->hash, STORE_HASH_LEN, ca->rec + 1 + TOKEN_LEN);
	memcpy(ca->rec + REC_HEAD, w->k.tool, tool_len);
	memcpy(ca->rec + REC_HEAD + tool_len, "\n", 2);
	ca->set = xmalloc(pre_len + 2);	/* P idems:U */
	memcpy(ca->set, w->rkey, idem_len);
	ca->set[idem_len] = 's';
	memcpy(ca->set + idem_len + 1, w->rkey + idem_len, pre_len - idem_len - 1);
	ca->set[pre_len] = '\0';
}

/*
 * Sends the first CLAIMS_PER_EVAL queued claims in one script call.
 * When they cannot be sent, they fall back, or, early (from inside a
 * caller's store_claim, where no callback may run), go back to the queue
 * for the end of the turn: false.
 */
static bool claims_send_batch(struct rstore *r, bool early)
{
	char lease_ms[24], rec_ms[24], max[24];
	const char *shared[3] = { rs_u64_str(lease_ms, r->cfg.lease_ms),
				  rs_u64_str(rec_ms, r->cfg.lease_ms + MAX(r->cfg.ttl_ms, 1000)),
				  rs_u64_str(max, MAX(r->cfg.max_entries, 1)) };
	struct claims *b = xcalloc(1, sizeof(*b));
	struct claim_args ca[CLAIMS_PER_EVAL];
	const char *kv[MAX_EVAL_ARGS];
	while (b->n < CLAIMS_PER_EVAL && !list_empty(&r->claims_out)) {
		struct store_wait *w = list_first(&r->claims_out, struct store_wait, claim_node);
		list_remove(&w->claim_node);
		r->n_claims_out--;
		w->queued = false;
		w->batch = b;
		w->slot = b->n;
		b->w[b->n++] = w;
	}
	/* All keys first, then the shared args, then each claim's. */
	int n = (int)b->n, nkeys = 3 * n;
	for (int i = 0; i < 3; i++)
		kv[nkeys + i] = shared[i];
	for (int i = 0; i < n; i++) {
		const struct store_wait *w = b->w[i];
		claim_args_make(r, w, &ca[i]);
		kv[3 * i] = w->rkey;
		kv[3 * i + 1] = ca[i].lease;
		kv[3 * i + 2] = ca[i].set;
		kv[nkeys + 3 + 4 * i] = ca[i].rec;
		kv[nkeys + 3 + 4 * i + 1] = w->token;
		kv[nkeys + 3 + 4 * i + 2] = w->k.idempotent ? "1" : "0";
		kv[nkeys + 3 + 4 * i + 3] = w->rkey + strlen(w->rkey) - HASH_HEX;
	}
	struct rcmd *c = r->cmd ? rs_send_eval(r, claims_reply, b, S_CLAIM, nkeys, 3 + 4 * n, kv, NULL) : NULL;
	for (int i = 0; i < n; i++) {
		free(ca[i].lease);
		free(ca[i].set);
		free(ca[i].rec);
	}
	if (c)
		return true;
	if (!early) {
		claims_reply(r, NULL, b);	/* each falls back */
		return false;
	}
	for (int i = n - 1; i >= 0; i--) {
		struct store_wait *w = b->w[i];
		w->batch = NULL;
		w->queued = true;
		list_insert_tail(r->claims_out.next, &w->claim_node);	/* at the front */
		r->n_claims_out++;
	}
	free(b);
	return false;
}

/* Sends the claims queued in this loop turn; those that cannot be sent
 * fall back. */
void rs_claims_send(struct rstore *r)
{
	while (!list_empty(&r->claims_out))
		claims_send_batch(r, false);
}

/* Queues the claim of w, to leave with the turn's others: false when it
 * cannot be sent. A full script call's worth leaves at once. */
static bool claim_send(struct store_wait *w)
{
	struct rstore *r = w->r;
	if (!r->cmd)
		return false;
	if (r->n_claims_out >= CLAIMS_PER_EVAL && claims_send_batch(r, true))
		rs_write_now(r);
	new_token(r, w->token);
	w->queued = true;
	list_insert_tail(&r->claims_out, &w->claim_node);
	r->n_claims_out++;
	ev_prepare_start(r->ev, &r->flush);
	return true;
}

/* Claims again for w (a message came, or its poll), or falls back. */
static void wait_send(struct store_wait *w)
{
	if (!claiming(w) && !claim_send(w))
		rs_wait_fallback(w);
}

/* "uid:id" on the cancel channel: tells the tasks of this daemon. */
static void cancel_heard(struct rstore *r, const redisReply *m)
{
	if (!r->task_fn || m->type != REDIS_REPLY_STRING || m->len > 96 || strlen(m->str) != m->len)
		return;
	char *end;
	errno = 0;
	unsigned long uid = strtoul(m->str, &end, 10);
	if (errno || end == m->str || *end != ':' || !end[1] || uid > UINT32_MAX || !utf8_valid(end + 1, strlen(end + 1)))
		return;
	r->task_fn(r->task_arg, (uid_t)uid, end + 1);
}

void rs_waits_down(struct rstore *r)
{
	/* Joins waiting for a message from a holder elsewhere: their polls
	 * fire now and answer them from the fallback (a callback may cancel
	 * other waits, so none is answered from inside this loop). */
	struct list *p;
	for (p = r->waits.next; p != &r->waits; p = p->next) {
		struct store_wait *w = list_entry(p, struct store_wait, node);
		if (!claiming(w) && w->chan)
			tc_timer_start(w->poll, 0);
	}
}

void rs_on_message(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct rstore *r = priv;
	redisReply *reply = reply_;
	if (!reply || !r || ac != r->sub)
		return;
	if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
	    reply->element[0]->type != REDIS_REPLY_STRING || reply->element[1]->type != REDIS_REPLY_STRING) {
		rs_outage(r, "unexpected message on a subscription");
		return;
	}
	const char *what = reply->element[0]->str;
	if (str_eq(reply->element[1]->str, r->cancel_chan)) {
		if (str_eq(what, "message"))
			cancel_heard(r, reply->element[2]);
		return;
	}
	/* On "subscribe" too: the end may have come before the subscription. */
	if (!str_eq(what, "message") && !str_eq(what, "subscribe"))
		return;
	struct chan *ch = map_get(r->chans, reply->element[1]->str);
	if (!ch)
		return;
	/* Claims again from the waits' polls, outside this callback. */
	struct list *p;
	for (p = ch->waits.next; p != &ch->waits; p = p->next) {
		struct store_wait *w = list_entry(p, struct store_wait, chan_node);
		if (!claiming(w))
			tc_timer_start(w->poll, 0);
	}
}

struct store_wait *rs_wait_new(struct rstore *r, store_cb cb, void *arg)
{
	struct store_wait *w = xcalloc(1, sizeof(*w));
	w->ops = &store_redis_ops;
	w->r = r;
	w->cb = cb;
	w->arg = arg;
	list_init(&w->chan_node);
	list_insert_tail(&r->waits, &w->node);
	return w;
}

char *rs_uid_key(struct rstore *r, const char *kind, uid_t uid, const char *rest)
{
	return xasprintf("%s%s:%u:%s", r->prefix, kind, (unsigned)uid, rest);
}

/* The local store's answer to w: this daemon's own outcome (replayed),
 * a conflict with its own record, or the key (then Redis is asked). */
static void local_first(void *arg, const struct store_answer *a)
{
	struct store_wait *w = arg;
	w->local = NULL;
	if (a->result != STORE_CLAIMED) {
		wait_answer(w, a);
		return;
	}
	w->lclaim = a->claim;
	if (!claim_send(w))
		claim_alone(w);
}

struct store_wait *rs_claim(struct store *s, const struct store_key *k, store_cb cb, void *arg)
{
	struct rstore *r = RS(s);
	struct store_wait *w = rs_wait_new(r, cb, arg);
	w->k = *k;
	w->k.key = xmemdup(k->key, k->key_len + 1);
	w->k.tool = xstrdup(k->tool);
	memcpy(w->hash, k->hash, STORE_HASH_LEN);
	w->k.hash = w->hash;
	uint8_t kh[STORE_HASH_LEN];
	char khex[HASH_HEX + 1];
	store_sha256(k->key, k->key_len, kh);
	hex(kh, STORE_HASH_LEN, khex);
	w->rkey = rs_uid_key(r, "idem", k->uid, khex);
	/* A tool name with a newline cannot be stored: no such tool exists. */
	if (strchr(k->tool, '\n') || strlen(k->tool) > MAX_TOOL) {
		wait_answer(w, &(struct store_answer){ .result = STORE_CONFLICT });
		return NULL;
	}
	/* This daemon's own record first: it answers at once, or w waits
	 * for this daemon's own run of the key. */
	bool freed = false;
	w->freed = &freed;
	struct store_wait *lw = store_claim(r->local, &w->k, local_first, w);
	if (freed)
		return NULL;
	w->freed = NULL;
	w->local = lw;
	return w;
}
