/* SPDX-License-Identifier: MIT */
/*
 * What the workspace suites share: the temporary tree they run on, made
 * afresh for each case,
 *
 *   base/outside.txt, base/outdir/, base/ws-evil/x     things a call must never reach
 *   base/ws/                                           the workspace, with files and
 *                                                      symlinks leading in and out
 *
 * walked with the kernel's openat2 (setup_kernel) or as where openat2 is
 * missing (setup_fallback); running a file tool directly on it; the
 * escapes every tool is tried with; and each suite's main.
 *
 * The suites: test_workspace_escapes.c (escapes, what is allowed,
 * absolute links), test_workspace_api.c (the workspace API, resources,
 * the two walks held to the same answers) and test_workspace_tools.c
 * (read_file, write_file, patch_file, list_dir, their declarations).
 */
#ifndef TC_TEST_WORKSPACE_FIXTURE_H
#define TC_TEST_WORKSPACE_FIXTURE_H

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/fsjob/fsjob.h"
#include "lib/schema/schema.h"
#include "lib/tool.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_internal.h"
#include "lib/files/workspace_root.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "tools/tools.h"

#include "proto/base/util.h"

extern char base[PATH_MAX + 16];	/* the tree's top */
extern char root[PATH_MAX + 32];	/* base/ws: the workspace */
extern struct workspace *ws;		/* opened on root */

/* --- the tree ------------------------------------------------------------ */

/* Returns base/rel in a static buffer (one of a few, so two can be in use). */
const char *at(const char *rel);
void put(const char *rel, const char *content, size_t n);
void puts_file(const char *rel, const char *content);
/* Reads base/rel whole, or returns NULL when it does not exist. */
char *slurp(const char *rel, size_t *ret_n);
void mkd(const char *rel);
void lnk(const char *target, const char *rel);
bool exists(const char *rel);
mode_t mode_of(const char *rel);
/* nftw's callback removing what it is given. */
int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f);
/* Describes everything under base except the workspace: names, types,
 * sizes, contents. */
char *outside_snapshot(void);
/* The tree, walked by the kernel's openat2 (unless TOOLCALLD_NO_OPENAT2
 * is set), or as where openat2 is missing; and its removal. */
void setup_kernel(void);
void setup_fallback(void);
void teardown(void);
/* A tree under ws/tree: files, directories, links in and out, a fifo. */
void make_tree(void);
/* Asserts no temporary file was left in base/rel. */
void assert_no_temp(const char *rel);
/* Counts the open fds of this process. */
int count_fds(void);

/* Paths that name files, paths to create and paths of directories, all
 * of which must be refused; "@" is the base directory. */
extern const char *const escape_files[];
extern const char *const escape_creates[];
extern const char *const escape_dirs[];
extern const size_t n_escape_files, n_escape_creates, n_escape_dirs;

/* --- running tools -------------------------------------------------------- */

struct result {
	struct tool_call call;
	struct json_doc *doc;		/* structuredContent, parsed */
	const struct json *sc;
};

struct tool *make_tool(const struct tool_def *def);
/* Parses JSON text written by a test. */
struct json_doc *parse(const char *text);
/*
 * Runs a tool on arguments given as printf-style JSON text ("@" in a string
 * stands for the base directory, as "%s" would need escaping in every call).
 * The arguments must pass the tool's schema, as the dispatcher would ensure.
 */
void run_env(const struct tool_def *def, const struct tool_env *env, struct result *res, const char *fmt, ...)
	PRINTF(4, 5);
#define run(def, res, ...) run_env(def, NULL, res, __VA_ARGS__)
void result_clear(struct result *res);
const char *sc_str(const struct result *res, const char *key);
int64_t sc_int(const struct result *res, const char *key);
bool sc_bool(const struct result *res, const char *key);
/* Returns p with "@" replaced by the base directory, newly allocated. */
char *expand_at(const char *p);
/* ws_check of a path ("@" is the base directory). */
int check_path(const char *p);
/* Joins "name:type:size" of every entry of a list_dir result with spaces. */
char *entries_str(const struct result *res);

#define assert_ok(res) \
	ck_assert_msg((res)->call.kind == TC_OK, "expected success, got %s: %s", \
		      tc_kind_name((res)->call.kind), (res)->call.message ? (res)->call.message : "")

#define assert_fail(res, k, substr) do { \
	ck_assert_msg((res)->call.kind == (k), "expected %s, got %s (%s)", tc_kind_name(k), \
		      tc_kind_name((res)->call.kind), \
		      (res)->call.message ? (res)->call.message : (res)->call.structured); \
	ck_assert_msg(strstr((res)->call.message, (substr)), "message '%s' lacks '%s'", \
		      (res)->call.message, (substr)); \
} while (0)

/* Runs the suite in a directory of its own under /tmp (removed after,
 * even when cases failed): a suite's main. */
int workspace_main(Suite *s);

#endif
