/* SPDX-License-Identifier: MIT */
/*
 * Taking a system call away from a test, as on a kernel without it: a
 * seccomp filter that makes it fail with an errno of the test's choosing,
 * in the test's process and every process it starts.
 */
#ifndef TC_DENY_SYSCALL_H
#define TC_DENY_SYSCALL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "tests/unit/check_main.h"

/* Loads the filter of n instructions for this process and its children. */
static inline bool load_filter(struct sock_filter *code, size_t n)
{
	struct sock_fprog prog = { .len = (unsigned short)n, .filter = code };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return false;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0;
}

/* Makes system call nr fail with err from now on; false if the machine
 * has no seccomp filters. */
static inline bool deny_syscall(long nr, int err)
{
#if defined(__x86_64__)
	const unsigned arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
	const unsigned arch = AUDIT_ARCH_AARCH64;
#else
	(void)nr;
	(void)err;
	errno = ENOSYS;
	return false;
#endif
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	return load_filter(code, sizeof(code) / sizeof(code[0]));
}

/* Makes system call nr fail with err from now on when its argument arg
 * (its low 32 bits) has a bit of flags set: a flag the kernel would not
 * know, as clone's CLONE_PIDFD before Linux 5.2. False as deny_syscall. */
static inline bool deny_syscall_flags(long nr, unsigned arg, unsigned flags, int err)
{
#if defined(__x86_64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const unsigned arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const unsigned arch = AUDIT_ARCH_AARCH64;
#else
	(void)nr;
	(void)arg;
	(void)flags;
	(void)err;
	errno = ENOSYS;
	return false;
#endif
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args) + 8 * arg),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, flags, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	return load_filter(code, sizeof(code) / sizeof(code[0]));
}

/*
 * deny_syscall(nr, ENOSYS) for the test named test; false, having said why
 * on stderr and counted the skip (check_main.h), when the test must skip instead: no seccomp filters here, or
 * CK_FORK=no, where the filter would outlive the test.
 */
static inline bool deny_syscall_or_skip(const char *test, long nr)
{
	const char *fork_mode = getenv("CK_FORK");
	if (fork_mode && strcmp(fork_mode, "no") == 0) {
		tc_skip_note("%s: the seccomp filter would outlive the test with CK_FORK=no", test);
		return false;
	}
	if (!deny_syscall(nr, ENOSYS)) {
		tc_skip_note("%s: no seccomp filter on this machine (%s)", test, strerror(errno));
		return false;
	}
	return true;
}

#endif
