#!/bin/sh
# SPDX-License-Identifier: MIT
#
# What `make run` runs once the build is done: toolcalld in the foreground,
# serving the current directory as its workspace on its default socket, after
# printing how to talk to it. Ctrl-C stops it cleanly (SIGINT: calls in
# flight get up to 10 s to finish, the socket file is removed).
#
#   sh packaging/run.sh [BUILD_DIR]        (default: build)
set -eu

build=${1:-build}
daemon=$build/daemon/toolcalld
ctl=$build/daemon/toolcallctl
if [ ! -x "$daemon" ]; then
	echo "run: $daemon is missing; build first (make build)" >&2
	exit 1
fi

# The daemon's own rule for its default socket, so the path printed below
# is the one it will listen on.
if [ -n "${TOOLCALLD_SOCKET:-}" ]; then
	sock=$TOOLCALLD_SOCKET
elif [ -n "${XDG_RUNTIME_DIR:-}" ]; then
	sock=$XDG_RUNTIME_DIR/toolcalld.sock
else
	sock=/run/toolcalld/toolcalld.sock
fi

# Without XDG_RUNTIME_DIR and without root, /run/toolcalld is out of reach:
# say so, and use a private directory instead of failing.
sockdir=$(dirname "$sock")
parent=$(dirname "$sockdir")
if { [ -d "$sockdir" ] && [ ! -w "$sockdir" ]; } ||
   { [ ! -d "$sockdir" ] && [ ! -w "$parent" ]; }; then
	fallback=${TMPDIR:-/tmp}/toolcalld-$(id -u)
	mkdir -p "$fallback"
	chmod 700 "$fallback"
	echo "run: cannot create $sock (not root, XDG_RUNTIME_DIR unset);" >&2
	echo "run: using $fallback/toolcalld.sock instead" >&2
	sock=$fallback/toolcalld.sock
	export TOOLCALLD_SOCKET="$sock"
fi

ws=$(pwd)
cat <<EOF

toolcalld: serving $ws
socket:    $sock

Connect from another terminal:
    socat - UNIX-CONNECT:$sock

then paste one line at a time (each line is one JSON-RPC request):

    {"jsonrpc":"2.0","id":1,"method":"tools/list"}
    {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README.md","limit":100}}}
    {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"red_file","arguments":{"path":"README.md"}}}
    {"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"../../etc/passwd"}}}

Or use the client:
    $ctl -s $sock list
    $ctl -s $sock call read_file '{"path":"README.md"}'

shell, write_file and patch_file ask for confirmation: without an approver
they fail with user_denied. To approve them, keep this running in a third
terminal:
    $ctl -s $sock approve

Ctrl-C stops the daemon.

EOF

# exec: the daemon gets Ctrl-C itself and its exit status is ours.
exec "$daemon" --workspace "$ws"
