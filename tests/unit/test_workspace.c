/* SPDX-License-Identifier: MIT */
/*
 * The workspace file API and the four file tools (read_file, write_file,
 * patch_file, list_dir), run directly on a temporary tree:
 *
 *   base/outside.txt, base/outdir/, base/ws-evil/x     things a call must never reach
 *   base/ws/                                           the workspace, with files and
 *                                                      symlinks leading in and out
 *
 * Every escape is tried against every tool, and the tree outside the
 * workspace is compared before and after to prove nothing there was read
 * into a result, changed or created. Symlinks are made both relative and
 * absolute (naming base/ws/... in full, as users and scripts make them):
 * either kind works while it leads beneath the root.
 *
 * Every test case runs twice: with the kernel's openat2, and with the walk
 * used where openat2 is missing (ws_force_fallback). A differential test
 * holds the two walks to the same answers, and one test takes openat2 away
 * for real with a seccomp filter.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/fsjob/fsjob.h"
#include "lib/schema/schema.h"
#include "lib/tool.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_path.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/tools.h"
#include "tests/unit/deny_syscall.h"

static char run_dir[PATH_MAX];	/* one per run, removed by main() even after failed tests */
static char base[PATH_MAX + 16];
static char root[PATH_MAX + 32];
static struct workspace *ws;

/* --- the tree ------------------------------------------------------------ */

/* Returns base/rel in a static buffer (one of a few, so two can be in use). */
static const char *at(const char *rel)
{
	static char bufs[4][PATH_MAX * 2];
	static unsigned k;
	char *b = bufs[k++ % 4];
	snprintf(b, PATH_MAX * 2, "%s/%s", base, rel);
	return b;
}

static void put(const char *rel, const char *content, size_t n)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "create %s: %m", rel);
	ck_assert_int_eq(write(fd, content, n), (ssize_t)n);
	close(fd);
}

static void puts_file(const char *rel, const char *content)
{
	put(rel, content, strlen(content));
}

/* Reads base/rel whole, or returns NULL when it does not exist. */
static char *slurp(const char *rel, size_t *ret_n)
{
	int fd = open(at(rel), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct buf b = {};
	char tmp[4096];
	ssize_t k;
	while ((k = read(fd, tmp, sizeof(tmp))) > 0)
		buf_append(&b, tmp, (size_t)k);
	close(fd);
	if (ret_n)
		*ret_n = buf_size(&b);
	return buf_steal(&b);
}

static void mkd(const char *rel)
{
	ck_assert_msg(mkdir(at(rel), 0755) == 0, "mkdir %s: %m", rel);
}

static void lnk(const char *target, const char *rel)
{
	ck_assert_msg(symlink(target, at(rel)) == 0, "symlink %s: %m", rel);
}

static bool exists(const char *rel)
{
	struct stat st;
	return lstat(at(rel), &st) == 0;
}

static mode_t mode_of(const char *rel)
{
	struct stat st;
	ck_assert_int_eq(lstat(at(rel), &st), 0);
	return st.st_mode & 07777;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

/* Describes everything under base except the workspace: names, types, sizes, contents. */
static int snap_one(const char *p, const struct stat *st, int flag, struct FTW *f);
static struct buf *snap_out;

static int snap_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	const char *rel = p + strlen(base);
	if (str_has_prefix(rel, "/ws/") || str_eq(rel, "/ws"))
		return 0;
	buf_printf(snap_out, "%s %o %lld\n", rel, (unsigned)st->st_mode, (long long)st->st_size);
	if (S_ISREG(st->st_mode)) {
		_cleanup_free_ char *c = slurp(rel + 1, NULL);
		buf_printf(snap_out, "[%s]\n", c ? c : "?");
	}
	return 0;
}

static char *outside_snapshot(void)
{
	struct buf b = {};
	snap_out = &b;
	ck_assert_int_eq(nftw(base, snap_one, 16, FTW_PHYS), 0);
	snap_out = NULL;
	return buf_steal(&b);
}

static void setup(void)
{
	umask(022);
	snprintf(base, sizeof(base), "%s/t-XXXXXX", run_dir);
	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(root, sizeof(root), "%s/ws", base);

	puts_file("outside.txt", "secret\n");
	mkd("outdir");
	puts_file("outdir/o.txt", "outdir\n");
	mkd("ws-evil");
	puts_file("ws-evil/x", "evil\n");

	mkd("ws");
	puts_file("ws/hello.txt", "hello\n");
	mkd("ws/sub");
	puts_file("ws/sub/inner.txt", "inner\n");
	puts_file("ws/..test", "dotdot-test\n");
	mkd("ws/a");
	puts_file("ws/a/..b", "a-dotdot-b\n");
	lnk("hello.txt", "ws/link-in");
	lnk("link-in", "ws/link-chain-in");
	lnk("sub", "ws/link-in-dir");
	lnk("../hello.txt", "ws/sub/link-up");
	lnk("made-by-link.txt", "ws/link-dangling-in");
	lnk("../outside.txt", "ws/link-out-file");
	lnk(at("outside.txt"), "ws/link-out-abs");
	lnk(at("ws/hello.txt"), "ws/link-in-abs");
	lnk("../outdir", "ws/link-out-dir");
	lnk("../ws-evil/x", "ws/link-evil");
	lnk("link-out-file", "ws/link-chain-out");
	lnk("../created-outside.txt", "ws/link-dangling-out");
	lnk("link-loop-b", "ws/link-loop-a");
	lnk("link-loop-a", "ws/link-loop-b");
	lnk("/proc/self/root", "ws/link-proc");
	lnk("../../../../../../../../../../proc/self/root", "ws/link-proc-rel");

	/* Absolute symlinks leading in ... */
	mkd("ws/deep");
	lnk(at("ws/sub"), "ws/link-abs-dir");
	lnk(at("ws/link-in"), "ws/link-abs-chain");		/* absolute, then relative */
	lnk("link-in-abs", "ws/link-rel-to-abs");		/* relative, then absolute */
	lnk(at("ws/link-in-dir"), "ws/deep/link-abs-up");	/* to a relative link to a directory */
	lnk(root, "ws/link-abs-root");
	lnk(at("ws//./sub/"), "ws/link-abs-messy");
	lnk(at("ws/made-by-abs.txt"), "ws/link-abs-dangling");
	/* ... and out, or round in loops. */
	lnk(at("ws-evil/x"), "ws/link-abs-evil");		/* the sibling with the same prefix */
	lnk("/", "ws/link-abs-slash");
	lnk(base, "ws/link-abs-base");
	lnk(at("ws/sub/../../outside.txt"), "ws/link-abs-dotdot");	/* inside, then ".." out */
	lnk(at("ws/../outside.txt"), "ws/link-abs-up");
	lnk(at("ws/.."), "ws/link-abs-parent");
	lnk(at("ws/../ws/hello.txt"), "ws/link-abs-out-and-in");	/* out of the root and back */
	lnk(at("ws/link-out-file"), "ws/link-abs-to-out");	/* inside, to a relative link out */
	lnk(at("outdir"), "ws/link-abs-out-dir");
	lnk(at("created-outside.txt"), "ws/link-abs-dangling-out");
	lnk(at("ws/link-abs-loop-b"), "ws/link-abs-loop-a");
	lnk("link-abs-loop-a", "ws/link-abs-loop-b");
	lnk(at("ws/link-abs-self"), "ws/link-abs-self");

	ck_assert_int_eq(ws_open(root, &ws), 0);
	/* So that /proc/self/cwd leads into the workspace: still refused. */
	ck_assert_int_eq(chdir(root), 0);
}

/* The tree, walked by the kernel's openat2 (unless TOOLCALLD_NO_OPENAT2 is set). */
static void setup_kernel(void)
{
	ws_force_fallback(false);
	setup();
}

/* The tree, walked as where openat2 is missing. */
static void setup_fallback(void)
{
	ws_force_fallback(true);
	setup();
}

static void teardown(void)
{
	ws = ws_unref(ws);
	ck_assert_int_eq(chdir("/"), 0);
	nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* --- running tools -------------------------------------------------------- */

struct result {
	struct tool_call call;
	struct json_doc *doc;		/* structuredContent, parsed */
	const struct json *sc;
};

static struct tool *make_tool(const struct tool_def *def)
{
	struct tool *t = NULL;
	_cleanup_free_ char *err = NULL;
	int r = tool_new(def, def->name, def->description, def->input_schema, NULL, &t, &err);
	ck_assert_msg(r == 0, "schema of %s: %s", def->name, err ? err : "?");
	return t;
}

/* Parses JSON text written by a test. */
static struct json_doc *parse(const char *text)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	int r = json_parse(text, strlen(text), 0, 0, &doc, &err);
	ck_assert_msg(r == 0, "bad JSON in test: %s: %s", text, err.msg);
	return doc;
}

/*
 * Runs a tool on arguments given as printf-style JSON text ("@" in a string
 * stands for the base directory, as "%s" would need escaping in every call).
 * The arguments must pass the tool's schema, as the dispatcher would ensure.
 */
static void run_env(const struct tool_def *def, const struct tool_env *env, struct result *res, const char *fmt, ...)
	PRINTF(4, 5);
static void run_env(const struct tool_def *def, const struct tool_env *env, struct result *res, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *raw = xvasprintf(fmt, ap);
	va_end(ap);
	struct buf b = {};
	for (const char *p = raw; *p; p++) {
		if (*p == '@')
			buf_puts(&b, base);
		else
			buf_putc(&b, *p);
	}
	_cleanup_free_ char *args = buf_steal(&b);

	struct tool *t = make_tool(def);
	struct json_doc *adoc = parse(args);
	struct schema_errors errs = {};
	bool valid = schema_validate(t->schema, json_doc_root(adoc), &errs);
	ck_assert_msg(valid, "%s: arguments refused by the schema: %s: %s", def->name, args,
		      errs.n ? errs.v[0].message : "?");
	schema_errors_clear(&errs);

	memset(res, 0, sizeof(*res));
	res->call.tool = t;
	res->call.args = json_doc_root(adoc);
	res->call.ws = ws;
	res->call.env = env;
	res->call.call_id = "test";
	ck_assert_int_eq(def->exec(&res->call), TOOL_DONE);
	res->call.tool = NULL;
	res->call.args = NULL;
	json_doc_unref(adoc);
	tool_unref(t);

	if (res->call.kind == TC_OK) {
		ck_assert_ptr_nonnull(res->call.structured);
		ck_assert_ptr_nonnull(res->call.text);
		res->doc = parse(res->call.structured);
		res->sc = json_doc_root(res->doc);
		ck_assert_int_eq(res->sc->type, JSON_OBJECT);
		ck_assert_ptr_null(res->call.message);
	} else {
		ck_assert_ptr_nonnull(res->call.message);
	}
}

#define run(def, res, ...) run_env(def, NULL, res, __VA_ARGS__)

static void result_clear(struct result *res)
{
	tool_call_clear(&res->call);
	res->doc = json_doc_unref(res->doc);
	res->sc = NULL;
}

static const char *sc_str(const struct result *res, const char *key)
{
	const char *s = json_str(json_get(res->sc, key));
	ck_assert_msg(s, "structuredContent has no string '%s': %s", key, res->call.structured);
	return s;
}

static int64_t sc_int(const struct result *res, const char *key)
{
	int64_t v;
	ck_assert_msg(json_get_int(json_get(res->sc, key), &v), "no integer '%s': %s", key, res->call.structured);
	return v;
}

static bool sc_bool(const struct result *res, const char *key)
{
	const struct json *v = json_get(res->sc, key);
	ck_assert_msg(v && v->type == JSON_BOOL, "no boolean '%s': %s", key, res->call.structured);
	return v->u.b;
}

#define assert_ok(res) \
	ck_assert_msg((res)->call.kind == TC_OK, "expected success, got %s: %s", \
		      tc_kind_name((res)->call.kind), (res)->call.message ? (res)->call.message : "")

#define assert_fail(res, k, substr) do { \
	ck_assert_msg((res)->call.kind == (k), "expected %s, got %s (%s)", tc_kind_name(k), \
		      tc_kind_name((res)->call.kind), \
		      (res)->call.message ? (res)->call.message : (res)->call.structured); \
	ck_assert_msg(strstr((res)->call.message, (substr)), "message '%s' lacks '%s'", \
		      (res)->call.message, (substr)); \
} while (0)

/* Counts the open fds of this process. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;	/* the directory's own fd */
}

static void assert_no_temp(const char *rel);

/* --- the escape matrix ------------------------------------------------------ */

/* Paths that name files and must be refused; "@" is the base directory. */
static const char *const escape_files[] = {
	"../outside.txt",
	"../../../../../../../../../../etc/passwd",
	"./../outside.txt",
	"sub/../../outside.txt",
	"sub/../../ws-evil/x",
	"../ws-evil/x",
	"link-out-file",		/* relative symlink leading out */
	"link-out-abs",			/* absolute symlink leading out */
	"link-abs-evil",		/* absolute, into the sibling with the same prefix */
	"link-abs-slash/etc/passwd",	/* absolute to "/" */
	"link-abs-base/outside.txt",	/* absolute to the root's parent */
	"link-abs-dotdot",		/* absolute inside, then ".." out */
	"link-abs-up",
	"link-abs-out-and-in",		/* ".." above the root, even to come back */
	"link-abs-to-out",		/* absolute inside, to a relative link out */
	"link-abs-out-dir/o.txt",
	"link-abs-dir/../../outside.txt",	/* through an absolute link inside, then ".." out */
	"link-abs-root/../outside.txt",
	"@/ws/link-abs-evil",
	/* Directories by their form, but out: an escape before "is a directory". */
	"..",
	"sub/../..",
	"@/ws/..",
	"link-abs-root/..",
	"link-abs-parent",
	"link-out-dir/o.txt",		/* through a symlinked directory outside */
	"link-evil",			/* into the sibling with the same prefix */
	"link-chain-out",		/* a chain whose last hop leads out */
	"link-proc/etc/passwd",
	"link-proc-rel/etc/passwd",
	"/etc/passwd",
	"/proc/self/root/etc/passwd",
	"/proc/self/cwd/hello.txt",	/* cwd is the workspace, but this is not its path */
	"@/outside.txt",
	"@/ws-evil/x",			/* the prefix trick: "/ws-evil" is not inside "/ws" */
	"@/ws/../outside.txt",
	"@/ws/../ws-evil/x",
	"@/ws/sub/../../outside.txt",
};

/* Paths that would create a file outside. */
static const char *const escape_creates[] = {
	"../created-outside.txt",
	"link-dangling-out",
	"link-out-dir/created.txt",
	"@/ws-evil/created.txt",
	"@/created-outside.txt",
	"sub/../../created-outside.txt",
	"../ws-evil/created.txt",
	"link-abs-dangling-out",
	"link-abs-out-dir/created.txt",
	"link-abs-base/created-outside.txt",
	"link-abs-root/../created-outside.txt",
};

static const char *const escape_dirs[] = {
	"..",
	"../..",
	"sub/../..",
	"../ws-evil",
	"../outdir",
	"link-out-dir",
	"link-proc",
	"link-proc-rel",
	"/",
	"/tmp",
	"/proc/self/root",
	"/proc/self/cwd",
	"@",
	"@/ws-evil",
	"@/ws/..",
	"link-abs-slash",
	"link-abs-base",
	"link-abs-out-dir",
	"link-abs-root/..",
	"link-abs-dir/../..",
	"link-abs-messy/../..",
};

/* Asserts the call was refused as an escape, naming the path as given. */
static void assert_escape(struct result *res, const char *given)
{
	struct buf b = {};
	for (const char *p = given; *p; p++) {
		if (*p == '@')
			buf_puts(&b, base);
		else
			buf_putc(&b, *p);
	}
	_cleanup_free_ char *path = buf_steal(&b);
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
	for (size_t i = 0; i < ELEMENTSOF(escape_files); i++) {
		run(&tool_read_file, &res, "{\"path\":\"%s\"}", escape_files[i]);
		assert_escape(&res, escape_files[i]);
		result_clear(&res);
	}
	for (size_t i = 0; i < ELEMENTSOF(escape_creates); i++) {
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
		for (size_t i = 0; i < ELEMENTSOF(escape_files); i++) {
			run(&tool_write_file, &res, "{\"path\":\"%s\",\"content\":\"pwned\",\"create_dirs\":%s}",
			    escape_files[i], dirs ? "true" : "false");
			assert_escape(&res, escape_files[i]);
			result_clear(&res);
		}
		for (size_t i = 0; i < ELEMENTSOF(escape_creates); i++) {
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
	for (size_t i = 0; i < ELEMENTSOF(escape_files); i++) {
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
	for (size_t i = 0; i < ELEMENTSOF(escape_dirs); i++) {
		for (int rec = 0; rec <= 1; rec++) {
			run(&tool_list_dir, &res, "{\"path\":\"%s\",\"recursive\":%s}", escape_dirs[i],
			    rec ? "true" : "false");
			assert_escape(&res, escape_dirs[i]);
			result_clear(&res);
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(escape_files); i++) {
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

static int check_path(const char *p)
{
	struct buf b = {};
	for (; *p; p++) {
		if (*p == '@')
			buf_puts(&b, base);
		else
			buf_putc(&b, *p);
	}
	_cleanup_free_ char *s = buf_steal(&b);
	return ws_check(ws, s, strlen(s));
}

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

/* --- read_file ------------------------------------------------------------- */

START_TEST(read_window)
{
	puts_file("ws/digits.txt", "0123456789");
	struct result res;

	run(&tool_read_file, &res, "{\"path\":\"digits.txt\",\"offset\":2,\"limit\":3}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "234");
	ck_assert_int_eq(sc_int(&res, "size"), 10);
	ck_assert(sc_bool(&res, "truncated"));
	ck_assert_int_eq(sc_int(&res, "next_offset"), 5);
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"digits.txt\",\"offset\":7,\"limit\":3}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "789");
	ck_assert(!sc_bool(&res, "truncated"));
	ck_assert_ptr_null(json_get(res.sc, "next_offset"));
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"digits.txt\",\"offset\":50}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "");
	ck_assert_int_eq(sc_int(&res, "size"), 10);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);

	/* The default window comes from the daemon's settings: a line longer
	 * than its bytes is cut. */
	struct tool_env env = { .read_bytes = 4 };
	run_env(&tool_read_file, &env, &res, "{\"path\":\"digits.txt\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "0123");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	/* ... and is 256 KiB without them. */
	size_t big = (1u << 20) + 10;
	char *data = xmalloc(big);
	memset(data, 'z', big);
	put("ws/big.txt", data, big);
	free(data);
	run(&tool_read_file, &res, "{\"path\":\"big.txt\"}");
	assert_ok(&res);
	ck_assert_uint_eq(strlen(sc_str(&res, "content")), 256u << 10);
	ck_assert_int_eq(sc_int(&res, "size"), (int64_t)big);
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	/* Over 64 MiB: by bytes, saying so; by lines only when asked, refused. */
	data = xmalloc(1 << 20);
	for (size_t i = 0; i < 1 << 20; i++)
		data[i] = i % 8 == 7 ? '\n' : 'y';
	put("ws/huge.txt", data, 1 << 20);
	free(data);
	ck_assert_int_eq(truncate(at("ws/huge.txt"), (off_t)65 << 20), 0);
	run(&tool_read_file, &res, "{\"path\":\"huge.txt\"}");
	assert_ok(&res);
	ck_assert_uint_eq(strlen(sc_str(&res, "content")), 256u << 10);
	ck_assert_ptr_null(json_get(res.sc, "first_line"));
	ck_assert_msg(strstr(res.call.text, "\n[Bytes 0-262143 of 68157440 shown (the file is too large to read by "
			     "lines); read on with {\"offset\": 262144}]"), "%.300s", res.call.text);
	result_clear(&res);
	run(&tool_read_file, &res, "{\"path\":\"huge.txt\",\"line\":2}");
	assert_fail(&res, TC_EXECUTION_ERROR, "too large to read by lines");
	result_clear(&res);

	/* An empty file. */
	puts_file("ws/empty", "");
	run(&tool_read_file, &res, "{\"path\":\"empty\"}");
	assert_ok(&res);
	ck_assert_str_eq(res.call.text, "[The file is empty.]");
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);
}
END_TEST

START_TEST(read_utf8)
{
	struct result res;
	/* "aé€😀" : 1 + 2 + 3 + 4 bytes */
	puts_file("ws/u.txt", "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");

	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"limit\":2}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "a");	/* é would be cut: left for later */
	ck_assert(sc_bool(&res, "truncated"));
	ck_assert_int_eq(sc_int(&res, "next_offset"), 1);
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"offset\":1,\"limit\":4}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "\xc3\xa9");
	ck_assert_int_eq(sc_int(&res, "next_offset"), 3);
	result_clear(&res);

	/* A limit smaller than the first character still makes progress. */
	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"offset\":6,\"limit\":1}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "\xf0\x9f\x98\x80");
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"offset\":3,\"limit\":6}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "\xe2\x82\xac");
	ck_assert(sc_bool(&res, "truncated"));
	ck_assert_int_eq(sc_int(&res, "next_offset"), 6);
	result_clear(&res);

	/* An offset inside a character. */
	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"offset\":2}");
	assert_fail(&res, TC_EXECUTION_ERROR, "inside a multibyte UTF-8 character");
	result_clear(&res);

	/* Not UTF-8: described, pointing at base64; never mangled. */
	put("ws/bin", "ab\xff\xfe", 4);
	run(&tool_read_file, &res, "{\"path\":\"bin\"}");
	assert_ok(&res);
	ck_assert_ptr_nonnull(strstr(res.call.text, "{\"encoding\": \"base64\"}"));
	ck_assert(sc_bool(&res, "binary"));
	result_clear(&res);
	put("ws/nul", "ab\0cd", 5);
	run(&tool_read_file, &res, "{\"path\":\"nul\",\"encoding\":\"utf8\"}");
	assert_ok(&res);
	ck_assert(sc_bool(&res, "binary"));
	ck_assert_ptr_nonnull(strstr(res.call.text, "base64"));
	result_clear(&res);
}
END_TEST

START_TEST(base64_both_ways)
{
	struct result res;
	put("ws/bin", "ab\xff\xfe\0", 5);
	run(&tool_read_file, &res, "{\"path\":\"bin\",\"encoding\":\"base64\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "YWL//gA=");
	ck_assert_str_eq(res.call.text, "YWL//gA=");
	ck_assert_str_eq(sc_str(&res, "encoding"), "base64");
	ck_assert_int_eq(sc_int(&res, "size"), 5);
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"bin\",\"encoding\":\"base64\",\"offset\":1,\"limit\":2}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "Yv8=");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	static const struct { const char *b64; const char *bytes; size_t n; } cases[] = {
		{ "", "", 0 },
		{ "AA==", "\0", 1 },
		{ "AAE=", "\0\1", 2 },
		{ "AAEC", "\0\1\2", 3 },
		{ "AAEC/w", "\0\1\2\xff", 4 },		/* padding optional */
		{ "AAEC\\n/w==\\r\\n", "\0\1\2\xff", 4 },	/* line breaks skipped */
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		run(&tool_write_file, &res, "{\"path\":\"out.bin\",\"content\":\"%s\",\"encoding\":\"base64\"}",
		    cases[i].b64);
		assert_ok(&res);
		ck_assert_int_eq(sc_int(&res, "bytes"), (int64_t)cases[i].n);
		result_clear(&res);
		size_t n;
		_cleanup_free_ char *c = slurp("ws/out.bin", &n);
		ck_assert_uint_eq(n, cases[i].n);
		ck_assert(memcmp(c, cases[i].bytes, n) == 0);
	}

	/* Round trip of all byte values. */
	char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (char)i;
	put("ws/all.bin", all, sizeof(all));
	run(&tool_read_file, &res, "{\"path\":\"all.bin\",\"encoding\":\"base64\"}");
	assert_ok(&res);
	_cleanup_free_ char *enc = xstrdup(sc_str(&res, "content"));
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"all2.bin\",\"content\":\"%s\",\"encoding\":\"base64\"}", enc);
	assert_ok(&res);
	result_clear(&res);
	size_t n;
	_cleanup_free_ char *back = slurp("ws/all2.bin", &n);
	ck_assert_uint_eq(n, 256);
	ck_assert(memcmp(back, all, 256) == 0);

	/* Not base64: refused as invalid arguments, nothing written. */
	static const char *const bad[] = { "!!!!", "AAA=A", "A", "AA=", "AA===", "YW-_" };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		run(&tool_write_file, &res, "{\"path\":\"bad.bin\",\"content\":\"%s\",\"encoding\":\"base64\"}", bad[i]);
		assert_fail(&res, TC_VALIDATION_ERROR, "base64");
		ck_assert_ptr_nonnull(res.call.error_data);
		result_clear(&res);
	}
	ck_assert(!exists("ws/bad.bin"));
}
END_TEST

START_TEST(read_refusals)
{
	struct result res;
	run(&tool_read_file, &res, "{\"path\":\"sub\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory, use list_dir");
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"nope.txt\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "File 'nope.txt' not found");
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"hello.txt/x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "not a directory");
	result_clear(&res);

	/* A FIFO with no writer: refused at once, not waited on. */
	ck_assert_int_eq(mkfifo(at("ws/fifo"), 0644), 0);
	alarm(10);
	run(&tool_read_file, &res, "{\"path\":\"fifo\"}");
	alarm(0);
	assert_fail(&res, TC_EXECUTION_ERROR, "not a regular file");
	result_clear(&res);

	/* A device, when the sandbox allows making one. */
	if (mknod(at("ws/null"), S_IFCHR | 0666, makedev(1, 3)) == 0) {
		run(&tool_read_file, &res, "{\"path\":\"null\"}");
		assert_fail(&res, TC_EXECUTION_ERROR, "not a regular file");
		result_clear(&res);
	}

	/* A path longer than the kernel takes. */
	_cleanup_free_ char *longp = xmalloc(PATH_MAX + 2);
	memset(longp, 'a', PATH_MAX + 1);
	longp[PATH_MAX + 1] = '\0';
	run(&tool_read_file, &res, "{\"path\":\"%s\"}", longp);
	assert_fail(&res, TC_EXECUTION_ERROR, "too long");
	ck_assert_uint_lt(strlen(res.call.message), 500);
	result_clear(&res);
}
END_TEST

/* --- write_file ------------------------------------------------------------ */

/* Asserts no temporary file was left in base/rel. */
static void assert_no_temp(const char *rel)
{
	DIR *d = opendir(at(rel));
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	while ((de = readdir(d)))
		ck_assert_msg(!strstr(de->d_name, ".tc-"), "temporary file left: %s", de->d_name);
	closedir(d);
}

START_TEST(write_new_and_replace)
{
	struct result res;
	umask(027);
	run(&tool_write_file, &res, "{\"path\":\"new.txt\",\"content\":\"fresh\\n\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "path"), "new.txt");
	ck_assert_int_eq(sc_int(&res, "bytes"), 6);
	ck_assert(sc_bool(&res, "created"));
	ck_assert_uint_eq(res.call.n_files, 1);
	ck_assert_str_eq(res.call.files[0], "new.txt");
	result_clear(&res);
	_cleanup_free_ char *c1 = slurp("ws/new.txt", NULL);
	ck_assert_str_eq(c1, "fresh\n");
	ck_assert_uint_eq(mode_of("ws/new.txt"), 0640);	/* 0644 less the umask */

	/* Replacing keeps the mode, and is a rename: a reader holding the
	 * old file still sees it whole. */
	ck_assert_int_eq(chmod(at("ws/new.txt"), 0751), 0);
	int old = open(at("ws/new.txt"), O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(old, 0);
	run(&tool_write_file, &res, "{\"path\":\"@/ws/new.txt\",\"content\":\"second version\"}");
	assert_ok(&res);
	ck_assert(!sc_bool(&res, "created"));
	ck_assert_str_eq(sc_str(&res, "path"), "new.txt");
	ck_assert_str_eq(res.call.files[0], "new.txt");
	result_clear(&res);
	_cleanup_free_ char *c2 = slurp("ws/new.txt", NULL);
	ck_assert_str_eq(c2, "second version");
	ck_assert_uint_eq(mode_of("ws/new.txt"), 0751);
	char tmp[16] = {};
	ck_assert_int_eq(read(old, tmp, sizeof(tmp) - 1), 6);
	ck_assert_str_eq(tmp, "fresh\n");
	close(old);

	/* Owner kept too (only root can give a file away). */
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(at("ws/new.txt"), 1234, 5678), 0);
		run(&tool_write_file, &res, "{\"path\":\"new.txt\",\"content\":\"third\"}");
		assert_ok(&res);
		result_clear(&res);
		struct stat st;
		ck_assert_int_eq(stat(at("ws/new.txt"), &st), 0);
		ck_assert_uint_eq(st.st_uid, 1234);
		ck_assert_uint_eq(st.st_gid, 5678);
		ck_assert_uint_eq(st.st_mode & 07777, 0751);
	}

	/* Empty content, and idempotent rewrites. */
	for (int i = 0; i < 2; i++) {
		run(&tool_write_file, &res, "{\"path\":\"new.txt\",\"content\":\"\"}");
		assert_ok(&res);
		ck_assert_int_eq(sc_int(&res, "bytes"), 0);
		result_clear(&res);
	}
	_cleanup_free_ char *c3 = slurp("ws/new.txt", NULL);
	ck_assert_str_eq(c3, "");
	assert_no_temp("ws");
}
END_TEST

START_TEST(write_create_dirs)
{
	struct result res;
	run(&tool_write_file, &res, "{\"path\":\"d1/d2/f.txt\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "create_dirs");
	result_clear(&res);
	ck_assert(!exists("ws/d1"));

	run(&tool_write_file, &res, "{\"path\":\"d1/d2/f.txt\",\"content\":\"x\",\"create_dirs\":true}");
	assert_ok(&res);
	ck_assert(sc_bool(&res, "created"));
	ck_assert_str_eq(sc_str(&res, "path"), "d1/d2/f.txt");
	result_clear(&res);
	_cleanup_free_ char *c = slurp("ws/d1/d2/f.txt", NULL);
	ck_assert_str_eq(c, "x");

	/* Existing parts, "..", and a symlinked directory inside, on the way. */
	run(&tool_write_file, &res, "{\"path\":\"d1/../link-in-dir/d3/g.txt\",\"content\":\"y\",\"create_dirs\":true}");
	assert_ok(&res);
	result_clear(&res);
	_cleanup_free_ char *g = slurp("ws/sub/d3/g.txt", NULL);
	ck_assert_str_eq(g, "y");

	/* A file in the way. */
	run(&tool_write_file, &res, "{\"path\":\"hello.txt/f\",\"content\":\"x\",\"create_dirs\":true}");
	assert_fail(&res, TC_EXECUTION_ERROR, "not a directory");
	result_clear(&res);
}
END_TEST

START_TEST(write_refusals)
{
	struct result res;
	run(&tool_write_file, &res, "{\"path\":\"sub\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"sub/\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'sub/' names a directory, not a file");
	result_clear(&res);
	/* By its form, whatever is there: a file is not called a directory. */
	puts_file("ws/plain.txt", "p");
	run(&tool_write_file, &res, "{\"path\":\"plain.txt/\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'plain.txt/' names a directory, not a file");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"sub/..\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "names a directory, not a file");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"@/ws\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"link-in-dir\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);

	ck_assert_int_eq(mkfifo(at("ws/fifo"), 0644), 0);
	alarm(10);
	run(&tool_write_file, &res, "{\"path\":\"fifo\",\"content\":\"x\"}");
	alarm(0);
	assert_fail(&res, TC_EXECUTION_ERROR, "not a regular file");
	result_clear(&res);
	struct stat st;
	ck_assert_int_eq(lstat(at("ws/fifo"), &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));

	/* A directory the process cannot write to (root can, so only as others). */
	if (geteuid() != 0) {
		ck_assert_int_eq(chmod(at("ws/sub"), 0555), 0);
		run(&tool_write_file, &res, "{\"path\":\"sub/f\",\"content\":\"x\"}");
		assert_fail(&res, TC_EXECUTION_ERROR, "Permission denied");
		result_clear(&res);
		chmod(at("ws/sub"), 0755);
	}
	assert_no_temp("ws");
	assert_no_temp("ws/sub");
}
END_TEST

/* --- patch_file ------------------------------------------------------------ */

START_TEST(patch_exactly_once)
{
	struct result res;
	puts_file("ws/p.txt", "one two three two\n");
	ck_assert_int_eq(chmod(at("ws/p.txt"), 0600), 0);

	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"one\",\"new\":\"1\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "path"), "p.txt");
	ck_assert_int_eq(sc_int(&res, "replacements"), 1);
	ck_assert_uint_eq(res.call.n_files, 1);
	ck_assert_str_eq(res.call.files[0], "p.txt");
	result_clear(&res);
	_cleanup_free_ char *c1 = slurp("ws/p.txt", NULL);
	ck_assert_str_eq(c1, "1 two three two\n");
	ck_assert_uint_eq(mode_of("ws/p.txt"), 0600);

	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"two\",\"new\":\"2\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'old' occurs 2 times in p.txt; include more context so it occurs exactly once");
	ck_assert_ptr_nonnull(res.call.error_data);
	struct json_doc *d = parse(res.call.error_data);
	int64_t occ;
	ck_assert(json_get_int(json_get(json_doc_root(d), "occurrences"), &occ));
	ck_assert_int_eq(occ, 2);
	json_doc_unref(d);
	ck_assert_uint_eq(res.call.n_files, 0);
	result_clear(&res);

	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"four\",\"new\":\"4\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'old' was not found in p.txt (it occurs 0 times; it must occur exactly once)");
	d = parse(res.call.error_data);
	ck_assert(json_get_int(json_get(json_doc_root(d), "occurrences"), &occ));
	ck_assert_int_eq(occ, 0);
	json_doc_unref(d);
	result_clear(&res);

	/* Overlapping occurrences are ambiguous too. */
	puts_file("ws/aaa.txt", "aaa");
	run(&tool_patch_file, &res, "{\"path\":\"aaa.txt\",\"old\":\"aa\",\"new\":\"b\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "occurs 2 times");
	result_clear(&res);

	/* Unchanged after the failures. */
	_cleanup_free_ char *c2 = slurp("ws/p.txt", NULL);
	ck_assert_str_eq(c2, "1 two three two\n");

	/* More context makes it unique; multi-line text, deleting with an empty "new". */
	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"three two\\n\",\"new\":\"3\\nlines\\n\"}");
	assert_ok(&res);
	result_clear(&res);
	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"1 \",\"new\":\"\"}");
	assert_ok(&res);
	result_clear(&res);
	_cleanup_free_ char *c3 = slurp("ws/p.txt", NULL);
	ck_assert_str_eq(c3, "two 3\nlines\n");
	ck_assert_uint_eq(mode_of("ws/p.txt"), 0600);

	/* Binary-safe: bytes around NUL. */
	put("ws/b.bin", "x\0y\0z", 5);
	run(&tool_patch_file, &res, "{\"path\":\"b.bin\",\"old\":\"\\u0000y\",\"new\":\"Y\"}");
	assert_ok(&res);
	result_clear(&res);
	size_t n;
	_cleanup_free_ char *c4 = slurp("ws/b.bin", &n);
	ck_assert_uint_eq(n, 4);
	ck_assert(memcmp(c4, "xY\0z", 4) == 0);

	run(&tool_patch_file, &res, "{\"path\":\"sub\",\"old\":\"a\",\"new\":\"b\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);
	run(&tool_patch_file, &res, "{\"path\":\"missing.txt\",\"old\":\"a\",\"new\":\"b\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "File 'missing.txt' not found");
	result_clear(&res);
	ck_assert(!exists("ws/missing.txt"));
	assert_no_temp("ws");
}
END_TEST

/* --- list_dir -------------------------------------------------------------- */

/* Joins "name:type:size" of every entry with spaces. */
static char *entries_str(const struct result *res)
{
	const struct json *e = json_get(res->sc, "entries");
	ck_assert(e && e->type == JSON_ARRAY);
	struct buf b = {};
	for (size_t i = 0; i < e->u.arr.n; i++) {
		int64_t size;
		ck_assert(json_get_int(json_get(e->u.arr.items[i], "size"), &size));
		buf_printf(&b, "%s%s:%s:%lld", i ? " " : "", json_str(json_get(e->u.arr.items[i], "name")),
			   json_str(json_get(e->u.arr.items[i], "type")), (long long)size);
	}
	return buf_steal(&b);
}

static void make_tree(void)
{
	mkd("ws/tree");
	puts_file("ws/tree/b.txt", "bbb");
	puts_file("ws/tree/a.c", "c");
	mkd("ws/tree/a");
	puts_file("ws/tree/a/x.c", "xx");
	mkd("ws/tree/a/y");
	puts_file("ws/tree/a/y/z", "");
	lnk("a", "ws/tree/ln");
	lnk("../../outdir", "ws/tree/out");
	ck_assert_int_eq(mkfifo(at("ws/tree/fifo"), 0644), 0);
}

START_TEST(list_flat_and_recursive)
{
	make_tree();
	struct result res;

	run(&tool_list_dir, &res, "{\"path\":\"tree\"}");
	assert_ok(&res);
	_cleanup_free_ char *flat = entries_str(&res);
	ck_assert_str_eq(flat, "a:dir:0 a.c:file:1 b.txt:file:3 fifo:other:0 ln:symlink:0 out:symlink:0");
	ck_assert(!sc_bool(&res, "truncated"));
	ck_assert_str_eq(sc_str(&res, "path"), "tree");
	ck_assert_ptr_nonnull(strstr(res.call.text, "b.txt (3 bytes)"));
	result_clear(&res);

	/* Recursive: relative names, each directory followed by its entries, symlinks not followed. */
	static const char all[] = "a:dir:0 a/x.c:file:2 a/y:dir:0 a/y/z:file:0 a.c:file:1 b.txt:file:3 "
				  "fifo:other:0 ln:symlink:0 out:symlink:0";
	run(&tool_list_dir, &res, "{\"path\":\"tree\",\"recursive\":true}");
	assert_ok(&res);
	_cleanup_free_ char *rec = entries_str(&res);
	ck_assert_str_eq(rec, all);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);

	/* Truncation at every possible count gives a prefix of the full listing. */
	for (int max = 1; max <= 10; max++) {
		run(&tool_list_dir, &res, "{\"path\":\"tree/\",\"recursive\":true,\"max_entries\":%d}", max);
		assert_ok(&res);
		_cleanup_free_ char *got = entries_str(&res);
		const struct json *e = json_get(res.sc, "entries");
		ck_assert_uint_eq(e->u.arr.n, (size_t)MIN(max, 9));
		ck_assert_msg(strncmp(all, got, strlen(got)) == 0, "max %d: %s", max, got);
		ck_assert_int_eq(sc_bool(&res, "truncated"), max < 9);
		if (max < 9)
			ck_assert_ptr_nonnull(strstr(res.call.text, "truncated"));
		result_clear(&res);
	}

	/* An empty directory. */
	mkd("ws/empty");
	run(&tool_list_dir, &res, "{\"path\":\"empty\",\"recursive\":true}");
	assert_ok(&res);
	ck_assert_uint_eq(json_get(res.sc, "entries")->u.arr.n, 0);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);
}
END_TEST

/* A tree deeper than the kernel's PATH_MAX lists whole: 300 nested
 * directories of 20-byte names make relative paths of 6,300 bytes. */
START_TEST(list_deeper_than_path_max)
{
	enum { DEPTH = 300 };
	const char *name = "dddddddddddddddddddd";
	mkd("ws/deeptree");
	int fd = open(at("ws/deeptree"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < DEPTH; i++) {
		ck_assert_int_eq(mkdirat(fd, name, 0755), 0);
		int next = openat(fd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(next, 0);
		close(fd);
		fd = next;
	}
	int f = openat(fd, "leaf.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(f, 0);
	ck_assert_int_eq(write(f, "x", 1), 1);
	close(f);
	close(fd);

	struct result res;
	run(&tool_list_dir, &res, "{\"path\":\"deeptree\",\"recursive\":true,\"max_entries\":100000}");
	assert_ok(&res);
	const struct json *e = json_get(res.sc, "entries");
	ck_assert_uint_eq(e->u.arr.n, DEPTH + 1);
	ck_assert(!sc_bool(&res, "truncated"));
	const char *leaf = json_str(json_get(e->u.arr.items[DEPTH], "name"));
	ck_assert_uint_eq(strlen(leaf), DEPTH * (strlen(name) + 1) + strlen("leaf.txt"));
	ck_assert(str_has_suffix(leaf, "/leaf.txt"));
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[DEPTH], "type")), "file");
	result_clear(&res);

	/* Removed bottom up: rm_one through nftw would meet the same limit. */
	for (int depth = DEPTH; depth >= 0; depth--) {
		int d = open(at("ws/deeptree"), O_PATH | O_DIRECTORY | O_CLOEXEC);
		for (int i = 0; i < depth; i++) {
			int next = openat(d, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
			close(d);
			d = next;
		}
		if (depth == DEPTH)
			unlinkat(d, "leaf.txt", 0);
		else
			unlinkat(d, name, AT_REMOVEDIR);
		close(d);
	}
	ck_assert_int_eq(rmdir(at("ws/deeptree")), 0);
}
END_TEST

START_TEST(list_bounded)
{
	/* Many names in one directory: the first ones by name are kept. */
	mkd("ws/many");
	for (int i = 299; i >= 0; i--) {
		char name[64];
		snprintf(name, sizeof(name), "ws/many/f%03d", i);
		puts_file(name, "");
	}
	struct result res;
	run(&tool_list_dir, &res, "{\"path\":\"many\",\"max_entries\":10}");
	assert_ok(&res);
	_cleanup_free_ char *s = entries_str(&res);
	ck_assert_str_eq(s, "f000:file:0 f001:file:0 f002:file:0 f003:file:0 f004:file:0 f005:file:0 "
			    "f006:file:0 f007:file:0 f008:file:0 f009:file:0");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	run(&tool_list_dir, &res, "{\"path\":\"many\",\"max_entries\":300}");
	assert_ok(&res);
	ck_assert_uint_eq(json_get(res.sc, "entries")->u.arr.n, 300);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);

	/* A deep subdirectory fills the budget before the names pending above it. */
	mkd("ws/t2");
	mkd("ws/t2/a");
	for (int i = 0; i < 50; i++) {
		char name[64];
		snprintf(name, sizeof(name), "ws/t2/a/f%02d", i);
		puts_file(name, "");
		snprintf(name, sizeof(name), "ws/t2/b%02d", i);
		puts_file(name, "");
	}
	run(&tool_list_dir, &res, "{\"path\":\"t2\",\"recursive\":true,\"max_entries\":20}");
	assert_ok(&res);
	const struct json *e = json_get(res.sc, "entries");
	ck_assert_uint_eq(e->u.arr.n, 20);
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[0], "name")), "a");
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[1], "name")), "a/f00");
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[19], "name")), "a/f18");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	run(&tool_list_dir, &res, "{\"path\":\"t2\",\"recursive\":true,\"max_entries\":60}");
	assert_ok(&res);
	e = json_get(res.sc, "entries");
	ck_assert_uint_eq(e->u.arr.n, 60);
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[50], "name")), "a/f49");
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[51], "name")), "b00");
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[59], "name")), "b08");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);
}
END_TEST

START_TEST(list_refusals)
{
	struct result res;
	run(&tool_list_dir, &res, "{\"path\":\"hello.txt\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'hello.txt' is not a directory; use read_file");
	result_clear(&res);
	run(&tool_list_dir, &res, "{\"path\":\"nope\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "Directory 'nope' not found");
	result_clear(&res);
	run(&tool_list_dir, &res, "{\"path\":\"link-loop-a\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "symbolic links");
	result_clear(&res);
}
END_TEST

/* --- declarations and schemas ---------------------------------------------- */

static bool valid_args(const struct tool_def *def, const char *json)
{
	struct tool *t = make_tool(def);
	struct json_doc *doc = parse(json);
	struct schema_errors errs = {};
	bool ok = schema_validate(t->schema, json_doc_root(doc), &errs);
	ck_assert(ok == (errs.n == 0));
	schema_errors_clear(&errs);
	json_doc_unref(doc);
	tool_unref(t);
	return ok;
}

START_TEST(declarations)
{
	static const struct { const struct tool_def *def; const char *name; enum side_effect se; bool idem; } cases[] = {
		{ &tool_read_file, "read_file", SIDE_READ, true },
		{ &tool_write_file, "write_file", SIDE_WRITE, true },
		{ &tool_patch_file, "patch_file", SIDE_WRITE, false },
		{ &tool_list_dir, "list_dir", SIDE_READ, true },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const struct tool_def *d = cases[i].def;
		ck_assert_str_eq(d->name, cases[i].name);
		ck_assert_int_eq(d->side_effects, cases[i].se);
		ck_assert_int_eq(d->idempotent, cases[i].idem);
		ck_assert_ptr_nonnull(d->path_args);
		ck_assert_str_eq(d->path_args[0], "path");
		ck_assert_ptr_null(d->path_args[1]);
		ck_assert_uint_gt(strlen(d->description), 80);
		ck_assert_ptr_nonnull(d->exec);
		ck_assert(d->cancel == fsjob_cancel);	/* cancellable: the work runs on the io pool */
		/* Unknown arguments are refused by every file tool. */
		ck_assert(!valid_args(d, "{\"path\":\"x\",\"old\":\"a\",\"new\":\"b\",\"content\":\"c\",\"bogus\":1}"));
	}

	ck_assert(valid_args(&tool_read_file, "{\"path\":\"x\",\"offset\":0,\"limit\":1,\"encoding\":\"base64\"}"));
	ck_assert(!valid_args(&tool_read_file, "{}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":1}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"\"}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"offset\":-1}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"limit\":0}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"limit\":1.5}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"limit\":16777217}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"encoding\":\"latin1\"}"));

	ck_assert(valid_args(&tool_write_file, "{\"path\":\"x\",\"content\":\"\",\"create_dirs\":true}"));
	ck_assert(!valid_args(&tool_write_file, "{\"path\":\"x\"}"));
	ck_assert(!valid_args(&tool_write_file, "{\"path\":\"x\",\"content\":\"\",\"create_dirs\":\"yes\"}"));
	ck_assert(!valid_args(&tool_write_file, "{\"path\":\"x\",\"content\":\"\",\"encoding\":\"hex\"}"));

	ck_assert(valid_args(&tool_patch_file, "{\"path\":\"x\",\"old\":\"a\",\"new\":\"\"}"));
	ck_assert(!valid_args(&tool_patch_file, "{\"path\":\"x\",\"old\":\"\",\"new\":\"b\"}"));
	ck_assert(!valid_args(&tool_patch_file, "{\"path\":\"x\",\"old\":\"a\"}"));

	ck_assert(valid_args(&tool_list_dir, "{}"));
	ck_assert(valid_args(&tool_list_dir, "{\"path\":\"x\",\"recursive\":true,\"max_entries\":100000}"));
	ck_assert(!valid_args(&tool_list_dir, "{\"max_entries\":100001}"));
	ck_assert(!valid_args(&tool_list_dir, "{\"max_entries\":0}"));
	ck_assert(!valid_args(&tool_list_dir, "{\"recursive\":1}"));
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

/* Returns p with "@" replaced by the base directory, newly allocated. */
static char *expand_at(const char *p)
{
	struct buf b = {};
	for (; *p; p++) {
		if (*p == '@')
			buf_puts(&b, base);
		else
			buf_putc(&b, *p);
	}
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

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
	const size_t lens[] = { ELEMENTSOF(escape_files), ELEMENTSOF(escape_creates), ELEMENTSOF(escape_dirs),
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

	tc = tcase_create(fallback ? "api (no openat2)" : "api");
	tcase_add_checked_fixture(tc, fixture, teardown);
	tcase_add_test(tc, api_open);
	tcase_add_test(tc, api_open_by_alias);
	tcase_add_test(tc, api_check);
	tcase_add_test(tc, api_display_path);
	tcase_add_test(tc, api_open_parent);
	tcase_add_test(tc, api_errors);
	tcase_add_test(tc, read_sizeless_file);
	tcase_add_test(tc, read_looks_before_opening);
	suite_add_tcase(s, tc);

	tc = tcase_create(fallback ? "tools (no openat2)" : "tools");
	tcase_add_checked_fixture(tc, fixture, teardown);
	tcase_add_test(tc, read_window);
	tcase_add_test(tc, read_utf8);
	tcase_add_test(tc, base64_both_ways);
	tcase_add_test(tc, read_refusals);
	tcase_add_test(tc, write_new_and_replace);
	tcase_add_test(tc, write_create_dirs);
	tcase_add_test(tc, write_refusals);
	tcase_add_test(tc, patch_exactly_once);
	tcase_add_test(tc, list_flat_and_recursive);
	tcase_add_test(tc, list_bounded);
	tcase_add_test(tc, list_deeper_than_path_max);
	tcase_add_test(tc, list_refusals);
	tcase_add_test(tc, declarations);
	tcase_add_test(tc, no_fd_leak);
	tcase_add_test(tc, open_nofollow);
	tcase_add_test(tc, api_group);
	suite_add_tcase(s, tc);
}

static Suite *workspace_suite(void)
{
	Suite *s = suite_create("workspace");
	add_tcases(s, false);
	add_tcases(s, true);

	TCase *tc = tcase_create("both walks");
	tcase_add_checked_fixture(tc, setup_kernel, teardown);
	tcase_add_test(tc, walks_agree);
	tcase_add_test(tc, without_openat2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	snprintf(run_dir, sizeof(run_dir), "/tmp/tc-ws-test-XXXXXX");
	if (!mkdtemp(run_dir)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	/* Messages name canonical paths: resolve /tmp if it is a symlink. */
	char *real = realpath(run_dir, NULL);
	if (!real) {
		perror("realpath");
		return EXIT_FAILURE;
	}
	snprintf(run_dir, sizeof(run_dir), "%s", real);
	free(real);

	int r = run_suite(workspace_suite());
	nftw(run_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return r;
}
