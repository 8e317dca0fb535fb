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
#include "daemon/server_state.h"
#include "lib/identity.h"
#include "lib/list.h"
#include "lib/map.h"
#include "lib/session.h"
#include "lib/workspace.h"
#include "lib/workspace_root.h"
#include "proto/base/util.h"

struct session *client_session(struct conn *c)
{
	if (!c->session) {
		struct server *srv = server_of(c);
		struct session *s = NULL;
		if (session_get(srv->sessions, NULL, c->cred.uid, srv->default_ws, &s) == 0) {
			client_session_peer(c, s);
			c->session = s;
		}
	}
	return c->session;
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
	struct map *by_id;		/* session id -> struct kept */
	struct map *by_uid;		/* uid -> struct kept_uid */
	size_t n;
	ev_timer timer;
};

static void kept_drop(struct kept_sessions *k, struct kept *e)
{
	list_remove(&e->node);
	map_remove(k->by_id, e->session->id);
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
	s->kept = k;
}

void client_sessions_done(struct server *s)
{
	struct kept_sessions *k = s->kept;
	if (!k)
		return;
	ev_timer_stop(s->ev, &k->timer);
	while (!list_empty(&k->all))
		kept_drop(k, list_first(&k->all, struct kept, node));
	map_free(k->by_id);
	map_free(k->by_uid);
	free(k);
	s->kept = NULL;
}

void client_session_keep(struct server *s, struct session *session)
{
	struct kept_sessions *k = s->kept;
	uint32_t resume_s = s->cfg.limits.session_resume_s;
	if (!k || !session || resume_s == 0 || s->stopping)
		return;
	struct kept *e = map_get(k->by_id, session->id);
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
		if (!u) {
			u = xcalloc(1, sizeof(*u));
			memcpy(u->key, key, sizeof(key));
			map_put(k->by_uid, u->key, u);
		}
		/* Bounded: one uid keeps at most per_uid_connections sessions,
		 * the daemon max_connections; beyond, the oldest go first. */
		if (u->n >= s->cfg.limits.per_uid_connections) {
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
		map_put(k->by_id, session->id, e);
	}
	e->until = mono_ms() + (uint64_t)resume_s * 1000;
	list_insert_tail(&k->all, &e->node);
	kept_arm(k);
}

size_t client_sessions_kept(const struct server *s)
{
	return s->kept ? s->kept->n : 0;
}
