#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs every libFuzzer harness of a fuzz build for a bounded time.
#
#   sh tests/fuzz/run.sh BUILD_DIR [SECONDS_PER_HARNESS]
#
# Each harness first replays its committed inputs (tests/fuzz/corpus/NAME
# and tests/fuzz/regress/NAME), then fuzzes from them. New inputs go to
# BUILD_DIR/fuzz-corpus/NAME, never into the committed seeds; crashes,
# leaks and timeouts are saved under BUILD_DIR/fuzz-artifacts/NAME/. A crash
# becomes a regression test by copying its file to tests/fuzz/regress/NAME/
# (the replay tests of `make check` run that directory).
# Exits non-zero when any harness failed.
set -u

build=${1:?usage: run.sh BUILD_DIR [SECONDS]}
seconds=${2:-20}
src=$(cd "$(dirname "$0")" && pwd)

found=0
failed=""
for exe in "$build"/tests/fuzz/fuzz_*; do
	[ -f "$exe" ] && [ -x "$exe" ] || continue
	name=${exe##*/fuzz_}
	case $name in replay_*) continue ;; esac
	found=1
	work="$build/fuzz-corpus/$name"
	art="$build/fuzz-artifacts/$name"
	mkdir -p "$work" "$art"
	seeds="$src/corpus/$name"
	regress="$src/regress/$name"
	dirs="$work"
	[ -d "$seeds" ] && dirs="$dirs $seeds"
	[ -d "$regress" ] && dirs="$dirs $regress"
	dict=""
	[ -f "$src/$name.dict" ] && dict="-dict=$src/$name.dict"

	echo "== fuzz_$name: ${seconds}s from $dirs"
	# -max_len: big enough for the seeds; -timeout: a hang is a bug; the
	# RSS limit catches unbounded allocation.
	# shellcheck disable=SC2086
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	"$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
		-print_final_stats=1 -artifact_prefix="$art/" $dict $dirs \
		>"$build/fuzz-$name.log" 2>&1
	status=$?
	tail -n 12 "$build/fuzz-$name.log" | grep -E '^(stat::|Done|#[0-9]+.*DONE|INFO: a corpus)' || true
	if [ $status -ne 0 ]; then
		failed="$failed $name"
		echo "!! fuzz_$name failed (exit $status); log: $build/fuzz-$name.log"
		grep -m1 -E 'ERROR: |SUMMARY: |fuzz_[a-z]+: ' "$build/fuzz-$name.log" || true
		ls "$art" | sed "s|^|   artifact: $art/|"
	fi
done

if [ $found -eq 0 ]; then
	echo "no harnesses in $build/tests/fuzz (configure with CC=clang -Dfuzz=true)" >&2
	exit 1
fi
if [ -n "$failed" ]; then
	echo "fuzzing failed:$failed"
	echo "to keep a crash as a regression test: cp ARTIFACT tests/fuzz/regress/NAME/"
	exit 1
fi
echo "fuzzing: no failures"
