/* SPDX-License-Identifier: MIT */
/*
 * What the parts of lib/child*.c share and nothing else sees: the kept
 * head and tail of one output stream (child_capture.c), and the PATH
 * search the spawn uses (child_env.c).
 */
#ifndef TC_CHILD_INTERNAL_H
#define TC_CHILD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/base/buf.h"

/* One output stream's kept bytes: the first head_cap bytes, and the last
 * tail_cap bytes in a ring allocated once the head is full. */
struct capture {
	size_t head_cap;
	size_t tail_cap;
	struct buf head;
	char *ring;
	size_t ring_start;
	size_t ring_len;
	uint64_t total;
};

void capture_init(struct capture *cp, size_t cap);
void capture_add(struct capture *cp, const char *p, size_t n);
void capture_finish(struct capture *cp, char **ret, size_t *ret_len, bool *ret_truncated);
void capture_free(struct capture *cp);

/* Finds a program named without a slash in the absolute directories of
 * the PATH of envp; a name with a slash is taken as it is. */
int find_program(const char *name, char *const *envp, char **ret);

#endif
