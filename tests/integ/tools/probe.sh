#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A "command" tool body for the integration tests: records when it starts
# and ends, sleeps, and exits with the status it is given.
#
#   probe.sh LOG TAG SECONDS STATUS
#
# Appends "start TAG NS" and, unless killed first, "end TAG NS" to LOG (NS:
# wall-clock nanoseconds; one short line per write, so concurrent runs
# appending to one log do not interleave), prints "ran TAG" on stdout,
# and exits with STATUS (75 asks the dispatcher for a retry).
log=$1
tag=$2
secs=$3
status=$4
echo "start $tag $(date +%s%N)" >>"$log"
if [ "$secs" != 0 ]; then
	sleep "$secs"
fi
echo "end $tag $(date +%s%N)" >>"$log"
echo "ran $tag"
if [ "$status" != 0 ]; then
	echo "probe $tag failing with status $status" >&2
fi
exit "$status"
