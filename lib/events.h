/* SPDX-License-Identifier: MIT */
/*
 * The event stream: subscribers with type patterns ("tool.*", "*", exact
 * names), scoped to their peer uid and to one session or all of that uid's
 * sessions. Delivery goes through the subscriber's callback, which may
 * refuse (a slow reader's queue is full): refusals are counted and reported
 * to the subscriber as an "events.dropped" event at the next delivery.
 */
#ifndef TC_EVENTS_H
#define TC_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/base/list.h"

struct jgen;
struct session;

struct subscriber {
	struct list node;
	char **patterns;		/* NULL-terminated; none means "*" */
	uid_t uid;
	char *session_id;		/* "*": every session of uid */
	/* Returns false when the event could not be queued. */
	bool (*deliver)(void *ctx, const char *params, size_t n);
	void *ctx;
	uint64_t dropped;		/* since the last report */
	uint64_t dropped_total;
};

struct event_bus {
	struct list subs;
	uint64_t emitted;
	uint64_t dropped;
};

void event_bus_init(struct event_bus *b);
/* Adds a subscriber (patterns copied). */
struct subscriber *event_subscribe(struct event_bus *b, const char *const *patterns, uid_t uid,
				   const char *session_id,
				   bool (*deliver)(void *ctx, const char *params, size_t n), void *ctx);
void event_unsubscribe(struct subscriber *s);
/* True when some subscriber would receive type for session s. */
bool event_has_subscriber(const struct event_bus *b, const char *type, const struct session *s);
/* True when pattern is a valid type pattern. */
bool event_pattern_valid(const char *pattern);

/*
 * Emits one event. s may be NULL (daemon-wide events go to every
 * subscriber). extra, if not NULL, is called to add members to the event
 * object after the common ones.
 */
void event_emit(struct event_bus *b, const char *type, const struct session *s, const char *call_id,
		const char *tool, void (*extra)(struct jgen *g, void *arg), void *arg);

/* Emits one event to one subscriber only (if it matches). */
void event_emit_to(struct event_bus *b, struct subscriber *sub, const char *type, const struct session *s,
		   const char *call_id, const char *tool, void (*extra)(struct jgen *g, void *arg), void *arg);

#endif
