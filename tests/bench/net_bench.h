/* SPDX-License-Identifier: MIT */
/* The network proxy's benchmark scenario for tc-bench (net_bench.c). */
#ifndef TC_NET_BENCH_H
#define TC_NET_BENCH_H

#include <stddef.h>

/*
 * Downloads mb MiB from an origin on 127.0.0.1 directly and through the
 * proxy engine's CONNECT (its own process), rounds times each, taking
 * turns, in two placements of the processes on the CPUs (the origin on a
 * CPU of its own; all unpinned); writes a line per placement with both
 * throughputs, their ratio and the target into out. The caller's CPU
 * affinity is restored. Returns 0, or -1 with the reason in out.
 */
int net_bench_connect(unsigned mb, unsigned rounds, char *out, size_t size);

#endif
