/* SPDX-License-Identifier: MIT */
/*
 * admin/metrics: the OpenMetrics text format (1.0) and what the dispatcher
 * contributes to it. A small writer (a family's # TYPE, # UNIT and # HELP
 * lines, then its samples, label values escaped) that the daemon uses for
 * its own families too, and dispatch_write_metrics(), which writes the
 * same numbers admin/stats gathers: calls and errors by kind per tool, a
 * latency histogram per tool, calls in flight, running and queued, the
 * idempotency cache, events, the audit log, circuits.
 *
 * Names are toolcalld_*; counters end in _total, durations are in seconds.
 * The text ends with "# EOF", which the daemon writes (metrics_end()).
 */
#ifndef TC_METRICS_H
#define TC_METRICS_H

#include <stdint.h>

struct buf;
struct dispatcher;

/* Starts a family: type is "counter", "gauge" or "histogram"; unit may be
 * NULL (else the name ends in _UNIT). */
void metrics_family(struct buf *b, const char *name, const char *type, const char *unit,
		    const char *help);
/* One sample: name (with its suffix), labels as NULL-terminated pairs
 * {key, value, ..., NULL} or NULL, and an integer or a real value. */
void metrics_u64(struct buf *b, const char *name, const char *const *labels, uint64_t v);
void metrics_real(struct buf *b, const char *name, const char *const *labels, double v);
/* The end of the text. */
void metrics_end(struct buf *b);

/* Writes the dispatcher's families. */
void dispatch_write_metrics(struct dispatcher *d, struct buf *b);

#endif
