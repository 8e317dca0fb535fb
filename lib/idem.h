/* SPDX-License-Identifier: MIT */
/*
 * The idempotency cache. A key (scoped to the caller's uid) names one
 * execution: while it runs, later callers with the same key and the same
 * tool and canonical arguments join it; once it ends its outcome is kept
 * for a TTL and replayed; the same key with another call is a conflict.
 * Kept outcomes are bounded by count and by bytes, oldest dropped first.
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
	struct list lru;		/* idem_cache.lru while kept */
	char *key;
};

struct idem_cache {
	struct map *entries;		/* key -> struct idem_entry */
	struct list lru;		/* kept outcomes, oldest first */
	uint64_t bytes;			/* held by kept outcomes */
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
size_t idem_size(const struct idem_cache *c);

#endif
