/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl approve, driven through a pseudo-terminal as a person would:
 * a write needs confirmation, approve shows the question on the terminal,
 * and the keys typed decide it (yes, no, always).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

struct term {
	pid_t pid;
	int master;
	struct buf screen;
};

static void term_start(struct term *t, const struct tcd *d)
{
	memset(t, 0, sizeof(*t));
	pid_t pid = forkpty(&t->master, NULL, NULL, NULL);
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(tc_ctl_path(), "toolcallctl", "-s", d->sock, "approve", (char *)NULL);
		_exit(127);
	}
	t->pid = pid;
	fcntl(t->master, F_SETFL, O_NONBLOCK);
}

/* Reads the terminal until needle shows up after from; returns its offset. */
static size_t term_wait(struct term *t, size_t from, const char *needle, int timeout_ms)
{
	uint64_t end = tc_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		const char *hit = buf_size(&t->screen) > from ? strstr(buf_head(&t->screen) + from, needle) : NULL;
		if (hit)
			return (size_t)(hit - buf_head(&t->screen));
		uint64_t now = tc_now_ms();
		ck_assert_msg(now < end, "'%s' never appeared on the terminal; it shows:\n%s", needle,
			      buf_head(&t->screen));
		struct pollfd p = { .fd = t->master, .events = POLLIN };
		poll(&p, 1, (int)(end - now));
		char tmp[4096];
		ssize_t n = read(t->master, tmp, sizeof(tmp));
		if (n > 0)
			buf_append(&t->screen, tmp, (size_t)n);
	}
}

static void term_type(struct term *t, const char *keys)
{
	ck_assert_int_eq(write(t->master, keys, strlen(keys)), (ssize_t)strlen(keys));
}

static void term_stop(struct term *t)
{
	kill(t->pid, SIGINT);
	int status;
	tc_wait_until(waitpid(t->pid, &status, WNOHANG) != 0, 2000);
	kill(t->pid, SIGKILL);
	waitpid(t->pid, &status, 0);
	close(t->master);
	buf_free(&t->screen);
}

/* Sends a write and returns its id once it waits for an answer (approve
 * needs a moment to subscribe: until then writes fail at once). */
static int64_t write_waiting(struct tcc *c, const char *path)
{
	const char *args = tcc_fmt(c, "{\"name\":\"write_file\",\"arguments\":{\"path\":\"%s\",\"content\":\"x\"}}", path);
	uint64_t end = tc_now_ms() + 5000;
	for (;;) {
		int64_t id = tcc_send_request(c, "tools/call", args);
		char idt[32];
		snprintf(idt, sizeof(idt), "%lld", (long long)id);
		if (tcc_quiet(c, 300))
			return id;
		const struct json *r = tcc_wait_id(c, idt, 1000);
		ck_assert_ptr_nonnull(r);
		tc_assert_kind(r, "user_denied");
		ck_assert_msg(tc_now_ms() < end, "approve never subscribed");
		tc_pause_ms(TC_POLL_MS);	/* the interval of the retry loop above */
	}
}

static const struct json *answer_of(struct tcc *c, int64_t id)
{
	char idt[32];
	snprintf(idt, sizeof(idt), "%lld", (long long)id);
	const struct json *r = tcc_wait_id(c, idt, 10000);
	ck_assert_ptr_nonnull(r);
	return r;
}

START_TEST(approve_through_a_terminal)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct term t;
	term_start(&t, &d);
	struct tcc *c = tcc_connect(&d);

	/* y: the write happens. */
	int64_t id = write_waiting(c, "yes.txt");
	size_t at = term_wait(&t, 0, "? [y]es/[n]o/[a]lways: ", 5000);
	ck_assert_ptr_nonnull(strstr(buf_head(&t.screen), "write_file"));
	term_type(&t, "y\r");
	tc_assert_ok(answer_of(c, id));
	char *p = tcd_ws_path(&d, "yes.txt");
	ck_assert_int_eq(access(p, F_OK), 0);
	free(p);

	/* n: refused, nothing written. */
	id = write_waiting(c, "no.txt");
	at = term_wait(&t, at + 1, "? [y]es/[n]o/[a]lways: ", 5000);
	term_type(&t, "n\r");
	const struct json *r = answer_of(c, id);
	tc_assert_kind(r, "user_denied");
	p = tcd_ws_path(&d, "no.txt");
	ck_assert_int_eq(access(p, F_OK), -1);
	free(p);

	/* a: allowed, and no more questions for this session. */
	id = write_waiting(c, "always.txt");
	at = term_wait(&t, at + 1, "? [y]es/[n]o/[a]lways: ", 5000);
	term_type(&t, "a\r");
	tc_assert_ok(answer_of(c, id));
	r = tcc_call(c, "write_file", "{\"path\":\"again.txt\",\"content\":\"x\"}");
	tc_assert_ok(r);

	term_stop(&t);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("approve");
	TCase *tc = tcase_create("pty");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, approve_through_a_terminal);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
