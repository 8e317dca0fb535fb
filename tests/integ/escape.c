/* SPDX-License-Identifier: MIT */
/*
 * The workspace escape fixture (escape.h): the files and links outside
 * and inside the workspace, and the assertions that a call was refused
 * and that nothing outside changed.
 */
#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/escape.h"

int tc_count_entries(const char *dir)
{
	DIR *dp = opendir(dir);
	ck_assert_msg(dp, "opendir %s", dir);
	int n = 0;
	for (struct dirent *de; (de = readdir(dp));)
		n += !str_eq(de->d_name, ".") && !str_eq(de->d_name, "..");
	closedir(dp);
	return n;
}

void escape_setup(struct escape *e, const char *config, const char *inside_text)
{
	tcd_start(&e->d, config);
	struct tcd *d = &e->d;
	e->outside = xasprintf("%s/outside", d->dir);
	e->evil = xasprintf("%s/ws-evil", d->dir);
	e->secret = xasprintf("%s/secret.txt", e->outside);
	ck_assert(mkdir(e->outside, 0755) == 0);
	ck_assert(mkdir(e->evil, 0755) == 0);
	tc_write_file_atomic(e->secret, ESCAPE_SECRET, strlen(ESCAPE_SECRET));
	char *evil_secret = xasprintf("%s/secret.txt", e->evil);
	tc_write_file_atomic(evil_secret, ESCAPE_SECRET, strlen(ESCAPE_SECRET));
	free(evil_secret);

	tcd_put(d, "inside.txt", inside_text);
	tcd_put(d, "sub/deep.txt", "deep\n");
	tcd_put(d, "..test", "dotdot name\n");
	tcd_put(d, "...", "three dots\n");
	tcd_put(d, "sub/..hidden", "hidden\n");
	/* symlinks leading out: absolute and relative, to a file and a dir */
	struct {
		const char *name, *target;
	} links[] = {
		{ "abs_file", e->secret },
		{ "abs_dir", e->outside },
		{ "rel_file", "../outside/secret.txt" },
		{ "rel_dir", "../outside" },
		{ "sub/up_file", "../../outside/secret.txt" },
		{ "evil_dir", "../ws-evil" },
		{ "root_link", "/" },
		{ "proc_root", "/proc/self/root" },
		{ "proc_cwd", "/proc/self/cwd" },
		/* a chain: chain1 -> chain2 -> chain3 -> outside */
		{ "chain1", "chain2" },
		{ "chain2", "sub/chain3" },
		{ "sub/chain3", "../rel_file" },
		/* dangling, leading out: writing through it must not create */
		{ "dangling_out", "../outside/created.txt" },
		{ "dangling_dir", "../outside/newdir" },
		/* inside: allowed */
		{ "in_file", "inside.txt" },
		{ "in_dir", "sub" },
		{ "in_chain", "in_file" },
		{ "sub/in_up", "../inside.txt" },
		{ "loop1", "loop2" },
		{ "loop2", "loop1" },
	};
	for (size_t i = 0; i < ELEMENTSOF(links); i++) {
		char *p = tcd_ws_path(d, links[i].name);
		ck_assert_msg(symlink(links[i].target, p) == 0, "symlink %s", p);
		free(p);
	}
	e->c = tcc_connect(d);
}

void escape_teardown(struct escape *e)
{
	/* nothing outside changed or appeared */
	char *got = tcd_read(&e->d, e->secret, NULL);
	ck_assert_pstr_eq(got, ESCAPE_SECRET);
	free(got);
	char *evil_secret = xasprintf("%s/secret.txt", e->evil);
	got = tcd_read(&e->d, evil_secret, NULL);
	ck_assert_pstr_eq(got, ESCAPE_SECRET);
	free(got);
	free(evil_secret);
	ck_assert_int_eq(tc_count_entries(e->outside), 1);
	ck_assert_int_eq(tc_count_entries(e->evil), 1);
	ck_assert_int_eq(tc_count_entries(e->d.dir), 7);	/* config, sock, ws, tools.d, log, outside, ws-evil */
	tcc_close(e->c);
	free(e->outside);
	free(e->evil);
	free(e->secret);
	tcd_finish(&e->d);
}

void escape_denied_at(struct escape *e, const char *tool, const char *args, int line)
{
	const struct json *r = tcc_call(e->c, tool, args);
	const char *kind = tj_kind(r);
	char *t = tj_text(r);
	ck_assert_msg(kind && str_eq(kind, "permission_denied"), "line %d: %s %s: expected permission_denied, got %s",
		      line, tool, args, t);
	ck_assert_msg(tj_int(r, "error.code") == -32603, "line %d: code: %s", line, t);
	ck_assert_msg(!tj_bool(r, "error.data.retryable"), "line %d: retryable: %s", line, t);
	const char *msg = tj_str(r, "error.message");
	ck_assert_msg(strstr(msg, "escapes the workspace") || strstr(msg, "NUL"), "line %d: message: %s", line, msg);
	ck_assert_msg(!strstr(t, "TOP SECRET"), "line %d: leaked: %s", line, t);
	free(t);
}
