/* SPDX-License-Identifier: MIT */
/*
 * Base64 (RFC 4648, section 4: the standard alphabet with "=" padding), for
 * file contents that are not UTF-8 text: read_file encodes, write_file
 * decodes.
 */
#ifndef TC_BASE64_H
#define TC_BASE64_H

#include <stddef.h>

#include "proto/base/buf.h"

/* Appends the padded base64 form of n bytes to out. */
void base64_encode(const void *data, size_t n, struct buf *out);

/*
 * Appends the bytes that the base64 text s (n bytes) encodes to out. Line
 * breaks and spaces between digits are skipped; "=" padding is optional
 * but only at the end. -EINVAL when the text is not base64 (out may then
 * hold part of it).
 */
int base64_decode(const char *s, size_t n, struct buf *out);

#endif
