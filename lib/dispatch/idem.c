/* SPDX-License-Identifier: MIT */
/*
 * The index of keyed executions in flight on this daemon, and the store
 * that keeps the rest (opened here: memory by default).
 */
#include "lib/dispatch/dispatch_internal.h"

#include <string.h>

#include "lib/base/map.h"
#include "lib/store/store.h"
#include "proto/base/util.h"

/* The store's settings that come from the idempotency section. */
static void store_limits(struct store_config *sc, const struct dispatch_config *cfg)
{
	sc->ttl_ms = cfg->idem_ttl_ms;
	sc->max_entries = cfg->idem_max_entries;
	sc->max_bytes = cfg->idem_max_bytes;
}

void idem_init(struct idem_cache *c, struct tc_loop *loop, const struct dispatch_config *cfg)
{
	c->entries = map_new();
	struct store_config sc;
	store_config_defaults(&sc);
	store_limits(&sc, cfg);
	/* The memory store cannot fail to open. */
	store_open(loop, &sc, &outcome_store_ops, &c->store);
}

int idem_open_store(struct idem_cache *c, struct tc_loop *loop, const struct dispatch_config *cfg,
		    const struct store_config *sc)
{
	struct store_config copy = *sc;
	store_limits(&copy, cfg);
	struct store *s = NULL;
	int r = store_open(loop, &copy, &outcome_store_ops, &s);
	if (r < 0)
		return r;
	store_free(c->store);
	c->store = s;
	return 0;
}

void idem_configure(struct idem_cache *c, const struct dispatch_config *cfg)
{
	store_set_limits(c->store, cfg->idem_ttl_ms, cfg->idem_max_entries, cfg->idem_max_bytes);
}

/* Forgets one entry. */
static void idem_entry_free(struct idem_cache *c, struct idem_entry *e)
{
	map_remove(c->entries, e->key);
	free(e->tool);
	free(e->canon);
	free(e->key);
	free(e);
}

void idem_clear(struct idem_cache *c)
{
	size_t it = 0;
	void *v;
	while ((it = 0, map_next(c->entries, &it, NULL, &v)))
		idem_entry_free(c, v);
	c->entries = map_free(c->entries);
	c->store = store_free(c->store);
}

char *idem_key(uid_t uid, const char *client_key)
{
	return xasprintf("%u\x1f%s", (unsigned)uid, client_key);
}

const char *idem_client_key(const char *key)
{
	const char *sep = strchr(key, '\x1f');
	return sep ? sep + 1 : key;
}

struct idem_entry *idem_find(struct idem_cache *c, const char *key)
{
	return map_get(c->entries, key);
}

bool idem_conflicts(const struct idem_entry *ie, const char *tool, const char *canon)
{
	return !str_eq(ie->tool, tool) || !str_eq(ie->canon, canon);
}

void idem_begin(struct idem_cache *c, const char *key, const char *tool, const char *canon,
		struct exec *exec)
{
	struct idem_entry *ie = xcalloc(1, sizeof(*ie));
	ie->key = xstrdup(key);
	ie->tool = xstrdup(tool);
	ie->canon = xstrdup(canon);
	ie->exec = exec;
	map_put(c->entries, key, ie);
}

void idem_end(struct idem_cache *c, const char *key, const struct exec *exec)
{
	struct idem_entry *ie = map_get(c->entries, key);
	if (ie && ie->exec == exec)
		idem_entry_free(c, ie);
}

size_t idem_size(const struct idem_cache *c)
{
	return store_entries(c->store);
}

size_t idem_in_flight(const struct idem_cache *c)
{
	return map_size(c->entries);
}
