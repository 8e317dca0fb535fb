/* SPDX-License-Identifier: MIT */
/*
 * The server process of an MCP provider: spawned in its sandbox, its
 * stdout cut into lines handed to the protocol (a line too long is dropped
 * as it comes), its stderr logged with a budget and its last bytes kept for
 * the error when it fails to start, its exit failing what waits for it.
 * The instances a provider runs as each peer live here (made on a uid's
 * first call, stopped when idle), and the provider's references: the last
 * one stops every server.
 * What the messages mean, and what is written to its stdin, is
 * mcp_protocol.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/child/child.h"
#include "lib/files/identity.h"
#include "lib/base/loop.h"
#include "proto/base/strv.h"
#include "proto/json.h"
#include "proto/utf8.h"
#include "tools/mcp/mcp_internal.h"

#define STDERR_LINE_MAX 512		/* bytes of a stderr line logged */
#define STDERR_WINDOW_MS 10000
#define STDERR_WINDOW_LINES 20		/* lines logged per window */

/* --- its stderr ------------------------------------------------------------ */

/* Logs one line of stderr, within the budget of the window. */
static void stderr_log(struct mcp_provider *p, const char *s, size_t n)
{
	if (!p->on_log || n == 0)	/* empty lines are not worth a log line */
		return;
	uint64_t now = p->loop ? tc_now(p->loop) : mono_ms();
	if (now - p->err_window_ms >= STDERR_WINDOW_MS) {
		if (p->err_dropped) {
			char msg[96];
			snprintf(msg, sizeof(msg), "(%u more lines of stderr were not logged)", p->err_dropped);
			p->on_log(p->arg, p, false, msg);
		}
		p->err_window_ms = now;
		p->err_lines = 0;
		p->err_dropped = 0;
	}
	if (p->err_lines >= STDERR_WINDOW_LINES) {
		if (p->err_dropped++ == 0)
			p->on_log(p->arg, p, false, "(more lines of stderr within 10 s are not logged)");
		return;
	}
	p->err_lines++;
	struct buf clean = {0};
	utf8_sanitize(s, MIN(n, (size_t)STDERR_LINE_MAX), &clean);
	/* Control characters (a carriage return, escapes) could forge or
	 * garble log lines. */
	for (size_t i = 0; i < buf_size(&clean); i++)
		if ((unsigned char)clean.data[clean.off + i] < 0x20 && clean.data[clean.off + i] != '\t')
			clean.data[clean.off + i] = '?';
	if (n > STDERR_LINE_MAX)
		buf_puts(&clean, "...");
	p->on_log(p->arg, p, false, buf_head(&clean));
	buf_free(&clean);
}

/* Takes a chunk of stderr: its tail is kept, its lines logged. */
static void stderr_take(struct mcp_provider *p, const char *data, size_t n)
{
	if (n >= MCP_STDERR_TAIL) {
		memcpy(p->err_tail, data + n - MCP_STDERR_TAIL, MCP_STDERR_TAIL);
		p->err_tail_len = MCP_STDERR_TAIL;
	} else {
		size_t keep = MIN(p->err_tail_len, (size_t)MCP_STDERR_TAIL - n);
		memmove(p->err_tail, p->err_tail + p->err_tail_len - keep, keep);
		memcpy(p->err_tail + keep, data, n);
		p->err_tail_len = keep + n;
	}
	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t len = nl ? (size_t)(nl - data) : n;
		/* Only the start of a long line is held. */
		size_t held = buf_size(&p->err_line);
		size_t room = held <= STDERR_LINE_MAX ? STDERR_LINE_MAX + 1 - held : 0;
		buf_append(&p->err_line, data, MIN(len, room));
		if (!nl)
			break;
		stderr_log(p, buf_size(&p->err_line) ? buf_head(&p->err_line) : "", buf_size(&p->err_line));
		buf_clear(&p->err_line);
		data = nl + 1;
		n -= len + 1;
	}
}

/* Appends the last lines of stderr, as "\nLast lines of its stderr:\n...". */
static void stderr_tail(const struct mcp_provider *p, struct buf *out)
{
	const char *s = p->err_tail;
	size_t n = p->err_tail_len;
	while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		n--;
	if (p->err_tail_len == MCP_STDERR_TAIL) {
		/* Cut: start at a line. */
		const char *nl = memchr(s, '\n', n);
		if (nl && nl + 1 < s + n) {
			n -= (size_t)(nl + 1 - s);
			s = nl + 1;
		}
	}
	if (!n)
		return;
	buf_puts(out, "\nLast lines of its stderr:\n");
	utf8_sanitize(s, n, out);
}

/* --- its end ---------------------------------------------------------------- */

void mcp_provider_down(struct mcp_provider *p, const char *why)
{
	mcp_calls_fail(p, why);
	p->in_io = tc_io_free(p->in_io);
	if (p->in_fd >= 0) {
		close(p->in_fd);
		p->in_fd = -1;
	}
	if (p->child) {
		struct child *ch = TAKE_PTR(p->child);
		child_free(ch);
	}
	/* The server's whole tree goes with it. */
	p->run = sandbox_run_end(p->run);
	tc_timer_stop(p->import_timer);
	buf_clear(&p->out);
	buf_clear(&p->line);
	p->discarding = false;
	buf_clear(&p->err_line);
	p->initialized = false;
	mcp_imports_free(p->next_tools, p->n_next);
	p->next_tools = NULL;
	p->n_next = 0;
}

void mcp_import_failed(struct mcp_provider *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	struct buf b = {0};
	char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	buf_puts(&b, msg);
	free(msg);
	stderr_tail(p, &b);
	free(p->error);
	p->error = buf_steal(&b);
	free(p->last_error);
	p->last_error = xstrdup(p->error);
	p->state = MCP_FAILED;
	p->failed_ms = p->loop ? tc_now(p->loop) : mono_ms();
	mcp_provider_down(p, "failed to start");
	mcp_settle(p);
}

bool mcp_start_refused(const struct mcp_provider *p)
{
	if (p->state != MCP_FAILED || !p->failed_ms || p->child)
		return false;
	uint64_t now = p->loop ? tc_now(p->loop) : mono_ms();
	return now - p->failed_ms < p->retry_ms;
}

/* --- from the server -------------------------------------------------------- */

/* Reads the id of an answer from the start of its text, when it comes
 * first as servers write it ({"jsonrpc":"2.0","id":7,...}). */
static bool sniff_id(const char *s, size_t n, uint64_t *ret)
{
	const char *end = s + MIN(n, (size_t)256);
	const char *k = memmem(s, (size_t)(end - s), "\"id\"", 4);
	if (!k || memmem(s, (size_t)(k - s), "\"result\"", 8) || memmem(s, (size_t)(k - s), "\"error\"", 7))
		return false;
	const char *q = k + 4;
	while (q < end && (*q == ' ' || *q == ':'))
		q++;
	uint64_t v = 0;
	const char *digits = q;
	while (q < end && *q >= '0' && *q <= '9' && q - digits < 19)
		v = v * 10 + (uint64_t)(*q++ - '0');
	if (q == digits || q == end || (*q != ',' && *q != '}' && *q != ' '))
		return false;
	*ret = v;
	return true;
}

/*
 * A message longer than MCP_LINE_MAX is dropped as it comes (up to its
 * newline) instead of being held. The call it answers fails, without a
 * retry (it may have done its work); when that call cannot be told, every
 * call sent to the server fails so. The server is kept: the stream is in
 * step again after the newline.
 */
static void line_too_long(struct mcp_provider *p)
{
	uint64_t rid;
	bool known = sniff_id(buf_head(&p->line), buf_size(&p->line), &rid);
	buf_clear(&p->line);
	p->discarding = true;
	struct list *pos, *tmp;
	list_foreach_safe(pos, tmp, &p->sent) {
		struct mcp_call *mc = list_entry(pos, struct mcp_call, node);
		if (known && mc->id != rid)
			continue;
		tool_call_fail(mc->tc, TC_EXECUTION_ERROR,
			       "MCP server '%s' sent a message longer than %u MiB%s; it was not read",
			       p->name, MCP_LINE_MAX >> 20, known ? " as the answer" : ", and the call it answers "
			       "cannot be told, so every call in flight failed");
		mcp_call_end(mc);
	}
}

static void on_output(void *arg, enum child_stream s, const char *data, size_t n)
{
	struct mcp_provider *p = arg;
	if (s == CHILD_STDERR)
		stderr_take(p, data, n);
	if (s != CHILD_STDOUT)
		return;
	if (p->discarding) {
		const char *nl = memchr(data, '\n', n);
		if (!nl)
			return;
		p->discarding = false;
		n -= (size_t)(nl + 1 - data);
		data = nl + 1;
	}
	buf_append(&p->line, data, n);
	for (;;) {
		const char *head = buf_head(&p->line);
		const char *nl = memchr(head, '\n', buf_size(&p->line));
		if (!nl)
			break;
		size_t len = (size_t)(nl - head);
		/* Copy: handling a message may write to p->line (it does not,
		 * but the server may be restarted underneath). */
		_cleanup_free_ char *msg = xstrndup(head, len), *why = NULL;
		buf_consume(&p->line, len + 1);
		if (mcp_on_message(p, msg, len, &why) < 0)
			mcp_import_failed(p, "%s", why);
		if (!p->child)
			return;
	}
	if (buf_size(&p->line) > MCP_LINE_MAX)
		line_too_long(p);
}

/* The server closed its output: it cannot answer any more. It is stopped;
 * its exit fails what waits for it, and the next call starts it again. */
static void on_eof(void *arg, enum child_stream s)
{
	struct mcp_provider *p = arg;
	if (s == CHILD_STDOUT && p->child && child_running(p->child))
		child_terminate(p->child);
}

/*
 * Why a start failed, when its sandbox tells: a limit it hit (from how it
 * ended, its cgroup's events and its stderr), as ": it hit the memory
 * limit (64 MB)", and a refusal its stderr shows (network, a file), as a
 * line saying what the profile allows; NULL when neither.
 */
static char *start_refusal(struct mcp_provider *p, int exit_code, int sig)
{
	_cleanup_free_ char *limit = sandbox_run_limit_hit(p->run, exit_code, sig, p->err_tail, p->err_tail_len);
	_cleanup_free_ char *note = sandbox_run_denial_note(p->run, p->err_tail, p->err_tail_len);
	if (!limit && !note)
		return NULL;
	struct buf b = {0};
	if (limit)
		buf_printf(&b, ": it hit %s", limit);
	if (note)
		buf_printf(&b, "\n%s", note);
	return buf_steal(&b);
}

/* The server exited: while starting, the start failed; else its calls fail
 * as transient and the next call starts it again. */
static void on_child_done(void *arg, struct child *ch, struct child_result *r)
{
	struct mcp_provider *p = arg;
	char why[64];
	if (r->signal) {
		char sig[16];
		snprintf(why, sizeof(why), "was killed by %s", child_signal_name(r->signal, sig));
	} else {
		snprintf(why, sizeof(why), "exited with status %d", r->exit_code);
	}
	bool starting = p->state == MCP_STARTING;
	if (buf_size(&p->err_line))	/* a last line without its newline */
		stderr_log(p, buf_head(&p->err_line), buf_size(&p->err_line));
	_cleanup_free_ char *reason = starting ? start_refusal(p, r->exit_code, r->signal) : NULL;
	p->child = NULL;
	child_free(ch);
	p->run = sandbox_run_end(p->run);
	if (starting) {
		mcp_import_failed(p, "MCP server '%s' %s while starting%s", p->name, why, reason ? reason : "");
		return;
	}
	/* A crash: kept for admin/stats, with what it said last. */
	struct buf b = {0};
	buf_printf(&b, "MCP server '%s' %s", p->name, why);
	stderr_tail(p, &b);
	free(p->last_error);
	p->last_error = buf_steal(&b);
	if (p->parent) {
		free(p->parent->last_error);
		p->parent->last_error = xstrdup(p->last_error);
	}
	mcp_provider_down(p, why);
	p->state = MCP_IDLE;
}

static bool per_peer(const struct mcp_provider *p);

static void on_import_timeout(void *arg)
{
	struct mcp_provider *p = arg;
	/* A server that keeps running after a refusal (retrying, waiting)
	 * is told by what it printed. */
	_cleanup_free_ char *reason = start_refusal(p, 1, 0);
	mcp_import_failed(p, "MCP server '%s' did not list its tools within %d ms%s", p->name, MCP_IMPORT_MS,
			  reason ? reason : "");
}

void mcp_provider_start(struct mcp_provider *p)
{
	/* A provider run as each peer starts only as one (mcp_provider_start_for);
	 * one that failed to start is not tried again so soon. */
	if (p->child || !p->loop || per_peer(p) || mcp_start_refused(p))
		return;
	/* What a previous run said is not this run's. */
	p->err_tail_len = 0;
	p->refused = false;
	buf_clear(&p->err_line);
	char **env = child_env_new(p->tenv ? p->tenv->shell_env_allow : NULL);
	for (char **e = p->env_extra; *e; e++) {
		char *eq = strchr(*e, '=');
		char *name = xstrndup(*e, (size_t)(eq - *e));
		child_env_put(&env, name, eq + 1);
		free(name);
	}
	/* The server's sandbox: its own profile over the config's, the
	 * daemon's default workspace writable, as the daemon unless the file
	 * names a user. */
	const struct sandbox_config *sbc = p->tenv ? p->tenv->sandbox : NULL;
	if (sbc) {
		struct sandbox_req req;
		sandbox_req_init(&req, sbc, p->name, p->side_effects == SIDE_NETWORK,
				 p->parent ? &p->parent->sandbox : &p->sandbox);
		const char *ws[] = { p->cwd, NULL };
		static const struct identity daemon_id = { .change = false };
		req.workspaces = p->cwd ? ws : NULL;
		req.cwd = p->cwd;	/* where its note judges relative paths */
		req.lasting = true;
		req.id = p->run_as.change ? &p->run_as : &daemon_id;
		/* Its network lives as long as this instance. */
		struct sandbox_net_who who = { .loop = p->loop, .uid = req.id->change ? req.id->uid : geteuid(),
					       .tool = p->name };
		req.net_who = &who;
		_cleanup_free_ char *msg = NULL;
		if (sandbox_prepare(&req, &p->run, &msg) < 0) {
			child_env_free(env);
			mcp_import_failed(p, "MCP server '%s' cannot be started: %s", p->name, msg ? msg : "sandbox");
			return;
		}
		child_env_put_lines(&env, sandbox_run_net_env(p->run));
		if (sandbox_run_tmpdir(p->run))
			child_env_put(&env, "TMPDIR", sandbox_run_tmpdir(p->run));
		if (p->run_as.change && p->run_as.home)
			child_env_put(&env, "HOME", p->run_as.home);
	}
	if (p->run_mode == MCP_RUN_ROOT && geteuid() == 0 && p->on_log)
		p->on_log(p->arg, p, true, "starting as root (its file says \"run_as\": \"root\")");
	int cwd_fd = p->cwd ? open(p->cwd, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
	/* The program, checked and held: what runs is what was checked. */
	int exec_fd = -1;
	_cleanup_free_ char *why = NULL;
	uid_t run_uid = p->run && p->run_as.change ? p->run_as.uid : geteuid();
	int k = sandbox_program_open(p->argv[0], env, cwd_fd, run_uid, &exec_fd, &why);
	if (k == 0)
		k = sandbox_script_check(p->argv, cwd_fd, run_uid, &why);
	if (k < 0) {
		/* Nothing runs but what was checked. */
		if (cwd_fd >= 0)
			close(cwd_fd);
		if (exec_fd >= 0)
			close(exec_fd);
		child_env_free(env);
		p->run = sandbox_run_end(p->run);
		p->refused = why != NULL;
		if (why)
			mcp_import_failed(p, "MCP server '%s' cannot be started: it was refused: %s", p->name, why);
		else
			mcp_import_failed(p, "MCP server '%s' cannot be started (%s): %s", p->name, p->argv[0],
					  strerror(-k));
		return;
	}
	struct child_opts o = {
		.exec_fd = exec_fd,
		.sandbox = p->run,
		.argv = p->argv,
		.envp = env,
		.cwd_fd = cwd_fd,
		.output_cap = 64 * 1024,
		.on_output = on_output,
		.on_eof = on_eof,
		.on_done = on_child_done,
		.arg = p,
		.ret_stdin_fd = &p->in_fd,
	};
	int r = child_spawn(p->loop, &o, &p->child);
	if (cwd_fd >= 0)
		close(cwd_fd);
	if (exec_fd >= 0)
		close(exec_fd);
	child_env_free(env);
	if (r < 0) {
		const struct sandbox_child *sc = sandbox_run_child(p->run);
		p->child = NULL;
		if (sc && sc->failed)
			mcp_import_failed(p, "MCP server '%s' cannot be started: its sandbox could not be set up (%s): %s",
				      p->name, sc->failed, strerror(-r));
		else
			mcp_import_failed(p, "MCP server '%s' cannot be started (%s): %s", p->name, p->argv[0],
				      strerror(-r));
		p->run = sandbox_run_end(p->run);
		return;
	}
	free(p->error);
	p->error = NULL;
	if (p->spawns++)
		p->restarts++;
	p->state = MCP_STARTING;
	if (!p->import_timer)
		p->import_timer = tc_timer_new(p->loop, on_import_timeout, p);
	tc_timer_start(p->import_timer, MCP_IMPORT_MS);
	mcp_send_initialize(p);
}

/* --- one instance per peer ------------------------------------------------------ */

static bool per_peer(const struct mcp_provider *p)
{
	return !p->parent && p->run_mode == MCP_RUN_PEER && geteuid() == 0;
}

static void instance_free(struct mcp_provider *inst)
{
	inst->on_settled = NULL;
	inst->on_log = NULL;
	mcp_provider_down(inst, "the provider was removed");
	mcp_provider_free(inst);
}

/* Copies a list of imported tools. */
static struct mcp_import *imports_copy(const struct mcp_import *t, size_t n)
{
	struct mcp_import *c = xcalloc(n + 1, sizeof(*c));
	for (size_t i = 0; i < n; i++) {
		c[i] = t[i];
		c[i].name = xstrdup(t[i].name);
		c[i].description = xstrdup(t[i].description);
		c[i].schema = xstrdup(t[i].schema);
	}
	return c;
}

/*
 * An instance settled. Its first tool list (or one it gave when it said
 * its list changed) becomes the list of every peer, while the provider has
 * none yet; a failed start fails the provider too while it has none.
 */
static void instance_settled(void *arg, struct mcp_provider *inst)
{
	struct mcp_provider *p = inst->parent;
	if (inst->state == MCP_FAILED) {
		free(p->last_error);
		p->last_error = xstrdup(inst->error);
		/* Another uid's instance may still give the list: wait for it. */
		for (size_t i = 0; i < p->n_inst && !p->imported; i++)
			if (p->inst[i]->state == MCP_STARTING)
				return;
		free(p->error);
		p->error = xstrdup(inst->error);
		p->refused = inst->refused;
		p->state = MCP_FAILED;
		p->failed_ms = inst->failed_ms;
		mcp_settle(p);
		return;
	}
	mcp_instance_touch(inst);
	if (p->imported && !inst->relisted) {
		p->state = MCP_READY;
		return;
	}
	mcp_imports_free(p->tools, p->n_tools);
	p->tools = imports_copy(inst->tools, inst->n_tools);
	p->n_tools = inst->n_tools;
	buf_clear(&p->notes);
	if (buf_size(&inst->notes))
		buf_append(&p->notes, buf_head(&inst->notes), buf_size(&inst->notes));
	p->import_notes = buf_size(&p->notes);
	p->imported = true;
	p->state = MCP_READY;
	free(p->error);
	p->error = NULL;
	mcp_warn_unmatched(p);
	mcp_settle(p);
}

static void on_idle(void *arg)
{
	struct mcp_provider *inst = arg;
	if (!list_empty(&inst->queued) || !list_empty(&inst->sent) || !inst->child)
		return;
	mcp_provider_down(inst, "stopped");
	inst->state = MCP_IDLE;
}

/* Hands the instances what mcp_provider_setup() gave p. */
static void mcp_provider_instances_setup(struct mcp_provider *p)
{
	for (size_t i = 0; i < p->n_inst; i++) {
		mcp_provider_setup(p->inst[i], p->loop, p->tenv, p->cwd, instance_settled, p->arg);
		p->inst[i]->on_log = p->on_log;
		p->inst[i]->retry_ms = p->retry_ms;
	}
}

void mcp_provider_setup(struct mcp_provider *p, struct tc_loop *loop, const struct tool_env *env,
			const char *cwd, void (*on_settled)(void *arg, struct mcp_provider *p), void *arg)
{
	p->loop = loop;
	p->tenv = env;
	free(p->cwd);
	p->cwd = cwd ? xstrdup(cwd) : NULL;
	p->on_settled = on_settled;
	p->arg = arg;
	/* An instance stops its server when idle (mcp_instance_touch()). */
	if (p->parent && loop && !p->idle_timer)
		p->idle_timer = tc_timer_new(loop, on_idle, p);
	mcp_provider_instances_setup(p);
}

/* Makes p's instance for uid, running as id. */
static struct mcp_provider *instance_new(struct mcp_provider *p, const struct identity *id)
{
	struct mcp_provider *inst = xcalloc(1, sizeof(*inst));
	inst->refs = 1;
	inst->parent = p;
	inst->uid = id->uid;
	inst->name = xstrdup(p->name);
	inst->prefix = xstrdup(p->prefix);
	inst->source = xstrdup(p->source);
	inst->fingerprint = xstrdup(p->fingerprint);
	inst->argv = strv_dup((const char *const *)p->argv);
	inst->env_extra = strv_dup((const char *const *)p->env_extra);
	inst->side_effects = p->side_effects;
	inst->idle_s = p->idle_s;
	inst->retry_ms = p->retry_ms;
	inst->sandbox = SANDBOX_TOOL_UNSET;
	inst->run_mode = MCP_RUN_USER;
	identity_copy(&inst->run_as, id);
	identity_for_children(&inst->run_as, true);
	inst->in_fd = -1;
	list_init(&inst->queued);
	list_init(&inst->sent);
	mcp_provider_setup(inst, p->loop, p->tenv, p->cwd, instance_settled, p->arg);
	inst->on_log = p->on_log;
	p->inst = xreallocarray(p->inst, p->n_inst + 1, sizeof(*p->inst));
	p->inst[p->n_inst++] = inst;
	return inst;
}

struct mcp_provider *mcp_runner_for(struct mcp_provider *p, const struct identity *ident)
{
	if (!per_peer(p))
		return p;
	if (!ident)
		return NULL;
	for (size_t i = 0; i < p->n_inst; i++)
		if (p->inst[i]->uid == ident->uid)
			return p->inst[i];
	return instance_new(p, ident);
}

void mcp_provider_start_for(struct mcp_provider *p, const struct identity *ident)
{
	struct mcp_provider *r = mcp_runner_for(p, ident);
	if (!r)
		return;
	if (r == p) {
		mcp_provider_start(p);
		return;
	}
	mcp_provider_start(r);	/* not within the retry time of its own failure */
	if (r->state == MCP_STARTING && !p->imported)
		p->state = MCP_STARTING;
}

const char *mcp_provider_error_for(const struct mcp_provider *p, const struct identity *ident)
{
	if (!per_peer(p))
		return p->error;
	for (size_t i = 0; ident && i < p->n_inst; i++)
		if (p->inst[i]->uid == ident->uid)
			return p->inst[i]->state == MCP_FAILED ? p->inst[i]->error : NULL;
	return NULL;
}

bool mcp_provider_refused_for(const struct mcp_provider *p, const struct identity *ident)
{
	if (!per_peer(p))
		return p->refused;
	for (size_t i = 0; ident && i < p->n_inst; i++)
		if (p->inst[i]->uid == ident->uid)
			return p->inst[i]->state == MCP_FAILED && p->inst[i]->refused;
	return false;
}

bool mcp_provider_runs_as_root(const struct mcp_provider *p)
{
	return p->run_mode == MCP_RUN_ROOT;
}

/* --- its references --------------------------------------------------------- */

struct mcp_provider *mcp_provider_ref(struct mcp_provider *p)
{
	if (p)
		p->refs++;
	return p;
}

struct mcp_provider *mcp_provider_unref(struct mcp_provider *p)
{
	if (!p || --p->refs > 0)
		return NULL;
	p->on_settled = NULL;
	p->on_log = NULL;
	mcp_provider_down(p, "the provider was removed");
	for (size_t i = 0; i < p->n_inst; i++)
		instance_free(p->inst[i]);
	mcp_provider_free(p);
	return NULL;
}
