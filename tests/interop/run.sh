#!/bin/sh
# SPDX-License-Identifier: MIT
#
# make interop: off-the-shelf MCP clients against the daemon in BUILD, as
# hosts use it. The official MCP TypeScript SDK (tests/interop/
# sdk_client.mjs) through `toolcallctl mcp` and through the bare socket
# (socat): list, call, errors (isError through the bridge), elicitation
# (skipped, saying so, when the daemon does not ask through it), and the
# bridge's answer when the daemon is down; then the MCP Inspector CLI
# listing and calling tools through `toolcallctl mcp`. Needs node, npm and
# the npm registry, so it is not part of make check. TC_INTEROP_DIR names a
# directory to keep the npm packages in between runs (default: a temp dir).
set -eu
build=${1:-build}
top=$(cd "$(dirname "$0")/../.." && pwd)
daemon="$top/$build/daemon/toolcalld"
ctl="$top/$build/daemon/toolcallctl"
command -v node >/dev/null || { echo "interop: node is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "interop: npm is not installed" >&2; exit 1; }

dir=$(mktemp -d /tmp/toolcalld-interop-XXXXXX)
pkgs=${TC_INTEROP_DIR:-$dir/npm}
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM

mkdir -p "$pkgs"
if [ ! -d "$pkgs/node_modules/@modelcontextprotocol/sdk" ]; then
	(cd "$pkgs" && { [ -f package.json ] || npm init -y >/dev/null; } &&
		npm install --silent --no-audit --no-fund @modelcontextprotocol/sdk >/dev/null)
fi
inspector=yes
if [ ! -d "$pkgs/node_modules/@modelcontextprotocol/inspector" ]; then
	(cd "$pkgs" && npm install --silent --no-audit --no-fund @modelcontextprotocol/inspector >/dev/null 2>&1) ||
		inspector=
fi
cp "$top/tests/interop/sdk_client.mjs" "$pkgs/"
mkdir "$dir/ws"
printf 'hello from the workspace\n' > "$dir/ws/hello.txt"
printf '{ "confirmation": { "per_tool": { "shell": "auto" } } }\n' > "$dir/config.json"
"$daemon" --socket "$dir/sock" --workspace "$dir/ws" --config "$dir/config.json" 2> "$dir/daemon.log" &
pid=$!
i=0
while [ ! -S "$dir/sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$dir/sock" ] || { echo "interop: the daemon did not start:" >&2; cat "$dir/daemon.log" >&2; exit 1; }
version() { sed -n 's/.*"version": "\(.*\)".*/\1/p' "$pkgs/node_modules/@modelcontextprotocol/$1/package.json" | head -n 1; }
echo "interop: MCP TypeScript SDK $(version sdk)"

(cd "$pkgs" && node sdk_client.mjs bridge "$dir/sock" "$ctl")
if command -v socat >/dev/null; then
	(cd "$pkgs" && node sdk_client.mjs socket "$dir/sock")
else
	echo "interop (socket): SKIP: socat is not installed"
fi
(cd "$pkgs" && node sdk_client.mjs down "$dir/nothing-here.sock" "$ctl")

if [ -z "$inspector" ]; then
	echo "interop (inspector): SKIP: @modelcontextprotocol/inspector did not install here"
	exit 0
fi
echo "interop: MCP Inspector $(version inspector)"
cli() { (cd "$pkgs" && timeout 120 npx --no-install @modelcontextprotocol/inspector --cli "$ctl" mcp -s "$dir/sock" "$@"); }
out=$(cli --method tools/list)
for t in read_file shell search; do
	printf '%s' "$out" | grep -q "\"name\": \"$t\"" ||
		{ echo "interop (inspector): tools/list lacks $t:" >&2; printf '%s\n' "$out" | head -n 20 >&2; exit 1; }
done
out=$(cli --method tools/call --tool-name read_file --tool-arg path=hello.txt)
printf '%s' "$out" | grep -q '"text": "     1\\thello from the workspace\\n"' ||
	{ echo "interop (inspector): read_file through the bridge:" >&2; printf '%s\n' "$out" >&2; exit 1; }
out=$(cli --method tools/call --tool-name read_file --tool-arg path=../../etc/passwd)
printf '%s' "$out" | grep -q '"isError": true' ||
	{ echo "interop (inspector): an escaping path is not an isError result:" >&2; printf '%s\n' "$out" >&2; exit 1; }
echo "interop (inspector): the MCP Inspector CLI lists and calls tools through toolcallctl mcp"
