/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl: the command-line client of toolcalld. One connection per
 * run, newline-delimited JSON-RPC 2.0 over the daemon's Unix socket. Each
 * command is one entry of a table (name, arguments, default timeout, run
 * function); arguments are checked before anything is sent. Responses are
 * matched by id; notifications that arrive meanwhile are skipped, or kept
 * for the commands that print them (watch, approve).
 *
 * The exit status tells scripts what happened without parsing text; the
 * codes are listed in usage() and in toolcallctl(1). Output that cannot be
 * written (a full disk) is a failure too: main checks stdout at the end.
 *
 * Here: the command table, the one-request commands (ping, list, call,
 * stats, cancel) and main. The connection is client.c; watch.c and
 * approve.c hold the commands that print events.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "daemon/ctl/approve.h"
#include "daemon/ctl/client.h"
#include "daemon/ctl/ctl_format.h"
#include "daemon/ctl/mcp.h"
#include "daemon/ctl/ps.h"
#include "daemon/ctl/watch.h"
#include "daemon/default_socket.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/base/util.h"
#include "version.h"

/* How long the daemon gives an MCP server to start and list its tools
 * (tools/MCP_IMPORT_MS): a request that starts one may wait that long. */
#define PROVIDER_START_MS 15000

struct command {
	const char *name;
	const char *args;		/* for usage() */
	const char *help;
	int min_args, max_args;		/* max < 0: any number */
	bool waits;			/* no default timeout (call) */
	bool starts_providers;		/* the default timeout covers their start (list) */
	bool bridge;			/* connects by itself (mcp): run_bridge instead of run */
	int (*check)(struct opts *o, char **args, int n);
	int (*run)(struct client *c, struct opts *o, char **args, int n);
};

static void on_signal(int sig)
{
	interrupted = sig;
}

/* --- commands --------------------------------------------------------------- */

static void show_pong(const struct json *result)
{
	puts("pong");
}

/* ping: is the daemon there and answering? */
static int run_ping(struct client *c, struct opts *o, char **args, int n)
{
	return simple_request(c, o, "ping", NULL, NULL, show_pong);
}

/* stats: admin/stats, pretty-printed. */
static int run_stats(struct client *c, struct opts *o, char **args, int n)
{
	return simple_request(c, o, "admin/stats", NULL, NULL, NULL);
}

/* Says what an admin/metrics result lacks, or NULL. */
static const char *bad_metrics(const struct json *result)
{
	const struct json *text = json_get(result, "text");
	if (!text || text->type != JSON_STRING)
		return "a result without the metrics text";
	return NULL;
}

/* Prints the OpenMetrics text as it came (it ends with its own newline). */
static void show_metrics(const struct json *result)
{
	const struct json *text = json_get(result, "text");
	fwrite(text->u.str.s, 1, text->u.str.len, stdout);
}

/* metrics: admin/metrics, the OpenMetrics text (--json: the JSON answer). */
static int run_metrics(struct client *c, struct opts *o, char **args, int n)
{
	return simple_request(c, o, "admin/metrics", NULL, bad_metrics, show_metrics);
}

/* Says what a sessions/cancel result lacks, or NULL. */
static const char *bad_cancelled(const struct json *result)
{
	int64_t n;
	if (!json_get_int(json_get(result, "cancelled"), &n) || n < 0)
		return "a result without a count of calls cancelled";
	return NULL;
}

static void show_cancelled(const struct json *result)
{
	int64_t n = 0;
	json_get_int(json_get(result, "cancelled"), &n);
	printf("cancelled %lld\n", (long long)n);
}

/* cancel: checks SESSION, an id as initialize hands them out. */
static int check_cancel(struct opts *o, char **args, int n)
{
	if (n > 0 && (!*args[0] || strlen(args[0]) > MAX_SESSION_ID)) {
		fprintf(stderr, "toolcallctl: cancel: SESSION must be a session id of 1 to %d bytes\n",
			MAX_SESSION_ID);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* cancel [SESSION]: sessions/cancel, for this connection's session when none is named. */
static int run_cancel(struct client *c, struct opts *o, char **args, int n)
{
	_cleanup_free_ char *params = NULL;
	if (n > 0) {
		struct buf b = {};
		struct jgen *g = jgen_new(&b);
		jgen_obj_open(g);
		jgen_kv_str(g, "sessionId", args[0]);
		jgen_obj_close(g);
		jgen_free(g);
		params = buf_steal(&b);
	}
	return simple_request(c, o, "sessions/cancel", params, bad_cancelled, show_cancelled);
}

/* Says what a page of tools/list lacks, or NULL. */
static const char *bad_tools_page(const struct json *result)
{
	const struct json *list = json_get(result, "tools");
	if (!list || list->type != JSON_ARRAY)
		return "a result without a tools array";
	for (size_t i = 0; i < list->u.arr.n; i++)
		if (!json_str(json_get(list->u.arr.items[i], "name")))
			return "a tool without a name";
	const struct json *next = json_get(result, "nextCursor");
	if (next && next->type != JSON_NULL && next->type != JSON_STRING)
		return "a nextCursor that is not a string";
	return NULL;
}

/* list: every page of tools/list, one aligned line per tool. */
static int run_list(struct client *c, struct opts *o, char **args, int n)
{
	struct json_doc **docs = NULL;
	const struct json **tools = NULL;
	size_t n_docs = 0, n_tools = 0;
	_cleanup_free_ char *cursor = NULL;
	int ret = EXIT_OK;

	/* Follow nextCursor; a daemon that keeps handing out cursors is
	 * stopped after a generous number of pages. */
	for (unsigned page = 0; page < 10000; page++) {
		_cleanup_free_ char *params = NULL;
		if (cursor) {
			struct buf b = {};
			struct jgen *g = jgen_new(&b);
			jgen_obj_open(g);
			jgen_kv_str(g, "cursor", cursor);
			jgen_obj_close(g);
			jgen_free(g);
			params = buf_steal(&b);
		}

		struct json_doc *doc = NULL;
		const struct json *result, *error;
		int r = client_call(c, "tools/list", params, NULL, &doc, &result, &error);
		if (r < 0) {
			ret = report_failure(c, "tools/list", r);
			goto out;
		}
		docs = xreallocarray(docs, n_docs + 1, sizeof(*docs));
		docs[n_docs++] = doc;
		if (error) {
			ret = report_error(o, error);
			goto out;
		}
		const char *why = bad_tools_page(result);
		if (why) {
			ret = report_bad_result(c, "tools/list", why);
			goto out;
		}
		const struct json *list = json_get(result, "tools");
		tools = xreallocarray(tools, n_tools + list->u.arr.n + 1, sizeof(*tools));
		for (size_t i = 0; i < list->u.arr.n; i++)
			tools[n_tools++] = list->u.arr.items[i];

		free(cursor);
		cursor = NULL;
		const char *next = json_str(json_get(result, "nextCursor"));
		if (!next)
			break;
		cursor = xstrdup(next);
	}

	struct buf b = {};
	if (o->json) {
		struct buf text = {};
		struct jgen *g = jgen_new(&text);
		jgen_obj_open(g);
		jgen_key(g, "tools");
		jgen_arr_open(g);
		for (size_t i = 0; i < n_tools; i++)
			jgen_value(g, tools[i]);
		jgen_arr_close(g);
		jgen_obj_close(g);
		jgen_free(g);
		_cleanup_doc_ struct json_doc *all = NULL;
		if (json_parse(buf_head(&text), buf_size(&text), 0, MAX_DEPTH + 2, &all, NULL) == 0)
			ctl_pretty(json_doc_root(all), &b);
		buf_free(&text);
	} else {
		ctl_tool_lines(tools, n_tools, &b);
	}
	print_buf(&b);
out:
	for (size_t i = 0; i < n_docs; i++)
		json_doc_unref(docs[i]);
	free(docs);
	free(tools);
	return ret;
}

/* Reads all of stdin (at most max bytes). */
static int read_stdin(size_t max, struct buf *out)
{
	for (;;) {
		buf_reserve(out, 65536);
		ssize_t n = read(STDIN_FILENO, out->data + out->len, out->cap - out->len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return 0;
		out->len += (size_t)n;
		if (out->len > max)
			return -EFBIG;
	}
}

/* call: checks JSON-ARGS (or stdin) before connecting. */
static int check_call(struct opts *o, char **args, int n)
{
	struct buf in = {};
	const char *text;
	size_t len;

	if (n < 2) {
		text = "{}";
		len = 2;
	} else if (str_eq(args[1], "-")) {
		int r = read_stdin(MAX_ARGS, &in);
		if (r < 0) {
			fprintf(stderr, "toolcallctl: reading arguments from stdin: %s\n",
				r == -EFBIG ? "more than 64 MiB" : strerror(-r));
			buf_free(&in);
			return EXIT_USAGE;
		}
		text = buf_head(&in);
		len = buf_size(&in);
	} else {
		text = args[1];
		len = strlen(text);
	}

	_cleanup_doc_ struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(text, len, 0, 0, &doc, &err) < 0) {
		fprintf(stderr, "toolcallctl: JSON-ARGS is not valid JSON: %s at byte %zu\n", err.msg, err.offset);
		buf_free(&in);
		return EXIT_USAGE;
	}
	buf_free(&in);
	if (json_doc_root(doc)->type != JSON_OBJECT) {
		fprintf(stderr, "toolcallctl: JSON-ARGS must be a JSON object (got %s)\n",
			json_kind_name(json_doc_root(doc)));
		return EXIT_USAGE;
	}

	/* Sent compact: arguments read from a file may span lines. */
	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	jgen_value(g, json_doc_root(doc));
	jgen_free(g);
	o->call_args = buf_steal(&b);
	return EXIT_OK;
}

/* Says what a tools/call result lacks, or NULL. */
static const char *bad_call_result(const struct json *result)
{
	const struct json *content = json_get(result, "content");
	if (!content || content->type != JSON_ARRAY)
		return "a result without a content array";
	const struct json *is_error = json_get(result, "isError");
	if (is_error && is_error->type != JSON_BOOL)
		return "an isError that is not a boolean";
	return NULL;
}

/* call NAME [JSON-ARGS]: tools/call; the text on success, the envelope on failure. */
static int run_call(struct client *c, struct opts *o, char **args, int n)
{
	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "name", args[0]);
	jgen_kv_raw(g, "arguments", o->call_args, strlen(o->call_args));
	jgen_obj_close(g);
	jgen_free(g);
	_cleanup_free_ char *params = buf_steal(&b);

	_cleanup_doc_ struct json_doc *doc = NULL;
	const struct json *result, *error;
	int64_t id = 0;
	int r = client_call(c, "tools/call", params, &id, &doc, &result, &error);
	if (r == -ETIMEDOUT || r == -EINTR) {
		/* Nobody waits for the call any more: let the daemon stop it. */
		_cleanup_free_ char *cancel = xasprintf("{\"requestId\":%lld,\"reason\":\"%s\"}", (long long)id,
							r == -EINTR ? "interrupted" : "client timeout");
		(void)client_notify(c, "notifications/cancelled", cancel);
	}
	if (r < 0)
		return report_failure(c, "tools/call", r);
	if (error)
		return report_error(o, error);
	const char *why = bad_call_result(result);
	if (why)
		return report_bad_result(c, "tools/call", why);

	if (o->json) {
		print_pretty(result);
		return json_is_true(json_get(result, "isError")) ? EXIT_IS_ERROR : EXIT_OK;
	}
	bool is_error = ctl_call_text(result, &b);
	print_buf(&b);
	return is_error ? EXIT_IS_ERROR : EXIT_OK;
}

static const struct command commands[] = {
	{ .name = "ping", .args = "", .help = "check that toolcalld answers",
	  .min_args = 0, .max_args = 0, .run = run_ping },
	{ .name = "list", .args = "", .help = "list tools: name, side effects, description",
	  .min_args = 0, .max_args = 0, .starts_providers = true, .run = run_list },
	{ .name = "call", .args = "NAME [JSON-ARGS|-]",
	  .help = "call a tool (default arguments {}; - reads stdin)",
	  .min_args = 1, .max_args = 2, .waits = true, .check = check_call, .run = run_call },
	{ .name = "stats", .args = "", .help = "print the daemon's counters",
	  .min_args = 0, .max_args = 0, .run = run_stats },
	{ .name = "metrics", .args = "", .help = "print the daemon's metrics (OpenMetrics text)",
	  .min_args = 0, .max_args = 0, .run = run_metrics },
	{ .name = "cancel", .args = "[SESSION]",
	  .help = "cancel the calls in flight of SESSION",
	  .min_args = 0, .max_args = 1, .check = check_cancel, .run = run_cancel },
	{ .name = "watch", .args = "[PATTERN...]",
	  .help = "print events (e.g. tool.*) until interrupted",
	  .min_args = 0, .max_args = -1, .check = check_watch, .run = run_watch },
	{ .name = "mcp", .args = "[-s SOCKET] [-w DIR] [--reconnect-s SECONDS]",
	  .help = "serve MCP on stdin/stdout for a host, relayed to the daemon",
	  .min_args = 0, .max_args = -1, .bridge = true },
	{ .name = "ps", .args = "", .help = "list background processes (yours; every uid's for root)",
	  .min_args = 0, .max_args = 0, .run = run_ps },
	{ .name = "kill", .args = "ID [SIGNAL]",
	  .help = "stop background process ID and all it started (SIGNAL: TERM)",
	  .min_args = 1, .max_args = 2, .run = run_kill },
	{ .name = "approve", .args = "",
	  .help = "answer confirmation requests: y, n or a per line",
	  .min_args = 0, .max_args = 0, .run = run_approve },
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: toolcallctl [-s SOCKET] [-t TIMEOUT_MS] [--json] COMMAND [ARG...]\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
		char head[64];
		snprintf(head, sizeof(head), "%s %s", commands[i].name, commands[i].args);
		fprintf(f, "  %-28s %s\n", head, commands[i].help);
	}
	fprintf(f, "\nOptions:\n"
		   "  -s, --socket PATH       the daemon's socket, before or after the command (default:\n"
		   "                          $TOOLCALLD_SOCKET, else the daemon's rule when a socket is\n"
		   "                          there: $XDG_RUNTIME_DIR/toolcalld.sock, else\n"
		   "                          /run/toolcalld/toolcalld.sock for root or who may write there,\n"
		   "                          else /tmp/toolcalld-UID/toolcalld.sock; else the system socket\n"
		   "                          /run/toolcalld/toolcalld.sock when it exists)\n"
		   "  -t, --timeout MS        how long to wait for an answer; 0 waits forever\n"
		   "                          (default: %d ms; none for call; %d ms for list,\n"
		   "                          which waits for MCP servers to start)\n"
		   "  -j, --json              print results as JSON\n"
		   "  -h, --help              print this help\n"
		   "  -V, --version           print the version\n"
		   "\nExit status:\n"
		   "    0  success\n"
		   "    1  the tool ran and reported an error (isError)\n"
		   "    2  bad command line or JSON-ARGS\n"
		   "    3  cannot connect, or the daemon closed the connection\n"
		   "    4  the daemon sent something that is not a valid answer\n"
		   "    5  the daemon answered with an error (printed as error: KIND: MESSAGE)\n"
		   "    6  no answer within the timeout\n"
		   "    7  the output could not be written\n"
		   "  130  interrupted (a call in flight is cancelled)\n",
		DEFAULT_TIMEOUT_MS, DEFAULT_TIMEOUT_MS + PROVIDER_START_MS);
}

/* Parses -t: milliseconds, 0 meaning none. */
static int parse_timeout(const char *s, int64_t *ret)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT32_MAX)
		return -EINVAL;
	*ret = v == 0 ? -1 : v;
	return 0;
}

/*
 * Takes -s PATH (--socket PATH, --socket=PATH) after the command's name
 * too, as every command accepts it there; returns the arguments left (in
 * place), or -1 after a usage error.
 */
static int take_socket_option(struct opts *o, char **args, int n)
{
	int kept = 0;
	for (int i = 0; i < n; i++) {
		const char *a = args[i];
		if (str_eq(a, "-s") || str_eq(a, "--socket")) {
			if (i + 1 >= n) {
				fprintf(stderr, "toolcallctl: %s needs a socket path\n", a);
				return -1;
			}
			o->socket = args[++i];
		} else if (str_has_prefix(a, "--socket=")) {
			o->socket = a + strlen("--socket=");
		} else {
			args[kept++] = args[i];
		}
	}
	return kept;
}

/* Runs the command line; returns the exit status. */
static int run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	struct opts o = { .timeout_ms = -2 };
	int ch;

	while ((ch = getopt_long(argc, argv, "+s:t:jhV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.socket = optarg;
			break;
		case 't':
			if (parse_timeout(optarg, &o.timeout_ms) < 0) {
				fprintf(stderr, "toolcallctl: -t: expected milliseconds, not '%s'\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'j':
			o.json = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("toolcallctl %s\n", TOOLCALLD_VERSION);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}

	const struct command *cmd = NULL;
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (str_eq(argv[optind], commands[i].name))
			cmd = &commands[i];
	if (!cmd) {
		fprintf(stderr, "toolcallctl: unknown command '%s' (try --help)\n", argv[optind]);
		return EXIT_USAGE;
	}
	char **args = argv + optind + 1;
	int n = argc - optind - 1;
	if (!cmd->bridge)
		n = take_socket_option(&o, args, n);
	if (n < 0)
		return EXIT_USAGE;
	if (n < cmd->min_args || (cmd->max_args >= 0 && n > cmd->max_args)) {
		fprintf(stderr, "Usage: toolcallctl %s %s\n", cmd->name, cmd->args);
		return EXIT_USAGE;
	}
	if (cmd->check) {
		int r = cmd->check(&o, args, n);
		if (r != EXIT_OK)
			return r;
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigset_t block, waitmask;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGTERM);

	_cleanup_free_ char *socket_path = o.socket ? xstrdup(o.socket) : default_socket_client_path();
	if (cmd->bridge)
		return ctl_mcp(socket_path, args, n);
	struct client c = {
		.fd = -1,
		.framer = { .max = MAX_LINE },
		.timeout_ms = o.timeout_ms != -2 ? o.timeout_ms : cmd->waits ? -1
			    : cmd->starts_providers ? DEFAULT_TIMEOUT_MS + PROVIDER_START_MS : DEFAULT_TIMEOUT_MS,
		.waitmask = waitmask,
	};
	/* The fallback in /tmp: connect only through a directory of our own,
	 * never to a socket someone else put there. */
	_cleanup_free_ char *dir_err = NULL;
	if (default_socket_is_private(socket_path) && default_socket_private_dir(false, &dir_err) < 0) {
		fprintf(stderr, "toolcallctl: cannot connect to %s: %s\n", socket_path, dir_err);
		free(o.call_args);
		return EXIT_CONNECT;
	}
	int r = client_connect(&c, socket_path);
	if (r < 0) {
		_cleanup_free_ char *hint = client_connect_hint(socket_path, -r);
		fprintf(stderr, "toolcallctl: cannot connect to %s: %s\n", socket_path, hint);
		free(o.call_args);
		return EXIT_CONNECT;
	}

	int ret = cmd->run(&c, &o, args, n);
	client_close(&c);
	free(o.call_args);
	return ret;
}


/*
 * Makes sure all of the output was written: a full disk or a closed pipe
 * must not look like success to a script.
 */
static int finish_output(int status)
{
	int e = 0;
	if (fflush(stdout) != 0)
		e = errno;
	if (!e && ferror(stdout))
		e = EIO;
	if (!e && fclose(stdout) != 0)
		e = errno;
	if (!e)
		return status;
	fprintf(stderr, "toolcallctl: cannot write the output: %s\n", strerror(e));
	return EXIT_OUTPUT;
}

int main(int argc, char **argv)
{
	return finish_output(run(argc, argv));
}
