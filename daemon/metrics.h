/* SPDX-License-Identifier: MIT */
/*
 * admin/metrics: the daemon's whole OpenMetrics text (its own families,
 * the MCP providers', the background processes', then the dispatcher's:
 * lib/dispatch/metrics.h).
 */
#ifndef TC_DAEMON_METRICS_H
#define TC_DAEMON_METRICS_H

struct buf;
struct server;

/* Writes the text, "# EOF" last. */
void metrics_write(struct server *s, struct buf *b);

#endif
