/* SPDX-License-Identifier: MIT */
/*
 * search: finds the lines matching a regular expression (the linear-time
 * matcher of schema "pattern", lib/regex_find.h) in the files beneath a
 * path of the workspace, optionally only those a glob selects. Binary files
 * (holding a NUL byte) and ".git" directories are skipped, symlinks are not
 * followed. Results are bounded by max_results and by a byte budget, and
 * stream as progress while the search runs.
 *
 * The search runs on an io thread as the peer (lib/fsjob.h), never on the
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

#include "lib/fsjob.h"
#include "lib/glob.h"
#include "lib/regex_find.h"
#include "lib/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/utf8.h"
#include "tools/files.h"
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

struct search {
	char *path;			/* as the client named it */
	size_t path_len;
	bool started, skip_git;
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
	bool truncated;
	struct buf file, fold;		/* scratch: the file read, its folded copy */
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

	size_t start = buf_size(&S->text);
	buf_printf(&S->text, "%s:%zu:%zu: ", path, lineno, col + 1);
	utf8_sanitize(data + off, show, &S->text);
	buf_puts(&S->text, show < len ? " [...]\n" : "\n");
	buf_append(&S->stream, buf_head(&S->text) + start, buf_size(&S->text) - start);
	return true;
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
 * sees: data or its folded copy). False when the results are full.
 */
static bool search_text(struct search *S, const char *path, const char *data, const char *subj, size_t n)
{
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
			lineno += count_lines(subj + off, l_off - off);
			off = l_off;
		}
		const char *nl = memchr(subj + off, '\n', n - off);
		size_t len = nl ? (size_t)(nl - subj) - off : n - off;
		if (regex_finder_line(S->rf, subj + off, len, &col) &&
		    !add_match(S, path, lineno, col, data, n, off))
			return false;
		off += len + 1;
		lineno++;
	}
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
	const char *subj = data;
	if (S->icase) {
		buf_clear(&S->fold);
		buf_append(&S->fold, data, n);
		regex_fold_ascii(S->fold.data + S->fold.off, n);
		subj = buf_head(&S->fold);
	}
	return search_text(S, path, data, subj, n);
}

/* Searches the file the walk is at (rel beneath the searched directory). */
static bool search_file(struct search *S, const char *rel)
{
	/* One name beneath the directory's fd, O_NOFOLLOW: nothing is followed. */
	_cleanup_close_ int fd = openat(S->walk.dirfd, S->walk.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return true;	/* gone or unreadable meanwhile */
	_cleanup_free_ char *path = str_eq(S->root, ".") ? xstrdup(rel) : xasprintf("%s/%s", S->root, rel);
	return search_fd(S, fd, path);
}

/* Whether the glob selects the file rel. */
static bool selected(const struct search *S, const char *rel)
{
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
	jgen_free(S->g);
	buf_free(&S->out);
	buf_free(&S->text);
	buf_free(&S->stream);
	buf_free(&S->file);
	buf_free(&S->fold);
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
	jgen_arr_close(S->g);
	jgen_kv_int(S->g, "files_searched", (int64_t)S->files_searched);
	jgen_kv_bool(S->g, "truncated", S->truncated);
	jgen_obj_close(S->g);

	if (!S->n_matches)
		buf_printf(&S->text, "No matches in %zu files searched\n", S->files_searched);
	else
		buf_printf(&S->text, "%zu match%s in %zu files searched\n", S->n_matches,
			   S->n_matches == 1 ? "" : "es", S->files_searched);
	if (S->truncated)
		buf_printf(&S->text, "(truncated: more matches exist; narrow the path or glob, or raise max_results)\n");
	if (S->skipped_large)
		buf_printf(&S->text, "(%zu files larger than %zu MiB were not searched)\n", S->skipped_large,
			   SEARCH_FILE_MAX >> 20);
	tool_call_succeed(call, buf_steal(&S->text), buf_steal(&S->out), false);
}

static const struct fsjob_ops search_ops = {
	.run = search_run,
	.done = search_done,
	.free = search_free,
	.part = search_part,
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

	_cleanup_free_ char *err = NULL;
	if (regex_finder_new(jpat->u.str.s, jpat->u.str.len, S->icase, &S->rf, &err) < 0) {
		tool_call_fail(call, TC_VALIDATION_ERROR,
			       "Invalid arguments for 'search': /pattern: %s. The pattern is an ECMAScript regular "
			       "expression without lookaround or backreferences; escape special characters such as "
			       "( [ . * with a backslash to search for them literally", err);
		search_free(S);
		return TOOL_DONE;
	}
	if (jglob && jglob->u.str.len) {
		if (glob_compile(jglob->u.str.s, jglob->u.str.len, &S->glob, &err) < 0) {
			tool_call_fail(call, TC_VALIDATION_ERROR, "Invalid arguments for 'search': /glob: %s", err);
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
	jgen_key(S->g, "matches");
	jgen_arr_open(S->g);
	return fsjob_start(call, &search_ops, S);
}

const struct tool_def tool_search = {
	.name = "search",
	.description =
		"Search the content of files in the workspace for a regular expression, like grep -rn. "
		"Returns each matching line with its file path, line number, column (1-based, in bytes) "
		"and text (long lines are cut), optionally with 'context' lines before and after. "
		"The pattern is an ECMAScript regular expression (no lookaround or backreferences); "
		"for a plain string, escape special characters such as ( [ . * with a backslash. "
		"'path' is a directory to search below (default: the whole workspace) or one file; "
		"'glob' keeps only files whose name (e.g. \"*.c\", \"*.{ts,tsx}\") or, when it holds a "
		"'/', relative path (e.g. \"src/**/*.h\") matches. Binary files, .git directories "
		"and files over 32 MiB are skipped; symlinks are not followed. At most max_results "
		"matches (default 200) are returned; 'truncated' is true when there were more.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"pattern\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
		"\"description\":\"Regular expression to search for (ECMAScript syntax)\"},"
		"\"path\":{\"type\":\"string\",\"default\":\".\","
		"\"description\":\"Directory or file to search, relative to the workspace root (default: the root)\"},"
		"\"glob\":{\"type\":\"string\",\"maxLength\":4096,"
		"\"description\":\"Only search files matching this glob, e.g. \\\"*.c\\\" or \\\"src/**/*.{h,c}\\\"\"},"
		"\"case_insensitive\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Ignore the case of ASCII letters\"},"
		"\"context\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10,\"default\":0,"
		"\"description\":\"Lines of context to return before and after each match\"},"
		"\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10000,\"default\":200,"
		"\"description\":\"Maximum number of matches to return\"}},"
		"\"required\":[\"pattern\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_READ,
	.idempotent = true,
	.path_args = path_args,
	.exec = search_exec,
	.cancel = fsjob_cancel,
};
