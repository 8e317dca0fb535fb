/* SPDX-License-Identifier: MIT */
/*
 * sd_notify, socket activation and the journal's native protocol, as
 * systemd documents them (sd_notify(3), sd_listen_fds(3),
 * systemd.io/JOURNAL_NATIVE_PROTOCOL): see daemon/systemd.h.
 */
#include "daemon/systemd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <linux/vm_sockets.h>
#include <unistd.h>

#include "proto/base/util.h"

/* Parses a whole decimal number of at most max. */
static bool parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return false;
	*ret = v;
	return true;
}

/* Fills sa with a Unix socket address: a path, or an abstract name for
 * one starting with '@'. Returns the address's length, 0 if unusable. */
static socklen_t unix_address(const char *name, struct sockaddr_un *sa)
{
	size_t n = strlen(name);
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n < 2 || n >= sizeof(sa->sun_path) || (name[0] != '/' && name[0] != '@'))
		return 0;
	memcpy(sa->sun_path, name, n);
	if (name[0] == '@') {
		sa->sun_path[0] = '\0';
		return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	}
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
}

int systemd_notify_address(const char *name, struct systemd_notify_address *a)
{
	memset(a, 0, sizeof(*a));
	static const struct {
		const char *prefix;
		int type;
	} vsock[] = {
		{ "vsock:", 0 }, { "vsock-stream:", SOCK_STREAM },
		{ "vsock-dgram:", SOCK_DGRAM }, { "vsock-seqpacket:", SOCK_SEQPACKET },
	};
	for (size_t i = 0; i < sizeof(vsock) / sizeof(vsock[0]); i++) {
		size_t n = strlen(vsock[i].prefix);
		if (strncmp(name, vsock[i].prefix, n) != 0)
			continue;
		/* CID:PORT, both decimal; a notification needs a CID (no
		 * VMADDR_CID_ANY, which only means "any" to bind). */
		const char *cid = name + n, *colon = strchr(cid, ':');
		if (!colon || colon == cid || colon - cid > 10)
			return -EINVAL;
		char c[11];
		memcpy(c, cid, (size_t)(colon - cid));
		c[colon - cid] = '\0';
		uint64_t cv, pv;
		if (!parse_u64(c, UINT32_MAX - 1, &cv) || !parse_u64(colon + 1, UINT32_MAX, &pv))
			return -EINVAL;
		a->sa.vm.svm_family = AF_VSOCK;
		a->sa.vm.svm_cid = (unsigned)cv;
		a->sa.vm.svm_port = (unsigned)pv;
		a->len = sizeof(a->sa.vm);
		a->type = vsock[i].type;
		return 0;
	}
	a->len = unix_address(name, &a->sa.un);
	a->type = SOCK_DGRAM;
	return a->len ? 0 : -EINVAL;
}

/* Opens the socket for a: of its type, or for a bare "vsock:" a datagram
 * one and, where the transport has none (QEMU's: ENODEV), a seqpacket or
 * a stream one, as sd_notify(3) does. Sets *type to the one opened. */
static int notify_socket_open(const struct systemd_notify_address *a, int *type)
{
	*type = a->type ? a->type : SOCK_DGRAM;
	int fd = socket(a->sa.sa.sa_family, *type | SOCK_CLOEXEC, 0);
	if (fd >= 0 || a->type || (errno != ENODEV && errno != EOPNOTSUPP &&
				   errno != ESOCKTNOSUPPORT && errno != EPROTONOSUPPORT))
		return fd < 0 ? -errno : fd;
	*type = SOCK_SEQPACKET;
	fd = socket(AF_VSOCK, *type | SOCK_CLOEXEC, 0);
	if (fd < 0 && errno != ENODEV && errno != EOPNOTSUPP && errno != ESOCKTNOSUPPORT)
		return -errno;
	if (fd < 0) {
		*type = SOCK_STREAM;
		fd = socket(AF_VSOCK, *type | SOCK_CLOEXEC, 0);
	}
	return fd < 0 ? -errno : fd;
}

int systemd_notify(const char *state)
{
	const char *name = getenv("NOTIFY_SOCKET");
	if (!name || !*name)
		return 0;
	struct systemd_notify_address a;
	int r = systemd_notify_address(name, &a);
	if (r < 0)
		return r;
	int type;
	int fd = notify_socket_open(&a, &type);
	if (fd < 0)
		return fd;
	size_t len = strlen(state);
	ssize_t k;
	if (type == SOCK_DGRAM) {
		k = sendto(fd, state, len, MSG_NOSIGNAL, &a.sa.sa, a.len);
		r = k < 0 ? -errno : 1;
		goto out;
	}
	/* A connection over vsock: the message, then our end closed, then the
	 * manager's EOF, which says it has read the message. The daemon calls
	 * this on its loop, so every step is bounded by NOTIFY_TIMEOUT_S. */
	struct timeval tv = { .tv_sec = SYSTEMD_NOTIFY_TIMEOUT_S };
	(void)setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_CONNECT_TIMEOUT, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, &a.sa.sa, a.len) < 0) {
		r = -errno;
		goto out;
	}
	for (size_t off = 0; off < len; off += (size_t)k) {
		k = send(fd, state + off, len - off, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR) {
			k = 0;
			continue;
		}
		if (k <= 0 || (type == SOCK_SEQPACKET && (size_t)k != len)) {
			r = k < 0 ? -errno : -EIO;
			goto out;
		}
	}
	char c;
	if (shutdown(fd, SHUT_WR) < 0) {
		r = -errno;
		goto out;
	}
	k = recv(fd, &c, 1, 0);
	r = k < 0 ? -errno : k > 0 ? -EPROTO : 1;
out:
	close(fd);
	return r;
}

int systemd_listen_fds(void)
{
	uint64_t pid, n;
	int r = 0;
	if (!parse_u64(getenv("LISTEN_PID"), INT_MAX, &pid) || (pid_t)pid != getpid())
		goto out;
	if (!parse_u64(getenv("LISTEN_FDS"), INT_MAX - SYSTEMD_LISTEN_FDS_START, &n)) {
		r = -EINVAL;
		goto out;
	}
	for (int fd = SYSTEMD_LISTEN_FDS_START; fd < SYSTEMD_LISTEN_FDS_START + (int)n; fd++) {
		int flags = fcntl(fd, F_GETFD);
		if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
			r = -errno;
			goto out;
		}
	}
	r = (int)n;
out:
	/* Not for the children. */
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return r;
}

bool systemd_is_listening_unix_stream(int fd)
{
	struct stat st;
	int type = 0, listening = 0;
	socklen_t l1 = sizeof(type), l2 = sizeof(listening);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
	       getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) == 0 && type == SOCK_STREAM &&
	       getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l2) == 0 && listening &&
	       getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 && sl >= sizeof(sa_family_t) &&
	       ss.ss_family == AF_UNIX;
}

bool systemd_watchdog_enabled(uint64_t *usec)
{
	uint64_t v, pid;
	if (!parse_u64(getenv("WATCHDOG_USEC"), UINT64_MAX - 1, &v) || v == 0)
		return false;
	const char *p = getenv("WATCHDOG_PID");
	if (p && (!parse_u64(p, INT_MAX, &pid) || (pid_t)pid != getpid()))
		return false;
	*usec = v;
	return true;
}

void journal_format(const struct journal_field *f, size_t n, struct buf *out)
{
	for (size_t i = 0; i < n; i++) {
		size_t name = strlen(f[i].name);
		buf_append(out, f[i].name, name);
		if (!memchr(f[i].value, '\n', f[i].len)) {
			buf_putc(out, '=');
		} else {
			buf_putc(out, '\n');
			uint64_t len = f[i].len;
			unsigned char le[8];
			for (int b = 0; b < 8; b++)
				le[b] = (unsigned char)(len >> (8 * b));
			buf_append(out, le, sizeof(le));
		}
		buf_append(out, f[i].value, f[i].len);
		buf_putc(out, '\n');
	}
}

/* Sends an entry too large for a datagram: in a sealed memfd, passed. */
static int journal_send_memfd(int fd, const struct sockaddr_un *sa, socklen_t len, const struct buf *entry)
{
	int mfd = memfd_create("journal-data", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -errno;
	int r = 0;
	const char *p = buf_head(entry);
	size_t left = buf_size(entry);
	while (left > 0) {
		ssize_t k = write(mfd, p, left);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			r = k < 0 ? -errno : -EIO;
			goto out;
		}
		p += k;
		left -= (size_t)k;
	}
	if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		r = -errno;
		goto out;
	}
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} control = {0};
	struct msghdr mh = {
		.msg_name = (void *)sa, .msg_namelen = len,
		.msg_control = &control, .msg_controllen = sizeof(control),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &mfd, sizeof(int));
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0)
		r = -errno;
out:
	close(mfd);
	return r;
}

int journal_send(const char *path, const struct journal_field *f, size_t n)
{
	struct sockaddr_un sa;
	socklen_t len = unix_address(path ? path : "/run/systemd/journal/socket", &sa);
	if (!len)
		return -EINVAL;
	_cleanup_(buf_free) struct buf entry = {0};
	journal_format(f, n, &entry);
	/* One socket for every entry, made at the first (by whichever
	 * thread gets there first). */
	static int shared = -1;
	int fd = __atomic_load_n(&shared, __ATOMIC_ACQUIRE);
	if (fd < 0) {
		int mine = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (mine < 0)
			return -errno;
		int expected = -1;
		if (__atomic_compare_exchange_n(&shared, &expected, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			fd = mine;
		} else {
			close(mine);
			fd = expected;
		}
	}
	if (sendto(fd, buf_head(&entry), buf_size(&entry), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) >= 0)
		return 0;
	int r = -errno;
	if (r == -EMSGSIZE || r == -ENOBUFS)
		r = journal_send_memfd(fd, &sa, len, &entry);
	return r;
}
