/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl against a scripted server: a forked process listens on a
 * private socket, answers each request with the next canned line of its
 * script (interleaving notifications where the script says), and records
 * what the client sent. Checks exit statuses, printed output and what went
 * over the wire. The path of the toolcallctl binary is argv[1].
 * It is long because every command and every exit status of toolcallctl has its case here, sharing one scripted server.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"

static const char *ctl_path;

/* One step of the server's script, consumed by one request. */
struct step {
	const char *method;	/* the request expected */
	const char *before;	/* lines sent before the reply ("\n"-separated), or NULL */
	const char *reply;	/* with $ID for the request's id; NULL: never answer; "CLOSE": hang up */
	const char *after;	/* lines sent after the reply, or NULL */
	bool hangup;		/* close the connection after this step */
};

struct fixture {
	char *dir;
	char *sock;
	char *log;		/* what the client sent, one line each */
	pid_t server;
};

struct run {
	int status;		/* exit status, or -1 when killed */
	char *out;
	char *err;
};

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return xstrdup("");
	struct buf b = {};
	char tmp[4096];
	size_t n;
	while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		buf_append(&b, tmp, n);
	fclose(f);
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

static void write_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, s, n);
		if (k <= 0)
			return;
		s += k;
		n -= (size_t)k;
	}
}

/* Sends template text with $ID replaced, ending with a newline. */
static void send_lines(int fd, const char *tmpl, const char *id, size_t id_len)
{
	struct buf b = {};
	for (const char *p = tmpl; *p;) {
		const char *at = strstr(p, "$ID");
		if (!at) {
			buf_puts(&b, p);
			break;
		}
		buf_append(&b, p, (size_t)(at - p));
		buf_append(&b, id, id_len);
		p = at + 3;
	}
	buf_putc(&b, '\n');
	write_all(fd, buf_head(&b), buf_size(&b));
	buf_free(&b);
}

/* The server process: one connection, one script. */
static void serve(int lfd, const char *log_path, const struct step *script)
{
	alarm(20);
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		_exit(1);
	FILE *log = fopen(log_path, "we");
	if (!log)
		_exit(1);

	struct buf in = {};
	struct framer fr = { .max = 1 << 20 };
	for (;;) {
		const char *line;
		size_t len;
		enum frame_result f = framer_next(&fr, &in, &line, &len);
		if (f == FRAME_NONE) {
			buf_reserve(&in, 4096);
			ssize_t n = read(fd, in.data + in.len, in.cap - in.len);
			if (n <= 0)
				break;
			in.len += (size_t)n;
			continue;
		}
		if (f != FRAME_LINE)
			break;
		fprintf(log, "%.*s\n", (int)len, line);
		fflush(log);

		struct json_doc *doc = NULL;
		if (json_parse(line, len, 0, 0, &doc, NULL) < 0)
			break;
		const struct json *msg = json_doc_root(doc);
		const struct json *id = json_get(msg, "id");
		if (!id) {
			json_doc_unref(doc);
			continue;	/* notifications get nothing */
		}
		const char *idtext = line + id->off;
		size_t idlen = id->len;
		const char *method = json_str(json_get(msg, "method"));
		if (!script->method || !str_eq(method, script->method)) {
			send_lines(fd, "{\"jsonrpc\":\"2.0\",\"id\":$ID,\"error\":{\"code\":-32601,"
				   "\"message\":\"unexpected request in the script\"}}", idtext, idlen);
			json_doc_unref(doc);
			continue;
		}
		if (script->before)
			send_lines(fd, script->before, idtext, idlen);
		if (script->reply && str_eq(script->reply, "CLOSE")) {
			json_doc_unref(doc);
			break;
		}
		if (script->reply)
			send_lines(fd, script->reply, idtext, idlen);
		if (script->after)
			send_lines(fd, script->after, idtext, idlen);
		json_doc_unref(doc);
		if (script->hangup)
			break;
		script++;
	}
	fclose(log);
	close(fd);
	buf_free(&in);
	_exit(0);
}

static void fixture_start(struct fixture *fx, const struct step *script)
{
	char tmpl[] = "/tmp/tc-ctl-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	fx->dir = xstrdup(tmpl);
	fx->sock = xasprintf("%s/sock", fx->dir);
	fx->log = xasprintf("%s/sent", fx->dir);
	fx->server = -1;
	if (!script)
		return;

	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(lfd, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", fx->sock);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);

	fx->server = fork();
	ck_assert_int_ge(fx->server, 0);
	if (fx->server == 0)
		serve(lfd, fx->log, script);
	close(lfd);
}

static void fixture_stop(struct fixture *fx)
{
	if (fx->server > 0) {
		kill(fx->server, SIGKILL);
		waitpid(fx->server, NULL, 0);
	}
	_cleanup_free_ char *out = xasprintf("%s/out", fx->dir);
	_cleanup_free_ char *err = xasprintf("%s/err", fx->dir);
	_cleanup_free_ char *in = xasprintf("%s/in", fx->dir);
	unlink(out);
	unlink(err);
	unlink(in);
	unlink(fx->log);
	unlink(fx->sock);
	rmdir(fx->dir);
	free(fx->dir);
	free(fx->sock);
	free(fx->log);
}

/* Waits for the server to finish its connection, so its log is complete. */
static void fixture_wait_server(struct fixture *fx)
{
	if (fx->server <= 0)
		return;
	int st;
	ck_assert_int_eq(waitpid(fx->server, &st, 0), fx->server);
	fx->server = -1;
}

/*
 * Runs toolcallctl with argv (NULL-terminated, without the program name),
 * input as its stdin (NULL: /dev/null) and env_socket as
 * $TOOLCALLD_SOCKET (NULL: unset).
 */
/* Where run_ctl sends toolcallctl's stdout instead of a file (NULL: a file). */
static const char *stdout_to;
/* The uid (and gid) run_ctl runs toolcallctl as (0: the test's own), and
 * a supplementary group it gets (0: none). */
static uid_t run_as;
static gid_t run_group;
/* A directory run_ctl shows toolcallctl as /run/toolcalld, in a mount
 * namespace of its own (NULL: none). */
static const char *system_dir;

static struct run run_ctl(struct fixture *fx, const char *input, const char *env_socket,
			  const char *const *argv)
{
	_cleanup_free_ char *out = xasprintf("%s/out", fx->dir);
	_cleanup_free_ char *err = xasprintf("%s/err", fx->dir);
	_cleanup_free_ char *in = xasprintf("%s/in", fx->dir);
	int fd = open(in, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	if (input)
		write_all(fd, input, strlen(input));
	close(fd);

	const char *args[32] = { ctl_path };
	size_t n = 1;
	for (; argv[n - 1]; n++) {
		ck_assert_uint_lt(n, ELEMENTSOF(args) - 1);
		args[n] = argv[n - 1];
	}
	args[n] = NULL;

	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int i = open(input ? in : "/dev/null", O_RDONLY);
		int o = open(stdout_to ? stdout_to : out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (i < 0 || o < 0 || e < 0)
			_exit(127);
		dup2(i, 0);
		dup2(o, 1);
		dup2(e, 2);
		unsetenv("XDG_RUNTIME_DIR");
		if (system_dir && (unshare(CLONE_NEWNS) < 0 ||
				   mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
				   mount("tmpfs", "/run", "tmpfs", 0, "mode=0755") < 0 ||
				   mkdir("/run/toolcalld", 0755) < 0 ||
				   mount(system_dir, "/run/toolcalld", NULL, MS_BIND, NULL) < 0))
			_exit(125);
		if (run_as && (setgroups(run_group ? 1 : 0, &run_group) < 0 || setgid(run_as) < 0 ||
			       setuid(run_as) < 0))
			_exit(126);
		if (env_socket)
			setenv("TOOLCALLD_SOCKET", env_socket, 1);
		else
			unsetenv("TOOLCALLD_SOCKET");
		alarm(20);
		execv(ctl_path, (char *const *)args);
		_exit(127);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);

	struct run r = {
		.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1,
		.out = read_all(out),
		.err = read_all(err),
	};
	return r;
}

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

#define OK(id_result) "{\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":" id_result "}"

/* Fails the case at file:line unless the run exited with status and, where
 * they are not NULL, printed exactly out and err. */
#define assert_run(r, status, out, err) assert_run_at((r), (status), (out), (err), __FILE__, __LINE__)
static void assert_run_at(const struct run *r, int status, const char *out, const char *err, const char *file,
			  int line)
{
	if (r->status != status)
		_ck_assert_failed(file, line, "Failed", "exit status %d, not %d; stdout '%s', stderr '%s'", r->status,
				  status, r->out, r->err);
	if (out && !str_eq(r->out, out))
		_ck_assert_failed(file, line, "Failed", "stdout '%s', not '%s'", r->out, out);
	if (err && !str_eq(r->err, err))
		_ck_assert_failed(file, line, "Failed", "stderr '%s', not '%s'", r->err, err);
}

/* In the argv of talk(): the scripted server's socket path. */
static const char SOCK[] = "(the socket)";

/* One run of toolcallctl against a scripted server: how it ended, and
 * what it sent (the server's log, one line each; "" when none listened). */
struct talk {
	struct run r;
	char *sent;
};

/*
 * Runs toolcallctl with argv (SOCK standing for the socket's path), input
 * as its stdin (NULL: /dev/null), against a server playing script (NULL:
 * nothing listens), then waits for the server to end so that sent is
 * complete.
 */
static struct talk talk(const struct step *script, const char *input, const char *const *argv)
{
	struct fixture fx;
	fixture_start(&fx, script);
	const char *args[32];
	size_t n = 0;
	for (; argv[n]; n++) {
		ck_assert_uint_lt(n, ELEMENTSOF(args) - 1);
		args[n] = argv[n] == SOCK ? fx.sock : argv[n];
	}
	args[n] = NULL;
	struct talk t = { .r = run_ctl(&fx, input, NULL, args) };
	fixture_wait_server(&fx);
	t.sent = read_all(fx.log);
	fixture_stop(&fx);
	return t;
}

static void talk_free(struct talk *t)
{
	run_free(&t->r);
	free(t->sent);
}

/* Runs toolcallctl as talk() does and asserts how it ended, as
 * assert_run() does. */
#define assert_talk(script, input, argv, status, out, err)                 \
	do {                                                               \
		struct talk t_ = talk((script), (input), (argv));          \
		assert_run(&t_.r, (status), (out), (err));                 \
		talk_free(&t_);                                            \
	} while (0)

START_TEST(ping_skips_notifications)
{
	static const struct step script[] = {
		{ .method = "ping",
		  .before = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/event\",\"params\":{\"type\":\"tool.called\"}}",
		  .reply = OK("{}") },
		{},
	};
	assert_talk(script, NULL, ARGS("-s", SOCK, "ping"), 0, "pong\n", "");
}
END_TEST

/* A full disk is a failure, not a success with the output lost. */
START_TEST(full_disk_exits_7)
{
	if (access("/dev/full", W_OK) != 0)
		TC_SKIP("no writable /dev/full");
	static const struct step script[] = { { .method = "ping", .reply = OK("{}") }, {} };
	struct fixture fx;
	fixture_start(&fx, script);
	stdout_to = "/dev/full";
	struct run r = run_ctl(&fx, NULL, NULL, ARGS("-s", fx.sock, "ping"));
	struct run h = run_ctl(&fx, NULL, NULL, ARGS("--help"));
	stdout_to = NULL;
	assert_run(&r, 7, NULL, "toolcallctl: cannot write the output: No space left on device\n");
	assert_run(&h, 7, NULL, "toolcallctl: cannot write the output: No space left on device\n");
	run_free(&r);
	run_free(&h);
	fixture_stop(&fx);
}
END_TEST

START_TEST(default_socket_from_env)
{
	static const struct step script[] = { { .method = "ping", .reply = OK("{}") }, {} };
	struct fixture fx;
	fixture_start(&fx, script);
	struct run r = run_ctl(&fx, NULL, fx.sock, ARGS("ping"));
	assert_run(&r, 0, "pong\n", NULL);
	run_free(&r);
	fixture_stop(&fx);
}
END_TEST

START_TEST(call_success_prints_text)
{
	static const struct step script[] = {
		{ .method = "tools/call",
		  .reply = OK("{\"content\":[{\"type\":\"text\",\"text\":\"hello\\nworld\"}],"
		     "\"structuredContent\":{\"content\":\"hello\\nworld\"},\"isError\":false}") },
		{},
	};
	struct talk t = talk(script, NULL, ARGS("-s", SOCK, "call", "read_file", "{ \"path\": \"a.txt\" }"));
	assert_run(&t.r, 0, "hello\nworld\n", NULL);
	ck_assert_str_eq(t.sent, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
				 "\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"a.txt\"}}}\n");
	talk_free(&t);
}
END_TEST

START_TEST(call_arguments_default_and_stdin)
{
	static const struct step script[] = {
		{ .method = "tools/call", .reply = OK("{\"content\":[],\"isError\":false}") },
		{},
	};

	/* No JSON-ARGS: {}. */
	struct talk t = talk(script, NULL, ARGS("-s", SOCK, "call", "list_dir"));
	assert_run(&t.r, 0, "", NULL);
	ck_assert_msg(strstr(t.sent, "\"arguments\":{}") != NULL, "%s", t.sent);
	talk_free(&t);

	/* "-": from stdin, sent on one line however it was written. */
	t = talk(script, "{\n  \"path\": \"x\",\n  \"recursive\": true\n}\n", ARGS("-s", SOCK, "call", "list_dir", "-"));
	assert_run(&t.r, 0, NULL, NULL);
	ck_assert_msg(strstr(t.sent, "\"arguments\":{\"path\":\"x\",\"recursive\":true}}}\n") != NULL, "%s", t.sent);
	talk_free(&t);
}
END_TEST

START_TEST(call_is_error_exits_1)
{
	static const struct step script[] = {
		{ .method = "tools/call",
		  .reply = OK("{\"content\":[{\"type\":\"text\",\"text\":\"exit 3\\n\"}],"
		     "\"structuredContent\":{\"exit_code\":3},\"isError\":true}") },
		{},
	};
	assert_talk(script, NULL, ARGS("-s", SOCK, "call", "shell", "{\"command\":\"exit 3\"}"), 1, "exit 3\n", NULL);
}
END_TEST

START_TEST(call_error_envelope_exits_5)
{
	static const struct step script[] = {
		{ .method = "tools/call",
		  .reply = "{\"jsonrpc\":\"2.0\",\"id\":$ID,\"error\":{\"code\":-32602,"
		  "\"message\":\"Invalid arguments for 'read_file': /path: expected string, got number\","
		  "\"data\":{\"kind\":\"validation_error\",\"retryable\":false,\"attempts\":0,"
		  "\"errors\":[{\"path\":\"/path\",\"message\":\"expected string, got number\"},"
		  "{\"path\":\"\",\"message\":\"unexpected property 'x'\"}]}}}" },
		{},
	};
	assert_talk(script, NULL, ARGS("-s", SOCK, "call", "read_file", "{\"path\":1}"), 5, "",
		    "error: validation_error: Invalid arguments for 'read_file': /path: expected string, got number\n"
		    "  /path: expected string, got number\n"
		    "  /: unexpected property 'x'\n");
}
END_TEST

START_TEST(call_not_found)
{
	static const struct step script[] = {
		{ .method = "tools/call",
		  .reply = "{\"jsonrpc\":\"2.0\",\"id\":$ID,\"error\":{\"code\":-32601,"
		  "\"message\":\"Tool 'red_file' not found. Available: [read_file]\","
		  "\"data\":{\"kind\":\"not_found\",\"retryable\":false}}}" },
		{},
	};
	struct talk t = talk(script, NULL, ARGS("-s", SOCK, "--json", "call", "red_file"));
	assert_run(&t.r, 5, NULL, "error: not_found: Tool 'red_file' not found. Available: [read_file]\n");
	/* --json also prints the whole error. */
	ck_assert_msg(strstr(t.r.out, "\"code\": -32601,\n") != NULL, "%s", t.r.out);
	talk_free(&t);
}
END_TEST

START_TEST(call_json_prints_result)
{
	static const struct step script[] = {
		{ .method = "tools/call",
		  .reply = OK("{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"isError\":false}") },
		{},
	};
	assert_talk(script, NULL, ARGS("-s", SOCK, "-j", "call", "t"), 0,
		    "{\n"
		    "  \"content\": [\n"
		    "    {\n"
		    "      \"type\": \"text\",\n"
		    "      \"text\": \"hi\"\n"
		    "    }\n"
		    "  ],\n"
		    "  \"isError\": false\n"
		    "}\n",
		    NULL);
}
END_TEST

START_TEST(call_bad_arguments_is_usage_error)
{
	/* Checked before connecting: there is no server at all. */
	struct talk t = talk(NULL, NULL, ARGS("-s", SOCK, "call", "read_file", "{path: 1}"));
	assert_run(&t.r, 2, NULL, NULL);
	ck_assert_msg(strstr(t.r.err, "JSON-ARGS is not valid JSON") != NULL, "%s", t.r.err);
	talk_free(&t);
}
END_TEST

START_TEST(list_is_aligned_and_paged)
{
	static const struct step script[] = {
		{ .method = "tools/list",
		  .reply = OK("{\"tools\":[{\"name\":\"read_file\",\"description\":\"Read a file.\\nMore text.\","
		     "\"_meta\":{\"toolcalld/sideEffects\":\"read\"}},"
		     "{\"name\":\"shell\",\"description\":\"Run a command\","
		     "\"_meta\":{\"toolcalld/sideEffects\":\"execute\"}}],\"nextCursor\":\"p2\"}") },
		{ .method = "tools/list",
		  .reply = OK("{\"tools\":[{\"name\":\"git_status\",\"description\":\"Show \\u001b[31mchanged\\u001b[0m files\","
		     "\"_meta\":{\"toolcalld/sideEffects\":\"none\"}}]}") },
		{},
	};
	struct talk t = talk(script, NULL, ARGS("-s", SOCK, "list"));
	assert_run(&t.r, 0,
		   "read_file   read     Read a file.\n"
		   "shell       execute  Run a command\n"
		   "git_status  none     Show ?[31mchanged?[0m files\n",
		   NULL);
	ck_assert_msg(strstr(t.sent, "\"params\":{\"cursor\":\"p2\"}") != NULL, "%s", t.sent);
	talk_free(&t);
}
END_TEST

START_TEST(stats_and_cancel)
{
	static const struct step script[] = {
		{ .method = "admin/stats", .reply = OK("{\"connections\":1,\"sessions\":{\"active\":2}}") },
		{},
	};
	static const struct step cancel[] = {
		{ .method = "sessions/cancel", .reply = OK("{\"cancelled\":2}") },
		{},
	};
	assert_talk(script, NULL, ARGS("-s", SOCK, "stats"), 0,
		    "{\n  \"connections\": 1,\n  \"sessions\": {\n    \"active\": 2\n  }\n}\n", NULL);

	struct talk t = talk(cancel, NULL, ARGS("-s", SOCK, "cancel", "s-42"));
	assert_run(&t.r, 0, "cancelled 2\n", NULL);
	ck_assert_msg(strstr(t.sent, "\"method\":\"sessions/cancel\",\"params\":{\"sessionId\":\"s-42\"}") != NULL,
		      "%s", t.sent);
	talk_free(&t);
}
END_TEST

START_TEST(cannot_connect_exits_3)
{
	struct talk t = talk(NULL, NULL, ARGS("-s", SOCK, "ping"));
	assert_run(&t.r, 3, NULL, NULL);
	ck_assert_msg(strstr(t.r.err, "cannot connect to") != NULL, "%s", t.r.err);
	talk_free(&t);
}
END_TEST

/* Every command takes -s after its name too. */
START_TEST(socket_option_after_the_command)
{
	static const struct step ping[] = { { .method = "ping", .reply = OK("{}") }, {} };
	static const struct step metrics[] = {
		{ .method = "admin/metrics", .reply = OK("{\"text\":\"# EOF\\n\"}") }, {} };
	static const struct step stats[] = { { .method = "admin/stats", .reply = OK("{}") }, {} };
	assert_talk(ping, NULL, ARGS("ping", "-s", SOCK), 0, "pong\n", NULL);

	struct fixture fx;
	fixture_start(&fx, metrics);
	_cleanup_free_ char *eq = xasprintf("--socket=%s", fx.sock);
	struct run r = run_ctl(&fx, NULL, NULL, ARGS("metrics", eq));
	assert_run(&r, 0, "# EOF\n", NULL);
	run_free(&r);
	fixture_stop(&fx);

	fixture_start(&fx, stats);
	r = run_ctl(&fx, NULL, NULL, ARGS("stats", "--socket", fx.sock));
	assert_run(&r, 0, NULL, NULL);
	run_free(&r);
	r = run_ctl(&fx, NULL, NULL, ARGS("stats", "-s"));
	assert_run(&r, 2, NULL, NULL);
	run_free(&r);
	fixture_stop(&fx);
}
END_TEST

/* No daemon: how to start one. */
START_TEST(cannot_connect_says_how_to_start)
{
	struct fixture fx;
	fixture_start(&fx, NULL);
	struct run r = run_ctl(&fx, NULL, NULL, ARGS("metrics", "-s", fx.sock));
	assert_run(&r, 3, NULL, NULL);
	ck_assert_msg(strstr(r.err, fx.sock) && strstr(r.err, "systemctl --user start toolcalld.socket") &&
		      strstr(r.err, "-s"), "%s", r.err);
	run_free(&r);
	fixture_stop(&fx);
}
END_TEST

/* Makes the files run_ctl writes for a run as root, open to every uid:
 * for a toolcallctl run as another. */
static void open_run_files(const struct fixture *fx)
{
	const char *names[] = { "out", "err", "in" };
	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", fx->dir, names[i]);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(fchmod(fd, 0666), 0);
		close(fd);
	}
}

/* A socket the user may not use: whose it is, and what to do. */
START_TEST(permission_denied_names_owner_and_group)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to act as uid 65534");
	if (getenv("TC_UNDER_VALGRIND"))
		TC_SKIP("under valgrind: toolcallctl run as uid 65534 cannot write valgrind's log");
	static const struct step ping[] = { { .method = "ping", .reply = OK("{}") }, {} };
	struct fixture fx;
	fixture_start(&fx, ping);
	ck_assert_int_eq(chmod(fx.dir, 0711), 0);
	ck_assert_int_eq(chmod(fx.sock, 0660), 0);
	open_run_files(&fx);
	run_as = 65534;
	struct run r = run_ctl(&fx, NULL, NULL, ARGS("-s", fx.sock, "ping"));
	run_as = 0;
	assert_run(&r, 3, NULL, NULL);
	/* Root's group: joining it is not advised. */
	ck_assert_msg(strstr(r.err, "Permission denied") && strstr(r.err, "belongs to user root") &&
		      strstr(r.err, "lets no other user in") && !strstr(r.err, "join group") &&
		      strstr(r.err, "or use -s") && strstr(r.err, "0660"), "%s", r.err);
	run_free(&r);
	/* A group of its own (here bin's): joining it is. */
	struct group *g = getgrnam("bin");
	if (g) {
		ck_assert_int_eq(chown(fx.sock, 0, g->gr_gid), 0);
		run_as = 65534;
		r = run_ctl(&fx, NULL, NULL, ARGS("-s", fx.sock, "ping"));
		run_as = 0;
		assert_run(&r, 3, NULL, NULL);
		ck_assert_msg(strstr(r.err, "join group bin") && strstr(r.err, "usermod -aG bin"), "%s", r.err);
		run_free(&r);
	}
	fixture_stop(&fx);
}
END_TEST

/* Without -s, a user with no daemon of its own finds the system daemon's
 * socket: a member of its group connects, anyone else is told what to do. */
START_TEST(system_socket_without_s)
{
	if (geteuid() != 0)
		TC_SKIP("needs root for a mount namespace and uid 65534");
	if (getenv("TC_UNDER_VALGRIND"))
		TC_SKIP("under valgrind: toolcallctl run as uid 65534 cannot write valgrind's log");
	if (access("/tmp/toolcalld-65534", F_OK) == 0)
		TC_SKIP("uid 65534 has a socket directory of its own");
	static const struct step ping[] = { { .method = "ping", .reply = OK("{}") }, {} };
	struct fixture fx;
	fixture_start(&fx, ping);
	_cleanup_free_ char *sys = xasprintf("%s/toolcalld.sock", fx.dir);
	ck_assert_int_eq(link(fx.sock, sys), 0);
	ck_assert_int_eq(chmod(fx.dir, 0755), 0);
	ck_assert_int_eq(chown(fx.sock, 0, 65533), 0);
	ck_assert_int_eq(chmod(fx.sock, 0660), 0);
	open_run_files(&fx);
	system_dir = fx.dir;
	run_as = 65534;

	/* Not a member: whose the socket is, and what to do. */
	struct run r = run_ctl(&fx, NULL, NULL, ARGS("ping"));
	assert_run(&r, 3, NULL, NULL);
	ck_assert_msg(strstr(r.err, "/run/toolcalld/toolcalld.sock") && strstr(r.err, "Permission denied") &&
		      strstr(r.err, "or use -s"), "%s", r.err);
	run_free(&r);

	/* A member: it connects. */
	run_group = 65533;
	r = run_ctl(&fx, NULL, NULL, ARGS("ping"));
	run_group = 0;
	run_as = 0;
	system_dir = NULL;
	assert_run(&r, 0, "pong\n", NULL);
	run_free(&r);
	unlink(sys);
	fixture_stop(&fx);
}
END_TEST

START_TEST(closed_connection_exits_3)
{
	static const struct step script[] = { { .method = "ping", .reply = "CLOSE" }, {} };
	struct talk t = talk(script, NULL, ARGS("-s", SOCK, "ping"));
	assert_run(&t.r, 3, NULL, NULL);
	ck_assert_msg(strstr(t.r.err, "closed the connection") != NULL, "%s", t.r.err);
	talk_free(&t);
}
END_TEST

START_TEST(garbage_exits_4)
{
	static const struct step script[] = { { .method = "ping", .reply = "this is not json" }, {} };
	struct talk t = talk(script, NULL, ARGS("-s", SOCK, "ping"));
	assert_run(&t.r, 4, NULL, NULL);
	ck_assert_msg(strstr(t.r.err, "not JSON") != NULL, "%s", t.r.err);
	talk_free(&t);

	static const struct step neither[] = { { .method = "ping",
		  .reply = "{\"jsonrpc\":\"2.0\",\"id\":$ID}" }, {} };
	assert_talk(neither, NULL, ARGS("-s", SOCK, "ping"), 4, NULL, NULL);
}
END_TEST

START_TEST(null_id_error_answers_the_request)
{
	/* What toolcalld answers to a request over its size limit: it never
	 * read the id. Without a timeout, call would wait forever. */
	static const char *const too_long = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
					    "\"message\":\"Invalid Request: message longer than 8388608 bytes\"}}";
	const struct step call[] = { { .method = "tools/call", .reply = too_long }, {} };
	const struct step ping[] = { { .method = "ping", .reply = too_long }, {} };
	const struct step list[] = { { .method = "tools/list", .reply = too_long }, {} };

	assert_talk(call, NULL, ARGS("-s", SOCK, "call", "read_file", "{\"path\":\"a\"}"), 5, NULL,
		    "error: code -32600: Invalid Request: message longer than 8388608 bytes\n");

	/* Every command that waits for one answer: no waiting out -t. */
	assert_talk(ping, NULL, ARGS("-s", SOCK, "-t", "0", "ping"), 5, "", NULL);

	struct talk t = talk(list, NULL, ARGS("-s", SOCK, "-t", "0", "--json", "list"));
	assert_run(&t.r, 5, NULL, NULL);
	ck_assert_msg(strstr(t.r.out, "\"code\": -32600") != NULL, "%s", t.r.out);
	talk_free(&t);

	/* Only an error can come with id null. */
	static const struct step result[] = { { .method = "ping",
		  .reply = "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}" }, {} };
	assert_talk(result, NULL, ARGS("-s", SOCK, "-t", "0", "ping"), 4, "", NULL);
}
END_TEST

START_TEST(bad_results_exit_4)
{
	static const struct {
		const char *method, *result;
		const char *argv[4];
	} cases[] = {
		{ "tools/call", "5", { "call", "t" } },
		{ "tools/call", "{}", { "call", "t" } },
		{ "tools/call", "{}", { "--json", "call", "t" } },
		{ "tools/call", "{\"content\":\"hi\"}", { "call", "t" } },
		{ "tools/call", "{\"content\":[],\"isError\":\"no\"}", { "call", "t" } },
		{ "sessions/cancel", "{}", { "cancel", "s-1" } },
		{ "sessions/cancel", "{\"cancelled\":\"2\"}", { "cancel", "s-1" } },
		{ "sessions/cancel", "{\"cancelled\":1.5}", { "cancel" } },
		{ "admin/stats", "[]", { "stats" } },
		{ "admin/stats", "5", { "--json", "stats" } },
		{ "ping", "\"pong\"", { "ping" } },
		{ "tools/list", "{}", { "list" } },
		{ "tools/list", "{\"tools\":[1]}", { "list" } },
		{ "tools/list", "{\"tools\":[{\"description\":\"no name\"}]}", { "list" } },
		{ "tools/list", "{\"tools\":[],\"nextCursor\":5}", { "list" } },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_free_ char *reply = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":%s}",
						       cases[i].result);
		const struct step script[] = { { .method = cases[i].method, .reply = reply }, {} };
		const char *argv[8] = { "-s", SOCK, "-t", "5000" };
		size_t n = 4;
		for (size_t j = 0; j < ELEMENTSOF(cases[i].argv) && cases[i].argv[j]; j++)
			argv[n++] = cases[i].argv[j];
		struct talk t = talk(script, NULL, argv);
		ck_assert_msg(t.r.status == 4, "%s %s: status %d, out '%s', err '%s'", cases[i].method,
			      cases[i].result, t.r.status, t.r.out, t.r.err);
		ck_assert_msg(str_eq(t.r.out, ""), "%s %s: %s", cases[i].method, cases[i].result, t.r.out);
		ck_assert_msg(strstr(t.r.err, "toolcalld sent") != NULL, "%s", t.r.err);
		talk_free(&t);
	}
}
END_TEST

START_TEST(timeout_exits_6_and_cancels)
{
	static const struct step script[] = { { .method = "tools/call" }, {} };
	struct talk t = talk(script, NULL, ARGS("-s", SOCK, "-t", "200", "call", "shell"));
	assert_run(&t.r, 6, NULL, NULL);
	ck_assert_msg(strstr(t.r.err, "no answer within 200 ms") != NULL, "%s", t.r.err);
	/* The call nobody waits for is cancelled. */
	ck_assert_msg(strstr(t.sent, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			     "\"params\":{\"requestId\":1,") != NULL, "%s", t.sent);
	talk_free(&t);
}
END_TEST

/* Runs toolcallctl with argv (SOCK standing for a socket nothing listens
 * on), input its stdin, and fails the case at file:line unless it exits
 * with status and, where err_has is not NULL, its stderr holds err_has. */
#define assert_err_has(input, argv, status, err_has) \
	assert_err_has_at((input), (argv), (status), (err_has), __FILE__, __LINE__)
static void assert_err_has_at(const char *input, const char *const *argv, int status, const char *err_has,
			      const char *file, int line)
{
	struct talk t = talk(NULL, input, argv);
	assert_run_at(&t.r, status, NULL, NULL, file, line);
	if (err_has && !strstr(t.r.err, err_has))
		_ck_assert_failed(file, line, "Failed", "stderr '%s' lacks '%s'", t.r.err, err_has);
	talk_free(&t);
}

START_TEST(usage_errors_exit_2)
{
	assert_err_has(NULL, ARGS("-s", SOCK), 2, NULL);
	assert_err_has(NULL, ARGS("frobnicate"), 2, "unknown command 'frobnicate'");
	assert_err_has(NULL, ARGS("call"), 2, NULL);
	assert_err_has(NULL, ARGS("ping", "extra"), 2, NULL);
	assert_err_has(NULL, ARGS("-t", "soon", "ping"), 2, NULL);
	assert_err_has(NULL, ARGS("--bogus", "ping"), 2, NULL);

	/* Arguments are checked before connecting: there is no server. */
	assert_err_has(NULL, ARGS("-s", SOCK, "call", "read_file", "[1]"), 2,
		       "JSON-ARGS must be a JSON object (got array)");
	assert_err_has("\"{}\"\n", ARGS("-s", SOCK, "call", "read_file", "-"), 2, "must be a JSON object (got string)");
	assert_err_has(NULL, ARGS("-s", SOCK, "watch", "tool.*", "bad$pat"), 2, "'bad$pat' is not an event pattern");
	assert_err_has(NULL, ARGS("-s", SOCK, "watch", ""), 2, NULL);
	assert_err_has(NULL, ARGS("-s", SOCK, "cancel", ""), 2, NULL);
	/* Good patterns pass the check, and then nothing answers. */
	assert_err_has(NULL, ARGS("-s", SOCK, "watch", "tool.*", "dispatch.retry", "circuit_2.*"), 3, NULL);

	struct talk t = talk(NULL, NULL, ARGS("--help"));
	assert_run(&t.r, 0, NULL, NULL);
	ck_assert_msg(strstr(t.r.out, "Exit status:") != NULL, "%s", t.r.out);
	ck_assert_msg(strstr(t.r.out, "approve") != NULL, "%s", t.r.out);
	talk_free(&t);
	t = talk(NULL, NULL, ARGS("--version"));
	assert_run(&t.r, 0, NULL, NULL);
	ck_assert_msg(str_has_prefix(t.r.out, "toolcallctl "), "%s", t.r.out);
	talk_free(&t);
}
END_TEST

#define INIT_OK OK("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"toolcalld\"},\"sessionId\":\"s-1\"}")
#define EVENT(p) "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/event\",\"params\":" p "}"

START_TEST(watch_prints_events)
{
	static const struct step script[] = {
		{ .method = "initialize", .reply = INIT_OK },
		{ .method = "events/subscribe",
		  .reply = OK("{\"subscribed\":[\"tool.*\"]}"),
		  .after = EVENT("{\"type\":\"tool.called\",\"time\":\"2026-01-02T03:04:05.678Z\",\"sessionId\":\"s-1\","
			"\"callId\":\"c-1\",\"tool\":\"shell\"}") "\n"
		  "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n"
		  EVENT("{\"type\":\"tool.failed\",\"time\":\"2026-01-02T03:04:06.000Z\",\"sessionId\":\"s-1\","
			"\"callId\":\"c-1\",\"tool\":\"shell\",\"kind\":\"timeout\",\"attempts\":1,"
			"\"message\":\"Tool 'shell' exceeded its 10 ms limit\"}"),
		  .hangup = true },
		{},
	};
	/* The server hangs up after its script: watch ends with status 3. */
	struct talk t = talk(script, NULL, ARGS("-s", SOCK, "watch", "tool.*"));
	assert_run(&t.r, 3,
		   "2026-01-02T03:04:05.678Z tool.called shell call=c-1 session=s-1\n"
		   "2026-01-02T03:04:06.000Z tool.failed shell call=c-1 session=s-1 kind=timeout "
		   "attempts=1 message=\"Tool 'shell' exceeded its 10 ms limit\"\n",
		   NULL);
	ck_assert_msg(strstr(t.sent, "\"method\":\"initialize\"") != NULL, "%s", t.sent);
	ck_assert_msg(strstr(t.sent, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n") != NULL,
		      "%s", t.sent);
	ck_assert_msg(strstr(t.sent, "\"params\":{\"types\":[\"tool.*\"],\"sessionId\":\"*\"}") != NULL, "%s",
		      t.sent);
	talk_free(&t);
}
END_TEST

START_TEST(approve_answers_from_stdin)
{
	static const struct step script[] = {
		{ .method = "initialize", .reply = INIT_OK },
		{ .method = "events/subscribe",
		  .reply = OK("{\"subscribed\":[]}"),
		  .after = EVENT("{\"type\":\"tool.confirmation_requested\",\"time\":\"2026-01-02T03:04:05.000Z\","
			"\"requestId\":\"r-1\",\"tool\":\"write_file\",\"sideEffects\":\"write\","
			"\"summary\":\"path=a.txt\",\"files\":[\"a.txt\"]}") "\n"
		  EVENT("{\"type\":\"tool.confirmation_requested\",\"time\":\"2026-01-02T03:04:05.100Z\","
			"\"requestId\":\"r-2\",\"tool\":\"shell\",\"sideEffects\":\"execute\","
			"\"summary\":\"rm -rf build\"}") },
		{ .method = "confirmations/resolve",
		  .reply = OK("{\"accepted\":true,\"decision\":\"allow\"}"),
		  .after = EVENT("{\"type\":\"tool.confirmation_resolved\",\"time\":\"2026-01-02T03:04:06.000Z\","
			"\"requestId\":\"r-1\",\"tool\":\"write_file\",\"decision\":\"allow\"}") },
		{ .method = "confirmations/resolve", .reply = OK("{\"accepted\":true,\"decision\":\"deny\"}") },
		{},
	};
	/* A line that is no answer is asked again. */
	struct talk t = talk(script, "y\nperhaps\nno\n", ARGS("-s", SOCK, "approve"));
	assert_run(&t.r, 0, NULL, NULL);
	ck_assert_msg(strstr(t.r.out, "Allow write_file (write) path=a.txt [files: a.txt]? [y]es/[n]o/[a]lways: y\n")
		      != NULL, "%s", t.r.out);
	ck_assert_msg(strstr(t.r.out, "Allow shell (execute) rm -rf build? [y]es/[n]o/[a]lways: perhaps\n"
			     "Please answer y, n or a: no\n")
		      != NULL, "%s", t.r.out);
	ck_assert_msg(strstr(t.r.out, "tool.confirmation_resolved write_file requestId=r-1 decision=allow\n") != NULL,
		      "%s", t.r.out);
	ck_assert_msg(strstr(t.sent, "\"params\":{\"types\":[\"tool.confirmation_requested\","
			     "\"tool.confirmation_resolved\"],\"sessionId\":\"*\"}") != NULL, "%s", t.sent);
	ck_assert_msg(strstr(t.sent, "\"method\":\"confirmations/resolve\",\"params\":{\"requestId\":\"r-1\","
			     "\"decision\":\"allow\"}") != NULL, "%s", t.sent);
	ck_assert_msg(strstr(t.sent, "\"method\":\"confirmations/resolve\",\"params\":{\"requestId\":\"r-2\","
			     "\"decision\":\"deny\"}") != NULL, "%s", t.sent);
	talk_free(&t);
}
END_TEST

START_TEST(approve_skips_requests_resolved_elsewhere)
{
	static const struct step script[] = {
		{ .method = "initialize", .reply = INIT_OK },
		{ .method = "events/subscribe",
		  .reply = OK("{\"subscribed\":[]}"),
		  .after = EVENT("{\"type\":\"tool.confirmation_requested\",\"requestId\":7,\"tool\":\"write_file\","
			"\"sideEffects\":\"write\",\"summary\":\"path=a\"}") "\n"
		  EVENT("{\"type\":\"tool.confirmation_requested\",\"requestId\":8,\"tool\":\"write_file\","
			"\"sideEffects\":\"write\",\"summary\":\"path=b\"}") "\n"
		  EVENT("{\"type\":\"tool.confirmation_resolved\",\"requestId\":8,\"decision\":\"confirmation_timeout\"}") },
		{ .method = "confirmations/resolve",
		  .reply = OK("{\"accepted\":true,\"decision\":\"always_allow\"}") },
		{},
	};
	struct talk t = talk(script, "a\n", ARGS("-s", SOCK, "approve"));
	assert_run(&t.r, 0, NULL, NULL);
	/* Request 8 was resolved before it was asked: never asked. */
	ck_assert_msg(strstr(t.r.out, "path=b") == NULL, "%s", t.r.out);
	ck_assert_msg(strstr(t.sent, "{\"requestId\":7,\"decision\":\"always_allow\"}") != NULL, "%s", t.sent);
	ck_assert_msg(strstr(t.sent, "\"requestId\":8") == NULL, "%s", t.sent);
	talk_free(&t);
}
END_TEST

START_TEST(approve_exits_at_end_of_input)
{
	/* Subscribed, and nothing to ask: approve sees its input end. */
	static const struct step idle[] = {
		{ .method = "initialize", .reply = INIT_OK },
		{ .method = "events/subscribe", .reply = OK("{\"subscribed\":[]}") },
		{},
	};
	/* A question comes, and input ends instead of an answer. */
	static const struct step asked[] = {
		{ .method = "initialize", .reply = INIT_OK },
		{ .method = "events/subscribe",
		  .reply = OK("{\"subscribed\":[]}"),
		  .after = EVENT("{\"type\":\"tool.confirmation_requested\",\"requestId\":\"r-1\","
			"\"tool\":\"write_file\",\"sideEffects\":\"write\"}") },
		{},
	};
	const struct step *scripts[] = { idle, asked };

	for (size_t i = 0; i < ELEMENTSOF(scripts); i++) {
		struct talk t = talk(scripts[i], "", ARGS("-s", SOCK, "approve"));
		ck_assert_msg(t.r.status == 0, "script %zu: status %d: %s", i, t.r.status, t.r.err);
		ck_assert_str_eq(t.r.err, "");
		ck_assert_msg(strstr(t.sent, "confirmations/resolve") == NULL, "%s", t.sent);
		talk_free(&t);
	}
}
END_TEST

int main(int argc, char **argv)
{
	ctl_path = argc > 1 ? argv[1] : NULL;
	if (!ctl_path || access(ctl_path, X_OK) < 0) {
		fprintf(stderr, "usage: test_ctl PATH-OF-TOOLCALLCTL\n");
		return EXIT_FAILURE;
	}

	Suite *s = suite_create("toolcallctl");
	TCase *tc = tcase_create("ctl");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, ping_skips_notifications);
	tcase_add_test(tc, default_socket_from_env);
	tcase_add_test(tc, full_disk_exits_7);
	tcase_add_test(tc, call_success_prints_text);
	tcase_add_test(tc, call_arguments_default_and_stdin);
	tcase_add_test(tc, call_is_error_exits_1);
	tcase_add_test(tc, call_error_envelope_exits_5);
	tcase_add_test(tc, call_not_found);
	tcase_add_test(tc, call_json_prints_result);
	tcase_add_test(tc, call_bad_arguments_is_usage_error);
	tcase_add_test(tc, list_is_aligned_and_paged);
	tcase_add_test(tc, stats_and_cancel);
	tcase_add_test(tc, cannot_connect_exits_3);
	tcase_add_test(tc, socket_option_after_the_command);
	tcase_add_test(tc, cannot_connect_says_how_to_start);
	tcase_add_test(tc, permission_denied_names_owner_and_group);
	tcase_add_test(tc, system_socket_without_s);
	tcase_add_test(tc, closed_connection_exits_3);
	tcase_add_test(tc, garbage_exits_4);
	tcase_add_test(tc, null_id_error_answers_the_request);
	tcase_add_test(tc, bad_results_exit_4);
	tcase_add_test(tc, timeout_exits_6_and_cancels);
	tcase_add_test(tc, usage_errors_exit_2);
	tcase_add_test(tc, watch_prints_events);
	tcase_add_test(tc, approve_answers_from_stdin);
	tcase_add_test(tc, approve_skips_requests_resolved_elsewhere);
	tcase_add_test(tc, approve_exits_at_end_of_input);
	suite_add_tcase(s, tc);

	return run_suite(s);
}
