/* SPDX-License-Identifier: MIT */
/*
 * The text of the built-in tools' results (see tools/render.h).
 */
#include "tools/render.h"

#include <inttypes.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "proto/base/util.h"
#include "proto/json.h"
#include "proto/utf8.h"

/* The byte length of the first max characters of s. */
static size_t chars_prefix(const char *s, size_t n, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (((unsigned char)s[i] & 0xC0) != 0x80 && k++ == max)
			return i;
	}
	return n;
}

/* Appends one line (without its newline), cut when too long. */
static void put_line(const char *s, size_t n, struct buf *out)
{
	size_t chars = n > RENDER_LINE_MAX ? utf8_length(s, n) : 0;
	if (chars <= RENDER_LINE_MAX) {
		buf_append(out, s, n);
		return;
	}
	buf_append(out, s, chars_prefix(s, n, RENDER_LINE_MAX));
	buf_printf(out, " [... line cut: %d of its %zu characters shown]", RENDER_LINE_MAX, chars);
}

/* The first c in [p, end), or NULL: inline, sixteen bytes a step, for
 * the short lines of a file, where a call to memchr per line showed. */
static inline const char *find_byte(const char *p, const char *end, char c)
{
#ifdef __SSE2__
	const __m128i v = _mm_set1_epi8(c);
	while (end - p >= 16) {
		unsigned m = (unsigned)_mm_movemask_epi8(
			_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), v));
		if (m)
			return p + __builtin_ctz(m);
		p += 16;
	}
#endif
	for (; p < end; p++)
		if (*p == c)
			return p;
	return NULL;
}

/*
 * A line's number as cat -n writes it ("%6d" before the tab), kept as text
 * and counted up in place: neither printf nor a conversion per line, which
 * were a fifth of a small read's time.
 */
struct numbering {
	char text[32];		/* the padded digits, then spaces */
	size_t len;
};

static void numbering_init(struct numbering *nb, int64_t no)
{
	char digits[20];
	char *end = digits + sizeof(digits), *d = fmt_u64(end, no > 0 ? (uint64_t)no : 0);
	size_t n = (size_t)(end - d), pad = n < 6 ? 6 - n : 0;
	memset(nb->text, ' ', sizeof(nb->text));
	memcpy(nb->text + pad, d, n);
	nb->len = pad + n;
}

static void numbering_next(struct numbering *nb)
{
	for (size_t i = nb->len; i > 0; i--) {
		char *c = &nb->text[i - 1];
		if (*c == '9') {
			*c = '0';
			continue;
		}
		*c = *c == ' ' ? '1' : (char)(*c + 1);
		return;
	}
	/* 999999 and on: one digit wider. */
	memmove(nb->text + 1, nb->text, nb->len);
	nb->text[0] = '1';
	nb->len++;
}

/* Writes the number and its tab (as "\\t" in a JSON string) at o, which
 * has room for sizeof(nb->text) + 2 bytes; returns the end. */
static inline char *put_number(const struct numbering *nb, bool json, char *o)
{
	memcpy(o, nb->text, sizeof(nb->text));	/* fixed size: two moves, no call */
	o += nb->len;
	if (json)
		*o++ = '\\';
	*o++ = json ? 't' : '\t';
	return o;
}

/* Makes room for n more bytes at *o in out (which *o points into). */
static inline char *room(struct buf *out, char *o, size_t n)
{
	if ((size_t)(out->data + out->cap - o) > n)
		return o;
	out->len = (size_t)(o - out->data);
	buf_reserve(out, n);
	return out->data + out->len;
}

/* Appends the lines of a window by lines, numbered from v->first_line. */
static void put_lines(const struct read_view *v, struct buf *out)
{
	const char *p = v->data, *end = v->data + v->len;
	struct numbering nb;
	numbering_init(&nb, v->first_line);
	buf_reserve(out, v->len + (size_t)MAX(v->shown_lines, 0) * 8 + 32);
	char *o = out->data + out->len;
	while (p < end) {
		const char *nl = find_byte(p, end, '\n');
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		o = room(out, o, n + sizeof(nb.text) + 2);
		if (v->numbered)
			o = put_number(&nb, false, o);
		if (n > RENDER_LINE_MAX) {
			out->len = (size_t)(o - out->data);
			put_line(p, n, out);
			o = out->data + out->len;
			o = room(out, o, 2);
		} else {
			memcpy(o, p, n);
			o += n;
		}
		if (nl)
			*o++ = '\n';
		p += n + (nl != NULL);
		numbering_next(&nb);
	}
	out->len = (size_t)(o - out->data);
	out->data[out->len] = '\0';
}

void render_numbered_lines(const char *text, size_t n, size_t first, size_t last, struct buf *out)
{
	const char *p = text, *end = text + n;
	struct numbering nb;
	numbering_init(&nb, 1);
	buf_reserve(out, n + 64);
	char *o = out->data + out->len;
	for (size_t no = 1; p < end && no <= last; no++) {
		const char *nl = find_byte(p, end, '\n');
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (no >= first) {
			o = room(out, o, len + sizeof(nb.text) + 4);
			*o++ = '\n';
			o = put_number(&nb, false, o);
			memcpy(o, p, len);
			o += len;
		}
		p += len + 1;
		numbering_next(&nb);
	}
	out->len = (size_t)(o - out->data);
	out->data[out->len] = '\0';
}

/* Ends the text so that a note starts on a line of its own. */
static void line_break(struct buf *out)
{
	if (buf_size(out) && buf_head(out)[buf_size(out) - 1] != '\n')
		buf_putc(out, '\n');
}

void render_read_file(const struct read_view *v, struct buf *out)
{
	if (!v->by_lines) {
		buf_append(out, v->data, v->len);
		if (!v->more && v->size > 0)
			return;
		if (v->size == 0) {
			buf_puts(out, "[The file is empty.]");
			return;
		}
		line_break(out);
		uint64_t next = v->offset + v->len;
		buf_printf(out, "[Bytes %" PRIu64 "-%" PRIu64 " of %" PRIu64 " shown", v->offset,
			   v->len ? next - 1 : v->offset, v->size);
		if (v->why)
			buf_printf(out, " (%s)", v->why);
		buf_printf(out, "; read on with {\"offset\": %" PRIu64, next);
		if (v->limit_arg > 0)
			buf_printf(out, ", \"limit\": %" PRId64, v->limit_arg);
		buf_puts(out, "}]");
		return;
	}
	if (v->total_lines == 0) {
		buf_puts(out, "[The file is empty.]");
		return;
	}
	if (v->shown_lines == 0) {
		buf_printf(out, "[The file has %" PRId64 " line%s; line %" PRId64 " is past its end.]",
			   v->total_lines, v->total_lines == 1 ? "" : "s", v->first_line);
		return;
	}
	put_lines(v, out);
	int64_t last = v->first_line + v->shown_lines - 1;
	if (!v->more)
		return;
	line_break(out);
	if (v->line_cut) {
		/* One line longer than the byte window: the rest of it by bytes. */
		buf_printf(out, "[Line %" PRId64 " of %" PRId64 " is longer than the byte window; it was cut. "
			   "Read the rest of it with {\"offset\": %" PRIu64 "}, or the next line with "
			   "{\"line\": %" PRId64 "}]", last, v->total_lines, v->offset + v->len, last + 1);
		return;
	}
	buf_printf(out, "[Lines %" PRId64 "-%" PRId64 " of %" PRId64 " shown; read on with {\"line\": %" PRId64 "}]",
		   v->first_line, last, v->total_lines, last + 1);
}

char *render_read_file_json(const struct read_view *v, const char *lit, size_t lit_len, const char *text,
			    size_t text_len)
{
	if (!v->by_lines || v->shown_lines == 0 || lit_len < 2 || lit[0] != '"')
		return NULL;
	const char *p = lit + 1, *end = lit + lit_len - 1;
	struct buf out = {0};
	buf_reserve(&out, lit_len + (size_t)v->shown_lines * 10 + (text_len - MIN(text_len, v->len)) * 2 + 16);
	char *o = out.data;
	*o++ = '"';
	/* The plain bytes the lines take in the text, to find the note. */
	size_t plain = v->len;
	struct numbering nb;
	numbering_init(&nb, v->first_line);
	while (p < end) {
		/* The line's end: the next \n escape (every backslash here
		 * starts an escape: \uXXXX or a letter after it). */
		const char *nl = NULL;
		for (const char *b = p; (b = find_byte(b, end, '\\')) != NULL;) {
			if (b[1] == 'n') {
				nl = b;
				break;
			}
			b += b[1] == 'u' ? 6 : 2;
		}
		size_t n = (size_t)((nl ? nl : end) - p);
		if (n > RENDER_LINE_MAX) {
			/* It may have been cut: let the text be quoted whole. */
			buf_free(&out);
			return NULL;
		}
		o = room(&out, o, n + sizeof(nb.text) + 4);
		if (v->numbered) {
			o = put_number(&nb, true, o);
			plain += nb.len + 1;
		}
		memcpy(o, p, n);
		o += n;
		if (nl) {
			*o++ = '\\';
			*o++ = 'n';
		}
		p = nl ? nl + 2 : end;
		numbering_next(&nb);
	}
	out.len = (size_t)(o - out.data);
	out.data[out.len] = '\0';
	if (plain > text_len) {
		buf_free(&out);
		return NULL;
	}
	/* The note after the lines, if any, quoted without its quotes. */
	if (plain < text_len) {
		struct buf note = {0};
		json_quote(&note, text + plain, text_len - plain);
		buf_append(&out, buf_head(&note) + 1, buf_size(&note) - 2);
		buf_free(&note);
	}
	buf_putc(&out, '"');
	return buf_steal(&out);
}

void render_read_binary(const char *path, const char *type, uint64_t size, struct buf *out)
{
	buf_printf(out, "'%s' is a binary file (%s, %" PRIu64 " byte%s), not shown as text; "
		   "read it with {\"encoding\": \"base64\"} for its bytes.", path, type, size, size == 1 ? "" : "s");
}

void render_search_heading(const char *path, bool first, struct buf *out)
{
	if (!first)
		buf_putc(out, '\n');
	utf8_sanitize(path, strlen(path), out);
	buf_putc(out, '\n');
}

void render_search_line(size_t lineno, bool match, const char *text, size_t len, struct buf *out)
{
	size_t show = utf8_cut(text, len, RENDER_SEARCH_LINE_MAX);
	if (show == 0 && len > 0)
		show = MIN(len, RENDER_SEARCH_LINE_MAX);	/* not UTF-8 there: cut as it is */
	buf_printf(out, "%zu%c", lineno, match ? ':' : '-');
	utf8_sanitize(text, show, out);
	buf_puts(out, show < len ? " [...]\n" : "\n");
}

void render_search_gap(struct buf *out)
{
	buf_puts(out, "--\n");
}

void render_search_hit(const char *path, bool with_count, size_t count, struct buf *out)
{
	utf8_sanitize(path, strlen(path), out);
	if (with_count)
		buf_printf(out, ":%zu", count);
	buf_putc(out, '\n');
}

void render_search_summary(const struct search_summary *s, struct buf *out)
{
	if (buf_size(out))
		buf_putc(out, '\n');
	if (s->content ? !s->matches : !s->files) {
		buf_printf(out, "No matches in %zu file%s searched", s->files_searched, s->files_searched == 1 ? "" : "s");
		if (s->skipped)
			buf_printf(out, " (%zu entries were skipped as ignored or hidden: no_ignore: true and hidden: "
				   "true search them too)", s->skipped);
		buf_puts(out, "\n");
	} else if (s->content) {
		buf_printf(out, "[%zu match%s shown, %zu file%s searched]\n", s->matches, s->matches == 1 ? "" : "es",
			   s->files_searched, s->files_searched == 1 ? "" : "s");
	} else {
		buf_printf(out, "[%zu file%s with matches shown, %zu file%s searched]\n", s->files,
			   s->files == 1 ? "" : "s", s->files_searched, s->files_searched == 1 ? "" : "s");
	}
	if (s->truncated && s->max_results >= RENDER_SEARCH_RESULTS_MAX)
		buf_printf(out, "[Cut at max_results (%zu): more %s exist; narrow path, glob or type]\n", s->max_results,
			   s->content ? "matches" : "files");
	else if (s->truncated)
		buf_printf(out, "[Cut at max_results (%zu): more %s exist; raise max_results, e.g. {\"max_results\": %zu} (up to "
			   "%d) or narrow path, glob or type]\n", s->max_results, s->content ? "matches" : "files",
			   MIN(2 * s->max_results, (size_t)RENDER_SEARCH_RESULTS_MAX), RENDER_SEARCH_RESULTS_MAX);
	if (s->skipped_large)
		buf_printf(out, "[%zu files larger than %zu MiB were not searched]\n", s->skipped_large, s->large_mib);
	render_unreadable(s->unreadable_dirs, s->unreadable_files, "not searched", out);
}

void render_unreadable(size_t dirs, size_t files, const char *what, struct buf *out)
{
	if (!dirs && !files)
		return;
	buf_putc(out, '[');
	if (dirs)
		buf_printf(out, "%zu director%s", dirs, dirs == 1 ? "y" : "ies");
	if (dirs && files)
		buf_puts(out, " and ");
	if (files)
		buf_printf(out, "%zu file%s", files, files == 1 ? "" : "s");
	buf_printf(out, " could not be read (no permission, or removed meanwhile): %s]\n", what);
}
