/* SPDX-License-Identifier: MIT */
/*
 * The default socket rule of default_socket.h, and the checks of the
 * per-user fallback directory in /tmp.
 */
#include "daemon/default_socket.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/util.h"

/* The fallback directory of this user: /tmp/toolcalld-UID. */
static char *private_dir(void)
{
	return xasprintf("/tmp/toolcalld-%u", (unsigned)geteuid());
}

char *default_socket_path(void)
{
	const char *e = getenv("TOOLCALLD_SOCKET");
	if (e && *e)
		return xstrdup(e);
	e = getenv("XDG_RUNTIME_DIR");
	if (e && *e)
		return xasprintf("%s/" DEFAULT_SOCKET_NAME, e);
	if (geteuid() == 0 || access(DEFAULT_SOCKET_SYSTEM_DIR, W_OK | X_OK) == 0)
		return xstrdup(DEFAULT_SOCKET_SYSTEM_DIR "/" DEFAULT_SOCKET_NAME);
	_cleanup_free_ char *dir = private_dir();
	return xasprintf("%s/" DEFAULT_SOCKET_NAME, dir);
}

char *default_socket_client_path(void)
{
	const char *e = getenv("TOOLCALLD_SOCKET");
	char *own = default_socket_path();
	/* A socket of the user's own daemon, or its directory (a daemon of
	 * theirs that is stopped): the daemon's rule. */
	_cleanup_free_ char *own_dir = xstrdup(own);
	*strrchr(own_dir, '/') = '\0';
	bool own_dir_made = !str_eq(own_dir, DEFAULT_SOCKET_SYSTEM_DIR) && default_socket_is_private(own) &&
			    access(own_dir, F_OK) == 0;
	if ((e && *e) || access(own, F_OK) == 0 || own_dir_made)
		return own;
	static const char system_socket[] = DEFAULT_SOCKET_SYSTEM_DIR "/" DEFAULT_SOCKET_NAME;
	if (!str_eq(own, system_socket) && (access(system_socket, F_OK) == 0 || errno == EACCES)) {
		free(own);
		return xstrdup(system_socket);
	}
	return own;
}

bool default_socket_is_private(const char *path)
{
	_cleanup_free_ char *dir = private_dir();
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && path[n] == '/' && !strchr(path + n + 1, '/');
}

int default_socket_private_dir(bool create, char **ret_err)
{
	_cleanup_free_ char *dir = private_dir();
	struct stat st;
	if (lstat(dir, &st) < 0) {
		int e = errno;
		if (e == ENOENT && !create)
			return 0;	/* the daemon makes it; nothing to connect to yet */
		if (e != ENOENT) {
			*ret_err = xasprintf("socket directory %s: %s", dir, strerror(e));
			return -e;
		}
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			e = errno;
			*ret_err = xasprintf("socket directory %s: cannot create it: %s", dir, strerror(e));
			return -e;
		}
		if (lstat(dir, &st) < 0) {
			e = errno;
			*ret_err = xasprintf("socket directory %s: %s", dir, strerror(e));
			return -e;
		}
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		*ret_err = xasprintf("socket directory %s: not a private directory of uid %u "
				     "(a symlink, someone else's, or open to others); remove it or "
				     "set TOOLCALLD_SOCKET", dir, (unsigned)geteuid());
		return -EPERM;
	}
	return 0;
}
