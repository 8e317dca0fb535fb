/* SPDX-License-Identifier: MIT */
/*
 * Network namespaces for the sandbox's network "proxy": each such child
 * runs in a namespace of its own, with loopback up and nothing else, where
 * the daemon listens on 127.0.0.1 (SANDBOX_PROXY_HTTP_PORT for HTTP,
 * SANDBOX_PROXY_SOCKS_PORT for SOCKS5) and serves the proxy from its loop:
 * no helper process per call. The child joins the namespace by setns()
 * before it drops its capabilities (apply.c).
 *
 * Making one costs a millisecond or more (the kernel sets up a whole
 * network stack), more than a sandboxed call's spawn: a thread of this
 * file keeps a few made ahead, as tmp.c keeps TMPDIRs, and a call takes
 * one. The thread unshares its own network namespace for each one it
 * makes (a thread's namespace is its own: the loop's thread and the
 * daemon's sockets stay where they are), opens it, brings lo up (with
 * TCP segments of up to 512 KiB: lo_big_tcp()) and makes the two
 * listening sockets there; sockets stay in the namespace they were made
 * in. A namespace ends when its last fd is closed and its last
 * process has left.
 *
 * A call's namespace whose processes are all gone when it ends (its
 * cgroup empty) is kept for the next call of the same uid, with the
 * daemon's listeners (their queues emptied), rather than made again: what
 * a call could leave in one (its sockets, its addresses) dies with its
 * processes, and what stays (the counters of lo) is seen by the same uid
 * only.
 *
 * With CAP_SYS_ADMIN (a root daemon) the thread makes the namespace
 * itself. Without it, where the kernel lets users make user namespaces,
 * a short child (cloned sharing the daemon's memory and fd table, as
 * spawn_child() is) makes a user namespace mapping only the daemon's uid
 * and gid with the network namespace it owns, brings lo up and listens
 * there, and leaves the fds of both namespaces and of the listeners in
 * the shared table; the call's child then joins the user namespace first
 * (its owner's uid holds every capability there) and the network one
 * (apply.c). Where neither can be done, "proxy" is refused, saying so,
 * never turned into the full network.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/base/util.h"

/* Namespaces kept ready. */
#define POOL_TARGET 4
#define POOL_MAX 16
/* How long a call waits for the thread when none is ready. */
#define TAKE_WAIT_S 5

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t want = PTHREAD_COND_INITIALIZER;		/* the thread: make more */
static pthread_cond_t made = PTHREAD_COND_INITIALIZER;		/* a taker: one is ready */
static struct sandbox_netns ready[POOL_MAX];
static unsigned n_ready;
/* Namespaces of ended calls, for the next call of their uid (loop thread
 * only). */
#define KEPT_MAX 8
static struct kept_ns {
	struct sandbox_netns ns;
	uid_t uid;
} kept[KEPT_MAX];
static unsigned n_kept;
static unsigned target = POOL_TARGET;
static bool started, stopping;
static pthread_t thread;
static int last_error;		/* the thread's last failure (errno), 0 */
static char last_step[64];
/* Whether namespaces can be made here: -1 not known, 0 no, 1 yes. */
static int capable = -1;
static char capable_why[320];

static void netns_close(struct sandbox_netns *ns)
{
	if (ns->user_fd >= 0)
		close(ns->user_fd);
	if (ns->ns_fd >= 0)
		close(ns->ns_fd);
	if (ns->http_fd >= 0)
		close(ns->http_fd);
	if (ns->socks_fd >= 0)
		close(ns->socks_fd);
	if (ns->diag_fd >= 0)
		close(ns->diag_fd);
	*ns = SANDBOX_NETNS_NONE;
}

/* A listening TCP socket on 127.0.0.1:port of the caller's namespace.
 * Raw system calls: the preparing child (below) runs it on a stack of
 * its own, in the daemon's memory, where no sanitizer bookkeeping may run. */
__attribute__((no_sanitize("address"))) static int listen_on(uint16_t port)
{
	long fd = syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (syscall(SYS_bind, fd, &a, sizeof(a)) < 0 || syscall(SYS_listen, fd, 128) < 0) {
		int e = -errno;
		(void)syscall(SYS_close, fd);
		return e;
	}
	return (int)fd;
}

/* Lets lo's TCP segments grow to SANDBOX_LO_GSO_MAX bytes (BIG TCP for
 * IPv4, kernel 6.3 and later; older kernels ignore the attributes): the
 * bytes between the child and the daemon's proxy then cross in an
 * eighth as many segments as at lo's default 64 KiB, which on loopback
 * halved the CPU per MB of a relayed download, the relay's and the
 * reader's alike. Best effort: a kernel that refuses keeps the default.
 * Raw, as listen_on(). */
__attribute__((no_sanitize("address"))) static void lo_big_tcp(void)
{
	/* IFLA_GSO_IPV4_MAX_SIZE and IFLA_GRO_IPV4_MAX_SIZE (linux/if_link.h
	 * of 6.3; older headers lack them). */
	enum { GSO_IPV4 = 63, GRO_IPV4 = 64 };
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
		struct {
			struct rtattr a;
			uint32_t v;
		} at[2];
	} m = {
		.h = { .nlmsg_len = sizeof(m), .nlmsg_type = RTM_NEWLINK, .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK },
		.i = { .ifi_family = AF_UNSPEC, .ifi_index = 1 /* lo, in every namespace */ },
		.at = { { { RTA_LENGTH(4), GSO_IPV4 }, SANDBOX_LO_GSO_MAX },
			{ { RTA_LENGTH(4), GRO_IPV4 }, SANDBOX_LO_GSO_MAX } },
	};
	long s = syscall(SYS_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (s < 0)
		return;
	struct sockaddr_nl k = { .nl_family = AF_NETLINK };
	if (syscall(SYS_sendto, s, &m, sizeof(m), 0, &k, sizeof(k)) == (long)sizeof(m)) {
		char ack[256];
		(void)syscall(SYS_recvfrom, s, ack, sizeof(ack), 0, NULL, NULL);
	}
	(void)syscall(SYS_close, s);
}

/* Brings lo up and listens on the proxy ports, in the caller's network
 * namespace, and opens a socket there to ask which of its ports are
 * taken (best effort: -1); the fds into ns. Raw, as listen_on(). */
__attribute__((no_sanitize("address"))) static int ns_fill(struct sandbox_netns *ns, const char **ret_step)
{
	int r;
	*ret_step = "bringing lo up";
	long s = syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = { .ifr_name = "lo" };
	if (s < 0 || syscall(SYS_ioctl, s, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP, syscall(SYS_ioctl, s, SIOCSIFFLAGS, &ifr) < 0)) {
		r = -errno;
		if (s >= 0)
			(void)syscall(SYS_close, s);
		return r;
	}
	(void)syscall(SYS_close, s);
	lo_big_tcp();
	*ret_step = "listening in the namespace";
	if ((ns->http_fd = listen_on(SANDBOX_PROXY_HTTP_PORT)) < 0 ||
	    (ns->socks_fd = listen_on(SANDBOX_PROXY_SOCKS_PORT)) < 0)
		return ns->http_fd < 0 ? ns->http_fd : ns->socks_fd;
	long d = syscall(SYS_socket, AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_SOCK_DIAG);
	ns->diag_fd = d < 0 ? -1 : (int)d;
	return 0;
}

/* Whether namespaces are made in a user namespace of their own (the
 * daemon has no CAP_SYS_ADMIN); decided by the probe. */
static bool in_userns;

/* What the preparing child of a user namespace shares with its parent. */
struct prep {
	struct sandbox_netns ns;
	char uid_map[32], gid_map[32];
	const char *step;
	int err;
};

/* The preparing child: in its new user and network namespaces, maps the
 * daemon's uid and gid, fills the network namespace and opens both, into
 * the fd table it shares with the daemon. */
__attribute__((no_sanitize("address"))) static int prep_child(void *arg)
{
	struct prep *p = arg;
	int r;
	p->step = "mapping the user namespace";
	if ((r = sandbox_userns_map(p->uid_map, p->gid_map)) < 0 || (r = ns_fill(&p->ns, &p->step)) < 0) {
		p->err = -r;
		return 1;
	}
	p->step = "opening the namespaces";
	if ((p->ns.user_fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/ns/user", O_RDONLY | O_CLOEXEC)) < 0 ||
	    (p->ns.ns_fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
		p->err = errno;
		return 1;
	}
	return 0;
}

/* Makes one namespace in a user namespace of its own, through a child. */
static int netns_make_userns(struct sandbox_netns *ret, const char **ret_step)
{
	struct prep p = { .ns = SANDBOX_NETNS_NONE, .step = "cloning into new namespaces" };
	snprintf(p.uid_map, sizeof(p.uid_map), "%u %u 1\n", (unsigned)geteuid(), (unsigned)geteuid());
	snprintf(p.gid_map, sizeof(p.gid_map), "%u %u 1\n", (unsigned)getegid(), (unsigned)getegid());
	_Alignas(16) static _Thread_local char stack[16384];
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* No exit signal: nothing of the daemon's hears of it; waited here. */
	pid_t pid = clone(prep_child, stack + sizeof(stack),
			  CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_NEWUSER | CLONE_NEWNET, &p);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		*ret_step = p.step;
		return -e;
	}
	while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
		;
	if (p.err || p.ns.user_fd < 0 || p.ns.ns_fd < 0) {
		*ret_step = p.step;
		netns_close(&p.ns);
		return -(p.err ? p.err : EIO);
	}
	*ret = p.ns;
	return 0;
}

/* Makes one namespace: in the calling thread (which moves into it) when
 * the daemon may, else in a user namespace of its own. 0, or a negative
 * errno with *ret_step naming what failed. */
static int netns_make(struct sandbox_netns *ret, const char **ret_step)
{
	if (in_userns)
		return netns_make_userns(ret, ret_step);
	struct sandbox_netns ns = SANDBOX_NETNS_NONE;
	int r;
	*ret_step = "unshare(CLONE_NEWNET)";
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	*ret_step = "opening the namespace";
	if ((ns.ns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if ((r = ns_fill(&ns, ret_step)) < 0) {
		netns_close(&ns);
		return r;
	}
	*ret = ns;
	return 0;
}

/* Starts a thread of this file with every signal blocked: the loop's
 * thread handles the daemon's signals. */
static int thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

static void *pool_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stopping) {
		if (n_ready >= target) {
			pthread_cond_wait(&want, &lock);
			continue;
		}
		pthread_mutex_unlock(&lock);
		struct sandbox_netns ns;
		const char *step = NULL;
		int r = netns_make(&ns, &step);
		pthread_mutex_lock(&lock);
		if (r < 0) {
			last_error = -r;
			snprintf(last_step, sizeof(last_step), "%s", step);
			pthread_cond_broadcast(&made);
			/* Not again at once: a kernel short of memory. */
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 1;
			pthread_cond_timedwait(&want, &lock, &until);
			continue;
		}
		last_error = 0;
		if (stopping || n_ready == POOL_MAX) {
			netns_close(&ns);
			continue;
		}
		ready[n_ready++] = ns;
		pthread_cond_broadcast(&made);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Probes once, in a short thread of its own: the daemon's threads keep
 * their namespace. */
static void *probe_thread(void *arg)
{
	struct sandbox_netns *ns = arg;
	const char *step = NULL;
	in_userns = false;
	int r = netns_make(ns, &step);
	if (r == -EPERM) {
		/* Not root: in a user namespace of its own, where the kernel
		 * lets users make them. */
		const char *ustep = NULL;
		in_userns = true;
		int u = netns_make(ns, &ustep);
		if (u == 0)
			return NULL;
		in_userns = false;
		snprintf(capable_why, sizeof(capable_why), "%s failed: %s (the daemon lacks CAP_SYS_ADMIN: it is not "
			 "root), and %s in a user namespace of its own failed: %s", step, strerror(-r), ustep,
			 strerror(-u));
		return NULL;
	}
	if (r < 0)
		snprintf(capable_why, sizeof(capable_why), "%s failed: %s", step, strerror(-r));
	return NULL;
}

bool sandbox_netns_capable(const char **ret_why)
{
	pthread_mutex_lock(&lock);
	if (capable < 0) {
		struct sandbox_netns ns = SANDBOX_NETNS_NONE;
		pthread_t t;
		if (thread_start(&t, probe_thread, &ns) != 0) {
			snprintf(capable_why, sizeof(capable_why), "no thread to make namespaces in");
		} else {
			pthread_join(t, NULL);
		}
		capable = ns.ns_fd >= 0;
		if (capable && n_ready < POOL_MAX)
			ready[n_ready++] = ns;
		else
			netns_close(&ns);
	}
	bool ok = capable == 1;
	pthread_mutex_unlock(&lock);
	if (ret_why)
		*ret_why = ok ? NULL : capable_why;
	return ok;
}

void sandbox_netns_pool_size(unsigned n)
{
	pthread_mutex_lock(&lock);
	target = n > POOL_MAX ? POOL_MAX : n;
	pthread_cond_signal(&want);
	pthread_mutex_unlock(&lock);
}

/* Accepts and closes what waits on the listeners (connections of a call
 * that ended). One poll says whether any wait: an accept that finds
 * none costs several times as much. */
static void drain(int http_fd, int socks_fd)
{
	struct pollfd p[2] = { { .fd = http_fd, .events = POLLIN }, { .fd = socks_fd, .events = POLLIN } };
	if (poll(p, 2, 0) <= 0)
		return;
	for (int k = 0; k < 2; k++) {
		int c;
		if (p[k].revents)
			while ((c = accept4(p[k].fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
				close(c);
	}
}

void sandbox_netns_keep(struct sandbox_netns *ns, uid_t uid)
{
	if (ns->ns_fd < 0 || ns->http_fd < 0 || ns->socks_fd < 0 || n_kept == KEPT_MAX) {
		netns_close(ns);
		return;
	}
	drain(ns->http_fd, ns->socks_fd);
	kept[n_kept++] = (struct kept_ns){ .ns = *ns, .uid = uid };
	*ns = SANDBOX_NETNS_NONE;
}

int sandbox_netns_take(struct sandbox_netns *ret, uid_t uid, char **ret_msg)
{
	const char *why;
	*ret = SANDBOX_NETNS_NONE;
	for (unsigned i = n_kept; i-- > 0;)
		if (kept[i].uid == uid) {
			*ret = kept[i].ns;
			kept[i] = kept[--n_kept];
			return 0;
		}
	if (!sandbox_netns_capable(&why)) {
		*ret_msg = xasprintf("The sandbox's network \"proxy\" needs a network namespace of the call's own, "
				     "which this daemon cannot make (%s); the call is not given the full network "
				     "instead", why);
		return -EPERM;
	}
	pthread_mutex_lock(&lock);
	if (!started && !stopping) {
		if (thread_start(&thread, pool_thread, NULL) == 0)
			started = true;
	}
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += TAKE_WAIT_S;
	int r = 0;
	while (!n_ready && r == 0 && started) {
		pthread_cond_signal(&want);
		r = pthread_cond_timedwait(&made, &lock, &until);
		if (!n_ready && last_error)
			break;
	}
	if (n_ready) {
		*ret = ready[--n_ready];
		pthread_cond_signal(&want);
		pthread_mutex_unlock(&lock);
		return 0;
	}
	int e = last_error ? last_error : started ? ETIMEDOUT : EAGAIN;
	*ret_msg = last_error ? xasprintf("Could not make the call's network namespace (%s): %s", last_step, strerror(e))
			      : xasprintf("No network namespace for the call was ready in time");
	pthread_mutex_unlock(&lock);
	return -e;
}

void sandbox_netns_release(struct sandbox_netns *ns)
{
	if (ns)
		netns_close(ns);
}

void sandbox_netns_shutdown(void)
{
	pthread_mutex_lock(&lock);
	bool was = started;
	stopping = true;
	pthread_cond_broadcast(&want);
	pthread_mutex_unlock(&lock);
	if (was)
		pthread_join(thread, NULL);
	pthread_mutex_lock(&lock);
	while (n_ready)
		netns_close(&ready[--n_ready]);
	while (n_kept)
		netns_close(&kept[--n_kept].ns);
	started = stopping = false;
	capable = -1;
	pthread_mutex_unlock(&lock);
}
