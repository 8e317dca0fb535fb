/* SPDX-License-Identifier: MIT */
/*
 * Compiling a parsed pattern (regex_parse.c) into a Thompson NFA over UTF-8
 * bytes: a character class becomes a small byte automaton accepting
 * exactly the UTF-8 encodings of its code points, so matching works on
 * bytes whatever the process locale, and NUL is a byte like any other.
 * Programs are bounded (REGEX_SIZE_MAX units, repetitions expanded); the
 * sizes in the tree are known, and checked, before anything is expanded.
 * regex_search.c runs the program.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/regex/regex.h"
#include "lib/regex/regex_internal.h"
#include "proto/json.h"
#include "proto/base/util.h"

/* ------------------------------------------------------------------------
 * Compiling: tree to program.
 */


static uint32_t prog_add(struct regex *re, uint32_t op, uint32_t x, uint32_t y)
{
	if (re->n_insns == re->cap_insns) {
		re->cap_insns = re->cap_insns ? re->cap_insns * 2 : 16;
		re->insns = xreallocarray(re->insns, re->cap_insns, sizeof(*re->insns));
	}
	re->insns[re->n_insns] = (struct insn){ op, x, y };
	return re->n_insns++;
}

/* Appends the automaton of a set; its exits go to the next instruction. */
static void emit_frag(struct regex *re, const struct rx_frag *f)
{
	uint32_t base = re->n_insns, exit = base + (uint32_t)f->n_nodes;

	if (re->n_ranges + f->n_edges > re->cap_ranges) {
		re->cap_ranges = MAX(re->cap_ranges * 2, re->n_ranges + f->n_edges);
		re->ranges = xreallocarray(re->ranges, re->cap_ranges, sizeof(*re->ranges));
	}
	for (size_t j = 0; j < f->n_nodes; j++) {
		const struct frag_node *fn = &f->nodes[j];

		prog_add(re, OP_RANGES, re->n_ranges, fn->n);
		for (uint32_t k = 0; k < fn->n; k++) {
			struct frag_edge e = f->edges[fn->first + k];

			e.to = e.to == FRAG_EXIT ? exit : base + e.to;
			re->ranges[re->n_ranges++] = e;
		}
	}
}

/* Points a chain of jumps (linked through x) or splits (through y) at pc. */
static void patch(struct regex *re, uint32_t list, bool via_y, uint32_t pc)
{
	while (list != NONE) {
		uint32_t *slot = via_y ? &re->insns[list].y : &re->insns[list].x;

		list = *slot;
		*slot = pc;
	}
}

/* Appends the program of a node: it goes on at the next instruction. */
static void emit(struct regex *re, const struct rx_node *n)
{
	uint32_t pc, list = NONE;

	switch (n->kind) {
	case RX_EMPTY:
		break;
	case RX_SET:
		emit_frag(re, n->frag);
		break;
	case RX_BEGIN:
	case RX_END:
		pc = re->n_insns;
		prog_add(re, n->kind == RX_BEGIN ? OP_BEGIN : OP_END, pc + 1, 0);
		break;
	case RX_WORDB:
	case RX_NWORDB:
		pc = re->n_insns;
		prog_add(re, n->kind == RX_WORDB ? OP_WORDB : OP_NWORDB, pc + 1, 0);
		re->has_word = true;
		break;
	case RX_CAT:
		for (size_t i = 0; i < n->n_kids; i++)
			emit(re, n->kids[i]);
		break;
	case RX_ALT:
		for (size_t i = 0; i + 1 < n->n_kids; i++) {
			pc = re->n_insns;
			prog_add(re, OP_SPLIT, pc + 1, 0);
			emit(re, n->kids[i]);
			list = prog_add(re, OP_JMP, list, 0);
			re->insns[pc].y = re->n_insns;
		}
		emit(re, n->kids[n->n_kids - 1]);
		patch(re, list, false, re->n_insns);
		break;
	case RX_REPEAT:
		if (n->max == RX_INF && n->min == 0) {
			pc = re->n_insns;
			prog_add(re, OP_SPLIT, pc + 1, 0);
			emit(re, n->kids[0]);
			prog_add(re, OP_JMP, pc, 0);
			re->insns[pc].y = re->n_insns;
		} else if (n->max == RX_INF) {
			for (uint32_t i = 0; i + 1 < n->min; i++)
				emit(re, n->kids[0]);
			pc = re->n_insns;
			emit(re, n->kids[0]);
			prog_add(re, OP_SPLIT, pc, re->n_insns + 1);
		} else {
			for (uint32_t i = 0; i < n->min; i++)
				emit(re, n->kids[0]);
			/* x{0,m} as (x(x(x)?)?)?: every split leaves to the end. */
			for (uint32_t i = n->min; i < n->max; i++) {
				pc = re->n_insns;
				prog_add(re, OP_SPLIT, pc + 1, list);
				list = pc;
				emit(re, n->kids[0]);
			}
			patch(re, list, true, re->n_insns);
		}
		break;
	}
}

/* Numbers the byte classes: bytes no edge tells apart behave alike. */
static void make_classes(struct regex *re)
{
	bool cut[257] = {};
	uint32_t c = 0;

	for (size_t i = 0; i < re->n_ranges; i++) {
		cut[re->ranges[i].lo] = true;
		cut[re->ranges[i].hi + 1] = true;
	}
	/* \b and \B tell word characters from the others. */
	if (re->has_word) {
		static const uint8_t word_cuts[] = { '0', '9' + 1, 'A', 'Z' + 1, '_', '_' + 1, 'a', 'z' + 1 };
		for (size_t i = 0; i < sizeof(word_cuts); i++)
			cut[word_cuts[i]] = true;
	}
	for (unsigned b = 0; b < 256; b++) {
		if (b > 0 && cut[b])
			c++;
		re->byte_class[b] = (uint8_t)c;
	}
	re->n_classes = c + 1;
}

static int compile(const char *pattern, size_t len, bool icase, struct regex **ret, char **ret_err)
{
	struct rx_tree *t = NULL;
	struct regex *re;
	int k;

	k = icase ? rx_parse_icase(pattern, len, &t, ret_err) : rx_parse(pattern, len, &t, ret_err);
	if (k < 0)
		return k;
	re = xcalloc(1, sizeof(*re));
	emit(re, t->root);
	prog_add(re, OP_MATCH, 0, 0);
	rx_tree_free(t);
	make_classes(re);
	re->restart = rx_can_restart(re);
	*ret = re;
	return 0;
}

int regex_compile(const char *pattern, size_t len, struct regex **ret, char **ret_err)
{
	return compile(pattern, len, false, ret, ret_err);
}

int regex_compile_icase(const char *pattern, size_t len, struct regex **ret, char **ret_err)
{
	return compile(pattern, len, true, ret, ret_err);
}

size_t regex_size(const struct regex *re)
{
	return (size_t)re->n_insns + re->n_ranges;
}

struct regex *regex_free(struct regex *re)
{
	if (!re)
		return NULL;
	free(re->insns);
	free(re->ranges);
	free(re);
	return NULL;
}
