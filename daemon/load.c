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
static int load_provider(struct registry *r, const struct json *decl, const char *path,
			 const struct providers *prev, struct providers *next, char **ret_err)
{
	struct mcp_provider *p = NULL;
	int rr = mcp_provider_from_json(decl, path, &p, ret_err);
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

/* Loads one tool file into r. */
static int load_file(struct registry *r, const char *path, const struct providers *prev,
		     struct providers *next, char **ret_err)
{
	size_t len = 0;
	char *text = NULL;
	int e = read_file_capped(path, TOOL_FILE_MAX, READ_REGULAR_ONLY, &text, &len);
	if (e < 0) {
		*ret_err = xasprintf("%s: cannot read: %s", path, strerror(-e));
		return -EINVAL;
	}
	struct json_doc *doc = NULL;
	struct json_err jerr;
	if (json_parse(text, len, JSON_ALLOW_COMMENTS, 64, &doc, &jerr) < 0) {
		unsigned line, col;
		json_line_col(text, len, jerr.offset, &line, &col);
		*ret_err = xasprintf("%s:%u:%u: %s", path, line, col, jerr.msg);
		free(text);
		return -EINVAL;
	}
	const struct json *decl = json_doc_root(doc);
	const char *kind = json_str(json_get(decl, "kind"));
	struct tool *t = NULL;
	char *err = NULL;
	int rr;
	if (decl->type != JSON_OBJECT) {
		err = xstrdup("a tool file holds one JSON object");
		rr = -EINVAL;
	} else if (!kind || str_eq(kind, "command")) {
		if (!kind) {
			err = xstrdup("kind: missing (\"command\" or \"mcp\")");
			rr = -EINVAL;
		} else {
			rr = command_tool_from_json(decl, path, &t, &err);
		}
	} else if (str_eq(kind, "mcp")) {
		rr = load_provider(r, decl, path, prev, next, &err);
		if (rr == 0) {
			json_doc_unref(doc);
			free(text);
			return 0;
		}
		if (rr == -EEXIST) {
			*ret_err = err;
			json_doc_unref(doc);
			free(text);
			return -EINVAL;
		}
	} else {
		err = xasprintf("kind: unsupported kind '%s' (supported: \"command\", \"mcp\")", kind);
		rr = -EINVAL;
	}
	if (rr < 0) {
		/* Point at the member the message names when we can find it. */
		size_t off = decl->off;
		for (size_t i = 0; decl->type == JSON_OBJECT && err && i < decl->u.obj.n; i++) {
			const struct json_member *m = &decl->u.obj.members[i];
			size_t kl = strlen(m->key);
			if (strncmp(err, m->key, kl) == 0 && (err[kl] == ':' || err[kl] == '.' || err[kl] == '[')) {
				off = m->value->off;
				break;
			}
		}
		unsigned line, col;
		json_line_col(text, len, off, &line, &col);
		*ret_err = xasprintf("%s:%u:%u: %s", path, line, col, err ? err : "invalid tool");
		free(err);
		json_doc_unref(doc);
		free(text);
		return -EINVAL;
	}
	struct buf fp = {0};
	json_canonical(decl, &fp);
	free(t->fingerprint);
	t->fingerprint = buf_steal(&fp);
	free(t->source);
	t->source = xstrdup(path);
	/* A name already taken is reported at this file's "name". */
	const struct json *jname = json_get(decl, "name");
	unsigned line, col;
	json_line_col(text, len, jname ? jname->off : decl->off, &line, &col);
	json_doc_unref(doc);
	free(text);
	rr = registry_add(r, t, &err);
	if (rr < 0) {
		*ret_err = xasprintf("%s:%u:%u: %s", path, line, col, err);
		free(err);
		return -EINVAL;
	}
	return 0;
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
