/* SPDX-License-Identifier: MIT */
/*
 * The seccomp programs of the sandbox, built with libseccomp once per
 * kind and kept as BPF, so the spawned child only loads them (or
 * inherits it from a spawner, lib/child/child_spawner.c).
 *
 * Everything is allowed but: sockets of any family other than AF_UNIX and
 * AF_NETLINK unless the profile has network (AF_INET and AF_INET6 too with
 * the network "proxy", in a namespace of loopback only; EACCES: the
 * program says "Permission denied"); io_uring, which would run socket and file
 * operations past this filter; ptrace, bpf, perf_event_open, the key
 * calls, every mount-type call, setns (but into a mount or network
 * namespace in the spawner's variant: add_setns_rules()), new namespaces
 * through unshare or clone, and clone3 (ENOSYS: its flags are in memory a filter cannot read,
 * and libc falls back to clone); giving up the subreaper role that keeps a
 * call's processes together; and the ioctls that push input into a
 * terminal. The other architectures of the machine (i386 on x86_64) are
 * killed, so no other system call table is a way around. No setuid or
 * setgid bit and no device node is made (add_mode_rules()). A spawner's
 * program without network, or with the network "proxy", hands the
 * network's calls to the daemon (add_notify_rules()).
 */
#include "lib/sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/filter.h>

#include "proto/base/util.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* [enum sandbox_network]; spawner_progs: the same, as the spawner loads
 * it (seccomp_spawner_prog()). */
static struct sock_fprog *progs[3];
static struct sock_fprog *spawner_progs[3];
/* Which of spawner_progs hand calls to the daemon (add_notify_rules()). */
static bool spawner_notifies[3];
/* The no-network and "proxy" programs of a child started without a
 * spawner, handing calls to the daemon (seccomp_notes_prog()). */
static struct sock_fprog *notes_prog, *notes_proxy_prog;

void seccomp_cache_clear(void)
{
	for (int i = 0; i < 3; i++) {
		if (progs[i]) {
			free(progs[i]->filter);
			free(progs[i]);
			progs[i] = NULL;
		}
		if (spawner_progs[i]) {
			free(spawner_progs[i]->filter);
			free(spawner_progs[i]);
			spawner_progs[i] = NULL;
		}
		spawner_notifies[i] = false;
	}
	struct sock_fprog **notes[] = { &notes_prog, &notes_proxy_prog };
	for (size_t i = 0; i < ELEMENTSOF(notes); i++) {
		if (*notes[i]) {
			free((*notes[i])->filter);
			free(*notes[i]);
			*notes[i] = NULL;
		}
	}
}

static const char *const denied_calls[] = {
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open",
	"keyctl", "add_key", "request_key",
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount",
	"fsconfig", "fspick", "mount_setattr", "chroot",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"userfaultfd", "name_to_handle_at", "open_by_handle_at",
};

/* Refuses (EPERM) a call of name, where it exists here, whose argument
 * arg holds the bits value under mask. */
static int deny_masked(scmp_filter_ctx ctx, const char *name, unsigned arg, uint64_t mask, uint64_t value,
		       const char **ret_what)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR)
		return 0;
	*ret_what = name;
	struct scmp_arg_cmp cmp = { .arg = arg, .op = SCMP_CMP_MASKED_EQ, .datum_a = mask, .datum_b = value };
	return seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, &cmp);
}

/*
 * What Landlock and the read-only mounts leave to this filter: no file
 * gets a setuid or setgid bit (chmod, fchmod, fchmodat, fchmodat2; open,
 * openat and creat given a mode with one; mknod of a file with one) and
 * no device node is made (mknod, mknodat of a character or block
 * device). openat2 carries its mode in memory a filter cannot read: it
 * is ENOSYS, and libc and programs fall back to openat. chmod +x and
 * every other mode stay allowed.
 */
static int add_mode_rules(scmp_filter_ctx ctx, const char **ret_what)
{
	static const struct {
		const char *name;
		unsigned mode_arg;
	} calls[] = {
		{ "chmod", 1 }, { "fchmod", 1 }, { "fchmodat", 2 }, { "fchmodat2", 2 },
		{ "mknod", 1 }, { "mknodat", 2 }, { "creat", 1 }, { "open", 2 }, { "openat", 3 },
	};
	static const uint64_t bits[] = { S_ISUID, S_ISGID };
	int r;
	/* open and openat: the mode is looked at whatever the flags (it
	 * counts only with O_CREAT or O_TMPFILE, and libc passes 0 without
	 * them): half the rules, and a filter that loads faster. */
	for (size_t i = 0; i < ELEMENTSOF(calls); i++)
		for (size_t b = 0; b < ELEMENTSOF(bits); b++)
			if ((r = deny_masked(ctx, calls[i].name, calls[i].mode_arg, bits[b], bits[b], ret_what)) < 0)
				return r;
	static const struct {
		const char *name;
		unsigned mode_arg;
	} nodes[] = { { "mknod", 1 }, { "mknodat", 2 } };
	static const uint64_t types[] = { S_IFCHR, S_IFBLK };
	for (size_t i = 0; i < ELEMENTSOF(nodes); i++)
		for (size_t t = 0; t < ELEMENTSOF(types); t++)
			if ((r = deny_masked(ctx, nodes[i].name, nodes[i].mode_arg, S_IFMT, types[t], ret_what)) < 0)
				return r;
	int nr = seccomp_syscall_resolve_name("openat2");
	*ret_what = "openat2";
	if (nr != __NR_SCMP_ERROR && (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0)) < 0)
		return r;
	return 0;
}

/*
 * setns: refused outright, or, in the spawner's program (spawner), refused
 * but with nstype exactly CLONE_NEWNS or CLONE_NEWNET, what the spawner's
 * child needs before its exec to join the call's namespaces made ahead
 * (lib/child/child_spawner.c). That leaves nothing to a child: joining a
 * mount or network namespace takes CAP_SYS_ADMIN in the caller's own user
 * namespace (and CAP_SYS_CHROOT for a mount one), which a child has not
 * (every capability set empty), and it can neither make a user namespace
 * (unshare, clone) nor join one (nstype 0 or CLONE_NEWUSER stay refused).
 * Any other nstype the kernel refuses itself (EINVAL).
 */
static int add_setns_rules(scmp_filter_ctx ctx, bool spawner, const char **ret_what)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	int r;
	*ret_what = "setns";
	if (!spawner)
		return seccomp_rule_add(ctx, eperm, SCMP_SYS(setns), 0);
	static const uint64_t other_ns[] = {
		CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWCGROUP, CLONE_NEWTIME,
	};
	if ((r = seccomp_rule_add(ctx, eperm, SCMP_SYS(setns), 1, SCMP_A1(SCMP_CMP_EQ, 0, 0))) < 0 ||
	    (r = seccomp_rule_add(ctx, eperm, SCMP_SYS(setns), 1, SCMP_A1(SCMP_CMP_GT, 0xffffffffu, 0))) < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(other_ns); i++)
		if ((r = seccomp_rule_add(ctx, eperm, SCMP_SYS(setns), 1,
					  SCMP_A1(SCMP_CMP_MASKED_EQ, other_ns[i], other_ns[i]))) < 0)
			return r;
	return 0;
}

/*
 * The no-network program of a spawner whose listener the daemon watches
 * (lib/sandbox/netnotif.c): socket() of AF_INET and AF_INET6 (2 and 10)
 * goes to the daemon, which answers with a socket that reaches no
 * network, and so do connect() and sendto() with an address of the
 * network's length, so that the daemon sees where the child meant to go.
 * Every other family keeps its EACCES (the rules of the network
 * "proxy", add_rules()). sendmsg() is not handed over: its
 * address is in memory, so every one would be, the AF_UNIX messages of
 * programs that talk to their helpers (and the spawner's answers, which
 * the daemon waits for) included; one to an address of the network, on
 * such a socket, fails all the same (ENETUNREACH), only unnamed. The
 * spawner itself, and its child until exec, make none of these calls
 * (recvmsg, sendmsg, clone, and the plan's steps): the daemon waits for
 * their answers without running its loop, and would answer none
 * meanwhile. Nor does a child started without a spawner, which loads
 * this program (seccomp_notes_prog()) last, then only sends its
 * listener (sendmsg), closes it and execs.
 *
 * With the network "proxy" (proxy), socket() stays the child's (its
 * namespace confines it) and only connect() and sendto() go to the
 * daemon, which lets the kernel carry them out and names those that
 * bypass the proxy (netnotif.c): a round trip through the daemon per
 * connection, none for a call that opens none.
 */
static int add_notify_rules(scmp_filter_ctx ctx, bool proxy, const char **ret_what)
{
	int r;
	*ret_what = "socket";
	if (!proxy &&
	    ((r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_INET, 0))) < 0 ||
	     (r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_INET6, 0))) < 0))
		return r;
	/* Only an address length an AF_INET or AF_INET6 address has (16,
	 * 24 or 28, in 16-31; or sockaddr_storage's 128): AF_UNIX ones
	 * (nscd's, 110 bytes) and AF_NETLINK ones (12) go on without a
	 * round trip to the daemon. One of the network with another length
	 * is refused by its socket, which reaches no network, without a
	 * note. The kernel reads the length as an int: the low 32 bits. */
	static const struct {
		uint64_t mask, value;
	} lens[] = { { 0xfffffff0u, 16 }, { 0xffffffffu, 128 } };
	for (size_t i = 0; i < ELEMENTSOF(lens); i++) {
		*ret_what = "connect";
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(connect), 1,
					  SCMP_A2(SCMP_CMP_MASKED_EQ, lens[i].mask, lens[i].value))) < 0)
			return r;
		*ret_what = "sendto";
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 2, SCMP_A4(SCMP_CMP_NE, 0, 0),
					  SCMP_A5(SCMP_CMP_MASKED_EQ, lens[i].mask, lens[i].value))) < 0)
			return r;
	}
	return 0;
}

/* Adds the rules; returns 0 or a negative errno, *ret_what naming the
 * rule that failed. */
static int add_rules(scmp_filter_ctx ctx, int network, bool spawner, bool notify, const char **ret_what)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	int r;

	if ((r = add_setns_rules(ctx, spawner, ret_what)) < 0)
		return r;

	for (size_t i = 0; i < ELEMENTSOF(denied_calls); i++) {
		int nr = seccomp_syscall_resolve_name(denied_calls[i]);
		if (nr == __NR_SCMP_ERROR)
			continue;	/* not on this architecture */
		*ret_what = denied_calls[i];
		if ((r = seccomp_rule_add(ctx, eperm, nr, 0)) < 0)
			return r;
	}
	*ret_what = "clone3";
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
		return r;
	static const uint64_t ns_flags[] = {
		CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWUTS,
		CLONE_NEWIPC, CLONE_NEWCGROUP, CLONE_NEWTIME,
	};
	for (size_t i = 0; i < ELEMENTSOF(ns_flags); i++) {
		*ret_what = "unshare";
		if ((r = seccomp_rule_add(ctx, eperm, SCMP_SYS(unshare), 1,
					  SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) < 0)
			return r;
		*ret_what = "clone";
		/* The flags are clone's first argument on x86_64 and arm64. */
		if ((r = seccomp_rule_add(ctx, eperm, SCMP_SYS(clone), 1,
					  SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) < 0)
			return r;
	}
	/* The spawner's child becomes subreaper after the filter is in
	 * force (add_setns_rules()): what it keeps refused is giving the
	 * role up (arg2 0), which is all that setting it again could do. */
	*ret_what = "prctl";
	if (spawner)
		r = seccomp_rule_add(ctx, eperm, SCMP_SYS(prctl), 2, SCMP_A0(SCMP_CMP_EQ, PR_SET_CHILD_SUBREAPER, 0),
				     SCMP_A1(SCMP_CMP_EQ, 0, 0));
	else
		r = seccomp_rule_add(ctx, eperm, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_CHILD_SUBREAPER, 0));
	if (r < 0)
		return r;
	*ret_what = "ioctl";
	if ((r = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
				  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI))) < 0 ||
	    (r = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
				  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX))) < 0)
		return r;
	if ((r = add_mode_rules(ctx, ret_what)) < 0)
		return r;
	if (network == SANDBOX_NET_FULL)
		return 0;
	/* Every family but AF_UNIX (1) and AF_NETLINK (16), in five rules:
	 * 0, 2-3, 4-7, 8-15 and above 16. The comparisons are on all 64 bits
	 * of the argument, so a value the kernel would cut down to a family
	 * (high bits set) is above 16 and refused too. With the network
	 * "proxy" AF_INET (2) and AF_INET6 (10) are kept too: the child's
	 * namespace has loopback only, where the daemon's proxy listens; and
	 * so they are without network where the daemon sees them
	 * (add_notify_rules()). */
	static const struct {
		enum scmp_compare op;
		uint64_t a, b;
	} proxy_fam[] = {
		{ SCMP_CMP_EQ, 0, 0 },
		{ SCMP_CMP_EQ, 3, 0 },
		{ SCMP_CMP_MASKED_EQ, ~UINT64_C(3), 4 },
		{ SCMP_CMP_MASKED_EQ, ~UINT64_C(1), 8 },
		{ SCMP_CMP_EQ, 11, 0 },
		{ SCMP_CMP_MASKED_EQ, ~UINT64_C(3), 12 },
		{ SCMP_CMP_GT, AF_NETLINK, 0 },
	};
	_Static_assert(AF_INET == 2 && AF_INET6 == 10, "the families kept for the proxy");
	*ret_what = "socket";
	if (network == SANDBOX_NET_PROXY || notify) {
		for (size_t i = 0; i < ELEMENTSOF(proxy_fam); i++) {
			struct scmp_arg_cmp cmp = { .arg = 0, .op = proxy_fam[i].op, .datum_a = proxy_fam[i].a,
						    .datum_b = proxy_fam[i].b };
			if ((r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, &cmp)) < 0)
				return r;
		}
		return notify ? add_notify_rules(ctx, network == SANDBOX_NET_PROXY, ret_what) : 0;
	}
	static const struct {
		enum scmp_compare op;
		uint64_t a, b;
	} fam[] = {
		{ SCMP_CMP_EQ, 0, 0 },
		{ SCMP_CMP_MASKED_EQ, ~UINT64_C(1), 2 },
		{ SCMP_CMP_MASKED_EQ, ~UINT64_C(3), 4 },
		{ SCMP_CMP_MASKED_EQ, ~UINT64_C(7), 8 },
		{ SCMP_CMP_GT, AF_NETLINK, 0 },
	};
	_Static_assert(AF_UNIX == 1 && AF_NETLINK == 16, "the families kept");
	*ret_what = "socket";
	for (size_t i = 0; i < ELEMENTSOF(fam); i++) {
		struct scmp_arg_cmp cmp = { .arg = 0, .op = fam[i].op, .datum_a = fam[i].a, .datum_b = fam[i].b };
		if ((r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, &cmp)) < 0)
			return r;
	}
	return 0;
}

/* Builds a program and exports it as BPF into memory. */
static int build(int network, bool spawner, bool notify, struct sock_fprog **ret, char **ret_msg)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	const char *what = "init";
	int r = -ENOMEM;
	_cleanup_close_ int mfd = -1;

	if (!ctx)
		goto fail;
	/* no_new_privs is set by the child itself, as one step of its plan.
	 * The system calls in a binary tree: loading a filter, the kernel
	 * runs it for every system call number to find the ones it always
	 * allows, and a linear list makes that walk (and the load, about 40%
	 * of its cost here) grow with every rule. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0 ||
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0 ||
	    (r = add_rules(ctx, network, spawner, notify, &what)) < 0)
		goto fail;
	what = "export";
	mfd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
	if (mfd < 0) {
		r = -errno;
		goto fail;
	}
	if ((r = seccomp_export_bpf(ctx, mfd)) < 0)
		goto fail;
	struct stat st;
	if (fstat(mfd, &st) < 0 || st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
	    st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		r = -EINVAL;
		goto fail;
	}
	struct sock_filter *code = xmalloc((size_t)st.st_size);
	if (pread(mfd, code, (size_t)st.st_size, 0) != st.st_size) {
		free(code);
		r = -EIO;
		goto fail;
	}
	struct sock_fprog *p = xcalloc(1, sizeof(*p));
	p->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
	p->filter = code;
	seccomp_release(ctx);
	*ret = p;
	return 0;
fail:
	if (ctx)
		seccomp_release(ctx);
	*ret_msg = xasprintf("building the seccomp filter failed (%s): %s", what, strerror(-r));
	return r;
}

/* Finds or builds the program of a kind. */
const void *seccomp_prog_get(int network, char **ret_msg)
{
	if ((unsigned)network >= ELEMENTSOF(progs))
		network = SANDBOX_NET_NONE;
	struct sock_fprog **slot = &progs[network];
	if (!*slot && build(network, false, false, slot, ret_msg) < 0)
		return NULL;
	return *slot;
}

/* The program a spawner loads for children whose program is prog (one
 * of seccomp_prog_get()'s): the same but for setns (add_setns_rules()).
 * NULL if prog is none of ours or it cannot be built. */
const void *seccomp_spawner_prog(const void *prog)
{
	for (int i = 0; i < (int)ELEMENTSOF(progs); i++) {
		if (!prog || progs[i] != prog)
			continue;
		char *msg = NULL;
		/* Without network or with the proxy's, and with a daemon
		 * that answers: the calls of the network go to it
		 * (add_notify_rules()). */
		if (!spawner_progs[i]) {
			bool notify = (i == SANDBOX_NET_NONE || i == SANDBOX_NET_PROXY) && sandbox_netnotif_on();
			if (build(i, true, notify, &spawner_progs[i], &msg) < 0) {
				free(msg);
				return NULL;
			}
			spawner_notifies[i] = notify;
		}
		return spawner_progs[i];
	}
	return NULL;
}

bool seccomp_prog_notifies(const void *spawner_prog)
{
	for (int i = 0; i < (int)ELEMENTSOF(spawner_progs); i++)
		if (spawner_prog && spawner_progs[i] == spawner_prog)
			return spawner_notifies[i];
	return false;
}

/* The variant of prog (seccomp_prog_get()'s) that a child started
 * without a spawner loads with its own listener: the no-network or
 * "proxy" program handing the network's calls to the daemon
 * (add_notify_rules()). NULL for other programs, when the daemon does
 * not answer, or when it cannot be built. */
const void *seccomp_notes_prog(const void *prog)
{
	int network = prog && prog == progs[SANDBOX_NET_NONE] ? SANDBOX_NET_NONE
		      : prog && prog == progs[SANDBOX_NET_PROXY] ? SANDBOX_NET_PROXY
								 : -1;
	if (network < 0 || !sandbox_netnotif_on())
		return NULL;
	struct sock_fprog **slot = network == SANDBOX_NET_PROXY ? &notes_proxy_prog : &notes_prog;
	if (!*slot) {
		char *msg = NULL;
		if (build(network, false, true, slot, &msg) < 0) {
			free(msg);
			return NULL;
		}
	}
	return *slot;
}

bool seccomp_prog_proxied(const void *prog)
{
	return prog && (prog == notes_proxy_prog || prog == spawner_progs[SANDBOX_NET_PROXY]);
}
