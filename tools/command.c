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
#include "lib/files/fsjob.h"
#include "lib/files/identity.h"
#include "lib/sandbox/sandbox.h"
#include "lib/files/workspace.h"
#include "proto/base/strv.h"
#include "proto/json.h"

/* Bounds on what a declaration may hold. */
#define ARGV_MAX 1024
#define ENV_MAX 256
#define TIMEOUT_MAX_MS 86400000
#define ATTEMPTS_MAX 10
#define CONCURRENCY_MAX 1024
/* How much of stderr a failure message quotes. */
#define TAIL_BYTES 500
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

static void cmd_free(void *p)
{
	struct cmd *cmd = p;
	if (!cmd)
		return;
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
	free(cmd);
}

static void cmd_freep(struct cmd **p)
{
	cmd_free(*p);
}

static void targ_add(struct targ *a, const char *s, size_t n, bool placeholder)
{
	a->segs = xreallocarray(a->segs, a->n + 1, sizeof(*a->segs));
	a->segs[a->n++] = (struct seg){ .text = xstrndup(s, n), .placeholder = placeholder };
}

/* Splits one argv element into literal text and {{name}} placeholders,
 * each of which must name a property of the input schema. */
static int parse_element(const struct json *v, size_t idx, const struct json *props,
			 struct targ *ret, char **ret_err)
{
	if (!v || v->type != JSON_STRING)
		return set_errorf(ret_err, "argv[%zu]: expected a string", idx);
	const char *p = v->u.str.s, *end = p + v->u.str.len;
	if (memchr(p, '\0', v->u.str.len))
		return set_errorf(ret_err, "argv[%zu]: contains a NUL character", idx);
	if (idx == 0 && v->u.str.len == 0)
		return set_errorf(ret_err, "argv[0]: the program name is empty");

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
			return set_errorf(ret_err, "argv[%zu]: '{{' without a closing '}}'", idx);
		if (close == name)
			return set_errorf(ret_err, "argv[%zu]: empty placeholder '{{}}'", idx);
		_cleanup_free_ char *key = xstrndup(name, (size_t)(close - name));
		if (idx == 0)
			return set_errorf(ret_err, "argv[0]: the program must be literal, not a placeholder");
		if (!json_get(props, key))
			return set_errorf(ret_err, "argv[%zu]: placeholder '{{%s}}' names no property of input_schema",
				   idx, key);
		targ_add(ret, key, strlen(key), true);
		p = close + 2;
	}
	return 0;
}

/* A tool name as MCP allows it. */
static bool name_valid(const struct json *v)
{
	return v && v->type == JSON_STRING && tool_name_valid(v->u.str.s, v->u.str.len);
}

/* Reads an optional integer key within [lo, hi]. */
static int get_bounded(const struct json *decl, const char *key, int64_t lo, int64_t hi,
		       int64_t *val, char **ret_err)
{
	const struct json *v = json_get(decl, key);
	if (!v)
		return 0;
	if (!json_get_int(v, val) || *val < lo || *val > hi)
		return set_errorf(ret_err, "%s: expected an integer from %" PRId64 " to %" PRId64, key, lo, hi);
	return 1;
}

static const char *const known_keys[] = {
	"name", "kind", "description", "argv", "side_effects", "idempotent", "timeout_ms",
	"max_attempts", "concurrency", "input_schema", "cwd", "env", "stdout", "output", "sandbox",
	"run_as", "options_allowed", "ok_exit_codes", NULL,
};

/* Reads "ok_exit_codes": exit statuses (0 to 255) that are a success;
 * default [0]. */
static int ok_exit_from_json(const struct json *v, uint64_t ok[4], char **ret_err)
{
	ok[0] = 1;
	if (!v)
		return 0;
	if (v->type != JSON_ARRAY || v->u.arr.n == 0 || v->u.arr.n > OK_EXIT_MAX)
		return set_errorf(ret_err, "ok_exit_codes: an array of 1 to %d exit statuses", OK_EXIT_MAX);
	ok[0] = 0;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		int64_t n;
		if (!json_get_int(v->u.arr.items[i], &n) || n < 0 || n > 255)
			return set_errorf(ret_err, "ok_exit_codes[%zu]: an integer from 0 to 255", i);
		ok[n / 64] |= UINT64_C(1) << (n % 64);
	}
	return 0;
}

/* Refuses keys the kind does not know. */
static int check_keys(const struct json *decl, char **ret_err)
{
	for (size_t i = 0; i < decl->u.obj.n; i++) {
		const char *key = decl->u.obj.members[i].key;
		bool known = false;
		for (const char *const *k = known_keys; *k && !known; k++)
			known = strcmp(*k, key) == 0 && strlen(key) == decl->u.obj.members[i].key_len;
		if (!known)
			return set_errorf(ret_err, "%s: unknown key", key);
	}
	if (json_get(decl, "stdout") && json_get(decl, "output"))
		return set_errorf(ret_err, "output: give either 'stdout' or 'output', not both");
	return 0;
}

/* Reads the declared fixed environment variables. */
static int parse_env(const struct json *env, struct cmd *cmd, char **ret_err)
{
	if (!env)
		return 0;
	if (env->type != JSON_OBJECT)
		return set_errorf(ret_err, "env: expected an object of NAME: value strings");
	if (env->u.obj.n > ENV_MAX)
		return set_errorf(ret_err, "env: more than %d variables", ENV_MAX);
	cmd->env = xcalloc(env->u.obj.n + 1, sizeof(*cmd->env));
	for (size_t i = 0; i < env->u.obj.n; i++) {
		const struct json_member *m = &env->u.obj.members[i];
		if (m->key_len == 0 || strlen(m->key) != m->key_len || strchr(m->key, '='))
			return set_errorf(ret_err, "env: '%s' is not a variable name", m->key);
		if (m->value->type != JSON_STRING || strlen(m->value->u.str.s) != m->value->u.str.len)
			return set_errorf(ret_err, "env.%s: expected a string without NUL characters", m->key);
		cmd->env[cmd->n_env++] = xasprintf("%s=%s", m->key, m->value->u.str.s);
	}
	return 0;
}

/* Checks a declaration and builds its tool. */
int command_tool_from_json(const struct json *decl, const char *source_path,
			   struct tool **ret, char **ret_err)
{
	_cleanup_(cmd_freep) struct cmd *cmd = NULL;
	int64_t timeout = 0, attempts = 0, conc = 0;
	int r, has_timeout, has_attempts, has_conc;

	if (!decl || decl->type != JSON_OBJECT)
		return set_errorf(ret_err, "a command tool is declared by a JSON object");
	if ((r = check_keys(decl, ret_err)) < 0)
		return r;

	const struct json *name = json_get(decl, "name");
	if (!name)
		return set_errorf(ret_err, "name: missing");
	if (!name_valid(name))
		return set_errorf(ret_err, "name: expected 1 to %d characters of A-Z a-z 0-9 _ - .", TOOL_NAME_MAX);

	const struct json *kind = json_get(decl, "kind");
	if (kind && !str_eq(json_str(kind), "command"))
		return set_errorf(ret_err, "kind: expected \"command\"");

	const struct json *desc = json_get(decl, "description");
	if (desc && desc->type != JSON_STRING)
		return set_errorf(ret_err, "description: expected a string");

	const struct json *se = json_get(decl, "side_effects");
	if (!se)
		return set_errorf(ret_err, "side_effects: missing (one of none, read, write, execute, network)");
	int side = side_effect_from_name(json_str(se));
	if (side < 0)
		return set_errorf(ret_err, "side_effects: expected one of none, read, write, execute, network");

	const struct json *idem = json_get(decl, "idempotent");
	if (idem && idem->type != JSON_BOOL)
		return set_errorf(ret_err, "idempotent: expected true or false");
	if ((has_timeout = get_bounded(decl, "timeout_ms", 1, TIMEOUT_MAX_MS, &timeout, ret_err)) < 0 ||
	    (has_attempts = get_bounded(decl, "max_attempts", 1, ATTEMPTS_MAX, &attempts, ret_err)) < 0 ||
	    (has_conc = get_bounded(decl, "concurrency", 0, CONCURRENCY_MAX, &conc, ret_err)) < 0)
		return -EINVAL;

	const struct json *schema = json_get(decl, "input_schema");
	if (schema && schema->type != JSON_OBJECT)
		return set_errorf(ret_err, "input_schema: expected an object");
	const struct json *props = json_get(schema, "properties");

	cmd = xcalloc(1, sizeof(*cmd));
	cmd->sandbox = SANDBOX_TOOL_UNSET;
	cmd->run_as_peer = -1;
	const struct json *sb = json_get(decl, "sandbox");
	if (sb && (r = sandbox_tool_from_json(sb, &cmd->sandbox, ret_err)) < 0)
		return r;
	const struct json *run_as = json_get(decl, "run_as");
	if (run_as && (r = sandbox_run_as_from_json(run_as, "run_as", &cmd->run_as_peer, ret_err)) < 0)
		return r;
	const struct json *opts_ok = json_get(decl, "options_allowed");
	if (opts_ok && opts_ok->type != JSON_BOOL)
		return set_errorf(ret_err, "options_allowed: expected true or false");
	cmd->options_allowed = json_is_true(opts_ok);
	if ((r = ok_exit_from_json(json_get(decl, "ok_exit_codes"), cmd->ok_exit, ret_err)) < 0)
		return r;

	const struct json *argv = json_get(decl, "argv");
	if (!argv)
		return set_errorf(ret_err, "argv: missing");
	if (argv->type != JSON_ARRAY || argv->u.arr.n == 0)
		return set_errorf(ret_err, "argv: expected a non-empty array of strings");
	if (argv->u.arr.n > ARGV_MAX)
		return set_errorf(ret_err, "argv: more than %d elements", ARGV_MAX);
	cmd->argv = xcalloc(argv->u.arr.n, sizeof(*cmd->argv));
	bool after_dashes = false;
	for (size_t i = 0; i < argv->u.arr.n; i++) {
		cmd->argc++;
		if ((r = parse_element(argv->u.arr.items[i], i, props, &cmd->argv[i], ret_err)) < 0)
			return r;
		cmd->argv[i].may_be_option = after_dashes;
		if (str_eq(json_str(argv->u.arr.items[i]), "--"))
			after_dashes = true;
	}
	cmd->program = xstrdup(json_str(argv->u.arr.items[0]));

	const struct json *cwd = json_get(decl, "cwd");
	if (cwd) {
		if (cwd->type != JSON_STRING || cwd->u.str.len == 0 || strlen(cwd->u.str.s) != cwd->u.str.len)
			return set_errorf(ret_err, "cwd: expected a non-empty path");
		cmd->cwd = xstrdup(cwd->u.str.s);
	}
	if ((r = parse_env(json_get(decl, "env"), cmd, ret_err)) < 0)
		return r;

	const struct json *out = json_get(decl, "stdout");
	const char *out_key = "stdout";
	if (!out) {
		out = json_get(decl, "output");
		out_key = "output";
	}
	if (out) {
		const char *mode = json_str(out);
		if (!str_eq(mode, "text") && !str_eq(mode, "json"))
			return set_errorf(ret_err, "%s: expected \"text\" or \"json\"", out_key);
		cmd->stdout_json = str_eq(mode, "json");
	}

	struct buf text = {0};
	if (schema) {
		struct jgen *g = jgen_new(&text);
		jgen_value(g, schema);
		jgen_free(g);
	} else {
		buf_puts(&text, "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}");
	}
	_cleanup_free_ char *schema_text = buf_steal(&text);
	_cleanup_free_ char *err = NULL;
	struct tool *t = NULL;
	r = tool_new(&tool_kind_command, name->u.str.s, desc ? desc->u.str.s : "", schema_text, cmd, &t, &err);
	if (r < 0)
		return set_errorf(ret_err, "input_schema: %s", err ? err : "invalid schema");
	t->sandbox = &TAKE_PTR(cmd)->sandbox;

	t->side_effects = (enum side_effect)side;
	t->idempotent = json_is_true(idem);
	t->timeout_ms = has_timeout ? (uint32_t)timeout : tool_default_timeout(t->side_effects);
	if (has_attempts)
		t->max_attempts = (unsigned)attempts;
	if (has_conc)
		t->concurrency = (unsigned)conc;
	free(t->source);
	t->source = xstrdup(source_path ? source_path : "built-in");
	struct buf fp = {0};
	json_canonical(decl, &fp);
	free(t->fingerprint);
	t->fingerprint = buf_steal(&fp);
	*ret = t;
	return 0;
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
				tool_call_fail(c, TC_VALIDATION_ERROR,
					       "Invalid arguments for '%s': /%s: a value starting with '-' would be taken as an option of '%s'; give a value that does not start with '-' (for a file, prefix it with ./)",
					       c->tool->name, a->segs[k].text, cmd->program);
				buf_free(&b);
				strv_free(argv);
				return -EINVAL;
			}
			else if (memchr(buf_head(&b) + before, '\0', buf_size(&b) - before)) {
				tool_call_fail(c, TC_VALIDATION_ERROR,
					       "Invalid arguments for '%s': /%s: contains a NUL character, which a command line cannot carry",
					       c->tool->name, a->segs[k].text);
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

/* The end of stderr (or of stdout when stderr is empty), as ": tail". */
static char *failure_tail(const struct child_result *r)
{
	struct buf b = {0};
	enum child_stream s = r->out_len[CHILD_STDERR] ? CHILD_STDERR : CHILD_STDOUT;
	child_result_tail(r, s, TAIL_BYTES, &b);
	if (buf_size(&b) == 0) {
		buf_free(&b);
		return xstrdup("");
	}
	char *tail = xasprintf(": %s", buf_head(&b));
	buf_free(&b);
	return tail;
}

/* Success with stdout parsed as JSON. */
static void succeed_json(struct tool_call *c, const struct cmd *cmd, struct child_result *r)
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
	tool_call_succeed(c, child_result_text(r), buf_steal(&b), false);
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

	if (limit) {
		_cleanup_free_ char *tail = failure_tail(r);
		tool_call_fail(c, TC_EXECUTION_ERROR, "Command '%s' was stopped by %s of its sandbox%s",
			       cmd->program, limit, tail);
	} else if (r->signal) {
		_cleanup_free_ char *tail = failure_tail(r);
		child_signal_name(r->signal, sig);
		tool_call_fail_data(c, TC_EXECUTION_ERROR, failure_data(r, sig),
				    "Command '%s' was killed by signal %s%s", cmd->program, sig, tail);
	} else if (!exit_ok(cmd, r->exit_code)) {
		_cleanup_free_ char *tail = failure_tail(r);
		enum tc_kind kind = r->exit_code == EX_TEMPFAIL ? TC_TRANSIENT : TC_EXECUTION_ERROR;
		_cleanup_free_ char *note = sandbox_run_denial_note(child_call_sandbox(c), r->out[CHILD_STDERR],
								   r->out_len[CHILD_STDERR]);
		tool_call_fail_data(c, kind, failure_data(r, NULL),
				    "Command '%s' exited with status %d%s%s%s", cmd->program, r->exit_code, tail,
				    note ? "\n" : "", note ? note : "");
	} else if (cmd->stdout_json) {
		succeed_json(c, cmd, r);
	} else {
		tool_call_succeed(c, child_result_text(r), child_call_json(c, r, false), false);
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

	struct child_opts opts = {
		.path = NULL,		/* argv[0], searched in the child's PATH */
		.argv = argv,
		.envp = env,
		.cwd_fd = cwd_fd,	/* -1: the workspace's root */
	};
	const struct sandbox_config *sbc = c->env ? c->env->sandbox : NULL;
	struct sandbox_req req;
	sandbox_req_init(&req, sbc, c->tool->name, c->tool->side_effects == SIDE_NETWORK, &cmd->sandbox);
	if (as != c->ident)
		req.id = as;
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
