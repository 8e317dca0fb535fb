/* SPDX-License-Identifier: MIT */
/*
 * The tool registry: an immutable, refcounted snapshot of the registered
 * tools, sorted by name. A reload builds a whole new registry and swaps it
 * in; calls in flight keep references to the tools they started with.
 */
#ifndef TC_REGISTRY_H
#define TC_REGISTRY_H

#include <stddef.h>

#include "lib/tool.h"

struct registry {
	unsigned refs;
	struct tool **tools;	/* sorted by name once sealed */
	size_t n;
	struct map *by_name;
};

struct registry *registry_new(void);
/* Adds a tool (taking the reference). A duplicate name fails with -EEXIST
 * and a message naming both sources. */
int registry_add(struct registry *r, struct tool *t, char **ret_err);
/* Sorts the tools by name; call once all are added. */
void registry_seal(struct registry *r);
struct tool *registry_find(const struct registry *r, const char *name);
struct registry *registry_ref(struct registry *r);
struct registry *registry_unref(struct registry *r);

/* What changed between two registries, as JSON arrays of names. */
void registry_diff(const struct registry *old, const struct registry *new,
		   char **ret_added, char **ret_removed, char **ret_changed);

#endif
