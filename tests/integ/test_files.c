/* SPDX-License-Identifier: MIT */
/*
 * The file tools through the socket (read_file, write_file, patch_file,
 * list_dir) and the workspace escape matrix: "..", absolute paths, prefix
 * tricks, symlinks out (to files and directories, for reading and for
 * writing), symlink chains, /proc magic links and NUL bytes are refused
 * with permission_denied, and nothing outside the workspace is read,
 * changed or created (CONTRACT §6). A large write shows no temporary name
 * while its data is written, and a daemon killed in the middle of one
 * leaves nothing behind.
 */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integ/escape.h"
#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Writes and the shell run without asking: tests here are about the
 * tools, not about confirmation. */
#define CFG_AUTO "{\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}}}"

static mode_t file_mode(const char *path)
{
	struct stat st;
	ck_assert_msg(stat(path, &st) == 0, "stat %s", path);
	return st.st_mode & 07777;
}

/* --- a write leaves no name behind --------------------------------------- */

/* The target of the first fd of process pid open on a file in dir (not
 * dir itself), newly allocated, or NULL. */
static char *fd_open_in(pid_t pid, const char *dir)
{
	char fds[64], link[PATH_MAX + 32], *found = NULL;
	snprintf(fds, sizeof(fds), "/proc/%d/fd", (int)pid);
	DIR *dp = opendir(fds);
	if (!dp)
		return NULL;
	size_t n = strlen(dir);
	struct dirent *e;
	while (!found && (e = readdir(dp))) {
		char *p = xasprintf("%s/%s", fds, e->d_name);
		ssize_t k = readlink(p, link, sizeof(link) - 1);
		free(p);
		if (k <= 0)
			continue;
		link[k] = '\0';
		if (strncmp(link, dir, n) == 0 && link[n] == '/')
			found = xstrdup(link);
	}
	closedir(dp);
	return found;
}

/* The name in dir that looks like a temporary file of a write
 * (".NAME.tc-XXXXXX"), newly allocated, or NULL. */
static char *temp_name_in(const char *dir)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return NULL;
	char *found = NULL;
	struct dirent *e;
	while (!found && (e = readdir(dp)))
		if (e->d_name[0] == '.' && strstr(e->d_name, ".tc-"))
			found = xstrdup(e->d_name);
	closedir(dp);
	return found;
}

/* A write_file call of n bytes of c to path, sent without waiting. */
static int64_t send_big_write(struct tcc *c, const char *path, size_t n, char ch)
{
	struct buf b = {0};
	buf_printf(&b, "{\"name\":\"write_file\",\"arguments\":{\"path\":\"%s\",\"content\":\"", path);
	buf_reserve(&b, n + 64);
	for (size_t i = 0; i < n; i++)
		buf_putc(&b, (i % 100 == 99) ? '!' : ch);
	buf_puts(&b, "\"}}");
	int64_t id = tcc_send_request(c, "tools/call", buf_head(&b));
	buf_free(&b);
	return id;
}

/* Checks path in d's workspace holds n bytes, all ch but every 100th. */
static void assert_big(struct tcd *d, const char *path, size_t n, char ch)
{
	size_t len = 0;
	char *got = tcd_read(d, path, &len);
	ck_assert_uint_eq(len, n);
	for (size_t i = 0; i < n; i++)
		if (got[i] != ((i % 100 == 99) ? '!' : ch))
			ck_abort_msg("%s: byte %zu is '%c'", path, i, got[i]);
	free(got);
}

#define BIG_WRITE ((size_t)48 << 20)
#define BIG_CFG "{\"confirmation\":{\"default\":{\"write\":\"auto\"}},\"limits\":{\"max_message_bytes\":67108864}}"

/*
 * Writes n bytes to path while another process looks at the workspace,
 * until it was seen under way (the daemon holding a file of the
 * workspace open), at most 5 times; fresh: each time to a new file. Checks the result, and returns how
 * often a temporary name was seen: *ret_partial counts those whose file
 * was not yet whole (the data was being written under that name).
 */
static unsigned watched_write(struct tcd *d, struct tcc *c, const char *path, size_t n, bool fresh,
			      unsigned *ret_partial)
{
	unsigned named_all = 0, partial_all = 0;
	bool seen_writing = false;
	for (int attempt = 0; attempt < 5 && !seen_writing; attempt++) {
		if (fresh) {
			/* Each try writes a new file. */
			char *p = tcd_ws_path(d, path);
			(void) unlink(p);
			free(p);
		}
		int stop[2], report[2];
		ck_assert(pipe(stop) == 0 && pipe(report) == 0);
		pid_t obs = fork();
		ck_assert(obs >= 0);
		if (obs == 0) {
			/* The observer: scans until told to stop. */
			close(stop[1]);
			close(report[0]);
			unsigned writing = 0, named = 0, partial = 0;
			for (;;) {
				struct pollfd pfd = { .fd = stop[0], .events = POLLIN };
				if (poll(&pfd, 1, 0) != 0)
					break;
				char *open = fd_open_in(d->pid, d->ws);
				char *tmp = temp_name_in(d->ws);
				writing += open != NULL;
				if (tmp) {
					named++;
					char *p = xasprintf("%s/%s", d->ws, tmp);
					struct stat st;
					if (stat(p, &st) == 0 && (size_t)st.st_size < n)
						partial++;
					free(p);
				}
				free(open);
				free(tmp);
			}
			char msg[64];
			int k = snprintf(msg, sizeof(msg), "%u %u %u", writing, named, partial);
			(void) !write(report[1], msg, (size_t)k);
			_exit(0);
		}
		close(stop[0]);
		close(report[1]);
		char ch = (char)('a' + attempt);
		int64_t id = send_big_write(c, path, n, ch);
		const struct json *r = tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)id), 120000);
		ck_assert_msg(r, "no answer to the write");
		tc_assert_ok(r);
		close(stop[1]);
		char msg[64] = "";
		ck_assert(read(report[0], msg, sizeof(msg) - 1) > 0);
		close(report[0]);
		int st;
		ck_assert(waitpid(obs, &st, 0) == obs);
		unsigned writing = 0, named = 0, partial = 0;
		ck_assert(sscanf(msg, "%u %u %u", &writing, &named, &partial) == 3);
		named_all += named;
		partial_all += partial;
		seen_writing = writing > 0;
		assert_big(d, path, n, ch);
		ck_assert_msg(!temp_name_in(d->ws), "a temporary name is left");
	}
	ck_assert_msg(seen_writing, "the write was never seen under way: too fast to test here");
	*ret_partial = partial_all;
	return named_all;
}

/*
 * While a large write_file runs, another process looking at the
 * workspace sees no temporary name in it: the file is written unnamed
 * (O_TMPFILE); a new file then takes its name at once, and a file
 * replaced is given a temporary name only to be renamed over it right
 * after (the file is whole by then).
 */
START_TEST(write_shows_no_temp_name)
{
	struct tcd d;
	tcd_start(&d, BIG_CFG);
	struct tcc *c = tcc_connect(&d);
	unsigned partial = 0;
	ck_assert_uint_eq(watched_write(&d, c, "big.txt", BIG_WRITE, true, &partial), 0);
	ck_assert_uint_eq(partial, 0);
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"big.txt\",\"content\":\"old\"}"));
	/* Between the link and the rename the thread may lose its CPU on a
	 * loaded machine: the whole file may be seen under its temporary
	 * name then, never a part of it. */
	(void) watched_write(&d, c, "big.txt", BIG_WRITE, false, &partial);
	ck_assert_msg(partial == 0, "a half-written file was seen under a temporary name %u times", partial);
	ck_assert_int_eq(tc_count_entries(d.ws), 1);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/*
 * A daemon killed in the middle of a write leaves neither a temporary
 * file nor a half-written target: the old file is whole.
 */
START_TEST(crash_mid_write_leaves_nothing)
{
	struct tcd d;
	tcd_start(&d, BIG_CFG);
	struct tcc *c = tcc_connect(&d);
	/* The write is under way once the daemon holds a file of the
	 * workspace open (big.txt itself is not open: it is replaced). One
	 * that ended before it was seen (its answer came first: a fast
	 * disk, a slow look at /proc) is made again, with "old" put back. */
	char *open = NULL;
	for (int attempt = 0; !open && attempt < 5; attempt++) {
		tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"big.txt\",\"content\":\"old\"}"));
		send_big_write(c, "big.txt", BIG_WRITE, 'n');
		bool answered = false;
		uint64_t end = tc_now_ms() + tc_wait_scaled(60000);
		while (!open && !answered && tc_now_ms() < end) {
			open = fd_open_in(d.pid, d.ws);
			answered = !open && !tcc_quiet(c, 0);
		}
		if (answered) {
			struct json_doc *done = tcc_recv(c, 60000);
			ck_assert_ptr_nonnull(done);
			json_doc_unref(done);
		}
	}
	ck_assert_msg(open, "the write was never seen under way");
	tcd_kill(&d, SIGKILL);
	ck_assert(tcd_wait_exit(&d, 10000) >= 0);
	char *tmp = temp_name_in(d.ws);
	ck_assert_msg(!tmp, "a killed write left %s (the daemon had %s open)", tmp, open);
	char *got = tcd_read(&d, "big.txt", NULL);
	ck_assert_pstr_eq(got, "old");
	free(got);
	ck_assert_int_eq(tc_count_entries(d.ws), 1);
	free(open);
	tcc_close(c);
	tcd_free(&d);
}
END_TEST

/* --- the tools ----------------------------------------------------------- */

START_TEST(read_file_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "src/main.c", "0123456789abcdef");
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"src/main.c\"}");
	tc_assert_ok(r);
	const struct json *sc = tj(r, "result.structuredContent");
	ck_assert_pstr_eq(tj_str(sc, "path"), "src/main.c");
	ck_assert_pstr_eq(tj_str(sc, "content"), "0123456789abcdef");
	ck_assert_int_eq(tj_int(sc, "size"), 16);
	ck_assert(!tj_bool(sc, "truncated"));
	ck_assert_pstr_eq(tj_str(sc, "encoding"), "utf8");
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "0123456789abcdef"), "text content");

	/* offset and limit */
	r = tcc_call(c, "read_file", "{\"path\":\"src/main.c\",\"offset\":4,\"limit\":5}");
	tc_assert_ok(r);
	sc = tj(r, "result.structuredContent");
	ck_assert_pstr_eq(tj_str(sc, "content"), "45678");
	ck_assert_int_eq(tj_int(sc, "size"), 16);
	ck_assert(tj_bool(sc, "truncated"));
	ck_assert_int_eq(tj_int(sc, "next_offset"), 9);
	r = tcc_call(c, "read_file", "{\"path\":\"src/main.c\",\"offset\":9}");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "9abcdef");
	ck_assert(!tj_bool(r, "result.structuredContent.truncated"));
	r = tcc_call(c, "read_file", "{\"path\":\"src/main.c\",\"offset\":100}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "");

	/* an absolute path inside the workspace is accepted */
	char *abs = tcd_ws_path(&d, "src/main.c");
	char *q = tj_quote(abs);
	r = tcc_call(c, "read_file", tcc_fmt(c, "{\"path\":%s}", q));
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "0123456789abcdef");
	free(q);
	free(abs);

	/* a missing file and a directory: execution errors the model can act on */
	r = tcc_call(c, "read_file", "{\"path\":\"nope.txt\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_msg(strstr(tj_str(r, "error.message"), "nope.txt"), "%s", tj_str(r, "error.message"));
	ck_assert(!tj_bool(r, "error.data.retryable"));
	ck_assert_pstr_eq(tj_str(r, "error.data.tool"), "read_file");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 1);
	r = tcc_call(c, "read_file", "{\"path\":\"src\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "list_dir"), "%s", tj_str(r, "error.message"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(write_file_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "write_file", "{\"path\":\"new.txt\",\"content\":\"hello\\n\"}");
	tc_assert_ok(r);
	const struct json *sc = tj(r, "result.structuredContent");
	ck_assert_pstr_eq(tj_str(sc, "path"), "new.txt");
	ck_assert_int_eq(tj_int(sc, "bytes"), 6);
	ck_assert(tj_bool(sc, "created"));
	char *got = tcd_read(&d, "new.txt", NULL);
	ck_assert_pstr_eq(got, "hello\n");
	free(got);

	/* replacing: created false, whole content replaced */
	r = tcc_call(c, "write_file", "{\"path\":\"new.txt\",\"content\":\"hi\"}");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.structuredContent.created"));
	got = tcd_read(&d, "new.txt", NULL);
	ck_assert_pstr_eq(got, "hi");
	free(got);

	/* the mode is kept */
	char *path = tcd_ws_path(&d, "run.sh");
	free(tcd_write_ws(&d, "run.sh", "#!/bin/sh\n", 10, 0751));
	ck_assert_int_eq(file_mode(path), 0751);
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"run.sh\",\"content\":\"#!/bin/sh\\necho hi\\n\"}"));
	ck_assert_int_eq(file_mode(path), 0751);
	free(tcd_write_ws(&d, "private.txt", "x", 1, 0600));
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"private.txt\",\"content\":\"y\"}"));
	char *priv = tcd_ws_path(&d, "private.txt");
	ck_assert_int_eq(file_mode(priv), 0600);
	free(priv);
	free(path);

	/* missing parent directories: an error unless create_dirs */
	r = tcc_call(c, "write_file", "{\"path\":\"a/b/c.txt\",\"content\":\"x\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "create_dirs"), "%s", tj_str(r, "error.message"));
	r = tcc_call(c, "write_file", "{\"path\":\"a/b/c.txt\",\"content\":\"x\",\"create_dirs\":true}");
	tc_assert_ok(r);
	got = tcd_read(&d, "a/b/c.txt", NULL);
	ck_assert_pstr_eq(got, "x");
	free(got);

	/* base64 content is written as bytes */
	r = tcc_call(c, "write_file", "{\"path\":\"bin.dat\",\"content\":\"AP8Kw6k=\",\"encoding\":\"base64\"}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.bytes"), 5);
	size_t len;
	got = tcd_read(&d, "bin.dat", &len);
	ck_assert_int_eq(len, 5);
	ck_assert(memcmp(got, "\x00\xff\n\xc3\xa9", 5) == 0);
	free(got);
	r = tcc_call(c, "write_file", "{\"path\":\"bin2.dat\",\"content\":\"not base64!\",\"encoding\":\"base64\"}");
	tc_assert_kind(r, "validation_error");

	/* no temporary file is left behind */
	ck_assert_int_eq(tc_count_entries(d.ws), 5);	/* new.txt run.sh private.txt a bin.dat */
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(patch_file_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	char *path = tcd_write_ws(&d, "f.py", "a = 1\nb = 2\nb = 2\nb = 2\nc = 3\n", 30, 0700);
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "patch_file", "{\"path\":\"f.py\",\"old\":\"a = 1\",\"new\":\"a = 10\"}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.path"), "f.py");
	ck_assert_int_eq(tj_int(r, "result.structuredContent.replacements"), 1);
	char *got = tcd_read(&d, "f.py", NULL);
	ck_assert_pstr_eq(got, "a = 10\nb = 2\nb = 2\nb = 2\nc = 3\n");
	free(got);
	ck_assert_int_eq(file_mode(path), 0700);

	/* three occurrences: refused, the count said, nothing changed */
	r = tcc_call(c, "patch_file", "{\"path\":\"f.py\",\"old\":\"b = 2\",\"new\":\"b = 20\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_msg(strstr(tj_str(r, "error.message"), "occurs 3 times"), "%s", tj_str(r, "error.message"));
	ck_assert_int_eq(tj_int(r, "error.data.occurrences"), 3);
	got = tcd_read(&d, "f.py", NULL);
	ck_assert_pstr_eq(got, "a = 10\nb = 2\nb = 2\nb = 2\nc = 3\n");
	free(got);
	/* twice, overlapping occurrences counted too */
	tcd_put(&d, "aa.txt", "aaa");
	r = tcc_call(c, "patch_file", "{\"path\":\"aa.txt\",\"old\":\"aa\",\"new\":\"b\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "occurs 2 times"), "%s", tj_str(r, "error.message"));

	/* not found: refused, nothing changed */
	r = tcc_call(c, "patch_file", "{\"path\":\"f.py\",\"old\":\"zzz\",\"new\":\"y\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "not found"), "%s", tj_str(r, "error.message"));
	/* made unique with context: works */
	r = tcc_call(c, "patch_file", "{\"path\":\"f.py\",\"old\":\"b = 2\\nc = 3\",\"new\":\"b = 2\\nc = 30\"}");
	tc_assert_ok(r);
	got = tcd_read(&d, "f.py", NULL);
	ck_assert_pstr_eq(got, "a = 10\nb = 2\nb = 2\nb = 2\nc = 30\n");
	free(got);
	/* a missing file */
	r = tcc_call(c, "patch_file", "{\"path\":\"none.py\",\"old\":\"a\",\"new\":\"b\"}");
	tc_assert_kind(r, "execution_error");
	free(path);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(list_dir_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "b.txt", "12345");
	tcd_put(&d, "a/x.c", "x");
	tcd_put(&d, "a/y/z.h", "zz");
	char *link = tcd_ws_path(&d, "l");
	ck_assert(symlink("a", link) == 0);
	free(link);
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "list_dir", "{}");
	tc_assert_ok(r);
	const struct json *sc = tj(r, "result.structuredContent");
	ck_assert_int_eq(tj_len(sc, "entries"), 3);
	ck_assert_pstr_eq(tj_str(sc, "entries.0.name"), "a");
	ck_assert_pstr_eq(tj_str(sc, "entries.0.type"), "dir");
	ck_assert_pstr_eq(tj_str(sc, "entries.1.name"), "b.txt");
	ck_assert_pstr_eq(tj_str(sc, "entries.1.type"), "file");
	ck_assert_int_eq(tj_int(sc, "entries.1.size"), 5);
	ck_assert_pstr_eq(tj_str(sc, "entries.2.name"), "l");
	ck_assert_pstr_eq(tj_str(sc, "entries.2.type"), "symlink");
	ck_assert(!tj_bool(sc, "truncated"));

	/* recursive: relative names, symlinked dirs not followed */
	r = tcc_call(c, "list_dir", "{\"path\":\".\",\"recursive\":true}");
	tc_assert_ok(r);
	sc = tj(r, "result.structuredContent");
	ck_assert_int_eq(tj_len(sc, "entries"), 6);
	bool found = false;
	for (long i = 0; i < tj_len(sc, "entries"); i++) {
		const char *name = tj_str(sc, tcc_fmt(c, "entries.%ld.name", i));
		found |= str_eq(name, "a/y/z.h");
		ck_assert_msg(!str_has_prefix(name, "l/"), "followed the symlink: %s", name);
	}
	ck_assert_msg(found, "a/y/z.h not listed");

	/* max_entries truncates */
	r = tcc_call(c, "list_dir", "{\"recursive\":true,\"max_entries\":2}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_len(r, "result.structuredContent.entries"), 2);
	ck_assert(tj_bool(r, "result.structuredContent.truncated"));
	/* a subdirectory */
	r = tcc_call(c, "list_dir", "{\"path\":\"a\"}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_len(r, "result.structuredContent.entries"), 2);
	/* a file and a missing directory */
	tc_assert_kind(tcc_call(c, "list_dir", "{\"path\":\"b.txt\"}"), "execution_error");
	tc_assert_kind(tcc_call(c, "list_dir", "{\"path\":\"nope\"}"), "execution_error");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Without configuration a write needs a confirmation; with nobody
 * subscribed to approve it, it fails at once and writes nothing. */
START_TEST(write_needs_confirmation_by_default)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "write_file", "{\"path\":\"x.txt\",\"content\":\"x\"}");
	tc_assert_kind(r, "user_denied");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_int_eq(tc_count_entries(d.ws), 0);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- the escape matrix --------------------------------------------------- */

/* Every tool that takes a path, for a path (JSON text, quotes included). */
static void all_denied_at(struct escape *e, const char *path_json, int line)
{
	struct tcc *c = e->c;
	escape_denied_at(e, "read_file", tcc_fmt(c, "{\"path\":%s}", path_json), line);
	escape_denied_at(e, "read_file", tcc_fmt(c, "{\"path\":%s,\"encoding\":\"base64\"}", path_json), line);
	escape_denied_at(e, "write_file", tcc_fmt(c, "{\"path\":%s,\"content\":\"PWNED\"}", path_json), line);
	escape_denied_at(e, "write_file", tcc_fmt(c, "{\"path\":%s,\"content\":\"PWNED\",\"create_dirs\":true}", path_json),
			 line);
	escape_denied_at(e, "patch_file", tcc_fmt(c, "{\"path\":%s,\"old\":\"TOP\",\"new\":\"PWNED\"}", path_json), line);
	escape_denied_at(e, "list_dir", tcc_fmt(c, "{\"path\":%s}", path_json), line);
}
#define all_denied(e, path_json) all_denied_at((e), (path_json), __LINE__)

START_TEST(escape_dotdot)
{
	struct escape e;
	escape_setup(&e, CFG_AUTO, "inside\n");
	const struct json *r = tcc_call(e.c, "read_file", "{\"path\":\"../../etc/passwd\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_pstr_eq(tj_str(r, "error.message"), "Path '../../etc/passwd' escapes the workspace");
	escape_denied(&e, "read_file", "{\"path\":\"..\"}");
	escape_denied(&e, "list_dir", "{\"path\":\"..\"}");
	escape_denied(&e, "list_dir", "{\"path\":\"../..\"}");
	escape_denied(&e, "patch_file", "{\"path\":\"..\",\"old\":\"a\",\"new\":\"b\"}");
	all_denied(&e, "\"../outside/secret.txt\"");
	all_denied(&e, "\"../../../../../../../../etc/passwd\"");
	all_denied(&e, "\"sub/../../outside/secret.txt\"");
	all_denied(&e, "\"sub/../sub/../../outside/secret.txt\"");
	all_denied(&e, "\"./../outside/secret.txt\"");
	all_denied(&e, "\"sub/./../../outside\"");
	all_denied(&e, "\"../ws/../outside/secret.txt\"");
	all_denied(&e, "\"../outside/new.txt\"");
	all_denied(&e, "\"../outside/newdir/new.txt\"");
	/* the workspace's own name through its parent is still "out then in" */
	all_denied(&e, "\"../ws-evil/secret.txt\"");
	escape_teardown(&e);
}
END_TEST

/* A path whose last component is ".." and that leads out is an escape,
 * for write_file as for the other tools (not "is a directory"). */
START_TEST(escape_write_dotdot_name)
{
	struct escape e;
	escape_setup(&e, CFG_AUTO, "inside\n");
	escape_denied(&e, "write_file", "{\"path\":\"..\",\"content\":\"PWNED\"}");
	escape_denied(&e, "write_file", "{\"path\":\"../..\",\"content\":\"PWNED\"}");
	escape_denied(&e, "write_file", "{\"path\":\"sub/../..\",\"content\":\"PWNED\",\"create_dirs\":true}");
	escape_denied(&e, "write_file", "{\"path\":\"rel_dir/..\",\"content\":\"PWNED\"}");
	escape_teardown(&e);
}
END_TEST

START_TEST(escape_absolute)
{
	struct escape e;
	escape_setup(&e, CFG_AUTO, "inside\n");
	struct tcc *c = e.c;
	char *q = tj_quote(e.secret);
	all_denied(&e, q);
	free(q);
	all_denied(&e, "\"/etc/passwd\"");
	all_denied(&e, "\"/\"");
	all_denied(&e, "\"/tmp\"");
	/* a prefix of the root is not the root: /…/ws-evil */
	char *evil = xasprintf("%s/secret.txt", e.evil);
	q = tj_quote(evil);
	all_denied(&e, q);
	free(q);
	free(evil);
	q = tj_quote(e.evil);
	escape_denied(&e, "list_dir", tcc_fmt(c, "{\"path\":%s}", q));
	free(q);
	/* the workspace's parent, and ws/.. spelled absolutely */
	q = tj_quote(e.d.dir);
	escape_denied(&e, "list_dir", tcc_fmt(c, "{\"path\":%s}", q));
	free(q);
	char *up = xasprintf("%s/../outside/secret.txt", e.d.ws);
	q = tj_quote(up);
	all_denied(&e, q);
	free(q);
	free(up);
	/* /proc magic links */
	all_denied(&e, "\"/proc/self/root/etc/passwd\"");
	char *proc = xasprintf("/proc/self/root%s", e.secret);
	q = tj_quote(proc);
	all_denied(&e, q);
	free(q);
	free(proc);
	proc = xasprintf("/proc/self/root%s/inside.txt", e.d.ws);
	q = tj_quote(proc);
	escape_denied(&e, "read_file", tcc_fmt(c, "{\"path\":%s}", q));
	free(q);
	free(proc);
	/* absolute inside is allowed, for reading and writing */
	char *in = tcd_ws_path(&e.d, "inside.txt");
	q = tj_quote(in);
	tc_assert_ok(tcc_call(c, "read_file", tcc_fmt(c, "{\"path\":%s}", q)));
	free(q);
	free(in);
	in = tcd_ws_path(&e.d, "sub/abs-new.txt");
	q = tj_quote(in);
	tc_assert_ok(tcc_call(c, "write_file", tcc_fmt(c, "{\"path\":%s,\"content\":\"ok\"}", q)));
	free(q);
	free(in);
	q = tj_quote(e.d.ws);
	tc_assert_ok(tcc_call(c, "list_dir", tcc_fmt(c, "{\"path\":%s}", q)));
	free(q);
	escape_teardown(&e);
}
END_TEST

START_TEST(escape_symlinks)
{
	struct escape e;
	escape_setup(&e, CFG_AUTO, "inside\n");
	static const char *const out[] = {
		"\"abs_file\"", "\"rel_file\"", "\"sub/up_file\"", "\"chain1\"", "\"chain2\"", "\"sub/chain3\"",
		"\"abs_dir/secret.txt\"", "\"rel_dir/secret.txt\"", "\"evil_dir/secret.txt\"",
		"\"root_link/etc/passwd\"", "\"proc_root/etc/passwd\"", "\"proc_cwd/inside.txt\"",
		"\"dangling_out\"", "\"dangling_dir/x.txt\"", "\"abs_dir/new.txt\"", "\"rel_dir/new.txt\"",
		"\"abs_dir/newsub/new.txt\"", "\"in_dir/../rel_dir/secret.txt\"",
	};
	for (size_t i = 0; i < ELEMENTSOF(out); i++)
		all_denied(&e, out[i]);
	/* directories leading out, listed */
	escape_denied(&e, "list_dir", "{\"path\":\"abs_dir\"}");
	escape_denied(&e, "list_dir", "{\"path\":\"rel_dir\"}");
	escape_denied(&e, "list_dir", "{\"path\":\"root_link\"}");
	/* the shell's cwd too */
	escape_denied(&e, "shell", "{\"command\":\"pwd\",\"cwd\":\"../outside\"}");
	escape_denied(&e, "shell", "{\"command\":\"pwd\",\"cwd\":\"rel_dir\"}");
	escape_denied(&e, "shell", "{\"command\":\"pwd\",\"cwd\":\"/tmp\"}");
	escape_teardown(&e);
}
END_TEST

START_TEST(escape_nul_byte)
{
	struct escape e;
	escape_setup(&e, CFG_AUTO, "inside\n");
	all_denied(&e, "\"inside.txt\\u0000../../etc/passwd\"");
	all_denied(&e, "\"\\u0000\"");
	all_denied(&e, "\"sub\\u0000\"");
	/* nothing named "inside.txt" was truncated to by the NUL */
	char *got = tcd_read(&e.d, "inside.txt", NULL);
	ck_assert_pstr_eq(got, "inside\n");
	free(got);
	escape_teardown(&e);
}
END_TEST

/* What stays inside is allowed, however it is spelled. */
START_TEST(inside_allowed)
{
	struct escape e;
	escape_setup(&e, CFG_AUTO, "inside\n");
	struct tcc *c = e.c;
	static const struct {
		const char *path, *content;
	} reads[] = {
		{ "..test", "dotdot name\n" },
		{ "...", "three dots\n" },
		{ "sub/..hidden", "hidden\n" },
		{ "./inside.txt", "inside\n" },
		{ "sub/../inside.txt", "inside\n" },
		{ "sub/./deep.txt", "deep\n" },
		{ "sub//deep.txt", "deep\n" },
		{ "in_file", "inside\n" },
		{ "in_chain", "inside\n" },
		{ "in_dir/deep.txt", "deep\n" },
		{ "sub/in_up", "inside\n" },
	};
	for (size_t i = 0; i < ELEMENTSOF(reads); i++) {
		char *q = tj_quote(reads[i].path);
		const struct json *r = tcc_call(c, "read_file", tcc_fmt(c, "{\"path\":%s}", q));
		tc_assert_ok(r);
		ck_assert_msg(str_eq(tj_str(r, "result.structuredContent.content"), reads[i].content), "%s: %s",
			      reads[i].path, tj_str(r, "result.structuredContent.content"));
		free(q);
	}
	/* writing through an inside symlink replaces its target, the link stays */
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"in_file\",\"content\":\"via link\\n\"}"));
	char *got = tcd_read(&e.d, "inside.txt", NULL);
	ck_assert_pstr_eq(got, "via link\n");
	free(got);
	char *lp = tcd_ws_path(&e.d, "in_file");
	struct stat st;
	ck_assert(lstat(lp, &st) == 0 && S_ISLNK(st.st_mode));
	free(lp);
	tc_assert_ok(tcc_call(c, "patch_file", "{\"path\":\"in_chain\",\"old\":\"via\",\"new\":\"through\"}"));
	got = tcd_read(&e.d, "inside.txt", NULL);
	ck_assert_pstr_eq(got, "through link\n");
	free(got);
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"in_dir/new.txt\",\"content\":\"n\"}"));
	got = tcd_read(&e.d, "sub/new.txt", NULL);
	ck_assert_pstr_eq(got, "n");
	free(got);
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"..test2\",\"content\":\"n\"}"));
	tc_assert_ok(tcc_call(c, "list_dir", "{\"path\":\"in_dir\"}"));
	tc_assert_ok(tcc_call(c, "list_dir", "{\"path\":\"sub/..\"}"));
	/* the shell in a subdirectory */
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"cat deep.txt\",\"cwd\":\"sub\"}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.stdout"), "deep\n");
	/* a symlink loop is an error, not a hang, and not "denied" */
	r = tcc_call(c, "read_file", "{\"path\":\"loop1\"}");
	ck_assert_msg(tj_has(r, "error"), "a loop was read");
	escape_teardown(&e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("integ_files");
	TCase *tc = tcase_create("tools");
	tcase_add_test(tc, read_file_basics);
	tcase_add_test(tc, write_file_basics);
	tcase_add_test(tc, patch_file_basics);
	tcase_add_test(tc, list_dir_basics);
	tcase_add_test(tc, write_needs_confirmation_by_default);
	suite_add_tcase(s, tc);

	tc = tcase_create("unnamed");
	tcase_set_timeout(tc, 110);
	tcase_add_test(tc, write_shows_no_temp_name);
	tcase_add_test(tc, crash_mid_write_leaves_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("escape");
	tcase_add_test(tc, escape_dotdot);
	tcase_add_test(tc, escape_write_dotdot_name);
	tcase_add_test(tc, escape_absolute);
	tcase_add_test(tc, escape_symlinks);
	tcase_add_test(tc, escape_nul_byte);
	tcase_add_test(tc, inside_allowed);
	suite_add_tcase(s, tc);

	return run_suite(s);
}
