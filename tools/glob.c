/* SPDX-License-Identifier: MIT */
/*
 * glob: the paths beneath a directory of the workspace that match a glob
 * pattern (lib/glob/glob.h: "**", "*", "?", "[...]", "{a,b}"), newest first.
 * Directories that no match can lie below are not entered, what ignore
 * files exclude and hidden entries are skipped unless asked for
 * (tools/walk.h), ".git" is skipped unless the pattern names it, symlinks
 * are listed but not followed. The walk, the sort and the answer are made on an io thread as
 * the peer (lib/fsjob/fsjob.h), never on the loop; cancel and timeout stop it at
 * the next entry.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fsjob/fsjob.h"
#include "lib/glob/glob.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/render.h"
#include "proto/utf8.h"
#include "tools/files.h"
#include "tools/tools.h"
#include "tools/walk.h"

#define DEFAULT_MAX_RESULTS 1000
#define GLOB_RESULTS_MAX 100000	/* max_results' maximum in the schema */
/* Matches kept to sort at most; beyond, the result is truncated. */
#define GLOB_KEEP_MAX 200000

static const char *const path_args[] = { "path", NULL };

struct hit {
	size_t off;		/* its path, in the globber's paths */
	int64_t mtime_ns;
};

struct globber {
	char *path;		/* as the client named it */
	size_t path_len;
	bool skip_git, no_ignore, hidden;
	struct walk walk;
	struct glob *glob;
	char *root;		/* display path of the walked directory */
	size_t max_results;
	struct hit *hits;
	size_t n_hits, alloc;
	struct buf paths;	/* the matches' paths, each ended by a NUL, in one block */
	bool truncated;
	char *text, *structured;	/* the answer */
};

static bool may_descend(void *arg, const char *rel, size_t len)
{
	const struct globber *G = arg;
	return glob_may_match_below(G->glob, rel, len);
}

/* Walks the whole tree, keeping the matches; 0 or -ECANCELED. */
static int glob_walk(struct globber *G, const struct fsjob *job)
{
	for (;;) {
		if (fsjob_cancelled(job))
			return -ECANCELED;
		const char *rel;
		enum walk_type type;
		if (walk_next(&G->walk, &rel, &type) <= 0)
			return 0;
		size_t len = G->walk.path_len;
		if (!glob_match(G->glob, rel, len))
			continue;
		if (G->n_hits >= GLOB_KEEP_MAX) {
			G->truncated = true;
			return 0;
		}
		/* Its time, from the entry itself (never through a symlink). */
		struct stat st;
		if (fstatat(G->walk.dirfd, G->walk.name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;	/* gone meanwhile */
		if (G->n_hits == G->alloc) {
			G->alloc = G->alloc ? 2 * G->alloc : 256;
			G->hits = xreallocarray(G->hits, G->alloc, sizeof(*G->hits));
		}
		G->hits[G->n_hits++] = (struct hit){
			buf_size(&G->paths),
			(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
		};
		if (!str_eq(G->root, ".")) {
			buf_puts(&G->paths, G->root);
			buf_putc(&G->paths, '/');
		}
		buf_append(&G->paths, rel, len + 1);
	}
}

static int hit_cmp(const void *a, const void *b, void *paths)
{
	const struct hit *x = a, *y = b;
	if (x->mtime_ns != y->mtime_ns)
		return x->mtime_ns > y->mtime_ns ? -1 : 1;
	return strcmp((const char *)paths + x->off, (const char *)paths + y->off);
}

static void globber_free(void *arg)
{
	struct globber *G = arg;
	walk_done(&G->walk);
	glob_free(G->glob);
	free(G->hits);
	buf_free(&G->paths);
	free(G->root);
	free(G->path);
	free(G->text);
	free(G->structured);
	free(G);
}

/* Sorts the matches, newest first, and writes the answer. */
static void glob_format(struct globber *G)
{
	if (G->n_hits > 1)
		qsort_r(G->hits, G->n_hits, sizeof(*G->hits), hit_cmp, (void *)buf_head(&G->paths));
	size_t n = G->n_hits;
	if (n > G->max_results) {
		n = G->max_results;
		G->truncated = true;
	}
	struct buf out = {}, text = {};
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_key(g, "paths");
	jgen_arr_open(g);
	for (size_t i = 0; i < n; i++) {
		const char *path = buf_head(&G->paths) + G->hits[i].off;
		jgen_str(g, path);
		utf8_sanitize(path, strlen(path), &text);
		buf_putc(&text, '\n');
	}
	jgen_arr_close(g);
	jgen_kv_bool(g, "truncated", G->truncated);
	if (G->walk.skipped)
		jgen_kv_int(g, "skipped", (int64_t)G->walk.skipped);
	if (G->walk.unreadable + G->walk.denied_files)
		jgen_kv_int(g, "unreadable", (int64_t)(G->walk.unreadable + G->walk.denied_files));
	jgen_obj_close(g);
	jgen_free(g);
	if (!n && G->walk.skipped)
		buf_printf(&text, "No paths match (%zu entries were skipped as ignored or hidden: no_ignore: true and "
			   "hidden: true look at them too)\n", G->walk.skipped);
	else if (!n)
		buf_puts(&text, "No paths match\n");
	if (G->truncated && G->n_hits >= GLOB_KEEP_MAX)
		buf_printf(&text, "[Cut at max_results (%zu): more than %d paths match; narrow the pattern or path]\n", n,
			   GLOB_KEEP_MAX);
	else if (G->truncated && G->n_hits <= GLOB_RESULTS_MAX)
		buf_printf(&text, "[Cut at max_results (%zu): %zu paths match; {\"max_results\": %zu} lists them all, or "
			   "narrow the pattern or path]\n", n, G->n_hits, G->n_hits);
	else if (G->truncated)
		buf_printf(&text, "[Cut at max_results (%zu): %zu paths match, more than max_results may be (%d); narrow "
			   "the pattern or path]\n", n, G->n_hits, GLOB_RESULTS_MAX);
	render_unreadable(G->walk.unreadable, G->walk.denied_files, "not listed", &text);
	G->text = buf_steal(&text);
	G->structured = buf_steal(&out);
}

/* On an io thread, as the peer: opens the directory, walks it, writes the answer. */
static int glob_run(struct fsjob *job, void *arg)
{
	struct globber *G = arg;
	int fd = -1;
	int r = fsjob_openat(job, G->path, G->path_len, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, &fd);
	if (r < 0)
		return r;
	G->walk.use_ignores = !G->no_ignore;
	G->walk.skip_hidden = !G->hidden;
	walk_load_outer(&G->walk, job, G->root);
	walk_init(&G->walk, fd);
	G->walk.skip_git = G->skip_git;
	/* The paths are sorted at the end, by time then name: not each directory. */
	G->walk.unsorted = true;
	G->walk.descend = may_descend;
	G->walk.arg = G;
	G->walk.job = job;
	r = glob_walk(G, job);
	if (r < 0)
		return r;
	glob_format(G);
	return 0;
}

/* On the loop: the answer, or why there is none. */
static void glob_done(struct tool_call *call, void *arg, int r)
{
	struct globber *G = arg;
	if (r == -ECANCELED)
		tool_call_fail(call, TC_CANCELLED, "The glob was stopped");
	else if (r == -ENOENT)
		tool_call_fail(call, TC_EXECUTION_ERROR, "Directory '%s' not found", G->path);
	else if (r == -ENOTDIR)
		tool_call_fail(call, TC_EXECUTION_ERROR,
			       "'%s' is not a directory; 'path' is the directory the pattern is matched below", G->path);
	else if (r < 0)
		ws_fail_call(call, r, G->path, NULL);
	else
		tool_call_succeed(call, TAKE_PTR(G->text), TAKE_PTR(G->structured), false);
}

static const struct fsjob_ops glob_ops = {
	.run = glob_run,
	.done = glob_done,
	.free = globber_free,
};

/* Runs glob: the compiled pattern goes to an io thread. */
static enum tool_ret glob_exec(struct tool_call *call)
{
	const struct json *jpat = json_get(call->args, "pattern");
	const struct json *jpath = json_get(call->args, "path");
	const char *path = jpath && jpath->u.str.len ? jpath->u.str.s : ".";
	size_t path_len = jpath && jpath->u.str.len ? jpath->u.str.len : 1;
	int64_t v;

	struct globber *G = xcalloc(1, sizeof(*G));
	G->walk.basefd = -1;
	G->path = xmemdup(path, path_len + 1);
	G->path[path_len] = '\0';
	G->path_len = path_len;
	G->max_results = DEFAULT_MAX_RESULTS;
	if (json_get_int(json_get(call->args, "max_results"), &v) && v > 0)
		G->max_results = (size_t)v;
	_cleanup_free_ char *err = NULL;
	if (glob_compile(jpat->u.str.s, jpat->u.str.len, &G->glob, &err) < 0) {
		tool_call_invalid(call, "pattern", "%s", err);
		globber_free(G);
		return TOOL_DONE;
	}
	G->root = ws_display_path(call->ws, path, path_len);
	G->skip_git = !memmem(jpat->u.str.s, jpat->u.str.len, ".git", 4);
	G->no_ignore = json_is_true(json_get(call->args, "no_ignore"));
	G->hidden = json_is_true(json_get(call->args, "hidden")) || walk_names_hidden(jpat->u.str.s, jpat->u.str.len);
	return fsjob_start(call, &glob_ops, G);
}

const struct tool_def tool_glob = {
	.name = "glob",
	.description =
		"Find files and directories in the workspace by name pattern, newest first (by "
		"modification time). Patterns are matched against paths relative to 'path' (default: "
		"the workspace root): \"*\" matches within one path component, \"**\" any number of "
		"directories, \"?\" one character, \"[abc]\" one of a set, \"{c,h}\" alternatives. "
		"Examples: \"**/*.c\" (every C file), \"src/*.{h,c}\", \"**/test_*\". What .gitignore "
		"files (nested ones too), .ignore files and .git/info/exclude exclude is skipped unless "
		"no_ignore is true; hidden files and directories (names starting with \".\") unless "
		"hidden is true or the pattern names one; the text says how many entries were skipped "
		"so when nothing matches. .git directories "
		"are skipped unless the pattern names them; symlinks are listed but not followed. At "
		"most max_results paths (default 1000) are returned; when there were more, 'truncated' "
		"is true and the text's last line says how many match and the max_results that lists them all. "
		"Directories that could not be read are counted in 'unreadable' and said in the text. "
		"To search file contents, use search.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"pattern\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
		"\"description\":\"Glob pattern, e.g. \\\"**/*.c\\\" or \\\"src/*.{h,c}\\\"\"},"
		"\"path\":{\"type\":\"string\",\"default\":\".\","
		"\"description\":\"Directory to match below, relative to the workspace root (default: the root)\"},"
		"\"no_ignore\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Also list what .gitignore, .ignore and .git/info/exclude exclude\"},"
		"\"hidden\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"Also list hidden files and directories (names starting with a dot)\"},"
		"\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,\"default\":1000,"
		"\"description\":\"Maximum number of paths to return\"}},"
		"\"required\":[\"pattern\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_READ,
	.idempotent = true,
	.path_args = path_args,
	.exec = glob_exec,
	.cancel = fsjob_cancel,
};
