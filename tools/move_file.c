/* SPDX-License-Identifier: MIT */
/*
 * move_file: renames a file, symlink or directory to another path beneath
 * the workspace in one atomic step (renameat2), never replacing what is at
 * the destination unless overwrite is set. It acts as the peer
 * (lib/fsjob/fsjob.h), and never moves a protected path (sandbox.protect),
 * a directory holding one at any depth (a nested repository), or anything
 * onto one. A directory is looked through first, off the loop and a part
 * at a time, as a recursive delete_file is: a cancel or the timeout stops
 * the look, and nothing is moved until it has found nothing.
 */
#include <errno.h>
#include <string.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/files.h"
#include "tools/tools.h"

static const char *const path_args[] = { "from", "to", NULL };

/* How long one part of the look through a moved directory goes on (as
 * delete_file's parts). */
#define MOVE_SCAN_PART_MS 5

struct move_job {
	char *from, *to;
	size_t from_len, to_len;
	bool overwrite;
	bool blame_from;	/* out: from is the path that fails */
	bool guarded;		/* both ends checked, the look begun */
	bool unseen;		/* out: from could not be looked through whole */
	struct ws_scan *scan;	/* the look through from, while it goes on */
};

static void move_job_free(void *arg)
{
	struct move_job *j = arg;
	free(j->from);
	free(j->to);
	ws_scan_free(j->scan);
	free(j);
}

/* As the peer: the rename, unless either end is protected or from is a
 * directory holding a protected path; the look through it in parts. */
static int move_job_run(struct fsjob *job, void *arg)
{
	struct move_job *j = arg;
	int r = 0;
	if (!j->guarded) {
		j->guarded = true;
		r = fsjob_guard(job, j->from, j->from_len, FSJOB_TAKE);
		if (r == 0)
			r = fsjob_guard(job, j->to, j->to_len, FSJOB_TAKE);
		if (r == 0)
			r = fsjob_scan_begin(job, j->from, j->from_len, &j->scan);
		if (r < 0)
			return r;
	}
	if (j->scan) {
		r = fsjob_scan_step(job, j->scan, fsjob_on_worker(job) ? MOVE_SCAN_PART_MS : 0);
		if (r == WS_MORE)
			return FSJOB_AGAIN;
		j->unseen = r < 0 && r != -EPERM;
		if (r < 0)
			return r;
		j->scan = ws_scan_free(j->scan);
	}
	/* A .git made beneath from since the look passed its place is moved
	 * along: only the peer's own work, in its workspace, can make one. */
	r = fsjob_rename(job, j->from, j->from_len, j->to, j->to_len, j->overwrite);
	if (r < 0)
		j->blame_from = fsjob_check(job, j->from, j->from_len) < 0;
	return r;
}

/* Fails the call for a negative errno from the rename. */
static void fail_errno(struct tool_call *call, int r, const char *from, const char *to, bool blame_from)
{
	switch (-r) {
	case EEXIST:
	case ENOTEMPTY:
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       r == -EEXIST ? "'%s' already exists; set overwrite to true to replace it, or choose another name"
					    : "'%s' is a directory that is not empty; it cannot be replaced", to);
		return;
	case EBUSY:
		tool_call_fail(call, TC_EXECUTION_ERROR, "The workspace root itself cannot be moved or replaced");
		return;
	case EOPNOTSUPP:
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "'%s' and '%s' are on different file systems, so they cannot be moved atomically; "
			       "copy the file with read_file and write_file, then delete_file the original", from, to);
		return;
	case EINVAL:
		if (strlen(from) != json_get(call->args, "from")->u.str.len ||
		    strlen(to) != json_get(call->args, "to")->u.str.len)
			break;	/* a NUL byte in a path */
		tool_call_fail(call, TC_EXECUTION_ERROR, "'%s' cannot be moved into itself ('%s')", from, to);
		return;
	case EISDIR:
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "'%s' is a directory and '%s' is not; a file cannot replace a directory", to, from);
		return;
	case ENOTDIR:
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "'%s' is a directory and '%s' a file, or a parent of one of them is not a directory", from, to);
		return;
	case ENOENT:
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "'%s' does not exist, or the directory of '%s' does not (make it with make_dir first)", from, to);
		return;
	}
	_cleanup_free_ char *msg = NULL;
	enum tc_kind kind = ws_error(r, blame_from ? from : to, &msg);
	tool_call_fail(call, kind, "%s", msg);
}

/* On the loop: the answer. */
static void move_job_done(struct tool_call *call, void *arg, int r)
{
	struct move_job *j = arg;
	if (r < 0 && j->unseen) {
		_cleanup_free_ char *from = ws_display_path(call->ws, j->from, j->from_len);
		tool_call_fail(call, r == -EACCES ? TC_PERMISSION_DENIED : TC_EXECUTION_ERROR,
			       "'%s' could not be looked through whole for protected paths (%s%s), so it is not "
			       "moved", from, strerror(-r), r == -ELOOP ? ": deeper than 256 levels, or changed meanwhile" : "");
		return;
	}
	if (r < 0) {
		fail_errno(call, r, j->from, j->to, j->blame_from);
		return;
	}
	_cleanup_free_ char *from = ws_display_path(call->ws, j->from, j->from_len);
	_cleanup_free_ char *to = ws_display_path(call->ws, j->to, j->to_len);
	tool_call_note_file(call, from);
	tool_call_note_file(call, to);

	struct buf out = {};
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "from", from);
	jgen_kv_str(g, "to", to);
	jgen_obj_close(g);
	jgen_free(g);
	tool_call_succeed(call, xasprintf("Moved %s to %s", from, to), buf_steal(&out), false);
}

static const struct fsjob_ops move_ops = { .run = move_job_run, .done = move_job_done, .free = move_job_free };

/* Runs move_file. */
static enum tool_ret move_file_exec(struct tool_call *call)
{
	const struct json *jfrom = json_get(call->args, "from"), *jto = json_get(call->args, "to");
	struct move_job *j = xcalloc(1, sizeof(*j));
	j->from_len = jfrom->u.str.len;
	j->from = xmemdup(jfrom->u.str.s, j->from_len + 1);
	j->to_len = jto->u.str.len;
	j->to = xmemdup(jto->u.str.s, j->to_len + 1);
	j->overwrite = json_is_true(json_get(call->args, "overwrite"));
	return fsjob_start(call, &move_ops, j);
}

const struct tool_def tool_move_file = {
	.name = "move_file",
	.description =
		"Move or rename a file, directory or symlink within the workspace, atomically. "
		"Both paths are relative to the workspace root; the destination's directory must "
		"exist (create it with make_dir). An existing destination is an error unless "
		"overwrite is true. A symlink is moved itself, not what it points to. Protected "
		"paths (such as .git/hooks and .git/config) are neither moved nor replaced, nor a "
		"directory that holds one (a repository's .git) at any depth.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"from\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"Path to move, relative to the workspace root\"},"
		"\"to\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"New path, relative to the workspace root\"},"
		"\"overwrite\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Replace an existing file at 'to'\"}},"
		"\"required\":[\"from\",\"to\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_WRITE,
	.idempotent = false,
	.path_args = path_args,
	.exec = move_file_exec,
	.cancel = fsjob_cancel,
};
