/* SPDX-License-Identifier: MIT */
/*
 * Where idempotency records and tasks live: the dispatcher claims a key
 * before it runs a keyed call, completes the claim with the call's outcome
 * (kept the idempotency TTL and replayed), and joins a claim someone else
 * holds (its outcome arrives when that call ends). It sees claims, outcomes,
 * joins and tasks, never the backend behind them.
 *
 * Backends share the store_ prefix and register in one table: "memory"
 * (store_memory.c: one daemon's memory, the default) and "redis"
 * (store_redis*.c: shared by every daemon using the same Redis and prefix,
 * asynchronous on the daemon's own loop). Values (outcomes) are opaque here:
 * the dispatcher hands in a struct store_value_ops that counts references
 * and turns a value into bytes and back; bytes read back are hostile.
 */
#ifndef TC_STORE_H
#define TC_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct buf;
struct jgen;
struct tc_loop;

#define STORE_HASH_LEN 32	/* SHA-256 */

/* What the store keeps: refcounted, encodable values. */
struct store_value_ops {
	void *(*ref)(void *v);
	void (*unref)(void *v);
	/* Roughly what v holds in memory, for the byte bound. */
	size_t (*bytes)(const void *v);
	/* Appends v as text (remote backends). */
	void (*encode)(const void *v, struct buf *out);
	/* Makes a value of hostile text: 0, or a negative errno. */
	int (*decode)(const char *s, size_t n, void **ret);
};

struct store_config {
	const char *kind;		/* "memory" (default) or "redis" */
	const char *address;		/* redis: "unix:/path" or "HOST:PORT" ("127.0.0.1:6379") */
	const char *prefix;		/* redis: "toolcalld:" */
	uint64_t lease_ms;		/* 10000: a claim's lease, renewed while held */
	bool fail_unavailable;		/* on_unavailable "fail" (else "local") */
	uint64_t timeout_ms;		/* 2000: a command without a reply means an outage */
	uint64_t ttl_ms;		/* 60000: how long outcomes are kept */
	size_t max_entries;		/* 10000 per uid */
	uint64_t max_bytes;		/* 256 MiB of kept outcomes (memory) */
	size_t max_value_bytes;		/* 64 MiB: larger records read back are refused */
	size_t max_tasks;		/* 1000 per uid */
	/* redis on a Unix socket: a server's uid trusted besides root and
	 * this process's euid ((uid_t)-1 or 0: none); see store_server_trusted(). */
	uid_t server_uid;
	/* Told when the shared store goes away (up false) and comes back. */
	void (*notify)(void *arg, bool up, const char *why);
	void *notify_arg;
};

/* Fills c with the defaults. */
void store_config_defaults(struct store_config *c);

enum store_result {
	STORE_CLAIMED,		/* the key is the caller's: run, then complete or release */
	STORE_DONE,		/* the call already ran: value is its outcome */
	STORE_CONFLICT,		/* the key was used with another tool or other arguments */
	STORE_LOST,		/* its holder died mid-call: the outcome is unknown */
	STORE_UNAVAILABLE,	/* the shared store cannot be reached ("fail") */
};

struct store_claim;
struct store_wait;

struct store_answer {
	enum store_result result;
	void *value;			/* DONE: borrowed; ref it to keep it */
	bool joined;			/* DONE: after waiting for a running call */
	bool same_tool;			/* CONFLICT: the key's tool is this one */
	struct store_claim *claim;	/* CLAIMED: the caller's now */
};

typedef void (*store_cb)(void *arg, const struct store_answer *a);

/* One keyed call: the uid scopes the key; hash is store_args_hash(). */
struct store_key {
	uid_t uid;
	const char *key;
	size_t key_len;
	const char *tool;
	const uint8_t *hash;		/* STORE_HASH_LEN bytes */
	bool idempotent;		/* after a holder died: run again (else LOST) */
};

struct store;

/* A task write's answer: 0 (stored), -EBUSY (a new task beyond the uid's
 * bound), -EIO (the shared store cannot be reached, "fail"), -ECANCELED
 * (the store keeps the task cancelled by another daemon: kept is that
 * record, which stays), -ESTALE (a swap found another record: kept),
 * -ENOENT (a swap found none). */
typedef void (*store_put_cb)(void *arg, int r, const char *kept, size_t n);

struct store_ops {
	const char *name;
	int (*open)(struct tc_loop *loop, const struct store_config *cfg,
		    const struct store_value_ops *vops, struct store **ret);
	void (*free)(struct store *s);
	struct store_wait *(*claim)(struct store *s, const struct store_key *k, store_cb cb, void *arg);
	void (*wait_cancel)(struct store_wait *w);
	void (*complete)(struct store_claim *c, void *value);
	void (*release)(struct store_claim *c);
	struct store_wait *(*task_put)(struct store *s, uid_t uid, const char *id, const char *meta,
				       size_t meta_len, uint64_t order, uint64_t keep_ms, bool create,
				       store_put_cb cb, void *arg);
	struct store_wait *(*task_swap)(struct store *s, uid_t uid, const char *id, const char *old,
					size_t old_len, const char *meta, size_t meta_len, uint64_t keep_ms,
					store_put_cb cb, void *arg);
	void (*hear_cancels)(struct store *s, void (*fn)(void *arg, uid_t uid, const char *id), void *arg);
	void (*reconfigure)(struct store *s, const struct store_config *c);
	struct store_wait *(*task_get)(struct store *s, uid_t uid, const char *id,
				       void (*cb)(void *arg, int r, const char *meta, size_t n), void *arg);
	struct store_wait *(*task_list)(struct store *s, uid_t uid, uint64_t after, size_t limit,
					void (*cb)(void *arg, int r, char **metas, size_t n, uint64_t next),
					void *arg);
	void (*write_stats)(struct store *s, struct jgen *g);
	void (*set_limits)(struct store *s, uint64_t ttl_ms, size_t max_entries, uint64_t max_bytes);
	size_t (*entries)(struct store *s);
	void (*sweep)(struct store *s);
	uint64_t (*next_expiry)(struct store *s);
	void (*session_put)(struct store *s, uid_t uid, const char *id, const char *rec, size_t n,
			    uint64_t keep_ms);
	struct store_wait *(*session_get)(struct store *s, uid_t uid, const char *id,
					  void (*cb)(void *arg, int r, const char *rec, size_t n), void *arg);
	bool (*writing)(struct store *s);
};

struct store {
	const struct store_ops *ops;
};

/* The backends, NULL-terminated. */
extern const struct store_ops store_memory_ops;
extern const struct store_ops store_redis_ops;
extern const struct store_ops *const store_backends[];

/* Opens the backend cfg->kind names: 0, -ENOENT for an unknown kind, or
 * the backend's error (-EOPNOTSUPP: the loop is not libev, -EINVAL: a bad
 * address). */
int store_open(struct tc_loop *loop, const struct store_config *cfg, const struct store_value_ops *vops,
	       struct store **ret);
/* Frees the store: pending waits are dropped unanswered, held claims
 * forgotten. Accepts NULL; returns NULL. */
struct store *store_free(struct store *s);
/* The backend's name. */
const char *store_kind(const struct store *s);

/*
 * Claims key k, or finds its outcome. cb runs exactly once, unless the wait
 * is cancelled first; it may run before store_claim returns (then NULL is
 * returned). When another daemon holds the key, the answer waits for its
 * call to end: DONE with its outcome, CLAIMED when it let the key go (or,
 * for an idempotent tool, when its holder died), LOST otherwise.
 */
struct store_wait *store_claim(struct store *s, const struct store_key *k, store_cb cb, void *arg);
/* Drops a pending wait: its callback will not run. Accepts NULL. */
void store_wait_cancel(struct store_wait *w);
/* Ends a claim with the call's outcome (a reference is taken): kept ttl_ms
 * and handed to everyone waiting. Frees the claim. */
void store_complete(struct store_claim *c, void *value);
/* Ends a claim without an outcome (the call was cancelled): the key is
 * free again, and waiters elsewhere claim it. Frees the claim. */
void store_release(struct store_claim *c);

/*
 * Tasks: meta is the task's record, a JSON object starting
 * {"task":{"taskId":ID,"status":..., kept keep_ms; order (unique per uid,
 * growing: creation time and a counter) orders the list. A put with
 * create of an id the store does not have is refused (-EBUSY) when the
 * uid has max_tasks tasks: the bound holds across every daemon sharing
 * the store. A put never replaces a record whose status is "cancelled"
 * (-ECANCELED with that record): a cancelled task stays cancelled. cb
 * (NULL: nobody asks) gets the answer once the write has landed, or at
 * once for the memory store and, with on_unavailable "local", while the
 * shared store is away (the write then goes to this daemon's memory).
 * A put of a task that exists keeps its order.
 *
 * get answers -ENOENT for an unknown task (or another uid's), -EIO when
 * the shared store cannot tell. list answers at most limit tasks whose
 * order is above after (0: from the start), oldest first, and the order
 * to go on from (0: no more).
 *
 * swap replaces the record old by meta, atomically, and tells every
 * daemon that hears of cancels (store_hear_cancels()) that the task was
 * cancelled: 0, -ESTALE with the record found instead, -ENOENT, -EIO.
 */
struct store_wait *store_task_put(struct store *s, uid_t uid, const char *id, const char *meta, size_t meta_len,
				  uint64_t order, uint64_t keep_ms, bool create, store_put_cb cb, void *arg);
struct store_wait *store_task_swap(struct store *s, uid_t uid, const char *id, const char *old, size_t old_len,
				   const char *meta, size_t meta_len, uint64_t keep_ms, store_put_cb cb, void *arg);
/* fn hears of tasks cancelled through another daemon (a swap); fn NULL:
 * nobody hears any more. */
void store_hear_cancels(struct store *s, void (*fn)(void *arg, uid_t uid, const char *id), void *arg);
struct store_wait *store_task_get(struct store *s, uid_t uid, const char *id,
				  void (*cb)(void *arg, int r, const char *meta, size_t n), void *arg);
struct store_wait *store_task_list(struct store *s, uid_t uid, uint64_t after, size_t limit,
				   void (*cb)(void *arg, int r, char **metas, size_t n, uint64_t next),
				   void *arg);

/* Writes the store's admin/stats object members (inside an open object):
 * kind, connected, rttUs, outages, entries. */
void store_write_stats(struct store *s, struct jgen *g);

/* Applies what a reload may change without a restart: lease_ms,
 * timeout_ms, fail_unavailable, max_tasks, server_uid (from the next
 * connect on; kind, address and prefix name the shared state itself and
 * stay). */
void store_reconfigure(struct store *s, const struct store_config *c);
/* Changes how long outcomes are kept and how many (a reload). */
void store_set_limits(struct store *s, uint64_t ttl_ms, size_t max_entries, uint64_t max_bytes);
/* Drops what this daemon holds past its time (when store_next_expiry()
 * says something is due). */
void store_sweep(struct store *s);
/* When the first record this daemon holds expires, on the loop's clock;
 * 0: none will (an idle daemon arms no timer). */
uint64_t store_next_expiry(struct store *s);
/* Records this daemon holds in memory (the memory store, or the Redis
 * store's fallback). */
size_t store_entries(struct store *s);

/*
 * Session records (a JSON object of the daemon's: what a session that
 * outlives its daemon needs), kept keep_ms under (uid, id); a put replaces
 * the record and its time. With Redis every daemon sharing it sees them;
 * while it is away they go to, and come from, this daemon's memory. get
 * answers 0 with the record, -ENOENT, or -EIO when the store cannot tell;
 * cb may run before get returns (NULL is then returned).
 */
void store_session_put(struct store *s, uid_t uid, const char *id, const char *rec, size_t n, uint64_t keep_ms);
struct store_wait *store_session_get(struct store *s, uid_t uid, const char *id,
				     void (*cb)(void *arg, int r, const char *rec, size_t n), void *arg);
/* Whether writes handed to the store are still on their way (a stopping
 * daemon waits for them: the connection closes without a flush). */
bool store_writing(struct store *s);

/*
 * Whether the server at the other end of fd, a Unix socket connected to
 * path, may be trusted with the shared state: its uid (SO_PEERCRED, as
 * it was when the server listened) is root's, this process's euid or
 * server_uid ((uid_t)-1 or 0: none besides). Anyone who can make path
 * while the real server is away could otherwise serve a fake store.
 * 0, or -EPERM (another uid) or the error of getsockopt(), with why (n
 * bytes) naming the socket, the uid found and the uids accepted.
 */
int store_server_trusted(int fd, const char *path, uid_t server_uid, char *why, size_t n);

/* Longest session record kept. */
#define STORE_SESSION_MAX (64u << 10)

/* The hash that tells one call from another under one key: SHA-256 of the
 * tool name, a NUL, and the canonical arguments. */
void store_args_hash(const char *tool, const char *canon, size_t canon_len,
		     uint8_t ret[static STORE_HASH_LEN]);
/* SHA-256 of n bytes. */
void store_sha256(const void *p, size_t n, uint8_t ret[static STORE_HASH_LEN]);

#endif
