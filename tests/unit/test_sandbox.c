/* SPDX-License-Identifier: MIT */
/*
 * The sandbox of spawned children, through the shell and command tools on
 * a real libev loop: the profile builder and what it reports, the file
 * system (deny_read, writable workspace and TMPDIR, protected paths), the
 * network, identity, limits, cleanup of escaped processes by cgroup and by
 * subreaper, telling a sandboxed peer of the socket, the options rule of
 * command tools, and each degradation path, emulated by taking the system
 * call away with a seccomp filter.
 *
 * Long because each case needs the same real loop and kernel probe, and
 * one suite per module is the tree's rule.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <linux/fs.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sched.h>
#include <unistd.h>

#include "lib/child/child.h"
#include "lib/files/identity.h"
#include "lib/base/loop.h"
#include "lib/sandbox/sandbox.h"
#include "lib/sandbox/sandbox_internal.h"
#include "lib/tool.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "proto/json.h"
#include "tools/command.h"
#include "tools/tools.h"
#include "tests/unit/check_main.h"
#include "tests/unit/deny_syscall.h"

static char tmpdir[PATH_MAX];
static char wsdir[PATH_MAX];
static char home[PATH_MAX];
static struct workspace *ws;
static struct ev_loop *ev;
static struct tc_loop *loop;
static struct tool *shell;
static struct tool_env env;
static struct sandbox_config cfg;

static gid_t nobody_groups[] = { 65534 };
static const struct identity nobody = {
	.uid = 65534, .gid = 65534, .groups = nobody_groups, .n_groups = 1, .home = (char *)"/nonexistent",
	.change = true,
};

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void setup(void)
{
	strcpy(tmpdir, "/tmp/tc-sandbox-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(chmod(tmpdir, 0755), 0);
	snprintf(wsdir, sizeof(wsdir), "%s/ws", tmpdir);
	snprintf(home, sizeof(home), "%s/home", tmpdir);
	ck_assert_int_eq(mkdir(wsdir, 0777), 0);
	ck_assert_int_eq(chmod(wsdir, 0777), 0);
	ck_assert_int_eq(mkdir(home, 0755), 0);
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/.ssh", home);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/.ssh/id_rsa", home);
	write_file(path, "SECRET KEY\n", 0644);
	snprintf(path, sizeof(path), "%s/notes", home);
	write_file(path, "plain notes\n", 0644);
	setenv("HOME", home, 1);

	ck_assert_int_eq(ws_open(wsdir, &ws), 0);
	ev = ev_loop_new(0);
	loop = tc_loop_ev_new(ev);
	char *err = NULL;
	ck_assert_int_eq(tool_new(&tool_shell, tool_shell.name, tool_shell.description, tool_shell.input_schema,
				  NULL, &shell, &err), 0);
	sandbox_config_init(&cfg);
	env = (struct tool_env){ .sandbox = &cfg };
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void teardown(void)
{
	tool_unref(shell);
	tc_loop_ev_free(loop);
	ev_loop_destroy(ev);
	ws_unref(ws);
	sandbox_config_clear(&cfg);
	sandbox_shutdown();
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* --- running calls ------------------------------------------------------- */

struct run {
	struct tool_call c;
	struct json_doc *args;
	struct json_doc *sc;
	bool finished;
};

static void on_finish(struct tool_call *c)
{
	((struct run *)c->owner)->finished = true;
}

static void on_deadline(void *arg)
{
	*(bool *)arg = true;
}

/* Runs one call of tool t to its end (20 s at most). */
static void run_call(struct run *run, struct tool *t, const char *args, const struct identity *peer)
{
	struct json_err err;
	memset(run, 0, sizeof(*run));
	ck_assert_msg(json_parse(args, strlen(args), 0, 0, &run->args, &err) == 0, "args: %s", err.msg);
	run->c = (struct tool_call){
		.tool = t, .args = json_doc_root(run->args), .ws = ws, .loop = loop, .env = &env,
		.call_id = "test", .ident = peer, .on_finish = on_finish, .owner = run,
	};
	if (t->def->exec(&run->c) == TOOL_DONE)
		run->finished = true;
	bool expired = false;
	struct tc_timer *timer = tc_timer_new(loop, on_deadline, &expired);
	tc_timer_start(timer, 20000);
	while (!run->finished) {
		ck_assert_msg(!expired, "the call is still running after 20 s");
		ev_run(ev, EVRUN_ONCE);
	}
	tc_timer_free(timer);
	if (run->c.structured) {
		ck_assert_msg(json_parse(run->c.structured, strlen(run->c.structured), 0, 0, &run->sc, &err) == 0,
			      "structuredContent: %s", run->c.structured);
	}
}

static void run_done(struct run *run)
{
	tool_call_clear(&run->c);
	json_doc_unref(run->args);
	json_doc_unref(run->sc);
}

static const char *sc_str(struct run *run, const char *key)
{
	ck_assert_ptr_nonnull(run->sc);
	return json_str(json_get(json_doc_root(run->sc), key));
}

static int64_t exit_code(struct run *run)
{
	int64_t v = -1000;
	ck_assert_ptr_nonnull(run->sc);
	(void)json_get_int(json_get(json_doc_root(run->sc), "exit_code"), &v);
	return v;
}

/* Runs a shell command as the daemon (peer NULL) or as peer. */
static void sh(struct run *run, const char *command, const struct identity *peer)
{
	struct buf args = {0};
	struct jgen *g = jgen_new(&args);
	jgen_obj_open(g);
	jgen_key(g, "command");
	jgen_str(g, command);
	jgen_obj_close(g);
	jgen_free(g);
	run_call(run, shell, buf_head(&args), peer);
	buf_free(&args);
}

/* Whether the "enforced" list of the result names what. */
static bool enforced(struct run *run, const char *list, const char *what)
{
	const struct json *sb = json_get(json_doc_root(run->sc), "sandbox");
	const struct json *e = json_get(sb, list);
	for (size_t i = 0; e && e->type == JSON_ARRAY && i < e->u.arr.n; i++)
		if (str_eq(json_str(e->u.arr.items[i]), what))
			return true;
	return false;
}

/* Whether this kernel can sandbox: Landlock and seccomp. */
static bool kernel_sandboxes(void)
{
	const struct sandbox_features *f = sandbox_probe(NULL);
	return f->landlock_abi && f->seccomp;
}

/* Skip the running case (TC_SKIP: counted, the suite exits 77 when every
 * case skipped) when the kernel cannot sandbox, or when switching to
 * another uid is not allowed here. */
#define NEED_KERNEL(test)                                                                   \
	do {                                                                                \
		if (!kernel_sandboxes())                                                    \
			TC_SKIP("%s: this kernel has no Landlock or no seccomp", (test));   \
	} while (0)
#define NEED_ROOT(test)                                                                     \
	do {                                                                                \
		if (geteuid() != 0)                                                         \
			TC_SKIP("%s: switching to another uid needs root", (test));         \
	} while (0)

/* --- the profile builder -------------------------------------------------- */

/* A denied path inside a writable workspace (a home directory's ~/.ssh):
 * with a mount namespace to come the child covers it and the workspace is
 * writable whole; without, the workspace's top takes no new entries, which
 * the denial note then says. */
START_TEST(denied_path_in_a_workspace)
{
	const struct sandbox_features *f = sandbox_probe(NULL);
	if (!f->landlock_abi)
		TC_SKIP("no Landlock here");
	char tmpl[] = "/tmp/tc-sbx-root-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	char *root = realpath(tmpl, NULL);
	char *ssh = xasprintf("%s/.ssh", root);
	ck_assert_int_eq(mkdir(ssh, 0700), 0);
	const char *wss[] = { root, NULL };
	const char *deny[] = { ssh, NULL };
	struct sandbox_req req = { .profile = SANDBOX_WORKSPACE_WRITE, .workspaces = wss, .deny_read = deny };
	const struct ll_rules *r = NULL;
	char *msg = NULL;
	ck_assert_int_eq(ll_rules_get(&req, f->landlock_abi, NULL, true, &r, &msg), 0);
	const char *const *covers = ll_rules_covers(r);
	ck_assert_ptr_nonnull(covers);
	ck_assert_str_eq(covers[0], ssh);
	ck_assert_ptr_null(covers[1]);
	ck_assert(!ll_rules_split_writable(r));
	ck_assert_int_eq(ll_rules_get(&req, f->landlock_abi, NULL, false, &r, &msg), 0);
	ck_assert_ptr_null(ll_rules_covers(r));
	ck_assert(ll_rules_split_writable(r));
	sandbox_cache_clear();
	rmdir(ssh);
	rmdir(root);
	free(ssh);
	free(root);
}
END_TEST

/* Makes n empty files named e0... in dir. */
static void fill_dir(const char *dir, int n)
{
	for (int i = 0; i < n; i++) {
		char *f = xasprintf("%s/e%d", dir, i);
		int fd = open(f, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
		free(f);
	}
}

/* Removes what fill_dir() made, then dir. */
static void unfill_dir(const char *dir, int n)
{
	for (int i = 0; i < n; i++) {
		char *e = xasprintf("%s/e%d", dir, i);
		unlink(e);
		free(e);
	}
	ck_assert_int_eq(rmdir(dir), 0);
}

/* What the sandbox warned of (sandbox_program_set_log). */
static char *warned;

static void note_warning(const char *message)
{
	free(warned);
	warned = xstrdup(message);
}

/*
 * A denied path that does not exist, in a directory whose entries would
 * take more rules than the bound (a home of thousands of files, a /home of
 * thousands of users): every sandboxed call was refused. Now that
 * directory is not split: its entries on the way to a denied path get
 * rules, split in turn, the others none (unreadable, the safe side), and
 * the daemon says so once.
 */
START_TEST(crowded_directory_not_split)
{
	const struct sandbox_features *f = sandbox_probe(NULL);
	if (!f->landlock_abi)
		TC_SKIP("no Landlock here");
	enum { ENTRIES = 4200 };
	char tmpl[] = "/var/tmp/tc-sbx-huge-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	char *dir = realpath(tmpl, NULL);
	fill_dir(dir, ENTRIES);
	char *sub = xasprintf("%s/sub", dir), *near = xasprintf("%s/sub/near", dir);
	char *gone = xasprintf("%s/.aws", dir), *deep = xasprintf("%s/sub/.ssh", dir);
	char *entry = xasprintf("%s/e7", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	write_file(near, "x", 0644);
	const char *deny[] = { gone, deep, NULL };
	struct sandbox_req req = { .profile = SANDBOX_READ_ONLY, .deny_read = deny };
	const struct ll_rules *r = NULL;
	char *msg = NULL;
	sandbox_program_set_log(note_warning);
	ck_assert_msg(ll_rules_get(&req, f->landlock_abi, NULL, LL_COVER_DENY, &r, &msg) == 0, "%s", msg);
	ck_assert_msg(ll_rules_count(r) < 200, "%zu rules", ll_rules_count(r));
	ck_assert_uint_ne(ll_rules_allowed(r, dir) & LL_FS_READ_DIR, 0);
	ck_assert_uint_eq(ll_rules_allowed(r, entry) & LL_FS_READ_FILE, 0);
	ck_assert_uint_eq(ll_rules_allowed(r, gone) & LL_FS_READ_FILE, 0);
	ck_assert_uint_ne(ll_rules_allowed(r, near) & LL_FS_READ_FILE, 0);
	ck_assert_uint_eq(ll_rules_allowed(r, deep) & LL_FS_READ_FILE, 0);
	ck_assert_ptr_nonnull(warned);
	ck_assert_msg(strstr(warned, dir), "%s", warned);
	/* Said once, not at each plan. */
	free(warned);
	warned = NULL;
	ck_assert_int_eq(ll_rules_get(&req, f->landlock_abi, NULL, LL_COVER_NONE, &r, &msg), 0);
	ck_assert_ptr_null(warned);
	sandbox_program_set_log(NULL);
	unlink(near);
	rmdir(sub);
	unfill_dir(dir, ENTRIES);
	free(entry);
	free(deep);
	free(gone);
	free(near);
	free(sub);
	free(dir);
}
END_TEST

/*
 * Denied paths in a crowded directory (a config in /tmp): where the
 * child's mount namespace covers them (LL_COVER_DENY), the rules are a
 * handful whatever the siblings; without it, or for a denied path that
 * does not exist (a mount needs a place), each sibling is a rule. A
 * denied path made since the rules were is covered the next time, and
 * one that holds a path the child is granted is not covered (the mount
 * would hide it).
 */
START_TEST(denied_paths_covered_cost_no_rules)
{
	const struct sandbox_features *f = sandbox_probe(NULL);
	if (!f->landlock_abi)
		TC_SKIP("no Landlock here");
	/* Beside /var/tmp's few entries rather than /tmp's many: the split
	 * must stay below the rules' bound. */
	enum { SIBLINGS = 2000 };
	char tmpl[] = "/var/tmp/tc-sbx-crowd-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	char *dir = realpath(tmpl, NULL);
	fill_dir(dir, SIBLINGS);
	char *conf = xasprintf("%s/toolcalld.conf", dir), *tools = xasprintf("%s/tools", dir);
	char *aws = xasprintf("%s/.aws", dir);
	write_file(conf, "{}", 0600);
	ck_assert_int_eq(mkdir(tools, 0700), 0);
	const char *deny[] = { conf, tools, NULL };
	struct sandbox_req req = { .profile = SANDBOX_READ_ONLY, .deny_read = deny };
	const struct ll_rules *r = NULL;
	char *msg = NULL;
	ck_assert_int_eq(ll_rules_get(&req, f->landlock_abi, NULL, LL_COVER_DENY, &r, &msg), 0);
	ck_assert_msg(ll_rules_count(r) < 8, "%zu rules", ll_rules_count(r));
	const char *const *covers = ll_rules_covers(r);
	ck_assert_ptr_nonnull(covers);
	ck_assert_str_eq(covers[0], conf);
	ck_assert_str_eq(covers[1], tools);
	ck_assert_ptr_null(covers[2]);
	/* Without a namespace of the child's own: split around, as before. */
	ck_assert_int_eq(ll_rules_get(&req, f->landlock_abi, NULL, LL_COVER_NONE, &r, &msg), 0);
	ck_assert_uint_ge(ll_rules_count(r), SIBLINGS);
	ck_assert_ptr_null(ll_rules_covers(r));
	ck_assert_uint_eq(ll_rules_allowed(r, conf) & LL_FS_READ_FILE, 0);

	/* One that does not exist: Landlock keeps it unreadable when made. */
	const char *deny2[] = { conf, aws, NULL };
	req.deny_read = deny2;
	ck_assert_int_eq(ll_rules_get(&req, f->landlock_abi, NULL, LL_COVER_DENY, &r, &msg), 0);
	ck_assert_uint_ge(ll_rules_count(r), SIBLINGS);
	ck_assert_uint_eq(ll_rules_allowed(r, aws) & LL_FS_READ_FILE, 0);
	covers = ll_rules_covers(r);
	ck_assert(covers && covers[0] && !covers[1]);
	ck_assert_str_eq(covers[0], conf);
	/* Made since: the rules are made again, and it is covered. */
	ck_assert_int_eq(mkdir(aws, 0700), 0);
	ck_assert_int_eq(ll_rules_get(&req, f->landlock_abi, NULL, LL_COVER_DENY, &r, &msg), 0);
	ck_assert_msg(ll_rules_count(r) < 8, "%zu rules", ll_rules_count(r));
	covers = ll_rules_covers(r);
	ck_assert(covers && covers[0] && covers[1] && !covers[2]);
	ck_assert_str_eq(covers[1], aws);
	/* Gone again: split around again. */
	ck_assert_int_eq(rmdir(aws), 0);
	ck_assert_int_eq(ll_rules_get(&req, f->landlock_abi, NULL, LL_COVER_DENY, &r, &msg), 0);
	ck_assert_uint_ge(ll_rules_count(r), SIBLINGS);

	/* A denied directory that holds the workspace, or lies beneath a
	 * write_extra path, is not covered. */
	char *inner = xasprintf("%s/ws", tools);
	ck_assert_int_eq(mkdir(inner, 0700), 0);
	const char *wss[] = { inner, NULL }, *deny3[] = { tools, NULL }, *extra[] = { dir, NULL };
	struct sandbox_req req3 = { .profile = SANDBOX_WORKSPACE_WRITE, .workspaces = wss, .deny_read = deny3 };
	ck_assert_int_eq(ll_rules_get(&req3, f->landlock_abi, NULL, LL_COVER_DENY, &r, &msg), 0);
	ck_assert_ptr_null(ll_rules_covers(r));
	ck_assert_uint_ge(ll_rules_count(r), SIBLINGS);
	ck_assert_uint_ne(ll_rules_allowed(r, inner) & LL_FS_MAKE_REG, 0);
	const char *deny4[] = { conf, NULL };
	struct sandbox_req req4 = { .profile = SANDBOX_WORKSPACE_WRITE, .workspaces = wss, .write_extra = extra,
				    .deny_read = deny4 };
	ck_assert_int_eq(ll_rules_get(&req4, f->landlock_abi, NULL, LL_COVER_DENY, &r, &msg), 0);
	ck_assert_ptr_null(ll_rules_covers(r));
	ck_assert_uint_eq(ll_rules_allowed(r, conf) & LL_FS_READ_FILE, 0);
	sandbox_cache_clear();
	rmdir(inner);
	rmdir(tools);
	unlink(conf);
	unfill_dir(dir, SIBLINGS);
	free(inner), free(aws), free(conf), free(tools), free(dir);
}
END_TEST

/* protect holds in nested repositories and in submodules' git
 * directories, whatever the list names. */
START_TEST(protected_nested_repositories)
{
	static const char *const protect[] = { ".git/hooks", ".git/config", NULL };
	ck_assert_str_eq(sandbox_protected(protect, "vendor/lib/.git/hooks/pre-commit", false, false), ".git/hooks");
	ck_assert_str_eq(sandbox_protected(protect, ".git/modules/lib/config", false, false), ".git/config");
	ck_assert_str_eq(sandbox_protected(protect, "a/.git/modules/b/hooks", false, true), ".git/hooks");
	ck_assert_str_eq(sandbox_protected(protect, ".git/modules/lib", true, false), ".git/hooks");
	ck_assert_ptr_null(sandbox_protected(protect, ".git/modules/lib/objects/x", false, false));
	ck_assert_ptr_null(sandbox_protected(protect, "a/.gitx/hooks", false, false));
	ck_assert_ptr_null(sandbox_protected(protect, "a/b.git/config", false, false));
}
END_TEST

/* A namespace made ahead serves only a plan of the same key: the
 * identity, every mount of the plan (an empty writable list, all
 * read-only, is not the same as none), the inodes of its paths; the
 * TMPDIR is not in it. */
START_TEST(namespace_key)
{
	const char *ws_a[] = { "/tmp", NULL }, *ws_b[] = { "/var/tmp", NULL }, *none[] = { NULL };
	struct sandbox_child c = { .writable = ws_a, .tmp_parent = "/t/c", .tmp_own = "/t/c/one", .mntns_fd = -1 };
	char *k1 = nspool_key(&c, 1000, 1000, NULL);
	c.tmp_own = "/t/c/two";
	char *k2 = nspool_key(&c, 1000, 1000, NULL);
	ck_assert(nspool_key_eq(k1, k2));
	char *k3 = nspool_key(&c, 1001, 1000, NULL);
	ck_assert(!nspool_key_eq(k1, k3));
	c.writable = ws_b;
	char *k4 = nspool_key(&c, 1000, 1000, NULL);
	ck_assert(!nspool_key_eq(k1, k4));
	c.writable = none;
	char *k5 = nspool_key(&c, 1000, 1000, NULL);
	c.writable = NULL;
	char *k6 = nspool_key(&c, 1000, 1000, NULL);
	ck_assert(!nspool_key_eq(k5, k6));
	c.writable = ws_a;
	c.tmp_opts = "size=1m";
	char *k7 = nspool_key(&c, 1000, 1000, NULL);
	ck_assert(!nspool_key_eq(k1, k7));
	/* The caller's lstat of the hidden directories stands for the key's
	 * own; another inode there is another key. */
	const char *hidden[] = { "/tmp", "/", NULL };
	struct stat st[2];
	ck_assert_int_eq(lstat(hidden[0], &st[0]), 0);
	ck_assert_int_eq(lstat(hidden[1], &st[1]), 0);
	c.hide_dirs = hidden;
	char *k8 = nspool_key(&c, 1000, 1000, NULL);
	char *k9 = nspool_key(&c, 1000, 1000, st);
	ck_assert(nspool_key_eq(k8, k9));
	st[1].st_ino++;
	char *k10 = nspool_key(&c, 1000, 1000, st);
	ck_assert(!nspool_key_eq(k8, k10));
	free(k1), free(k2), free(k3), free(k4), free(k5), free(k6), free(k7), free(k8), free(k9), free(k10);

	/* A covered path written to (an audit log) is still the one its
	 * cover stands on: the same key. Removed and made again (ext4 may
	 * give it the same inode), or gone, it is another. */
	char tmpl[] = "/var/tmp/tc-sbx-key-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	char *log = xasprintf("%s/audit.log", tmpl);
	write_file(log, "one\n", 0600);
	const char *covers[] = { log, NULL };
	struct sandbox_child cc = { .writable = ws_a, .covers = covers, .mntns_fd = -1 };
	char *c1 = nspool_key(&cc, 0, 0, NULL);
	usleep(20000);
	int fd = open(log, O_WRONLY | O_APPEND | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "two\n", 4), 4);
	close(fd);
	char *c2 = nspool_key(&cc, 0, 0, NULL);
	/* (Where the file system keeps neither a birth time nor generations,
	 * the change time tells, and a write makes another key.) */
	struct statx sx;
	int gen, gfd = open(log, O_RDONLY | O_CLOEXEC);
	bool birth = statx(AT_FDCWD, log, AT_SYMLINK_NOFOLLOW, STATX_BTIME, &sx) == 0 && (sx.stx_mask & STATX_BTIME);
	bool generations = gfd >= 0 && ioctl(gfd, FS_IOC_GETVERSION, &gen) == 0;
	close(gfd);
	if (birth || generations)
		ck_assert(nspool_key_eq(c1, c2));
	ck_assert_int_eq(unlink(log), 0);
	usleep(20000);
	write_file(log, "one\n", 0600);
	char *c3 = nspool_key(&cc, 0, 0, NULL);
	ck_assert(!nspool_key_eq(c2, c3));
	ck_assert_int_eq(unlink(log), 0);
	char *c4 = nspool_key(&cc, 0, 0, NULL);
	ck_assert(!nspool_key_eq(c3, c4));
	rmdir(tmpl);
	free(log), free(c1), free(c2), free(c3), free(c4);
}
END_TEST

START_TEST(features_line)
{
	const struct sandbox_features *f = sandbox_probe(NULL);
	char *line = sandbox_features_line(f);
	ck_assert_msg(strncmp(line, "sandbox: ", 9) == 0, "%s", line);
	ck_assert_ptr_nonnull(strstr(line, f->landlock_abi ? "landlock ABI " : "landlock: no"));
	ck_assert_ptr_nonnull(strstr(line, "cgroup v2 delegated: "));
	free(line);
}
END_TEST

/* The protected paths beneath .git: held where .git is a link to a
 * directory (followed, as git does), none planned where there is no .git
 * (an empty .git made and held whole) or where it is a file (a "gitdir:"
 * pointer, then held itself). */
START_TEST(protect_plan_git_kinds)
{
	NEED_KERNEL("protect_plan_git_kinds");
	const struct sandbox_features *f = sandbox_probe(NULL);
	if (!f->mountns) {
		printf("protect_plan_git_kinds: no mount namespace here, protect is not enforced\n");
		return;
	}
	char real[PATH_MAX + 16], hooks[PATH_MAX + 32], dot_git[PATH_MAX + 16];
	snprintf(real, sizeof(real), "%s/realgit", tmpdir);
	snprintf(hooks, sizeof(hooks), "%s/realgit/hooks", tmpdir);
	snprintf(dot_git, sizeof(dot_git), "%s/.git", wsdir);
	const char *wss[] = { wsdir, NULL };
	struct sandbox_req req;
	struct sandbox_run *run = NULL;
	char *msg = NULL;
	for (int kind = 0; kind < 3; kind++) {
		if (kind == 1) {
			ck_assert_int_eq(mkdir(real, 0755), 0);
			ck_assert_int_eq(mkdir(hooks, 0755), 0);
			ck_assert_int_eq(symlink(real, dot_git), 0);
		} else if (kind == 2) {
			ck_assert_int_eq(unlink(dot_git), 0);
			write_file(dot_git, "gitdir: /nowhere\n", 0644);
		}
		sandbox_req_init(&req, &cfg, "shell", false, NULL);
		req.workspaces = wss;
		ck_assert_int_eq(sandbox_prepare(&req, &run, &msg), 0);
		const char *const *ro = sandbox_run_child(run)->ro_binds;
		char want[PATH_MAX + 32];
		snprintf(want, sizeof(want), "%s/.git/hooks", wsdir);
		bool has_hooks = false, has_dot_git = false;
		for (; ro && *ro; ro++) {
			has_hooks |= strcmp(*ro, want) == 0;
			has_dot_git |= strcmp(*ro, dot_git) == 0;
			ck_assert_msg(kind == 1 || strncmp(*ro, dot_git, strlen(dot_git)) != 0 || strcmp(*ro, dot_git) == 0,
				      "kind %d: %s planned", kind, *ro);
		}
		ck_assert_msg(has_hooks == (kind == 1), "kind %d: .git/hooks %s", kind, has_hooks ? "held" : "not held");
		ck_assert_msg(has_dot_git == (kind != 1), "kind %d: .git %s", kind, has_dot_git ? "held" : "not held");
		sandbox_run_end(run);
		if (kind == 0) {
			struct stat st;
			ck_assert_int_eq(lstat(dot_git, &st), 0);
			ck_assert(S_ISDIR(st.st_mode));
			ck_assert_int_eq(rmdir(dot_git), 0);	/* empty */
		}
	}
	ck_assert_int_eq(unlink(dot_git), 0);
	ck_assert_int_eq(rmdir(hooks), 0);
	ck_assert_int_eq(rmdir(real), 0);
}
END_TEST

START_TEST(profile_builder)
{
	NEED_KERNEL("profile_builder");
	struct sandbox_req req;
	sandbox_req_init(&req, &cfg, "shell", false, NULL);
	ck_assert_int_eq(req.profile, SANDBOX_WORKSPACE_WRITE);
	ck_assert(!req.network);
	ck_assert_int_eq(req.limits.memory_mb, 4096);
	/* Side effect network: network on by default. */
	sandbox_req_init(&req, &cfg, "fetch", true, NULL);
	ck_assert(req.network);
	/* per_tool, then the tool file, win over the default. */
	cfg.per_tool = xcalloc(1, sizeof(*cfg.per_tool));
	cfg.per_tool[0] = (struct sandbox_per_tool){ .tool = xstrdup("shell"), .profile = SANDBOX_READ_ONLY,
						     .network = -1 };
	cfg.n_per_tool = 1;
	sandbox_req_init(&req, &cfg, "shell", false, NULL);
	ck_assert_int_eq(req.profile, SANDBOX_READ_ONLY);
	struct sandbox_tool t = SANDBOX_TOOL_UNSET;
	t.profile = SANDBOX_OFF;
	t.limits.memory_mb = 64;
	sandbox_req_init(&req, &cfg, "shell", false, &t);
	ck_assert_int_eq(req.profile, SANDBOX_OFF);
	ck_assert_int_eq(req.limits.memory_mb, 64);
	ck_assert_int_eq(req.limits.pids, 512);

	/* A prepared run says what it enforces. */
	const char *wss[] = { wsdir, NULL };
	sandbox_req_init(&req, &cfg, "x", false, NULL);
	req.workspaces = wss;
	struct sandbox_run *run = NULL;
	char *msg = NULL;
	ck_assert_int_eq(sandbox_prepare(&req, &run, &msg), 0);
	struct buf b = {0};
	sandbox_run_json(run, &b);
	ck_assert_msg(strstr(buf_head(&b), "\"profile\":\"workspace-write\",\"network\":false,\"enforced\":[") &&
		      strstr(buf_head(&b), "\"landlock\"") && strstr(buf_head(&b), "\"seccomp\""),
		      "%s", buf_head(&b));
	buf_free(&b);
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s", sandbox_run_tmpdir(run));
	struct stat st;
	ck_assert_int_eq(stat(tmp, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	char left[PATH_MAX + 16];
	snprintf(left, sizeof(left), "%s/left", tmp);
	write_file(left, "x", 0600);
	ck_assert_int_eq(chmod(tmp, 0777), 0);
	sandbox_run_end(run);
	/* What a call leaves in its TMPDIR goes with it, and so does the
	 * directory itself. */
	ck_assert_int_lt(stat(left, &st), 0);
	ck_assert_int_lt(stat(tmp, &st), 0);

	/* The next call gets a private, empty one again. */
	ck_assert_int_eq(sandbox_prepare(&req, &run, &msg), 0);
	ck_assert_int_eq(stat(sandbox_run_tmpdir(run), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	sandbox_run_end(run);
}
END_TEST

/* Whom children run as: the peer when run_as is "peer" and the daemon is
 * root, never with the daemon's groups; else the daemon, with $HOME. A
 * provider's run_as user is the same kind of identity. */
START_TEST(identity_for_children_decides)
{
	const char *env_home = getenv("HOME");
	struct identity id = { .uid = 65534, .gid = 65534 };
	identity_for_children(&id, false);
	ck_assert(!id.change);
	if (env_home)
		ck_assert_pstr_eq(id.home, env_home);
	identity_for_children(&id, true);
	ck_assert(id.change == (geteuid() == 0));
	if (id.change) {
		ck_assert_uint_eq(id.n_groups, 1);
		ck_assert_uint_eq(id.groups[0], 65534);
		struct passwd *pw = getpwuid(65534);
		ck_assert_pstr_eq(id.home, pw && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL);
	}
	struct identity copy;
	identity_copy(&copy, &id);
	ck_assert(copy.change == id.change && copy.n_groups == id.n_groups);
	ck_assert(!copy.home || (copy.home != id.home && strcmp(copy.home, id.home) == 0));
	identity_clear(&copy);
	identity_clear(&id);
	ck_assert_ptr_null(id.home);

	/* The daemon's own uid is never a change. */
	struct identity self = { .uid = geteuid(), .gid = getegid() };
	identity_for_children(&self, true);
	ck_assert(!self.change);
	identity_clear(&self);

	struct json_doc *doc;
	struct json_err jerr;
	char *err = NULL;
	ck_assert_int_eq(json_parse("\"daemon\"", 8, 0, 0, &doc, &jerr), 0);
	ck_assert_int_eq(sandbox_run_as_user_from_json(json_doc_root(doc), &id, &err), 0);
	ck_assert(!id.change);
	json_doc_unref(doc);
	ck_assert_int_eq(json_parse("\"no-such-user-tc\"", 17, 0, 0, &doc, &jerr), 0);
	ck_assert_int_eq(sandbox_run_as_user_from_json(json_doc_root(doc), &id, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no user 'no-such-user-tc'"));
	free(err);
	json_doc_unref(doc);
}
END_TEST

START_TEST(config_json)
{
	struct json_doc *doc;
	struct json_err jerr;
	const char *text = "{\"default\":\"read-only\",\"per_tool\":{\"shell\":\"off\"},\"network\":true,"
			   "\"deny_read\":[\"~/.x\"],\"write_extra\":[\"/var/tmp\"],\"protect\":[\".hg\"],"
			   "\"limits\":{\"memory_mb\":10,\"cpu_s\":null},\"require\":false}";
	ck_assert_int_eq(json_parse(text, strlen(text), 0, 0, &doc, &jerr), 0);
	char *err = NULL;
	ck_assert_int_eq(sandbox_config_from_json(json_doc_root(doc), &cfg, &err), 0);
	ck_assert_int_eq(cfg.profile, SANDBOX_READ_ONLY);
	ck_assert_int_eq(cfg.n_per_tool, 1);
	ck_assert(cfg.network && !cfg.require);
	ck_assert_str_eq(cfg.deny_read[0], "~/.x");
	ck_assert_int_eq(cfg.limits.memory_mb, 10);
	ck_assert_int_eq(cfg.limits.cpu_s, -1);
	json_doc_unref(doc);

	static const char *const bad[] = {
		"{\"default\":\"loose\"}", "{\"deny_read\":[\"relative\"]}", "{\"protect\":[\"../x\"]}",
		"{\"limits\":{\"memory_mb\":0}}", "{\"limits\":{\"swap\":1}}", "{\"nope\":1}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		ck_assert_int_eq(json_parse(bad[i], strlen(bad[i]), 0, 0, &doc, &jerr), 0);
		err = NULL;
		ck_assert_msg(sandbox_config_from_json(json_doc_root(doc), &cfg, &err) == -EINVAL, "%s", bad[i]);
		ck_assert_ptr_nonnull(err);
		free(err);
		json_doc_unref(doc);
	}
}
END_TEST

/* The script an interpreter runs is its first operand, and only that:
 * code given on the command line (sh -c, python -c/-m, node -e) names no
 * file, so a workspace file named like the command's text is not taken
 * for the program (it was checked and refused for its owner). */
START_TEST(interpreter_script_operand)
{
	static const struct {
		const char *argv[6];
		const char *script;
	} cases[] = {
		{ { "sh", "run.sh" }, "run.sh" },
		{ { "/bin/bash", "-x", "run.sh", "a" }, "run.sh" },
		{ { "/bin/sh", "-c", "true" }, NULL },
		{ { "bash", "-ec", "make" }, NULL },
		{ { "bash", "-o", "pipefail", "run.sh" }, "run.sh" },
		{ { "sh", "+x", "run.sh" }, "run.sh" },
		{ { "sh", "-s" }, NULL },
		{ { "python3", "tool.py" }, "tool.py" },
		{ { "python3", "-c", "print(1)" }, NULL },
		{ { "python3", "-m", "http.server" }, NULL },
		{ { "python3", "-Bc", "x" }, NULL },
		{ { "python3", "-W", "ignore", "tool.py" }, "tool.py" },
		{ { "python3", "-Wignore::DeprecationWarning", "tool.py" }, "tool.py" },
		{ { "python3", "-", "x" }, NULL },
		{ { "node", "-e", "1" }, NULL },
		{ { "node", "-r", "dotenv/config", "server.js" }, "server.js" },
		{ { "perl", "-e", "1" }, NULL },
		{ { "ruby", "--", "-odd.rb" }, "-odd.rb" },
		{ { "java", "-cp", "lib", "-jar", "app.jar" }, "app.jar" },
		{ { "/usr/bin/env", "x" }, NULL },
		{ { "git", "status" }, NULL },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const char *got = sandbox_argv_script(cases[i].argv);
		ck_assert_msg(cases[i].script ? got && strcmp(got, cases[i].script) == 0 : !got, "%s %s: %s",
			      cases[i].argv[0], cases[i].argv[1] ? cases[i].argv[1] : "", got ? got : "(none)");
	}
}
END_TEST

/* Parses text as JSON into *doc and returns its root. */
static const struct json *parse(const char *text, struct json_doc **doc)
{
	struct json_err jerr;
	ck_assert_msg(json_parse(text, strlen(text), 0, 0, doc, &jerr) == 0, "%s", text);
	return json_doc_root(*doc);
}

/* sandbox.network false | true | "proxy", globally, per tool and in a tool
 * file: "proxy" is neither no network nor the whole of it, and a run that
 * asks for it where no proxy is served is refused, never given the
 * network. */
START_TEST(network_proxy_setting)
{
	struct sandbox_config c;
	sandbox_config_init(&c);
	struct json_doc *doc;
	char *err = NULL;
	ck_assert_int_eq(sandbox_config_from_json(parse("{\"network\":\"proxy\",\"per_tool\":{\"git\":"
							"{\"network\":true},\"sh2\":{\"profile\":\"read-only\"}}}",
							&doc),
						  &c, &err), 0);
	json_doc_unref(doc);
	ck_assert_int_eq(c.network, SANDBOX_NET_PROXY);
	struct sandbox_req req;
	sandbox_req_init(&req, &c, "shell", false, NULL);
	ck_assert(req.net_proxy && !req.network);
	sandbox_req_init(&req, &c, "git", false, NULL);
	ck_assert(!req.net_proxy && req.network);
	sandbox_req_init(&req, &c, "sh2", false, NULL);
	ck_assert(req.net_proxy && !req.network);
	ck_assert_int_eq(req.profile, SANDBOX_READ_ONLY);
	/* A tool of side effect network keeps the whole network by default. */
	sandbox_req_init(&req, &c, "fetch", true, NULL);
	ck_assert(!req.net_proxy && req.network);
	/* A tool file's sandbox.network wins. */
	struct sandbox_tool t = SANDBOX_TOOL_UNSET;
	ck_assert_int_eq(sandbox_tool_from_json(parse("{\"network\":false}", &doc), &t, &err), 0);
	json_doc_unref(doc);
	sandbox_req_init(&req, &c, "shell", false, &t);
	ck_assert(!req.net_proxy && !req.network);
	ck_assert_int_eq(sandbox_tool_from_json(parse("{\"network\":\"proxy\"}", &doc), &t, &err), 0);
	json_doc_unref(doc);
	sandbox_req_init(&req, &c, "fetch", true, &t);
	ck_assert(req.net_proxy && !req.network);
	sandbox_tool_clear(&t);
	/* A tool file's "network" policy object: "proxy" with its hosts. */
	t = SANDBOX_TOOL_UNSET;
	ck_assert_int_eq(sandbox_tool_from_json(parse("{\"network\":{\"allow\":[\"registry.npmjs.org\"]}}", &doc), &t, &err), 0);
	json_doc_unref(doc);
	ck_assert_int_eq(t.network, SANDBOX_NET_PROXY);
	ck_assert_ptr_nonnull(t.net);
	sandbox_req_init(&req, &c, "npx", false, &t);
	ck_assert(req.net_proxy && req.net_policy == t.net);
	sandbox_tool_clear(&t);
	ck_assert_ptr_null(t.net);
	t = SANDBOX_TOOL_UNSET;
	err = NULL;
	ck_assert_int_eq(sandbox_tool_from_json(parse("{\"network\":{\"allow\":[\"bad host\"]}}", &doc), &t, &err), -EINVAL);
	json_doc_unref(doc);
	ck_assert_msg(err && strstr(err, "sandbox.network.allow[0]"), "%s", err ? err : "(none)");
	free(err);

	/* Wrong values name the key and what it takes. */
	static const char *const bad[] = {
		"{\"network\":\"maybe\"}", "{\"network\":1}", "{\"network\":{\"allow\":[\"x\"]}}",
		"{\"per_tool\":{\"shell\":{\"network\":\"some\"}}}", "{\"per_tool\":{\"shell\":{\"nope\":1}}}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		err = NULL;
		ck_assert_msg(sandbox_config_from_json(parse(bad[i], &doc), &c, &err) == -EINVAL, "%s", bad[i]);
		json_doc_unref(doc);
		ck_assert_msg(err && strstr(err, "network") ? true : strstr(err, "nope") != NULL, "%s", err);
		free(err);
	}
	err = NULL;
	t = SANDBOX_TOOL_UNSET;
	ck_assert_int_eq(sandbox_tool_from_json(parse("{\"network\":\"all\"}", &doc), &t, &err), -EINVAL);
	json_doc_unref(doc);
	ck_assert_msg(strstr(err, "sandbox.network") && strstr(err, "\"proxy\"") && strstr(err, "allow"), "%s", err);
	free(err);
	sandbox_config_clear(&c);

	/* Asked for where nothing serves a proxy: refused, saying so. */
	NEED_KERNEL("network_proxy_setting");
	sandbox_net_set_ops(NULL, NULL);
	const char *wss[] = { wsdir, NULL };
	sandbox_req_init(&req, &cfg, "x", false, NULL);
	req.workspaces = wss;
	req.net_proxy = true;
	struct sandbox_run *run = NULL;
	char *msg = NULL;
	ck_assert_int_eq(sandbox_prepare(&req, &run, &msg), -EPERM);
	ck_assert_ptr_null(run);
	ck_assert_msg(msg && strstr(msg, "not given the full network"), "%s", msg ? msg : "(none)");
	free(msg);
}
END_TEST

/* --- the file system ------------------------------------------------------- */

START_TEST(shell_file_system)
{
	NEED_KERNEL("shell_file_system");
	struct run r;
	char cmd[PATH_MAX * 3];

	/* A denied file is not readable; its neighbours are. Landlock
	 * refuses it, or, where the child has a mount namespace, its
	 * directory is covered empty. */
	snprintf(cmd, sizeof(cmd), "cat %s/notes && cat %s/.ssh/id_rsa", home, home);
	sh(&r, cmd, NULL);
	ck_assert_int_ne(exit_code(&r), 0);
	ck_assert_ptr_nonnull(strstr(sc_str(&r, "stdout"), "plain notes"));
	ck_assert_ptr_null(strstr(sc_str(&r, "stdout"), "SECRET"));
	ck_assert_ptr_nonnull(strstr(sc_str(&r, "stdout"), sandbox_probe(NULL)->mountns && sandbox_probe(NULL)->ro_mounts
								   ? "No such file or directory"
								   : "Permission denied"));
	ck_assert_msg(strstr(r.c.text, "[sandbox]") && strstr(r.c.text, "workspace-write"), "%s", r.c.text);
	ck_assert(enforced(&r, "enforced", "landlock"));
	run_done(&r);

	/* Nothing outside the workspace is writable... */
	snprintf(cmd, sizeof(cmd), "echo x > %s/outside", tmpdir);
	sh(&r, cmd, NULL);
	ck_assert_int_ne(exit_code(&r), 0);
	run_done(&r);
	snprintf(cmd, sizeof(cmd), "%s/outside", tmpdir);
	ck_assert_int_lt(access(cmd, F_OK), 0);

	/* ...but the workspace and TMPDIR are, and TMPDIR goes at the end. */
	sh(&r, "echo in > made && mkdir -p d/e && echo deep > d/e/f && mkdir \"$TMPDIR/sub\" && "
	       "echo t > \"$TMPDIR/sub/t\" && cat \"$TMPDIR/sub/t\" && echo \"$TMPDIR/sub\"", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	char tmp[PATH_MAX];
	const char *out = sc_str(&r, "stdout");
	ck_assert_int_eq(sscanf(out, "t\n%4095s", tmp), 1);
	run_done(&r);
	/* $TMPDIR/sub went with the call, and $TMPDIR too. */
	ck_assert_int_lt(access(tmp, F_OK), 0);
	*strrchr(tmp, '/') = '\0';
	ck_assert_int_lt(access(tmp, F_OK), 0);
	snprintf(cmd, sizeof(cmd), "%s/d/e/f", wsdir);
	ck_assert_int_eq(access(cmd, F_OK), 0);
}
END_TEST

START_TEST(shell_read_only)
{
	NEED_KERNEL("shell_read_only");
	struct run r;
	cfg.profile = SANDBOX_READ_ONLY;
	sh(&r, "echo x > made", NULL);
	ck_assert_int_ne(exit_code(&r), 0);
	ck_assert_str_eq(json_str(json_get(json_get(json_doc_root(r.sc), "sandbox"), "profile")), "read-only");
	run_done(&r);
	sh(&r, "echo x > \"$TMPDIR/f\" && cat \"$TMPDIR/f\"", NULL);
	ck_assert_msg(exit_code(&r) == 0, "%s", sc_str(&r, "stdout"));
	run_done(&r);
}
END_TEST

START_TEST(shell_protect)
{
	NEED_KERNEL("shell_protect");
	if (!sandbox_probe(NULL)->mountns)
		TC_SKIP("shell_protect: no private mount namespaces here (not root)");
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/.git", wsdir);
	ck_assert_int_eq(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/.git/hooks", wsdir);
	ck_assert_int_eq(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/.git/config", wsdir);
	write_file(path, "[core]\n", 0666);

	struct run r;
	sh(&r, "echo evil > .git/hooks/pre-commit", NULL);
	ck_assert_int_ne(exit_code(&r), 0);
	ck_assert_ptr_nonnull(strstr(sc_str(&r, "stdout"), "Read-only file system"));
	ck_assert(enforced(&r, "enforced", "protect"));
	run_done(&r);
	sh(&r, "echo '[core] fsmonitor = evil' >> .git/config", NULL);
	ck_assert_int_ne(exit_code(&r), 0);
	run_done(&r);
	/* Renamed away, the protected paths would be free again. */
	sh(&r, "mv .git .git-moved || mv .git/hooks .git/h2", NULL);
	ck_assert_int_ne(exit_code(&r), 0);
	run_done(&r);
	/* The rest of the workspace, .git included, takes new files. */
	sh(&r, "echo a > new && echo b > .git/other && mkdir sub && echo c > sub/f", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	run_done(&r);
	snprintf(path, sizeof(path), "%s/.git/hooks/pre-commit", wsdir);
	ck_assert_int_lt(access(path, F_OK), 0);
}
END_TEST

/*
 * With CAP_SYS_ADMIN and no protected path in the workspace, the other
 * calls' TMPDIRs of a peer of another uid are hidden by a second Landlock
 * layer, without a mount namespace, and "/" stays listable; a root child
 * (which that layer would have to refuse "/") keeps the mount namespace,
 * and lists "/"; a write_extra path holding the directory of TMPDIRs
 * (which that layer would make read-only) brings the namespace back, and
 * stays writable.
 */
START_TEST(shell_tmpdir_hidden_without_namespace)
{
	/* A kernel without mount_setattr (before 5.12), emulated: no child
	 * needs a namespace for read-only mounts there. */
	if (!deny_syscall_or_skip("shell_tmpdir_hidden_without_namespace", SYS_mount_setattr))
		return;
	NEED_KERNEL("shell_tmpdir_hidden_without_namespace");
	ck_assert(!sandbox_probe(NULL)->ro_mounts);
	if (!sandbox_probe(NULL)->mountns || geteuid() != 0)
		TC_SKIP("shell_tmpdir_hidden_without_namespace: no private mount namespaces here, or not root "
			"(no peer of another uid)");
	/* No protected path (which would need mounts: a workspace without a
	 * repository has its .git held). */
	char *no_protect[] = { NULL };
	char **saved_protect = cfg.protect;
	cfg.protect = no_protect;
	char own_ns[64] = "";
	ck_assert_int_gt(readlink("/proc/self/ns/mnt", own_ns, sizeof(own_ns) - 1), 0);
	const char *cmd0 = "readlink /proc/self/ns/mnt; echo \"$TMPDIR\"; echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"; "
			   "ls / | grep -qx usr && echo listed";
	struct run r;
	sh(&r, cmd0, &nobody);
	ck_assert_msg(exit_code(&r) == 0, "%s", sc_str(&r, "stdout"));
	ck_assert(enforced(&r, "enforced", "tmpdir hidden"));
	char ns[64], tmp[PATH_MAX];
	ck_assert_int_eq(sscanf(sc_str(&r, "stdout"), "%63s %4095s", ns, tmp), 2);
	ck_assert_str_eq(ns, own_ns);
	ck_assert_msg(strstr(sc_str(&r, "stdout"), "\nt\nlisted\n"), "%s", sc_str(&r, "stdout"));
	run_done(&r);
	/* As root: a namespace of its own, "/" listed. */
	sh(&r, cmd0, NULL);
	ck_assert_msg(exit_code(&r) == 0, "%s", sc_str(&r, "stdout"));
	ck_assert(enforced(&r, "enforced", "tmpdir hidden"));
	ck_assert_int_eq(sscanf(sc_str(&r, "stdout"), "%63s", ns), 1);
	ck_assert_str_ne(ns, own_ns);
	ck_assert_msg(strstr(sc_str(&r, "stdout"), "\nt\nlisted\n"), "%s", sc_str(&r, "stdout"));
	run_done(&r);
	/* TMPDIR is <parent>/toolcalld.*\/u<uid>/c/<name>: the parent. */
	for (int i = 0; i < 4; i++)
		*strrchr(tmp, '/') = '\0';
	if (!tmp[0])
		strcpy(tmp, "/");
	struct stat st;
	ck_assert_int_eq(stat(tmp, &st), 0);
	char *extra[] = { tmp, NULL };
	char **saved = cfg.write_extra;
	cfg.write_extra = extra;
	char cmd[PATH_MAX + 128];
	snprintf(cmd, sizeof(cmd), "readlink /proc/self/ns/mnt; echo x > '%s/tc-unit-%d' && echo wrote", tmp,
		 (int)getpid());
	sh(&r, cmd, &nobody);
	cfg.write_extra = saved;
	snprintf(cmd, sizeof(cmd), "%s/tc-unit-%d", tmp, (int)getpid());
	(void)unlink(cmd);
	ck_assert(enforced(&r, "enforced", "tmpdir hidden"));
	ck_assert_int_eq(sscanf(sc_str(&r, "stdout"), "%63s", ns), 1);
	ck_assert_str_ne(ns, own_ns);
	/* Writable by the first layer (and, for uid 65534, by its mode). */
	if (st.st_mode & S_IWOTH)
		ck_assert_msg(strstr(sc_str(&r, "stdout"), "wrote"), "%s", sc_str(&r, "stdout"));
	run_done(&r);
	cfg.protect = saved_protect;
}
END_TEST

/* --- network ----------------------------------------------------------------- */

START_TEST(shell_network)
{
	NEED_KERNEL("shell_network");
	if (access("/usr/bin/socat", X_OK) < 0)
		TC_SKIP("shell_network: no socat");
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(ls, 16), 0);
	ck_assert_int_eq(getsockname(ls, (struct sockaddr *)&a, &len), 0);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "socat -u OPEN:/dev/null TCP:127.0.0.1:%d", ntohs(a.sin_port));

	struct run r;
	sh(&r, cmd, NULL);
	ck_assert_int_ne(exit_code(&r), 0);
	ck_assert_msg(strstr(r.c.text, "no network access"), "%s", r.c.text);
	run_done(&r);
	cfg.network = true;
	sh(&r, cmd, NULL);
	ck_assert_msg(exit_code(&r) == 0, "%s", r.c.text);
	run_done(&r);
	close(ls);
}
END_TEST

/* Ops standing in for the daemon's proxy: are lent the listening sockets
 * (a connection to them completes in the backlog), count, and name a
 * refusal for the note. */
struct fake_proxy {
	int http_fd, socks_fd;
	unsigned started, stopped;
	char who_tool[32];
};

static void *fake_start(void *arg, const struct sandbox_net_serve *s, char **ret_msg)
{
	(void)ret_msg;
	struct fake_proxy *fp = arg;
	fp->http_fd = s->http_fd;
	fp->socks_fd = s->socks_fd;
	fp->started++;
	snprintf(fp->who_tool, sizeof(fp->who_tool), "%s", s->who && s->who->tool ? s->who->tool : "");
	return fp;
}

static void fake_stop(void *arg, void *served)
{
	struct fake_proxy *fp = served;
	(void)arg;
	/* Lent, not given: the namespace keeps them for a later call. */
	fp->stopped++;
}

static char *fake_note(void *arg, void *served)
{
	(void)arg;
	(void)served;
	return xstrdup("[sandbox] The network proxy refused evil.test:443 (rule deny:evil.test)");
}

/* lo's largest TCP segment for IPv4 in the network namespace of socket
 * fd (IFLA_GSO_IPV4_MAX_SIZE), 0 when the kernel does not say (before
 * 6.3), -1 on failure; asked from a child that joins it. */
static long lo_gso_ipv4_max(int fd)
{
	int ns = ioctl(fd, SIOCGSKNS);
	if (ns < 0)
		return -1;
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		long v = -1;
		struct {
			struct nlmsghdr h;
			struct ifinfomsg i;
		} q = { .h = { .nlmsg_len = sizeof(q), .nlmsg_type = RTM_GETLINK, .nlmsg_flags = NLM_F_REQUEST },
			.i = { .ifi_family = AF_UNSPEC, .ifi_index = 1 } };
		static char ans[16384];
		int s = -1;
		ssize_t n = -1;
		if (setns(ns, CLONE_NEWNET) == 0 && (s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) >= 0 &&
		    send(s, &q, sizeof(q), 0) == (ssize_t)sizeof(q))
			n = recv(s, ans, sizeof(ans), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)ans;
		if (n > 0 && NLMSG_OK(h, (size_t)n) && h->nlmsg_type == RTM_NEWLINK) {
			v = 0;
			int len = (int)IFLA_PAYLOAD(h);
			for (struct rtattr *a = IFLA_RTA(NLMSG_DATA(h)); RTA_OK(a, len); a = RTA_NEXT(a, len))
				if (a->rta_type == 63 /* IFLA_GSO_IPV4_MAX_SIZE */ && RTA_PAYLOAD(a) == 4)
					v = *(uint32_t *)RTA_DATA(a);
		}
		_exit(write(p[1], &v, sizeof(v)) == (ssize_t)sizeof(v) ? 0 : 1);
	}
	long v = -1;
	close(p[1]);
	if (pid < 0 || read(p[0], &v, sizeof(v)) != (ssize_t)sizeof(v))
		v = -1;
	close(p[0]);
	close(ns);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return v;
}

/* Network "proxy": the child is in a namespace of its own with loopback
 * up and nothing else, where the daemon's sockets listen on the proxy
 * ports; it may make AF_INET sockets there, finds the proxy in its
 * environment, cannot reach the host's loopback, and its result carries
 * the proxy's note, whatever its exit status. */
START_TEST(shell_network_proxy)
{
	NEED_KERNEL("shell_network_proxy");
	const char *why = NULL;
	if (!sandbox_netns_capable(&why))
		TC_SKIP("shell_network_proxy: %s", why);
	if (access("/usr/bin/socat", X_OK) < 0)
		TC_SKIP("shell_network_proxy: no socat");
	struct fake_proxy fp = { .http_fd = -1, .socks_fd = -1 };
	static const struct sandbox_net_ops ops = { .start = fake_start, .stop = fake_stop, .note = fake_note };
	sandbox_net_set_ops(&ops, &fp);
	/* A listener on the host's loopback, which the child must not reach. */
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(ls, 16), 0);
	ck_assert_int_eq(getsockname(ls, (struct sockaddr *)&a, &len), 0);

	cfg.network = SANDBOX_NET_PROXY;
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
		 "echo \"$HTTP_PROXY $https_proxy $ALL_PROXY $no_proxy\"; "
		 "socat -u OPEN:/dev/null TCP:127.0.0.1:3128 && echo http-port; "
		 "socat -u OPEN:/dev/null TCP:127.0.0.1:1080 && echo socks-port; "
		 "socat -u OPEN:/dev/null TCP:127.0.0.1:%d 2>/dev/null || echo host-unreachable; "
		 "/usr/bin/python3 -c 'import socket\ntry: socket.socket(17, 3)\nexcept OSError as e: print(\"packet\", e.errno)'",
		 ntohs(a.sin_port));
	struct run r;
	sh(&r, cmd, NULL);
	ck_assert_msg(exit_code(&r) == 0, "%s", r.c.text);
	char own[64] = "";
	ck_assert_int_gt(readlink("/proc/self/ns/net", own, sizeof(own) - 1), 0);
	const char *out = sc_str(&r, "stdout");
	char want[512];
	snprintf(want, sizeof(want),
		 "lo\nhttp://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:1080 localhost,127.0.0.1\n"
		 "http-port\nsocks-port\nhost-unreachable\npacket 13\n");
	ck_assert_msg(strncmp(out, "net:[", 5) == 0 && strncmp(out, own, strlen(own)) != 0, "%s", out);
	char first[64];
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(out, "\n"), out);
	ck_assert_msg(strstr(out, want) != NULL, "%s", out);
	ck_assert_msg(strstr(r.c.text, "refused evil.test:443 (rule deny:evil.test)"), "%s", r.c.text);
	ck_assert_str_eq(json_str(json_get(json_get(json_doc_root(r.sc), "sandbox"), "network")), "proxy");
	ck_assert(enforced(&r, "enforced", "network namespace"));
	ck_assert_str_eq(fp.who_tool, "shell");
	run_done(&r);
	/* The proxy ends with the call. */
	ck_assert_int_eq(fp.started, 1);
	ck_assert_int_eq(fp.stopped, 1);
	/* The listeners were lent, not copied: open after the call, and the
	 * same ones lent to the next call, which takes the kept namespace. */
	int first_http = fp.http_fd, first_socks = fp.socks_fd;
	ck_assert_int_ge(fcntl(first_http, F_GETFD), 0);
	ck_assert_int_ge(fcntl(first_socks, F_GETFD), 0);
	ck_assert(fcntl(first_http, F_GETFL) & O_NONBLOCK);
	/* The call's two connections, which the fake never accepted, were
	 * taken off the kept namespace's listeners. */
	struct pollfd pend[2] = { { .fd = first_http, .events = POLLIN }, { .fd = first_socks, .events = POLLIN } };
	ck_assert_int_eq(poll(pend, 2, 0), 0);
	/* Its lo carries TCP segments of up to SANDBOX_LO_GSO_MAX bytes
	 * (where the kernel knows of BIG TCP for IPv4; joining it takes
	 * CAP_NET_ADMIN over it, which root has). */
	long gso = geteuid() == 0 ? lo_gso_ipv4_max(first_http) : 0;
	ck_assert_msg(gso == SANDBOX_LO_GSO_MAX || gso == 0, "lo gso_ipv4_max_size %ld", gso);
	if (gso == 0)
		fprintf(stderr, "shell_network_proxy: not root, or a kernel without BIG TCP for IPv4: "
				"lo's segment size not checked\n");
	/* A namespace serves the next call of the uid only once nothing of
	 * the last is left in it: a listener it left behind is gone. */
	sh(&r, "socat TCP-LISTEN:5555,bind=127.0.0.1,fork OPEN:/dev/null & sleep 0.3; readlink /proc/self/ns/net", NULL);
	ck_assert_msg(exit_code(&r) == 0, "%s", r.c.text);
	run_done(&r);
	ck_assert_int_eq(fp.http_fd, first_http);
	ck_assert_int_eq(fp.socks_fd, first_socks);
	sh(&r, "readlink /proc/self/ns/net; socat -u OPEN:/dev/null TCP:127.0.0.1:5555 2>/dev/null || echo nothing-left",
	   NULL);
	ck_assert_msg(exit_code(&r) == 0, "%s", r.c.text);
	ck_assert_msg(strncmp(sc_str(&r, "stdout"), "net:[", 5) == 0 && strstr(sc_str(&r, "stdout"), "\nnothing-left\n"),
		      "%s (first %s)", sc_str(&r, "stdout"), first);
	run_done(&r);
	ck_assert_int_eq(fp.stopped, 3);
	sandbox_net_set_ops(NULL, NULL);
	close(ls);
}
END_TEST

/* --- the seccomp filter ------------------------------------------------------ */

static char self_exe[PATH_MAX];

/* Run as a sandboxed shell's command: makes the calls the filter decides
 * on and prints each one's name and errno (0: it went through). */
static int seccomp_probe(void)
{
	static const struct {
		const char *name;
		long domain, type, protocol;
	} socks[] = {
		{ "inet", AF_INET, SOCK_STREAM, 0 },
		{ "inet6", AF_INET6, SOCK_DGRAM, 0 },
		{ "packet", AF_PACKET, SOCK_RAW, 0 },
		{ "zero", 0, SOCK_DGRAM, 0 },
		{ "family3", 3, SOCK_DGRAM, 0 },
		{ "family15", 15, SOCK_DGRAM, 0 },
		{ "vsock", AF_VSOCK, SOCK_STREAM, 0 },
		/* The kernel takes an int: this is AF_INET to it. */
		{ "inet_high_bits", 0x100000000L | AF_INET, SOCK_STREAM, 0 },
		{ "unix", AF_UNIX, SOCK_STREAM, 0 },
		{ "netlink", AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */ },
	};
	for (size_t i = 0; i < ELEMENTSOF(socks); i++) {
		long fd = syscall(SYS_socket, socks[i].domain, socks[i].type | SOCK_CLOEXEC, socks[i].protocol);
		printf("%s %d\n", socks[i].name, fd < 0 ? errno : 0);
	}
	printf("unshare_user %d\n", syscall(SYS_unshare, CLONE_NEWUSER) < 0 ? errno : 0);
	printf("ptrace %d\n", syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0) < 0 ? errno : 0);
	printf("io_uring %d\n", syscall(SYS_io_uring_setup, 1, NULL) < 0 ? errno : 0);
	/* Without the filter: EINVAL (no arguments). */
	printf("clone3 %d\n", syscall(SYS_clone3, NULL, 0) < 0 ? errno : 0);
	/* Modes, in the workspace (the working directory). */
	long fd = syscall(SYS_openat, AT_FDCWD, "p_plain", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	printf("create %d\n", fd < 0 ? errno : 0);
	printf("chmod_x %d\n", syscall(SYS_chmod, "p_plain", 0755) < 0 ? errno : 0);
	printf("chmod_suid %d\n", syscall(SYS_chmod, "p_plain", 04755) < 0 ? errno : 0);
	printf("chmod_sgid %d\n", syscall(SYS_chmod, "p_plain", 02755) < 0 ? errno : 0);
	printf("fchmod_suid %d\n", syscall(SYS_fchmod, fd, 04755) < 0 ? errno : 0);
	printf("fchmodat_sgid %d\n", syscall(SYS_fchmodat, AT_FDCWD, "p_plain", 02755) < 0 ? errno : 0);
	printf("fchmodat2_suid %d\n", syscall(452 /* fchmodat2 */, AT_FDCWD, "p_plain", 04755, 0) < 0 ? errno : 0);
	printf("open_suid %d\n", syscall(SYS_open, "p_suid", O_CREAT | O_WRONLY | O_CLOEXEC, 04755) < 0 ? errno : 0);
	printf("openat_sgid %d\n",
	       syscall(SYS_openat, AT_FDCWD, "p_sgid", O_CREAT | O_WRONLY | O_CLOEXEC, 02755) < 0 ? errno : 0);
	printf("creat_suid %d\n", syscall(SYS_creat, "p_suid2", 04755) < 0 ? errno : 0);
	printf("mknod_suid %d\n", syscall(SYS_mknodat, AT_FDCWD, "p_reg", S_IFREG | 04755, 0) < 0 ? errno : 0);
	printf("mknod_chr %d\n", syscall(SYS_mknod, "p_chr", S_IFCHR | 0600, makedev(1, 3)) < 0 ? errno : 0);
	printf("mknod_blk %d\n", syscall(SYS_mknodat, AT_FDCWD, "p_blk", S_IFBLK | 0600, makedev(7, 0)) < 0 ? errno : 0);
	printf("mknod_fifo %d\n", syscall(SYS_mknodat, AT_FDCWD, "p_fifo", S_IFIFO | 0600, 0) < 0 ? errno : 0);
	struct { uint64_t flags, mode, resolve; } how = { O_RDONLY | O_CLOEXEC, 0, 0 };
	printf("openat2 %d\n", syscall(SYS_openat2, AT_FDCWD, "p_plain", &how, sizeof(how)) < 0 ? errno : 0);
	struct stat st;
	printf("mode %o\n", stat("p_plain", &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0U);
	return 0;
}

/* Whether the probe's output has the line "name errno". */
static bool probe_said(const char *out, const char *name, int e)
{
	char line[64];
	snprintf(line, sizeof(line), "%s %d\n", name, e);
	const char *p = strstr(out, line);
	return p && (p == out || p[-1] == '\n');
}

/* No socket of any family but AF_UNIX and AF_NETLINK, whatever the high
 * bits of the argument hold; no user namespace, ptrace or io_uring. */
START_TEST(seccomp_filter_refuses)
{
	NEED_KERNEL("seccomp_filter_refuses");
	/* This program, built with ASan, maps far more than memory_mb. */
	cfg.limits.memory_mb = 0;
	char *cmd = xasprintf("'%s' --seccomp-probe", self_exe);
	struct run r;
	sh(&r, cmd, NULL);
	free(cmd);
	const char *out = sc_str(&r, "stdout");
	ck_assert_msg(exit_code(&r) == 0, "%s", r.c.text);
	static const char *const refused[] = { "inet", "inet6", "packet", "zero", "family3", "family15", "vsock",
					       "inet_high_bits" };
	for (size_t i = 0; i < ELEMENTSOF(refused); i++)
		ck_assert_msg(probe_said(out, refused[i], EACCES), "%s: %s", refused[i], out);
	ck_assert_msg(probe_said(out, "unix", 0) && probe_said(out, "netlink", 0), "%s", out);
	ck_assert_msg(probe_said(out, "unshare_user", EPERM) && probe_said(out, "ptrace", EPERM) &&
		      probe_said(out, "io_uring", EPERM) && probe_said(out, "clone3", ENOSYS), "%s", out);
	/* chmod +x and a FIFO go through; no setuid or setgid bit, no device. */
	ck_assert_msg(probe_said(out, "create", 0) && probe_said(out, "chmod_x", 0) &&
		      probe_said(out, "mknod_fifo", 0) && strstr(out, "\nmode 755\n"), "%s", out);
	static const char *const modes[] = { "chmod_suid", "chmod_sgid", "fchmod_suid", "fchmodat_sgid",
					     "fchmodat2_suid", "open_suid", "openat_sgid", "creat_suid",
					     "mknod_suid", "mknod_chr", "mknod_blk" };
	for (size_t i = 0; i < ELEMENTSOF(modes); i++)
		ck_assert_msg(probe_said(out, modes[i], EPERM), "%s: %s", modes[i], out);
	ck_assert_msg(probe_said(out, "openat2", ENOSYS), "%s", out);
	run_done(&r);
}
END_TEST

/* The errno of a setns(-1, nstype) with the filter prog loaded in a
 * forked process (0: it went through, which it cannot with fd -1), or
 * -1 if the filter could not be loaded. */
static int setns_errno(const void *prog, uint64_t nstype)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
			_exit(255);
		long r = syscall(SYS_setns, -1, nstype);
		_exit(r < 0 ? errno : 0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st) == 255 ? -1 : WEXITSTATUS(st);
}

/* The spawner's filter lets setns through for a mount or network
 * namespace only (the kernel then refuses fd -1: EBADF), where a child's
 * refuses every setns. */
START_TEST(spawner_filter_setns)
{
	NEED_KERNEL("spawner_filter_setns");
	char *msg = NULL;
	const void *prog = seccomp_prog_get(SANDBOX_NET_NONE, &msg);
	ck_assert_msg(prog, "%s", msg);
	const void *sp = seccomp_spawner_prog(prog);
	ck_assert(sp);
	ck_assert_ptr_eq(seccomp_spawner_prog(prog), sp);
	ck_assert_ptr_null(seccomp_spawner_prog("not a program of ours"));
	ck_assert_int_eq(setns_errno(prog, CLONE_NEWNS), EPERM);
	ck_assert_int_eq(setns_errno(prog, CLONE_NEWNET), EPERM);
	ck_assert_int_eq(setns_errno(sp, CLONE_NEWNS), EBADF);
	ck_assert_int_eq(setns_errno(sp, CLONE_NEWNET), EBADF);
	static const uint64_t refused[] = {
		0, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWCGROUP,
		CLONE_NEWNS | CLONE_NEWUSER, (UINT64_C(1) << 32) | CLONE_NEWNS,
	};
	for (size_t i = 0; i < ELEMENTSOF(refused); i++)
		ck_assert_msg(setns_errno(sp, refused[i]) == EPERM, "nstype %#llx", (unsigned long long)refused[i]);
}
END_TEST

/* --- children of a spawner --------------------------------------------------- */

/* The mount namespace joined by path: a path that no longer leads to
 * the working directory (a link swapped in since it was read) fails the
 * step, with the privileges the child still holds, rather than taking
 * it there. */
static int apply_spawned_in_fork(const char *path, int cwd_fd, char *ret_cwd)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sandbox_child c = { .cgroup_fd = -1, .cgroup_procs_fd = -1, .mntns_fd = -1, .cap_last = -1,
					   .landlock_fd = -1, .landlock_fd2 = -1, .netns_fd = -1, .userns_fd = -1 };
		c.mntns_fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
		char buf[PATH_MAX + 16] = "";
		int r = sandbox_child_apply_spawned(&c, path, cwd_fd);
		if (r == 0 && !getcwd(buf, sizeof(buf)))
			r = -errno;
		else if (r < 0)
			snprintf(buf, sizeof(buf), "%s", c.failed ? c.failed : "");
		(void)!write(p[1], &r, sizeof(r));
		(void)!write(p[1], buf, strlen(buf) + 1);
		_exit(0);
	}
	close(p[1]);
	int r = -1;
	ck_assert_int_eq(read(p[0], &r, sizeof(r)), sizeof(r));
	ssize_t n = read(p[0], ret_cwd, PATH_MAX + 16);
	ret_cwd[n > 0 ? n : 0] = '\0';
	close(p[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return r;
}

START_TEST(spawned_cwd_checked)
{
	NEED_ROOT("spawned_cwd_checked");
	char a[PATH_MAX + 8], b[PATH_MAX + 8], got[PATH_MAX + 16];
	snprintf(a, sizeof(a), "%s/a", tmpdir);
	snprintf(b, sizeof(b), "%s/b", tmpdir);
	ck_assert_int_eq(mkdir(a, 0700), 0);
	ck_assert_int_eq(mkdir(b, 0700), 0);
	int fd = open(a, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(apply_spawned_in_fork(a, fd, got), 0);
	ck_assert_str_eq(got, a);
	ck_assert_int_eq(apply_spawned_in_fork(NULL, fd, got), -ESTALE);	/* its own: the test's */
	ck_assert_int_eq(apply_spawned_in_fork(b, fd, got), -ESTALE);
	ck_assert_str_eq(got, "joining the mount namespace prepared for it");
	/* a now a link to b: the path leads elsewhere. */
	char moved[PATH_MAX + 16];
	snprintf(moved, sizeof(moved), "%s/a.moved", tmpdir);
	ck_assert_int_eq(rename(a, moved), 0);
	ck_assert_int_eq(symlink(b, a), 0);
	ck_assert_int_eq(apply_spawned_in_fork(a, fd, got), -ESTALE);
	close(fd);
}
END_TEST

/* --- identity ------------------------------------------------------------------ */

START_TEST(shell_as_peer)
{
	NEED_ROOT("shell_as_peer");
	NEED_KERNEL("shell_as_peer");
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/root-only", wsdir);
	write_file(path, "root's\n", 0600);

	struct run r;
	sh(&r, "id -u; id -g; echo hi > mine; cat root-only", &nobody);
	ck_assert_msg(strncmp(sc_str(&r, "stdout"), "65534\n65534\n", 12) == 0, "%s", sc_str(&r, "stdout"));
	ck_assert_int_ne(exit_code(&r), 0);
	ck_assert_ptr_nonnull(strstr(sc_str(&r, "stdout"), "Permission denied"));
	ck_assert(enforced(&r, "enforced", "identity"));
	run_done(&r);
	struct stat st;
	snprintf(path, sizeof(path), "%s/mine", wsdir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_uid, 65534);
	ck_assert_int_eq(st.st_gid, 65534);
	/* The daemon's own environment is not readable. */
	snprintf(path, sizeof(path), "cat /proc/%d/environ", (int)getpid());
	sh(&r, path, &nobody);
	ck_assert_int_ne(exit_code(&r), 0);
	run_done(&r);
}
END_TEST

/* --- limits ---------------------------------------------------------------------- */

START_TEST(shell_memory_limit)
{
	NEED_KERNEL("shell_memory_limit");
	cfg.limits.memory_mb = 64;
	struct run r;
	sh(&r, "awk 'BEGIN { s = \"a\"; while (1) s = s s }'", NULL);
	ck_assert(r.c.is_error);
	ck_assert_msg(strstr(r.c.text, "[limit]") && strstr(r.c.text, "memory limit (64 MB)"), "%s", r.c.text);
	run_done(&r);
}
END_TEST

START_TEST(shell_pids_limit)
{
	NEED_ROOT("shell_pids_limit");
	NEED_KERNEL("shell_pids_limit");
	cfg.limits.pids = 4;
	struct run r;
	sh(&r, "for i in 1 2 3 4 5 6 7 8; do sleep 5 & done; wait", &nobody);
	ck_assert(r.c.is_error);
	ck_assert_msg(strstr(r.c.text, "process limit (4 processes)"), "%s", r.c.text);
	run_done(&r);
}
END_TEST

START_TEST(command_limit_named)
{
	NEED_KERNEL("command_limit_named");
	cfg.limits.file_size_mb = 1;
	const char *decl = "{\"name\":\"big\",\"side_effects\":\"write\",\"argv\":[\"dd\",\"if=/dev/zero\",\"of=big\",\"bs=1M\",\"count=4\"]}";
	struct json_doc *doc;
	struct json_err jerr;
	ck_assert_int_eq(json_parse(decl, strlen(decl), 0, 0, &doc, &jerr), 0);
	struct tool *t = NULL;
	char *err = NULL;
	ck_assert_int_eq(command_tool_from_json(json_doc_root(doc), "test", &t, &err), 0);
	json_doc_unref(doc);
	struct run r;
	run_call(&r, t, "{}", NULL);
	ck_assert_int_eq(r.c.kind, TC_EXECUTION_ERROR);
	ck_assert_msg(strstr(r.c.message, "file size limit (1 MB)"), "%s", r.c.message);
	run_done(&r);
	tool_unref(t);
}
END_TEST

/* --- cleanup ----------------------------------------------------------------------- */

/* Runs a call that leaves a setsid'd sleep behind, and checks it is gone
 * (killed and reaped) once the call has ended. */
static void escaped_is_gone(void)
{
	struct run r;
	sh(&r, "setsid sh -c 'echo $$ > pid; exec sleep 300' & while [ ! -s pid ]; do :; done", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	run_done(&r);
	char path[PATH_MAX + 8], buf[32] = "";
	snprintf(path, sizeof(path), "%s/pid", wsdir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	pid_t pid = atoi(buf);
	ck_assert_int_gt(pid, 1);
	ck_assert_msg(kill(pid, 0) < 0 && errno == ESRCH, "process %d outlived its call", (int)pid);
}

START_TEST(cleanup_by_cgroup)
{
	const struct sandbox_features *f = sandbox_probe(NULL);
	if (!f->cgroup)
		TC_SKIP("cleanup_by_cgroup: no cgroup v2 directory the test may write");
	escaped_is_gone();
}
END_TEST

START_TEST(cleanup_by_subreaper)
{
	const struct sandbox_features *f = sandbox_probe("");
	ck_assert(!f->cgroup);
	ck_assert(f->subreaper);
	escaped_is_gone();
	/* Also with the sandbox off. */
	cfg.profile = SANDBOX_OFF;
	escaped_is_gone();
}
END_TEST

/* How many call cgroups (tc-*) a cgroup directory holds. */
static int count_call_cgroups(const char *dir)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += strncmp(e->d_name, "tc-", 3) == 0;
	closedir(d);
	return n;
}

/* The one call cgroup of a fake cgroup directory, in ret (n bytes). */
static void call_cgroup(const char *dir, char *ret, size_t n)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	ret[0] = '\0';
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "tc-", 3) == 0)
			snprintf(ret, n, "%s/%s", dir, e->d_name);
	closedir(d);
	ck_assert(ret[0]);
}

/* The cgroup code against a fake cgroup v2 directory of plain files: what
 * a call's cgroup gets written (memory.max, pids.max, the child's join in
 * cgroup.procs); that its end keeps it, empty, for the next call (with that
 * call's limits), writing cgroup.kill only when cgroup.events says
 * something is left in it after the leader's exit, and then not keeping
 * it; and that shutdown removes a kept one. */
START_TEST(cgroup_written)
{
	char fake[PATH_MAX + 16], path[PATH_MAX + 64];
	snprintf(fake, sizeof(fake), "%s/cg", tmpdir);
	ck_assert_int_eq(mkdir(fake, 0755), 0);
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", fake);
	write_file(path, "memory pids\n", 0644);
	sandbox_shutdown();
	sandbox_cgroup_fake(true);
	const struct sandbox_features *f = sandbox_probe(fake);
	ck_assert(f->cgroup && f->cgroup_memory && f->cgroup_pids);
	char *line = sandbox_features_line(f);
	ck_assert_msg(strstr(line, "cgroup v2 delegated: ") && strstr(line, "memory.max: yes, pids.max: yes"), "%s", line);
	free(line);
	if (!kernel_sandboxes()) {
		sandbox_cgroup_fake(false);
		TC_SKIP("cgroup_written: this kernel has no Landlock or no seccomp");
	}
	cfg.limits.memory_mb = 100;
	cfg.limits.pids = 7;
	struct run r;
	sh(&r, "echo ok", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	ck_assert(enforced(&r, "enforced", "cgroup"));
	ck_assert(enforced(&r, "enforced", "memory.max"));
	ck_assert(enforced(&r, "enforced", "pids.max"));
	run_done(&r);
	/* The ended call's cgroup, empty, is kept: the next call takes it,
	 * its limits written again where they differ. Empty once the leader
	 * had exited, it was not killed. */
	ck_assert_int_eq(count_call_cgroups(fake), 1);
	char cg[PATH_MAX + 320], file[PATH_MAX + 352];
	call_cgroup(fake, cg, sizeof(cg));
	snprintf(file, sizeof(file), "%s/cgroup.kill", cg);
	ck_assert_int_eq(access(file, F_OK), -1);
	/* The next call's cgroup holds something after its leader's exit:
	 * killed, and not kept. */
	snprintf(file, sizeof(file), "%s/cgroup.events", cg);
	write_file(file, "populated 1\n", 0644);
	cfg.limits.memory_mb = 0;
	cfg.limits.pids = 9;
	sh(&r, "echo ok", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	ck_assert(enforced(&r, "enforced", "pids.max"));
	ck_assert(!enforced(&r, "enforced", "memory.max"));
	run_done(&r);
	ck_assert_int_eq(count_call_cgroups(fake), 0);
	/* At exit (and on a reload) the kept ones go: a third call's. */
	sh(&r, "echo ok", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	run_done(&r);
	ck_assert_int_eq(count_call_cgroups(fake), 1);
	sandbox_shutdown();

	snprintf(path, sizeof(path), "%s/writes.log", fake);
	FILE *in = fopen(path, "re");
	ck_assert_ptr_nonnull(in);
	char log[1024];
	size_t n = fread(log, 1, sizeof(log) - 1, in);
	fclose(in);
	log[n] = '\0';
	ck_assert_msg(strstr(log, "memory.max=max\n"), "%s", log);
	ck_assert_msg(strstr(log, "pids.max=9\n"), "%s", log);
	ck_assert_msg(strstr(log, "cgroup.procs=0\n"), "%s", log);	/* the child joined */
	ck_assert_msg(strstr(log, "cgroup.kill=1\n"), "%s", log);
	ck_assert_int_eq(count_call_cgroups(fake), 0);
	sandbox_cgroup_fake(false);
}
END_TEST

/* Refusals of sandboxed peers are logged the first time, then at most once
 * an interval, with the count of those not logged. */
START_TEST(refusal_log_rate)
{
	unsigned more = 99;
	ck_assert(sandbox_refusal_due(1000, 60000, &more));
	ck_assert_uint_eq(more, 0);
	for (int i = 0; i < 1000; i++)
		ck_assert(!sandbox_refusal_due(1000 + (uint64_t)i * 10, 60000, &more));
	ck_assert(sandbox_refusal_due(61000, 60000, &more));
	ck_assert_uint_eq(more, 1000);
	ck_assert(!sandbox_refusal_due(61001, 60000, &more));
	ck_assert(sandbox_refusal_due(200000, 60000, &more));
	ck_assert_uint_eq(more, 1);
}
END_TEST

/* --- the socket ----------------------------------------------------------------------- */

START_TEST(peer_confined)
{
	ck_assert(!sandbox_pid_confined(getpid(), -1));
	ck_assert(!sandbox_pid_confined(getppid(), -1));
	/* While it runs, a spawned child counts as confined. */
	char *argv[] = { (char *)"sleep", (char *)"5", NULL };
	char *envp[] = { (char *)"PATH=/usr/bin:/bin", NULL };
	struct child *ch = NULL;
	struct child_opts o = { .argv = argv, .envp = envp, .cwd_fd = -1, .on_done = NULL };
	ck_assert_int_eq(child_spawn(loop, &o, &ch), 0);
	ck_assert(sandbox_pid_confined(child_pid(ch), -1));
	child_free(ch);
}
END_TEST

/* --- command tools: the options rule ------------------------------------------------------- */

static struct tool *command(const char *decl)
{
	struct json_doc *doc;
	struct json_err jerr;
	ck_assert_int_eq(json_parse(decl, strlen(decl), 0, 0, &doc, &jerr), 0);
	struct tool *t = NULL;
	char *err = NULL;
	int r = command_tool_from_json(json_doc_root(doc), "test", &t, &err);
	ck_assert_msg(r == 0, "%s", err ? err : "?");
	json_doc_unref(doc);
	return t;
}

START_TEST(command_options_rule)
{
	env.sandbox = NULL;
	const char *schema = "\"input_schema\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}}}";
	char decl[512];
	struct run r;

	snprintf(decl, sizeof(decl), "{\"name\":\"e\",\"side_effects\":\"read\",\"argv\":[\"echo\",\"{{x}}\"],%s}", schema);
	struct tool *t = command(decl);
	run_call(&r, t, "{\"x\":\"--output=/elsewhere\"}", NULL);
	ck_assert_int_eq(r.c.kind, TC_VALIDATION_ERROR);
	ck_assert_msg(strstr(r.c.message, "/x") && strstr(r.c.message, "'-'"), "%s", r.c.message);
	run_done(&r);
	run_call(&r, t, "{\"x\":\"plain-value\"}", NULL);
	ck_assert_int_eq(r.c.kind, TC_OK);
	run_done(&r);
	tool_unref(t);

	snprintf(decl, sizeof(decl), "{\"name\":\"e\",\"side_effects\":\"read\",\"argv\":[\"echo\",\"--\",\"{{x}}\"],%s}", schema);
	t = command(decl);
	run_call(&r, t, "{\"x\":\"-n\"}", NULL);
	ck_assert_int_eq(r.c.kind, TC_OK);
	ck_assert_str_eq(sc_str(&r, "stdout"), "-- -n\n");
	run_done(&r);
	tool_unref(t);

	snprintf(decl, sizeof(decl), "{\"name\":\"e\",\"side_effects\":\"read\",\"options_allowed\":true,\"argv\":[\"echo\",\"{{x}}\"],%s}", schema);
	t = command(decl);
	run_call(&r, t, "{\"x\":\"-e\"}", NULL);
	ck_assert_int_eq(r.c.kind, TC_OK);
	run_done(&r);
	tool_unref(t);
}
END_TEST

/* The rule holds for the element, not its first placeholder: an empty
 * value before "-rf" leaves the element starting with '-'; a literal
 * before the value does not; after "--" or with options_allowed, anything
 * goes. */
START_TEST(command_options_rule_whole_element)
{
	env.sandbox = NULL;
	const char *schema = "\"input_schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
			     "\"b\":{\"type\":\"string\"}}}";
	char decl[512];
	struct run r;

	snprintf(decl, sizeof(decl), "{\"name\":\"e\",\"side_effects\":\"read\",\"argv\":[\"echo\",\"{{a}}{{b}}\"],%s}",
		 schema);
	struct tool *t = command(decl);
	static const char *const refused[] = {
		"{\"a\":\"\",\"b\":\"-rf\"}", "{\"b\":\"-rf\"}", "{\"a\":\"-r\",\"b\":\"f\"}",
	};
	for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
		run_call(&r, t, refused[i], NULL);
		ck_assert_msg(r.c.kind == TC_VALIDATION_ERROR, "%s ran", refused[i]);
		ck_assert_msg(strstr(r.c.message, "'-'"), "%s", r.c.message);
		run_done(&r);
	}
	run_call(&r, t, "{\"a\":\"x\",\"b\":\"-rf\"}", NULL);
	ck_assert_int_eq(r.c.kind, TC_OK);
	ck_assert_str_eq(sc_str(&r, "stdout"), "x-rf\n");
	run_done(&r);
	tool_unref(t);

	snprintf(decl, sizeof(decl), "{\"name\":\"e\",\"side_effects\":\"read\",\"argv\":[\"echo\",\"x{{a}}\"],%s}", schema);
	t = command(decl);
	run_call(&r, t, "{\"a\":\"-y\"}", NULL);
	ck_assert_int_eq(r.c.kind, TC_OK);
	ck_assert_str_eq(sc_str(&r, "stdout"), "x-y\n");
	run_done(&r);
	tool_unref(t);

	snprintf(decl, sizeof(decl), "{\"name\":\"e\",\"side_effects\":\"read\",\"argv\":[\"echo\",\"--\",\"{{a}}{{b}}\"],%s}",
		 schema);
	t = command(decl);
	run_call(&r, t, "{\"a\":\"\",\"b\":\"-rf\"}", NULL);
	ck_assert_int_eq(r.c.kind, TC_OK);
	ck_assert_str_eq(sc_str(&r, "stdout"), "-- -rf\n");
	run_done(&r);
	tool_unref(t);

	snprintf(decl, sizeof(decl), "{\"name\":\"e\",\"side_effects\":\"read\",\"options_allowed\":true,"
		 "\"argv\":[\"echo\",\"{{a}}{{b}}\"],%s}", schema);
	t = command(decl);
	run_call(&r, t, "{\"a\":\"\",\"b\":\"-n\"}", NULL);
	ck_assert_int_eq(r.c.kind, TC_OK);
	run_done(&r);
	tool_unref(t);
}
END_TEST

START_TEST(command_tool_sandbox_key)
{
	NEED_KERNEL("command_tool_sandbox_key");
	struct tool *t = command("{\"name\":\"w\",\"side_effects\":\"write\",\"argv\":[\"sh\",\"-c\",\"echo x > made\"],"
				 "\"sandbox\":{\"profile\":\"read-only\"}}");
	struct run r;
	run_call(&r, t, "{}", NULL);
	ck_assert_int_eq(r.c.kind, TC_EXECUTION_ERROR);
	ck_assert_msg(strstr(r.c.message, "[sandbox]"), "%s", r.c.message);
	run_done(&r);
	tool_unref(t);

	static const char *const bad[] = {
		"{\"name\":\"w\",\"side_effects\":\"write\",\"argv\":[\"x\"],\"sandbox\":{\"profile\":\"none\"}}",
		"{\"name\":\"w\",\"side_effects\":\"write\",\"argv\":[\"x\"],\"sandbox\":{\"network\":1}}",
		"{\"name\":\"w\",\"side_effects\":\"write\",\"argv\":[\"x\"],\"run_as\":\"root\"}",
		"{\"name\":\"w\",\"side_effects\":\"write\",\"argv\":[\"x\"],\"options_allowed\":\"yes\"}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct json_doc *doc;
		struct json_err jerr;
		ck_assert_int_eq(json_parse(bad[i], strlen(bad[i]), 0, 0, &doc, &jerr), 0);
		char *err = NULL;
		ck_assert_msg(command_tool_from_json(json_doc_root(doc), "test", &t, &err) == -EINVAL, "%s", bad[i]);
		free(err);
		json_doc_unref(doc);
	}
}
END_TEST

/* --- degradation: a kernel without the feature ------------------------------------------------ */

START_TEST(without_landlock)
{
	if (!deny_syscall_or_skip("without_landlock", SYS_landlock_create_ruleset))
		return;
	const struct sandbox_features *f = sandbox_probe(NULL);
	ck_assert_int_eq(f->landlock_abi, 0);
	char *line = sandbox_features_line(f);
	ck_assert_ptr_nonnull(strstr(line, "landlock: no"));
	free(line);

	struct run r;
	sh(&r, "echo ran > ran", NULL);
	ck_assert_int_eq(r.c.kind, TC_PERMISSION_DENIED);
	ck_assert_msg(strstr(r.c.message, "Landlock") && strstr(r.c.message, "sandbox.require"), "%s", r.c.message);
	run_done(&r);
	char path[PATH_MAX + 8];
	snprintf(path, sizeof(path), "%s/ran", wsdir);
	ck_assert_int_lt(access(path, F_OK), 0);

	/* Without require, it runs, saying what was not enforced. */
	cfg.require = false;
	sh(&r, "echo ran > ran", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	ck_assert(enforced(&r, "not_enforced", "landlock"));
	run_done(&r);
}
END_TEST

START_TEST(without_seccomp)
{
	if (!deny_syscall_or_skip("without_seccomp", SYS_seccomp))
		return;
	const struct sandbox_features *f = sandbox_probe(NULL);
	ck_assert(!f->seccomp);
	struct run r;
	sh(&r, "true", NULL);
	ck_assert_int_eq(r.c.kind, TC_PERMISSION_DENIED);
	ck_assert_msg(strstr(r.c.message, "seccomp"), "%s", r.c.message);
	run_done(&r);
	/* Profile off needs nothing. */
	cfg.profile = SANDBOX_OFF;
	sh(&r, "true", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	run_done(&r);
}
END_TEST

START_TEST(without_cgroup)
{
	const struct sandbox_features *f = sandbox_probe("/nonexistent/cgroup");
	ck_assert(!f->cgroup);
	char *line = sandbox_features_line(f);
	ck_assert_ptr_nonnull(strstr(line, "cgroup v2 delegated: no"));
	free(line);
	NEED_KERNEL("without_cgroup");
	struct run r;
	sh(&r, "true", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	ck_assert(!enforced(&r, "enforced", "cgroup"));
	run_done(&r);
}
END_TEST

START_TEST(without_mount_namespaces)
{
	if (!deny_syscall_or_skip("without_mount_namespaces", SYS_unshare))
		return;
	const struct sandbox_features *f = sandbox_probe(NULL);
	ck_assert(!f->mountns);
	NEED_KERNEL("without_mount_namespaces");
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/.git", wsdir);
	ck_assert_int_eq(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/.git/config", wsdir);
	write_file(path, "[core]\n", 0666);
	struct run r;
	sh(&r, "true", NULL);
	ck_assert_int_eq(exit_code(&r), 0);
	ck_assert(enforced(&r, "not_enforced", "protect"));
	run_done(&r);
}
END_TEST

/* A kernel without open_tree (before 5.2), emulated: the call's own
 * TMPDIR is bound back through /proc/self/fd instead, still the only one
 * its namespace shows, and writable. */
START_TEST(without_open_tree)
{
	NEED_ROOT("without_open_tree");
	if (!deny_syscall_or_skip("without_open_tree", SYS_open_tree))
		return;
	NEED_KERNEL("without_open_tree");
	struct run r;
	/* 64 KiB: more than the 4 KiB tmpfs covering the others holds. */
	sh(&r, "head -c 65536 /dev/zero > \"$TMPDIR/f\" && wc -c < \"$TMPDIR/f\" && "
	       "ls -a \"$(dirname \"$TMPDIR\")\" | wc -l", NULL);
	ck_assert_msg(exit_code(&r) == 0, "%s", r.c.text);
	ck_assert(enforced(&r, "enforced", "tmpdir hidden"));
	ck_assert_str_eq(sc_str(&r, "stdout"), "65536\n3\n");	/* ".", ".." and its own */
	run_done(&r);
}
END_TEST

static Suite *sandbox_suite(void)
{
	Suite *s = suite_create("sandbox");
	TCase *tc = tcase_create("profile");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, features_line);
	tcase_add_test(tc, protected_nested_repositories);
	tcase_add_test(tc, namespace_key);
	tcase_add_test(tc, denied_path_in_a_workspace);
	tcase_add_test(tc, denied_paths_covered_cost_no_rules);
	tcase_add_test(tc, crowded_directory_not_split);
	tcase_add_test(tc, profile_builder);
	tcase_add_test(tc, protect_plan_git_kinds);
	tcase_add_test(tc, config_json);
	tcase_add_test(tc, interpreter_script_operand);
	tcase_add_test(tc, network_proxy_setting);
	tcase_add_test(tc, identity_for_children_decides);
	tcase_add_test(tc, shell_file_system);
	tcase_add_test(tc, shell_read_only);
	tcase_add_test(tc, shell_protect);
	tcase_add_test(tc, shell_network);
	tcase_add_test(tc, shell_network_proxy);
	tcase_add_test(tc, seccomp_filter_refuses);
	tcase_add_test(tc, spawner_filter_setns);
	tcase_add_test(tc, spawned_cwd_checked);
	tcase_add_test(tc, shell_as_peer);
	tcase_add_test(tc, shell_memory_limit);
	tcase_add_test(tc, shell_pids_limit);
	tcase_add_test(tc, command_limit_named);
	tcase_add_test(tc, cleanup_by_cgroup);
	tcase_add_test(tc, cleanup_by_subreaper);
	tcase_add_test(tc, cgroup_written);
	tcase_add_test(tc, refusal_log_rate);
	tcase_add_test(tc, peer_confined);
	tcase_add_test(tc, command_options_rule);
	tcase_add_test(tc, command_options_rule_whole_element);
	tcase_add_test(tc, command_tool_sandbox_key);
	tcase_add_test(tc, shell_tmpdir_hidden_without_namespace);
	suite_add_tcase(s, tc);

	tc = tcase_create("degradation");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, without_landlock);
	tcase_add_test(tc, without_seccomp);
	tcase_add_test(tc, without_cgroup);
	tcase_add_test(tc, without_mount_namespaces);
	tcase_add_test(tc, without_open_tree);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc == 2 && str_eq(argv[1], "--seccomp-probe")) {
		/* _exit: a leak checker at exit would need ptrace, refused. */
		(void)seccomp_probe();
		fflush(stdout);
		_exit(0);
	}
	if (!realpath("/proc/self/exe", self_exe))
		return 1;
	return run_suite(sandbox_suite());
}
