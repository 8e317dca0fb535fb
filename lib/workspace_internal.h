/* SPDX-License-Identifier: MIT */
/*
 * What lib/workspace.c offers its own tests only: switching to the walk
 * used where the kernel lacks openat2, so that both walks run the same
 * tests on any kernel. Programs get the same with TOOLCALLD_NO_OPENAT2=1 in
 * the environment.
 */
#ifndef TC_WORKSPACE_INTERNAL_H
#define TC_WORKSPACE_INTERNAL_H

#include <stdbool.h>

/*
 * With on, resolves every path by the walk with plain openat(), as where
 * openat2 is missing; with off, finds out again whether openat2 is there
 * (and whether TOOLCALLD_NO_OPENAT2 asks not to use it). Process-wide.
 */
void ws_force_fallback(bool on);

#endif
