/* SPDX-License-Identifier: MIT */
/*
 * memory: notes that outlive a session, in the shape of Anthropic's
 * client-side memory tool (memory_20250818): one "command" (view, create,
 * str_replace, insert, delete, rename) on paths under "/memories", with
 * that tool's result and error texts, executed by the daemon. Long because the six commands share one job's
 * plumbing (scope, lock, limits, texts) that a split would spread.
 *
 * Where it lives: under memory.dir, the daemon's own store of the file job
 * (fsjob_start_store(), lib/fsjob/fsjob.h): one directory per peer uid
 * ("<uid>", 0700, owned by the peer, made by the daemon on the loop: the
 * daemon owns memory.dir, so nobody else can put anything in its place),
 * and in it one directory per scope (fsjob_store_dir()): "memories"
 * (memory.scope "uid") or "ws-<hash of the workspace root>" (memory.scope
 * "workspace"). The tool names the store by memory.dir alone, never by an
 * fd, so it has no way to point its work at a directory it opened itself.
 * Everything below runs on an io thread as the peer, in a job whose
 * workspace is the peer's directory: the kernel decides what it may
 * touch. Every path is resolved beneath the scope directory with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) (fsjob_open_nofollow): ".."
 * is refused before that, a symlink anywhere on a path is refused by the
 * kernel. Writes are atomic (fsjob_write_atomic: temp file, rename), one
 * at a time per scope (flock on it, across threads and daemons), within
 * memory.max_file_kb per file and memory.max_total_kb per scope, and UTF-8
 * text only. Failures a model can act on are results with isError, whose
 * text says what to do.
 *
 * With the Redis store, memory is kept in Redis instead
 * (tools/memory_redis.c): the same commands, texts and limits, shared by
 * every daemon on that Redis.
 *
 * This file is long because it holds the six commands in files with the
 * texts that the client-side tool answers, word for word, and the scope
 * directories a root daemon makes for each uid; what Redis needs is apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/identity.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/utf8.h"
#include "tools/memory_internal.h"
#include "tools/render.h"
#include "tools/tools.h"

static const char *const command_names[] = {
	[C_VIEW] = "view", [C_CREATE] = "create", [C_STR_REPLACE] = "str_replace",
	[C_INSERT] = "insert", [C_DELETE] = "delete", [C_RENAME] = "rename",
};

static void mem_job_free(void *arg)
{
	struct mem_job *j = arg;
	free(j->path);
	free(j->rel);
	free(j->path2);
	free(j->rel2);
	free(j->text);
	free(j->old);
	free(j->redis_addr);
	free(j->redis_key);
	buf_free(&j->out);
	free(j);
}

/* Sets the job's answer to an error whose text is fmt's. */
int mem_fail(struct mem_job *j, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = xvasprintf(fmt, ap);
	va_end(ap);
	buf_clear(&j->out);
	buf_puts(&j->out, s);
	free(s);
	j->is_error = true;
	return 0;
}

/* Fails for an errno no other message covers: what failed, and why. */
int fail_errno(struct mem_job *j, int r, const char *what, const char *path)
{
	if (r == -ELOOP)
		return mem_fail(j, "The path %s is, or passes through, a symbolic link; the memory directory "
			    "follows no links. Use a path made of plain directories and files.", path);
	if (r == -ENOTDIR)
		return mem_fail(j, "A part of the path %s is a file, not a directory.", path);
	if (r == -EACCES || r == -EPERM)
		return mem_fail(j, "Could not %s %s: permission denied (the memory directory belongs to "
			    "you; something in it has other rights).", what, path);
	if (r == -ENOSPC || r == -EDQUOT)
		return mem_fail(j, "Could not %s %s: the disk holding memory is full.", what, path);
	return mem_fail(j, "Could not %s %s: %s.", what, path, strerror(-r));
}

/* --- paths -------------------------------------------------------------- */

/* True for the name (n bytes) of ws_write_atomic's temporary file
 * (".NAME.tc-XXXXXX"): such a file found when no write is under way is a
 * leftover and removed (measure()), so no call may give that name. */
static bool temp_name_n(const char *name, size_t n)
{
	if (n < 11 || name[0] != '.' || memcmp(name + n - 10, ".tc-", 4) != 0)
		return false;
	for (size_t i = n - 6; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= '0' && name[i] <= '9')))
			return false;
	return true;
}

/*
 * Checks a path a call names: "/memories" or a path beneath it, no "..",
 * at most DEPTH_MAX components. Sets *ret_rel to the part beneath
 * ("" for /memories itself; empty and "." components dropped). NULL, or
 * the error text (owned).
 */
static char *path_beneath(const char *path, size_t len, char **ret_rel)
{
	if (len > PATH_BYTES_MAX || memchr(path, '\0', len))
		return xasprintf("The path %.100s... is too long or holds a NUL byte: at most %d bytes.",
				 path, PATH_BYTES_MAX);
	if (strncmp(path, PREFIX, strlen(PREFIX)) != 0 || (path[strlen(PREFIX)] && path[strlen(PREFIX)] != '/'))
		return xasprintf("Path must start with " PREFIX ", got: %s", path);
	struct buf rel = {0};
	unsigned depth = 0;
	for (const char *p = path + strlen(PREFIX); *p;) {
		while (*p == '/')
			p++;
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			buf_free(&rel);
			return xasprintf("Path %s would escape " PREFIX " directory", path);
		}
		if (temp_name_n(p, n)) {
			buf_free(&rel);
			return xasprintf("The name %.*s in %s is kept for the memory's own temporary files; "
					 "choose another name.", (int)n, p, path);
		}
		if (n && !(n == 1 && p[0] == '.')) {
			if (++depth > DEPTH_MAX) {
				buf_free(&rel);
				return xasprintf("The path %s is too deep: at most %d levels below " PREFIX ".",
						 path, DEPTH_MAX);
			}
			if (buf_size(&rel))
				buf_putc(&rel, '/');
			buf_append(&rel, p, n);
		}
		p = end;
	}
	buf_putc(&rel, '\0');
	*ret_rel = buf_steal(&rel);
	return NULL;
}

/*
 * Checks the characters of a path a call names: UTF-8, and none that
 * would let a name forge lines or read otherwise than it is where names
 * are shown (a listing, the audit log): no control character, line
 * separator or bidirectional override (utf8_is_control()). NULL, or what
 * is wrong (owned), for a validation error naming the argument.
 */
static char *path_chars_refused(const char *path, size_t len)
{
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t l = utf8_decode(path + i, len - i, &cp);
		if (!l)
			return xasprintf("is not UTF-8 text (byte 0x%02x at byte %zu)", (unsigned char)path[i], i);
		if (utf8_is_control(cp))
			return xasprintf("holds U+%04X at byte %zu: a memory path holds no control character "
					 "(U+0000 to U+001F, U+007F to U+009F), no line or paragraph separator "
					 "(U+2028, U+2029) and no bidirectional override", (unsigned)cp, i);
		i += l;
	}
	return NULL;
}

/* Appends a name found in the memory (as listed): every character
 * path_chars_refused() refuses, which a name made before or by hand may
 * hold, as \uXXXX, a byte that is not UTF-8 as \xHH, so that each entry
 * stays one line that reads as it is. */
void put_name(struct buf *out, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t l = utf8_decode(name + i, n - i, &cp);
		if (!l)
			buf_printf(out, "\\x%02x", (unsigned char)name[i++]);
		else if (utf8_is_control(cp))
			buf_printf(out, "\\u%04x", (unsigned)cp), i += l;
		else
			buf_append(out, name + i, l), i += l;
	}
}

/* Stats rel beneath the scope, following no symlink on the way (-ELOOP),
 * the last component itself when it is one. */
static int lookup(const struct fsjob *job, int sfd, const char *rel, struct stat *ret_st)
{
	_cleanup_close_ int fd = -1;
	int r = fsjob_open_nofollow(job, sfd, *rel ? rel : ".", O_PATH | O_NOFOLLOW | O_CLOEXEC, &fd);
	if (r < 0)
		return r;
	if (fstat(fd, ret_st) < 0)
		return -errno;
	return 0;
}

/* Reads the regular file rel (at most max bytes) into out. */
static int read_file(struct mem_job *j, int sfd, const char *rel, const char *path, struct buf *out)
{
	_cleanup_close_ int fd = -1;
	int r = fsjob_open_nofollow(j->job, sfd, *rel ? rel : ".", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, &fd);
	if (r == -ENOENT)
		return mem_fail(j, "The path %s does not exist. Please provide a valid path.", path), -ENOENT;
	if (r < 0)
		return fail_errno(j, r, "read", path), r;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		return fail_errno(j, r, "read", path), r;
	}
	if (S_ISDIR(st.st_mode))
		return mem_fail(j, "The path %s is not a file.", path), -EISDIR;
	if (!S_ISREG(st.st_mode))
		return mem_fail(j, "Unsupported file type for %s", path), -ENXIO;
	if ((uint64_t)st.st_size > j->max_file)
		return mem_fail(j, "The file %s holds %llu bytes, more than memory.max_file_kb (%zu KiB) allows; "
			    "delete it or ask the operator to raise the limit.",
			    path, (unsigned long long)st.st_size, j->max_file / 1024), -EFBIG;
	buf_reserve(out, (size_t)st.st_size + 1);
	for (;;) {
		char tmp[16384];
		ssize_t k = read(fd, tmp, sizeof(tmp));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return fail_errno(j, -errno, "read", path), -EIO;
		if (k == 0)
			break;
		if (buf_size(out) + (size_t)k > j->max_file)
			return mem_fail(j, "The file %s grew past memory.max_file_kb (%zu KiB) while it was read.",
				    path, j->max_file / 1024), -EFBIG;
		buf_append(out, tmp, (size_t)k);
	}
	if (!utf8_valid(buf_head(out), buf_size(out)))
		return mem_fail(j, "The file %s is not UTF-8 text; memory holds text only. Delete it or create it "
			    "again as text.", path), -EILSEQ;
	return 0;
}

/* --- the scope's size ----------------------------------------------------- */

struct usage {
	uint64_t bytes;		/* of regular files */
	unsigned entries;	/* files and directories */
};

static bool temp_name(const char *name)
{
	return temp_name_n(name, strlen(name));
}

/*
 * Adds up what the directory fd holds, depth levels below the scope. Run
 * with the scope's lock held, when no write is under way: a temporary file
 * found then was left by a write that never ended (the daemon killed), and
 * is removed, so it neither fills the memory unseen (hidden names are not
 * shown) nor stays.
 */
static int measure(const struct fsjob *job, int fd, unsigned depth, struct usage *u)
{
	int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (dupfd < 0)
		return -errno;
	DIR *d = fdopendir(dupfd);
	if (!d) {
		close(dupfd);
		return -errno;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (str_eq(de->d_name, ".") || str_eq(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;	/* gone meanwhile */
		if (S_ISREG(st.st_mode) && temp_name(de->d_name) && unlinkat(fd, de->d_name, 0) == 0)
			continue;
		u->entries++;
		if (S_ISREG(st.st_mode))
			u->bytes += (uint64_t)st.st_size;
		if (S_ISDIR(st.st_mode) && depth < DEPTH_MAX + 2 && u->entries <= 4 * ENTRIES_MAX) {
			_cleanup_close_ int sub = -1;
			if (fsjob_open_nofollow(job, fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, &sub) == 0)
				r = measure(job, sub, depth + 1, u);
		}
	}
	closedir(d);
	return r;
}

/* The errors of the three limits; -EDQUOT. */
int over_file(struct mem_job *j, const char *path, size_t n)
{
	mem_fail(j, "The file %s would hold %zu bytes, more than memory.max_file_kb (%zu KiB) allows; keep it "
	     "shorter or split it into several files.", path, n, j->max_file / 1024);
	return -EDQUOT;
}

int over_total(struct mem_job *j, uint64_t total)
{
	mem_fail(j, "No change was made: the memory would hold %llu bytes, more than memory.max_total_kb "
	     "(%zu KiB) allows. Delete or shorten files you no longer need first.", (unsigned long long)total,
	     j->max_total / 1024);
	return -EDQUOT;
}

int over_entries(struct mem_job *j, uint64_t entries)
{
	mem_fail(j, "No change was made: the memory already holds %llu files and directories, the most it may "
	     "(%d). Delete or merge files first.", (unsigned long long)entries, ENTRIES_MAX);
	return -EDQUOT;
}

/*
 * Checks that the scope may hold a file of n bytes in place of one of old
 * bytes (new_entries: files and directories the write adds). 0, or the
 * job's error set and -EDQUOT.
 */
static int check_quota(struct mem_job *j, int sfd, const char *path, size_t n, uint64_t old, unsigned new_entries)
{
	if (n > j->max_file)
		return over_file(j, path, n);
	struct usage u = {};
	int r = measure(j->job, sfd, 0, &u);
	if (r < 0)
		return fail_errno(j, r, "measure the memory for", path), r;
	if (u.bytes - MIN(old, u.bytes) + n > j->max_total)
		return over_total(j, u.bytes - MIN(old, u.bytes) + n);
	if (u.entries + new_entries > ENTRIES_MAX)
		return over_entries(j, u.entries);
	return 0;
}

/* The directories of rel that do not exist yet (a write would make them). */
static unsigned missing_dirs(const struct fsjob *job, int sfd, const char *rel)
{
	_cleanup_free_ char *dir = xstrdup(rel);
	unsigned n = 0;
	for (char *slash; (slash = strrchr(dir, '/'));) {
		*slash = '\0';
		struct stat st;
		if (lookup(job, sfd, dir, &st) == 0)
			break;
		n++;
	}
	return n;
}

/* The lines of text: a last line without '\n' counts, the empty rest after
 * a final '\n' does not. */
static size_t count_lines(const char *text, size_t n)
{
	size_t lines = 0;
	for (const char *p = text; (p = memchr(p, '\n', n - (size_t)(p - text))); p++)
		lines++;
	return lines + (n && text[n - 1] != '\n');
}

/* The line (1-based) that byte off of text is on. */
static size_t line_of(const char *text, size_t off)
{
	size_t line = 1;
	for (const char *p = text; (p = memchr(p, '\n', off - (size_t)(p - text))); p++)
		line++;
	return line;
}

/* --- writing ------------------------------------------------------------- */

/* The argument that holds the text a command writes. */
static const char *text_arg(const struct mem_job *j)
{
	return j->cmd == C_CREATE ? "file_text" : j->cmd == C_STR_REPLACE ? "new_str" :
	       j->cmd == C_INSERT ? "insert_text" : "the text";
}

/* The NUL bytes in s. */
static size_t count_nuls(const char *s, size_t n)
{
	size_t nuls = 0;
	for (const char *p = s; (p = memchr(p, '\0', n - (size_t)(p - s))); p++)
		nuls++;
	return nuls;
}

/*
 * Checks what a write would put in the file path in place of was (NULL
 * for none): text, that is UTF-8, and no NUL byte added (a NUL cuts the
 * text short wherever it is shown; one a file holds from before, or from
 * a hand, stays until an edit takes it out). Every write of either home
 * calls it first (write_file(), redis_put()), so no command writes
 * anything else. 0, or the job's error set (naming the argument at
 * fault) and -EILSEQ.
 */
int text_refused(struct mem_job *j, const char *path, const char *data, size_t n, const char *was, size_t was_n)
{
	if (j->text && !utf8_valid(j->text, j->text_len))
		return mem_fail(j, "%s is not UTF-8 text; memory holds text only.", text_arg(j)), -EILSEQ;
	if (j->text && memchr(j->text, '\0', j->text_len))
		return mem_fail(j, "%s holds a NUL byte (\\u0000); memory holds text only.", text_arg(j)), -EILSEQ;
	if (data != j->text && !utf8_valid(data, n))
		return mem_fail(j, "The file %s is not UTF-8 text; memory holds text only. Delete it or create it "
				"again as text.", path), -EILSEQ;
	if (memchr(data, '\0', n) && count_nuls(data, n) > (was ? count_nuls(was, was_n) : 0))
		return mem_fail(j, "The file %s would gain a NUL byte (\\u0000); memory holds text only.", path),
		       -EILSEQ;
	return 0;
}

/* rel as the job's file work names it: beneath the peer's directory, the
 * job's workspace (paths handed to it are checked here first). */
static char *scoped(const struct mem_job *j, const char *rel)
{
	return xasprintf("%s%s%s", j->scope, *rel ? "/" : "", rel);
}

/* Replaces the file rel with data, atomically. */
static int write_file(struct mem_job *j, int sfd, const char *rel, const char *path, const char *data, size_t n,
		      const struct buf *was, bool *ret_created)
{
	if (text_refused(j, path, data, n, was ? buf_head(was) : NULL, was ? buf_size(was) : 0) < 0)
		return -EILSEQ;
	_cleanup_free_ char *p = scoped(j, rel);
	int r = fsjob_write_atomic(j->job, p, strlen(p), data, n, true, ret_created);
	if (r < 0)
		return fail_errno(j, r, "write", path), r;
	j->bytes = n;
	return 0;
}

/* --- the commands -------------------------------------------------------- */

/* A size as the memory tool shows it: 0B, 512B, 4K, 1.5K, 2.0M. */
void put_size(struct buf *out, uint64_t n)
{
	static const char units[] = "BKMG";
	unsigned i = 0;
	while (i < 3 && n >= (UINT64_C(1) << (10 * (i + 1))))
		i++;
	uint64_t unit = UINT64_C(1) << (10 * i);
	if (n % unit == 0)
		buf_printf(out, "%llu%c", (unsigned long long)(n / unit), units[i]);
	else
		buf_printf(out, "%.1f%c", (double)n / (double)unit, units[i]);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists the directory fd (shown as shown) into out, depth levels down,
 * sorted by name, hidden entries left out; *left counts down the lines
 * still allowed. */
static void list_dir(const struct fsjob *job, int fd, const char *shown, unsigned depth, struct buf *out, unsigned *left)
{
	int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dupfd >= 0 ? fdopendir(dupfd) : NULL;
	if (!d) {
		if (dupfd >= 0)
			close(dupfd);
		return;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < VIEW_ENTRIES_MAX) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap)
			names = xrealloc(names, (cap = cap ? 2 * cap : 16) * sizeof(*names));
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (n > 0)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (*left && fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
			(*left)--;
			buf_putc(out, '\n');
			put_size(out, (uint64_t)st.st_size);
			size_t at = buf_size(out) + 1;
			buf_printf(out, "\t%s/", shown);
			put_name(out, names[i]);
			if (S_ISDIR(st.st_mode))
				buf_putc(out, '/');
			_cleanup_close_ int sub = -1;
			if (S_ISDIR(st.st_mode) && depth < 2 &&
			    fsjob_open_nofollow(job, fd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, &sub) == 0) {
				/* As just listed, less the '/'. */
				_cleanup_free_ char *deeper = xmemdup(buf_head(out) + at, buf_size(out) - at);
				deeper[buf_size(out) - at - 1] = '\0';
				list_dir(job, sub, deeper, depth + 1, out, left);
			}
		}
		free(names[i]);
	}
	free(names);
}


static int do_view(struct mem_job *j, int sfd)
{
	struct stat st;
	int r = lookup(j->job, sfd, j->rel, &st);
	if (r == -ENOENT)
		return mem_fail(j, "The path %s does not exist. Please provide a valid path.", j->path);
	if (r < 0)
		return fail_errno(j, r, "view", j->path);
	if (S_ISLNK(st.st_mode))
		return fail_errno(j, -ELOOP, "view", j->path);
	/* A directory's listing, or a file larger than the loop reads, is
	 * read on a worker. */
	if (fsjob_trying_inline(j->job) && (S_ISDIR(st.st_mode) || st.st_size > FSJOB_INLINE_BYTES))
		return FSJOB_NOT_INLINE;
	if (S_ISDIR(st.st_mode)) {
		_cleanup_close_ int fd = -1;
		r = fsjob_open_nofollow(j->job, sfd, *j->rel ? j->rel : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, &fd);
		if (r < 0)
			return fail_errno(j, r, "view", j->path);
		/* Shown as the call spelt it, less a trailing '/'. */
		_cleanup_free_ char *shown = xasprintf(PREFIX "%s%s", *j->rel ? "/" : "", j->rel);
		buf_printf(&j->out, "Here're the files and directories up to 2 levels deep in %s, "
			   "excluding hidden items:\n", shown);
		put_size(&j->out, (uint64_t)st.st_size);
		buf_printf(&j->out, "\t%s", shown);
		unsigned left = VIEW_ENTRIES_MAX;
		list_dir(j->job, fd, shown, 1, &j->out, &left);
		if (!left)
			buf_printf(&j->out, "\n(only the first %d entries are shown; view a directory among them, as "
				   "{\"command\": \"view\", \"path\": \"%s/NAME\"}, for the rest of it)", VIEW_ENTRIES_MAX, shown);
		return 0;
	}
	_cleanup_(buf_free) struct buf text = {0};
	if (read_file(j, sfd, j->rel, j->path, &text) < 0)
		return 0;
	return view_text(j, buf_head(&text), buf_size(&text));
}

/*
 * A file that holds NUL bytes (written before they were refused, or by
 * hand) is shown whole: each NUL in the lines from start on as U+2400
 * (SYMBOL FOR NULL), since the text ends at a NUL wherever it goes, and
 * a note after them says so and how to take them out.
 */
static void show_nuls(struct mem_job *j, const char *s, size_t n, size_t start)
{
	size_t nuls = count_nuls(s, n);
	struct buf shown = {0};
	const char *o = buf_head(&j->out) + start, *end = buf_head(&j->out) + buf_size(&j->out);
	for (const char *nul; (nul = memchr(o, '\0', (size_t)(end - o))); o = nul + 1) {
		buf_append(&shown, o, (size_t)(nul - o));
		buf_puts(&shown, "\xe2\x90\x80");
	}
	buf_append(&shown, o, (size_t)(end - o));
	j->out.len = j->out.off + start;
	buf_append(&j->out, buf_head(&shown), buf_size(&shown));
	buf_free(&shown);
	buf_printf(&j->out, "\n(The file holds %zu NUL byte%s, each shown as \xe2\x90\x80; memory holds text only, "
		   "and no write adds one; take them out with str_replace (old_str holding each as \\u0000) "
		   "or create the file again without them.)",
		   nuls, nuls == 1 ? "" : "s");
}

/* Shows a file's text numbered, or the part view_range asks for. */
int view_text(struct mem_job *j, const char *s, size_t n)
{
	size_t lines = count_lines(s, n);
	size_t first = 1, last = lines;
	if (j->has_range) {
		int64_t a = j->range[0], b = j->range[1];
		if (a < 1 || (uint64_t)a > MAX(lines, (size_t)1) || (b != -1 && (b < a || (uint64_t)b > lines)))
			return mem_fail(j, "Invalid `view_range` parameter: [%lld, %lld]. The first line must be within "
				    "[1, %zu] and the last at least the first and at most %zu, or -1 for the end "
				    "of the file.", (long long)a, (long long)b, MAX(lines, (size_t)1), lines);
		first = (size_t)a;
		last = b == -1 ? lines : (size_t)b;
	}
	buf_printf(&j->out, "Here's the content of %s with line numbers:", j->path);
	size_t start = buf_size(&j->out);
	render_numbered_lines(s, n, first, last, &j->out);
	if (memchr(s, '\0', n))
		show_nuls(j, s, n, start);
	return 0;
}

static int do_create(struct mem_job *j, int sfd)
{
	if (!*j->rel)
		return mem_fail(j, "Cannot create " PREFIX " itself: give the path of a file, such as "
			    PREFIX "/notes.md");
	struct stat st;
	int r = lookup(j->job, sfd, j->rel, &st);
	if (r < 0 && r != -ENOENT)
		return fail_errno(j, r, "create", j->path);
	if (r == 0 && S_ISDIR(st.st_mode))
		return mem_fail(j, "The path %s is a directory; give the path of a file inside it.", j->path);
	if (r == 0 && !S_ISREG(st.st_mode))
		return fail_errno(j, -ELOOP, "create", j->path);
	bool exists = r == 0;
	if (check_quota(j, sfd, j->path, j->text_len, exists ? (uint64_t)st.st_size : 0,
			exists ? 0 : 1 + missing_dirs(j->job, sfd, j->rel)) < 0)
		return 0;
	bool created;
	if (write_file(j, sfd, j->rel, j->path, j->text, j->text_len, NULL, &created) < 0)
		return 0;
	if (created)
		buf_printf(&j->out, "File created successfully at: %s", j->path);
	else
		buf_printf(&j->out, "File %s has been overwritten.", j->path);
	return 0;
}

/* Appends the text quoted back in an error, cut at QUOTE_MAX bytes. */
static char *quote(const char *s, size_t n)
{
	size_t keep = utf8_cut(s, n, QUOTE_MAX);
	return xasprintf("%.*s%s", (int)keep, s, keep < n ? "..." : "");
}

/* Makes in next the text s with old_str replaced by new_str, which must
 * occur exactly once; *ret_line is the line it starts on. -EINVAL with the
 * job's error set otherwise. */
int replace_text(struct mem_job *j, const char *s, size_t n, struct buf *next, size_t *ret_line)
{
	_cleanup_free_ char *q = quote(j->old, j->old_len);
	if (!j->old_len)
		return mem_fail(j, "No replacement was performed: old_str is empty. Give text that appears exactly "
			    "once in %s.", j->path), -EINVAL;
	const char *at = memmem(s, n, j->old, j->old_len);
	if (!at)
		return mem_fail(j, "No replacement was performed, old_str `%s` did not appear verbatim in %s.", q,
			    j->path), -EINVAL;
	const char *again = memmem(at + 1, n - (size_t)(at + 1 - s), j->old, j->old_len);
	if (again) {
		struct buf lines = {0};
		unsigned listed = 0;
		/* Lines counted on from the last match: one pass over the text. */
		size_t prev = 0, line = 1;
		const char *counted = s;
		for (const char *p = at; p && listed < LINES_LISTED_MAX;) {
			for (const char *nl; (nl = memchr(counted, '\n', (size_t)(p - counted))); counted = nl + 1)
				line++;
			counted = p;
			if (line != prev)
				buf_printf(&lines, "%s%zu", listed++ ? ", " : "", line);
			prev = line;
			/* The next line holding it: no need to list this one twice. */
			const char *eol = memchr(p, '\n', n - (size_t)(p - s));
			const char *from = eol ? eol : p + 1;
			p = from < s + n ? memmem(from, n - (size_t)(from - s), j->old, j->old_len) : NULL;
		}
		mem_fail(j, "No replacement was performed. Multiple occurrences of old_str `%s` in lines: %s. "
		     "Please ensure it is unique", q, buf_head(&lines));
		buf_free(&lines);
		return -EINVAL;
	}
	size_t off = (size_t)(at - s);
	buf_append(next, s, off);
	buf_append(next, j->text, j->text_len);
	buf_append(next, at + j->old_len, n - off - j->old_len);
	*ret_line = line_of(s, off);
	return 0;
}

/* Says what str_replace did: the changed lines with two lines of context
 * on each side, from the new text. */
void replaced(struct mem_job *j, const struct buf *next, size_t line)
{
	size_t last = line + count_lines(j->text, j->text_len) + 2;
	buf_puts(&j->out, "The memory file has been edited. Here is the snippet showing the change "
		 "(with line numbers):");
	render_numbered_lines(buf_head(next), buf_size(next), line > 2 ? line - 2 : 1, last, &j->out);
}

static int do_str_replace(struct mem_job *j, int sfd)
{
	_cleanup_(buf_free) struct buf text = {0}, next = {0};
	size_t line;
	if (read_file(j, sfd, j->rel, j->path, &text) < 0 ||
	    replace_text(j, buf_head(&text), buf_size(&text), &next, &line) < 0)
		return 0;
	if (check_quota(j, sfd, j->path, buf_size(&next), buf_size(&text), 0) == 0 &&
	    write_file(j, sfd, j->rel, j->path, buf_head(&next), buf_size(&next), &text, NULL) == 0)
		replaced(j, &next, line);
	return 0;
}


/* Makes in next the text s with insert_text as new lines after line
 * insert_line; -EINVAL with the job's error set for a line out of range. */
int insert_text(struct mem_job *j, const char *s, size_t n, struct buf *next)
{
	size_t lines = count_lines(s, n);
	if (j->line < 0 || (uint64_t)j->line > lines)
		return mem_fail(j, "Invalid `insert_line` parameter: %lld. It should be within the range [0, %zu].",
			    (long long)j->line, lines), -EINVAL;
	/* Where line insert_line ends (its '\n' included). */
	size_t off = 0;
	for (int64_t k = 0; k < j->line; k++) {
		const char *nl = memchr(s + off, '\n', n - off);
		off = nl ? (size_t)(nl - s) + 1 : n;
	}
	size_t add = j->text_len;
	while (add && j->text[add - 1] == '\n')
		add--;
	buf_append(next, s, off);
	if (off && s[off - 1] != '\n')
		buf_putc(next, '\n');
	buf_append(next, j->text, add);
	buf_putc(next, '\n');
	buf_append(next, s + off, n - off);
	return 0;
}

static int do_insert(struct mem_job *j, int sfd)
{
	_cleanup_(buf_free) struct buf text = {0}, next = {0};
	if (read_file(j, sfd, j->rel, j->path, &text) < 0 ||
	    insert_text(j, buf_head(&text), buf_size(&text), &next) < 0)
		return 0;
	if (check_quota(j, sfd, j->path, buf_size(&next), buf_size(&text), 0) == 0 &&
	    write_file(j, sfd, j->rel, j->path, buf_head(&next), buf_size(&next), &text, NULL) == 0)
		buf_printf(&j->out, "The file %s has been edited.", j->path);
	return 0;
}

static int do_delete(struct mem_job *j, int sfd)
{
	if (!*j->rel)
		return mem_fail(j, "Cannot delete the " PREFIX " directory itself");
	struct stat st;
	int r = lookup(j->job, sfd, j->rel, &st);
	if (r == -ENOENT)
		return mem_fail(j, "The path %s does not exist", j->path);
	if (r < 0)
		return fail_errno(j, r, "delete", j->path);
	/* At most ENTRIES_MAX entries (and what a peer put there itself):
	 * deleted in one go. */
	_cleanup_free_ char *p = scoped(j, j->rel);
	struct ws_deleter *del = NULL;
	r = fsjob_delete_begin(j->job, p, strlen(p), true, &del);
	while (r == WS_MORE)
		r = fsjob_delete_step(j->job, del, 0);
	ws_delete_free(del);
	if (r < 0)
		return fail_errno(j, r, "delete", j->path);
	buf_printf(&j->out, "Successfully deleted %s", j->path);
	return 0;
}

static int do_rename(struct mem_job *j, int sfd)
{
	if (!*j->rel)
		return mem_fail(j, "Cannot rename the " PREFIX " directory itself");
	struct stat st;
	int r = lookup(j->job, sfd, j->rel, &st);
	if (r == -ENOENT)
		return mem_fail(j, "The path %s does not exist", j->path);
	if (r < 0)
		return fail_errno(j, r, "rename", j->path);
	r = lookup(j->job, sfd, j->rel2, &st);
	if (r == 0 || !*j->rel2)
		return mem_fail(j, "The destination %s already exists", j->path2);
	if (r != -ENOENT)
		return fail_errno(j, r, "rename to", j->path2);
	unsigned dirs = missing_dirs(j->job, sfd, j->rel2);
	if (dirs && check_quota(j, sfd, j->path2, 0, 0, dirs) < 0)
		return 0;
	_cleanup_free_ char *from = scoped(j, j->rel), *to = scoped(j, j->rel2);
	const char *slash = strrchr(to, '/');
	bool made;
	r = fsjob_mkdir(j->job, to, (size_t)(slash - to), true, &made);
	if (r == 0)
		r = fsjob_rename(j->job, from, strlen(from), to, strlen(to), false);
	if (r == -EEXIST)
		return mem_fail(j, "The destination %s already exists", j->path2);
	if (r == -EINVAL)
		return mem_fail(j, "Cannot move %s into itself (%s).", j->path, j->path2);
	if (r < 0)
		return fail_errno(j, r, "rename", j->path);
	buf_printf(&j->out, "Successfully renamed %s to %s", j->path, j->path2);
	return 0;
}

static int mem_run(struct fsjob *job, void *arg)
{
	struct mem_job *j = arg;
	j->job = job;
	if (j->redis_addr)
		return redis_run(j);
	_cleanup_close_ int sfd = -1;
	int r = fsjob_store_dir(job, j->scope, &sfd);
	if (r < 0)
		return r;
	if (j->cmd != C_VIEW) {
		/* Released when sfd is closed. Holders are short: a write of
		 * at most max_file bytes. */
		while (flock(sfd, LOCK_EX) < 0)
			if (errno != EINTR)
				return -errno;
	}
	switch (j->cmd) {
	case C_VIEW:
		return do_view(j, sfd);
	case C_CREATE:
		return do_create(j, sfd);
	case C_STR_REPLACE:
		return do_str_replace(j, sfd);
	case C_INSERT:
		return do_insert(j, sfd);
	case C_DELETE:
		return do_delete(j, sfd);
	case C_RENAME:
		return do_rename(j, sfd);
	}
	return -EINVAL;
}

/* On the loop: the text as the result, the file in the audit log. */
static void mem_done(struct tool_call *call, void *arg, int r)
{
	struct mem_job *j = arg;
	if (r < 0 && j->redis_addr) {
		tool_call_fail(call, TC_TRANSIENT, "Memory is kept in Redis (%s), which cannot be reached now; "
			       "nothing was changed. Try again later.", j->redis_addr);
		return;
	}
	if (r < 0) {
		tool_call_fail(call, TC_EXECUTION_ERROR, "The memory directory could not be opened: %s",
			       strerror(-r));
		return;
	}
	if (!j->is_error && j->cmd != C_VIEW) {
		tool_call_note_file(call, j->path);
		if (j->path2)
			tool_call_note_file(call, j->path2);
		_cleanup_free_ char *what = j->cmd == C_CREATE || j->cmd == C_STR_REPLACE || j->cmd == C_INSERT
			? xasprintf("memory %s %s (%zu byte%s)", command_names[j->cmd], j->path, j->bytes, j->bytes == 1 ? "" : "s")
			: xasprintf("memory %s %s%s%s", command_names[j->cmd], j->path, j->path2 ? " " : "",
				    j->path2 ? j->path2 : "");
		tool_call_note_command(call, what);
	}
	tool_call_succeed(call, buf_steal(&j->out), NULL, j->is_error);
}

static const struct fsjob_ops mem_ops = {
	.run = mem_run,
	.done = mem_done,
	.free = mem_job_free,
};

/* A view of a small file is done on the loop when no identity is to be
 * taken (the peer is the daemon's own uid), as read_file's is. */
static const struct fsjob_ops mem_view_ops = {
	.run = mem_run,
	.done = mem_done,
	.free = mem_job_free,
	.inline_first = true,
};

/* --- where memory lives ----------------------------------------------------- */

/* The directory of this call's scope beneath the peer's: one for all of
 * its memory, or one per workspace root (by a hash of the canonical root). */
static void scope_name(const struct tool_call *call, char *out, size_t size)
{
	const struct tool_env *env = call->env;
	if (!env || !env->memory_per_workspace || !call->ws) {
		snprintf(out, size, "memories");
		return;
	}
	uint64_t h = UINT64_C(14695981039346656037);	/* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)call->ws->root; *p; p++)
		h = (h ^ *p) * UINT64_C(1099511628211);
	snprintf(out, size, "ws-%016llx", (unsigned long long)h);
}

/* Takes a string argument, or NULL when absent. */
static char *arg_dup(const struct json *args, const char *key, size_t *ret_len)
{
	const struct json *v = json_get(args, key);
	if (!v || v->type != JSON_STRING)
		return NULL;
	if (ret_len)
		*ret_len = v->u.str.len;
	return xmemdup(v->u.str.s, v->u.str.len + 1);
}

/* Ends the call with an error result before any file work. */
static enum tool_ret refuse(struct tool_call *call, struct mem_job *j, char *text)
{
	mem_job_free(j);
	tool_call_succeed(call, text, NULL, true);
	return TOOL_DONE;
}

/* Checks the arguments a command needs (the schema makes them optional,
 * since each command takes its own) and that its paths stay beneath
 * /memories; then the file work, on an io thread, as the peer. */
static enum tool_ret memory_exec(struct tool_call *call)
{
	const struct json *args = call->args;
	const char *cmd = json_str(json_get(args, "command"));
	struct mem_job *j = xcalloc(1, sizeof(*j));
	for (j->cmd = C_VIEW; j->cmd <= C_RENAME && !str_eq(cmd, command_names[j->cmd]); j->cmd++)
		;
	static const char *const needs[][3] = {
		[C_VIEW] = { "path" },
		[C_CREATE] = { "path", "file_text" },
		[C_STR_REPLACE] = { "path", "old_str", "new_str" },
		[C_INSERT] = { "path", "insert_line", "insert_text" },
		[C_DELETE] = { "path" },
		[C_RENAME] = { "old_path", "new_path" },
	};
	for (size_t i = 0; i < 3 && needs[j->cmd][i]; i++)
		if (!json_get(args, needs[j->cmd][i]))
			return refuse(call, j, xasprintf("The %s command needs the argument `%s`.", cmd,
							 needs[j->cmd][i]));

	size_t len = 0, len2 = 0;
	const char *arg = j->cmd == C_RENAME ? "old_path" : "path";
	j->path = arg_dup(args, arg, &len);
	char *err = path_chars_refused(j->path, len);
	if (!err && j->cmd == C_RENAME) {
		j->path2 = arg_dup(args, arg = "new_path", &len2);
		err = path_chars_refused(j->path2, len2);
	}
	if (err) {
		tool_call_invalid(call, arg, "%s", err);
		free(err);
		mem_job_free(j);
		return TOOL_DONE;
	}
	err = path_beneath(j->path, len, &j->rel);
	if (!err && j->cmd == C_RENAME)
		err = path_beneath(j->path2, len2, &j->rel2);
	if (err)
		return refuse(call, j, err);
	switch (j->cmd) {
	case C_CREATE:
		j->text = arg_dup(args, "file_text", &j->text_len);
		break;
	case C_STR_REPLACE:
		j->old = arg_dup(args, "old_str", &j->old_len);
		j->text = arg_dup(args, "new_str", &j->text_len);
		break;
	case C_INSERT:
		j->text = arg_dup(args, "insert_text", &j->text_len);
		/* A line beyond what an integer holds is out of range, never
		 * line 0. */
		if (!json_get_int(json_get(args, "insert_line"), &j->line))
			j->line = INT64_MAX;
		break;
	case C_VIEW: {
		const struct json *vr = json_get(args, "view_range");
		if (vr && vr->type == JSON_ARRAY && vr->u.arr.n == 2)
			j->has_range = json_get_int(vr->u.arr.items[0], &j->range[0]) &&
				       json_get_int(vr->u.arr.items[1], &j->range[1]);
		break;
	}
	default:
		break;
	}

	const struct tool_env *env = call->env;
	j->max_file = env && env->memory_max_file ? env->memory_max_file : 64 * 1024;
	j->max_total = env && env->memory_max_total ? env->memory_max_total : 1024 * 1024;
	scope_name(call, j->scope, sizeof(j->scope));
	uid_t uid = call->ident ? call->ident->uid : geteuid();
	if (env && env->memory_redis) {
		j->redis_addr = xstrdup(env->memory_redis);
		j->redis_key = xasprintf("%smemory:%u:%s", env->memory_redis_prefix ? env->memory_redis_prefix : "",
					 (unsigned)uid, j->scope);
		j->redis_timeout_ms = env->memory_redis_timeout_ms ? env->memory_redis_timeout_ms : 2000;
		j->redis_uid = env->memory_redis_uid;
		/* No file is touched: the work runs as the daemon, which may
		 * open the Redis socket where the peer may not. */
		const struct identity *peer = call->ident;
		call->ident = NULL;
		enum tool_ret ret = fsjob_start(call, &mem_ops, j);
		call->ident = peer;
		return ret;
	}
	const char *dir = env ? env->memory_dir : NULL;
	if (!dir) {
		mem_job_free(j);
		tool_call_fail(call, TC_INTERNAL, "memory.dir is not set and there is no $HOME or "
			       "$XDG_STATE_HOME to keep memory in");
		return TOOL_DONE;
	}
	enum tool_ret ret = TOOL_DONE;
	int r = fsjob_start_store(call, dir, j->cmd == C_VIEW ? &mem_view_ops : &mem_ops, j, &ret);
	if (r == -EPERM) {
		mem_job_free(j);
		tool_call_fail(call, TC_PERMISSION_DENIED, "The memory directory %s/%u is not owned by uid %u alone "
			       "(its owner or mode was changed), so it is not used; an operator must fix or remove it",
			       dir, (unsigned)uid, (unsigned)(geteuid() == 0 ? uid : geteuid()));
		return TOOL_DONE;
	}
	if (r < 0) {
		mem_job_free(j);
		tool_call_fail(call, TC_INTERNAL, "The memory directory %s/%u could not be opened: %s", dir,
			       (unsigned)uid, strerror(-r));
		return TOOL_DONE;
	}
	return ret;
}

const struct tool_def tool_memory = {
	.name = "memory",
	.description =
		"Memory that outlives this conversation: files under /memories, kept for you across "
		"sessions. Check it before you start a task; record progress, decisions and what you "
		"learn as you go. Every path starts with /memories and holds no control character (no line "
		"break, tab or line separator). command \"view\" (path, view_range?): "
		"a directory lists its files and directories two levels deep with their sizes; a file "
		"shows its lines numbered (the number right-aligned in 6 columns, a tab, the line), "
		"view_range [first, last] (1-based, last -1 for the end) a part of them. \"create\" "
		"(path, file_text): makes the file or replaces its whole content, making missing "
		"directories. \"str_replace\" (path, old_str, new_str): replaces old_str, which must "
		"occur exactly once. \"insert\" (path, insert_line, insert_text): inserts the text as "
		"new lines after line insert_line (0: at the top). \"delete\" (path): removes a file "
		"or a directory with everything in it. \"rename\" (old_path, new_path): moves a file "
		"or directory; new_path must not exist. Text files only (UTF-8, no NUL byte), with a "
		"size limit per file and for the whole memory.",
	.input_schema =
		"{\"type\":\"object\","
		"\"properties\":{"
		"\"command\":{\"type\":\"string\","
		"\"enum\":[\"view\",\"create\",\"str_replace\",\"insert\",\"delete\",\"rename\"],"
		"\"description\":\"What to do\"},"
		"\"path\":{\"type\":\"string\","
		"\"description\":\"A path under /memories (e.g. \\\"/memories/notes.md\\\"); not for rename\"},"
		"\"view_range\":{\"type\":\"array\",\"items\":{\"type\":\"integer\","
		"\"maximum\":9007199254740991},\"minItems\":2,\"maxItems\":2,"
		"\"description\":\"view of a file: [first, last] line, 1-based; last -1 for the end\"},"
		"\"file_text\":{\"type\":\"string\",\"description\":\"create: the whole content of the file\"},"
		"\"old_str\":{\"type\":\"string\",\"description\":\"str_replace: the text to replace, "
		"found exactly once\"},"
		"\"new_str\":{\"type\":\"string\",\"description\":\"str_replace: the text to put in its place\"},"
		"\"insert_line\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9007199254740991,"
		"\"description\":\"insert: the line after which the text goes (0: before the first)\"},"
		"\"insert_text\":{\"type\":\"string\",\"description\":\"insert: the text to insert\"},"
		"\"old_path\":{\"type\":\"string\",\"description\":\"rename: what to move, under /memories\"},"
		"\"new_path\":{\"type\":\"string\",\"description\":\"rename: where to, under /memories; "
		"must not exist\"}},"
		"\"required\":[\"command\"],"
		"\"additionalProperties\":false}",
	.side_effects = SIDE_WRITE,
	.idempotent = false,
	.exec = memory_exec,
	.cancel = fsjob_cancel,
};
