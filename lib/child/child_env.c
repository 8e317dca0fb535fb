/* SPDX-License-Identifier: MIT */
/*
 * The environment children get: a scrubbed copy of the daemon's (an
 * allow-list of names), helpers to read and set variables in it, and the
 * PATH search of a program named without a slash.
 */
#include "lib/child/child.h"
#include "lib/child/child_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/util.h"

/* Finds the value of name in env. */
const char *child_env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

/* A copy of an environment, for variables to be set in. */
char **child_env_dup(char *const *envp)
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	char **v = xcalloc(n + 1, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = xstrdup(envp[i]);
	return v;
}

/* "name=value", name being its first n bytes: made without printf, as
 * every call of a child makes a few. */
static char *env_line(const char *name, size_t n, const char *value)
{
	size_t v = strlen(value);
	char *line = xmalloc(n + v + 2);
	memcpy(line, name, n);
	line[n] = '=';
	memcpy(line + n + 1, value, v + 1);
	return line;
}

/* Sets name=value, name being its first n bytes, replacing an earlier
 * value. */
static void env_put(char ***env, const char *name, size_t n, const char *value)
{
	size_t i = 0;
	char **v = *env;
	for (; v && v[i]; i++)
		if (strncmp(v[i], name, n) == 0 && v[i][n] == '=') {
			free(v[i]);
			v[i] = env_line(name, n, value);
			return;
		}
	v = xreallocarray(v, i + 2, sizeof(*v));
	v[i] = env_line(name, n, value);
	v[i + 1] = NULL;
	*env = v;
}

void child_env_put(char ***env, const char *name, const char *value)
{
	env_put(env, name, strlen(name), value);
}

/* Sets each "NAME=value" of lines (NULL-terminated; NULL: none). */
void child_env_put_lines(char ***env, const char *const *lines)
{
	for (; lines && *lines; lines++) {
		const char *eq = strchr(*lines, '=');
		if (eq)
			env_put(env, *lines, (size_t)(eq - *lines), eq + 1);
	}
}

/* Copies the allowed variables of the daemon's environment: the array
 * sized once, each line made once. */
char **child_env_new(const char *const *allow)
{
	static const char *const dflt[] = { "PATH", "LANG", "HOME", "TERM", NULL };
	size_t max = 1, n = 0;
	bool path = false;

	allow = allow ? allow : dflt;
	for (const char *const *a = allow; *a; a++)
		max++;
	char **env = xcalloc(max + 1, sizeof(*env));
	for (; *allow; allow++) {
		const char *name = *allow;
		if (!*name || strchr(name, '='))
			continue;
		const char *v = getenv(name);
		if (!v || child_env_get(env, name))
			continue;
		env[n++] = env_line(name, strlen(name), v);
		path = path || strcmp(name, "PATH") == 0;
	}
	if (!path)
		env[n++] = env_line("PATH", 4, CHILD_SAFE_PATH);
	return env;
}

char **child_env_free(char **env)
{
	for (char **e = env; e && *e; e++)
		free(*e);
	free(env);
	return NULL;
}

/* Finds a program named without a slash in the absolute directories of
 * PATH (relative entries would resolve against the daemon's directory, so
 * they are skipped). */
int find_program(const char *name, char *const *envp, char **ret)
{
	if (!name || !*name)
		return -ENOENT;
	if (strchr(name, '/')) {
		*ret = xstrdup(name);
		return 0;
	}
	const char *path = child_env_get(envp, "PATH");
	if (!path)
		path = CHILD_SAFE_PATH;
	int r = -ENOENT;
	for (const char *p = path; *p;) {
		size_t len = strcspn(p, ":");
		if (len > 0 && p[0] == '/') {
			_cleanup_free_ char *full = xasprintf("%.*s/%s", (int)len, p, name);
			struct stat st;
			if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
				if (access(full, X_OK) == 0) {
					*ret = TAKE_PTR(full);
					return 0;
				}
				r = -EACCES;
			}
		}
		p += len;
		if (*p == ':')
			p++;
	}
	return r;
}
