/* SPDX-License-Identifier: MIT */
/*
 * Private TMPDIRs, each with the Landlock ruleset that makes it writable.
 *
 * A ruleset takes one landlock_add_rule per kept rule, and its TMPDIR rule
 * names that directory's inode, so both are made together and reused: a
 * slot is a directory (mode 0700, owned by the identity it serves) and the
 * ruleset of one rule list plus that directory. A call takes a free slot of
 * its rule list and identity, or makes one; when the call ends, everything
 * in the directory is removed and the slot is free again. What one call
 * left in its TMPDIR is never seen by the next.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/base/util.h"

/* Free slots kept; more are removed when their call ends. */
#define FREE_MAX 64
/* How deep a TMPDIR is emptied; deeper is left in place. */
#define RM_DEPTH_MAX 128

static char *tmp_base;
static uint64_t seq;
static uint64_t generation;
static struct tmp_slot *free_slots[FREE_MAX];
static size_t n_free;

/* Removes name in parent and, for a directory, all it holds. Never
 * follows a symlink: directories are opened with O_NOFOLLOW. */
void rm_tree_at(int parent, const char *name, unsigned depth)
{
	if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return;
	if (errno == ENOTDIR) {
		(void)unlinkat(parent, name, 0);
		return;
	}
	if (depth >= RM_DEPTH_MAX)
		return;
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			rm_tree_at(dirfd(d), e->d_name, depth + 1);
	closedir(d);
	(void)unlinkat(parent, name, AT_REMOVEDIR);
}

/* The daemon's directory of TMPDIRs: made once, mode 0711, so each child
 * can reach its own and list none. */
static int tmp_base_get(const char **ret)
{
	if (!tmp_base) {
		const char *t = getenv("TMPDIR");
		_cleanup_free_ char *tmpl = xasprintf("%s/toolcalld.%d.XXXXXX", t && t[0] == '/' ? t : "/tmp",
						      (int)getpid());
		if (!mkdtemp(tmpl))
			return -errno;
		if (chmod(tmpl, 0711) < 0) {
			int e = -errno;
			(void)rmdir(tmpl);
			return e;
		}
		tmp_base = TAKE_PTR(tmpl);
	}
	*ret = tmp_base;
	return 0;
}

static void slot_destroy(struct tmp_slot *s)
{
	if (!s)
		return;
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	if (s->ruleset_fd >= 0)
		close(s->ruleset_fd);
	if (s->path)
		rm_tree_at(AT_FDCWD, s->path, 0);
	free(s->path);
	free(s->key);
	free(s);
}

/* Takes a free slot of the rules and identity, or makes one. */
int tmp_slot_get(const struct ll_rules *rules, int abi, uid_t uid, gid_t gid, bool chown_it,
		 struct tmp_slot **ret, char **ret_msg)
{
	_cleanup_free_ char *key = xasprintf("%s\n%u", rules ? ll_rules_key(rules) : "", (unsigned)uid);
	for (size_t i = n_free; i-- > 0;)
		if (strcmp(free_slots[i]->key, key) == 0) {
			*ret = free_slots[i];
			free_slots[i] = free_slots[--n_free];
			return 0;
		}

	const char *base = NULL;
	struct tmp_slot *s = xcalloc(1, sizeof(*s));
	s->dir_fd = s->ruleset_fd = -1;
	s->gen = generation;
	s->key = TAKE_PTR(key);
	int r = tmp_base_get(&base);
	if (r >= 0) {
		s->path = xasprintf("%s/%" PRIu64, base, ++seq);
		if (mkdir(s->path, 0700) < 0) {
			r = -errno;
			free(s->path);
			s->path = NULL;
		}
	}
	if (r >= 0 && chown_it && chown(s->path, uid, gid) < 0)
		r = -errno;
	if (r >= 0 && (s->dir_fd = open(s->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		r = -errno;
	if (r < 0) {
		*ret_msg = xasprintf("Could not make a private TMPDIR: %s", strerror(-r));
		slot_destroy(s);
		return r;
	}
	if (rules && (r = ll_ruleset_make(rules, abi, s->dir_fd, &s->ruleset_fd)) < 0) {
		*ret_msg = xasprintf("Could not make the Landlock ruleset: %s", strerror(-r));
		slot_destroy(s);
		return r;
	}
	*ret = s;
	return 0;
}

/* Whether a directory holds nothing (its fd read from the start). */
static bool dir_empty(int fd)
{
	_Alignas(8) char buf[256];
	if (lseek(fd, 0, SEEK_SET) < 0)
		return false;
	long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
	for (long off = 0; off < n;) {
		const char *name = buf + off + 19;	/* struct linux_dirent64's d_name */
		unsigned short reclen;
		memcpy(&reclen, buf + off + 16, sizeof(reclen));
		if (strcmp(name, ".") != 0 && strcmp(name, ".."))
			return false;
		off += reclen;
	}
	return n >= 0;
}

/* Empties a slot's directory and frees the slot for the next call. */
void tmp_slot_put(struct tmp_slot *s)
{
	if (!s)
		return;
	if (!dir_empty(s->dir_fd)) {
		DIR *d = opendir(s->path);
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
				rm_tree_at(dirfd(d), e->d_name, 1);
		if (d)
			closedir(d);
		if (!dir_empty(s->dir_fd)) {
			slot_destroy(s);
			return;
		}
	}
	/* Its owner may have opened it up: the next call gets it private. */
	(void)fchmod(s->dir_fd, 0700);
	if (s->gen != generation || n_free == FREE_MAX) {
		slot_destroy(s);
		return;
	}
	free_slots[n_free++] = s;
}

/* Removes the free slots; slots in use go when their call ends. */
void tmp_slots_clear(void)
{
	for (size_t i = 0; i < n_free; i++)
		slot_destroy(free_slots[i]);
	n_free = 0;
	generation++;
}

/* Removes the directory of TMPDIRs, at exit. */
void tmp_base_remove(void)
{
	tmp_slots_clear();
	if (tmp_base) {
		rm_tree_at(AT_FDCWD, tmp_base, 0);
		free(tmp_base);
		tmp_base = NULL;
	}
}
