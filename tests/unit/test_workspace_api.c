/* SPDX-License-Identifier: MIT */
/*
 * The workspace API (lib/files/workspace*.c) on the tree of
 * workspace_fixture.h: opening, checking, displaying paths, parents,
 * errors, groups of roots, resources (no fd leaks, O_NOFOLLOW). Every case
 * runs with the kernel's openat2 and with the walk used where openat2 is
 * missing (ws_force_fallback); a differential case holds the two walks to
 * the same answers, and one takes openat2 away for real with a seccomp
 * filter.
 */
#include "tests/unit/workspace_fixture.h"

#include "tests/unit/check_main.h"
#include "tests/unit/deny_syscall.h"

/* --- the API ------------------------------------------------------------- */

START_TEST(api_open)
{
	struct workspace *w = NULL;
	ck_assert_int_eq(ws_open(at("nope"), &w), -ENOENT);
	ck_assert_int_eq(ws_open(at("outside.txt"), &w), -ENOTDIR);
	ck_assert_ptr_null(w);

	/* The root is made canonical: a symlink to it, "..", "." and trailing slashes. */
	lnk("ws", "ws-link");
	ck_assert_int_eq(ws_open(at("ws-link"), &w), 0);
	ck_assert_str_eq(w->root, root);
	ck_assert(ws_ref(w) == w);
	ck_assert_ptr_null(ws_unref(w));
	ck_assert_ptr_null(ws_unref(w));
	ck_assert_int_eq(ws_open(at("outdir/../ws/./"), &w), 0);
	ck_assert_str_eq(w->root, root);
	ck_assert_ptr_null(w->alias);	/* ".." in it: no alias */
	ws_unref(w);
	ck_assert_ptr_null(ws_unref(NULL));
}
END_TEST

/* A root opened through a symlink takes absolute paths spelled either way,
 * by whole components, and what follows is still resolved beneath it. */
START_TEST(api_open_by_alias)
{
	lnk("ws", "ws-link");
	lnk("outdir", "ws-link-evil");
	puts_file("outdir/secret.txt", "no");
	struct workspace *w = NULL;
	char *given = xasprintf("%s/", at("ws-link"));
	ck_assert_int_eq(ws_open(given, &w), 0);
	free(given);
	ck_assert_str_eq(w->root, root);
	ck_assert_str_eq(w->alias, at("ws-link"));
	struct buf data = {};
	char *p = xasprintf("%s/sub/inner.txt", at("ws-link"));
	ck_assert_int_eq(ws_read(w, p, strlen(p), 0, 100, &data, NULL), 0);
	free(p);
	buf_free(&data);
	p = xasprintf("%s/sub/inner.txt", root);
	ck_assert_int_eq(ws_read(w, p, strlen(p), 0, 100, &data, NULL), 0);
	free(p);
	buf_free(&data);
	/* Not a prefix trick, not a climb out. */
	static const char *const out[] = { "ws-link-evil/secret.txt", "ws-link/../outdir/secret.txt", "outdir/secret.txt" };
	for (size_t i = 0; i < ELEMENTSOF(out); i++) {
		p = xasprintf("%s", at(out[i]));
		int r = ws_read(w, p, strlen(p), 0, 100, &data, NULL);
		ck_assert_msg(r == -EXDEV, "%s: %d", out[i], r);
		free(p);
		buf_free(&data);
	}
	ws_unref(w);
}
END_TEST


START_TEST(api_check)
{
	ck_assert_int_eq(check_path("hello.txt"), 0);
	ck_assert_int_eq(check_path(""), 0);
	ck_assert_int_eq(check_path("new.txt"), 0);
	ck_assert_int_eq(check_path("new/dir/file"), 0);
	ck_assert_int_eq(check_path("new/../x"), 0);
	ck_assert_int_eq(check_path("sub/new/../../x"), 0);
	ck_assert_int_eq(check_path("@/ws/new/file"), 0);
	ck_assert_int_eq(check_path("link-dangling-in"), 0);
	ck_assert_int_eq(check_path("link-in-dir/new"), 0);

	ck_assert_int_eq(check_path("new/../../x"), -EXDEV);
	ck_assert_int_eq(check_path("new/a/../../../x"), -EXDEV);
	ck_assert_int_eq(check_path("../x"), -EXDEV);
	ck_assert_int_eq(check_path("link-out-dir/new"), -EXDEV);
	ck_assert_int_eq(check_path("link-dangling-out"), -EXDEV);
	ck_assert_int_eq(check_path("@/ws-evil/x"), -EXDEV);
	ck_assert_int_eq(check_path("@/ws-evil/new"), -EXDEV);
	ck_assert_int_eq(check_path("/etc/passwd"), -EXDEV);
	ck_assert_int_eq(check_path("/"), -EXDEV);
	ck_assert_int_eq(check_path("hello.txt/x"), -ENOTDIR);
	ck_assert_int_eq(check_path("link-loop-a"), -ELOOP);

	/* A path as long as the kernel allows, or longer. */
	_cleanup_free_ char *longp = xmalloc(PATH_MAX + 10);
	memset(longp, 'a', PATH_MAX + 9);
	longp[PATH_MAX + 9] = '\0';
	ck_assert_int_eq(ws_check(ws, longp, strlen(longp)), -ENAMETOOLONG);
}
END_TEST

START_TEST(api_display_path)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "a.c", "a.c" },
		{ "./src//a.c", "src/a.c" },
		{ "src/", "src" },
		{ "", "." },
		{ ".", "." },
		{ "@/ws", "." },
		{ "@/ws/", "." },
		{ "@/ws//sub/./inner.txt", "sub/inner.txt" },
		{ "sub/../x", "sub/../x" },
		{ "@/ws-evil/x", "@/ws-evil/x" },	/* outside: shown as given */
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct buf in = {}, out = {};
		for (const char *p = cases[i].in; *p; p++)
			*p == '@' ? buf_puts(&in, base) : buf_putc(&in, *p);
		for (const char *p = cases[i].out; *p; p++)
			*p == '@' ? buf_puts(&out, base) : buf_putc(&out, *p);
		_cleanup_free_ char *s_in = buf_steal(&in), *s_out = buf_steal(&out);
		_cleanup_free_ char *d = ws_display_path(ws, s_in, strlen(s_in));
		ck_assert_str_eq(d, s_out);
	}
}
END_TEST

START_TEST(api_open_parent)
{
	int fd = -1;
	char *name = NULL;

	ck_assert_int_eq(ws_open_parent(ws, "sub/x.txt", 9, false, &fd, &name), 0);
	ck_assert_str_eq(name, "x.txt");
	struct stat a, b;
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(stat(at("ws/sub"), &b), 0);
	ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	free(name);

	ck_assert_int_eq(ws_open_parent(ws, "top.txt", 7, false, &fd, &name), 0);
	ck_assert_str_eq(name, "top.txt");
	close(fd);
	free(name);
	fd = -1;
	name = NULL;

	/* Missing directories: refused, or created with create_dirs. */
	ck_assert_int_eq(ws_open_parent(ws, "n1/n2/f", 7, false, &fd, &name), -ENOENT);
	ck_assert_int_eq(ws_open_parent(ws, "n1/n2/f", 7, true, &fd, &name), 0);
	ck_assert_str_eq(name, "f");
	ck_assert_int_eq(stat(at("ws/n1/n2"), &b), 0);
	ck_assert(S_ISDIR(b.st_mode));
	close(fd);
	free(name);
	fd = -1;
	name = NULL;

	/* Nothing is created for a path that leads out, not even inside. */
	ck_assert_int_eq(ws_open_parent(ws, "n3/../../f", 10, true, &fd, &name), -EXDEV);
	ck_assert(!exists("ws/n3"));
	ck_assert_int_eq(ws_open_parent(ws, "link-out-dir/n4/f", 17, true, &fd, &name), -EXDEV);
	ck_assert(!exists("outdir/n4"));
	/* Names that are directories by their form. */
	ck_assert_int_eq(ws_open_parent(ws, "sub/", 4, false, &fd, &name), -EISDIR);
	ck_assert_int_eq(ws_open_parent(ws, "sub/..", 6, false, &fd, &name), -EISDIR);
	ck_assert_int_eq(ws_open_parent(ws, ".", 1, false, &fd, &name), -EISDIR);
	ck_assert_int_eq(ws_open_parent(ws, "", 0, false, &fd, &name), -EISDIR);
	ck_assert_int_eq(ws_open_parent(ws, root, strlen(root), false, &fd, &name), -EISDIR);
	ck_assert_int_eq(ws_open_parent(ws, "..", 2, false, &fd, &name), -EXDEV);
	ck_assert_int_eq(ws_open_parent(ws, "sub/../..", 9, true, &fd, &name), -EXDEV);
	/* A file where a directory should be. */
	ck_assert_int_eq(ws_open_parent(ws, "hello.txt/f", 11, true, &fd, &name), -ENOTDIR);
	ck_assert_int_eq(fd, -1);
	ck_assert_ptr_null(name);
}
END_TEST

START_TEST(api_errors)
{
	static const struct { int r; enum tc_kind kind; const char *msg; } cases[] = {
		{ -EXDEV, TC_PERMISSION_DENIED, "Path '../x' escapes the workspace" },
		{ -EINVAL, TC_PERMISSION_DENIED, "Path contains a NUL byte" },
		{ -ENOENT, TC_EXECUTION_ERROR, "File '../x' not found" },
		{ -EISDIR, TC_EXECUTION_ERROR, "'../x' is a directory" },
		{ -ENOTDIR, TC_EXECUTION_ERROR, "not a directory" },
		{ -EACCES, TC_PERMISSION_DENIED, "Permission denied" },
		{ -EEXIST, TC_EXECUTION_ERROR, "already exists" },
		{ -ENOSPC, TC_EXECUTION_ERROR, "No space left" },
		{ -EFBIG, TC_EXECUTION_ERROR, "too large" },
		{ -ELOOP, TC_EXECUTION_ERROR, "symbolic links" },
		{ -ENXIO, TC_EXECUTION_ERROR, "not a regular file" },
		{ -EROFS, TC_EXECUTION_ERROR, "read-only" },
		{ -EAGAIN, TC_TRANSIENT, "try again" },
		{ -EINTR, TC_TRANSIENT, "try again" },
		{ -ENOMEM, TC_TRANSIENT, "try again" },
		{ -EMFILE, TC_TRANSIENT, "try again" },
		{ -ENFILE, TC_TRANSIENT, "try again" },
		{ -EPROTO, TC_EXECUTION_ERROR, "Cannot access '../x'" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char *msg = NULL;
		ck_assert_int_eq(ws_error(cases[i].r, "../x", &msg), cases[i].kind);
		ck_assert_msg(strstr(msg, cases[i].msg), "%d: '%s' lacks '%s'", cases[i].r, msg, cases[i].msg);
		free(msg);
	}
	/* A huge path is cut in the message. */
	_cleanup_free_ char *longp = xmalloc(100001);
	memset(longp, 'x', 100000);
	longp[100000] = '\0';
	char *msg = NULL;
	ck_assert_int_eq(ws_error(-ENAMETOOLONG, longp, &msg), TC_EXECUTION_ERROR);
	ck_assert_uint_lt(strlen(msg), 400);
	ck_assert_ptr_nonnull(strstr(msg, "too long"));
	free(msg);
}
END_TEST


/* --- resources -------------------------------------------------------------- */

START_TEST(no_fd_leak)
{
	make_tree();
	ck_assert_int_eq(mkfifo(at("ws/fifo"), 0644), 0);
	struct result res;

	/* Warm up whatever the C library opens once. */
	run(&tool_list_dir, &res, "{\"recursive\":true}");
	result_clear(&res);

	int before = count_fds();
	for (int round = 0; round < 3; round++) {
		static const struct { const struct tool_def *def; const char *args; } calls[] = {
			{ &tool_read_file, "{\"path\":\"hello.txt\"}" },
			{ &tool_read_file, "{\"path\":\"hello.txt\",\"encoding\":\"base64\",\"limit\":2}" },
			{ &tool_read_file, "{\"path\":\"nope\"}" },
			{ &tool_read_file, "{\"path\":\"sub\"}" },
			{ &tool_read_file, "{\"path\":\"fifo\"}" },
			{ &tool_read_file, "{\"path\":\"link-out-file\"}" },
			{ &tool_read_file, "{\"path\":\"link-loop-a\"}" },
			{ &tool_write_file, "{\"path\":\"w.txt\",\"content\":\"x\"}" },
			{ &tool_write_file, "{\"path\":\"wd/x/y.txt\",\"content\":\"x\",\"create_dirs\":true}" },
			{ &tool_write_file, "{\"path\":\"nod/y.txt\",\"content\":\"x\"}" },
			{ &tool_write_file, "{\"path\":\"link-dangling-out\",\"content\":\"x\"}" },
			{ &tool_write_file, "{\"path\":\"link-loop-a\",\"content\":\"x\"}" },
			{ &tool_write_file, "{\"path\":\"fifo\",\"content\":\"x\"}" },
			{ &tool_write_file, "{\"path\":\"sub\",\"content\":\"x\"}" },
			{ &tool_patch_file, "{\"path\":\"w.txt\",\"old\":\"x\",\"new\":\"yy\"}" },
			{ &tool_patch_file, "{\"path\":\"w.txt\",\"old\":\"zz\",\"new\":\"y\"}" },
			{ &tool_patch_file, "{\"path\":\"../outside.txt\",\"old\":\"s\",\"new\":\"y\"}" },
			{ &tool_list_dir, "{\"recursive\":true}" },
			{ &tool_list_dir, "{\"recursive\":true,\"max_entries\":3}" },
			{ &tool_list_dir, "{\"path\":\"hello.txt\"}" },
			{ &tool_list_dir, "{\"path\":\"..\"}" },
			/* through absolute links, inside and out */
			{ &tool_read_file, "{\"path\":\"link-abs-dir/inner.txt\"}" },
			{ &tool_read_file, "{\"path\":\"link-abs-dir/link-up\"}" },
			{ &tool_read_file, "{\"path\":\"link-abs-dir/../..\"}" },
			{ &tool_read_file, "{\"path\":\"link-abs-evil\"}" },
			{ &tool_read_file, "{\"path\":\"link-abs-loop-a\"}" },
			{ &tool_write_file, "{\"path\":\"link-abs-dir/w.txt\",\"content\":\"x\"}" },
			{ &tool_write_file, "{\"path\":\"link-abs-dir/wd/y.txt\",\"content\":\"x\",\"create_dirs\":true}" },
			{ &tool_write_file, "{\"path\":\"link-abs-dangling-out\",\"content\":\"x\"}" },
			{ &tool_write_file, "{\"path\":\"link-abs-self\",\"content\":\"x\"}" },
			{ &tool_patch_file, "{\"path\":\"link-in-abs\",\"old\":\"l\",\"new\":\"l\"}" },
			{ &tool_list_dir, "{\"path\":\"link-abs-root\",\"max_entries\":3}" },
			{ &tool_list_dir, "{\"path\":\"link-abs-out-dir\"}" },
		};
		for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
			run(calls[i].def, &res, "%s", calls[i].args);
			result_clear(&res);
		}
		int fd = -1;
		char *name = NULL;
		ck_assert_int_eq(ws_check(ws, "wd/new/../x", 11), 0);
		ck_assert_int_eq(ws_check(ws, "../x", 4), -EXDEV);
		ck_assert_int_eq(ws_open_parent(ws, "n/../../x", 9, true, &fd, &name), -EXDEV);
		ck_assert_int_eq(ws_open_parent(ws, "sub/x", 5, false, &fd, &name), 0);
		close(fd);
		free(name);
		ck_assert_int_eq(ws_check(ws, "link-abs-dir/n/../../../x", 25), -EXDEV);
		ck_assert_int_eq(ws_open_parent(ws, "link-abs-dir/x", 14, false, &fd, &name), 0);
		close(fd);
		free(name);
		ck_assert_int_eq(ws_open_parent(ws, "link-abs-out-dir/n/x", 20, true, &fd, &name), -EXDEV);
	}
	ck_assert_int_eq(count_fds(), before);
}
END_TEST

/* --- the walk without openat2 ----------------------------------------------- */

/* Describes what opening path beneath ws gives: the errno, or the file reached. */
static char *open_outcome(const char *path, int flags)
{
	_cleanup_free_ char *p = expand_at(path);
	int fd = -1;
	int r = ws_openat(ws, p, strlen(p), flags, 0, &fd);
	if (r < 0)
		return xasprintf("%s", strerror(-r));
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	close(fd);
	return xasprintf("type %o dev %llu ino %llu", (unsigned)(st.st_mode & S_IFMT),
			 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
}

/* Describes what ws_open_parent(create_dirs false) gives for path. */
static char *parent_outcome(const char *path)
{
	_cleanup_free_ char *p = expand_at(path);
	int fd = -1;
	_cleanup_free_ char *name = NULL;
	int r = ws_open_parent(ws, p, strlen(p), false, &fd, &name);
	if (r < 0)
		return xasprintf("%s", strerror(-r));
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	close(fd);
	return xasprintf("dir ino %llu name %s", (unsigned long long)st.st_ino, name);
}

/* Paths beyond the matrices above: trailing slashes, dots, loops, missing parts. */
static const char *const more_paths[] = {
	"", ".", "./", "sub/", "sub/.", "sub/./inner.txt", "sub/../sub/../hello.txt", "hello.txt/",
	"hello.txt/x", "hello.txt/..", "nope", "nope/", "nope/x", "nope/..", "link-in/", "link-in-dir/",
	"link-in-dir/.", "link-in-dir/..", "link-abs-dir/", "link-abs-dir/.", "link-abs-root/./sub/",
	"link-dangling-in", "link-dangling-in/", "link-abs-dangling/", "link-loop-a", "link-loop-a/x",
	"link-abs-self/x", "link-proc", "link-proc/", "deep/link-abs-up/../hello.txt", "deep/..",
	"deep/../..", "@/ws/", "@/ws/.", "/proc/self/root", "sub//inner.txt//", "..test", "a/..b",
	"link-in-abs", "link-abs-chain", "link-rel-to-abs", "link-abs-messy/inner.txt",
	"link-abs-root/link-abs-root/sub/inner.txt", "link-abs-root/..", "link-abs-dir/../hello.txt",
};

/*
 * The walk without openat2 gives the same answers as the kernel's, for
 * every path above and every way of opening that creates nothing: the same
 * file, or the same errno (so the same error kind and message).
 */
START_TEST(walks_agree)
{
	static const int flag_sets[] = {
		O_PATH, O_RDONLY, O_PATH | O_NOFOLLOW, O_RDONLY | O_NOFOLLOW, O_RDONLY | O_DIRECTORY,
		O_PATH | O_DIRECTORY, O_RDONLY | O_NONBLOCK | O_NOCTTY,
	};
	const char *const *lists[] = { escape_files, escape_creates, escape_dirs, more_paths };
	const size_t lens[] = { n_escape_files, n_escape_creates, n_escape_dirs,
				ELEMENTSOF(more_paths) };
	const char *no = getenv("TOOLCALLD_NO_OPENAT2");
	if (no && *no && !str_eq(no, "0")) {
		TC_SKIP("walks_agree: TOOLCALLD_NO_OPENAT2 leaves one walk only");
	}
	struct open_how how = { .flags = O_PATH | O_CLOEXEC };
	long probe = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
	if (probe < 0) {
		TC_SKIP("walks_agree: this kernel has no openat2 to compare with (%m)");
	}
	close((int)probe);
	ck_assert_int_eq(mkfifo(at("ws/fifo"), 0644), 0);
	_cleanup_free_ char *before = outside_snapshot();
	unsigned compared = 0;

	for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
		for (size_t i = 0; i < lens[l]; i++) {
			const char *path = lists[l][i];
			for (size_t f = 0; f < ELEMENTSOF(flag_sets); f++) {
				ws_force_fallback(false);
				_cleanup_free_ char *kernel = open_outcome(path, flag_sets[f]);
				ws_force_fallback(true);
				_cleanup_free_ char *walk = open_outcome(path, flag_sets[f]);
				ck_assert_msg(str_eq(kernel, walk), "'%s' flags %#o: openat2 %s, without %s", path,
					      (unsigned)flag_sets[f], kernel, walk);
				compared++;
			}
			ws_force_fallback(false);
			_cleanup_free_ char *p = expand_at(path);
			int kernel_check = ws_check(ws, p, strlen(p));
			_cleanup_free_ char *kernel_parent = parent_outcome(path);
			ws_force_fallback(true);
			ck_assert_msg(ws_check(ws, p, strlen(p)) == kernel_check, "ws_check '%s'", path);
			_cleanup_free_ char *walk_parent = parent_outcome(path);
			ck_assert_msg(str_eq(kernel_parent, walk_parent), "ws_open_parent '%s': openat2 %s, without %s",
				      path, kernel_parent, walk_parent);
		}
	}
	ck_assert_uint_gt(compared, 700);

	/* Creating: a trailing slash names a directory, existing or not, and
	 * O_EXCL never follows a last symlink; nothing is created either way. */
	static const struct { const char *path; int flags; int want; } creates[] = {
		{ "sub/", O_WRONLY | O_CREAT, -EISDIR },
		{ "nope/", O_WRONLY | O_CREAT, -EISDIR },
		{ "hello.txt/", O_WRONLY | O_CREAT, -EISDIR },
		{ "link-in/", O_WRONLY | O_CREAT, -EISDIR },
		{ "link-in-dir/", O_WRONLY | O_CREAT, -EISDIR },
		{ "link-dangling-in/", O_WRONLY | O_CREAT, -EISDIR },
		{ "link-abs-dangling/", O_WRONLY | O_CREAT, -EISDIR },
		{ ".", O_WRONLY | O_CREAT, -EISDIR },
		{ "link-out-dir/", O_WRONLY | O_CREAT, -EISDIR },	/* answered before the link is looked at */
		{ "link-abs-dangling-out/", O_WRONLY | O_CREAT, -EISDIR },
		{ "link-out-dir/x/", O_WRONLY | O_CREAT, -EXDEV },
		{ "link-abs-dir/x/", O_WRONLY | O_CREAT, -EISDIR },
		{ "hello.txt", O_WRONLY | O_CREAT | O_EXCL, -EEXIST },
		{ "link-in", O_WRONLY | O_CREAT | O_EXCL, -EEXIST },
		{ "link-dangling-in", O_WRONLY | O_CREAT | O_EXCL, -EEXIST },
		{ "link-abs-dangling", O_WRONLY | O_CREAT | O_EXCL, -EEXIST },
		{ "link-dangling-out", O_WRONLY | O_CREAT | O_EXCL, -EEXIST },
		{ "link-abs-dangling-out", O_WRONLY | O_CREAT | O_EXCL, -EEXIST },
		{ "link-dangling-out", O_WRONLY | O_CREAT, -EXDEV },
		{ "link-abs-dangling-out", O_WRONLY | O_CREAT, -EXDEV },
		{ "link-in-abs", O_WRONLY | O_CREAT | O_NOFOLLOW, -ELOOP },
	};
	for (size_t i = 0; i < ELEMENTSOF(creates); i++) {
		for (int fallback = 0; fallback <= 1; fallback++) {
			ws_force_fallback(fallback);
			int fd = -1;
			const char *p = creates[i].path;
			ck_assert_msg(ws_openat(ws, p, strlen(p), creates[i].flags, 0600, &fd) == creates[i].want,
				      "'%s' %s", p, fallback ? "without openat2" : "with openat2");
			ck_assert_int_eq(fd, -1);
		}
	}
	ck_assert(!exists("ws/nope"));
	ck_assert(!exists("ws/made-by-link.txt"));
	ck_assert(!exists("ws/made-by-abs.txt"));
	ck_assert(!exists("created-outside.txt"));
	_cleanup_free_ char *after = outside_snapshot();
	ck_assert_str_eq(before, after);
}
END_TEST

/* ws_open_nofollow follows no symlink at all, and stays beneath its fd. */
START_TEST(open_nofollow)
{
	make_tree();
	int base_fd = -1;
	ck_assert_int_eq(ws_openat(ws, "tree", 4, O_RDONLY | O_DIRECTORY, 0, &base_fd), 0);

	int fd = -1;
	struct stat a, b;
	ck_assert_int_eq(ws_open_nofollow(base_fd, ".", O_RDONLY | O_DIRECTORY, &fd), 0);
	close(fd);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "a/y", O_RDONLY | O_DIRECTORY, &fd), 0);
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(stat(at("ws/tree/a/y"), &b), 0);
	ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "a/y/", O_RDONLY | O_DIRECTORY, &fd), 0);
	close(fd);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "a/x.c", O_RDONLY, &fd), 0);
	close(fd);
	/* The link itself with O_PATH | O_NOFOLLOW. */
	ck_assert_int_eq(ws_open_nofollow(base_fd, "ln", O_PATH | O_NOFOLLOW, &fd), 0);
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert(S_ISLNK(a.st_mode));
	close(fd);
	fd = -1;

	/* Symlinks anywhere, even inside; climbing out; a file on the way. */
	ck_assert_int_eq(ws_open_nofollow(base_fd, "ln", O_RDONLY | O_DIRECTORY, &fd), -ELOOP);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "ln/", O_RDONLY | O_DIRECTORY, &fd), -ELOOP);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "ln/y", O_RDONLY | O_DIRECTORY, &fd), -ELOOP);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "out", O_RDONLY | O_DIRECTORY, &fd), -ELOOP);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "out/o.txt", O_RDONLY, &fd), -ELOOP);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "..", O_RDONLY | O_DIRECTORY, &fd), -EXDEV);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "../../outside.txt", O_RDONLY, &fd), -EXDEV);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "a.c/x", O_RDONLY, &fd), -ENOTDIR);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "nope", O_RDONLY, &fd), -ENOENT);
	ck_assert_int_eq(ws_open_nofollow(base_fd, "a", O_RDONLY | O_CREAT, &fd), -EINVAL);
	ck_assert_int_eq(fd, -1);
	close(base_fd);
}
END_TEST

/*
 * With openat2 taken away for real (ENOSYS, as on Linux before 5.6 or under
 * valgrind), the workspace finds out once and walks without it: never
 * calling openat2 again, still following links inside and refusing escapes.
 */
START_TEST(without_openat2)
{
	if (!deny_syscall_or_skip("without_openat2", SYS_openat2))
		return;
	ws_force_fallback(false);
	struct workspace *w = NULL;
	ck_assert_int_eq(ws_open(root, &w), 0);
	/* Found out: any openat2 from now on fails with an errno of its own. */
	ck_assert(deny_syscall(SYS_openat2, ENOTRECOVERABLE));

	struct buf out = {};
	ck_assert_int_eq(ws_read(w, "link-abs-dir/inner.txt", 22, 0, 100, &out, NULL), 0);
	ck_assert_uint_eq(buf_size(&out), 6);
	ck_assert(memcmp(buf_head(&out), "inner\n", 6) == 0);
	buf_free(&out);
	int fd = -1;
	ck_assert_int_eq(ws_openat(w, "link-chain-in", 13, O_RDONLY, 0, &fd), 0);
	close(fd);
	fd = -1;
	ck_assert_int_eq(ws_openat(w, "link-out-abs", 12, O_RDONLY, 0, &fd), -EXDEV);
	ck_assert_int_eq(ws_openat(w, "sub/../../outside.txt", 21, O_RDONLY, 0, &fd), -EXDEV);
	ck_assert_int_eq(ws_openat(w, "link-proc/etc/passwd", 20, O_RDONLY, 0, &fd), -EXDEV);
	ck_assert_int_eq(ws_openat(w, "link-loop-a", 11, O_RDONLY, 0, &fd), -ELOOP);
	ck_assert_int_eq(ws_check(w, "new/../../x", 11), -EXDEV);
	ck_assert_int_eq(ws_write_atomic(w, "link-abs-dir/d/new.txt", 22, "new", 3, true, NULL), 0);
	_cleanup_free_ char *c = slurp("ws/sub/d/new.txt", NULL);
	ck_assert_str_eq(c, "new");
	ck_assert_int_eq(ws_write_atomic(w, "link-dangling-out", 17, "x", 1, false, NULL), -EXDEV);
	ck_assert(!exists("created-outside.txt"));
	ck_assert_int_eq(ws_open_nofollow(w->dirfd, "sub", O_RDONLY | O_DIRECTORY, &fd), 0);
	close(fd);
	fd = -1;
	ck_assert_int_eq(ws_open_nofollow(w->dirfd, "link-in-dir", O_RDONLY | O_DIRECTORY, &fd), -ELOOP);
	ck_assert_int_eq(fd, -1);
	ws_unref(w);

	/* Magic links, where every absolute target is inside. */
	struct workspace *slash = NULL;
	ck_assert_int_eq(ws_open("/", &slash), 0);
	int held = open(at("ws/hello.txt"), O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(held, 0);
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", held);
	ck_assert_int_eq(ws_openat(slash, p, strlen(p), O_RDONLY, 0, &fd), -EXDEV);
	const char *q = "/proc/self/root/etc/passwd";
	ck_assert_int_eq(ws_openat(slash, q, strlen(q), O_RDONLY, 0, &fd), -EXDEV);
	q = "/proc/self/ns/net";
	ck_assert_int_eq(ws_openat(slash, q, strlen(q), O_RDONLY, 0, &fd), -EXDEV);
	/* An ordinary link on /proc (self -> the pid) is still followed. */
	q = "/proc/self/status";
	ck_assert_int_eq(ws_openat(slash, q, strlen(q), O_RDONLY, 0, &fd), 0);
	close(fd);
	close(held);
	ws_unref(slash);
}
END_TEST

/* Adds the test cases, run by one walk or the other. */

/* Files that report no size (procfs) are read to their end all the same:
 * reads are bounded by the size fstat gives only when it gives one. */
START_TEST(read_sizeless_file)
{
	struct workspace *pws = NULL;
	ck_assert_int_eq(ws_open("/proc/self", &pws), 0);
	struct buf out = {0};
	struct stat st;
	ck_assert_int_eq(ws_read(pws, "status", 6, 0, 1 << 20, &out, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_uint_gt(buf_size(&out), 100);
	ck_assert_ptr_nonnull(strstr(buf_head(&out), "Name:"));
	buf_free(&out);
	ws_unref(pws);
}
END_TEST

/*
 * read_file looks before it opens: a FIFO (or a device) is refused without
 * ever being opened, whether named directly or through a link, while plain
 * files, in-workspace links to them and links leading out keep their usual
 * answers. inotify sees every real open; O_PATH looks are not opens.
 */
START_TEST(read_looks_before_opening)
{
	ck_assert_int_eq(mkfifo(at("ws/pipe"), 0644), 0);
	lnk("pipe", "ws/link-pipe");
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(inotify_add_watch(in, at("ws/pipe"), IN_OPEN), 0);

	struct workspace *w = NULL;
	ck_assert_int_eq(ws_open(root, &w), 0);
	struct buf out = {};
	ck_assert_int_eq(ws_read(w, "pipe", 4, 0, 100, &out, NULL), -ENXIO);
	ck_assert_int_eq(ws_read(w, "link-pipe", 9, 0, 100, &out, NULL), -ENXIO);
	ck_assert_int_eq(ws_read(w, "sub", 3, 0, 100, &out, NULL), -EISDIR);
	ck_assert_uint_eq(buf_size(&out), 0);
	char ev[sizeof(struct inotify_event) + NAME_MAX + 1];
	ck_assert_int_eq(read(in, ev, sizeof(ev)), -1);
	ck_assert_int_eq(errno, EAGAIN);

	/* The same watch sees an open when a regular file is read. */
	ck_assert_int_ge(inotify_add_watch(in, at("ws/hello.txt"), IN_OPEN), 0);
	ck_assert_int_eq(ws_read(w, "hello.txt", 9, 0, 100, &out, NULL), 0);
	ck_assert_int_gt(read(in, ev, sizeof(ev)), 0);
	ck_assert_uint_eq(buf_size(&out), 6);
	buf_free(&out);

	/* Links inside still lead to their file; links out are still refused,
	 * even where a plain stat through them finds a regular file. */
	ck_assert_int_eq(ws_read(w, "link-in-dir/inner.txt", 21, 0, 100, &out, NULL), 0);
	ck_assert_uint_eq(buf_size(&out), 6);
	buf_free(&out);
	ck_assert_int_eq(ws_read(w, "link-out-dir/o.txt", 18, 0, 100, &out, NULL), -EXDEV);
	ck_assert_int_eq(ws_read(w, "link-out-file", 13, 0, 100, &out, NULL), -EXDEV);
	ck_assert_uint_eq(buf_size(&out), 0);
	ws_unref(w);
	close(in);
}
END_TEST

/* A group of roots (a session's MCP roots): relative paths stay in the
 * primary, absolute ones reach the member they lie in (the longest root
 * that prefixes them, never a sibling by its name's prefix), anything
 * else is refused as before. */
START_TEST(api_group)
{
	struct workspace *outdir = NULL, *evil = NULL;
	ck_assert_int_eq(ws_open(at("outdir"), &outdir), 0);
	ck_assert_int_eq(ws_open(at("ws-evil"), &evil), 0);
	struct workspace *const others[] = { outdir, evil };
	struct workspace *g = ws_group(ws, others, 2);
	ck_assert_ptr_nonnull(g);
	const char *roots[WS_GROUP_MAX + 1];
	ck_assert_uint_eq(ws_group_roots(g, roots, WS_GROUP_MAX + 1), 3);
	ck_assert_str_eq(roots[0], root);
	ck_assert_ptr_null(roots[3]);

	struct buf b = {};
	ck_assert_int_eq(ws_read(g, "hello.txt", 9, 0, 100, &b, NULL), 0);
	ck_assert_int_eq(ws_read(g, at("outdir/o.txt"), strlen(at("outdir/o.txt")), 0, 100, &b, NULL), 0);
	ck_assert_int_eq(ws_read(g, at("ws-evil/x"), strlen(at("ws-evil/x")), 0, 100, &b, NULL), 0);
	buf_putc(&b, '\0');
	ck_assert_str_eq(buf_head(&b), "hello\noutdir\nevil\n");
	buf_free(&b);
	ck_assert_ptr_eq(ws_pick(g, at("ws/sub"), strlen(at("ws/sub"))), g);
	ck_assert_ptr_eq(ws_pick(g, at("ws-evil"), strlen(at("ws-evil"))), evil);
	ck_assert_ptr_eq(ws_pick(g, "outdir/o.txt", 12), g);
	/* Outside every root, or led out by a link of the primary: refused. */
	ck_assert_int_eq(ws_read(g, at("outside.txt"), strlen(at("outside.txt")), 0, 100, &b, NULL), -EXDEV);
	ck_assert_int_lt(ws_read(g, "link-out-dir/o.txt", 18, 0, 100, &b, NULL), 0);
	ck_assert_int_lt(ws_check(g, "../outdir/o.txt", 15), 0);
	/* Shown relative in the primary, absolute elsewhere. */
	_cleanup_free_ char *d1 = ws_display_path(g, at("ws/sub/inner.txt"), strlen(at("ws/sub/inner.txt")));
	ck_assert_str_eq(d1, "sub/inner.txt");
	_cleanup_free_ char *want = xstrdup(at("outdir/o.txt"));
	_cleanup_free_ char *d2 = ws_display_path(g, want, strlen(want));
	ck_assert_str_eq(d2, want);
	/* Writes reach the member too. */
	const char *nw = at("outdir/new.txt");
	ck_assert_int_eq(ws_write_atomic(g, nw, strlen(nw), "n", 1, false, NULL), 0);
	ck_assert_int_eq(access(at("outdir/new.txt"), F_OK), 0);
	ck_assert_ptr_null(ws_unref(g));
	ws_unref(outdir);
	ws_unref(evil);
}
END_TEST

static void add_tcases(Suite *s, bool fallback)
{
	TCase *tc = tcase_create(fallback ? "api (no openat2)" : "api");
	tcase_add_checked_fixture(tc, fallback ? setup_fallback : setup_kernel, teardown);
	tcase_add_test(tc, api_open);
	tcase_add_test(tc, api_open_by_alias);
	tcase_add_test(tc, api_check);
	tcase_add_test(tc, api_display_path);
	tcase_add_test(tc, api_open_parent);
	tcase_add_test(tc, api_errors);
	tcase_add_test(tc, api_group);
	tcase_add_test(tc, read_sizeless_file);
	tcase_add_test(tc, read_looks_before_opening);
	tcase_add_test(tc, no_fd_leak);
	tcase_add_test(tc, open_nofollow);
	suite_add_tcase(s, tc);
}

int main(void)
{
	Suite *s = suite_create("workspace_api");
	add_tcases(s, false);
	add_tcases(s, true);

	TCase *tc = tcase_create("both walks");
	tcase_add_checked_fixture(tc, setup_kernel, teardown);
	tcase_add_test(tc, walks_agree);
	tcase_add_test(tc, without_openat2);
	suite_add_tcase(s, tc);
	return workspace_main(s);
}
