/* SPDX-License-Identifier: MIT */
/*
 * list_dir: the entries of a directory beneath the workspace, optionally
 * the whole tree below it. Output is sorted so the same tree always lists
 * the same way: siblings by name (bytes), each directory followed by its
 * own entries, which is also the order of the relative paths compared
 * component by component. Symlinks are listed, never followed.
 *
 * Memory is bounded by max_entries, not by the tree: each directory keeps
 * only the names that can still be shown, and the names pending in the
 * directories above are cut whenever a deeper directory fills the budget.
 * The walk runs on an io thread with the peer's file-system identity, in a
 * file job (lib/fsjob/fsjob.h): the directory is opened by fsjob_openat()
 * and every one below it by fsjob_open_nofollow(), and it stops between
 * entries when the call is cancelled. A directory below that cannot be
 * read (no permission, removed meanwhile) is listed without its entries
 * and counted in 'unreadable', which the text's last line says.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/render.h"
#include "tools/tools.h"

#define DEFAULT_MAX_ENTRIES 1000
#define LIST_ENTRIES_MAX 100000	/* max_entries' maximum in the schema */

static const char *const path_args[] = { "path", NULL };

static const struct ws_hint list_hints[] = {
	{ -ENOENT, "Directory '%s' not found" },
	{ -ENOTDIR, "'%s' is not a directory; use read_file to read a file" },
	{ 0, NULL },
};

enum entry_type { ENTRY_FILE, ENTRY_DIR, ENTRY_SYMLINK, ENTRY_OTHER };

static const char *const type_names[] = {
	[ENTRY_FILE] = "file",
	[ENTRY_DIR] = "dir",
	[ENTRY_SYMLINK] = "symlink",
	[ENTRY_OTHER] = "other",
};

struct entry {
	char *name;		/* in a level: the name; in the output: relative to the listed directory */
	enum entry_type type;
	uint64_t size;		/* bytes of a regular file, else 0 */
};

/* One directory being walked: its entries, sorted, v[i..n) still to show. */
struct level {
	char *rel;		/* relative to the listed directory, "." for itself */
	struct entry *v;
	size_t i, n;
};

struct walk {
	const struct fsjob *job;	/* opens beneath basefd; polled for cancellation */
	int basefd;
	size_t limit;		/* max_entries + 1: one more tells that there is more */
	bool dropped;		/* entries were left out */
	size_t unreadable;	/* directories below that could not be read */
	struct entry *out;
	size_t n_out;
	struct level *stack;
	size_t depth;
};

static void entries_free(struct entry *v, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		free(v[i].name);
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* Sorts v[0..*n) and keeps the first cap. */
static void sort_and_cut(struct walk *w, struct entry *v, size_t *n, size_t cap)
{
	if (*n > 1)
		qsort(v, *n, sizeof(*v), entry_cmp);
	if (*n > cap) {
		entries_free(v, cap, *n);
		*n = cap;
		w->dropped = true;
	}
}

/*
 * Opens rel beneath the listed directory without following any symlink:
 * entries found to be directories are walked only if they still are.
 */
static int open_subdir(const struct walk *w, const char *rel)
{
	int fd = -1;
	int r = fsjob_open_nofollow(w->job, w->basefd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, &fd);
	if (r < 0)
		return r;
	/* A private directory (sandbox.deny_read) is listed, not read. */
	if (ws_guard_fd_denied(fd)) {
		close(fd);
		return -EACCES;
	}
	return fd;
}

/* Reads the directory rel into a level, keeping its first cap entries by name. */
static int read_level(struct walk *w, const char *rel, size_t cap, struct level *ret)
{
	int fd = open_subdir(w, rel);
	if (fd < 0)
		return fd;
	DIR *d = fdopendir(fd);
	if (!d) {
		int r = -errno;
		close(fd);
		return r;
	}

	struct entry *v = NULL;
	size_t n = 0, alloc = 0;
	struct dirent *de;
	int r = 0;
	for (errno = 0; (de = readdir(d)); errno = 0) {
		if (fsjob_cancelled(w->job)) {
			r = -ECANCELED;
			break;
		}
		if (str_eq(de->d_name, ".") || str_eq(de->d_name, ".."))
			continue;
		/* Only the first cap names can be shown: trim now and then
		 * rather than hold a huge directory in memory. */
		if (n >= 2 * cap)
			sort_and_cut(w, v, &n, cap);
		if (n == alloc) {
			alloc = alloc ? 2 * alloc : 64;
			v = xreallocarray(v, alloc, sizeof(*v));
		}
		v[n++] = (struct entry){ .name = xstrdup(de->d_name) };
	}
	if (r == 0 && errno)
		r = -errno;
	if (r == 0)
		sort_and_cut(w, v, &n, cap);

	/* Type and size, from the entry itself (a symlink is not followed). */
	size_t k = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct stat st;
		if (fstatat(dirfd(d), v[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			free(v[i].name);	/* gone meanwhile */
			continue;
		}
		v[i].type = S_ISREG(st.st_mode) ? ENTRY_FILE : S_ISDIR(st.st_mode) ? ENTRY_DIR :
			    S_ISLNK(st.st_mode) ? ENTRY_SYMLINK : ENTRY_OTHER;
		v[i].size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
		v[k++] = v[i];
	}
	closedir(d);
	if (r < 0) {
		entries_free(v, 0, n);
		free(v);
		return r;
	}
	*ret = (struct level){ .rel = xstrdup(rel), .v = v, .n = k };
	return 0;
}

/*
 * Cuts the entries pending in the levels below the top so that, with the
 * top's, no more are kept than can still be shown. The shallowest levels
 * are shown last, so they lose their tails first.
 */
static void trim_pending(struct walk *w)
{
	const struct level *top = &w->stack[w->depth - 1];
	size_t room = w->limit - w->n_out;
	size_t allowed = room > top->n ? room - top->n : 0, pending = 0;

	for (size_t k = 0; k + 1 < w->depth; k++)
		pending += w->stack[k].n - w->stack[k].i;
	for (size_t k = 0; pending > allowed && k + 1 < w->depth; k++) {
		struct level *l = &w->stack[k];
		size_t cut = MIN(pending - allowed, l->n - l->i);
		entries_free(l->v, l->n - cut, l->n);
		l->n -= cut;
		pending -= cut;
		w->dropped = true;
	}
}

static void level_pop(struct walk *w)
{
	struct level *l = &w->stack[--w->depth];
	entries_free(l->v, l->i, l->n);
	free(l->v);
	free(l->rel);
}

/* Walks the listed directory (and, when recursive, the tree below it) into w->out. */
static int walk(struct walk *w, bool recursive)
{
	struct level first;
	int r = read_level(w, ".", w->limit, &first);
	if (r < 0)
		return r;
	w->stack = xmalloc(sizeof(*w->stack));
	w->stack[0] = first;
	w->depth = 1;
	w->out = xreallocarray(NULL, MIN(w->limit, (size_t)1024), sizeof(*w->out));
	size_t out_alloc = MIN(w->limit, (size_t)1024);

	while (w->depth > 0 && w->n_out < w->limit) {
		if (fsjob_cancelled(w->job)) {
			r = -ECANCELED;
			break;
		}
		struct level *l = &w->stack[w->depth - 1];
		if (l->i == l->n) {
			level_pop(w);
			continue;
		}
		struct entry e = l->v[l->i++];
		if (!str_eq(l->rel, ".")) {
			char *full = xasprintf("%s/%s", l->rel, e.name);
			free(e.name);
			e.name = full;
		}
		if (w->n_out == out_alloc) {
			out_alloc *= 2;
			w->out = xreallocarray(w->out, out_alloc, sizeof(*w->out));
		}
		w->out[w->n_out++] = e;

		if (!recursive || e.type != ENTRY_DIR || w->n_out >= w->limit)
			continue;
		struct level child;
		/* A directory that cannot be opened (no permission, replaced
		 * meanwhile) is listed without its entries, and counted. */
		int rl = read_level(w, e.name, w->limit - w->n_out, &child);
		if (rl < 0) {
			w->unreadable += rl != -ECANCELED;
			continue;
		}
		w->stack = xreallocarray(w->stack, w->depth + 1, sizeof(*w->stack));
		w->stack[w->depth++] = child;
		trim_pending(w);
	}
	while (w->depth > 0)
		level_pop(w);
	free(w->stack);
	w->stack = NULL;
	return r;
}

/* What a listing carries to the io thread and back. */
struct list_job {
	char *path;
	size_t path_len;
	bool recursive;
	size_t max;
	char *text, *structured;	/* out */
};

static void list_job_free(void *arg)
{
	struct list_job *j = arg;
	free(j->path);
	free(j->text);
	free(j->structured);
	free(j);
}

/* Writes the listing as structuredContent and text, into j. */
static void format_listing(struct list_job *j, const struct workspace *ws, struct walk *w, bool truncated)
{
	_cleanup_free_ char *display = ws_display_path(ws, j->path, j->path_len);
	struct buf out = {}, text = {};
	struct jgen *g = jgen_new(&out);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", display);
	jgen_key(g, "entries");
	jgen_arr_open(g);
	for (size_t i = 0; i < w->n_out; i++) {
		const struct entry *e = &w->out[i];
		jgen_obj_open(g);
		jgen_kv_str(g, "name", e->name);
		jgen_kv_str(g, "type", type_names[e->type]);
		jgen_kv_int(g, "size", (int64_t)e->size);
		jgen_obj_close(g);

		if (e->type == ENTRY_FILE)
			buf_printf(&text, "%s (%llu bytes)\n", e->name, (unsigned long long)e->size);
		else if (e->type == ENTRY_DIR)
			buf_printf(&text, "%s/\n", e->name);
		else
			buf_printf(&text, "%s (%s)\n", e->name, type_names[e->type]);
	}
	jgen_arr_close(g);
	jgen_kv_bool(g, "truncated", truncated);
	if (w->unreadable)
		jgen_kv_int(g, "unreadable", (int64_t)w->unreadable);
	jgen_obj_close(g);
	jgen_free(g);

	if (w->n_out == 0)
		buf_printf(&text, "%s is empty\n", display);
	if (truncated && w->n_out >= LIST_ENTRIES_MAX)
		buf_printf(&text, "[Cut at max_entries (%zu): more entries exist; list a subdirectory]\n", w->n_out);
	else if (truncated)
		buf_printf(&text, "[Cut at max_entries (%zu): more entries exist; raise max_entries, e.g. {\"max_entries\": %zu} "
			   "(up to %d) or list a subdirectory]\n", w->n_out, MIN(2 * w->n_out, (size_t)LIST_ENTRIES_MAX),
			   LIST_ENTRIES_MAX);
	render_unreadable(w->unreadable, 0, "what they hold is not listed", &text);
	j->text = buf_steal(&text);
	j->structured = buf_steal(&out);
}

/* On an io thread: walks the directory and formats the answer (a large
 * listing is costly to format too: not on the loop). */
static int list_job_run(struct fsjob *job, void *arg)
{
	struct list_job *j = arg;
	const struct workspace *ws = fsjob_ws(job);
	_cleanup_close_ int basefd = -1;
	int r = fsjob_openat(job, j->path, j->path_len, O_RDONLY | O_DIRECTORY, 0, &basefd);
	if (r < 0)
		return r;

	struct walk w = { .job = job, .basefd = basefd, .limit = j->max + 1 };
	r = walk(&w, j->recursive);
	bool truncated = w.dropped;
	if (r == 0 && w.n_out > j->max) {
		entries_free(w.out, j->max, w.n_out);
		w.n_out = j->max;
		truncated = true;
	}
	if (r == 0)
		format_listing(j, ws, &w, truncated);
	entries_free(w.out, 0, w.n_out);
	free(w.out);
	return r;
}

/* On the loop: hands the listing to the call. */
static void list_job_done(struct tool_call *call, void *arg, int r)
{
	struct list_job *j = arg;
	if (r < 0) {
		ws_fail_call(call, r, j->path, list_hints);
		return;
	}
	tool_call_succeed(call, TAKE_PTR(j->text), TAKE_PTR(j->structured), false);
}

static const struct fsjob_ops list_ops = {
	.run = list_job_run,
	.done = list_job_done,
	.free = list_job_free,
};

/* Runs list_dir: the walk on an io thread, as the peer. */
static enum tool_ret list_dir_exec(struct tool_call *call)
{
	const struct json *jpath = json_get(call->args, "path");
	const char *path = json_str(jpath);
	size_t path_len = path ? jpath->u.str.len : 0;
	if (!path || path_len == 0) {
		path = ".";
		path_len = 1;
	}
	int64_t v;
	struct list_job *j = xcalloc(1, sizeof(*j));
	j->path = xmemdup(path, path_len + 1);
	j->path_len = path_len;
	j->recursive = json_is_true(json_get(call->args, "recursive"));
	j->max = DEFAULT_MAX_ENTRIES;
	if (json_get_int(json_get(call->args, "max_entries"), &v) && v > 0)
		j->max = (size_t)v;
	return fsjob_start(call, &list_ops, j);
}

const struct tool_def tool_list_dir = {
	.name = "list_dir",
	.description =
		"List a directory of the workspace (by default its root): each entry's name, "
		"type (file, dir, symlink or other) and size in bytes, sorted by name. With "
		"recursive, the whole tree below it is listed, names being relative paths such "
		"as \"src/main.c\"; symlinked directories are not followed. At most max_entries "
		"entries are returned (default 1000); when there were more, 'truncated' is true and the "
		"text's last line gives the max_entries to ask for. With recursive, directories that "
		"could not be read are listed without their entries, counted in 'unreadable' and said "
		"in the text.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"path\":{\"type\":\"string\",\"default\":\".\","
		"\"description\":\"Directory to list, relative to the workspace root (default: the root)\"},"
		"\"recursive\":{\"type\":\"boolean\",\"default\":false,"
		"\"description\":\"List the whole tree below the directory\"},"
		"\"max_entries\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,\"default\":1000,"
		"\"description\":\"Maximum number of entries to return\"}},"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_READ,
	.idempotent = true,
	.path_args = path_args,
	.exec = list_dir_exec,
	.cancel = fsjob_cancel,
};
