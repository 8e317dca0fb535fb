#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Installs the Debian 12 packages that a make target needs, when any is
# missing. Root runs apt-get directly; anyone else through sudo.
#
#   sh packaging/deps.sh [PURPOSE...]     (default: build)
#
#   build    build and run the programs (make run, make install-user)
#   test     the test suites, the sanitizer build and the fuzzers (make build,
#            make check, make fuzz, make valgrind)
#   deb      the Debian package (make deb)
#
# One package per line, in the list of the purpose it serves.
set -eu

build_pkgs="
build-essential
meson
ninja-build
pkg-config
libev-dev
libyajl-dev
systemd
socat
libhiredis-dev
libseccomp-dev
libc-ares-dev
libhttp-parser-dev
"

test_pkgs="
check
json-schema-test-suite
clang
libclang-rt-14-dev
valgrind
procps
util-linux
redis-server
bubblewrap
ripgrep
git
"

deb_pkgs="
debhelper
devscripts
dpkg-dev
lintian
"

pkgs=""
[ $# -gt 0 ] || set -- build
for purpose in "$@"; do
	case $purpose in
	build) pkgs="$pkgs $build_pkgs" ;;
	test) pkgs="$pkgs $build_pkgs $test_pkgs" ;;
	deb) pkgs="$pkgs $build_pkgs $deb_pkgs" ;;
	*) echo "deps: unknown purpose '$purpose' (build, test, deb)" >&2; exit 2 ;;
	esac
done

missing=""
for p in $pkgs; do
	case " $missing " in *" $p "*) continue ;; esac
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
