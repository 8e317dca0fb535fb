#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Off-the-shelf MCP clients against the daemon, as hosts use it. The
# official MCP TypeScript SDK (tests/interop/sdk_client.mjs) through
# `toolcallctl mcp` and through the bare socket (socat): list, call, errors
# (isError through the bridge), elicitation (skipped, saying so, when the
# daemon does not ask through it), and the bridge's answer when the daemon
# is down; then the MCP Inspector CLI listing and calling tools through
# `toolcallctl mcp`.
#
# Two ways to run it:
# - `meson test --suite interop` (TOOLCALLD and TOOLCALLCTL set by meson):
#   offline. The SDK is looked for where it is installed already
#   ($TC_INTEROP_DIR/node_modules, then `npm root -g`); without node or
#   the SDK the test exits 77 saying which is missing, and the Inspector
#   part is skipped, saying so, without the Inspector.
# - `make interop` (run.sh BUILD): installs what is missing from the npm
#   registry into $TC_INTEROP_DIR (default: a temp dir) first.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -ge 1 ]; then
	install=yes
	daemon="$top/$1/daemon/toolcalld"
	ctl="$top/$1/daemon/toolcallctl"
else
	install=
	daemon=${TOOLCALLD:?TOOLCALLD names the daemon to test}
	ctl=${TOOLCALLCTL:?TOOLCALLCTL names toolcallctl}
fi
# Under meson, what is missing skips (77); asked for by hand, it fails.
missing() {
	echo "interop: SKIP: $*" >&2
	[ -n "$install" ] && exit 1
	exit 77
}
command -v node >/dev/null || missing "node is not installed"
command -v npm >/dev/null || missing "npm is not installed"

dir=$(mktemp -d /tmp/toolcalld-interop-XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM

# The node_modules directory that holds the SDK.
has() { [ -f "$1/@modelcontextprotocol/$2/package.json" ]; }
mods=
if [ -n "$install" ]; then
	pkgs=${TC_INTEROP_DIR:-$dir/npm}
	mkdir -p "$pkgs"
	if ! has "$pkgs/node_modules" sdk; then
		(cd "$pkgs" && { [ -f package.json ] || npm init -y >/dev/null; } &&
			npm install --silent --no-audit --no-fund @modelcontextprotocol/sdk >/dev/null)
	fi
	if ! has "$pkgs/node_modules" inspector; then
		(cd "$pkgs" && npm install --silent --no-audit --no-fund @modelcontextprotocol/inspector >/dev/null 2>&1) ||
			true
	fi
	mods="$pkgs/node_modules"
else
	for m in ${TC_INTEROP_DIR:+"$TC_INTEROP_DIR/node_modules"} "$(npm root -g 2>/dev/null || true)"; do
		if [ -n "$m" ] && has "$m" sdk; then
			mods=$m
			break
		fi
	done
	[ -n "$mods" ] || missing "the MCP TypeScript SDK (@modelcontextprotocol/sdk) is not installed here" \
		"(looked in ${TC_INTEROP_DIR:+\$TC_INTEROP_DIR/node_modules and }npm root -g; 'make interop' installs it)"
fi
has "$mods" sdk || { echo "interop: the MCP TypeScript SDK did not install" >&2; exit 1; }
inspector=
has "$mods" inspector && inspector=yes
# The client runs from a directory of its own, beside the modules it
# imports (an ES module finds them from its own directory, not NODE_PATH).
run="$dir/run"
mkdir "$run"
ln -s "$mods" "$run/node_modules"
cp "$top/tests/interop/sdk_client.mjs" "$run/"
mkdir "$dir/ws"
printf 'hello from the workspace\n' > "$dir/ws/hello.txt"
printf '{ "confirmation": { "per_tool": { "shell": "auto" } } }\n' > "$dir/config.json"
"$daemon" --socket "$dir/sock" --workspace "$dir/ws" --config "$dir/config.json" 2> "$dir/daemon.log" &
pid=$!
i=0
while [ ! -S "$dir/sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$dir/sock" ] || { echo "interop: the daemon did not start:" >&2; cat "$dir/daemon.log" >&2; exit 1; }
version() { sed -n 's/.*"version": "\(.*\)".*/\1/p' "$mods/@modelcontextprotocol/$1/package.json" | head -n 1; }
echo "interop: MCP TypeScript SDK $(version sdk)"

(cd "$run" && node sdk_client.mjs bridge "$dir/sock" "$ctl")
if command -v socat >/dev/null; then
	(cd "$run" && node sdk_client.mjs socket "$dir/sock")
else
	echo "interop (socket): SKIP: socat is not installed"
fi
(cd "$run" && node sdk_client.mjs down "$dir/nothing-here.sock" "$ctl")

if [ -z "$inspector" ]; then
	echo "interop (inspector): SKIP: @modelcontextprotocol/inspector is not installed here"
	exit 0
fi
echo "interop: MCP Inspector $(version inspector)"
cli() { (cd "$run" && timeout 120 npx --no-install @modelcontextprotocol/inspector --cli "$ctl" mcp -s "$dir/sock" "$@"); }
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
