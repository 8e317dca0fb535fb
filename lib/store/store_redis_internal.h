/* SPDX-License-Identifier: MIT */
/*
 * What the parts of the Redis store share, and nothing outside lib/store/
 * includes (store_redis.c tells what the store keeps where, and why).
 * Each part calls only those listed before it; the connection, at the
 * bottom, reports up through struct rconn_events:
 *   store_redis_lua.c    the scripts Redis runs, sent by their SHA-1;
 *   store_redis_conn.c   commands in flight and their watchdog, the two
 *                        connections, an outage and the reconnection;
 *   store_redis_end.c    outcomes: the ends of claims, lease renewals, and
 *                        what this daemon recorded alone, written back;
 *   store_redis_claim.c  claims: the waits for a key, sent a loop turn's
 *                        worth at a time, answered, joined, or answered
 *                        from the local store when Redis is away;
 *   store_redis_tasks.c  task and session records;
 *   store_redis.c        the store: open, free, stats, its operations,
 *                        the end of a loop turn (claims, then ends).
 */
#ifndef TC_STORE_REDIS_INTERNAL_H
#define TC_STORE_REDIS_INTERNAL_H

#include <assert.h>
#include <errno.h>
#include <ev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/base/map.h"
#include "lib/store/store.h"
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

/* The scripts, sent by their SHA-1 once Redis has told it (SCRIPT LOAD
 * on each connection); a Redis that has forgotten one gets the text. */
enum script { S_CLAIM, S_RENEW, S_END, S_LIST, S_TASK_PUT, S_TASK_SWAP, N_SCRIPTS };

extern const char *const rs_script_text[N_SCRIPTS];

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

/* What the connection tells the layers above it (store_redis.c sets
 * them): store_redis_conn.c calls none of their functions. */
struct rconn_events {
	/* A message on the subscription connection (hiredis's callback, its
	 * privdata the store). */
	redisCallbackFn *message;
	/* The command connection is made, or Redis answers on it again:
	 * what this daemon recorded alone may go back. */
	void (*ready)(struct rstore *r);
	/* Redis went away (the connections are dropped): what waits for it
	 * is answered otherwise. */
	void (*down)(struct rstore *r);
};

struct rstore {
	struct store base;
	const struct rconn_events *events;
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
	char last_error[384];
	bool refused;			/* the last connect found an untrusted server */
	char refusal[384];		/* the refusal told in this outage ("": none) */
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

/* An end of a claim waiting for the end of the loop turn: its 4 keys
 * and 3 args for END_LUA, back to back, NUL-terminated. */
struct end {
	struct list node;		/* r->ends */
	struct buf rec;			/* the outcome's record (empty: released) */
	char data[];
};

/* Whether w's claim is queued or in flight. */
static inline bool claiming(const struct store_wait *w)
{
	return w->queued || w->batch;
}

/* store_redis_conn.c: commands, the connections, outages */
/* Opens both connections (an outage when it cannot), subscribes to the
 * task-cancel channel, writes back what this daemon recorded alone, then
 * loads the scripts. */
void rs_connect_now(struct rstore *r);
/* Drops both connections: every pending reply comes back NULL. */
void rs_drop(struct rstore *r);
/* A reply that must be an integer or a status, or else Redis is at fault. */
void rs_ignore_reply(struct rstore *r, redisReply *reply, void *arg);
/* Treats Redis as away: warns once, answers what waits, reconnects later. */
void rs_outage(struct rstore *r, const char *fmt, ...) PRINTF(2, 3);
/* The backoff ran out: connects again. */
void rs_retry_fire(void *arg);
/*
 * Sends one command (argv form) on the command connection; fn gets the
 * reply, or NULL when the connection went away first. Returns the command
 * (its arg may be cleared to ignore the reply), or NULL when nothing could
 * be sent (fn was not called).
 */
struct rcmd *rs_send_cmd(struct rstore *r, void (*fn)(struct rstore *, redisReply *, void *), void *arg,
			 int argc, const char **argv, const size_t *lens);
/* Sends script s with the keys and args given as strings (lengths
 * kvlen, or NUL-terminated when kvlen is NULL): by its SHA-1 when known,
 * keeping the arguments in case Redis has forgotten it. */
struct rcmd *rs_send_eval(struct rstore *r, void (*fn)(struct rstore *, redisReply *, void *), void *arg,
			  enum script s, int nkeys, int nargs, const char *const *kv, const size_t *kvlen);
/* A command without a reply past the timeout: Redis is stalled. */
void rs_watchdog_fire(void *arg);
/* Whether s holds n lowercase hex digits. */
bool rs_is_hex(const char *s, size_t n);
/* Writes v in decimal into out: its start. */
const char *rs_u64_str(char out[static 24], uint64_t v);
/* Hands what hiredis holds to the socket now, not when the loop next
 * polls, so that Redis starts on it while this turn goes on. Calls
 * nothing back: a failure shows at the next write event. */
void rs_write_now(struct rstore *r);

/* store_redis_end.c: ends of claims, renewals, write-back */
/* Ends the claim of rkey held with token in Redis, with record rec
 * (empty: the key is freed), taken. The record goes by a plain SET to a
 * key of the holder's own and is renamed into place by the script, in
 * the same write: its bytes never enter Lua. */
void rs_end_claim(struct rstore *r, const char *rkey, const char *token, struct buf *rec);
/* Frees an end and the record it holds. */
void rs_end_free(struct end *e);
/* Sends the ends queued in this loop turn. */
void rs_ends_send(struct rstore *r);
/* Keeps an end Redis has not heard (rec taken; empty: a release), and
 * sends it at once when Redis is there. Bounded: past OWN_MAX ends or
 * the bytes of kept outcomes, the oldest not in flight go (counted). */
void rs_own_add(struct rstore *r, const char *rkey, const char *token, struct buf *rec);
/* Redis answers (again): what this daemon recorded alone goes back
 * first, in the order it happened. */
void rs_own_flush(struct rstore *r);
/* Forgets an end kept for write-back. */
void rs_own_free(struct rstore *r, struct own *o);
/* A third of the lease went by: renews the claim's lease. */
void rs_renew_fire(void *arg);

/* store_redis_claim.c: waits and claims */
/* Sends the claims queued in this loop turn; those that cannot be sent
 * fall back. */
void rs_claims_send(struct rstore *r);
/* A message on the subscription connection: a holder's end, a task cancelled. */
void rs_on_message(redisAsyncContext *ac, void *reply_, void *priv);
/* The wait a reply is for, or NULL when there is nothing more to do:
 * nobody waits any more, or the connection went (answered from the
 * fallback). */
struct store_wait *rs_reply_wait(void *arg, const redisReply *reply);
/* The key P kind:U:rest. */
char *rs_uid_key(struct rstore *r, const char *kind, uid_t uid, const char *rest);
/* Redis is away: answers from the local store, or as unavailable. */
void rs_wait_fallback(struct store_wait *w);
/* Frees a wait: out of its channel, its timers, its local claim. */
void rs_wait_free(struct store_wait *w);
/* A new wait of r, answered through cb. */
struct store_wait *rs_wait_new(struct rstore *r, store_cb cb, void *arg);
/* Redis went away: joins waiting for a holder elsewhere poll now, and
 * are answered from the fallback. */
void rs_waits_down(struct rstore *r);

/* The store's operations (store.h), in store_redis_ops: claims and waits
 * (store_redis_claim.c), ends (store_redis_end.c), task and session
 * records (store_redis_tasks.c). */
struct store_wait *rs_claim(struct store *s, const struct store_key *k, store_cb cb, void *arg);
void rs_wait_cancel(struct store_wait *w);
void rs_complete(struct store_claim *c, void *value);
void rs_release(struct store_claim *c);
void rs_reconfigure(struct store *s, const struct store_config *c);
struct store_wait *rs_session_get(struct store *s, uid_t uid, const char *id,
				  void (*cb)(void *arg, int r, const char *rec, size_t n), void *arg);
void rs_session_put(struct store *s, uid_t uid, const char *id, const char *rec, size_t n,
		    uint64_t keep_ms);
struct store_wait *rs_task_get(struct store *s, uid_t uid, const char *id,
			       void (*cb)(void *arg, int r, const char *meta, size_t n), void *arg);
struct store_wait *rs_task_list(struct store *s, uid_t uid, uint64_t after, size_t limit,
				void (*cb)(void *arg, int r, char **metas, size_t n, uint64_t next),
				void *arg);
struct store_wait *rs_task_put(struct store *s, uid_t uid, const char *id, const char *meta,
			       size_t meta_len, uint64_t order, uint64_t keep_ms, bool create,
			       store_put_cb cb, void *arg);
struct store_wait *rs_task_swap(struct store *s, uid_t uid, const char *id, const char *old,
				size_t old_len, const char *meta, size_t meta_len, uint64_t keep_ms,
				store_put_cb cb, void *arg);
void rs_hear_cancels(struct store *s, void (*fn)(void *arg, uid_t uid, const char *id), void *arg);

#endif
