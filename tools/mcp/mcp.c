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

struct mcp_overrides {
	struct mcp_override *v;
	size_t n;
};

static void overrides_free(struct mcp_override *ov, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(ov[i].pattern);
		free(ov[i].description);
	}
	free(ov);
}

static const struct bind_field override_fields[] = {
	B_NAME(struct mcp_override, "side_effects", side_effects, side_effect_names),
	B_TRISTATE(struct mcp_override, "idempotent", idempotent),
	B_U32(struct mcp_override, "timeout_ms", timeout_ms, 1, TOOL_TIMEOUT_MAX_MS),
	B_U32(struct mcp_override, "max_attempts", max_attempts, 1, TOOL_ATTEMPTS_MAX),
	B_INT(struct mcp_override, "concurrency", concurrency, 0, 4096),
	B_STRING(struct mcp_override, "description", description, 0, 4096),
	{},
};

/* One "NAME or GLOB": { overrides } of "tools"; errors name it
 * ("tools.write_*.timeout_ms: ..."). */
static int override_entry(struct bind *b, const char *path, const struct json_member *m, size_t i, void *arg)
{
	struct mcp_override *o = &((struct mcp_override *)arg)[i];
	*o = (struct mcp_override){ .side_effects = -1, .idempotent = -1, .concurrency = -1 };
	o->pattern = xstrdup(m->key);
	o->glob = policy_key_is_glob(m->key);
	o->literal = (unsigned)policy_key_literal(m->key);
	if (!bind_key_plain(m) || m->key_len > TOOL_NAME_MAX)
		return bind_fail(b, bind_key_offset(b, m->value), path,
				 "a key is a tool name or a glob of 1 to %d bytes", TOOL_NAME_MAX);
	return bind_object(b, path, m->value, override_fields, bind_list_known, o);
}

/* The file's "tools": { "NAME or GLOB": { overrides } }. */
static int parse_overrides(struct bind *b, const char *path, const struct json *v, void *at)
{
	struct mcp_overrides *all = at;
	size_t n = v->type == JSON_OBJECT ? v->u.obj.n : 0;
	struct mcp_override *ov = xcalloc(n + 1, sizeof(*ov));
	int r = bind_members(b, path, v, MCP_OVERRIDES_MAX, override_entry, ov);
	if (r < 0) {
		overrides_free(ov, n);
		return r;
	}
	all->v = ov;
	all->n = n;
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

/* A declaration as the binder reads it. */
struct pdecl {
	char *name, *prefix, *description;
	int kind;
	char **argv, **env;
	int side;
	bool idempotent, trust_annotations;
	uint32_t timeout_ms, idle_s;
	struct sandbox_tool sandbox;
	enum mcp_run_as run_mode;
	struct identity run_as;
	struct mcp_overrides overrides;
};

/*
 * "run_as": "peer" (the default), "user:NAME", "root", or "daemon" (the
 * daemon's own user, refused when that is root: "root" must say so); a
 * bare user name is read as "user:NAME".
 */
static int parse_run_as(struct bind *b, const char *path, const struct json *v, void *at)
{
	struct pdecl *d = at;
	const char *s = json_str(v);
	if (!s || !*s || strlen(s) != v->u.str.len || v->u.str.len > 256)
		return bind_fail(b, v->off, path, "\"peer\", \"user:NAME\" or \"root\"");
	if (str_eq(s, "peer"))
		return 0;
	if (str_eq(s, "root")) {
		d->run_mode = MCP_RUN_ROOT;
		return 0;
	}
	if (str_eq(s, "daemon")) {
		if (geteuid() == 0)
			return bind_fail(b, v->off, path, "\"daemon\" would run it as root; say \"root\" to mean it, "
					 "or \"peer\" or \"user:NAME\"");
		d->run_mode = MCP_RUN_DAEMON;
		return 0;
	}
	const char *user = str_has_prefix(s, "user:") ? s + 5 : s;
	if (!*user || identity_from_user(user, &d->run_as) < 0)
		return bind_fail(b, v->off, path, "no user '%s'", user);
	if (d->run_as.uid == 0) {
		identity_clear(&d->run_as);
		return bind_fail(b, v->off, path, "'%s' is root; say \"root\" to mean it", user);
	}
	d->run_mode = MCP_RUN_USER;
	return 0;
}

/* "command": the server's argv. */
static int parse_command(struct bind *b, const char *path, const struct json *v, void *at)
{
	if (v->type != JSON_ARRAY || v->u.arr.n == 0 || v->u.arr.n > 1024)
		return bind_fail(b, v->off, path, "a non-empty array of strings is required");
	int r = 0;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct json *a = v->u.arr.items[i];
		if (a->type != JSON_STRING || strlen(a->u.str.s) != a->u.str.len || (i == 0 && !a->u.str.len)) {
			_cleanup_free_ char *k = bind_index_path(path, i);
			r = bind_fail(b, a->off, k, "must be a string without NUL bytes");
		}
	}
	if (r < 0)
		return r;
	char **argv = xcalloc(v->u.arr.n + 1, sizeof(char *));
	for (size_t i = 0; i < v->u.arr.n; i++)
		argv[i] = xstrdup(v->u.arr.items[i]->u.str.s);
	strv_free(*(char ***)at);
	*(char ***)at = argv;
	return 0;
}

/* "env": NAME: value strings for the server. */
static int parse_env(struct bind *b, const char *path, const struct json *v, void *at)
{
	char **env;
	size_t n;
	int r = bind_want_env(b, path, v, 0, &env, &n);
	if (r < 0)
		return r;
	strv_free(*(char ***)at);
	*(char ***)at = env;
	return 0;
}

static const char *const kind_names[] = { "mcp", NULL };

static const struct bind_field provider_fields[] = {
	{ .key = "name", .kind = BIND_STRING, .required = true, .off = offsetof(struct pdecl, name),
	  .min = 1, .max = 128 },
	B_NAME(struct pdecl, "kind", kind, kind_names),
	{ .key = "command", .kind = BIND_CUSTOM, .required = true, .off = offsetof(struct pdecl, argv),
	  .parse = parse_command },
	B_STRING(struct pdecl, "prefix", prefix, 0, 64),
	{ .key = "side_effects", .kind = BIND_NAME, .required = true, .off = offsetof(struct pdecl, side),
	  .names = side_effect_names, .size = sizeof(int) },
	B_BOOL(struct pdecl, "idempotent", idempotent),
	B_U32(struct pdecl, "timeout_ms", timeout_ms, 1, TOOL_TIMEOUT_MAX_MS),
	B_STRING(struct pdecl, "description", description, 0, 0),
	B_CUSTOM(struct pdecl, "env", env, parse_env),
	B_OBJECT(struct pdecl, "sandbox", sandbox, sandbox_tool_fields, NULL),
	B_CUSTOM(struct pdecl, "network", sandbox, sandbox_tool_network_bind),
	B_WHOLE("run_as", parse_run_as),
	B_CUSTOM(struct pdecl, "tools", overrides, parse_overrides),
	B_U32(struct pdecl, "idle_s", idle_s, 1, 86400),
	B_BOOL(struct pdecl, "trust_annotations", trust_annotations),
	{},
};

static void pdecl_clear(struct pdecl *d)
{
	free(d->name);
	free(d->prefix);
	free(d->description);
	strv_free(d->argv);
	strv_free(d->env);
	sandbox_tool_clear(&d->sandbox);
	identity_clear(&d->run_as);
	overrides_free(d->overrides.v, d->overrides.n);
}

int mcp_provider_bind(struct bind *b, const struct json *decl, const char *source, struct mcp_provider **ret)
{
	struct pdecl d = { .side = -1, .sandbox = SANDBOX_TOOL_UNSET, .run_mode = MCP_RUN_PEER,
			   .idle_s = MCP_IDLE_S };
	if (bind_object(b, NULL, decl, provider_fields, bind_list_known, &d) < 0) {
		pdecl_clear(&d);
		return -EINVAL;
	}

	struct mcp_provider *p = xcalloc(1, sizeof(*p));
	p->refs = 1;
	p->sandbox = d.sandbox;
	p->run_as = d.run_as;
	p->run_mode = d.run_mode;
	p->idle_s = d.idle_s;
	p->trust_annotations = d.trust_annotations;
	p->retry_ms = MCP_RETRY_S * 1000;
	p->overrides = d.overrides.v;
	p->n_overrides = d.overrides.n;
	p->name = d.name;
	p->prefix = d.prefix ? d.prefix : xstrdup("");
	p->source = xstrdup(source ? source : "");
	p->side_effects = (enum side_effect)d.side;
	p->idempotent = d.idempotent;
	p->timeout_ms = d.timeout_ms;
	p->argv = d.argv;
	p->env_extra = d.env ? d.env : xcalloc(1, sizeof(char *));
	free(d.description);
	struct buf fp = {0};
	json_canonical(decl, &fp);
	p->fingerprint = buf_steal(&fp);
	p->in_fd = -1;
	list_init(&p->queued);
	list_init(&p->sent);
	*ret = p;
	return 0;
}

int mcp_provider_from_json(const struct json *decl, const char *source, struct mcp_provider **ret,
			   char **ret_err)
{
	struct bind b = {0};
	int r = mcp_provider_bind(&b, decl, source, ret);
	if (r < 0)
		*ret_err = bind_errors(&b);
	return r;
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
const char *const *mcp_provider_argv(const struct mcp_provider *p) { return (const char *const *)p->argv; }
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

