/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl watch: opens an MCP session, subscribes to the event types
 * asked for (patterns checked before anything is sent) and prints each
 * event until interrupted.
 */
#include "daemon/ctl/watch.h"

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

#include "daemon/ctl/ctl_format.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/mcp.h"
#include "proto/base/util.h"
#include "version.h"

/* Opens an MCP session and subscribes to the given event types. */
int subscribe(struct client *c, struct opts *o, char **types, int n)
{
	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	mcp_initialize_params(g, "toolcallctl", TOOLCALLD_VERSION);
	jgen_free(g);
	_cleanup_free_ char *init = buf_steal(&b);

	c->keep_events = true;
	_cleanup_doc_ struct json_doc *doc = NULL;
	const struct json *result, *error;
	const char *why;
	int r = client_call(c, "initialize", init, NULL, &doc, &result, &error);
	if (r < 0)
		return report_failure(c, "initialize", r);
	if (error)
		return report_error(o, error);
	why = bad_object(result);
	if (why)
		return report_bad_result(c, "initialize", why);
	r = client_notify(c, "notifications/initialized", NULL);
	if (r < 0)
		return report_failure(c, "notifications/initialized", r);

	g = jgen_new(&b);
	jgen_obj_open(g);
	if (n > 0) {
		jgen_key(g, "types");
		jgen_arr_open(g);
		for (int i = 0; i < n; i++)
			jgen_str(g, types[i]);
		jgen_arr_close(g);
	}
	/* Every session of this user, not only this connection's. */
	jgen_kv_str(g, "sessionId", "*");
	jgen_obj_close(g);
	jgen_free(g);
	_cleanup_free_ char *params = buf_steal(&b);

	doc = json_doc_unref(doc);
	r = client_call(c, "events/subscribe", params, NULL, &doc, &result, &error);
	if (r < 0)
		return report_failure(c, "events/subscribe", r);
	if (error)
		return report_error(o, error);
	why = bad_object(result);
	if (why)
		return report_bad_result(c, "events/subscribe", why);
	return EXIT_OK;
}

/* The params of a notifications/event message, or NULL. */
const struct json *event_of(const struct json *msg)
{
	if (!str_eq(json_str(json_get(msg, "method")), "notifications/event"))
		return NULL;
	const struct json *params = json_get(msg, "params");
	return params && params->type == JSON_OBJECT ? params : NULL;
}

/* Prints an event as a line (or as compact JSON with --json). */
void print_event(const struct opts *o, const struct json *event)
{
	struct buf b = {};
	if (o->json) {
		struct jgen *g = jgen_new(&b);
		jgen_value(g, event);
		jgen_free(g);
		buf_putc(&b, '\n');
	} else {
		ctl_event_line(event, &b);
	}
	print_buf(&b);
}

/* True when p is an event pattern as the daemon takes them. */
static bool pattern_valid(const char *p)
{
	size_t n = strlen(p);
	return n > 0 && n <= MAX_PATTERN && strspn(p, "abcdefghijklmnopqrstuvwxyz"
						     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
						     "0123456789._*") == n;
}

/* watch: checks the patterns. */
int check_watch(struct opts *o, char **args, int n)
{
	if (n > MAX_PATTERNS) {
		fprintf(stderr, "toolcallctl: watch: at most %d patterns\n", MAX_PATTERNS);
		return EXIT_USAGE;
	}
	for (int i = 0; i < n; i++)
		if (!pattern_valid(args[i])) {
			struct buf b = {};
			ctl_sanitize(args[i], strlen(args[i]), 80, &b);
			fprintf(stderr, "toolcallctl: watch: '%s' is not an event pattern "
					"(letters, digits, '.', '_' and '*', at most %d bytes)\n",
				buf_head(&b), MAX_PATTERN);
			buf_free(&b);
			return EXIT_USAGE;
		}
	return EXIT_OK;
}

/* watch [PATTERN...]: one line per event until interrupted. */
int run_watch(struct client *c, struct opts *o, char **args, int n)
{
	int r = subscribe(c, o, args, n);
	if (r != EXIT_OK)
		return r;

	for (;;) {
		_cleanup_doc_ struct json_doc *doc = client_unpark(c);
		if (!doc) {
			r = client_read(c, UINT64_MAX, &doc);
			if (r == -EINTR)
				return EXIT_OK;
			if (r < 0)
				return report_failure(c, "watch", r);
		}
		const struct json *event = event_of(json_doc_root(doc));
		if (event)
			print_event(o, event);
		if (ferror(stdout))
			return EXIT_OUTPUT;	/* main says why */
	}
}
