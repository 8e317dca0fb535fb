/* SPDX-License-Identifier: MIT */
/*
 * The bodies of process_io, process_kill and process_list, and the result
 * every call on a process returns: the output new to the caller's session
 * as text for the model (escape sequences of a terminal removed unless
 * raw) and structuredContent, with how far the process has come.
 */
#include "lib/process/process_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/child/child.h"
#include "lib/base/loop.h"
#include "lib/regex/regex.h"
#include "lib/sandbox/sandbox.h"
#include "proto/json.h"
#include "proto/utf8.h"

/* --- text ---------------------------------------------------------------- */

void process_strip_terminal(const char *s, size_t n, struct buf *out)
{
	struct buf b = {0};
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == 0x1b) {
			if (i + 1 >= n)
				break;
			unsigned char k = (unsigned char)s[++i];
			if (k == '[') {
				/* CSI: parameters and intermediates, then a final byte. */
				while (++i < n && !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e))
					;
			} else if (k == ']' || k == 'P' || k == '_' || k == '^' || k == 'X') {
				/* OSC and strings: up to BEL or ESC \. */
				while (++i < n && s[i] != '\a' && !(s[i] == 0x1b && i + 1 < n && s[i + 1] == '\\'))
					;
				if (i < n && s[i] == 0x1b)
					i++;
			} else if (k >= 0x20 && k <= 0x2f) {
				/* ESC ( B and the like: intermediates, then a final byte. */
				while (++i < n && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x2f)
					;
			}
			continue;
		}
		if (ch == '\r' && i + 1 < n && s[i + 1] == '\n')
			continue;
		if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f)
			continue;
		buf_putc(&b, (char)ch);
	}
	utf8_sanitize(buf_head(&b) ? buf_head(&b) : "", buf_size(&b), out);
	buf_free(&b);
}

/* How far back an escape sequence or a character cut at the end is held
 * for the output to come: a longer one is taken as it is. */
#define WHOLE_BACK 512

size_t proc_terminal_whole(const char *s, size_t n)
{
	size_t low = n > WHOLE_BACK ? n - WHOLE_BACK : 0;
	/* The last escape: is its sequence complete? */
	for (size_t i = n; i-- > low;) {
		if (s[i] != 0x1b)
			continue;
		if (i + 1 >= n)
			return i;
		unsigned char k = (unsigned char)s[i + 1];
		size_t j = i + 2;
		if (k == '[') {
			while (j < n && !((unsigned char)s[j] >= 0x40 && (unsigned char)s[j] <= 0x7e))
				j++;
		} else if (k == ']' || k == 'P' || k == '_' || k == '^' || k == 'X') {
			while (j < n && s[j] != '\a')
				j++;
		} else if (k >= 0x20 && k <= 0x2f) {
			while (j < n && (unsigned char)s[j] >= 0x20 && (unsigned char)s[j] <= 0x2f)
				j++;
		}
		/* Those with a final byte or terminator, none yet. */
		if (j >= n && (k == '[' || k == ']' || k == 'P' || k == '_' || k == '^' || k == 'X' ||
			       (k >= 0x20 && k <= 0x2f)))
			return i;
		break;
	}
	/* A UTF-8 character cut: its lead byte and fewer continuations
	 * than it announces. */
	for (size_t i = n, back = 0; i-- > 0 && back < 4; back++) {
		unsigned char ch = (unsigned char)s[i];
		if ((ch & 0xc0) == 0x80)
			continue;
		size_t len = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc0 ? 2 : 1;
		return n - i < len ? i : n;
	}
	return n;
}

/* Output as text: NUL bytes and invalid UTF-8 become U+FFFD. */
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

int process_signal_from_name(const char *s)
{
	char *end;
	if (*s >= '0' && *s <= '9') {
		long v = strtol(s, &end, 10);
		return *end || v < 1 || v > 64 ? -1 : (int)v;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (int sig = 1; sig < 32; sig++) {
		const char *a = sigabbrev_np(sig);
		if (a && strcasecmp(a, s) == 0)
			return sig;
	}
	return -1;
}

/* --- results ------------------------------------------------------------- */

void proc_result(struct tool_call *c, struct process *p, enum proc_wait kind, size_t max)
{
	struct proc_reader *rd = proc_reader(p, proc_session_key(c));
	uint64_t start = MAX(rd->pos, proc_ring_start(p));
	uint64_t dropped = start - rd->pos;
	uint64_t avail = p->total - start;
	struct buf raw = {0}, text = {0}, out = {0};
	/* One byte past max tells whether max falls inside a character. */
	size_t n = (size_t)MIN(avail, (uint64_t)max + 1);
	proc_ring_copy(p, start, start + n, &raw);
	n = utf8_cut(buf_head(&raw) ? buf_head(&raw) : "", n, max);
	rd->pos = start + n;
	uint64_t unread = p->total - rd->pos;
	if (p->tty && !p->raw)
		process_strip_terminal(buf_head(&raw) ? buf_head(&raw) : "", n, &out);
	else
		append_text(&out, buf_head(&raw) ? buf_head(&raw) : "", n);
	buf_free(&raw);
	bool waiting = proc_waiting(p);
	char sig[16];

	if (buf_size(&out))
		buf_append(&text, buf_head(&out), buf_size(&out));
	else
		buf_puts(&text, kind == PROC_WAIT_SHELL ? "(no output yet)" : "(no new output)");
	if (buf_head(&text)[buf_size(&text) - 1] != '\n')
		buf_putc(&text, '\n');
	if (dropped)
		buf_printf(&text, "[%" PRIu64 " bytes of earlier output were dropped from the buffer before this "
				  "session read them]\n", dropped);
	if (unread)
		buf_printf(&text, "[%" PRIu64 " more bytes not shown: read them with process_io {\"process_id\": \"%s\"}]\n",
			   unread, p->id);
	if (buf_size(&p->input))
		buf_printf(&text, "[%zu bytes of input wait for the process to read them; they are written as it "
				  "reads]\n", buf_size(&p->input));
	if (p->input_lost)
		buf_printf(&text, "[%" PRIu64 " bytes of input sent could not be written: the process closed its "
				  "input first]\n", p->input_lost);
	if (kind == PROC_WAIT_SHELL && p->start_note)
		buf_printf(&text, "%s\n", p->start_note);
	if (!p->ended) {
		buf_printf(&text, "[process %s is running%s; process_io reads its output and sends input, "
				  "process_kill stops it]", p->id, waiting ? " and waiting for input" : "");
		/* What its network proxy refused so far. */
		_cleanup_free_ char *net = sandbox_run_net_note(p->run);
		if (net)
			buf_printf(&text, "\n%s", net);
		/* What the daemon saw the sandbox refuse it, once to each
		 * session as it grows (its end's answer names it all again). */
		uint64_t seen;
		_cleanup_free_ char *refused = sandbox_run_seen_so_far(p->run, &seen);
		if (refused && seen > rd->seen) {
			buf_printf(&text, "\n%s", refused);
			rd->seen = seen;
		}
	} else {
		static const char *const why[] = {
			[PROC_END_EXIT] = "",
			[PROC_END_KILLED] = " (process_kill)",
			[PROC_END_IDLE] = " (no process_io for limits.process_idle_s)",
			[PROC_END_LIFETIME] = " (limits.process_lifetime_s)",
			[PROC_END_STOPPED] = " (the daemon stopped)",
			[PROC_END_CANCELLED] = " (its shell call was cancelled)",
		};
		if (p->sig)
			buf_printf(&text, "[process %s ended: killed by %s%s]", p->id, child_signal_name(p->sig, sig),
				   why[p->end]);
		else
			buf_printf(&text, "[process %s ended: exit code %d%s]", p->id, p->exit_code, why[p->end]);
		if (p->end_note)
			buf_printf(&text, "\n%s", p->end_note);
	}

	struct buf sb = {0};
	struct jgen *g = jgen_new(&sb);
	jgen_obj_open(g);
	jgen_kv_str(g, "process_id", p->id);
	jgen_kv_bool(g, "running", !p->ended);
	proc_write_end(g, p, false);
	jgen_key(g, "output");
	jgen_strn(g, buf_head(&out) ? buf_head(&out) : "", buf_size(&out));
	jgen_kv_int(g, "dropped_bytes", (int64_t)dropped);
	jgen_kv_int(g, "unread_bytes", (int64_t)unread);
	jgen_kv_int(g, "total_bytes", (int64_t)p->total);
	jgen_kv_bool(g, "waiting_for_input", waiting);
	jgen_kv_int(g, "input_pending", (int64_t)buf_size(&p->input));
	jgen_kv_int(g, "input_lost", (int64_t)p->input_lost);
	jgen_kv_bool(g, "tty", p->tty);
	jgen_kv_int(g, "duration_ms", (int64_t)((p->ended ? p->end_ms : tc_now(p->t->loop)) - p->start_ms));
	if (p->sandbox_json)
		jgen_kv_raw(g, "sandbox", p->sandbox_json, strlen(p->sandbox_json));
	jgen_obj_close(g);
	jgen_free(g);
	buf_free(&out);
	/* As with shell, a result that reports a non-zero exit or a signal
	 * is an error for the model, whichever call reports it: a kill's own
	 * signal too (the text says the kill sent it). */
	bool failed = p->ended && (p->sig || p->exit_code != 0);
	tool_call_succeed(c, buf_steal(&text), buf_steal(&sb), failed);
}

/* --- the tools ----------------------------------------------------------- */

/* The process the call names, if it is the caller's; else fails the call
 * with the same answer for an unknown id and another uid's. */
static struct process *call_process(struct tool_call *c)
{
	struct process_table *t = c->env ? c->env->processes : NULL;
	const struct json *id = json_get(c->args, "process_id");
	const char *s = id && id->type == JSON_STRING ? id->u.str.s : "";
	struct process *p = t ? proc_find(t, s, proc_call_uid(c), false) : NULL;
	if (!p && t && proc_was_forgotten(t, s, proc_call_uid(c)))
		tool_call_invalid_msg(c, "process_id",
				      "Process '%s' ended and was forgotten before limits.process_keep_s, to keep at "
				      "most %u ended processes of yours listed (limits.process_keep_max); its "
				      "unread output is gone", s, t->limits.keep_max);
	else if (!p)
		tool_call_invalid_msg(c, "process_id",
			       "No process '%s' of yours (process_list shows them; an ended one is listed for "
			       "a while, then forgotten)", s);
	return p;
}

static size_t call_max_bytes(struct tool_call *c, struct process *p)
{
	int64_t v = proc_arg_int(c->args, "max_bytes", 0);
	return v > 0 ? (size_t)v : p->t->limits.output_max;
}

enum tool_ret process_io_exec(struct tool_call *c)
{
	struct process *p = call_process(c);
	struct regex *until = NULL;
	if (!p)
		return TOOL_DONE;
	proc_touch(p);
	const struct json *in = json_get(c->args, "input");
	const struct json *eof = json_get(c->args, "eof");
	/* The size not given stays as it is. */
	if (!p->ended && p->tty && (json_get(c->args, "cols") || json_get(c->args, "rows")))
		proc_resize(p, (unsigned)proc_arg_int(c->args, "cols", 0), (unsigned)proc_arg_int(c->args, "rows", 0));
	/* until looks at what answers the input, not at what came before it
	 * (the prompt that asked for it). */
	uint64_t match_from = 0;
	if (in && in->type == JSON_STRING && in->u.str.len) {
		match_from = p->total;
		if (p->ended) {
			tool_call_invalid_msg(c, "input", "Process '%s' has ended: it reads no more input", p->id);
			return TOOL_DONE;
		}
		/* All of the input or none: what it does not take now waits
		 * in its queue, so no retry (the client's or the
		 * dispatcher's) can send a part twice. */
		int k = proc_send_input(p, in->u.str.s, in->u.str.len);
		if (k == -ENOBUFS) {
			tool_call_fail(c, TC_OVERLOADED,
				       "The input of process '%s' is full: %zu bytes sent before wait for it to read "
				       "them (at most %u); none of this input was written. Read its output (it may "
				       "wait for that) or wait, then send it again",
				       p->id, buf_size(&p->input), PROC_INPUT_MAX);
			return TOOL_DONE;
		}
		if (k < 0) {
			tool_call_fail(c, TC_EXECUTION_ERROR, "Could not write to the input of process '%s': %s",
				       p->id, k == -EPIPE ? "its input is closed (it closed it, or eof was sent)" : strerror(-k));
			return TOOL_DONE;
		}
	}
	if (eof && eof->type == JSON_BOOL && eof->u.b && !p->ended)
		proc_input_eof(p);
	if (proc_compile_until(c, &until) < 0)
		return TOOL_DONE;
	return proc_wait(p, c, PROC_WAIT_IO, (uint64_t)proc_arg_int(c->args, "wait_ms", 1000), until,
			 call_max_bytes(c, p), match_from);
}

enum tool_ret process_kill_exec(struct tool_call *c)
{
	struct process *p = call_process(c);
	if (!p)
		return TOOL_DONE;
	const struct json *s = json_get(c->args, "signal");
	int sig = SIGTERM;
	if (s && s->type == JSON_STRING && (sig = process_signal_from_name(s->u.str.s)) < 0) {
		tool_call_invalid(c, "signal", "unknown signal '%s'",
			       s->u.str.s);
		return TOOL_DONE;
	}
	proc_signal(p, sig, PROC_END_KILLED);
	return proc_wait(p, c, PROC_WAIT_KILL, 0, NULL, call_max_bytes(c, p), 0);
}

enum tool_ret process_list_exec(struct tool_call *c)
{
	struct process_table *t = c->env ? c->env->processes : NULL;
	uid_t uid = proc_call_uid(c);
	struct buf text = {0}, sb = {0};
	struct jgen *g = jgen_new(&sb);
	char sig[16];
	unsigned n = 0;

	jgen_obj_open(g);
	jgen_key(g, "processes");
	if (t)
		process_table_write_list(t, uid, false, g);
	else {
		jgen_arr_open(g);
		jgen_arr_close(g);
	}
	jgen_obj_close(g);
	jgen_free(g);
	struct list none;
	list_init(&none);
	PROC_FOREACH(node, tmp, t ? &t->procs : &none) {
		struct process *p = container_of(node, struct process, node);
		if (p->uid != uid)
			continue;
		n++;
		buf_printf(&text, "%s  ", p->id);
		if (!p->ended)
			buf_printf(&text, "running%s", proc_waiting(p) ? " (waiting for input)" : "");
		else if (p->sig)
			buf_printf(&text, "killed by %s", child_signal_name(p->sig, sig));
		else
			buf_printf(&text, "exit code %d", p->exit_code);
		buf_printf(&text, "  %" PRIu64 " bytes", p->total);
		if (proc_ring_start(p))
			buf_printf(&text, " (%" PRIu64 " dropped)", proc_ring_start(p));
		buf_puts(&text, "  ");
		append_text(&text, p->command, strlen(p->command));
		buf_putc(&text, '\n');
	}
	if (!n)
		buf_puts(&text, "No processes.");
	tool_call_succeed(c, buf_steal(&text), buf_steal(&sb), false);
	return TOOL_DONE;
}
