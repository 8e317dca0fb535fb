/* SPDX-License-Identifier: MIT */
/*
 * The workspace suites' tree and tool runner (workspace_fixture.h).
 */
#include "tests/unit/workspace_fixture.h"

#include "tests/unit/check_main.h"

static char run_dir[PATH_MAX];	/* one per run, removed by main() even after failed tests */
char base[PATH_MAX + 16];
char root[PATH_MAX + 32];
struct workspace *ws;

/* --- the tree ------------------------------------------------------------ */

/* Returns base/rel in a static buffer (one of a few, so two can be in use). */
const char *at(const char *rel)
{
	static char bufs[4][PATH_MAX * 2];
	static unsigned k;
	char *b = bufs[k++ % 4];
	snprintf(b, PATH_MAX * 2, "%s/%s", base, rel);
	return b;
}

void put(const char *rel, const char *content, size_t n)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "create %s: %m", rel);
	ck_assert_int_eq(write(fd, content, n), (ssize_t)n);
	close(fd);
}

void puts_file(const char *rel, const char *content)
{
	put(rel, content, strlen(content));
}

/* Reads base/rel whole, or returns NULL when it does not exist. */
char *slurp(const char *rel, size_t *ret_n)
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

void mkd(const char *rel)
{
	ck_assert_msg(mkdir(at(rel), 0755) == 0, "mkdir %s: %m", rel);
}

void lnk(const char *target, const char *rel)
{
	ck_assert_msg(symlink(target, at(rel)) == 0, "symlink %s: %m", rel);
}

bool exists(const char *rel)
{
	struct stat st;
	return lstat(at(rel), &st) == 0;
}

mode_t mode_of(const char *rel)
{
	struct stat st;
	ck_assert_int_eq(lstat(at(rel), &st), 0);
	return st.st_mode & 07777;
}

int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
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

char *outside_snapshot(void)
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
void setup_kernel(void)
{
	ws_force_fallback(false);
	setup();
}

/* The tree, walked as where openat2 is missing. */
void setup_fallback(void)
{
	ws_force_fallback(true);
	setup();
}

void teardown(void)
{
	ws = ws_unref(ws);
	ck_assert_int_eq(chdir("/"), 0);
	nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* --- running tools -------------------------------------------------------- */

struct tool *make_tool(const struct tool_def *def)
{
	struct tool *t = NULL;
	_cleanup_free_ char *err = NULL;
	int r = tool_new(def, def->name, def->description, def->input_schema, NULL, &t, &err);
	ck_assert_msg(r == 0, "schema of %s: %s", def->name, err ? err : "?");
	return t;
}

/* Parses JSON text written by a test. */
struct json_doc *parse(const char *text)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	int r = json_parse(text, strlen(text), 0, 0, &doc, &err);
	ck_assert_msg(r == 0, "bad JSON in test: %s: %s", text, err.msg);
	return doc;
}

/* Runs a tool (workspace_fixture.h). */
void run_env(const struct tool_def *def, const struct tool_env *env, struct result *res, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *raw = xvasprintf(fmt, ap);
	va_end(ap);
	_cleanup_free_ char *args = expand_at(raw);

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

void result_clear(struct result *res)
{
	tool_call_clear(&res->call);
	res->doc = json_doc_unref(res->doc);
	res->sc = NULL;
}

const char *sc_str(const struct result *res, const char *key)
{
	const char *s = json_str(json_get(res->sc, key));
	ck_assert_msg(s, "structuredContent has no string '%s': %s", key, res->call.structured);
	return s;
}

int64_t sc_int(const struct result *res, const char *key)
{
	int64_t v;
	ck_assert_msg(json_get_int(json_get(res->sc, key), &v), "no integer '%s': %s", key, res->call.structured);
	return v;
}

bool sc_bool(const struct result *res, const char *key)
{
	const struct json *v = json_get(res->sc, key);
	ck_assert_msg(v && v->type == JSON_BOOL, "no boolean '%s': %s", key, res->call.structured);
	return v->u.b;
}

/* Counts the open fds of this process. */
int count_fds(void)
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

/* --- the escape matrix ------------------------------------------------------ */

/* Paths that name files and must be refused; "@" is the base directory. */
const char *const escape_files[] = {
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
const char *const escape_creates[] = {
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

const char *const escape_dirs[] = {
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

const size_t n_escape_files = ELEMENTSOF(escape_files);
const size_t n_escape_creates = ELEMENTSOF(escape_creates);
const size_t n_escape_dirs = ELEMENTSOF(escape_dirs);

char *expand_at(const char *p)
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

/* Checks a path ("@" is the base directory) with ws_check. */
int check_path(const char *p)
{
	_cleanup_free_ char *s = expand_at(p);
	return ws_check(ws, s, strlen(s));
}

/* Asserts no temporary file was left in base/rel. */
void assert_no_temp(const char *rel)
{
	DIR *d = opendir(at(rel));
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	while ((de = readdir(d)))
		ck_assert_msg(!strstr(de->d_name, ".tc-"), "temporary file left: %s", de->d_name);
	closedir(d);
}

/* Joins "name:type:size" of every entry with spaces. */
char *entries_str(const struct result *res)
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

/* A tree under ws/tree: files, directories, links in and out, a fifo. */
void make_tree(void)
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

int workspace_main(Suite *s)
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

	int r = run_suite(s);
	nftw(run_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return r;
}
