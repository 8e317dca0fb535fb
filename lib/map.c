/* SPDX-License-Identifier: MIT */
/*
 * Open-addressing hash map with linear probing and tombstones, keyed by
 * strings hashed with FNV-1a. Grows at 70% load.
 */
#include "lib/map.h"

#include <stdint.h>
#include <string.h>

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

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
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
	struct slot *s = find(m, key, hash_str(key));
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
	uint64_t h = hash_str(key);
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
	struct slot *s = find(m, key, hash_str(key));
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
