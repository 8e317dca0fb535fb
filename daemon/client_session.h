/* SPDX-License-Identifier: MIT */
/*
 * The client behind a connection as the daemon's policy sees it: its
 * session (made on first use with the default workspace), the identity
 * its file tools and children act as, and the workspaces it may open
 * (workspaces.allowed, judged with its credentials).
 */
#ifndef TC_CLIENT_SESSION_H
#define TC_CLIENT_SESSION_H

#include <stdbool.h>
#include <stddef.h>

struct conn;
struct outreq;
struct subscriber;
struct store;
struct server;
struct session;
struct workspace;
struct ws_roots;

/*
 * What the MCP layer keeps for the client of one connection (its
 * conn->client): its session, what it declared at initialize, the
 * daemon's roots/list in flight, its event subscription. Made with its
 * first request (client_state_of), freed as the connection closes
 * (client_state_free).
 */
struct client_state {
	struct session *session;
	bool initialized;		/* "initialize" answered: gets list_changed */
	bool tool_errors_result;	/* initialize toolErrors "result": failed calls answer isError results */
	bool roots_cap;			/* initialize declared capabilities.roots */
	bool elicit_cap;		/* initialize declared capabilities.elicitation (form mode) */
	bool was_subscribed;		/* had a subscription when it closed */
	struct outreq *roots_req;	/* roots/list in flight, or NULL */
	struct subscriber *sub;		/* events/subscribe: waits for events, silently */
};

/* The connection's client state, made on first use. */
struct client_state *client_state_of(struct conn *c);
/* Frees it (the connection has closed: its requests, subscription and
 * the daemon's own requests have ended), the session let go. */
void client_state_free(struct conn *c);

/* The connection's session, made on first use with the default workspace. */
struct session *client_session(struct conn *c);
/* Gives a session made for this connection, once, its peer's identity:
 * whom its children, hooks and file tools act as. */
void client_session_peer(struct conn *c, struct session *s);
/* Resolves the workspaces initialize may choose: the default workspace and
 * workspaces.allowed (those that cannot be opened are logged and left out). */
struct ws_roots *client_resolve_roots(struct server *s);
/* Opens the workspace (or MCP root) a client names, judged by the
 * directory opened: 0, -EINVAL (not absolute), or -EACCES for every
 * refusal. */
int client_open_workspace(struct conn *c, const char *path, struct workspace **ret);

/*
 * Sessions outlive their connections by limits.session_resume_s: a client
 * that comes back with the id within that time (initialize sessionId)
 * finds its workspace, roots, budget and always_allow answers. keep takes
 * a reference to session for that long, counted from the last connection
 * that closed; the sessions kept are bounded per uid (per_uid_connections)
 * and in all (max_connections), the oldest let go first.
 */
void client_sessions_init(struct server *s);
void client_sessions_done(struct server *s);
void client_session_keep(struct server *s, struct session *session);
/* How many sessions are kept for their clients to come back. */
size_t client_sessions_kept(const struct server *s);

/* The shared store session records go to (Redis, with session_resume_s),
 * or NULL. */
struct store *client_session_store(struct server *s);
/* Writes the session's record to the shared store (when there is one). */
void client_session_save(struct server *s, struct session *ss);
/* Writes the record of every session followed in the store that changed
 * since it was last written (a stop: the next daemon takes them back as they are). */
void client_sessions_save_all(struct server *s);
/* Makes session id again from its record, for the client of c (its
 * workspace judged again for it; tools no longer there left out): 0, or
 * a negative errno (the record is then not used). */
int client_session_restore(struct conn *c, const char *id, const char *rec, size_t n);

#endif
