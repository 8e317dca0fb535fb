/* SPDX-License-Identifier: MIT */
/*
 * The other calls' TMPDIRs hidden by Landlock, for a daemon that would
 * otherwise give each call a mount namespace only to cover them (making
 * and tearing one down costs milliseconds a call; this costs a ruleset of
 * a few dozen rules).
 *
 * A second Landlock layer per call grants every right everywhere except
 * beneath the directory of TMPDIRs (tmp.c's base), where it grants only
 * the call's own TMPDIR. Landlock only grants, and a right granted on a
 * directory holds for all beneath it, so "everywhere except" is granted
 * around the base, as landlock.c does for deny_read: each directory on the
 * way from "/" to the base (the chain) gets a rule of its own and each of
 * its other entries (the siblings) the full right. Layers intersect: the
 * first layer (landlock.c: read everywhere, write where the profile says)
 * still decides everything else.
 *
 * What a chain directory gets is the one choice: with READ_DIR it can be
 * listed, and so can everything beneath it, the base among them (Landlock
 * cannot take back a right a parent's rule gives). So the layer is only
 * for children the base's modes already keep out (0711, the daemon's: a
 * child that is neither root nor the daemon's uid cannot list it, nor
 * "c"); a child that could list them (root, with CAP_DAC_READ_SEARCH, or
 * the daemon's own uid) keeps the mount namespace (run.c decides), rather
 * than lose the listing of "/" and each directory down to the base.
 *
 * Once per base the chain and the siblings are opened (O_PATH) and kept;
 * each call stats the chain (three or four stat calls) and opens them
 * again when one changed (an entry made or removed since: a sibling made
 * later would otherwise be out of reach), then makes its ruleset from the
 * kept fds and one rule for its own TMPDIR. (Directory times are kept at a
 * clock tick's precision: a chain changed in the two seconds before it was
 * read is read again at the next call.) The chain's directories are
 * not writable themselves in this layer: a workspace or write_extra path
 * holding the base is the caller's case for the mount namespace instead
 * (hide_covers()). Past SIBLINGS_MAX entries along the chain (a crowded
 * /tmp) the cost would be the namespace's: hide_ruleset() then fails and
 * the caller uses the namespace.
 *
 * What Landlock does not cover, and why it holds here: stat, chmod and
 * chown are not Landlock rights (a child that knows a neighbour's path
 * may stat it; chmod needs its uid, and a neighbour of the same uid is
 * reached by its path, which it did not give); links and renames into or
 * out of the hidden area need MAKE_* or REMOVE_* there (not granted) and
 * may not gain rights (REFER).
 */
#include "lib/sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "proto/base/util.h"

/* The most entries along the chain (beyond, the namespace is cheaper). */
#define SIBLINGS_MAX 256
#define CHAIN_MAX 32

static struct {
	char *base;
	int abi;
	unsigned n_chain;
	char *chain[CHAIN_MAX];		/* "/", ..., the base's parent */
	int chain_fd[CHAIN_MAX];
	struct stat chain_st[CHAIN_MAX];
	int *sib;			/* O_PATH fds of the siblings */
	size_t n_sib;
	bool sib_is_dir[SIBLINGS_MAX];
	bool ok;			/* the chain's stats are recorded */
	bool settled;			/* none changed in the second before the load */
	int err;			/* what the load ended with */
	unsigned gen;			/* counts the loads */
} h;

/* Closes what is kept. */
void hide_clear(void)
{
	for (unsigned i = 0; i < h.n_chain; i++) {
		free(h.chain[i]);
		if (h.chain_fd[i] >= 0)
			close(h.chain_fd[i]);
	}
	for (size_t i = 0; i < h.n_sib; i++)
		close(h.sib[i]);
	free(h.sib);
	free(h.base);
	unsigned gen = h.gen;
	memset(&h, 0, sizeof(h));
	h.gen = gen + 1;
}

/* Opens the entries of chain directory i but the next one on the way. */
static int open_siblings(unsigned i)
{
	const char *next = i + 1 < h.n_chain ? h.chain[i + 1] : h.base;
	next = strrchr(next, '/') + 1;
	int dfd = openat(h.chain_fd[i], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -ENOMEM;
	}
	struct dirent *e;
	int r = 0;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, next) == 0)
			continue;
		if (h.n_sib == SIBLINGS_MAX) {
			r = -E2BIG;
			break;
		}
		int fd = openat(h.chain_fd[i], e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0)
			continue;	/* gone since */
		if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode)) {
			close(fd);	/* a link: checked where it leads */
			continue;
		}
		h.sib = xreallocarray(h.sib, h.n_sib + 1, sizeof(*h.sib));
		h.sib_is_dir[h.n_sib] = S_ISDIR(st.st_mode);
		h.sib[h.n_sib++] = fd;
	}
	closedir(d);
	return r;
}

/* Opens the chain to base and its siblings, afresh. */
static int load(const char *base, int abi)
{
	hide_clear();
	h.base = xstrdup(base);
	h.abi = abi;
	for (unsigned i = 0; i < CHAIN_MAX; i++)
		h.chain_fd[i] = -1;
	/* "/", "/a", "/a/b", ... up to the base's parent. */
	for (const char *s = base; s && (s = strchr(s, '/'));) {
		size_t len = (size_t)(s - base);
		if (h.n_chain == CHAIN_MAX)
			return -E2BIG;
		h.chain[h.n_chain++] = len ? xstrndup(base, len) : xstrdup("/");
		s++;
	}
	if (h.n_chain == 0)
		return -EINVAL;
	struct timespec now;
	(void)clock_gettime(CLOCK_REALTIME, &now);
	h.settled = true;
	for (unsigned i = 0; i < h.n_chain; i++) {
		h.chain_fd[i] = open(h.chain[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (h.chain_fd[i] < 0 || fstat(h.chain_fd[i], &h.chain_st[i]) < 0)
			return -errno;
		/* Times are kept at a clock tick's precision: an entry made in
		 * the same tick as the one seen would not change them. */
		if (now.tv_sec - h.chain_st[i].st_mtim.tv_sec < 2 || now.tv_sec - h.chain_st[i].st_ctim.tv_sec < 2)
			h.settled = false;
	}
	/* From here the stats say whether to look again, also after a
	 * failure (a crowded directory is not read again at every call). */
	h.ok = true;
	for (unsigned i = 0; i < h.n_chain && h.err == 0; i++)
		h.err = open_siblings(i);
	return h.err;
}

/* Whether the chain is as it was loaded: the same directories, nothing
 * made or removed in them since (their mtime and ctime). */
static bool fresh(const char *base, int abi)
{
	if (!h.ok || !h.settled || h.abi != abi || strcmp(h.base, base) != 0)
		return false;
	for (unsigned i = 0; i < h.n_chain; i++) {
		struct stat st;
		if (stat(h.chain[i], &st) < 0 || st.st_dev != h.chain_st[i].st_dev ||
		    st.st_ino != h.chain_st[i].st_ino || st.st_mtim.tv_sec != h.chain_st[i].st_mtim.tv_sec ||
		    st.st_mtim.tv_nsec != h.chain_st[i].st_mtim.tv_nsec ||
		    st.st_ctim.tv_sec != h.chain_st[i].st_ctim.tv_sec ||
		    st.st_ctim.tv_nsec != h.chain_st[i].st_ctim.tv_nsec)
			return false;
	}
	return true;
}

/* Whether path is dir or beneath it. */
static bool beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (strcmp(dir, "/") == 0)
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool hide_covers(const char *base, const char *writable)
{
	return writable && writable[0] == '/' && beneath(base, writable);
}

/* Adds a rule granting access on fd's file, cut to what its type takes. */
static int add(int rs, int fd, bool dir, uint64_t access)
{
	if (!dir)
		access &= LL_FILE_RIGHTS;
	struct ll_path_beneath_attr pb = { .allowed_access = access, .parent_fd = fd };
	if (access && syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &pb, 0) < 0)
		return -errno;
	return 0;
}

bool hide_still(const char *base, int abi, unsigned gen)
{
	return h.gen == gen && fresh(base, abi) && h.err == 0;
}

int hide_ruleset(const char *base, const char *own, int abi, int *ret_fd, unsigned *ret_gen)
{
	int r;
	if (!fresh(base, abi))
		(void)load(base, abi);
	if (ret_gen)
		*ret_gen = h.gen;
	if (!h.ok)
		return -ENOENT;
	if (h.err < 0)
		return h.err;
	uint64_t all = ll_fs_rights(abi);
	struct ll_ruleset_attr attr = { .handled_access_fs = all };
	_cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr.handled_access_fs), 0);
	if (rs < 0)
		return -errno;
	for (unsigned i = 0; i < h.n_chain; i++)
		if ((r = add(rs, h.chain_fd[i], true, LL_FS_READ_DIR)) < 0)
			return r;
	for (size_t i = 0; i < h.n_sib; i++)
		if ((r = add(rs, h.sib[i], h.sib_is_dir[i], all)) < 0)
			return r;
	_cleanup_close_ int ofd = open(own, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ofd < 0)
		return -errno;
	if ((r = add(rs, ofd, true, all)) < 0)
		return r;
	*ret_fd = TAKE_FD(rs);
	return 0;
}
