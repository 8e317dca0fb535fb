/* SPDX-License-Identifier: MIT */
/*
 * What the file tools share: failing a call for an errno from the
 * workspace, and unified diffs of file content (edit_file's result and the
 * previews that confirmation requests carry, tool_def.preview).
 */
#ifndef TC_TOOLS_FILES_H
#define TC_TOOLS_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/tool.h"

/* Fails the call with the kind and message ws_error() gives for r on path. */
void tool_fail_ws(struct tool_call *call, int r, const char *path);
/* The diff from old to new of the file shown as display, valid UTF-8, cut
 * to about cap bytes (0: whole) with *ret_cut (may be NULL) set then. */
char *file_diff(const char *display, const char *old, size_t old_n, const char *new, size_t new_n, size_t cap,
		bool *ret_cut);
/* The diff that replacing the file at path by new would make; NULL when
 * there is no such file or it is too large. */
char *file_replace_preview(struct workspace *ws, const char *path, size_t path_len, const char *new, size_t new_n);
/* write_file's preview: the diff over the existing file, else NULL. */
char *write_file_preview(const struct json *args, struct workspace *ws);

#endif
