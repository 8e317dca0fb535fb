/* SPDX-License-Identifier: MIT */
/*
 * Allocation that aborts on exhaustion, clocks, string helpers.
 */
#include "proto/base/util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static void oom(void)
{
	static const char msg[] = "toolcalld: out of memory\n";
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xreallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		oom();
	return xrealloc(p, n * size);
}

char *xstrdup(const char *s)
{
	return xmemdup(s, strlen(s) + 1);
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void *xmemdup(const void *p, size_t n)
{
	void *q = xmalloc(n);
	if (n)
		memcpy(q, p, n);
	return q;
}

char *xvasprintf(const char *fmt, va_list ap)
{
	char *s;
	if (vasprintf(&s, fmt, ap) < 0)
		oom();
	return s;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = xvasprintf(fmt, ap);
	va_end(ap);
	return s;
}

int set_errorf(char **ret_err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	*ret_err = xvasprintf(fmt, ap);
	va_end(ap);
	return -EINVAL;
}

uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

uint64_t mono_ms(void)
{
	return mono_ns() / 1000000;
}

uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void format_time(uint64_t ms, char buf[static 32])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, 32 - n, ".%03uZ", (unsigned)(ms % 1000));
}

bool str_eq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

bool str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static uint32_t fmix32(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x85ebca6bU;
	h ^= h >> 13;
	h *= 0xc2b2ae35U;
	h ^= h >> 16;
	return h;
}

uint64_t id_hide(uint64_t n, const uint32_t key[static 4])
{
	uint32_t l = (uint32_t)(n >> 32), r = (uint32_t)n;
	for (int i = 0; i < 4; i++) {
		uint32_t t = l ^ fmix32(r ^ key[i]);
		l = r;
		r = t;
	}
	return (uint64_t)l << 32 | r;
}

char *fmt_hex64(char *end, uint64_t v)
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++, v >>= 4)
		*--end = hex[v & 0xf];
	return end;
}
