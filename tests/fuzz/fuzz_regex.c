/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the pattern matcher (lib/regex/). The input is a
 * pattern, then (after the first newline) a subject. A pattern that is
 * refused must say why and where. One that compiles is searched for in
 * the subject with every strategy (state sets cached as DFA states, as
 * regex_search() does; state sets alone; a cache flushed at every new
 * state): all must agree, each within
 * the step bound of lib/regex/regex.h, and a search must be repeatable to the
 * step. For small patterns and subjects of valid UTF-8, the answer must be
 * that of a backtracking matcher over the parsed tree and code points,
 * written here the way ECMA-262 defines matching (exponential, so it gives
 * up after so many steps, and then nothing is compared).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/regex/regex.h"
#include "lib/regex/regex_internal.h"
#include "proto/json.h"
#include "proto/base/util.h"

#define REF_PATTERN_MAX 64	/* bytes of a pattern the reference matches */
#define REF_SUBJECT_MAX 64	/* bytes of a subject it matches */
#define REF_STEPS 200000
#define REF_DEPTH 3000
#define SEARCH_BUDGET (UINT64_C(1) << 24)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ------------------------------------------------------------------------
 * The reference: backtracking with continuations, as ECMA-262 22.2.2.
 */

struct ref {
	const uint32_t *cp;	/* the subject's code points */
	size_t n;
	unsigned long steps;	/* left */
	unsigned depth;
	bool gave_up;
};

struct cont {
	enum { K_DONE, K_CAT, K_REP } kind;
	const struct rx_node *node;
	size_t idx;		/* K_CAT: the next item to match */
	uint32_t count;		/* K_REP: iterations with this one */
	size_t start;		/* K_REP: where this one started */
	const struct cont *next;
};

static bool ref_run(struct ref *r, const struct rx_node *n, size_t pos, const struct cont *k);
static bool ref_resume(struct ref *r, size_t pos, const struct cont *k);

static bool in_set(const struct rx_node *n, uint32_t c)
{
	for (size_t i = 0; i < n->n_set; i++)
		if (c >= n->set[i].lo && c <= n->set[i].hi)
			return true;
	return false;
}

/* Matches the rest of a sequence from kids[idx]. */
static bool ref_cat(struct ref *r, const struct rx_node *n, size_t idx, size_t pos, const struct cont *k)
{
	struct cont c = { .kind = K_CAT, .node = n, .idx = idx + 1, .next = k };

	return ref_run(r, n->kids[idx], pos, idx + 1 < n->n_kids ? &c : k);
}

/* Tries one more iteration (greedy), else goes on. */
static bool ref_rep(struct ref *r, const struct rx_node *n, uint32_t count, size_t pos, const struct cont *k)
{
	if (count < n->max) {
		struct cont c = { .kind = K_REP, .node = n, .count = count + 1, .start = pos, .next = k };

		if (ref_run(r, n->kids[0], pos, &c))
			return true;
	}
	return count >= n->min && !r->gave_up && ref_resume(r, pos, k);
}

/* Continues with k at pos. */
static bool ref_resume(struct ref *r, size_t pos, const struct cont *k)
{
	switch (k->kind) {
	case K_DONE:
		return true;
	case K_CAT:
		return ref_cat(r, k->node, k->idx, pos, k->next);
	case K_REP:
		/* Past the minimum, an iteration that matched nothing fails. */
		if (k->count > k->node->min && pos == k->start)
			return false;
		return ref_rep(r, k->node, k->count, pos, k->next);
	}
	return false;
}

static bool ref_run(struct ref *r, const struct rx_node *n, size_t pos, const struct cont *k)
{
	bool ok = false;

	if (r->gave_up || r->steps == 0 || r->depth >= REF_DEPTH) {
		r->gave_up = true;
		return false;
	}
	r->steps--;
	r->depth++;
	switch (n->kind) {
	case RX_EMPTY:
		ok = ref_resume(r, pos, k);
		break;
	case RX_SET:
		ok = pos < r->n && in_set(n, r->cp[pos]) && ref_resume(r, pos + 1, k);
		break;
	case RX_BEGIN:
		ok = pos == 0 && ref_resume(r, pos, k);
		break;
	case RX_END:
		ok = pos == r->n && ref_resume(r, pos, k);
		break;
	case RX_WORDB:
	case RX_NWORDB: {
		bool before = pos > 0 && rx_is_word(r->cp[pos - 1]);
		bool after = pos < r->n && rx_is_word(r->cp[pos]);
		ok = ((before != after) == (n->kind == RX_WORDB)) && ref_resume(r, pos, k);
		break;
	}
	case RX_CAT:
		ok = ref_cat(r, n, 0, pos, k);
		break;
	case RX_ALT:
		for (size_t i = 0; i < n->n_kids && !ok && !r->gave_up; i++)
			ok = ref_run(r, n->kids[i], pos, k);
		break;
	case RX_REPEAT:
		ok = ref_rep(r, n, 0, pos, k);
		break;
	}
	r->depth--;
	return ok;
}

/* Decodes valid UTF-8. */
static size_t decode(const uint8_t *s, size_t len, uint32_t *out)
{
	size_t n = 0;

	for (size_t i = 0; i < len;) {
		uint32_t c = s[i];
		size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;

		if (l > 1)
			c &= 0x3F >> (l - 1);
		for (size_t k = 1; k < l; k++)
			c = (c << 6) | (s[i + k] & 0x3F);
		out[n++] = c;
		i += l;
	}
	return n;
}

/* 1 or 0 as the reference finds, -1 when it gave up. */
static int ref_search(const struct rx_tree *t, const uint8_t *s, size_t len)
{
	static const struct cont done = { .kind = K_DONE };
	uint32_t cp[REF_SUBJECT_MAX];
	struct ref r = { .cp = cp, .steps = REF_STEPS };

	r.n = decode(s, len, cp);
	for (size_t start = 0; start <= r.n; start++) {
		if (ref_run(&r, t->root, start, &done))
			return 1;
		if (r.gave_up)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * The harness.
 */

static void fail(const char *what, const uint8_t *p, size_t plen, size_t slen)
{
	fprintf(stderr, "fuzz_regex: %s (pattern '%.*s', subject of %zu bytes)\n", what, (int)plen,
		(const char *)p, slen);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum rx_mode modes[] = { RX_MODE_DFA, RX_MODE_NFA, RX_MODE_DFA_TINY };
	const uint8_t *nl = memchr(data, '\n', size);
	size_t plen = nl ? (size_t)(nl - data) : size;
	const uint8_t *s = nl ? nl + 1 : data + size;
	size_t slen = size - plen - (nl ? 1 : 0);
	struct regex *re = NULL;
	struct rx_tree *t = NULL;
	char *err = NULL, *err2 = NULL;
	int k, got = -1;
	uint64_t bound, used_dfa = 0;

	k = regex_compile((const char *)data, plen, &re, &err);
	if (rx_parse((const char *)data, plen, &t, &err2) != k)
		fail("rx_parse and regex_compile disagree", data, plen, slen);
	if (k < 0) {
		const char *at = err ? strstr(err, " (at offset ") : NULL;

		/* A refusal says why and where, within the pattern. */
		if (!err || !err2 || strcmp(err, err2) != 0 || !at || at == err ||
		    strtoull(at + 12, NULL, 10) > plen || re || t)
			fail("bad refusal", data, plen, slen);
		free(err);
		free(err2);
		return 0;
	}
	if (!re || !t || err || err2 || regex_size(re) > REGEX_SIZE_MAX)
		fail("bad compile", data, plen, slen);

	bound = (slen + 2) * (2 * (uint64_t)regex_size(re) + 1);
	for (size_t m = 0; m < ELEMENTSOF(modes); m++) {
		uint64_t budget = SEARCH_BUDGET, again = SEARCH_BUDGET, used;
		int r = rx_search(re, (const char *)s, slen, &budget, modes[m]);

		used = SEARCH_BUDGET - budget;
		if (r != 1 && r != 0 && r != -E2BIG)
			fail("bad result", data, plen, slen);
		if (r != -E2BIG && used > bound)
			fail("more steps than the bound", data, plen, slen);
		if (rx_search(re, (const char *)s, slen, &again, modes[m]) != r || again != budget)
			fail("a search is not repeatable", data, plen, slen);
		if (r == -E2BIG) {
			/* Large programs on long subjects may need more. */
			if (budget != 0)
				fail("-E2BIG with budget left", data, plen, slen);
			continue;
		}
		if (got >= 0 && r != got)
			fail("search strategies disagree", data, plen, slen);
		got = r;
		if (modes[m] == RX_MODE_DFA)
			used_dfa = used;
	}
	if (got >= 0) {
		/* Fed piece by piece with small budgets, resumed: the same
		 * answer, within the stream's bound. */
		struct regex_stream *st = regex_stream_new(re);
		uint64_t steps = 0, sbound = (slen + 1) * (4 * (uint64_t)regex_size(re) + 4);
		size_t at = 0, piece = 1 + (slen % 7);
		int r = 0;

		while (at < slen && r != 1 && steps <= SEARCH_BUDGET) {
			size_t n = MIN(piece, slen - at), fed = 0;
			uint64_t budget = 1 + (at * 131) % 97, before = budget;

			r = regex_stream_feed(st, (const char *)s + at, n, &budget, &fed);
			if ((r != 1 && r != 0 && r != -E2BIG) || (r == 0 && fed != n) || fed > n)
				fail("bad stream feed", data, plen, slen);
			steps += before - budget;
			at += fed;
			piece = piece * 5 % 13 + 1;
		}
		if (r != 1 && at == slen) {
			uint64_t budget = UINT64_MAX;

			r = regex_stream_at_end(st, &budget);
			steps += UINT64_MAX - budget;
		}
		if (at == slen || r == 1) {
			if (r != got)
				fail("the stream disagrees with the search", data, plen, slen);
			if (steps > sbound + 4 * (uint64_t)regex_size(re) + 4)
				fail("the stream took more steps than its bound", data, plen, slen);
		}
		regex_stream_free(st);
	}
	if (got >= 0 && used_dfa > 0) {
		/* Exactly the steps it took suffice; one fewer does not. */
		uint64_t budget = used_dfa;
		int r = regex_search(re, (const char *)s, slen, &budget);

		if (r != got || budget != 0)
			fail("a budget of exactly the steps taken does not suffice", data, plen, slen);
		budget = used_dfa - 1;
		r = regex_search(re, (const char *)s, slen, &budget);
		if (r != -E2BIG || budget != 0)
			fail("one step fewer than needed is not -E2BIG", data, plen, slen);
	}
	if (got >= 0 && plen <= REF_PATTERN_MAX && slen <= REF_SUBJECT_MAX &&
	    utf8_valid((const char *)s, slen)) {
		int want = ref_search(t, s, slen);

		if (want >= 0 && want != got)
			fail(got ? "matches, the reference does not" : "does not match, the reference does",
			     data, plen, slen);
	}
	rx_tree_free(t);
	regex_free(re);
	return 0;
}
