/* SPDX-License-Identifier: MIT */
/*
 * Idempotency (lib/dispatch/idem.c) on a fake clock: keys are scoped to
 * the caller's uid; the index of executions in flight shares a key with
 * later callers of the same tool and arguments and tells a conflict
 * otherwise; the store it opens (memory) makes one caller the key's, lets
 * the others wait and hands them its outcome, replays that outcome until
 * the TTL (idempotency.ttl_ms, changed by a reload) is over, and frees the
 * key for a waiter when its holder lets it go.
 */
#include <check.h>
#include <string.h>

#include "lib/dispatch/dispatch.h"
#include "lib/dispatch/dispatch_internal.h"
#include "lib/base/loop.h"
#include "lib/store/store.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fakeloop.h"

static struct tc_loop *loop;
static struct dispatch_config cfg;
static struct idem_cache cache;

/* What a claim was answered. */
struct ans {
	unsigned calls;
	enum store_result result;
	bool joined;
	bool same_tool;
	char text[64];
	struct store_claim *claim;
};

static void on_answer(void *arg, const struct store_answer *a)
{
	struct ans *r = arg;
	r->calls++;
	r->result = a->result;
	r->joined = a->joined;
	r->same_tool = a->same_tool;
	r->claim = a->claim;
	r->text[0] = '\0';
	if (a->result == STORE_DONE && a->value) {
		const struct outcome *o = a->value;
		snprintf(r->text, sizeof(r->text), "%s", o->text ? o->text : "");
	}
}

static void idem_setup(void)
{
	loop = fakeloop_new();
	dispatch_config_defaults(&cfg);
	cfg.idem_ttl_ms = 1000;
	idem_init(&cache, loop, &cfg);
}

static void idem_teardown(void)
{
	idem_clear(&cache);
	fakeloop_free(loop);
}

/* Claims key for uid as a call of tool with arguments canon. */
static struct store_wait *claim(uid_t uid, const char *key, const char *tool, const char *canon, struct ans *r)
{
	uint8_t hash[STORE_HASH_LEN];
	store_args_hash(tool, canon, strlen(canon), hash);
	struct store_key k = { .uid = uid, .key = key, .key_len = strlen(key), .tool = tool, .hash = hash };
	*r = (struct ans){0};
	return store_claim(cache.store, &k, on_answer, r);
}

/* Ends a held claim with a successful outcome whose text is text. */
static void complete(struct store_claim *c, const char *text)
{
	struct outcome *o = outcome_new(TC_OK);
	o->text = xstrdup(text);
	store_complete(c, o);
	outcome_unref(o);
}

START_TEST(keys_are_scoped_by_uid)
{
	_cleanup_free_ char *a = idem_key(1000, "k1");
	_cleanup_free_ char *b = idem_key(1001, "k1");
	_cleanup_free_ char *c = idem_key(1000, "k1");
	ck_assert_str_ne(a, b);
	ck_assert_str_eq(a, c);
	ck_assert_str_eq(idem_client_key(a), "k1");
	ck_assert_str_eq(idem_client_key(b), "k1");
	/* A client's key may hold the separator itself. */
	_cleanup_free_ char *d = idem_key(7, "x\x1fy");
	ck_assert_str_eq(idem_client_key(d), "x\x1fy");
}
END_TEST

START_TEST(calls_in_flight_share_a_key_or_conflict)
{
	struct exec *e1 = (struct exec *)(uintptr_t)0x1, *e2 = (struct exec *)(uintptr_t)0x2;
	_cleanup_free_ char *key = idem_key(1000, "k");
	_cleanup_free_ char *other_uid = idem_key(1001, "k");
	ck_assert_ptr_null(idem_find(&cache, key));
	idem_begin(&cache, key, "slow", "{\"n\":1}", e1);
	ck_assert_uint_eq(idem_in_flight(&cache), 1);

	struct idem_entry *ie = idem_find(&cache, key);
	ck_assert_ptr_nonnull(ie);
	ck_assert_ptr_eq(ie->exec, e1);
	ck_assert(!idem_conflicts(ie, "slow", "{\"n\":1}"));
	ck_assert(idem_conflicts(ie, "slow", "{\"n\":2}"));
	ck_assert(idem_conflicts(ie, "echo", "{\"n\":1}"));
	ck_assert_ptr_null(idem_find(&cache, other_uid));

	/* Only the execution that answers the key ends it here. */
	idem_end(&cache, key, e2);
	ck_assert_ptr_eq(idem_find(&cache, key), ie);
	idem_end(&cache, key, e1);
	ck_assert_ptr_null(idem_find(&cache, key));
	ck_assert_uint_eq(idem_in_flight(&cache), 0);
}
END_TEST

START_TEST(waiters_get_the_holders_outcome)
{
	struct ans a, b, c;
	ck_assert_ptr_null(claim(1000, "k", "slow", "{}", &a));
	ck_assert_uint_eq(a.calls, 1);
	ck_assert_int_eq(a.result, STORE_CLAIMED);
	ck_assert_ptr_nonnull(a.claim);

	/* Same key, same call: waits for the holder. */
	ck_assert_ptr_nonnull(claim(1000, "k", "slow", "{}", &b));
	ck_assert_uint_eq(b.calls, 0);
	complete(a.claim, "the outcome");
	ck_assert_uint_eq(b.calls, 1);
	ck_assert_int_eq(b.result, STORE_DONE);
	ck_assert(b.joined);
	ck_assert_str_eq(b.text, "the outcome");

	/* Later: replayed, without waiting. */
	ck_assert_ptr_null(claim(1000, "k", "slow", "{}", &c));
	ck_assert_int_eq(c.result, STORE_DONE);
	ck_assert(!c.joined);
	ck_assert_str_eq(c.text, "the outcome");
	ck_assert_uint_eq(idem_size(&cache), 1);
}
END_TEST

START_TEST(the_key_with_another_call_conflicts)
{
	struct ans a, b, c;
	claim(1000, "k", "slow", "{}", &a);
	complete(a.claim, "x");
	claim(1000, "k", "slow", "{\"n\":2}", &b);
	ck_assert_int_eq(b.result, STORE_CONFLICT);
	ck_assert(b.same_tool);
	claim(1000, "k", "echo", "{}", &c);
	ck_assert_int_eq(c.result, STORE_CONFLICT);
	ck_assert(!c.same_tool);
}
END_TEST

START_TEST(another_uid_has_its_own_key)
{
	struct ans a, b;
	claim(1000, "k", "slow", "{}", &a);
	complete(a.claim, "x");
	ck_assert_ptr_null(claim(1001, "k", "slow", "{}", &b));
	ck_assert_int_eq(b.result, STORE_CLAIMED);
	store_release(b.claim);
}
END_TEST

START_TEST(outcomes_expire_after_the_ttl)
{
	struct ans a, b, c;
	claim(1000, "k", "slow", "{}", &a);
	complete(a.claim, "x");
	ck_assert_uint_eq(store_next_expiry(cache.store), tc_now(loop) + 1000);
	fakeloop_advance(loop, 999);
	claim(1000, "k", "slow", "{}", &b);
	ck_assert_int_eq(b.result, STORE_DONE);
	fakeloop_advance(loop, 1);
	/* Past the TTL the key is new again. */
	claim(1000, "k", "slow", "{}", &c);
	ck_assert_int_eq(c.result, STORE_CLAIMED);
	store_release(c.claim);
	store_sweep(cache.store);
	ck_assert_uint_eq(idem_size(&cache), 0);
}
END_TEST

START_TEST(a_reload_changes_the_ttl)
{
	struct ans a, b;
	cfg.idem_ttl_ms = 100;
	idem_configure(&cache, &cfg);
	claim(1000, "k", "slow", "{}", &a);
	complete(a.claim, "x");
	fakeloop_advance(loop, 100);
	claim(1000, "k", "slow", "{}", &b);
	ck_assert_int_eq(b.result, STORE_CLAIMED);
	store_release(b.claim);
}
END_TEST

START_TEST(a_released_key_goes_to_a_waiter)
{
	struct ans a, b;
	claim(1000, "k", "slow", "{}", &a);
	ck_assert_ptr_nonnull(claim(1000, "k", "slow", "{}", &b));
	store_release(a.claim);
	ck_assert_uint_eq(b.calls, 1);
	ck_assert_int_eq(b.result, STORE_CLAIMED);
	ck_assert_ptr_nonnull(b.claim);
	complete(b.claim, "second");
	ck_assert_uint_eq(idem_size(&cache), 1);
}
END_TEST

START_TEST(an_unknown_store_is_refused_and_the_old_one_kept)
{
	struct store *before = cache.store;
	struct store_config sc;
	store_config_defaults(&sc);
	sc.kind = "nowhere";
	ck_assert_int_lt(idem_open_store(&cache, loop, &cfg, &sc), 0);
	ck_assert_ptr_eq(cache.store, before);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("idem");
	TCase *tc = tcase_create("idem");
	tcase_add_checked_fixture(tc, idem_setup, idem_teardown);
	tcase_add_test(tc, keys_are_scoped_by_uid);
	tcase_add_test(tc, calls_in_flight_share_a_key_or_conflict);
	tcase_add_test(tc, waiters_get_the_holders_outcome);
	tcase_add_test(tc, the_key_with_another_call_conflicts);
	tcase_add_test(tc, another_uid_has_its_own_key);
	tcase_add_test(tc, outcomes_expire_after_the_ttl);
	tcase_add_test(tc, a_reload_changes_the_ttl);
	tcase_add_test(tc, a_released_key_goes_to_a_waiter);
	tcase_add_test(tc, an_unknown_store_is_refused_and_the_old_one_kept);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
