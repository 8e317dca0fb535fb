/* SPDX-License-Identifier: MIT */
/*
 * The JSON arena: every node of one parsed text lives in chunks owned by a
 * refcounted json_doc, so freeing a document is a walk over its chunks,
 * never a recursion over its tree. Both parsers (json_parse.c and
 * json_fast.c) allocate through it.
 */
#include "proto/json_arena.h"

#include <string.h>

#define CHUNK_SMALL ((size_t)4096 - sizeof(struct chunk))

/* One spare first-size chunk: most documents (a request, a small answer)
 * fit in one, so parsing one after another allocates nothing. The daemon
 * is single-threaded; the cache is per thread all the same. */
static __thread struct chunk *spare_chunk;

struct chunk *json_arena_grow(struct json_doc *doc, size_t n)
{
	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	struct chunk *c = doc->chunks;
	size_t cap = MAX(n, CHUNK_SMALL);
	if (c && c->cap * 2 > cap && c->cap < 1u << 20)
		cap = MAX(cap, c->cap * 2);
	if (cap == CHUNK_SMALL && spare_chunk)
		c = TAKE_PTR(spare_chunk);
	else
		c = xmalloc(sizeof(struct chunk) + cap);
	c->next = doc->chunks;
	c->used = 0;
	c->cap = cap;
	doc->chunks = c;
	return c;
}

/* Frees one chunk, or keeps it as the spare. */
static void chunk_release(struct chunk *c)
{
	if (c->cap == CHUNK_SMALL && !spare_chunk)
		spare_chunk = c;
	else
		free(c);
}

void json_arena_rewind(struct json_doc *doc, struct chunk *mark, size_t used)
{
	while (doc->chunks != mark) {
		struct chunk *c = doc->chunks;
		doc->chunks = c->next;
		chunk_release(c);
	}
	mark->used = used;
}

struct json_doc *json_doc_new(const char *text, size_t len)
{
	/* The document, its copy of the text and its nodes share the arena:
	 * a small message costs one (usually cached) chunk in all. */
	struct json_doc tmp = {0};
	struct json_doc *doc = json_arena_alloc(&tmp, sizeof(struct json_doc));
	/* Field by field: copying tmp whole right after arena_alloc wrote
	 * into it stalls on store forwarding, a measurable part of a small
	 * parse. */
	doc->refs = 1;
	doc->chunks = tmp.chunks;
	doc->root = NULL;
	doc->text = json_arena_strndup(doc, text, len);
	doc->text_len = len;
	return doc;
}

struct json *json_doc_root(const struct json_doc *doc)
{
	return doc ? doc->root : NULL;
}

const char *json_doc_text(const struct json_doc *doc)
{
	return doc ? doc->text : NULL;
}

struct json_doc *json_doc_ref(struct json_doc *doc)
{
	if (doc)
		doc->refs++;
	return doc;
}

struct json_doc *json_doc_unref(struct json_doc *doc)
{
	if (!doc || --doc->refs > 0)
		return NULL;
	/* The document itself lives in its oldest chunk, the last freed. */
	struct chunk *c = doc->chunks;
	while (c) {
		struct chunk *next = c->next;
		chunk_release(c);
		c = next;
	}
	return NULL;
}
