/* SPDX-License-Identifier: MIT */
/*
 * The client behind a connection: its session, made on first use with the
 * default workspace unless initialize chose one; the identity its file
 * tools and children act as (the peer's uid, gid and groups as the kernel
 * recorded them at connect); and the workspaces it may open, resolved from
 * workspaces.allowed at (re)load and judged, per client, by the directory
 * opened and the right of that same identity to search it.
 */
#include "daemon/client_session.h"

#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/egress.h"
#include "daemon/server_state.h"
#include "lib/dispatch/dispatch.h"
#include "lib/files/identity.h"
#include "lib/registry.h"
#include "lib/store/store.h"
#include "proto/json.h"
#include "lib/base/list.h"
#include "lib/base/map.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "proto/base/util.h"

struct client_state *client_state_of(struct conn *c)
{
	if (!c->client)
		c->client = xcalloc(1, sizeof(*c->client));
	return c->client;
}

void client_state_free(struct conn *c)
{
	struct client_state *cl = TAKE_PTR(c->client);
	if (!cl)
		return;
	session_unref(cl->session);
	free(cl);
}

struct session *client_session(struct conn *c)
{
	struct client_state *cl = client_state_of(c);
	if (!cl->session) {
		struct server *srv = server_of(c);
		struct session *s = NULL;
		if (session_get(srv->sessions, NULL, c->cred.uid, srv->default_ws, &s) == 0) {
			client_session_peer(c, s);
			cl->session = s;
		}
	}
	return cl->session;
}

/* Reads the connection's peer as the kernel recorded it at connect: uid
 * and gid, and its groups where SO_PEERGROUPS gives them; without them,
 * the primary group only (fewer rights, never more). */
static void peer_identity(struct conn *c, struct identity *ret)
{
	if (identity_from_socket(c->fd, ret) < 0 || ret->uid != c->cred.uid) {
		identity_clear(ret);
		*ret = (struct identity){ .uid = c->cred.uid, .gid = c->cred.gid };
	}
}

/* Gives a session whom its calls act as: this connection's peer. */
void client_session_peer(struct conn *c, struct session *s)
{
	if (s->has_ident)
		return;
	_cleanup_(identity_clear) struct identity id = {0};
	peer_identity(c, &id);
	session_set_peer(s, &id, server_of(c)->cfg.sandbox.run_as_peer);
}

struct ws_roots *client_resolve_roots(struct server *s)
{
	struct ws_roots *r = ws_roots_new();
	if (s->default_ws)
		ws_roots_add_ws(r, s->default_ws);
	for (size_t i = 0; i < s->cfg.n_workspaces_allowed; i++) {
		int k = ws_roots_add(r, s->cfg.workspaces_allowed[i], true);
		if (k < 0)
			log_warning("workspaces.allowed: %s cannot be opened as a directory (%s); it is not offered",
				    s->cfg.workspaces_allowed[i], strerror(-k));
	}
	return r;
}

int client_open_workspace(struct conn *c, const char *path, struct workspace **ret)
{
	_cleanup_(identity_clear) struct identity id = {0};
	peer_identity(c, &id);
	return ws_open_allowed(server_of(c)->ws_roots, path, &id, ret);
}

/* --- sessions kept for a client to come back -------------------------------- */

/* A session's record as last written to the shared store. */
struct saved {
	char *rec;			/* what was written last */
	uint64_t at;			/* when */
};

/* How often changed sessions are written to the shared store. */
#define SAVE_EVERY_S 1.0

static void on_save_timer(struct ev_loop *ev, ev_timer *w, int revents);

/* A session kept after a connection that used it closed. */
struct kept {
	struct list node;		/* in kept_sessions.all, oldest first */
	struct session *session;	/* a reference */
	uint64_t until;			/* mono_ms() when it is let go */
	struct kept_uid *per_uid;
};

/* How many sessions one uid has kept. */
struct kept_uid {
	char key[24];
	size_t n;
};

struct kept_sessions {
	struct server *srv;
	struct list all;
	struct map *by_id;		/* session_key() -> struct kept */
	struct map *by_uid;		/* uid -> struct kept_uid */
	size_t n;
	ev_timer timer;
	struct map *saved;		/* session_key() -> struct saved */
	ev_timer save_timer;
};

static void kept_drop(struct kept_sessions *k, struct kept *e)
{
	list_remove(&e->node);
	_cleanup_free_ char *key = session_key(e->session->uid, e->session->id);
	map_remove(k->by_id, key);
	if (--e->per_uid->n == 0) {
		map_remove(k->by_uid, e->per_uid->key);
		free(e->per_uid);
	}
	k->n--;
	session_unref(e->session);
	free(e);
}

static void kept_arm(struct kept_sessions *k)
{
	ev_timer_stop(k->srv->ev, &k->timer);
	if (list_empty(&k->all))
		return;
	struct kept *e = list_first(&k->all, struct kept, node);
	uint64_t now = mono_ms();
	ev_timer_set(&k->timer, e->until > now ? (double)(e->until - now) / 1000.0 : 0.0, 0.0);
	ev_timer_start(k->srv->ev, &k->timer);
}

static void on_kept_timer(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct kept_sessions *k = w->data;
	uint64_t now = mono_ms();
	while (!list_empty(&k->all)) {
		struct kept *e = list_first(&k->all, struct kept, node);
		if (e->until > now)
			break;
		kept_drop(k, e);
	}
	kept_arm(k);
}

void client_sessions_init(struct server *s)
{
	struct kept_sessions *k = xcalloc(1, sizeof(*k));
	k->srv = s;
	list_init(&k->all);
	k->by_id = map_new();
	k->by_uid = map_new();
	ev_init(&k->timer, on_kept_timer);
	k->timer.data = k;
	k->saved = map_new();
	ev_timer_init(&k->save_timer, on_save_timer, SAVE_EVERY_S, SAVE_EVERY_S);
	k->save_timer.data = k;
	s->kept = k;
}

void client_sessions_done(struct server *s)
{
	struct kept_sessions *k = s->kept;
	if (!k)
		return;
	ev_timer_stop(s->ev, &k->timer);
	ev_timer_stop(s->ev, &k->save_timer);
	while (!list_empty(&k->all))
		kept_drop(k, list_first(&k->all, struct kept, node));
	size_t it = 0;
	void *v;
	while (map_next(k->saved, &it, NULL, &v)) {
		free(((struct saved *)v)->rec);
		free(v);
	}
	map_free(k->saved);
	map_free(k->by_id);
	map_free(k->by_uid);
	free(k);
	s->kept = NULL;
}

void client_session_keep(struct server *s, struct session *session)
{
	struct kept_sessions *k = s->kept;
	uint32_t resume_s = s->cfg.limits.session_resume_s;
	client_session_save(s, session);
	if (!k || !session || resume_s == 0 || s->stopping)
		return;
	_cleanup_free_ char *sid_key = session_key(session->uid, session->id);
	struct kept *e = map_get(k->by_id, sid_key);
	if (e && e->session != session) {
		/* A session of that id made since: the newer one is kept. */
		kept_drop(k, e);
		e = NULL;
	}
	if (e) {
		list_remove(&e->node);
	} else {
		char key[24];
		snprintf(key, sizeof(key), "%u", (unsigned)session->uid);
		struct kept_uid *u = map_get(k->by_uid, key);
		/* Bounded: one uid keeps at most per_uid_connections sessions,
		 * the daemon max_connections; beyond, the oldest go first. */
		if (u && u->n >= s->cfg.limits.per_uid_connections) {
			struct list *pos;
			for (pos = k->all.next; pos != &k->all; pos = pos->next) {
				struct kept *old = list_entry(pos, struct kept, node);
				if (old->per_uid == u) {
					kept_drop(k, old);
					break;
				}
			}
		}
		if (k->n >= s->cfg.limits.max_connections && !list_empty(&k->all))
			kept_drop(k, list_first(&k->all, struct kept, node));
		u = map_get(k->by_uid, key);
		if (!u) {
			u = xcalloc(1, sizeof(*u));
			memcpy(u->key, key, sizeof(key));
			map_put(k->by_uid, u->key, u);
		}
		e = xcalloc(1, sizeof(*e));
		e->session = session_ref(session);
		e->per_uid = u;
		u->n++;
		k->n++;
		map_put(k->by_id, sid_key, e);
	}
	e->until = mono_ms() + (uint64_t)resume_s * 1000;
	list_insert_tail(&k->all, &e->node);
	kept_arm(k);
}

size_t client_sessions_kept(const struct server *s)
{
	return s->kept ? s->kept->n : 0;
}

/* --- sessions in the shared store ------------------------------------------ */

/*
 * With Redis, a session's record (the workspace initialize chose, the
 * budget left, the tools always allowed) is written to it when the session
 * starts, when its last connection closes, and within a second of a
 * change (a timer compares what it would write with what it wrote last),
 * kept limits.session_resume_s: a daemon that starts afresh (a restart)
 * takes the session back from it when a client names its id.
 */
struct store *client_session_store(struct server *s)
{
	if (!str_eq(s->cfg.store.kind, "redis") || s->cfg.limits.session_resume_s == 0)
		return NULL;
	return dispatch_store(s->dispatcher);
}

static char *session_record(const struct session *ss)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "workspace", ss->base->root);
	if (ss->has_budget)
		jgen_kv_int(g, "budget", ss->budget_left);
	jgen_key(g, "allow");
	jgen_arr_open(g);
	size_t it = 0;
	const char *name;
	while (map_next(ss->always_allow, &it, &name, NULL))
		jgen_str(g, name);
	jgen_arr_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	return buf_steal(&b);
}

/* Writes the session's record when it changed, or half its time is gone. */
static void save(struct server *s, struct store *st, struct session *ss, bool now)
{
	struct kept_sessions *k = s->kept;
	uint64_t keep_ms = (uint64_t)s->cfg.limits.session_resume_s * 1000;
	_cleanup_free_ char *rec = session_record(ss);
	_cleanup_free_ char *key = session_key(ss->uid, ss->id);
	struct saved *v = map_get(k->saved, key);
	uint64_t t = mono_ms();
	if (!now && v && str_eq(v->rec, rec) && t - v->at < keep_ms / 2)
		return;
	store_session_put(st, ss->uid, ss->id, rec, strlen(rec), keep_ms);
	if (!v) {
		v = xcalloc(1, sizeof(*v));
		map_put(k->saved, key, v);
		/* Armed while there are sessions to follow (an idle daemon
		 * without them wakes for nothing). */
		if (!ev_is_active(&k->save_timer))
			ev_timer_start(s->ev, &k->save_timer);
	}
	free(v->rec);
	v->rec = TAKE_PTR(rec);
	v->at = t;
}

void client_session_save(struct server *s, struct session *ss)
{
	struct store *st = client_session_store(s);
	if (st && ss && s->kept)
		save(s, st, ss, true);
}

void client_sessions_save_all(struct server *s)
{
	struct store *st = client_session_store(s);
	if (!st || !s->kept)
		return;
	size_t it = 0;
	void *v;
	while (map_next(s->sessions->by_id, &it, NULL, &v)) {
		struct session *ss = v;
		_cleanup_free_ char *key = session_key(ss->uid, ss->id);
		if (map_get(s->kept->saved, key))
			save(s, st, ss, false);
	}
}

static void on_save_timer(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct kept_sessions *k = w->data;
	struct server *s = k->srv;
	struct store *st = client_session_store(s);
	size_t it = 0;
	const char *id;
	void *v;
	/* What was written of sessions gone stays in the store its time. */
	while (map_next(k->saved, &it, &id, &v)) {
		if (st && map_get(s->sessions->by_id, id))
			continue;
		free(((struct saved *)v)->rec);
		free(v);
		map_remove(k->saved, id);
	}
	if (!st || map_size(k->saved) == 0) {
		ev_timer_stop(ev, w);
		return;
	}
	it = 0;
	while (map_next(s->sessions->by_id, &it, NULL, &v)) {
		struct session *ss = v;
		_cleanup_free_ char *key = session_key(ss->uid, ss->id);
		if (map_get(k->saved, key))
			save(s, st, ss, false);
	}
}

int client_session_restore(struct conn *c, const char *id, const char *rec, size_t n)
{
	struct server *s = server_of(c);
	_cleanup_(json_doc_unrefp) struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(rec, n, 0, 8, &doc, &err) < 0 || json_doc_root(doc)->type != JSON_OBJECT)
		return -EINVAL;
	const struct json *root = json_doc_root(doc);
	const char *path = json_str(json_get(root, "workspace"));
	struct workspace *ws = NULL;
	/* Judged again, as this client asking for it. */
	if (!path || client_open_workspace(c, path, &ws) < 0)
		return -EACCES;
	struct session *ss = NULL;
	int r = session_get(s->sessions, id, c->cred.uid, ws, &ss);
	ws_unref(ws);
	if (r < 0)
		return r;
	client_session_peer(c, ss);
	int64_t budget;
	if (json_get_int(json_get(root, "budget"), &budget) && budget >= 0) {
		ss->has_budget = true;
		ss->budget_left = budget;
	}
	const struct json *allow = json_get(root, "allow");
	for (size_t i = 0; allow && allow->type == JSON_ARRAY && i < allow->u.arr.n; i++) {
		const char *name = json_str(allow->u.arr.items[i]);
		/* Tools still known, and hosts answered for (their keys
		 * as the daemon writes them, nothing else). */
		if (name && (registry_find(s->registry, name) || net_allow_key_valid(name)))
			map_put(ss->always_allow, name, (void *)1);
	}
	/* The table holds it while a connection or the keeper does: this
	 * client's initialize joins it next. */
	client_session_keep(s, ss);
	session_unref(ss);
	return 0;
}
