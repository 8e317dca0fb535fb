/* SPDX-License-Identifier: MIT */
/*
 * Where toolcalld listens when neither the command line nor the config file
 * says (contract §9), and the checks of the per-user fallback directory.
 * One rule for the daemon and toolcallctl, so that both always agree: the
 * client links this file alone, nothing else of the daemon.
 *
 *   1. $TOOLCALLD_SOCKET
 *   2. $XDG_RUNTIME_DIR/toolcalld.sock
 *   3. /run/toolcalld/toolcalld.sock, for root, or for a user who may
 *      create files in /run/toolcalld (the packaged service user)
 *   4. /tmp/toolcalld-UID/toolcalld.sock otherwise: a directory of the
 *      user's own, mode 0700, which the daemon creates; a directory of that
 *      name that is someone else's, a symlink or open to others is refused
 *      by both programs (anyone can create names in /tmp).
 *
 * Empty variables count as unset.
 */
#ifndef TC_DEFAULT_SOCKET_H
#define TC_DEFAULT_SOCKET_H

#include <stdbool.h>

#define DEFAULT_SOCKET_SYSTEM_DIR "/run/toolcalld"
#define DEFAULT_SOCKET_NAME "toolcalld.sock"

/* Returns the default socket path (the rule above), as a new string. */
char *default_socket_path(void);

/*
 * The socket toolcallctl tries without -s: $TOOLCALLD_SOCKET; else the
 * daemon's rule when a socket is there (a daemon of the user's own), or
 * the user's own /tmp/toolcalld-UID directory exists; else
 * /run/toolcalld/toolcalld.sock when it exists (the system daemon, which a
 * member of its group may use: a user who may not is then told so, with
 * the socket's owner and group); else the daemon's rule.
 */
char *default_socket_client_path(void);

/* True when path's directory is this user's fallback /tmp/toolcalld-UID. */
bool default_socket_is_private(const char *path);

/* Checks this user's fallback directory: it must be a directory (not a
 * symlink) owned by this user and closed to group and others. A missing
 * one passes, and with create is made (mode 0700). Returns 0, or a negative errno with a
 * message in *ret_err ("socket directory DIR: ..."). */
int default_socket_private_dir(bool create, char **ret_err);

#endif
