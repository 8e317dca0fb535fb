/* SPDX-License-Identifier: MIT */
/*
 * The resumable tree walk of the searching tools (see walk.h).
 */
#include "tools/walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/ignore.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"

/* Directories deeper than this are not entered: each level holds an fd. */
#define WALK_DEPTH_MAX 128

struct walk_ent {
	char *name;
	enum walk_type type;
};

struct walk_level {
	int fd;			/* the directory, open while its entries are walked */
	char *rel;		/* relative to the start, "" for the start */
	struct ignore *ig[2];	/* its .ignore and .gitignore, or NULL */
	struct walk_ent *v;
	size_t i, n;
};

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct walk_ent *)a)->name, ((const struct walk_ent *)b)->name);
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

/* Reads the directory rel whole, names sorted, into a new level on the stack. */
static int push_level(struct walk *w, const char *rel)
{
	int fd = -1, r = 0;
	if (!*rel) {
		fd = openat(w->basefd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		r = fd < 0 ? -errno : 0;
	} else {
		/* One component beneath its parent's fd: no symlink followed. */
		const struct walk_level *up = &w->stack[w->depth - 1];
		r = ws_open_nofollow(up->fd, w->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, &fd);
	}
	if (r < 0)
		return r;
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		r = -errno;
		if (dfd >= 0)
			close(dfd);
		close(fd);
		return r;
	}
	struct walk_ent *v = NULL;
	size_t n = 0, alloc = 0;
	struct dirent *de;
	for (errno = 0; (de = readdir(d)); errno = 0) {
		if ((n & 255) == 255 && fsjob_cancelled(w->job)) {
			errno = ECANCELED;
			break;
		}
		if (str_eq(de->d_name, ".") || str_eq(de->d_name, ".."))
			continue;
		enum walk_type t;
		switch (de->d_type) {
		case DT_REG: t = WALK_FILE; break;
		case DT_DIR: t = WALK_DIR; break;
		case DT_LNK: t = WALK_SYMLINK; break;
		case DT_UNKNOWN: {
			struct stat st;
			if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;	/* gone meanwhile */
			t = type_of_mode(st.st_mode);
			break;
		}
		default: t = WALK_OTHER; break;
		}
		if (n == alloc) {
			alloc = alloc ? 2 * alloc : 32;
			v = xreallocarray(v, alloc, sizeof(*v));
		}
		v[n++] = (struct walk_ent){ xstrdup(de->d_name), t };
	}
	r = errno ? -errno : 0;
	closedir(d);
	if (n > 1)
		qsort(v, n, sizeof(*v), ent_cmp);
	w->stack = xreallocarray(w->stack, w->depth + 1, sizeof(*w->stack));
	struct walk_level *l = &w->stack[w->depth++];
	*l = (struct walk_level){ .fd = fd, .rel = xstrdup(rel), .v = v, .n = n };
	if (w->use_ignores) {
		/* Opened only when the listing holds them: most directories do not. */
		if (bsearch(&(struct walk_ent){ .name = (char *)".ignore" }, v, n, sizeof(*v), ent_cmp))
			l->ig[0] = load_ignore(fd, ".ignore");
		if (bsearch(&(struct walk_ent){ .name = (char *)".gitignore" }, v, n, sizeof(*v), ent_cmp))
			l->ig[1] = load_ignore(fd, ".gitignore");
	}
	return r;
}

static void pop_level(struct walk *w)
{
	struct walk_level *l = &w->stack[--w->depth];
	for (size_t i = l->i; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	free(l->rel);
	ignore_free(l->ig[0]);
	ignore_free(l->ig[1]);
	close(l->fd);
}

/* Whether the ignore files exclude the entry at path. */
static bool ignored(const struct walk *w, const char *path, bool is_dir)
{
	size_t len = strlen(path);
	for (size_t d = w->depth; d-- > 0;) {
		const struct walk_level *l = &w->stack[d];
		if (!l->ig[0] && !l->ig[1])
			continue;
		size_t skip = *l->rel ? strlen(l->rel) + 1 : 0;
		for (int k = 0; k < 2; k++) {
			enum ignore_verdict v = ignore_match(l->ig[k], path + skip, len - skip, is_dir);
			if (v != IGNORE_NONE)
				return v == IGNORE_EXCLUDE;
		}
	}
	for (size_t i = 0; i < w->n_outer; i++) {
		const struct walk_outer *o = &w->outer[i];
		_cleanup_free_ char *full = *o->prefix ? xasprintf("%s/%s", o->prefix, path) : NULL;
		const char *s = full ? full : path;
		enum ignore_verdict v = ignore_match(o->ig, s, strlen(s), is_dir);
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
}

int walk_next(struct walk *w, const char **ret_path, enum walk_type *ret_type)
{
	if (!w->stack) {
		int r = push_level(w, "");
		if (r < 0 && w->depth == 0)
			return r;
	}
	free(w->path);
	free(w->name);
	w->path = w->name = NULL;
	while (w->depth > 0) {
		struct walk_level *l = &w->stack[w->depth - 1];
		if (l->i == l->n) {
			pop_level(w);
			continue;
		}
		struct walk_ent e = l->v[l->i++];
		w->path = *l->rel ? xasprintf("%s/%s", l->rel, e.name) : xstrdup(e.name);
		if ((w->skip_hidden && e.name[0] == '.') ||
		    (w->use_ignores && ignored(w, w->path, e.type == WALK_DIR))) {
			w->skipped++;
			free(e.name);
			free(w->path);
			w->path = NULL;
			continue;
		}
		w->name = e.name;
		w->dirfd = l->fd;
		bool enter = e.type == WALK_DIR && w->depth < WALK_DEPTH_MAX &&
			     !(w->skip_git && str_eq(e.name, ".git")) &&
			     (!w->descend || w->descend(w->arg, w->path, strlen(w->path)));
		/* A directory that cannot be read (no permission, replaced
		 * meanwhile) is reported without its entries. */
		if (enter && push_level(w, w->path) < 0)
			w->unreadable++;
		*ret_path = w->path;
		*ret_type = e.type;
		return 1;
	}
	return 0;
}

void walk_done(struct walk *w)
{
	while (w->depth > 0)
		pop_level(w);
	free(w->stack);
	free(w->path);
	free(w->name);
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
