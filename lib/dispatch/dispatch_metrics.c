/* SPDX-License-Identifier: MIT */
/*
 * The dispatcher's families of admin/metrics (dispatch_write_metrics()),
 * written with the OpenMetrics writer of lib/base/openmetrics.h. The
 * histogram's buckets are derived from the latency histogram admin/stats
 * keeps per tool (log-linear, 1/8 of a power of two wide): a call counts
 * in a bucket when the value its fine bucket stands for (the one p50 and
 * p99 report) is at most le.
 */
#include <stdio.h>
#include <string.h>

#include "lib/base/audit.h"
#include "lib/base/map.h"
#include "lib/base/openmetrics.h"
#include "lib/dispatch/dispatch_internal.h"
#include "lib/events.h"
#include "proto/base/buf.h"

/* The buckets of toolcalld_call_duration_seconds, in microseconds and as
 * written in le. */
static const struct {
	uint64_t us;
	const char *le;
} buckets[] = {
	{ 500, "0.0005" }, { 1000, "0.001" }, { 2500, "0.0025" }, { 5000, "0.005" },
	{ 10000, "0.01" }, { 25000, "0.025" }, { 50000, "0.05" }, { 100000, "0.1" },
	{ 250000, "0.25" }, { 500000, "0.5" }, { 1000000, "1" }, { 2500000, "2.5" },
	{ 5000000, "5" }, { 10000000, "10" }, { 30000000, "30" }, { 60000000, "60" },
	{ 300000000, "300" }, { 600000000, "600" },
};

/* Calls in the queues, waiting for a slot. */
static uint64_t queued(const struct dispatcher *d)
{
	return d->waiting;
}

/* Writes one family with one sample per tool: value(t, ts) for each. */
static void per_tool(struct dispatcher *d, struct buf *b, const char *family, const char *type,
		     const char *sample, const char *help,
		     uint64_t (*value)(struct dispatcher *d, const char *name, const struct tool_stats *t,
				  const struct tool_state *ts))
{
	metrics_family(b, family, type, NULL, help);
	size_t it = 0;
	const char *name;
	void *v;
	while (map_next(d->stats.tools, &it, &name, &v)) {
		const char *labels[] = { "tool", name, NULL };
		metrics_u64(b, sample, labels, value(d, name, v, map_get(d->tools, name)));
	}
}

static uint64_t tool_calls(struct dispatcher *d, const char *name, const struct tool_stats *t,
			  const struct tool_state *ts)
{
	return t->calls;
}

static uint64_t tool_running(struct dispatcher *d, const char *name, const struct tool_stats *t,
			  const struct tool_state *ts)
{
	return ts ? ts->running : 0;
}

static uint64_t tool_circuit_open(struct dispatcher *d, const char *name, const struct tool_stats *t,
			  const struct tool_state *ts)
{
	return strcmp(dispatch_worst_circuit(d, name), "closed") != 0;
}

/* The duration histogram of every tool. */
static void durations(struct dispatcher *d, struct buf *b)
{
	metrics_family(b, "toolcalld_call_duration_seconds", "histogram", "seconds",
		       "Time from a call's acceptance to its outcome, per tool.");
	size_t it = 0;
	const char *name;
	void *v;
	while (map_next(d->stats.tools, &it, &name, &v)) {
		const struct tool_stats *t = v;
		uint64_t total = 0;
		for (unsigned i = 0; i < STATS_BUCKETS; i++)
			total += t->hist[i];
		for (size_t i = 0; i < ELEMENTSOF(buckets); i++) {
			const char *labels[] = { "tool", name, "le", buckets[i].le, NULL };
			metrics_u64(b, "toolcalld_call_duration_seconds_bucket", labels,
				    stats_count_at_most(t, buckets[i].us));
		}
		const char *inf[] = { "tool", name, "le", "+Inf", NULL };
		metrics_u64(b, "toolcalld_call_duration_seconds_bucket", inf, total);
		const char *labels[] = { "tool", name, NULL };
		metrics_u64(b, "toolcalld_call_duration_seconds_count", labels, total);
		metrics_real(b, "toolcalld_call_duration_seconds_sum", labels, (double)t->sum_us / 1e6);
	}
}

/* A family of one unlabelled sample. */
static void single(struct buf *b, const char *family, const char *type, const char *help, uint64_t v)
{
	metrics_family(b, family, type, NULL, help);
	char sample[128];
	snprintf(sample, sizeof(sample), "%s%s", family, type[0] == 'c' ? "_total" : "");
	metrics_u64(b, sample, NULL, v);
}

void dispatch_write_metrics(struct dispatcher *d, struct buf *b)
{
	single(b, "toolcalld_calls_in_flight", "gauge", "Calls not answered yet, running or waiting.",
	       dispatch_inflight(d));
	single(b, "toolcalld_calls_running", "gauge", "Tool runs holding a concurrency slot.", d->running);
	single(b, "toolcalld_calls_queued", "gauge", "Tool runs waiting for a concurrency slot.", queued(d));
	single(b, "toolcalld_attempts", "counter", "Attempts that reached the tool, retries included.", d->stats.attempts);
	single(b, "toolcalld_retries", "counter", "Attempts after the first.", d->stats.retries);

	per_tool(d, b, "toolcalld_calls", "counter", "toolcalld_calls_total",
		 "Calls answered, per tool (unknown tools count as (unknown)).", tool_calls);
	metrics_family(b, "toolcalld_call_errors", "counter", NULL,
		       "Calls answered with an error, per tool and kind.");
	size_t it = 0;
	const char *name;
	void *v;
	while (map_next(d->stats.tools, &it, &name, &v)) {
		const struct tool_stats *t = v;
		for (int k = 1; k < TC_KIND_MAX; k++) {
			if (!t->errors[k])
				continue;
			const char *labels[] = { "tool", name, "kind", tc_kind_name(k), NULL };
			metrics_u64(b, "toolcalld_call_errors_total", labels, t->errors[k]);
		}
	}
	durations(d, b);
	per_tool(d, b, "toolcalld_tool_running", "gauge", "toolcalld_tool_running",
		 "Runs of the tool holding a slot.", tool_running);
	per_tool(d, b, "toolcalld_tool_circuit_open", "gauge", "toolcalld_tool_circuit_open",
		 "1 while the tool's circuit breaker is open or half open.", tool_circuit_open);

	single(b, "toolcalld_idempotency_entries", "gauge", "Outcomes kept for idempotency keys.",
	       idem_size(&d->idem));
	single(b, "toolcalld_idempotency_hits", "counter", "Calls answered with a kept outcome.",
	       d->stats.idem_hits);
	single(b, "toolcalld_idempotency_joins", "counter", "Calls that joined a run in flight.",
	       d->stats.idem_joins);
	single(b, "toolcalld_events_emitted", "counter", "Events published.", d->bus->emitted);
	single(b, "toolcalld_events_dropped", "counter", "Events a slow subscriber missed.", d->bus->dropped);
	if (d->audit) {
		single(b, "toolcalld_audit_lines", "counter", "Audit lines written.", audit_lines(d->audit));
		single(b, "toolcalld_audit_lost", "counter", "Audit lines that could not be written.",
		       audit_lost(d->audit));
	}
}
