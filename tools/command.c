/* SPDX-License-Identifier: MIT */
/*
 * The "command" tool kind: declarations from tool files are checked and
 * compiled into an argv template; each call substitutes its arguments into
 * the template element by element and runs the program with no shell in
 * between, through the child supervision of lib/child.c (same environment
 * scrubbing, output caps, stopping rules and sandbox as the shell tool).
 * An element may not start with '-' through a placeholder's value (it
 * would be an option of the program), whichever placeholder of the element
 * its first character comes from ("{{a}}{{b}}" with a empty and b "-rf"
 * included), unless the element follows a "--" of argv or the file says
 * "options_allowed": true.
 */
#include "tools/command.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/child/child.h"
#include "lib/fsjob/fsjob.h"
#include "lib/files/identity.h"
#include "lib/sandbox/sandbox.h"
#include "lib/files/workspace.h"
#include "proto/base/strv.h"
#include "proto/json.h"

/* Bounds on what a declaration may hold. */
#define ARGV_MAX 1024
#define ENV_MAX 256
#define CONCURRENCY_MAX 1024
#define DATA_TAIL_BYTES 4096	/* of each stream, in a failure's data */
#define OK_EXIT_MAX 64

#define EX_TEMPFAIL 75

struct seg {
	char *text;		/* literal text, or the property name */
	bool placeholder;
};

/* One argv element of the template. */
struct targ {
	struct seg *segs;
	size_t n;
	bool may_be_option;	/* after a "--": a value may start it with '-' */
};

struct cmd {
	struct targ *argv;
	size_t argc;
	char *program;		/* argv[0] as declared, for messages */
	char *cwd;		/* beneath the workspace, or NULL for the root */
	char **env;		/* "NAME=value" added to the scrubbed environment */
	size_t n_env;
	bool stdout_json;
	bool options_allowed;	/* placeholder values may start with '-' */
	uint64_t ok_exit[4];	/* "ok_exit_codes": bit n set when exit n succeeds */
	struct sandbox_tool sandbox;
	int run_as_peer;	/* -1: the config's */
};

/* Frees what a struct cmd holds. */
static void cmd_clear(struct cmd *cmd)
{
	for (size_t i = 0; i < cmd->argc; i++) {
		for (size_t k = 0; k < cmd->argv[i].n; k++)
			free(cmd->argv[i].segs[k].text);
		free(cmd->argv[i].segs);
	}
	free(cmd->argv);
	free(cmd->program);
	free(cmd->cwd);
	for (size_t i = 0; i < cmd->n_env; i++)
		free(cmd->env[i]);
	free(cmd->env);
	sandbox_tool_clear(&cmd->sandbox);
}

static void cmd_free(void *p)
{
	if (!p)
		return;
	cmd_clear(p);
	free(p);
}

static void targ_add(struct targ *a, const char *s, size_t n, bool placeholder)
{
	a->segs = xreallocarray(a->segs, a->n + 1, sizeof(*a->segs));
	a->segs[a->n++] = (struct seg){ .text = xstrndup(s, n), .placeholder = placeholder };
}

/* Splits one argv element into literal text and {{name}} placeholders,
 * each of which must name a property of the input schema. */
static int parse_element(struct bind *b, const struct json *v, size_t idx, const struct json *props,
			 struct targ *ret)
{
	_cleanup_free_ char *path = bind_index_path("argv", idx);
	if (v->type != JSON_STRING)
		return bind_fail(b, v->off, path, "expected a string, got %s", bind_got(v));
	const char *p = v->u.str.s, *end = p + v->u.str.len;
	if (memchr(p, '\0', v->u.str.len))
		return bind_fail(b, v->off, path, "contains a NUL character");
	if (idx == 0 && v->u.str.len == 0)
		return bind_fail(b, v->off, path, "the program name is empty");

	while (p < end) {
		const char *open = memmem(p, (size_t)(end - p), "{{", 2);
		if (!open) {
			targ_add(ret, p, (size_t)(end - p), false);
			break;
		}
		if (open > p)
			targ_add(ret, p, (size_t)(open - p), false);
		const char *name = open + 2;
		const char *close = memmem(name, (size_t)(end - name), "}}", 2);
		if (!close)
			return bind_fail(b, v->off, path, "'{{' without a closing '}}'");
		if (close == name)
			return bind_fail(b, v->off, path, "empty placeholder '{{}}'");
		_cleanup_free_ char *key = xstrndup(name, (size_t)(close - name));
		if (idx == 0)
			return bind_fail(b, v->off, path, "the program must be literal, not a placeholder");
		if (!json_get(props, key))
			return bind_fail(b, v->off, path, "placeholder '{{%s}}' names no property of input_schema", key);
		targ_add(ret, key, strlen(key), true);
		p = close + 2;
	}
	return 0;
}

/* "argv": the template, checked against the schema's properties. */
static int parse_argv(struct bind *b, const struct json *argv, const struct json *props, struct cmd *cmd)
{
	if (argv->type != JSON_ARRAY || argv->u.arr.n == 0)
		return bind_fail(b, argv->off, "argv", "expected a non-empty array of strings");
	if (argv->u.arr.n > ARGV_MAX)
		return bind_fail(b, argv->off, "argv", "more than %d elements", ARGV_MAX);
	cmd->argv = xcalloc(argv->u.arr.n, sizeof(*cmd->argv));
	cmd->argc = argv->u.arr.n;
	bool after_dashes = false;
	int r = 0;
	for (size_t i = 0; i < argv->u.arr.n; i++) {
		if (parse_element(b, argv->u.arr.items[i], i, props, &cmd->argv[i]) < 0)
			r = -EINVAL;	/* the next element may be wrong too */
		cmd->argv[i].may_be_option = after_dashes;
		if (str_eq(json_str(argv->u.arr.items[i]), "--"))
			after_dashes = true;
	}
	if (r == 0)
		cmd->program = xstrdup(json_str(argv->u.arr.items[0]));
	return r;
}

/* "name": a tool name as MCP allows it. */
static int parse_name(struct bind *b, const char *path, const struct json *v, void *at)
{
	if (v->type != JSON_STRING || !tool_name_valid(v->u.str.s, v->u.str.len))
		return bind_fail(b, v->off, path, "expected 1 to %d characters of A-Z a-z 0-9 _ - .", TOOL_NAME_MAX);
	*(const char **)at = v->u.str.s;
	return 0;
}

/* "input_schema": an object, compiled when the tool is made. */
static int parse_schema(struct bind *b, const char *path, const struct json *v, void *at)
{
	int r = bind_want_object(b, path, v);
	if (r == 0)
		*(const struct json **)at = v;
	return r;
}

/* "ok_exit_codes": exit statuses (0 to 255) that are a success. */
static int parse_ok_exit(struct bind *b, const char *path, const struct json *v, void *at)
{
	uint64_t *ok = at;
	if (v->type != JSON_ARRAY || v->u.arr.n == 0 || v->u.arr.n > OK_EXIT_MAX)
		return bind_fail(b, v->off, path, "an array of 1 to %d exit statuses", OK_EXIT_MAX);
	uint64_t bits[4] = {0};
	int r = 0;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		int64_t n;
		if (!json_get_int(v->u.arr.items[i], &n) || n < 0 || n > 255) {
			_cleanup_free_ char *k = bind_index_path(path, i);
			r = bind_fail(b, v->u.arr.items[i]->off, k, "an integer from 0 to 255");
			continue;
		}
		bits[n / 64] |= UINT64_C(1) << (n % 64);
	}
	if (r == 0)
		memcpy(ok, bits, sizeof(bits));
	return r;
}

/* "env": fixed NAME: value pairs added to the scrubbed environment. */
static int parse_env(struct bind *b, const char *path, const struct json *env, void *at)
{
	struct cmd *cmd = at;
	char **v;
	size_t n;
	int r = bind_want_env(b, path, env, ENV_MAX, &v, &n);
	if (r < 0)
		return r;
	bind_strv_free(cmd->env, cmd->n_env);
	cmd->env = v;
	cmd->n_env = n;
	return 0;
}

/* A declaration as the binder reads it: the program's half (cmd) and the
 * tool's. */
struct decl {
	struct cmd cmd;
	const char *name;
	int kind;
	char *description;
	const struct json *argv;
	const struct json *schema;
	int side;
	bool idempotent;
	uint32_t timeout_ms;		/* 0: the side-effect class's default */
	int max_attempts;		/* 0: the dispatcher's */
	int concurrency;		/* -1: no cap of its own */
	int stdout_mode, output_mode;	/* -1: not given; 1: "json" */
};

static const char *const kind_names[] = { "command", NULL };
static const char *const stdout_names[] = { "text", "json", NULL };

static const struct bind_field decl_fields[] = {
	{ .key = "name", .kind = BIND_CUSTOM, .required = true, .off = offsetof(struct decl, name),
	  .parse = parse_name },
	B_NAME(struct decl, "kind", kind, kind_names),
	B_STRING(struct decl, "description", description, 0, 0),
	{ .key = "argv", .kind = BIND_VALUE, .required = true, .off = offsetof(struct decl, argv) },
	{ .key = "side_effects", .kind = BIND_NAME, .required = true, .off = offsetof(struct decl, side),
	  .names = side_effect_names, .size = sizeof(int) },
	B_BOOL(struct decl, "idempotent", idempotent),
	B_U32(struct decl, "timeout_ms", timeout_ms, 1, TOOL_TIMEOUT_MAX_MS),
	B_INT(struct decl, "max_attempts", max_attempts, 1, TOOL_ATTEMPTS_MAX),
	B_INT(struct decl, "concurrency", concurrency, 0, CONCURRENCY_MAX),
	B_CUSTOM(struct decl, "input_schema", schema, parse_schema),
	B_STRING(struct decl, "cwd", cmd.cwd, 1, 0),
	B_CUSTOM(struct decl, "env", cmd, parse_env),
	B_NAME(struct decl, "stdout", stdout_mode, stdout_names),
	B_NAME(struct decl, "output", output_mode, stdout_names),
	B_OBJECT(struct decl, "sandbox", cmd.sandbox, sandbox_tool_fields, NULL),
	B_CUSTOM(struct decl, "network", cmd.sandbox, sandbox_tool_network_bind),
	B_NAME(struct decl, "run_as", cmd.run_as_peer, sandbox_run_as_names),
	B_BOOL(struct decl, "options_allowed", cmd.options_allowed),
	B_CUSTOM(struct decl, "ok_exit_codes", cmd.ok_exit, parse_ok_exit),
	{},
};

static void decl_clear(struct decl *d)
{
	cmd_clear(&d->cmd);
	free(d->description);
}

int command_tool_bind(struct bind *b, const struct json *decl, const char *source_path, struct tool **ret)
{
	struct decl d = {
		.cmd = { .sandbox = SANDBOX_TOOL_UNSET, .run_as_peer = -1, .ok_exit = { 1 } },
		.side = -1, .concurrency = -1, .stdout_mode = -1, .output_mode = -1,
	};
	unsigned before = b->n_errors;

	if (decl->type != JSON_OBJECT)
		return bind_fail(b, decl->off, NULL, "a command tool is declared by a JSON object");
	bind_object(b, NULL, decl, decl_fields, NULL, &d);
	if (d.stdout_mode >= 0 && d.output_mode >= 0)
		bind_fail(b, json_get(decl, "output")->off, "output", "give either 'stdout' or 'output', not both");
	if (d.argv)
		parse_argv(b, d.argv, json_get(d.schema, "properties"), &d.cmd);

	struct buf text = {0};
	if (d.schema) {
		struct jgen *g = jgen_new(&text);
		jgen_value(g, d.schema);
		jgen_free(g);
	} else {
		buf_puts(&text, "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}");
	}
	_cleanup_free_ char *schema_text = buf_steal(&text);
	_cleanup_free_ char *err = NULL;
	struct tool *t = NULL;
	/* The schema is checked even when something else is wrong: its
	 * mistakes are reported in the same go. */
	if (tool_new(&tool_kind_command, d.name ? d.name : "t", d.description ? d.description : "", schema_text,
		     NULL, &t, &err) < 0)
		bind_fail(b, d.schema ? d.schema->off : decl->off, "input_schema", "%s", err ? err : "invalid schema");
	if (b->n_errors > before) {
		if (t)
			tool_unref(t);
		decl_clear(&d);
		return -EINVAL;
	}

	struct cmd *cmd = xmemdup(&d.cmd, sizeof(d.cmd));
	cmd->stdout_json = d.stdout_mode == 1 || d.output_mode == 1;
	t->priv = cmd;
	t->sandbox = &cmd->sandbox;
	t->side_effects = (enum side_effect)d.side;
	t->idempotent = d.idempotent;
	t->timeout_ms = d.timeout_ms ? d.timeout_ms : tool_default_timeout(t->side_effects);
	if (d.max_attempts)
		t->max_attempts = (unsigned)d.max_attempts;
	if (d.concurrency >= 0)
		t->concurrency = (unsigned)d.concurrency;
	free(d.description);
	free(t->source);
	t->source = xstrdup(source_path ? source_path : "built-in");
	struct buf fp = {0};
	json_canonical(decl, &fp);
	free(t->fingerprint);
	t->fingerprint = buf_steal(&fp);
	*ret = t;
	return 0;
}

int command_tool_from_json(const struct json *decl, const char *source_path, struct tool **ret, char **ret_err)
{
	struct bind b = {0};
	int r = command_tool_bind(&b, decl, source_path, ret);
	if (r < 0)
		*ret_err = bind_errors(&b);
	return r;
}

/* Appends an argument's value as it goes on a command line; false when it
 * is absent or null. */
static bool arg_text(const struct json *v, struct buf *out)
{
	if (!v || v->type == JSON_NULL)
		return false;
	switch (v->type) {
	case JSON_STRING:
		buf_append(out, v->u.str.s, v->u.str.len);
		break;
	case JSON_NUMBER:
		if (v->u.num.raw)
			buf_append(out, v->u.num.raw, v->u.num.raw_len);
		else
			buf_printf(out, "%.17g", v->u.num.d);
		break;
	case JSON_BOOL:
		buf_puts(out, v->u.b ? "true" : "false");
		break;
	default:
		json_canonical(v, out);
		break;
	}
	return true;
}

/* Builds the argv of one call. Fails (validation_error) only when an
 * argument holds a NUL character, which no command line can carry. */
static int build_argv(struct tool_call *c, const struct cmd *cmd, char ***ret)
{
	char **argv = xcalloc(cmd->argc + 1, sizeof(*argv));
	size_t n = 0;

	for (size_t i = 0; i < cmd->argc; i++) {
		const struct targ *a = &cmd->argv[i];
		struct buf b = {0};
		bool missing_lone = false;
		for (size_t k = 0; k < a->n; k++) {
			if (!a->segs[k].placeholder) {
				buf_puts(&b, a->segs[k].text);
				continue;
			}
			size_t before = buf_size(&b);
			const struct json *v = json_get(c->args, a->segs[k].text);
			if (!arg_text(v, &b))
				missing_lone = a->n == 1;
			else if (before == 0 && buf_size(&b) > 0 && buf_head(&b)[0] == '-' &&
				 !cmd->options_allowed && !a->may_be_option) {
				tool_call_invalid(c, a->segs[k].text,
					       "a value starting with '-' would be taken as an option of '%s'; give a value that does not start with '-' (for a file, prefix it with ./)",
					       cmd->program);
				buf_free(&b);
				strv_free(argv);
				return -EINVAL;
			}
			else if (memchr(buf_head(&b) + before, '\0', buf_size(&b) - before)) {
				tool_call_invalid(c, a->segs[k].text,
					       "contains a NUL character, which a command line cannot carry");
				buf_free(&b);
				strv_free(argv);
				return -EINVAL;
			}
		}
		if (missing_lone) {
			buf_free(&b);
			continue;
		}
		argv[n++] = buf_steal(&b);
	}
	*ret = argv;
	return 0;
}

/* Appends s quoted for a POSIX shell, for the audit log's "command run". */
static void quote_arg(struct buf *b, const char *s)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_";
	if (*s && strspn(s, safe) == strlen(s)) {
		buf_puts(b, s);
		return;
	}
	buf_putc(b, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			buf_puts(b, "'\\''");
		else
			buf_putc(b, *s);
	}
	buf_putc(b, '\'');
}

/* The error data of a failed run: the exit code (or signal) and the ends
 * of both streams, so that what it printed before failing is not lost. */
static char *failure_data(const struct child_result *r, const char *signal)
{
	struct buf b = {0}, tail = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	if (signal)
		jgen_kv_str(g, "signal", signal);
	else
		jgen_kv_int(g, "exitCode", r->exit_code);
	static const char *const names[] = { [CHILD_STDOUT] = "stdout", [CHILD_STDERR] = "stderr" };
	for (enum child_stream s = CHILD_STDOUT; s <= CHILD_STDERR; s++) {
		buf_clear(&tail);
		child_result_tail(r, s, DATA_TAIL_BYTES, &tail);
		jgen_key(g, names[s]);
		jgen_strn(g, buf_size(&tail) ? buf_head(&tail) : "", buf_size(&tail));
	}
	jgen_obj_close(g);
	jgen_free(g);
	buf_free(&tail);
	return buf_steal(&b);
}

/* What the program printed, for a failure's message: ":\n", then stdout,
 * then stderr under a "[stderr]" line (the head and tail of each, as the
 * shell tool's text keeps them), or "" when it printed nothing. */
static char *failure_tail(struct tool_call *c)
{
	_cleanup_free_ char *out = child_call_partial(c);
	size_t n = out ? strlen(out) : 0;
	while (n && (out[n - 1] == '\n' || out[n - 1] == ' ' || out[n - 1] == '\t' || out[n - 1] == '\r'))
		n--;
	return n ? xasprintf(":\n%.*s", (int)n, out) : xstrdup("");
}

/* The text of a success: what the program printed as a failure shows it,
 * and its exit status when not 0 (one of ok_exit_codes). */
static char *output_text(struct tool_call *c, const struct child_result *r)
{
	_cleanup_free_ char *out = child_call_partial(c);
	struct buf b = {0};
	if (out)
		buf_puts(&b, out);
	if (r->exit_code) {
		if (buf_size(&b) && buf_head(&b)[buf_size(&b) - 1] != '\n')
			buf_putc(&b, '\n');
		buf_printf(&b, "[exit code %d]", r->exit_code);
	} else if (!out) {
		buf_puts(&b, "(no output)");
	}
	return buf_steal(&b);
}

/* Ends *text with a line, when there is one. */
static void append_line(char **text, const char *line)
{
	if (!line)
		return;
	char *with = xasprintf("%s\n%s", *text, line);
	free(*text);
	*text = with;
}

/* Success with stdout parsed as JSON. */
static void succeed_json(struct tool_call *c, const struct cmd *cmd, struct child_result *r, const char *note)
{
	struct json_doc *doc = NULL;
	struct json_err err = {0};

	if (r->truncated[CHILD_STDOUT]) {
		tool_call_fail(c, TC_EXECUTION_ERROR,
			       "Command '%s' printed %" PRIu64 " bytes, more than the output limit; its JSON output was cut",
			       cmd->program, r->total[CHILD_STDOUT]);
		return;
	}
	if (json_parse(r->out[CHILD_STDOUT], r->out_len[CHILD_STDOUT], 0, 0, &doc, &err) < 0) {
		tool_call_fail(c, TC_EXECUTION_ERROR, "Command '%s' did not print valid JSON: %s at byte %zu",
			       cmd->program, err.msg, err.offset);
		return;
	}
	const struct json *root = json_doc_root(doc);
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	if (root->type == JSON_OBJECT) {
		jgen_value(g, root);
	} else {
		/* structuredContent is an object: other values are wrapped. */
		jgen_obj_open(g);
		jgen_key(g, "result");
		jgen_value(g, root);
		jgen_obj_close(g);
	}
	jgen_free(g);
	json_doc_unref(doc);
	char *text = child_result_text(r);
	append_line(&text, note);
	tool_call_succeed(c, text, buf_steal(&b), false);
}

/* True when the file's ok_exit_codes hold an exit status. */
static bool exit_ok(const struct cmd *cmd, int code)
{
	return code >= 0 && code <= 255 && (cmd->ok_exit[code / 64] >> (code % 64) & 1);
}

/* Maps how the program ended to the call's outcome. */
static void command_done(struct tool_call *c, struct child_result *r)
{
	const struct cmd *cmd = c->tool->priv;
	char sig[16];
	_cleanup_free_ char *limit = (r->signal || r->exit_code) ? child_call_limit(c, r) : NULL;
	/* What the network proxy refused, whatever the exit status. */
	_cleanup_free_ char *net = sandbox_run_net_note(child_call_sandbox(c));

	if (limit) {
		_cleanup_free_ char *tail = failure_tail(c);
		tool_call_fail(c, TC_EXECUTION_ERROR, "Command '%s' was stopped by %s of its sandbox%s",
			       cmd->program, limit, tail);
	} else if (r->signal) {
		_cleanup_free_ char *tail = failure_tail(c);
		child_signal_name(r->signal, sig);
		tool_call_fail_data(c, TC_EXECUTION_ERROR, failure_data(r, sig),
				    "Command '%s' was killed by signal %s%s", cmd->program, sig, tail);
	} else if (!exit_ok(cmd, r->exit_code)) {
		_cleanup_free_ char *tail = failure_tail(c);
		enum tc_kind kind = r->exit_code == EX_TEMPFAIL ? TC_TRANSIENT : TC_EXECUTION_ERROR;
		_cleanup_free_ char *note = net ? TAKE_PTR(net)
						: sandbox_run_denial_note(child_call_sandbox(c), r->out[CHILD_STDERR],
									  r->out_len[CHILD_STDERR]);
		tool_call_fail_data(c, kind, failure_data(r, NULL),
				    "Command '%s' exited with status %d%s%s%s", cmd->program, r->exit_code, tail,
				    note ? "\n" : "", note ? note : "");
	} else {
		/* And a TMPDIR it filled and what the daemon saw the
		 * sandbox refuse, though it did not fail. */
		_cleanup_free_ char *tmp = child_call_tmp_note(c);
		_cleanup_free_ char *seen = sandbox_run_seen_note(child_call_sandbox(c));
		_cleanup_free_ char *both = tmp && seen ? xasprintf("%s\n%s", tmp, seen) : NULL;
		const char *note = both ? both : tmp ? tmp : seen;
		if (cmd->stdout_json) {
			succeed_json(c, cmd, r, note);
			return;
		}
		char *text = output_text(c, r);
		append_line(&text, net);
		append_line(&text, note);
		tool_call_succeed(c, text, child_call_json(c, r, false), false);
	}
}

/* Starts one call; the outcome follows from command_done. */
static enum tool_ret command_exec(struct tool_call *c)
{
	const struct cmd *cmd = c->tool->priv;
	_cleanup_close_ int cwd_fd = -1;
	_cleanup_(strv_freep) char **argv = NULL;
	_cleanup_(strv_freep) char **env = NULL;
	int r;

	/* Whom the program runs as: the call's identity as the config's
	 * run_as decided it (ident->change), unless the tool file says
	 * otherwise: "daemon", the daemon's own identity; "peer", the
	 * caller's even where the config keeps the daemon's. */
	static const struct identity daemon_id = { .change = false };
	_cleanup_(identity_clear) struct identity as_peer = {0};
	const struct identity *as = c->ident;
	if (cmd->run_as_peer == 0) {
		as = &daemon_id;
	} else if (cmd->run_as_peer == 1 && c->ident && !c->ident->change) {
		identity_copy(&as_peer, c->ident);
		identity_for_children(&as_peer, true);
		as = &as_peer;
	}
	if (cmd->cwd) {
		/* Reached as the program will run. */
		r = fsjob_openat_as(c, as, cmd->cwd, strlen(cmd->cwd), O_PATH | O_DIRECTORY | O_CLOEXEC, &cwd_fd);
		if (r < 0) {
			_cleanup_free_ char *msg = NULL;
			enum tc_kind kind = ws_error(r, cmd->cwd, &msg);
			tool_call_fail(c, kind, "%s", msg);
			return TOOL_DONE;
		}
	}
	if (build_argv(c, cmd, &argv) < 0)
		return TOOL_DONE;

	struct buf line = {0};
	for (char **a = argv; *a; a++) {
		if (a != argv)
			buf_putc(&line, ' ');
		quote_arg(&line, *a);
	}
	_cleanup_free_ char *shown = buf_steal(&line);
	tool_call_note_command(c, shown);

	env = child_env_new(c->env ? c->env->shell_env_allow : NULL);
	for (size_t i = 0; i < cmd->n_env; i++) {
		const char *eq = strchr(cmd->env[i], '=');
		_cleanup_free_ char *name = xstrndup(cmd->env[i], (size_t)(eq - cmd->env[i]));
		child_env_put(&env, name, eq + 1);
	}

	const struct sandbox_config *sbc = c->env ? c->env->sandbox : NULL;
	/* The program, checked and held: what runs is what was checked
	 * (searched in the child's PATH; relative to its working directory,
	 * the workspace's root when the file names none). */
	_cleanup_close_ int exec_fd = -1;
	_cleanup_free_ char *why = NULL;
	uid_t run_uid = sbc && as && as->change ? as->uid : geteuid();
	int base = cwd_fd >= 0 ? cwd_fd : -1;
	_cleanup_close_ int root_fd = -1;
	const char *script = sandbox_argv_script((const char *const *)argv);
	if (base < 0 && c->ws && c->ws->root &&
	    ((argv[0][0] != '/' && strchr(argv[0], '/')) || (script && script[0] != '/')))
		base = root_fd = open(c->ws->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	r = sandbox_program_open(argv[0], env, base, run_uid, &exec_fd, &why);
	if (r == 0)
		r = sandbox_script_check(argv, base, run_uid, &why);
	if (r == -EPERM && why) {
		tool_call_fail(c, TC_PERMISSION_DENIED, "Command '%s' refused: %s", cmd->program, why);
		return TOOL_DONE;
	}
	if (r == -ENOENT || r == -ENOTDIR) {
		tool_call_fail(c, TC_EXECUTION_ERROR, "Command '%s' not found", cmd->program);
		return TOOL_DONE;
	}
	if (r < 0) {
		/* Nothing runs but what was checked. */
		tool_call_fail(c, TC_EXECUTION_ERROR, "Command '%s' cannot be run: %s", cmd->program, strerror(-r));
		return TOOL_DONE;
	}
	struct child_opts opts = {
		.path = NULL,		/* argv[0], searched in the child's PATH */
		.argv = argv,
		.envp = env,
		.cwd_fd = cwd_fd,	/* -1: the workspace's root */
		.exec_fd = exec_fd,
	};
	struct sandbox_req req;
	sandbox_req_init(&req, sbc, c->tool->name, c->tool->side_effects == SIDE_NETWORK, &cmd->sandbox);
	if (as != c->ident)
		req.id = as;
	_cleanup_free_ char *dir = sbc ? sandbox_start_dir(c->ws ? c->ws->root : NULL, cwd_fd) : NULL;
	req.cwd = dir;
	r = child_call_start(c, &opts, sbc ? &req : NULL, command_done);
	if (r < 0 && c->kind != TC_OK)
		;	/* the sandbox said why */
	else if (r == -ENOENT)
		tool_call_fail(c, TC_EXECUTION_ERROR, "Command '%s' not found", cmd->program);
	else if (r == -EACCES)
		tool_call_fail(c, TC_EXECUTION_ERROR, "Command '%s' is not executable", cmd->program);
	else if (r == -EAGAIN || r == -EMFILE || r == -ENFILE || r == -ENOMEM)
		tool_call_fail(c, TC_TRANSIENT, "Could not start command '%s': %s", cmd->program, strerror(-r));
	else if (r < 0)
		tool_call_fail(c, TC_EXECUTION_ERROR, "Could not start command '%s': %s", cmd->program, strerror(-r));
	return r < 0 ? TOOL_DONE : TOOL_PENDING;
}

char **command_tool_argv(const struct tool *t)
{
	if (!t || t->def != &tool_kind_command || !t->priv)
		return NULL;
	const struct cmd *cmd = t->priv;
	char **v = xcalloc(cmd->argc + 1, sizeof(*v));
	for (size_t i = 0; i < cmd->argc; i++) {
		const struct targ *a = &cmd->argv[i];
		struct buf b = {0};
		bool literal = true;
		for (size_t k = 0; k < a->n && literal; k++) {
			literal = !a->segs[k].placeholder;
			buf_puts(&b, a->segs[k].text);
		}
		if (!literal) {
			buf_free(&b);
			break;
		}
		v[i] = xstrndup(buf_head(&b) ? buf_head(&b) : "", buf_size(&b));
		buf_free(&b);
	}
	return v;
}

const struct tool_def tool_kind_command = {
	.name = "command",
	.description = "A program run with an argv built from the arguments",
	.side_effects = SIDE_EXECUTE,	/* each tool's own comes from its declaration */
	.exec = command_exec,
	.errors_trip_circuit = true,
	.cancel = child_call_cancel,
	.priv_free = cmd_free,
	.runs_children = true,
};
