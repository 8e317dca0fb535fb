/* SPDX-License-Identifier: MIT */
/*
 * Loading tool files into a registry (daemon/load.c): a file that cannot
 * be read whole is an error that names it, never a registry built from
 * part of it.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/load.h"
#include "lib/registry.h"
#include "tests/unit/check_main.h"
#include "tests/unit/deny_syscall.h"

static char dir[] = "/tmp/tc-load-XXXXXX";
static char path[64];

/* Makes a tools dir with one valid command tool file. */
static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/echo.json", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"kind\":\"command\",\"name\":\"echo_it\",\"description\":\"d\","
	      "\"argv\":[\"/bin/echo\"],\"side_effects\":\"read\"}", f);
	ck_assert_int_eq(fclose(f), 0);
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
}

/* Builds a registry from dir; returns registry_build's result. */
static int build(char **err)
{
	struct config c;
	config_init(&c);
	c.tools_dir = xstrdup(dir);
	struct registry *r = NULL;
	*err = NULL;
	int rr = registry_build(&c, NULL, NULL, &r, err);
	if (r)
		registry_unref(r);
	config_free(&c);
	return rr;
}

START_TEST(loads_file)
{
	char *err = NULL;
	ck_assert_msg(build(&err) == 0, "%s", err ? err : "");
}
END_TEST

/* Asserts that the build fails with a message naming the tool file. */
static void assert_names_file(void)
{
	char *err = NULL;
	ck_assert_int_lt(build(&err), 0);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, path) && strstr(err, "cannot read"), "got: %s", err);
	free(err);
}

START_TEST(read_error_names_file)
{
	if (!deny_syscall_or_skip("read_error_names_file", SYS_read))
		return;
	assert_names_file();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("load");
	TCase *tc = tcase_create("tool files");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, loads_file);
	tcase_add_test(tc, read_error_names_file);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
