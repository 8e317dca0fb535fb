/* SPDX-License-Identifier: MIT */
/*
 * The shell tool: runs `/bin/sh -c command` in the workspace (or a
 * directory beneath it), with stdin on /dev/null, in a process group of its
 * own, with a scrubbed environment and capped output. A command that exits
 * non-zero or is killed is a successful dispatch with is_error set; its
 * exit code and signal are in structuredContent. It runs in the sandbox
 * of the configured profile (lib/sandbox/), as the peer when the daemon is
 * root. Process handling lives in lib/child_*.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "lib/child/child.h"
#include "lib/fsjob/fsjob.h"
#include "lib/process/process.h"
#include "lib/sandbox/sandbox.h"
#include "lib/files/workspace.h"
#include "proto/json.h"
#include "tools/tools.h"

/* The kernel caps one argument at 128 KiB (MAX_ARG_STRLEN): 32000
 * characters of at most 4 bytes each always fit. */
static const char shell_schema[] =
	"{\"type\":\"object\","
	"\"properties\":{"
	"\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":32000,"
	"\"description\":\"Shell command, run with /bin/sh -c\"},"
	"\"cwd\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
	"\"description\":\"Working directory, relative to the workspace root (default: the root)\"},"
	"\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400000,"
	"\"description\":\"Time limit in milliseconds\"},"
	SHELL_BACKGROUND_SCHEMA "},"
	"\"required\":[\"command\"],"
	"\"additionalProperties\":false}";

static const char *const shell_path_args[] = { "cwd", NULL };

/* Sets the outcome from how the shell ended. */
static void shell_done(struct tool_call *c, struct child_result *r)
{
	tool_call_succeed(c, child_call_text(c, r), child_call_json(c, r, true),
			  r->signal != 0 || r->exit_code != 0);
}

/* Starts the command; the outcome follows from shell_done. */
static enum tool_ret shell_exec(struct tool_call *c)
{
	const struct json *command = json_get(c->args, "command");
	const struct json *cwd = json_get(c->args, "cwd");
	_cleanup_close_ int cwd_fd = -1;
	char **env = NULL;
	int r;

	/* sh -c would see the command cut at the first NUL. */
	if (memchr(command->u.str.s, '\0', command->u.str.len)) {
		tool_call_invalid(c, "command", "contains a NUL character");
		return TOOL_DONE;
	}
	int background = process_shell_mode(c);
	if (background < 0)
		return TOOL_DONE;
	if (cwd) {
		/* Reached as the shell will run: as the peer, when it does. */
		r = fsjob_openat_as(c, c->ident, cwd->u.str.s, cwd->u.str.len, O_PATH | O_DIRECTORY | O_CLOEXEC,
				    &cwd_fd);
		if (r < 0) {
			_cleanup_free_ char *msg = NULL;
			enum tc_kind kind = ws_error(r, cwd->u.str.s, &msg);
			tool_call_fail(c, kind, "%s", msg);
			return TOOL_DONE;
		}
	}
	tool_call_note_command(c, command->u.str.s);

	char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)command->u.str.s, NULL };
	env = child_env_new(c->env ? c->env->shell_env_allow : NULL);
	struct child_opts opts = {
		.path = "/bin/sh",
		.argv = argv,
		.envp = env,
		.cwd_fd = cwd_fd,	/* -1: the workspace's root */
		/* One pipe for stdout and stderr: the order is the kernel's. */
		.merge_output = true,
	};
	const struct sandbox_config *sb = c->env ? c->env->sandbox : NULL;
	struct sandbox_req req;
	sandbox_req_init(&req, sb, c->tool->name, c->tool->side_effects == SIDE_NETWORK, NULL);
	_cleanup_free_ char *dir = sb ? sandbox_start_dir(c->ws ? c->ws->root : NULL, cwd_fd) : NULL;
	req.cwd = dir;
	if (background) {
		enum tool_ret ret = process_shell_start(c, command->u.str.s, &opts, sb ? &req : NULL);
		child_env_free(env);
		return ret;
	}
	r = child_call_start(c, &opts, sb ? &req : NULL, shell_done);
	child_env_free(env);
	if (r < 0 && c->kind != TC_OK)
		return TOOL_DONE;	/* the sandbox said why */
	if (r < 0) {
		if (r == -EAGAIN || r == -EMFILE || r == -ENFILE || r == -ENOMEM)
			tool_call_fail(c, TC_TRANSIENT, "Could not start the shell: %s", strerror(-r));
		else
			tool_call_fail(c, TC_EXECUTION_ERROR, "Could not start the shell: %s", strerror(-r));
		return TOOL_DONE;
	}
	return TOOL_PENDING;
}

const struct tool_def tool_shell = {
	.name = "shell",
	.description = "Run a shell command (/bin/sh -c) in the workspace. stdin is empty. "
		       "The text holds stdout and stderr in the order they were written, then "
		       "\"[exit code N]\" or \"[killed by SIGNAL]\" when the command failed; output "
		       "beyond the daemon's limit (limits.shell_output_kb, 64 KiB unless configured) keeps its "
		       "head and its tail around a line saying how many bytes "
		       "were dropped. stderr is written into stdout (as 2>&1 does), so "
		       "structuredContent's stdout holds both in the order written and its stderr is "
		       "empty. A command that "
		       "times out or is cancelled keeps the output it had produced in the error."
		       " "
		       SHELL_BACKGROUND_DESCRIPTION,
	.input_schema = shell_schema,
	.side_effects = SIDE_EXECUTE,
	.idempotent = false,
	/* timeout_ms: the default of SIDE_EXECUTE, ten minutes */
	.path_args = shell_path_args,
	.timeout_arg = true,
	.exec = shell_exec,
	.cancel = child_call_cancel,
	.partial = child_call_partial,
	.runs_children = true,
};
