#!/bin/sh
# SPDX-License-Identifier: MIT
#
# What `make deb` runs: builds the Debian package from the source tree in a
# temporary copy, with packaging/debian copied into place there (the tree
# itself never gets a debian/ directory), checks it with lintian (errors
# fail the build, warnings are shown), and leaves the .deb in OUT_DIR.
#
#   sh packaging/deb.sh [OUT_DIR]        (default: build-deb)
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-build-deb}
case $out in /*) ;; *) out=$top/$out ;; esac

for p in dpkg-buildpackage dh lintian; do
	command -v "$p" >/dev/null || { echo "deb: $p is missing (sh packaging/deps.sh deb)" >&2; exit 1; }
done

version=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" "$top/meson.build" | head -n 1)
debversion=$(sed -n '1s/^toolcalld (\([^)]*\)).*/\1/p' "$top/packaging/debian/changelog")
if [ "$version" != "$debversion" ]; then
	echo "deb: meson.build says $version but packaging/debian/changelog says $debversion" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolcalld-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
stage=$tmp/toolcalld-$version
mkdir "$stage"

# The files of the tree as it is now (committed or not, ignored ones left
# out), or everything but build directories outside a git checkout.
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$top" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | tar -xf - -C "$stage"
else
	(cd "$top" && tar --exclude='./build*' --exclude='./debian' -cf - .) | tar -xf - -C "$stage"
fi
cp -R "$top/packaging/debian" "$stage/debian"

echo "deb: building toolcalld $version in $stage" >&2
(cd "$stage" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
	dpkg-buildpackage -b -us -uc >"$tmp/build.log" 2>&1) || {
	tail -n 60 "$tmp/build.log" >&2
	echo "deb: dpkg-buildpackage failed (the last lines of its log are above)" >&2
	exit 1
}

deb=$(ls "$tmp"/toolcalld_"$version"_*.deb)
lintian --fail-on error "$deb" >"$tmp/lintian.log" 2>&1 || {
	cat "$tmp/lintian.log" >&2
	echo "deb: lintian reports errors" >&2
	exit 1
}
grep -v "running with root privileges" "$tmp/lintian.log" | sed "s/^/lintian: /" >&2 || true

mkdir -p "$out"
cp "$deb" "$out/"
echo "$out/$(basename "$deb")"
