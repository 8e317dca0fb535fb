/* SPDX-License-Identifier: MIT */
/*
 * admin/metrics: the OpenMetrics text format (1.0). A small writer (a
 * family's # TYPE, # UNIT and # HELP lines, then its samples, label values
 * escaped) that the dispatcher (dispatch_write_metrics()), the process
 * table and the daemon write their families with.
 *
 * Names are toolcalld_*; counters end in _total, durations are in seconds.
 * The text ends with "# EOF", which the daemon writes (metrics_end()).
 */
#ifndef TC_OPENMETRICS_H
#define TC_OPENMETRICS_H

#include <stdint.h>

struct buf;

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

#endif
