/* SPDX-License-Identifier: MIT */
/*
 * One child as one tool call (the shell tool and the "command" kind share
 * it): output streamed to the call's owner, cancel through the tool's
 * .cancel, the outcome set from the child's result, and the helpers that
 * turn a result into structuredContent and text for the model.
 */
#include "lib/child/child.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/loop.h"
#include "lib/child/child_internal.h"
#include "lib/sandbox/sandbox.h"
#include "lib/tool.h"
#include "lib/files/workspace.h"
#include "lib/session.h"
#include "proto/json.h"
#include "proto/base/util.h"

static const char *const stream_names[CHILD_NSTREAMS] = {
	[CHILD_STDOUT] = "stdout",
	[CHILD_STDERR] = "stderr",
};

struct child_call {
	struct tool_call *c;
	struct child *ch;
	struct sandbox_run *run;
	child_call_done_fn done;
	bool merged;		/* child_opts.merge_output: one stream, in stdout */
	/* Merged: stdout and stderr as they were written, one stream as a
	 * terminal shows them: head and tail of the text the model reads. */
	struct capture text;
	/* Apart: each stream's head and tail, shown stdout first, then
	 * stderr under a "[stderr]" line, within text_cap together. */
	struct capture streams[CHILD_NSTREAMS];
	size_t text_cap;
};

/* The output shown in the text by default (limits.shell_output_kb). */
#define CALL_TEXT_CAP_DEFAULT ((size_t)64 << 10)

static void append_text(struct buf *out, const char *s, size_t n);

/* Keeps a chunk of output for the text and streams it to the call's owner. */
static void call_output(void *arg, enum child_stream s, const char *data, size_t n)
{
	struct child_call *cc = arg;
	capture_add(cc->merged ? &cc->text : &cc->streams[s], data, n);
	tool_call_output(cc->c, stream_names[s], data, n);
}

/* Appends the output kept so far for the text, in the order it was
 * written, with the dropped middle's marker when it was too long. */
static void put_output(struct child_call *cc, struct buf *out)
{
	char *kept;
	size_t n;
	bool cut;
	if (cc->merged) {
		capture_finish(&cc->text, &kept, &n, &cut);
		append_text(out, kept, n);
		free(kept);
		return;
	}
	/* Apart: what both keep fits, or the smaller keeps up to half the
	 * cap and the larger the rest. */
	size_t budget[CHILD_NSTREAMS] = { capture_kept(&cc->streams[CHILD_STDOUT]),
					  capture_kept(&cc->streams[CHILD_STDERR]) };
	if (budget[CHILD_STDOUT] + budget[CHILD_STDERR] > cc->text_cap) {
		enum child_stream small = budget[CHILD_STDOUT] <= budget[CHILD_STDERR] ? CHILD_STDOUT : CHILD_STDERR;
		enum child_stream large = small == CHILD_STDOUT ? CHILD_STDERR : CHILD_STDOUT;
		budget[small] = MIN(budget[small], cc->text_cap / 2);
		budget[large] = cc->text_cap - budget[small];
	}
	for (enum child_stream s = CHILD_STDOUT; s <= CHILD_STDERR; s++) {
		if (!cc->streams[s].total)
			continue;
		if (s == CHILD_STDERR) {
			if (buf_size(out) && buf_head(out)[buf_size(out) - 1] != '\n')
				buf_putc(out, '\n');
			buf_puts(out, "[stderr]\n");
		}
		capture_finish_within(&cc->streams[s], budget[s], &kept, &n, &cut);
		append_text(out, kept, n);
		free(kept);
	}
}

/* The output kept of a call's child, as put_output() writes it. */
static uint64_t output_total(const struct child_call *cc)
{
	return cc->text.total + cc->streams[CHILD_STDOUT].total + cc->streams[CHILD_STDERR].total;
}

static void child_call_free(struct child_call *cc)
{
	child_free(cc->ch);
	capture_free(&cc->text);
	capture_free(&cc->streams[CHILD_STDOUT]);
	capture_free(&cc->streams[CHILD_STDERR]);
	free(cc);
}

char *child_call_partial(struct tool_call *c)
{
	struct child_call *cc = c->state;
	if (!cc || !output_total(cc))
		return NULL;
	struct buf b = {0};
	put_output(cc, &b);
	return buf_steal(&b);
}

/* The error data that carries the output a stopped call had produced. */
static char *partial_data(const char *output)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "output", output);
	jgen_obj_close(g);
	jgen_free(g);
	return buf_steal(&b);
}

void child_call_fail_partial(struct tool_call *c, enum tc_kind kind, const char *message)
{
	_cleanup_free_ char *output = child_call_partial(c);
	if (!output) {
		tool_call_fail(c, kind, "%s", message);
		return;
	}
	tool_call_fail_data(c, kind, partial_data(output), "%s. Output before it was stopped:\n%s", message, output);
}

/*
 * What waits for the answer of a call whose child ended: the child and the
 * call's state, freed once the answer is written (closing the child's
 * pidfd and pipes; the last close of a pipe frees it, which the answer
 * need not wait for), and the next calls of ended runs to prepare
 * (sandbox_ahead(), child_ahead()): deferred to the end of the loop's turn, after the
 * answers queued in it are written. One loop's.
 */
static struct {
	struct tc_loop *loop;
	struct tc_defer *t;
	struct child_call **ended;	/* reachable until freed */
	size_t n_ended, cap_ended;
} after;

static void after_answers(void *arg)
{
	(void)arg;
	/* Taken first: a free must not see the list it is on. */
	struct child_call **ended = after.ended;
	size_t n = after.n_ended;
	after.ended = NULL;
	after.n_ended = after.cap_ended = 0;
	for (size_t i = 0; i < n; i++)
		child_call_free(ended[i]);
	free(ended);
	sandbox_ahead();
	child_ahead();
}

/* Frees cc (and its child) and prepares what ended runs need once the
 * answers queued now are written; at once for a call of another loop. */
static void after_answer(struct tc_loop *loop, struct child_call *cc)
{
	if (!after.t && loop) {
		after.loop = loop;
		after.t = tc_defer_new(loop, after_answers, NULL);
	}
	if (!after.t || after.loop != loop) {
		child_call_free(cc);
		sandbox_ahead();
		return;
	}
	if (after.n_ended == after.cap_ended) {
		after.cap_ended = after.cap_ended ? 2 * after.cap_ended : 8;
		after.ended = xreallocarray(after.ended, after.cap_ended, sizeof(*after.ended));
	}
	after.ended[after.n_ended++] = cc;
	tc_defer_start(after.t);
}

/* Sets the outcome, ends the sandbox, and finishes the call (the owner
 * may free the call from on_finish); the child and cc are freed once the
 * answer is written. */
static void call_done(void *arg, struct child *ch, struct child_result *r)
{
	struct child_call *cc = arg;
	struct tool_call *c = cc->c;
	struct tc_loop *loop = c->loop;

	if (r->cancelled) {
		char sig[16], msg[96];
		if (r->signal)
			snprintf(msg, sizeof(msg), "The command was stopped before it finished (%s)",
				 child_signal_name(r->signal, sig));
		else
			snprintf(msg, sizeof(msg), "The command was stopped before it finished");
		child_call_fail_partial(c, TC_CANCELLED, msg);
	} else {
		cc->done(c, r);
	}
	c->state = NULL;
	cc->c = NULL;
	cc->ch = ch;
	/* The child is reaped: it no longer uses its sandbox. */
	cc->run = sandbox_run_end(cc->run);
	tool_call_finish(c);
	after_answer(loop, cc);
}

/* Prepares the sandbox of a call's child: fails the call (and returns a
 * negative errno) when it cannot be had. */
static int call_sandbox(struct tool_call *c, const struct sandbox_req *req, struct sandbox_run **ret)
{
	_cleanup_free_ char *msg = NULL;
	struct sandbox_req rq = *req;
	const char *ws[WS_GROUP_MAX + 1];
	ws_group_roots(c->ws, ws, WS_GROUP_MAX + 1);
	if (!rq.workspaces)
		rq.workspaces = ws;
	if (!rq.id)
		rq.id = c->ident;
	struct sandbox_net_who who = {
		.loop = c->loop,
		.uid = c->session ? c->session->uid : c->ident ? c->ident->uid : getuid(),
		.session = c->session ? c->session->id : NULL,
		.call_id = c->call_id,
		.tool = c->tool ? c->tool->name : NULL,
	};
	if (!rq.net_who)
		rq.net_who = &who;
	int r = sandbox_prepare(&rq, ret, &msg);
	if (r == -EPERM)
		tool_call_fail(c, TC_PERMISSION_DENIED, "%s", msg);
	else if (r < 0)
		tool_call_fail(c, r == -ENOMEM || r == -EMFILE || r == -ENFILE || r == -ENOSPC ? TC_TRANSIENT
											: TC_EXECUTION_ERROR,
			       "%s", msg ? msg : strerror(-r));
	return r;
}

/* Spawns the child of a tool call, in its sandbox. */
int child_call_start(struct tool_call *c, const struct child_opts *opts, const struct sandbox_req *req,
		     child_call_done_fn done)
{
	struct child_opts o = *opts;
	struct sandbox_run *run = NULL;
	char **env = NULL;
	int r;

	/* A tool has no fd of the root (lib/files/workspace_path.h). */
	if (o.cwd_fd < 0 && c->ws)
		o.cwd_fd = c->ws->dirfd;

	if (!o.output_cap && c->env)
		o.output_cap = c->env->output_cap;
	o.on_output = call_output;
	o.on_done = call_done;
	if (req) {
		if ((r = call_sandbox(c, req, &run)) < 0)
			return r;
		const struct identity *id = req->id ? req->id : c->ident;
		if (sandbox_run_tmpdir(run) || (id && id->change && id->home) || sandbox_run_net_env(run)) {
			env = child_env_dup(o.envp);
			child_env_put_lines(&env, sandbox_run_net_env(run));
			if (sandbox_run_tmpdir(run))
				child_env_put(&env, "TMPDIR", sandbox_run_tmpdir(run));
			if (id && id->change && id->home)
				child_env_put(&env, "HOME", id->home);
			o.envp = env;
		}
		o.sandbox = run;
	}

	struct child_call *cc = xcalloc(1, sizeof(*cc));
	cc->c = c;
	cc->done = done;
	cc->run = run;
	cc->merged = o.merge_output;
	cc->text_cap = c->env && c->env->shell_text_cap ? c->env->shell_text_cap : CALL_TEXT_CAP_DEFAULT;
	capture_init(&cc->text, cc->text_cap);
	capture_init(&cc->streams[CHILD_STDOUT], cc->text_cap);
	capture_init(&cc->streams[CHILD_STDERR], cc->text_cap);
	o.arg = cc;
	r = child_spawn(c->loop, &o, &cc->ch);
	child_env_free(env);
	if (r < 0) {
		const struct sandbox_child *sc = sandbox_run_child(run);
		if (sc && sc->failed)
			tool_call_fail(c, TC_EXECUTION_ERROR, "The sandbox could not be set up (%s): %s", sc->failed,
				       strerror(-r));
		sandbox_run_end(run);
		child_call_free(cc);
		return r;
	}
	c->state = cc;
	return 0;
}

struct sandbox_run *child_call_sandbox(struct tool_call *c)
{
	struct child_call *cc = c->state;
	return cc ? cc->run : NULL;
}

/* Stops the child of a tool call; the call finishes once it is gone. */
void child_call_cancel(struct tool_call *c)
{
	struct child_call *cc = c->state;
	if (cc)
		child_terminate(cc->ch);
}

/* Appends output as text: invalid UTF-8 and NUL bytes become U+FFFD, so
 * the result is a valid C string and valid UTF-8. */
static void append_text(struct buf *out, const char *s, size_t n)
{
	while (n) {
		const char *nul = memchr(s, '\0', n);
		size_t k = nul ? (size_t)(nul - s) : n;
		utf8_sanitize(s, k, out);
		s += k;
		n -= k;
		if (nul) {
			buf_puts(out, "\xEF\xBF\xBD");
			s++;
			n--;
		}
	}
}

/* Writes the structuredContent of a finished child: its streams apart,
 * or, merged (as 2>&1 does), both in "stdout" in the order they were
 * written and "stderr" empty, so that the result keeps one shape. */
static char *result_json(const struct child_result *r, bool with_signal, bool merged)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	char sig[16];

	jgen_obj_open(g);
	jgen_key(g, "exit_code");
	if (r->signal)
		jgen_null(g);
	else
		jgen_int(g, r->exit_code);
	if (with_signal) {
		jgen_key(g, "signal");
		jgen_str(g, r->signal ? child_signal_name(r->signal, sig) : NULL);
	}
	jgen_key(g, "stdout");
	jgen_strn(g, r->out[CHILD_STDOUT] ? r->out[CHILD_STDOUT] : "", r->out_len[CHILD_STDOUT]);
	jgen_key(g, "stderr");
	jgen_strn(g, r->out[CHILD_STDERR] ? r->out[CHILD_STDERR] : "", r->out_len[CHILD_STDERR]);
	if (merged)
		jgen_kv_bool(g, "stderr_in_stdout", true);
	jgen_kv_bool(g, "truncated", r->truncated[CHILD_STDOUT] || r->truncated[CHILD_STDERR]);
	jgen_kv_int(g, "duration_ms", (int64_t)r->duration_ms);
	jgen_obj_close(g);
	jgen_free(g);
	return buf_steal(&b);
}

char *child_result_json(const struct child_result *r, bool with_signal)
{
	return result_json(r, with_signal, false);
}

/* Writes the text the model reads for a finished child. */
char *child_result_text(const struct child_result *r)
{
	struct buf b = {0};
	size_t on = r->out_len[CHILD_STDOUT], en = r->out_len[CHILD_STDERR];
	char sig[16];

	if (on)
		append_text(&b, r->out[CHILD_STDOUT], on);
	if (en) {
		if (buf_size(&b) && buf_head(&b)[buf_size(&b) - 1] != '\n')
			buf_putc(&b, '\n');
		buf_puts(&b, "[stderr]\n");
		append_text(&b, r->out[CHILD_STDERR], en);
	}
	if (r->signal || r->exit_code != 0) {
		if (buf_size(&b) && buf_head(&b)[buf_size(&b) - 1] != '\n')
			buf_putc(&b, '\n');
		if (r->signal)
			buf_printf(&b, "[killed by %s]", child_signal_name(r->signal, sig));
		else
			buf_printf(&b, "[exit code %d]", r->exit_code);
	} else if (!on && !en) {
		buf_puts(&b, "(no output)");
	}
	return buf_steal(&b);
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Appends the trimmed end of a stream, for error messages. */
void child_result_tail(const struct child_result *r, enum child_stream s, size_t max, struct buf *out)
{
	const char *p = r->out[s] ? r->out[s] : "";
	size_t n = r->out_len[s];

	while (n && is_space(p[n - 1]))
		n--;
	if (n > max) {
		p += n - max;
		n = max;
		for (int k = 0; k < 3 && n && ((unsigned char)*p & 0xC0) == 0x80; k++) {
			p++;
			n--;
		}
	}
	while (n && is_space(*p)) {
		p++;
		n--;
	}
	append_text(out, p, n);
}

/* The structuredContent of a call's child, with its sandbox. */
char *child_call_json(struct tool_call *c, const struct child_result *r, bool with_signal)
{
	struct child_call *cc = c->state;
	char *json = result_json(r, with_signal, cc && cc->merged);
	struct sandbox_run *run = child_call_sandbox(c);
	if (!run)
		return json;
	struct buf b = {0};
	size_t n = strlen(json);
	buf_append(&b, json, n - 1);	/* without the closing brace */
	free(json);
	buf_puts(&b, ",\"sandbox\":");
	sandbox_run_json(run, &b);
	buf_putc(&b, '}');
	return buf_steal(&b);
}

/* The stream where the child's complaints are: stderr, or the one
 * stream both were merged into. */
static enum child_stream diag_stream(struct tool_call *c)
{
	struct child_call *cc = c->state;
	return cc && cc->merged ? CHILD_STDOUT : CHILD_STDERR;
}

/* The limit a call's child ran into, as "the memory limit (64 MB)", or
 * NULL. */
char *child_call_limit(struct tool_call *c, const struct child_result *r)
{
	enum child_stream s = diag_stream(c);
	return sandbox_run_limit_hit(child_call_sandbox(c), r->exit_code, r->signal, r->out[s], r->out_len[s]);
}

char *child_tmp_note(const struct sandbox_run *run)
{
	_cleanup_free_ char *tmp = sandbox_run_tmp_hit(run);
	return tmp ? xasprintf("[limit] The command reached %s of its sandbox: writes there failed with "
			       "\"No space left on device\".", tmp) : NULL;
}

char *child_call_tmp_note(struct tool_call *c)
{
	return child_tmp_note(child_call_sandbox(c));
}

/* Appends the exit status line of a child that failed. */
static void put_status(const struct child_result *r, struct buf *b)
{
	char sig[16];
	if (buf_size(b) && buf_head(b)[buf_size(b) - 1] != '\n')
		buf_putc(b, '\n');
	if (r->signal)
		buf_printf(b, "[killed by %s]", child_signal_name(r->signal, sig));
	else
		buf_printf(b, "[exit code %d]", r->exit_code);
}

/*
 * The text for the model: stdout and stderr in the order they were
 * written, their head and tail when too long; the exit status when not 0,
 * and a line naming a limit hit or a denial by the sandbox when the
 * command failed; one naming what the daemon saw the sandbox refuse
 * (not what stderr says) when it did not, and one naming the TMPDIR
 * limit when it filled its TMPDIR, whatever its exit status.
 */
char *child_call_text(struct tool_call *c, const struct child_result *r)
{
	struct child_call *cc = c->state;
	if (!cc)
		return child_result_text(r);
	struct buf b = {0};
	bool failed = r->exit_code != 0 || r->signal;
	put_output(cc, &b);
	if (failed)
		put_status(r, &b);
	else if (!buf_size(&b))
		buf_puts(&b, "(no output)");
	struct sandbox_run *run = child_call_sandbox(c);
	/* What the network proxy refused, whatever the exit status. */
	_cleanup_free_ char *net = sandbox_run_net_note(run);
	if (net)
		buf_printf(&b, "\n%s", net);
	if (!run)
		return buf_steal(&b);
	/* One that did not fail: only what the daemon saw refused, and a
	 * TMPDIR it filled. */
	if (!failed) {
		_cleanup_free_ char *tmp = child_call_tmp_note(c);
		if (tmp)
			buf_printf(&b, "\n%s", tmp);
		_cleanup_free_ char *seen = sandbox_run_seen_note(run);
		if (seen)
			buf_printf(&b, "\n%s", seen);
		return buf_steal(&b);
	}
	_cleanup_free_ char *limit = child_call_limit(c, r);
	_cleanup_free_ char *note = limit ? NULL
					  : sandbox_run_denial_note(run, r->out[diag_stream(c)],
								    r->out_len[diag_stream(c)]);
	if (limit)
		buf_printf(&b, "\n[limit] The command was stopped by %s of its sandbox.", limit);
	else if (note)
		buf_printf(&b, "\n%s", note);
	return buf_steal(&b);
}
