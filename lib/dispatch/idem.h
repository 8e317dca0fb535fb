/* SPDX-License-Identifier: MIT */
/*
 * Idempotency: a key (scoped to the caller's uid) names one execution.
 * Executions in flight here are indexed by key, so later callers with the
 * same key and the same tool and canonical arguments join them without
 * asking anyone; the same key with another call is a conflict. Everything
 * else goes through the store (lib/store/store.h): the claim that makes an
 * execution the key's, the outcome kept for the TTL and replayed, and the
 * calls running on other daemons (a shared store) that are joined there.
 */
#ifndef TC_IDEM_H
#define TC_IDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct dispatch_config;
struct exec;
struct store;
struct store_config;
struct tc_loop;

struct idem_entry {
	char *tool;
	char *canon;
	struct exec *exec;		/* in flight */
	char *key;
};

struct idem_cache {
	struct map *entries;		/* key -> struct idem_entry, in flight */
	struct store *store;
};

/* Opens the memory store with cfg's limits. */
void idem_init(struct idem_cache *c, struct tc_loop *loop, const struct dispatch_config *cfg);
/* Frees every entry, the store and the cache's own memory. */
void idem_clear(struct idem_cache *c);
/* Swaps in the store sc names (nothing may be in flight): 0 or the
 * store's error. */
int idem_open_store(struct idem_cache *c, struct tc_loop *loop, const struct dispatch_config *cfg,
		    const struct store_config *sc);
/* Applies cfg's TTL and bounds to the store. */
void idem_configure(struct idem_cache *c, const struct dispatch_config *cfg);
/* The cache key of a client's idempotency key for uid. */
char *idem_key(uid_t uid, const char *client_key);
/* The client's key inside a cache key. */
const char *idem_client_key(const char *key);
/* Finds the execution in flight here for key (NULL: none). */
struct idem_entry *idem_find(struct idem_cache *c, const char *key);
/* True when the entry was made for another tool or other arguments. */
bool idem_conflicts(const struct idem_entry *ie, const char *tool, const char *canon);
/* Records that exec, running tool with canonical arguments canon, answers key. */
void idem_begin(struct idem_cache *c, const char *key, const char *tool, const char *canon,
		struct exec *exec);
/* exec no longer answers key here. */
void idem_end(struct idem_cache *c, const char *key, const struct exec *exec);
/* Records the store holds in this daemon's memory. */
size_t idem_size(const struct idem_cache *c);
/* Keyed executions in flight here. */
size_t idem_in_flight(const struct idem_cache *c);

#endif
