/* SPDX-License-Identifier: MIT */
/*
 * The workspace escape fixture shared by the file tools' suites: a daemon
 * whose temp dir holds, beside the workspace, outside/ (with secret.txt)
 * and ws-evil/ (the workspace's name as a prefix, with a secret.txt of its
 * own), and whose workspace holds files inside and symlinks leading out
 * (absolute and relative, to files and directories, through /proc, in a
 * chain, dangling) and in. The teardown asserts that nothing outside was
 * read into a reply, changed or created.
 *
 * Workspace: inside.txt (the text given), sub/deep.txt "deep\n",
 * "..test", "...", sub/..hidden, and the links of escape.c.
 */
#ifndef TC_ESCAPE_H
#define TC_ESCAPE_H

#include "tests/integ/harness.h"

/* What outside/secret.txt and ws-evil/secret.txt hold. */
#define ESCAPE_SECRET "TOP SECRET\n"

struct escape {
	struct tcd d;
	struct tcc *c;
	char *outside;		/* dir/outside: a directory next to the workspace */
	char *evil;		/* dir/ws-evil: shares the workspace's name as prefix */
	char *secret;		/* outside/secret.txt */
};

/* Starts the daemon with config and makes the fixture; inside.txt holds
 * inside_text. e->c is connected. */
void escape_setup(struct escape *e, const char *config, const char *inside_text);
/* Asserts the secret is unchanged and nothing appeared outside the
 * workspace, then stops the daemon (exit 0) and frees e. */
void escape_teardown(struct escape *e);

/* Asserts a call is refused as an escape: permission_denied, code -32603,
 * not retryable, a message saying so, and no secret in the reply. */
void escape_denied_at(struct escape *e, const char *tool, const char *args, int line);
#define escape_denied(e, tool, args) escape_denied_at((e), (tool), (args), __LINE__)

/* Number of entries in a directory (not counting . and ..). */
int tc_count_entries(const char *dir);

#endif
