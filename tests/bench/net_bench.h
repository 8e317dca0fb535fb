/* SPDX-License-Identifier: MIT */
/* The network proxy's benchmark scenario for tc-bench (net_bench.c). */
#ifndef TC_NET_BENCH_H
#define TC_NET_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The name the daemon's network.hosts maps to the origin's address. */
#define NET_BENCH_ORIGIN "origin.bench"
#define NET_BENCH_ROUNDS_MAX 32

/* Forks the origin: every connection to 127.0.0.1:*port gets total bytes,
 * then end of file. Runs on CPU cpu (< 0: any). Returns its pid, or -1. */
pid_t net_bench_origin_start(size_t total, int cpu, uint16_t *port);

/* Binds every thread of pid to cpu, or lets them run on any CPU (< 0). */
void net_bench_set_cpu(pid_t pid, int cpu);

/*
 * The client (tc-bench --net-client direct|proxy ORIGIN_PORT BYTES CPU;
 * argv[0] is "--net-client"): on CPU CPU (-1: any), connects to the origin directly or
 * through $HTTPS_PROXY's CONNECT to NET_BENCH_ORIGIN, reads to the end
 * with a 1 MiB buffer and prints one line: bytes, nanoseconds from
 * connect to end of file, its own CPU time. Returns the exit status.
 */
int net_bench_client(int argc, char **argv);

/* One download as the client told it. */
struct net_bench_dl {
	unsigned long long bytes, reads;
	double mbps;		/* 10^6 bytes per second */
	double client_cpu_ms;
};

/* Finds the client's line in text. 0, or -1 (missing, or short). */
int net_bench_client_parse(const char *text, struct net_bench_dl *ret);

/* A process's CPU time so far (/proc/PID/schedstat), in milliseconds. */
double net_bench_cpu_ms(pid_t pid);

/* One round: a direct and a proxied download, the daemon's and the
 * origin's CPU time during each. */
struct net_bench_round {
	struct net_bench_dl direct, proxied;
	double daemon_ms_direct, daemon_ms_proxied;
	double origin_ms_direct, origin_ms_proxied;
};

/* Writes the medians of the rounds (placement: where the processes ran),
 * their ratio against the target, every round, and the CPU per MB of each
 * process into out. mb: the download's size in 10^6 bytes. */
void net_bench_report(const char *placement, const struct net_bench_round *r, unsigned n, double mb, char *out,
		      size_t size);
/* A line on the CPUs: on two or fewer, the proxied way has three busy
 * processes against two. */
void net_bench_cpus_note(char *out, size_t size);

#endif
