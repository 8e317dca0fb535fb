/* SPDX-License-Identifier: MIT */
/*
 * The idempotency cache. A key (scoped to the caller's uid) names one
 * execution: while it runs, later callers with the same key and the same
 * tool and canonical arguments join it; once it ends its outcome is kept
 * for a TTL and replayed; the same key with another call is a conflict.
 * Entries are bounded by count and by bytes per uid, that uid's least
 * recently used dropped first: one uid's keys never evict another's.
 */
#ifndef TC_IDEM_H
#define TC_IDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/list.h"

struct dispatch_config;
struct exec;
struct json;
struct outcome;

struct idem_entry {
	char *tool;
	char *canon;
	struct exec *exec;		/* in flight */
	struct outcome *outcome;	/* kept */
	size_t bytes;			/* what the kept outcome holds, roughly */
	uint64_t expires;
	struct list lru;		/* its owner's lru while kept */
	struct list expiry;		/* idem_cache.expiry while kept */
	struct idem_owner *owner;	/* the uid the key belongs to */
	char *key;
};

/* What one uid holds in the cache. */
struct idem_owner {
	char *uid;			/* the key prefix naming the uid */
	struct list lru;		/* kept outcomes, least recently used first */
	size_t n;			/* entries, in flight and kept */
	uint64_t bytes;			/* held by kept outcomes */
};

struct idem_cache {
	struct map *entries;		/* key -> struct idem_entry */
	struct map *owners;		/* uid -> struct idem_owner */
	struct list expiry;		/* kept outcomes in the order they expire */
	uint64_t bytes;			/* held by kept outcomes, all uids */
};

void idem_init(struct idem_cache *c);
/* Frees every entry and the cache's own memory. */
void idem_clear(struct idem_cache *c);
/* The cache key of a client's idempotency key for uid. */
char *idem_key(uid_t uid, const char *client_key);
/* Drops kept outcomes past their TTL, then finds key (NULL: unknown). */
struct idem_entry *idem_find(struct idem_cache *c, const char *key, uint64_t now);
/* True when the entry was made for another tool or other arguments. */
bool idem_conflicts(const struct idem_entry *ie, const char *tool, const char *canon);
/* Marks a kept entry as the most recently used. */
void idem_touch(struct idem_cache *c, struct idem_entry *ie);
/* Records that exec, running tool with canonical arguments canon, answers key. */
void idem_begin(struct idem_cache *c, const char *key, const char *tool, const char *canon,
		struct exec *exec);
/* Keeps exec's outcome o under key for the TTL (or forgets the key: a
 * cancelled call, a TTL of 0). */
void idem_store(struct idem_cache *c, const struct dispatch_config *cfg, const char *key,
		const struct exec *exec, struct outcome *o, uint64_t now);
/* Drops kept outcomes past their TTL. */
void idem_expire(struct idem_cache *c, uint64_t now);
/* When the next kept outcome expires; 0: none is kept. */
uint64_t idem_next_expiry(const struct idem_cache *c);
size_t idem_size(const struct idem_cache *c);

#endif
