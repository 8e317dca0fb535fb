/* SPDX-License-Identifier: MIT */
/*
 * The built-in tools, one file each, listed in one NULL-terminated table,
 * and the kinds of tool that tool files declare. Adding a built-in tool is
 * one file and one line in builtin.c.
 */
#ifndef TC_TOOLS_H
#define TC_TOOLS_H

#include "lib/tool.h"

extern const struct tool_def tool_read_file;
extern const struct tool_def tool_write_file;
extern const struct tool_def tool_patch_file;
extern const struct tool_def tool_list_dir;
extern const struct tool_def tool_shell;
extern const struct tool_def tool_search;
extern const struct tool_def tool_glob;
extern const struct tool_def tool_stat;
extern const struct tool_def tool_move_file;
extern const struct tool_def tool_delete_file;
extern const struct tool_def tool_make_dir;
extern const struct tool_def tool_edit_file;
extern const struct tool_def tool_memory;
extern const struct tool_def tool_process_io;
extern const struct tool_def tool_process_kill;
extern const struct tool_def tool_process_list;

/* NULL-terminated. */
extern const struct tool_def *const builtin_tools[];

#endif
