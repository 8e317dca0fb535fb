#!/bin/sh
# SPDX-License-Identifier: MIT
#
# What `make install-user` runs: installs toolcalld for the current user
# alone, no root needed: the programs into ~/.local/bin, the man pages into
# ~/.local/share/man, the per-user units (packaging/user) into
# ~/.config/systemd/user, and ~/.config/toolcalld/toolcalld.json unless one
# exists. Then: systemctl --user enable --now toolcalld.socket.
#
#   sh packaging/install-user.sh [BUILD_DIR]        (default: build-run)
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-run}
daemon=$build/daemon/toolcalld
ctl=$(find "$build/daemon" -name toolcallctl -type f -perm -u+x | head -n 1)
if [ ! -x "$daemon" ] || [ -z "$ctl" ]; then
	echo "install-user: the programs are not built in $build (make build-run)" >&2
	exit 1
fi
[ -n "${HOME:-}" ] || { echo "install-user: HOME is not set" >&2; exit 1; }

bindir=$HOME/.local/bin
mandir=$HOME/.local/share/man
datadir=$HOME/.local/share/toolcalld
confdir=${XDG_CONFIG_HOME:-$HOME/.config}
unitdir=$confdir/systemd/user

install -D -m 0755 "$daemon" "$bindir/toolcalld"
install -D -m 0755 "$ctl" "$bindir/toolcallctl"
install -D -m 0644 "$top/packaging/toolcallctl.1" "$mandir/man1/toolcallctl.1"
install -D -m 0644 "$top/packaging/toolcalld.conf.5" "$mandir/man5/toolcalld.conf.5"
install -D -m 0644 "$top/packaging/toolcalld.8" "$mandir/man8/toolcalld.8"
install -D -m 0644 "$top/packaging/user/toolcalld.json" "$datadir/toolcalld-user.json"

# The units name /usr/sbin/toolcalld and /usr/share/toolcalld/: point
# them at the copies above (%h is the home directory for systemd).
mkdir -p "$unitdir"
for u in toolcalld.service toolcalld.socket; do
	sed -e 's#/usr/sbin/toolcalld#%h/.local/bin/toolcalld#' \
	    -e 's#/usr/share/toolcalld/#%h/.local/share/toolcalld/#' \
	    "$top/packaging/user/$u" >"$unitdir/$u.tmp"
	mv "$unitdir/$u.tmp" "$unitdir/$u"
done

config=$confdir/toolcalld/toolcalld.json
if [ -e "$config" ]; then
	echo "install-user: keeping $config"
else
	install -D -m 0644 "$top/packaging/user/toolcalld.json" "$config"
	echo "install-user: wrote $config"
fi

echo "install-user: installed $bindir/toolcalld, $bindir/toolcallctl and $unitdir/toolcalld.{socket,service}"
if systemctl --user daemon-reload 2>/dev/null; then
	echo "install-user: now run: systemctl --user enable --now toolcalld.socket"
else
	echo "install-user: no systemd user manager here; in a login session run:"
	echo "    systemctl --user daemon-reload && systemctl --user enable --now toolcalld.socket"
fi
case ":$PATH:" in *":$bindir:"*) ;; *) echo "install-user: add $bindir to your PATH" ;; esac
echo "install-user: the socket is \$XDG_RUNTIME_DIR/toolcalld.sock, the default of toolcallctl"
