/* SPDX-License-Identifier: MIT */
/*
 * Choosing a workspace in initialize: the check is made on the directory
 * actually opened, so a symlink flipped between an allowed directory and
 * "/" never yields a session rooted outside; a path that is not allowed
 * gets the same answer whether or not it exists; a directory the peer
 * cannot search, or that lies beneath one it cannot search, is refused
 * as well, judged with its supplementary groups as the kernel recorded
 * them at connect.
 */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define SWAP_ATTEMPTS 3000

/* Starts a daemon whose workspaces.allowed is DIR/allowed (made first,
 * as roots are resolved at start-up). */
static void start_with_allowed(struct tcd *d)
{
	const struct tcd_opts o = { .config = "{\"workspaces\":{\"allowed\":[\"@DIR@/allowed\"]},"
					      "\"socket_mode\":\"0666\"}" };
	tcd_prepare(d, &o);
	char *allowed = xasprintf("%s/allowed", d->dir);
	ck_assert_int_eq(mkdir(allowed, 0755), 0);
	char *sub = xasprintf("%s/allowed/sub", d->dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	free(sub);
	free(allowed);
	tcd_spawn(d, &o);
	ck_assert_int_eq(tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS), 0);
}

/* Sends initialize asking for path; returns the response. */
static const struct json *ask(struct tcc *c, const char *path)
{
	_cleanup_free_ char *q = tj_quote(path);
	const char *params = tcc_fmt(c, "{\"protocolVersion\":\"2025-06-18\",\"workspace\":%s}", q);
	return tcc_request(c, "initialize", params);
}

struct flipper {
	const char *link, *tmp, *good;
	atomic_bool stop;
	unsigned flips;
};

/* Flips link between the allowed directory and "/" by renaming a fresh
 * symlink over it, as fast as it can. */
static void *flip(void *arg)
{
	struct flipper *f = arg;
	while (!atomic_load(&f->stop)) {
		const char *to = f->flips % 2 ? "/" : f->good;
		unlink(f->tmp);
		if (symlink(to, f->tmp) == 0 && rename(f->tmp, f->link) == 0)
			f->flips++;
	}
	return NULL;
}

START_TEST(swap_race_never_escapes)
{
	struct tcd d;
	start_with_allowed(&d);
	struct tcc *c = tcc_connect(&d);
	_cleanup_free_ char *good = xasprintf("%s/allowed/sub", d.dir);
	_cleanup_free_ char *canon = realpath(good, NULL);
	_cleanup_free_ char *link = xasprintf("%s/link", d.dir);
	_cleanup_free_ char *tmp = xasprintf("%s/link.tmp", d.dir);
	ck_assert_int_eq(symlink(good, link), 0);

	struct flipper f = { link, tmp, good, false, 0 };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, flip, &f), 0);
	unsigned accepted = 0, refused = 0;
	for (int i = 0; i < SWAP_ATTEMPTS; i++) {
		const struct json *r = ask(c, link);
		const char *ws = tj_str(r, "result.workspace");
		if (ws) {
			ck_assert_msg(str_eq(ws, canon), "attempt %d: session rooted at '%s'", i, ws);
			accepted++;
		} else {
			tc_assert_kind(r, "validation_error");
			refused++;
		}
	}
	atomic_store(&f.stop, true);
	pthread_join(t, NULL);
	/* Both sides of the race were seen (else it did not test much). */
	ck_assert_uint_gt(f.flips, 10);
	ck_assert_uint_gt(accepted, 0);
	ck_assert_uint_gt(refused, 0);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(same_answer_whether_or_not_it_exists)
{
	struct tcd d;
	start_with_allowed(&d);
	struct tcc *c = tcc_connect(&d);
	_cleanup_free_ char *elsewhere = xasprintf("%s/elsewhere", d.dir);

	_cleanup_free_ char *missing = tj_text(tj(ask(c, elsewhere), "error"));
	ck_assert_int_eq(mkdir(elsewhere, 0755), 0);
	_cleanup_free_ char *present = tj_text(tj(ask(c, elsewhere), "error"));
	_cleanup_free_ char *etc = tj_text(tj(ask(c, "/etc"), "error"));
	_cleanup_free_ char *file = xasprintf("%s/config.json", d.dir);
	_cleanup_free_ char *not_dir = tj_text(tj(ask(c, file), "error"));
	_cleanup_free_ char *inside_missing_path = xasprintf("%s/allowed/nope", d.dir);
	_cleanup_free_ char *inside_missing = tj_text(tj(ask(c, inside_missing_path), "error"));

	ck_assert_str_eq(missing, present);
	ck_assert_str_eq(missing, etc);
	ck_assert_str_eq(missing, not_dir);
	ck_assert_str_eq(missing, inside_missing);
	ck_assert_ptr_null(strstr(missing, "elsewhere"));

	/* The allowed root and a directory beneath it are accepted; ".."
	 * spelled out of it is judged by where it leads. */
	_cleanup_free_ char *sub = xasprintf("%s/allowed/sub", d.dir);
	tc_assert_ok(ask(c, sub));
	_cleanup_free_ char *up = xasprintf("%s/allowed/sub/../..", d.dir);
	_cleanup_free_ char *upr = tj_text(tj(ask(c, up), "error"));
	ck_assert_str_eq(missing, upr);
	tc_assert_kind(ask(c, "relative/path"), "validation_error");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(peer_must_search_it)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as another uid");
	struct passwd *pw = getpwnam("nobody");
	if (!pw)
		TC_SKIP("no user 'nobody'");
	struct tcd d;
	start_with_allowed(&d);
	/* Let nobody reach the socket and the allowed root. */
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	_cleanup_free_ char *closed = xasprintf("%s/allowed/closed", d.dir);
	ck_assert_int_eq(mkdir(closed, 0700), 0);
	_cleanup_free_ char *sub = xasprintf("%s/allowed/sub", d.dir);

	/* The daemon's own uid (root) may; nobody may not, with the same
	 * answer as for a path that is not allowed. */
	struct tcc *root = tcc_connect(&d);
	tc_assert_ok(ask(root, closed));
	tcc_close(root);

	struct tcc *c = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	_cleanup_free_ char *refused = tj_text(tj(ask(c, closed), "error"));
	_cleanup_free_ char *etc = tj_text(tj(ask(c, "/etc"), "error"));
	ck_assert_str_eq(refused, etc);
	tc_assert_ok(ask(c, sub));
	/* Nor beneath a directory it cannot search: the path is looked up
	 * with its rights, so what lies there, existing or not, is refused
	 * alike. */
	_cleanup_free_ char *inner = xasprintf("%s/inner", closed);
	ck_assert_int_eq(mkdir(inner, 0755), 0);
	_cleanup_free_ char *inner_missing = xasprintf("%s/nope", closed);
	_cleanup_free_ char *behind = tj_text(tj(ask(c, inner), "error"));
	_cleanup_free_ char *behind_missing = tj_text(tj(ask(c, inner_missing), "error"));
	ck_assert_str_eq(behind, etc);
	ck_assert_str_eq(behind_missing, etc);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Connects as uid with primary group gid and the supplementary groups
 * given (the test process is one thread here: glibc's setgroups is safe). */
static struct tcc *connect_with_groups(struct tcd *d, uid_t uid, gid_t gid, const gid_t *groups, size_t n)
{
	gid_t saved[256];
	int n_saved = getgroups((int)ELEMENTSOF(saved), saved);
	ck_assert_int_ge(n_saved, 0);
	ck_assert_int_eq(setgroups(n, groups), 0);
	struct tcc *c = tcc_connect_as(d, uid, gid);
	ck_assert_int_eq(setgroups((size_t)n_saved, saved), 0);
	return c;
}

#define TEAM_GID 4242

/* The search right may come from a supplementary group: a peer in the
 * directory's group may choose it and its calls work there with that
 * group; one outside it gets the answer a missing path gets. */
START_TEST(supplementary_group_grants_search)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as another uid");
	struct passwd *pw = getpwnam("nobody");
	if (!pw)
		TC_SKIP("no user 'nobody'");
	struct tcd d;
	start_with_allowed(&d);
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	_cleanup_free_ char *team = xasprintf("%s/allowed/team", d.dir);
	ck_assert_int_eq(mkdir(team, 0750), 0);
	ck_assert_int_eq(chown(team, 0, TEAM_GID), 0);
	ck_assert_int_eq(chmod(team, 0750), 0);
	_cleanup_free_ char *missing = xasprintf("%s/allowed/nope", d.dir);

	const gid_t in_team[] = { pw->pw_gid, TEAM_GID };
	struct tcc *a = connect_with_groups(&d, pw->pw_uid, pw->pw_gid, in_team, 2);
	tc_assert_ok(ask(a, team));
	tc_assert_ok(tcc_call(a, "list_dir", "{\"path\":\".\"}"));
	tcc_close(a);

	const gid_t outside[] = { pw->pw_gid };
	struct tcc *b = connect_with_groups(&d, pw->pw_uid, pw->pw_gid, outside, 1);
	_cleanup_free_ char *refused = tj_text(tj(ask(b, team), "error"));
	_cleanup_free_ char *absent = tj_text(tj(ask(b, missing), "error"));
	ck_assert_str_eq(refused, absent);
	tcc_close(b);

	/* Without supplementary groups, the primary group counts. */
	struct tcc *c = connect_with_groups(&d, pw->pw_uid, TEAM_GID, NULL, 0);
	tc_assert_ok(ask(c, team));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("workspace_choice");
	TCase *tc = tcase_create("workspace_choice");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, swap_race_never_escapes);
	tcase_add_test(tc, same_answer_whether_or_not_it_exists);
	tcase_add_test(tc, peer_must_search_it);
	tcase_add_test(tc, supplementary_group_grants_search);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
