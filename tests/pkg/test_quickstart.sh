#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The README's quick start from a fresh clone: `make run` in a clone of the
# committed tree, timed from its start until the daemon answers a ping on
# its socket; then the daemon is stopped (SIGINT, as Ctrl-C). The time is
# printed, not asserted (it depends on the machine and its load). Fails
# only when `make run` never serves. Skips (77) without git or make.
#
#   sh tests/pkg/test_quickstart.sh        (meson test --suite pkg)
set -eu

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

top=${TC_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
for p in git make setsid; do
	command -v "$p" >/dev/null || skip "$p is missing"
done
git -C "$top" rev-parse --git-dir >/dev/null 2>&1 || skip "$top is not a git checkout"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolcalld-quickstart.XXXXXX")
run_pid=""
cleanup() {
	status=$?
	if [ -n "$run_pid" ]; then
		# No "--": dash's kill takes none (it then signalled nothing
		# and left the daemon running).
		kill -INT "-$run_pid" 2>/dev/null || true
		i=0
		while kill -0 "-$run_pid" 2>/dev/null && [ $i -lt 150 ]; do i=$((i + 1)); sleep 0.1; done
		if kill -0 "-$run_pid" 2>/dev/null; then
			echo "FAIL: make run's processes did not stop within 15 s of Ctrl-C (SIGINT)" >&2
			[ "$status" -ne 0 ] || status=1
			kill -KILL "-$run_pid" 2>/dev/null || true
		fi
	fi
	rm -rf "$tmp"
	exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

git clone -q "$top" "$tmp/clone"
sock=$tmp/toolcalld.sock
start=$(date +%s.%N)
# Its own process group, so that make, ninja and the daemon stop together.
(cd "$tmp/clone" && TOOLCALLD_SOCKET=$sock exec setsid make run) >"$tmp/run.log" 2>&1 &
run_pid=$!

ctl=$tmp/clone/build-run/bin/toolcallctl
deadline=$(( $(date +%s) + 900 ))
until [ -x "$ctl" ] && "$ctl" -s "$sock" -t 1000 ping >/dev/null 2>&1; do
	if ! kill -0 "$run_pid" 2>/dev/null; then
		tail -n 40 "$tmp/run.log" >&2
		fail "make run ended before serving"
	fi
	[ "$(date +%s)" -lt $deadline ] || { tail -n 40 "$tmp/run.log" >&2; fail "make run did not serve within 15 minutes"; }
	sleep 0.2
done
end=$(date +%s.%N)
steps=$(ninja -C "$tmp/clone/build-run" -t commands 2>/dev/null | wc -l)
echo "quickstart: make run served $sock $(awk "BEGIN { printf \"%.1f\", $end - $start }") s after it started" \
	"($steps build steps, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
"$ctl" -s "$sock" list >/dev/null || fail "toolcallctl list failed on the quick start's daemon"
