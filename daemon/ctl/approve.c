/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl approve: shows each confirmation request as it arrives and
 * sends the answer typed (or piped) for it: y, n or a (always, for the
 * session).
 */
#include "daemon/ctl/approve.h"

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
#include "daemon/ctl/watch.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/base/util.h"

/*
 * The state of approve: requests waiting for an answer, the one being
 * asked, and the answers typed or piped in.
 *
 * Answers must follow the question they answer. On a terminal, input
 * typed before a question appears is thrown away, so a stray "y" cannot
 * approve something nobody has read. From a pipe or a file, answers are
 * taken in order, one line per question; input is read ahead by a line,
 * so that its end is seen even when no question comes, and approve exits
 * once its input is used up and every answer sent has been acknowledged.
 */
struct approver {
	struct json_doc **pending;	/* tool.confirmation_requested messages */
	size_t n_pending;
	struct json_doc *asking;
	struct buf input;		/* stdin not yet used */
	bool input_eof;
	bool tty;
	unsigned outstanding;		/* confirmations/resolve sent, unanswered */
};

static const struct json *asked_id(struct json_doc *doc)
{
	return ctl_confirm_request_id(event_of(json_doc_root(doc)));
}

static void show_prompt(struct approver *a)
{
	struct buf b = {};
	ctl_confirm_prompt(event_of(json_doc_root(a->asking)), &b);
	print_buf(&b);
}

/* True when the input holds a whole line. */
static bool has_line(const struct approver *a)
{
	return memchr(buf_head(&a->input), '\n', buf_size(&a->input)) != NULL;
}

/* Drops a request from the queue when it was resolved elsewhere. */
static void forget_pending(struct approver *a, const struct json *id)
{
	for (size_t i = 0; i < a->n_pending; i++)
		if (json_equal(id, asked_id(a->pending[i]))) {
			json_doc_unref(a->pending[i]);
			memmove(a->pending + i, a->pending + i + 1, (a->n_pending - i - 1) * sizeof(*a->pending));
			a->n_pending--;
			return;
		}
}

/* Handles one message that arrived during approve. */
static void approve_message(struct approver *a, const struct opts *o, struct json_doc *doc)
{
	const struct json *msg = json_doc_root(doc);

	if (json_get(msg, "id")) {
		/* The answer to a confirmations/resolve. */
		const struct json *error = json_get(msg, "error");
		const struct json *result = json_get(msg, "result");
		if (a->outstanding > 0)
			a->outstanding--;
		if (error && error->type == JSON_OBJECT) {
			report_error(o, error);
		} else if (json_get(result, "accepted") && !json_is_true(json_get(result, "accepted"))) {
			struct buf b = {};
			buf_puts(&b, "toolcallctl: already resolved: ");
			const char *d = json_str(json_get(result, "decision"));
			ctl_sanitize(d ? d : "?", d ? strlen(d) : 1, 40, &b);
			fprintf(stderr, "%s\n", buf_head(&b));
			buf_free(&b);
		}
		json_doc_unref(doc);
		return;
	}

	const struct json *event = event_of(msg);
	const char *type = json_str(json_get(event, "type"));
	if (str_eq(type, "tool.confirmation_requested")) {
		a->pending = xreallocarray(a->pending, a->n_pending + 1, sizeof(*a->pending));
		a->pending[a->n_pending++] = doc;
		return;
	}
	if (str_eq(type, "tool.confirmation_resolved")) {
		const struct json *id = ctl_confirm_request_id(event);
		bool was_asked = a->asking && id && json_equal(id, asked_id(a->asking));
		if (id)
			forget_pending(a, id);
		/* Keep the open question readable: the event goes on its own
		 * line, and the question is asked again below it unless it is
		 * the one that was just resolved (elsewhere: another approver,
		 * or a timeout). */
		if (a->asking)
			fputs("\n", stdout);
		print_event(o, event);
		if (was_asked)
			a->asking = json_doc_unref(a->asking);
		else if (a->asking)
			show_prompt(a);
	}
	json_doc_unref(doc);
}

/* Answers the request being asked with one line of input. */
static int approve_answer(struct approver *a, struct client *c, const char *line, size_t len)
{
	const char *decision = ctl_parse_answer(line, len);
	/* A terminal has echoed the answer already; piped input has not, and
	 * the transcript should read the same. */
	if (!a->tty) {
		struct buf b = {};
		ctl_sanitize(line, len, 80, &b);
		buf_putc(&b, '\n');
		print_buf(&b);
	}
	if (!decision) {
		fputs("Please answer y, n or a: ", stdout);
		fflush(stdout);
		return 0;
	}

	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_key(g, "requestId");
	jgen_value(g, asked_id(a->asking));
	jgen_kv_str(g, "decision", decision);
	jgen_obj_close(g);
	jgen_free(g);
	int64_t r = client_request(c, "confirmations/resolve", buf_head(&b));
	buf_free(&b);
	a->asking = json_doc_unref(a->asking);
	if (r < 0)
		return (int)r;
	a->outstanding++;
	return 0;
}

/* Reads what stdin holds; a last line without newline still counts. */
static void approve_read_input(struct approver *a)
{
	if (buf_size(&a->input) > 65536)
		buf_clear(&a->input);	/* nobody types such a line */
	buf_reserve(&a->input, 4096);
	ssize_t k = read(STDIN_FILENO, a->input.data + a->input.len, a->input.cap - a->input.len - 1);
	if (k > 0) {
		a->input.len += (size_t)k;
		return;
	}
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	a->input_eof = true;
	if (buf_size(&a->input) > 0 && !has_line(a))
		buf_putc(&a->input, '\n');
}

/* approve: answers confirmation requests from stdin, one line each. */
int run_approve(struct client *c, struct opts *o, char **args, int n)
{
	static char *types[] = { "tool.confirmation_requested", "tool.confirmation_resolved" };
	struct approver a = { .tty = isatty(STDIN_FILENO) };
	uint64_t drain_deadline = UINT64_MAX;
	int ret = EXIT_OK, r;

	r = subscribe(c, o, types, ELEMENTSOF(types));
	if (r != EXIT_OK)
		return r;
	c->keep_events = false;
	for (struct json_doc *doc; (doc = client_unpark(c));)
		approve_message(&a, o, doc);

	for (;;) {
		/* Messages already received come first. */
		struct json_doc *doc;
		while ((r = client_next(c, &doc)) > 0)
			approve_message(&a, o, doc);
		if (r < 0) {
			ret = report_failure(c, "approve", r);
			break;
		}

		/* Ask the next question. */
		if (!a.asking && a.n_pending > 0 && (!a.input_eof || has_line(&a))) {
			a.asking = a.pending[0];
			memmove(a.pending, a.pending + 1, (a.n_pending - 1) * sizeof(*a.pending));
			a.n_pending--;
			if (!asked_id(a.asking)) {
				fprintf(stderr, "toolcallctl: a confirmation request without requestId\n");
				a.asking = json_doc_unref(a.asking);
				continue;
			}
			if (a.tty) {
				tcflush(STDIN_FILENO, TCIFLUSH);
				buf_clear(&a.input);
			}
			show_prompt(&a);
		}

		/* A line answers it. */
		if (a.asking && has_line(&a)) {
			const char *head = buf_head(&a.input);
			size_t len = (size_t)((const char *)memchr(head, '\n', buf_size(&a.input)) - head);
			r = approve_answer(&a, c, head, len);
			buf_consume(&a.input, len + 1);
			if (r < 0) {
				ret = report_failure(c, "confirmations/resolve", r);
				break;
			}
			continue;
		}
		if (a.asking && a.input_eof) {
			/* Input ended without an answer: leave it unanswered. */
			fputs("\n", stdout);
			a.asking = json_doc_unref(a.asking);
		}

		/* Input used up: exit once the answers sent are acknowledged. */
		if (a.input_eof && !has_line(&a)) {
			if (a.outstanding == 0)
				break;
			if (drain_deadline == UINT64_MAX)
				drain_deadline = mono_ms() + (uint64_t)(c->timeout_ms < 0 ? DEFAULT_TIMEOUT_MS
										: c->timeout_ms);
		}

		int wait = -1;
		if (drain_deadline != UINT64_MAX) {
			uint64_t now = mono_ms();
			if (now >= drain_deadline)
				break;
			wait = (int)MIN(drain_deadline - now, (uint64_t)INT32_MAX);
		}
		/* A terminal is read only while it is asked something (what
		 * comes before is thrown away); other input a line ahead, so
		 * that approve sees it end and exits instead of waiting as an
		 * approver nobody answers for. */
		bool want_input = !a.input_eof && !has_line(&a) && (a.asking || !a.tty);
		struct pollfd p[2] = {
			{ .fd = c->fd, .events = POLLIN },
			{ .fd = STDIN_FILENO, .events = POLLIN },
		};
		if (interrupted)
			break;
		r = wait_fds(c, p, want_input ? 2 : 1, wait);
		if (r < 0 && errno != EINTR) {
			ret = report_failure(c, "approve", -errno);
			break;
		}
		if (r <= 0)
			continue;
		if (p[0].revents) {
			r = client_fill(c);
			if (r < 0) {
				ret = report_failure(c, "approve", r);
				break;
			}
		}
		if (want_input && p[1].revents)
			approve_read_input(&a);
	}

	for (size_t i = 0; i < a.n_pending; i++)
		json_doc_unref(a.pending[i]);
	free(a.pending);
	json_doc_unref(a.asking);
	buf_free(&a.input);
	return ret;
}
