/* SPDX-License-Identifier: MIT */
/*
 * The diffs the file tools show: what replacing a file's content would change, as a
 * unified diff with "a/" and "b/" labels, cut at a size bound, for
 * edit_file's result and the confirmation previews of edit_file and
 * write_file.
 */
#include "tools/files.h"

#include <errno.h>
#include <string.h>

#include "lib/diff/diff.h"
#include "lib/fsjob/fsjob.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/utf8.h"

/* Files larger than this are not diffed for a preview. */
#define PREVIEW_FILE_MAX ((size_t)16 << 20)

char *file_diff(const char *display, const char *old, size_t old_n, const char *new, size_t new_n, size_t cap,
		bool *ret_cut)
{
	_cleanup_free_ char *la = xasprintf("a/%s", display), *lb = xasprintf("b/%s", display);
	struct buf d = {};
	diff_unified(old, old_n, new, new_n, la, lb, 3, &d, NULL);
	bool cut = false;
	if (cap && buf_size(&d) > cap) {
		/* Cut at a line end, then say so. */
		size_t n = cap, whole = buf_size(&d);
		while (n > 0 && buf_head(&d)[n - 1] != '\n')
			n--;
		d.len = d.off + n;
		buf_printf(&d, "[diff cut: %zu of its %zu bytes shown; read_file shows the file itself]\n", n, whole);
		cut = true;
	}
	if (ret_cut)
		*ret_cut = cut;
	/* Text of any bytes: the diff is shown valid. */
	struct buf out = {};
	utf8_sanitize(buf_head(&d), buf_size(&d), &out);
	buf_free(&d);
	return buf_steal(&out);
}

char *file_replace_preview(const struct fsjob *job, const char *path, size_t path_len, const char *new,
			   size_t new_n)
{
	_cleanup_(buf_free) struct buf old = {};
	int r = fsjob_read(job, path, path_len, 0, PREVIEW_FILE_MAX + 1, &old, NULL);
	if (r < 0 || buf_size(&old) > PREVIEW_FILE_MAX || new_n > PREVIEW_FILE_MAX)
		return NULL;	/* a new file, or one too large to show */
	_cleanup_free_ char *display = ws_display_path(fsjob_ws(job), path, path_len);
	return file_diff(display, buf_head(&old), buf_size(&old), new, new_n, TOOL_PREVIEW_MAX, NULL);
}

char *write_file_preview(const struct json *args, const struct fsjob *job)
{
	const struct json *jpath = json_get(args, "path"), *jcontent = json_get(args, "content");
	if (!fsjob_ws(job) || !json_str(jpath) || !json_str(jcontent) ||
	    str_eq(json_str(json_get(args, "encoding")), "base64"))
		return NULL;
	return file_replace_preview(job, jpath->u.str.s, jpath->u.str.len, jcontent->u.str.s, jcontent->u.str.len);
}
