/* SPDX-License-Identifier: MIT */
/*
 * Call counters and latency histograms.
 */
#include "lib/dispatch/dispatch_internal.h"

#include "lib/base/map.h"
#include "proto/base/util.h"

void stats_init(struct stats *s)
{
	*s = (struct stats){ .tools = map_new() };
}

void stats_free(struct stats *s)
{
	size_t it = 0;
	void *v;
	while (s->tools && map_next(s->tools, &it, NULL, &v))
		free(v);
	map_free(s->tools);
	s->tools = NULL;
}

/* Buckets: exact below 16, then 8 per power of two. */
static unsigned bucket_of(uint64_t v)
{
	if (v < 16)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v);
	unsigned sub = (unsigned)(v >> (e - 3)) & 7u;
	unsigned idx = 16 + (e - 4) * 8 + sub;
	return idx < STATS_BUCKETS ? idx : STATS_BUCKETS - 1;
}

static uint64_t bucket_value(unsigned idx)
{
	if (idx < 16)
		return idx;
	unsigned e = (idx - 16) / 8 + 4;
	unsigned sub = (idx - 16) % 8;
	return ((uint64_t)(8 + sub)) << (e - 3);
}

void stats_record(struct stats *s, const char *tool, enum tc_kind kind, uint64_t duration_us)
{
	struct tool_stats *t = map_get(s->tools, tool);
	if (!t) {
		/* Bound the table: names come from the registry, but a client
		 * can ask for any name; unknown tools share one row. */
		if (kind == TC_NOT_FOUND)
			tool = "(unknown)";
		t = map_get(s->tools, tool);
		if (!t) {
			t = xcalloc(1, sizeof(*t));
			map_put(s->tools, tool, t);
		}
	}
	s->calls++;
	t->calls++;
	if (kind != TC_OK && (unsigned)kind < TC_KIND_MAX) {
		t->errors[kind]++;
		s->errors[kind]++;
	}
	t->hist[bucket_of(duration_us)]++;
	t->sum_us += duration_us;
}

uint64_t stats_percentile(const struct tool_stats *t, double q)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < STATS_BUCKETS; i++)
		total += t->hist[i];
	if (!total)
		return 0;
	uint64_t want = (uint64_t)(q * (double)total + 0.5);
	if (want == 0)
		want = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < STATS_BUCKETS; i++) {
		seen += t->hist[i];
		if (seen >= want)
			return bucket_value(i);
	}
	return bucket_value(STATS_BUCKETS - 1);
}

uint64_t stats_count_at_most(const struct tool_stats *t, uint64_t us)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < STATS_BUCKETS && bucket_value(i) <= us; i++)
		n += t->hist[i];
	return n;
}
