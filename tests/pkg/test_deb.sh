#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The Debian package as an administrator meets it: built by packaging/deb.sh
# (lintian without errors), installed with dpkg -i, removed with dpkg -r and
# purged with dpkg -P, on a machine where systemd need not be PID 1 (CI runs
# it as root in a container). Asserts the files, the toolcalld user and its
# directories, the socket unit enabled and the service not, that
# `toolcalld --check-config` passes on the installed config as root and as
# toolcalld, that the installed daemon serves as toolcalld, and what remove
# and purge leave. Whatever happens, the package, the user and the
# directories it made are gone afterwards (unless they were there before).
# Skips (77) without root or without the packaging tools.
#
#   sh tests/pkg/test_deb.sh            (meson test --suite pkg)
#   TC_DEB=build-deb/toolcalld_0.1.0_amd64.deb sh tests/pkg/test_deb.sh
#                                       (a package built before)
set -eu

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }

[ "$(id -u)" -eq 0 ] || skip "installs a package: needs root"
for p in dpkg-buildpackage dh lintian systemd-sysusers systemd-tmpfiles runuser setpriv flock; do
	command -v "$p" >/dev/null || skip "$p is missing (sh packaging/deps.sh deb)"
done
top=${TC_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}

# One run at a time per machine: they would install the same package.
exec 9>"${TMPDIR:-/tmp}/toolcalld-pkg-test.lock"
flock -w 1800 9 || skip "another run of this test holds ${TMPDIR:-/tmp}/toolcalld-pkg-test.lock"
installed() { dpkg-query -W -f='${db:Status-Status}' toolcalld 2>/dev/null | grep -qv '^not-installed$'; }
installed && skip "a toolcalld package is installed on this machine already; leaving it alone"

had_user=no had_group=no
getent passwd toolcalld >/dev/null && had_user=yes
getent group toolcalld >/dev/null && had_group=yes
had_dirs=""
for d in /srv/toolcalld /var/log/toolcalld /run/toolcalld; do
	[ -e "$d" ] && had_dirs="$had_dirs $d"
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolcalld-pkgtest.XXXXXX")
daemon_pid=""

cleanup() {
	status=$?
	set +e
	[ -n "$daemon_pid" ] && kill -KILL "$daemon_pid" 2>/dev/null
	if installed; then
		echo "cleanup: purging the package"
		dpkg -P toolcalld >/dev/null 2>&1 || echo "cleanup: dpkg -P failed" >&2
	fi
	if [ $had_user = no ] && getent passwd toolcalld >/dev/null; then
		userdel toolcalld 2>/dev/null || echo "cleanup: userdel toolcalld failed" >&2
	fi
	if [ $had_group = no ] && getent group toolcalld >/dev/null; then
		groupdel toolcalld 2>/dev/null || echo "cleanup: groupdel toolcalld failed" >&2
	fi
	for d in /srv/toolcalld /var/log/toolcalld /run/toolcalld; do
		case " $had_dirs " in *" $d "*) ;; *) rm -rf "$d" ;; esac
	done
	rm -rf "$tmp"
	exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${TC_DEB:-}" ]; then
	deb=$TC_DEB
else
	step "build (packaging/deb.sh)"
	deb=$(sh "$top/packaging/deb.sh" "$tmp/out") || fail "make deb failed"
fi
[ -f "$deb" ] || fail "packaging/deb.sh printed '$deb', which is not a file"

step "dpkg -i $(basename "$deb")"
dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i failed"; }

for f in /usr/sbin/toolcalld /usr/bin/toolcallctl; do
	[ -x "$f" ] || fail "$f is not installed"
done
for f in /usr/share/man/man8/toolcalld.8.gz /usr/share/man/man1/toolcallctl.1.gz \
	/usr/share/man/man5/toolcalld.conf.5.gz \
	/lib/systemd/system/toolcalld.service /lib/systemd/system/toolcalld.socket \
	/usr/lib/systemd/user/toolcalld.service /usr/lib/systemd/user/toolcalld.socket \
	/usr/lib/sysusers.d/toolcalld.conf /usr/lib/tmpfiles.d/toolcalld.conf \
	/etc/logrotate.d/toolcalld /etc/toolcalld/toolcalld.json \
	/etc/toolcalld/tools.d/git_status.json /usr/share/toolcalld/toolcalld-user.json \
	/usr/share/doc/toolcalld/examples/root.conf /usr/share/doc/toolcalld/copyright; do
	[ -f "$f" ] || fail "$f is not installed"
done
conffiles=$(dpkg-query -W -f='${Conffiles}\n' toolcalld)
for f in /etc/toolcalld/toolcalld.json /etc/toolcalld/tools.d/git_status.json /etc/logrotate.d/toolcalld; do
	echo "$conffiles" | grep -q " $f " || fail "$f is not a conffile"
done
/usr/sbin/toolcalld --version | grep -q '^toolcalld ' || fail "toolcalld --version"

step "user, group, directories"
pw=$(getent passwd toolcalld) || fail "no toolcalld user"
uid=$(echo "$pw" | cut -d: -f3)
[ "$uid" -lt 1000 ] || fail "toolcalld is not a system user (uid $uid)"
[ "$(echo "$pw" | cut -d: -f6)" = /srv/toolcalld ] || fail "home of toolcalld: $pw"
getent group toolcalld >/dev/null || fail "no toolcalld group"
[ "$(id -gn toolcalld)" = toolcalld ] || fail "toolcalld's primary group is $(id -gn toolcalld)"
for d in /run/toolcalld /var/log/toolcalld /srv/toolcalld; do
	[ -d "$d" ] || fail "$d was not created"
	[ "$(stat -c %U:%G "$d")" = toolcalld:toolcalld ] || fail "$d belongs to $(stat -c %U:%G "$d")"
done

step "units: the socket enabled, the service not"
[ -L /etc/systemd/system/sockets.target.wants/toolcalld.socket ] ||
	fail "toolcalld.socket is not enabled"
ls /etc/systemd/system/*.wants/toolcalld.service >/dev/null 2>&1 &&
	fail "toolcalld.service is enabled: the socket should start it"
grep -q '^User=toolcalld$' /lib/systemd/system/toolcalld.service || fail "the service does not run as toolcalld"

step "toolcalld --check-config on the installed config"
# As a service would run it: no XDG_RUNTIME_DIR, no TOOLCALLD_SOCKET; the
# socket is then /run/toolcalld/toolcalld.sock for both.
env -u XDG_RUNTIME_DIR -u TOOLCALLD_SOCKET \
	/usr/sbin/toolcalld --check-config --config /etc/toolcalld/toolcalld.json ||
	fail "--check-config fails as root"
out=$(env -u XDG_RUNTIME_DIR -u TOOLCALLD_SOCKET runuser -u toolcalld -- \
	/usr/sbin/toolcalld --check-config --config /etc/toolcalld/toolcalld.json) ||
	fail "--check-config fails as toolcalld"
echo "$out"
echo "$out" | grep -qx 'socket: /run/toolcalld/toolcalld.sock' ||
	fail "toolcalld would not listen on /run/toolcalld/toolcalld.sock"

if command -v logrotate >/dev/null; then
	step "logrotate -d"
	logrotate -d /etc/logrotate.d/toolcalld >"$tmp/logrotate.log" 2>&1 ||
		{ cat "$tmp/logrotate.log"; fail "logrotate refuses /etc/logrotate.d/toolcalld"; }
fi

step "the installed daemon serves as toolcalld"
sock=/run/toolcalld/pkgtest-$$.sock
# setpriv execs the daemon (runuser would stay its parent and take the signal).
setpriv --reuid toolcalld --regid toolcalld --init-groups \
	/usr/sbin/toolcalld --config /etc/toolcalld/toolcalld.json \
	--socket "$sock" >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
i=0
until /usr/bin/toolcallctl -s "$sock" -t 1000 ping >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -ge 100 ] || ! kill -0 "$daemon_pid" 2>/dev/null; then
		cat "$tmp/daemon.log"
		fail "the installed daemon does not answer on $sock"
	fi
	sleep 0.1
done
out=$(/usr/bin/toolcallctl -s "$sock" call write_file '{"path":"pkgtest.txt","content":"ok"}' 2>&1) || true
# write_file asks for confirmation and nobody approves here: what matters
# is that the daemon answered; the workspace's ownership is checked above.
echo "$out" | grep -q . || fail "no answer to write_file"
kill -TERM "$daemon_pid"
rc=0
wait "$daemon_pid" || rc=$?
[ $rc -eq 0 ] || { cat "$tmp/daemon.log"; fail "the daemon exited with $rc on SIGTERM"; }
daemon_pid=""
[ ! -e "$sock" ] || fail "the daemon left $sock behind"

step "dpkg -r"
dpkg -r toolcalld >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -r failed"; }
[ "$(dpkg-query -W -f='${db:Status-Status}' toolcalld)" = config-files ] ||
	fail "after dpkg -r the package is $(dpkg-query -W -f='${db:Status-Status}' toolcalld)"
for f in /usr/sbin/toolcalld /usr/bin/toolcallctl /lib/systemd/system/toolcalld.service; do
	[ ! -e "$f" ] || fail "$f is still there after dpkg -r"
done
[ -f /etc/toolcalld/toolcalld.json ] || fail "dpkg -r removed the config (a conffile)"

step "dpkg -P"
dpkg -P toolcalld >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -P failed"; }
installed && fail "the package is still known to dpkg after dpkg -P"
for f in /etc/toolcalld /etc/logrotate.d/toolcalld /var/log/toolcalld \
	/etc/systemd/system/sockets.target.wants/toolcalld.socket; do
	[ ! -e "$f" ] && [ ! -L "$f" ] || fail "$f is still there after dpkg -P"
done
# Debian keeps system users on purge (files may still be theirs).
getent passwd toolcalld >/dev/null || fail "dpkg -P removed the toolcalld user"
echo "OK: built, installed, served, removed and purged"
