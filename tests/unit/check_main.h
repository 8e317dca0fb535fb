/* SPDX-License-Identifier: MIT */
/*
 * What every suite's main() ends with: run the suite, exit non-zero on
 * failure, and 77 (meson's "skipped") when every case skipped.
 *
 * A case that cannot run here says why and returns through TC_SKIP (or a
 * helper that calls tc_skip_note and has its caller return, as
 * deny_syscall_or_skip does); never a bare print and return, which Check
 * counts as a pass. A suite that cannot run at all (no root, no
 * redis-server) exits TC_EXIT_SKIP from main before running. Check runs
 * each case in a forked child, so the skips are counted in a shared
 * anonymous mapping the children inherit; with CK_FORK=no it is plain
 * memory.
 *
 * A suite mixing cases that run here with cases that cannot is not split:
 * meson shows it SKIP only when nothing in it could run (every case
 * skipped: exit 77), and otherwise passes and prints "check_main: N of M
 * cases skipped" on stdout, which packaging/summary.sh counts in `make
 * check`'s closing line, each skipped case having said why on stderr
 * ("SKIP ..."). One executable per unrunnable group would multiply the
 * daemons started and the suites to list, for the same information.
 */
#ifndef TC_CHECK_MAIN_H
#define TC_CHECK_MAIN_H

#include <check.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define TC_EXIT_SKIP 77

static _Atomic unsigned *tc_skips;

/* Says on stderr why the running case skips, and counts it. */
__attribute__((format(printf, 1, 2), unused))
static void tc_skip_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("SKIP ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	if (tc_skips)
		atomic_fetch_add(tc_skips, 1);
}

/* Skips the running case (inside a START_TEST body), saying why. */
#define TC_SKIP(...) do { tc_skip_note(__VA_ARGS__); return; } while (0)

static inline int run_suite(Suite *s)
{
	void *shared = mmap(NULL, sizeof(*tc_skips), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	tc_skips = shared == MAP_FAILED ? NULL : shared;
	SRunner *sr = srunner_create(s);
	/* CK_ENV: CK_VERBOSITY picks the detail; normal when unset. */
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	int run = srunner_ntests_run(sr);
	srunner_free(sr);
	unsigned skipped = tc_skips ? atomic_load(tc_skips) : 0;
	if (tc_skips)
		munmap((void *)tc_skips, sizeof(*tc_skips));
	tc_skips = NULL;
	if (failed)
		return EXIT_FAILURE;
	if (run > 0 && skipped >= (unsigned)run) {
		printf("check_main: all %d cases skipped\n", run);
		return TC_EXIT_SKIP;
	}
	if (skipped)
		printf("check_main: %u of %d cases skipped\n", skipped, run);
	return EXIT_SUCCESS;
}

#endif
