/* SPDX-License-Identifier: MIT */
/*
 * Call hooks: matching a hook's glob to a tool name, parsing what a
 * pre-call hook prints, and running the hooks of one call as children of
 * the loop, one after the other: the input written to the child's stdin
 * without blocking, its output kept up to a bound, a timer for its time
 * limit. A run is owned by the struct hooks that started it (so freeing the
 * dispatcher stops every hook) and frees itself when its last hook is done.
 * Each hook runs in its own sandbox run (profile "read-only", no network,
 * as the call's peer), ended with its child.
 */
#include "lib/hooks/hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <string.h>
#include <unistd.h>

#include "lib/child/child.h"
#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/files/identity.h"
#include "lib/sandbox/sandbox.h"
#include "proto/base/buf.h"
#include "proto/base/strv.h"
#include "proto/json.h"

#define HOOK_STDERR_TAIL 400		/* stderr bytes quoted when a hook fails */
#define HOOK_KILL_DELAY_MS 500		/* a hook that ignores SIGTERM */
#define HOOK_STDERR_CAP (64 * 1024)

struct hooks {
	struct tc_loop *loop;
	const struct hooks_config *cfg;
	struct list runs;		/* struct hook_run.node */
	unsigned n_post;		/* post-call runs in flight */
	hook_failed_fn failed;
	void *failed_arg;
	const struct sandbox_config *sandbox;	/* NULL: hooks run unconfined */
};

struct hook_run {
	struct hooks *h;
	struct list node;
	bool post;
	struct hook *hooks;		/* copies of the matching hooks */
	size_t n, i;
	/* pre_call: the call, to build each hook's input (arguments change
	 * when a hook rewrites them). */
	char *tool, *session_id, *side_effects, *call_id;
	char **workspaces;		/* the session's roots, the primary first */
	uid_t uid;
	pid_t pid;
	/* Whom the hooks run as (a copy: the session may go first). */
	struct identity run_as;
	bool has_run_as;
	const struct json *args;	/* the caller's, or v.args */
	struct hook_verdict v;
	hook_pre_done_fn done;
	void *arg;
	bool finishing;			/* the timer delivers v */
	/* post_call: one input for every hook. */
	struct buf post_input;
	/* The hook running now, and its sandbox (or NULL). */
	struct child *ch;
	struct sandbox_run *run;
	int in_fd;
	struct tc_io *in_io;
	struct buf in;
	size_t in_off;
	struct tc_timer *timer;
	bool timed_out;
};

/* --- config, matching, decisions ---------------------------------------- */

void hooks_config_clear(struct hooks_config *c)
{
	for (size_t i = 0; i < c->n_pre; i++) {
		free(c->pre[i].match);
		strv_free(c->pre[i].argv);
	}
	for (size_t i = 0; i < c->n_post; i++) {
		free(c->post[i].match);
		strv_free(c->post[i].argv);
	}
	free(c->pre);
	free(c->post);
	*c = (struct hooks_config){0};
}

bool hook_glob_match(const char *pattern, const char *name)
{
	return fnmatch(pattern, name, FNM_NOESCAPE) == 0;
}

void hook_verdict_clear(struct hook_verdict *v)
{
	free(v->message);
	json_doc_unref(v->args_doc);
	free(v->rewrote);
	*v = (struct hook_verdict){0};
}

static bool all_space(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(" \t\r\n", s[i]) || !s[i])
			return false;
	return true;
}

static int verdict_error(char **ret_error, const char *msg)
{
	*ret_error = xstrdup(msg);
	return -EINVAL;
}

/* Parses what a pre-call hook printed. */
int hook_parse_verdict(const char *text, size_t len, struct hook_verdict *ret, char **ret_error)
{
	*ret = (struct hook_verdict){0};
	if (all_space(text, len))
		return 0;
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(text, len, 0, 64, &doc, &err) < 0) {
		*ret_error = xasprintf("not JSON: %s at byte %zu", err.msg, err.offset);
		return -EINVAL;
	}
	_cleanup_(hook_verdict_clear) struct hook_verdict v = { .args_doc = doc };
	const struct json *root = json_doc_root(doc);
	if (root->type != JSON_OBJECT)
		return verdict_error(ret_error, "not a JSON object");
	const struct json *decision = NULL, *reason = NULL;
	for (size_t i = 0; i < root->u.obj.n; i++) {
		const struct json_member *m = &root->u.obj.members[i];
		if (str_eq(m->key, "decision") && m->key_len == 8)
			decision = m->value;
		else if (str_eq(m->key, "reason") && m->key_len == 6)
			reason = m->value;
		else if (str_eq(m->key, "arguments") && m->key_len == 9)
			v.args = m->value;
		else
			return verdict_error(ret_error, "unknown member (expected decision, reason, arguments)");
	}
	const char *d = json_str(decision);
	if (!d || strlen(d) != decision->u.str.len)
		return verdict_error(ret_error, "\"decision\" must be \"allow\", \"deny\" or \"prompt\"");
	if (str_eq(d, "allow"))
		v.decision = HOOK_ALLOW;
	else if (str_eq(d, "deny"))
		v.decision = HOOK_DENY;
	else if (str_eq(d, "prompt"))
		v.decision = HOOK_PROMPT;
	else
		return verdict_error(ret_error, "\"decision\" must be \"allow\", \"deny\" or \"prompt\"");
	if (reason) {
		if (reason->type != JSON_STRING)
			return verdict_error(ret_error, "\"reason\" must be a string");
		v.message = xstrndup(reason->u.str.s, reason->u.str.len);
	}
	if (v.args && v.args->type != JSON_OBJECT)
		return verdict_error(ret_error, "\"arguments\" must be an object");
	if (!v.args)
		v.args_doc = json_doc_unref(v.args_doc);
	*ret = v;
	v = (struct hook_verdict){0};
	return 0;
}

/* --- runs ---------------------------------------------------------------- */

static void run_next(struct hook_run *r);
static void on_input_writable(void *arg, int revents);

/* "pre_call hook 2 (/bin/sh /etc/toolcalld/policy.sh)": how messages name
 * a hook (its command, cut after 200 bytes). */
static char *hook_label(const struct hook_run *r)
{
	struct buf b = {0};
	buf_printf(&b, "%s hook %zu (", r->post ? "post_call" : "pre_call", r->i + 1);
	size_t start = buf_size(&b);
	for (char **a = r->hooks[r->i].argv; *a && buf_size(&b) - start < 200; a++)
		buf_printf(&b, "%s%.200s", a == r->hooks[r->i].argv ? "" : " ", *a);
	buf_putc(&b, ')');
	return buf_steal(&b);
}

/* Stops what the running hook holds: its stdin and its timer. */
static void run_stop_io(struct hook_run *r)
{
	r->in_io = tc_io_free(r->in_io);
	if (r->in_fd >= 0)
		close(TAKE_FD(r->in_fd));
	buf_free(&r->in);
	r->in_off = 0;
	tc_timer_stop(r->timer);
}

static void run_free(struct hook_run *r)
{
	list_remove(&r->node);
	if (r->post)
		r->h->n_post--;
	run_stop_io(r);
	r->ch = child_free(r->ch);
	r->run = sandbox_run_end(r->run);
	tc_timer_free(r->timer);
	for (size_t i = 0; i < r->n; i++) {
		free(r->hooks[i].match);
		strv_free(r->hooks[i].argv);
	}
	free(r->hooks);
	free(r->tool);
	free(r->session_id);
	strv_free(r->workspaces);
	free(r->side_effects);
	free(r->call_id);
	hook_verdict_clear(&r->v);
	buf_free(&r->post_input);
	identity_clear(&r->run_as);
	free(r);
}

struct hook_run *hook_run_cancel(struct hook_run *r)
{
	if (r)
		run_free(r);
	return NULL;
}

/* Hands the verdict to the caller, from the timer (never from inside
 * hooks_pre_start, nor from inside a child's callback). */
static void pre_deliver(struct hook_run *r)
{
	struct hook_verdict v = r->v;
	hook_pre_done_fn done = r->done;
	void *arg = r->arg;
	r->v = (struct hook_verdict){0};
	run_free(r);
	done(arg, &v);
	hook_verdict_clear(&v);
}

static void pre_finish(struct hook_run *r)
{
	r->finishing = true;
	tc_timer_start(r->timer, 0);
}

/* The running hook failed: a pre-call run denies the call, a post-call run
 * reports it and goes on. */
static void run_failed(struct hook_run *r, const char *what)
{
	_cleanup_free_ char *label = hook_label(r);
	if (r->post) {
		_cleanup_free_ char *msg = xasprintf("%s %s", label, what);
		if (r->h->failed)
			r->h->failed(r->h->failed_arg, r->tool, msg);
		r->i++;
		run_next(r);
		return;
	}
	hook_verdict_clear(&r->v);
	r->v.decision = HOOK_DENY;
	r->v.message = xasprintf("%s %s; the call was denied", label, what);
	pre_finish(r);
}

static void on_timer(void *arg)
{
	struct hook_run *r = arg;
	if (r->finishing) {
		pre_deliver(r);
		return;
	}
	if (r->ch) {
		r->timed_out = true;
		child_terminate(r->ch);
	}
}

/* Writes what the hook's stdin still needs, without blocking; a hook that
 * closes its stdin early (it did not need it) is not an error. */
static void write_input(struct hook_run *r)
{
	while (r->in_off < buf_size(&r->in)) {
		ssize_t n = write(r->in_fd, buf_head(&r->in) + r->in_off, buf_size(&r->in) - r->in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (!r->in_io)
				r->in_io = tc_io_new(r->h->loop, r->in_fd, TC_IO_WRITE,
						     on_input_writable, r);
			tc_io_start(r->in_io);
			return;
		}
		if (n <= 0)
			break;
		r->in_off += (size_t)n;
	}
	r->in_io = tc_io_free(r->in_io);
	if (r->in_fd >= 0)
		close(TAKE_FD(r->in_fd));
}

static void on_input_writable(void *arg, int revents)
{
	(void)revents;
	write_input(arg);
}

/* Writes the call as hooks see it (inside an open object). */
static void write_call(struct jgen *g, const struct hook_input *in)
{
	jgen_kv_str(g, "tool", in->tool);
	jgen_key(g, "arguments");
	jgen_value(g, in->arguments);
	jgen_kv_str(g, "sessionId", in->session_id);
	jgen_key(g, "peer");
	jgen_obj_open(g);
	jgen_kv_int(g, "uid", in->uid);
	jgen_kv_int(g, "pid", in->pid);
	jgen_obj_close(g);
	jgen_kv_str(g, "workspace", in->workspaces ? in->workspaces[0] : NULL);
	jgen_key(g, "workspaces");
	jgen_arr_open(g);
	for (const char *const *w = in->workspaces; w && *w; w++)
		jgen_str(g, *w);
	jgen_arr_close(g);
	jgen_kv_str(g, "sideEffects", in->side_effects);
	jgen_kv_str(g, "callId", in->call_id);
}

/* The input of the pre-call hook that runs next. */
static void pre_input(struct hook_run *r, struct buf *out)
{
	struct hook_input in = {
		.tool = r->tool, .arguments = r->args, .session_id = r->session_id, .uid = r->uid,
		.pid = r->pid, .workspaces = (const char *const *)r->workspaces, .side_effects = r->side_effects,
		.call_id = r->call_id,
	};
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	jgen_kv_str(g, "hook", "pre_call");
	write_call(g, &in);
	jgen_obj_close(g);
	jgen_free(g);
	buf_putc(out, '\n');
}

/* Takes the result of the hook that ended, then runs the next one. */
static void on_child_done(void *arg, struct child *ch, struct child_result *res)
{
	struct hook_run *r = arg;
	(void)ch;
	run_stop_io(r);
	char sig[16];
	_cleanup_free_ char *what = NULL;
	if (r->timed_out) {
		what = xasprintf("timed out after %llu ms", (unsigned long long)r->hooks[r->i].timeout_ms);
	} else if (res->signal) {
		what = xasprintf("was killed by %s", child_signal_name(res->signal, sig));
	} else if (res->exit_code != 0) {
		struct buf b = {0};
		buf_printf(&b, "exited with status %d", res->exit_code);
		/* Not for post_call: its failure is told to every subscriber,
		 * and a hook's stderr may echo the call. */
		if (res->out_len[CHILD_STDERR] && !r->post) {
			buf_puts(&b, ": ");
			child_result_tail(res, CHILD_STDERR, HOOK_STDERR_TAIL, &b);
		}
		what = buf_steal(&b);
	} else if (res->truncated[CHILD_STDOUT]) {
		what = xasprintf("printed more than %d bytes", HOOK_OUTPUT_MAX);
	}
	struct hook_verdict v = {0};
	if (!what && !r->post) {
		_cleanup_free_ char *err = NULL;
		if (hook_parse_verdict(res->out[CHILD_STDOUT], res->out_len[CHILD_STDOUT], &v, &err) < 0)
			what = xasprintf("printed something that is not a decision (%s)", err);
	}
	r->ch = child_free(r->ch);
	r->run = sandbox_run_end(r->run);
	if (what) {
		run_failed(r, what);
		return;
	}
	if (!r->post) {
		_cleanup_free_ char *label = hook_label(r);
		if (v.decision == HOOK_DENY) {
			hook_verdict_clear(&r->v);
			r->v.decision = HOOK_DENY;
			r->v.message = v.message ? xasprintf("Denied by %s: %s", label, v.message)
						 : xasprintf("Denied by %s", label);
			hook_verdict_clear(&v);
			pre_finish(r);
			return;
		}
		/* prompt sticks: a later allow does not undo an earlier prompt. */
		if (v.decision != HOOK_NONE && r->v.decision != HOOK_PROMPT)
			r->v.decision = v.decision;
		if (v.args_doc) {
			json_doc_unref(r->v.args_doc);
			r->v.args_doc = TAKE_PTR(v.args_doc);
			r->v.args = r->args = v.args;
			free(r->v.rewrote);
			r->v.rewrote = TAKE_PTR(label);
		}
		hook_verdict_clear(&v);
	}
	r->i++;
	run_next(r);
}

/*
 * Prepares the sandbox of the hook at r->i in r->run: profile "read-only"
 * and no network whatever the config's default, the session's workspace,
 * the peer's identity; the config's limits and deny_read. No sandbox
 * config (tests of the module): none, the hook runs unconfined. Returns 0,
 * or a negative errno with *ret_msg saying what failed (-EPERM: the kernel
 * lacks what sandbox.require asks for).
 */
static int hook_sandbox(struct hook_run *r, char **ret_msg)
{
	if (!r->h->sandbox)
		return 0;
	struct sandbox_req req;
	sandbox_req_init(&req, r->h->sandbox, NULL, false, NULL);
	req.profile = SANDBOX_READ_ONLY;
	req.network = req.net_proxy = false;
	req.write_extra = NULL;
	req.workspaces = (const char *const *)r->workspaces;
	req.id = r->has_run_as ? &r->run_as : NULL;
	req.call_name = "hook";
	return sandbox_prepare(&req, &r->run, ret_msg);
}

/* The environment of a hook: which list it is in, its sandbox's TMPDIR,
 * and HOME the home of whom it runs as, when that is not the daemon. */
static char **hook_env(const struct hook_run *r)
{
	char **env = child_env_new(NULL);
	child_env_put(&env, "TOOLCALLD_HOOK", r->post ? "post_call" : "pre_call");
	if (sandbox_run_tmpdir(r->run))
		child_env_put(&env, "TMPDIR", sandbox_run_tmpdir(r->run));
	if (r->has_run_as && r->run_as.change && r->run_as.home)
		child_env_put(&env, "HOME", r->run_as.home);
	return env;
}

/* Builds the spawn options of one hook: the one place where a hook's
 * process is described (its sandbox prepared by hook_sandbox()). */
static void hook_spawn_opts(struct hook_run *r, char *const *env, int cwd_fd, struct child_opts *o)
{
	*o = (struct child_opts){
		.argv = r->hooks[r->i].argv,
		.envp = env,
		.cwd_fd = cwd_fd,
		.output_cap = HOOK_OUTPUT_MAX,
		.kill_delay_ms = HOOK_KILL_DELAY_MS,
		.drain_ms = 200,
		.on_done = on_child_done,
		.arg = r,
		.ret_stdin_fd = &r->in_fd,
		.sandbox = r->run,
	};
}

/* Starts the hook at r->i, or ends the run when none is left. */
static void run_next(struct hook_run *r)
{
	if (r->i >= r->n) {
		if (r->post)
			run_free(r);
		else
			pre_finish(r);
		return;
	}
	r->timed_out = false;
	if (r->post)
		buf_append(&r->in, buf_head(&r->post_input), buf_size(&r->post_input));
	else
		pre_input(r, &r->in);

	_cleanup_free_ char *msg = NULL;
	int k = hook_sandbox(r, &msg);
	if (k < 0) {
		buf_free(&r->in);
		_cleanup_free_ char *what = xasprintf("could not start in its sandbox: %s",
						      msg ? msg : strerror(-k));
		run_failed(r, what);
		return;
	}
	_cleanup_(strv_freep) char **env = hook_env(r);
	_cleanup_close_ int cwd_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	/* The script, checked and held: what runs is what was checked. */
	_cleanup_close_ int exec_fd = -1;
	_cleanup_free_ char *why = NULL;
	uid_t run_uid = r->run && r->has_run_as && r->run_as.change ? r->run_as.uid : geteuid();
	k = sandbox_program_open(r->hooks[r->i].argv[0], env, cwd_fd, run_uid, &exec_fd, &why);
	if (k == 0)
		k = sandbox_script_check(r->hooks[r->i].argv, cwd_fd, run_uid, &why);
	if (k < 0) {
		/* Nothing runs but what was checked. */
		buf_free(&r->in);
		r->run = sandbox_run_end(r->run);
		_cleanup_free_ char *what = why ? xasprintf("was refused: %s", why)
					    : xasprintf("could not start: %s", strerror(-k));
		run_failed(r, what);
		return;
	}
	struct child_opts o;
	hook_spawn_opts(r, env, cwd_fd, &o);
	o.exec_fd = exec_fd;
	k = child_spawn(r->h->loop, &o, &r->ch);
	if (k < 0) {
		buf_free(&r->in);
		r->in_fd = -1;
		const struct sandbox_child *sc = sandbox_run_child(r->run);
		_cleanup_free_ char *what = sc && sc->failed
			? xasprintf("could not start: its sandbox could not be set up (%s): %s", sc->failed,
				    strerror(-k))
			: xasprintf("could not start: %s", strerror(-k));
		r->run = sandbox_run_end(r->run);
		run_failed(r, what);
		return;
	}
	tc_timer_start(r->timer, r->hooks[r->i].timeout_ms);
	write_input(r);
}

/* A run with copies of the hooks of list that match tool; NULL when none. */
static struct hook_run *run_new(struct hooks *h, const struct hook *list, size_t n, const char *tool,
				bool post)
{
	size_t matching = 0;
	for (size_t i = 0; i < n; i++)
		matching += hook_glob_match(list[i].match, tool);
	if (!matching)
		return NULL;
	struct hook_run *r = xcalloc(1, sizeof(*r));
	r->h = h;
	r->post = post;
	r->in_fd = -1;
	r->hooks = xcalloc(matching, sizeof(*r->hooks));
	for (size_t i = 0; i < n; i++) {
		if (!hook_glob_match(list[i].match, tool))
			continue;
		struct hook *c = &r->hooks[r->n++];
		size_t argc = 0;
		while (list[i].argv[argc])
			argc++;
		c->match = xstrdup(list[i].match);
		c->argv = xcalloc(argc + 1, sizeof(char *));
		for (size_t j = 0; j < argc; j++)
			c->argv[j] = xstrdup(list[i].argv[j]);
		c->timeout_ms = list[i].timeout_ms ? list[i].timeout_ms : HOOK_TIMEOUT_DEFAULT_MS;
	}
	r->timer = tc_timer_new(h->loop, on_timer, r);
	r->tool = xstrdup(tool);
	list_insert_tail(&h->runs, &r->node);
	return r;
}

static char *strdup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

/* Keeps a copy of whom the run's hooks run as (NULL: the daemon). */
static void run_keep_identity(struct hook_run *r, const struct identity *id)
{
	if (!id)
		return;
	r->has_run_as = true;
	identity_copy(&r->run_as, id);
}

struct hook_run *hooks_pre_start(struct hooks *h, const struct hook_input *in,
				 hook_pre_done_fn done, void *arg)
{
	if (!h->cfg)
		return NULL;
	struct hook_run *r = run_new(h, h->cfg->pre, h->cfg->n_pre, in->tool, false);
	if (!r)
		return NULL;
	r->session_id = strdup_or_null(in->session_id);
	r->workspaces = strv_dup(in->workspaces);
	r->side_effects = strdup_or_null(in->side_effects);
	r->call_id = strdup_or_null(in->call_id);
	r->uid = in->uid;
	r->pid = in->pid;
	run_keep_identity(r, in->peer);
	r->args = in->arguments;
	r->done = done;
	r->arg = arg;
	run_next(r);
	return r;
}

void hooks_post_start(struct hooks *h, const struct hook_input *in, const struct hook_outcome *o)
{
	if (!h->cfg)
		return;
	struct hook_run *r = run_new(h, h->cfg->post, h->cfg->n_post, in->tool, true);
	if (!r)
		return;
	/* Nothing waits for them, so nothing else holds their number down. */
	if (h->n_post >= HOOKS_POST_RUNNING_MAX) {
		if (h->failed)
			h->failed(h->failed_arg, in->tool, "post_call hooks skipped: too many are running");
		r->post = false;	/* not counted yet */
		run_free(r);
		return;
	}
	h->n_post++;
	r->uid = in->uid;
	r->workspaces = strv_dup(in->workspaces);
	run_keep_identity(r, in->peer);
	struct jgen *g = jgen_new(&r->post_input);
	jgen_obj_open(g);
	jgen_kv_str(g, "hook", "post_call");
	write_call(g, in);
	jgen_key(g, "outcome");
	jgen_obj_open(g);
	jgen_kv_str(g, "kind", o->kind);
	jgen_kv_bool(g, "isError", o->is_error);
	jgen_kv_int(g, "durationMs", (int64_t)o->duration_ms);
	jgen_kv_int(g, "attempts", o->attempts);
	if (o->text) {
		size_t n = strlen(o->text);
		bool cut = n > HOOK_POST_TEXT_MAX;
		if (cut) {
			n = HOOK_POST_TEXT_MAX;
			while (n > 0 && ((unsigned char)o->text[n] & 0xC0) == 0x80)
				n--;	/* cut on a character boundary */
		}
		jgen_key(g, "text");
		jgen_strn(g, o->text, n);
		jgen_kv_bool(g, "textTruncated", cut);
	}
	if (o->message)
		jgen_kv_str(g, "message", o->message);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	buf_putc(&r->post_input, '\n');
	run_next(r);
}

/* --- the set ------------------------------------------------------------- */

struct hooks *hooks_new(struct tc_loop *loop)
{
	struct hooks *h = xcalloc(1, sizeof(*h));
	h->loop = loop;
	list_init(&h->runs);
	return h;
}

struct hooks *hooks_free(struct hooks *h)
{
	if (!h)
		return NULL;
	while (!list_empty(&h->runs))
		run_free(list_first(&h->runs, struct hook_run, node));
	free(h);
	return NULL;
}

void hooks_set_config(struct hooks *h, const struct hooks_config *c)
{
	h->cfg = c;
}

void hooks_set_sandbox(struct hooks *h, const struct sandbox_config *cfg)
{
	h->sandbox = cfg;
}

void hooks_set_failed_cb(struct hooks *h, hook_failed_fn fn, void *arg)
{
	h->failed = fn;
	h->failed_arg = arg;
}
