/* SPDX-License-Identifier: MIT */
/*
 * Searching a compiled program (regex_compile.c) in time linear in the
 * subject. Subjects are meant to be valid UTF-8 (JSON strings are); on
 * other bytes the search is still safe and bounded.
 *
 *
 * Cost. Nothing backtracks: the search keeps the set of NFA threads alive
 * after each byte of the subject, entering each instruction at most once
 * per byte. The set after a byte costs 1 + T + I steps (T threads looked
 * at, I instructions entered), at most 1 + 2 * instructions. Sets are
 * cached as DFA states: a byte whose transition is known costs one step, a
 * new state one more per 16 byte classes (of which there are at most
 * 2 * ranges + 1). A search of len bytes thus costs at most
 * (len + 2) * (2 * regex_size() + 1) steps (a closure more at the start
 * and at the end), each a small constant amount of work. The cache belongs
 * to the search and is bounded in memory (emptied when full): the steps
 * depend only on the pattern and the subject. Programs are bounded at
 * compile time (REGEX_SIZE_MAX units, repetitions expanded), and so is
 * compiling: the sizes in the tree are known, and checked, before
 * anything is expanded.
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


/* Memory of the DFA states one search may cache; when full, it is emptied. */
#define DFA_CACHE_MAX (256u * 1024)

/* ------------------------------------------------------------------------
 * Searching.
 */

struct run {
	const struct regex *re;
	uint32_t *mark;		/* per instruction: the generation that entered it */
	uint32_t gen;
	uint32_t *stack;
	uint64_t steps;
	bool matched;
	/* \b and \B: whether the characters before and after the position
	 * are word characters; word_any lets both pass (rx_can_restart). */
	bool prev_word, next_word, word_any;
};

/* Starts a new set of instructions entered. */
static void new_gen(struct run *r)
{
	if (++r->gen == 0) {
		memset(r->mark, 0, r->re->n_insns * sizeof(*r->mark));
		r->gen = 1;
	}
}

/*
 * Enters pc and everything reachable from it without reading a byte,
 * appending the threads (instructions that wait for a byte, or for the end)
 * to out. Each instruction is entered once per generation: one step.
 * at_end: the subject is over, "$" holds and nothing waits.
 */
static void closure(struct run *r, uint32_t pc, bool at_begin, bool at_end, uint32_t *out, size_t *n_out)
{
	const struct insn *insns = r->re->insns;
	uint32_t *stack = r->stack;
	size_t sp = 0;

#define ENTER(t)                                   \
	do {                                       \
		uint32_t t_ = (t);                 \
		if (r->mark[t_] != r->gen) {       \
			r->mark[t_] = r->gen;      \
			r->steps++;                \
			stack[sp++] = t_;          \
		}                                  \
	} while (0)

	ENTER(pc);
	while (sp > 0) {
		const struct insn *in = &insns[stack[--sp]];

		switch (in->op) {
		case OP_RANGES:
			if (!at_end)
				out[(*n_out)++] = (uint32_t)(in - insns);
			break;
		case OP_END:
			if (at_end)
				ENTER(in->x);
			else
				out[(*n_out)++] = (uint32_t)(in - insns);
			break;
		case OP_BEGIN:
			if (at_begin)
				ENTER(in->x);
			break;
		case OP_WORDB:
			if (r->word_any || r->prev_word != r->next_word)
				ENTER(in->x);
			break;
		case OP_NWORDB:
			if (r->word_any || r->prev_word == r->next_word)
				ENTER(in->x);
			break;
		case OP_JMP:
			ENTER(in->x);
			break;
		case OP_SPLIT:
			ENTER(in->y);
			ENTER(in->x);
			break;
		case OP_MATCH:
			r->matched = true;
			return;
		}
	}
#undef ENTER
}

/* The threads at the start of the subject. */
static void start(struct run *r, uint32_t *out, size_t *n_out)
{
	new_gen(r);
	*n_out = 0;
	closure(r, 0, true, false, out, n_out);
}

/* Where thread in goes on reading byte b, or NONE. */
static uint32_t edge_to(const struct regex *re, const struct insn *in, uint8_t b)
{
	const struct frag_edge *e;
	size_t a = 0, z;

	/* An empty class ([]) has no edges, and the program then perhaps
	 * no edge array at all. */
	if (in->op != OP_RANGES || in->y == 0)
		return NONE;
	e = re->ranges + in->x;
	z = in->y;
	/* The edges are sorted and disjoint. */
	while (a < z) {
		size_t m = a + (z - a) / 2;

		if (e[m].hi < b)
			a = m + 1;
		else
			z = m;
	}
	return a < in->y && e[a].lo <= b ? e[a].to : NONE;
}

/* The threads after reading byte b with threads from. */
static void step(struct run *r, const uint32_t *from, size_t n_from, uint8_t b, uint32_t *out, size_t *n_out)
{
	const struct regex *re = r->re;

	new_gen(r);
	*n_out = 0;
	r->steps += 1 + n_from;
	for (size_t i = 0; i < n_from; i++) {
		uint32_t to = edge_to(re, &re->insns[from[i]], b);

		if (to != NONE) {
			closure(r, to, false, false, out, n_out);
			if (r->matched)
				return;
		}
	}
	/* An unanchored search: a match may also start here. */
	if (re->restart)
		closure(r, 0, false, false, out, n_out);
}

/* Whether threads waiting at the end of the subject lead to a match. */
static void finish(struct run *r, const uint32_t *from, size_t n_from, bool at_begin)
{
	new_gen(r);
	r->steps += n_from;
	for (size_t i = 0; i < n_from && !r->matched; i++)
		if (r->re->insns[from[i]].op == OP_END)
			closure(r, r->re->insns[from[i]].x, at_begin, true, NULL, NULL);
}

/* Searches by state sets alone; a and b have room for a set of threads. */
static int search_nfa(struct run *r, const uint8_t *s, size_t len, uint64_t budget, uint32_t *a, uint32_t *b)
{
	size_t na, nb;

	r->prev_word = false;
	r->next_word = len > 0 && rx_is_word(s[0]);
	start(r, a, &na);
	for (size_t i = 0; i < len; i++) {
		uint32_t *t;

		if (r->matched)
			return 1;
		if (r->steps > budget)
			return -E2BIG;
		if (na == 0 && !r->re->restart)
			return 0;	/* anchored, and nothing alive */
		r->prev_word = rx_is_word(s[i]);
		r->next_word = i + 1 < len && rx_is_word(s[i + 1]);
		step(r, a, na, s[i], b, &nb);
		t = a;
		a = b;
		b = t;
		na = nb;
	}
	if (!r->matched) {
		r->prev_word = len > 0 && rx_is_word(s[len - 1]);
		r->next_word = false;
		finish(r, a, na, len == 0);
	}
	if (r->matched)
		return 1;
	return r->steps > budget ? -E2BIG : 0;
}

/* A cached set of threads, its transitions in next[]. */
struct dstate {
	uint32_t at, n;		/* its threads: pcs[at .. at + n) */
	uint32_t slot;		/* in the table */
	uint32_t hash;
};

/* Room for the first states of a search: short searches do not allocate. */
#define DFA_LOCAL_STATES 64
#define DFA_LOCAL_PCS 512
#define DFA_LOCAL_NEXT 1024

struct dfa {
	uint32_t n_classes;
	uint32_t *pcs;
	size_t n_pcs, cap_pcs;
	int32_t *next;		/* per state and byte class: a state, or -1 */
	size_t cap_next;
	struct dstate *st;
	size_t n_st, cap_st;
	int32_t *table;		/* open addressing over st; -1: free */
	size_t cap_table;	/* a power of two */
	size_t bytes, max_bytes;
	uint32_t added;		/* steps the last new state cost beyond its set */
	uint32_t pcs_local[DFA_LOCAL_PCS];
	int32_t next_local[DFA_LOCAL_NEXT];
	struct dstate st_local[DFA_LOCAL_STATES];
	int32_t table_local[2 * DFA_LOCAL_STATES];
};

/* Makes room for need elements in an array that may start in local storage. */
static void *grow(void *p, const void *local, size_t *cap, size_t need, size_t size)
{
	size_t c = MAX(*cap * 2, need);
	void *q;

	if (need <= *cap)
		return p;
	if (p == local) {
		q = xreallocarray(NULL, c, size);
		memcpy(q, p, *cap * size);
	} else
		q = xreallocarray(p, c, size);
	*cap = c;
	return q;
}

static uint32_t set_hash(const uint32_t *pcs, size_t n)
{
	uint64_t h = n;

	for (size_t i = 0; i < n; i++)
		h = (h ^ pcs[i]) * 0x9E3779B97F4A7C15ull;
	return (uint32_t)(h ^ (h >> 32));
}

/* Places state i in the table. */
static void dfa_place(struct dfa *d, uint32_t i)
{
	size_t mask = d->cap_table - 1, slot = d->st[i].hash & mask;

	while (d->table[slot] >= 0)
		slot = (slot + 1) & mask;
	d->table[slot] = (int32_t)i;
	d->st[i].slot = (uint32_t)slot;
}

/* Forgets every state (the cache is full). */
static void dfa_flush(struct dfa *d)
{
	for (size_t i = 0; i < d->n_st; i++)
		d->table[d->st[i].slot] = -1;
	d->n_st = 0;
	d->n_pcs = 0;
	d->bytes = 0;
}

/* The state of a set of threads, added if new; *ret_flushed when the
 * cache had to be emptied for it (other state numbers are then void). */
static int32_t dfa_state(struct dfa *d, const uint32_t *pcs, size_t n, bool *ret_flushed)
{
	uint32_t hash = set_hash(pcs, n);
	size_t mask = d->cap_table - 1, need;

	*ret_flushed = false;
	d->added = 0;
	for (size_t slot = hash & mask; d->table[slot] >= 0; slot = (slot + 1) & mask) {
		const struct dstate *st = &d->st[d->table[slot]];

		if (st->hash == hash && st->n == n && memcmp(d->pcs + st->at, pcs, n * sizeof(*pcs)) == 0)
			return d->table[slot];
	}
	need = n * sizeof(*pcs) + d->n_classes * sizeof(*d->next) + sizeof(struct dstate) + 2 * sizeof(*d->table);
	if (d->n_st > 0 && d->bytes + need > d->max_bytes) {
		dfa_flush(d);
		*ret_flushed = true;
	}
	if (2 * (d->n_st + 1) > d->cap_table) {
		d->cap_table *= 2;
		if (d->table == d->table_local)
			d->table = xreallocarray(NULL, d->cap_table, sizeof(*d->table));
		else
			d->table = xreallocarray(d->table, d->cap_table, sizeof(*d->table));
		memset(d->table, 0xff, d->cap_table * sizeof(*d->table));
		for (size_t i = 0; i < d->n_st; i++)
			dfa_place(d, (uint32_t)i);
	}
	d->st = grow(d->st, d->st_local, &d->cap_st, d->n_st + 1, sizeof(*d->st));
	d->pcs = grow(d->pcs, d->pcs_local, &d->cap_pcs, d->n_pcs + n, sizeof(*d->pcs));
	d->next = grow(d->next, d->next_local, &d->cap_next, (d->n_st + 1) * d->n_classes, sizeof(*d->next));
	memcpy(d->pcs + d->n_pcs, pcs, n * sizeof(*pcs));
	memset(d->next + d->n_st * d->n_classes, 0xff, d->n_classes * sizeof(*d->next));
	d->st[d->n_st] = (struct dstate){ .at = (uint32_t)d->n_pcs, .n = (uint32_t)n, .hash = hash };
	dfa_place(d, (uint32_t)d->n_st);
	d->n_pcs += n;
	d->bytes += need;
	/* Clearing its transitions costs a step per 16 classes. There are at
	 * most 2 * ranges + 1 classes: still within the bound. */
	d->added = d->n_classes / 16;
	return (int32_t)d->n_st++;
}

/* Searches with the sets cached as DFA states: one step per byte while
 * the transitions are known. set has room for a set of threads. */
static int search_dfa(struct run *r, const uint8_t *s, size_t len, uint64_t budget, uint32_t *set,
		      size_t max_bytes)
{
	const struct regex *re = r->re;
	struct dfa d;
	const struct dstate *st;
	size_t n, i = 0;
	int32_t cur, to;
	bool flushed;
	int k = 0;

	/* With \b or \B, a transition depends on the byte read and on
	 * whether the next one is a word character: twice the classes. */
	d.n_classes = re->n_classes * (re->has_word ? 2 : 1);
	d.pcs = d.pcs_local;
	d.n_pcs = 0;
	d.cap_pcs = DFA_LOCAL_PCS;
	d.next = d.next_local;
	d.cap_next = DFA_LOCAL_NEXT;
	d.st = d.st_local;
	d.n_st = 0;
	d.cap_st = DFA_LOCAL_STATES;
	d.table = d.table_local;
	d.cap_table = 2 * DFA_LOCAL_STATES;
	memset(d.table, 0xff, sizeof(d.table_local));
	d.bytes = 0;
	d.max_bytes = max_bytes;
	d.added = 0;

	r->prev_word = false;
	r->next_word = len > 0 && rx_is_word(s[0]);
	start(r, set, &n);
	/* Nothing alive ends an anchored search; an unanchored one (where
	 * \b or \B failed) may start again later. */
	if (r->matched || (n == 0 && !re->restart) || r->steps > budget) {
		k = r->matched ? 1 : r->steps > budget ? -E2BIG : 0;
		goto out;
	}
	/* States are named by their offset in next[]: no multiplication
	 * on the fast path. */
	cur = dfa_state(&d, set, n, &flushed) * (int32_t)d.n_classes;
	r->steps += d.added;
	for (;;) {
		const int32_t *next = d.next;
		const uint8_t *cls = re->byte_class;
		uint64_t steps = r->steps;
		size_t t = 0;

		/* Known transitions: a step each. */
		if (!re->has_word) {
			for (; i < len; i++) {
				t = (size_t)cur + cls[s[i]];
				to = next[t];
				if (to < 0)
					break;
				cur = to;
				if (++steps > budget)
					break;
			}
		} else {
			for (; i < len; i++) {
				t = (size_t)cur + cls[s[i]] +
				    (i + 1 < len && rx_is_word(s[i + 1]) ? re->n_classes : 0);
				to = next[t];
				if (to < 0)
					break;
				cur = to;
				if (++steps > budget)
					break;
			}
		}
		r->steps = steps;
		if (steps > budget) {
			k = -E2BIG;
			goto out;
		}
		if (i == len)
			break;
		/* A new one: the step of the state set. */
		st = &d.st[cur / d.n_classes];
		r->prev_word = rx_is_word(s[i]);
		r->next_word = i + 1 < len && rx_is_word(s[i + 1]);
		step(r, d.pcs + st->at, st->n, s[i++], set, &n);
		if (r->matched || (n == 0 && !re->restart) || r->steps > budget) {
			/* n == 0: anchored, and nothing alive. */
			k = r->matched ? 1 : r->steps > budget ? -E2BIG : 0;
			goto out;
		}
		to = dfa_state(&d, set, n, &flushed) * (int32_t)d.n_classes;
		r->steps += d.added;
		if (!flushed)
			d.next[t] = to;
		cur = to;
	}
	st = &d.st[cur / d.n_classes];
	r->prev_word = len > 0 && rx_is_word(s[len - 1]);
	r->next_word = false;
	finish(r, d.pcs + st->at, st->n, len == 0);
	if (r->matched)
		k = 1;
	else if (r->steps > budget)
		k = -E2BIG;
out:
	if (d.pcs != d.pcs_local)
		free(d.pcs);
	if (d.next != d.next_local)
		free(d.next);
	if (d.st != d.st_local)
		free(d.st);
	if (d.table != d.table_local)
		free(d.table);
	return k;
}

int rx_search(const struct regex *re, const char *s, size_t len, uint64_t *budget, enum rx_mode mode)
{
	/* Small programs search without allocating. */
	uint32_t local[4 * 256];
	_cleanup_free_ uint32_t *heap = NULL;
	uint32_t *mem = local;
	size_t n = re->n_insns;
	struct run r = { .re = re };
	int k;

	if (n > 256)
		mem = heap = xreallocarray(NULL, 4 * n, sizeof(*mem));
	r.mark = mem;
	r.stack = mem + n;
	memset(r.mark, 0, n * sizeof(*r.mark));
	if (mode == RX_MODE_NFA)
		k = search_nfa(&r, (const uint8_t *)s, len, *budget, mem + 2 * n, mem + 3 * n);
	else
		k = search_dfa(&r, (const uint8_t *)s, len, *budget, mem + 2 * n,
			       mode == RX_MODE_DFA_TINY ? 1 : DFA_CACHE_MAX);
	/* Whatever it found, a search that took more than its budget failed:
	 * the outcome depends only on the steps it needs. */
	if (r.steps > *budget) {
		*budget = 0;
		return -E2BIG;
	}
	*budget -= r.steps;
	return k;
}

int regex_search(const struct regex *re, const char *s, size_t len, uint64_t *budget)
{
	return rx_search(re, s, len, budget, RX_MODE_DFA);
}

/* Whether a match can start past the first byte: is anything reachable
 * from the start without "^"? */
bool rx_can_restart(const struct regex *re)
{
	_cleanup_free_ uint32_t *mem = xcalloc(3 * (size_t)re->n_insns, sizeof(*mem));
	struct run r = { .re = re, .mark = mem, .stack = mem + re->n_insns, .word_any = true };
	size_t n = 0;

	new_gen(&r);
	closure(&r, 0, false, false, mem + 2 * re->n_insns, &n);
	return n > 0 || r.matched;
}

/* ------------------------------------------------------------------------
 * A search fed piece by piece (regex.h): the state kept between pieces is
 * the instructions entered at the position reached, before their closure
 * (which needs the byte after the position, for \b and \B).
 */

struct regex_stream {
	const struct regex *re;
	uint32_t *pend;		/* pcs entered at pos, their closures not taken */
	size_t n_pend;
	uint64_t pos;		/* bytes fed since the start */
	bool prev_word;		/* the byte before pos is a word character */
	bool matched;
};

struct regex_stream *regex_stream_new(const struct regex *re)
{
	struct regex_stream *st = xcalloc(1, sizeof(*st));

	st->re = re;
	st->pend = xreallocarray(NULL, MAX(re->n_insns, 1u), sizeof(*st->pend));
	return st;
}

struct regex_stream *regex_stream_free(struct regex_stream *st)
{
	if (st) {
		free(st->pend);
		free(st);
	}
	return NULL;
}

void regex_stream_reset(struct regex_stream *st)
{
	st->n_pend = 0;
	st->pos = 0;
	st->prev_word = false;
	st->matched = false;
}

/* Whether nothing fed later can match: anchored, and nothing alive. */
static bool stream_dead(const struct regex_stream *st)
{
	return st->pos > 0 && st->n_pend == 0 && !st->re->restart;
}

/* The threads at the stream's position: next_word, whether the byte after
 * it is a word character; at_end, whether the subject ends there. */
static void stream_threads(struct run *r, const struct regex_stream *st, bool next_word, bool at_end, uint32_t *out,
			   size_t *n_out)
{
	bool begin = st->pos == 0;

	new_gen(r);
	*n_out = 0;
	r->prev_word = st->prev_word;
	r->next_word = next_word;
	r->steps += 1 + st->n_pend;
	for (size_t i = 0; i < st->n_pend && !r->matched; i++)
		closure(r, st->pend[i], begin, at_end, out, n_out);
	/* An unanchored search: a match may also start here. */
	if (!r->matched && (begin || st->re->restart))
		closure(r, 0, begin, at_end, out, n_out);
}

/* Scratch of one feed: marks, a stack and a set of threads. */
#define STREAM_LOCAL 256

int regex_stream_feed(struct regex_stream *st, const char *s, size_t len, uint64_t *budget, size_t *ret_used)
{
	const struct regex *re = st->re;
	uint32_t local[3 * STREAM_LOCAL];
	_cleanup_free_ uint32_t *heap = NULL;
	uint32_t *mem = local;
	size_t n = MAX(re->n_insns, 1u), i = 0;
	struct run r = { .re = re };
	int k = 0;

	if (st->matched) {
		*ret_used = 0;
		return 1;
	}
	if (n > STREAM_LOCAL)
		mem = heap = xreallocarray(NULL, 3 * n, sizeof(*mem));
	r.mark = mem;
	r.stack = mem + n;
	memset(r.mark, 0, n * sizeof(*r.mark));
	for (; i < len; i++) {
		uint32_t *threads = mem + 2 * n;
		uint8_t b = (uint8_t)s[i];
		size_t nt;

		/* Checked between bytes: the state is whole there. */
		if (r.steps >= *budget) {
			k = -E2BIG;
			break;
		}
		if (stream_dead(st)) {
			i = len;
			break;
		}
		stream_threads(&r, st, rx_is_word(b), false, threads, &nt);
		if (r.matched) {
			st->matched = true;
			k = 1;
			break;
		}
		r.steps += 1 + nt;
		st->n_pend = 0;
		for (size_t t = 0; t < nt; t++) {
			uint32_t to = edge_to(re, &re->insns[threads[t]], b);

			/* Each thread once, each going on at most once:
			 * at most n_insns of them. */
			if (to != NONE)
				st->pend[st->n_pend++] = to;
		}
		st->prev_word = rx_is_word(b);
		st->pos++;
	}
	*ret_used = i;
	*budget = r.steps >= *budget ? 0 : *budget - r.steps;
	return k;
}

int regex_stream_at_end(struct regex_stream *st, uint64_t *budget)
{
	const struct regex *re = st->re;
	uint32_t local[3 * STREAM_LOCAL];
	_cleanup_free_ uint32_t *heap = NULL;
	uint32_t *mem = local;
	size_t n = MAX(re->n_insns, 1u), nt;
	struct run r = { .re = re };

	if (st->matched)
		return 1;
	if (stream_dead(st))
		return 0;
	if (n > STREAM_LOCAL)
		mem = heap = xreallocarray(NULL, 3 * n, sizeof(*mem));
	r.mark = mem;
	r.stack = mem + n;
	memset(r.mark, 0, n * sizeof(*r.mark));
	stream_threads(&r, st, false, true, mem + 2 * n, &nt);
	*budget = r.steps >= *budget ? 0 : *budget - r.steps;
	return r.matched;
}
