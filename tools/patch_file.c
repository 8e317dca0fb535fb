/* SPDX-License-Identifier: MIT */
/*
 * patch_file: replaces the one occurrence of a string in a file beneath the
 * workspace (str_replace style) and writes the result atomically. Zero or
 * several occurrences fail, saying how many there are, so the model can
 * widen its context instead of editing the wrong place. The read and the
 * write run on an io thread with the peer's file-system identity
 * (lib/fsjob/fsjob.h).
 */
#include <errno.h>
#include <string.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/tools.h"

/* The largest file patched in memory. */
#define PATCH_MAX_BYTES ((size_t)64 << 20)

static const char *const path_args[] = { "path", NULL };

static const struct ws_hint patch_hints[] = {
	{ -EISDIR, "'%s' is a directory; patch_file edits regular files" },
	{ 0, NULL },
};

/* Counts the occurrences of needle in hay, overlapping ones included (they make the edit ambiguous too). */
static size_t count_occurrences(const char *hay, size_t n, const char *needle, size_t m, const char **ret_first)
{
	size_t count = 0;
	const char *p = hay, *end = hay + n;

	*ret_first = NULL;
	while (p < end && (p = memmem(p, (size_t)(end - p), needle, m))) {
		if (!count)
			*ret_first = p;
		count++;
		p++;
	}
	return count;
}

/* What a patch carries to the io thread and back. */
struct patch_job {
	char *path;
	size_t path_len;
	char *old, *new;
	size_t old_len, new_len;
	bool too_large;		/* out: the file is over PATCH_MAX_BYTES */
	size_t count;		/* out: occurrences of old */
};

static void patch_job_free(void *arg)
{
	struct patch_job *j = arg;
	free(j->path);
	free(j->old);
	free(j->new);
	free(j);
}

/* On an io thread: reads the file, and when old occurs once, writes it
 * patched; a protected one is not touched. */
static int patch_job_run(struct fsjob *job, void *arg)
{
	struct patch_job *j = arg;
	_cleanup_(buf_free) struct buf data = {};
	int r = fsjob_guard(job, j->path, j->path_len, FSJOB_WRITE);
	if (r < 0)
		return r;
	r = fsjob_read(job, j->path, j->path_len, 0, PATCH_MAX_BYTES + 1, &data, NULL);
	if (r < 0)
		return r;
	if (buf_size(&data) > PATCH_MAX_BYTES) {
		j->too_large = true;
		return 0;
	}
	const char *hay = buf_head(&data), *first;
	size_t n = buf_size(&data);
	j->count = count_occurrences(hay, n, j->old, j->old_len, &first);
	if (j->count != 1 || fsjob_cancelled(job))
		return 0;

	_cleanup_(buf_free) struct buf patched = {};
	size_t at = (size_t)(first - hay);
	buf_reserve(&patched, n - j->old_len + j->new_len + 1);
	buf_append(&patched, hay, at);
	buf_append(&patched, j->new, j->new_len);
	buf_append(&patched, hay + at + j->old_len, n - at - j->old_len);
	buf_free(&data);	/* not both copies of a large file at once */
	return fsjob_write_atomic(job, j->path, j->path_len, buf_head(&patched), buf_size(&patched), false, NULL);
}

/* On the loop: says what was done, or why not. */
static void patch_job_done(struct tool_call *call, void *arg, int r)
{
	struct patch_job *j = arg;
	if (r < 0) {
		ws_fail_call(call, r, j->path, patch_hints);
		return;
	}
	_cleanup_free_ char *display = ws_display_path(call->ws, j->path, j->path_len);
	if (j->too_large) {
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "'%s' is larger than %zu MiB, too large for patch_file; use shell tools to edit it",
			       display, PATCH_MAX_BYTES >> 20);
		return;
	}
	if (j->count == 0) {
		tool_call_fail_data(call, TC_EXECUTION_ERROR, xstrdup("{\"occurrences\":0}"),
				    "'old' was not found in %s (it occurs 0 times; it must occur exactly once); "
				    "read the file and copy the text exactly, whitespace and indentation included",
				    display);
		return;
	}
	if (j->count > 1) {
		tool_call_fail_data(call, TC_EXECUTION_ERROR, xasprintf("{\"occurrences\":%zu}", j->count),
				    "'old' occurs %zu times in %s; include more context so it occurs exactly once",
				    j->count, display);
		return;
	}
	tool_call_note_file(call, display);

	struct buf out = {};
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", display);
	jgen_kv_int(g, "replacements", 1);
	jgen_obj_close(g);
	jgen_free(g);

	tool_call_succeed(call, xasprintf("Replaced 1 occurrence in %s", display), buf_steal(&out), false);
}

static const struct fsjob_ops patch_ops = {
	.run = patch_job_run,
	.done = patch_job_done,
	.free = patch_job_free,
};

/* Runs patch_file: the read and the write on an io thread, as the peer. */
static enum tool_ret patch_file_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	const struct json *jold = json_get(call->args, "old");
	const struct json *jnew = json_get(call->args, "new");
	const char *path = json_str(jpath);
	const char *old = json_str(jold), *new = json_str(jnew);
	size_t old_len = old ? jold->u.str.len : 0;

	if (old_len == 0) {
		/* The schema asks for minLength 1; this guards direct callers. */
		tool_call_invalid(call, "old", "must not be empty");
		return TOOL_DONE;
	}
	struct patch_job *j = xcalloc(1, sizeof(*j));
	j->path_len = path ? jpath->u.str.len : 0;
	j->path = path ? xmemdup(path, j->path_len + 1) : NULL;
	j->old_len = old_len;
	j->old = xmemdup(old, old_len + 1);
	j->new_len = new ? jnew->u.str.len : 0;
	j->new = xmemdup(new ? new : "", j->new_len + 1);
	return fsjob_start(call, &patch_ops, j);
}

const struct tool_def tool_patch_file = {
	.name = "patch_file",
	.description =
		"Edit a file in the workspace by replacing one exact piece of text: 'old' must "
		"occur exactly once in the file, matched byte for byte (whitespace and "
		"indentation included), and is replaced by 'new'. If 'old' occurs several "
		"times, include more surrounding lines so it is unique; if it is not found, "
		"read the file again. Paths are relative to the workspace root. The file is "
		"rewritten atomically and keeps its permissions. Protected paths (such as "
		".git/hooks and .git/config) are never patched.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"path\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"File to edit, relative to the workspace root\"},"
		"\"old\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"The exact text to replace; must occur exactly once\"},"
		"\"new\":{\"type\":\"string\","
		"\"description\":\"The text to put in its place\"}},"
		"\"required\":[\"path\",\"old\",\"new\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_WRITE,
	.idempotent = false,
	.path_args = path_args,
	.exec = patch_file_exec,
	.cancel = fsjob_cancel,
};
