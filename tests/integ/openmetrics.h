/* SPDX-License-Identifier: MIT */
/*
 * A strict checker of the OpenMetrics text format (1.0), for the tests of
 * admin/metrics: what a Prometheus server scraping with the OpenMetrics
 * parser would refuse, this refuses too, and some more.
 *
 * It checks the line grammar (# TYPE / # HELP / # UNIT, samples
 * "name{label="value",...} value [timestamp]", "# EOF" last and nothing
 * after it), metric and label names ([a-zA-Z_:][a-zA-Z0-9_:]*, labels
 * without ':'), the escapes of label values and HELP text, numbers, that a
 * family's metadata comes before its samples and its samples are not
 * interleaved with another family's, the sample names each type allows
 * (counter: _total/_created; histogram: _bucket/_count/_sum/_created;
 * gauge, unknown: the name itself), that a family with a UNIT ends in it,
 * no sample twice, counters not negative, and per histogram label set:
 * le in increasing order ending with +Inf, cumulative counts that never
 * decrease, _count equal to the +Inf bucket, _sum present.
 */
#ifndef TC_TEST_OPENMETRICS_H
#define TC_TEST_OPENMETRICS_H

#include <stddef.h>

/* Checks text; returns 0, or -1 with a message naming the line in err. */
int om_check(const char *text, char *err, size_t errlen);

/* The value of the sample whose name and label text ({...} as written,
 * "" for none) are given, or -1 when there is none. */
double om_value(const char *text, const char *name, const char *labels);

#endif
