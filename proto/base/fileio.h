/* SPDX-License-Identifier: MIT */
/*
 * Reading a whole small file (a config file, a tool file) with a cap on its
 * size, so that a path pointing at something huge or endless is an error,
 * not an allocation.
 */
#ifndef TC_FILEIO_H
#define TC_FILEIO_H

#include <stddef.h>

enum {
	/* Refuse anything but a regular file (-EINVAL), and never block
	 * opening one (a FIFO named by mistake). */
	READ_REGULAR_ONLY = 1u << 0,
};

/*
 * Reads the whole file at path, at most max bytes, into *ret (malloc'd,
 * NUL-terminated) and its length into *ret_len. Errors: -errno of open,
 * fstat or read (a read error is never a short file), -EISDIR for a
 * directory, -EINVAL for anything not regular with READ_REGULAR_ONLY,
 * -EFBIG when the file holds more than max bytes.
 */
int read_file_capped(const char *path, size_t max, unsigned flags, char **ret, size_t *ret_len);

#endif
