/* SPDX-License-Identifier: MIT */
/*
 * The audit log: one JSON line per finished call, appended to a file.
 * Lines are buffered in memory and written by a timer, so recording never
 * blocks the event loop on the disk; the file is fdatasynced on a bounded
 * interval by the io pool (off the loop) and at close, and reopened on
 * SIGHUP for logrotate.
 *
 * No line is lost silently: a failed write keeps the lines queued and is
 * retried; past the queue bound the newest lines are dropped. Write
 * errors, fsync errors and dropped lines are counted (audit_get_stats),
 * each outage is logged once when it starts and once when it ends, and
 * with on_error "refuse" the dispatcher refuses calls while the log is
 * unhealthy (audit_refusing).
 */
#ifndef TC_AUDIT_H
#define TC_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct audit;
struct iopool;
struct tc_loop;

enum audit_on_error {
	AUDIT_ON_ERROR_LOG,	/* count, log, keep serving calls */
	AUDIT_ON_ERROR_REFUSE,	/* and refuse calls while unhealthy */
};

/* Receives one message per outage start and end (the daemon's logger). */
typedef void (*audit_log_fn)(void *userdata, bool error, const char *msg);

struct audit_opts {
	uint64_t flush_ms;		/* 0: 1000 */
	struct iopool *pool;		/* runs the fdatasync; NULL: a private one */
	enum audit_on_error on_error;
	size_t max_queued;		/* bytes held while unwritable; 0: 64 MiB */
	audit_log_fn log;		/* NULL: one line on stderr */
	void *log_userdata;
};

struct audit_stats {
	uint64_t lines;		/* lines queued (then written, or retried) */
	uint64_t dropped;	/* lines dropped: the queue was full */
	uint64_t write_errors;
	uint64_t fsync_errors;
	bool healthy;
};

/* Opens (creating, mode 0640) path for appending, with defaults. */
int audit_open(const char *path, struct tc_loop *loop, uint64_t flush_ms, struct audit **ret);
/* The same with options (opts may be NULL). Without a loop every record is
 * written at once and a flush's sync runs inline. */
int audit_open_with(const char *path, struct tc_loop *loop, const struct audit_opts *opts,
		    struct audit **ret);
/* Parses "log" or "refuse". */
int audit_on_error_from_string(const char *s, enum audit_on_error *ret);
/* The names of enum audit_on_error, NULL-terminated ("log", "refuse"). */
extern const char *const audit_on_error_names[];
/* Queues one line (without its newline). */
void audit_record(struct audit *a, const char *line, size_t n);
/* Writes what is queued; with sync, fdatasyncs too (on the pool when the
 * log has a loop, so the result of that sync shows in the stats later). */
int audit_flush(struct audit *a, bool sync);
/* Flushes, then reopens the file by its path (after logrotate moved it). */
int audit_reopen(struct audit *a);
/* Lines queued, and lines dropped because the queue was full. */
uint64_t audit_lines(const struct audit *a);
uint64_t audit_lost(const struct audit *a);
void audit_get_stats(const struct audit *a, struct audit_stats *ret);
/* False while writes or the last fsync fail or lines are being dropped. */
bool audit_healthy(const struct audit *a);
/* True when calls must be refused: on_error "refuse" and not healthy. */
bool audit_refusing(const struct audit *a);
struct jgen;
/* Writes the members of admin/stats' "audit" object: lines, lost,
 * writeErrors, fsyncErrors, healthy, refusing. */
void audit_write_stats(const struct audit *a, struct jgen *g);
/* Flushes, fsyncs and closes. Accepts NULL; returns NULL. */
struct audit *audit_close(struct audit *a);

#endif
