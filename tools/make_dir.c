/* SPDX-License-Identifier: MIT */
/*
 * make_dir: creates a directory beneath the workspace, with its missing
 * parents unless parents is false. A directory already there is no error.
 * It acts as the peer (lib/fsjob/fsjob.h), and makes nothing at or beneath a
 * protected path (sandbox.protect).
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

struct mkdir_job {
	char *path;
	size_t path_len;
	bool parents;
	bool created;	/* out */
};

static void mkdir_job_free(void *arg)
{
	struct mkdir_job *j = arg;
	free(j->path);
	free(j);
}

/* As the peer: the directory, unless protected. */
static int mkdir_job_run(struct fsjob *job, void *arg)
{
	struct mkdir_job *j = arg;
	int r = fsjob_guard(job, j->path, j->path_len, FSJOB_MKDIR);
	return r < 0 ? r : fsjob_mkdir(job, j->path, j->path_len, j->parents, &j->created);
}

/* On the loop: the answer. */
static void mkdir_job_done(struct tool_call *call, void *arg, int r)
{
	struct mkdir_job *j = arg;
	const char *path = j->path;
	bool parents = j->parents, created = j->created;
	if (r == -EEXIST) {
		tool_call_fail(call, TC_EXECUTION_ERROR, "'%s' already exists and is not a directory", path);
		return;
	}
	if (r == -ENOENT && !parents) {
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "The parent directory of '%s' does not exist; set parents to true to create it too", path);
		return;
	}
	if (r == -ENOTDIR) {
		tool_call_fail(call, TC_EXECUTION_ERROR, "A parent of '%s' is a file, not a directory", path);
		return;
	}
	if (r < 0) {
		ws_fail_call(call, r, path, NULL);
		return;
	}
	_cleanup_free_ char *display = ws_display_path(call->ws, path, j->path_len);
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
}

static const struct fsjob_ops mkdir_ops = { .run = mkdir_job_run, .done = mkdir_job_done, .free = mkdir_job_free };

/* Runs make_dir. */
static enum tool_ret make_dir_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	const struct json *jparents = json_get(call->args, "parents");
	struct mkdir_job *j = xcalloc(1, sizeof(*j));
	j->path_len = jpath->u.str.len;
	j->path = xmemdup(jpath->u.str.s, j->path_len + 1);
	j->parents = !jparents || json_is_true(jparents);
	return fsjob_start(call, &mkdir_ops, j);
}

const struct tool_def tool_make_dir = {
	.name = "make_dir",
	.description =
		"Create a directory in the workspace, with its missing parent directories (unless "
		"parents is false). A directory that already exists is fine: 'created' is then "
		"false. Files are created by write_file, which needs their directory to exist. "
		"Nothing is made at or beneath a protected path (such as .git/hooks).",
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
	.cancel = fsjob_cancel,
};
