/* SPDX-License-Identifier: MIT */
/*
 * The UTF-8 byte automaton of a code point set: what a character class of a
 * pattern becomes. The parser (regex_parse.c) builds one per set to know its
 * size before anything is expanded; the compiler (regex_compile.c) copies it
 * into the program.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/regex/regex_internal.h"
#include "proto/base/util.h"
/* ------------------------------------------------------------------------
 * The UTF-8 byte automaton of a code point set.
 *
 * Node 0 reads the first byte: ASCII bytes of the set lead out, lead bytes
 * lead to a node for the next byte. A node reading a continuation byte
 * splits its block of code points into 64 sub-blocks: those wholly in the
 * set share one node accepting any continuation bytes, those partly in it
 * get a node of their own. Only well-formed encodings are accepted
 * (no overlong forms, nothing above U+10FFFF); surrogates are not excluded,
 * as valid UTF-8 never holds them. Edges of a node are sorted and disjoint.
 */


/* Builds the automaton of one set. Blocks of code points are visited in
 * increasing order, so a cursor into the set's ranges only moves on. */
struct frag_builder {
	struct rx_frag *f;
	const struct rx_range *r;
	size_t n, cur;
	uint32_t rlo, rhi;	/* code points encoded with as many bytes as now */
};

enum { COVER_NONE, COVER_SOME, COVER_ALL };

/* How much of lo..hi the set holds (counting only rlo..rhi: a block that
 * reaches outside is never all in). lo never goes down between calls. */
static int cover(struct frag_builder *b, uint32_t lo, uint32_t hi)
{
	uint32_t l = MAX(lo, b->rlo), h = MIN(hi, b->rhi);

	if (l > h)
		return COVER_NONE;
	while (b->cur < b->n && b->r[b->cur].hi < l)
		b->cur++;
	if (b->cur == b->n || b->r[b->cur].lo > h)
		return COVER_NONE;
	if (b->r[b->cur].lo <= lo && b->r[b->cur].hi >= hi && l == lo && h == hi)
		return COVER_ALL;
	return COVER_SOME;
}

/* Gives node i these edges. */
static void frag_edges(struct rx_frag *f, uint32_t i, const struct frag_edge *e, size_t n)
{
	if (f->n_edges + n > f->cap_edges) {
		f->cap_edges = MAX(f->cap_edges * 2, f->n_edges + n);
		f->edges = xreallocarray(f->edges, f->cap_edges, sizeof(*f->edges));
	}
	if (n > 0)
		memcpy(f->edges + f->n_edges, e, n * sizeof(*e));
	f->nodes[i] = (struct frag_node){ (uint32_t)f->n_edges, (uint32_t)n };
	f->n_edges += n;
}

/* Appends a node with these edges; returns its index. */
static uint32_t frag_add(struct rx_frag *f, const struct frag_edge *e, size_t n)
{
	if (f->n_nodes == f->cap_nodes) {
		f->cap_nodes = f->cap_nodes ? f->cap_nodes * 2 : 4;
		f->nodes = xreallocarray(f->nodes, f->cap_nodes, sizeof(*f->nodes));
	}
	frag_edges(f, (uint32_t)f->n_nodes, e, n);
	return (uint32_t)f->n_nodes++;
}

/* The node reading any k continuation bytes (FRAG_EXIT for none). */
static uint32_t frag_full(struct rx_frag *f, unsigned k)
{
	struct frag_edge e;

	if (k == 0)
		return FRAG_EXIT;
	if (f->full[k] == 0) {
		e = (struct frag_edge){ 0x80, 0xBF, frag_full(f, k - 1) };
		f->full[k] = frag_add(f, &e, 1);
	}
	return f->full[k];
}

/* Adds an edge for byte b, merged with the previous one when contiguous
 * and going to the same node. */
static void edge_put(struct frag_edge *e, size_t *n, unsigned b, uint32_t to)
{
	if (*n > 0 && e[*n - 1].hi + 1u == b && e[*n - 1].to == to)
		e[*n - 1].hi = (uint8_t)b;
	else
		e[(*n)++] = (struct frag_edge){ (uint8_t)b, (uint8_t)b, to };
}

/* The node reading the next continuation byte for the code points of the
 * set in base .. base + 64^conts - 1. */
static uint32_t frag_cont(struct frag_builder *b, uint32_t base, unsigned conts)
{
	uint32_t sub = 1u << (6 * (conts - 1));
	struct frag_edge e[64];
	size_t k = 0;

	for (unsigned v = 0; v < 64; v++) {
		uint32_t lo = base + v * sub;
		int c = cover(b, lo, lo + sub - 1);

		if (c == COVER_NONE)
			continue;
		/* With conts == 1 a sub-block is one code point: in or out. */
		edge_put(e, &k, 0x80 + v, c == COVER_ALL ? frag_full(b->f, conts - 1) : frag_cont(b, lo, conts - 1));
	}
	return frag_add(b->f, e, k);
}

/* Builds the automaton of a normalized set. */
struct rx_frag *rx_frag_build(const struct rx_range *r, size_t n)
{
	static const struct {
		uint8_t first, last;	/* lead bytes */
		uint8_t mask;		/* their payload bits */
		unsigned conts;		/* continuation bytes after them */
		uint32_t lo, hi;	/* code points encoded so */
	} leads[] = {
		{ 0xC2, 0xDF, 0x1F, 1, 0x80, 0x7FF },
		{ 0xE0, 0xEF, 0x0F, 2, 0x800, 0xFFFF },
		{ 0xF0, 0xF4, 0x07, 3, 0x10000, CP_MAX },
	};
	struct frag_builder b = { .f = xcalloc(1, sizeof(*b.f)), .r = r, .n = n };
	struct frag_edge e[128];
	size_t k = 0;

	/* Node 0 is the entry: reserve it, give it its edges last. */
	frag_add(b.f, NULL, 0);
	for (size_t i = 0; i < n && r[i].lo < 0x80; i++)
		e[k++] = (struct frag_edge){ (uint8_t)r[i].lo, (uint8_t)MIN(r[i].hi, 0x7Fu), FRAG_EXIT };
	for (size_t l = 0; l < ELEMENTSOF(leads); l++) {
		b.rlo = leads[l].lo;
		b.rhi = leads[l].hi;
		for (unsigned lead = leads[l].first; lead <= leads[l].last; lead++) {
			uint32_t base = (lead & leads[l].mask) << (6 * leads[l].conts);
			int c = cover(&b, base, base + (1u << (6 * leads[l].conts)) - 1);

			if (c == COVER_NONE)
				continue;
			edge_put(e, &k, lead,
				 c == COVER_ALL ? frag_full(b.f, leads[l].conts) : frag_cont(&b, base, leads[l].conts));
		}
	}
	frag_edges(b.f, 0, e, k);
	return b.f;
}

void rx_frag_free(struct rx_frag *f)
{
	if (!f)
		return;
	free(f->nodes);
	free(f->edges);
	free(f);
}
