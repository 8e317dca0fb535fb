/* SPDX-License-Identifier: MIT */
/*
 * Buffered, append-only audit log.
 */
#include "lib/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "lib/loop.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"

/* Past this much queued, lines are written at once rather than waiting. */
#define AUDIT_HIGH_WATER (256 * 1024)
/* Past this much unwritable, the oldest lines are dropped and counted. */
#define AUDIT_MAX_QUEUED (64 * 1024 * 1024)

struct audit {
	char *path;
	int fd;
	struct buf queue;
	struct tc_timer *timer;
	uint64_t flush_ms;
	bool armed;
	bool dirty;		/* written since the last fsync */
	uint64_t lines;
	uint64_t lost;
};

static int open_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
	return fd < 0 ? -errno : fd;
}

static void on_timer(void *arg)
{
	struct audit *a = arg;
	a->armed = false;
	audit_flush(a, true);
}

int audit_open(const char *path, struct tc_loop *loop, uint64_t flush_ms, struct audit **ret)
{
	int fd = open_log(path);
	if (fd < 0)
		return fd;
	struct audit *a = xcalloc(1, sizeof(*a));
	a->path = xstrdup(path);
	a->fd = fd;
	a->flush_ms = flush_ms ? flush_ms : 1000;
	if (loop)
		a->timer = tc_timer_new(loop, on_timer, a);
	*ret = a;
	return 0;
}

void audit_record(struct audit *a, const char *line, size_t n)
{
	if (!a)
		return;
	if (buf_size(&a->queue) > AUDIT_MAX_QUEUED) {
		a->lost++;
		return;
	}
	buf_append(&a->queue, line, n);
	buf_putc(&a->queue, '\n');
	a->lines++;
	if (buf_size(&a->queue) >= AUDIT_HIGH_WATER || !a->timer) {
		audit_flush(a, false);
	}
	if (a->timer && !a->armed) {
		tc_timer_start(a->timer, a->flush_ms);
		a->armed = true;
	}
}

int audit_flush(struct audit *a, bool sync)
{
	if (!a)
		return 0;
	int r = 0;
	while (buf_size(&a->queue) > 0 && a->fd >= 0) {
		ssize_t w = write(a->fd, buf_head(&a->queue), buf_size(&a->queue));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		buf_consume(&a->queue, (size_t)w);
		a->dirty = true;
	}
	if (sync && a->dirty && a->fd >= 0) {
		if (fdatasync(a->fd) < 0 && r == 0)
			r = -errno;
		a->dirty = false;
	}
	return r;
}

int audit_reopen(struct audit *a)
{
	if (!a)
		return 0;
	audit_flush(a, true);
	int fd = open_log(a->path);
	if (fd < 0)
		return fd;
	if (a->fd >= 0)
		close(a->fd);
	a->fd = fd;
	return 0;
}

uint64_t audit_lines(const struct audit *a) { return a ? a->lines : 0; }
uint64_t audit_lost(const struct audit *a) { return a ? a->lost : 0; }

struct audit *audit_close(struct audit *a)
{
	if (!a)
		return NULL;
	audit_flush(a, true);
	tc_timer_free(a->timer);
	if (a->fd >= 0)
		close(a->fd);
	buf_free(&a->queue);
	free(a->path);
	free(a);
	return NULL;
}
