/* SPDX-License-Identifier: MIT */
/*
 * Registry snapshots and their comparison.
 */
#include "lib/registry.h"

#include <errno.h>
#include <string.h>

#include "lib/base/map.h"
#include "proto/json.h"

struct registry *registry_new(void)
{
	struct registry *r = xcalloc(1, sizeof(*r));
	r->refs = 1;
	r->by_name = map_new();
	return r;
}

int registry_add(struct registry *r, struct tool *t, char **ret_err)
{
	struct tool *prev = map_get(r->by_name, t->name);
	if (prev) {
		if (ret_err)
			*ret_err = xasprintf("duplicate tool name '%s' (declared by %s and %s)",
					     t->name, prev->source, t->source);
		tool_unref(t);
		return -EEXIST;
	}
	r->tools = xreallocarray(r->tools, r->n + 1, sizeof(*r->tools));
	r->tools[r->n++] = t;
	map_put(r->by_name, t->name, t);
	return 0;
}

static int tool_cmp(const void *a, const void *b)
{
	const struct tool *x = *(const struct tool *const *)a;
	const struct tool *y = *(const struct tool *const *)b;
	return strcmp(x->name, y->name);
}

void registry_seal(struct registry *r)
{
	if (r->n)
		qsort(r->tools, r->n, sizeof(*r->tools), tool_cmp);
}

struct tool *registry_find(const struct registry *r, const char *name)
{
	return r ? map_get(r->by_name, name) : NULL;
}

struct registry *registry_ref(struct registry *r)
{
	if (r)
		r->refs++;
	return r;
}

struct registry *registry_unref(struct registry *r)
{
	if (!r || --r->refs > 0)
		return NULL;
	for (size_t i = 0; i < r->n; i++)
		tool_unref(r->tools[i]);
	free(r->tools);
	map_free(r->by_name);
	free(r);
	return NULL;
}

static void name_list_add(struct buf *b, const char *name)
{
	buf_putc(b, buf_size(b) ? ',' : '[');
	json_quote_utf8(b, name, strlen(name));
}

void registry_diff(const struct registry *old, const struct registry *new,
		   char **ret_added, char **ret_removed, char **ret_changed)
{
	struct buf added = {0}, removed = {0}, changed = {0};
	for (size_t i = 0; new && i < new->n; i++) {
		struct tool *t = new->tools[i];
		struct tool *o = registry_find(old, t->name);
		if (!o)
			name_list_add(&added, t->name);
		else if (!str_eq(o->fingerprint, t->fingerprint))
			name_list_add(&changed, t->name);
	}
	for (size_t i = 0; old && i < old->n; i++)
		if (!registry_find(new, old->tools[i]->name))
			name_list_add(&removed, old->tools[i]->name);
	struct buf *all[] = { &added, &removed, &changed };
	for (size_t i = 0; i < ELEMENTSOF(all); i++) {
		if (buf_size(all[i]) == 0)
			buf_putc(all[i], '[');
		buf_putc(all[i], ']');
	}
	*ret_added = buf_steal(&added);
	*ret_removed = buf_steal(&removed);
	*ret_changed = buf_steal(&changed);
}
