#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Prints one closing line for `make check`, counted from meson's test logs
# of the build directories given: "check: N passed, N failed, N skipped".
set -eu
pass=0 fail=0 skip=0
for dir in "$@"; do
	log="$dir/meson-logs/testlog.json"
	[ -f "$log" ] || continue
	p=$(grep -c '"result": "OK"' "$log" || true)
	f=$(grep -c -E '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
	s=$(grep -c '"result": "SKIP"' "$log" || true)
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
echo "check: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
