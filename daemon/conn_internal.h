/* SPDX-License-Identifier: MIT */
/*
 * Inside the connection layer: what its files (conn.c a connection's life
 * and output, conn_read.c its input, conn_evict.c the memory bounds) use
 * of conn.c beyond conn.h.
 */
#ifndef TC_CONN_INTERNAL_H
#define TC_CONN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "daemon/conn.h"
#include "daemon/peers.h"

/* Empty buffers larger than this are given back. */
#define CONN_SHRINK_ABOVE (16 * 1024)

/* Counts what the connection holds now (its buffers and the answers of
 * its unwritten batches) into the layer's total and its uid's (checked
 * against the bounds before each poll). */
static inline void conn_account(struct conn *c)
{
	size_t now = c->in.cap + c->out.cap + c->held;
	int64_t delta = (int64_t)now - (int64_t)c->memory;
	if (!delta)
		return;
	c->conns->memory += (uint64_t)delta;
	peers_charge(c->conns->peers, c->peer, delta);
	c->memory = now;
}

/* Makes a connection on fd, counted and linked, its output ready; reading
 * is conn_read.c's to start. */
struct conn *conn_alloc(struct conns *cs, int fd, const struct ucred *cred);
/* A request (or, id NULL, a line answered with id null) of c, member
 * index of batch b when b is not NULL. */
struct pending *conn_pending_new(struct conn *c, struct batch *b, size_t index, const char *id, size_t id_len);
/* Keeps id taken on c until batch b is written. */
void conn_batch_hold_id(struct conn *c, struct batch *b, const char *id);
/* Writes a finished batch as one array, straight into the output queue. */
void conn_batch_write(struct conn *c, struct batch *b);
void conn_batch_free(struct conn *c, struct batch *b);

/*
 * What code up the stack holds across a call that may end it: a request
 * handed to the layer above may be answered (and ended) inside, and a
 * connection may be closed inside any callback. Held, it stays in memory
 * (an ended request marked answered, a closed connection dead) until
 * released: a connection is freed by conns_reap once closed and released,
 * a request as it is released after it ended.
 */
static inline void conn_hold(struct conn *c)
{
	c->refs++;
}

static inline void conn_release(struct conn *c)
{
	c->refs--;
}

void pending_hold(struct pending *p);
void pending_release(struct pending *p);

#endif
