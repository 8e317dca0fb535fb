/* SPDX-License-Identifier: MIT */
/*
 * Counters for admin/stats: per tool calls, errors by kind and a latency
 * histogram (log-linear buckets in microseconds, for p50 and p99).
 */
#ifndef TC_STATS_H
#define TC_STATS_H

#include <stdint.h>

#include "lib/errors.h"

#define STATS_BUCKETS 496

struct tool_stats {
	uint64_t calls;
	uint64_t errors[TC_KIND_MAX];
	uint64_t hist[STATS_BUCKETS];
	uint64_t sum_us;		/* of all durations, for admin/metrics */
};

struct stats {
	struct map *tools;		/* name -> struct tool_stats */
	uint64_t calls;
	uint64_t errors[TC_KIND_MAX];
	uint64_t idem_hits;		/* replays from the cache */
	uint64_t idem_joins;		/* callers joining an execution in flight */
	uint64_t attempts;
	uint64_t retries;
};

void stats_init(struct stats *s);
void stats_free(struct stats *s);
void stats_record(struct stats *s, const char *tool, enum tc_kind kind, uint64_t duration_us);
/* The value (microseconds) below which the fraction q of recorded calls fall. */
uint64_t stats_percentile(const struct tool_stats *t, double q);
/* How many recorded calls took at most us microseconds, each counted at
 * the value stats_percentile reports for its bucket (for admin/metrics). */
uint64_t stats_count_at_most(const struct tool_stats *t, uint64_t us);

#endif
