#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The systemd units as shipped: `systemd-analyze verify` accepts the system
# units, the per-user units and the multi-user drop-in, and
# `systemd-analyze security` rates the system service 2.5 or lower
# (printed, with what it counts against it). The units are checked with
# their paths pointing at the programs of this build. Skips (77) where
# systemd-analyze is missing or too old for --offline.
#
#   sh tests/pkg/test_units.sh [TOOLCALLD]      (meson test --suite pkg)
set -eu

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

top=${TC_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
daemon=${1:-${TOOLCALLD:-}}
command -v systemd-analyze >/dev/null || skip "systemd-analyze is missing (package systemd)"
systemd-analyze security --help 2>/dev/null | grep -q -- '--offline' ||
	skip "systemd-analyze has no --offline (systemd < 250)"
[ -n "$daemon" ] && [ -x "$daemon" ] || skip "no toolcalld program given (TOOLCALLD)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolcalld-units.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# The units name /usr/sbin/toolcalld: point them at this build's program.
install_units() { # FROM_DIR TO_DIR
	mkdir -p "$2"
	for u in toolcalld.service toolcalld.socket; do
		sed "s#/usr/sbin/toolcalld#$daemon#" "$1/$u" >"$2/$u"
	done
}
install_units "$top/packaging" "$tmp/system"
install_units "$top/packaging/user" "$tmp/user"

# verify prints what it finds wrong and exits non-zero for errors; a
# warning exits 0, so any output fails the test too.
verify() { # LABEL ARGS...
	label=$1
	shift
	if ! systemd-analyze "$@" >"$tmp/verify.log" 2>&1 || [ -s "$tmp/verify.log" ]; then
		cat "$tmp/verify.log" >&2
		fail "systemd-analyze verify: $label"
	fi
	echo "verify $label: ok"
}
verify "system units" verify --man=no "$tmp/system/toolcalld.socket" "$tmp/system/toolcalld.service"
mkdir -m 0700 "$tmp/xdg"
# A user manager needs a runtime directory.
XDG_RUNTIME_DIR=$tmp/xdg verify "user units" --user verify --man=no "$tmp/user/toolcalld.socket" "$tmp/user/toolcalld.service"

# The multi-user drop-in, applied the way systemd applies drop-ins.
mkdir -p "$tmp/root/toolcalld.service.d"
cp "$tmp/system/toolcalld.service" "$tmp/system/toolcalld.socket" "$tmp/root/"
cp "$top/packaging/toolcalld-root.conf" "$tmp/root/toolcalld.service.d/root.conf"
verify "system units with the multi-user drop-in" verify --man=no "$tmp/root/toolcalld.socket" "$tmp/root/toolcalld.service"

# --threshold counts in tenths: 25 is an exposure of 2.5.
rc=0
systemd-analyze security --offline=yes --threshold=25 "$tmp/system/toolcalld.service" >"$tmp/security.log" 2>&1 || rc=$?
grep '✗' "$tmp/security.log" | sed 's/  */ /g'
exposure=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$tmp/security.log")
[ -n "$exposure" ] || { cat "$tmp/security.log" >&2; fail "systemd-analyze security printed no exposure level"; }
echo "toolcalld.service: exposure $exposure (at most 2.5)"
[ $rc -eq 0 ] || fail "toolcalld.service: exposure $exposure is above 2.5"
rc=0
systemd-analyze security --offline=yes "$tmp/root/toolcalld.service" >"$tmp/security.log" 2>&1 || rc=$?
echo "with the multi-user drop-in: exposure $(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$tmp/security.log") (not bounded)"
