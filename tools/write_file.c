/* SPDX-License-Identifier: MIT */
/*
 * write_file: creates or replaces a file beneath the workspace, atomically
 * (ws_write_atomic: temp file, fsync, rename, fsync of the directory), with
 * the old file's mode kept but for setuid and setgid bits. The write runs on
 * an io thread with the peer's file-system identity (lib/fsjob/fsjob.h).
 */
#include <errno.h>
#include <string.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/workspace.h"
#include "proto/base64.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/files.h"
#include "tools/tools.h"

static const char *const path_args[] = { "path", NULL };

/* True when path names a directory by its form: it ends with '/', "." or "..". */
static bool dir_form(const char *path)
{
	size_t n = strlen(path);
	return (n && path[n - 1] == '/') || str_eq(path, ".") || str_has_suffix(path, "/.") ||
	       str_eq(path, "..") || str_has_suffix(path, "/..");
}

/* Fails the call for a negative errno from the workspace. */
static void fail_errno(struct tool_call *call, int r, const char *path, bool create_dirs)
{
	/* -EISDIR also for a path that names a directory by its form ("a/",
	 * "a/.."), whatever is there. */
	struct ws_hint hints[3] = {
		{ -EISDIR, dir_form(path) ? "'%s' names a directory, not a file (it ends with '/', '.' or '..'); "
					    "give the path of the file to write"
					  : "'%s' is a directory; write_file writes regular files" },
		{ create_dirs ? 0 : -ENOENT,
		  create_dirs ? NULL : "The directory of '%s' does not exist; set create_dirs to true to create it" },
		{ 0, NULL },
	};
	ws_fail_call(call, r, path, hints);
}

/* What a write carries to the io thread and back. */
struct write_job {
	char *path;
	size_t path_len;
	bool create_dirs;
	struct buf data;
	bool created;		/* out */
};

static void write_job_free(void *arg)
{
	struct write_job *j = arg;
	free(j->path);
	buf_free(&j->data);
	free(j);
}

/* On an io thread: replaces the file, unless it is protected. */
static int write_job_run(struct fsjob *job, void *arg)
{
	struct write_job *j = arg;
	int r = fsjob_guard(job, j->path, j->path_len, FSJOB_WRITE);
	if (r < 0)
		return r;
	return fsjob_write_atomic(job, j->path, j->path_len, buf_head(&j->data), buf_size(&j->data),
			       j->create_dirs, &j->created);
}

/* On the loop: says what was written. */
static void write_job_done(struct tool_call *call, void *arg, int r)
{
	struct write_job *j = arg;
	if (r < 0) {
		fail_errno(call, r, j->path, j->create_dirs);
		return;
	}
	_cleanup_free_ char *display = ws_display_path(call->ws, j->path, j->path_len);
	tool_call_note_file(call, display);

	size_t n = buf_size(&j->data);
	struct buf out = {};
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", display);
	jgen_kv_int(g, "bytes", (int64_t)n);
	jgen_kv_bool(g, "created", j->created);
	jgen_obj_close(g);
	jgen_free(g);

	char *text = xasprintf("%s %s (%zu byte%s)", j->created ? "Created" : "Wrote", display, n, n == 1 ? "" : "s");
	tool_call_succeed(call, text, buf_steal(&out), false);
}

static const struct fsjob_ops write_ops = {
	.run = write_job_run,
	.done = write_job_done,
	.free = write_job_free,
};

/* Runs write_file: the write on an io thread, as the peer. */
static enum tool_ret write_file_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	const struct json *jcontent = json_get(call->args, "content");
	const char *path = json_str(jpath);
	size_t path_len = path ? jpath->u.str.len : 0;
	const char *content = json_str(jcontent);
	size_t content_len = content ? jcontent->u.str.len : 0;
	bool create_dirs = json_is_true(json_get(call->args, "create_dirs"));
	bool b64 = str_eq(json_str(json_get(call->args, "encoding")), "base64");

	_cleanup_(buf_free) struct buf decoded = {};
	if (b64) {
		if (base64_decode(content, content_len, &decoded) < 0) {
			tool_call_invalid(call, "content",
					  "not valid base64 (with encoding \"base64\", content must be standard base64)");
			return TOOL_DONE;
		}
		content = buf_head(&decoded);
		content_len = buf_size(&decoded);
	}

	struct write_job *j = xcalloc(1, sizeof(*j));
	j->path_len = path ? path_len : 0;
	j->path = path ? xmemdup(path, path_len + 1) : NULL;
	j->create_dirs = create_dirs;
	if (b64) {
		j->data = decoded;	/* taken whole, no copy */
		decoded = (struct buf){0};
	} else {
		buf_append(&j->data, content, content_len);
	}
	return fsjob_start(call, &write_ops, j);
}

const struct tool_def tool_write_file = {
	.name = "write_file",
	.description =
		"Create a file in the workspace, or replace the whole content of an existing one. "
		"Paths are relative to the workspace root. The write is atomic (readers see the "
		"old or the new file, never a mix) and keeps the file's permissions. Missing "
		"parent directories are an error unless create_dirs is true. For binary data, "
		"pass the bytes in base64 with encoding \"base64\". To change part of a file, "
		"patch_file is safer than rewriting it. Protected paths (such as .git/hooks and "
		".git/config) are never written.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"path\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"File to write, relative to the workspace root (e.g. \\\"src/main.c\\\")\"},"
		"\"content\":{\"type\":\"string\","
		"\"description\":\"The new content of the whole file\"},"
		"\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],\"default\":\"utf8\","
		"\"description\":\"utf8: content is the text; base64: content is the bytes in base64\"},"
		"\"create_dirs\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Create missing parent directories\"}},"
		"\"required\":[\"path\",\"content\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_WRITE,
	.idempotent = true,
	.path_args = path_args,
	.exec = write_file_exec,
	.preview = write_file_preview,
	.cancel = fsjob_cancel,
};
