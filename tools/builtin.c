/* SPDX-License-Identifier: MIT */
/*
 * The table of built-in tools.
 */
#include "tools/tools.h"

#include <stddef.h>

const struct tool_def *const builtin_tools[] = {
	&tool_list_dir,
	&tool_patch_file,
	&tool_read_file,
	&tool_shell,
	&tool_write_file,
	NULL,
};
