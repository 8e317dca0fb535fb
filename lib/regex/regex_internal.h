/* SPDX-License-Identifier: MIT */
/*
 * The insides of lib/regex*.c, shared by regex_parse.c, regex_utf8set.c, regex_compile.c
 * and regex_search.c, and looked at by the tests and fuzz harness: the
 * parsed form of a pattern (a tree over code points, before it becomes a
 * program over UTF-8 bytes) and searches with each strategy, so that an
 * independent matcher can check the program against the tree and every
 * strategy against the others.
 */
#ifndef TC_REGEX_INTERNAL_H
#define TC_REGEX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/regex/regex.h"

#define RX_INF UINT32_MAX	/* no upper bound of a repetition */

enum rx_kind {
	RX_EMPTY,	/* the empty string */
	RX_SET,		/* one code point of a set */
	RX_CAT,		/* kids in sequence */
	RX_ALT,		/* one of the kids */
	RX_REPEAT,	/* kids[0], min to max times */
	RX_BEGIN,	/* ^: the start of the subject */
	RX_END,		/* $: its end */
	RX_WORDB,	/* \b: between a word character ([A-Za-z0-9_]) and another */
	RX_NWORDB,	/* \B: anywhere else */
};

struct rx_range {
	uint32_t lo, hi;
};

struct rx_frag;

struct rx_node {
	enum rx_kind kind;
	size_t size;			/* program units it compiles to */
	struct rx_node **kids;		/* CAT, ALT: two or more; REPEAT: one */
	size_t n_kids;
	uint32_t min, max;		/* REPEAT */
	struct rx_range *set;		/* SET: sorted, disjoint, not adjacent */
	size_t n_set;
	struct rx_frag *frag;		/* SET: its UTF-8 byte automaton */
};

struct rx_tree {
	struct rx_node *root;
	struct rx_node **all;		/* every node made, to free them */
	size_t n_all, cap_all;
};

/* Parses a pattern; on failure *ret_err is "message (at offset N)". */
int rx_parse(const char *pattern, size_t len, struct rx_tree **ret, char **ret_err);
/* The same, every set of code points closed under simple case folding
 * (a class negated after its closure), as the "i" flag asks. */
int rx_parse_icase(const char *pattern, size_t len, struct rx_tree **ret, char **ret_err);

/* Simple case folding (regex_fold.c): {code point, what it folds to},
 * sorted by code point. */
extern const uint32_t rx_fold_table[][2];
extern const size_t rx_fold_count;
/* Accepts NULL; returns NULL. */
struct rx_tree *rx_tree_free(struct rx_tree *t);

enum rx_mode {
	RX_MODE_DFA,		/* state sets cached as DFA states: regex_search() */
	RX_MODE_NFA,		/* state sets only, nothing cached */
	RX_MODE_DFA_TINY,	/* cached, in a cache flushed at every new state */
};

/* regex_search() with a chosen strategy: all of them give the same answer,
 * each within the same step bound. */
int rx_search(const struct regex *re, const char *s, size_t len, uint64_t *budget, enum rx_mode mode);

/* The program: compiled by regex_compile.c, run by regex_search.c. */
#define NONE UINT32_MAX
#define CP_MAX 0x10FFFFu
#define FRAG_EXIT NONE

struct frag_edge {
	uint8_t lo, hi;
	uint32_t to;		/* node index, or FRAG_EXIT; in a program: pc */
};

struct frag_node {
	uint32_t first, n;	/* its edges */
};

struct rx_frag {
	struct frag_node *nodes;
	size_t n_nodes, cap_nodes;
	struct frag_edge *edges;
	size_t n_edges, cap_edges;
	uint32_t full[4];	/* node reading any k continuation bytes; 0: none yet */
};

/* Builds the UTF-8 byte automaton of a normalized code point set
 * (regex_utf8set.c). */
struct rx_frag *rx_frag_build(const struct rx_range *r, size_t n);
/* Accepts NULL. */
void rx_frag_free(struct rx_frag *f);

enum op {
	OP_RANGES,	/* reads a byte: edges ranges[x .. x + y) say where to */
	OP_SPLIT,	/* goes on at x and at y */
	OP_JMP,		/* goes on at x */
	OP_BEGIN,	/* goes on at x at the start of the subject */
	OP_END,		/* goes on at x at its end */
	OP_WORDB,	/* goes on at x at a word boundary */
	OP_NWORDB,	/* goes on at x elsewhere */
	OP_MATCH,
};

struct insn {
	uint32_t op, x, y;
};

struct regex {
	struct insn *insns;
	uint32_t n_insns;
	struct frag_edge *ranges;	/* .to: a pc */
	uint32_t n_ranges;
	uint8_t byte_class[256];	/* bytes no instruction tells apart share a class */
	uint32_t n_classes;
	bool restart;			/* a match may start after the first byte */
	bool has_word;			/* holds \b or \B: the byte after a position
					 * is looked at too */
	size_t cap_insns, cap_ranges;
};

/* Whether c is a word character of \b and \B. */
static inline bool rx_is_word(uint32_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Whether a match can start past the first byte: is anything reachable
 * from the start without "^"? */
bool rx_can_restart(const struct regex *re);

#endif
