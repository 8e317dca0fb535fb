/* SPDX-License-Identifier: MIT */
/*
 * The unified diff writer (see diff.h). Lines are split and hashed, the
 * common head and tail are set aside, and Myers' O((N+M)D) greedy search
 * finds the shortest edit script of the middle, keeping one vector per
 * edit distance d for the walk back. The distance searched is capped so
 * that at most about DIFF_WORK steps and DIFF_D_MAX vectors are spent; a
 * middle that differs more is reported as removed and added whole.
 * Changes are then grouped into hunks as diff -u groups them: each run of
 * removed lines before the added lines of the same change, and changes
 * closer than twice the context sharing a hunk.
 */
#include "lib/diff/diff.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proto/base/buf.h"
#include "proto/base/util.h"

#define DIFF_D_MAX 2000
#define DIFF_WORK ((uint64_t)1 << 26)

struct line {
	const char *s;
	size_t n;		/* with its '\n', when it has one */
	uint64_t h;
};

struct side {
	struct line *l;
	size_t n;
	bool *changed;		/* removed (a) or added (b) */
};

/* Splits text into lines, each with its hash. */
static void split_lines(const char *s, size_t n, struct side *ret)
{
	size_t count = 0;
	for (const char *p = s, *end = s + n; p < end; count++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		p = nl ? nl + 1 : end;
	}
	ret->l = xcalloc(count + 1, sizeof(*ret->l));
	ret->changed = xcalloc(count + 1, sizeof(*ret->changed));
	ret->n = count;
	size_t i = 0;
	for (const char *p = s, *end = s + n; p < end; i++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl + 1 : end;
		uint64_t h = 1469598103934665603ull;	/* FNV-1a */
		for (const char *q = p; q < e; q++)
			h = (h ^ (unsigned char)*q) * 1099511628211ull;
		ret->l[i] = (struct line){ p, (size_t)(e - p), h };
		p = e;
	}
}

static inline bool line_eq(const struct line *x, const struct line *y)
{
	return x->h == y->h && x->n == y->n && memcmp(x->s, y->s, x->n) == 0;
}

/*
 * Marks the lines of a[a0..a1) and b[b0..b1) that the shortest edit script
 * removes and adds; past the cap, all of them.
 */
static void myers(struct side *A, size_t a0, size_t a1, struct side *B, size_t b0, size_t b1)
{
	const struct line *a = A->l + a0, *b = B->l + b0;
	long N = (long)(a1 - a0), M = (long)(b1 - b0);
	if (N == 0 || M == 0) {
		for (long i = 0; i < N; i++)
			A->changed[a0 + (size_t)i] = true;
		for (long j = 0; j < M; j++)
			B->changed[b0 + (size_t)j] = true;
		return;
	}
	long dmax = (long)MIN((uint64_t)DIFF_D_MAX, DIFF_WORK / (uint64_t)(N + M));
	dmax = MAX(dmax, 8);
	dmax = MIN(dmax, N + M);
	/* trace[d] holds V[-d..d] after step d. */
	long **trace = xcalloc((size_t)dmax + 1, sizeof(*trace));
	long *v = xcalloc(2 * (size_t)dmax + 3, sizeof(*v));
	long off = dmax + 1, found = -1;

	for (long d = 0; d <= dmax && found < 0; d++) {
		for (long k = -d; k <= d; k += 2) {
			long x;
			if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
				x = v[off + k + 1];
			else
				x = v[off + k - 1] + 1;
			long y = x - k;
			while (x < N && y < M && line_eq(&a[x], &b[y])) {
				x++;
				y++;
			}
			v[off + k] = x;
			if (x >= N && y >= M) {
				found = d;
				break;
			}
		}
		trace[d] = xmemdup(v + off - d, (2 * (size_t)d + 1) * sizeof(*v));
	}

	if (found < 0) {
		for (long i = 0; i < N; i++)
			A->changed[a0 + (size_t)i] = true;
		for (long j = 0; j < M; j++)
			B->changed[b0 + (size_t)j] = true;
	} else {
		long x = N, y = M;
		for (long d = found; d > 0; d--) {
			const long *pv = trace[d - 1];	/* V[-(d-1)..d-1] */
			long k = x - y, pk;
#define PV(kk) pv[(kk) + (d - 1)]
			if (k == -d || (k != d && PV(k - 1) < PV(k + 1)))
				pk = k + 1;	/* came down: an added line */
			else
				pk = k - 1;	/* came right: a removed line */
			long px = PV(pk), py = px - pk;
#undef PV
			if (pk == k + 1)
				B->changed[b0 + (size_t)py] = true;
			else
				A->changed[a0 + (size_t)px] = true;
			x = px;
			y = py;
		}
	}
	for (long d = 0; d <= dmax; d++)
		free(trace[d]);
	free(trace);
	free(v);
}

struct change {
	size_t a, na, b, nb;	/* removed a[a..a+na), added b[b..b+nb) */
};

/* Appends one line with its prefix, and the marker when it has no newline. */
static void put_line(struct buf *out, char prefix, const struct line *l)
{
	buf_putc(out, prefix);
	buf_append(out, l->s, l->n);
	if (!l->n || l->s[l->n - 1] != '\n')
		buf_puts(out, "\n\\ No newline at end of file\n");
}

/* Appends "start,count" as diff -u writes a hunk range. */
static void put_range(struct buf *out, size_t start, size_t count)
{
	if (count == 1)
		buf_printf(out, "%zu", start + 1);
	else
		buf_printf(out, "%zu,%zu", count ? start + 1 : start, count);
}

void diff_unified(const char *a, size_t an, const char *b, size_t bn, const char *label_a, const char *label_b,
		  unsigned context, struct buf *out, struct diff_stats *ret_stats)
{
	struct side A = {}, B = {};
	struct diff_stats stats = {};
	split_lines(a, an, &A);
	split_lines(b, bn, &B);

	size_t head = 0, tail = 0;
	while (head < A.n && head < B.n && line_eq(&A.l[head], &B.l[head]))
		head++;
	while (tail < A.n - head && tail < B.n - head && line_eq(&A.l[A.n - 1 - tail], &B.l[B.n - 1 - tail]))
		tail++;
	myers(&A, head, A.n - tail, &B, head, B.n - tail);

	/* The changes, in order: removed lines then added lines of each. */
	struct change *ch = NULL;
	size_t n_ch = 0;
	for (size_t i = 0, j = 0; i < A.n || j < B.n;) {
		if (i < A.n && j < B.n && !A.changed[i] && !B.changed[j]) {
			i++;
			j++;
			continue;
		}
		struct change c = { .a = i, .b = j };
		while (i < A.n && A.changed[i])
			i++;
		while (j < B.n && B.changed[j])
			j++;
		c.na = i - c.a;
		c.nb = j - c.b;
		if (!c.na && !c.nb) {
			/* Cannot happen with a consistent script; stop rather than loop. */
			break;
		}
		ch = xreallocarray(ch, n_ch + 1, sizeof(*ch));
		ch[n_ch++] = c;
		stats.removed += c.na;
		stats.added += c.nb;
	}

	if (n_ch)
		buf_printf(out, "--- %s\n+++ %s\n", label_a, label_b);
	for (size_t first = 0; first < n_ch;) {
		size_t last = first;
		while (last + 1 < n_ch && ch[last + 1].a - (ch[last].a + ch[last].na) <= 2 * (size_t)context)
			last++;
		size_t as = ch[first].a > context ? ch[first].a - context : 0;
		size_t bs = ch[first].b - (ch[first].a - as);
		size_t ae = MIN(A.n, ch[last].a + ch[last].na + context);
		size_t be = ch[last].b + ch[last].nb + (ae - (ch[last].a + ch[last].na));
		buf_puts(out, "@@ -");
		put_range(out, as, ae - as);
		buf_puts(out, " +");
		put_range(out, bs, be - bs);
		buf_puts(out, " @@\n");
		size_t i = as;
		for (size_t c = first; c <= last; c++) {
			for (; i < ch[c].a; i++)
				put_line(out, ' ', &A.l[i]);
			for (size_t k = 0; k < ch[c].na; k++)
				put_line(out, '-', &A.l[ch[c].a + k]);
			for (size_t k = 0; k < ch[c].nb; k++)
				put_line(out, '+', &B.l[ch[c].b + k]);
			i = ch[c].a + ch[c].na;
		}
		for (; i < ae; i++)
			put_line(out, ' ', &A.l[i]);
		stats.hunks++;
		first = last + 1;
	}
	free(ch);
	free(A.l);
	free(A.changed);
	free(B.l);
	free(B.changed);
	if (ret_stats)
		*ret_stats = stats;
}
