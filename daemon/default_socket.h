/* SPDX-License-Identifier: MIT */
/*
 * Where toolcalld listens when neither the command line nor the config file
 * says (contract §9). Shared by the daemon and toolcallctl so both always
 * agree; kept header-only so the client links nothing of the daemon.
 */
#ifndef TC_DEFAULT_SOCKET_H
#define TC_DEFAULT_SOCKET_H

#include <stdlib.h>

#include "proto/base/util.h"

/* Returns $TOOLCALLD_SOCKET, else $XDG_RUNTIME_DIR/toolcalld.sock, else
 * /run/toolcalld/toolcalld.sock, as a new string. Empty variables count as
 * unset. */
static inline char *default_socket_path(void)
{
	const char *e = getenv("TOOLCALLD_SOCKET");
	if (e && *e)
		return xstrdup(e);
	e = getenv("XDG_RUNTIME_DIR");
	if (e && *e)
		return xasprintf("%s/toolcalld.sock", e);
	return xstrdup("/run/toolcalld/toolcalld.sock");
}

#endif
