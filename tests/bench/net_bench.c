/* SPDX-License-Identifier: MIT */
/*
 * tc-bench's "net_connect" scenario, its parts that know nothing of the
 * daemon: the origin (a process that writes N bytes to every connection,
 * then closes), the client (tc-bench --net-client, run by the daemon in a
 * sandboxed call, direct or through the call's proxy: the same program,
 * the same 1 MiB buffer, the same sandbox both ways), the CPU time of a
 * process, and the report of the rounds: each round printed, the medians
 * compared, and the CPU per MB of each process in the path.
 */
#include "tests/bench/net_bench.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto/base/util.h"

#define CLIENT_BUF (1 << 20)

/* Binds thread tid (0: the caller) to cpu, or lets it run on every
 * online CPU (cpu < 0). */
static void set_cpu(pid_t tid, int cpu)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	CPU_ZERO(&set);
	for (long i = 0; i < n && i < CPU_SETSIZE; i++)
		if (cpu < 0 || i == cpu)
			CPU_SET(i, &set);
	(void)sched_setaffinity(tid, sizeof(set), &set);
}

void net_bench_set_cpu(pid_t pid, int cpu)
{
	char path[64];
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d) {
		set_cpu(pid, cpu);
		return;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			set_cpu((pid_t)atoi(e->d_name), cpu);
	closedir(d);
}

static void origin_serve(int lfd, size_t total)
{
	static char chunk[CLIENT_BUF];

	memset(chunk, 'x', sizeof(chunk));
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			_exit(0);
		for (size_t sent = 0; sent < total;) {
			ssize_t n = send(fd, chunk, MIN(sizeof(chunk), total - sent), MSG_NOSIGNAL);
			if (n <= 0)
				break;
			sent += (size_t)n;
		}
		close(fd);
	}
}

pid_t net_bench_origin_start(size_t total, int cpu, uint16_t *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &sl) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(sin.sin_port);
	pid = fork();
	if (pid == 0) {
		set_cpu(0, cpu);
		origin_serve(fd, total);
	}
	close(fd);
	return pid;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Connects to host:port (an IPv4 literal). */
static int connect_v4(const char *host, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd;

	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The proxy of $HTTPS_PROXY ("http://127.0.0.1:3128"), connected to. */
static int connect_proxy(void)
{
	const char *v = getenv("HTTPS_PROXY");
	char host[64];
	unsigned port;

	if (!v || sscanf(v, "http://%63[0-9.]:%u", host, &port) != 2 || port == 0 || port > 65535) {
		fprintf(stderr, "net-client: HTTPS_PROXY is %s, not http://ADDRESS:PORT\n", v ? v : "unset");
		return -1;
	}
	return connect_v4(host, (uint16_t)port);
}

int net_bench_client(int argc, char **argv)
{
	static char buf[CLIENT_BUF];
	char req[128];
	unsigned long port;
	unsigned long long total, got = 0, reads = 0;
	bool proxy;
	int fd;

	if (argc != 5 || (!str_eq(argv[1], "direct") && !str_eq(argv[1], "proxy"))) {
		fprintf(stderr, "usage: tc-bench --net-client direct|proxy ORIGIN_PORT BYTES CPU\n");
		return 2;
	}
	proxy = str_eq(argv[1], "proxy");
	port = strtoul(argv[2], NULL, 10);
	total = strtoull(argv[3], NULL, 10);
	set_cpu(0, atoi(argv[4]));
	uint64_t c0 = cpu_ns(), t0 = mono_ns();
	fd = proxy ? connect_proxy() : connect_v4("127.0.0.1", (uint16_t)port);
	if (fd < 0) {
		fprintf(stderr, "net-client: connect: %s\n", strerror(errno));
		return 1;
	}
	if (proxy) {
		/* The answer's head byte by byte: nothing of the payload is
		 * taken before the clock's reads. */
		char head[256];
		size_t h = 0;
		int n = snprintf(req, sizeof(req), "CONNECT %s:%lu HTTP/1.1\r\nHost: %s:%lu\r\n\r\n",
				 NET_BENCH_ORIGIN, port, NET_BENCH_ORIGIN, port);
		if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
			return 1;
		while (h + 1 < sizeof(head) && (h < 4 || memcmp(head + h - 4, "\r\n\r\n", 4) != 0)) {
			if (recv(fd, head + h, 1, 0) != 1)
				return 1;
			h++;
		}
		head[h] = '\0';
		if (strncmp(head, "HTTP/1.1 200 ", 13) != 0) {
			fprintf(stderr, "net-client: the proxy answered %.60s\n", head);
			return 1;
		}
	}
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			fprintf(stderr, "net-client: recv: %s\n", strerror(errno));
			return 1;
		}
		if (n == 0)
			break;
		got += (unsigned long long)n;
		reads++;
	}
	uint64_t ns = mono_ns() - t0;
	close(fd);
	printf("net-client: %llu of %llu bytes in %llu ns, CPU %llu ns, %llu reads\n", got, total,
	       (unsigned long long)ns, (unsigned long long)(cpu_ns() - c0), reads);
	return got == total ? 0 : 1;
}

int net_bench_client_parse(const char *text, struct net_bench_dl *ret)
{
	const char *p = text ? strstr(text, "net-client: ") : NULL;
	unsigned long long got, total, ns, cpu, reads;

	if (!p || sscanf(p, "net-client: %llu of %llu bytes in %llu ns, CPU %llu ns, %llu reads", &got, &total, &ns, &cpu,
			 &reads) != 5 || got != total || ns == 0)
		return -1;
	ret->reads = reads;
	ret->bytes = got;
	ret->mbps = (double)got / 1e6 / ((double)ns / 1e9);
	ret->client_cpu_ms = (double)cpu / 1e6;
	return 0;
}

double net_bench_cpu_ms(pid_t pid)
{
	char path[64];
	unsigned long long ns;
	FILE *f;
	int got;

	/* The scheduler's count, in nanoseconds (clock ticks are too coarse
	 * for a download of a few tens of milliseconds). */
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	got = fscanf(f, "%llu", &ns);
	fclose(f);
	return got == 1 ? (double)ns / 1e6 : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n)
{
	double s[NET_BENCH_ROUNDS_MAX];

	if (n == 0)
		return 0;
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

#define OUT(...) (used += (size_t)snprintf(out + used, size - MIN(used, size), __VA_ARGS__), used = MIN(used, size))

void net_bench_report(const char *placement, const struct net_bench_round *r, unsigned n, double mb, char *out,
		      size_t size)
{
	double d[NET_BENCH_ROUNDS_MAX], p[NET_BENCH_ROUNDS_MAX], q[NET_BENCH_ROUNDS_MAX];
	double dd[NET_BENCH_ROUNDS_MAX], cd[NET_BENCH_ROUNDS_MAX], cp[NET_BENCH_ROUNDS_MAX];
	double od[NET_BENCH_ROUNDS_MAX], op[NET_BENCH_ROUNDS_MAX];
	double rd[NET_BENCH_ROUNDS_MAX], rp[NET_BENCH_ROUNDS_MAX];
	char rounds[NET_BENCH_ROUNDS_MAX * 96] = "";
	size_t used = 0, ru = 0;

	n = MIN(n, (unsigned)NET_BENCH_ROUNDS_MAX);
	for (unsigned i = 0; i < n; i++) {
		d[i] = r[i].direct.mbps;
		p[i] = r[i].proxied.mbps;
		q[i] = d[i] > 0 ? p[i] / d[i] : 0;
		/* The daemon's CPU for the proxied call less the direct
		 * call's (spawning the sandboxed client, the same both ways):
		 * what the tunnel cost it. */
		dd[i] = MAX(0.0, r[i].daemon_ms_proxied - r[i].daemon_ms_direct) / mb;
		cd[i] = r[i].direct.client_cpu_ms / mb;
		cp[i] = r[i].proxied.client_cpu_ms / mb;
		od[i] = r[i].origin_ms_direct / mb;
		op[i] = r[i].origin_ms_proxied / mb;
		rd[i] = (double)r[i].direct.bytes / 1024.0 / (double)MAX(r[i].direct.reads, 1ull);
		rp[i] = (double)r[i].proxied.bytes / 1024.0 / (double)MAX(r[i].proxied.reads, 1ull);
		ru += (size_t)snprintf(rounds + ru, sizeof(rounds) - MIN(ru, sizeof(rounds)),
				       "\n  round %u (%s first): direct %.0f, proxied %.0f MB/s: %.2f×; the daemon %.3f ms/MB",
				       i + 1, i % 2 ? "proxied" : "direct", d[i], p[i], q[i], dd[i]);
		ru = MIN(ru, sizeof(rounds));
	}
	double md = median(d, n), mp = median(p, n), mdd = median(dd, n);
	double mcd = median(cd, n), mcp = median(cp, n), mod = median(od, n), mop = median(op, n);
	double ratio = md > 0 ? mp / md : 0;
	double cpu_direct = mcd + mod, cpu_proxied = mcp + mop + mdd;
	OUT("net_connect (%s): %.0f MB (MB = 10^6 B) from an origin on 127.0.0.1 to a sandboxed client, direct "
	    "(network true) and through the daemon's CONNECT (network \"proxy\"), the same client both ways; one "
	    "warm-up pair, then %u rounds alternating which goes first: medians direct %.0f MB/s, through CONNECT "
	    "%.0f MB/s: %.2f× (median of the rounds' ratios %.2f×; target ≥ 0.8×: %s)%s\n",
	    placement, mb, n, md, mp, ratio, median(q, n), ratio >= 0.8 ? "met" : "MISSED", rounds);
	OUT("net_connect (%s): CPU per MB (medians): the daemon %.3f ms (%.0f MB/s of one CPU), the client %.3f ms direct "
	    "and %.3f ms proxied, the origin %.3f ms direct and %.3f ms proxied; all together %.3f ms direct and "
	    "%.3f ms proxied: a machine with no CPU to spare would give %.2f×; the client's reads %.0f KiB direct, "
	    "%.0f KiB proxied\n",
	    placement, mdd, mdd > 0 ? 1.0 / mdd * 1000.0 : 0, mcd, mcp, mod, mop, cpu_direct, cpu_proxied,
	    cpu_proxied > 0 ? cpu_direct / cpu_proxied : 0, median(rd, n), median(rp, n));
	if (used && out[used - 1] == '\n')
		out[--used] = '\0';
}

void net_bench_cpus_note(char *out, size_t size)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (ncpu > 2)
		snprintf(out, size, "net_connect: %ld CPUs", ncpu);
	else
		snprintf(out, size, "net_connect: this machine has %ld CPU%s: through the proxy three processes are busy "
			 "(origin, daemon, client) where two are direct, so the proxied download also waits for a CPU",
			 ncpu, ncpu == 1 ? "" : "s");
}
