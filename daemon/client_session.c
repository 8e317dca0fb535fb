/* SPDX-License-Identifier: MIT */
/*
 * The client behind a connection: its session, made on first use with the
 * default workspace unless initialize chose one; the identity its file
 * tools and children act as (the peer's uid, gid and groups as the kernel
 * recorded them at connect); and the workspaces it may open, resolved from
 * workspaces.allowed at (re)load and judged, per client, by the directory
 * opened and the client's right to search it.
 */
#include "daemon/client_session.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/server_state.h"
#include "lib/identity.h"
#include "lib/session.h"
#include "lib/workspace.h"
#include "lib/workspace_root.h"

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

/* Gives a session whom its calls act as: this connection's peer, with its
 * groups as the kernel recorded them at connect. */
void client_session_peer(struct conn *c, struct session *s)
{
	if (s->has_ident)
		return;
	struct identity id = {0};
	/* Without the groups, the primary group only: fewer rights, never more. */
	if (identity_from_socket(c->fd, &id) < 0 || id.uid != c->cred.uid) {
		identity_clear(&id);
		id = (struct identity){ .uid = c->cred.uid, .gid = c->cred.gid };
	}
	session_set_peer(s, &id, server_of(c)->cfg.sandbox.run_as_peer);
	identity_clear(&id);
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

/* The peer's groups, as the kernel saw them when it connected (SO_PEERGROUPS). */
static gid_t *peer_groups(int fd, size_t *ret_n)
{
	socklen_t len = 64 * sizeof(gid_t);
	gid_t *v = xmalloc(len);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, v, &len) < 0) {
		/* Too small: the kernel said how much it needs. Otherwise none
		 * known, which can only make the search check stricter. */
		bool again = errno == ERANGE && len > 0 && len <= 65536 * sizeof(gid_t);
		if (again)
			v = xrealloc(v, len);
		if (!again || getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, v, &len) < 0)
			len = 0;
	}
	*ret_n = len / sizeof(gid_t);
	return v;
}

int client_open_workspace(struct conn *c, const char *path, struct workspace **ret)
{
	size_t n = 0;
	_cleanup_free_ gid_t *groups = peer_groups(c->fd, &n);
	const struct ws_peer peer = { c->cred.uid, c->cred.gid, groups, n };
	return ws_open_allowed(server_of(c)->ws_roots, path, &peer, ret);
}
