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
#include <string.h>

#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/server_state.h"
#include "lib/identity.h"
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
