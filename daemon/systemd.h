/* SPDX-License-Identifier: MIT */
/*
 * The few systemd interfaces the daemon speaks, written out rather than
 * linked from libsystemd: readiness and watchdog notifications
 * (sd_notify(3)), socket activation (sd_listen_fds(3)) and the journal's
 * native protocol. All are small, stable, documented wire protocols, and
 * libsystemd with the libraries it pulls in (gcrypt, lz4, zstd, xz) was a
 * quarter of the idle daemon's resident memory.
 */
#ifndef TC_DAEMON_SYSTEMD_H
#define TC_DAEMON_SYSTEMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/vm_sockets.h>

#include "proto/base/buf.h"

/* The first fd systemd passes (SD_LISTEN_FDS_START). */
#define SYSTEMD_LISTEN_FDS_START 3

/* A $NOTIFY_SOCKET address: a Unix datagram socket's path ("/...") or
 * abstract name ("@..."), or a virtual machine's manager over AF_VSOCK
 * ("vsock:CID:PORT", or "vsock-stream:", "vsock-dgram:",
 * "vsock-seqpacket:" to fix the socket type; type 0 for a bare "vsock:"). */
struct systemd_notify_address {
	union {
		struct sockaddr sa;
		struct sockaddr_un un;
		struct sockaddr_vm vm;
	} sa;
	socklen_t len;
	int type;
};
/* Parses name into *a: 0, or -EINVAL for an address sd_notify(3) would
 * not take (a vsock one without a CID or a port among them). */
int systemd_notify_address(const char *name, struct systemd_notify_address *a);
/* How long a notification over a vsock connection may wait for each of
 * connect, send and the manager's EOF, in seconds. */
#define SYSTEMD_NOTIFY_TIMEOUT_S 1
/* Sends state ("READY=1", ...) to $NOTIFY_SOCKET: 1 when sent, 0 when no
 * manager listens, a negative errno on failure. */
int systemd_notify(const char *state);
/* The number of sockets systemd passed this process (from fd 3 on), made
 * close-on-exec, with LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES unset: 0
 * when none, a negative errno when the variables are malformed. */
int systemd_listen_fds(void);
/* Whether fd is a listening Unix stream socket. */
bool systemd_is_listening_unix_stream(int fd);
/* Whether the manager asked for watchdog pings ($WATCHDOG_USEC, for this
 * process by $WATCHDOG_PID when set), and how often in *usec. */
bool systemd_watchdog_enabled(uint64_t *usec);

/* One field of a journal entry: "NAME" and its value (any bytes). */
struct journal_field {
	const char *name;
	const char *value;
	size_t len;
};
/* Appends the entry in the native protocol to out: NAME=value lines, or
 * for a value holding a newline NAME, its little-endian 64-bit length and
 * its bytes. */
void journal_format(const struct journal_field *f, size_t n, struct buf *out);
/* Sends the entry to the journal socket at path (NULL: journald's);
 * an entry too large for one datagram goes in a sealed memfd. */
int journal_send(const char *path, const struct journal_field *f, size_t n);

#endif
