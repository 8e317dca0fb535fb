/* SPDX-License-Identifier: MIT */
/*
 * What every suite's main() ends with: run the suite, exit non-zero on failure.
 */
#ifndef TC_CHECK_MAIN_H
#define TC_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

static inline int run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	/* CK_ENV: CK_VERBOSITY picks the detail; normal when unset. */
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
