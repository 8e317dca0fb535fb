/* SPDX-License-Identifier: MIT */
/*
 * Reading a whole small file with a cap on its size: the one reader for
 * the config file and tool files.
 */
#include "proto/base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/buf.h"
#include "proto/base/util.h"

int read_file_capped(const char *path, size_t max, unsigned flags, char **ret, size_t *ret_len)
{
	int oflags = O_RDONLY | O_CLOEXEC | O_NOCTTY;
	if (flags & READ_REGULAR_ONLY)
		oflags |= O_NONBLOCK;
	_cleanup_close_ int fd = open(path, oflags);
	if (fd < 0)
		return -errno;

	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if ((flags & READ_REGULAR_ONLY) && !S_ISREG(st.st_mode))
		return -EINVAL;
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max)
		return -EFBIG;

	/* To the end, not to st_size: the file may grow meanwhile, and
	 * procfs and pipes report no size at all. */
	struct buf b = {};
	for (;;) {
		buf_reserve(&b, 65536);
		ssize_t n = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			buf_free(&b);
			return -e;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		if (b.len > max) {
			buf_free(&b);
			return -EFBIG;
		}
	}
	*ret_len = buf_size(&b);
	*ret = buf_steal(&b);
	return 0;
}
