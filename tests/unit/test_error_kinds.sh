#!/bin/sh
# SPDX-License-Identifier: MIT
# Every error kind the daemon emits is one of the closed set (CONTRACT §4).
#
# The table of lib/errors.c must hold exactly the set, and every "kind"
# written as a literal anywhere in the programs (jgen_kv_str(g, "kind",
# "x") or a ready-made "{\"kind\":\"x\"}" data text) must be one of the
# table's, or of the few named below with why: a kind is otherwise
# written from the table (tc_kind_name()), which holds nothing else.
set -eu
root=${1:?usage: test_error_kinds.sh SOURCE_ROOT}

want='ok
not_found
validation_error
idempotency_conflict
permission_denied
user_denied
confirmation_timeout
timeout
transient
execution_error
cancelled
budget_exceeded
circuit_open
overloaded
internal'

# "kind" members that are no error kind, each with its reason.
others='
duplicate_id		# CONTRACT §2: a request id still in flight (-32600, not a call error)
tool			# the kind of a confirmation request (a tool call), not of an error
network.connect		# the kind of a confirmation request (a connection to allow)
memory			# the kind of store in admin/stats
redis			# the kind of store in admin/stats
'
others=$(printf '%s\n' "$others" | sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d')

table=$(sed -n 's/^[[:space:]]*\[TC_[A-Z_]*\][[:space:]]*=[[:space:]]*{[[:space:]]*"\([a-z_]*\)".*/\1/p' \
	"$root/lib/errors.c")
if [ "$table" != "$want" ]; then
	echo "lib/errors.c's kinds are not the closed set of CONTRACT §4:" >&2
	printf 'have:\n%s\nwant:\n%s\n' "$table" "$want" >&2
	exit 1
fi

# Every literal kind the programs write, as FILE:LINE:KIND: a member
# written by jgen_kv_str(…, "kind", "x") or held in a data text
# "{\"kind\":\"x\"…}".
found=$(cd "$root" && grep -rn -o -E 'jgen_kv_str\([a-z_>-]+, "kind", "[^"]*"|\\"kind\\":\\"[^\\"]*\\"' \
	--include='*.c' --include='*.h' daemon lib tools proto |
	sed -E 's/^([^:]*:[0-9]+):.*"kind(", "|\\":\\")([^"\\]*).*$/\1:\3/')
[ -n "$found" ] || { echo "no literal kind found: the pattern is broken" >&2; exit 1; }

allowed=$(printf '%s\n%s\n' "$table" "$others")
bad=$(printf '%s\n' "$found" | while IFS= read -r hit; do
	printf '%s\n' "$allowed" | grep -qx -e "${hit##*:}" || printf '%s\n' "$hit"
done)
if [ -n "$bad" ]; then
	echo "kinds outside CONTRACT §4's closed set (FILE:LINE:KIND):" >&2
	printf '%s\n' "$bad" >&2
	exit 1
fi
echo "ok: $(printf '%s\n' "$found" | wc -l) literal kinds, all of the closed set"
