/* SPDX-License-Identifier: MIT */
/*
 * The audit log: one JSON line per finished call, appended to a file.
 * Lines are buffered in memory and written by a timer, so recording never
 * blocks the event loop on the disk; the file is fsynced on a bounded
 * interval and at close, and reopened on SIGHUP for logrotate.
 */
#ifndef TC_AUDIT_H
#define TC_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct audit;
struct tc_loop;

/* Opens (creating, mode 0640) path for appending. */
int audit_open(const char *path, struct tc_loop *loop, uint64_t flush_ms, struct audit **ret);
/* Queues one line (without its newline). */
void audit_record(struct audit *a, const char *line, size_t n);
/* Writes what is queued; with sync, fsyncs too. */
int audit_flush(struct audit *a, bool sync);
/* Flushes, then reopens the file by its path (after logrotate moved it). */
int audit_reopen(struct audit *a);
/* Lines written, and lines lost to write errors. */
uint64_t audit_lines(const struct audit *a);
uint64_t audit_lost(const struct audit *a);
/* Flushes, fsyncs and closes. Accepts NULL; returns NULL. */
struct audit *audit_close(struct audit *a);

#endif
