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

#include "lib/fsjob.h"
#include "lib/workspace.h"
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
	w->stack[w->depth++] = (struct walk_level){ .fd = fd, .rel = xstrdup(rel), .v = v, .n = n };
	return r;
}

static void pop_level(struct walk *w)
{
	struct walk_level *l = &w->stack[--w->depth];
	for (size_t i = l->i; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	free(l->rel);
	close(l->fd);
}

void walk_init(struct walk *w, int dirfd)
{
	*w = (struct walk){ .basefd = dirfd };
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
	*w = (struct walk){ .basefd = -1 };
}
