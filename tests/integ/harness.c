/* SPDX-License-Identifier: MIT */
/*
 * The integration-test harness (see harness.h): a real toolcalld in a
 * private temp dir, clients that speak line-framed JSON-RPC to it over its
 * socket with every wait bounded, and small JSON accessors for assertions.
 * It is long because every integration suite shares it: one daemon, one client and one set of assertions for all.
 */
#include "tests/integ/harness.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Failures are reported at the caller's line where that helps. */
#define FAIL_AT(file, line, ...) _ck_assert_failed((file), (line), "Failed", __VA_ARGS__)

uint64_t tc_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void tc_pause_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

const char *tc_daemon_path(void)
{
	const char *p = getenv("TOOLCALLD");
	ck_assert_msg(p && *p, "$TOOLCALLD is not set (run the tests through meson)");
	return p;
}

const char *tc_ctl_path(void)
{
	const char *p = getenv("TOOLCALLCTL");
	ck_assert_msg(p && *p, "$TOOLCALLCTL is not set (run the tests through meson)");
	return p;
}

/* --- files ------------------------------------------------------------- */

static char *slurp(const char *path, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct buf b = {};
	char tmp[65536];
	ssize_t n;
	while ((n = read(fd, tmp, sizeof(tmp))) > 0)
		buf_append(&b, tmp, (size_t)n);
	close(fd);
	if (ret_len)
		*ret_len = b.len;
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

static void write_all_fd(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n > 0) {
		ssize_t k = write(fd, s, n);
		if (k < 0 && errno == EINTR)
			continue;
		ck_assert_msg(k > 0, "write: %s", strerror(errno));
		s += k;
		n -= (size_t)k;
	}
}

/* Creates every missing parent directory of path. */
static void mkdir_parents(const char *path)
{
	char *p = xstrdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			ck_abort_msg("mkdir %s: %s", p, strerror(errno));
		*s = '/';
	}
	free(p);
}

void tc_write_file_atomic(const char *path, const char *content, size_t len)
{
	char *tmp = xasprintf("%s.tmp-%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "open %s: %s", tmp, strerror(errno));
	write_all_fd(fd, content, len);
	close(fd);
	ck_assert_msg(rename(tmp, path) == 0, "rename %s: %s", tmp, strerror(errno));
	free(tmp);
}

char *tcd_ws_path(const struct tcd *d, const char *rel)
{
	return xasprintf("%s/%s", d->ws, rel);
}

char *tcd_write_ws(struct tcd *d, const char *rel, const void *content, size_t len, mode_t mode)
{
	char *path = tcd_ws_path(d, rel);
	mkdir_parents(path);
	if (!mode)
		mode = 0644;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	write_all_fd(fd, content, len);
	fchmod(fd, mode);	/* whatever the umask */
	close(fd);
	return path;
}

void tcd_put(struct tcd *d, const char *rel, const char *content)
{
	free(tcd_write_ws(d, rel, content, strlen(content), 0));
}

void tcd_put_filler(struct tcd *d, const char *rel, size_t size, size_t line_len)
{
	char *text = xmalloc(size + 1);
	memset(text, 'x', size);
	if (line_len)
		for (size_t i = line_len - 1; i < size; i += line_len)
			text[i] = '\n';
	text[size] = '\0';
	free(tcd_write_ws(d, rel, text, size, 0));
	free(text);
}

char *tcd_read(const struct tcd *d, const char *path, size_t *ret_len)
{
	if (path[0] == '/')
		return slurp(path, ret_len);
	char *p = tcd_ws_path(d, path);
	char *r = slurp(p, ret_len);
	free(p);
	return r;
}

void tcd_write_tool(struct tcd *d, const char *file, const char *json)
{
	ck_assert_msg(d->tools_dir, "no tools dir");
	char *path = xasprintf("%s/%s", d->tools_dir, file);
	tc_write_file_atomic(path, json, strlen(json));
	free(path);
}

char *tcd_log(const struct tcd *d)
{
	char *s = d->log ? slurp(d->log, NULL) : NULL;
	return s ? s : xstrdup("");
}

static unsigned count_in(const char *s, const char *needle)
{
	unsigned n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

bool tcd_wait_log(const struct tcd *d, const char *needle, unsigned count, int timeout_ms)
{
	return tc_wait_until(({
		char *log = tcd_log(d);
		bool enough = count_in(log, needle) >= count;
		free(log);
		enough;
	}), tc_wait_scaled(timeout_ms));
}

bool tcd_wait_stat(struct tcd *d, const char *path, int64_t at_least, int timeout_ms)
{
	struct tcc *c = tcc_connect(d);
	bool ok = tc_wait_until(tj_int(tcc_request(c, "admin/stats", NULL), path) >= at_least,
				tc_wait_scaled(timeout_ms));
	tcc_close(c);
	return ok;
}

/* The last bytes of the daemon's log (malloc'd), for failure messages. */
static char *log_tail(const char *log_path)
{
	char *log = log_path ? slurp(log_path, NULL) : NULL;
	if (!log)
		return xstrdup("(no log)");
	size_t n = strlen(log);
	if (n <= 3000)
		return log;
	char *tail = xasprintf("...%s", log + n - 3000);
	free(log);
	return tail;
}

long tcd_rss_kb(const struct tcd *d)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
	char *s = slurp(path, NULL);
	if (!s)
		return -1;
	long kb = -1;
	char *p = strstr(s, "VmRSS:");
	if (p)
		kb = strtol(p + 6, NULL, 10);
	free(s);
	return kb;
}

/* --- the daemon ---------------------------------------------------------- */

/* Replaces @DIR@, @WS@ and @TOOLS@. */
static char *expand(const struct tcd *d, const char *text)
{
	struct buf b = {};
	for (const char *p = text; *p;) {
		if (str_has_prefix(p, "@DIR@")) {
			buf_puts(&b, d->dir);
			p += 5;
		} else if (str_has_prefix(p, "@WS@")) {
			buf_puts(&b, d->ws);
			p += 4;
		} else if (str_has_prefix(p, "@TOOLS@")) {
			buf_puts(&b, d->tools_dir);
			p += 7;
		} else {
			buf_putc(&b, *p++);
		}
	}
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/*
 * Writes the sandbox object *v (or an empty one) as make valgrind needs it.
 * valgrind does not know the Landlock and seccomp system calls, and it
 * keeps the hard limit on open files for itself (a child that lowers it is
 * refused, EPERM): unless the test says otherwise the calls run with what
 * can be enforced ("require": false) and without the "nofile" limit.
 */
static void valgrind_sandbox(struct jgen *g, const struct json *v)
{
	const struct json *limits = v ? json_get(v, "limits") : NULL;
	jgen_obj_open(g);
	if (!v || !json_get(v, "require"))
		jgen_kv_bool(g, "require", false);
	if (!limits)
		jgen_kv_raw(g, "limits", "{\"nofile\":null}", 15);
	for (size_t i = 0; v && i < v->u.obj.n; i++) {
		const char *key = v->u.obj.members[i].key;
		const struct json *m = v->u.obj.members[i].value;
		jgen_key(g, key);
		if (m != limits || m->type != JSON_OBJECT) {
			jgen_value(g, m);
			continue;
		}
		jgen_obj_open(g);
		if (!json_get(m, "nofile")) {
			jgen_key(g, "nofile");
			jgen_null(g);
		}
		for (size_t j = 0; j < m->u.obj.n; j++) {
			jgen_key(g, m->u.obj.members[j].key);
			jgen_value(g, m->u.obj.members[j].value);
		}
		jgen_obj_close(g);
	}
	jgen_obj_close(g);
}

/* The config object with the harness's socket, workspace and tools_dir
 * added where the test did not set them (and, under make valgrind, the
 * sandbox valgrind_sandbox writes). */
static char *merge_config(const struct tcd *d, const char *text)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(text, strlen(text), JSON_ALLOW_COMMENTS, 0, &doc, &err) < 0)
		ck_abort_msg("test config is not JSON (%s at byte %zu): %s", err.msg, err.offset, text);
	const struct json *root = json_doc_root(doc);
	ck_assert_msg(root->type == JSON_OBJECT, "test config is not an object: %s", text);
	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	if (!json_get(root, "socket"))
		jgen_kv_str(g, "socket", d->sock);
	if (!json_get(root, "workspace"))
		jgen_kv_str(g, "workspace", d->ws);
	if (!json_get(root, "tools_dir"))
		jgen_kv_str(g, "tools_dir", d->tools_dir);
	bool valgrind = getenv("TC_UNDER_VALGRIND");
	if (valgrind && !json_get(root, "sandbox")) {
		jgen_key(g, "sandbox");
		valgrind_sandbox(g, NULL);
	}
	for (size_t i = 0; i < root->u.obj.n; i++) {
		const char *key = root->u.obj.members[i].key;
		const struct json *v = root->u.obj.members[i].value;
		jgen_key(g, key);
		if (valgrind && strcmp(key, "sandbox") == 0 && v->type == JSON_OBJECT)
			valgrind_sandbox(g, v);
		else
			jgen_value(g, v);
	}
	jgen_obj_close(g);
	jgen_free(g);
	json_doc_unref(doc);
	buf_putc(&b, '\n');
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/*
 * The daemons of this process, for the exit handler: a failed assertion
 * ends the test process with exit(), past the test's own tcd_free(), and
 * its daemon and temp dir must not outlive it. (Set $TCD_KEEP to keep the
 * temp dirs of failed tests for a look.)
 */
static struct tcd *live[64];
static bool exit_hook;

static void remove_tree(const char *dir);

static void cleanup_at_exit(void)
{
	for (size_t i = 0; i < ELEMENTSOF(live); i++) {
		struct tcd *d = live[i];
		if (!d)
			continue;
		live[i] = NULL;
		if (d->pid > 0) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, NULL, 0);
			d->pid = 0;
		}
		if (d->dir && !getenv("TCD_KEEP"))
			remove_tree(d->dir);
	}
}

static void track(struct tcd *d, bool on)
{
	if (!exit_hook) {
		atexit(cleanup_at_exit);
		exit_hook = true;
	}
	for (size_t i = 0; i < ELEMENTSOF(live); i++) {
		if (on && !live[i]) {
			live[i] = d;
			return;
		}
		if (!on && live[i] == d)
			live[i] = NULL;
	}
}

void tcd_prepare(struct tcd *d, const struct tcd_opts *o)
{
	*d = (struct tcd){ .status = -1 };
	track(d, true);
	char tmpl[] = "/tmp/tcd-XXXXXX";
	ck_assert_msg(mkdtemp(tmpl), "mkdtemp: %s", strerror(errno));
	d->dir = xstrdup(tmpl);
	d->sock = xasprintf("%s/sock", d->dir);
	d->ws = xasprintf("%s/ws", d->dir);
	d->tools_dir = xasprintf("%s/tools.d", d->dir);
	d->config = xasprintf("%s/config.json", d->dir);
	d->log = xasprintf("%s/daemon.log", d->dir);
	ck_assert(mkdir(d->ws, 0755) == 0);
	ck_assert(mkdir(d->tools_dir, 0755) == 0);

	char *text = expand(d, o && o->config ? o->config : "{}");
	if (!(o && o->raw_config)) {
		char *merged = merge_config(d, text);
		free(text);
		text = merged;
	}
	tc_write_file_atomic(d->config, text, strlen(text));
	free(text);
}

/* Applies tcd_opts.env-style changes to the current environment. */
static void apply_env(const char *const *env)
{
	static const char *const scrub[] = {
		"NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "TOOLCALLD_SOCKET",
		"WATCHDOG_USEC", "WATCHDOG_PID",
	};
	for (size_t i = 0; i < ELEMENTSOF(scrub); i++)
		unsetenv(scrub[i]);
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq) {
			unsetenv(env[i]);
			continue;
		}
		char *name = xstrndup(env[i], (size_t)(eq - env[i]));
		setenv(name, eq + 1, 1);
		free(name);
	}
}

/* In a freshly forked child: die with the test, default signals. */
static void child_setup(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
}

void tcd_spawn(struct tcd *d, const struct tcd_opts *o)
{
	ck_assert_msg(!d->pid, "tcd_spawn: the daemon is already running");
	const char *argv[64];
	size_t n = 0;
	for (size_t i = 0; o && o->wrapper && o->wrapper[i]; i++)
		argv[n++] = o->wrapper[i];
	argv[n++] = tc_daemon_path();
	if (!(o && o->no_config_flag)) {
		argv[n++] = "--config";
		argv[n++] = d->config;
	}
	for (size_t i = 0; o && o->args && o->args[i]; i++) {
		ck_assert(n < ELEMENTSOF(argv) - 1);
		argv[n++] = o->args[i];
	}
	argv[n] = NULL;

	pid_t parent = getpid();
	pid_t pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		child_setup(parent);
		int log = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (log < 0 || null < 0)
			_exit(127);
		dup2(null, 0);
		dup2(log, 1);
		dup2(log, 2);
		if (chdir(o && o->cwd ? o->cwd : d->dir) < 0)
			_exit(127);
		apply_env(o ? o->env : NULL);
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "harness: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	d->pid = pid;
	d->status = -1;
}

/* Records a reaped wait status. */
static int decode_status(int ws)
{
	if (WIFEXITED(ws))
		return WEXITSTATUS(ws);
	if (WIFSIGNALED(ws))
		return 128 + WTERMSIG(ws);
	return -1;
}

/*
 * How long to wait for something that should come: timeout_ms times
 * $TC_WAIT_SCALE (a whole number, 1 when unset). make valgrind sets it,
 * since everything there runs many times slower; the cases that assert how
 * long something took are tagged "timing" and left out there.
 */
static uint64_t wait_ms(int timeout_ms)
{
	static uint64_t scale;
	if (!scale) {
		const char *s = getenv("TC_WAIT_SCALE");
		long v = s ? strtol(s, NULL, 10) : 1;
		scale = v > 0 && v <= 100 ? (uint64_t)v : 1;
	}
	return (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * scale;
}

uint64_t tc_wait_scaled(int timeout_ms)
{
	return wait_ms(timeout_ms);
}

int tcd_wait_exit(struct tcd *d, int timeout_ms)
{
	if (!d->pid)
		return d->status;
	uint64_t deadline = tc_now_ms() + wait_ms(timeout_ms);
	for (;;) {
		int ws;
		pid_t r = waitpid(d->pid, &ws, WNOHANG);
		if (r == d->pid) {
			d->pid = 0;
			d->status = decode_status(ws);
			if (d->status != 0 && d->log) {
				/* Say why here: the test only sees the number. */
				char *tail = log_tail(d->log);
				fprintf(stderr, "toolcalld exited with status %d; its log:\n%s\n", d->status, tail);
				free(tail);
			}
			return d->status;
		}
		if (r < 0 && errno != EINTR) {
			d->pid = 0;
			return d->status;
		}
		if (tc_now_ms() >= deadline)
			return -ETIMEDOUT;
		tc_pause_ms(5);
	}
}

static int try_connect(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ck_assert_msg(strlen(path) < sizeof(sa.sun_path), "socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int tcd_wait_socket(struct tcd *d, const char *path, int timeout_ms)
{
	uint64_t deadline = tc_now_ms() + wait_ms(timeout_ms);
	for (;;) {
		int fd = try_connect(path);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (d && d->pid && tcd_wait_exit(d, 0) != -ETIMEDOUT)
			return -ECHILD;
		if (tc_now_ms() >= deadline)
			return -ETIMEDOUT;
		tc_pause_ms(10);
	}
}

void tcd_start_opts(struct tcd *d, const struct tcd_opts *o)
{
	tcd_prepare(d, o);
	tcd_spawn(d, o);
	if (o && o->no_wait)
		return;
	int r = tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS);
	if (r < 0) {
		char *log = tcd_log(d);
		char *cfg = slurp(d->config, NULL);
		ck_abort_msg("daemon did not start (%s, status %d)\nconfig: %s\nlog:\n%s",
			     r == -ECHILD ? "it exited" : "socket not accepting after 5 s", d->status,
			     cfg ? cfg : "?", log);
	}
}

void tcd_start(struct tcd *d, const char *config_json)
{
	struct tcd_opts o = { .config = config_json };
	tcd_start_opts(d, &o);
}

void tcd_start_auto(struct tcd *d, const char *members)
{
	char *cfg = xasprintf("{" TC_AUTO_CONFIRM "%s}", members);
	tcd_start(d, cfg);
	free(cfg);
}

char *tcd_home(const struct tcd *d)
{
	char *home = xasprintf("%s/home", d->dir);
	ck_assert_msg(mkdir(home, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", home, strerror(errno));
	return home;
}

void tcd_spawn_home(struct tcd *d, struct tcd_opts *o)
{
	char *home = tcd_home(d);
	char *env_home = xasprintf("HOME=%s", home);
	const char *env[] = { env_home, NULL };
	o->env = env;
	tcd_spawn(d, o);
	o->env = NULL;
	if (tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS) < 0) {
		char *log = tcd_log(d);
		ck_abort_msg("the daemon did not start: %s", log);
	}
	free(env_home);
	free(home);
}

void tcd_open_to_all(struct tcd *d)
{
	ck_assert_int_eq(chmod(d->dir, 0711), 0);
	ck_assert_int_eq(chmod(d->ws, 0777), 0);
}

void tcd_finish(struct tcd *d)
{
	ck_assert_int_eq(tcd_stop(d), 0);
	tcd_free(d);
}

const char *const tc_as_nobody[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", NULL };

void tcd_spawn_nobody(struct tcd *d, struct tcd_opts *o)
{
	o->wrapper = tc_as_nobody;
	o->no_wait = true;
	tcd_prepare(d, o);
	ck_assert_int_eq(chmod(d->dir, 0777), 0);
	ck_assert_int_eq(chmod(d->ws, 0777), 0);
	ck_assert_int_eq(chmod(d->config, 0644), 0);
	tcd_spawn(d, o);
}

const struct json *tcc_shell(struct tcc *c, const char *command)
{
	char *q = tj_quote(command);
	const struct json *r = tcc_call(c, "shell", tcc_fmt(c, "{\"command\":%s}", q));
	free(q);
	return r;
}

void tc_assert_shell_fails(struct tcc *c, const char *command)
{
	char *one = xasprintf("%s && echo DONE", command);
	const struct json *r = tcc_shell(c, one);
	const char *o = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(!o || !strstr(o, "DONE"), "'%s' succeeded: %s", command, tcc_raw(c, r));
	free(one);
}

void tc_assert_shell_fails_all(struct tcc *c, const char *const *commands, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tc_assert_shell_fails(c, commands[i]);
}

bool tj_has_str(const struct json *v, const char *path, const char *s)
{
	const struct json *a = tj(v, path);
	for (size_t i = 0; a && a->type == JSON_ARRAY && i < a->u.arr.n; i++)
		if (json_str(a->u.arr.items[i]) && strcmp(json_str(a->u.arr.items[i]), s) == 0)
			return true;
	return false;
}

void tcd_kill(struct tcd *d, int sig)
{
	ck_assert_msg(d->pid > 0, "the daemon is not running");
	kill(d->pid, sig);
}

int tcd_stop(struct tcd *d)
{
	if (!d->pid)
		return d->status;
	kill(d->pid, SIGTERM);
	int r = tcd_wait_exit(d, TCD_STOP_TIMEOUT_MS);
	if (r != -ETIMEDOUT)
		return r;
	kill(d->pid, SIGKILL);
	int ws;
	waitpid(d->pid, &ws, 0);
	d->pid = 0;
	d->status = -1;
	return -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (flag == FTW_DP || flag == FTW_D)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* Makes every directory below dir writable and searchable, so tests that
 * chmod things away still clean up. */
static int chmod_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (flag == FTW_D || flag == FTW_DNR)
		chmod(path, 0700);
	return 0;
}

static void remove_tree(const char *dir)
{
	nftw(dir, chmod_one, 16, FTW_PHYS);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void tcd_free(struct tcd *d)
{
	track(d, false);
	if (d->pid) {
		kill(d->pid, SIGKILL);
		int ws;
		waitpid(d->pid, &ws, 0);
		d->pid = 0;
	}
	if (d->dir)
		remove_tree(d->dir);
	free(d->dir);
	free(d->sock);
	free(d->ws);
	free(d->tools_dir);
	free(d->config);
	free(d->log);
	*d = (struct tcd){ .status = -1 };
}

/* --- running programs ---------------------------------------------------- */

int tc_run(const char *const argv[], const char *const env[], const char *cwd, char **ret_out,
	   char **ret_err, int timeout_ms)
{
	int po[2], pe[2];
	ck_assert(pipe2(po, O_CLOEXEC) == 0 && pipe2(pe, O_CLOEXEC) == 0);
	pid_t parent = getpid();
	pid_t pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		child_setup(parent);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		dup2(null, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		if (cwd && chdir(cwd) < 0)
			_exit(127);
		apply_env(env);
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	struct buf out = {}, err = {};
	struct pollfd p[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
	uint64_t deadline = tc_now_ms() + wait_ms(timeout_ms);
	bool timed_out = false;
	while (p[0].fd >= 0 || p[1].fd >= 0) {
		uint64_t now = tc_now_ms();
		if (now >= deadline) {
			timed_out = true;
			break;
		}
		int r = poll(p, 2, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			char tmp[4096];
			ssize_t n = read(p[i].fd, tmp, sizeof(tmp));
			if (n > 0) {
				buf_append(i ? &err : &out, tmp, (size_t)n);
			} else if (n == 0 || errno != EINTR) {
				close(p[i].fd);
				p[i].fd = -1;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	int status = -1, ws;
	if (timed_out) {
		kill(pid, SIGKILL);
		waitpid(pid, &ws, 0);
	} else {
		/* Output closed; the program may still be exiting. */
		struct tcd t = { .pid = pid, .status = -1 };
		status = tcd_wait_exit(&t, MAX(100, (int)(deadline - MIN(deadline, tc_now_ms()))));
		if (status == -ETIMEDOUT) {
			kill(pid, SIGKILL);
			waitpid(pid, &ws, 0);
			status = -1;
		}
	}
	buf_putc(&out, '\0');
	buf_putc(&err, '\0');
	if (ret_out)
		*ret_out = buf_steal(&out);
	if (ret_err)
		*ret_err = buf_steal(&err);
	buf_free(&out);
	buf_free(&err);
	return status;
}

/* --- the client ---------------------------------------------------------- */

struct tcc {
	int fd;
	const char *log;		/* the daemon's log, for failure messages */
	bool eof;
	struct buf in;
	int64_t next_id;
	struct json_doc **queue;	/* lines received but not yet asked for */
	size_t n_queue;
	struct json_doc **docs;		/* everything to unref at close */
	size_t n_docs;
	void **strs;			/* everything to free at close */
	size_t n_strs;
};

static void *own(struct tcc *c, void *p)
{
	c->strs = xreallocarray(c->strs, c->n_strs + 1, sizeof(*c->strs));
	c->strs[c->n_strs++] = p;
	return p;
}

static struct json_doc *own_doc(struct tcc *c, struct json_doc *doc)
{
	c->docs = xreallocarray(c->docs, c->n_docs + 1, sizeof(*c->docs));
	c->docs[c->n_docs++] = doc;
	return doc;
}

struct tcc *tcc_connect_as(struct tcd *d, uid_t uid, gid_t gid)
{
	ck_assert(setegid(gid) == 0);
	ck_assert(seteuid(uid) == 0);
	struct tcc *c = tcc_connect(d);
	ck_assert(seteuid(0) == 0);
	ck_assert(setegid(0) == 0);
	return c;
}

struct tcc *tcc_connect_path(const char *path)
{
	int fd = try_connect(path);
	ck_assert_msg(fd >= 0, "connect %s: %s", path, strerror(-fd));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	struct tcc *c = xcalloc(1, sizeof(*c));
	c->fd = fd;
	c->next_id = 1000;
	return c;
}

struct tcc *tcc_connect(struct tcd *d)
{
	struct tcc *c = tcc_connect_path(d->sock);
	c->log = d->log;
	return c;
}

int tcc_fd(const struct tcc *c)
{
	return c->fd;
}

void tcc_close(struct tcc *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	for (size_t i = 0; i < c->n_docs; i++)
		json_doc_unref(c->docs[i]);
	for (size_t i = 0; i < c->n_strs; i++)
		free(c->strs[i]);
	free(c->docs);
	free(c->strs);
	free(c->queue);
	buf_free(&c->in);
	free(c);
}

ssize_t tcc_send_nb(struct tcc *c, const void *data, size_t len)
{
	ssize_t k = send(c->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (k < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
	return k;
}

int tcc_send_raw(struct tcc *c, const void *data, size_t len)
{
	const char *p = data;
	uint64_t deadline = tc_now_ms() + wait_ms(TCC_TIMEOUT_MS);
	while (len > 0) {
		ssize_t k = tcc_send_nb(c, p, len);
		if (k < 0)
			return (int)k;
		p += k;
		len -= (size_t)k;
		if (len == 0)
			break;
		uint64_t now = tc_now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd pfd = { c->fd, POLLOUT, 0 };
		poll(&pfd, 1, (int)(deadline - now));
	}
	return 0;
}

void tcc_send(struct tcc *c, const char *line)
{
	size_t n = strlen(line);
	char *s = xmalloc(n + 1);
	memcpy(s, line, n);
	s[n] = '\n';
	int r = tcc_send_raw(c, s, n + 1);
	free(s);
	ck_assert_msg(r == 0, "send failed (%s): %.200s", strerror(-r), line);
}

/* Reads what is available, waiting until deadline: 1 data, 0 timeout,
 * -1 EOF. */
static int read_more(struct tcc *c, uint64_t deadline)
{
	if (c->eof)
		return -1;
	for (;;) {
		char tmp[65536];
		ssize_t n = read(c->fd, tmp, sizeof(tmp));
		if (n > 0) {
			buf_append(&c->in, tmp, (size_t)n);
			return 1;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			c->eof = true;
			return -1;
		}
		uint64_t now = tc_now_ms();
		if (now >= deadline)
			return 0;
		struct pollfd pfd = { c->fd, POLLIN, 0 };
		poll(&pfd, 1, (int)MIN(deadline - now, 1000));
	}
}

bool tcc_eof(const struct tcc *c)
{
	return c->eof;
}

/* The next line until deadline, or NULL. */
static const char *next_line(struct tcc *c, uint64_t deadline, size_t *ret_len)
{
	size_t scanned = 0;
	for (;;) {
		const char *h = buf_head(&c->in);
		size_t n = buf_size(&c->in);
		const char *nl = n > scanned ? memchr(h + scanned, '\n', n - scanned) : NULL;
		if (nl) {
			size_t len = (size_t)(nl - h);
			char *line = own(c, xmalloc(len + 1));
			memcpy(line, h, len);
			line[len] = '\0';
			buf_consume(&c->in, len + 1);
			if (ret_len)
				*ret_len = len;
			return line;
		}
		scanned = n;
		if (read_more(c, deadline) <= 0)
			return NULL;
	}
}

const char *tcc_recv_line(struct tcc *c, int timeout_ms, size_t *ret_len)
{
	return next_line(c, tc_now_ms() + (uint64_t)timeout_ms, ret_len);
}

static struct json_doc *parse_line(struct tcc *c, const char *line, size_t len)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(line, len, 0, 1024, &doc, &err) < 0)
		ck_abort_msg("the daemon sent a line that is not JSON (%s at byte %zu): %.500s", err.msg,
			     err.offset, line);
	return own_doc(c, doc);
}

struct json_doc *tcc_recv(struct tcc *c, int timeout_ms)
{
	size_t len;
	const char *line = next_line(c, tc_now_ms() + wait_ms(timeout_ms), &len);
	return line ? parse_line(c, line, len) : NULL;
}

bool tcc_quiet(struct tcc *c, int ms)
{
	if (buf_size(&c->in))
		return false;
	return read_more(c, tc_now_ms() + (uint64_t)ms) == 0;
}

/* True when v is root or lies inside it. */
static bool contains(const struct json *root, const struct json *v)
{
	if (root == v)
		return true;
	if (root->type == JSON_OBJECT)
		for (size_t i = 0; i < root->u.obj.n; i++)
			if (contains(root->u.obj.members[i].value, v))
				return true;
	if (root->type == JSON_ARRAY)
		for (size_t i = 0; i < root->u.arr.n; i++)
			if (contains(root->u.arr.items[i], v))
				return true;
	return false;
}

const char *tcc_raw(struct tcc *c, const struct json *v)
{
	ck_assert(v);
	/* A value's offset is into the text of the doc it came from. */
	for (size_t i = c->n_docs; i-- > 0;)
		if (contains(json_doc_root(c->docs[i]), v))
			return own(c, xstrndup(json_doc_text(c->docs[i]) + v->off, v->len));
	ck_abort_msg("tcc_raw: the value is not from a doc of this connection");
}

const struct json *tcc_parse(struct tcc *c, const char *text, size_t len)
{
	return json_doc_root(parse_line(c, text, len));
}

const char *tcc_fmt(struct tcc *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = xvasprintf(fmt, ap);
	va_end(ap);
	return own(c, s);
}

static void enqueue(struct tcc *c, struct json_doc *doc)
{
	c->queue = xreallocarray(c->queue, c->n_queue + 1, sizeof(*c->queue));
	c->queue[c->n_queue++] = doc;
}

static void dequeue(struct tcc *c, size_t i)
{
	memmove(c->queue + i, c->queue + i + 1, (c->n_queue - i - 1) * sizeof(*c->queue));
	c->n_queue--;
}

/* True when doc is a response whose id's text is id_raw. */
static bool id_matches(struct json_doc *doc, const char *id_raw)
{
	const struct json *root = json_doc_root(doc);
	const struct json *id = json_get(root, "id");
	if (!id || json_get(root, "method"))
		return false;
	size_t n = strlen(id_raw);
	return id->len == n && memcmp(json_doc_text(doc) + id->off, id_raw, n) == 0;
}

static bool is_notification(struct json_doc *doc, const char *method)
{
	const struct json *root = json_doc_root(doc);
	if (root->type != JSON_OBJECT || json_get(root, "id"))
		return false;
	const char *m = json_str(json_get(root, "method"));
	return m && (!method || str_eq(m, method));
}

/* Takes the first message matching want(doc, arg): from the queue first,
 * then from the socket, queueing whatever else arrives. */
static const struct json *wait_for(struct tcc *c, bool (*want)(struct json_doc *doc, const char *arg),
				   const char *arg, int timeout_ms)
{
	for (size_t i = 0; i < c->n_queue; i++)
		if (want(c->queue[i], arg)) {
			struct json_doc *doc = c->queue[i];
			dequeue(c, i);
			return json_doc_root(doc);
		}
	uint64_t deadline = tc_now_ms() + wait_ms(timeout_ms);
	for (;;) {
		size_t len;
		const char *line = next_line(c, deadline, &len);
		if (!line)
			return NULL;
		struct json_doc *doc = parse_line(c, line, len);
		if (want(doc, arg))
			return json_doc_root(doc);
		enqueue(c, doc);
	}
}

const struct json *tcc_wait_id(struct tcc *c, const char *id_raw, int timeout_ms)
{
	return wait_for(c, id_matches, id_raw, timeout_ms);
}

const struct json *tcc_wait_notification(struct tcc *c, const char *method, int timeout_ms)
{
	return wait_for(c, is_notification, method, timeout_ms);
}

/* A request the daemon sends the client: an "id" and this method. */
static bool is_daemon_request(struct json_doc *doc, const char *method)
{
	const struct json *root = json_doc_root(doc);
	const char *m = root->type == JSON_OBJECT && json_get(root, "id") ? json_str(json_get(root, "method")) : NULL;
	return m && str_eq(m, method);
}

const struct json *tcc_wait_daemon_request(struct tcc *c, const char *method, int timeout_ms)
{
	return wait_for(c, is_daemon_request, method, timeout_ms);
}

const struct json *tcc_wait_event(struct tcc *c, const char *type, int timeout_ms)
{
	uint64_t end = tc_now_ms() + (uint64_t)timeout_ms;
	for (uint64_t now; (now = tc_now_ms()) < end;) {
		const struct json *n = tcc_wait_notification(c, "notifications/event", (int)(end - now));
		const struct json *e = n ? json_get(n, "params") : NULL;
		if (!e)
			return NULL;
		if (str_eq(tj_str(e, "type"), type))
			return e;
	}
	return NULL;
}

void tcc_clear_queue(struct tcc *c)
{
	c->n_queue = 0;
}

size_t tcc_count_notifications(struct tcc *c, const char *method)
{
	size_t n = 0;
	for (size_t i = 0; i < c->n_queue; i++)
		n += is_notification(c->queue[i], method);
	return n;
}

int64_t tcc_send_request(struct tcc *c, const char *method, const char *params_json)
{
	int64_t id = c->next_id++;
	char *q = tj_quote(method);
	char *line = params_json
		? xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":%s,\"params\":%s}", (long long)id, q,
			    params_json)
		: xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":%s}", (long long)id, q);
	tcc_send(c, line);
	free(line);
	free(q);
	return id;
}

const struct json *tcc_request_t(struct tcc *c, const char *method, const char *params_json,
				 int timeout_ms)
{
	int64_t id = tcc_send_request(c, method, params_json);
	char raw[32];
	snprintf(raw, sizeof(raw), "%lld", (long long)id);
	const struct json *r = tcc_wait_id(c, raw, timeout_ms);
	if (!r) {
		char *tail = log_tail(c->log);
		ck_abort_msg("no response to %s %.300s within %d ms%s; daemon log:\n%s", method,
			     params_json ? params_json : "", timeout_ms, c->eof ? " (connection closed)" : "", tail);
	}
	return r;
}

const struct json *tcc_request(struct tcc *c, const char *method, const char *params_json)
{
	return tcc_request_t(c, method, params_json, TCC_TIMEOUT_MS);
}

const struct json *tcc_call(struct tcc *c, const char *tool, const char *args_json)
{
	char *q = tj_quote(tool);
	char *params = xasprintf("{\"name\":%s,\"arguments\":%s}", q, args_json ? args_json : "{}");
	const struct json *r = tcc_request(c, "tools/call", params);
	free(params);
	free(q);
	return r;
}

const struct json *tcc_initialize(struct tcc *c, const char *extra_params_json)
{
	char *params = xasprintf("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
				 "\"clientInfo\":{\"name\":\"integ\",\"version\":\"1\"}%s%s}",
				 extra_params_json ? "," : "", extra_params_json ? extra_params_json : "");
	const struct json *r = tcc_request(c, "initialize", params);
	free(params);
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	return json_get(r, "result");
}

const struct json *tcc_reload(struct tcc *c)
{
	return tcc_request(c, "admin/reload", NULL);
}

/* --- JSON helpers -------------------------------------------------------- */

const struct json *tj(const struct json *v, const char *path)
{
	const char *p = path;
	while (v && *p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		char *seg = xstrndup(p, n);
		if (v->type == JSON_ARRAY) {
			char *end;
			unsigned long i = strtoul(seg, &end, 10);
			v = (*seg && !*end && i < v->u.arr.n) ? v->u.arr.items[i] : NULL;
		} else {
			v = json_get(v, seg);
		}
		free(seg);
		p += n;
		if (*p == '.')
			p++;
	}
	return v;
}

const char *tj_str(const struct json *v, const char *path)
{
	return json_str(tj(v, path));
}

int64_t tj_int(const struct json *v, const char *path)
{
	int64_t x;
	const struct json *w = tj(v, path);
	if (!json_get_int(w, &x)) {
		char *t = v ? tj_text(v) : xstrdup("NULL");
		ck_abort_msg("no integer at '%s' in %.1500s", path, t);
	}
	return x;
}

bool tj_bool(const struct json *v, const char *path)
{
	const struct json *w = tj(v, path);
	if (!w || w->type != JSON_BOOL) {
		char *t = v ? tj_text(v) : xstrdup("NULL");
		ck_abort_msg("no boolean at '%s' in %.1500s", path, t);
	}
	return w->u.b;
}

long tj_len(const struct json *v, const char *path)
{
	const struct json *w = tj(v, path);
	if (!w)
		return -1;
	if (w->type == JSON_ARRAY)
		return (long)w->u.arr.n;
	if (w->type == JSON_OBJECT)
		return (long)w->u.obj.n;
	return -1;
}

const char *tj_kind(const struct json *resp)
{
	return tj_str(resp, "error.data.kind");
}

char *tj_text(const struct json *v)
{
	struct buf b = {};
	if (v) {
		struct jgen *g = jgen_new(&b);
		jgen_value(g, v);
		jgen_free(g);
	} else {
		buf_puts(&b, "(null)");
	}
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

char *tj_quote(const char *s)
{
	struct buf b = {};
	json_quote(&b, s, strlen(s));
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

void tc_assert_ok_at(const struct json *resp, const char *file, int line)
{
	if (resp && json_get(resp, "result") && !json_get(resp, "error"))
		return;
	char *t = tj_text(resp);
	FAIL_AT(file, line, "expected a result, got %.2000s", t);
}

void tc_assert_kind_at(const struct json *resp, const char *kind, const char *file, int line)
{
	const char *k = tj_kind(resp);
	if (k && str_eq(k, kind))
		return;
	char *t = tj_text(resp);
	FAIL_AT(file, line, "expected error kind %s, got %.2000s", kind, t);
}

const char *tc_text(const struct json *resp)
{
	const char *t = tj_str(resp, "result.content.0.text");
	return t ? t : "";
}

void tc_assert_text_at(const struct json *resp, bool has, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *needle = xvasprintf(fmt, ap);
	va_end(ap);
	bool holds = strstr(tc_text(resp), needle) != NULL;
	free(needle);
	if (holds != has)
		FAIL_AT(file, line, "%s", tc_text(resp));
}
