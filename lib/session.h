/* SPDX-License-Identifier: MIT */
/*
 * Sessions: who made them (the peer, from SO_PEERCRED and SO_PEERGROUPS:
 * whom their calls act as), their workspace, their budget, their
 * confirmations-for-the-rest-of-the-session, and the calls they have in
 * flight. Connections share a session by naming its id in initialize;
 * another uid can never join it, cancel its calls or subscribe to its
 * events.
 */
#ifndef TC_SESSION_H
#define TC_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "lib/files/identity.h"
#include "lib/base/list.h"

struct map;
struct workspace;

struct session {
	unsigned refs;
	char *id;
	uid_t uid;
	struct identity ident;		/* the peer of the connection that made it: whom
					 * its children and hooks run as, and file tools
					 * act as (lib/fsjob/fsjob.h) */
	bool has_ident;			/* ident is set */
	struct workspace *ws;		/* where its calls work: base, or the group of its MCP roots */
	struct workspace *base;		/* the workspace initialize chose */
	bool trusted;			/* the workspace is a trusted one */
	bool no_memory;			/* initialize said "memory": false: the memory
					 * tool is neither listed nor callable */
	bool has_budget;
	int64_t budget_left;		/* tool-call attempts still allowed */
	struct map *always_allow;	/* tool names allowed for the rest of the session */
	struct list callers;		/* struct caller.session_node: calls in flight */
	unsigned running;		/* executions holding a concurrency slot */
	unsigned waiting;		/* executions waiting for a slot (queued or parked) */
	struct list queue;		/* struct exec.queue_node: waiting for a slot, oldest first */
	struct list ready_node;		/* in its uid's round of sessions that may start a call */
	uint64_t served;		/* when it last got a slot, for the round's order */
	unsigned confirming;		/* confirmation requests pending */
	struct session_table *table;
};

struct session_table {
	struct map *by_id;
	uint64_t counter;
	uint64_t boot;			/* random per daemon start: ids are not guessable across restarts */
	uint32_t id_key[4];		/* hides the count in the ids (id_hide()) */
	int run_as_peer;		/* the run_as its sessions' identities were decided with; -1: none yet */
};

struct session_table *session_table_new(void);
struct session_table *session_table_free(struct session_table *t);
/*
 * Finds uid's session named id, or makes one (id NULL: a fresh id). Ids
 * are uid's own: another uid's session of the same id is another session.
 */
int session_get(struct session_table *t, const char *id, uid_t uid, struct workspace *ws,
		struct session **ret);
/* The identity calls of the session act as, or NULL when unknown. */
static inline const struct identity *session_identity(const struct session *s)
{
	return s->has_ident ? &s->ident : NULL;
}
/* The table's key of uid's session id (owned): ids are per uid. */
char *session_key(uid_t uid, const char *id);
struct session *session_find(struct session_table *t, uid_t uid, const char *id);
/* True when the session may not see the tool called name (the memory
 * tool, in a session that said "memory": false). */
static inline bool session_hides_tool(const struct session *s, const char *name)
{
	return s && s->no_memory && strcmp(name, "memory") == 0;
}
/* Makes ws (referenced) where the session's calls work from now on; NULL:
 * back to the workspace initialize chose. Calls in flight keep theirs. */
void session_set_workspace(struct session *s, struct workspace *ws);
/*
 * Records, once, whom the session acts for: the first connection's peer
 * (same uid; its gid and supplementary groups as the kernel gave them),
 * its children running as it when run_as_peer (identity_for_children()).
 */
void session_set_peer(struct session *s, const struct identity *peer, bool run_as_peer);
/* Decides again whom every session's work is done as when run_as changed
 * (a reload): calls started from then on follow it, calls in flight keep
 * the identity they started with. */
void session_table_set_run_as(struct session_table *t, bool run_as_peer);
struct session *session_ref(struct session *s);
struct session *session_unref(struct session *s);

#endif
