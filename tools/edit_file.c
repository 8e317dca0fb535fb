/* SPDX-License-Identifier: MIT */
/*
 * edit_file: applies a list of exact-text replacements to one file beneath
 * the workspace, in order, in memory, and writes the result atomically, or
 * nothing at all when one edit cannot be applied. Each 'old' must occur
 * exactly once (unless replace_all) in the text as the edits before it
 * left it. The result carries the unified diff; with dry_run nothing is
 * written, and the confirmation request of a prompting call carries the
 * same diff (edit_file_preview). The read, the edits and the write run on
 * an io thread with the peer's file-system identity (lib/fsjob/fsjob.h), as the
 * other file tools' do.
 */
#include <errno.h>
#include <string.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/files.h"
#include "tools/tools.h"

/* The largest file edited in memory. */
#define EDIT_MAX_BYTES ((size_t)64 << 20)
/* The most diff returned in a result. */
#define EDIT_DIFF_MAX ((size_t)256 << 10)

static const char *const path_args[] = { "path", NULL };

/* One replacement, in the tool's own copy (or pointing into the args, for
 * a preview made on the spot). */
struct edit {
	const char *old, *new;
	size_t old_n, new_n;
	bool all;		/* replace_all */
};

/* The edits of args' "edits" (validated: an array of {old, new}), pointing
 * into args; with copy, into copies of their own (freed by edits_free). */
static struct edit *edits_from_json(const struct json *edits, bool copy)
{
	struct edit *v = xcalloc(edits->u.arr.n ? edits->u.arr.n : 1, sizeof(*v));
	for (size_t i = 0; i < edits->u.arr.n; i++) {
		const struct json *e = edits->u.arr.items[i];
		const struct json *jold = json_get(e, "old"), *jnew = json_get(e, "new");
		v[i] = (struct edit){ jold->u.str.s, jnew->u.str.s, jold->u.str.len, jnew->u.str.len,
				      json_is_true(json_get(e, "replace_all")) };
		if (copy) {
			v[i].old = xmemdup(v[i].old, v[i].old_n + 1);
			v[i].new = xmemdup(v[i].new, v[i].new_n + 1);
		}
	}
	return v;
}

/* Frees edits made with copy. */
static void edits_free(struct edit *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free((char *)v[i].old);
		free((char *)v[i].new);
	}
	free(v);
}

/* Counts the occurrences of needle in hay: overlapping ones too, unless all (then as replaced). */
static size_t count_occurrences(const char *hay, size_t n, const char *needle, size_t m, bool all)
{
	size_t count = 0;
	const char *p = hay, *end = hay + n;
	while (p < end && (p = memmem(p, (size_t)(end - p), needle, m))) {
		count++;
		p += all ? m : 1;
	}
	return count;
}

/*
 * Applies the edits to text (n bytes) into *out; *ret_replacements counts
 * the places replaced. On failure, an execution_error message for the
 * model in *ret_err and its occurrences data in *ret_data.
 */
static int apply_edits(const char *text, size_t n, const struct edit *edits, size_t n_edits, const char *display,
		       struct buf *out, size_t *ret_replacements, char **ret_err, char **ret_data)
{
	struct buf cur = {}, next = {};
	size_t total = 0;
	buf_append(&cur, text, n);
	for (size_t i = 0; i < n_edits; i++) {
		bool all = edits[i].all;
		const char *old = edits[i].old, *new = edits[i].new;
		size_t old_n = edits[i].old_n, new_n = edits[i].new_n;
		const char *hay = buf_head(&cur);
		size_t hay_n = buf_size(&cur);
		size_t count = old_n ? count_occurrences(hay, hay_n, old, old_n, all) : 0;
		_cleanup_free_ char *where = n_edits > 1 ? xasprintf("edit %zu of %zu: ", i + 1, n_edits) : xstrdup("");
		if (old_n == 0) {
			*ret_err = xasprintf("In %s, %s'old' is empty; give the exact text to replace", where, display);
			*ret_data = NULL;
		} else if (count == 0) {
			*ret_err = xasprintf("In %s, %s'old' was not found (it occurs 0 times%s); read the file and copy "
					     "the text exactly, whitespace and indentation included. No edit was applied",
					     display, where, i ? " after the edits before it" : "");
			*ret_data = xasprintf("{\"edit\":%zu,\"occurrences\":0}", i);
		} else if (count > 1 && !all) {
			*ret_err = xasprintf("In %s, %s'old' occurs %zu times; include more surrounding text so it "
					     "occurs exactly once, or set replace_all to replace every one. No edit was "
					     "applied", display, where, count);
			*ret_data = xasprintf("{\"edit\":%zu,\"occurrences\":%zu}", i, count);
		}
		if (old_n == 0 || count == 0 || (count > 1 && !all)) {
			buf_free(&cur);
			buf_free(&next);
			return -EINVAL;
		}

		buf_clear(&next);
		const char *p = hay, *end = hay + hay_n;
		for (size_t k = 0; k < (all ? count : 1); k++) {
			const char *m = memmem(p, (size_t)(end - p), old, old_n);
			buf_append(&next, p, (size_t)(m - p));
			buf_append(&next, new, new_n);
			p = m + old_n;
		}
		buf_append(&next, p, (size_t)(end - p));
		total += all ? count : 1;
		struct buf t = cur;
		cur = next;
		next = t;
		if (buf_size(&cur) > EDIT_MAX_BYTES) {
			*ret_err = xasprintf("The edits make %s larger than %zu MiB; no edit was applied",
					     display, EDIT_MAX_BYTES >> 20);
			*ret_data = NULL;
			buf_free(&cur);
			buf_free(&next);
			return -EFBIG;
		}
	}
	buf_free(&next);
	*out = cur;
	*ret_replacements = total;
	return 0;
}

/* Reads the file to edit: 0, or a negative errno (-EFBIG: too large). */
static int read_target(const struct fsjob *job, const char *path, size_t path_len, struct buf *data)
{
	int r = fsjob_read(job, path, path_len, 0, EDIT_MAX_BYTES + 1, data, NULL);
	if (r == 0 && buf_size(data) > EDIT_MAX_BYTES)
		r = -EFBIG;
	return r;
}

/* Fails call for read_target's error r. */
static void fail_read(struct tool_call *call, int r, const char *path)
{
	if (r == -EISDIR)
		tool_call_fail(call, TC_EXECUTION_ERROR, "'%s' is a directory; edit_file edits regular files", path);
	else if (r == -ENOENT)
		tool_call_fail(call, TC_EXECUTION_ERROR, "File '%s' not found; to create a file, use write_file", path);
	else if (r == -EFBIG)
		tool_call_fail(call, TC_EXECUTION_ERROR, "'%s' is larger than %zu MiB, too large for edit_file", path,
			       EDIT_MAX_BYTES >> 20);
	else
		ws_fail_call(call, r, path, NULL);
}

/* What an edit carries to the io thread and back. */
struct edit_job {
	char *path;
	size_t path_len;
	char *display;
	struct edit *edits;
	size_t n_edits;
	bool dry_run;
	bool writing;		/* out: the error came from the write */
	char *err, *err_data;	/* out: an edit could not be applied */
	char *diff;		/* out */
	size_t replacements;	/* out */
};

static void edit_job_free(void *arg)
{
	struct edit_job *j = arg;
	free(j->path);
	free(j->display);
	edits_free(j->edits, j->n_edits);
	free(j->err);
	free(j->err_data);
	free(j->diff);
	free(j);
}

/* On an io thread: reads the file, applies the edits and, unless a dry
 * run, writes the result. */
static int edit_job_run(struct fsjob *job, void *arg)
{
	struct edit_job *j = arg;
	_cleanup_(buf_free) struct buf data = {}, edited = {};
	int r = read_target(job, j->path, j->path_len, &data);
	if (r < 0)
		return r;
	if (apply_edits(buf_head(&data), buf_size(&data), j->edits, j->n_edits, j->display, &edited,
			&j->replacements, &j->err, &j->err_data) < 0)
		return 0;
	j->diff = file_diff(j->display, buf_head(&data), buf_size(&data), buf_head(&edited), buf_size(&edited),
			    EDIT_DIFF_MAX, NULL);
	if (j->dry_run || fsjob_cancelled(job))
		return 0;
	r = fsjob_guard(job, j->path, j->path_len, FSJOB_WRITE);
	if (r < 0)
		return r;
	buf_free(&data);	/* not both copies of a large file at once */
	j->writing = true;
	return fsjob_write_atomic(job, j->path, j->path_len, buf_head(&edited), buf_size(&edited), false, NULL);
}

/* On the loop: says what was done, or why not. */
static void edit_job_done(struct tool_call *call, void *arg, int r)
{
	struct edit_job *j = arg;
	if (r < 0 && !j->writing) {
		fail_read(call, r, j->path);
		return;
	}
	if (r < 0) {
		_cleanup_free_ char *msg = NULL;
		enum tc_kind kind = ws_error(r, j->path, &msg);
		tool_call_fail(call, kind, "%s; no edit was applied", msg);
		return;
	}
	if (j->err) {
		tool_call_fail_data(call, TC_EXECUTION_ERROR, TAKE_PTR(j->err_data), "%s", j->err);
		return;
	}
	if (!j->dry_run)
		tool_call_note_file(call, j->display);

	struct buf out = {};
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", j->display);
	jgen_kv_int(g, "replacements", (int64_t)j->replacements);
	jgen_kv_str(g, "diff", j->diff);
	if (j->dry_run)
		jgen_kv_bool(g, "dry_run", true);
	jgen_obj_close(g);
	jgen_free(g);

	struct buf text = {};
	buf_printf(&text, "%s %zu replacement%s in %s%s\n", j->dry_run ? "Would make" : "Made", j->replacements,
		   j->replacements == 1 ? "" : "s", j->display, j->dry_run ? " (dry run: nothing was written)" : "");
	buf_puts(&text, *j->diff ? j->diff : "(the file is unchanged)\n");
	tool_call_succeed(call, buf_steal(&text), buf_steal(&out), false);
}

static const struct fsjob_ops edit_ops = {
	.run = edit_job_run,
	.done = edit_job_done,
	.free = edit_job_free,
};

/* Runs edit_file: the read, the edits and the write on an io thread, as the peer. */
static enum tool_ret edit_file_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	const struct json *edits = json_get(call->args, "edits");
	struct edit_job *j = xcalloc(1, sizeof(*j));
	j->path_len = jpath->u.str.len;
	j->path = xmemdup(jpath->u.str.s, j->path_len + 1);
	j->display = ws_display_path(call->ws, j->path, j->path_len);
	j->n_edits = edits->u.arr.n;
	j->edits = edits_from_json(edits, true);
	j->dry_run = json_is_true(json_get(call->args, "dry_run"));
	return fsjob_start(call, &edit_ops, j);
}

/* The diff a call would make, for its confirmation request. */
static char *edit_file_preview(const struct json *args, const struct fsjob *job)
{
	const struct json *jpath = json_get(args, "path"), *edits = json_get(args, "edits");
	if (!fsjob_ws(job) || !json_str(jpath) || !edits || edits->type != JSON_ARRAY)
		return NULL;
	_cleanup_(buf_free) struct buf data = {}, edited = {};
	if (read_target(job, jpath->u.str.s, jpath->u.str.len, &data) < 0)
		return NULL;
	_cleanup_free_ char *display = ws_display_path(fsjob_ws(job), jpath->u.str.s, jpath->u.str.len);
	size_t replacements;
	_cleanup_free_ char *err = NULL, *err_data = NULL;
	_cleanup_free_ struct edit *v = edits_from_json(edits, false);
	if (apply_edits(buf_head(&data), buf_size(&data), v, edits->u.arr.n, display, &edited, &replacements, &err,
			&err_data) < 0)
		return NULL;
	return file_diff(display, buf_head(&data), buf_size(&data), buf_head(&edited), buf_size(&edited),
			 TOOL_PREVIEW_MAX, NULL);
}

const struct tool_def tool_edit_file = {
	.name = "edit_file",
	.description =
		"Edit a file in the workspace by replacing exact pieces of text. 'edits' is a list of "
		"{old, new} applied in order, each to the text the previous ones left: 'old' must "
		"occur exactly once, matched byte for byte (whitespace and indentation included), "
		"unless replace_all is true (then every occurrence is replaced). If any edit cannot "
		"be applied, none is and the file is untouched; the error says which edit failed "
		"and how many times its 'old' occurs. The file is rewritten atomically, keeping its "
		"permissions. The result has the unified diff of the change; with dry_run the diff "
		"is returned and nothing is written. To create a file, use write_file. Protected "
		"paths (such as .git/hooks and .git/config) are never written.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"path\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"File to edit, relative to the workspace root\"},"
		"\"edits\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":1000,"
		"\"description\":\"Replacements to make, in order\","
		"\"items\":{\"type\":\"object\","
		"\"properties\":{"
		"\"old\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"The exact text to replace; must occur exactly once unless replace_all\"},"
		"\"new\":{\"type\":\"string\",\"description\":\"The text to put in its place\"},"
		"\"replace_all\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Replace every occurrence of old\"}},"
		"\"required\":[\"old\",\"new\"],"
		"\"additionalProperties\":false}},"
		"\"dry_run\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Return the diff without writing the file\"}},"
		"\"required\":[\"path\",\"edits\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_WRITE,
	.idempotent = false,
	.path_args = path_args,
	.exec = edit_file_exec,
	.cancel = fsjob_cancel,
	.preview = edit_file_preview,
};
