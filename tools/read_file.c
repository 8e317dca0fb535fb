/* SPDX-License-Identifier: MIT */
/*
 * read_file: returns a window of a regular file beneath the workspace, as
 * UTF-8 text or as base64. Text is never mangled: bytes that are not UTF-8
 * fail with a message pointing at base64, and a window that would cut a
 * multibyte character ends before it instead. The read runs on an io
 * thread with the peer's file-system identity (lib/fsjob.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/fsjob.h"
#include "lib/workspace.h"
#include "proto/base64.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/tools.h"

#define DEFAULT_READ_CAP ((size_t)1 << 20)
/* The largest file read by lines: it is scanned whole to count them. */
#define LINES_MAX_BYTES ((size_t)64 << 20)

static const char *const path_args[] = { "path", NULL };

static const struct ws_hint read_hints[] = {
	{ -EISDIR, "'%s' is a directory, use list_dir to see its entries" },
	{ 0, NULL },
};

static bool is_cont(unsigned char c)
{
	return (c & 0xC0) == 0x80;
}

/* Length of the UTF-8 sequence a lead byte starts (1 for anything else). */
static size_t seq_len(unsigned char c)
{
	return c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

/*
 * Chooses how many of the got bytes to return as text when at most limit
 * were asked for: a character the limit would cut is left for the next
 * read, unless it is the first one (then it is returned whole, so that a
 * reader advancing by what it got always makes progress).
 */
static size_t text_window(const unsigned char *d, size_t got, size_t limit)
{
	size_t n = utf8_cut((const char *)d, got, limit);
	if (n > 0 || got <= limit)
		return n;
	size_t first = seq_len(d[0]);
	return first <= got ? first : limit;
}

struct line_window {
	int64_t first_line;	/* 0: a window by bytes */
	size_t total_lines;
};

/*
 * Reads the lines [line, line + lines) of the file whole into *data, cut to
 * limit + 4 bytes as a read by bytes would be, and returns their byte
 * offset in *ret_offset.
 */
static int read_lines(const struct fsjob *job, const char *path, size_t path_len, int64_t line, int64_t lines,
		      size_t limit, struct buf *data, struct stat *st, uint64_t *ret_offset, struct line_window *w)
{
	_cleanup_(buf_free) struct buf all = {};
	int r = fsjob_read(job, path, path_len, 0, LINES_MAX_BYTES + 1, &all, st);
	if (r < 0)
		return r;
	if (buf_size(&all) > LINES_MAX_BYTES)
		return -EFBIG;
	const char *s = buf_head(&all), *end = s + buf_size(&all);
	size_t start = buf_size(&all), stop = buf_size(&all), count = 0;
	for (const char *p = s; p < end; count++) {
		if ((int64_t)count + 1 == line)
			start = (size_t)(p - s);
		if (lines > 0 && (int64_t)count + 1 == line + lines)
			stop = (size_t)(p - s);
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		p = nl ? nl + 1 : end;
	}
	if (stop < start)
		stop = start;
	buf_append(data, s + start, MIN(stop - start, limit + 4));
	*ret_offset = start;
	w->first_line = line;
	w->total_lines = count;
	return 0;
}

/* What a read carries to the io thread and back. */
struct read_job {
	char *path;
	size_t path_len;
	uint64_t offset;	/* in; out for a read by lines: where they start */
	size_t limit;
	bool b64;
	int64_t line, lines;	/* line > 0: a window by lines */
	struct line_window w;	/* out */
	struct buf data;	/* out: up to limit + 4 bytes from offset */
	struct stat st;		/* out */
};

static void read_job_free(void *arg)
{
	struct read_job *j = arg;
	free(j->path);
	buf_free(&j->data);
	free(j);
}

/* On an io thread: reads the window. Up to 4 bytes beyond the limit: one
 * tells whether more follows, the rest complete a character that
 * straddles the limit. */
static int read_job_run(struct fsjob *job, void *arg)
{
	struct read_job *j = arg;
	if (j->line > 0)
		return read_lines(job, j->path, j->path_len, j->line, j->lines, j->limit, &j->data,
				  &j->st, &j->offset, &j->w);
	return fsjob_read(job, j->path, j->path_len, j->offset, j->limit + 4, &j->data, &j->st);
}

/* On the loop, when no identity is to be taken: a small file at once. */
static int read_small_run(struct fsjob *job, void *arg)
{
	struct read_job *j = arg;
	return fsjob_read_small(job, j->path, j->path_len, j->offset, j->limit + 4, FSJOB_INLINE_BYTES, &j->data,
				&j->st);
}

/* The MIME type of an image format the model can be shown (PNG, JPEG,
 * GIF, WebP), told by its first bytes; NULL for anything else. */
static const char *image_mime(const unsigned char *d, size_t n)
{
	if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
		return "image/png";
	if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff)
		return "image/jpeg";
	if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
		return "image/gif";
	if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
		return "image/webp";
	return NULL;
}

/* On the loop: turns the bytes read into the call's result. */
static void read_job_done(struct tool_call *call, void *arg, int r)
{
	struct read_job *j = arg;
	if (r == -EFBIG && j->line > 0) {
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "'%s' is larger than %zu MiB, too large to read by lines; read it by bytes with 'offset' "
			       "and 'limit' instead", j->path, LINES_MAX_BYTES >> 20);
		return;
	}
	if (r < 0) {
		ws_fail_call(call, r, j->path, read_hints);
		return;
	}

	const unsigned char *d = (const unsigned char *)buf_head(&j->data);
	size_t got = buf_size(&j->data), n, limit = j->limit;
	uint64_t offset = j->offset;
	_cleanup_free_ char *display = ws_display_path(call->ws, j->path, j->path_len);
	_cleanup_(buf_free) struct buf content = {};

	if (j->b64) {
		n = MIN(got, limit);
		base64_encode(d, n, &content);
	} else {
		if (offset > 0 && got > 0 && is_cont(d[0])) {
			tool_call_fail(call, TC_EXECUTION_ERROR,
				       "Offset %llu of '%s' falls inside a multibyte UTF-8 character; "
				       "use the offset of a character boundary, or encoding \"base64\"",
				       (unsigned long long)offset, display);
			return;
		}
		n = text_window(d, got, limit);
		/* NUL bytes are valid UTF-8 but mark binary data, and would cut
		 * the text content short. */
		if (!utf8_valid((const char *)d, n) || memchr(d, 0, n)) {
			tool_call_fail(call, TC_EXECUTION_ERROR,
				       "'%s' is not UTF-8 text (it holds invalid UTF-8 or NUL bytes); "
				       "read it with encoding \"base64\"", display);
			return;
		}
		/* The text is what was read, cut at n: keep the buffer rather
		 * than copy it. */
		j->data.len = j->data.off + n;
		content = j->data;
		j->data = (struct buf){0};
	}
	bool truncated = got > n;
	/* A whole image in base64 is shown as one: MCP image content. */
	const char *mime = j->b64 && offset == 0 && !truncated && j->line <= 0 ? image_mime(d, n) : NULL;

	/* Quoted once, used twice: in structuredContent and as the text. The
	 * content is valid UTF-8 here (checked above, or base64). */
	struct buf quoted = {0};
	json_quote(&quoted, buf_head(&content), buf_size(&content));
	struct buf out = {};
	buf_reserve(&out, buf_size(&quoted) + strlen(display) + 160);
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", display);
	jgen_key(g, "content");
	jgen_raw(g, buf_head(&quoted), buf_size(&quoted));
	jgen_kv_int(g, "size", (int64_t)j->st.st_size);
	jgen_kv_bool(g, "truncated", truncated);
	jgen_kv_str(g, "encoding", j->b64 ? "base64" : "utf8");
	if (mime)
		jgen_kv_str(g, "mimeType", mime);
	if (truncated)
		jgen_kv_int(g, "next_offset", (int64_t)(offset + n));
	if (j->w.first_line) {
		jgen_kv_int(g, "first_line", j->w.first_line);
		jgen_kv_int(g, "total_lines", (int64_t)j->w.total_lines);
	}
	jgen_obj_close(g);
	jgen_free(g);

	if (mime) {
		struct buf items = {0};
		buf_reserve(&items, buf_size(&quoted) + 64);
		buf_puts(&items, "[{\"type\":\"image\",\"data\":");
		buf_append(&items, buf_head(&quoted), buf_size(&quoted));
		buf_printf(&items, ",\"mimeType\":\"%s\"}]", mime);
		tool_call_set_content(call, buf_steal(&items));
	}
	tool_call_succeed(call, buf_steal(&content), buf_steal(&out), false);
	tool_call_set_text_json(call, buf_steal(&quoted));
}

static const struct fsjob_ops read_ops = {
	.run = read_job_run,
	.done = read_job_done,
	.free = read_job_free,
};

/* Runs read_file: the read on an io thread, as the peer. */
static enum tool_ret read_file_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	const char *path = json_str(jpath);
	int64_t v;

	struct read_job *j = xcalloc(1, sizeof(*j));
	j->path_len = path ? jpath->u.str.len : 0;
	j->path = path ? xmemdup(path, j->path_len + 1) : NULL;
	if (json_get_int(json_get(call->args, "offset"), &v) && v > 0)
		j->offset = (uint64_t)v;
	j->limit = call->env && call->env->read_cap ? call->env->read_cap : DEFAULT_READ_CAP;
	if (json_get_int(json_get(call->args, "limit"), &v) && v > 0)
		j->limit = (size_t)v;
	j->limit = MIN(j->limit, SIZE_MAX / 2);	/* room for the bytes read beyond it */
	j->b64 = str_eq(json_str(json_get(call->args, "encoding")), "base64");
	json_get_int(json_get(call->args, "line"), &j->line);
	json_get_int(json_get(call->args, "lines"), &j->lines);
	if (j->lines > 0 && j->line <= 0)
		j->line = 1;
	if (j->line > 0 && json_get(call->args, "offset")) {
		read_job_free(j);
		tool_call_fail(call, TC_VALIDATION_ERROR,
			       "Invalid arguments for 'read_file': give either 'offset' (bytes) or 'line', not both");
		return TOOL_DONE;
	}

	/* A small file is read at once: a trip to an io thread would cost
	 * more than the read. Anything larger goes to the pool. */
	if (j->line == 0) {
		int r = fsjob_inline(call, read_small_run, j);
		if (r != WS_NOT_SMALL && r != FSJOB_NOT_INLINE) {
			read_job_done(call, j, r);
			read_job_free(j);
			return TOOL_DONE;
		}
	}
	return fsjob_start(call, &read_ops, j);
}

const struct tool_def tool_read_file = {
	.name = "read_file",
	.description =
		"Read a file in the workspace. Paths are relative to the workspace root. "
		"Returns the file's text (it must be UTF-8), or its bytes in base64 with "
		"encoding \"base64\" (use that for binary files; a whole PNG, JPEG, GIF or WebP "
		"image then comes back as image content). At most 'limit' bytes "
		"(default 1 MiB) are returned, starting at byte 'offset'; when 'truncated' "
		"is true, read again from 'next_offset' for the rest. 'size' is the whole "
		"file's size in bytes. To read by lines instead, give 'line' (1-based) and "
		"'lines' (how many; default: to the end): the result then also has "
		"'first_line' and 'total_lines' (the file's line count). To see what a "
		"directory holds, use list_dir; to find text in files, use search.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"path\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"File to read, relative to the workspace root (e.g. \\\"src/main.c\\\")\"},"
		"\"offset\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9007199254740991,"
		"\"description\":\"Byte offset to start at (default 0)\"},"
		"\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16777216,"
		"\"description\":\"Maximum number of bytes to return (default 1 MiB)\"},"
		"\"line\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":9007199254740991,"
		"\"description\":\"First line to return, 1-based (instead of offset)\"},"
		"\"lines\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":9007199254740991,"
		"\"description\":\"Number of lines to return from 'line' on (default: all)\"},"
		"\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],\"default\":\"utf8\","
		"\"description\":\"utf8 returns text; base64 returns the raw bytes encoded\"}},"
		"\"required\":[\"path\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_READ,
	.idempotent = true,
	.path_args = path_args,
	.exec = read_file_exec,
	.cancel = fsjob_cancel,
};
