/* SPDX-License-Identifier: MIT */
/*
 * The table of built-in tools.
 */
#include "tools/tools.h"

#include <stddef.h>

const struct tool_def *const builtin_tools[] = {
	&tool_delete_file,
	&tool_edit_file,
	&tool_glob,
	&tool_list_dir,
	&tool_make_dir,
	&tool_memory,
	&tool_move_file,
	&tool_patch_file,
	&tool_process_io,
	&tool_process_kill,
	&tool_process_list,
	&tool_read_file,
	&tool_search,
	&tool_shell,
	&tool_stat,
	&tool_write_file,
	NULL,
};
