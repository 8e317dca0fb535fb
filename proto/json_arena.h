/* SPDX-License-Identifier: MIT */
/*
 * The document of a parsed JSON text and the arena its nodes live in
 * (json_arena.c): every node, key and string of one document comes from
 * one list of chunks, freed at once when the last reference goes. Inside
 * the JSON module only; see proto/json_internal.h.
 */
#ifndef TC_JSON_ARENA_H
#define TC_JSON_ARENA_H

#include <stddef.h>
#include <string.h>

#include "proto/json.h"

struct chunk {
	struct chunk *next;
	size_t used;
	size_t cap;
	max_align_t data[];
};

struct json_doc {
	unsigned refs;
	struct chunk *chunks;	/* newest first; the doc lives in the last */
	struct json *root;
	char *text;		/* a copy of the source, NUL-terminated */
	size_t text_len;
};

/* Makes room for n (rounded) bytes in a new chunk at the head of the
 * arena and returns that chunk. */
struct chunk *json_arena_grow(struct json_doc *doc, size_t n);
/* Frees the chunks added after mark and sets mark's fill back to used:
 * the arena is as it was when mark and used were taken. */
void json_arena_rewind(struct json_doc *doc, struct chunk *mark, size_t used);

/* Allocates n bytes from the document's arena. */
static inline void *json_arena_alloc(struct json_doc *doc, size_t n)
{
	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	struct chunk *c = doc->chunks;
	if (__builtin_expect(!c || c->cap - c->used < n, 0))
		c = json_arena_grow(doc, n);
	void *p = (char *)c->data + c->used;
	c->used += n;
	return p;
}

static inline char *json_arena_strndup(struct json_doc *doc, const void *s, size_t n)
{
	char *p = json_arena_alloc(doc, n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* A new document (one reference) holding a copy of text, and no root. */
struct json_doc *json_doc_new(const char *text, size_t len);

#endif
