/* SPDX-License-Identifier: MIT */
/*
 * The idempotency cache: entries by uid-scoped key, in flight (joined) or
 * kept (replayed) until their TTL. Kept outcomes are in one list in expiry
 * order (completion order: TTLs are equal) and in their uid's LRU list;
 * each uid is bounded by count and by bytes on its own.
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
	c->owners = map_new();
	list_init(&c->expiry);
	c->bytes = 0;
}

/* The entries of the uid that key (made by idem_key) belongs to. */
static struct idem_owner *owner_of(struct idem_cache *c, const char *key)
{
	_cleanup_free_ char *uid = xstrndup(key, strcspn(key, "\x1f"));
	struct idem_owner *o = map_get(c->owners, uid);
	if (!o) {
		o = xcalloc(1, sizeof(*o));
		o->uid = TAKE_PTR(uid);
		list_init(&o->lru);
		map_put(c->owners, o->uid, o);
	}
	return o;
}

/* Forgets one entry (and its owner with its last one). */
static void idem_entry_free(struct idem_cache *c, struct idem_entry *e)
{
	struct idem_owner *o = e->owner;
	c->bytes -= e->bytes;
	o->bytes -= e->bytes;
	if (list_linked(&e->lru)) {
		list_remove(&e->lru);
		list_remove(&e->expiry);
	}
	if (--o->n == 0) {
		map_remove(c->owners, o->uid);
		free(o->uid);
		free(o);
	}
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
	c->owners = map_free(c->owners);
}

char *idem_key(uid_t uid, const char *client_key)
{
	return xasprintf("%u\x1f%s", (unsigned)uid, client_key);
}

void idem_expire(struct idem_cache *c, uint64_t now)
{
	while (!list_empty(&c->expiry)) {
		struct idem_entry *e = list_first(&c->expiry, struct idem_entry, expiry);
		if (e->expires > now)
			break;
		idem_entry_free(c, e);
	}
}

uint64_t idem_next_expiry(const struct idem_cache *c)
{
	const struct idem_entry *e = list_first(&c->expiry, struct idem_entry, expiry);
	return e ? e->expires : 0;
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
	list_insert_tail(&ie->owner->lru, &ie->lru);
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
	list_init(&ie->expiry);
	ie->owner = owner_of(c, key);
	ie->owner->n++;
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
	struct idem_owner *own = ie->owner;
	c->bytes += ie->bytes;
	own->bytes += ie->bytes;
	/* TTLs are equal, so completion order is expiry order. Bounded by
	 * count and by bytes (forty answers of 16 MiB would otherwise stay
	 * in memory for the whole TTL), per uid: a uid that floods keys
	 * evicts only its own. */
	list_insert_tail(&c->expiry, &ie->expiry);
	list_insert_tail(&own->lru, &ie->lru);
	while ((own->n > cfg->idem_max_entries || own->bytes > cfg->idem_max_bytes) &&
	       !list_empty(&own->lru)) {
		bool last = own->n == 1;	/* then own goes with it */
		idem_entry_free(c, list_first(&own->lru, struct idem_entry, lru));
		if (last)
			break;
	}
}

size_t idem_size(const struct idem_cache *c)
{
	return map_size(c->entries);
}
