/* SPDX-License-Identifier: MIT */
/*
 * The idempotency cache: entries by uid-scoped key, in flight (joined) or
 * kept (replayed) until their TTL, in one LRU list that is also their
 * expiry order (TTLs are equal), bounded by count and by bytes.
 */
#include "lib/idem.h"

#include <string.h>

#include "lib/dispatch.h"
#include "lib/map.h"
#include "lib/outcome.h"
#include "proto/base/util.h"

void idem_init(struct idem_cache *c)
{
	c->entries = map_new();
	list_init(&c->lru);
	c->bytes = 0;
}

/* Forgets one entry. */
static void idem_entry_free(struct idem_cache *c, struct idem_entry *e)
{
	c->bytes -= e->bytes;
	if (list_linked(&e->lru))
		list_remove(&e->lru);
	map_remove(c->entries, e->key);
	outcome_unref(e->outcome);
	free(e->tool);
	free(e->canon);
	free(e->key);
	free(e);
}

void idem_clear(struct idem_cache *c)
{
	size_t it = 0;
	void *v;
	while (map_next(c->entries, &it, NULL, &v))
		idem_entry_free(c, v);
	c->entries = map_free(c->entries);
}

char *idem_key(uid_t uid, const char *client_key)
{
	return xasprintf("%u\x1f%s", (unsigned)uid, client_key);
}

void idem_expire(struct idem_cache *c, uint64_t now)
{
	while (!list_empty(&c->lru)) {
		struct idem_entry *e = list_first(&c->lru, struct idem_entry, lru);
		if (e->expires > now)
			break;
		idem_entry_free(c, e);
	}
}

struct idem_entry *idem_find(struct idem_cache *c, const char *key, uint64_t now)
{
	idem_expire(c, now);
	return map_get(c->entries, key);
}

bool idem_conflicts(const struct idem_entry *ie, const char *tool, const char *canon)
{
	return !str_eq(ie->tool, tool) || !str_eq(ie->canon, canon);
}

void idem_touch(struct idem_cache *c, struct idem_entry *ie)
{
	list_remove(&ie->lru);
	list_insert_tail(&c->lru, &ie->lru);
}

void idem_begin(struct idem_cache *c, const char *key, const char *tool, const char *canon,
		struct exec *exec)
{
	struct idem_entry *ie = xcalloc(1, sizeof(*ie));
	ie->key = xstrdup(key);
	ie->tool = xstrdup(tool);
	ie->canon = xstrdup(canon);
	ie->exec = exec;
	list_init(&ie->lru);
	map_put(c->entries, key, ie);
}

void idem_store(struct idem_cache *c, const struct dispatch_config *cfg, const char *key,
		const struct exec *exec, struct outcome *o, uint64_t now)
{
	struct idem_entry *ie = map_get(c->entries, key);
	if (!ie || ie->exec != exec)
		return;
	ie->exec = NULL;
	if (o->kind == TC_CANCELLED || cfg->idem_ttl_ms == 0) {
		idem_entry_free(c, ie);
		return;
	}
	ie->outcome = outcome_ref(o);
	ie->expires = now + cfg->idem_ttl_ms;
	ie->bytes = outcome_bytes(o) + strlen(ie->key) + strlen(ie->canon) + sizeof(*ie);
	c->bytes += ie->bytes;
	/* TTLs are equal, so completion order is expiry order. Bounded by
	 * count and by bytes: forty answers of 16 MiB would otherwise stay
	 * in memory for the whole TTL. */
	list_insert_tail(&c->lru, &ie->lru);
	while ((map_size(c->entries) > cfg->idem_max_entries || c->bytes > cfg->idem_max_bytes) &&
	       !list_empty(&c->lru))
		idem_entry_free(c, list_first(&c->lru, struct idem_entry, lru));
}

size_t idem_size(const struct idem_cache *c)
{
	return map_size(c->entries);
}
