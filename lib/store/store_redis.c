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
 * Long because it holds the whole protocol with Redis: the scripts, the
 * claim and join state machine, the outage handling and the hostile-reply
 * checks belong together.
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

#include <assert.h>
#include <errno.h>
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/base/map.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"
#include "proto/utf8.h"

#define TOKEN_LEN 32
#define HASH_HEX (2 * STORE_HASH_LEN)
#define REC_HEAD (1 + TOKEN_LEN + HASH_HEX)	/* state, token, hash */
#define MAX_TOOL 1024
#define MAX_TASK_META (64 * 1024)
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define OWN_MAX 65536		/* ends waiting to be written back */

/* Claims the keys of one loop turn's claims, each for itself: 3 keys
 * (record, lease, uid's set) and 4 args (record, token, idempotent,
 * member) each, after ARGV[1..3] (lease ms, record ms, the bound).
 * Answers one reply per claim: {0} claimed, {2} claimed from a dead
 * holder (idempotent tools only), {1, record, lease alive}. New records
 * join their uid's set (scored in microseconds by Redis's clock). Past
 * ARGV[3] records, the uid's oldest ended ones (keys: the record's key
 * less its member, then the member) go, as the memory store drops a
 * uid's oldest outcomes: running ones stay. They go in batches (the uid
 * is taken down to the bound less a 64th of it, 127 at most) so that a
 * uid at its bound does not pay a trim on every claim; only each
 * record's first byte is read (Lua hashes every byte of a string it is
 * given, and an outcome may be large). The sets are kept once per call
 * of the script, however many claims it carries. */
static const char CLAIM_LUA[] =
	"local out, sets, order = {}, {}, {}\n"
	"for i = 0, #KEYS / 3 - 1 do\n"
	"  local rec, lease, set, a = KEYS[i * 3 + 1], KEYS[i * 3 + 2], KEYS[i * 3 + 3], 3 + i * 4\n"
	"  if redis.call('SET', rec, ARGV[a + 1], 'NX', 'PX', ARGV[2]) then\n"
	"    redis.call('SET', lease, ARGV[a + 2], 'PX', ARGV[1])\n"
	"    local s = sets[set]\n"
	"    if not s then\n"
	"      s = {pre = string.sub(rec, 1, #rec - #ARGV[a + 4]), n = 0}\n"
	"      sets[set] = s\n"
	"      order[#order + 1] = set\n"
	"    end\n"
	"    s.n = s.n + 1\n"
	"    s[s.n] = ARGV[a + 4]\n"
	"    out[i + 1] = {0}\n"
	"  else\n"
	"    local v = redis.call('GET', rec)\n"
	"    local alive = redis.call('EXISTS', lease)\n"
	"    if alive == 0 and ARGV[a + 3] == '1' and string.sub(v, 1, 1) == 'R' and\n"
	"       string.sub(v, 34) == string.sub(ARGV[a + 1], 34) then\n"
	"      redis.call('SET', rec, ARGV[a + 1], 'PX', ARGV[2])\n"
	"      redis.call('SET', lease, ARGV[a + 2], 'PX', ARGV[1])\n"
	"      out[i + 1] = {2}\n"
	"    else\n"
	"      out[i + 1] = {1, v, alive}\n"
	"    end\n"
	"  end\n"
	"end\n"
	"if #order == 0 then return out end\n"
	"local t = redis.call('TIME')\n"
	"t = t[1] * 1000000 + t[2]\n"
	"local max = tonumber(ARGV[3])\n"
	"for _, set in ipairs(order) do\n"
	"  local s, z = sets[set], {}\n"
	"  for j = 1, s.n do z[2 * j - 1] = t; z[2 * j] = s[j] end\n"
	"  redis.call('ZADD', set, unpack(z))\n"
	"  if redis.call('PTTL', set) < tonumber(ARGV[2]) then redis.call('PEXPIRE', set, ARGV[2]) end\n"
	"  local n = redis.call('ZCARD', set)\n"
	"  if n > max then\n"
	"    local want = n - max + math.min(math.floor(max / 64), 127)\n"
	"    local old = redis.call('ZRANGE', set, 0, want + 15)\n"
	"    local recs, gone = {}, {}\n"
	"    for i = 1, #old do\n"
	"      if #gone >= want then break end\n"
	"      local st = redis.call('GETRANGE', s.pre .. old[i], 0, 0)\n"
	"      if st ~= 'R' then\n"
	"        if st ~= '' then recs[#recs + 1] = s.pre .. old[i] end\n"
	"        gone[#gone + 1] = old[i]\n"
	"      end\n"
	"    end\n"
	"    for i = 1, #recs, 1000 do redis.call('DEL', unpack(recs, i, math.min(i + 999, #recs))) end\n"
	"    for i = 1, #gone, 1000 do redis.call('ZREM', set, unpack(gone, i, math.min(i + 999, #gone))) end\n"
	"  end\n"
	"end\n"
	"return out\n";

/* Renews the holder's lease (and the record's life) while the record is
 * still the holder's (a lease that ran out while Redis was away comes
 * back): 1, or 0 when the record is gone or another's. */
static const char RENEW_LUA[] =
	"if redis.call('GETRANGE', KEYS[1], 0, 32) == 'R' .. ARGV[1] then\n"
	"  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])\n"
	"  redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
	"  return 1\n"
	"end\n"
	"return 0\n";

/* Ends holders' claims, those a loop turn ended together: 4 keys and 3
 * args each, (record, lease, uid's set, outcome; token, keep, member).
 * For each, with keep '1', the outcome record written beforehand under
 * its own key (with its TTL) takes the record's place; otherwise the key
 * is free again and leaves the uid's set; then the joiners are told. A
 * record that is no longer the holder's stays (the outcome goes), except
 * that an outcome written back after an outage (keep '2') also takes the
 * place of no record at all (Redis lost it, or never heard of the claim)
 * and joins the uid's set. While the record is the holder's, so is its
 * lease (only a takeover, which rewrites the record, makes another).
 * Returns how many ended. Only a record's head enters Lua: Lua hashes
 * every byte of a string it is given. */
static const char END_LUA[] =
	"local n = 0\n"
	"for i = 0, #ARGV / 3 - 1 do\n"
	"  local k, a = i * 4, i * 3\n"
	"  local head = redis.call('GETRANGE', KEYS[k + 1], 0, 32)\n"
	"  if head == '' and ARGV[a + 2] == '2' and redis.call('EXISTS', KEYS[k + 4]) == 1 then\n"
	"    redis.call('RENAME', KEYS[k + 4], KEYS[k + 1])\n"
	"    local t = redis.call('TIME')\n"
	"    redis.call('ZADD', KEYS[k + 3], t[1] * 1000000 + t[2], ARGV[a + 3])\n"
	"    if redis.call('PTTL', KEYS[k + 3]) < redis.call('PTTL', KEYS[k + 1]) then\n"
	"      redis.call('PEXPIRE', KEYS[k + 3], redis.call('PTTL', KEYS[k + 1]))\n"
	"    end\n"
	"    redis.call('PUBLISH', KEYS[k + 1], 'E')\n"
	"    n = n + 1\n"
	"  elseif head ~= 'R' .. ARGV[a + 1] then\n"
	"    redis.call('DEL', KEYS[k + 4])\n"
	"  else\n"
	"    if ARGV[a + 2] ~= '0' and redis.call('EXISTS', KEYS[k + 4]) == 1 then\n"
	"      redis.call('RENAME', KEYS[k + 4], KEYS[k + 1])\n"
	"    else\n"
	"      redis.call('DEL', KEYS[k + 1])\n"
	"      redis.call('ZREM', KEYS[k + 3], ARGV[a + 3])\n"
	"    end\n"
	"    redis.call('DEL', KEYS[k + 2])\n"
	"    redis.call('PUBLISH', KEYS[k + 1], 'E')\n"
	"    n = n + 1\n"
	"  end\n"
	"end\n"
	"return n\n";

/* Lists tasks above a position: {order, meta, order, meta, ...}. */
static const char LIST_LUA[] =
	"local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'WITHSCORES',\n"
	"                       'LIMIT', 0, tonumber(ARGV[2]))\n"
	"local out = {}\n"
	"for i = 1, #ids, 2 do\n"
	"  local m = redis.call('GET', ARGV[3] .. ids[i])\n"
	"  if m then table.insert(out, ids[i + 1]); table.insert(out, m)\n"
	"  else redis.call('ZREM', KEYS[1], ids[i]) end\n"
	"end\n"
	"return out\n";

/* Saves a task: {1}; {2, record} when the stored one is cancelled (it
 * stays); {0} when a new task (ARGV[7] '1') would take the uid past
 * ARGV[5] tasks, counted after dropping members whose record expired. */
static const char TASK_PUT_LUA[] =
	"local old = redis.call('GET', KEYS[1])\n"
	"if old and string.sub(old, 1, #ARGV[6]) == ARGV[6] then return {2, old} end\n"
	"if not old and ARGV[7] == '1' then\n"
	"  local n, max = redis.call('ZCARD', KEYS[2]), tonumber(ARGV[5])\n"
	"  if n >= max then\n"
	"    for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do\n"
	"      if redis.call('EXISTS', ARGV[8] .. id) == 0 then redis.call('ZREM', KEYS[2], id); n = n - 1 end\n"
	"    end\n"
	"    if n >= max then return {0} end\n"
	"  end\n"
	"end\n"
	"redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
	"redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[4])\n"
	"if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end\n"
	"return {1}\n";

/* Cancels a task from any daemon: replaces record ARGV[1] by ARGV[2] and
 * tells the daemons (channel KEYS[2]): {2}; {1, record} when another
 * record is there; {0} when none is. */
static const char TASK_SWAP_LUA[] =
	"local old = redis.call('GET', KEYS[1])\n"
	"if not old then return {0} end\n"
	"if old ~= ARGV[1] then return {1, old} end\n"
	"redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])\n"
	"redis.call('PUBLISH', KEYS[2], ARGV[4])\n"
	"return {2}\n";

/* The scripts, sent by their SHA-1 once Redis has told it (SCRIPT LOAD
 * on each connection); a Redis that has forgotten one gets the text. */
enum script { S_CLAIM, S_RENEW, S_END, S_LIST, S_TASK_PUT, S_TASK_SWAP, N_SCRIPTS };

static const char *const script_text[N_SCRIPTS] = {
	[S_CLAIM] = CLAIM_LUA, [S_RENEW] = RENEW_LUA, [S_END] = END_LUA,
	[S_LIST] = LIST_LUA, [S_TASK_PUT] = TASK_PUT_LUA, [S_TASK_SWAP] = TASK_SWAP_LUA,
};

#define SHA1_HEX 40
#define ENDS_PER_EVAL 8
#define CLAIMS_PER_EVAL 16
#define MAX_EVAL_ARGS (3 + 7 * CLAIMS_PER_EVAL)
static_assert(MAX_EVAL_ARGS >= 7 * ENDS_PER_EVAL, "an end batch fits");

/* An EVALSHA's keys and args, kept to send again as EVAL on NOSCRIPT. */
struct eval_args {
	enum script script;
	int nkeys, n;
	char *data;			/* the n arguments, back to back */
	size_t lens[];			/* n */
};

struct rstore;

/* One command in flight on the command connection, oldest first. */
struct rcmd {
	struct list node;		/* r->pending */
	struct rstore *r;
	uint64_t sent_ns;
	void (*fn)(struct rstore *r, redisReply *reply, void *arg);
	void *arg;			/* NULL: nobody waits for the reply any more */
	struct eval_args *again;	/* an EVALSHA's, until its reply */
};

struct chan {
	char *name;
	struct list waits;		/* struct store_wait.chan_node */
	bool subscribed;
};

struct store_wait {
	const struct store_ops *ops;	/* first, as in every handle */
	struct rstore *r;
	struct list node;		/* r->waits */
	struct store_key k;		/* strings owned */
	uint8_t hash[STORE_HASH_LEN];
	char *rkey;
	store_cb cb;
	void *arg;
	struct rcmd *cmd;		/* task request in flight */
	struct list claim_node;		/* r->claims_out, while queued */
	bool queued;			/* its claim leaves at the end of the loop turn */
	struct claims *batch;		/* the claims in flight that carry its claim */
	size_t slot;			/* its place there */
	struct chan *chan;		/* subscribed to the holder's end */
	struct list chan_node;
	struct tc_timer *poll;
	struct store_wait *local;	/* waiting on this daemon's own running record */
	struct store_claim *lclaim;	/* the local store's claim, held while Redis is asked */
	char token[TOKEN_LEN + 1];	/* of the claim in flight */
	bool *freed;			/* set when w is freed (a caller on the stack asks) */
	bool joined;
	/* Task requests. */
	void (*get_cb)(void *arg, int r, const char *meta, size_t n);
	void (*list_cb)(void *arg, int r, char **metas, size_t n, uint64_t next);
	store_put_cb put_cb;
	size_t limit;
	/* A put, made again in the local store when Redis goes away. */
	uid_t uid;
	char *id;
	char *meta;
	size_t meta_len;
	uint64_t order, keep_ms;
	bool create, swap;
};

/* The claims one script call carries, answered in its order; a slot
 * empties when its wait goes first (cancelled, or the store freed), and
 * keeps its key and token: a claim won for nobody is let go at once. */
struct claims {
	size_t n;
	struct store_wait *w[CLAIMS_PER_EVAL];
	char *gone[CLAIMS_PER_EVAL];
	char gone_token[CLAIMS_PER_EVAL][TOKEN_LEN + 1];
};

struct store_claim {
	const struct store_ops *ops;
	struct rstore *r;
	struct list node;		/* r->claims */
	char *rkey;
	char *tail;			/* hash hex, tool, "\n": the record after the token */
	char token[TOKEN_LEN + 1];
	struct tc_timer *renew;
	struct store_claim *local;	/* the local store's: this daemon's own record */
	bool shared;			/* Redis holds it too (else made alone in an outage) */
	struct rcmd *adopt;		/* claiming it in Redis again, after an outage */
	struct rcmd *renewing;		/* its renewal in flight */
};

/* An end Redis has not heard: an outcome recorded (or a claim let go)
 * while Redis was away, or whose claim was made alone. Written back when
 * Redis answers again; kept until Redis says it landed. */
struct own {
	struct list node;		/* r->own */
	char *rkey;
	char token[TOKEN_LEN + 1];
	struct buf rec;			/* the outcome's record; empty: a release */
	uint64_t expires;		/* the outcome's end of life (mono ms) */
	struct rcmd *cmd;		/* its end in flight */
};

struct rstore {
	struct store base;
	struct tc_loop *loop;
	struct ev_loop *ev;
	struct store_config cfg;
	char *address, *prefix;
	char *host;			/* NULL: unix socket at path */
	char *path;
	int port;
	const struct store_value_ops *vops;
	struct store *local;		/* the fallback */
	redisAsyncContext *cmd, *sub;
	bool up;			/* a reply came since connecting */
	bool outage;			/* warned, not yet back */
	uint64_t outages;
	uint64_t lost_leases;
	uint64_t backoff_ms;
	struct tc_timer *retry;
	bool retry_armed;
	struct tc_timer *watchdog;
	bool watchdog_armed;
	struct list pending;		/* struct rcmd */
	struct list waits;
	struct list claims;
	struct list ends;		/* struct end: sent before the loop waits */
	struct list claims_out;		/* struct store_wait: claims, likewise */
	size_t n_claims_out, n_ends;
	ev_prepare flush;
	struct map *chans;
	struct buf resp;		/* a command being formatted */
	uint64_t rtt_us;
	uint64_t poll_ms;
	uint64_t commands;
	uint64_t hits, joins;
	char sha[N_SCRIPTS][SHA1_HEX + 1];	/* "" until SCRIPT LOAD answered */
	char last_error[128];
	char *cancel_chan;		/* P task-cancel: "uid:id" of tasks cancelled */
	void (*task_fn)(void *arg, uid_t uid, const char *id);
	void *task_arg;
	struct list own;		/* struct own, oldest first */
	size_t n_own;
	uint64_t own_bytes;
	uint64_t written_back, own_dropped;
	bool closing;			/* being freed: nothing more is kept */
};

#define RS(s) ((struct rstore *)(s))

static void outage(struct rstore *r, const char *fmt, ...) PRINTF(2, 3);
static bool is_hex(const char *s, size_t n);
static void connect_now(struct rstore *r);
static void wait_send(struct store_wait *w);
static void on_message(redisAsyncContext *ac, void *reply, void *priv);
static void end_claim(struct rstore *r, const char *rkey, const char *token, struct buf *rec);
static char *uid_key(struct rstore *r, const char *kind, uid_t uid, const char *rest);
static void own_flush(struct rstore *r);

/* Whether w's claim is queued or in flight. */
static bool claiming(const struct store_wait *w)
{
	return w->queued || w->batch;
}

/* --- commands ---------------------------------------------------------- */

static void watchdog_arm(struct rstore *r)
{
	if (r->watchdog_armed)
		return;
	r->watchdog_armed = true;
	tc_timer_start(r->watchdog, MAX(r->cfg.timeout_ms / 4, 10));
}

/* A command without a reply past the timeout: Redis is stalled. */
static void watchdog_fire(void *arg)
{
	struct rstore *r = arg;
	r->watchdog_armed = false;
	struct rcmd *c = list_first(&r->pending, struct rcmd, node);
	if (!c)
		return;
	if (mono_ns() - c->sent_ns >= r->cfg.timeout_ms * 1000000ULL) {
		outage(r, "no reply in %" PRIu64 " ms", r->cfg.timeout_ms);
		return;
	}
	watchdog_arm(r);
}

static bool resend_eval(struct rstore *r, struct rcmd *c);
static void on_reply(redisAsyncContext *ac, void *reply, void *priv);

/* Queues a command for c on the command connection, formatted here in
 * RESP (hiredis copies it once into its output, in one write per loop
 * turn): REDIS_OK or REDIS_ERR. */
static int queue_cmd(struct rstore *r, struct rcmd *c, int argc, const char *const *argv, const size_t *lens)
{
	struct buf *b = &r->resp;
	buf_clear(b);
	buf_putc(b, '*');
	buf_put_u64(b, (uint64_t)argc);
	buf_append(b, "\r\n", 2);
	for (int i = 0; i < argc; i++) {
		size_t n = lens ? lens[i] : strlen(argv[i]);
		buf_putc(b, '$');
		buf_put_u64(b, n);
		buf_append(b, "\r\n", 2);
		buf_append(b, argv[i], n);
		buf_append(b, "\r\n", 2);
	}
	int ret = redisAsyncFormattedCommand(r->cmd, on_reply, c, buf_head(b), buf_size(b));
	if (b->cap > 64 * 1024)
		buf_free(b);	/* a large outcome's room is not kept */
	return ret;
}

static bool is_noscript(const redisReply *reply)
{
	return reply && reply->type == REDIS_REPLY_ERROR && str_has_prefix(reply->str, "NOSCRIPT");
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct rcmd *c = priv;
	struct rstore *r = c->r;
	list_remove(&c->node);
	struct eval_args *again = TAKE_PTR(c->again);
	if (again && is_noscript(reply) && ac == r->cmd) {
		/* Redis forgot the script (a restart, SCRIPT FLUSH): its text
		 * goes this once, and teaches it again. */
		c->again = again;
		if (resend_eval(r, c))
			return;
		c->again = NULL;
	}
	free(again);
	if (reply) {
		uint64_t us = (mono_ns() - c->sent_ns) / 1000;
		r->rtt_us = r->rtt_us ? (r->rtt_us * 7 + us) / 8 : us;
		if (!r->up && ac == r->cmd) {
			r->up = true;
			r->backoff_ms = 0;
			if (r->outage) {
				r->outage = false;
				if (r->cfg.notify)
					r->cfg.notify(r->cfg.notify_arg, true, "reconnected");
			}
			own_flush(r);
		}
	}
	void *arg = c->arg;
	void (*fn)(struct rstore *, redisReply *, void *) = c->fn;
	free(c);
	fn(r, reply, arg);
}

/*
 * Sends one command (argv form) on the command connection; fn gets the
 * reply, or NULL when the connection went away first. Returns the command
 * (its arg may be cleared to ignore the reply), or NULL when nothing could
 * be sent (fn was not called).
 */
static struct rcmd *send_cmd(struct rstore *r, void (*fn)(struct rstore *, redisReply *, void *), void *arg,
			     int argc, const char **argv, const size_t *lens)
{
	if (!r->cmd)
		return NULL;
	struct rcmd *c = xcalloc(1, sizeof(*c));
	c->r = r;
	c->fn = fn;
	c->arg = arg;
	c->sent_ns = mono_ns();
	list_insert_tail(&r->pending, &c->node);
	if (queue_cmd(r, c, argc, argv, lens) != REDIS_OK) {
		list_remove(&c->node);
		free(c);
		return NULL;
	}
	r->commands++;
	watchdog_arm(r);
	return c;
}

/* Sends script s with the keys and args given as strings (lengths
 * kvlen, or NUL-terminated when kvlen is NULL): by its SHA-1 when known,
 * keeping the arguments in case Redis has forgotten it. */
static struct rcmd *send_eval(struct rstore *r, void (*fn)(struct rstore *, redisReply *, void *), void *arg,
			      enum script s, int nkeys, int nargs, const char *const *kv, const size_t *kvlen)
{
	const char *argv[3 + MAX_EVAL_ARGS];
	size_t lens[3 + MAX_EVAL_ARGS];
	char nk[8];
	int n = nkeys + nargs;
	assert(n <= MAX_EVAL_ARGS);
	snprintf(nk, sizeof(nk), "%d", nkeys);
	bool by_sha = r->sha[s][0] != '\0';
	argv[0] = by_sha ? "EVALSHA" : "EVAL";
	lens[0] = strlen(argv[0]);
	argv[1] = by_sha ? r->sha[s] : script_text[s];
	lens[1] = strlen(argv[1]);
	argv[2] = nk;
	lens[2] = strlen(nk);
	size_t total = 0;
	for (int i = 0; i < n; i++) {
		argv[3 + i] = kv[i];
		lens[3 + i] = kvlen ? kvlen[i] : strlen(kv[i]);
		total += lens[3 + i];
	}
	struct rcmd *c = send_cmd(r, fn, arg, 3 + n, argv, lens);
	if (!c || !by_sha)
		return c;
	struct eval_args *e = xmalloc(sizeof(*e) + (size_t)n * sizeof(size_t) + total);
	e->script = s;
	e->nkeys = nkeys;
	e->n = n;
	e->data = (char *)(e->lens + n);
	char *p = e->data;
	for (int i = 0; i < n; i++) {
		e->lens[i] = lens[3 + i];
		memcpy(p, argv[3 + i], lens[3 + i]);
		p += lens[3 + i];
	}
	c->again = e;
	return c;
}

/* Sends c's EVALSHA again as EVAL, last in line: false when it cannot. */
static bool resend_eval(struct rstore *r, struct rcmd *c)
{
	const struct eval_args *e = c->again;
	const char *argv[3 + MAX_EVAL_ARGS];
	size_t lens[3 + MAX_EVAL_ARGS];
	char nk[8];
	snprintf(nk, sizeof(nk), "%d", e->nkeys);
	argv[0] = "EVAL";
	argv[1] = script_text[e->script];
	argv[2] = nk;
	for (int i = 0; i < 3; i++)
		lens[i] = strlen(argv[i]);
	const char *p = e->data;
	for (int i = 0; i < e->n; i++) {
		argv[3 + i] = p;
		lens[3 + i] = e->lens[i];
		p += e->lens[i];
	}
	if (queue_cmd(r, c, 3 + e->n, argv, lens) != REDIS_OK)
		return false;
	free(TAKE_PTR(c->again));
	c->sent_ns = mono_ns();
	list_insert_tail(&r->pending, &c->node);
	r->commands++;
	return true;
}

/* A script's SHA-1 from SCRIPT LOAD: later calls send it instead. */
static void script_loaded(struct rstore *r, redisReply *reply, void *arg)
{
	char *sha = arg;
	if (!reply)
		return;
	if (reply->type != REDIS_REPLY_STRING || reply->len != SHA1_HEX || !is_hex(reply->str, SHA1_HEX)) {
		outage(r, "unexpected reply to SCRIPT LOAD: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
		return;
	}
	memcpy(sha, reply->str, SHA1_HEX + 1);
}

/* A reply that must be an integer. */
static void ignore_reply(struct rstore *r, redisReply *reply, void *arg)
{
	if (reply && reply->type != REDIS_REPLY_INTEGER && reply->type != REDIS_REPLY_STATUS)
		outage(r, "unexpected reply: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
}

/* --- connection -------------------------------------------------------- */

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct rstore *r = ac->data;
	if (!r)
		return;
	/* hiredis frees ac after this: forget it first. */
	if (ac == r->cmd)
		r->cmd = NULL;
	if (ac == r->sub)
		r->sub = NULL;
	outage(r, "connection closed%s%s", ac->errstr[0] ? ": " : "", ac->errstr);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct rstore *r = ac->data;
	if (r && status != REDIS_OK) {
		if (ac == r->cmd)
			r->cmd = NULL;
		if (ac == r->sub)
			r->sub = NULL;
		outage(r, "cannot connect to %s: %s", r->address, ac->errstr);
	}
}

static redisAsyncContext *open_ctx(struct rstore *r)
{
	redisAsyncContext *ac = r->host ? redisAsyncConnect(r->host, r->port) : redisAsyncConnectUnix(r->path);
	if (!ac)
		return NULL;
	if (ac->err) {
		snprintf(r->last_error, sizeof(r->last_error), "%s", ac->errstr);
		redisAsyncFree(ac);
		return NULL;
	}
	ac->data = r;
	redisLibevAttach(r->ev, ac);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	return ac;
}

/* Drops both connections: every pending reply comes back NULL. */
static void drop(struct rstore *r)
{
	redisAsyncContext *c = r->cmd, *s = r->sub;
	r->cmd = r->sub = NULL;
	r->up = false;
	if (c) {
		c->data = NULL;
		redisAsyncFree(c);
	}
	if (s) {
		s->data = NULL;
		redisAsyncFree(s);
	}
	/* A context being freed inside its own callback answers later. */
	while (!list_empty(&r->pending)) {
		struct rcmd *cmd = list_first(&r->pending, struct rcmd, node);
		list_remove(&cmd->node);
		list_init(&cmd->node);
	}
	struct map *chans = r->chans;
	const char *k;
	void *v;
	for (size_t it = 0; map_next(chans, &it, &k, &v);)
		((struct chan *)v)->subscribed = false;
}

static void retry_fire(void *arg)
{
	struct rstore *r = arg;
	r->retry_armed = false;
	connect_now(r);
}

static void connect_now(struct rstore *r)
{
	if (r->cmd)
		return;
	r->cmd = open_ctx(r);
	r->sub = r->cmd ? open_ctx(r) : NULL;
	if (!r->cmd || !r->sub) {
		outage(r, "cannot connect to %s: %s", r->address, r->last_error);
		return;
	}
	/* Tasks cancelled through other daemons. */
	const char *sub[] = { "SUBSCRIBE", r->cancel_chan };
	redisAsyncCommandArgv(r->sub, on_message, r, 2, sub, NULL);
	/* What this daemon recorded alone goes first: Redis has it before
	 * it is seen as back, and before any claim of this daemon. */
	own_flush(r);
	/* The first reply says Redis is there. */
	const char *ping = "PING";
	send_cmd(r, ignore_reply, NULL, 1, &ping, NULL);
	for (int i = 0; i < N_SCRIPTS; i++) {
		const char *load[] = { "SCRIPT", "LOAD", script_text[i] };
		send_cmd(r, script_loaded, r->sha[i], 3, load, NULL);
	}
}

/* Treats Redis as away: warns once, answers what waits, reconnects later. */
static void outage(struct rstore *r, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (!r->outage) {
		r->outage = true;
		r->outages++;
		if (r->cfg.notify)
			r->cfg.notify(r->cfg.notify_arg, false, why);
	}
	drop(r);
	/* Joins waiting for a message from a holder elsewhere: their polls
	 * fire now and answer them from the fallback (a callback may cancel
	 * other waits, so none is answered from inside this loop). */
	struct list *p;
	for (p = r->waits.next; p != &r->waits; p = p->next) {
		struct store_wait *w = list_entry(p, struct store_wait, node);
		if (!claiming(w) && w->chan)
			tc_timer_start(w->poll, 0);
	}
	if (!r->retry_armed) {
		r->retry_armed = true;
		r->backoff_ms = r->backoff_ms ? MIN(r->backoff_ms * 2, BACKOFF_MAX_MS) : BACKOFF_MIN_MS;
		tc_timer_start(r->retry, r->backoff_ms + tc_random(r->loop) % (r->backoff_ms / 2 + 1));
	}
}

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

static void wait_free(struct store_wait *w)
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

static void rs_wait_cancel(struct store_wait *w)
{
	store_wait_cancel(w->local);
	wait_free(w);
}

/* Answers the wait and frees it. */
static void wait_answer(struct store_wait *w, const struct store_answer *a)
{
	store_cb cb = w->cb;
	void *arg = w->arg;
	wait_free(w);
	cb(arg, a);
}

static struct store_claim *claim_make(struct rstore *r, struct store_wait *w, bool shared);
static void own_add(struct rstore *r, const char *rkey, const char *token, struct buf *rec);

/* A claim of w may have reached Redis before it went away: its record
 * there is let go when Redis is back (if it is still w's). */
static void own_forget(struct store_wait *w)
{
	if (!w->token[0])
		return;
	struct buf none = {0};
	own_add(w->r, w->rkey, w->token, &none);
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
static void wait_fallback(struct store_wait *w)
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
		wait_free(w);
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
		wait_free(w);
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

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
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

static void renew_fire(void *arg);

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
	c->renew = tc_timer_new(r->loop, renew_fire, c);
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
			if (redisAsyncCommandArgv(r->sub, on_message, r, 2, argv, NULL) == REDIS_OK)
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
	if (!is_hex(s + 1, TOKEN_LEN + HASH_HEX))
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
static struct store_wait *reply_wait(void *arg, const redisReply *reply)
{
	struct store_wait *w = arg;
	if (!w)
		return NULL;
	w->cmd = NULL;
	if (!reply) {
		wait_fallback(w);
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
		chan_leave(w);	/* answered below, not by outage() */
		outage(r, "unexpected reply to a claim: not a record of this store");
		wait_fallback(w);
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
			outage(r, "a kept outcome does not decode");
			wait_fallback(w);
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
		outage(r, "unexpected reply to a claim: %s",
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
				end_claim(r, b->gone[i], b->gone_token[i], &none);
			}
			continue;
		}
		b->w[i] = NULL;
		w->batch = NULL;
		if (!trusted)
			wait_fallback(w);
		else if (!claim_answer(r, w, reply->element[i]))
			trusted = false;
	}
	for (size_t i = 0; i < b->n; i++)
		free(b->gone[i]);
	free(b);
}

/* Writes v in decimal into out: its start. */
static const char *u64_str(char out[static 24], uint64_t v)
{
	out[23] = '\0';
	return fmt_u64(out + 23, v);
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

/* Hands what hiredis holds to the socket now, not when the loop next
 * polls, so that Redis starts on it while this turn goes on. Calls
 * nothing back: a failure shows at the next write event. */
static void write_now(struct rstore *r)
{
	int done;
	if (r->cmd && (r->cmd->c.flags & REDIS_CONNECTED) && !r->cmd->c.err)
		redisBufferWrite(&r->cmd->c, &done);
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
	const char *shared[3] = { u64_str(lease_ms, r->cfg.lease_ms),
				  u64_str(rec_ms, r->cfg.lease_ms + MAX(r->cfg.ttl_ms, 1000)),
				  u64_str(max, MAX(r->cfg.max_entries, 1)) };
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
	struct rcmd *c = r->cmd ? send_eval(r, claims_reply, b, S_CLAIM, nkeys, 3 + 4 * n, kv, NULL) : NULL;
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
static void claims_send(struct rstore *r)
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
		write_now(r);
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
		wait_fallback(w);
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

static void on_message(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct rstore *r = priv;
	redisReply *reply = reply_;
	if (!reply || !r || ac != r->sub)
		return;
	if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
	    reply->element[0]->type != REDIS_REPLY_STRING || reply->element[1]->type != REDIS_REPLY_STRING) {
		outage(r, "unexpected message on a subscription");
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

static struct store_wait *wait_new(struct rstore *r, store_cb cb, void *arg)
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

static char *uid_key(struct rstore *r, const char *kind, uid_t uid, const char *rest)
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

static struct store_wait *rs_claim(struct store *s, const struct store_key *k, store_cb cb, void *arg)
{
	struct rstore *r = RS(s);
	struct store_wait *w = wait_new(r, cb, arg);
	w->k = *k;
	w->k.key = xmemdup(k->key, k->key_len + 1);
	w->k.tool = xstrdup(k->tool);
	memcpy(w->hash, k->hash, STORE_HASH_LEN);
	w->k.hash = w->hash;
	uint8_t kh[STORE_HASH_LEN];
	char khex[HASH_HEX + 1];
	store_sha256(k->key, k->key_len, kh);
	hex(kh, STORE_HASH_LEN, khex);
	w->rkey = uid_key(r, "idem", k->uid, khex);
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
		outage(r, "unexpected reply to a renewal: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
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

static void renew_fire(void *arg)
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
		c->renewing = send_eval(r, renew_reply, c, S_RENEW, 2, 3, kv, NULL);
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

/* An end of a claim waiting for the end of the loop turn: its 4 keys
 * and 3 args for END_LUA, back to back, NUL-terminated. */
struct end {
	struct list node;		/* r->ends */
	struct buf rec;			/* the outcome's record (empty: released) */
	char data[];
};

static void end_free(struct end *e)
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
	own_add(r, e->data, token, &e->rec);
	end_free(e);
}

static void ends_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct end_batch *b = arg;
	bool landed = reply && reply->type == REDIS_REPLY_INTEGER;
	if (reply && !landed)
		outage(r, "unexpected reply to an end: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
	for (int i = 0; i < b->n; i++) {
		if (landed || r->closing)
			end_free(b->e[i]);
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
	const char *ttl_s = u64_str(ttl, r->cfg.ttl_ms);
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
		send_cmd(r, ignore_reply, NULL, 5, argv, lens);
	}
	/* The ends stay until Redis says they landed. */
	struct end_batch *b = xcalloc(1, sizeof(*b));
	b->n = n;
	memcpy(b->e, batch, sizeof(batch[0]) * (size_t)n);
	if (!r->cmd || !send_eval(r, ends_reply, b, S_END, 4 * n, 3 * n, kv, NULL))
		ends_reply(r, NULL, b);
}

/* Sends the ends queued in this loop turn: they leave with the turn's
 * other commands, in one write. */
static void ends_send(struct rstore *r)
{
	while (!list_empty(&r->ends))
		ends_send_batch(r);
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
	claims_send(r);
	ends_send(r);
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
		write_now(r);
	}
	ev_prepare_start(r->ev, &r->flush);
}

/* Ends the claim of rkey held with token in Redis, with record rec
 * (empty: the key is freed), taken. The record goes by a plain SET to a
 * key of the holder's own and is renamed into place by the script, in
 * the same write: its bytes never enter Lua. */
static void end_claim(struct rstore *r, const char *rkey, const char *token, struct buf *rec)
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
		end_claim(c->r, c->rkey, c->token, rec);
	buf_free(rec);
	claim_free(c);
}

static void rs_complete(struct store_claim *c, void *value)
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
	own_add(r, c->rkey, c->token, &b);
	claim_free(c);
}

static void rs_release(struct store_claim *c)
{
	if (c->local)
		store_release(TAKE_PTR(c->local));
	struct buf none = {0};
	if (c->r && !(c->shared && c->r->up)) {
		own_add(c->r, c->rkey, c->token, &none);
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

static void own_free(struct rstore *r, struct own *o)
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
		outage(r, "unexpected reply to a write back: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong type");
		return;
	}
	r->written_back++;
	own_free(r, o);
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
		const char *ttl_s = u64_str(ttl, o->expires - now);
		const char *argv[] = { "SET", out, buf_head(&o->rec), "PX", ttl_s };
		size_t lens[] = { 3, strlen(out), buf_size(&o->rec), 2, strlen(ttl_s) };
		send_cmd(r, ignore_reply, NULL, 5, argv, lens);
	}
	const char *kv[] = { o->rkey, lease, set, out, o->token, keep ? "2" : "0", member };
	o->cmd = send_eval(r, own_reply, o, S_END, 4, 3, kv, NULL);
}

/* Keeps an end Redis has not heard (rec taken; empty: a release), and
 * sends it at once when Redis is there. Bounded: past OWN_MAX ends or
 * the bytes of kept outcomes, the oldest not in flight go (counted). */
static void own_add(struct rstore *r, const char *rkey, const char *token, struct buf *rec)
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
		own_free(r, old);
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
		outage(r, "unexpected reply to a claim: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong shape");
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
			     u64_str(lease_ms, r->cfg.lease_ms),
			     u64_str(rec_ms, r->cfg.lease_ms + MAX(r->cfg.ttl_ms, 1000)),
			     u64_str(max, MAX(r->cfg.max_entries, 1)),
			     rec, c->token, "0", member };
	c->adopt = send_eval(r, adopt_reply, c, S_CLAIM, 3, 7, kv, NULL);
}

/* Redis answers (again): what this daemon recorded alone goes back
 * first, in the order it happened. */
static void own_flush(struct rstore *r)
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

/* --- tasks ------------------------------------------------------------- */

static void task_put_reply(struct rstore *r, redisReply *reply, void *arg);

/* Sends w's put (or swap): false when it cannot be sent. */
static bool put_send(struct store_wait *w, const char *old, size_t old_len)
{
	struct rstore *r = w->r;
	char uidtxt[24];
	snprintf(uidtxt, sizeof(uidtxt), "%u", (unsigned)w->uid);
	_cleanup_free_ char *key = uid_key(r, "task", w->uid, w->id);
	char keep[24];
	snprintf(keep, sizeof(keep), "%" PRIu64, MAX(w->keep_ms, 1));
	if (w->swap) {
		_cleanup_free_ char *who = xasprintf("%s:%s", uidtxt, w->id);
		const char *kv[] = { key, r->cancel_chan, old, w->meta, keep, who };
		size_t lens[] = { strlen(key), strlen(r->cancel_chan), old_len, w->meta_len, strlen(keep), strlen(who) };
		w->cmd = send_eval(r, task_put_reply, w, S_TASK_SWAP, 2, 4, kv, lens);
		return w->cmd != NULL;
	}
	_cleanup_free_ char *set = xasprintf("%stasks:%s", r->prefix, uidtxt);
	_cleanup_free_ char *pre = uid_key(r, "task", w->uid, "");
	_cleanup_free_ char *cancelled = xasprintf("{\"task\":{\"taskId\":\"%s\",\"status\":\"cancelled\"", w->id);
	char ord[24], max[24];
	snprintf(ord, sizeof(ord), "%" PRIu64, w->order);
	snprintf(max, sizeof(max), "%zu", MAX(r->cfg.max_tasks, 1));
	const char *kv[] = { key, set, w->meta, keep, ord, w->id, max, cancelled, w->create ? "1" : "0", pre };
	size_t lens[] = { strlen(key), strlen(set), w->meta_len, strlen(keep), strlen(ord), strlen(w->id),
			  strlen(max), strlen(cancelled), 1, strlen(pre) };
	w->cmd = send_eval(r, task_put_reply, w, S_TASK_PUT, 2, 8, kv, lens);
	return w->cmd != NULL;
}

static struct store_wait *put_new(struct rstore *r, uid_t uid, const char *id, const char *meta, size_t meta_len,
				  uint64_t order, uint64_t keep_ms, store_put_cb cb, void *arg)
{
	struct store_wait *w = wait_new(r, NULL, arg);
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

static struct store_wait *rs_task_put(struct store *s, uid_t uid, const char *id, const char *meta,
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
	wait_fallback(w);
	return NULL;
}

static struct store_wait *rs_task_swap(struct store *s, uid_t uid, const char *id, const char *old,
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
	wait_fallback(w);
	return NULL;
}

static void task_put_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct store_wait *w = reply_wait(arg, reply);
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
		outage(r, "unexpected reply to a task write: %s", reply->type == REDIS_REPLY_ERROR ? reply->str : "wrong shape");
		wait_fallback(w);
		return;
	}
	int res = w->swap ? (code == 2 ? 0 : code == 1 ? -ESTALE : -ENOENT)
			  : (code == 1 ? 0 : code == 0 ? -EBUSY : -ECANCELED);
	store_put_cb cb = w->put_cb;
	void *cb_arg = w->arg;
	wait_free(w);
	cb(cb_arg, res, rec ? rec->str : NULL, rec ? rec->len : 0);
}

static void rs_watch_tasks(struct store *s, void (*fn)(void *arg, uid_t uid, const char *id), void *arg)
{
	RS(s)->task_fn = fn;
	RS(s)->task_arg = arg;
}

static void rs_reconfigure(struct store *s, const struct store_config *c)
{
	struct rstore *r = RS(s);
	struct store_config d;
	store_config_defaults(&d);
	r->cfg.lease_ms = c->lease_ms ? c->lease_ms : d.lease_ms;
	r->cfg.timeout_ms = c->timeout_ms ? c->timeout_ms : d.timeout_ms;
	r->cfg.fail_unavailable = c->fail_unavailable;
	r->cfg.max_tasks = c->max_tasks;
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
	struct store_wait *w = reply_wait(arg, reply);
	if (!w)
		return;
	void (*cb)(void *, int, const char *, size_t) = w->get_cb;
	void *cb_arg = w->arg;
	if (reply->type == REDIS_REPLY_NIL) {
		wait_free(w);
		cb(cb_arg, -ENOENT, NULL, 0);
		return;
	}
	if (!valid(r, reply)) {
		outage(r, "%s", what);
		wait_fallback(w);
		return;
	}
	wait_free(w);
	cb(cb_arg, 0, reply->str, reply->len);
}

/* Sends the GET of uid's record id of kind; NULL when it could not leave
 * (the local store has answered). */
static struct store_wait *record_get(struct rstore *r, const char *kind, uid_t uid, const char *id,
				     void (*fn)(struct rstore *, redisReply *, void *),
				     void (*cb)(void *arg, int r, const char *rec, size_t n), void *arg)
{
	struct store_wait *w = wait_new(r, NULL, arg);
	w->get_cb = cb;
	_cleanup_free_ char *key = uid_key(r, kind, uid, id);
	const char *argv[] = { "GET", key };
	w->cmd = send_cmd(r, fn, w, 2, argv, NULL);
	if (!w->cmd) {
		wait_fallback(w);
		return NULL;
	}
	return w;
}

static void task_get_reply(struct rstore *r, redisReply *reply, void *arg)
{
	record_reply(r, reply, arg, task_meta_ok, "a task record is not one this store wrote");
}

static struct store_wait *rs_task_get(struct store *s, uid_t uid, const char *id,
				      void (*cb)(void *arg, int r, const char *meta, size_t n), void *arg)
{
	struct rstore *r = RS(s);
	if (!r->cmd)
		return store_task_get(r->local, uid, id, cb, arg);
	return record_get(r, "task", uid, id, task_get_reply, cb, arg);
}

static void task_list_reply(struct rstore *r, redisReply *reply, void *arg)
{
	struct store_wait *w = reply_wait(arg, reply);
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
		outage(r, "unexpected reply to a task list");
		wait_fallback(w);
		return;
	}
	uint64_t next = 0;
	if (n > w->limit) {
		n = w->limit;
		next = orders[n - 1];
	}
	void (*cb)(void *, int, char **, size_t, uint64_t) = w->list_cb;
	void *cb_arg = w->arg;
	wait_free(w);
	cb(cb_arg, 0, metas, n, next);
}

static struct store_wait *rs_task_list(struct store *s, uid_t uid, uint64_t after, size_t limit,
				       void (*cb)(void *arg, int r, char **metas, size_t n, uint64_t next),
				       void *arg)
{
	struct rstore *r = RS(s);
	if (!r->cmd)
		return store_task_list(r->local, uid, after, limit, cb, arg);
	struct store_wait *w = wait_new(r, NULL, arg);
	w->list_cb = cb;
	w->limit = limit ? limit : 1;
	_cleanup_free_ char *set = xasprintf("%stasks:%u", r->prefix, (unsigned)uid);
	_cleanup_free_ char *pre = uid_key(r, "task", uid, "");
	char aft[24], lim[24];
	snprintf(aft, sizeof(aft), "%" PRIu64, after);
	snprintf(lim, sizeof(lim), "%zu", w->limit + 1);
	const char *kv[] = { set, aft, lim, pre };
	w->cmd = send_eval(r, task_list_reply, w, S_LIST, 1, 3, kv, NULL);
	if (!w->cmd) {
		wait_fallback(w);
		return NULL;
	}
	return w;
}

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

/* --- session records ----------------------------------------------------- */

static void rs_session_put(struct store *s, uid_t uid, const char *id, const char *rec, size_t n,
			   uint64_t keep_ms)
{
	struct rstore *r = RS(s);
	char buf[24];
	const char *px = u64_str(buf, keep_ms ? keep_ms : 1);
	_cleanup_free_ char *key = uid_key(r, "session", uid, id);
	const char *argv[] = { "SET", key, rec, "PX", px };
	const size_t lens[] = { 3, strlen(key), n, 2, strlen(px) };
	if (!send_cmd(r, ignore_reply, NULL, 5, argv, lens))
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

static struct store_wait *rs_session_get(struct store *s, uid_t uid, const char *id,
					 void (*cb)(void *arg, int r, const char *rec, size_t n), void *arg)
{
	struct rstore *r = RS(s);
	if (!r->cmd)
		return store_session_get(r->local, uid, id, cb, arg);
	return record_get(r, "session", uid, id, session_get_reply, cb, arg);
}

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
		wait_free(list_first(&r->waits, struct store_wait, node));
	while (!list_empty(&r->own))
		own_free(r, list_first(&r->own, struct own, node));
	r->closing = true;
	/* Ends not yet handed to hiredis would not have been written
	 * either: the connection closes without a flush. */
	ev_prepare_stop(r->ev, &r->flush);
	while (!list_empty(&r->ends)) {
		struct end *e = list_first(&r->ends, struct end, node);
		list_remove(&e->node);
		r->n_ends--;
		end_free(e);
	}
	drop(r);
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
	r->chans = map_new();
	r->retry = tc_timer_new(loop, retry_fire, r);
	r->watchdog = tc_timer_new(loop, watchdog_fire, r);
	int k = store_memory_ops.open(loop, &lc, vops, &r->local);
	if (k < 0) {
		rs_free(&r->base);
		return k;
	}
	connect_now(r);
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
	.watch_tasks = rs_watch_tasks,
	.reconfigure = rs_reconfigure,
	.task_get = rs_task_get,
	.task_list = rs_task_list,
	.write_stats = rs_write_stats,
	.set_limits = rs_set_limits,
	.entries = rs_entries,
	.sweep = rs_sweep,
	.next_expiry = rs_next_expiry,
};
