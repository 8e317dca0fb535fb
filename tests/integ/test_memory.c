/* SPDX-License-Identifier: MIT */
/*
 * The memory tool (CONTRACT §22) through the real daemon: every command
 * with the texts of Anthropic's client-side memory tool, a memory per peer
 * uid (0700, owned by the peer, out of reach of another uid), per
 * workspace with memory.scope "workspace", a symlink planted in the memory
 * directory refused, paths outside /memories refused, the quotas (the old
 * file intact when a write is refused), the audit record, a session that
 * said "memory": false, and tools/dispatch in Anthropic's format. Cases
 * that connect as uid 65534 need root and skip without it.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/integ/memory_calls.h"
#include "tests/unit/check_main.h"

#define NOBODY 65534

/* The content of the file rel beneath the daemon's memory directory. */
static char *mem_file(const struct tcd *d, const char *rel)
{
	char *p = xasprintf("%s/mem/%s", d->dir, rel);
	char *s = tcd_read(d, p, NULL);
	free(p);
	return s;
}

static bool mem_exists(const struct tcd *d, const char *rel)
{
	char *p = xasprintf("%s/mem/%s", d->dir, rel);
	struct stat st;
	bool r = lstat(p, &st) == 0;
	free(p);
	return r;
}

START_TEST(every_command)
{
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\"},\"audit_log\":\"audit.log\",\"audit_fsync_ms\":0}");
	struct tcc *c = tcc_connect(&d);

	/* Listed as a write tool, yet runs without confirmation (nobody
	 * approves here): its default is auto, unlike write_file's. */
	const struct json *r = tcc_request(c, "tools/list", NULL);
	bool listed = false;
	for (long i = 0; i < tj_len(r, "result.tools"); i++) {
		const struct json *t = tj(r, tcc_fmt(c, "result.tools.%ld", i));
		if (str_eq(tj_str(t, "name"), "memory")) {
			listed = true;
			ck_assert_str_eq(tj_str(t, "_meta.toolcalld/sideEffects"), "write");
		}
	}
	ck_assert(listed);
	tc_assert_kind(tcc_call(c, "write_file", "{\"path\":\"x.txt\",\"content\":\"x\"}"), "user_denied");

	const char *t = mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories\"}");
	ck_assert_msg(str_has_prefix(t, "Here're the files and directories up to 2 levels deep in /memories, "
				     "excluding hidden items:\n"), "%s", t);
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/notes.md\","
			       "\"file_text\":\"line one\\nline two\\n\"}"),
			 "File created successfully at: /memories/notes.md");
	char *s = mem_file(&d, "0/memories/notes.md");
	ck_assert_str_eq(s, "line one\nline two\n");
	free(s);

	/* view: numbered as read_file numbers (6 columns, a tab); a range. */
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/notes.md\"}"),
			 "Here's the content of /memories/notes.md with line numbers:\n"
			 "     1\tline one\n     2\tline two");
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/notes.md\",\"view_range\":[2,-1]}"),
			 "Here's the content of /memories/notes.md with line numbers:\n     2\tline two");
	mem_err(c, "{\"command\":\"view\",\"path\":\"/memories/notes.md\",\"view_range\":[3,4]}",
		"Invalid `view_range` parameter: [3, 4]");
	mem_err(c, "{\"command\":\"view\",\"path\":\"/memories/none.md\"}",
		"The path /memories/none.md does not exist. Please provide a valid path.");

	/* str_replace: exactly once, else a text that says where. */
	t = mem_ok(c, "{\"command\":\"str_replace\",\"path\":\"/memories/notes.md\",\"old_str\":\"one\",\"new_str\":\"uno\"}");
	ck_assert_msg(str_has_prefix(t, "The memory file has been edited. Here is the snippet showing the change "
				     "(with line numbers):\n     1\tline uno\n     2\tline two"), "%s", t);
	mem_err(c, "{\"command\":\"str_replace\",\"path\":\"/memories/notes.md\",\"old_str\":\"line\",\"new_str\":\"l\"}",
		"No replacement was performed. Multiple occurrences of old_str `line` in lines: 1, 2. "
		"Please ensure it is unique");
	mem_err(c, "{\"command\":\"str_replace\",\"path\":\"/memories/notes.md\",\"old_str\":\"zzz\",\"new_str\":\"l\"}",
		"No replacement was performed, old_str `zzz` did not appear verbatim in /memories/notes.md.");

	/* insert: after a line, 0 for the top. */
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"insert\",\"path\":\"/memories/notes.md\",\"insert_line\":1,"
			       "\"insert_text\":\"middle\\n\"}"), "The file /memories/notes.md has been edited.");
	mem_ok(c, "{\"command\":\"insert\",\"path\":\"/memories/notes.md\",\"insert_line\":0,\"insert_text\":\"top\"}");
	s = mem_file(&d, "0/memories/notes.md");
	ck_assert_str_eq(s, "top\nline uno\nmiddle\nline two\n");
	free(s);
	mem_err(c, "{\"command\":\"insert\",\"path\":\"/memories/notes.md\",\"insert_line\":9,\"insert_text\":\"x\"}",
		"Invalid `insert_line` parameter: 9. It should be within the range [0, 4].");
	/* A line past what an integer holds is refused, never taken for 0. */
	for (int i = 0; i < 2; i++) {
		const struct json *big = tcc_call(c, "memory", i ? "{\"command\":\"insert\",\"path\":\"/memories/notes.md\","
						"\"insert_line\":99999999999999999999,\"insert_text\":\"x\"}"
					      : "{\"command\":\"insert\",\"path\":\"/memories/notes.md\","
						"\"insert_line\":1e30,\"insert_text\":\"x\"}");
		tc_assert_kind(big, "validation_error");
	}
	s = mem_file(&d, "0/memories/notes.md");
	ck_assert_str_eq(s, "top\nline uno\nmiddle\nline two\n");
	free(s);

	/* create overwrites, makes directories; view lists two levels. */
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/notes.md\",\"file_text\":\"new\\n\"}"),
			 "File /memories/notes.md has been overwritten.");
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/sub/deep/a.txt\",\"file_text\":\"a\"}");
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/.hidden\",\"file_text\":\"h\"}");
	t = mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/\"}");
	ck_assert_msg(strstr(t, "\n4B\t/memories/notes.md") && strstr(t, "\t/memories/sub/\n") &&
		      strstr(t, "\t/memories/sub/deep/") && !strstr(t, "a.txt") && !strstr(t, ".hidden"), "%s", t);

	/* rename, delete. */
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"rename\",\"old_path\":\"/memories/notes.md\","
			       "\"new_path\":\"/memories/archive/notes.md\"}"),
			 "Successfully renamed /memories/notes.md to /memories/archive/notes.md");
	ck_assert(!mem_exists(&d, "0/memories/notes.md"));
	ck_assert(mem_exists(&d, "0/memories/archive/notes.md"));
	mem_err(c, "{\"command\":\"rename\",\"old_path\":\"/memories/sub\",\"new_path\":\"/memories/archive/notes.md\"}",
		"The destination /memories/archive/notes.md already exists");
	mem_err(c, "{\"command\":\"rename\",\"old_path\":\"/memories/gone\",\"new_path\":\"/memories/x\"}",
		"The path /memories/gone does not exist");
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"delete\",\"path\":\"/memories/sub\"}"), "Successfully deleted /memories/sub");
	ck_assert(!mem_exists(&d, "0/memories/sub"));
	mem_err(c, "{\"command\":\"delete\",\"path\":\"/memories\"}", "Cannot delete the /memories directory itself");
	mem_err(c, "{\"command\":\"delete\",\"path\":\"/memories/sub\"}", "The path /memories/sub does not exist");

	/* Nothing but /memories is reachable. */
	mem_err(c, "{\"command\":\"view\",\"path\":\"/etc/passwd\"}", "Path must start with /memories, got: /etc/passwd");
	mem_err(c, "{\"command\":\"view\",\"path\":\"/memoriesx\"}", "Path must start with /memories");
	mem_err(c, "{\"command\":\"view\",\"path\":\"/memories/../../0/memories\"}",
		"Path /memories/../../0/memories would escape /memories directory");
	mem_err(c, "{\"command\":\"create\",\"path\":\"/memories/../x\",\"file_text\":\"x\"}", "would escape");
	mem_err(c, "{\"command\":\"create\",\"path\":\"/memories/x\"}", "needs the argument `file_text`");
	ck_assert(!mem_exists(&d, "0/x"));
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);

	/* Audited: command, path, bytes. */
	char *ap = xasprintf("%s/audit.log", d.dir);
	char *audit = tcd_read(&d, ap, NULL);
	ck_assert_ptr_nonnull(audit);
	ck_assert_msg(strstr(audit, "\"command\":\"memory create /memories/notes.md (18 bytes)\""), "%s", audit);
	ck_assert(strstr(audit, "\"files\":[\"/memories/notes.md\"]"));
	ck_assert(strstr(audit, "\"command\":\"memory delete /memories/sub\""));
	free(audit);
	free(ap);
	tcd_free(&d);
}
END_TEST

START_TEST(one_memory_per_uid)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	tcd_start(&d, "{\"socket_mode\":\"0666\",\"memory\":{\"dir\":\"mem\"}}");
	ck_assert(chmod(d.dir, 0711) == 0);
	struct tcc *root = tcc_connect(&d);
	struct tcc *nobody = tcc_connect_as(&d, NOBODY, NOBODY);

	mem_ok(root, "{\"command\":\"create\",\"path\":\"/memories/root.md\",\"file_text\":\"root's\\n\"}");
	mem_ok(nobody, "{\"command\":\"create\",\"path\":\"/memories/mine.md\",\"file_text\":\"nobody's\\n\"}");
	const char *t = mem_ok(nobody, "{\"command\":\"view\",\"path\":\"/memories\"}");
	ck_assert_msg(strstr(t, "mine.md") && !strstr(t, "root.md"), "%s", t);
	mem_err(nobody, "{\"command\":\"view\",\"path\":\"/memories/root.md\"}", "does not exist");
	t = mem_ok(root, "{\"command\":\"view\",\"path\":\"/memories\"}");
	ck_assert_msg(strstr(t, "root.md") && !strstr(t, "mine.md"), "%s", t);
	mem_err(nobody, "{\"command\":\"view\",\"path\":\"/memories/../../0/memories/root.md\"}", "would escape");

	/* Each uid's directory is 0700 and its own; so is what it wrote. */
	char *base = xasprintf("%s/mem", d.dir);
	struct stat st;
	ck_assert(stat(base, &st) == 0);
	ck_assert_int_eq(st.st_mode & 07777, 0711);
	ck_assert_int_eq(st.st_uid, 0);
	char *p = xasprintf("%s/%d", base, NOBODY);
	ck_assert(stat(p, &st) == 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(st.st_uid, NOBODY);
	free(p);
	p = xasprintf("%s/%d/memories", base, NOBODY);
	ck_assert(stat(p, &st) == 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(st.st_uid, NOBODY);
	free(p);
	p = xasprintf("%s/%d/memories/mine.md", base, NOBODY);
	ck_assert(stat(p, &st) == 0);
	ck_assert_int_eq(st.st_uid, NOBODY);
	free(p);
	p = xasprintf("%s/0", base);
	ck_assert(stat(p, &st) == 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(st.st_uid, 0);
	free(p);
	free(base);

	/* The kernel refuses the peer what it may not touch: a root-owned
	 * file put in its memory stays root's. */
	char *planted = xasprintf("%s/mem/%d/memories/planted.md", d.dir, NOBODY);
	tc_write_file_atomic(planted, "root's\n", 7);
	ck_assert(chmod(planted, 0600) == 0);
	mem_err(nobody, "{\"command\":\"view\",\"path\":\"/memories/planted.md\"}", "permission denied");
	free(planted);

	/* A uid directory that is not the peer's alone is not used. */
	char *ud = xasprintf("%s/mem/%d", d.dir, NOBODY);
	ck_assert(chown(ud, 0, 0) == 0);
	const struct json *r = tcc_call(nobody, "memory", "{\"command\":\"view\",\"path\":\"/memories\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "is not owned by uid 65534 alone"));
	ck_assert(chown(ud, NOBODY, NOBODY) == 0);
	ck_assert(chmod(ud, 0777) == 0);
	tc_assert_kind(tcc_call(nobody, "memory", "{\"command\":\"view\",\"path\":\"/memories\"}"),
		       "permission_denied");
	ck_assert(chmod(ud, 0700) == 0);
	mem_ok(nobody, "{\"command\":\"view\",\"path\":\"/memories/mine.md\"}");
	free(ud);

	tcc_close(root);
	tcc_close(nobody);
	tcd_finish(&d);
}
END_TEST

/* With run_as "daemon" the file work is the daemon's, the peer's memory
 * directories still the peer's. */
START_TEST(run_as_daemon_keeps_the_peers_directories)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	tcd_start(&d, "{\"socket_mode\":\"0666\",\"run_as\":\"daemon\",\"memory\":{\"dir\":\"mem\"}}");
	ck_assert(chmod(d.dir, 0711) == 0);
	struct tcc *nobody = tcc_connect_as(&d, NOBODY, NOBODY);
	mem_ok(nobody, "{\"command\":\"create\",\"path\":\"/memories/n.md\",\"file_text\":\"n\"}");
	char *p = xasprintf("%s/mem/%d/memories", d.dir, NOBODY);
	struct stat st;
	ck_assert(stat(p, &st) == 0);
	ck_assert_int_eq(st.st_uid, NOBODY);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	free(p);
	tcc_close(nobody);
	tcd_finish(&d);
}
END_TEST

START_TEST(symlinks_are_refused)
{
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\"}}");
	struct tcc *c = tcc_connect(&d);
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/real/f.md\",\"file_text\":\"x\\n\"}");
	char *outside = xasprintf("%s/outside", d.dir);
	ck_assert(mkdir(outside, 0700) == 0);
	tcd_put(&d, "secret.md", "secret\n");
	char *link = xasprintf("%s/mem/0/memories/out", d.dir);
	ck_assert(symlink(outside, link) == 0);
	free(link);
	link = xasprintf("%s/mem/0/memories/secret.md", d.dir);
	char *target = tcd_ws_path(&d, "secret.md");
	ck_assert(symlink(target, link) == 0);
	free(target);
	free(link);
	/* A link that stays inside is refused too: no links at all. */
	link = xasprintf("%s/mem/0/memories/inside", d.dir);
	ck_assert(symlink("real", link) == 0);
	free(link);

	mem_err(c, "{\"command\":\"view\",\"path\":\"/memories/secret.md\"}", "symbolic link");
	mem_err(c, "{\"command\":\"view\",\"path\":\"/memories/inside/f.md\"}", "symbolic link");
	mem_err(c, "{\"command\":\"view\",\"path\":\"/memories/out\"}", "symbolic link");
	mem_err(c, "{\"command\":\"create\",\"path\":\"/memories/out/new.md\",\"file_text\":\"x\"}", "symbolic link");
	mem_err(c, "{\"command\":\"create\",\"path\":\"/memories/secret.md\",\"file_text\":\"x\"}", "symbolic link");
	mem_err(c, "{\"command\":\"str_replace\",\"path\":\"/memories/secret.md\",\"old_str\":\"secret\",\"new_str\":\"x\"}",
		"symbolic link");
	mem_err(c, "{\"command\":\"insert\",\"path\":\"/memories/inside/f.md\",\"insert_line\":0,\"insert_text\":\"x\"}",
		"symbolic link");
	mem_err(c, "{\"command\":\"rename\",\"old_path\":\"/memories/real/f.md\",\"new_path\":\"/memories/out/f.md\"}",
		"symbolic link");
	char *p = xasprintf("%s/new.md", outside);
	ck_assert(access(p, F_OK) < 0);
	free(p);
	p = xasprintf("%s/f.md", outside);
	ck_assert(access(p, F_OK) < 0);
	free(p);
	char *sp = tcd_ws_path(&d, "secret.md");
	char *s = tcd_read(&d, sp, NULL);
	ck_assert_str_eq(s, "secret\n");
	free(s);
	free(sp);
	/* The link itself may go; what it points to stays. */
	mem_ok(c, "{\"command\":\"delete\",\"path\":\"/memories/out\"}");
	struct stat st;
	ck_assert(stat(outside, &st) == 0);
	free(outside);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A name the memory's own temporary files have (".NAME.tc-XXXXXX", which
 * a later write removes as a leftover of a write cut short) is refused:
 * a file given that name would be lost. */
START_TEST(temporary_names_are_refused)
{
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\"}}");
	struct tcc *c = tcc_connect(&d);
	mem_err(c, "{\"command\":\"create\",\"path\":\"/memories/.n.md.tc-abc123\",\"file_text\":\"x\"}",
		"choose another name");
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"keep\\n\"}");
	mem_err(c, "{\"command\":\"rename\",\"old_path\":\"/memories/a.md\",\"new_path\":\"/memories/.a.tc-Zz0009\"}",
		"choose another name");
	mem_err(c, "{\"command\":\"create\",\"path\":\"/memories/.d.tc-000000/f.md\",\"file_text\":\"x\"}",
		"choose another name");
	/* Names near it are fine, and stay through later writes. */
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/.n.md.tc-abc12\",\"file_text\":\"x\"}");
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/b.md\",\"file_text\":\"y\"}");
	mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/.n.md.tc-abc12\"}");
	mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/a.md\"}");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* The names in the memory directory rel, hidden ones too, sorted, joined by ','. */
static char *names_in(const struct tcd *d, const char *rel)
{
	char *p = xasprintf("%s/mem/%s", d->dir, rel);
	struct dirent **v;
	int n = scandir(p, &v, NULL, alphasort);
	ck_assert_int_ge(n, 0);
	struct buf b = {0};
	for (int i = 0; i < n; i++) {
		if (!str_eq(v[i]->d_name, ".") && !str_eq(v[i]->d_name, ".."))
			buf_printf(&b, "%s%s", buf_size(&b) ? "," : "", v[i]->d_name);
		free(v[i]);
	}
	free(v);
	free(p);
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/* Every write keeps memory text; a file that holds a NUL anyway (written
 * by hand, or before) is shown whole, never cut at the NUL. */
START_TEST(text_only_on_every_write)
{
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\"}}");
	struct tcc *c = tcc_connect(&d);
	mem_assert_text_only(c);
	size_t n;
	char *p = xasprintf("%s/mem/0/memories/t.md", d.dir);
	char *s = tcd_read(&d, p, &n);
	ck_assert_int_eq(n, strlen(s));
	ck_assert_str_eq(s, "\xf0\x9f\x98\x80\none\nzwei \xc3\xa9\nthree\n");
	free(s);
	free(p);
	ck_assert(!mem_exists(&d, "0/memories/new.md"));

	p = xasprintf("%s/mem/0/memories/nul.md", d.dir);
	tc_write_file_atomic(p, "a\0b\nc\n\0", 7);
	const char *t = mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/nul.md\"}");
	ck_assert_msg(str_has_prefix(t, "Here's the content of /memories/nul.md with line numbers:\n"
				     "     1\ta\xe2\x90\x80" "b\n     2\tc\n     3\t\xe2\x90\x80\n") &&
		      strstr(t, "2 NUL bytes") && strstr(t, "\xe2\x90\x80"), "%s", t);
	t = mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/nul.md\",\"view_range\":[2,2]}");
	ck_assert_msg(str_has_prefix(t, "Here's the content of /memories/nul.md with line numbers:\n     2\tc\n") &&
		      strstr(t, "2 NUL bytes"), "%s", t);
	/* Edits keep the NULs there are, and add none. */
	mem_ok(c, "{\"command\":\"insert\",\"path\":\"/memories/nul.md\",\"insert_line\":0,\"insert_text\":\"top\"}");
	mem_ok(c, "{\"command\":\"str_replace\",\"path\":\"/memories/nul.md\",\"old_str\":\"c\",\"new_str\":\"d\"}");
	mem_err(c, "{\"command\":\"str_replace\",\"path\":\"/memories/nul.md\",\"old_str\":\"d\",\"new_str\":\"\\u0000\"}",
		"new_str holds a NUL byte");
	s = tcd_read(&d, p, &n);
	ck_assert_int_eq(n, 11);
	ck_assert(memcmp(s, "top\na\0b\nd\n\0", 11) == 0);
	free(s);
	/* Taking them out is an edit like any. */
	mem_ok(c, "{\"command\":\"str_replace\",\"path\":\"/memories/nul.md\",\"old_str\":\"d\\n\\u0000\",\"new_str\":\"d\\n\"}");
	mem_ok(c, "{\"command\":\"str_replace\",\"path\":\"/memories/nul.md\",\"old_str\":\"\\u0000\",\"new_str\":\"\"}");
	s = tcd_read(&d, p, &n);
	ck_assert_str_eq(s, "top\nab\nd\n");
	free(s);
	free(p);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* No path names a control character; names on disk that hold one are
 * listed escaped, one line each. */
START_TEST(paths_hold_no_control_characters)
{
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\"}}");
	struct tcc *c = tcc_connect(&d);
	mem_assert_paths_checked(c);
	char *s = names_in(&d, "0/memories");
	ck_assert_str_eq(s, "a.md");
	free(s);

	/* Made by hand. */
	char *p = xasprintf("%s/mem/0/memories/fake\n4K\tinjected.md", d.dir);
	tc_write_file_atomic(p, "x", 1);
	free(p);
	p = xasprintf("%s/mem/0/memories/line\xe2\x80\xa8sep", d.dir);
	ck_assert(mkdir(p, 0700) == 0);
	free(p);
	p = xasprintf("%s/mem/0/memories/line\xe2\x80\xa8sep/nel\xc2\x85\x7f.md", d.dir);
	tc_write_file_atomic(p, "x", 1);
	free(p);
	p = xasprintf("%s/mem/0/memories/bad\xff\r.md", d.dir);
	tc_write_file_atomic(p, "x", 1);
	free(p);
	mem_assert_names_escaped(c);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(quotas)
{
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\",\"max_file_kb\":1,\"max_total_kb\":2}}");
	struct tcc *c = tcc_connect(&d);
	char big[1100], kb[1001];
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memset(kb, 'k', sizeof(kb) - 1);
	kb[sizeof(kb) - 1] = '\0';
	kb[0] = 'A';

	mem_err(c, tcc_fmt(c, "{\"command\":\"create\",\"path\":\"/memories/big\",\"file_text\":\"%s\"}", big),
		"memory.max_file_kb (1 KiB)");
	ck_assert(!mem_exists(&d, "0/memories/big"));
	mem_ok(c, tcc_fmt(c, "{\"command\":\"create\",\"path\":\"/memories/a\",\"file_text\":\"%s\"}", kb));
	mem_ok(c, tcc_fmt(c, "{\"command\":\"create\",\"path\":\"/memories/b\",\"file_text\":\"%s\"}", kb));
	mem_err(c, tcc_fmt(c, "{\"command\":\"create\",\"path\":\"/memories/c\",\"file_text\":\"%s\"}", kb),
		"memory.max_total_kb (2 KiB)");
	/* Growing a file past the limit leaves it as it was, and no
	 * temporary file behind. */
	mem_err(c, "{\"command\":\"str_replace\",\"path\":\"/memories/a\",\"old_str\":\"A\","
		"\"new_str\":\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\"}",
		"memory.max_file_kb");
	mem_err(c, tcc_fmt(c, "{\"command\":\"insert\",\"path\":\"/memories/b\",\"insert_line\":1,\"insert_text\":\"%s\"}", kb),
		"memory.max_file_kb");
	char *s = mem_file(&d, "0/memories/a");
	ck_assert_str_eq(s, kb);
	free(s);
	s = mem_file(&d, "0/memories/b");
	ck_assert_str_eq(s, kb);
	free(s);
	s = names_in(&d, "0/memories");
	ck_assert_str_eq(s, "a,b");
	free(s);
	/* A temporary file a killed write left behind counts for nothing and
	 * goes at the next write. */
	char *orphan = xasprintf("%s/mem/0/memories/.a.tc-Ab12Cd", d.dir);
	tc_write_file_atomic(orphan, kb, strlen(kb));
	/* Replacing a file within the total is fine: its old size is freed. */
	mem_ok(c, tcc_fmt(c, "{\"command\":\"create\",\"path\":\"/memories/a\",\"file_text\":\"%s\"}", kb));
	ck_assert(access(orphan, F_OK) < 0);
	free(orphan);
	/* Text only. */
	char *np = xasprintf("%s/mem/0/memories/bin", d.dir);
	tc_write_file_atomic(np, "\xff\xfe\x00x", 4);
	free(np);
	mem_err(c, "{\"command\":\"view\",\"path\":\"/memories/bin\"}", "not UTF-8 text");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(hidden_from_a_session_that_says_so)
{
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\"}}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "initialize", "{\"protocolVersion\":\"2025-06-18\",\"memory\":\"no\"}");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	ck_assert(tcc_initialize(c, "\"memory\":false"));
	r = tcc_request(c, "tools/list", NULL);
	ck_assert_int_gt(tj_len(r, "result.tools"), 5);
	for (long i = 0; i < tj_len(r, "result.tools"); i++)
		ck_assert_str_ne(tj_str(r, tcc_fmt(c, "result.tools.%ld.name", i)), "memory");
	r = tcc_request(c, "tools/list", "{\"format\":\"anthropic\"}");
	for (long i = 0; i < tj_len(r, "result.tools"); i++)
		ck_assert_str_ne(tj_str(r, tcc_fmt(c, "result.tools.%ld.name", i)), "memory");
	r = tcc_call(c, "memory", "{\"command\":\"view\",\"path\":\"/memories\"}");
	tc_assert_kind(r, "not_found");
	const char *avail = strstr(tj_str(r, "error.message"), "Available:");
	ck_assert(avail && strstr(avail, "read_file") && !strstr(avail, "memory"));
	r = tcc_request(c, "tools/dispatch", "{\"format\":\"anthropic\",\"calls\":[{\"type\":\"tool_use\","
			"\"id\":\"toolu_1\",\"name\":\"memory\",\"input\":{\"command\":\"view\",\"path\":\"/memories\"}}]}");
	ck_assert(tj_bool(r, "result.messages.0.content.0.is_error"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.messages.0.content.0.content"), "not found"));
	ck_assert(!mem_exists(&d, "0"));

	/* Other sessions still have it. */
	struct tcc *o = tcc_connect(&d);
	ck_assert(tcc_initialize(o, "\"memory\":true"));
	mem_ok(o, "{\"command\":\"view\",\"path\":\"/memories\"}");
	tcc_close(o);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(dispatch_anthropic)
{
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\"}}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "tools/dispatch",
		"{\"format\":\"anthropic\",\"calls\":[{\"type\":\"text\",\"text\":\"Let me note that.\"},"
		"{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"memory\",\"input\":{\"command\":\"create\","
		"\"path\":\"/memories/prefs.md\",\"file_text\":\"likes coffee\\n\"}}]}");
	ck_assert_str_eq(tj_str(r, "result.messages.0.role"), "user");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.type"), "tool_result");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.tool_use_id"), "toolu_1");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.content"), "File created successfully at: /memories/prefs.md");
	ck_assert(!tj_bool(r, "result.messages.0.content.0.is_error"));

	r = tcc_request(c, "tools/dispatch",
		"{\"format\":\"anthropic\",\"calls\":["
		"{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"memory\",\"input\":{\"command\":\"view\","
		"\"path\":\"/memories/prefs.md\"}},"
		"{\"type\":\"tool_use\",\"id\":\"toolu_3\",\"name\":\"memory\",\"input\":{\"command\":\"str_replace\","
		"\"path\":\"/memories/prefs.md\",\"old_str\":\"tea\",\"new_str\":\"x\"}},"
		"{\"type\":\"tool_use\",\"id\":\"toolu_4\",\"name\":\"memory\",\"input\":{\"command\":\"view\","
		"\"path\":\"/home\"}}]}");
	ck_assert_int_eq(tj_len(r, "result.messages.0.content"), 3);
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.content"),
			 "Here's the content of /memories/prefs.md with line numbers:\n     1\tlikes coffee");
	ck_assert(!tj_bool(r, "result.messages.0.content.0.is_error"));
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.1.content"),
			 "No replacement was performed, old_str `tea` did not appear verbatim in /memories/prefs.md.");
	ck_assert(tj_bool(r, "result.messages.0.content.1.is_error"));
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.2.content"), "Path must start with /memories, got: /home");
	ck_assert(tj_bool(r, "result.messages.0.content.2.is_error"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(scope_per_workspace)
{
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\",\"scope\":\"workspace\"},\"workspaces\":{\"allowed\":[\"@DIR@\"]}}");
	char *other = xasprintf("%s/other", d.dir);
	ck_assert(mkdir(other, 0755) == 0);
	struct tcc *a = tcc_connect(&d);
	struct tcc *b = tcc_connect(&d);
	ck_assert(tcc_initialize(b, tcc_fmt(b, "\"workspace\":\"%s\"", other)));
	mem_ok(a, "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"a\"}");
	mem_err(b, "{\"command\":\"view\",\"path\":\"/memories/a.md\"}", "does not exist");
	mem_ok(b, "{\"command\":\"create\",\"path\":\"/memories/b.md\",\"file_text\":\"b\"}");
	char *s = names_in(&d, "0");
	ck_assert_msg(str_has_prefix(s, "ws-") && strchr(s, ',') && !strstr(s, "memories"), "%s", s);
	free(s);
	free(other);
	tcc_close(a);
	tcc_close(b);
	tcd_finish(&d);
}
END_TEST

/* A sandboxed command cannot read the memory directory (where the daemon
 * is not root, every peer's commands run as the daemon). */
START_TEST(commands_cannot_read_memory)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox that keeps memory out");
	struct tcd d;
	tcd_start(&d, "{\"memory\":{\"dir\":\"mem\"},\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}}}");
	struct tcc *c = tcc_connect(&d);
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/secret.md\",\"file_text\":\"s3cr3t\"}");
	const struct json *r = tcc_call(c, "shell", tcc_fmt(c, "{\"command\":\"cat %s/mem/%u/memories/secret.md\"}",
							   d.dir, (unsigned)geteuid()));
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_ptr_null(strstr(tj_str(r, "result.structuredContent.stdout"), "s3cr3t"));
	/* The sandbox itself works: what is not denied is read. */
	tcd_put(&d, "open.md", "open\n");
	r = tcc_call(c, "shell", "{\"command\":\"cat open.md\"}");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.isError"));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "open\n");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Without memory.dir, the state directory systemd gives is used. */
START_TEST(default_dir_is_the_state_directory)
{
	char dir[] = "/tmp/tc-mem-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *env0 = xasprintf("STATE_DIRECTORY=%s/state:%s/other", dir, dir);
	const char *env[] = { env0, NULL };
	struct tcd_opts o = { .config = "{}", .env = env };
	struct tcd d;
	tcd_start_opts(&d, &o);
	struct tcc *c = tcc_connect(&d);
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/x.md\",\"file_text\":\"x\"}");
	char *p = xasprintf("%s/state/memory/%u/memories/x.md", dir, (unsigned)geteuid());
	char *s = tcd_read(&d, p, NULL);
	ck_assert_str_eq(s, "x");
	free(s);
	free(p);
	tcc_close(c);
	tcd_finish(&d);
	p = xasprintf("rm -rf %s", dir);
	ck_assert_int_eq(system(p), 0);
	free(p);
	free(env0);
}
END_TEST

static Suite *memory_suite(void)
{
	Suite *s = suite_create("memory");
	TCase *tc = tcase_create("memory");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_command);
	tcase_add_test(tc, one_memory_per_uid);
	tcase_add_test(tc, run_as_daemon_keeps_the_peers_directories);
	tcase_add_test(tc, symlinks_are_refused);
	tcase_add_test(tc, temporary_names_are_refused);
	tcase_add_test(tc, quotas);
	tcase_add_test(tc, text_only_on_every_write);
	tcase_add_test(tc, paths_hold_no_control_characters);
	tcase_add_test(tc, hidden_from_a_session_that_says_so);
	tcase_add_test(tc, dispatch_anthropic);
	tcase_add_test(tc, scope_per_workspace);
	tcase_add_test(tc, default_dir_is_the_state_directory);
	tcase_add_test(tc, commands_cannot_read_memory);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(memory_suite());
}
