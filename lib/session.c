/* SPDX-License-Identifier: MIT */
/*
 * The session table. A session lives while a connection or a call holds it.
 * Ids are scoped by uid, as idempotency keys are: another user's session id
 * names no session of yours, so naming it makes a fresh session exactly
 * as an id nobody used does, and tells nothing of the other's.
 */
#include "lib/session.h"

#include <errno.h>
#include <stdio.h>
#include <sys/random.h>

#include "lib/base/map.h"
#include "lib/files/workspace.h"
#include "proto/base/util.h"

struct session_table *session_table_new(void)
{
	struct session_table *t = xcalloc(1, sizeof(*t));
	t->by_id = map_new();
	t->run_as_peer = -1;
	if (getrandom(&t->boot, sizeof(t->boot), GRND_NONBLOCK) != sizeof(t->boot))
		t->boot = wall_ms() ^ ((uint64_t)getpid() << 32);
	if (getrandom(t->id_key, sizeof(t->id_key), GRND_NONBLOCK) != sizeof(t->id_key))
		for (size_t i = 0; i < ELEMENTSOF(t->id_key); i++)
			t->id_key[i] = (uint32_t)(t->boot >> (i * 8)) * 0x9e3779b9U + (uint32_t)i;
	return t;
}

struct session_table *session_table_free(struct session_table *t)
{
	if (!t)
		return NULL;
	/* Sessions still referenced forget their table. */
	size_t it = 0;
	void *v;
	while (map_next(t->by_id, &it, NULL, &v))
		((struct session *)v)->table = NULL;
	map_free(t->by_id);
	free(t);
	return NULL;
}

char *session_key(uid_t uid, const char *id)
{
	return xasprintf("%u\x1f%s", (unsigned)uid, id);
}

struct session *session_find(struct session_table *t, uid_t uid, const char *id)
{
	if (!id)
		return NULL;
	_cleanup_free_ char *key = session_key(uid, id);
	return map_get(t->by_id, key);
}

int session_get(struct session_table *t, const char *id, uid_t uid, struct workspace *ws,
		struct session **ret)
{
	struct session *s = session_find(t, uid, id);
	if (s) {
		*ret = session_ref(s);
		return 0;
	}
	s = xcalloc(1, sizeof(*s));
	s->refs = 1;
	if (id)
		s->id = xstrdup(id);
	else
		s->id = xasprintf("s-%08llx-%016llx", (unsigned long long)(t->boot & 0xffffffff),
				  (unsigned long long)id_hide(++t->counter, t->id_key));
	s->uid = uid;
	s->ws = ws_ref(ws);
	s->base = ws_ref(ws);
	s->always_allow = map_new();
	list_init(&s->callers);
	list_init(&s->queue);
	list_init(&s->ready_node);
	s->table = t;
	_cleanup_free_ char *key = session_key(uid, s->id);
	map_put(t->by_id, key, s);
	*ret = s;
	return 0;
}

struct session *session_ref(struct session *s)
{
	if (s)
		s->refs++;
	return s;
}

struct session *session_unref(struct session *s)
{
	if (!s || --s->refs > 0)
		return NULL;
	if (s->table) {
		_cleanup_free_ char *key = session_key(s->uid, s->id);
		if (map_get(s->table->by_id, key) == s)
			map_remove(s->table->by_id, key);
	}
	ws_unref(s->ws);
	ws_unref(s->base);
	identity_clear(&s->ident);
	map_free(s->always_allow);
	free(s->id);
	free(s);
	return NULL;
}

void session_set_workspace(struct session *s, struct workspace *ws)
{
	struct workspace *old = s->ws;
	s->ws = ws_ref(ws ? ws : s->base);
	ws_unref(old);
}

void session_set_peer(struct session *s, const struct identity *peer, bool run_as_peer)
{
	if (s->has_ident || peer->uid != s->uid)
		return;
	identity_copy(&s->ident, peer);
	identity_for_children(&s->ident, run_as_peer);
	s->has_ident = true;
}

void session_table_set_run_as(struct session_table *t, bool run_as_peer)
{
	if (t->run_as_peer == (int)run_as_peer)
		return;
	t->run_as_peer = run_as_peer;
	size_t it = 0;
	void *v;
	while (map_next(t->by_id, &it, NULL, &v)) {
		struct session *s = v;
		if (s->has_ident)
			identity_for_children(&s->ident, run_as_peer);
	}
}
