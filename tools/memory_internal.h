/* SPDX-License-Identifier: MIT */
/*
 * What the memory tool's two homes share: the job a call carries to an io
 * thread, the limits, and the texts of its answers (tools/memory.c, in
 * files as the peer; tools/memory_redis.c, in Redis with the shared store).
 */
#ifndef TC_TOOLS_MEMORY_INTERNAL_H
#define TC_TOOLS_MEMORY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/base/buf.h"
#include "proto/base/util.h"

struct fsjob;

#define PREFIX "/memories"
/* The longest path a call may name, and its most components. */
#define PATH_BYTES_MAX 1024
#define DEPTH_MAX 16
/* Entries (files and directories) one scope may hold. */
#define ENTRIES_MAX 1000
/* Lines a directory view shows at most. */
#define VIEW_ENTRIES_MAX 1000
/* Line numbers a "found several times" error lists at most. */
#define LINES_LISTED_MAX 50
/* Bytes of old_str quoted back in an error. */
#define QUOTE_MAX 200

enum command { C_VIEW, C_CREATE, C_STR_REPLACE, C_INSERT, C_DELETE, C_RENAME };


/* What a call carries to the io thread and back. */
struct mem_job {
	enum command cmd;
	char scope[32];			/* its subdirectory for this scope */
	char *path, *rel;		/* as given; beneath the scope ("" for the root) */
	char *path2, *rel2;		/* rename's new_path */
	char *text;			/* file_text, new_str or insert_text */
	size_t text_len;
	char *old;			/* old_str */
	size_t old_len;
	int64_t line;			/* insert_line */
	int64_t range[2];		/* view_range */
	bool has_range;
	size_t max_file, max_total;
	struct fsjob *job;		/* while it runs: its file work goes through it */
	char *redis_addr;		/* kept in Redis at this address; NULL: in files */
	char *redis_key;		/* the memory's hash there */
	uint32_t redis_timeout_ms;
	uid_t redis_uid;		/* its server's uid trusted besides root and the euid */
	/* Out. */
	struct buf out;			/* the text for the model */
	bool is_error;
	bool unknown;			/* a write sent to Redis got no answer */
	size_t bytes;			/* the size of the file written */
};

/* Sets the job's answer to an error whose text is fmt's. */
int mem_fail(struct mem_job *j, const char *fmt, ...) PRINTF(2, 3);
int fail_errno(struct mem_job *j, int r, const char *what, const char *path);
int over_file(struct mem_job *j, const char *path, size_t n);
int over_total(struct mem_job *j, uint64_t total);
int over_entries(struct mem_job *j, uint64_t entries);
void put_size(struct buf *out, uint64_t n);
void put_name(struct buf *out, const char *name);
/* Checks what a write would put in the file path in place of was (NULL:
 * none): UTF-8 text, no NUL byte added. 0, or the job's error set and
 * -EILSEQ. Every write calls it first. */
int text_refused(struct mem_job *j, const char *path, const char *data, size_t n, const char *was, size_t was_n);
int view_text(struct mem_job *j, const char *s, size_t n);
int replace_text(struct mem_job *j, const char *s, size_t n, struct buf *next, size_t *ret_line);
void replaced(struct mem_job *j, const struct buf *next, size_t line);
int insert_text(struct mem_job *j, const char *s, size_t n, struct buf *next);
/* Runs the job's command on the memory kept in Redis (on an io thread). */
int redis_run(struct mem_job *j);

#endif
