/* SPDX-License-Identifier: MIT */
/*
 * Open-addressing hash map with linear probing and tombstones. Keys are
 * hashed with SipHash-1-3 under a key drawn from getrandom() once per
 * process, so a client cannot craft keys (idempotency keys, request and
 * session ids) that collide. Grows at 70% load.
 */
#include "lib/base/map.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "proto/base/util.h"

#define TOMBSTONE ((char *)1)

struct slot {
	char *key;	/* NULL: empty; TOMBSTONE: removed */
	void *value;
	uint64_t hash;
};

struct map {
	struct slot *slots;
	size_t cap;	/* power of two */
	size_t n;	/* live keys */
	size_t used;	/* live keys and tombstones */
};

static uint64_t sip_key[2];
static pthread_once_t sip_once = PTHREAD_ONCE_INIT;

/* Draws the process's hash key: getrandom, else /dev/urandom, else (a
 * machine with neither) the clock, pid and an address, which at least
 * differ between runs. */
static void sip_seed(void)
{
	uint8_t *p = (uint8_t *)sip_key;
	size_t got = 0;
	while (got < sizeof(sip_key)) {
		ssize_t n = getrandom(p + got, sizeof(sip_key) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got == sizeof(sip_key))
		return;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, sip_key, sizeof(sip_key));
		close(fd);
		if (n == (ssize_t)sizeof(sip_key))
			return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	sip_key[0] = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&ts;
	sip_key[1] = ((uint64_t)getpid() << 17) ^ 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)sip_key;
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                        \
	do {                                                            \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                  \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                  \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

/* SipHash-1-3 of n bytes under key k (one compression round, three
 * finalisation rounds: the variant hash tables use). */
static uint64_t siphash13(const uint64_t k[2], const void *data, size_t n)
{
	const uint8_t *in = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ k[0];
	uint64_t v1 = 0x646f72616e646f6dULL ^ k[1];
	uint64_t v2 = 0x6c7967656e657261ULL ^ k[0];
	uint64_t v3 = 0x7465646279746573ULL ^ k[1];
	uint64_t b = (uint64_t)n << 56;
	const uint8_t *end = in + (n & ~(size_t)7);
	for (; in != end; in += 8) {
		uint64_t m = 0;
		for (int i = 0; i < 8; i++)
			m |= (uint64_t)in[i] << (8 * i);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t i = 0; i < (n & 7); i++)
		b |= (uint64_t)in[i] << (8 * i);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t map_hash(const char *key)
{
	pthread_once(&sip_once, sip_seed);
	return siphash13(sip_key, key, strlen(key));
}

struct map *map_new(void)
{
	struct map *m = xcalloc(1, sizeof(*m));
	m->cap = 16;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
	return m;
}

struct map *map_free(struct map *m)
{
	if (!m)
		return NULL;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key && m->slots[i].key != TOMBSTONE)
			free(m->slots[i].key);
	free(m->slots);
	free(m);
	return NULL;
}

static struct slot *find(const struct map *m, const char *key, uint64_t h)
{
	size_t mask = m->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct slot *s = &m->slots[i];
		if (!s->key)
			return NULL;
		if (s->key != TOMBSTONE && s->hash == h && strcmp(s->key, key) == 0)
			return s;
	}
}

void *map_get(const struct map *m, const char *key)
{
	struct slot *s = find(m, key, map_hash(key));
	return s ? s->value : NULL;
}

static void grow(struct map *m)
{
	struct slot *old = m->slots;
	size_t old_cap = m->cap;
	if (m->n * 2 >= m->cap)
		m->cap *= 2;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
	m->used = m->n;
	size_t mask = m->cap - 1;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i].key || old[i].key == TOMBSTONE)
			continue;
		size_t j = old[i].hash & mask;
		while (m->slots[j].key)
			j = (j + 1) & mask;
		m->slots[j] = old[i];
	}
	free(old);
}

void *map_put(struct map *m, const char *key, void *value)
{
	uint64_t h = map_hash(key);
	struct slot *s = find(m, key, h);
	if (s) {
		void *prev = s->value;
		s->value = value;
		return prev;
	}
	if ((m->used + 1) * 10 >= m->cap * 7)
		grow(m);
	size_t mask = m->cap - 1;
	size_t i = h & mask;
	while (m->slots[i].key && m->slots[i].key != TOMBSTONE)
		i = (i + 1) & mask;
	if (!m->slots[i].key)
		m->used++;
	m->slots[i] = (struct slot){ .key = xstrdup(key), .value = value, .hash = h };
	m->n++;
	return NULL;
}

void *map_remove(struct map *m, const char *key)
{
	struct slot *s = find(m, key, map_hash(key));
	if (!s)
		return NULL;
	void *v = s->value;
	free(s->key);
	s->key = TOMBSTONE;
	s->value = NULL;
	m->n--;
	return v;
}

size_t map_size(const struct map *m)
{
	return m->n;
}

bool map_next(const struct map *m, size_t *it, const char **ret_key, void **ret_value)
{
	for (; *it < m->cap; (*it)++) {
		struct slot *s = &m->slots[*it];
		if (s->key && s->key != TOMBSTONE) {
			if (ret_key)
				*ret_key = s->key;
			if (ret_value)
				*ret_value = s->value;
			(*it)++;
			return true;
		}
	}
	return false;
}

size_t map_probes(const struct map *m)
{
	size_t total = 0, mask = m->cap - 1;
	for (size_t i = 0; i < m->cap; i++) {
		const struct slot *s = &m->slots[i];
		if (s->key && s->key != TOMBSTONE)
			total += ((i - (size_t)s->hash) & mask) + 1;
	}
	return total;
}
