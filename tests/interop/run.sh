#!/bin/sh
# SPDX-License-Identifier: MIT
#
# make interop: runs tests/interop/sdk_client.mjs (the official MCP
# TypeScript SDK as a client) against the daemon in BUILD. Needs node, npm
# and the npm registry, so it is not part of make check.
set -eu
build=${1:-build}
top=$(cd "$(dirname "$0")/../.." && pwd)
daemon="$top/$build/daemon/toolcalld"
command -v node >/dev/null || { echo "interop: node is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "interop: npm is not installed" >&2; exit 1; }

dir=$(mktemp -d /tmp/toolcalld-interop-XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM

(cd "$dir" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund @modelcontextprotocol/sdk >/dev/null)
cp "$top/tests/interop/sdk_client.mjs" "$dir/"
mkdir "$dir/ws"
printf 'hello from the workspace\n' > "$dir/ws/hello.txt"
printf '{ "confirmation": { "per_tool": { "shell": "auto" } } }\n' > "$dir/config.json"
"$daemon" --socket "$dir/sock" --workspace "$dir/ws" --config "$dir/config.json" 2> "$dir/daemon.log" &
pid=$!
i=0
while [ ! -S "$dir/sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
echo "interop: MCP TypeScript SDK $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$dir/node_modules/@modelcontextprotocol/sdk/package.json" | head -n 1)"
(cd "$dir" && node sdk_client.mjs "$dir/sock")
