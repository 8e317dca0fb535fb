/* SPDX-License-Identifier: MIT */
/*
 * What a tool without network tried to reach, seen by the daemon rather
 * than guessed from the child's stderr: the seccomp program a spawner
 * loads for children without network (seccomp.c) hands socket() of
 * AF_INET and AF_INET6, and connect() and sendto() with an address of
 * the network's length, to the daemon (SECCOMP_RET_USER_NOTIF), through one listener
 * per spawner (SECCOMP_FILTER_FLAG_NEW_LISTENER), passed to the daemon
 * when the spawner starts and watched here on the loop. A child started
 * without a spawner loads the same program (seccomp_notes_prog()) as the
 * last step before its exec, with a listener of its own that it sends
 * to the daemon (lib/child/child_spawn.c): one per such call, as long as
 * its tree lives; with the table full (sandbox_netnotif_room()) the
 * child keeps the plain program, counted.
 *
 * Enforcement stays the filter's: such a child never holds a socket of
 * the network's families. Its socket() of AF_INET or AF_INET6 is answered
 * (SECCOMP_IOCTL_NOTIF_ADDFD) with an AF_UNIX socket of the same type,
 * only so that the program goes on to say where it meant to go; a real
 * AF_INET socket in an empty network namespace was tried and left out:
 * it would open the kernel's network code to the child (what §10's "no
 * AF_INET sockets" closes) and one namespace shared by every call would
 * let calls of two users signal each other through its ports. That
 * connect() (or sendto()) is read from the child's memory, recorded
 * ("connect to 1.1.1.1:80") for the call whose cgroup the notifying task
 * is in (or whose child it descends from), and refused (ENETUNREACH)
 * when its address is AF_INET or AF_INET6; any other is let through
 * (SECCOMP_USER_NOTIF_FLAG_CONTINUE), which grants nothing: the kernel
 * then does what it would have done without this filter, on an AF_UNIX
 * socket. A call that opened such sockets but named no destination (a
 * resolver gives up where it cannot set IP_RECVERR) is told "opening a
 * network socket refused". A task that is gone when its address has been
 * read (SECCOMP_IOCTL_NOTIF_ID_VALID) is dropped.
 *
 * A child with the network "proxy" holds real sockets in a namespace of
 * loopback only: its spawner's program hands only connect() and sendto()
 * over (listeners of such programs are marked, seccomp_prog_proxied()),
 * and the daemon lets each go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE: the
 * namespace confines the child, not this), naming those that bypass the
 * proxy and will fail (on_send_proxy()).
 *
 * The daemon never waits here: each receive follows a poll of no time
 * that said one is pending (SECCOMP_IOCTL_NOTIF_RECV has no non-blocking
 * mode; a notification of a task killed since makes it fail, not wait),
 * at most NN_BATCH are handled per wake-up of the loop (a child that
 * connects in a loop does not starve other clients), and what is kept is
 * bounded: NN_CALLS calls watched, NN_SHOWN distinct destinations each,
 * the rest counted. A listener is closed when its filter has no task left
 * (POLLHUP), not when its spawner ends: children of an ended spawner
 * still need their answers. A kernel without user notification (or
 * without ADDFD, Linux 5.9) leaves the notes to stderr's wording, said
 * once at start and in admin/stats.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>

#include "lib/base/loop.h"
#include "proto/json.h"
#include "proto/base/util.h"

#define NN_LISTENERS (32 + NN_CALLS)	/* listeners watched at once: the spawners', one per
					 * call started without a spawner */
#define NN_CALLS 256		/* calls watched at once */
#define NN_SHOWN 4		/* distinct destinations named per call */
#define NN_BATCH 32		/* notifications handled per wake-up */
#define NN_DEPTH 64		/* parents walked up to a call's child */

struct nn_listener {
	int fd;
	struct tc_io *io;
	bool proxy;		/* its program's: the network "proxy" (add_notify_rules()) */
};

struct nn_call {
	pid_t pid;		/* the call's child; 0: free */
	bool proxy;		/* the network "proxy": named so */
	int diag_fd;		/* with proxy: its namespace's (diag_lookup()), lent, or -1 */
	char *cgroup;		/* the name of its cgroup (the last component), or NULL */
	char *what[NN_SHOWN];
	unsigned n;
	uint64_t attempts;	/* in all */
	uint64_t others;	/* to destinations not named */
	uint64_t sockets;	/* socket() of the network's families */
};

static struct {
	struct tc_loop *loop;
	bool on;
	char *why;
	struct nn_listener l[NN_LISTENERS];
	struct nn_call calls[NN_CALLS];
	size_t notif_size, resp_size;
	uint64_t notifications, recorded, by_cgroup, sockets, gone, unread, unmatched, unwatched, full;
} nn;

/* A seccomp() with its arguments, as the kernel's headers define it. */
static long sys_seccomp(unsigned op, unsigned flags, void *arg)
{
	return syscall(SYS_seccomp, op, flags, arg);
}

static void set_why(char *why)
{
	free(nn.why);
	nn.why = why;
}

/* Whether the kernel has all this needs: the action, its sizes, and the
 * listener's flags of Linux 5.19 (ADDFD and its SEND flag came before). */
static int probe(void)
{
	/* As a kernel without it would be (tests, and a way out). */
	const char *off = getenv("TOOLCALLD_NO_SECCOMP_NOTIFY");
	if (off && *off && strcmp(off, "0") != 0) {
		set_why(xstrdup("turned off by TOOLCALLD_NO_SECCOMP_NOTIFY"));
		return -EOPNOTSUPP;
	}
	uint32_t action = SECCOMP_RET_USER_NOTIF;
	if (sys_seccomp(SECCOMP_GET_ACTION_AVAIL, 0, &action) < 0) {
		set_why(xasprintf("the kernel has no seccomp user notification (%s)", strerror(errno)));
		return -EOPNOTSUPP;
	}
	struct seccomp_notif_sizes sizes;
	if (sys_seccomp(SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0) {
		set_why(xasprintf("the kernel cannot tell its seccomp notification sizes (%s)", strerror(errno)));
		return -EOPNOTSUPP;
	}
	/* A filter flag the kernel knows is refused for its NULL program
	 * (EFAULT), one it does not for itself (EINVAL): WAIT_KILLABLE_RECV
	 * came in 5.19, after ADDFD and its SEND flag (5.9, 5.14). */
	if (sys_seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER |
			SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, NULL) == 0 || errno != EFAULT) {
		set_why(xstrdup("the kernel's seccomp user notification predates Linux 5.19"));
		return -EOPNOTSUPP;
	}
	nn.notif_size = MAX(sizes.seccomp_notif, sizeof(struct seccomp_notif));
	nn.resp_size = MAX(sizes.seccomp_notif_resp, sizeof(struct seccomp_notif_resp));
	return 0;
}

int sandbox_netnotif_start(struct tc_loop *loop)
{
	if (nn.loop)
		return nn.on ? 0 : -EOPNOTSUPP;
	nn.loop = loop;
	for (size_t i = 0; i < NN_LISTENERS; i++)
		nn.l[i].fd = -1;
	int r = probe();
	nn.on = r == 0;
	if (nn.on)
		set_why(NULL);
	return r;
}

bool sandbox_netnotif_on(void)
{
	return nn.on;
}

const char *sandbox_netnotif_why(void)
{
	return nn.why ? nn.why : nn.on ? "" : "not started";
}

/* Forgets what a watched call recorded, keeping it watched. */
static void call_clear(struct nn_call *c)
{
	for (unsigned i = 0; i < c->n; i++)
		free(c->what[i]);
	c->n = 0;
	c->attempts = c->others = c->sockets = 0;
}

/* Stops watching a listener and closes it: its filter's tasks, if any
 * were left, would get ENOSYS for what it hands over. */
static void listener_close(struct nn_listener *l)
{
	l->io = tc_io_free(l->io);
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

void sandbox_netnotif_stop(void)
{
	for (size_t i = 0; i < NN_LISTENERS; i++)
		if (nn.loop)
			listener_close(&nn.l[i]);
	for (size_t i = 0; i < NN_CALLS; i++) {
		call_clear(&nn.calls[i]);
		nn.calls[i].pid = 0;
		free(nn.calls[i].cgroup);
		nn.calls[i].cgroup = NULL;
	}
	set_why(NULL);
	nn.loop = NULL;
	nn.on = false;
}

/* The watched call whose child is pid, or NULL. */
static struct nn_call *call_find(pid_t pid)
{
	for (size_t i = 0; pid > 0 && i < NN_CALLS; i++)
		if (nn.calls[i].pid == pid)
			return &nn.calls[i];
	return NULL;
}

void sandbox_netnotif_watch(pid_t pid, const char *cgroup, bool proxy, int diag_fd)
{
	if (!nn.on || pid <= 0)
		return;
	struct nn_call *c = call_find(pid);
	for (size_t i = 0; i < NN_CALLS && !c; i++)
		if (!nn.calls[i].pid)
			c = &nn.calls[i];
	if (!c) {
		nn.unwatched++;
		return;
	}
	call_clear(c);
	c->pid = pid;
	c->proxy = proxy;
	c->diag_fd = diag_fd;
	free(c->cgroup);
	const char *name = cgroup ? strrchr(cgroup, '/') : NULL;
	c->cgroup = name && name[1] ? xstrdup(name + 1) : NULL;
}

void sandbox_netnotif_forget(pid_t pid)
{
	struct nn_call *c = call_find(pid);
	if (!c)
		return;
	call_clear(c);
	c->pid = 0;
	c->diag_fd = -1;
	free(c->cgroup);
	c->cgroup = NULL;
}

/* What c recorded, worded for the note; NULL when nothing. */
static char *call_text(const struct nn_call *c)
{
	if (!c || (!c->n && !c->sockets))
		return NULL;
	struct buf b = {0};
	/* Sockets opened but no destination named (a resolver that gives
	 * up on a socket without the network's options): what it saw. */
	if (!c->n)
		buf_puts(&b, "opening a network socket");
	if (!c->n && c->sockets > 1)
		buf_printf(&b, " (%" PRIu64 " times)", c->sockets);
	for (unsigned i = 0; i < c->n; i++)
		buf_printf(&b, "%s%s", i ? ", " : "", c->what[i]);
	if (c->others)
		buf_printf(&b, " and %" PRIu64 " more attempt%s elsewhere", c->others, c->others == 1 ? "" : "s");
	if (c->attempts > c->n + c->others)
		buf_printf(&b, " (%" PRIu64 " attempts in all)", c->attempts);
	buf_puts(&b, c->proxy ? " refused: this tool reaches the network only through the daemon's proxy "
				"(HTTP_PROXY, HTTPS_PROXY and ALL_PROXY in its environment)"
			      : " refused: this tool has no network");
	return buf_steal(&b);
}

char *sandbox_netnotif_take(pid_t pid)
{
	struct nn_call *c = call_find(pid);
	char *text = call_text(c);
	if (text)
		call_clear(c);
	return text;
}

char *sandbox_netnotif_peek(pid_t pid, uint64_t *ret_seen)
{
	const struct nn_call *c = call_find(pid);
	*ret_seen = c ? c->n + c->others + (c->sockets && !c->n) : 0;
	return call_text(c);
}

/* The watched call whose cgroup task is in (the cgroup v2 line of
 * /proc/TID/cgroup, "0::/.../tc-812-7"), or NULL. */
static struct nn_call *call_of_cgroup(pid_t task)
{
	char path[64], cg[4096];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)task);
	if (read_small(AT_FDCWD, path, cg, sizeof(cg)) <= 0)
		return NULL;
	const char *line = strncmp(cg, "0::", 3) == 0 ? cg : strstr(cg, "\n0::");
	if (!line)
		return NULL;
	line += line == cg ? 3 : 4;
	size_t len = strcspn(line, "\n");
	const char *name = line + len;
	while (name > line && name[-1] != '/')
		name--;
	size_t n = (size_t)(line + len - name);
	for (size_t i = 0; n && i < NN_CALLS; i++) {
		const char *own = nn.calls[i].cgroup;
		if (nn.calls[i].pid && own && strlen(own) == n && memcmp(own, name, n) == 0)
			return &nn.calls[i];
	}
	return NULL;
}

/* The call whose child task (a thread id) descends from: by its cgroup,
 * where calls have one of their own, else by its thread group, then
 * parents, up to a watched child (each call's child is a subreaper: what
 * it started stays beneath it while it runs). */
static struct nn_call *call_of(pid_t task)
{
	struct nn_call *by_cgroup = call_of_cgroup(task);
	nn.by_cgroup += by_cgroup != NULL;
	if (by_cgroup)
		return by_cgroup;
	pid_t pid = task;
	for (int depth = 0; depth < NN_DEPTH && pid > 1; depth++) {
		char path[64], st[4096];
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
		if (read_small(AT_FDCWD, path, st, sizeof(st)) <= 0)
			return NULL;
		const char *tg = strstr(st, "\nTgid:");
		const char *pp = strstr(st, "\nPPid:");
		if (!tg || !pp)
			return NULL;
		pid_t tgid = (pid_t)atoi(tg + 6);
		struct nn_call *c = call_find(tgid);
		if (c)
			return c;
		pid = (pid_t)atoi(pp + 6);
	}
	return NULL;
}

/* Records one attempt for the call c. */
static void record_in(struct nn_call *c, const char *what)
{
	c->attempts++;
	nn.recorded++;
	for (unsigned i = 0; i < c->n; i++)
		if (strcmp(c->what[i], what) == 0)
			return;
	if (c->n < NN_SHOWN)
		c->what[c->n++] = xstrdup(what);
	else
		c->others++;
}

/* Records one attempt for the call of task. */
void netnotif_record(pid_t task, const char *what)
{
	struct nn_call *c = call_of(task);
	if (!c) {
		nn.unmatched++;
		return;
	}
	record_in(c, what);
}

/* Reads n bytes at addr of task into buf; false if they cannot be. */
static bool peek(pid_t task, uint64_t addr, void *buf, size_t n)
{
	struct iovec local = { .iov_base = buf, .iov_len = n };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = n };
	return addr && process_vm_readv(task, &local, 1, &remote, 1, 0) == (ssize_t)n;
}

/* Reads the address a system call names (addr, len) into ss; its family,
 * or -1 when it cannot be read. */
static int read_addr(pid_t task, uint64_t addr, uint64_t len, struct sockaddr_storage *ss)
{
	if (!addr || len < sizeof(sa_family_t))
		return -1;
	size_t n = (size_t)MIN(len, (uint64_t)sizeof(struct sockaddr_in6));
	memset(ss, 0, sizeof(*ss));
	if (!peek(task, addr, ss, n))
		return -1;
	if ((ss->ss_family == AF_INET && n < sizeof(struct sockaddr_in)) ||
	    (ss->ss_family == AF_INET6 && n < 24))	/* RFC 2133's, without the scope */
		return AF_UNSPEC;
	return ss->ss_family;
}

/* Counts one socket() of the network's families for the call of task. */
void netnotif_record_socket(pid_t task)
{
	struct nn_call *c = call_of(task);
	if (c)
		c->sockets++;
}

/* "connect to 1.1.1.1:80", "sending to [2606:4700::1111]:443 (DNS)". */
void netnotif_describe(const char *verb, const struct sockaddr_storage *ss, char *out, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	uint16_t port;
	bool v4 = ss->ss_family == AF_INET;
	if (v4) {
		const struct sockaddr_in *in = (const void *)ss;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else {
		const struct sockaddr_in6 *in6 = (const void *)ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	}
	/* Port 53: the name server, which a lookup of a name tries first
	 * ("Could not resolve host"). */
	snprintf(out, size, "%s %s%s%s:%u%s", verb, v4 ? "" : "[", host, v4 ? "" : "]", port,
		 port == 53 ? " (DNS)" : "");
}

/* Answers a socket() of AF_INET or AF_INET6 (of type stream or datagram,
 * TCP or UDP) with an AF_UNIX socket of the same type and flags, else
 * EACCES (what the filter answers without notification), and counts it
 * for its call. The child never holds a socket of the network's families
 * (§10: the kernel's network code is not reachable from it, and no
 * namespace is shared between calls); the stand-in only lets the program
 * go on to say where it meant to go. */
static void on_socket(int fd, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	int family = (int)req->data.args[0];
	int type = (int)(req->data.args[1] & 0xf);
	int flags = (int)(req->data.args[1] & ~(uint64_t)0xf);
	uint64_t protocol = req->data.args[2];
	resp->error = -EACCES;
	if ((type != SOCK_STREAM && type != SOCK_DGRAM) || (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) ||
	    (protocol != 0 && protocol != (type == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP)))
		return;
	(void)family;
	netnotif_record_socket(req->pid);
	int own = type | SOCK_CLOEXEC | (flags & SOCK_NONBLOCK);
	_cleanup_close_ int s = socket(AF_UNIX, own, 0);
	if (s < 0)
		return;
	struct seccomp_notif_addfd add = {
		.id = req->id,
		.flags = SECCOMP_ADDFD_FLAG_SEND,
		.srcfd = (uint32_t)s,
		.newfd_flags = (flags & SOCK_CLOEXEC) ? O_CLOEXEC : 0,
	};
	/* Sent with the fd: the notification is answered, or its task is
	 * gone. */
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) >= 0 || errno == ENOENT) {
		nn.sockets++;
		resp->id = 0;
	}
}

/* Answers a connect() or sendto() with a destination. */
static void on_send(int fd, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	const char *verb = "connect to";
	uint64_t addr = req->data.args[1], len = req->data.args[2];
	if (req->data.nr == SYS_sendto) {
		verb = "sending to";
		addr = req->data.args[4];
		len = req->data.args[5];
	}
	struct sockaddr_storage ss;
	int family = read_addr(req->pid, addr, len, &ss);
	nn.unread += family < 0 && addr;
	if (family != AF_INET && family != AF_INET6) {
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		return;
	}
	/* What was read is the task's while it still waits. */
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0) {
		nn.gone++;
		resp->id = 0;
		return;
	}
	char what[NETNOTIF_WHAT_SIZE];
	netnotif_describe(verb, &ss, what, sizeof(what));
	netnotif_record(req->pid, what);
	resp->error = -ENETUNREACH;
}

/* The IPv4 address a v4 or v4-mapped v6 address is (host order), with
 * *ret_v4 set; else *ret_v4 false. */
static uint32_t v4_of(const struct sockaddr_storage *ss, bool *ret_v4)
{
	*ret_v4 = true;
	if (ss->ss_family == AF_INET)
		return ntohl(((const struct sockaddr_in *)(const void *)ss)->sin_addr.s_addr);
	const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a)) {
		uint32_t v;
		memcpy(&v, &a->s6_addr[12], 4);
		return ntohl(v);
	}
	*ret_v4 = false;
	return 0;
}

/* Whether the address is the namespace's own (loopback, or unspecified:
 * the local host): the rest has no route in a namespace of loopback only. */
static bool local_addr(const struct sockaddr_storage *ss)
{
	bool v4;
	uint32_t a = v4_of(ss, &v4);
	if (v4)
		return (a >> 24) == 127 || a == 0;
	const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a6) || IN6_IS_ADDR_UNSPECIFIED(a6);
}

/*
 * Whether a socket of the namespace of diag (its NETLINK_SOCK_DIAG
 * socket) is bound to the address and port ss names, for protocol
 * (IPPROTO_TCP: listening, or connected to nothing that matters here;
 * IPPROTO_UDP: bound): 1 yes, 0 no, -1 it cannot be told. One exact
 * lookup by the kernel (its listening and bound sockets' hashes, the way
 * a connect finds them), no table walked: /proc/PID/net/tcp would walk
 * the machine's whole connection hash, milliseconds on a large one.
 */
static int diag_lookup(int diag, const struct sockaddr_storage *ss, uint16_t port, uint8_t protocol)
{
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} m = {
		.h = { .nlmsg_len = sizeof(m), .nlmsg_type = SOCK_DIAG_BY_FAMILY, .nlmsg_flags = NLM_F_REQUEST },
		.r = { .sdiag_protocol = protocol, .idiag_states = ~0U,
		       .id.idiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE } },
	};
	/* TCP looks the local end up as the source, UDP as the destination
	 * (inet_diag_find_one_icsk(), udp_dump_one()). */
	__be32 *local = protocol == IPPROTO_TCP ? m.r.id.idiag_src : m.r.id.idiag_dst;
	__be16 *local_port = protocol == IPPROTO_TCP ? &m.r.id.idiag_sport : &m.r.id.idiag_dport;
	*local_port = htons(port);
	bool v4;
	uint32_t a4 = v4_of(ss, &v4);
	if (v4) {
		m.r.sdiag_family = AF_INET;
		local[0] = htonl(a4 ? a4 : INADDR_LOOPBACK);	/* 0.0.0.0: the local host */
	} else {
		m.r.sdiag_family = AF_INET6;
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr;
		memcpy(local, IN6_IS_ADDR_UNSPECIFIED(a6) ? &in6addr_loopback : a6, 16);
	}
	_Alignas(struct nlmsghdr) char buf[4096];
	while (recv(diag, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;	/* an answer left by one not read whole */
	if (send(diag, &m, sizeof(m), MSG_DONTWAIT) != (ssize_t)sizeof(m))
		return -1;
	/* Answered while the request was sent: read without waiting. */
	int found = -1;
	ssize_t n;
	while ((n = recv(diag, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		int len = (int)n;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY)
				found = 1;
			else if (h->nlmsg_type == NLMSG_ERROR && found < 0 &&
				 h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr)))
				found = ((const struct nlmsgerr *)NLMSG_DATA(h))->error == -ENOENT ? 0 : -1;
		}
	}
	return found;
}

/* Whether the kernel's lookups answer for TCP and UDP here (a kernel
 * without inet_diag or udp_diag answers ENOENT as for a port not taken):
 * asked once, of sockets of the daemon's own, bit 0 TCP, bit 1 UDP. */
static unsigned diag_works(void)
{
	static int works = -1;
	if (works >= 0)
		return (unsigned)works;
	works = 0;
	_cleanup_close_ int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_SOCK_DIAG);
	const int types[] = { SOCK_STREAM, SOCK_DGRAM };
	for (int i = 0; diag >= 0 && i < 2; i++) {
		_cleanup_close_ int s = socket(AF_INET, types[i] | SOCK_CLOEXEC, 0);
		struct sockaddr_storage ss = {0};
		struct sockaddr_in *in = (void *)&ss;
		socklen_t len = sizeof(*in);
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (s < 0 || bind(s, (void *)in, len) < 0 || (i == 0 && listen(s, 1) < 0) ||
		    getsockname(s, (void *)in, &len) < 0)
			continue;
		if (diag_lookup(diag, &ss, ntohs(in->sin_port), i ? IPPROTO_UDP : IPPROTO_TCP) == 1)
			works |= 1 << i;
	}
	return (unsigned)works;
}

/* A connect() or sendto() of a call with the network "proxy", whose
 * namespace has loopback only: the kernel decides it (the notification
 * goes on, SECCOMP_USER_NOTIF_FLAG_CONTINUE: the namespace is what
 * confines it), and the daemon names what will be refused: any address
 * but the namespace's own (no route there: ENETUNREACH), and a port of
 * its own with no socket there (ECONNREFUSED: a server outside the
 * sandbox is not on its loopback). The daemon's proxy ports go on at
 * once. */
static void on_send_proxy(int fd, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	const char *verb = "connect to";
	uint64_t addr = req->data.args[1], len = req->data.args[2];
	bool send = req->data.nr == SYS_sendto;
	if (send) {
		verb = "sending to";
		addr = req->data.args[4];
		len = req->data.args[5];
	}
	struct sockaddr_storage ss;
	int family = read_addr(req->pid, addr, len, &ss);
	nn.unread += family < 0 && addr;
	if (family != AF_INET && family != AF_INET6)
		return;
	uint16_t port = ntohs(family == AF_INET ? ((const struct sockaddr_in *)(void *)&ss)->sin_port
						: ((const struct sockaddr_in6 *)(void *)&ss)->sin6_port);
	bool v4;
	uint32_t a4 = v4_of(&ss, &v4);
	if (v4 && a4 == INADDR_LOOPBACK && !send &&
	    (port == SANDBOX_PROXY_HTTP_PORT || port == SANDBOX_PROXY_SOCKS_PORT))
		return;
	struct nn_call *c = call_of(req->pid);
	if (!c) {
		nn.unmatched++;
		return;
	}
	bool local = local_addr(&ss);
	if (local) {
		/* Something there to take it, or it cannot be told: no word.
		 * (A connect may be a datagram socket's: a resolver's.) */
		unsigned works = diag_works();
		if (c->diag_fd < 0 || !(works & 2) || (!send && !(works & 1)) ||
		    (!send && diag_lookup(c->diag_fd, &ss, port, IPPROTO_TCP) != 0) ||
		    diag_lookup(c->diag_fd, &ss, port, IPPROTO_UDP) != 0)
			return;
	}
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0) {
		nn.gone++;
		resp->id = 0;
		return;
	}
	char what[NETNOTIF_WHAT_SIZE + 64];
	netnotif_describe(verb, &ss, what, NETNOTIF_WHAT_SIZE);
	if (local)
		strcat(what, " (the sandbox's own loopback: nothing listens there)");
	record_in(c, what);
}

/* Handles what a listener has pending, NN_BATCH at most; closes it when
 * its filter has no task left. */
static void on_listener(void *arg, int revents)
{
	(void)revents;
	struct nn_listener *l = arg;
	_cleanup_free_ struct seccomp_notif *req = xcalloc(1, nn.notif_size);
	_cleanup_free_ struct seccomp_notif_resp *resp = xcalloc(1, nn.resp_size);
	for (int k = 0; k < NN_BATCH; k++) {
		struct pollfd p = { .fd = l->fd, .events = POLLIN };
		if (poll(&p, 1, 0) <= 0)
			return;
		if (!(p.revents & POLLIN)) {
			if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
				listener_close(l);
			return;
		}
		memset(req, 0, nn.notif_size);
		if (ioctl(l->fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
			if (errno == ENOENT || errno == EINTR)
				continue;	/* its task was killed since */
			listener_close(l);
			return;
		}
		nn.notifications++;
		memset(resp, 0, nn.resp_size);
		resp->id = req->id;
		if (req->data.nr == SYS_socket)
			on_socket(l->fd, req, resp);
		else if (l->proxy)
			on_send_proxy(l->fd, req, resp);
		else
			on_send(l->fd, req, resp);
		if (resp->id && ioctl(l->fd, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0)
			nn.gone++;	/* its task was killed since */
	}
}

int sandbox_netnotif_add(int fd, const void *prog)
{
	struct nn_listener *l = NULL;
	for (size_t i = 0; i < NN_LISTENERS && !l; i++)
		if (nn.l[i].fd < 0)
			l = &nn.l[i];
	if (!nn.on || !l || fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		close(fd);
		return nn.on && l ? -errno : -EBUSY;
	}
	l->fd = fd;
	l->proxy = seccomp_prog_proxied(prog);
	l->io = tc_io_new(nn.loop, fd, TC_IO_READ, on_listener, l);
	tc_io_start(l->io);
	return 0;
}

bool sandbox_netnotif_room(void)
{
	for (size_t i = 0; nn.on && i < NN_LISTENERS; i++)
		if (nn.l[i].fd < 0)
			return true;
	nn.full += nn.on;
	return false;
}

void sandbox_netnotif_write_stats(struct jgen *g)
{
	unsigned listeners = 0, watched = 0;
	for (size_t i = 0; i < NN_LISTENERS; i++)
		listeners += nn.l[i].fd >= 0;
	for (size_t i = 0; i < NN_CALLS; i++)
		watched += nn.calls[i].pid > 0;
	jgen_key(g, "sandboxNetworkNotes");
	jgen_obj_open(g);
	jgen_kv_bool(g, "on", nn.on);
	if (!nn.on)
		jgen_kv_str(g, "why", sandbox_netnotif_why());
	jgen_kv_int(g, "listeners", listeners);
	jgen_kv_int(g, "watched", watched);
	jgen_kv_int(g, "notifications", (int64_t)nn.notifications);
	jgen_kv_int(g, "recorded", (int64_t)nn.recorded);
	jgen_kv_int(g, "byCgroup", (int64_t)nn.by_cgroup);
	jgen_kv_int(g, "sockets", (int64_t)nn.sockets);
	jgen_kv_int(g, "gone", (int64_t)nn.gone);
	jgen_kv_int(g, "unread", (int64_t)nn.unread);
	jgen_kv_int(g, "unmatched", (int64_t)nn.unmatched);
	jgen_kv_int(g, "unwatched", (int64_t)nn.unwatched);
	jgen_kv_int(g, "listenersFull", (int64_t)nn.full);
	jgen_obj_close(g);
}
