/* SPDX-License-Identifier: MIT */
/*
 * The git directories of a workspace in which sandbox.protect holds for
 * children (run.c mounts the protected entries of each read-only): the
 * repository's own .git, its submodules' git directories (.git/modules/
 * NAME, one readdir), and the .git of each repository one level down
 * (NAME/.git, or the file a submodule's worktree has there). Deeper repositories are not looked for: that would be a
 * scan of the tree at every call (the file tools hold protect in every
 * repository at any depth, by path: conf.c).
 *
 * The workspace's top is read again only when it has changed (its mtime
 * and ctime: an entry made, removed or renamed there), up to REPOS_SCAN
 * entries; a repository made later inside a directory that was already
 * there (git init of an existing directory) is found when the top next
 * changes or on reload.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/strv.h"
#include "proto/base/util.h"

/* The most git directories of submodules, and of entries looked at in a
 * workspace's top. */
#define MODULES_MAX 32
#define REPOS_SCAN 1024
/* The workspaces whose nested repositories are kept. */
#define KEPT_MAX 8

static struct kept {
	char *ws;
	struct stat st;
	char **names;		/* entries of the top holding a .git */
} kept[KEPT_MAX];
static unsigned n_kept;

static void push(char ***v, size_t *n, char *s)
{
	*v = xreallocarray(*v, *n + 2, sizeof(**v));
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Reads the entries of the top that hold a .git (a directory, or a file:
 * a submodule's "gitdir:" pointer). */
static char **scan(const char *ws)
{
	char **names = NULL;
	size_t n = 0;
	int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	struct dirent *e;
	for (unsigned seen = 0; (e = readdir(d)) && seen < REPOS_SCAN; seen++) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, ".git") == 0 ||
		    (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN))
			continue;
		_cleanup_free_ char *git = xasprintf("%s/.git", e->d_name);
		struct stat st;
		if (fstatat(dirfd(d), git, &st, AT_SYMLINK_NOFOLLOW) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
			push(&names, &n, xstrdup(e->d_name));
	}
	closedir(d);
	return names;
}

/* The entries of ws's top that are repositories, read again when the top
 * has changed. */
static const char *const *nested(const char *ws)
{
	struct stat st;
	if (stat(ws, &st) < 0)
		return NULL;
	unsigned i = 0;
	while (i < n_kept && strcmp(kept[i].ws, ws) != 0)
		i++;
	if (i < n_kept && same_stat(&kept[i].st, &st))
		return (const char *const *)kept[i].names;
	if (i == n_kept) {
		if (n_kept == KEPT_MAX) {
			/* The oldest goes. */
			free(kept[0].ws);
			strv_free(kept[0].names);
			memmove(kept, kept + 1, (KEPT_MAX - 1) * sizeof(*kept));
			i = --n_kept;
		}
		kept[i].ws = xstrdup(ws);
		kept[i].names = NULL;
		n_kept++;
	}
	strv_free(kept[i].names);
	kept[i].names = scan(ws);
	kept[i].st = st;
	return (const char *const *)kept[i].names;
}

void repos_clear(void)
{
	while (n_kept) {
		n_kept--;
		free(kept[n_kept].ws);
		strv_free(kept[n_kept].names);
	}
}

/* Adds dir's git directories: dir/.git when it is a directory, and its
 * submodules'; or dir/.git when it is a file, to the pointers (nested
 * only: the workspace's own is run.c's). */
static void add_repo(struct repo_dirs *r, const char *dir, bool nested_repo)
{
	char *top = xasprintf("%s/.git", dir);
	struct stat st;
	int k = lstat(top, &st);
	if (k < 0 || !S_ISDIR(st.st_mode)) {
		if (k == 0 && nested_repo && S_ISREG(st.st_mode))
			push(&r->pointers, &r->n_pointers, top);
		else
			free(top);
		return;
	}
	push(&r->git, &r->n, top);
	push(&r->base, &r->n_base, xstrdup(dir));
	_cleanup_free_ char *mod = xasprintf("%s/modules", top);
	int fd = open(mod, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	for (unsigned n = 0; (e = readdir(d)) && n < MODULES_MAX;)
		if (e->d_type == DT_DIR && e->d_name[0] != '.') {
			push(&r->git, &r->n, xasprintf("%s/%s", mod, e->d_name));
			push(&r->base, &r->n_base, xstrdup(dir));
			n++;
		}
	closedir(d);
}

void repos_get(const char *ws, struct repo_dirs *ret)
{
	*ret = (struct repo_dirs){0};
	add_repo(ret, ws, false);
	ret->n_top = ret->n;
	for (const char *const *n = nested(ws); n && *n; n++) {
		_cleanup_free_ char *dir = xasprintf("%s/%s", ws, *n);
		add_repo(ret, dir, true);
	}
}

void repo_dirs_clear(struct repo_dirs *r)
{
	strv_free(r->git);
	strv_free(r->base);
	strv_free(r->pointers);
	*r = (struct repo_dirs){0};
}
