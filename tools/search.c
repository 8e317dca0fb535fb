/* SPDX-License-Identifier: MIT */
/*
 * search: finds the lines matching a regular expression (the linear-time
 * matcher of schema "pattern", lib/regex/regex.h) in the files beneath a
 * path of the workspace, optionally only those a type and a glob select.
 * What ignore files exclude and hidden entries are skipped (tools/walk.h,
 * lib/ignore/ignore.h), as are binary files (holding a NUL byte) and ".git"
 * directories; symlinks are not followed. The text shows the matching lines
 * grouped by file with their context, the files with a match, or their
 * counts (output_mode), and ends with the counts and what to do when cut.
 * Results are bounded by max_results and by a byte budget, and stream as
 * progress while the search runs.
 *
 * The search runs on an io thread as the peer (lib/fsjob/fsjob.h), never on the
 * loop, in parts of about PART_MS: after each, the loop streams what was
 * found and queues the next part (behind the file work of other calls).
 * Cancel and timeout stop it at the next entry, even within a directory
 * being read.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <time.h>

#include "lib/fsjob/fsjob.h"
#include "lib/glob/glob.h"
#include "lib/regex/regex.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/utf8.h"
#include "tools/files.h"
#include "tools/render.h"
#include "tools/tools.h"
#include "tools/walk.h"

#define DEFAULT_MAX_RESULTS 200
/* Files larger than this are not searched. */
#define SEARCH_FILE_MAX ((size_t)32 << 20)
/* Bytes of results (structuredContent) at most. */
#define SEARCH_OUT_MAX ((size_t)1 << 20)
/* A line is shown cut to this many bytes. */
#define LINE_SHOW_MAX 500
/* Work per part, in milliseconds, before the loop sees what was found. */
#define PART_MS 25

static const char *const path_args[] = { "path", NULL };

enum search_mode { MODE_CONTENT, MODE_FILES, MODE_COUNT };

/* A file with matches, for the files and count modes. */
struct hit {
	char *path;
	int64_t mtime_ns;
	size_t count;
};

/* A matching line of the file being searched, for its text. */
struct line_hit {
	size_t lineno, off;
};

struct search {
	char *path;			/* as the client named it */
	size_t path_len;
	bool started, skip_git, no_ignore, hidden;
	enum search_mode mode;
	struct glob *type;		/* the 'type' as a glob over names, or NULL */
	struct hit *hits;		/* files and count modes */
	size_t n_hits, hits_alloc;
	struct line_hit *lines;		/* content mode: the file's matches */
	size_t n_lines, lines_alloc;
	struct walk walk;
	struct regex_finder *rf;
	struct glob *glob;
	bool glob_base;			/* the glob has no '/': match names */
	bool icase;
	unsigned context;
	size_t max_results;
	char *root;			/* display path of the searched directory */
	struct buf out, text, stream;	/* structuredContent, text, progress of this part */
	struct jgen *g;
	size_t n_matches, files_searched, skipped_large;
	size_t unreadable_files;	/* not opened: no permission */
	bool truncated;
	struct buf file;		/* scratch: the file read */
};

/* Appends a line cut to LINE_SHOW_MAX bytes at a character boundary. */
static size_t shown_len(const char *s, size_t n)
{
	if (n <= LINE_SHOW_MAX)
		return n;
	n = LINE_SHOW_MAX;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

/* The line of data that starts at off: its length without the newline (and a '\r' before it). */
static size_t line_len(const char *data, size_t n, size_t off)
{
	const char *nl = memchr(data + off, '\n', n - off);
	size_t len = nl ? (size_t)(nl - data) - off : n - off;
	if (len && data[off + len - 1] == '\r')
		len--;
	return len;
}

/* Appends the lines before (or after) the line starting at off as a JSON array. */
static void context_lines(struct search *S, const char *key, const char *data, size_t n, size_t off, size_t len,
			  bool before)
{
	size_t starts[64], k = 0;
	if (before) {
		size_t p = off;
		while (k < S->context && p > 0) {
			const char *prev = p >= 2 ? memrchr(data, '\n', p - 1) : NULL;
			p = prev ? (size_t)(prev - data) + 1 : 0;
			starts[k++] = p;
		}
	} else {
		const char *nl = memchr(data + off + len, '\n', n - off - len);
		size_t p = nl ? (size_t)(nl - data) + 1 : n;
		while (k < S->context && p < n) {
			starts[k++] = p;
			const char *e = memchr(data + p, '\n', n - p);
			p = e ? (size_t)(e - data) + 1 : n;
		}
	}
	if (!k)
		return;
	jgen_key(S->g, key);
	jgen_arr_open(S->g);
	for (size_t i = 0; i < k; i++) {
		size_t at = starts[before ? k - 1 - i : i];
		size_t l = line_len(data, n, at);
		jgen_strn(S->g, data + at, shown_len(data + at, l));
	}
	jgen_arr_close(S->g);
}

/* Records one match; false when the results are full. */
static bool add_match(struct search *S, const char *path, size_t lineno, size_t col, const char *data, size_t n,
		      size_t off)
{
	if (S->n_matches >= S->max_results || buf_size(&S->out) >= SEARCH_OUT_MAX) {
		S->truncated = true;
		return false;
	}
	size_t len = line_len(data, n, off);
	size_t show = shown_len(data + off, len);
	S->n_matches++;
	jgen_obj_open(S->g);
	jgen_kv_str(S->g, "path", path);
	jgen_kv_int(S->g, "line", (int64_t)lineno);
	jgen_kv_int(S->g, "column", (int64_t)col + 1);
	jgen_key(S->g, "text");
	jgen_strn(S->g, data + off, show);
	if (S->context) {
		context_lines(S, "before", data, n, off, len, true);
		context_lines(S, "after", data, n, off, len, false);
	}
	jgen_obj_close(S->g);
	if (S->n_lines == S->lines_alloc) {
		S->lines_alloc = S->lines_alloc ? 2 * S->lines_alloc : 64;
		S->lines = xreallocarray(S->lines, S->lines_alloc, sizeof(*S->lines));
	}
	S->lines[S->n_lines++] = (struct line_hit){ lineno, off };
	return true;
}

/* The offset of the line n lines before the one starting at off (as far
 * as the start). */
static size_t lines_back(const char *data, size_t off, size_t n)
{
	while (n-- > 0 && off > 0) {
		const char *prev = off >= 2 ? memrchr(data, '\n', off - 1) : NULL;
		off = prev ? (size_t)(prev - data) + 1 : 0;
	}
	return off;
}

/* Appends one line of the text: "N:text" for a match, "N-text" for context. */
static void put_line(struct buf *t, size_t lineno, char sep, const char *data, size_t n, size_t off)
{
	render_search_line(lineno, sep == ':', data + off, line_len(data, n, off), t);
}

/*
 * Writes the text of the file's matches (content mode): a line with the
 * path, then its matching lines and their context, "--" between groups
 * that are not adjacent; streamed as progress too.
 */
static void put_file_text(struct search *S, const char *path, const char *data, size_t n)
{
	if (!S->n_lines)
		return;
	struct buf *t = &S->text;
	size_t start = buf_size(t), last = 0;	/* the last line written */
	render_search_heading(path, start == 0, t);
	for (size_t i = 0; i < S->n_lines; i++) {
		size_t no = S->lines[i].lineno, off = S->lines[i].off;
		size_t first = no > S->context ? no - S->context : 1;
		if (first <= last)
			first = last + 1;
		if (last && first > last + 1)
			render_search_gap(t);
		size_t p = lines_back(data, off, no - first);
		for (size_t k = first; k < no; k++) {
			put_line(t, k, '-', data, n, p);
			const char *nl = memchr(data + p, '\n', n - p);
			p = nl ? (size_t)(nl - data) + 1 : n;
		}
		put_line(t, no, ':', data, n, off);
		last = no;
		/* Context after, up to the next match (which writes its own). */
		size_t until = no + S->context;
		if (i + 1 < S->n_lines && S->lines[i + 1].lineno - 1 < until)
			until = S->lines[i + 1].lineno - 1;
		const char *nl = memchr(data + off, '\n', n - off);
		p = nl ? (size_t)(nl - data) + 1 : n;
		for (size_t k = no + 1; k <= until && p < n; k++) {
			put_line(t, k, '-', data, n, p);
			last = k;
			nl = memchr(data + p, '\n', n - p);
			p = nl ? (size_t)(nl - data) + 1 : n;
		}
	}
	S->n_lines = 0;
	buf_append(&S->stream, buf_head(t) + start, buf_size(t) - start);
}

/* Counts the newlines in s[0..n). */
static size_t count_lines(const char *s, size_t n)
{
	size_t c = 0;
	for (const char *p = s, *end = s + n; (p = memchr(p, '\n', (size_t)(end - p))); p++)
		c++;
	return c;
}

/*
 * Searches the text of one file (data, n bytes; subj is what the pattern
 * sees: data or its folded copy): records its matches (content mode) or
 * counts its matching lines in *ret_count (the first only in files mode).
 * False when the results are full.
 */
static bool search_text(struct search *S, const char *path, const char *data, const char *subj, size_t n,
			size_t *ret_count)
{
	*ret_count = 0;
	if (!regex_finder_may_match(S->rf, subj, n))
		return true;
	size_t lineno = 1;	/* of the line starting at off */
	for (size_t off = 0; off < n;) {
		/* Jump to the line holding what every match holds. */
		size_t at, col;
		if (!regex_finder_next(S->rf, subj + off, n - off, &at))
			break;
		const char *ls = at ? memrchr(subj + off, '\n', at) : NULL;
		if (ls) {
			size_t l_off = (size_t)(ls - subj) + 1;
			if (S->mode == MODE_CONTENT)
				lineno += count_lines(subj + off, l_off - off);
			off = l_off;
		}
		const char *nl = memchr(subj + off, '\n', n - off);
		size_t len = nl ? (size_t)(nl - subj) - off : n - off;
		if (regex_finder_line(S->rf, subj + off, len, &col)) {
			++*ret_count;
			if (S->mode == MODE_FILES)
				return true;
			if (S->mode == MODE_CONTENT && !add_match(S, path, lineno, col, data, n, off))
				return false;
		}
		off += len + 1;
		lineno++;
	}
	return true;
}

/* Files kept for the files and count modes at most (they are sorted). */
#define HITS_KEEP_MAX 200000

/* Records a file with matches (files and count modes); false when full. */
static bool add_hit(struct search *S, const char *path, const struct stat *st, size_t count)
{
	size_t cap = S->mode == MODE_COUNT ? S->max_results : HITS_KEEP_MAX;
	if (S->n_hits >= cap) {
		S->truncated = true;
		return false;
	}
	if (S->n_hits == S->hits_alloc) {
		S->hits_alloc = S->hits_alloc ? 2 * S->hits_alloc : 64;
		S->hits = xreallocarray(S->hits, S->hits_alloc, sizeof(*S->hits));
	}
	S->hits[S->n_hits++] = (struct hit){ xstrdup(path),
		(int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec, count };
	S->n_matches += count;
	return true;
}

/* Reads and searches one regular file opened as fd. False when the results are full. */
static bool search_fd(struct search *S, int fd, const char *path)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return true;
	if ((uint64_t)st.st_size > SEARCH_FILE_MAX) {
		S->skipped_large++;
		return true;
	}
	buf_clear(&S->file);
	buf_reserve(&S->file, (size_t)st.st_size + 1);
	for (;;) {
		buf_reserve(&S->file, 65536);
		ssize_t k = read(fd, S->file.data + S->file.len, S->file.cap - S->file.len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		S->file.len += (size_t)k;
		if (buf_size(&S->file) > SEARCH_FILE_MAX) {
			S->skipped_large++;
			return true;
		}
	}
	const char *data = buf_head(&S->file);
	size_t n = buf_size(&S->file);
	if (memchr(data, '\0', n))
		return true;	/* binary */
	S->files_searched++;
	/* Case is ignored by the finder itself: the text is searched as it is. */
	size_t count;
	bool more = search_text(S, path, data, data, n, &count);
	if (S->mode == MODE_CONTENT)
		put_file_text(S, path, data, n);
	else if (count && !add_hit(S, path, &st, count))
		return false;
	return more;
}

/* Searches the file the walk is at (rel beneath the searched directory). */
static bool search_file(struct search *S, const char *rel)
{
	/* One name beneath the directory's fd, O_NOFOLLOW: nothing is followed. */
	_cleanup_close_ int fd = openat(S->walk.dirfd, S->walk.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		/* Said; one gone meanwhile is not. */
		S->unreadable_files += errno == EACCES || errno == EPERM;
		return true;
	}
	_cleanup_free_ char *path = str_eq(S->root, ".") ? xstrdup(rel) : xasprintf("%s/%s", S->root, rel);
	return search_fd(S, fd, path);
}

/* Whether the type and the glob select the file rel. */
static bool selected(const struct search *S, const char *rel)
{
	if (S->type) {
		const char *slash = strrchr(rel, '/');
		const char *base = slash ? slash + 1 : rel;
		if (!glob_match(S->type, base, strlen(base)))
			return false;
	}
	if (!S->glob)
		return true;
	if (S->glob_base) {
		const char *slash = strrchr(rel, '/');
		const char *base = slash ? slash + 1 : rel;
		return glob_match(S->glob, base, strlen(base));
	}
	return glob_match(S->glob, rel, strlen(rel));
}

static bool may_descend(void *arg, const char *rel, size_t len)
{
	const struct search *S = arg;
	return !S->glob || S->glob_base || glob_may_match_below(S->glob, rel, len);
}

/* The monotonic clock, in milliseconds. */
static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Opens what is searched, as the peer: one file is searched at once, a
 * directory starts the walk. 0 when done, 1 when the walk is to go on. */
static int search_open(struct search *S, struct fsjob *job)
{
	int fd = -1;
	int r = fsjob_openat(job, S->path, S->path_len, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0, &fd);
	if (r < 0)
		return r;
	struct stat st;
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
		/* One file, named: searched whatever the glob says. */
		search_fd(S, fd, S->root);
		close(fd);
		return 0;
	}
	S->walk.use_ignores = !S->no_ignore;
	S->walk.skip_hidden = !S->hidden;
	walk_load_outer(&S->walk, job, S->root);
	walk_init(&S->walk, fd);
	S->walk.skip_git = S->skip_git;
	S->walk.descend = may_descend;
	S->walk.arg = S;
	return 1;
}

/* On an io thread: searches for a part's time; FSJOB_AGAIN when there is
 * more, 0 when the search is over, -ECANCELED when it was stopped. */
static int search_run(struct fsjob *job, void *arg)
{
	struct search *S = arg;
	if (!S->started) {
		S->started = true;
		int r = search_open(S, job);
		if (r <= 0)
			return r;
	}
	S->walk.job = job;
	uint64_t deadline = now_ms() + PART_MS;
	for (unsigned k = 0;; k++) {
		if (fsjob_cancelled(job))
			return -ECANCELED;
		if ((k & 7) == 7 && fsjob_on_worker(job) && now_ms() >= deadline)
			return FSJOB_AGAIN;
		const char *rel;
		enum walk_type type;
		if (walk_next(&S->walk, &rel, &type) <= 0)
			return 0;
		if (type == WALK_FILE && selected(S, rel) && !search_file(S, rel))
			return 0;
	}
}

/* On the loop: streams what the part found. */
static void search_part(struct tool_call *call, void *arg)
{
	struct search *S = arg;
	if (buf_size(&S->stream)) {
		tool_call_output(call, "stdout", buf_head(&S->stream), buf_size(&S->stream));
		buf_clear(&S->stream);
	}
}

static void search_free(void *arg)
{
	struct search *S = arg;
	walk_done(&S->walk);
	regex_finder_free(S->rf);
	glob_free(S->glob);
	glob_free(S->type);
	for (size_t i = 0; i < S->n_hits; i++)
		free(S->hits[i].path);
	free(S->hits);
	free(S->lines);
	jgen_free(S->g);
	buf_free(&S->out);
	buf_free(&S->text);
	buf_free(&S->stream);
	buf_free(&S->file);
	free(S->root);
	free(S->path);
	free(S);
}

/* Fails the call for a negative errno on the searched path. */
static void fail_errno(struct tool_call *call, int r, const char *path)
{
	if (r == -ENOENT) {
		tool_call_fail(call, TC_EXECUTION_ERROR, "'%s' does not exist; search a directory that does, such as \".\"",
			       path);
		return;
	}
	ws_fail_call(call, r, path, NULL);
}

static int hit_cmp(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	if (x->mtime_ns != y->mtime_ns)
		return x->mtime_ns > y->mtime_ns ? -1 : 1;
	return strcmp(x->path, y->path);
}

/* Writes the files with matches: newest first ("files"), or with their
 * counts in path order ("count"). */
static void put_hits(struct search *S)
{
	if (S->mode == MODE_FILES && S->n_hits > 1)
		qsort(S->hits, S->n_hits, sizeof(*S->hits), hit_cmp);
	size_t n = S->n_hits;
	if (n > S->max_results) {
		n = S->max_results;
		S->truncated = true;
	}
	for (size_t i = 0; i < n; i++) {
		const struct hit *h = &S->hits[i];
		if (S->mode == MODE_FILES) {
			jgen_str(S->g, h->path);
		} else {
			jgen_obj_open(S->g);
			jgen_kv_str(S->g, "path", h->path);
			jgen_kv_int(S->g, "count", (int64_t)h->count);
			jgen_obj_close(S->g);
		}
		render_search_hit(h->path, S->mode == MODE_COUNT, h->count, &S->text);
	}
}

/* Ends the text with what the model needs to act: counts, a cut and how
 * to go on, what was skipped. */
static void put_summary(struct search *S)
{
	struct search_summary sum = {
		.content = S->mode == MODE_CONTENT,
		.matches = S->n_matches,
		.files = MIN(S->n_hits, S->max_results),
		.files_searched = S->files_searched,
		.skipped = S->walk.skipped,
		.skipped_large = S->skipped_large,
		.unreadable_dirs = S->walk.unreadable,
		.unreadable_files = S->unreadable_files + S->walk.denied_files,
		.large_mib = SEARCH_FILE_MAX >> 20,
		.max_results = S->max_results,
		.truncated = S->truncated,
	};
	render_search_summary(&sum, &S->text);
}

/* On the loop: sets the outcome from what the search found. */
static void search_done(struct tool_call *call, void *arg, int r)
{
	struct search *S = arg;
	if (r == -ECANCELED) {
		tool_call_fail(call, TC_CANCELLED, "The search was stopped");
		return;
	}
	if (r < 0) {
		fail_errno(call, r, S->path);
		return;
	}
	search_part(call, S);
	if (S->mode != MODE_CONTENT)
		put_hits(S);
	jgen_arr_close(S->g);
	jgen_kv_int(S->g, "files_searched", (int64_t)S->files_searched);
	jgen_kv_bool(S->g, "truncated", S->truncated);
	if (S->walk.skipped)
		jgen_kv_int(S->g, "skipped", (int64_t)S->walk.skipped);
	size_t unreadable = S->walk.unreadable + S->unreadable_files + S->walk.denied_files;
	if (unreadable)
		jgen_kv_int(S->g, "unreadable", (int64_t)unreadable);
	jgen_obj_close(S->g);
	put_summary(S);
	tool_call_succeed(call, buf_steal(&S->text), buf_steal(&S->out), false);
}

static const struct fsjob_ops search_ops = {
	.run = search_run,
	.done = search_done,
	.free = search_free,
	.part = search_part,
};

/* The file types 'type' names, as globs over file names. */
static const struct file_type {
	const char *name, *glob;
} file_types[] = {
	{ "c", "*.{c,h}" },
	{ "cpp", "*.{cpp,cc,cxx,c++,hpp,hh,hxx,h++,h,inl,ipp}" },
	{ "cmake", "{CMakeLists.txt,*.cmake}" },
	{ "css", "*.{css,scss,sass,less}" },
	{ "go", "*.go" },
	{ "html", "*.{html,htm}" },
	{ "java", "*.java" },
	{ "js", "*.{js,mjs,cjs,jsx}" },
	{ "json", "*.{json,jsonl}" },
	{ "kotlin", "*.{kt,kts}" },
	{ "make", "{Makefile,makefile,GNUmakefile,*.mk}" },
	{ "md", "*.{md,markdown,mdx}" },
	{ "meson", "{meson.build,meson_options.txt,meson.options}" },
	{ "php", "*.php" },
	{ "py", "*.{py,pyi}" },
	{ "ruby", "{*.rb,Gemfile,Rakefile}" },
	{ "rust", "*.rs" },
	{ "sh", "*.{sh,bash,zsh,ksh}" },
	{ "sql", "*.sql" },
	{ "swift", "*.swift" },
	{ "toml", "*.toml" },
	{ "ts", "*.{ts,tsx,mts,cts}" },
	{ "txt", "*.txt" },
	{ "xml", "*.xml" },
	{ "yaml", "*.{yaml,yml}" },
};

/* Runs search: the compiled pattern and glob go to an io thread. */
static enum tool_ret search_exec(struct tool_call *call)
{
	const struct json *jpat = json_get(call->args, "pattern");
	const struct json *jpath = json_get(call->args, "path");
	const struct json *jglob = json_get(call->args, "glob");
	const char *path = jpath ? jpath->u.str.s : ".";
	size_t path_len = jpath ? jpath->u.str.len : 1;
	if (path_len == 0) {
		path = ".";
		path_len = 1;
	}
	int64_t v;

	struct search *S = xcalloc(1, sizeof(*S));
	S->walk.basefd = -1;
	S->path = xmemdup(path, path_len + 1);
	S->path[path_len] = '\0';
	S->path_len = path_len;
	S->icase = json_is_true(json_get(call->args, "case_insensitive"));
	S->max_results = DEFAULT_MAX_RESULTS;
	if (json_get_int(json_get(call->args, "max_results"), &v) && v > 0)
		S->max_results = (size_t)v;
	if (json_get_int(json_get(call->args, "context"), &v) && v > 0)
		S->context = (unsigned)MIN(v, 10);
	const char *mode = json_str(json_get(call->args, "output_mode"));
	S->mode = str_eq(mode, "files") ? MODE_FILES : str_eq(mode, "count") ? MODE_COUNT : MODE_CONTENT;
	S->no_ignore = json_is_true(json_get(call->args, "no_ignore"));
	S->hidden = json_is_true(json_get(call->args, "hidden")) ||
		    (jglob && walk_names_hidden(jglob->u.str.s, jglob->u.str.len));
	const char *type = json_str(json_get(call->args, "type"));
	for (size_t i = 0; type && i < ELEMENTSOF(file_types); i++) {
		if (str_eq(type, file_types[i].name)) {
			_cleanup_free_ char *terr = NULL;
			glob_compile(file_types[i].glob, strlen(file_types[i].glob), &S->type, &terr);
		}
	}

	_cleanup_free_ char *err = NULL;
	if (regex_finder_new(jpat->u.str.s, jpat->u.str.len, S->icase, &S->rf, &err) < 0) {
		tool_call_invalid(call, "pattern",
			       "%s. The pattern is an ECMAScript regular "
			       "expression without lookaround or backreferences; escape special characters such as "
			       "( [ . * with a backslash to search for them literally", err);
		search_free(S);
		return TOOL_DONE;
	}
	if (jglob && jglob->u.str.len) {
		if (glob_compile(jglob->u.str.s, jglob->u.str.len, &S->glob, &err) < 0) {
			tool_call_invalid(call, "glob", "%s", err);
			search_free(S);
			return TOOL_DONE;
		}
		S->glob_base = !memchr(jglob->u.str.s, '/', jglob->u.str.len);
	}
	/* ".git" is skipped unless the glob names it. */
	S->skip_git = !(jglob && memmem(jglob->u.str.s, jglob->u.str.len, ".git", 4));
	S->root = ws_display_path(call->ws, path, path_len);
	S->g = jgen_new(&S->out);
	jgen_obj_open(S->g);
	jgen_key(S->g, S->mode == MODE_FILES ? "files" : S->mode == MODE_COUNT ? "counts" : "matches");
	jgen_arr_open(S->g);
	return fsjob_start(call, &search_ops, S);
}

const struct tool_def tool_search = {
	.name = "search",
	.description =
		"Search the content of files in the workspace for a regular expression, like ripgrep. "
		"output_mode \"content\" (default) shows, for each file with matches, a line with its "
		"path, then \"N:text\" for each matching line and \"N-text\" for the 'context' lines "
		"around it, with \"--\" between groups that are not adjacent (long lines are cut); "
		"\"files\" lists the paths of the files with a match, newest first; \"count\" shows "
		"\"path:N\", the number of matching lines of each file. The text ends with a line of "
		"counts. The pattern is an ECMAScript regular expression (\\b and \\B included; no "
		"lookaround or backreferences); for a plain string, escape special characters such as "
		"( [ . * with a backslash; case_insensitive folds letters by Unicode simple case "
		"folding. 'path' is a directory to search below (default: the whole workspace) or one "
		"file; 'type' keeps only files of a kind (c: *.c *.h; cpp; cmake; css; go; html; java; "
		"js: *.js *.mjs *.cjs *.jsx; json; kotlin; make; md; meson; php; py: *.py *.pyi; ruby; "
		"rust: *.rs; sh; sql; swift; toml; ts: *.ts *.tsx *.mts *.cts; txt; xml; yaml: *.yaml "
		"*.yml); 'glob' keeps only files whose name (e.g. \"*.c\", \"*.{ts,tsx}\") or, when it "
		"holds a '/', relative path (e.g. \"src/**/*.h\") matches. What .gitignore files "
		"(nested ones too), .ignore files and .git/info/exclude exclude is skipped unless "
		"no_ignore is true; hidden files and directories (names starting with \".\") unless "
		"hidden is true or the glob names one. Binary files, .git directories and files over "
		"32 MiB are skipped; symlinks are not followed. At most max_results matches (files in "
		"the files and count modes; default 200) are returned; when there were more, the text "
		"says so and 'truncated' is true. structuredContent has matches [{path, line, column, "
		"text, before?, after?}] (content), files [path] (files) or counts [{path, count}] "
		"(count), with files_searched, truncated, skipped (entries ignored or hidden) and "
		"unreadable (directories and files that could not be read, also said in the text).",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"pattern\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
		"\"description\":\"Regular expression to search for (ECMAScript syntax)\"},"
		"\"path\":{\"type\":\"string\",\"default\":\".\","
		"\"description\":\"Directory or file to search, relative to the workspace root (default: the root)\"},"
		"\"output_mode\":{\"type\":\"string\",\"enum\":[\"content\",\"files\",\"count\"],\"default\":\"content\","
		"\"description\":\"content: matching lines; files: paths with a match, newest first; count: path:N\"},"
		"\"type\":{\"type\":\"string\",\"enum\":[\"c\",\"cpp\",\"cmake\",\"css\",\"go\",\"html\",\"java\",\"js\","
		"\"json\",\"kotlin\",\"make\",\"md\",\"meson\",\"php\",\"py\",\"ruby\",\"rust\",\"sh\",\"sql\",\"swift\","
		"\"toml\",\"ts\",\"txt\",\"xml\",\"yaml\"],"
		"\"description\":\"Only search files of this type (see the tool's description)\"},"
		"\"glob\":{\"type\":\"string\",\"maxLength\":4096,"
		"\"description\":\"Only search files matching this glob, e.g. \\\"*.c\\\" or \\\"src/**/*.{h,c}\\\"\"},"
		"\"case_insensitive\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Ignore case (Unicode simple case folding)\"},"
		"\"context\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10,\"default\":0,"
		"\"description\":\"Lines of context to show before and after each match\"},"
		"\"no_ignore\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Also search what .gitignore, .ignore and .git/info/exclude exclude\"},"
		"\"hidden\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Also search hidden files and directories (names starting with a dot)\"},"
		"\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10000,\"default\":200,"
		"\"description\":\"Maximum number of matches (files in the files and count modes) to return\"}},"
		"\"required\":[\"pattern\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_READ,
	.idempotent = true,
	.path_args = path_args,
	.exec = search_exec,
	.cancel = fsjob_cancel,
};
