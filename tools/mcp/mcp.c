/* SPDX-License-Identifier: MIT */
/*
 * MCP providers: a stdio MCP server as a source of tools. This file holds
 * the declaration (the tool file, with its overrides per imported tool),
 * the provider's state and what it tells of itself; the protocol with the
 * server is in mcp_protocol.c, the server process and the provider's
 * references in mcp_proc.c, the tools it offers in mcp_tools.c.
 */
#include "tools/mcp/mcp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/child/child.h"
#include "lib/files/identity.h"
#include "lib/base/loop.h"
#include "lib/policy/policy.h"
#include "proto/base/strv.h"
#include "proto/json.h"
#include "tools/mcp/mcp_internal.h"

void mcp_imports_free(struct mcp_import *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].name);
		free(t[i].description);
		free(t[i].schema);
	}
	free(t);
}

/* --- overrides per imported tool ------------------------------------------ */

static void overrides_free(struct mcp_override *ov, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(ov[i].pattern);
		free(ov[i].description);
	}
	free(ov);
}

/* Checks one entry of "tools"; errors name it ("tools.write_*.timeout_ms: ..."). */
static int override_from_json(const char *key, const struct json *v, struct mcp_override *o, char **ret_err)
{
	static const char *const keys[] = { "side_effects", "idempotent", "timeout_ms", "max_attempts",
					     "concurrency", "description", NULL };
	*o = (struct mcp_override){ .side_effects = -1, .idempotent = -1, .concurrency = -1 };
	if (!*key || strlen(key) > TOOL_NAME_MAX)
		return set_errorf(ret_err, "tools: a key is a tool name or a glob of 1 to %d bytes", TOOL_NAME_MAX);
	if (!v || v->type != JSON_OBJECT)
		return set_errorf(ret_err, "tools.%s: must be an object", key);
	for (size_t i = 0; i < v->u.obj.n; i++) {
		bool known = false;
		for (const char *const *k = keys; *k; k++)
			known |= strcmp(*k, v->u.obj.members[i].key) == 0;
		if (!known)
			return set_errorf(ret_err, "tools.%s.%s: unknown key (known: side_effects, idempotent, "
					  "timeout_ms, max_attempts, concurrency, description)", key,
					  v->u.obj.members[i].key);
	}
	const struct json *x;
	int64_t n;
	if ((x = json_get(v, "side_effects")) &&
	    (o->side_effects = side_effect_from_name(json_str(x))) < 0)
		return set_errorf(ret_err, "tools.%s.side_effects: one of \"none\", \"read\", \"write\", "
				  "\"execute\", \"network\"", key);
	if ((x = json_get(v, "idempotent"))) {
		if (x->type != JSON_BOOL)
			return set_errorf(ret_err, "tools.%s.idempotent: must be true or false", key);
		o->idempotent = json_is_true(x);
	}
	if ((x = json_get(v, "timeout_ms"))) {
		if (!json_get_int(x, &n) || n < 1 || n > 86400000)
			return set_errorf(ret_err, "tools.%s.timeout_ms: an integer from 1 to 86400000", key);
		o->timeout_ms = (uint32_t)n;
	}
	if ((x = json_get(v, "max_attempts"))) {
		if (!json_get_int(x, &n) || n < 1 || n > 10)
			return set_errorf(ret_err, "tools.%s.max_attempts: an integer from 1 to 10", key);
		o->max_attempts = (unsigned)n;
	}
	if ((x = json_get(v, "concurrency"))) {
		if (!json_get_int(x, &n) || n < 0 || n > 4096)
			return set_errorf(ret_err, "tools.%s.concurrency: an integer from 0 to 4096", key);
		o->concurrency = (int)n;
	}
	if ((x = json_get(v, "description"))) {
		if (x->type != JSON_STRING || x->u.str.len > 4096 || strlen(x->u.str.s) != x->u.str.len)
			return set_errorf(ret_err, "tools.%s.description: a string of at most 4096 bytes", key);
		o->description = xstrdup(x->u.str.s);
	}
	o->pattern = xstrdup(key);
	o->glob = policy_key_is_glob(key);
	o->literal = (unsigned)policy_key_literal(key);
	return 0;
}

/* Reads the file's "tools": { "NAME or GLOB": { overrides } }. */
static int overrides_from_json(const struct json *v, struct mcp_override **ret, size_t *ret_n, char **ret_err)
{
	*ret = NULL;
	*ret_n = 0;
	if (!v)
		return 0;
	if (v->type != JSON_OBJECT || v->u.obj.n > MCP_OVERRIDES_MAX)
		return set_errorf(ret_err, "tools: an object of at most %d tool names or globs", MCP_OVERRIDES_MAX);
	struct mcp_override *ov = xcalloc(v->u.obj.n + 1, sizeof(*ov));
	for (size_t i = 0; i < v->u.obj.n; i++) {
		int r = override_from_json(v->u.obj.members[i].key, v->u.obj.members[i].value, &ov[i], ret_err);
		if (r < 0) {
			overrides_free(ov, i);
			return r;
		}
	}
	*ret = ov;
	*ret_n = v->u.obj.n;
	return 0;
}

const struct mcp_override *mcp_override_for(const struct mcp_provider *p, const char *remote)
{
	const struct mcp_override *best = NULL;
	for (size_t i = 0; i < p->n_overrides; i++) {
		const struct mcp_override *o = &p->overrides[i];
		if (!policy_key_matches(o->pattern, remote))
			continue;
		if (!o->glob)
			return o;
		if (!best || o->literal > best->literal)
			best = o;
	}
	return best;
}

char *mcp_provider_unmatched(const struct mcp_provider *p)
{
	if (!p->imported)
		return NULL;
	struct buf b = {0};
	for (size_t i = 0; i < p->n_overrides; i++) {
		bool hit = false;
		for (size_t k = 0; k < p->n_tools && !hit; k++)
			hit = policy_key_matches(p->overrides[i].pattern, p->tools[k].name);
		if (!hit)
			buf_printf(&b, "%s\"%s\"", buf_size(&b) ? ", " : "", p->overrides[i].pattern);
	}
	return buf_size(&b) ? buf_steal(&b) : (buf_free(&b), NULL);
}

/* --- the declaration ------------------------------------------------------- */

/*
 * Reads "run_as": "peer" (the default), "user:NAME", "root", or "daemon"
 * (the daemon's own user, refused when that is root: "root" must say so);
 * a bare user name is read as "user:NAME".
 */
static int run_as_from_json(const struct json *v, enum mcp_run_as *ret, struct identity *id, char **ret_err)
{
	*ret = MCP_RUN_PEER;
	*id = (struct identity){0};
	if (!v)
		return 0;
	const char *s = json_str(v);
	if (!s || !*s || strlen(s) != v->u.str.len || v->u.str.len > 256)
		return set_errorf(ret_err, "run_as: \"peer\", \"user:NAME\" or \"root\"");
	if (str_eq(s, "peer"))
		return 0;
	if (str_eq(s, "root")) {
		*ret = MCP_RUN_ROOT;
		return 0;
	}
	if (str_eq(s, "daemon")) {
		if (geteuid() == 0)
			return set_errorf(ret_err, "run_as: \"daemon\" would run it as root; say \"root\" to mean it, "
					  "or \"peer\" or \"user:NAME\"");
		*ret = MCP_RUN_DAEMON;
		return 0;
	}
	const char *user = str_has_prefix(s, "user:") ? s + 5 : s;
	if (!*user || identity_from_user(user, id) < 0)
		return set_errorf(ret_err, "run_as: no user '%s'", user);
	if (id->uid == 0) {
		identity_clear(id);
		return set_errorf(ret_err, "run_as: '%s' is root; say \"root\" to mean it", user);
	}
	*ret = MCP_RUN_USER;
	return 0;
}

int mcp_provider_from_json(const struct json *decl, const char *source, struct mcp_provider **ret,
			   char **ret_err)
{
	static const char *const keys[] = { "name", "kind", "command", "prefix", "side_effects",
					     "idempotent", "timeout_ms", "description", "env", "sandbox",
					     "run_as", "tools", "idle_s", "trust_annotations", NULL };
	for (size_t i = 0; i < decl->u.obj.n; i++) {
		bool known = false;
		for (const char *const *k = keys; *k; k++)
			known |= strcmp(*k, decl->u.obj.members[i].key) == 0;
		if (!known)
			return set_errorf(ret_err, "%s: unknown key (known: name, kind, command, prefix, side_effects, "
				   "idempotent, timeout_ms, description, env, sandbox, run_as, idle_s, "
				   "trust_annotations, tools)", decl->u.obj.members[i].key);
	}
	const char *name = json_str(json_get(decl, "name"));
	if (!name || !*name || strlen(name) > 128)
		return set_errorf(ret_err, "name: a non-empty string is required");
	const struct json *cmd = json_get(decl, "command");
	if (!cmd || cmd->type != JSON_ARRAY || cmd->u.arr.n == 0 || cmd->u.arr.n > 1024)
		return set_errorf(ret_err, "command: a non-empty array of strings is required");
	for (size_t i = 0; i < cmd->u.arr.n; i++) {
		const struct json *a = cmd->u.arr.items[i];
		if (a->type != JSON_STRING || strlen(a->u.str.s) != a->u.str.len || (i == 0 && !a->u.str.len))
			return set_errorf(ret_err, "command[%zu]: must be a string without NUL bytes", i);
	}
	const struct json *prefix = json_get(decl, "prefix");
	if (prefix && (prefix->type != JSON_STRING || prefix->u.str.len > 64))
		return set_errorf(ret_err, "prefix: must be a string of at most 64 bytes");
	const char *se = json_str(json_get(decl, "side_effects"));
	int side = side_effect_from_name(se);
	if (side < 0)
		return set_errorf(ret_err, "side_effects: one of \"none\", \"read\", \"write\", \"execute\", \"network\" is required");
	const struct json *idem = json_get(decl, "idempotent");
	if (idem && idem->type != JSON_BOOL)
		return set_errorf(ret_err, "idempotent: must be true or false");
	int64_t timeout = 0;
	const struct json *to = json_get(decl, "timeout_ms");
	if (to && (!json_get_int(to, &timeout) || timeout < 1 || timeout > 86400000))
		return set_errorf(ret_err, "timeout_ms: an integer from 1 to 86400000");
	int64_t idle_s = MCP_IDLE_S;
	const struct json *idle = json_get(decl, "idle_s");
	if (idle && (!json_get_int(idle, &idle_s) || idle_s < 1 || idle_s > 86400))
		return set_errorf(ret_err, "idle_s: an integer from 1 to 86400");
	const struct json *trust = json_get(decl, "trust_annotations");
	if (trust && trust->type != JSON_BOOL)
		return set_errorf(ret_err, "trust_annotations: must be true or false");
	const struct json *env = json_get(decl, "env");
	if (env && env->type != JSON_OBJECT)
		return set_errorf(ret_err, "env: must be an object of strings");
	for (size_t i = 0; env && i < env->u.obj.n; i++) {
		const struct json_member *m = &env->u.obj.members[i];
		if (m->value->type != JSON_STRING || !*m->key || strchr(m->key, '=') ||
		    strlen(m->value->u.str.s) != m->value->u.str.len)
			return set_errorf(ret_err, "env.%s: must be a string", m->key);
	}

	struct mcp_override *ov = NULL;
	size_t n_ov = 0;
	int r = overrides_from_json(json_get(decl, "tools"), &ov, &n_ov, ret_err);
	if (r < 0)
		return r;
	struct sandbox_tool sb = SANDBOX_TOOL_UNSET;
	const struct json *sbv = json_get(decl, "sandbox");
	if (sbv && sandbox_tool_from_json(sbv, &sb, ret_err) < 0) {
		overrides_free(ov, n_ov);
		return -EINVAL;
	}
	struct identity run_as = {0};
	enum mcp_run_as mode;
	r = run_as_from_json(json_get(decl, "run_as"), &mode, &run_as, ret_err);
	if (r < 0) {
		sandbox_tool_clear(&sb);
		overrides_free(ov, n_ov);
		return r;
	}

	struct mcp_provider *p = xcalloc(1, sizeof(*p));
	p->refs = 1;
	p->sandbox = sb;
	p->run_as = run_as;
	p->run_mode = mode;
	p->idle_s = (uint32_t)idle_s;
	p->trust_annotations = json_is_true(trust);
	p->retry_ms = MCP_RETRY_S * 1000;
	p->overrides = ov;
	p->n_overrides = n_ov;
	p->name = xstrdup(name);
	p->prefix = xstrdup(prefix ? prefix->u.str.s : "");
	p->source = xstrdup(source ? source : "");
	p->side_effects = (enum side_effect)side;
	p->idempotent = json_is_true(idem);
	p->timeout_ms = (uint32_t)timeout;
	p->argv = xcalloc(cmd->u.arr.n + 1, sizeof(char *));
	for (size_t i = 0; i < cmd->u.arr.n; i++)
		p->argv[i] = xstrdup(cmd->u.arr.items[i]->u.str.s);
	size_t ne = env ? env->u.obj.n : 0;
	p->env_extra = xcalloc(ne + 1, sizeof(char *));
	for (size_t i = 0; i < ne; i++)
		p->env_extra[i] = xasprintf("%s=%s", env->u.obj.members[i].key, env->u.obj.members[i].value->u.str.s);
	struct buf fp = {0};
	json_canonical(decl, &fp);
	p->fingerprint = buf_steal(&fp);
	p->in_fd = -1;
	list_init(&p->queued);
	list_init(&p->sent);
	*ret = p;
	return 0;
}

/* Frees what the declaration and the provider's state hold; its server is down. */
void mcp_provider_free(struct mcp_provider *p)
{
	tc_timer_free(p->import_timer);
	tc_timer_free(p->idle_timer);
	free(p->inst);
	mcp_imports_free(p->tools, p->n_tools);
	mcp_imports_free(p->next_tools, p->n_next);
	strv_free(p->argv);
	strv_free(p->env_extra);
	buf_free(&p->out);
	buf_free(&p->line);
	buf_free(&p->notes);
	free(p->name);
	free(p->prefix);
	free(p->source);
	free(p->fingerprint);
	free(p->error);
	free(p->last_error);
	free(p->cwd);
	buf_free(&p->err_line);
	overrides_free(p->overrides, p->n_overrides);
	sandbox_tool_clear(&p->sandbox);
	identity_clear(&p->run_as);
	free(p);
}

const char *mcp_provider_name(const struct mcp_provider *p) { return p->name; }
const char *mcp_provider_prefix(const struct mcp_provider *p) { return p->prefix; }
const char *mcp_provider_source(const struct mcp_provider *p) { return p->source; }
const char *mcp_provider_fingerprint(const struct mcp_provider *p) { return p->fingerprint; }
enum mcp_state mcp_provider_state(const struct mcp_provider *p) { return p->state; }
const char *mcp_provider_error(const struct mcp_provider *p) { return p->error; }
const char *mcp_provider_last_error(const struct mcp_provider *p) { return p->error ? p->error : p->last_error; }
unsigned mcp_provider_restarts(const struct mcp_provider *p)
{
	unsigned n = p->restarts;
	for (size_t i = 0; i < p->n_inst; i++)
		n += p->inst[i]->restarts;
	return n;
}

int mcp_provider_pid(const struct mcp_provider *p)
{
	if (p->child)
		return (int)child_pid(p->child);
	for (size_t i = 0; i < p->n_inst; i++)
		if (p->inst[i]->child)
			return (int)child_pid(p->inst[i]->child);
	return 0;
}

size_t mcp_provider_n_instances(const struct mcp_provider *p) { return p->n_inst; }
const struct mcp_provider *mcp_provider_instance(const struct mcp_provider *p, size_t i) { return p->inst[i]; }
unsigned mcp_provider_uid(const struct mcp_provider *inst) { return (unsigned)inst->uid; }
const char *mcp_provider_notes(const struct mcp_provider *p) { return buf_size(&p->notes) ? buf_head(&p->notes) : NULL; }

void mcp_note(struct mcp_provider *p, const char *fmt, ...)
{
	if (buf_size(&p->notes) > 4096)
		return;
	if (buf_size(&p->notes))
		buf_puts(&p->notes, "; ");
	va_list ap;
	va_start(ap, fmt);
	char *s = xvasprintf(fmt, ap);
	va_end(ap);
	buf_puts(&p->notes, s);
	free(s);
}

bool mcp_provider_imported(const struct mcp_provider *p) { return p->imported; }

void mcp_settle(struct mcp_provider *p)
{
	if (p->on_settled)
		p->on_settled(p->arg, p);
}

void mcp_provider_set_log(struct mcp_provider *p,
			  void (*on_log)(void *arg, struct mcp_provider *p, bool warning, const char *line))
{
	p->on_log = on_log;
	for (size_t i = 0; i < p->n_inst; i++)
		p->inst[i]->on_log = on_log;
}

void mcp_provider_set_retry(struct mcp_provider *p, uint32_t retry_s)
{
	/* A reload (the operator may have mended what failed) tries again. */
	p->retry_ms = retry_s * 1000;
	p->failed_ms = 0;
	for (size_t i = 0; i < p->n_inst; i++) {
		p->inst[i]->retry_ms = p->retry_ms;
		p->inst[i]->failed_ms = 0;
	}
}

