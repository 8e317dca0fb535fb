/* SPDX-License-Identifier: MIT */
/*
 * Golden files of the text the tools show the model: tests/data/render/NAME.txt.
 * Run a suite with TC_UPDATE_GOLDEN=1 to rewrite them (then read the diff).
 */
#ifndef TC_TESTS_GOLDEN_H
#define TC_TESTS_GOLDEN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/base/buf.h"
#include "proto/base/util.h"

/* Compares text with the golden file name (or writes it). */
static inline void golden(const char *name, const struct buf *text)
{
	const char *root = getenv("TC_SOURCE_ROOT");
	char *path = xasprintf("%s/tests/data/render/%s.txt", root ? root : ".", name);
	if (getenv("TC_UPDATE_GOLDEN")) {
		FILE *f = fopen(path, "wb");
		ck_assert_msg(f != NULL, "cannot write %s", path);
		fwrite(buf_head(text), 1, buf_size(text), f);
		fclose(f);
		free(path);
		return;
	}
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "missing golden file %s (run with TC_UPDATE_GOLDEN=1)", path);
	struct buf want = {0};
	char tmp[4096];
	size_t k;
	while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0)
		buf_append(&want, tmp, k);
	fclose(f);
	buf_putc(&want, '\0');
	struct buf got = {0};
	buf_append(&got, buf_head(text), buf_size(text));
	buf_putc(&got, '\0');
	ck_assert_msg(strcmp(buf_head(&got), buf_head(&want)) == 0, "%s differs:\n--- got\n%s\n--- want\n%s", path,
		      buf_head(&got), buf_head(&want));
	buf_free(&want);
	buf_free(&got);
	free(path);
}

#endif
