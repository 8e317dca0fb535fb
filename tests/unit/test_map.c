/* SPDX-License-Identifier: MIT */
/*
 * The string map: keys spread under a hash keyed per process, so keys a
 * client crafts to collide under an unkeyed hash (FNV-1a) cost no more
 * than ordinary ones. Spread is measured by probe counts, not time.
 */
#include <check.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/map.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"

extern char **environ;

enum { NKEYS = 10000 };

/* Linear probing below 70% load visits under two slots a key on average;
 * three allows for bad luck, and 10,000 colliding keys would need ~5,000. */
#define PROBE_BOUND(n) (3 * (n))

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The keys an attacker would send: all with the same low 16 bits of
 * FNV-1a, so in any table up to 65,536 slots they share one home slot.
 * The low bits of FNV-1a depend only on the low bits of its state, so the
 * last byte can be solved for instead of searched. */
static char **crafted_keys(void)
{
	const uint64_t P = 0x100000001b3ULL, MASK = 0xffff;
	/* P's inverse modulo 2^64 (Newton's iteration). */
	uint64_t inv = P;
	for (int i = 0; i < 6; i++)
		inv *= 2 - P * inv;
	const uint64_t want = (0x1234 * inv) & MASK;	/* state before the last multiply */
	char **keys = xcalloc(NKEYS, sizeof(*keys));
	char buf[32];
	unsigned made = 0;
	for (uint64_t i = 0; made < NKEYS; i++) {
		int n = snprintf(buf, sizeof(buf), "idem-%llu-", (unsigned long long)i);
		uint64_t h = fnv1a(buf);
		if (((h ^ want) & MASK & ~0xffULL) != 0)
			continue;
		unsigned char last = (unsigned char)((h ^ want) & 0xff);
		if (last == 0)
			continue;
		buf[n] = (char)last;
		buf[n + 1] = '\0';
		keys[made++] = xstrdup(buf);
	}
	return keys;
}

START_TEST(crafted_fnv_collisions_do_not_degrade)
{
	char **keys = crafted_keys();
	/* They do collide under FNV-1a: one home slot for all. */
	for (unsigned i = 0; i < NKEYS; i++)
		ck_assert_uint_eq(fnv1a(keys[i]) & 0xffff, 0x1234);
	struct map *m = map_new();
	for (unsigned i = 0; i < NKEYS; i++)
		ck_assert_ptr_null(map_put(m, keys[i], keys[i]));
	ck_assert_uint_eq(map_size(m), NKEYS);
	size_t probes = map_probes(m);
	ck_assert_msg(probes <= PROBE_BOUND(NKEYS), "%zu probes for %d keys", probes, NKEYS);
	for (unsigned i = 0; i < NKEYS; i++)
		ck_assert_ptr_eq(map_get(m, keys[i]), keys[i]);
	map_free(m);
	for (unsigned i = 0; i < NKEYS; i++)
		free(keys[i]);
	free(keys);
}
END_TEST

START_TEST(ordinary_keys_spread)
{
	struct map *m = map_new();
	char buf[32];
	for (unsigned i = 0; i < NKEYS; i++) {
		snprintf(buf, sizeof(buf), "session-%u", i);
		map_put(m, buf, (void *)(uintptr_t)(i + 1));
	}
	ck_assert_uint_le(map_probes(m), PROBE_BOUND(NKEYS));
	for (unsigned i = 0; i < NKEYS; i += 2) {
		snprintf(buf, sizeof(buf), "session-%u", i);
		ck_assert_ptr_eq(map_remove(m, buf), (void *)(uintptr_t)(i + 1));
	}
	ck_assert_uint_eq(map_size(m), NKEYS / 2);
	for (unsigned i = 1; i < NKEYS; i += 2) {
		snprintf(buf, sizeof(buf), "session-%u", i);
		ck_assert_ptr_eq(map_get(m, buf), (void *)(uintptr_t)(i + 1));
	}
	map_free(m);
}
END_TEST

/* This program run again as "--hash KEY": the hash it prints. */
static uint64_t hash_in_new_process(const char *key)
{
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	char *argv[] = { "test_map", "--hash", (char *)key, NULL };
	pid_t pid;
	ck_assert_int_eq(posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	char out[64] = { 0 };
	ssize_t n = read(fds[0], out, sizeof(out) - 1);
	close(fds[0]);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_gt(n, 0);
	return strtoull(out, NULL, 16);
}

START_TEST(seed_differs_between_processes)
{
	uint64_t a = hash_in_new_process("the-same-key");
	uint64_t b = hash_in_new_process("the-same-key");
	ck_assert_uint_ne(a, b);
	ck_assert_uint_ne(a, fnv1a("the-same-key"));
	/* Within one process the hash is stable. */
	ck_assert_uint_eq(map_hash("k"), map_hash("k"));
	ck_assert_uint_ne(map_hash("k"), map_hash("K"));
}
END_TEST

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--hash") == 0) {
		printf("%llx\n", (unsigned long long)map_hash(argv[2]));
		return 0;
	}
	Suite *s = suite_create("map");
	TCase *tc = tcase_create("map");
	tcase_add_test(tc, crafted_fnv_collisions_do_not_degrade);
	tcase_add_test(tc, ordinary_keys_spread);
	tcase_add_test(tc, seed_differs_between_processes);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
