/* SPDX-License-Identifier: MIT */
/*
 * delete_file: removes a file, a symlink (never what it points to) or a
 * directory beneath the workspace; a directory with entries only when
 * recursive is set, by a walk that follows no symlink. The workspace root
 * itself is never deleted, nor a protected path (sandbox.protect) or a
 * directory holding one at any depth (a nested repository's .git): the
 * tree is looked through before the first entry goes. It acts as the peer on an io thread (lib/fsjob/fsjob.h),
 * a large tree a part at a time: a cancel or the timeout stops it between
 * parts, with what was deleted so far counted.
 */
#include <errno.h>
#include <string.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/files.h"
#include "tools/tools.h"

static const char *const path_args[] = { "path", NULL };

/* How long one part of a recursive delete goes on before the worker gives
 * way (to other jobs, and to a cancel). Short: beside a delete of 300,000
 * entries (tc-bench, stall), other clients' ping p99 measured 5 ms with
 * 5 ms parts and 14 ms with 20 ms ones on the same loaded machine. */
#define DELETE_PART_MS 5

struct delete_job {
	char *path;
	size_t path_len;
	bool recursive;
	struct ws_deleter *del;	/* once begun */
};

static void delete_job_free(void *arg)
{
	struct delete_job *j = arg;
	free(j->path);
	ws_delete_free(j->del);
	free(j);
}

/* As the peer: the first part, then the next ones. */
static int delete_job_run(struct fsjob *job, void *arg)
{
	struct delete_job *j = arg;
	if (!j->del) {
		int r = fsjob_guard(job, j->path, j->path_len, FSJOB_TAKE);
		if (r < 0)
			return r;
		r = fsjob_delete_begin(job, j->path, j->path_len, j->recursive, &j->del);
		if (r != WS_MORE)
			return r;
	}
	int r = fsjob_delete_step(job, j->del, fsjob_on_worker(job) ? DELETE_PART_MS : 0);
	return r == WS_MORE ? FSJOB_AGAIN : r;
}

/* On the loop: the answer. */
static void delete_job_done(struct tool_call *call, void *arg, int r)
{
	struct delete_job *j = arg;
	const char *path = j->path;
	bool recursive = j->recursive;
	uint64_t deleted = ws_delete_count(j->del);
	_cleanup_free_ char *display = ws_display_path(call->ws, path, j->path_len);
	if (deleted)
		tool_call_note_file(call, display);
	if (r == -ENOTEMPTY && !recursive) {
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "'%s' is a directory that is not empty; set recursive to true to delete it "
			       "with everything in it", display);
	} else if (r == -EBUSY) {
		tool_call_fail(call, TC_PERMISSION_DENIED, "The workspace root itself cannot be deleted");
	} else if (r == -EISDIR) {
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "'%s' names a directory through '.' or '..'; give its path without them", path);
	} else if (r == -ENOENT && !deleted) {
		tool_call_fail(call, TC_EXECUTION_ERROR, "'%s' does not exist (nothing was deleted)", path);
	} else if (r < 0) {
		_cleanup_free_ char *msg = NULL;
		enum tc_kind kind = ws_error(r, path, &msg);
		if (deleted)
			tool_call_fail_data(call, kind, xasprintf("{\"deleted\":%llu}", (unsigned long long)deleted),
					    "%s (after %llu entries were deleted)", msg, (unsigned long long)deleted);
		else
			tool_call_fail(call, kind, "%s", msg);
	}
	if (r < 0)
		return;

	struct buf out = {};
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", display);
	jgen_kv_int(g, "deleted", (int64_t)deleted);
	jgen_obj_close(g);
	jgen_free(g);
	char *text = deleted > 1 ? xasprintf("Deleted %s (%llu entries)", display, (unsigned long long)deleted)
				 : xasprintf("Deleted %s", display);
	tool_call_succeed(call, text, buf_steal(&out), false);
}

static const struct fsjob_ops delete_ops = {
	.run = delete_job_run,
	.done = delete_job_done,
	.free = delete_job_free,
};

/* Runs delete_file. */
static enum tool_ret delete_file_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	struct delete_job *j = xcalloc(1, sizeof(*j));
	j->path_len = jpath->u.str.len;
	j->path = xmemdup(jpath->u.str.s, j->path_len + 1);
	j->recursive = json_is_true(json_get(call->args, "recursive"));
	return fsjob_start(call, &delete_ops, j);
}

const struct tool_def tool_delete_file = {
	.name = "delete_file",
	.description =
		"Delete a file, symlink or directory in the workspace. A directory that is not "
		"empty is only deleted, with everything in it, when recursive is true. A symlink "
		"is deleted itself; what it points to is never touched. The workspace root cannot "
		"be deleted, nor a protected path (such as .git/hooks or .git/config) or a directory "
		"that holds one (a repository's .git) at any depth; then nothing is deleted. "
		"'deleted' counts the files and directories removed.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"path\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"Path to delete, relative to the workspace root\"},"
		"\"recursive\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Also delete a directory that is not empty, and all it holds\"}},"
		"\"required\":[\"path\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_WRITE,
	.idempotent = false,
	.path_args = path_args,
	.exec = delete_file_exec,
	.cancel = fsjob_cancel,
};
