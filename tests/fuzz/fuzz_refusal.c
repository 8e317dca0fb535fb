/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the reading of a failed child's stderr by the
 * sandbox's note (lib/sandbox/refusal.c): the input is the stderr, judged
 * against a fixed plan (a writable workspace that is not there and where
 * the child started, a protected path, a directory covered empty, a
 * private one), its child uid 65534, or uid 0 under the seccomp filter
 * without capabilities when the first byte is odd. Whatever the bytes: no
 * crash, no read past them, and a refusal named is one of the plan's
 * kinds, a NUL-free line of at most 8 entries.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/sandbox/sandbox_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const writable[] = { "/nonexistent-tc-ws", NULL };
	static const char *const ro_binds[] = { "/nonexistent-tc-ws/.git/hooks", NULL };
	static const char *const hide_dirs[] = { "/tmp/.X11-unix", "/run/dbus", NULL };
	static const char *const covers[] = { "/nonexistent-tc-ws/.ssh", NULL };
	bool root = size && (data[0] & 1);
	const struct sandbox_refusal_plan p = {
		.writable = writable, .ro_binds = ro_binds, .hide_dirs = hide_dirs, .covers = covers,
		.tmpdir = "/nonexistent-tc-tmp", .uid = root ? 0 : 65534, .gid = root ? 0 : 65534,
		.cwd = "/nonexistent-tc-ws", .seccomp = root, .no_caps = root,
	};
	/* A copy of exactly size bytes, so that a read past them is seen. */
	char *err = malloc(size ? size : 1);
	if (!err)
		return 0;
	memcpy(err, data, size);
	bool unsure = false;
	char *s = sandbox_refusal_check(&p, err, size, "reading /etc/x", &unsure);
	if (s) {
		unsigned entries = 1;
		for (const char *k = s; (k = strstr(k, "; ")); k += 2)
			entries++;
		if (!*s || entries > 9 ||
		    !(strstr(s, "(read-only in the sandbox") || strstr(s, "(a protected path") || strstr(s, "(hidden:") ||
		      strstr(s, "(a private path") ||
		      (root && (strstr(s, "(a sandboxed child holds no capabilities") ||
				strstr(s, "(no file gets one in the sandbox)") || strstr(s, "(the sandbox makes no device") ||
				strstr(s, "(the sandbox's filter refuses")))))
			abort();
		free(s);
	}
	free(err);
	return 0;
}
