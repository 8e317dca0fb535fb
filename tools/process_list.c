/* SPDX-License-Identifier: MIT */
/*
 * The process_list tool: the caller's background processes
 * (lib/process/).
 */
#include "lib/process/process.h"
#include "tools/tools.h"

static const char process_list_schema[] =
	"{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";

const struct tool_def tool_process_list = {
	.name = "process_list",
	.description = "List your background processes (started by shell with background: true, in any of "
		       "your sessions): id, command, start time, whether it runs, its exit, bytes of output "
		       "produced and dropped, whether it is waiting for input. Ended ones stay listed for a while.",
	.input_schema = process_list_schema,
	.side_effects = SIDE_READ,
	.idempotent = true,
	.exec = process_list_exec,
};
