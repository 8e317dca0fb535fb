/* SPDX-License-Identifier: MIT */
/*
 * Escapes from the workspace, tried against every file tool (read_file,
 * write_file, patch_file, list_dir) on the tree of workspace_fixture.h:
 * the tree outside the workspace is compared before and after to prove
 * nothing there was read into a result, changed or created. Then what is
 * allowed, and symlinks made absolute (naming base/ws/... in full, as
 * users and scripts make them): either kind works while it leads beneath
 * the root. Every case runs with the kernel's openat2 and with the walk
 * used where openat2 is missing.
 * Long because the escape matrix is one piece: every escape against every
 * tool, for relative and absolute links alike.
 */
#include "tests/unit/workspace_fixture.h"

#include "tests/unit/check_main.h"
#include "tests/unit/deny_syscall.h"

/* Asserts the call was refused as an escape, naming the path as given. */
static void assert_escape(struct result *res, const char *given)
{
	_cleanup_free_ char *path = expand_at(given);
	_cleanup_free_ char *want = xasprintf("Path '%s' escapes the workspace", path);
	ck_assert_msg(res->call.kind == TC_PERMISSION_DENIED, "'%s': expected permission_denied, got %s (%s)",
		      path, tc_kind_name(res->call.kind),
		      res->call.message ? res->call.message : res->call.structured);
	ck_assert_str_eq(res->call.message, want);
	ck_assert_uint_eq(res->call.n_files, 0);
}

START_TEST(escape_read_file)
{
	_cleanup_free_ char *before = outside_snapshot();
	struct result res;
	for (size_t i = 0; i < n_escape_files; i++) {
		run(&tool_read_file, &res, "{\"path\":\"%s\"}", escape_files[i]);
		assert_escape(&res, escape_files[i]);
		result_clear(&res);
	}
	for (size_t i = 0; i < n_escape_creates; i++) {
		run(&tool_read_file, &res, "{\"path\":\"%s\"}", escape_creates[i]);
		assert_escape(&res, escape_creates[i]);
		result_clear(&res);
	}
	_cleanup_free_ char *after = outside_snapshot();
	ck_assert_str_eq(before, after);
}
END_TEST

START_TEST(escape_write_file)
{
	_cleanup_free_ char *before = outside_snapshot();
	struct result res;
	for (int dirs = 0; dirs <= 1; dirs++) {
		for (size_t i = 0; i < n_escape_files; i++) {
			run(&tool_write_file, &res, "{\"path\":\"%s\",\"content\":\"pwned\",\"create_dirs\":%s}",
			    escape_files[i], dirs ? "true" : "false");
			assert_escape(&res, escape_files[i]);
			result_clear(&res);
		}
		for (size_t i = 0; i < n_escape_creates; i++) {
			run(&tool_write_file, &res, "{\"path\":\"%s\",\"content\":\"pwned\",\"create_dirs\":%s}",
			    escape_creates[i], dirs ? "true" : "false");
			assert_escape(&res, escape_creates[i]);
			result_clear(&res);
		}
	}
	/* Outside: nothing changed, nothing created. */
	_cleanup_free_ char *after = outside_snapshot();
	ck_assert_str_eq(before, after);
	ck_assert(!exists("created-outside.txt"));
	ck_assert(!exists("outdir/created.txt"));
	/* Nor inside, through a link that went out and back. */
	_cleanup_free_ char *hello = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(hello, "hello\n");
	/* The links themselves are untouched. */
	char target[PATH_MAX];
	ssize_t k = readlink(at("ws/link-out-file"), target, sizeof(target) - 1);
	ck_assert_int_gt(k, 0);
	target[k] = '\0';
	ck_assert_str_eq(target, "../outside.txt");
}
END_TEST

START_TEST(escape_patch_file)
{
	_cleanup_free_ char *before = outside_snapshot();
	struct result res;
	for (size_t i = 0; i < n_escape_files; i++) {
		/* "ecr" occurs once in outside.txt: only the refusal keeps it unchanged. */
		run(&tool_patch_file, &res, "{\"path\":\"%s\",\"old\":\"ecr\",\"new\":\"PWNED\"}", escape_files[i]);
		assert_escape(&res, escape_files[i]);
		result_clear(&res);
	}
	_cleanup_free_ char *after = outside_snapshot();
	ck_assert_str_eq(before, after);
}
END_TEST

START_TEST(escape_list_dir)
{
	struct result res;
	for (size_t i = 0; i < n_escape_dirs; i++) {
		for (int rec = 0; rec <= 1; rec++) {
			run(&tool_list_dir, &res, "{\"path\":\"%s\",\"recursive\":%s}", escape_dirs[i],
			    rec ? "true" : "false");
			assert_escape(&res, escape_dirs[i]);
			result_clear(&res);
		}
	}
	for (size_t i = 0; i < n_escape_files; i++) {
		run(&tool_list_dir, &res, "{\"path\":\"%s\"}", escape_files[i]);
		assert_escape(&res, escape_files[i]);
		result_clear(&res);
	}
}
END_TEST

START_TEST(escape_nul_byte)
{
	_cleanup_free_ char *before = outside_snapshot();
	struct result res;
	const char *p = "hello.txt\\u0000../../outside.txt";

	run(&tool_read_file, &res, "{\"path\":\"%s\"}", p);
	assert_fail(&res, TC_PERMISSION_DENIED, "Path contains a NUL byte");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"%s\",\"content\":\"x\"}", p);
	assert_fail(&res, TC_PERMISSION_DENIED, "Path contains a NUL byte");
	result_clear(&res);
	run(&tool_patch_file, &res, "{\"path\":\"%s\",\"old\":\"h\",\"new\":\"x\"}", p);
	assert_fail(&res, TC_PERMISSION_DENIED, "Path contains a NUL byte");
	result_clear(&res);
	run(&tool_list_dir, &res, "{\"path\":\"sub\\u0000/..\"}");
	assert_fail(&res, TC_PERMISSION_DENIED, "Path contains a NUL byte");
	result_clear(&res);

	_cleanup_free_ char *after = outside_snapshot();
	ck_assert_str_eq(before, after);
	_cleanup_free_ char *hello = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(hello, "hello\n");

	/* The API itself, with the length counting the NUL. */
	static const char raw[] = "hello.txt\0/x";
	int fd = -1;
	ck_assert_int_eq(ws_openat(ws, raw, sizeof(raw) - 1, O_RDONLY, 0, &fd), -EINVAL);
	ck_assert_int_eq(ws_check(ws, raw, sizeof(raw) - 1), -EINVAL);
	char *name = NULL;
	ck_assert_int_eq(ws_open_parent(ws, raw, sizeof(raw) - 1, true, &fd, &name), -EINVAL);
	ck_assert_int_eq(fd, -1);
	ck_assert_ptr_null(name);
}
END_TEST

/* A /proc magic link beneath the root is refused as an escape, not reported as a loop. */
START_TEST(escape_magic_links)
{
	struct workspace *proc = NULL;
	ck_assert_int_eq(ws_open("/proc/self", &proc), 0);
	int fd = -1;
	ck_assert_int_eq(ws_openat(proc, "root/etc/passwd", strlen("root/etc/passwd"), O_RDONLY, 0, &fd), -EXDEV);
	ck_assert_int_eq(ws_openat(proc, "cwd/hello.txt", strlen("cwd/hello.txt"), O_RDONLY, 0, &fd), -EXDEV);
	ck_assert_int_eq(ws_openat(proc, "exe", 3, O_RDONLY, 0, &fd), -EXDEV);
	ck_assert_int_eq(ws_check(proc, "root/etc", 8), -EXDEV);
	ck_assert_int_eq(fd, -1);

	struct tool_call call = { .ws = proc };
	struct json_doc *args = parse("{\"path\":\"root/etc/passwd\"}");
	call.args = json_doc_root(args);
	tool_read_file.exec(&call);
	ck_assert_int_eq(call.kind, TC_PERMISSION_DENIED);
	ck_assert_str_eq(call.message, "Path 'root/etc/passwd' escapes the workspace");
	tool_call_clear(&call);
	json_doc_unref(args);
	ws_unref(proc);

	/* With "/" as the root, absolute paths are inside, and /proc/self/root is still refused. */
	struct workspace *slash = NULL;
	ck_assert_int_eq(ws_open("/", &slash), 0);
	ck_assert_str_eq(slash->root, "/");
	const char *p = "/proc/self/root/etc/passwd";
	ck_assert_int_eq(ws_openat(slash, p, strlen(p), O_RDONLY, 0, &fd), -EXDEV);
	p = "/proc/self/fd/0";
	ck_assert_int_eq(ws_openat(slash, p, strlen(p), O_RDONLY, 0, &fd), -EXDEV);
	/* and an ordinary absolute path works */
	ck_assert_int_eq(ws_openat(slash, root, strlen(root), O_PATH, 0, &fd), 0);
	close(fd);
	ws_unref(slash);
}
END_TEST

/* --- what is allowed ------------------------------------------------------- */

START_TEST(allowed_reads)
{
	static const struct { const char *path, *content, *display; } cases[] = {
		{ "hello.txt", "hello\n", "hello.txt" },
		{ "./hello.txt", "hello\n", "hello.txt" },
		{ "sub/../hello.txt", "hello\n", "sub/../hello.txt" },
		{ "sub//inner.txt", "inner\n", "sub/inner.txt" },
		{ "@/ws/hello.txt", "hello\n", "hello.txt" },
		{ "@/ws//./sub/inner.txt", "inner\n", "sub/inner.txt" },
		{ "link-in", "hello\n", "link-in" },
		{ "link-chain-in", "hello\n", "link-chain-in" },
		{ "sub/link-up", "hello\n", "sub/link-up" },
		{ "link-in-dir/inner.txt", "inner\n", "link-in-dir/inner.txt" },
		{ "link-in-dir/../hello.txt", "hello\n", "link-in-dir/../hello.txt" },
		{ "..test", "dotdot-test\n", "..test" },
		{ "a/..b", "a-dotdot-b\n", "a/..b" },
		{ "@/ws/a/..b", "a-dotdot-b\n", "a/..b" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct result res;
		run(&tool_read_file, &res, "{\"path\":\"%s\"}", cases[i].path);
		assert_ok(&res);
		ck_assert_str_eq(sc_str(&res, "content"), cases[i].content);
		_cleanup_free_ char *numbered = xasprintf("     1\t%s", cases[i].content);
		ck_assert_str_eq(res.call.text, numbered);
		ck_assert_str_eq(sc_str(&res, "path"), cases[i].display);
		ck_assert_str_eq(sc_str(&res, "encoding"), "utf8");
		ck_assert_int_eq(sc_int(&res, "size"), (int64_t)strlen(cases[i].content));
		ck_assert(!sc_bool(&res, "truncated"));
		result_clear(&res);
	}
}
END_TEST

START_TEST(allowed_writes)
{
	struct result res;

	/* Through a symlink inside: the file it leads to is replaced, the link kept. */
	run(&tool_write_file, &res, "{\"path\":\"link-chain-in\",\"content\":\"via link\\n\"}");
	assert_ok(&res);
	ck_assert(!sc_bool(&res, "created"));
	result_clear(&res);
	_cleanup_free_ char *hello = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(hello, "via link\n");
	struct stat st;
	ck_assert_int_eq(lstat(at("ws/link-in"), &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(lstat(at("ws/link-chain-in"), &st), 0);
	ck_assert(S_ISLNK(st.st_mode));

	/* A dangling symlink inside: its target is created. */
	run(&tool_write_file, &res, "{\"path\":\"link-dangling-in\",\"content\":\"made\"}");
	assert_ok(&res);
	ck_assert(sc_bool(&res, "created"));
	result_clear(&res);
	_cleanup_free_ char *made = slurp("ws/made-by-link.txt", NULL);
	ck_assert_str_eq(made, "made");

	static const struct { const char *path, *file; } cases[] = {
		{ "@/ws/abs.txt", "ws/abs.txt" },
		{ "..test", "ws/..test" },
		{ "a/..b", "ws/a/..b" },
		{ "sub/link-up", "ws/hello.txt" },
		{ "link-in-dir/via-dir.txt", "ws/sub/via-dir.txt" },
		{ "sub/../up.txt", "ws/up.txt" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		run(&tool_write_file, &res, "{\"path\":\"%s\",\"content\":\"case %zu\"}", cases[i].path, i);
		assert_ok(&res);
		result_clear(&res);
		_cleanup_free_ char *c = slurp(cases[i].file, NULL);
		_cleanup_free_ char *want = xasprintf("case %zu", i);
		ck_assert_msg(c && str_eq(c, want), "%s: %s", cases[i].path, c ? c : "(missing)");
	}
}
END_TEST

START_TEST(allowed_patch_and_list)
{
	struct result res;
	run(&tool_patch_file, &res, "{\"path\":\"link-chain-in\",\"old\":\"hello\",\"new\":\"HELLO\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "path"), "link-chain-in");
	result_clear(&res);
	_cleanup_free_ char *hello = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(hello, "HELLO\n");

	run(&tool_patch_file, &res, "{\"path\":\"@/ws/a/..b\",\"old\":\"dotdot\",\"new\":\"dd\"}");
	assert_ok(&res);
	result_clear(&res);
	_cleanup_free_ char *ab = slurp("ws/a/..b", NULL);
	ck_assert_str_eq(ab, "a-dd-b\n");

	static const char *const dirs[] = { "link-in-dir", "@/ws/sub", "sub/../sub", "a/../link-in-dir/" };
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		run(&tool_list_dir, &res, "{\"path\":\"%s\"}", dirs[i]);
		assert_ok(&res);
		const struct json *e = json_get(res.sc, "entries");
		ck_assert_uint_eq(e->u.arr.n, 2);
		ck_assert_str_eq(json_str(json_get(e->u.arr.items[0], "name")), "inner.txt");
		ck_assert_str_eq(json_str(json_get(e->u.arr.items[1], "name")), "link-up");
		result_clear(&res);
	}
	for (size_t i = 0; i < 3; i++) {
		static const char *const roots[] = { "{}", "{\"path\":\"\"}", "{\"path\":\"@/ws\"}" };
		run(&tool_list_dir, &res, "%s", roots[i]);
		assert_ok(&res);
		ck_assert_str_eq(sc_str(&res, "path"), ".");
		const struct json *e = json_get(res.sc, "entries");
		ck_assert_str_eq(json_str(json_get(e->u.arr.items[0], "name")), "..test");
		result_clear(&res);
	}
}
END_TEST

START_TEST(symlink_loops)
{
	struct result res;
	run(&tool_read_file, &res, "{\"path\":\"link-loop-a\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "too many levels of symbolic links");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"link-loop-b\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "too many levels of symbolic links");
	result_clear(&res);
	struct stat st;
	ck_assert_int_eq(lstat(at("ws/link-loop-b"), &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	assert_no_temp("ws");
}
END_TEST


/* --- absolute symlinks ------------------------------------------------------ */

START_TEST(abs_reads)
{
	static const struct { const char *path, *content; } cases[] = {
		{ "link-in-abs", "hello\n" },
		{ "link-abs-chain", "hello\n" },		/* absolute, then relative */
		{ "link-rel-to-abs", "hello\n" },		/* relative, then absolute */
		{ "link-abs-dir/inner.txt", "inner\n" },
		{ "link-abs-dir/./inner.txt", "inner\n" },
		{ "link-abs-dir/link-up", "hello\n" },		/* a relative link beyond it */
		{ "link-abs-dir/../hello.txt", "hello\n" },	/* ".." from where the link led */
		{ "deep/link-abs-up/inner.txt", "inner\n" },	/* absolute to a relative directory link */
		{ "link-abs-messy/inner.txt", "inner\n" },	/* "//", "/./" and a trailing slash in the target */
		{ "link-abs-root/hello.txt", "hello\n" },
		{ "link-abs-root/link-abs-root/sub/inner.txt", "inner\n" },
		{ "@/ws/link-abs-dir/inner.txt", "inner\n" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct result res;
		run(&tool_read_file, &res, "{\"path\":\"%s\"}", cases[i].path);
		assert_ok(&res);
		ck_assert_str_eq(sc_str(&res, "content"), cases[i].content);
		result_clear(&res);
	}
	/* The path is shown as the client named it, not where the link led. */
	struct result res;
	run(&tool_read_file, &res, "{\"path\":\"link-abs-dir/inner.txt\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "path"), "link-abs-dir/inner.txt");
	result_clear(&res);

	/* What is not there is reported as missing, not as an escape. */
	run(&tool_read_file, &res, "{\"path\":\"link-abs-dir/nope.txt\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "File 'link-abs-dir/nope.txt' not found");
	result_clear(&res);
	run(&tool_read_file, &res, "{\"path\":\"link-abs-dangling\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "not found");
	result_clear(&res);
	run(&tool_read_file, &res, "{\"path\":\"link-in-abs/x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "not a directory");
	result_clear(&res);
	run(&tool_read_file, &res, "{\"path\":\"link-abs-dir\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);
}
END_TEST

START_TEST(abs_writes)
{
	struct result res;

	/* Through an absolute link to a file: the file is replaced (mode kept), the link kept. */
	ck_assert_int_eq(chmod(at("ws/hello.txt"), 0600), 0);
	run(&tool_write_file, &res, "{\"path\":\"link-in-abs\",\"content\":\"abs\"}");
	assert_ok(&res);
	ck_assert(!sc_bool(&res, "created"));
	ck_assert_str_eq(sc_str(&res, "path"), "link-in-abs");
	result_clear(&res);
	_cleanup_free_ char *c1 = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(c1, "abs");
	ck_assert_uint_eq(mode_of("ws/hello.txt"), 0600);
	char target[PATH_MAX];
	ssize_t k = readlink(at("ws/link-in-abs"), target, sizeof(target) - 1);
	ck_assert_int_gt(k, 0);
	target[k] = '\0';
	ck_assert_str_eq(target, at("ws/hello.txt"));

	/* Chains mixing both kinds. */
	run(&tool_write_file, &res, "{\"path\":\"link-abs-chain\",\"content\":\"chain 1\"}");
	assert_ok(&res);
	result_clear(&res);
	_cleanup_free_ char *c2 = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(c2, "chain 1");
	run(&tool_write_file, &res, "{\"path\":\"link-rel-to-abs\",\"content\":\"chain 2\"}");
	assert_ok(&res);
	result_clear(&res);
	_cleanup_free_ char *c3 = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(c3, "chain 2");
	static const char *const links[] = { "ws/link-in", "ws/link-in-abs", "ws/link-abs-chain", "ws/link-rel-to-abs" };
	for (size_t i = 0; i < ELEMENTSOF(links); i++) {
		struct stat st;
		ck_assert_int_eq(lstat(at(links[i]), &st), 0);
		ck_assert_msg(S_ISLNK(st.st_mode), "%s replaced", links[i]);
	}

	/* A dangling absolute link inside: its target is created. */
	run(&tool_write_file, &res, "{\"path\":\"link-abs-dangling\",\"content\":\"made\"}");
	assert_ok(&res);
	ck_assert(sc_bool(&res, "created"));
	result_clear(&res);
	_cleanup_free_ char *made = slurp("ws/made-by-abs.txt", NULL);
	ck_assert_str_eq(made, "made");

	/* Into directories reached through absolute links. */
	static const struct { const char *path, *file; bool dirs; } cases[] = {
		{ "link-abs-dir/new.txt", "ws/sub/new.txt", false },
		{ "link-abs-dir/d1/d2/f.txt", "ws/sub/d1/d2/f.txt", true },
		{ "deep/link-abs-up/via-up.txt", "ws/sub/via-up.txt", false },
		{ "link-abs-root/top.txt", "ws/top.txt", false },
		{ "link-abs-root/link-abs-dir/../root-again.txt", "ws/root-again.txt", false },
		{ "link-abs-messy/messy.txt", "ws/sub/messy.txt", false },
		{ "@/ws/link-abs-dir/abs-path.txt", "ws/sub/abs-path.txt", false },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		run(&tool_write_file, &res, "{\"path\":\"%s\",\"content\":\"case %zu\",\"create_dirs\":%s}",
		    cases[i].path, i, cases[i].dirs ? "true" : "false");
		assert_ok(&res);
		ck_assert(sc_bool(&res, "created"));
		result_clear(&res);
		_cleanup_free_ char *c = slurp(cases[i].file, NULL);
		_cleanup_free_ char *want = xasprintf("case %zu", i);
		ck_assert_msg(c && str_eq(c, want), "%s: %s", cases[i].path, c ? c : "(missing)");
	}

	/* create_dirs makes the directories named, as "mkdir -p": not the
	 * missing target of a dangling link, absolute or relative. */
	static const char *const dangling[] = { "link-dangling-in/x.txt", "link-abs-dangling/x.txt",
						"link-abs-dangling/d/x.txt" };
	for (size_t i = 0; i < ELEMENTSOF(dangling); i++) {
		run(&tool_write_file, &res, "{\"path\":\"%s\",\"content\":\"x\",\"create_dirs\":true}", dangling[i]);
		ck_assert_msg(res.call.kind == TC_EXECUTION_ERROR, "%s: %s", dangling[i],
			      res.call.message ? res.call.message : res.call.structured);
		result_clear(&res);
	}
	ck_assert(!exists("ws/made-by-link.txt"));
	ck_assert(exists("ws/made-by-abs.txt"));	/* the file made above, not a directory */
	ck_assert_int_eq(unlink(at("ws/made-by-abs.txt")), 0);
	run(&tool_write_file, &res, "{\"path\":\"link-abs-dangling/d/x.txt\",\"content\":\"x\",\"create_dirs\":true}");
	ck_assert_int_eq(res.call.kind, TC_EXECUTION_ERROR);
	result_clear(&res);
	ck_assert(!exists("ws/made-by-abs.txt"));

	/* A link to a directory, or to the root, is no file. */
	run(&tool_write_file, &res, "{\"path\":\"link-abs-root\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"link-abs-dir\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);
	assert_no_temp("ws");
	assert_no_temp("ws/sub");
}
END_TEST

START_TEST(abs_patch_and_list)
{
	struct result res;
	run(&tool_patch_file, &res, "{\"path\":\"link-in-abs\",\"old\":\"hello\",\"new\":\"HELLO\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "path"), "link-in-abs");
	result_clear(&res);
	_cleanup_free_ char *hello = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(hello, "HELLO\n");
	struct stat st;
	ck_assert_int_eq(lstat(at("ws/link-in-abs"), &st), 0);
	ck_assert(S_ISLNK(st.st_mode));

	run(&tool_patch_file, &res, "{\"path\":\"link-abs-dir/inner.txt\",\"old\":\"inner\",\"new\":\"INNER\"}");
	assert_ok(&res);
	result_clear(&res);
	run(&tool_patch_file, &res, "{\"path\":\"link-abs-chain\",\"old\":\"HELLO\",\"new\":\"hi\"}");
	assert_ok(&res);
	result_clear(&res);
	_cleanup_free_ char *inner = slurp("ws/sub/inner.txt", NULL);
	ck_assert_str_eq(inner, "INNER\n");
	_cleanup_free_ char *hi = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(hi, "hi\n");

	/* Directories reached through absolute links list what they hold. */
	static const char *const dirs[] = { "link-abs-dir", "link-abs-dir/", "deep/link-abs-up", "link-abs-messy",
					    "link-abs-root/sub", "@/ws/link-abs-dir" };
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		for (int rec = 0; rec <= 1; rec++) {
			run(&tool_list_dir, &res, "{\"path\":\"%s\",\"recursive\":%s}", dirs[i], rec ? "true" : "false");
			assert_ok(&res);
			_cleanup_free_ char *got = entries_str(&res);
			ck_assert_msg(str_eq(got, "inner.txt:file:6 link-up:symlink:0"), "%s: %s", dirs[i], got);
			result_clear(&res);
		}
	}
	/* An absolute link to the root lists the root. */
	run(&tool_list_dir, &res, "{\"path\":\"link-abs-root\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "path"), "link-abs-root");
	const struct json *e = json_get(res.sc, "entries");
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[0], "name")), "..test");
	result_clear(&res);
}
END_TEST

/* Makes ws/chain-0 -> .../chain-1 -> ... -> .../chain-<n-1> -> .../hello.txt: n absolute links. */
static void abs_chain(const char *prefix, int n)
{
	for (int i = 0; i < n; i++) {
		char rel[64], next[64];
		snprintf(rel, sizeof(rel), "ws/%s-%d", prefix, i);
		if (i + 1 < n)
			snprintf(next, sizeof(next), "ws/%s-%d", prefix, i + 1);
		else
			snprintf(next, sizeof(next), "ws/hello.txt");
		lnk(at(next), rel);
	}
}

START_TEST(abs_loops)
{
	struct result res;
	static const char *const loops[] = { "link-abs-loop-a", "link-abs-loop-b", "link-abs-self", "link-abs-self/x" };
	for (size_t i = 0; i < ELEMENTSOF(loops); i++) {
		run(&tool_read_file, &res, "{\"path\":\"%s\"}", loops[i]);
		assert_fail(&res, TC_EXECUTION_ERROR, "too many levels of symbolic links");
		result_clear(&res);
		run(&tool_write_file, &res, "{\"path\":\"%s\",\"content\":\"x\",\"create_dirs\":true}", loops[i]);
		assert_fail(&res, TC_EXECUTION_ERROR, "too many levels of symbolic links");
		result_clear(&res);
		run(&tool_list_dir, &res, "{\"path\":\"%s\"}", loops[i]);
		assert_fail(&res, TC_EXECUTION_ERROR, "symbolic links");
		result_clear(&res);
		ck_assert_int_eq(ws_check(ws, loops[i], strlen(loops[i])), -ELOOP);
	}
	struct stat st;
	ck_assert_int_eq(lstat(at("ws/link-abs-self"), &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	assert_no_temp("ws");

	/* As the kernel: 40 links are followed, a 41st is a loop. */
	abs_chain("c40", 40);
	abs_chain("c41", 41);
	run(&tool_read_file, &res, "{\"path\":\"c40-0\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "hello\n");
	result_clear(&res);
	run(&tool_read_file, &res, "{\"path\":\"c41-0\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "too many levels of symbolic links");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"c40-0\",\"content\":\"forty\"}");
	assert_ok(&res);
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"c41-0\",\"content\":\"forty-one\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "too many levels of symbolic links");
	result_clear(&res);
	_cleanup_free_ char *hello = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(hello, "forty");
}
END_TEST

START_TEST(abs_api)
{
	int fd = -1;
	struct stat a, b;

	/* O_NOFOLLOW opens the link itself (O_PATH) or refuses it, as for relative links. */
	ck_assert_int_eq(ws_openat(ws, "link-in-abs", 11, O_PATH | O_NOFOLLOW, 0, &fd), 0);
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert(S_ISLNK(a.st_mode));
	close(fd);
	fd = -1;
	ck_assert_int_eq(ws_openat(ws, "link-in-abs", 11, O_RDONLY | O_NOFOLLOW, 0, &fd), -ELOOP);
	/* ... and concerns only the last component. */
	const char *p = "link-abs-dir/inner.txt";
	ck_assert_int_eq(ws_openat(ws, p, strlen(p), O_RDONLY | O_NOFOLLOW, 0, &fd), 0);
	close(fd);

	/* Directories: the one the link names. */
	ck_assert_int_eq(ws_openat(ws, "link-abs-dir", 12, O_RDONLY | O_DIRECTORY, 0, &fd), 0);
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(stat(at("ws/sub"), &b), 0);
	ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	p = "link-abs-root/";
	ck_assert_int_eq(ws_openat(ws, p, strlen(p), O_PATH | O_DIRECTORY, 0, &fd), 0);
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(stat(root, &b), 0);
	ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	fd = -1;
	ck_assert_int_eq(ws_openat(ws, "link-in-abs/", 12, O_RDONLY, 0, &fd), -ENOTDIR);
	ck_assert_int_eq(ws_openat(ws, "link-in-abs", 11, O_RDONLY | O_DIRECTORY, 0, &fd), -ENOTDIR);

	/* Creating through an absolute link, and O_EXCL never following the last one. */
	p = "link-abs-dir/by-openat";
	ck_assert_int_eq(ws_openat(ws, p, strlen(p), O_WRONLY | O_CREAT | O_EXCL, 0600, &fd), 0);
	close(fd);
	ck_assert(exists("ws/sub/by-openat"));
	fd = -1;
	p = "link-abs-dangling";
	ck_assert_int_eq(ws_openat(ws, p, strlen(p), O_WRONLY | O_CREAT | O_EXCL, 0600, &fd), -EEXIST);
	ck_assert(!exists("ws/made-by-abs.txt"));
	ck_assert_int_eq(fd, -1);

	/* ws_check: inside, missing parts inside, and out. */
	ck_assert_int_eq(check_path("link-abs-dir/new"), 0);
	ck_assert_int_eq(check_path("link-abs-dir/new/../../x"), 0);
	ck_assert_int_eq(check_path("link-abs-dangling"), 0);
	ck_assert_int_eq(check_path("link-abs-root"), 0);
	ck_assert_int_eq(check_path("@/ws/link-abs-root/sub"), 0);
	ck_assert_int_eq(check_path("link-abs-dir/new/../../../x"), -EXDEV);
	ck_assert_int_eq(check_path("link-abs-evil"), -EXDEV);
	ck_assert_int_eq(check_path("link-abs-dangling-out"), -EXDEV);
	ck_assert_int_eq(check_path("link-abs-out-dir/new"), -EXDEV);
	ck_assert_int_eq(check_path("link-abs-slash"), -EXDEV);
	ck_assert_int_eq(check_path("link-abs-dotdot"), -EXDEV);
	ck_assert_int_eq(check_path("link-in-abs/x"), -ENOTDIR);

	/* ws_open_parent: the directory the link leads to; directories made there only. */
	char *name = NULL;
	ck_assert_int_eq(ws_open_parent(ws, "link-abs-dir/x.txt", 18, false, &fd, &name), 0);
	ck_assert_str_eq(name, "x.txt");
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(stat(at("ws/sub"), &b), 0);
	ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	free(name);
	name = NULL;
	p = "link-abs-dir/n5/n6/f";
	ck_assert_int_eq(ws_open_parent(ws, p, strlen(p), true, &fd, &name), 0);
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(stat(at("ws/sub/n5/n6"), &b), 0);
	ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	free(name);
	fd = -1;
	name = NULL;
	p = "link-abs-out-dir/n7/f";
	ck_assert_int_eq(ws_open_parent(ws, p, strlen(p), true, &fd, &name), -EXDEV);
	p = "link-abs-dir/n8/../../../n9/f";
	ck_assert_int_eq(ws_open_parent(ws, p, strlen(p), true, &fd, &name), -EXDEV);
	ck_assert(!exists("outdir/n7"));
	ck_assert(!exists("ws/sub/n8"));
	ck_assert(!exists("n9"));
	ck_assert_int_eq(fd, -1);
	ck_assert_ptr_null(name);
}
END_TEST

/*
 * Magic links stay refused when an absolute link leads to them, even in a
 * workspace rooted at "/" where every absolute target is inside. The
 * targets lie in the test's tree, so a wrong answer changes nothing else.
 */
START_TEST(abs_magic_links)
{
	struct workspace *slash = NULL;
	ck_assert_int_eq(ws_open("/", &slash), 0);

	/* ws/link-proc -> /proc/self/root, an ordinary link to a magic one. */
	_cleanup_free_ char *via_root = xasprintf("%s/link-proc%s/hello.txt", root, root);
	int fd = -1;
	ck_assert_int_eq(ws_openat(slash, via_root, strlen(via_root), O_RDONLY, 0, &fd), -EXDEV);
	ck_assert_int_eq(ws_check(slash, via_root, strlen(via_root)), -EXDEV);
	ck_assert_int_eq(ws_write_atomic(slash, via_root, strlen(via_root), "pwned", 5, false, NULL), -EXDEV);

	/* An absolute link to /proc/self/fd/N, N open on a file inside. */
	int held = open(at("ws/hello.txt"), O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(held, 0);
	char fdlink[64];
	snprintf(fdlink, sizeof(fdlink), "/proc/self/fd/%d", held);
	lnk(fdlink, "ws/link-abs-fd");
	_cleanup_free_ char *via_fd = xasprintf("%s/link-abs-fd", root);
	ck_assert_int_eq(ws_openat(slash, via_fd, strlen(via_fd), O_RDONLY, 0, &fd), -EXDEV);
	ck_assert_int_eq(ws_openat(slash, via_fd, strlen(via_fd), O_PATH, 0, &fd), -EXDEV);
	ck_assert_int_eq(ws_write_atomic(slash, via_fd, strlen(via_fd), "pwned", 5, false, NULL), -EXDEV);
	struct buf out = {};
	ck_assert_int_eq(ws_read(slash, via_fd, strlen(via_fd), 0, 100, &out, NULL), -EXDEV);
	ck_assert_uint_eq(buf_size(&out), 0);
	buf_free(&out);
	ck_assert_int_eq(fd, -1);

	/* The same through the tool, and in the test's own workspace. */
	struct tool_call call = { .ws = slash };
	_cleanup_free_ char *args = xasprintf("{\"path\":\"%s\"}", via_fd);
	struct json_doc *doc = parse(args);
	call.args = json_doc_root(doc);
	tool_read_file.exec(&call);
	ck_assert_int_eq(call.kind, TC_PERMISSION_DENIED);
	tool_call_clear(&call);
	json_doc_unref(doc);
	ck_assert_int_eq(ws_openat(ws, "link-abs-fd", 11, O_RDONLY, 0, &fd), -EXDEV);
	close(held);

	/* An ordinary absolute link is still followed there. */
	_cleanup_free_ char *plain = xasprintf("%s/link-abs-dir/inner.txt", root);
	ck_assert_int_eq(ws_openat(slash, plain, strlen(plain), O_RDONLY, 0, &fd), 0);
	close(fd);
	ws_unref(slash);

	_cleanup_free_ char *hello = slurp("ws/hello.txt", NULL);
	ck_assert_str_eq(hello, "hello\n");
}
END_TEST

/*
 * While another process swaps absolute links between a place inside and
 * one outside, every call either reaches the inside or is refused: the
 * walk never follows a path it checked earlier, only fds.
 */
START_TEST(abs_swap_race)
{
	puts_file("outdir/inner.txt", "OUT\n");
	_cleanup_free_ char *before = outside_snapshot();

	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* Dies with the test, and stops on its own anyway. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		uint64_t end = mono_ms() + 10000;
		for (unsigned i = 0; mono_ms() < end; i++) {
			(void) unlink(at("ws/.flip-tmp"));
			if (symlink(i % 2 ? at("outside.txt") : at("ws/hello.txt"), at("ws/.flip-tmp")) == 0)
				(void) rename(at("ws/.flip-tmp"), at("ws/flip"));
			(void) unlink(at("ws/.flipdir-tmp"));
			if (symlink(i % 2 ? at("ws/sub") : at("outdir"), at("ws/.flipdir-tmp")) == 0)
				(void) rename(at("ws/.flipdir-tmp"), at("ws/flipdir"));
		}
		_exit(0);
	}
	/* Let the links appear. */
	for (uint64_t links_end = mono_ms() + 5000; (!exists("ws/flip") || !exists("ws/flipdir")) && mono_ms() < links_end;)
		usleep(1000);	/* the interval of a poll with a deadline */
	ck_assert(exists("ws/flip") && exists("ws/flipdir"));

	unsigned inside = 0, refused = 0;
	uint64_t end = mono_ms() + 400;
	while (mono_ms() < end) {
		struct result res;
		run(&tool_read_file, &res, "{\"path\":\"flip\"}");
		if (res.call.kind == TC_OK) {
			ck_assert_str_eq(sc_str(&res, "content"), "hello\n");
			inside++;
		} else {
			ck_assert_int_eq(res.call.kind, TC_PERMISSION_DENIED);
			refused++;
		}
		result_clear(&res);
		run(&tool_read_file, &res, "{\"path\":\"flipdir/inner.txt\"}");
		if (res.call.kind == TC_OK)
			ck_assert_str_eq(sc_str(&res, "content"), "inner\n");
		else
			ck_assert_int_eq(res.call.kind, TC_PERMISSION_DENIED);
		result_clear(&res);
		run(&tool_write_file, &res, "{\"path\":\"flip\",\"content\":\"hello\\n\"}");
		ck_assert(res.call.kind == TC_OK || res.call.kind == TC_PERMISSION_DENIED);
		result_clear(&res);
		run(&tool_write_file, &res, "{\"path\":\"flipdir/inner.txt\",\"content\":\"inner\\n\"}");
		ck_assert(res.call.kind == TC_OK || res.call.kind == TC_PERMISSION_DENIED);
		result_clear(&res);
	}
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);

	/* Both ways were seen, and nothing outside changed. */
	ck_assert_uint_gt(inside, 0);
	ck_assert_uint_gt(refused, 0);
	_cleanup_free_ char *after = outside_snapshot();
	ck_assert_str_eq(before, after);
}
END_TEST

static void add_tcases(Suite *s, bool fallback)
{
	void (*fixture)(void) = fallback ? setup_fallback : setup_kernel;
	TCase *tc;

	tc = tcase_create(fallback ? "escapes (no openat2)" : "escapes");
	tcase_add_checked_fixture(tc, fixture, teardown);
	tcase_add_test(tc, escape_read_file);
	tcase_add_test(tc, escape_write_file);
	tcase_add_test(tc, escape_patch_file);
	tcase_add_test(tc, escape_list_dir);
	tcase_add_test(tc, escape_nul_byte);
	tcase_add_test(tc, escape_magic_links);
	tcase_add_test(tc, allowed_reads);
	tcase_add_test(tc, allowed_writes);
	tcase_add_test(tc, allowed_patch_and_list);
	tcase_add_test(tc, symlink_loops);
	suite_add_tcase(s, tc);

	tc = tcase_create(fallback ? "absolute links (no openat2)" : "absolute links");
	tcase_add_checked_fixture(tc, fixture, teardown);
	tcase_add_test(tc, abs_reads);
	tcase_add_test(tc, abs_writes);
	tcase_add_test(tc, abs_patch_and_list);
	tcase_add_test(tc, abs_loops);
	tcase_add_test(tc, abs_api);
	tcase_add_test(tc, abs_magic_links);
	tcase_add_test(tc, abs_swap_race);
	suite_add_tcase(s, tc);
}

int main(void)
{
	Suite *s = suite_create("workspace_escapes");
	add_tcases(s, false);
	add_tcases(s, true);
	return workspace_main(s);
}
