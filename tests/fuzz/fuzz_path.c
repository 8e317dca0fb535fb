/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for path resolution beneath a workspace: ws_check,
 * ws_openat, ws_open_parent, ws_read, ws_display_path and ws_error on
 * arbitrary bytes, against a temporary tree with symlinks leading in, out
 * and round in loops, a sibling "ws-evil" and a file outside.
 *
 * Two bytes expand so the fuzzer can name absolute paths of a tree whose
 * location it cannot guess: 0x01 becomes the workspace root, 0x02 its
 * parent directory. Whatever opens must lie beneath the root (checked
 * through /proc/self/fd), the functions must agree with each other, and no
 * fd may be left open. Nothing is created, so every input sees the same tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/files/workspace.h"
#include "lib/files/workspace_internal.h"
#include "lib/files/workspace_root.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libFuzzer hands no context to the callback: the tree lives for the process. */
static char base[PATH_MAX];
static struct workspace *ws;

static void make(const char *rel, const char *content)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	if (!content) {
		if (mkdir(p, 0755) < 0)
			abort();
		return;
	}
	FILE *f = fopen(p, "we");
	if (!f)
		abort();
	fputs(content, f);
	fclose(f);
}

static void link_to(const char *target, const char *rel)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	if (symlink(target, p) < 0)
		abort();
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static void cleanup(void)
{
	ws = ws_unref(ws);
	if (base[0])
		nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	snprintf(base, sizeof(base), "/tmp/tc-fuzz-path-XXXXXX");
	if (!mkdtemp(base))
		abort();
	char *real = realpath(base, NULL);
	if (!real)
		abort();
	snprintf(base, sizeof(base), "%s", real);
	free(real);
	atexit(cleanup);

	make("outside.txt", "secret\n");
	make("ws-evil", NULL);
	make("ws-evil/x", "evil\n");
	make("ws", NULL);
	make("ws/hello.txt", "hello\n");
	make("ws/sub", NULL);
	make("ws/sub/inner.txt", "inner\n");
	make("ws/a", NULL);
	make("ws/a/..b", "x");
	make("ws/..test", "x");
	link_to("hello.txt", "ws/link-in");
	link_to("sub", "ws/link-dir");
	link_to("../hello.txt", "ws/sub/up");
	link_to("../outside.txt", "ws/out");
	link_to("..", "ws/parent");
	link_to("../ws-evil", "ws/evil");
	link_to("/etc/passwd", "ws/abs");
	link_to("/proc/self/root", "ws/proc");
	link_to("missing", "ws/dangling");
	link_to("loop2", "ws/loop1");
	link_to("loop1", "ws/loop2");
	char fifo[PATH_MAX * 2];
	snprintf(fifo, sizeof(fifo), "%s/ws/fifo", base);
	if (mkfifo(fifo, 0644) < 0)
		abort();

	char root[PATH_MAX * 2];
	snprintf(root, sizeof(root), "%s/ws", base);
	if (ws_open(root, &ws) < 0)
		abort();
	return 0;
}

/* Returns the lowest free fd number: equal before and after an input, or an fd leaked. */
static int lowest_free_fd(void)
{
	int fd = dup(0);
	if (fd < 0)
		abort();
	close(fd);
	return fd;
}

/* Aborts unless fd refers to the root or something beneath it. */
static void assert_beneath(int fd)
{
	char link[64], target[PATH_MAX + 1];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t k = readlink(link, target, sizeof(target) - 1);
	if (k < 0)
		abort();
	target[k] = '\0';
	size_t n = strlen(ws->root);
	if (strncmp(target, ws->root, n) != 0 || (target[n] != '\0' && target[n] != '/')) {
		fprintf(stderr, "escaped the workspace: %s\n", target);
		abort();
	}
}

/* Builds the path, expanding 0x01 to the root and 0x02 to its parent. */
static void expand(const uint8_t *data, size_t size, struct buf *out)
{
	for (size_t i = 0; i < size; i++) {
		if (data[i] == 0x01)
			buf_puts(out, ws->root);
		else if (data[i] == 0x02)
			buf_puts(out, base);
		else
			buf_putc(out, (char)data[i]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 2 * PATH_MAX)
		return 0;
	int fds = lowest_free_fd();
	struct buf b = {};
	expand(data, size, &b);
	const char *path = buf_head(&b);
	size_t len = buf_size(&b);
	bool has_nul = len && memchr(path, 0, len);

	int check = ws_check(ws, path, len);
	if (has_nul && check != -EINVAL)
		abort();

	int fd = -1;
	int r = ws_openat(ws, path, len, O_PATH, 0, &fd);
	if (r >= 0) {
		assert_beneath(fd);
		close(fd);
		/* What opens exists beneath the root: the check must agree. */
		if (check != 0)
			abort();
	} else if (fd != -1) {
		abort();	/* outputs are untouched on failure */
	}

	fd = -1;
	r = ws_openat(ws, path, len, O_RDONLY | O_DIRECTORY, 0, &fd);
	if (r >= 0) {
		assert_beneath(fd);
		close(fd);
	}

	char *name = NULL;
	fd = -1;
	r = ws_open_parent(ws, path, len, false, &fd, &name);
	if (r >= 0) {
		assert_beneath(fd);
		close(fd);
		if (!name || !*name || strchr(name, '/') || str_eq(name, ".") || str_eq(name, ".."))
			abort();
		/* The last component is not followed here (it may be a link
		 * leading out, which the caller resolves beneath the root). */
		free(name);
	} else if (fd != -1 || name) {
		abort();
	}

	struct buf content = {};
	struct stat st;
	r = ws_read(ws, path, len, 0, 64, &content, &st);
	if (r >= 0 && (!S_ISREG(st.st_mode) || buf_size(&content) > 64))
		abort();
	buf_free(&content);

	char *display = ws_display_path(ws, path, len);
	free(display);

	/* Every error maps to a kind and a message. */
	_cleanup_free_ char *cpath = xstrndup(path, strnlen(path, len));
	char *msg = NULL;
	if (check < 0) {
		ws_error(check, cpath, &msg);
		if (!msg || !*msg)
			abort();
		free(msg);
	}

	buf_free(&b);
	if (lowest_free_fd() != fds)
		abort();
	return 0;
}
