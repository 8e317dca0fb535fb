/* SPDX-License-Identifier: MIT */
/*
 * What the daemon needs of the file system before it serves, checked the
 * same way at start-up and by --check-config, so that both refuse the same
 * things with the same words: the default workspace (a directory it can
 * read), the allowed workspace roots, the audit log (a file it can append
 * to, or a directory where it can create one) and the socket's directory
 * (one it can create the socket in, or create).
 */
#ifndef TC_PREFLIGHT_H
#define TC_PREFLIGHT_H

#include <stdbool.h>

struct config;

/* Each check returns 0, or a negative errno with a message in *ret_err. */

/* The default workspace: "workspace PATH: REASON". */
int preflight_workspace(const char *path, char **ret_err);
/* workspaces.allowed: a root that exists must be a directory; one that does
 * not exist yet is only a warning, passed to warn. */
int preflight_allowed(const struct config *cfg, void (*warn)(const char *msg), char **ret_err);
/* The audit log file, or its directory when the file does not exist. */
int preflight_audit_log(const char *path, char **ret_err);
/* The socket's directory; with create, a missing one is made (the per-user
 * fallback in /tmp with mode 0700, any other 0755). */
int preflight_socket(const char *path, bool create, char **ret_err);

/*
 * --check-config: loads the tool files and runs every check above on cfg
 * (the socket: the configured one, else the default rule), printing
 * "FILE: configuration OK, N tools" and "socket: PATH" on success, every
 * failure on stderr otherwise (config_bad: the config file's own errors
 * were printed already; cfg is what could be read of it). Returns the
 * exit status.
 */
int preflight_check_config(const struct config *cfg, const char *config_path, bool config_bad);
/* Prints errors, one a line, each as "toolcalld: LINE" on stderr. */
void preflight_print_errors(const char *errors);

#endif
