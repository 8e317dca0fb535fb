/* SPDX-License-Identifier: MIT */
/*
 * The uid table: what each peer uid holds in the daemon, in one place. A
 * uid's entry counts its connections and the bytes they hold (input and
 * output buffers, answers of batches not yet written) and lists those
 * connections, so that a bound per uid (limits.per_uid_connections,
 * limits.per_uid_memory) refuses or disconnects within the uid that went
 * over it, never another's. Requests waiting for confirmation are charged
 * to their uid too. An entry lives while the uid has a connection or holds
 * bytes.
 */
#ifndef TC_PEERS_H
#define TC_PEERS_H

#include <stdint.h>
#include <sys/types.h>

#include "lib/base/list.h"

struct map;

struct peer {
	uid_t uid;
	unsigned conns;
	uint64_t memory;		/* bytes its connections and open confirmations hold */
	struct list members;		/* its connections (their peer_node) */
	struct list over_node;		/* peers->over while memory > the per-uid bound */
};

struct peers {
	struct map *by_uid;		/* decimal uid -> struct peer */
	uint64_t memory;		/* bytes held for all uids */
	uint64_t memory_limit;		/* per uid (0: none) */
	struct list over;		/* peers holding more than memory_limit */
};

void peers_init(struct peers *t);
void peers_done(struct peers *t);
/* The uid's entry, or NULL when it has no connection. */
struct peer *peers_find(const struct peers *t, uid_t uid);
/* Counts one more connection of uid (its entry made on first use). */
struct peer *peers_join(struct peers *t, uid_t uid);
/* Counts one connection less (it holds nothing any more); the entry goes
 * with the uid's last connection, unless it still holds bytes. */
void peers_leave(struct peers *t, struct peer *p);
/* Adds delta bytes (negative: released) to what p holds. */
void peers_charge(struct peers *t, struct peer *p, int64_t delta);
/* Charges delta bytes held outside any connection (the input of a call
 * waiting for confirmation) to uid, whose entry lives while they are
 * held. A charge that would take the uid over the per-uid bound is refused
 * (-ENOBUFS) and counts nothing. Arg is the table (lib/dispatch/confirm.h's
 * confirm_charge_fn). */
int peers_charge_uid(void *arg, uid_t uid, int64_t delta);
/* Sets the per-uid bound on bytes held (0: none) and sorts the entries
 * over it again. */
void peers_set_limit(struct peers *t, uint64_t limit);
/* The uid holding the most bytes, or NULL when none holds any. */
struct peer *peers_heaviest(const struct peers *t);

#endif
