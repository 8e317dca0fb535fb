/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every module uses: allocation that never returns NULL
 * (running out of memory aborts, as in tmux: every size a client controls is
 * bounded before it is allocated), cleanup attributes in the style of
 * systemd, and time.
 */
#ifndef TC_UTIL_H
#define TC_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define UNUSED __attribute__((unused))
#define PRINTF(f, a) __attribute__((format(printf, f, a)))
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
void *xreallocarray(void *p, size_t n, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void *xmemdup(const void *p, size_t n);
char *xasprintf(const char *fmt, ...) PRINTF(1, 2);
char *xvasprintf(const char *fmt, va_list ap) PRINTF(1, 0);
/* Sets *ret_err to the formatted message and returns -EINVAL: for parsers
 * that explain what they refuse. */
int set_errorf(char **ret_err, const char *fmt, ...) PRINTF(2, 3);

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd) { if (*fd >= 0) { int e = errno; close(*fd); errno = e; } }
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
/* Defines funcp(type **), calling func on the pointer: for _cleanup_(funcp)
 * with a destructor that accepts NULL. */
#define DEFINE_CLEANUP_FUNC(type, func) \
	static inline void func##p(type **p) { func(*p); }

/* Hand ownership of a pointer or fd out of a cleanup-attributed variable. */
#define TAKE_PTR(p) ({ __typeof__(p) _p = (p); (p) = NULL; _p; })
#define TAKE_FD(fd) ({ int _fd = (fd); (fd) = -1; _fd; })

/* Milliseconds of CLOCK_MONOTONIC and of CLOCK_REALTIME; nanoseconds of
 * CLOCK_MONOTONIC. */
uint64_t mono_ms(void);
uint64_t mono_ns(void);
uint64_t wall_ms(void);
/* Formats a wall-clock time as RFC 3339 UTC with milliseconds into buf[32]. */
void format_time(uint64_t ms, char buf[static 32]);

/* A bijection of 64-bit numbers under key (a four-round Feistel network
 * on 32-bit halves, murmur3's finaliser as its round function): ids made
 * from a count stay distinct, and to whoever does not hold the key they
 * tell neither the count nor how many were made between two of them. Not
 * a cipher for secrets: enough that one user of the daemon learns nothing
 * of another's activity from the ids it is given. */
uint64_t id_hide(uint64_t n, const uint32_t key[static 4]);
/* Writes v as 16 lowercase hex digits ending at end: their start. */
char *fmt_hex64(char *end, uint64_t v);

/* Strings. */
bool str_eq(const char *a, const char *b);
bool str_has_prefix(const char *s, const char *prefix);
bool str_has_suffix(const char *s, const char *suffix);

#endif
