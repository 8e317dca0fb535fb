#!/bin/sh
# SPDX-License-Identifier: MIT
# The daemon's layers call only the ones below: no file but the server's
# own (server*.c) and main.c includes the server's life cycle
# (server.h, server_internal.h); the methods get what they need of it,
# admin/reload, as an operation (struct methods_ops).
set -eu
root=${1:?usage: test_layers.sh SOURCE_ROOT}
bad=$(grep -l -E '^#include "daemon/server(_internal)?\.h"' "$root"/daemon/*.c |
	grep -v -E '/daemon/(server[^/]*|main)\.c$' || true)
if [ -n "$bad" ]; then
	echo "these include the server's life cycle from a layer below it:" >&2
	echo "$bad" >&2
	exit 1
fi
echo "layers: ok"
