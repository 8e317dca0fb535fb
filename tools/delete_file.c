/* SPDX-License-Identifier: MIT */
/*
 * delete_file: removes a file, a symlink (never what it points to) or a
 * directory beneath the workspace; a directory with entries only when
 * recursive is set, by a walk that follows no symlink. The workspace root
 * itself is never deleted.
 */
#include <errno.h>
#include <string.h>

#include "lib/workspace.h"
#include "lib/workspace_ops.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/files.h"
#include "tools/tools.h"

static const char *const path_args[] = { "path", NULL };

/* Runs delete_file. */
static enum tool_ret delete_file_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	const char *path = jpath->u.str.s;
	bool recursive = json_is_true(json_get(call->args, "recursive"));

	uint64_t deleted = 0;
	int r = ws_delete(call->ws, path, jpath->u.str.len, recursive, &deleted);
	_cleanup_free_ char *display = ws_display_path(call->ws, path, jpath->u.str.len);
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
		return TOOL_DONE;

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
	return TOOL_DONE;
}

const struct tool_def tool_delete_file = {
	.name = "delete_file",
	.description =
		"Delete a file, symlink or directory in the workspace. A directory that is not "
		"empty is only deleted, with everything in it, when recursive is true. A symlink "
		"is deleted itself; what it points to is never touched. The workspace root cannot "
		"be deleted. 'deleted' counts the files and directories removed.",
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
};
