#!/bin/sh
# SPDX-License-Identifier: MIT
# The layers call only the ones below.
#
# The daemon: no file but the server's own (server*.c) and main.c includes
# the server's life cycle (server.h, server_internal.h); the methods get
# what they need of it, admin/reload, as an operation (struct methods_ops).
#
# lib/: each module (a folder, or one of the files at lib/'s top) includes
# only modules of a lower rank, never one of its own rank or above; a
# module has at most one private header (*_internal.h), and no file
# outside the module's folder includes it but the module's own tests
# (tests/), which test it from within, and the few named in
# shared_private below. A new module is given its rank here.
#
# tools/: a tool reaches the file system only through the file job
# (lib/fsjob/fsjob.h), as the peer. Of lib/files it includes
# lib/files/workspace.h and lib/files/identity.h alone: never the
# workspace primitives (workspace_internal.h) nor the making of
# workspaces (workspace_root.h).
set -eu
root=${1:?usage: test_layers.sh SOURCE_ROOT}
bad=$(grep -l -E '^#include "daemon/server(_internal)?\.h"' "$root"/daemon/*.c |
	grep -v -E '/daemon/(server[^/]*|main)\.c$' || true)
if [ -n "$bad" ]; then
	echo "these include the server's life cycle from a layer below it:" >&2
	echo "$bad" >&2
	exit 1
fi

# The rank of each lib module, lowest first. lib/base/ is no module but
# the collection of basic utilities (loop, io pool, containers, audit log,
# OpenMetrics writer), each with its own header, as systemd's src/basic
# is: at rank 0, so that it includes nothing else of lib/.
ranks='
base 0			# the basic utilities: a header each
bind 0
errors 0
diff 1
glob 1
regex 1
ignore 2
schema 2
tool 3
files 4
registry 4
sandbox 5
session 5
child 6
events 6
fsjob 6
process 7
store 7
policy 7
hooks 7
dispatch 8
tasks 9
net 1
'

# "lib/dispatch/admit.c" -> dispatch; "lib/tool.h" -> tool.
module_of() {
	echo "$1" | sed -E 's#^lib/([^/]+)/.*#\1#; s#^lib/([^/.]+)\.[ch]$#\1#'
}

cd "$root"
fail=0
for f in $(find lib -name '*.[ch]' | sort); do
	m=$(module_of "$f")
	mr=$(echo "$ranks" | awk -v m="$m" '$1 == m { print $2 }')
	if [ -z "$mr" ]; then
		echo "$f: module '$m' has no rank in tests/unit/test_layers.sh" >&2
		fail=1
		continue
	fi
	for inc in $(sed -n -E 's#^[[:space:]]*\#[[:space:]]*include[[:space:]]+"(lib/[^"]+)".*#\1#p' "$f"); do
		t=$(module_of "$inc")
		[ "$t" = "$m" ] && continue
		tr=$(echo "$ranks" | awk -v m="$t" '$1 == m { print $2 }')
		if [ -z "$tr" ] || [ "$tr" -ge "$mr" ]; then
			echo "$f ($m, rank $mr) includes $inc ($t, rank ${tr:-none}): not a lower module" >&2
			fail=1
		fi
	done
done

# The private headers shared with a module above, and the folders that
# include them: the workspace primitives of lib/files with the file job,
# which runs them for tools as the peer, and with the dispatcher's checks
# before a call runs (admission, confirmation), which resolve its paths.
shared_private='
lib/files/workspace_internal.h lib/fsjob/
lib/files/workspace_internal.h lib/dispatch/
'

# Private headers, of lib/ and of the other parts alike: included from
# their own folder alone (and its tests), or as shared_private says.
for f in $(find lib daemon tools proto -name '*.[ch]' | sort); do
	for inc in $(sed -n -E 's#^[[:space:]]*\#[[:space:]]*include[[:space:]]+"([^"]+_internal\.h)".*#\1#p' "$f"); do
		shared=$(echo "$shared_private" | awk -v h="$inc" '$1 == h { print $2 }')
		ok=
		for d in $shared; do
			case "$f" in "$d"*) ok=1 ;; esac
		done
		[ -n "$ok" ] && continue
		case "$f" in
		"${inc%/*}"/*) ;;
		*)
			echo "$f includes $inc, private to ${inc%/*}/" >&2
			fail=1
			;;
		esac
	done
done
# Tools: of lib/files, the workspace as tools see it and whom work is
# done for; the file system through the file job alone.
for f in $(find tools -name '*.[ch]' | sort); do
	for inc in $(sed -n -E 's#^[[:space:]]*\#[[:space:]]*include[[:space:]]+"(lib/files/[^"]+)".*#\1#p' "$f"); do
		case "$inc" in
		lib/files/workspace.h | lib/files/identity.h) ;;
		*)
			echo "$f includes $inc: a tool reaches files through lib/fsjob/fsjob.h (of lib/files only workspace.h and identity.h)" >&2
			fail=1
			;;
		esac
	done
done
# One private header per module.
for d in lib/*/; do
	n=$(find "$d" -maxdepth 1 -name '*_internal.h' | wc -l)
	if [ "$n" -gt 1 ]; then
		echo "$d has $n private headers (*_internal.h): one per module" >&2
		fail=1
	fi
done
# Inside a module whose files call each other, its files in order, lowest
# first: a file calls only functions of the files before it (what must go
# up goes back as a result or through a callback handed down). A function
# is a definition at the start of a line that is not static; a call, its
# name anywhere in a file.
parts='
lib/store store_redis_lua.c store_redis_conn.c store_redis_end.c store_redis_claim.c store_redis_tasks.c store_redis.c
lib/dispatch stats.c outcome.c outcome_store.c circuit.c idem.c audit_call.c dispatch_fair.c admit.c confirm.c dispatch.c dispatch_stats.c dispatch_metrics.c
'
up=$(echo "$parts" | while read -r dir files; do
	[ -n "$dir" ] || continue
	below=''
	for f in $files; do
		[ -f "$dir/$f" ] || continue
		for fn in $(sed -n -E '/^static/d; s/^[a-z][a-z0-9_ ]*[ *]([a-z_][a-z0-9_]*)\(.*/\1/p' "$dir/$f"); do
			for b in $below; do
				if grep -q -w "$fn" "$dir/$b"; then
					echo "$dir/$b calls $fn of $f, a file above it in its module's order"
				fi
			done
		done
		below="$below $f"
	done
done)
if [ -n "$up" ]; then
	echo "$up" >&2
	fail=1
fi
[ "$fail" = 0 ] || exit 1
echo "layers: ok"
