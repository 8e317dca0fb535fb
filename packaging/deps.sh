#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Installs the Debian 12 packages toolcalld needs to build, test and run,
# when any is missing. Root runs apt-get directly; anyone else through sudo.
set -eu

pkgs="build-essential meson ninja-build pkg-config libev-dev libyajl-dev
libsystemd-dev check socat systemd json-schema-test-suite clang
libclang-rt-14-dev valgrind procps util-linux libseccomp-dev bubblewrap"

missing=""
for p in $pkgs; do
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
