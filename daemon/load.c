/* SPDX-License-Identifier: MIT */
/*
 * Registry loading: built-ins with their configured timeouts and caps, and
 * tool files by kind.
 */
#include "daemon/load.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/config.h"
#include "lib/registry.h"
#include "proto/base/fileio.h"
#include "proto/json.h"
#include "tools/command.h"
#include "tools/mcp/mcp.h"
#include "tools/tools.h"

#define TOOL_FILE_MAX (4u << 20)
/* Tool files whose errors one load reports; the others are counted. */
#define LOAD_MAX_ERRORS 50

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds an MCP provider: the one already running when unchanged. */
static int load_provider(struct registry *r, struct bind *b, const struct json *decl, const char *path,
			 const struct providers *prev, struct providers *next, char **ret_err)
{
	struct mcp_provider *p = NULL;
	int rr = mcp_provider_bind(b, decl, path, &p);
	if (rr < 0)
		return rr;
	for (size_t i = 0; prev && i < prev->n; i++) {
		if (str_eq(mcp_provider_source(prev->v[i]), path) &&
		    str_eq(mcp_provider_fingerprint(prev->v[i]), mcp_provider_fingerprint(p))) {
			mcp_provider_unref(p);
			p = mcp_provider_ref(prev->v[i]);
			break;
		}
	}
	next->v = xreallocarray(next->v, next->n + 1, sizeof(*next->v));
	next->v[next->n++] = p;
	return mcp_provider_imported(p) ? mcp_provider_register(p, r, ret_err) : 0;
}

/* Checks one tool file, every mistake recorded in b; adds its tool or
 * provider to r when there is none. */
static void load_decl(struct registry *r, struct bind *b, const struct json *decl, const char *path,
		      const struct providers *prev, struct providers *next, char **ret_err)
{
	const struct json *kind = json_get(decl, "kind");
	const char *k = json_str(kind);
	struct tool *t = NULL;

	if (decl->type != JSON_OBJECT) {
		bind_fail(b, decl->off, NULL, "a tool file holds one JSON object");
	} else if (!kind) {
		bind_fail(b, decl->off, "kind", "missing (\"command\" or \"mcp\")");
	} else if (str_eq(k, "mcp")) {
		_cleanup_free_ char *err = NULL;
		int rr = load_provider(r, b, decl, path, prev, next, &err);
		if (rr == -EEXIST)
			*ret_err = TAKE_PTR(err);	/* names both files already */
		else if (err)
			bind_fail(b, decl->off, NULL, "%s", err);
	} else if (str_eq(k, "command")) {
		if (command_tool_bind(b, decl, path, &t) < 0)
			return;
		/* A name already taken is reported at this file's "name". */
		const struct json *jname = json_get(decl, "name");
		_cleanup_free_ char *err = NULL;
		if (registry_add(r, t, &err) < 0)
			bind_fail(b, jname ? jname->off : decl->off, NULL, "%s", err);
	} else {
		bind_fail(b, kind->off, "kind", "unsupported kind '%.64s' (supported: \"command\", \"mcp\")",
			  k ? k : bind_got(kind));
	}
}

/* Loads one tool file into r; every mistake in *ret_err, one a line. */
static int load_file(struct registry *r, const char *path, const struct providers *prev,
		     struct providers *next, char **ret_err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int e = read_file_capped(path, TOOL_FILE_MAX, READ_REGULAR_ONLY, &text, &len);
	if (e < 0) {
		*ret_err = xasprintf("%s: cannot read: %s", path, strerror(-e));
		return -EINVAL;
	}
	struct bind b = { .name = path, .text = text, .len = len };
	_cleanup_(json_doc_unrefp) struct json_doc *doc = NULL;
	struct json_err jerr;
	if (json_parse(text, len, JSON_ALLOW_COMMENTS, 64, &doc, &jerr) < 0)
		bind_fail(&b, jerr.offset, NULL, "%s", jerr.msg);
	else
		load_decl(r, &b, json_doc_root(doc), path, prev, next, ret_err);
	if (*ret_err)
		return -EINVAL;
	*ret_err = bind_errors(&b);
	return *ret_err ? -EINVAL : 0;
}

int registry_build(const struct config *cfg, const struct providers *prev, struct providers *next,
		   struct registry **ret, char **ret_err)
{
	struct providers local = {0};
	if (!next)
		next = &local;
	struct registry *r = registry_new();
	for (const struct tool_def *const *d = builtin_tools; *d; d++) {
		struct tool *t = NULL;
		char *err = NULL;
		if (tool_new(*d, (*d)->name, (*d)->description, (*d)->input_schema, NULL, &t, &err) < 0) {
			*ret_err = xasprintf("built-in tool '%s': %s", (*d)->name, err);
			free(err);
			registry_unref(r);
			return -EINVAL;
		}
		uint32_t timeout = config_tool_timeout(cfg, t->name);
		if (timeout)
			t->timeout_ms = timeout;
		t->concurrency = config_tool_concurrency(cfg, t->name);
		t->fingerprint = xasprintf("built-in:%u:%u", t->timeout_ms, t->concurrency);
		registry_add(r, t, NULL);
	}

	if (cfg->tools_dir) {
		DIR *dir = opendir(cfg->tools_dir);
		if (!dir) {
			if (cfg->tools_dir_at)
				*ret_err = xasprintf("%s: tools_dir: cannot open %s: %s", cfg->tools_dir_at,
						     cfg->tools_dir, strerror(errno));
			else
				*ret_err = xasprintf("%s: cannot open tools_dir: %s", cfg->tools_dir, strerror(errno));
			registry_unref(r);
			return -EINVAL;
		}
		char **names = NULL;
		size_t n = 0;
		struct dirent *de;
		while ((de = readdir(dir))) {
			size_t l = strlen(de->d_name);
			if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json") != 0)
				continue;
			names = xreallocarray(names, n + 1, sizeof(*names));
			names[n++] = xstrdup(de->d_name);
		}
		closedir(dir);
		if (n)
			qsort(names, n, sizeof(*names), name_cmp);
		/* Every file is read, so that one run reports every mistake. */
		int rr = 0;
		unsigned n_errors = 0;
		struct buf errors = {0};
		for (size_t i = 0; i < n; i++) {
			char *path = xasprintf("%s/%s", cfg->tools_dir, names[i]);
			char *err = NULL;
			if (load_file(r, path, prev, next, &err) < 0) {
				rr = -EINVAL;
				if (++n_errors <= LOAD_MAX_ERRORS)
					buf_printf(&errors, "%s%s", buf_size(&errors) ? "\n" : "", err);
			}
			free(err);
			free(path);
			free(names[i]);
		}
		free(names);
		if (n_errors > LOAD_MAX_ERRORS)
			buf_printf(&errors, "\n%s: %u more tool files with errors not shown", cfg->tools_dir,
				   n_errors - LOAD_MAX_ERRORS);
		if (rr < 0) {
			*ret_err = buf_steal(&errors);
			providers_clear(next);
			registry_unref(r);
			return rr;
		}
	}
	/* Per-tool caps apply to file tools too. */
	for (size_t i = 0; i < r->n; i++) {
		uint32_t cap = config_tool_concurrency(cfg, r->tools[i]->name);
		if (cap)
			r->tools[i]->concurrency = cap;
	}
	registry_seal(r);
	providers_clear(&local);
	*ret = r;
	return 0;
}
