#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Prints one closing line for `make check`, counted from meson's test logs
# of the build directories given: "check: N passed, N failed, N skipped".
# A program whose every case skipped exits 77 and is one meson SKIP; cases
# skipped inside a program that passed are counted from the line
# tests/unit/check_main.h prints ("check_main: N of M cases skipped").
set -eu
pass=0 fail=0 skip=0 cases=0
for dir in "$@"; do
	log="$dir/meson-logs/testlog.json"
	[ -f "$log" ] || continue
	p=$(grep -c '"result": "OK"' "$log" || true)
	f=$(grep -c -E '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
	s=$(grep -c '"result": "SKIP"' "$log" || true)
	c=$(grep -o 'check_main: [0-9]* of [0-9]* cases skipped' "$log" |
		awk '{ n += $2 } END { print n + 0 }')
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s)) cases=$((cases + c))
done
echo "check: $pass passed, $fail failed, $skip skipped ($cases cases skipped inside passing programs)"
[ "$fail" -eq 0 ]
