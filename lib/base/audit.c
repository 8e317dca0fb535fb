/* SPDX-License-Identifier: MIT */
/*
 * Buffered, append-only audit log: the queue, its writes on the loop, its
 * fdatasync on the io pool, and the outage accounting that makes every
 * failure counted and logged.
 */
#include "lib/base/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/base/iopool.h"
#include "lib/base/loop.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"

/* Past this much queued, lines are written at once rather than waiting. */
#define AUDIT_HIGH_WATER (256 * 1024)
/* Past this much unwritable, the newest lines are dropped and counted:
 * what is queued stays a contiguous run of the log. */
#define AUDIT_MAX_QUEUED (64 * 1024 * 1024)

/* One fdatasync on the pool: a dup of the log's fd, so a reopen or close
 * meanwhile cannot pull the fd from under the worker. */
struct sync_job {
	struct audit *a;	/* NULL once the log closed: the result is dropped */
	int fd;
	int err;
};

struct audit {
	char *path;
	int fd;
	struct buf queue;
	struct tc_timer *timer;
	struct audit_opts opts;
	struct iopool *own_pool;
	struct sync_job *syncing;	/* in flight on the pool */
	bool armed;
	bool dirty;		/* written since the last fsync */
	bool write_down;	/* the last write failed */
	bool fsync_down;	/* the last fsync failed */
	bool dropping;		/* lines dropped since the queue last drained */
	struct audit_stats st;
};

/* Opens the log without following a link in its last component and
 * without waiting on a FIFO: the daemon (root, often) reopens it by name
 * after a rotation, and whoever could write the directory in the meantime
 * (a call's child, where the log lies in a workspace) must not make it
 * append to another file or hang on a pipe. A device (/dev/null) is kept. */
static int open_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK,
		      0640);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISDIR(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (!S_ISREG(st.st_mode) && fcntl(fd, F_SETFL, O_WRONLY | O_APPEND) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Says one thing about the log, through the caller's logger or stderr. */
__attribute__((format(printf, 3, 4)))
static void say(struct audit *a, bool error, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (a->opts.log)
		a->opts.log(a->opts.log_userdata, error, msg);
	else
		fprintf(stderr, "toolcalld: %s\n", msg);
}

/* Logs the end of an outage, once, when nothing is failing any more. */
static void note_health(struct audit *a, bool was_healthy)
{
	bool now = audit_healthy(a);
	if (!was_healthy && now)
		say(a, false, "audit log %s: writing again; so far %llu lines dropped, %llu write errors, "
		    "%llu fsync errors", a->path, (unsigned long long)a->st.dropped,
		    (unsigned long long)a->st.write_errors, (unsigned long long)a->st.fsync_errors);
}

/* Counts a failed write; logs it when it starts an outage. */
static void write_failed(struct audit *a, int err)
{
	a->st.write_errors++;
	if (!a->write_down)
		say(a, true, "audit log %s: write failed: %s; %zu bytes kept queued and retried",
		    a->path, strerror(err), buf_size(&a->queue));
	a->write_down = true;
}

/* Takes in a sync's result (0 or an errno): counted, logged once per outage. */
static void fsync_result(struct audit *a, int err)
{
	bool was = audit_healthy(a);
	if (err) {
		a->st.fsync_errors++;
		if (!a->fsync_down)
			say(a, true, "audit log %s: fdatasync failed: %s; lines written since the last "
			    "sync may not be on disk", a->path, strerror(err));
		a->fsync_down = true;
		/* Retried on the next tick, so the outage can end. */
		a->dirty = true;
		if (a->timer && !a->armed) {
			tc_timer_start(a->timer, a->opts.flush_ms);
			a->armed = true;
		}
		return;
	}
	a->fsync_down = false;
	note_health(a, was);
}

/* Syncs fd's data here and now; returns 0 or an errno. */
static int sync_now(int fd)
{
	while (fdatasync(fd) < 0) {
		if (errno != EINTR)
			return errno;
	}
	return 0;
}

/* On a worker: the sync, on the job's own fd. */
static void sync_run(struct iojob *job, void *arg)
{
	struct sync_job *j = arg;
	j->err = sync_now(j->fd);
}

/* On the loop: the result back to the log, unless it closed meanwhile. */
static void sync_done(void *arg, bool cancelled)
{
	struct sync_job *j = arg;
	close(j->fd);
	if (j->a) {
		j->a->syncing = NULL;
		/* A sync the pool dropped at shutdown never happened: the close
		 * syncs inline instead, so it is not counted as failed. */
		if (!cancelled)
			fsync_result(j->a, j->err);
		else
			j->a->dirty = true;
	}
	free(j);
}

/* Starts an fdatasync on the pool, unless one is in flight (the next
 * timer tick catches what it misses: dirty stays set). */
static void sync_async(struct audit *a)
{
	if (a->syncing)
		return;
	int fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		fsync_result(a, errno);
		return;
	}
	struct sync_job *j = xcalloc(1, sizeof(*j));
	j->a = a;
	j->fd = fd;
	a->syncing = j;
	a->dirty = false;
	iopool_submit(a->opts.pool, sync_run, sync_done, j);
}

static void on_timer(void *arg)
{
	struct audit *a = arg;
	a->armed = false;
	audit_flush(a, true);
	/* Lines kept by a failing write, or written during a sync in flight,
	 * are taken up on the next tick; an idle, healthy log stays unarmed. */
	if ((buf_size(&a->queue) > 0 || a->dirty) && !a->armed) {
		tc_timer_start(a->timer, a->opts.flush_ms);
		a->armed = true;
	}
}

const char *const audit_on_error_names[] = {
	[AUDIT_ON_ERROR_LOG] = "log",
	[AUDIT_ON_ERROR_REFUSE] = "refuse",
	NULL,
};

int audit_on_error_from_string(const char *s, enum audit_on_error *ret)
{
	for (int i = 0; audit_on_error_names[i]; i++)
		if (str_eq(s, audit_on_error_names[i])) {
			*ret = (enum audit_on_error)i;
			return 0;
		}
	return -EINVAL;
}

int audit_open_with(const char *path, struct tc_loop *loop, const struct audit_opts *opts,
		    struct audit **ret)
{
	int fd = open_log(path);
	if (fd < 0)
		return fd;
	struct audit *a = xcalloc(1, sizeof(*a));
	if (opts)
		a->opts = *opts;
	if (!a->opts.flush_ms)
		a->opts.flush_ms = 1000;
	if (!a->opts.max_queued)
		a->opts.max_queued = AUDIT_MAX_QUEUED;
	if (loop && !a->opts.pool) {
		int r = iopool_new(loop, 1, &a->own_pool);
		if (r < 0) {
			close(fd);
			free(a);
			return r;
		}
		a->opts.pool = a->own_pool;
	}
	if (!loop)
		a->opts.pool = NULL;
	a->path = xstrdup(path);
	a->fd = fd;
	if (loop)
		a->timer = tc_timer_new(loop, on_timer, a);
	*ret = a;
	return 0;
}

int audit_open(const char *path, struct tc_loop *loop, uint64_t flush_ms, struct audit **ret)
{
	struct audit_opts o = { .flush_ms = flush_ms };
	return audit_open_with(path, loop, &o, ret);
}

void audit_record(struct audit *a, const char *line, size_t n)
{
	if (!a)
		return;
	/* One record, one line: a newline the caller left at the end would
	 * be an empty line, which JSON-lines readers refuse. */
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	if (n == 0)
		return;
	if (buf_size(&a->queue) + n + 1 > a->opts.max_queued) {
		a->st.dropped++;
		if (!a->dropping)
			say(a, true, "audit log %s: %zu bytes queued unwritten; dropping new lines until "
			    "the queue drains", a->path, buf_size(&a->queue));
		a->dropping = true;
		return;
	}
	buf_append(&a->queue, line, n);
	buf_putc(&a->queue, '\n');
	a->st.lines++;
	if (buf_size(&a->queue) >= AUDIT_HIGH_WATER || !a->timer)
		audit_flush(a, false);
	if (a->timer && !a->armed) {
		tc_timer_start(a->timer, a->opts.flush_ms);
		a->armed = true;
	}
}

/* Writes the queue; a failure keeps what is left queued. */
static int write_queue(struct audit *a)
{
	bool was = audit_healthy(a);
	while (buf_size(&a->queue) > 0) {
		if (a->fd < 0) {
			write_failed(a, EBADF);
			return -EBADF;
		}
		ssize_t w = write(a->fd, buf_head(&a->queue), buf_size(&a->queue));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int err = w < 0 ? errno : ENOSPC;
			write_failed(a, err);
			return -err;
		}
		buf_consume(&a->queue, (size_t)w);
		a->dirty = true;
	}
	a->write_down = false;
	a->dropping = false;
	note_health(a, was);
	return 0;
}

int audit_flush(struct audit *a, bool sync)
{
	if (!a)
		return 0;
	int r = write_queue(a);
	if (!sync || !a->dirty || a->fd < 0)
		return r;
	if (a->opts.pool) {
		sync_async(a);
		return r;
	}
	a->dirty = false;
	int err = sync_now(a->fd);
	fsync_result(a, err);
	return r < 0 ? r : -err;
}

/* Waits out a sync in flight by syncing inline and dropping its result. */
static void detach_sync(struct audit *a)
{
	if (a->syncing) {
		a->syncing->a = NULL;
		a->syncing = NULL;
		a->dirty = true;
	}
}

int audit_reopen(struct audit *a)
{
	if (!a)
		return 0;
	write_queue(a);
	detach_sync(a);
	if (a->dirty && a->fd >= 0) {
		a->dirty = false;
		fsync_result(a, sync_now(a->fd));
	}
	int fd = open_log(a->path);
	if (fd < 0)
		return fd;
	if (a->fd >= 0)
		close(a->fd);
	a->fd = fd;
	return 0;
}

uint64_t audit_lines(const struct audit *a) { return a ? a->st.lines : 0; }
uint64_t audit_lost(const struct audit *a) { return a ? a->st.dropped : 0; }

void audit_get_stats(const struct audit *a, struct audit_stats *ret)
{
	*ret = a ? a->st : (struct audit_stats){ 0 };
	ret->healthy = audit_healthy(a);
}

void audit_write_stats(const struct audit *a, struct jgen *g)
{
	struct audit_stats st;
	audit_get_stats(a, &st);
	jgen_kv_int(g, "lines", (int64_t)st.lines);
	jgen_kv_int(g, "lost", (int64_t)st.dropped);
	jgen_kv_int(g, "writeErrors", (int64_t)st.write_errors);
	jgen_kv_int(g, "fsyncErrors", (int64_t)st.fsync_errors);
	jgen_kv_bool(g, "healthy", st.healthy);
	jgen_kv_bool(g, "refusing", audit_refusing(a));
}

bool audit_healthy(const struct audit *a)
{
	return !a || !(a->write_down || a->fsync_down || a->dropping);
}

bool audit_refusing(const struct audit *a)
{
	return a && a->opts.on_error == AUDIT_ON_ERROR_REFUSE && !audit_healthy(a);
}

struct audit *audit_close(struct audit *a)
{
	if (!a)
		return NULL;
	write_queue(a);
	detach_sync(a);
	if (a->dirty && a->fd >= 0)
		fsync_result(a, sync_now(a->fd));
	if (buf_size(&a->queue) > 0)
		say(a, true, "audit log %s: closed with %zu bytes unwritten", a->path, buf_size(&a->queue));
	tc_timer_free(a->timer);
	a->own_pool = iopool_free(a->own_pool);
	if (a->fd >= 0)
		close(a->fd);
	buf_free(&a->queue);
	free(a->path);
	free(a);
	return NULL;
}
