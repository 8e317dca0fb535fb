#!/bin/sh
# SPDX-License-Identifier: MIT
# The layers test is not vacuous: on a small tree of its own it passes
# while every include points down, and fails on each kind of fault it is
# there to find (a module including one of its rank or above, a module
# without a rank, a private header included from outside its folder, two
# private headers in one module, a tool including lib/files beyond its
# one header, a private header shared with a folder not named).
set -eu
check=${1:?usage: test_layers_selftest.sh PATH_TO_test_layers.sh}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A tree whose includes all point down.
base() {
	rm -rf "$tmp/t"
	mkdir -p "$tmp/t/daemon" "$tmp/t/tools/mcp" "$tmp/t/proto" "$tmp/t/lib/base" "$tmp/t/lib/store" \
		"$tmp/t/lib/dispatch" "$tmp/t/lib/files" "$tmp/t/lib/fsjob"
	echo '#include "lib/base/map.h"' > "$tmp/t/lib/store/store.c"
	echo '#include "lib/store/store.h"' > "$tmp/t/lib/dispatch/dispatch.c"
	echo '#include "lib/dispatch/dispatch_internal.h"' > "$tmp/t/lib/dispatch/admit.c"
	echo '#include "lib/errors.h"' > "$tmp/t/lib/tool.h"
	echo '#include "tools/mcp/mcp_internal.h"' > "$tmp/t/tools/mcp/mcp.c"
	echo '#include "lib/dispatch/dispatch.h"' > "$tmp/t/daemon/main.c"
	echo '#include "lib/files/workspace_internal.h"' > "$tmp/t/lib/files/workspace.c"
	echo '#include "lib/files/workspace_internal.h"' > "$tmp/t/lib/fsjob/fsjob.c"
	printf '#include "lib/files/workspace.h"\n#include "lib/files/identity.h"\n' > "$tmp/t/tools/read_file.c"
}

# Runs the check on the tree; $1: "pass" or "fail", $2: what the case is.
expect() {
	if sh "$check" "$tmp/t" > "$tmp/out" 2>&1; then got=pass; else got=fail; fi
	if [ "$got" != "$1" ]; then
		echo "layers selftest: $2: expected $1, got $got" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
}

base
expect pass "includes that point down"

base
echo '#include "lib/dispatch/dispatch.h"' >> "$tmp/t/lib/store/store.c"
expect fail "a lower module including a higher one"

# Inside a module, a file calls only the files before it in the module's
# order (lib/dispatch: dispatch_fair.c before dispatch.c).
base
printf 'void exec_run(struct exec *e)\n{\n}\n' >> "$tmp/t/lib/dispatch/dispatch.c"
printf 'struct exec *fair_next(struct dispatcher *d)\n{\n\treturn 0;\n}\n' > "$tmp/t/lib/dispatch/dispatch_fair.c"
expect pass "a module's files calling down"
printf 'static void pump(void)\n{\n\texec_run(0);\n}\n' >> "$tmp/t/lib/dispatch/dispatch_fair.c"
expect fail "a module's file calling one above it"

base
echo '#include "lib/process/process.h"' >> "$tmp/t/lib/store/store.c"
expect fail "a module including one of its own rank"

base
mkdir -p "$tmp/t/lib/newmod"
echo '' > "$tmp/t/lib/newmod/x.c"
expect fail "a module without a rank"

base
echo '#include "lib/dispatch/dispatch_internal.h"' >> "$tmp/t/daemon/main.c"
expect fail "a private header included from outside its folder"

base
echo '#include "tools/mcp/mcp_internal.h"' >> "$tmp/t/tools/memory.c"
expect fail "a tools/ private header included from another folder"

base
touch "$tmp/t/lib/dispatch/dispatch_internal.h" "$tmp/t/lib/dispatch/admit_internal.h"
expect fail "two private headers in one module"

base
echo '#include "lib/files/workspace_internal.h"' >> "$tmp/t/tools/read_file.c"
expect fail "a tool including the workspace primitives"

base
echo '#include "lib/files/workspace_root.h"' >> "$tmp/t/tools/mcp/mcp.c"
expect fail "a tool including the making of workspaces"

base
echo '#include "lib/files/workspace_internal.h"' >> "$tmp/t/lib/store/store.c"
expect fail "a private header shared with a folder it is not shared with"

echo "layers selftest: ok"
