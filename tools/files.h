/* SPDX-License-Identifier: MIT */
/*
 * What the file tools share: unified diffs of file content (edit_file's
 * result and the previews that confirmation requests carry,
 * tool_def.preview).
 */
#ifndef TC_TOOLS_FILES_H
#define TC_TOOLS_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/tool.h"

struct fsjob;

/* The diff from old to new of the file shown as display, valid UTF-8, cut
 * to about cap bytes (0: whole) with *ret_cut (may be NULL) set then. */
char *file_diff(const char *display, const char *old, size_t old_n, const char *new, size_t new_n, size_t cap,
		bool *ret_cut);
/* The diff that replacing the file at path by new would make; NULL when
 * there is no such file or it is too large. */
char *file_replace_preview(const struct fsjob *job, const char *path, size_t path_len, const char *new,
			   size_t new_n);
/* write_file's preview: the diff over the existing file, else NULL. */
char *write_file_preview(const struct json *args, const struct fsjob *job);

#endif
