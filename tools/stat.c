/* SPDX-License-Identifier: MIT */
/*
 * stat: what a path beneath the workspace is (file, directory, symlink or
 * other), its size, permission bits and modification time, without
 * following a final symlink (its target text is returned instead). It
 * looks as the peer (lib/fsjob/fsjob.h): on an io thread when that takes its
 * identity, else at once.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/utf8.h"
#include "tools/files.h"
#include "tools/tools.h"

static const char *const path_args[] = { "path", NULL };

struct stat_job {
	char *path;
	size_t path_len;
	struct stat st;		/* out */
	char *target;		/* out */
};

static void stat_job_free(void *arg)
{
	struct stat_job *j = arg;
	free(j->path);
	free(j->target);
	free(j);
}

/* As the peer: the status. */
static int stat_job_run(struct fsjob *job, void *arg)
{
	struct stat_job *j = arg;
	return fsjob_lstat(job, j->path, j->path_len, &j->st, &j->target);
}

/* On the loop: the answer. */
static void stat_job_done(struct tool_call *call, void *arg, int r)
{
	struct stat_job *j = arg;
	const char *path = j->path, *target = j->target;
	size_t path_len = j->path_len;
	struct stat st = j->st;
	if (r < 0) {
		_cleanup_free_ char *msg = NULL;
		enum tc_kind kind = ws_error(r, path, &msg);
		if (r == -ENOENT)
			tool_call_fail(call, kind, "'%s' does not exist; use glob or list_dir to find the right path", path);
		else
			tool_call_fail(call, kind, "%s", msg);
		return;
	}
	_cleanup_free_ char *display = ws_display_path(call->ws, path, path_len);
	const char *type = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" :
			   S_ISLNK(st.st_mode) ? "symlink" : "other";
	char mode[8], mtime[32];
	snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
	format_time((uint64_t)st.st_mtim.tv_sec * 1000 + (uint64_t)st.st_mtim.tv_nsec / 1000000, mtime);

	struct buf out = {};
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", display);
	jgen_kv_str(g, "type", type);
	jgen_kv_int(g, "size", (int64_t)st.st_size);
	jgen_kv_str(g, "mode", mode);
	jgen_kv_str(g, "mtime", mtime);
	if (target)
		jgen_kv_str(g, "target", target);
	jgen_obj_close(g);
	jgen_free(g);

	char *text = target ? xasprintf("%s: symlink to %s, modified %s", display, target, mtime)
			    : xasprintf("%s: %s, %lld bytes, mode %s, modified %s", display, type,
					(long long)st.st_size, mode, mtime);
	/* Names and link targets are whatever bytes they hold: shown valid. */
	struct buf t = {};
	utf8_sanitize(text, strlen(text), &t);
	free(text);
	tool_call_succeed(call, buf_steal(&t), buf_steal(&out), false);
}

static const struct fsjob_ops stat_ops = { .run = stat_job_run, .done = stat_job_done, .free = stat_job_free };

/* Runs stat. */
static enum tool_ret stat_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	struct stat_job *j = xcalloc(1, sizeof(*j));
	j->path_len = jpath->u.str.len;
	j->path = xmemdup(jpath->u.str.s, j->path_len + 1);
	/* A stat is quick: no trip to a worker when no identity is taken. */
	int r = fsjob_inline(call, stat_job_run, j);
	if (r != FSJOB_NOT_INLINE) {
		stat_job_done(call, j, r);
		stat_job_free(j);
		return TOOL_DONE;
	}
	return fsjob_start(call, &stat_ops, j);
}

const struct tool_def tool_stat = {
	.name = "stat",
	.description =
		"Tell what a path in the workspace is, without reading it: its type (file, dir, "
		"symlink or other), size in bytes, permission bits (as octal, e.g. \"0644\") and "
		"last modification time (UTC). A symlink is described itself, not followed; its "
		"'target' is the path it points to. Use it to check that a file exists before "
		"editing, or how large it is before reading.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"path\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"Path to describe, relative to the workspace root\"}},"
		"\"required\":[\"path\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_READ,
	.idempotent = true,
	.path_args = path_args,
	.exec = stat_exec,
	.cancel = fsjob_cancel,
};
