/* SPDX-License-Identifier: MIT */
/*
 * read_file: returns a window of a regular file beneath the workspace, by
 * lines (the default: numbered text, tools/render.c) or by bytes, as UTF-8
 * text or as base64. Text is never mangled: a file that is not UTF-8 is
 * described in one line instead, and a window that would cut a multibyte
 * character ends before it. The read runs on an io
 * thread with the peer's file-system identity (lib/fsjob/fsjob.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "lib/fsjob/fsjob.h"
#include "lib/files/workspace.h"
#include "proto/base64.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/render.h"
#include "tools/tools.h"

/* The defaults when the daemon gives none (limits.read_default_*,
 * tools.read_file.limit). */
#define DEFAULT_READ_CAP ((size_t)1 << 20)
#define DEFAULT_READ_BYTES ((size_t)256 << 10)
#define DEFAULT_READ_LINES 2000
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

/* The file types told apart in a binary file's description, by their
 * first bytes. */
static const struct magic {
	size_t at, len;
	const char *bytes;
	const char *type;
} magics[] = {
	{ 0, 4, "\x7f" "ELF", "ELF executable or object" },
	{ 0, 5, "%PDF-", "PDF document" },
	{ 0, 4, "PK\x03\x04", "ZIP archive" },
	{ 0, 2, "\x1f\x8b", "gzip compressed data" },
	{ 0, 3, "BZh", "bzip2 compressed data" },
	{ 0, 6, "\xfd" "7zXZ\x00", "xz compressed data" },
	{ 0, 4, "\x28\xb5\x2f\xfd", "zstd compressed data" },
	{ 0, 6, "7z\xbc\xaf\x27\x1c", "7-zip archive" },
	{ 257, 5, "ustar", "tar archive" },
	{ 0, 16, "SQLite format 3\x00", "SQLite database" },
	{ 0, 4, "\xca\xfe\xba\xbe", "Java class or Mach-O universal binary" },
	{ 0, 4, "\x00" "asm", "WebAssembly module" },
	{ 0, 2, "MZ", "DOS/Windows executable" },
	{ 0, 4, "\x00\x00\x01\x00", "ICO image" },
	{ 0, 2, "BM", "BMP image" },
	{ 0, 4, "OggS", "Ogg media" },
	{ 0, 4, "fLaC", "FLAC audio" },
	{ 0, 3, "ID3", "MP3 audio" },
	{ 4, 4, "ftyp", "MP4/QuickTime media" },
	{ 0, 4, "\x1a\x45\xdf\xa3", "Matroska/WebM media" },
};

/* What kind of binary data d holds, for the model to read. */
static const char *binary_type(const unsigned char *d, size_t n)
{
	for (size_t i = 0; i < ELEMENTSOF(magics); i++) {
		const struct magic *m = &magics[i];
		if (n >= m->at + m->len && memcmp(d + m->at, m->bytes, m->len) == 0)
			return m->type;
	}
	return "data";
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

/* What a read carries to the io thread and back. */
struct read_job {
	char *path;
	size_t path_len;
	uint64_t offset;	/* in; out for a read by lines: where they start */
	size_t limit;		/* bytes: of the window by bytes, or the cap of one by lines */
	size_t image_cap;	/* the largest image shown as one */
	int64_t limit_arg;	/* the caller's 'limit', 0 when not given */
	bool b64;
	bool numbered;
	bool by_lines;		/* in; cleared when the file is too large for it */
	bool line_given;	/* 'line' or 'lines' was asked for */
	bool too_large;		/* out: read by bytes, too large to read by lines */
	int64_t line, lines;	/* a window by lines */
	/* out, by lines: */
	int64_t shown_lines, total_lines;
	bool line_cut, more;
	struct buf data;	/* out: the window (by bytes: up to limit + 4 bytes from offset) */
	struct stat st;		/* out */
};

static void read_job_free(void *arg)
{
	struct read_job *j = arg;
	free(j->path);
	buf_free(&j->data);
	free(j);
}

/* The number of lines of s: its newlines, and one more for a last line
 * without one. */
static int64_t count_lines(const char *s, size_t n)
{
	int64_t count = 0;
	size_t i = 0;
#ifdef __SSE2__
	const __m128i nl = _mm_set1_epi8('\n');
	while (i + 16 <= n) {
		/* Up to 255 blocks counted bytewise (each match adds 1), then
		 * summed. */
		__m128i acc = _mm_setzero_si128();
		size_t stop = MIN(n - (n - i) % 16, i + 255 * 16);
		for (; i < stop; i += 16)
			acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i)), nl));
		__m128i sums = _mm_sad_epu8(acc, _mm_setzero_si128());
		count += _mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4);
	}
#endif
	for (; i < n; i++)
		count += s[i] == '\n';
	if (n > 0 && s[n - 1] != '\n')
		count++;
	return count;
}

/*
 * Takes the window by lines out of the whole file: lines [line, line +
 * lines) that fit in limit bytes together (one that does not fit alone is
 * cut at a character boundary), with the file's line count. An image the
 * model can be shown is kept whole instead, as base64 reads it.
 */
static void cut_lines(struct read_job *j, struct buf *all)
{
	const char *s = buf_head(all), *end = s + buf_size(all);
	size_t size = buf_size(all), start = size, stop = size;
	int64_t count = 0, shown = 0;
	bool full = false;

	if (!j->b64 && image_mime((const unsigned char *)s, size) && size <= j->image_cap) {
		j->b64 = true;
		j->by_lines = false;
		j->offset = 0;
		j->limit = size;
		j->data = *all;
		*all = (struct buf){0};
		return;
	}
	if (j->line == 1 && size <= j->limit) {
		/* The whole file fits the byte window: when it has no more lines
		 * than asked for (most reads), it is the window, and only its
		 * lines need counting, not finding one by one. */
		count = count_lines(s, size);
		if (count <= j->lines) {
			start = 0;
			stop = size;
			shown = count;
			goto cut;
		}
		count = 0;
	}
	for (const char *p = s; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *next = nl ? nl + 1 : end;
		count++;
		if (count == j->line)
			start = (size_t)(p - s);
		if (count >= j->line && !full && shown < j->lines) {
			size_t len = (size_t)(next - s) - start;
			if (len <= j->limit) {
				stop = (size_t)(next - s);
				shown++;
			} else {
				full = true;
				if (shown == 0) {
					/* One line longer than the window: its start. */
					size_t n = utf8_cut(s + start, (size_t)(next - s) - start, j->limit);
					if (n == 0)
						n = MIN(seq_len((unsigned char)s[start]), (size_t)(end - s) - start);
					stop = start + n;
					shown = 1;
					j->line_cut = true;
				}
			}
		}
		p = next;
	}
cut:
	if (stop < start)
		stop = start;
	if (start == 0 && stop >= size / 2 && all->data && !j->data.data) {
		/* The window starts the file and is most of it (most reads):
		 * keep the buffer read into, cut, rather than copy it. */
		all->len = all->off + stop;
		all->data[all->len] = '\0';
		j->data = *all;
		*all = (struct buf){0};
	} else {
		buf_append(&j->data, s + start, stop - start);
	}
	j->offset = start;
	j->shown_lines = shown;
	j->total_lines = count;
	j->more = shown > 0 && stop < size;
}

/* The window of a file that grew too large to count its lines while it
 * was read: by bytes. */
static int read_lines_too_large(struct read_job *j, struct buf *all)
{
	j->by_lines = false;
	j->too_large = true;
	all->len = all->off + MIN(buf_size(all), j->limit + 4);
	j->data = *all;
	*all = (struct buf){0};
	return 0;
}

/* Reads the window by lines: the whole file, cut. A file too large to
 * count its lines is read by bytes instead, unless lines were asked for;
 * what fits in the byte window is read first, which for most files is all
 * of them. */
static int read_lines(const struct fsjob *job, struct read_job *j)
{
	_cleanup_(buf_free) struct buf all = {};
	size_t first = MIN(j->limit + 4, LINES_MAX_BYTES + 1);
	int r = fsjob_read(job, j->path, j->path_len, 0, first, &all, &j->st);
	if (r < 0)
		return r;
	if (buf_size(&all) == first && (uint64_t)j->st.st_size > LINES_MAX_BYTES)
		return j->line_given ? -EFBIG : read_lines_too_large(j, &all);
	if (buf_size(&all) == first) {
		/* More follows: the whole file, to count its lines. */
		buf_clear(&all);
		r = fsjob_read(job, j->path, j->path_len, 0, LINES_MAX_BYTES + 1, &all, &j->st);
		if (r < 0)
			return r;
		if (buf_size(&all) > LINES_MAX_BYTES)
			return j->line_given ? -EFBIG : read_lines_too_large(j, &all);
	}
	cut_lines(j, &all);
	return 0;
}

/* On an io thread: reads the window. By bytes, up to 4 bytes beyond the
 * limit: one tells whether more follows, the rest complete a character
 * that straddles the limit. */
static int read_job_run(struct fsjob *job, void *arg)
{
	struct read_job *j = arg;
	if (j->by_lines)
		return read_lines(job, j);
	return fsjob_read(job, j->path, j->path_len, j->offset, j->limit + 4, &j->data, &j->st);
}

/* On the loop, when no identity is to be taken: a small file at once
 * (WS_NOT_SMALL for a larger one). */
static int read_small_run(struct fsjob *job, void *arg)
{
	struct read_job *j = arg;
	if (!j->by_lines)
		return fsjob_read_small(job, j->path, j->path_len, j->offset, j->limit + 4, FSJOB_INLINE_BYTES,
					&j->data, &j->st);
	_cleanup_(buf_free) struct buf all = {};
	int r = fsjob_read_small(job, j->path, j->path_len, 0, FSJOB_INLINE_BYTES + 1, FSJOB_INLINE_BYTES, &all,
				 &j->st);
	if (r == 0)
		cut_lines(j, &all);
	return r;
}

/* Writes structuredContent: the raw window (valid UTF-8, or base64) and
 * where it lies. The window is quoted straight into it; *lit and *lit_len
 * say where its JSON string lies in what is returned. */
static char *read_json(const struct read_job *j, const char *display, const struct buf *content, bool truncated,
		       const char *mime, size_t *lit, size_t *lit_len)
{
	struct buf out = {};
	buf_reserve(&out, buf_size(content) + buf_size(content) / 8 + strlen(display) + 200);
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", display);
	jgen_key(g, "content");
	*lit = out.len;	/* a value after a key: nothing written before it */
	jgen_strn_valid(g, buf_head(content), buf_size(content));
	*lit_len = out.len - *lit;
	jgen_kv_int(g, "size", (int64_t)j->st.st_size);
	jgen_kv_bool(g, "truncated", truncated);
	jgen_kv_str(g, "encoding", j->b64 ? "base64" : "utf8");
	if (mime)
		jgen_kv_str(g, "mimeType", mime);
	if (truncated && (!j->by_lines || j->line_cut))
		jgen_kv_int(g, "next_offset", (int64_t)(j->offset + buf_size(content)));
	if (j->by_lines) {
		jgen_kv_int(g, "first_line", j->line);
		jgen_kv_int(g, "total_lines", j->total_lines);
		if (truncated)
			jgen_kv_int(g, "next_line", j->line + j->shown_lines);
	}
	jgen_obj_close(g);
	jgen_free(g);
	return buf_steal(&out);
}

/* A binary file in text mode: one line saying what it is. */
static void read_binary(struct tool_call *call, const struct read_job *j, const char *display)
{
	const unsigned char *d = (const unsigned char *)buf_head(&j->data);
	const char *type = binary_type(d, buf_size(&j->data));
	struct buf text = {0}, out = {0};
	render_read_binary(display, type, (uint64_t)j->st.st_size, &text);
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", display);
	jgen_kv_int(g, "size", (int64_t)j->st.st_size);
	jgen_kv_bool(g, "binary", true);
	jgen_kv_str(g, "type", type);
	jgen_obj_close(g);
	jgen_free(g);
	tool_call_succeed(call, buf_steal(&text), buf_steal(&out), false);
}

/* On the loop: turns the bytes read into the call's result. */
static void read_job_done(struct tool_call *call, void *arg, int r)
{
	struct read_job *j = arg;
	if (r == -EFBIG && j->by_lines) {
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
	bool truncated;
	_cleanup_free_ char *display = ws_display_path(call->ws, j->path, j->path_len);
	_cleanup_(buf_free) struct buf content = {};

	if (j->b64) {
		n = MIN(got, limit);
		truncated = got > n;
		base64_encode(d, n, &content);
	} else {
		if (j->by_lines) {
			n = got;
			truncated = j->more;
		} else {
			if (offset > 0 && got > 0 && is_cont(d[0])) {
				tool_call_fail(call, TC_EXECUTION_ERROR,
					       "Offset %llu of '%s' falls inside a multibyte UTF-8 character; "
					       "use the offset of a character boundary, or encoding \"base64\"",
					       (unsigned long long)offset, display);
				return;
			}
			n = text_window(d, got, limit);
			truncated = got > n;
		}
		/* NUL bytes are valid UTF-8 but mark binary data, and would cut
		 * the text content short. */
		if (!utf8_valid((const char *)d, n) || memchr(d, 0, n)) {
			read_binary(call, j, display);
			return;
		}
		/* The content is what was read, cut at n: keep the buffer rather
		 * than copy it. */
		j->data.len = j->data.off + n;
		content = j->data;
		j->data = (struct buf){0};
	}
	/* A whole image in base64 is shown as one: MCP image content. */
	const char *mime = j->b64 && offset == 0 && !truncated ? image_mime(d, n) : NULL;

	/* The content is valid UTF-8 here (checked above, or base64). */
	size_t lit, lit_len;
	char *structured = read_json(j, display, &content, truncated, mime, &lit, &lit_len);

	if (mime) {
		struct buf items = {0};
		buf_reserve(&items, lit_len + 64);
		buf_puts(&items, "[{\"type\":\"image\",\"data\":");
		buf_append(&items, structured + lit, lit_len);
		buf_printf(&items, ",\"mimeType\":\"%s\"}]", mime);
		tool_call_set_content(call, buf_steal(&items));
	}
	if (j->b64 || (!j->by_lines && !truncated && buf_size(&content) > 0)) {
		/* The text is the content itself: quoted once, used twice. */
		char *quoted = xstrndup(structured + lit, lit_len);
		tool_call_succeed(call, buf_steal(&content), structured, false);
		tool_call_set_text_json(call, quoted);
		return;
	}
	struct read_view v = {
		.data = buf_head(&content),
		.len = buf_size(&content),
		.by_lines = j->by_lines,
		.numbered = j->numbered,
		.first_line = j->line,
		.shown_lines = j->shown_lines,
		.total_lines = j->total_lines,
		.line_cut = j->line_cut,
		.offset = j->offset,
		.size = (uint64_t)j->st.st_size,
		.limit_arg = j->limit_arg,
		.more = truncated,
		.why = j->too_large ? "the file is too large to read by lines" : NULL,
	};
	struct buf text = {0};
	buf_reserve(&text, buf_size(&content) + buf_size(&content) / 4 + 128);
	render_read_file(&v, &text);
	char *text_json = render_read_file_json(&v, structured + lit, lit_len, buf_head(&text), buf_size(&text));
	tool_call_succeed(call, buf_steal(&text), structured, false);
	if (text_json)
		tool_call_set_text_json(call, text_json);
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
	const struct tool_env *env = call->env;
	const struct json *numbers = json_get(call->args, "line_numbers");
	int64_t v;

	struct read_job *j = xcalloc(1, sizeof(*j));
	j->path_len = path ? jpath->u.str.len : 0;
	j->path = path ? xmemdup(path, j->path_len + 1) : NULL;
	if (json_get_int(json_get(call->args, "offset"), &v) && v > 0)
		j->offset = (uint64_t)v;
	j->b64 = str_eq(json_str(json_get(call->args, "encoding")), "base64");
	j->numbered = !numbers || json_is_true(numbers);
	j->image_cap = env && env->read_cap ? env->read_cap : DEFAULT_READ_CAP;
	j->limit = j->b64 ? j->image_cap : env && env->read_bytes ? env->read_bytes : DEFAULT_READ_BYTES;
	if (json_get_int(json_get(call->args, "limit"), &v) && v > 0)
		j->limit = (size_t)(j->limit_arg = v);
	j->limit = MIN(j->limit, SIZE_MAX / 2);	/* room for the bytes read beyond it */
	json_get_int(json_get(call->args, "line"), &j->line);
	json_get_int(json_get(call->args, "lines"), &j->lines);
	j->line_given = j->line > 0 || j->lines > 0;
	if (j->line_given && json_get(call->args, "offset")) {
		read_job_free(j);
		tool_call_invalid(call, "offset", "give either 'offset' (bytes) or 'line', not both");
		return TOOL_DONE;
	}
	/* By lines unless bytes were asked for: an offset, a limit alone, or
	 * base64. */
	j->by_lines = j->line_given || (!j->b64 && !json_get(call->args, "offset") && !j->limit_arg);
	if (j->by_lines) {
		if (j->line <= 0)
			j->line = 1;
		if (j->lines <= 0)
			j->lines = env && env->read_lines ? (int64_t)env->read_lines : DEFAULT_READ_LINES;
	}

	/* A small file is read at once: a trip to an io thread would cost
	 * more than the read. Anything larger goes to the pool. */
	int r = fsjob_inline(call, read_small_run, j);
	if (r != WS_NOT_SMALL && r != FSJOB_NOT_INLINE) {
		read_job_done(call, j, r);
		read_job_free(j);
		return TOOL_DONE;
	}
	return fsjob_start(call, &read_ops, j);
}

const struct tool_def tool_read_file = {
	.name = "read_file",
	.description =
		"Read a file in the workspace. Paths are relative to the workspace root. "
		"By default returns a window of lines, numbered as cat -n does (the number "
		"right-aligned in 6 columns, a tab, the line; 'line_numbers': false for the bare "
		"lines): from line 'line' (1-based, default 1), at most 'lines' lines (default "
		"2000) and 256 KiB; lines longer than 2000 characters are cut with a marker. "
		"When the window does not reach the end, the text ends with a line saying which "
		"lines were shown, how many the file has, and the argument that reads on (e.g. "
		"{\"line\": 2001}). The text must be UTF-8: a binary file is described in one line "
		"(its type and size); read it with encoding \"base64\" for its bytes. A whole PNG, "
		"JPEG, GIF or WebP image (up to 1 MiB) comes back as image content. "
		"Giving 'offset', or 'limit' without 'line'/'lines', reads a window of bytes "
		"instead: at most 'limit' bytes (default 256 KiB; 1 MiB in base64) from byte "
		"'offset', unnumbered and uncut, ending with a line naming the {\"offset\": N} "
		"that reads on when the file goes on. With 'line'/'lines', 'limit' caps the "
		"window's bytes. structuredContent has the raw 'content', 'size' (the file's "
		"bytes), 'truncated', 'next_offset' (by bytes), and by lines 'first_line', "
		"'total_lines' and 'next_line'. To see what a directory holds, use list_dir; to "
		"find text in files, use search.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"path\":{\"type\":\"string\",\"minLength\":1,"
		"\"description\":\"File to read, relative to the workspace root (e.g. \\\"src/main.c\\\")\"},"
		"\"line\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":9007199254740991,"
		"\"description\":\"First line to return, 1-based (default 1)\"},"
		"\"lines\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":9007199254740991,"
		"\"description\":\"Number of lines to return from 'line' on (default 2000)\"},"
		"\"line_numbers\":{\"type\":\"boolean\",\"default\":true,"
		"\"description\":\"Number the lines as cat -n does (default true)\"},"
		"\"offset\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9007199254740991,"
		"\"description\":\"Byte offset to start at: reads a window of bytes instead of lines\"},"
		"\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16777216,"
		"\"description\":\"Maximum number of bytes to return (default 256 KiB; 1 MiB in base64)\"},"
		"\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],\"default\":\"utf8\","
		"\"description\":\"utf8 returns text; base64 returns the raw bytes encoded (a window of bytes)\"}},"
		"\"required\":[\"path\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_READ,
	.idempotent = true,
	.path_args = path_args,
	.exec = read_file_exec,
	.cancel = fsjob_cancel,
};
