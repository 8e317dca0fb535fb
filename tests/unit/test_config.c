/* SPDX-License-Identifier: MIT */
/*
 * The config file parser (daemon/config.c) and the confirmation policy
 * (lib/policy/policy.c): defaults as the contract states them, a full file, and
 * for each class of mistake a message that points at the right line and
 * column.
 */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/config_bind.h"
#include "lib/base/audit.h"
#include "lib/policy/policy.h"
#include "lib/sandbox/sandbox.h"
#include "tests/unit/check_main.h"

/* Loads text into c (initialised here); returns config_load_text's result. */
static int load(struct config *c, const char *text, char **err)
{
	config_init(c);
	*err = NULL;
	return config_load_text(c, "t.json", NULL, text, strlen(text), err);
}

/* Asserts that text fails to load with exactly the message want. */
static void assert_error(const char *text, const char *want)
{
	struct config c;
	char *err = NULL;
	int r = load(&c, text, &err);
	ck_assert_msg(r < 0, "expected an error for: %s", text);
	ck_assert_ptr_nonnull(err);
	ck_assert_str_eq(err, want);
	free(err);
	config_free(&c);
}

/* Asserts that text fails to load with a message starting with want. */
static void assert_error_prefix(const char *text, const char *want)
{
	struct config c;
	char *err = NULL;
	int r = load(&c, text, &err);
	ck_assert_msg(r < 0, "expected an error for: %s", text);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "got '%s', want prefix '%s'", err, want);
	free(err);
	config_free(&c);
}

static char *make_tmpdir(void)
{
	char tmpl[] = "/tmp/tc-config-XXXXXX";
	char *d = mkdtemp(tmpl);
	ck_assert_ptr_nonnull(d);
	char *real = realpath(d, NULL);
	ck_assert_ptr_nonnull(real);
	return real;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(defaults_are_the_contracts)
{
	struct config c;
	config_init(&c);

	ck_assert_ptr_null(c.socket);
	ck_assert_uint_eq(c.socket_mode, 0660);
	ck_assert_str_eq(c.workspace, ".");
	ck_assert_uint_eq(c.n_workspaces_allowed, 0);
	ck_assert_ptr_null(c.tools_dir);
	ck_assert_ptr_null(c.audit_log);
	ck_assert_uint_eq(c.limits.max_message_bytes, 8388608);
	ck_assert_uint_eq(c.limits.max_json_depth, 64);
	ck_assert_uint_eq(c.limits.max_concurrent, 64);
	ck_assert_uint_eq(c.limits.session_concurrency, 4);
	ck_assert_uint_eq(c.limits.per_uid_running, 0);	/* three quarters of max_concurrent */
	ck_assert_uint_eq(c.limits.queue_max, 256);
	ck_assert_uint_eq(c.limits.per_uid_processes, 8);
	ck_assert_uint_eq(c.limits.process_buffer_kb, 1024);
	ck_assert_uint_eq(c.limits.process_idle_s, 900);
	ck_assert_uint_eq(c.limits.process_lifetime_s, 86400);
	ck_assert_uint_eq(c.limits.process_keep_s, 300);
	ck_assert_uint_eq(c.limits.process_keep_max, 32);
	ck_assert_uint_eq(c.limits.kill_grace_ms, 5000);
	ck_assert_uint_eq(c.retry.max_attempts, 3);
	ck_assert_uint_eq(c.retry.base_delay_ms, 100);
	ck_assert_uint_eq(c.idempotency.ttl_ms, 60000);
	ck_assert_uint_eq(c.idempotency.max_entries, 10000);
	ck_assert_uint_eq(c.circuit.failures, 5);
	ck_assert_uint_eq(c.circuit.window_ms, 30000);
	ck_assert_uint_eq(c.circuit.open_ms, 30000);
	/* the store's and the tasks' defaults, as lib/store has them */
	ck_assert_str_eq(c.store.kind, "memory");
	ck_assert_str_eq(c.store.address, "127.0.0.1:6379");
	ck_assert_str_eq(c.store.prefix, "toolcalld:");
	ck_assert_uint_eq(c.store.lease_ms, 10000);
	ck_assert_uint_eq(c.store.timeout_ms, 2000);
	ck_assert_uint_eq(c.store.task_ttl_ms, 3600000);
	ck_assert_uint_eq(c.store.max_tasks, 1000);

	const struct policy_config *pc = &c.confirmation;
	ck_assert_uint_eq(pc->timeout_ms, 300000);
	ck_assert(!pc->no_approver_wait);
	ck_assert_int_eq(pc->by_class[SIDE_NONE], CONFIRM_AUTO);
	ck_assert_int_eq(pc->by_class[SIDE_READ], CONFIRM_AUTO);
	ck_assert_int_eq(pc->by_class[SIDE_WRITE], CONFIRM_PROMPT);
	ck_assert_int_eq(pc->by_class[SIDE_EXECUTE], CONFIRM_PROMPT);
	ck_assert_int_eq(pc->by_class[SIDE_NETWORK], CONFIRM_PROMPT);
	ck_assert_uint_eq(pc->n_per_tool, 0);
	ck_assert_uint_eq(pc->n_trusted, 0);
	ck_assert(pc->has_override[SIDE_WRITE]);
	ck_assert_int_eq(pc->trusted_override[SIDE_WRITE], CONFIRM_AUTO);
	ck_assert(pc->has_override[SIDE_EXECUTE]);
	ck_assert_int_eq(pc->trusted_override[SIDE_EXECUTE], CONFIRM_PROMPT);
	ck_assert(!pc->has_override[SIDE_NONE]);
	ck_assert(!pc->has_override[SIDE_READ]);
	ck_assert(!pc->has_override[SIDE_NETWORK]);

	ck_assert_uint_eq(config_tool_timeout(&c, "shell"), 600000);
	ck_assert_uint_eq(config_tool_timeout(&c, "read_file"), 0);
	ck_assert_uint_eq(c.tools.n_shell_env_allow, 4);
	ck_assert_str_eq(c.tools.shell_env_allow[0], "PATH");
	ck_assert_str_eq(c.tools.shell_env_allow[1], "LANG");
	ck_assert_str_eq(c.tools.shell_env_allow[2], "HOME");
	ck_assert_str_eq(c.tools.shell_env_allow[3], "TERM");
	ck_assert_ptr_null(c.tools.shell_env_allow[4]);

	/* The daemon's own keys. */
	ck_assert_uint_eq(c.grace_ms, 10000);
	ck_assert_uint_eq(c.limits.max_connections, 16384);
	ck_assert_uint_eq(c.limits.max_output_bytes, 16 << 20);
	ck_assert_uint_eq(c.limits.idle_timeout_ms, 0);
	ck_assert_uint_eq(c.limits.n_per_tool, 0);
	ck_assert_uint_eq(c.limits.event_queue, 1024);
	ck_assert_uint_eq(c.limits.io_threads, 4);
	ck_assert_uint_eq(c.limits.read_default_lines, 2000);
	ck_assert_uint_eq(c.limits.read_default_bytes, 256 << 10);
	ck_assert_uint_eq(c.limits.shell_output_kb, 64);
	ck_assert_uint_eq(c.limits.per_uid_queue, 4096);
	ck_assert_uint_eq(c.limits.session_confirmations, 64);
	ck_assert_uint_eq(c.retry.max_delay_ms, 10000);
	ck_assert_int_eq(c.audit_on_error, AUDIT_ON_ERROR_LOG);
	ck_assert_uint_eq(c.tools.shell_output_cap, 1048576);
	ck_assert_uint_eq(c.tools.read_file_limit, 1048576);
	ck_assert_uint_eq(c.peers.n_uids, 0);
	ck_assert_uint_eq(c.peers.n_gids, 0);
	ck_assert_int_eq(c.log_level, LOG_INFO);
	ck_assert_uint_eq(c.audit_fsync_ms, 1000);
	config_free(&c);
}
END_TEST

START_TEST(contract_example_loads_as_defaults)
{
	/* The contract's own listing, comments included, is a valid file
	 * that changes nothing. */
	static const char text[] =
		"{\n"
		"  \"socket\": null,                        // see §9 for the default path\n"
		"  \"socket_mode\": \"0660\",\n"
		"  \"workspace\": \".\",                      // default workspace of new sessions\n"
		"  \"workspaces\": { \"allowed\": [] },       // roots a client may ask for in initialize\n"
		"  \"tools_dir\": null,                     // directory of tool files, reloaded live\n"
		"  \"audit_log\": null,                     // path of the JSON-lines audit log\n"
		"  \"limits\": { \"max_message_bytes\": 8388608, \"max_json_depth\": 64,\n"
		"              \"max_concurrent\": 64, \"session_concurrency\": 4, \"queue_max\": 256 },\n"
		"  \"retry\": { \"max_attempts\": 3, \"base_delay_ms\": 100 },\n"
		"  \"idempotency\": { \"ttl_ms\": 60000, \"max_entries\": 10000 },\n"
		"  \"circuit\": { \"failures\": 5, \"window_ms\": 30000, \"open_ms\": 30000 },\n"
		"  \"confirmation\": {\n"
		"    \"timeout_ms\": 300000, \"no_approver\": \"deny\",          // or \"wait\"\n"
		"    \"default\": { \"none\": \"auto\", \"read\": \"auto\", \"write\": \"prompt\",\n"
		"                 \"execute\": \"prompt\", \"network\": \"prompt\" },\n"
		"    \"per_tool\": {},                                        // e.g. { \"git_status\": \"auto\" }\n"
		"    \"trusted_workspaces\": [],\n"
		"    \"trusted_workspace_overrides\": { \"write\": \"auto\", \"execute\": \"prompt\" }\n"
		"  },\n"
		"  \"tools\": { \"shell\": { \"timeout_ms\": 600000, \"env_allow\": [\"PATH\", \"LANG\", \"HOME\", \"TERM\"] } }\n"
		"}\n";
	struct config c, d;
	char *err;
	int r = load(&c, text, &err);
	ck_assert_msg(r == 0, "%s", err ? err : "");
	config_init(&d);

	ck_assert_ptr_null(c.socket);
	ck_assert_str_eq(c.workspace, d.workspace);
	ck_assert_uint_eq(c.socket_mode, d.socket_mode);
	ck_assert_mem_eq(&c.limits.max_message_bytes, &d.limits.max_message_bytes, sizeof(uint64_t));
	ck_assert_uint_eq(c.limits.max_concurrent, d.limits.max_concurrent);
	ck_assert_uint_eq(c.retry.max_attempts, d.retry.max_attempts);
	ck_assert_uint_eq(c.circuit.open_ms, d.circuit.open_ms);
	ck_assert_mem_eq(c.confirmation.by_class, d.confirmation.by_class, sizeof(d.confirmation.by_class));
	ck_assert_mem_eq(c.confirmation.has_override, d.confirmation.has_override,
			 sizeof(d.confirmation.has_override));
	ck_assert_mem_eq(c.confirmation.trusted_override, d.confirmation.trusted_override,
			 sizeof(d.confirmation.trusted_override));
	ck_assert_uint_eq(c.tools.n_shell_env_allow, 4);
	ck_assert_str_eq(c.tools.shell_env_allow[3], "TERM");
	config_free(&c);
	config_free(&d);
}
END_TEST

START_TEST(full_config)
{
	static const char text[] =
		"/* Every key, none at its default. */\n"
		"{\n"
		"  \"socket\": \"/tmp/x/toolcalld.sock\",\n"
		"  \"socket_mode\": \"0600\",\n"
		"  \"workspace\": \"/srv/ws\",\n"
		"  \"workspaces\": { \"allowed\": [\"/srv/a\", \"/srv/b/\"] },\n"
		"  \"tools_dir\": \"/etc/toolcalld/tools.d\",\n"
		"  \"audit_log\": \"/var/log/toolcalld/audit.jsonl\",\n"
		"  \"audit_fsync_ms\": 0,\n"
		"  \"grace_ms\": 2500,\n"
		"  \"log_level\": \"debug\",\n"
		"  \"limits\": {\n"
		"    \"max_message_bytes\": 65536, \"max_json_depth\": 32, \"max_concurrent\": 8,\n"
		"    \"session_concurrency\": 2, \"queue_max\": 0, \"max_connections\": 100,\n"
		"    \"max_output_bytes\": 1048576, \"idle_timeout_ms\": 60000,\n"
		"    \"per_tool_concurrency\": { \"shell\": 2, \"git_status\": 1 },\n"
		"    \"event_queue\": 64, \"io_threads\": 2, \"per_uid_queue\": 10,\n"
		"    \"read_default_lines\": 50, \"read_default_bytes\": 4096, \"shell_output_kb\": 8,\n"
		"    \"session_confirmations\": 3, \"per_uid_running\": 5\n"
		"  },\n"
		"  \"audit\": { \"on_error\": \"refuse\" },\n"
		"  \"retry\": { \"max_attempts\": 5, \"base_delay_ms\": 50, \"max_delay_ms\": 700 },\n"
		"  \"idempotency\": { \"ttl_ms\": 1000, \"max_entries\": 20 },\n"
		"  \"circuit\": { \"failures\": 3, \"window_ms\": 1000, \"open_ms\": 2000 },\n"
		"  \"confirmation\": {\n"
		"    \"timeout_ms\": 5000, \"no_approver\": \"wait\",\n"
		"    \"default\": { \"read\": \"prompt\", \"network\": \"deny\" },\n"
		"    \"per_tool\": { \"git_status\": \"auto\", \"shell\": \"deny\" },\n"
		"    \"trusted_workspaces\": [\"/nonexistent/tc-trusted/\"],\n"
		"    \"trusted_workspace_overrides\": { \"network\": \"auto\" }\n"
		"  },\n"
		"  \"tools\": {\n"
		"    \"shell\": { \"timeout_ms\": 1000, \"env_allow\": [\"PATH\"], \"output_cap\": 4096 },\n"
		"    \"read_file\": { \"timeout_ms\": 2000, \"limit\": 100 },\n"
		"    \"write_file\": { \"timeout_ms\": 3000 },\n"
		"    \"patch_file\": { \"timeout_ms\": 4000 },\n"
		"    \"list_dir\": { \"timeout_ms\": 5000 }\n"
		"  },\n"
		"  \"peers\": { \"allow_uids\": [1000, \"root\"], \"allow_gids\": [0] }\n"
		"}\n";
	struct config c;
	char *err;
	int r = load(&c, text, &err);
	ck_assert_msg(r == 0, "%s", err ? err : "");

	ck_assert_str_eq(c.socket, "/tmp/x/toolcalld.sock");
	ck_assert_uint_eq(c.socket_mode, 0600);
	ck_assert_str_eq(c.workspace, "/srv/ws");
	ck_assert_uint_eq(c.n_workspaces_allowed, 2);
	ck_assert_str_eq(c.workspaces_allowed[0], "/srv/a");
	ck_assert_str_eq(c.workspaces_allowed[1], "/srv/b");
	ck_assert_str_eq(c.tools_dir, "/etc/toolcalld/tools.d");
	ck_assert_str_eq(c.audit_log, "/var/log/toolcalld/audit.jsonl");
	ck_assert_uint_eq(c.audit_fsync_ms, 0);
	ck_assert_uint_eq(c.grace_ms, 2500);
	ck_assert_int_eq(c.log_level, LOG_DEBUG);
	ck_assert_uint_eq(c.limits.max_message_bytes, 65536);
	ck_assert_uint_eq(c.limits.max_json_depth, 32);
	ck_assert_uint_eq(c.limits.max_concurrent, 8);
	ck_assert_uint_eq(c.limits.session_concurrency, 2);
	ck_assert_uint_eq(c.limits.queue_max, 0);
	ck_assert_uint_eq(c.limits.max_connections, 100);
	ck_assert_uint_eq(c.limits.max_output_bytes, 1048576);
	ck_assert_uint_eq(c.limits.idle_timeout_ms, 60000);
	ck_assert_uint_eq(c.limits.event_queue, 64);
	ck_assert_uint_eq(c.limits.io_threads, 2);
	ck_assert_uint_eq(c.limits.read_default_lines, 50);
	ck_assert_uint_eq(c.limits.read_default_bytes, 4096);
	ck_assert_uint_eq(c.limits.shell_output_kb, 8);
	ck_assert_uint_eq(c.limits.per_uid_queue, 10);
	ck_assert_uint_eq(c.limits.per_uid_running, 5);
	ck_assert_uint_eq(c.limits.session_confirmations, 3);
	ck_assert_uint_eq(c.retry.max_delay_ms, 700);
	ck_assert_int_eq(c.audit_on_error, AUDIT_ON_ERROR_REFUSE);
	ck_assert_uint_eq(config_tool_concurrency(&c, "shell"), 2);
	ck_assert_uint_eq(config_tool_concurrency(&c, "git_status"), 1);
	ck_assert_uint_eq(config_tool_concurrency(&c, "read_file"), 0);
	ck_assert_uint_eq(c.retry.max_attempts, 5);
	ck_assert_uint_eq(c.retry.base_delay_ms, 50);
	ck_assert_uint_eq(c.idempotency.ttl_ms, 1000);
	ck_assert_uint_eq(c.idempotency.max_entries, 20);
	ck_assert_uint_eq(c.circuit.failures, 3);
	ck_assert_uint_eq(c.circuit.window_ms, 1000);
	ck_assert_uint_eq(c.circuit.open_ms, 2000);

	const struct policy_config *pc = &c.confirmation;
	ck_assert_uint_eq(pc->timeout_ms, 5000);
	ck_assert(pc->no_approver_wait);
	/* "default" merges key by key. */
	ck_assert_int_eq(pc->by_class[SIDE_NONE], CONFIRM_AUTO);
	ck_assert_int_eq(pc->by_class[SIDE_READ], CONFIRM_PROMPT);
	ck_assert_int_eq(pc->by_class[SIDE_WRITE], CONFIRM_PROMPT);
	ck_assert_int_eq(pc->by_class[SIDE_NETWORK], CONFIRM_DENY);
	ck_assert_uint_eq(pc->n_per_tool, 2);
	ck_assert_str_eq(pc->per_tool[0].name, "git_status");
	ck_assert_int_eq(pc->per_tool[0].mode, CONFIRM_AUTO);
	ck_assert_str_eq(pc->per_tool[1].name, "shell");
	ck_assert_int_eq(pc->per_tool[1].mode, CONFIRM_DENY);
	/* A trusted workspace that does not exist is kept, normalised. */
	ck_assert_uint_eq(pc->n_trusted, 1);
	ck_assert_str_eq(pc->trusted_workspaces[0], "/nonexistent/tc-trusted");
	/* "trusted_workspace_overrides" replaces the default overrides. */
	ck_assert(pc->has_override[SIDE_NETWORK]);
	ck_assert_int_eq(pc->trusted_override[SIDE_NETWORK], CONFIRM_AUTO);
	ck_assert(!pc->has_override[SIDE_WRITE]);
	ck_assert(!pc->has_override[SIDE_EXECUTE]);

	ck_assert_uint_eq(config_tool_timeout(&c, "shell"), 1000);
	ck_assert_uint_eq(config_tool_timeout(&c, "read_file"), 2000);
	ck_assert_uint_eq(config_tool_timeout(&c, "write_file"), 3000);
	ck_assert_uint_eq(config_tool_timeout(&c, "patch_file"), 4000);
	ck_assert_uint_eq(config_tool_timeout(&c, "list_dir"), 5000);
	ck_assert_uint_eq(config_tool_timeout(&c, "git_status"), 0);
	ck_assert_uint_eq(c.tools.n_shell_env_allow, 1);
	ck_assert_str_eq(c.tools.shell_env_allow[0], "PATH");
	ck_assert_ptr_null(c.tools.shell_env_allow[1]);
	ck_assert_uint_eq(c.tools.shell_output_cap, 4096);
	ck_assert_uint_eq(c.tools.read_file_limit, 100);

	ck_assert_uint_eq(c.peers.n_uids, 2);
	ck_assert_uint_eq(c.peers.uids[0], 1000);
	ck_assert_uint_eq(c.peers.uids[1], 0);
	ck_assert_uint_eq(c.peers.n_gids, 1);
	ck_assert_uint_eq(c.peers.gids[0], 0);
	config_free(&c);
}
END_TEST

START_TEST(comments_allowed)
{
	struct config c;
	char *err;
	int r = load(&c,
		     "// a line comment first\n"
		     "{ /* block */ \"grace_ms\": /* between */ 5, // trailing\n"
		     "  \"limits\": { \"max_concurrent\": 2 } }\n", &err);
	ck_assert_msg(r == 0, "%s", err ? err : "");
	ck_assert_uint_eq(c.grace_ms, 5);
	ck_assert_uint_eq(c.limits.max_concurrent, 2);
	config_free(&c);
}
END_TEST

START_TEST(error_out_of_range_position)
{
	/* The brief example: line 3, column 23 is where the 0 stands. */
	assert_error("{\n  \"limits\": {\n    \"max_concurrent\": 0\n  }\n}\n",
		     "t.json:3:23: limits.max_concurrent: expected a positive integer");
	assert_error("{\n  \"limits\": {\n    \"max_concurrent\": -1\n  }\n}\n",
		     "t.json:3:23: limits.max_concurrent: expected a positive integer");
	assert_error("{\"limits\": {\"max_json_depth\": 5000}}",
		     "t.json:1:31: limits.max_json_depth: expected an integer of at most 1024");
	assert_error("{\"limits\": {\"max_json_depth\": 1}}",
		     "t.json:1:31: limits.max_json_depth: expected an integer of at least 2");
	assert_error("{\"retry\": {\"base_delay_ms\": 1.5}}",
		     "t.json:1:29: retry.base_delay_ms: expected a non-negative integer, got 1.5");
	assert_error("{\"grace_ms\": 99999999999999999999999}",
		     "t.json:1:14: grace_ms: expected a non-negative integer, got 99999999999999999999999");
	assert_error("{\"limits\": {\"per_uid_processes\": 0}}",
		     "t.json:1:34: limits.per_uid_processes: expected a positive integer");
	assert_error("{\"limits\": {\"process_buffer_kb\": 1048577}}",
		     "t.json:1:34: limits.process_buffer_kb: expected a positive integer of at most 1048576");
	/* UTF-8 before the error counts as one column per character. */
	assert_error("{\"tools\": {\"read_file\": {/* é */ \"limit\": 0}}}",
		     "t.json:1:43: tools.read_file.limit: expected a positive integer");
}
END_TEST

START_TEST(error_unknown_key_points_at_key)
{
	assert_error("{\n  \"limits\": {\n    \"max_concurent\": 4\n  }\n}\n",
		     "t.json:3:5: limits.max_concurent: unknown key");
	assert_error("{\"sockett\": null}", "t.json:1:2: sockett: unknown key");
	/* A key holding an escaped quote. */
	assert_error("{ \"a\\\"b\" : 1}", "t.json:1:3: a\"b: unknown key");
	/* A NUL byte inside a key is shown, not obeyed. */
	assert_error("{\"grace_ms\\u0000x\": 1}", "t.json:1:2: grace_ms?x: unknown key");
	assert_error("{\"tools\": {\"git_status\": {\"timeout_ms\": 5}}}",
		     "t.json:1:12: tools.git_status: not a built-in tool (read_file, write_file, "
		     "patch_file, list_dir, shell); tool files set their own timeout_ms");
	assert_error("{\"tools\": {\"read_file\": {\"output_cap\": 5}}}",
		     "t.json:1:26: tools.read_file.output_cap: unknown key");
	assert_error("{\"confirmation\": {\"default\": {\"exec\": \"auto\"}}}",
		     "t.json:1:31: confirmation.default.exec: unknown side-effect class "
		     "(expected none, read, write, execute or network)");
}
END_TEST

START_TEST(error_wrong_type)
{
	assert_error("{\"workspace\": 5}", "t.json:1:15: workspace: expected a string, got integer");
	assert_error("{\"workspace\": \"\"}", "t.json:1:15: workspace: expected a non-empty string");
	assert_error("{\"limits\": []}", "t.json:1:12: limits: expected an object, got array");
	assert_error("{\"limits\": {\"queue_max\": \"5\"}}",
		     "t.json:1:26: limits.queue_max: expected a non-negative integer, got string");
	assert_error("{\"workspaces\": {\"allowed\": [\"/a\", 3]}}",
		     "t.json:1:35: workspaces.allowed[1]: expected a string, got integer");
	assert_error("{\"tools_dir\": true}", "t.json:1:15: tools_dir: expected a string, got boolean");
	assert_error("{\"workspace\": null}", "t.json:1:15: workspace: expected a string, got null");
	assert_error("[1, 2]", "t.json:1:1: expected an object at the top level, got array");
	assert_error("  \"x\"", "t.json:1:3: expected an object at the top level, got string");
	assert_error("{\"tools\": {\"shell\": {\"env_allow\": [\"A=B\"]}}}",
		     "t.json:1:36: tools.shell.env_allow: expected a variable name, without '='");
	assert_error("{\"peers\": {\"allow_uids\": [-1]}}",
		     "t.json:1:27: peers.allow_uids[0]: expected a non-negative integer");
	assert_error("{\"peers\": {\"allow_gids\": [\"no-such-group-tc\"]}}",
		     "t.json:1:27: peers.allow_gids[0]: no such group 'no-such-group-tc'");
	assert_error("{\"log_level\": \"loud\"}",
		     "t.json:1:15: log_level: expected \"debug\", \"info\", \"warning\" or \"error\"");
	assert_error("{\"confirmation\": {\"no_approver\": 1}}",
		     "t.json:1:34: confirmation.no_approver: expected \"deny\" or \"wait\", got integer");
}
END_TEST

START_TEST(error_bad_mode)
{
	assert_error("{\n\t\"confirmation\": {\n\t\t\"default\": { \"write\": \"maybe\" }\n\t}\n}",
		     "t.json:3:25: confirmation.default.write: expected \"auto\", \"prompt\", \"deny\" or \"sandboxed\"");
	assert_error("{\"confirmation\": {\"per_tool\": {\"shell\": true}}}",
		     "t.json:1:41: confirmation.per_tool.shell: expected \"auto\", \"prompt\", \"deny\" or \"sandboxed\", got boolean");
	assert_error("{\"confirmation\": {\"trusted_workspace_overrides\": {\"write\": \"Auto\"}}}",
		     "t.json:1:60: confirmation.trusted_workspace_overrides.write: "
		     "expected \"auto\", \"prompt\", \"deny\" or \"sandboxed\"");
}
END_TEST

START_TEST(memory_keys)
{
	struct config c;
	char *err = NULL;
	ck_assert_int_eq(load(&c, "{}", &err), 0);
	ck_assert_ptr_null(c.memory.dir);
	ck_assert(!c.memory.per_workspace);
	ck_assert_uint_eq(c.memory.max_file_kb, 64);
	ck_assert_uint_eq(c.memory.max_total_kb, 1024);
	config_free(&c);
	ck_assert_int_eq(load(&c, "{\"memory\":{\"dir\":\"/srv/mem\",\"scope\":\"workspace\","
			      "\"max_file_kb\":8,\"max_total_kb\":80}}", &err), 0);
	ck_assert_str_eq(c.memory.dir, "/srv/mem");
	ck_assert(c.memory.per_workspace);
	ck_assert_uint_eq(c.memory.max_file_kb, 8);
	ck_assert_uint_eq(c.memory.max_total_kb, 80);
	/* Every peer's memory is out of sandboxed children's reach. */
	bool denied = false;
	for (char **d = c.sandbox.deny_read; d && *d; d++)
		denied |= str_eq(*d, "/srv/mem");
	ck_assert(denied);
	config_free(&c);
	/* The default follows systemd's StateDirectory=, and is denied too. */
	setenv("STATE_DIRECTORY", "/var/lib/tc-test:/var/lib/other", 1);
	char *def = config_default_memory_dir();
	ck_assert_str_eq(def, "/var/lib/tc-test/memory");
	ck_assert_int_eq(load(&c, "{}", &err), 0);
	denied = false;
	for (char **d = c.sandbox.deny_read; d && *d; d++)
		denied |= str_eq(*d, def);
	ck_assert(denied);
	config_free(&c);
	free(def);
	unsetenv("STATE_DIRECTORY");
	assert_error("{\"memory\":{\"scope\":\"host\"}}", "t.json:1:20: memory.scope: expected \"uid\" or \"workspace\"");
	assert_error("{\"memory\":{\"max_file_kb\":0}}",
		     "t.json:1:26: memory.max_file_kb: expected a positive integer");
}
END_TEST

START_TEST(error_bad_octal)
{
	const char *want = "expected a string of 3 or 4 octal digits such as \"0660\"";
	char buf[256];

	snprintf(buf, sizeof(buf), "t.json:1:17: socket_mode: %s", want);
	assert_error("{\"socket_mode\": \"0690\"}", buf);
	assert_error("{\"socket_mode\": \"66\"}", buf);
	assert_error("{\"socket_mode\": \"00660\"}", buf);
	assert_error("{\"socket_mode\": \"rw-\"}", buf);
	snprintf(buf, sizeof(buf), "t.json:1:17: socket_mode: %s, got integer", want);
	assert_error("{\"socket_mode\": 660}", buf);
	assert_error("{\"socket_mode\": \"4755\"}",
		     "t.json:1:17: socket_mode: setuid, setgid and sticky bits make no sense on a socket");

	struct config c;
	char *err;
	ck_assert_int_eq(load(&c, "{\"socket_mode\": \"600\"}", &err), 0);
	ck_assert_uint_eq(c.socket_mode, 0600);
	config_free(&c);
}
END_TEST

START_TEST(error_syntax)
{
	/* The parser's message, located: line 3 holds the stray comma. */
	assert_error_prefix("{\n  \"grace_ms\": 1,\n  \"limits\": { \"max_concurrent\": 4, }\n}\n",
			    "t.json:3:37: ");
	assert_error_prefix("{\"grace_ms\": 1", "t.json:1:15: ");
	assert_error_prefix("", "t.json:1:1: ");
	/* A repeated key is refused, pointing at the second one. */
	assert_error_prefix("{\"grace_ms\": 1,\n \"grace_ms\": 2}", "t.json:2:14: ");

	/* Nesting deeper than CONFIG_MAX_DEPTH is a parse error, not a crash. */
	char deep[CONFIG_MAX_DEPTH * 2 + 16];
	size_t n = 0;
	deep[n++] = '{';
	memcpy(deep + n, "\"x\":", 4);
	n += 4;
	for (int i = 0; i < CONFIG_MAX_DEPTH + 1; i++)
		deep[n++] = '[';
	deep[n] = '\0';
	assert_error_prefix(deep, "t.json:1:");
}
END_TEST

START_TEST(failure_leaves_config_untouched)
{
	struct config c;
	char *err = NULL;

	config_init(&c);
	const char *good = "{\"grace_ms\": 7, \"workspace\": \"/a\"}";
	ck_assert_int_eq(config_load_text(&c, "t.json", NULL, good, strlen(good), &err), 0);
	const char *bad = "{\"grace_ms\": 8, \"workspace\": \"/b\", \"nope\": 1}";
	ck_assert_int_lt(config_load_text(&c, "t.json", NULL, bad, strlen(bad), &err), 0);
	free(err);
	ck_assert_uint_eq(c.grace_ms, 7);
	ck_assert_str_eq(c.workspace, "/a");
	config_free(&c);
}
END_TEST

START_TEST(load_file_resolves_relative_paths)
{
	_cleanup_free_ char *dir = make_tmpdir();
	_cleanup_free_ char *sub = xasprintf("%s/conf", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	_cleanup_free_ char *ws = xasprintf("%s/ws", dir);
	ck_assert_int_eq(mkdir(ws, 0700), 0);
	_cleanup_free_ char *path = xasprintf("%s/toolcalld.json", sub);
	write_text(path,
		   "{\n"
		   "  \"socket\": \"run/t.sock\",\n"
		   "  \"workspace\": \"../ws\",\n"
		   "  \"workspaces\": { \"allowed\": [\"./a//b/\", \"/abs\"] },\n"
		   "  \"tools_dir\": \"tools.d/\",\n"
		   "  \"audit_log\": \"log/audit.jsonl\",\n"
		   "  \"confirmation\": { \"trusted_workspaces\": [\"../ws\"] }\n"
		   "}\n");

	struct config c;
	char *err = NULL;
	config_init(&c);
	int r = config_load(&c, path, &err);
	ck_assert_msg(r == 0, "%s", err ? err : "");

	_cleanup_free_ char *want = NULL;
	want = xasprintf("%s/run/t.sock", sub);
	ck_assert_str_eq(c.socket, want);
	free(want);
	/* ".." is left for the kernel to resolve. */
	want = xasprintf("%s/../ws", sub);
	ck_assert_str_eq(c.workspace, want);
	free(want);
	want = xasprintf("%s/a/b", sub);
	ck_assert_str_eq(c.workspaces_allowed[0], want);
	ck_assert_str_eq(c.workspaces_allowed[1], "/abs");
	free(want);
	want = xasprintf("%s/tools.d", sub);
	ck_assert_str_eq(c.tools_dir, want);
	free(want);
	want = xasprintf("%s/log/audit.jsonl", sub);
	ck_assert_str_eq(c.audit_log, want);
	/* Trusted workspaces that exist are made canonical. */
	ck_assert_uint_eq(c.confirmation.n_trusted, 1);
	ck_assert_str_eq(c.confirmation.trusted_workspaces[0], ws);
	config_free(&c);

	/* A relative config path is taken from the working directory. */
	char cwd[PATH_MAX];
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(dir), 0);
	config_init(&c);
	r = config_load(&c, "conf/toolcalld.json", &err);
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_msg(r == 0, "%s", err ? err : "");
	free(want);
	want = xasprintf("%s/tools.d", sub);
	ck_assert_str_eq(c.tools_dir, want);
	config_free(&c);

	/* Errors inside a file name the file as given. */
	write_text(path, "{\n\n   \"grace_ms\": \"soon\"}");
	config_init(&c);
	r = config_load(&c, path, &err);
	ck_assert_int_lt(r, 0);
	free(want);
	want = xasprintf("%s:3:16: grace_ms: expected a non-negative integer, got string", path);
	ck_assert_str_eq(err, want);
	free(err);
	config_free(&c);

	unlink(path);
	rmdir(sub);
	rmdir(ws);
	rmdir(dir);
}
END_TEST

START_TEST(load_file_errors)
{
	_cleanup_free_ char *dir = make_tmpdir();
	_cleanup_free_ char *missing = xasprintf("%s/missing.json", dir);
	struct config c;
	char *err = NULL;

	config_init(&c);
	ck_assert_int_eq(config_load(&c, missing, &err), -ENOENT);
	_cleanup_free_ char *want = xasprintf("%s: %s", missing, strerror(ENOENT));
	ck_assert_str_eq(err, want);
	free(err);

	ck_assert_int_eq(config_load(&c, dir, &err), -EISDIR);
	free(err);

	/* Bigger than the cap: refused without being parsed. */
	_cleanup_free_ char *big = xasprintf("%s/big.json", dir);
	int fd = open(big, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, CONFIG_MAX_BYTES + 1), 0);
	close(fd);
	ck_assert_int_eq(config_load(&c, big, &err), -EFBIG);
	ck_assert_msg(strstr(err, "larger than") != NULL, "%s", err);
	free(err);

	/* The defaults survived every failure. */
	ck_assert_str_eq(c.workspace, ".");
	config_free(&c);
	unlink(big);
	rmdir(dir);
}
END_TEST

START_TEST(resolve_path)
{
	struct {
		const char *base, *path, *want;
	} cases[] = {
		{ "/etc/tc", "ws", "/etc/tc/ws" },
		{ "/etc/tc", "./ws/", "/etc/tc/ws" },
		{ "/etc/tc", "/abs//x/./y/", "/abs/x/y" },
		{ "/etc/tc", "../ws", "/etc/tc/../ws" },
		{ "/", "ws", "/ws" },
		{ NULL, "./a/b/", "a/b" },
		{ NULL, ".", "." },
		{ NULL, "/", "/" },
		{ "/etc/tc", ".", "/etc/tc" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_free_ char *got = bind_resolve_path(cases[i].base, cases[i].path);
		ck_assert_str_eq(got, cases[i].want);
	}
}
END_TEST

START_TEST(default_socket_from_env)
{
	unsetenv("TOOLCALLD_SOCKET");
	unsetenv("XDG_RUNTIME_DIR");
	/* Root, or who may write /run/toolcalld; else a directory of one's own. */
	char *fallback = geteuid() == 0 || access("/run/toolcalld", W_OK | X_OK) == 0 ?
			 xstrdup("/run/toolcalld/toolcalld.sock") :
			 xasprintf("/tmp/toolcalld-%u/toolcalld.sock", (unsigned)geteuid());
	char *s = config_default_socket();
	ck_assert_str_eq(s, fallback);
	free(s);

	setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
	s = config_default_socket();
	ck_assert_str_eq(s, "/run/user/1000/toolcalld.sock");
	free(s);

	setenv("TOOLCALLD_SOCKET", "/tmp/my.sock", 1);
	s = config_default_socket();
	ck_assert_str_eq(s, "/tmp/my.sock");
	free(s);

	/* Empty counts as unset. */
	setenv("TOOLCALLD_SOCKET", "", 1);
	s = config_default_socket();
	ck_assert_str_eq(s, "/run/user/1000/toolcalld.sock");
	free(s);
	setenv("XDG_RUNTIME_DIR", "", 1);
	s = config_default_socket();
	ck_assert_str_eq(s, fallback);
	free(s);
	free(fallback);
}
END_TEST

START_TEST(socket_path_too_long)
{
	char text[400];
	char path[200];
	memset(path, 'a', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	snprintf(text, sizeof(text), "{\"socket\": \"%s\"}", path);
	assert_error(text, "t.json:1:12: socket: socket path longer than 107 bytes");
}
END_TEST

START_TEST(peers_by_name)
{
	struct config c;
	char *err;
	int r = load(&c, "{\"peers\": {\"allow_uids\": [\"root\", 5], \"allow_gids\": [\"root\"]}}", &err);
	ck_assert_msg(r == 0, "%s", err ? err : "");
	ck_assert_uint_eq(c.peers.n_uids, 2);
	ck_assert_uint_eq(c.peers.uids[0], 0);
	ck_assert_uint_eq(c.peers.uids[1], 5);
	ck_assert_uint_eq(c.peers.n_gids, 1);
	ck_assert_uint_eq(c.peers.gids[0], 0);
	config_free(&c);
	assert_error("{\"peers\": {\"allow_uids\": [\"no-such-user-tc\"]}}",
		     "t.json:1:27: peers.allow_uids[0]: no such user 'no-such-user-tc'");
}
END_TEST

/* store.server_uid: a uid, or a user name looked up when the config is
 * read; none by default; (uid_t)-1 and the unknown refused. */
START_TEST(store_server_uid)
{
	struct config c;
	char *err = NULL;
	ck_assert_int_eq(load(&c, "{}", &err), 0);
	ck_assert_uint_eq(c.store.server_uid, UINT32_MAX);
	config_free(&c);
	ck_assert_int_eq(load(&c, "{\"store\":{\"kind\":\"redis\",\"address\":\"unix:/run/r.sock\","
			      "\"server_uid\":999}}", &err), 0);
	ck_assert_uint_eq(c.store.server_uid, 999);
	config_free(&c);
	struct passwd *pw = getpwnam("nobody");
	if (pw) {
		int r = load(&c, "{\"store\":{\"server_uid\":\"nobody\"}}", &err);
		ck_assert_msg(r == 0, "%s", err ? err : "");
		ck_assert_uint_eq(c.store.server_uid, pw->pw_uid);
		config_free(&c);
	}
	assert_error("{\"store\":{\"server_uid\":\"no-such-user-tc\"}}",
		     "t.json:1:24: store.server_uid: no such user 'no-such-user-tc'");
	assert_error_prefix("{\"store\":{\"server_uid\":4294967295}}", "t.json:1:24: store.server_uid: ");
	assert_error_prefix("{\"store\":{\"server_uid\":-1}}", "t.json:1:24: store.server_uid: ");
	assert_error_prefix("{\"store\":{\"server_uid\":1.5}}", "t.json:1:24: store.server_uid: ");
	assert_error_prefix("{\"store\":{\"server_uid\":true}}", "t.json:1:24: store.server_uid: ");
	assert_error_prefix("{\"store\":{\"server_uid\":\"\"}}", "t.json:1:24: store.server_uid: ");
}
END_TEST

/* --- policy ---------------------------------------------------------------- */

START_TEST(policy_defaults)
{
	struct policy_config p;
	policy_config_init(&p);
	ck_assert_int_eq(policy_decide(&p, "list_dir", SIDE_NONE, "/ws"), CONFIRM_AUTO);
	ck_assert_int_eq(policy_decide(&p, "read_file", SIDE_READ, "/ws"), CONFIRM_AUTO);
	ck_assert_int_eq(policy_decide(&p, "write_file", SIDE_WRITE, "/ws"), CONFIRM_PROMPT);
	ck_assert_int_eq(policy_decide(&p, "shell", SIDE_EXECUTE, "/ws"), CONFIRM_PROMPT);
	ck_assert_int_eq(policy_decide(&p, "fetch", SIDE_NETWORK, NULL), CONFIRM_PROMPT);
	/* Nothing is trusted by default. */
	ck_assert(!policy_workspace_trusted(&p, "/"));
	policy_config_free(&p);
}
END_TEST

/* The memory tool writes, yet runs at once unless per_tool says otherwise. */
START_TEST(policy_memory_default)
{
	struct config c;
	char *err;
	ck_assert_int_eq(load(&c, "{\"confirmation\":{\"default\":{\"write\":\"deny\"}}}", &err), 0);
	ck_assert_int_eq(policy_decide(&c.confirmation, "memory", SIDE_WRITE, "/ws"), CONFIRM_AUTO);
	ck_assert_int_eq(policy_decide(&c.confirmation, "write_file", SIDE_WRITE, "/ws"), CONFIRM_DENY);
	config_free(&c);
	ck_assert_int_eq(load(&c, "{\"confirmation\":{\"per_tool\":{\"mem*\":\"prompt\"}}}", &err), 0);
	ck_assert_int_eq(policy_decide(&c.confirmation, "memory", SIDE_WRITE, "/ws"), CONFIRM_PROMPT);
	config_free(&c);
}
END_TEST

/* "sandboxed": auto only for a call that runs sandboxed without network. */
START_TEST(policy_sandboxed_mode)
{
	ck_assert_int_eq(confirm_mode_from_name("sandboxed"), CONFIRM_SANDBOXED);
	static const struct tool_def runs = { .name = "shell", .side_effects = SIDE_EXECUTE, .runs_children = true };
	static const struct tool_def files = { .name = "write_file", .side_effects = SIDE_WRITE };
	struct sandbox_config cfg;
	sandbox_config_init(&cfg);
	struct sandbox_tool st = SANDBOX_TOOL_UNSET;
	struct tool t = { .name = "shell", .def = &runs, .side_effects = SIDE_EXECUTE };
	/* No sandbox at all: its children would run unconfined. */
	ck_assert_int_eq(policy_settle_sandboxed(CONFIRM_SANDBOXED, &t, NULL), CONFIRM_PROMPT);
	/* The default profile, without network. */
	ck_assert_int_eq(policy_settle_sandboxed(CONFIRM_SANDBOXED, &t, &cfg), CONFIRM_AUTO);
	t.sandbox = &st;
	st.profile = SANDBOX_READ_ONLY;
	ck_assert_int_eq(policy_settle_sandboxed(CONFIRM_SANDBOXED, &t, &cfg), CONFIRM_AUTO);
	st.network = 1;
	ck_assert_int_eq(policy_settle_sandboxed(CONFIRM_SANDBOXED, &t, &cfg), CONFIRM_PROMPT);
	st.network = -1;
	st.profile = SANDBOX_OFF;
	ck_assert_int_eq(policy_settle_sandboxed(CONFIRM_SANDBOXED, &t, &cfg), CONFIRM_PROMPT);
	/* A file tool is confined beneath the workspace by the kernel. */
	struct tool f = { .name = "write_file", .def = &files, .side_effects = SIDE_WRITE };
	ck_assert_int_eq(policy_settle_sandboxed(CONFIRM_SANDBOXED, &f, &cfg), CONFIRM_AUTO);
	/* Other modes stay what they are. */
	ck_assert_int_eq(policy_settle_sandboxed(CONFIRM_DENY, &t, &cfg), CONFIRM_DENY);
	ck_assert_int_eq(policy_settle_sandboxed(CONFIRM_PROMPT, &f, &cfg), CONFIRM_PROMPT);
	sandbox_config_clear(&cfg);
}
END_TEST

START_TEST(policy_trusted_workspace_example)
{
	/* The contract's example: in a trusted workspace writes run at once,
	 * commands still ask. */
	struct config c;
	char *err;
	int r = load(&c,
		     "{\"confirmation\": {\"trusted_workspaces\": [\"/nonexistent/tc/proj\"],"
		     " \"trusted_workspace_overrides\": {\"write\": \"auto\", \"execute\": \"prompt\"}}}",
		     &err);
	ck_assert_msg(r == 0, "%s", err ? err : "");
	const struct policy_config *p = &c.confirmation;

	ck_assert_int_eq(policy_decide(p, "write_file", SIDE_WRITE, "/nonexistent/tc/proj"), CONFIRM_AUTO);
	ck_assert_int_eq(policy_decide(p, "shell", SIDE_EXECUTE, "/nonexistent/tc/proj"), CONFIRM_PROMPT);
	/* A root beneath a trusted workspace is trusted too... */
	ck_assert_int_eq(policy_decide(p, "write_file", SIDE_WRITE, "/nonexistent/tc/proj/sub"), CONFIRM_AUTO);
	/* ... but not a sibling sharing a prefix. */
	ck_assert_int_eq(policy_decide(p, "write_file", SIDE_WRITE, "/nonexistent/tc/proj-evil"), CONFIRM_PROMPT);
	ck_assert_int_eq(policy_decide(p, "write_file", SIDE_WRITE, "/nonexistent/tc"), CONFIRM_PROMPT);
	ck_assert_int_eq(policy_decide(p, "write_file", SIDE_WRITE, NULL), CONFIRM_PROMPT);
	/* A class without an override follows the default. */
	ck_assert_int_eq(policy_decide(p, "fetch", SIDE_NETWORK, "/nonexistent/tc/proj"), CONFIRM_PROMPT);
	ck_assert_int_eq(policy_decide(p, "read_file", SIDE_READ, "/nonexistent/tc/proj"), CONFIRM_AUTO);
	config_free(&c);
}
END_TEST

START_TEST(policy_precedence)
{
	struct config c;
	char *err;
	int r = load(&c,
		     "{\"confirmation\": {"
		     " \"default\": {\"read\": \"deny\"},"
		     " \"per_tool\": {\"write_file\": \"deny\", \"git_status\": \"auto\", \"cat\": \"prompt\"},"
		     " \"trusted_workspaces\": [\"/\"],"
		     " \"trusted_workspace_overrides\": {\"write\": \"auto\", \"read\": \"auto\"}}}",
		     &err);
	ck_assert_msg(r == 0, "%s", err ? err : "");
	const struct policy_config *p = &c.confirmation;

	/* per_tool beats the trusted override... */
	ck_assert_int_eq(policy_decide(p, "write_file", SIDE_WRITE, "/srv"), CONFIRM_DENY);
	ck_assert_int_eq(policy_decide(p, "cat", SIDE_READ, "/srv"), CONFIRM_PROMPT);
	/* ... and the default. */
	ck_assert_int_eq(policy_decide(p, "git_status", SIDE_EXECUTE, NULL), CONFIRM_AUTO);
	/* The trusted override beats the default ("/" holds every root). */
	ck_assert_int_eq(policy_decide(p, "patch_file", SIDE_WRITE, "/srv"), CONFIRM_AUTO);
	ck_assert_int_eq(policy_decide(p, "read_file", SIDE_READ, "/srv"), CONFIRM_AUTO);
	/* The default applies outside trusted workspaces. */
	ck_assert_int_eq(policy_decide(p, "read_file", SIDE_READ, NULL), CONFIRM_DENY);
	/* execute has no override once the overrides were replaced. */
	ck_assert_int_eq(policy_decide(p, "shell", SIDE_EXECUTE, "/srv"), CONFIRM_PROMPT);
	config_free(&c);
}
END_TEST

START_TEST(policy_trusted_symlink_canonical)
{
	/* A trusted workspace named through a symbolic link matches the
	 * canonical root a session gets. */
	_cleanup_free_ char *dir = make_tmpdir();
	_cleanup_free_ char *real = xasprintf("%s/real", dir);
	_cleanup_free_ char *link = xasprintf("%s/link", dir);
	ck_assert_int_eq(mkdir(real, 0700), 0);
	ck_assert_int_eq(symlink("real", link), 0);

	_cleanup_free_ char *text = xasprintf("{\"confirmation\": {\"trusted_workspaces\": [\"%s\"]}}", link);
	struct config c;
	char *err;
	int r = load(&c, text, &err);
	ck_assert_msg(r == 0, "%s", err ? err : "");
	ck_assert_str_eq(c.confirmation.trusted_workspaces[0], real);
	ck_assert_int_eq(policy_decide(&c.confirmation, "write_file", SIDE_WRITE, real), CONFIRM_AUTO);
	config_free(&c);
	unlink(link);
	rmdir(real);
	rmdir(dir);
}
END_TEST

START_TEST(mode_names)
{
	ck_assert_str_eq(confirm_mode_name(CONFIRM_AUTO), "auto");
	ck_assert_str_eq(confirm_mode_name(CONFIRM_PROMPT), "prompt");
	ck_assert_str_eq(confirm_mode_name(CONFIRM_DENY), "deny");
	ck_assert_int_eq(confirm_mode_from_name("deny"), CONFIRM_DENY);
	ck_assert_int_eq(confirm_mode_from_name("Deny"), -1);
	ck_assert_int_eq(confirm_mode_from_name(NULL), -1);
	ck_assert_str_eq(config_log_level_name(LOG_WARNING), "warning");
	ck_assert_int_eq(config_builtin_from_name("list_dir"), CONFIG_TOOL_LIST_DIR);
	ck_assert_int_eq(config_builtin_from_name("git_status"), -1);
}
END_TEST

/* limits.tmp_mb: the daemon-wide size of a call's TMPDIR, checked as
 * sandbox.limits.tmp_mb is; sandbox.limits.tmp_mb, more specific, wins
 * when both are given, and a tool's own limits over both. */
START_TEST(limits_tmp_mb)
{
	struct config c;
	char *err = NULL;
	ck_assert_int_eq(load(&c, "{}", &err), 0);
	ck_assert_int_eq(c.sandbox.limits.tmp_mb, 1024);
	config_free(&c);

	ck_assert_msg(load(&c, "{\"limits\": {\"tmp_mb\": 5}}", &err) == 0, "%s", err);
	ck_assert_int_eq(c.sandbox.limits.tmp_mb, 5);
	struct sandbox_req req;
	struct sandbox_tool own = SANDBOX_TOOL_UNSET;
	sandbox_req_init(&req, &c.sandbox, "shell", false, &own);
	ck_assert_int_eq(req.limits.tmp_mb, 5);
	own.limits.tmp_mb = 7;
	sandbox_req_init(&req, &c.sandbox, "shell", false, &own);
	ck_assert_int_eq(req.limits.tmp_mb, 7);
	config_free(&c);

	ck_assert_int_eq(load(&c, "{\"limits\": {\"tmp_mb\": null}}", &err), 0);
	ck_assert_int_eq(c.sandbox.limits.tmp_mb, -1);
	config_free(&c);

	ck_assert_int_eq(load(&c, "{\"limits\": {\"tmp_mb\": 5}, \"sandbox\": {\"limits\": {\"tmp_mb\": 9}}}", &err), 0);
	ck_assert_int_eq(c.sandbox.limits.tmp_mb, 9);
	config_free(&c);
	ck_assert_int_eq(load(&c, "{\"sandbox\": {\"limits\": {\"tmp_mb\": 9}}, \"limits\": {\"tmp_mb\": 5}}", &err), 0);
	ck_assert_int_eq(c.sandbox.limits.tmp_mb, 9);
	config_free(&c);
	ck_assert_int_eq(load(&c, "{\"limits\": {\"tmp_mb\": 5}, \"sandbox\": {\"limits\": {\"pids\": 9}}}", &err), 0);
	ck_assert_int_eq(c.sandbox.limits.tmp_mb, 5);
	ck_assert_int_eq(c.sandbox.limits.pids, 9);
	config_free(&c);

	assert_error("{\"limits\": {\"tmp_mb\": 0}}", "t.json:1:23: limits.tmp_mb: expected a positive integer or null (no limit)");
	assert_error("{\"limits\": {\"tmp_mb\": \"5\"}}",
		     "t.json:1:23: limits.tmp_mb: expected a positive integer or null (no limit)");
	assert_error("{\"limits\": {\"tmp_mb\": 2199023255553}}",
		     "t.json:1:23: limits.tmp_mb: expected a positive integer or null (no limit)");
}
END_TEST

/* Inside the sections read by parsers of their own (confirmation, hooks,
 * per-tool caps, peers, sandbox, env_allow), every mistake too. */
START_TEST(every_error_in_subsections)
{
	assert_error("{\"confirmation\": {\"default\": {\"exec\": \"auto\", \"write\": \"never\"},\n"
		     "  \"per_tool\": {\"a\": 1, \"b\": \"x\"}},\n"
		     " \"limits\": {\"per_tool_concurrency\": {\"a\": 0, \"b\": \"2\"}},\n"
		     " \"peers\": {\"allow_uids\": [-1, \"no-such-user-tc\"]},\n"
		     " \"hooks\": {\"pre_call\": [{\"command\": []}, {\"command\": [\"x\"], \"when\": 1}]},\n"
		     " \"sandbox\": {\"default\": \"loose\", \"limits\": {\"swap\": 1}},\n"
		     " \"tools\": {\"shell\": {\"env_allow\": [\"A=1\", \"B=2\"]}}}",
		     "t.json:1:31: confirmation.default.exec: unknown side-effect class (expected none, read, write, "
		     "execute or network)\n"
		     "t.json:1:56: confirmation.default.write: expected \"auto\", \"prompt\", \"deny\" or \"sandboxed\"\n"
		     "t.json:2:21: confirmation.per_tool.a: expected \"auto\", \"prompt\", \"deny\" or \"sandboxed\", "
		     "got integer\n"
		     "t.json:2:29: confirmation.per_tool.b: expected \"auto\", \"prompt\", \"deny\" or \"sandboxed\"\n"
		     "t.json:3:43: limits.per_tool_concurrency.a: expected a positive integer\n"
		     "t.json:3:51: limits.per_tool_concurrency.b: expected a positive integer, got string\n"
		     "t.json:4:27: peers.allow_uids[0]: expected a non-negative integer\n"
		     "t.json:4:31: peers.allow_uids[1]: no such user 'no-such-user-tc'\n"
		     "t.json:5:37: hooks.pre_call[0].command: expected the program and its arguments, got []\n"
		     "t.json:5:61: hooks.pre_call[1].when: unknown key (expected match, command, timeout_ms)\n"
		     "t.json:6:25: sandbox.default: expected \"workspace-write\", \"read-only\" or \"off\"\n"
		     "t.json:6:45: sandbox.limits.swap: unknown key\n"
		     "t.json:7:36: tools.shell.env_allow: expected a variable name, without '='\n"
		     "t.json:7:43: tools.shell.env_allow: expected a variable name, without '='");
}
END_TEST

/* Every mistake is reported, one a line, not only the first. */
START_TEST(every_error_reported)
{
	assert_error("{\"grace_ms\": \"x\",\n \"bogus\": 1,\n \"limits\": {\"max_batch\": 0, \"wat\": 2},\n"
		     " \"retry\": {\"max_attempts\": 1000}}",
		     "t.json:1:14: grace_ms: expected a non-negative integer, got string\n"
		     "t.json:2:2: bogus: unknown key\n"
		     "t.json:3:26: limits.max_batch: expected a positive integer\n"
		     "t.json:3:29: limits.wat: unknown key\n"
		     "t.json:4:28: retry.max_attempts: expected a positive integer of at most 100");

	/* Bounded: the first BIND_MAX_ERRORS, then how many more. */
	struct buf b = {0};
	buf_puts(&b, "{");
	for (int i = 0; i < BIND_MAX_ERRORS + 7; i++)
		buf_printf(&b, "%s\"k%d\": 1", i ? ", " : "", i);
	buf_puts(&b, "}");
	buf_putc(&b, '\0');
	struct config c;
	char *err = NULL;
	ck_assert_int_lt(load(&c, buf_head(&b), &err), 0);
	size_t lines = 1;
	for (const char *s = err; *s; s++)
		lines += *s == '\n';
	ck_assert_uint_eq(lines, BIND_MAX_ERRORS + 1);
	ck_assert_ptr_nonnull(strstr(err, "t.json:1:2: k0: unknown key\n"));
	ck_assert_ptr_nonnull(strstr(err, "\nt.json: 7 more errors not shown"));
	free(err);
	config_free(&c);
	buf_free(&b);

	/* config_check keeps what could be read. */
	char *dir = make_tmpdir();
	char *path = xasprintf("%s/c.json", dir);
	FILE *f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fputs("{\"grace_ms\": 1234, \"bogus\": 1, \"tools_dir\": \"tools\"}", f);
	fclose(f);
	config_init(&c);
	ck_assert_int_eq(config_check(&c, path, &err), 1);
	ck_assert_ptr_nonnull(strstr(err, "bogus: unknown key"));
	ck_assert_uint_eq(c.grace_ms, 1234);
	char *tools = xasprintf("%s/tools", dir);
	ck_assert_str_eq(c.tools_dir, tools);
	free(err);
	config_free(&c);
	config_init(&c);
	ck_assert_int_lt(config_load(&c, path, &err), 0);
	ck_assert_uint_ne(c.grace_ms, 1234);
	free(err);
	config_free(&c);
	unlink(path);
	rmdir(dir);
	free(tools);
	free(path);
	free(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, defaults_are_the_contracts);
	tcase_add_test(tc, contract_example_loads_as_defaults);
	tcase_add_test(tc, full_config);
	tcase_add_test(tc, store_server_uid);
	tcase_add_test(tc, comments_allowed);
	tcase_add_test(tc, error_out_of_range_position);
	tcase_add_test(tc, error_unknown_key_points_at_key);
	tcase_add_test(tc, error_wrong_type);
	tcase_add_test(tc, error_bad_mode);
	tcase_add_test(tc, every_error_reported);
	tcase_add_test(tc, every_error_in_subsections);
	tcase_add_test(tc, limits_tmp_mb);
	tcase_add_test(tc, memory_keys);
	tcase_add_test(tc, error_bad_octal);
	tcase_add_test(tc, error_syntax);
	tcase_add_test(tc, failure_leaves_config_untouched);
	tcase_add_test(tc, load_file_resolves_relative_paths);
	tcase_add_test(tc, load_file_errors);
	tcase_add_test(tc, resolve_path);
	tcase_add_test(tc, default_socket_from_env);
	tcase_add_test(tc, socket_path_too_long);
	tcase_add_test(tc, peers_by_name);
	suite_add_tcase(s, tc);

	TCase *tp = tcase_create("policy");
	tcase_add_test(tp, policy_defaults);
	tcase_add_test(tp, policy_memory_default);
	tcase_add_test(tp, policy_trusted_workspace_example);
	tcase_add_test(tp, policy_precedence);
	tcase_add_test(tp, policy_trusted_symlink_canonical);
	tcase_add_test(tp, mode_names);
	tcase_add_test(tp, policy_sandboxed_mode);
	suite_add_tcase(s, tp);

	return run_suite(s);
}
