#!/bin/sh
# SPDX-License-Identifier: MIT
#
# What `make run` runs once the build is done: toolcalld in the foreground,
# serving the current directory as its workspace on its default socket, after
# printing how to talk to it. Both programs are linked into BUILD_DIR/bin,
# the PATH entry the README's examples use. Ctrl-C stops it cleanly (SIGINT:
# calls in flight get up to 10 s to finish, the socket file is removed).
#
#   sh packaging/run.sh [BUILD_DIR]        (default: build-run)
set -eu

build=${1:-build-run}
daemon=$build/daemon/toolcalld
ctl=$(find "$build/daemon" -name toolcallctl -type f -perm -u+x 2>/dev/null | head -n 1)
if [ ! -x "$daemon" ] || [ -z "$ctl" ]; then
	echo "run: the programs are missing in $build; build first (make build-run)" >&2
	exit 1
fi
bin=$(cd "$build" && pwd)/bin
mkdir -p "$bin"
ln -sf "$(cd "$(dirname "$daemon")" && pwd)/toolcalld" "$bin/toolcalld"
ln -sf "$(cd "$(dirname "$ctl")" && pwd)/toolcallctl" "$bin/toolcallctl"

# The daemon's own rule for its default socket ($TOOLCALLD_SOCKET, else
# $XDG_RUNTIME_DIR/toolcalld.sock, else /run/toolcalld/toolcalld.sock for
# root, else /tmp/toolcalld-UID/toolcalld.sock): --check-config prints the
# path it will listen on, after checking what start-up needs.
ws=$(pwd)
checked=$("$daemon" --check-config --workspace "$ws") || exit 1
sock=$(printf '%s\n' "$checked" | sed -n 's/^socket: //p')
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
    export PATH="$bin:\$PATH"
    toolcallctl -s $sock list
    toolcallctl -s $sock call read_file '{"path":"README.md"}'

shell, write_file and patch_file ask for confirmation: without an approver
they fail with user_denied. To approve them, keep this running in a third
terminal:
    $bin/toolcallctl -s $sock approve

Ctrl-C stops the daemon.

EOF

# exec: the daemon gets Ctrl-C itself and its exit status is ours.
exec "$daemon" --workspace "$ws"
