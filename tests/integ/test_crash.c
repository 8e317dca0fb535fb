/* SPDX-License-Identifier: MIT */
/*
 * A daemon killed with SIGKILL (a crash) leaves nothing running and
 * nothing behind: the leaders of its calls die with it (PR_SET_PDEATHSIG);
 * what they started (a background tree, setsid, a shell ignoring SIGTERM)
 * is killed by the next daemon at its start, through the dead daemon's
 * cgroups where there are some, else through the TMPDIR in their
 * environment; its cgroups and its directory of TMPDIRs are removed, a
 * log line and an audit line say so; another daemon, alive on another
 * socket, keeps everything of its own.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define NOBODY 65534
#define CFG_AUTO                                                                                  \
	"\"socket_mode\":\"0666\",\"audit_log\":\"@DIR@/audit.jsonl\",\"confirmation\":{\"default\":{" \
	"\"execute\":\"auto\",\"write\":\"auto\",\"read\":\"auto\"}}"
#define PIDS_MAX 32

/* Whether pid's process runs (a zombie does not). */
static bool alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static bool any_alive(const pid_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (alive(pids[i]))
			return true;
	return false;
}

static bool all_alive(const pid_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!alive(pids[i]))
			return false;
	return true;
}

/* Adds the pids of the lines "KEY=N" of text to pids. */
static void take_pids(const char *text, const char *key, pid_t *pids, size_t *n)
{
	size_t k = strlen(key);
	for (const char *p = text; (p = strstr(p, key)); p += k)
		if ((p == text || p[-1] == '\n') && p[k] == '=') {
			ck_assert(*n < PIDS_MAX);
			pids[(*n)++] = (pid_t)atoi(p + k + 1);
		}
}

/* How many times needle is in s. */
static size_t count_of(const char *s, const char *needle)
{
	size_t n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The daemon's cgroup directory from its start-up line, or NULL. */
static char *cgroup_dir(const struct tcd *d)
{
	char *log = tcd_log(d);
	const char *at = strstr(log, "cgroup v2 delegated: ");
	char *dir = NULL;
	if (at && strncmp(at + strlen("cgroup v2 delegated: "), "no", 2) != 0) {
		at += strlen("cgroup v2 delegated: ");
		dir = xstrndup(at, strcspn(at, " ("));
	}
	free(log);
	return dir;
}

/* How many entries of dir start with the prefix. */
static unsigned count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	unsigned n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

static unsigned cgroups_of(const char *dir, pid_t daemon)
{
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "tc-%d-", (int)daemon);
	return dir ? count_prefixed(dir, prefix) : 0;
}

/* A process's start time (clock ticks after boot), or 0. */
static unsigned long long start_of(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* Makes a cgroup named name in dir; its path (malloc'd). */
static char *cgroup_make(const char *dir, const char *name)
{
	char *path = xasprintf("%s/%s", dir, name);
	ck_assert_msg(mkdir(path, 0755) == 0, "%s: %s", path, strerror(errno));
	return path;
}

/* Where a daemon started by the test makes its directory of TMPDIRs. */
static bool nobody_daemons;	/* the daemons run as uid 65534 */

static const char *tmp_parent(void)
{
	const char *t = getenv("TMPDIR");
	if (t && t[0] == '/')
		return t;
	return geteuid() == 0 && !nobody_daemons ? "/var/tmp" : "/tmp";
}

static unsigned tmp_dirs_of(pid_t daemon)
{
	char prefix[48];
	snprintf(prefix, sizeof(prefix), "toolcalld.%d.", (int)daemon);
	return count_prefixed(tmp_parent(), prefix);
}

static void start(struct tcd *d, const char *extra)
{
	char *cfg = xasprintf("{" CFG_AUTO "%s%s}", extra ? "," : "", extra ? extra : "");
	if (nobody_daemons) {
		struct tcd_opts o = { .config = cfg };
		tcd_spawn_nobody(d, &o);
		ck_assert_int_eq(tcd_wait_socket(d, d->sock, 20000), 0);
	} else {
		tcd_start(d, cfg);
		ck_assert(chmod(d->dir, 0711) == 0);
		ck_assert(chmod(d->ws, 0777) == 0);
	}
	free(cfg);
}

/* A client of d: uid 65534 where the test is root (as a peer of another
 * uid), else the test's own. */
static struct tcc *connect_peer(struct tcd *d)
{
	return geteuid() == 0 ? tcc_connect_as(d, NOBODY, NOBODY) : tcc_connect(d);
}

/* Starts a background shell printing "L=" its own pid and "P=" the pids
 * of what it started, then READY; adds them to leaders and pids. */
static void bg_with(struct tcc *c, const char *command, const char *more, pid_t *leaders, size_t *n_leaders,
		    pid_t *pids, size_t *n)
{
	char *q = tj_quote(command);
	const struct json *r = tcc_call(c, "shell", tcc_fmt(c, "{\"command\":%s,\"background\":true,"
							    "\"until\":\"READY\",\"yield_ms\":20000%s}", q, more));
	free(q);
	const char *out = tj_str(r, "result.structuredContent.output");
	ck_assert_msg(out && strstr(out, "READY") && tj_str(r, "result.structuredContent.process_id"), "%s",
		      tj_text(r));
	take_pids(out, "L", leaders, n_leaders);
	take_pids(out, "P", pids, n);
}

static void bg(struct tcc *c, const char *command, pid_t *leaders, size_t *n_leaders, pid_t *pids, size_t *n)
{
	bg_with(c, command, "", leaders, n_leaders, pids, n);
}

/*
 * Starts on d four background trees (plain, setsid, one ignoring
 * SIGTERM, one with a terminal) and a foreground call that stays in flight (its connection
 * returned in *ret_fg); their leaders' pids in leaders, the others' in
 * pids.
 */
static struct tcc *start_trees(struct tcd *d, pid_t *leaders, size_t *n_leaders, pid_t *pids, size_t *n)
{
	struct tcc *c = connect_peer(d);
	bg(c, "sleep 1000 & echo P=$!; echo L=$$; echo READY; sleep 1001", leaders, n_leaders, pids, n);
	bg(c, "echo L=$$; setsid sh -c 'sleep 1002 & echo P=$!; echo P=$$; echo READY; wait' & wait", leaders,
	   n_leaders, pids, n);
	bg(c, "trap '' TERM; echo L=$$; sh -c 'trap \"\" TERM; sleep 1003' & echo P=$!; echo READY; wait", leaders,
	   n_leaders, pids, n);
	/* With a terminal: started by the daemon itself, not a spawner. */
	bg_with(c, "echo L=$$; sleep 1004 & echo P=$!; echo READY; wait", ",\"tty\":true", leaders, n_leaders, pids, n);
	tcc_close(c);
	struct tcc *fg = connect_peer(d);
	tcc_send_request(fg, "tools/call",
			 "{\"name\":\"shell\",\"arguments\":{\"command\":"
			 "\"sleep 301 & echo P=$! > fg.pids; echo L=$$ >> fg.pids; wait\"}}");
	char *text = NULL;
	uint64_t end = tc_now_ms() + tc_wait_scaled(20000);
	while (tc_now_ms() < end) {
		free(text);
		text = tcd_read(d, "fg.pids", NULL);
		if (text && strstr(text, "L="))
			break;
		tc_pause_ms(20);
	}
	ck_assert_msg(text && strstr(text, "L="), "the foreground call did not start: %s", text ? text : "(none)");
	take_pids(text, "L", leaders, n_leaders);
	take_pids(text, "P", pids, n);
	free(text);
	ck_assert_int_eq(*n_leaders, 5);
	ck_assert_int_ge(*n, 6);
	return fg;
}

/* The case: extra, the config's members beyond CFG_AUTO; with_cgroup,
 * whether the daemon runs its calls in cgroups; with_watchdog, whether
 * its watchdog outlives it (else it is killed first, and the daemon's
 * next start does the work). */
static void crash_case(const char *extra, bool with_cgroup, bool with_watchdog)
{
	struct tcd d, other;
	start(&d, extra);
	char *cg = cgroup_dir(&d);
	if (with_cgroup && !cg) {
		tcd_finish(&d);
		TC_SKIP("no cgroup v2 directory calls can be made in here (the daemon says \"cgroup v2 delegated: "
			"no\"): the case with cgroups cannot run");
	}
	ck_assert_msg(with_cgroup || !cg, "the config turns the cgroups off, the daemon uses %s", cg);

	/* Another daemon on another socket, with a process of its own. */
	start(&other, extra);
	struct tcc *oc = connect_peer(&other);
	pid_t other_leader[PIDS_MAX], other_pids[PIDS_MAX];
	size_t n_other_leader = 0, n_other = 0;
	bg(oc, "sleep 1010 & echo P=$!; echo L=$$; echo READY; wait", other_leader, &n_other_leader, other_pids,
	   &n_other);

	pid_t leaders[PIDS_MAX], pids[PIDS_MAX];
	size_t n_leaders = 0, n = 0;
	struct tcc *fg = start_trees(&d, leaders, &n_leaders, pids, &n);
	ck_assert(all_alive(leaders, n_leaders) && all_alive(pids, n));
	pid_t dead = d.pid;
	if (with_cgroup)
		ck_assert_uint_ge(cgroups_of(cg, dead), 4);
	ck_assert_uint_eq(tmp_dirs_of(dead), 1);

	char *log = tcd_log(&d);
	size_t log_before = strlen(log);
	pid_t watchdog = 0;
	const char *at = strstr(log, "crash watchdog: pid ");
	if (at)
		watchdog = (pid_t)atoi(at + strlen("crash watchdog: pid "));
	free(log);
	/* Without its watchdog (killed too, or none), the next daemon's
	 * start does its work. */
	if (!with_watchdog && watchdog > 0) {
		ck_assert_int_eq(kill(watchdog, SIGKILL), 0);
		ck_assert(tc_wait_until(!alive(watchdog), tc_wait_scaled(5000)));
	}
	if (with_watchdog && watchdog <= 0) {
		tcc_close(fg);
		tcc_close(oc);
		tcd_free(&d);
		tcd_finish(&other);
		free(cg);
		TC_SKIP("the daemon has no crash watchdog here (\"crash watchdog: none\" in its log)");
	}

	tcd_kill(&d, SIGKILL);
	ck_assert_int_ge(tcd_wait_exit(&d, 10000), 0);
	/* The leaders go with it. */
	ck_assert_msg(tc_wait_until(!any_alive(leaders, n_leaders), tc_wait_scaled(5000)),
		      "a call's leader outlived its daemon");
	tcc_close(fg);

	if (with_watchdog) {
		/* The watchdog kills the rest at once and removes what the
		 * dead daemon left. */
		ck_assert_msg(tc_wait_until(!any_alive(pids, n), tc_wait_scaled(5000)),
			      "a process of the dead daemon's calls is still running");
		ck_assert(tc_wait_until(cgroups_of(cg, dead) == 0 && tmp_dirs_of(dead) == 0, tc_wait_scaled(5000)));
		/* Its lines, all of them. */
		char named[64];
		snprintf(named, sizeof(named), "left by the dead daemon %d: ", (int)dead);
		ck_assert(tcd_wait_log(&d, named, (unsigned)n, 5000));
	} else {
		/* The rest runs on until the next daemon starts. */
		ck_assert(!tc_wait_until(!any_alive(pids, n), 300));
		/* Names the next start must tell apart: the other daemon's
		 * pid with another start time (a pid reused: a dead daemon's),
		 * with its own (alive), without one (alive: it is a
		 * toolcalld); a live process that is no daemon. */
		char *reused = NULL, *live = NULL, *live_old = NULL, *not_daemon = NULL;
		if (with_cgroup) {
			unsigned long long st = start_of(other.pid);
			ck_assert(st > 0);
			reused = cgroup_make(cg, tcc_fmt(oc, "tc-%d-%llu-77", (int)other.pid, st + 1));
			live = cgroup_make(cg, tcc_fmt(oc, "tc-%d-%llu-77", (int)other.pid, st));
			live_old = cgroup_make(cg, tcc_fmt(oc, "tc-%d-77", (int)other.pid));
			not_daemon = cgroup_make(cg, tcc_fmt(oc, "tc-%d-77", (int)getpid()));
		}
		struct tcd_opts again = { .wrapper = nobody_daemons ? tc_as_nobody : NULL };
		tcd_spawn(&d, &again);
		ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 20000), 0);
		ck_assert_msg(tc_wait_until(!any_alive(pids, n), tc_wait_scaled(5000)),
			      "a process of the dead daemon's calls is still running");
		ck_assert_uint_eq(cgroups_of(cg, dead), 0);
		ck_assert_uint_eq(tmp_dirs_of(dead), 0);
		if (with_cgroup) {
			ck_assert_msg(access(reused, F_OK) < 0 && errno == ENOENT, "%s", reused);
			ck_assert_msg(access(not_daemon, F_OK) < 0 && errno == ENOENT, "%s", not_daemon);
			ck_assert_msg(access(live, F_OK) == 0 && access(live_old, F_OK) == 0, "%s", live);
			ck_assert(rmdir(live) == 0 && rmdir(live_old) == 0);
		}
		free(reused);
		free(live);
		free(live_old);
		free(not_daemon);
	}
	log = tcd_log(&d);
	const char *line = strstr(log + log_before, "reaped what daemons that died left: ");
	ck_assert_msg(line, "no line says what was reaped:\n%s", log + log_before);
	ck_assert_int_ge(atoi(line + strlen("reaped what daemons that died left: ")), (int)n);
	/* A line naming each (a process killed between its fork and its
	 * exec is named by its shell's command line). */
	char want[64];
	snprintf(want, sizeof(want), "left by the dead daemon %d: ", (int)dead);
	ck_assert_msg(count_of(line, want) >= n, "not a line naming each process killed:\n%s", line);
	free(log);

	ck_assert(all_alive(other_leader, n_other_leader) && all_alive(other_pids, n_other));
	ck_assert_uint_eq(tmp_dirs_of(other.pid), 1);
	if (with_cgroup)
		ck_assert_uint_ge(cgroups_of(cg, other.pid), 1);
	const struct json *r = tcc_call(oc, "process_list", "{}");
	char *listed = tj_text(r);
	ck_assert_msg(strstr(listed, "sleep 1010"), "%s", listed);
	free(listed);
	tcc_close(oc);

	/* The audit log says which processes were killed: the watchdog
	 * writes it itself, the next daemon through its queue (flushed at
	 * its stop). */
	if (!with_watchdog)
		ck_assert_int_eq(tcd_stop(&d), 0);
	char *path = xasprintf("%s/audit.jsonl", d.dir);
	char *audit = NULL;
	uint64_t end = tc_now_ms() + tc_wait_scaled(5000);
	do {
		free(audit);
		audit = tcd_read(&d, path, NULL);
	} while (!(audit && count_of(audit, "\"event\":\"process.reaped\"") >= n) && tc_now_ms() < end &&
		 (tc_pause_ms(20), true));
	ck_assert_msg(audit && count_of(audit, "\"event\":\"process.reaped\"") >= n && strstr(audit, "sleep 10"), "%s",
		      audit ? audit : "(no audit log)");
	free(audit);
	free(path);
	tcd_free(&d);
	tcd_finish(&other);
	free(cg);
}

START_TEST(crash_watchdog_with_cgroups)
{
	crash_case(NULL, true, true);
}
END_TEST

START_TEST(crash_watchdog_without_cgroups)
{
	crash_case("\"sandbox\":{\"cgroup\":\"\"}", false, true);
}
END_TEST

START_TEST(crash_and_restart_with_cgroups)
{
	crash_case(NULL, true, false);
}
END_TEST

START_TEST(crash_and_restart_without_cgroups)
{
	crash_case("\"sandbox\":{\"cgroup\":\"\"}", false, false);
}
END_TEST

/* A daemon that is not root: no cgroup, its TMPDIRs in /tmp, no mount
 * namespace of its own; its calls run as its uid. */
static bool nobody_or_skip(void)
{
	if (geteuid() != 0) {
		tc_skip_note("not root: no daemon can be started as uid 65534 here");
		return false;
	}
	nobody_daemons = true;
	return true;
}

START_TEST(crash_watchdog_of_a_daemon_not_root)
{
	if (nobody_or_skip())
		crash_case(NULL, false, true);
}
END_TEST

START_TEST(crash_and_restart_of_a_daemon_not_root)
{
	if (nobody_or_skip())
		crash_case(NULL, false, false);
}
END_TEST

static Suite *crash_suite(void)
{
	Suite *s = suite_create("crash");
	TCase *tc = tcase_create("crash");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, crash_watchdog_with_cgroups);
	tcase_add_test(tc, crash_watchdog_without_cgroups);
	tcase_add_test(tc, crash_and_restart_with_cgroups);
	tcase_add_test(tc, crash_and_restart_without_cgroups);
	tcase_add_test(tc, crash_watchdog_of_a_daemon_not_root);
	tcase_add_test(tc, crash_and_restart_of_a_daemon_not_root);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(crash_suite());
}
