#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The multi-user drop-in's capability bounding set is enough for the whole
# sandbox: the daemon run as root with exactly the capabilities of
# packaging/toolcalld-root.conf (setpriv --bounding-set, as systemd's
# CapabilityBoundingSet= leaves them) says at start-up that children get an
# empty bounding set, and a shell call's child shows no capability in any set
# and a read-only file system outside the workspace. Skips (77) when not root,
# without setpriv or socat, or where the kernel lets no sandbox be built.
#
#   sh tests/pkg/test_root_caps.sh [TOOLCALLD]      (meson test --suite pkg)
set -eu

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

top=${TC_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
daemon=${1:-${TOOLCALLD:-}}
[ "$(id -u)" = 0 ] || skip "needs root (the drop-in runs the daemon as root)"
command -v setpriv >/dev/null || skip "setpriv is missing (package util-linux)"
command -v socat >/dev/null || skip "socat is missing"
[ -n "$daemon" ] && [ -x "$daemon" ] || skip "no toolcalld program given (TOOLCALLD)"

caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$top/packaging/toolcalld-root.conf")
[ -n "$caps" ] || fail "no CapabilityBoundingSet= in toolcalld-root.conf"
set=-all
for c in $caps; do
	set="$set,+$(echo "${c#CAP_}" | tr 'A-Z' 'a-z')"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolcalld-rootcaps.XXXXXX")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir "$tmp/ws"
printf '{"confirmation": {"default": {"execute": "auto"}}}\n' >"$tmp/conf.json"

(cd "$tmp/ws" && exec setpriv --bounding-set "$set" --inh-caps=-all \
	"$daemon" -c "$tmp/conf.json" -s "$tmp/sock") 2>"$tmp/log" &
pid=$!
i=0
until [ -S "$tmp/sock" ]; do
	i=$((i + 1))
	[ $i -lt 200 ] || { cat "$tmp/log"; fail "the daemon did not listen within 10 s"; }
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/log"; fail "the daemon exited"; }
	sleep 0.05
done

grep -q 'sandbox: landlock' "$tmp/log" || skip "no sandbox on this kernel: $(head -c 300 "$tmp/log")"
grep -q 'bounding set empty' "$tmp/log" ||
	fail "start-up does not say children get an empty bounding set: $(cat "$tmp/log")"

req='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell","arguments":{"command":"grep -E \"^Cap(Inh|Prm|Eff|Bnd|Amb)\" /proc/self/status; touch /etc/toolcalld-rootcaps-probe"}}}'
out=$(printf '%s\n' "$req" | timeout 20 socat -t 15 - "UNIX-CONNECT:$tmp/sock")
printf "%s\n" "$out" | grep -q '"result"' || fail "no result: $out"
for s in Inh Prm Eff Bnd Amb; do
	printf "%s\n" "$out" | grep -qF "Cap$s:\\t0000000000000000" ||
		fail "the child's Cap$s is not empty: $out"
done
printf "%s\n" "$out" | grep -q 'Read-only file system' || fail "the child could write /etc: $out"
[ ! -e /etc/toolcalld-rootcaps-probe ] || { rm -f /etc/toolcalld-rootcaps-probe; fail "the child wrote /etc"; }
echo "ok: children of the drop-in's root daemon hold no capability"
