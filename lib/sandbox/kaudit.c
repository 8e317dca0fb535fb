/* SPDX-License-Identifier: MIT */
/*
 * What the kernel says the sandbox refused: Landlock's audit records
 * (Landlock ABI 7, kernels 6.15 and later), read from the audit netlink
 * socket's read-only multicast group, so that the note a call's result
 * carries names what was refused instead of guessing it from stderr.
 *
 * Landlock writes two record types: AUDIT_LANDLOCK_ACCESS, one per refused
 * access ("domain=1ad62322b blockers=fs.read_file path=\"/etc/x\" ..."),
 * and AUDIT_LANDLOCK_DOMAIN, whose "status=allocated" record, written with
 * a domain's first denial, names the process that made the domain
 * ("pid=N": the child that called landlock_restrict_self(), whose pid the
 * daemon knows). So denials are kept per domain, the domain tied to its
 * maker's pid, and a call's note takes those of its child's pid.
 *
 * Only a daemon that may read the records (CAP_AUDIT_READ), on a machine
 * where audit is on, gets them; it never changes the machine's audit
 * settings. Its children then enforce Landlock with
 * LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, so denials after their exec are
 * logged too. Audit's state is asked again on demand (at most once a
 * second): turned off, the notes say so; turned on, the daemon subscribes.
 * A failed call's note waits for its child's records still in the
 * kernel's queue (sandbox_kaudit_take()). Everything kept is bounded:
 * KA_DOMAINS domains (the oldest
 * dropped), KA_DENIALS distinct denials each (the rest counted), KA_PATH
 * bytes of a path, one record of at most KA_RECORD bytes read at a time.
 */
#include "lib/sandbox/sandbox_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/netlink.h>

#include "lib/base/loop.h"
#include "proto/json.h"
#include "proto/utf8.h"
#include "proto/base/util.h"

#ifndef AUDIT_LANDLOCK_ACCESS
#define AUDIT_LANDLOCK_ACCESS 1423
#endif
#ifndef AUDIT_LANDLOCK_DOMAIN
#define AUDIT_LANDLOCK_DOMAIN 1424
#endif
#define LANDLOCK_LOG_NEW_EXEC_ON (1U << 1)

#define KA_DOMAINS 128		/* domains kept */
#define KA_DENIALS 8		/* distinct denials kept per domain */
#define KA_PATH 512		/* bytes of a path kept */
#define KA_RECORD 9000		/* bytes of a record read (the kernel's are at most 8970) */
#define KA_BATCH 256		/* records read per wake-up of the loop */
#define KA_RCVBUF (1024 * 1024)

struct ka_domain {
	uint64_t id;
	pid_t pid;		/* its maker, 0 until its allocated record is seen */
	uint64_t stamp;		/* when last written to, for dropping the oldest */
	bool ended;		/* its deallocated record seen: its processes are gone */
	char *what[KA_DENIALS];	/* "reading /etc/x" */
	unsigned n, more;
};

static struct {
	int fd;
	struct tc_io *io;
	struct tc_loop *loop;
	int abi;
	bool on;		/* subscribed and audit on, as last asked */
	bool started;
	char *why;		/* why not, when not on */
	uint64_t asked_ms;	/* when audit's state was last asked */
	struct ka_domain *dom;	/* KA_DOMAINS, allocated with the first record */
	uint64_t stamp;
	uint64_t records, dropped, notes, waited;
} ka = { .fd = -1 };

unsigned sandbox_landlock_restrict_flags;

/* The value of key= in a record's text, unquoted (or hex decoded, as audit
 * writes a string holding spaces or quotes); false when absent. */
static bool field(const char *s, size_t n, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i + kl + 1 <= n; i++) {
		if ((i && s[i - 1] != ' ') || memcmp(s + i, key, kl) != 0 || s[i + kl] != '=')
			continue;
		const char *v = s + i + kl + 1, *end = s + n;
		size_t k = 0;
		if (v < end && *v == '"') {
			for (v++; v < end && *v != '"' && k + 1 < cap; v++)
				out[k++] = *v;
		} else {
			const char *e = v;
			while (e < end && *e != ' ')
				e++;
			/* Only strings are hex encoded (numbers stay as they are). */
			bool hex = (e - v) % 2 == 0 && e > v &&
				   (str_eq(key, "path") || str_eq(key, "name") || str_eq(key, "ocomm"));
			for (const char *p = v; p < e && hex; p++)
				hex = (*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'F');
			if (hex) {
				for (const char *p = v; p + 1 < e && k + 1 < cap; p += 2) {
					unsigned b;
					if (sscanf(p, "%2x", &b) != 1)
						break;
					/* A leading NUL: an abstract socket's name, written "@name" as ss does. */
					out[k] = (char)(b ? b : k == 0 ? '@' : '?');
					k++;
				}
			} else {
				for (; v < e && k + 1 < cap; v++)
					out[k++] = *v;
			}
		}
		out[k] = '\0';
		return true;
	}
	return false;
}

static void drop(struct ka_domain *d);

static struct ka_domain *domain_of(uint64_t id, bool make)
{
	if (!ka.dom) {
		if (!make)
			return NULL;
		ka.dom = xcalloc(KA_DOMAINS, sizeof(*ka.dom));
	}
	struct ka_domain *oldest = &ka.dom[0];
	for (size_t i = 0; i < KA_DOMAINS; i++) {
		struct ka_domain *d = &ka.dom[i];
		if (d->id == id && d->stamp)
			return d;
		if (d->stamp < oldest->stamp)
			oldest = d;
	}
	if (!make)
		return NULL;
	drop(oldest);
	*oldest = (struct ka_domain){ .id = id, .stamp = ++ka.stamp };
	return oldest;
}

/* "fs.write_file,fs.make_reg" -> "writing" (the first blocker says it). */
static const char *verb(const char *blockers)
{
	static const struct { const char *b, *v; } verbs[] = {
		{ "fs.read_file", "reading" },	{ "fs.write_file", "writing" },
		{ "fs.read_dir", "listing" },	{ "fs.execute", "running" },
		{ "fs.make_reg", "creating a file in" }, { "fs.make_dir", "making a directory in" },
		{ "fs.make_sym", "making a symlink in" }, { "fs.make_sock", "making a socket in" },
		{ "fs.make_fifo", "making a fifo in" }, { "fs.make_char", "making a device in" },
		{ "fs.make_block", "making a device in" }, { "fs.remove_file", "deleting a file in" },
		{ "fs.remove_dir", "deleting a directory in" }, { "fs.refer", "moving or linking across" },
		{ "fs.truncate", "truncating" }, { "fs.ioctl_dev", "an ioctl on" },
		{ "net.connect_tcp", "connecting to TCP port" }, { "net.bind_tcp", "binding TCP port" },
		{ "scope.signal", "signalling" }, { "ptrace", "tracing" },
		{ "scope.abstract_unix_socket", "connecting to the abstract unix socket" },
	};
	size_t n = strcspn(blockers, ",");
	for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
		if (strlen(verbs[i].b) == n && memcmp(verbs[i].b, blockers, n) == 0)
			return verbs[i].v;
	return NULL;
}

static void on_access(const char *s, size_t n)
{
	char dom[32], blockers[256], obj[KA_PATH];
	if (!field(s, n, "domain", dom, sizeof(dom)) || !field(s, n, "blockers", blockers, sizeof(blockers)))
		return;
	char comm[64];
	if (field(s, n, "opid", comm, sizeof(comm))) {
		/* A process outside the sandbox: its pid and name. */
		char pid[64];
		memcpy(pid, comm, sizeof(pid));	/* digits */
		if (!field(s, n, "ocomm", comm, sizeof(comm)))
			comm[0] = '\0';
		snprintf(obj, sizeof(obj), "process %s%s%s%s, outside the sandbox", pid, comm[0] ? " (" : "", comm,
			 comm[0] ? ")" : "");
	} else if (field(s, n, "path", obj, sizeof(obj)) || field(s, n, "dest", obj, sizeof(obj)) ||
		   field(s, n, "name", obj, sizeof(obj))) {
		/* obj holds it */
	} else {
		obj[0] = '\0';
	}
	struct ka_domain *d = domain_of(strtoull(dom, NULL, 16), true);
	d->stamp = ++ka.stamp;
	const char *v = verb(blockers);
	struct buf b = {0};
	if (v)
		buf_puts(&b, v);
	else
		buf_printf(&b, "%.*s", (int)strcspn(blockers, ","), blockers);
	if (obj[0]) {
		buf_putc(&b, ' ');
		utf8_sanitize(obj, strlen(obj), &b);
	}
	buf_putc(&b, '\0');
	for (unsigned k = 0; k < d->n; k++)
		if (str_eq(d->what[k], buf_head(&b))) {
			buf_free(&b);
			return;
		}
	if (d->n < KA_DENIALS)
		d->what[d->n++] = buf_steal(&b);
	else {
		d->more++;
		buf_free(&b);
	}
}

static void drop(struct ka_domain *d)
{
	for (unsigned k = 0; k < d->n; k++)
		free(d->what[k]);
	*d = (struct ka_domain){0};
}

static void on_domain(const char *s, size_t n)
{
	char dom[32], status[32], pid[16];
	if (!field(s, n, "domain", dom, sizeof(dom)) || !field(s, n, "status", status, sizeof(status)))
		return;
	uint64_t id = strtoull(dom, NULL, 16);
	if (str_eq(status, "deallocated")) {
		struct ka_domain *d = domain_of(id, false);
		if (d)
			d->ended = true;
		return;
	}
	if (!str_eq(status, "allocated") || !field(s, n, "pid", pid, sizeof(pid)))
		return;
	pid_t p = (pid_t)atoi(pid);
	/* A domain of an earlier process that had this pid, whose note
	 * nobody took (it exited 0): not this one's. */
	for (size_t i = 0; ka.dom && i < KA_DOMAINS; i++)
		if (ka.dom[i].stamp && ka.dom[i].pid == p && ka.dom[i].ended && ka.dom[i].id != id)
			drop(&ka.dom[i]);
	struct ka_domain *d = domain_of(id, true);
	d->pid = p;
	d->stamp = ++ka.stamp;
}

/* Reads what is there (at most KA_BATCH records). */
static void drain(void)
{
	char buf[KA_RECORD];
	for (unsigned i = 0; i < KA_BATCH && ka.fd >= 0; i++) {
		ssize_t k = recv(ka.fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
		if (k < 0 && errno == ENOBUFS) {
			ka.dropped++;	/* the socket overflowed: records were lost */
			continue;
		}
		if (k < 0)
			return;
		if ((size_t)k > sizeof(buf) || (size_t)k < NLMSG_HDRLEN)
			continue;	/* cut or too short: not ours to guess */
		const struct nlmsghdr *h = (const void *)buf;
		if (h->nlmsg_len < NLMSG_HDRLEN || h->nlmsg_len > (size_t)k)
			continue;
		ka.records++;
		const char *s = NLMSG_DATA(h);
		size_t len = h->nlmsg_len - NLMSG_HDRLEN;
		while (len && s[len - 1] == '\0')
			len--;
		if (h->nlmsg_type == AUDIT_LANDLOCK_ACCESS)
			on_access(s, len);
		else if (h->nlmsg_type == AUDIT_LANDLOCK_DOMAIN)
			on_domain(s, len);
	}
}

static void on_readable(void *arg, int revents)
{
	(void)arg;
	(void)revents;
	drain();
}

/* Asks the kernel for audit's state: whether it is on and how many
 * records wait in its queue for the audit thread to send them; 0 or a
 * negative errno (-EPERM without CAP_AUDIT_CONTROL). */
static int audit_status(bool *ret_on, uint32_t *ret_backlog)
{
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
	if (fd < 0)
		return -errno;
	struct timeval tv = { .tv_sec = 1 };
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct nlmsghdr req = {
		.nlmsg_len = NLMSG_LENGTH(0), .nlmsg_type = AUDIT_GET, .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1,
	};
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	if (sendto(fd, &req, req.nlmsg_len, 0, (const struct sockaddr *)&to, sizeof(to)) < 0)
		return -errno;
	char buf[1024];
	for (int tries = 0; tries < 4; tries++) {
		ssize_t k = recv(fd, buf, sizeof(buf), 0);
		if (k < 0)
			return -errno;
		size_t left = (size_t)k;
		for (const struct nlmsghdr *h = (const void *)buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_type == NLMSG_ERROR && h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				if (e->error)
					return e->error;
			} else if (h->nlmsg_type == AUDIT_GET &&
				   h->nlmsg_len >= NLMSG_LENGTH(offsetof(struct audit_status, backlog) + 4)) {
				const struct audit_status *st = NLMSG_DATA(h);
				*ret_on = st->enabled != 0;
				*ret_backlog = st->backlog;
				return 0;
			}
		}
	}
	return -EPROTO;
}

static void set_why(char *why)
{
	free(ka.why);
	ka.why = why;
}

/* Subscribes to the records; 0 or a negative errno, ka.why saying why not. */
static int subscribe(void)
{
	int r;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_AUDIT);
	if (fd < 0) {
		r = -errno;
		set_why(xasprintf("no audit socket (%s)", strerror(-r)));
		return r;
	}
	int size = KA_RCVBUF;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	struct sockaddr_nl a = { .nl_family = AF_NETLINK, .nl_groups = 1U << (AUDIT_NLGRP_READLOG - 1) };
	if (bind(fd, (const struct sockaddr *)&a, sizeof(a)) < 0) {
		r = -errno;
		close(fd);
		set_why(r == -EPERM ? xstrdup("the daemon may not read audit records (CAP_AUDIT_READ)")
				    : xasprintf("the audit records cannot be read (%s)", strerror(-r)));
		return r;
	}
	ka.fd = fd;
	ka.io = tc_io_new(ka.loop, fd, TC_IO_READ, on_readable, NULL);
	tc_io_start(ka.io);
	ka.on = true;
	set_why(NULL);
	sandbox_landlock_restrict_flags = LANDLOCK_LOG_NEW_EXEC_ON;
	return 0;
}

/*
 * Asks audit's state again, at most once a second: a machine's audit may
 * be turned off after the daemon started (its notes then come from the
 * sandbox's plan alone, refusal.c, and admin/stats says so), or on (the
 * daemon subscribes then). Without CAP_AUDIT_CONTROL the state cannot be asked: what was
 * found at the start stands. *ret_backlog, when asked for, is the number
 * of records the kernel has still to send (forced to be asked).
 */
static void recheck(uint32_t *ret_backlog)
{
	uint64_t now = mono_ms();
	if (!ka.started || ka.abi < 7 || (!ret_backlog && ka.asked_ms && now - ka.asked_ms < SANDBOX_KAUDIT_RECHECK_MS))
		return;
	ka.asked_ms = now ? now : 1;
	bool on;
	uint32_t backlog;
	if (audit_status(&on, &backlog) < 0)
		return;
	if (ret_backlog)
		*ret_backlog = backlog;
	if (on && ka.fd < 0 && ka.loop)
		(void)subscribe();
	else if (on && ka.fd >= 0) {
		ka.on = true;
		set_why(NULL);
	} else if (!on && ka.fd >= 0 && ka.on) {
		ka.on = false;
		set_why(xstrdup("audit was turned off after the daemon started"));
	}
}

int sandbox_kaudit_start(struct tc_loop *loop, int landlock_abi)
{
	if (ka.started)
		return ka.on ? 0 : -EOPNOTSUPP;
	ka.started = true;
	ka.loop = loop;
	ka.abi = landlock_abi;
	if (landlock_abi < 7) {
		set_why(xasprintf("Landlock logs denials from ABI 7 on, the kernel has %d", landlock_abi));
		return -EOPNOTSUPP;
	}
	bool on;
	uint32_t backlog;
	int r = audit_status(&on, &backlog);
	ka.asked_ms = mono_ms();
	if (r == 0 && !on) {
		/* Asked again on demand (recheck()): subscribed once it is on. */
		set_why(xstrdup("audit is off on this machine"));
		return -EOPNOTSUPP;
	}
	/* Without CAP_AUDIT_CONTROL its state cannot be asked: the
	 * subscription below still tells whether records can be read. */
	if (r < 0 && r != -EPERM) {
		set_why(xasprintf("the audit socket cannot be asked (%s)", strerror(-r)));
		return r;
	}
	return subscribe();
}

void sandbox_kaudit_stop(void)
{
	ka.io = tc_io_free(ka.io);
	if (ka.fd >= 0)
		close(ka.fd);
	ka.fd = -1;
	ka.on = false;
	ka.started = false;
	ka.loop = NULL;
	ka.asked_ms = 0;
	sandbox_landlock_restrict_flags = 0;
	if (ka.dom)
		for (size_t i = 0; i < KA_DOMAINS; i++)
			for (unsigned k = 0; k < ka.dom[i].n; k++)
				free(ka.dom[i].what[k]);
	free(ka.dom);
	ka.dom = NULL;
	free(ka.why);
	ka.why = NULL;
}

bool sandbox_kaudit_on(void)
{
	return ka.on;
}

const char *sandbox_kaudit_why(void)
{
	return ka.why ? ka.why : "not started";
}

/* Whether a domain of pid has denials kept. */
static bool has_pid(pid_t pid)
{
	for (size_t i = 0; ka.dom && i < KA_DOMAINS; i++)
		if (ka.dom[i].stamp && ka.dom[i].pid == pid && ka.dom[i].n)
			return true;
	return false;
}

void sandbox_kaudit_feed(int type, const char *text, size_t len)
{
	if (len > KA_RECORD)
		len = KA_RECORD;
	ka.records++;
	if (type == AUDIT_LANDLOCK_ACCESS)
		on_access(text, len);
	else if (type == AUDIT_LANDLOCK_DOMAIN)
		on_domain(text, len);
}

/* The denials kept of pid's domains, formatted, taken (dropped) when
 * take; *ret_seen counts them. No record is read here. */
static char *kept(pid_t pid, bool take, uint64_t *ret_seen)
{
	*ret_seen = 0;
	if (!ka.dom)
		return NULL;
	struct buf b = {0};
	unsigned shown = 0, more = 0;
	for (size_t i = 0; i < KA_DOMAINS; i++) {
		struct ka_domain *d = &ka.dom[i];
		if (!d->stamp || d->pid != pid)
			continue;
		for (unsigned k = 0; k < d->n; k++) {
			if (shown < KA_DENIALS)
				buf_printf(&b, "%s%s", shown ? "; " : "", d->what[k]);
			else
				more++;
			shown++;
		}
		more += d->more;
		if (take)
			drop(d);
	}
	*ret_seen = shown + more - (shown > KA_DENIALS ? shown - KA_DENIALS : 0);
	if (!shown) {
		buf_free(&b);
		return NULL;
	}
	if (more)
		buf_printf(&b, " (and %u more)", more);
	ka.notes += take;
	return buf_steal(&b);
}

static char *take_kept(pid_t pid)
{
	uint64_t seen;
	return kept(pid, true, &seen);
}

char *sandbox_kaudit_peek(pid_t pid, uint64_t *ret_seen)
{
	*ret_seen = 0;
	return pid > 0 ? kept(pid, false, ret_seen) : NULL;
}

char *sandbox_kaudit_take(pid_t pid, bool wait)
{
	/* Audit turned on since: subscribed from now on. */
	if (ka.fd < 0)
		recheck(NULL);
	if ((ka.fd < 0 && !ka.dom) || pid <= 0)
		return NULL;
	drain();
	/*
	 * The child's records were queued by the kernel before its refused
	 * call returned, so before it exited; the audit thread sends them
	 * when it runs, which may be after the exit is seen. Asked for a call
	 * that failed, the daemon waits while that queue holds records (up to
	 * SANDBOX_KAUDIT_WAIT_MS): an empty queue means the records were
	 * sent (the thread multicasts each right after taking it off the
	 * queue; a last read follows). Without CAP_AUDIT_CONTROL the queue
	 * cannot be asked: then it waits when stderr speaks of a refusal
	 * (wait), until one comes.
	 */
	uint64_t deadline = mono_ms() + SANDBOX_KAUDIT_WAIT_MS;
	bool waited = false;
	while (ka.fd >= 0 && !has_pid(pid)) {
		uint32_t backlog = UINT32_MAX;
		recheck(&backlog);
		bool queued = backlog == UINT32_MAX ? wait : backlog > 0;
		uint64_t now = mono_ms();
		if (!ka.on || !queued || now >= deadline) {
			drain();
			break;
		}
		waited = true;
		struct pollfd p = { .fd = ka.fd, .events = POLLIN };
		int left = (int)(deadline - now);
		(void)poll(&p, 1, backlog == UINT32_MAX ? left : MIN(left, 1));
		drain();
	}
	ka.waited += waited;
	return take_kept(pid);
}

char *sandbox_kaudit_take_kept(pid_t pid)
{
	return pid > 0 ? take_kept(pid) : NULL;
}

void sandbox_kaudit_write_stats(struct jgen *g)
{
	recheck(NULL);
	jgen_key(g, "sandboxNotes");
	jgen_obj_open(g);
	jgen_kv_str(g, "from", ka.on ? "audit" : "plan");
	if (!ka.on)
		jgen_kv_str(g, "why", sandbox_kaudit_why());
	jgen_kv_int(g, "records", (int64_t)ka.records);
	jgen_kv_int(g, "dropped", (int64_t)ka.dropped);
	jgen_kv_int(g, "notes", (int64_t)ka.notes);
	jgen_kv_int(g, "waited", (int64_t)ka.waited);
	jgen_kv_int(g, "paths", (int64_t)sandbox_refusal_notes);
	jgen_obj_close(g);
}
