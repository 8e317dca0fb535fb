/* SPDX-License-Identifier: MIT */
/*
 * The process_kill tool: ends a background process and everything it
 * started (lib/process/).
 */
#include "lib/process/process.h"
#include "tools/tools.h"

static const char process_kill_schema[] =
	"{\"type\":\"object\","
	"\"properties\":{"
	"\"process_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
	"\"description\":\"The id shell returned for the background process\"},"
	"\"signal\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":16,"
	"\"description\":\"The signal sent first (default \\\"TERM\\\"; e.g. \\\"INT\\\", \\\"KILL\\\"); whatever is left gets KILL after a grace delay\"},"
	"\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16777216,"
	"\"description\":\"The most output bytes returned (default 65536)\"}},"
	"\"required\":[\"process_id\"],"
	"\"additionalProperties\":false}";

const struct tool_def tool_process_kill = {
	.name = "process_kill",
	.description = "Stop a background process started by shell (background: true), with every process "
		       "it started. Returns once it has ended: the output this session had not read and how "
		       "it ended. As with shell, a result that reports a signal (the one sent here included) "
		       "or a non-zero exit has isError: true.",
	.input_schema = process_kill_schema,
	.side_effects = SIDE_EXECUTE,
	.idempotent = false,
	.exec = process_kill_exec,
	.cancel = process_call_cancel,
};
