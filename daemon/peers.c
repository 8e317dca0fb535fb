/* SPDX-License-Identifier: MIT */
/*
 * The uid table (see peers.h): entries kept in a map by uid, created with
 * a uid's first connection and freed with its last; the bytes charged to
 * each, and the list of those over the per-uid bound for the connection
 * layer to bring back under it. An entry also lives while requests waiting
 * for confirmation hold bytes for its uid, after its last connection.
 */
#include "daemon/peers.h"

#include <errno.h>
#include <stdio.h>

#include "lib/base/map.h"
#include "proto/base/util.h"

#define UID_KEY_MAX 16

static void uid_key(uid_t uid, char key[static UID_KEY_MAX])
{
	snprintf(key, UID_KEY_MAX, "%u", (unsigned)uid);
}

void peers_init(struct peers *t)
{
	*t = (struct peers){ .by_uid = map_new() };
	list_init(&t->over);
}

void peers_done(struct peers *t)
{
	size_t it = 0;
	const char *key;
	void *v;
	while (map_next(t->by_uid, &it, &key, &v))
		free(v);
	t->by_uid = map_free(t->by_uid);
}

struct peer *peers_find(const struct peers *t, uid_t uid)
{
	char key[UID_KEY_MAX];
	uid_key(uid, key);
	return map_get(t->by_uid, key);
}

/* The uid's entry, made when it has none. */
static struct peer *peer_get(struct peers *t, uid_t uid)
{
	struct peer *p = peers_find(t, uid);
	if (!p) {
		char key[UID_KEY_MAX];
		uid_key(uid, key);
		p = xcalloc(1, sizeof(*p));
		p->uid = uid;
		list_init(&p->members);
		list_init(&p->over_node);
		map_put(t->by_uid, key, p);
	}
	return p;
}

/* Frees the entry of a uid that holds nothing any more. */
static void peer_maybe_free(struct peers *t, struct peer *p)
{
	if (p->conns || p->memory)
		return;
	if (list_linked(&p->over_node))
		list_remove(&p->over_node);
	char key[UID_KEY_MAX];
	uid_key(p->uid, key);
	map_remove(t->by_uid, key);
	free(p);
}

struct peer *peers_join(struct peers *t, uid_t uid)
{
	struct peer *p = peer_get(t, uid);
	p->conns++;
	return p;
}

void peers_leave(struct peers *t, struct peer *p)
{
	p->conns--;
	peer_maybe_free(t, p);
}

void peers_charge(struct peers *t, struct peer *p, int64_t delta)
{
	p->memory += (uint64_t)delta;
	t->memory += (uint64_t)delta;
	bool over = t->memory_limit && p->memory > t->memory_limit;
	if (over && !list_linked(&p->over_node))
		list_insert_tail(&t->over, &p->over_node);
	else if (!over && list_linked(&p->over_node))
		list_remove(&p->over_node);
}

int peers_charge_uid(void *arg, uid_t uid, int64_t delta)
{
	struct peers *t = arg;
	struct peer *p = peer_get(t, uid);
	if (delta > 0 && t->memory_limit && p->memory + (uint64_t)delta > t->memory_limit) {
		peer_maybe_free(t, p);
		return -ENOBUFS;
	}
	peers_charge(t, p, delta);
	peer_maybe_free(t, p);
	return 0;
}

void peers_set_limit(struct peers *t, uint64_t limit)
{
	t->memory_limit = limit;
	size_t it = 0;
	const char *key;
	void *v;
	while (map_next(t->by_uid, &it, &key, &v))
		peers_charge(t, v, 0);
}

struct peer *peers_heaviest(const struct peers *t)
{
	struct peer *best = NULL;
	size_t it = 0;
	const char *key;
	void *v;
	while (map_next(t->by_uid, &it, &key, &v)) {
		struct peer *p = v;
		if (p->memory && (!best || p->memory > best->memory))
			best = p;
	}
	return best;
}
