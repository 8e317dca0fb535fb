/* SPDX-License-Identifier: MIT */
/*
 * UTF-8 helpers: strict validation, decoding one character, repairing
 * invalid text with U+FFFD, counting characters, and cutting text short at
 * a character boundary. Every place that must not split a character uses
 * utf8_cut.
 */
#ifndef TC_UTF8_H
#define TC_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/base/buf.h"

/* True when the bytes are valid UTF-8. */
bool utf8_valid(const char *s, size_t n);
/* Length of the longest prefix of s that is strict UTF-8 (n when all is). */
size_t utf8_valid_prefix(const char *s, size_t n);
/* Decodes the character at s (n bytes available): its length, with its
 * code point in *ret_cp, or 0 when s does not start with valid UTF-8
 * (overlong forms, surrogates, beyond U+10FFFF, cut short). */
size_t utf8_decode(const char *s, size_t n, uint32_t *ret_cp);
/* True for a code point that moves a cursor or changes how text reads
 * rather than being read: C0 and C1 controls, DEL, the line and
 * paragraph separators (U+2028, U+2029), the bidirectional overrides and
 * isolates (U+202A..U+202E, U+2066..U+2069). */
bool utf8_is_control(uint32_t cp);
/* Appends s to out with every invalid UTF-8 sequence replaced by U+FFFD. */
void utf8_sanitize(const char *s, size_t n, struct buf *out);
/* Number of code points in valid UTF-8. */
size_t utf8_length(const char *s, size_t n);
/* How many bytes of s (n long) to keep so that at most max are kept and
 * no UTF-8 character is split: n when it fits, else max backed up to the
 * start of the character it falls in (0 when that is the first one). Text
 * that is not UTF-8 there (more than three continuation bytes) is cut at
 * max. */
size_t utf8_cut(const char *s, size_t n, size_t max);

#endif
