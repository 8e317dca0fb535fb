/* SPDX-License-Identifier: MIT */
/*
 * The memory bounds across clients: what connections hold (buffers, and
 * answers of batches not yet written) is counted per uid and in all; a
 * uid over limits.per_uid_memory loses its largest connection, and while
 * all clients together hold more than limits.max_client_memory, the uid
 * holding the most loses its largest, so that no uid is disconnected for
 * what another holds. Checked before each poll.
 */
#include "daemon/conn.h"

#include "daemon/log.h"
#include "daemon/peers.h"
#include "proto/base/util.h"

/* The connection of uid p holding the most, or NULL when none holds anything. */
static struct conn *largest_of(struct peer *p)
{
	struct conn *big = NULL;
	struct list *pos;
	for (pos = p->members.next; pos != &p->members; pos = pos->next) {
		struct conn *c = list_entry(pos, struct conn, peer_node);
		if (!big || c->memory > big->memory)
			big = c;
	}
	return big && big->memory ? big : NULL;
}

/* Disconnects c, telling it which bound (key) it went over. */
static void evict(struct conns *cs, struct conn *c, const char *key, const char *why, uint64_t held,
		  uint64_t limit)
{
	log_warning("%s hold %llu bytes, more than %s (%llu): disconnecting the one holding the most "
		    "(uid %u, %zu bytes, pid %d)", why, (unsigned long long)held, key,
		    (unsigned long long)limit, (unsigned)c->cred.uid, c->memory, (int)c->cred.pid);
	/* What it had queued is dropped; it is told why. */
	buf_clear(&c->out);
	_cleanup_free_ char *msg = xasprintf("Connection closed: %s hold more than %s allows, and this "
					     "connection held the most of them", why, key);
	jrpc_write_error(&c->out, NULL, 0, JRPC_INVALID_REQUEST, msg, NULL, 0);
	buf_putc(&c->out, '\n');
	cs->evicted++;
	conn_close(c);
}

void conns_evict(struct conns *cs)
{
	/* At least what two connections may hold each, so that one client
	 * within the per-connection limits is never evicted alone. */
	const struct conn_limits *lim = &cs->limits;
	uint64_t floor = 2 * (2 * lim->max_message_bytes + 2 * lim->max_output_bytes);
	uint64_t per_uid = MAX(lim->per_uid_memory, floor);
	struct peers *peers = cs->peers;
	if (peers->memory_limit != per_uid)
		peers_set_limit(peers, per_uid);
	/* Each uid within its own bound: the victim is one of its own. */
	while (!list_empty(&peers->over)) {
		struct peer *p = list_first(&peers->over, struct peer, over_node);
		struct conn *big = largest_of(p);
		if (!big) {
			list_remove(&p->over_node);
			continue;
		}
		_cleanup_free_ char *why = xasprintf("the connections of uid %u", (unsigned)p->uid);
		evict(cs, big, "limits.per_uid_memory", why, p->memory, per_uid);
	}
	/* All clients within theirs: the victim is of the uid holding the
	 * most, so that no uid is disconnected for what another holds. */
	uint64_t limit = MAX(lim->max_client_memory, floor);
	while (cs->memory > limit) {
		struct peer *p = peers_heaviest(peers);
		struct conn *big = p ? largest_of(p) : NULL;
		if (!big)
			break;
		evict(cs, big, "limits.max_client_memory", "all clients together", cs->memory, limit);
	}
}
