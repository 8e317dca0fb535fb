#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The example configuration (packaging/toolcalld.json) loads, as shipped
# and with its commented hook example switched on; the example policy
# script it names exists and denies what it says it denies.
set -eu
src=${TC_SOURCE_ROOT:?}
daemon=${TC_BUILD_ROOT:?}/daemon/toolcalld
hook=$src/packaging/hooks/deny-dangerous-shell.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/ws"
cp -r "$src/packaging/tools.d" "$tmp/tools.d"

# Paths a system service wants, moved into the temp dir.
local_paths() {
	sed -e "s|\"/srv/toolcalld\"|\"$tmp/ws\"|" -e "s|/var/log/toolcalld/|$tmp/|"
}
local_paths <"$src/packaging/toolcalld.json" >"$tmp/toolcalld.json"
"$daemon" --check-config --config "$tmp/toolcalld.json" >/dev/null

# The hook example, uncommented as its comment says.
grep -q 'deny-dangerous-shell.sh' "$tmp/toolcalld.json"
local_paths <"$src/packaging/toolcalld.json" |
	sed -e '/"pre_call": \[/,/^    \],/ s|^      // \{0,2\}||' -e "s|/usr/share/toolcalld/hooks/|$src/packaging/hooks/|" >"$tmp/hooked.json"
grep -q "^ *\"command\": \[\"$hook\"\]" "$tmp/hooked.json"
"$daemon" --check-config --config "$tmp/hooked.json" >/dev/null

[ -x "$hook" ]
out=$(printf '%s' '{"hook":"pre_call","tool":"shell","arguments":{"command":"rm -rf /"}}' | "$hook")
case $out in *'"decision":"deny"'*) ;; *) echo "the example hook did not deny rm -rf /: $out" >&2; exit 1 ;; esac
out=$(printf '%s' '{"hook":"pre_call","tool":"shell","arguments":{"command":"ls"}}' | "$hook")
[ -z "$out" ] || { echo "the example hook had an opinion on ls: $out" >&2; exit 1; }
echo "example config loads, with and without its hook"
