/* SPDX-License-Identifier: MIT */
/*
 * The resumable tree walk of the searching tools (see walk.h).
 */
#include "tools/walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fsjob/fsjob.h"
#include "lib/ignore/ignore.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"

/* Directories deeper than this are not entered: each level holds an fd. */
#define WALK_DEPTH_MAX 128

/* Bytes asked of getdents64 at once: most directories in one call. */
#define WALK_DENTS_BUF 65536

/* An entry of a directory read: its name at off in the level's names. */
struct walk_ent {
	uint32_t off;
	uint16_t len;		/* of the name (NAME_MAX at most) */
	uint8_t type;		/* enum walk_type */
};

struct walk_level {
	int fd;			/* the directory, open while its entries are walked */
	size_t rel_len;		/* its path relative to the start: w->pathbuf's first rel_len bytes */
	struct ignore *ig[2];	/* its .ignore and .gitignore, or NULL */
	char *names;		/* its names, each ended by a NUL, in one block */
	struct walk_ent *v;	/* sorted by name unless the walk is unsorted */
	size_t i, n;
	bool has_ignore, has_gitignore;	/* among its names */
};

static int ent_cmp(const void *a, const void *b, void *names)
{
	const char *s = names;
	return strcmp(s + ((const struct walk_ent *)a)->off, s + ((const struct walk_ent *)b)->off);
}

static enum walk_type type_of_mode(mode_t m)
{
	return S_ISREG(m) ? WALK_FILE : S_ISDIR(m) ? WALK_DIR : S_ISLNK(m) ? WALK_SYMLINK : WALK_OTHER;
}

/* Reads the ignore file name of the directory fd, or NULL. */
static struct ignore *load_ignore(int dirfd, const char *name)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	struct buf b = {0};
	for (;;) {
		buf_reserve(&b, 4096);
		ssize_t k = read(fd, b.data + b.len, MIN(b.cap - b.len, IGNORE_FILE_MAX + 1 - b.len));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		b.len += (size_t)k;
		if (buf_size(&b) > IGNORE_FILE_MAX)
			break;
	}
	struct ignore *ig = ignore_parse(buf_head(&b), buf_size(&b));
	buf_free(&b);
	return ig;
}

/* The type getdents64 gave, or the entry's own when the file system gave none. */
static int dent_type(int fd, const struct dirent64 *de, enum walk_type *ret)
{
	switch (de->d_type) {
	case DT_REG: *ret = WALK_FILE; return 0;
	case DT_DIR: *ret = WALK_DIR; return 0;
	case DT_LNK: *ret = WALK_SYMLINK; return 0;
	case DT_UNKNOWN: break;
	default: *ret = WALK_OTHER; return 0;
	}
	struct stat st;
	if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;	/* gone meanwhile */
	*ret = type_of_mode(st.st_mode);
	return 0;
}

/* Reads the directory fd whole into l: its names in one block, sorted
 * unless the walk is unsorted. */
static int read_level(struct walk *w, int fd, struct walk_level *l)
{
	if (!w->dents)
		w->dents = xmalloc(WALK_DENTS_BUF);
	struct buf names = {0};
	size_t alloc = 0;
	int r = 0;
	for (;;) {
		ssize_t k = getdents64(fd, w->dents, WALK_DENTS_BUF);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			r = k < 0 ? -errno : 0;
			break;
		}
		if (fsjob_cancelled(w->job)) {
			r = -ECANCELED;
			break;
		}
		for (ssize_t off = 0; off < k;) {
			const struct dirent64 *de = (const struct dirent64 *)(w->dents + off);
			off += de->d_reclen;
			const char *s = de->d_name;
			if (s[0] == '.' && (!s[1] || (s[1] == '.' && !s[2])))
				continue;
			enum walk_type t = WALK_OTHER;
			if (dent_type(fd, de, &t) < 0)
				continue;
			if (buf_size(&names) > UINT32_MAX - 512)
				continue;	/* 4 GiB of names: the rest is not kept */
			if (l->n == alloc) {
				alloc = alloc ? 2 * alloc : 64;
				l->v = xreallocarray(l->v, alloc, sizeof(*l->v));
			}
			size_t len = strlen(s);
			l->v[l->n++] = (struct walk_ent){ (uint32_t)buf_size(&names), (uint16_t)MIN(len, UINT16_MAX),
							  (uint8_t)t };
			buf_append(&names, s, len + 1);
			if (s[0] == '.') {
				l->has_ignore |= str_eq(s, ".ignore");
				l->has_gitignore |= str_eq(s, ".gitignore");
			}
		}
	}
	l->names = buf_steal(&names);
	if (l->n > 1 && !w->unsorted)
		qsort_r(l->v, l->n, sizeof(*l->v), ent_cmp, l->names);
	return r;
}

/* Reads the directory at w->pathbuf (the start when empty) whole, names
 * sorted, into a new level on the stack. */
static int push_level(struct walk *w)
{
	int fd;
	if (!w->depth) {
		fd = openat(w->basefd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else {
		/* One name beneath its parent's fd, O_NOFOLLOW: no symlink followed. */
		const struct walk_level *up = &w->stack[w->depth - 1];
		fd = openat(up->fd, w->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	struct walk_level l = { .fd = fd, .rel_len = buf_size(&w->pathbuf) };
	int r = read_level(w, fd, &l);
	if (w->depth == w->alloc) {
		w->alloc = w->alloc ? 2 * w->alloc : 16;
		w->stack = xreallocarray(w->stack, w->alloc, sizeof(*w->stack));
	}
	if (w->use_ignores) {
		/* Opened only when the listing holds them: most directories do not. */
		if (l.has_ignore)
			l.ig[0] = load_ignore(fd, ".ignore");
		if (l.has_gitignore)
			l.ig[1] = load_ignore(fd, ".gitignore");
		if (l.ig[0] || l.ig[1])
			w->n_ignoring++;
	}
	w->stack[w->depth++] = l;
	return r;
}

static void pop_level(struct walk *w)
{
	struct walk_level *l = &w->stack[--w->depth];
	free(l->v);
	free(l->names);
	if (l->ig[0] || l->ig[1])
		w->n_ignoring--;
	ignore_free(l->ig[0]);
	ignore_free(l->ig[1]);
	close(l->fd);
}

/* Whether the ignore files exclude the entry at path. */
static bool ignored(struct walk *w, const char *path, size_t len, bool is_dir)
{
	for (size_t d = w->depth; w->n_ignoring && d-- > 0;) {
		const struct walk_level *l = &w->stack[d];
		if (!l->ig[0] && !l->ig[1])
			continue;
		size_t skip = l->rel_len ? l->rel_len + 1 : 0;
		for (int k = 0; k < 2; k++) {
			enum ignore_verdict v = ignore_match(l->ig[k], path + skip, len - skip, is_dir);
			if (v != IGNORE_NONE)
				return v == IGNORE_EXCLUDE;
		}
	}
	for (size_t i = 0; i < w->n_outer; i++) {
		const struct walk_outer *o = &w->outer[i];
		const char *s = path;
		size_t n = len;
		if (*o->prefix) {
			buf_clear(&w->scratch);
			buf_printf(&w->scratch, "%s/", o->prefix);
			buf_append(&w->scratch, path, len);
			s = buf_head(&w->scratch);
			n = buf_size(&w->scratch);
		}
		enum ignore_verdict v = ignore_match(o->ig, s, n, is_dir);
		if (v != IGNORE_NONE)
			return v == IGNORE_EXCLUDE;
	}
	return false;
}

void walk_add_ignore(struct walk *w, struct ignore *ig, const char *prefix)
{
	if (!ig)
		return;
	w->outer = xreallocarray(w->outer, w->n_outer + 1, sizeof(*w->outer));
	w->outer[w->n_outer++] = (struct walk_outer){ ig, xstrdup(prefix) };
}

void walk_init(struct walk *w, int dirfd)
{
	/* The options and outer patterns set before stay. */
	w->basefd = dirfd;
	if (ws_guard_reads_denied()) {
		char proc[64], path[PATH_MAX];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
		ssize_t n = readlink(proc, path, sizeof(path) - 1);
		if (n > 0)
			w->deny_base = xstrndup(path, (size_t)n);
	}
}

/* Whether the entry at path (relative to the start) is private. */
static bool denied(struct walk *w, const char *path, size_t len)
{
	if (!w->deny_base)
		return false;
	buf_clear(&w->scratch);
	buf_puts(&w->scratch, w->deny_base);
	if (!str_eq(w->deny_base, "/"))
		buf_putc(&w->scratch, '/');
	buf_append(&w->scratch, path, len);
	return ws_guard_denied(buf_head(&w->scratch), buf_size(&w->scratch)) != NULL;
}

int walk_next(struct walk *w, const char **ret_path, enum walk_type *ret_type)
{
	if (!w->started) {
		w->started = true;
		buf_clear(&w->pathbuf);
		int r = push_level(w);
		if (r < 0 && w->depth == 0)
			return r;
	}
	w->path = w->name = NULL;
	while (w->depth > 0) {
		struct walk_level *l = &w->stack[w->depth - 1];
		if (l->i == l->n) {
			pop_level(w);
			continue;
		}
		const struct walk_ent *e = &l->v[l->i++];
		const char *name = l->names + e->off;
		/* The entry's path: its directory's, then its name. */
		w->pathbuf.len = l->rel_len;
		if (l->rel_len)
			buf_putc(&w->pathbuf, '/');
		buf_append(&w->pathbuf, name, e->len);
		buf_reserve(&w->pathbuf, 1);
		w->pathbuf.data[w->pathbuf.len] = '\0';
		const char *path = buf_head(&w->pathbuf);
		size_t len = buf_size(&w->pathbuf);
		/* A .git skipped whatever the flags is not counted with what
		 * hidden or no_ignore would bring back. */
		if (denied(w, path, len)) {
			if (e->type == WALK_DIR)
				w->unreadable++;
			else
				w->denied_files++;
			continue;
		}
		bool git_dir = w->skip_git && e->type == WALK_DIR && str_eq(name, ".git");
		if ((w->skip_hidden && name[0] == '.') ||
		    (w->use_ignores && ignored(w, path, len, e->type == WALK_DIR))) {
			w->skipped += !git_dir;
			continue;
		}
		w->name = name;
		w->dirfd = l->fd;
		bool enter = e->type == WALK_DIR && w->depth < WALK_DEPTH_MAX &&
			     !(w->skip_git && str_eq(name, ".git")) &&
			     (!w->descend || w->descend(w->arg, path, len));
		/* A directory that cannot be read (no permission, replaced
		 * meanwhile) is reported without its entries. */
		if (enter && push_level(w) < 0)
			w->unreadable++;
		/* Entering may have moved the stack: the name is in the parent's block, which stays. */
		w->path = w->pathbuf.data;
		w->path_len = len;
		*ret_path = w->path;
		*ret_type = (enum walk_type)e->type;
		return 1;
	}
	return 0;
}

void walk_done(struct walk *w)
{
	while (w->depth > 0)
		pop_level(w);
	free(w->stack);
	free(w->dents);
	buf_free(&w->pathbuf);
	buf_free(&w->scratch);
	free(w->deny_base);
	if (w->basefd >= 0)
		close(w->basefd);
	for (size_t i = 0; i < w->n_outer; i++) {
		ignore_free(w->outer[i].ig);
		free(w->outer[i].prefix);
	}
	free(w->outer);
	*w = (struct walk){ .basefd = -1 };
}

/* Reads the ignore file at path (relative to the workspace), or NULL. */
static struct ignore *read_ignore(const struct fsjob *job, const char *path)
{
	struct buf b = {0};
	struct ignore *ig = NULL;
	if (fsjob_read(job, path, strlen(path), 0, IGNORE_FILE_MAX, &b, NULL) == 0)
		ig = ignore_parse(buf_head(&b), buf_size(&b));
	buf_free(&b);
	return ig;
}

void walk_load_outer(struct walk *w, const struct fsjob *job, const char *start)
{
	if (!w->use_ignores || start[0] == '/')
		return;
	if (str_eq(start, "."))
		start = "";
	size_t n = strlen(start);
	/* The directories above the start, deepest first: "a" then "" for "a/b". */
	for (size_t end = n; end > 0;) {
		const char *slash = memrchr(start, '/', end);
		size_t dir_len = slash ? (size_t)(slash - start) : 0;
		const char *prefix = start + (slash ? dir_len + 1 : 0);
		static const char *const names[] = { ".ignore", ".gitignore" };
		for (size_t k = 0; k < 2; k++) {
			_cleanup_free_ char *p = dir_len ? xasprintf("%.*s/%s", (int)dir_len, start, names[k])
							 : xstrdup(names[k]);
			walk_add_ignore(w, read_ignore(job, p), prefix);
		}
		end = dir_len;
	}
	/* The repository's own excludes, from the nearest directory holding .git. */
	for (size_t end = n;;) {
		_cleanup_free_ char *p = end ? xasprintf("%.*s/.git/info/exclude", (int)end, start)
					     : xstrdup(".git/info/exclude");
		struct ignore *ig = read_ignore(job, p);
		if (ig) {
			walk_add_ignore(w, ig, start + (end ? MIN(end + 1, n) : 0));
			break;
		}
		if (!end)
			break;
		const char *slash = memrchr(start, '/', end);
		end = slash ? (size_t)(slash - start) : 0;
	}
}

bool walk_names_hidden(const char *s, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (s[i] == '.' && (i == 0 || s[i - 1] == '/') && s[i + 1] != '/' && s[i + 1] != '.')
			return true;
	return false;
}
