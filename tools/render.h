/* SPDX-License-Identifier: MIT */
/*
 * The text a model reads of a built-in tool's result, rendered in one
 * place per tool from what the tool found (its structuredContent says the
 * same for machines). Every cut says so, with the exact argument that
 * continues it. Pure functions: tested with golden files
 * (tests/unit/test_render.c, tests/data/render/).
 */
#ifndef TC_TOOLS_RENDER_H
#define TC_TOOLS_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/base/buf.h"

/* Lines longer than this many characters are cut in read_file's text. */
#define RENDER_LINE_MAX 2000

/* One window of a file read as text. */
struct read_view {
	const char *data;	/* the raw window (valid UTF-8) */
	size_t len;
	bool by_lines;		/* a window by lines: numbered, long lines cut */
	bool numbered;		/* cat -n numbers (by_lines only) */
	/* By lines: */
	int64_t first_line;	/* 1-based */
	int64_t shown_lines;	/* lines in the window (a cut one included) */
	int64_t total_lines;	/* in the file */
	bool line_cut;		/* the window's last line is cut by the byte window */
	/* By bytes (and size for both): */
	uint64_t offset;	/* of data in the file */
	uint64_t size;		/* the file's */
	int64_t limit_arg;	/* the caller's 'limit', 0 when not given */
	bool more;		/* the window stops before the file's end */
	const char *why;	/* optional: why a window by bytes was chosen */
};

/* Appends lines first to last (1-based) of text, each as "\n%6zu\t"
 * and the line, uncut: memory's view. */
void render_numbered_lines(const char *text, size_t n, size_t first, size_t last, struct buf *out);
/* Appends read_file's text for a window of text. */
void render_read_file(const struct read_view *v, struct buf *out);
/* The same text as a JSON string literal, made from lit, the window's
 * own literal (v->data quoted), with the lines' numbers put in and the
 * note after them quoted: the window is not scanned for escapes twice.
 * text is render_read_file's for v. NULL where that does not apply (by
 * bytes, no lines shown, a line that may have been cut). */
char *render_read_file_json(const struct read_view *v, const char *lit, size_t lit_len, const char *text,
			    size_t text_len);
/* Appends read_file's one line describing a binary file. */
void render_read_binary(const char *path, const char *type, uint64_t size, struct buf *out);

/* search's text (content mode): a file's heading (a blank line before it
 * unless it is the first), its lines ("N:text" for a match, "N-text" for
 * context, cut to RENDER_SEARCH_LINE_MAX bytes with " [...]"), and "--"
 * between groups that are not adjacent. */
#define RENDER_SEARCH_LINE_MAX 500
/* search's max_results at most (its schema's maximum). */
#define RENDER_SEARCH_RESULTS_MAX 10000
void render_search_heading(const char *path, bool first, struct buf *out);
void render_search_line(size_t lineno, bool match, const char *text, size_t len, struct buf *out);
void render_search_gap(struct buf *out);
/* The files and count modes: "path" or "path:N". */
void render_search_hit(const char *path, bool with_count, size_t count, struct buf *out);

/* What search's text ends with. */
struct search_summary {
	bool content;		/* content mode; else files or count */
	size_t matches;		/* content: matching lines shown */
	size_t files;		/* files and count: files shown */
	size_t files_searched;
	size_t skipped;		/* entries ignored or hidden */
	size_t skipped_large;	/* files too large to search */
	size_t unreadable_dirs;	/* directories that could not be read */
	size_t unreadable_files; /* files that could not be opened */
	size_t large_mib;	/* what too large is */
	size_t max_results;
	bool truncated;
};
void render_search_summary(const struct search_summary *s, struct buf *out);
/* "[2 directories and 1 file could not be read (no permission, or removed
 * meanwhile): WHAT]", or nothing for none. */
void render_unreadable(size_t dirs, size_t files, const char *what, struct buf *out);

#endif
