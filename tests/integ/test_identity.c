/* SPDX-License-Identifier: MIT */
/*
 * File tools act as the peer and never stall other clients (CONTRACT §10
 * Identity, Writes never create privilege; §11 file tools off the loop).
 * With the daemon as root, a client connected as uid 65534 is refused a
 * 0600 root file and a 0700 root directory by the kernel (by every file
 * tool, edit_file included), owns what it writes, and run_as "daemon"
 * gives back the daemon's rights, in open sessions too after a reload;
 * writes drop setuid/setgid bits and file capabilities; a client's ping
 * stays fast while others list a large directory and patch a large file,
 * and a listing past its timeout ends as a timeout, freeing its worker
 * (the bench, tc-bench, measures 300,000 entries and 60 MB; cancellation
 * is in tests/unit/test_fsjob.c). Cases that switch uid need root and
 * skip without it.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define NOBODY 65534
#define CFG_AUTO "\"socket_mode\":\"0666\",\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}}"

/* Starts a daemon that uid 65534 may reach, with a world-writable workspace. */
static void start_shared(struct tcd *d, const char *extra)
{
	char *cfg = xasprintf("{" CFG_AUTO "%s%s}", extra ? "," : "", extra ? extra : "");
	tcd_start(d, cfg);
	free(cfg);
	ck_assert(chmod(d->dir, 0711) == 0);
	ck_assert(chmod(d->ws, 0777) == 0);
}

static struct stat stat_ws(const struct tcd *d, const char *rel)
{
	char *p = tcd_ws_path(d, rel);
	struct stat st;
	ck_assert_msg(lstat(p, &st) == 0, "stat %s", p);
	free(p);
	return st;
}

START_TEST(peer_is_refused_what_the_kernel_refuses_it)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, NULL);
	free(tcd_write_ws(&d, "secret.txt", "root only\n", 10, 0600));
	free(tcd_write_ws(&d, "open.txt", "anyone\n", 7, 0644));
	char *priv = tcd_ws_path(&d, "private");
	ck_assert(mkdir(priv, 0700) == 0);
	free(priv);
	free(tcd_write_ws(&d, "private/inner.txt", "x\n", 2, 0644));

	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	tc_assert_kind(tcc_call(n, "read_file", "{\"path\":\"secret.txt\"}"), "permission_denied");
	tc_assert_kind(tcc_call(n, "list_dir", "{\"path\":\"private\"}"), "permission_denied");
	tc_assert_kind(tcc_call(n, "read_file", "{\"path\":\"private/inner.txt\"}"), "permission_denied");
	tc_assert_kind(tcc_call(n, "patch_file", "{\"path\":\"secret.txt\",\"old\":\"root\",\"new\":\"mine\"}"),
		       "permission_denied");
	tc_assert_kind(tcc_call(n, "edit_file", "{\"path\":\"secret.txt\",\"edits\":[{\"old\":\"root\",\"new\":\"mine\"}]}"),
		       "permission_denied");
	/* What it may read, it reads. */
	const struct json *r = tcc_call(n, "read_file", "{\"path\":\"open.txt\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.content"), "anyone\n");
	/* What it writes is its own. */
	tc_assert_ok(tcc_call(n, "write_file", "{\"path\":\"mine.txt\",\"content\":\"hi\\n\"}"));
	struct stat st = stat_ws(&d, "mine.txt");
	ck_assert_uint_eq(st.st_uid, NOBODY);
	ck_assert_uint_eq(st.st_gid, NOBODY);
	tc_assert_ok(tcc_call(n, "edit_file", "{\"path\":\"mine.txt\",\"edits\":[{\"old\":\"hi\",\"new\":\"ho\"}]}"));
	ck_assert_uint_eq(stat_ws(&d, "mine.txt").st_uid, NOBODY);
	tc_assert_ok(tcc_call(n, "write_file", "{\"path\":\"sub/deep.txt\",\"content\":\"x\",\"create_dirs\":true}"));
	ck_assert_uint_eq(stat_ws(&d, "sub").st_uid, NOBODY);
	ck_assert_uint_eq(stat_ws(&d, "sub/deep.txt").st_uid, NOBODY);
	tcc_close(n);

	/* Root, the daemon's own user, keeps its rights. */
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"secret.txt\"}"));
	tc_assert_ok(tcc_call(c, "list_dir", "{\"path\":\"private\"}"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Rewrites the daemon's config file, from replaced by to, and reloads it. */
static void reload_with(struct tcd *d, const char *from, const char *to)
{
	_cleanup_free_ char *cfg = tcd_read(d, d->config, NULL);
	ck_assert_ptr_nonnull(cfg);
	char *at = strstr(cfg, from);
	ck_assert_msg(at, "'%s' not in the config", from);
	_cleanup_free_ char *next = xasprintf("%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
	FILE *f = fopen(d->config, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert(fputs(next, f) >= 0);
	ck_assert_int_eq(fclose(f), 0);
	struct tcc *root = tcc_connect(d);
	tc_assert_ok(tcc_reload(root));
	tcc_close(root);
}

/* run_as "daemon" keeps the daemon's rights; a reload of run_as applies
 * to sessions already open: their file tools and children act as the one
 * identity the reload decided, both ways. */
START_TEST(run_as_daemon_keeps_the_daemons_rights)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "\"run_as\":\"daemon\"");
	free(tcd_write_ws(&d, "secret.txt", "root only\n", 10, 0600));
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	tc_assert_ok(tcc_call(n, "read_file", "{\"path\":\"secret.txt\"}"));
	tc_assert_ok(tcc_call(n, "write_file", "{\"path\":\"made.txt\",\"content\":\"x\"}"));
	ck_assert_uint_eq(stat_ws(&d, "made.txt").st_uid, 0);
	const struct json *r = tcc_call(n, "shell", "{\"command\":\"id -u\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "0\n");

	reload_with(&d, "\"run_as\":\"daemon\"", "\"run_as\":\"peer\"");
	tc_assert_kind(tcc_call(n, "read_file", "{\"path\":\"secret.txt\"}"), "permission_denied");
	tc_assert_ok(tcc_call(n, "write_file", "{\"path\":\"as_peer.txt\",\"content\":\"x\"}"));
	ck_assert_uint_eq(stat_ws(&d, "as_peer.txt").st_uid, NOBODY);
	r = tcc_call(n, "shell", "{\"command\":\"id -u\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "65534\n");

	reload_with(&d, "\"run_as\":\"peer\"", "\"run_as\":\"daemon\"");
	tc_assert_ok(tcc_call(n, "read_file", "{\"path\":\"secret.txt\"}"));
	tc_assert_ok(tcc_call(n, "write_file", "{\"path\":\"as_daemon.txt\",\"content\":\"x\"}"));
	ck_assert_uint_eq(stat_ws(&d, "as_daemon.txt").st_uid, 0);
	tcc_close(n);
	tcd_finish(&d);
}
END_TEST

/* A command tool's own run_as overrides the config's, both ways. */
START_TEST(tool_run_as_overrides_the_config)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "\"run_as\":\"daemon\"");
	tcd_write_tool(&d, "whoami_peer.json",
		       "{\"name\":\"whoami_peer\",\"kind\":\"command\",\"side_effects\":\"read\",\"argv\":[\"id\",\"-u\"],"
		       "\"run_as\":\"peer\"}");
	tcd_write_tool(&d, "whoami.json",
		       "{\"name\":\"whoami\",\"kind\":\"command\",\"side_effects\":\"read\",\"argv\":[\"id\",\"-u\"]}");
	struct tcc *root = tcc_connect(&d);
	tc_assert_ok(tcc_reload(root));
	tcc_close(root);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	const struct json *r = tcc_call(n, "whoami_peer", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "65534\n");
	r = tcc_call(n, "whoami", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "0\n");
	tcc_close(n);
	tcd_finish(&d);
}
END_TEST

/* Makes the workspace's directory rel, of mode. */
static void ws_mkdir(struct tcd *d, const char *rel, mode_t mode)
{
	char *p = tcd_ws_path(d, rel);
	ck_assert_msg(mkdir(p, mode) == 0, "mkdir %s", p);
	free(p);
}

/* A shell's cwd is reached as the peer: not beneath a directory it may
 * not search. */
START_TEST(shell_cwd_is_reached_as_the_peer)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, NULL);
	ws_mkdir(&d, "locked", 0700);
	ws_mkdir(&d, "locked/inner", 0755);
	free(tcd_write_ws(&d, "locked/inner/file.txt", "hidden\n", 7, 0644));
	free(tcd_write_ws(&d, "open/file.txt", "shown\n", 6, 0644));
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	const struct json *r = tcc_call(n, "shell", "{\"command\":\"cat file.txt\",\"cwd\":\"locked/inner\"}");
	tc_assert_kind(r, "permission_denied");
	r = tcc_call(n, "shell", "{\"command\":\"cat file.txt\",\"cwd\":\"open\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "shown\n");
	tcc_close(n);
	/* The daemon's own user reaches it. */
	struct tcc *c = tcc_connect(&d);
	r = tcc_call(c, "shell", "{\"command\":\"cat file.txt\",\"cwd\":\"locked/inner\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "hidden\n");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* search and glob over a tree with a directory and a file the peer may
 * not read: what it may read is found, and the result says how much it
 * could not read (text and structuredContent "unreadable"), not a
 * silence the model would take for "not there". */
START_TEST(search_and_glob_say_what_they_could_not_read)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, NULL);
	ws_mkdir(&d, "locked", 0700);
	free(tcd_write_ws(&d, "locked/key.txt", "needle in private\n", 18, 0644));
	free(tcd_write_ws(&d, "secret.txt", "needle in secret\n", 17, 0600));
	free(tcd_write_ws(&d, "open.txt", "needle in open\n", 15, 0644));
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	const struct json *r = tcc_call(n, "search", "{\"pattern\":\"needle\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.matches.0.path"), "open.txt");
	ck_assert_ptr_null(tj(r, "result.structuredContent.matches.1"));
	ck_assert_int_eq(tj_int(r, "result.structuredContent.unreadable"), 2);
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"),
			     "[1 directory and 1 file could not be read (no permission, or removed meanwhile): not "
			     "searched]"),
		      "%s", tcc_raw(n, r));
	r = tcc_call(n, "glob", "{\"pattern\":\"**/*.txt\"}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.unreadable"), 1);
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "[1 directory could not be read"), "%s",
		      tcc_raw(n, r));
	tcc_close(n);
	/* The daemon's own user reads it all: nothing said. */
	struct tcc *c = tcc_connect(&d);
	r = tcc_call(c, "search", "{\"pattern\":\"needle\"}");
	tc_assert_ok(r);
	ck_assert_ptr_null(tj(r, "result.structuredContent.unreadable"));
	ck_assert_ptr_nonnull(tj(r, "result.structuredContent.matches.2"));
	ck_assert_ptr_null(strstr(tj_str(r, "result.content.0.text"), "could not be read"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* list_dir lists a directory the peer may not read without its entries,
 * and says so: an empty-looking directory is not taken for an empty one. */
START_TEST(list_dir_says_what_it_could_not_read)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, NULL);
	ws_mkdir(&d, "locked", 0700);
	free(tcd_write_ws(&d, "locked/key.txt", "private\n", 8, 0644));
	ws_mkdir(&d, "open", 0755);
	free(tcd_write_ws(&d, "open/a.txt", "open\n", 5, 0644));
	ws_mkdir(&d, "sealed", 0755);
	free(tcd_write_ws(&d, "sealed/b.txt", "sealed\n", 7, 0644));
	char *sealed = tcd_ws_path(&d, "sealed");
	ck_assert(chmod(sealed, 0) == 0);
	free(sealed);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	const struct json *r = tcc_call(n, "list_dir", "{\"recursive\":true}");
	tc_assert_ok(r);
	const char *text = tj_str(r, "result.content.0.text");
	ck_assert_str_eq(tj_str(r, "result.structuredContent.entries.0.name"), "locked");
	ck_assert_str_eq(tj_str(r, "result.structuredContent.entries.1.name"), "open");
	ck_assert_str_eq(tj_str(r, "result.structuredContent.entries.2.name"), "open/a.txt");
	ck_assert_str_eq(tj_str(r, "result.structuredContent.entries.3.name"), "sealed");
	ck_assert_ptr_null(tj(r, "result.structuredContent.entries.4"));
	ck_assert_int_eq(tj_int(r, "result.structuredContent.unreadable"), 2);
	ck_assert_msg(strstr(text, "\n[2 directories could not be read (no permission, or removed meanwhile): what "
				   "they hold is not listed]\n"),
		      "%s", tcc_raw(n, r));
	/* Not recursive: nothing below is read, nothing is said. */
	r = tcc_call(n, "list_dir", "{}");
	tc_assert_ok(r);
	ck_assert_ptr_null(tj(r, "result.structuredContent.unreadable"));
	ck_assert_ptr_null(strstr(tj_str(r, "result.content.0.text"), "could not be read"));
	tcc_close(n);
	/* The daemon's own user reads it all: nothing said. */
	struct tcc *c = tcc_connect(&d);
	r = tcc_call(c, "list_dir", "{\"recursive\":true}");
	tc_assert_ok(r);
	ck_assert_ptr_null(tj(r, "result.structuredContent.unreadable"));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.entries.1.name"), "locked/key.txt");
	ck_assert_ptr_null(strstr(tj_str(r, "result.content.0.text"), "could not be read"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* The params of the next event (the subscription names one type), NULL on
 * timeout. */
static const struct json *next_event(struct tcc *c)
{
	const struct json *n = tcc_wait_notification(c, "notifications/event", 5000);
	return n ? json_get(n, "params") : NULL;
}

/* A confirmation request shows the peer what its call would change as the
 * peer sees it: no diff of a file it may not read, no target of a symlink
 * in a directory it may not search. */
START_TEST(confirmation_shows_only_what_the_peer_may_see)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	tcd_start(&d, "{\"socket_mode\":\"0666\",\"confirmation\":{\"default\":{\"write\":\"prompt\"}}}");
	ck_assert(chmod(d.dir, 0711) == 0);
	ck_assert(chmod(d.ws, 0777) == 0);
	free(tcd_write_ws(&d, "secret.txt", "root only\n", 10, 0600));
	free(tcd_write_ws(&d, "open.txt", "anyone\n", 7, 0644));
	char *priv = tcd_ws_path(&d, "private");
	ck_assert(mkdir(priv, 0700) == 0);
	char *hidden = xasprintf("%s/hidden-name", priv);
	ck_assert(symlink("../open.txt", hidden) == 0);
	free(hidden);
	free(priv);

	struct tcc *watch = tcc_connect_as(&d, NOBODY, NOBODY);
	tc_assert_ok(tcc_request(watch, "events/subscribe", "{\"types\":[\"tool.confirmation_requested\"]}"));
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);

	/* What it may read is shown. */
	tcc_send_request(n, "tools/call", "{\"name\":\"write_file\",\"arguments\":{\"path\":\"open.txt\",\"content\":\"x\\n\"}}");
	const struct json *ev = next_event(watch);
	ck_assert_ptr_nonnull(ev);
	ck_assert_ptr_nonnull(strstr(tj_str(ev, "diff"), "-anyone"));

	/* What it may not read is not. */
	tcc_send_request(n, "tools/call", "{\"name\":\"write_file\",\"arguments\":{\"path\":\"secret.txt\",\"content\":\"x\\n\"}}");
	ev = next_event(watch);
	ck_assert_ptr_nonnull(ev);
	const char *diff = tj_str(ev, "diff");
	ck_assert_msg(!diff || !strstr(diff, "root only"), "the peer was shown a file it may not read: %s", diff);
	tcc_send_request(n, "tools/call",
			 "{\"name\":\"edit_file\",\"arguments\":{\"path\":\"secret.txt\",\"edits\":[{\"old\":\"root\",\"new\":\"x\"}]}}");
	ev = next_event(watch);
	ck_assert_ptr_nonnull(ev);
	diff = tj_str(ev, "diff");
	ck_assert_msg(!diff || !strstr(diff, "only"), "the peer was shown a file it may not read: %s", diff);

	/* Beneath a directory it may not search, the lookup made before
	 * anyone is asked is its own: the call is refused as the kernel
	 * refuses it, nobody is asked, and whether a name there is a link
	 * leading out of the workspace is not told. */
	char *out = tcd_ws_path(&d, "private/out");
	ck_assert(symlink("/etc", out) == 0);
	free(out);
	struct tcc *n2 = tcc_connect_as(&d, NOBODY, NOBODY);
	const char *const hidden_paths[] = { "private/hidden-name", "private/out/x" };
	for (size_t i = 0; i < 2; i++) {
		char *params = xasprintf("{\"name\":\"write_file\",\"arguments\":{\"path\":\"%s\",\"content\":\"x\"}}",
					 hidden_paths[i]);
		const struct json *r = tcc_request(n2, "tools/call", params);
		free(params);
		ck_assert_pstr_eq(tj_str(r, "error.data.kind"), "permission_denied");
		ck_assert_msg(!strstr(tj_str(r, "error.message"), "escapes"),
			      "the peer learnt where a link it may not reach leads: %s", tj_str(r, "error.message"));
	}
	tcc_close(n2);

	tcc_close(n);
	tcc_close(watch);
	tcd_finish(&d);
}
END_TEST

/* Puts a file capability (cap_net_raw+ep) on path; false where the file
 * system takes no security.* attributes. */
static bool set_file_cap(const char *path)
{
	struct vfs_cap_data cap = {
		.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE,
		.data = { { .permitted = 1u << CAP_NET_RAW } },
	};
	return setxattr(path, "security.capability", &cap, XATTR_CAPS_SZ_2, 0) == 0;
}

START_TEST(writes_never_create_privilege)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to make setuid-root files");
	struct tcd d;
	start_shared(&d, NULL);
	char *suid = tcd_write_ws(&d, "suid", "#!/bin/sh\n", 10, 0644);
	ck_assert(chmod(suid, 04755) == 0);
	char *sgid = tcd_write_ws(&d, "sgid", "#!/bin/sh\n", 10, 0644);
	ck_assert(chmod(sgid, 02755) == 0);
	char *capped = tcd_write_ws(&d, "capped", "#!/bin/sh\n", 10, 0755);
	bool have_caps = set_file_cap(capped);

	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"suid\",\"content\":\"#!/bin/sh\\nid\\n\"}"));
	struct stat st = stat_ws(&d, "suid");
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	ck_assert_uint_eq(st.st_uid, 0);
	tc_assert_ok(tcc_call(c, "patch_file", "{\"path\":\"sgid\",\"old\":\"sh\",\"new\":\"bash\"}"));
	ck_assert_uint_eq(stat_ws(&d, "sgid").st_mode & 07777, 0755);
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"capped\",\"content\":\"x\"}"));
	ck_assert(getxattr(capped, "security.capability", NULL, 0) < 0 && errno == ENODATA);
	ck_assert_uint_eq(stat_ws(&d, "capped").st_mode & 07777, 0755);
	tcc_close(c);

	/* The peer's own setuid file, rewritten by the peer: the bit goes too. */
	char *own = tcd_write_ws(&d, "own", "x\n", 2, 0644);
	ck_assert(chown(own, NOBODY, NOBODY) == 0 && chmod(own, 04755) == 0);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	tc_assert_ok(tcc_call(n, "write_file", "{\"path\":\"own\",\"content\":\"y\\n\"}"));
	st = stat_ws(&d, "own");
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	ck_assert_uint_eq(st.st_uid, NOBODY);
	tcc_close(n);
	if (!have_caps)
		tc_skip_note("no security.capability on this file system: the capability part was not run");
	free(suid);
	free(sgid);
	free(capped);
	free(own);
	tcd_finish(&d);
}
END_TEST

/* Makes n empty files in the workspace directory rel. */
static void make_many(struct tcd *d, const char *rel, unsigned n)
{
	char *dir = tcd_ws_path(d, rel);
	ck_assert(mkdir(dir, 0755) == 0);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	for (unsigned i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "entry-%07u", i);
		int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	close(dfd);
	free(dir);
}

/* Writes a file of mb MiB of text lines, with "NEEDLE" once near its end. */
static void make_big(struct tcd *d, const char *rel, unsigned mb)
{
	char *p = tcd_ws_path(d, rel);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	static char line[64];
	memset(line, 'a', sizeof(line) - 1);
	line[sizeof(line) - 2] = '\n';
	size_t lines = ((size_t)mb << 20) / (sizeof(line) - 1);
	for (size_t i = 0; i < lines; i++)
		fputs(i == lines - 10 ? "NEEDLE\n" : line, f);
	ck_assert_int_eq(fclose(f), 0);
	free(p);
}

/*
 * A big listing and a big patch run off the loop: while they run, the
 * daemon goes on answering another client. What shows it is not how fast
 * the answers come (on a shared, loaded machine any one of them may wait
 * hundreds of ms for a CPU) but that they come at all meanwhile: every
 * admin/stats answer that still counts a call running was given while that
 * call's file work went on. Work done on the loop would be finished before
 * the loop answered anyone, so no answer would see it running (tc-bench
 * measures the latency itself).
 */
START_TEST(file_work_does_not_stall_other_clients)
{
	struct tcd d;
	tcd_start(&d, "{" CFG_AUTO "}");
	make_many(&d, "big", 50000);
	make_big(&d, "huge.txt", 20);
	struct tcc *a = tcc_connect(&d), *b = tcc_connect(&d), *p = tcc_connect(&d);

	const char *ida = tcc_fmt(a, "%lld", (long long)tcc_send_request(a, "tools/call",
		"{\"name\":\"list_dir\",\"arguments\":{\"path\":\"big\",\"max_entries\":50000}}"));
	const char *idb = tcc_fmt(b, "%lld", (long long)tcc_send_request(b, "tools/call",
		"{\"name\":\"patch_file\",\"arguments\":{\"path\":\"huge.txt\",\"old\":\"NEEDLE\",\"new\":\"FOUND\"}}"));
	unsigned answers = 0, while_running = 0;
	const struct json *ra = NULL, *rb = NULL;
	uint64_t end = tc_now_ms() + tc_wait_scaled(60000);
	while ((!ra || !rb) && tc_now_ms() < end) {
		const struct json *st = tcc_request(p, "admin/stats", NULL);
		answers++;
		if (tj_int(st, "result.running") > 0)
			while_running++;
		if (!ra && (ra = tcc_wait_id(a, ida, 0)))
			tc_assert_ok(ra);
		if (!rb && (rb = tcc_wait_id(b, idb, 0)))
			tc_assert_ok(rb);
	}
	ck_assert_msg(ra && rb, "the list and the patch did not finish");
	ck_assert_int_eq(tj_len(ra, "result.structuredContent.entries"), 50000);
	/* A few answers, not one: work on the loop whose end were only
	 * counted an iteration late would show in one or two. */
	ck_assert_msg(while_running >= 5, "%u of %u admin/stats answers came while the file work ran",
		      while_running, answers);
	tcc_close(a);
	tcc_close(b);
	tcc_close(p);
	tcd_finish(&d);
}
END_TEST

START_TEST(file_work_times_out)
{
	struct tcd d;
	tcd_start(&d, "{" CFG_AUTO ",\"tools\":{\"list_dir\":{\"timeout_ms\":30}}}");
	make_many(&d, "big", 50000);
	struct tcc *c = tcc_connect(&d);
	uint64_t t0 = tc_now_ms();
	const struct json *r = tcc_call(c, "list_dir", "{\"path\":\"big\",\"recursive\":true,\"max_entries\":100000}");
	tc_assert_kind(r, "timeout");
	ck_assert_uint_lt(tc_now_ms() - t0, 5000);
	/* The pool is free again: a small call runs. */
	free(tcd_write_ws(&d, "small.txt", "x", 1, 0644));
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"small.txt\"}"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

static Suite *identity_suite(void)
{
	Suite *s = suite_create("identity");
	TCase *tc = tcase_create("identity");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, peer_is_refused_what_the_kernel_refuses_it);
	tcase_add_test(tc, run_as_daemon_keeps_the_daemons_rights);
	tcase_add_test(tc, confirmation_shows_only_what_the_peer_may_see);
	tcase_add_test(tc, tool_run_as_overrides_the_config);
	tcase_add_test(tc, shell_cwd_is_reached_as_the_peer);
	tcase_add_test(tc, search_and_glob_say_what_they_could_not_read);
	tcase_add_test(tc, list_dir_says_what_it_could_not_read);
	tcase_add_test(tc, writes_never_create_privilege);
	tcase_add_test(tc, file_work_does_not_stall_other_clients);
	tcase_add_test(tc, file_work_times_out);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(identity_suite());
}
