/* SPDX-License-Identifier: MIT */
/*
 * The start-up checks of preflight.h, and --check-config built from them.
 * Checks use access(2) with the daemon's own ids, so that the answer is
 * the one the daemon itself would get.
 */
#include "daemon/preflight.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/default_socket.h"
#include "daemon/load.h"
#include "daemon/egress.h"
#include "daemon/providers.h"
#include "lib/policy/policy.h"
#include "lib/registry.h"
#include "lib/sandbox/sandbox.h"
#include "proto/base/util.h"
#include "tools/mcp/mcp.h"

/* The directory part of path, as a new string. */
static char *dir_of(const char *path)
{
	_cleanup_free_ char *copy = xstrdup(path);
	return xstrdup(dirname(copy));
}

/* Why dir is not a directory the daemon may use with access mode, or 0. */
static int dir_unusable(const char *dir, int mode)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return errno;
	if (!S_ISDIR(st.st_mode))
		return ENOTDIR;
	return access(dir, mode) < 0 ? errno : 0;
}

int preflight_workspace(const char *path, char **ret_err)
{
	int e = dir_unusable(path, R_OK | X_OK);
	if (e) {
		*ret_err = xasprintf("workspace %s: %s", path, strerror(e));
		return -e;
	}
	return 0;
}

int preflight_allowed(const struct config *cfg, void (*warn)(const char *msg), char **ret_err)
{
	for (size_t i = 0; i < cfg->n_workspaces_allowed; i++) {
		const char *root = cfg->workspaces_allowed[i];
		if (access(root, F_OK) < 0 && errno == ENOENT) {
			_cleanup_free_ char *msg = xasprintf("workspaces.allowed: %s does not exist (yet); "
							     "clients cannot use it until it does", root);
			if (warn)
				warn(msg);
			continue;
		}
		int e = dir_unusable(root, X_OK);
		if (e) {
			*ret_err = xasprintf("workspaces.allowed: %s: %s", root, strerror(e));
			return -e;
		}
	}
	return 0;
}

int preflight_audit_log(const char *path, char **ret_err)
{
	struct stat st;
	if (stat(path, &st) == 0) {
		int e = S_ISDIR(st.st_mode) ? EISDIR : access(path, W_OK) < 0 ? errno : 0;
		if (e) {
			*ret_err = xasprintf("audit log %s: %s", path, strerror(e));
			return -e;
		}
		return 0;
	}
	if (errno != ENOENT) {
		int e = errno;
		*ret_err = xasprintf("audit log %s: %s", path, strerror(e));
		return -e;
	}
	_cleanup_free_ char *dir = dir_of(path);
	int e = dir_unusable(dir, W_OK | X_OK);
	if (e) {
		*ret_err = xasprintf("audit log %s: cannot create it in %s: %s", path, dir, strerror(e));
		return -e;
	}
	return 0;
}

int preflight_socket(const char *path, bool create, char **ret_err)
{
	struct sockaddr_un sa;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		*ret_err = xasprintf("socket path too long (%zu bytes, at most %zu): %s", strlen(path),
				     sizeof(sa.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	if (default_socket_is_private(path))
		return default_socket_private_dir(create, ret_err);

	_cleanup_free_ char *dir = dir_of(path);
	struct stat st;
	if (stat(dir, &st) < 0 && errno == ENOENT) {
		/* A per-daemon directory (/run/toolcalld) is made at start-up:
		 * its parent must let us. */
		_cleanup_free_ char *parent = dir_of(dir);
		int e = 0;
		if (create)
			e = mkdir(dir, 0755) < 0 && errno != EEXIST ? errno : 0;
		else if (access(parent, W_OK | X_OK) < 0)
			e = errno;
		if (e) {
			*ret_err = xasprintf("socket directory %s: cannot create it: %s", dir, strerror(e));
			return -e;
		}
		return 0;
	}
	int e = dir_unusable(dir, W_OK | X_OK);
	if (e) {
		*ret_err = xasprintf("socket directory %s: %s", dir, strerror(e));
		return -e;
	}
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		*ret_err = xasprintf("%s: exists and is not a socket", path);
		return -EEXIST;
	}
	return 0;
}

static void warn_stderr(const char *msg)
{
	fprintf(stderr, "toolcalld: warning: %s\n", msg);
}

/* The provider whose tools a per_tool key may name (its literal start and
 * the provider's prefix agree), or NULL. */
static const char *provider_of_key(const struct providers *pv, const char *key)
{
	size_t lit = strcspn(key, "*?[");
	for (size_t i = 0; i < pv->n; i++) {
		const char *pre = mcp_provider_prefix(pv->v[i]);
		size_t n = MIN(lit, strlen(pre));
		if (strncmp(key, pre, n) == 0 && (lit >= strlen(pre) || key[lit]))
			return mcp_provider_name(pv->v[i]);
	}
	return NULL;
}

/* Warns about a per_tool key that matches no tool; one that may name a
 * tool of an MCP server is only noted: those are known once it runs. */
static void check_key(const struct registry *r, const struct providers *pv, const char *section, const char *key)
{
	for (size_t i = 0; i < r->n; i++)
		if (policy_key_matches(key, r->tools[i]->name))
			return;
	const char *provider = provider_of_key(pv, key);
	if (provider)
		printf("%s: \"%s\" is checked when MCP server '%s' runs (its tools are not imported here)\n",
		       section, key, provider);
	else
		fprintf(stderr, "toolcalld: warning: %s: \"%s\" matches no tool\n", section, key);
}

/* Warns about confirmation.per_tool and sandbox.per_tool keys that match
 * no tool. */
static void check_per_tool(const struct config *cfg, const struct registry *r, const struct providers *pv)
{
	for (size_t i = 0; i < cfg->confirmation.n_per_tool; i++)
		check_key(r, pv, "confirmation.per_tool", cfg->confirmation.per_tool[i].name);
	for (size_t i = 0; i < cfg->sandbox.n_per_tool; i++)
		check_key(r, pv, "sandbox.per_tool", cfg->sandbox.per_tool[i].tool);
}

void preflight_print_errors(const char *errors)
{
	for (const char *s = errors; s && *s;) {
		const char *nl = strchr(s, '\n');
		size_t n = nl ? (size_t)(nl - s) : strlen(s);
		fprintf(stderr, "toolcalld: %.*s\n", (int)n, s);
		s += n + (nl ? 1 : 0);
	}
}

/* Prints what a check found (r < 0) and says whether it failed. */
static bool check_failed(int r, char **err)
{
	if (r < 0)
		preflight_print_errors(*err);
	free(*err);
	*err = NULL;
	return r < 0;
}

int preflight_check_config(const struct config *cfg, const char *config_path, bool config_bad)
{
	_cleanup_free_ char *socket = cfg->socket ? xstrdup(cfg->socket) : default_socket_path();
	struct registry *r = NULL;
	struct providers pv = {0};
	/* Every check runs, so that one run reports every mistake. */
	char *err = NULL;
	bool bad = config_bad;
	bad |= check_failed(registry_build(cfg, NULL, &pv, &r, &err), &err);
	bad |= check_failed(preflight_workspace(cfg->workspace, &err), &err);
	bad |= check_failed(preflight_allowed(cfg, warn_stderr, &err), &err);
	if (cfg->audit_log)
		bad |= check_failed(preflight_audit_log(cfg->audit_log, &err), &err);
	bad |= check_failed(preflight_socket(socket, false, &err), &err);
	bad |= check_failed(daemon_net_check(cfg, &err), &err);
	if (bad) {
		registry_unref(r);
		providers_clear(&pv);
		return 1;
	}
	check_per_tool(cfg, r, &pv);
	printf("%s: configuration OK, %zu tools\n", config_path ? config_path : "(defaults)", r->n);
	printf("socket: %s\n", socket);
	/* What the kernel enforces of the process sandbox, as start-up says. */
	_cleanup_free_ char *line = sandbox_features_line(sandbox_probe(cfg->sandbox.cgroup_dir));
	printf("%s\n", line);
	/* Whether the network "proxy" can be had: a namespace per call. */
	const char *why = NULL;
	bool netns = sandbox_netns_capable(&why);
	printf("sandbox network \"proxy\": %s%s\n", netns ? "yes (a network namespace per call, the daemon's proxy in it)"
							   : "no: ", netns ? "" : why);
	sandbox_shutdown();
	registry_unref(r);
	providers_clear(&pv);
	return 0;
}
