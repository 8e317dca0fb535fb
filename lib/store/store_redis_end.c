/* SPDX-License-Identifier: MIT */
/*
 * The Redis store's outcomes: a claim's lease renewed while its call runs,
 * its end (an outcome recorded, or the claim let go) sent with the loop
 * turn's other ends in one script call, and what this daemon recorded
 * alone while Redis was away, written back when it answers again.
 */
#include "lib/store/store_redis_internal.h"

/* --- claims ------------------------------------------------------------ */

static void adopt_send(struct rstore *r, struct store_claim *c);

static void renew_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct store_claim *c = arg;
	if (c)
		c->renewing = NULL;
	if (!reply)
		return;
	if (reply->type != REDIS_REPLY_INTEGER) {
		rs_outage(r, "unexpected reply to a renewal: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
		return;
	}
	if (reply->integer != 0 || !c)
		return;
	r->lost_leases++;
	/* The record went (a Redis restarted empty) or was taken over: the
	 * key is claimed again with this claim's token where nobody holds
	 * it, else this daemon goes on alone and its end takes no one's
	 * place. */
	c->shared = false;
	tc_timer_stop(c->renew);
	if (!c->adopt)
		adopt_send(r, c);
}

void rs_renew_fire(void *arg)
{
	struct store_claim *c = arg;
	struct rstore *r = c->r;
	tc_timer_start(c->renew, MAX(r->cfg.lease_ms / 3, 1));
	_cleanup_free_ char *lease = xasprintf("%s:lease", c->rkey);
	char lease_ms[24], rec_ms[24];
	snprintf(lease_ms, sizeof(lease_ms), "%" PRIu64, r->cfg.lease_ms);
	snprintf(rec_ms, sizeof(rec_ms), "%" PRIu64, r->cfg.lease_ms + MAX(r->cfg.ttl_ms, 1000));
	const char *kv[] = { c->rkey, lease, c->token, lease_ms, rec_ms };
	if (!c->renewing)
		c->renewing = rs_send_eval(r, renew_reply, c, S_RENEW, 2, 3, kv, NULL);
}

static void claim_free(struct store_claim *c)
{
	if (c->adopt)
		c->adopt->arg = NULL;
	if (c->renewing)
		c->renewing->arg = NULL;
	list_remove(&c->node);
	tc_timer_free(c->renew);
	free(c->rkey);
	free(c->tail);
	free(c);
}

void rs_end_free(struct end *e)
{
	buf_free(&e->rec);
	free(e);
}

/* The ends one script call carries. */
struct end_batch {
	int n;
	struct end *e[ENDS_PER_EVAL];
};

/* An end Redis did not confirm is written back when it answers again. */
static void end_to_own(struct rstore *r, struct end *e)
{
	const char *token = e->data;
	for (int i = 0; i < 4; i++)
		token += strlen(token) + 1;	/* rkey, lease, set, outcome key */
	rs_own_add(r, e->data, token, &e->rec);
	rs_end_free(e);
}

static void ends_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct end_batch *b = arg;
	bool landed = reply && reply->type == REDIS_REPLY_INTEGER;
	if (reply && !landed)
		rs_outage(r, "unexpected reply to an end: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
	for (int i = 0; i < b->n; i++) {
		if (landed || r->closing)
			rs_end_free(b->e[i]);
		else
			end_to_own(r, b->e[i]);
	}
	free(b);
}

/* Sends the first ENDS_PER_EVAL queued ends in one script call, each
 * outcome's record by a SET before it. */
static void ends_send_batch(struct rstore *r)
{
	char ttl[24];
	const char *ttl_s = rs_u64_str(ttl, r->cfg.ttl_ms);
	const char *kv[MAX_EVAL_ARGS];
	struct end *batch[ENDS_PER_EVAL];
	int n = 0;
	while (n < ENDS_PER_EVAL && !list_empty(&r->ends)) {
		struct end *e = list_first(&r->ends, struct end, node);
		list_remove(&e->node);
		r->n_ends--;
		batch[n++] = e;
	}
	/* All keys first, then all args. */
	for (int i = 0; i < n; i++) {
		const char *p = batch[i]->data;
		for (int j = 0; j < 7; j++) {
			kv[j < 4 ? 4 * i + j : 4 * n + 3 * i + (j - 4)] = p;
			p += strlen(p) + 1;
		}
	}
	for (int i = 0; i < n && r->cmd; i++) {
		if (!buf_size(&batch[i]->rec))
			continue;
		const char *out = kv[4 * i + 3];
		const char *argv[] = { "SET", out, buf_head(&batch[i]->rec), "PX", ttl_s };
		size_t lens[] = { 3, strlen(out), buf_size(&batch[i]->rec), 2, strlen(ttl_s) };
		rs_send_cmd(r, rs_ignore_reply, NULL, 5, argv, lens);
	}
	/* The ends stay until Redis says they landed. */
	struct end_batch *b = xcalloc(1, sizeof(*b));
	b->n = n;
	memcpy(b->e, batch, sizeof(batch[0]) * (size_t)n);
	if (!r->cmd || !rs_send_eval(r, ends_reply, b, S_END, 4 * n, 3 * n, kv, NULL))
		ends_reply(r, NULL, b);
}

/* Sends the ends queued in this loop turn: they leave with the turn's
 * other commands, in one write. */
void rs_ends_send(struct rstore *r)
{
	while (!list_empty(&r->ends))
		ends_send_batch(r);
}

/* Queues an end (END_LUA's keys and args of one claim, and the outcome's
 * record, taken) for the end of the loop turn. */
static void end_queue(struct rstore *r, const char *const kv[static 7], struct buf *rec)
{
	size_t lens[7], total = 0;
	for (int i = 0; i < 7; i++)
		total += (lens[i] = strlen(kv[i]) + 1);
	struct end *e = xmalloc(sizeof(*e) + total);
	e->rec = *rec;
	*rec = (struct buf){0};
	char *p = e->data;
	for (int i = 0; i < 7; i++) {
		memcpy(p, kv[i], lens[i]);
		p += lens[i];
	}
	list_insert_tail(&r->ends, &e->node);
	/* A full script call's worth leaves at once. */
	if (++r->n_ends >= ENDS_PER_EVAL) {
		ends_send_batch(r);
		rs_write_now(r);
	}
	ev_prepare_start(r->ev, &r->flush);
}

/* Ends the claim of rkey held with token in Redis, with record rec
 * (empty: the key is freed), taken. The record goes by a plain SET to a
 * key of the holder's own and is renamed into place by the script, in
 * the same write: its bytes never enter Lua. */
void rs_end_claim(struct rstore *r, const char *rkey, const char *token, struct buf *rec)
{
	_cleanup_free_ char *lease = xasprintf("%s:lease", rkey);
	_cleanup_free_ char *out = xasprintf("%s:%s", rkey, token);
	bool keep = buf_size(rec) && r->cfg.ttl_ms > 0;
	if (!keep)
		buf_free(rec);
	/* P idem:U:H: the set is P idems:U, the member H. */
	const char *h = strrchr(rkey, ':') + 1;
	const char *u = h - 1;
	while (u > rkey && u[-1] != ':')
		u--;
	_cleanup_free_ char *set = xasprintf("%sidems:%.*s", r->prefix, (int)(h - 1 - u), u);
	const char *kv[] = { rkey, lease, set, out, token, keep ? "1" : "0", h };
	end_queue(r, kv, rec);
	buf_free(rec);
}

/* Ends claim c with record rec (empty: released), taken; frees c. */
static void claim_end(struct store_claim *c, struct buf *rec)
{
	if (c->r)
		rs_end_claim(c->r, c->rkey, c->token, rec);
	buf_free(rec);
	claim_free(c);
}

void rs_complete(struct store_claim *c, void *value)
{
	/* This daemon keeps what it recorded, Redis or not. */
	if (c->local)
		store_complete(TAKE_PTR(c->local), value);
	struct rstore *r = c->r;
	if (!r) {
		claim_free(c);
		return;
	}
	struct buf b = {0};
	buf_putc(&b, 'D');
	buf_append(&b, c->token, TOKEN_LEN);
	buf_puts(&b, c->tail);
	size_t head = buf_size(&b);
	r->vops->encode(value, &b);
	if (buf_size(&b) - head > r->cfg.max_value_bytes) {
		/* Too large to share: other daemons hear that it ended, not how. */
		b.len = head;
		b.data[0] = 'X';
	}
	if (c->shared && r->up) {
		claim_end(c, &b);
		return;
	}
	/* Redis did not hear of the claim, or cannot hear of its end now:
	 * written back when it answers again. */
	rs_own_add(r, c->rkey, c->token, &b);
	claim_free(c);
}

void rs_release(struct store_claim *c)
{
	if (c->local)
		store_release(TAKE_PTR(c->local));
	struct buf none = {0};
	if (c->r && !(c->shared && c->r->up)) {
		rs_own_add(c->r, c->rkey, c->token, &none);
		claim_free(c);
		return;
	}
	claim_end(c, &none);
}

/* --- what this daemon recorded alone ----------------------------------- */

/* The set of rkey's uid (P idems:U) and its member (the key's hash). */
static char *set_of(const struct rstore *r, const char *rkey, const char **ret_member)
{
	const char *h = strrchr(rkey, ':') + 1;
	const char *u = h - 1;
	while (u > rkey && u[-1] != ':')
		u--;
	*ret_member = h;
	return xasprintf("%sidems:%.*s", r->prefix, (int)(h - 1 - u), u);
}

void rs_own_free(struct rstore *r, struct own *o)
{
	if (o->cmd)
		o->cmd->arg = NULL;
	list_remove(&o->node);
	r->n_own--;
	r->own_bytes -= buf_size(&o->rec);
	buf_free(&o->rec);
	free(o->rkey);
	free(o);
}

static void own_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct own *o = arg;
	if (!o)
		return;
	o->cmd = NULL;
	if (!reply)
		return;		/* the connection went: sent again on the next */
	if (reply->type != REDIS_REPLY_INTEGER) {
		rs_outage(r, "unexpected reply to a write back: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
		return;
	}
	r->written_back++;
	rs_own_free(r, o);
}

/* Sends o's end: its outcome by a SET to a key of its own, renamed into
 * place by END_LUA where no record or o's own running one is. */
static void own_send(struct rstore *r, struct own *o)
{
	if (!r->cmd || o->cmd)
		return;
	uint64_t now = mono_ms();
	bool keep = buf_size(&o->rec) && o->expires > now;
	_cleanup_free_ char *lease = xasprintf("%s:lease", o->rkey);
	_cleanup_free_ char *out = xasprintf("%s:%s", o->rkey, o->token);
	const char *member;
	_cleanup_free_ char *set = set_of(r, o->rkey, &member);
	if (keep) {
		char ttl[24];
		const char *ttl_s = rs_u64_str(ttl, o->expires - now);
		const char *argv[] = { "SET", out, buf_head(&o->rec), "PX", ttl_s };
		size_t lens[] = { 3, strlen(out), buf_size(&o->rec), 2, strlen(ttl_s) };
		rs_send_cmd(r, rs_ignore_reply, NULL, 5, argv, lens);
	}
	const char *kv[] = { o->rkey, lease, set, out, o->token, keep ? "2" : "0", member };
	o->cmd = rs_send_eval(r, own_reply, o, S_END, 4, 3, kv, NULL);
}

/* Keeps an end Redis has not heard (rec taken; empty: a release), and
 * sends it at once when Redis is there. Bounded: past OWN_MAX ends or
 * the bytes of kept outcomes, the oldest not in flight go (counted). */
void rs_own_add(struct rstore *r, const char *rkey, const char *token, struct buf *rec)
{
	struct own *o = xcalloc(1, sizeof(*o));
	o->rkey = xstrdup(rkey);
	memcpy(o->token, token, TOKEN_LEN + 1);
	o->rec = *rec;
	*rec = (struct buf){0};
	o->expires = mono_ms() + r->cfg.ttl_ms;
	list_insert_tail(&r->own, &o->node);
	r->n_own++;
	r->own_bytes += buf_size(&o->rec);
	struct list *p = r->own.next;
	while ((r->n_own > OWN_MAX || r->own_bytes > r->cfg.max_bytes) && p != &o->node) {
		struct own *old = list_entry(p, struct own, node);
		p = p->next;
		if (old->cmd)
			continue;
		r->own_dropped++;
		rs_own_free(r, old);
	}
	if (r->up)
		own_send(r, o);
}

static void adopt_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct store_claim *c = arg;
	if (!c)
		return;
	c->adopt = NULL;
	if (!reply)
		return;
	const redisReply *e = reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 ? reply->element[0] : NULL;
	long long code = e && e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
			 e->element[0]->type == REDIS_REPLY_INTEGER ? e->element[0]->integer : -1;
	bool mine = code == 0 || code == 2;
	if (code == 1 && e->elements == 3 && e->element[1]->type == REDIS_REPLY_STRING) {
		/* A claim of its own that reached Redis as it went away. */
		const redisReply *rec = e->element[1];
		mine = rec->len > TOKEN_LEN && rec->str[0] == 'R' && !memcmp(rec->str + 1, c->token, TOKEN_LEN);
	} else if (!mine) {
		rs_outage(r, "unexpected reply to a claim: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong shape");
		return;
	}
	if (!mine)
		return;		/* another daemon's: this one goes on alone */
	c->shared = true;
	tc_timer_start(c->renew, MAX(r->cfg.lease_ms / 3, 1));
}

/* Claims again in Redis a key this daemon claimed alone and still runs. */
static void adopt_send(struct rstore *r, struct store_claim *c)
{
	char lease_ms[24], rec_ms[24], max[24];
	_cleanup_free_ char *lease = xasprintf("%s:lease", c->rkey);
	_cleanup_free_ char *rec = xasprintf("R%s%s", c->token, c->tail);
	const char *member;
	_cleanup_free_ char *set = set_of(r, c->rkey, &member);
	const char *kv[] = { c->rkey, lease, set,
			     rs_u64_str(lease_ms, r->cfg.lease_ms),
			     rs_u64_str(rec_ms, r->cfg.lease_ms + MAX(r->cfg.ttl_ms, 1000)),
			     rs_u64_str(max, MAX(r->cfg.max_entries, 1)),
			     rec, c->token, "0", member };
	c->adopt = rs_send_eval(r, adopt_reply, c, S_CLAIM, 3, 7, kv, NULL);
}

/* Redis answers (again): what this daemon recorded alone goes back
 * first, in the order it happened. */
void rs_own_flush(struct rstore *r)
{
	if (!r->cmd)
		return;
	struct list *p;
	for (p = r->claims.next; p != &r->claims; p = p->next) {
		struct store_claim *c = list_entry(p, struct store_claim, node);
		if (!c->shared && !c->adopt)
			adopt_send(r, c);
	}
	for (p = r->own.next; p != &r->own; p = p->next)
		own_send(r, list_entry(p, struct own, node));
}
