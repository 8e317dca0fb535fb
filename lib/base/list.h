/* SPDX-License-Identifier: MIT */
/*
 * Intrusive doubly-linked lists (queues of calls, connections, waiters):
 * O(1) removal from anywhere, no allocation.
 */
#ifndef TC_LIST_H
#define TC_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list {
	struct list *prev;
	struct list *next;
};

static inline void list_init(struct list *l) { l->prev = l->next = l; }
static inline bool list_empty(const struct list *l) { return l->next == l; }
/* True when the node is linked into some list (nodes start list_init'ed). */
static inline bool list_linked(const struct list *n) { return n->next != n; }

static inline void list_insert_tail(struct list *head, struct list *n)
{
	n->prev = head->prev;
	n->next = head;
	head->prev->next = n;
	head->prev = n;
}

static inline void list_remove(struct list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

#define list_entry(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define list_first(head, type, member) \
	(list_empty(head) ? NULL : list_entry((head)->next, type, member))

/* Safe against removal of the current node. */
#define list_foreach_safe(pos, tmp, head) \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); (pos) = (tmp), (tmp) = (pos)->next)

#endif
