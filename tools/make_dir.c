/* SPDX-License-Identifier: MIT */
/*
 * make_dir: creates a directory beneath the workspace, with its missing
 * parents unless parents is false. A directory already there is no error.
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

/* Runs make_dir. */
static enum tool_ret make_dir_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	const char *path = jpath->u.str.s;
	const struct json *jparents = json_get(call->args, "parents");
	bool parents = !jparents || json_is_true(jparents);

	bool created = false;
	int r = ws_mkdir(call->ws, path, jpath->u.str.len, parents, &created);
	if (r == -EEXIST) {
		tool_call_fail(call, TC_EXECUTION_ERROR, "'%s' already exists and is not a directory", path);
		return TOOL_DONE;
	}
	if (r == -ENOENT && !parents) {
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "The parent directory of '%s' does not exist; set parents to true to create it too", path);
		return TOOL_DONE;
	}
	if (r == -ENOTDIR) {
		tool_call_fail(call, TC_EXECUTION_ERROR, "A parent of '%s' is a file, not a directory", path);
		return TOOL_DONE;
	}
	if (r < 0) {
		ws_fail_call(call, r, path, NULL);
		return TOOL_DONE;
	}
	_cleanup_free_ char *display = ws_display_path(call->ws, path, jpath->u.str.len);
	if (created)
		tool_call_note_file(call, display);

	struct buf out = {};
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", display);
	jgen_kv_bool(g, "created", created);
	jgen_obj_close(g);
	jgen_free(g);
	char *text = created ? xasprintf("Created directory %s", display)
			     : xasprintf("Directory %s already exists", display);
	tool_call_succeed(call, text, buf_steal(&out), false);
	return TOOL_DONE;
}

const struct tool_def tool_make_dir = {
	.name = "make_dir",
	.description =
		"Create a directory in the workspace, with its missing parent directories (unless "
		"parents is false). A directory that already exists is fine: 'created' is then "
		"false. Files are created by write_file, which needs their directory to exist.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"path\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"Directory to create, relative to the workspace root\"},"
		"\"parents\":{\"type\":\"boolean\",\"default\":true,"
		"\"description\":\"Also create missing parent directories\"}},"
		"\"required\":[\"path\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_WRITE,
	.idempotent = true,
	.path_args = path_args,
	.exec = make_dir_exec,
};
