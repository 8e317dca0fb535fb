/* SPDX-License-Identifier: MIT */
/*
 * A string-keyed hash map (sessions, idempotency keys, circuits, pending
 * confirmations). Keys are copied; values are the caller's.
 */
#ifndef TC_MAP_H
#define TC_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct map;

struct map *map_new(void);
/* Frees the map (not the values). Accepts NULL; returns NULL. */
struct map *map_free(struct map *m);
void *map_get(const struct map *m, const char *key);
/* Sets key to value, replacing (and returning) any previous value. */
void *map_put(struct map *m, const char *key, void *value);
/* Removes key; returns its value or NULL. */
void *map_remove(struct map *m, const char *key);
size_t map_size(const struct map *m);

/* Iteration: for (it = 0; map_next(m, &it, &key, &value);) — do not
 * modify the map while iterating except to remove the current key. */
bool map_next(const struct map *m, size_t *it, const char **ret_key, void **ret_value);

/* The keyed hash of key (SipHash-1-3, key random per process). */
uint64_t map_hash(const char *key);
/* Slots a lookup of every live key visits, summed: map_size() when no key
 * is displaced. For tests that keys spread. */
size_t map_probes(const struct map *m);

#endif
