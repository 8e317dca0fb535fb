/* SPDX-License-Identifier: MIT */
/*
 * An MCP host for tests: `toolcallctl mcp ARGS` started on pipes, its
 * stdout parsed line by line as it comes, its stderr kept.
 */
#ifndef TC_TEST_MCP_HOST_H
#define TC_TEST_MCP_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "proto/base/buf.h"
#include "proto/json.h"

/* An MCP host: toolcallctl mcp on pipes, its lines parsed as they come. */
struct host {
	pid_t pid;
	int in, out, err;
	struct buf obuf, ebuf;
	bool out_eof;
	struct json_doc *msgs[512];	/* every message received */
	bool taken[512];		/* already returned by a wait */
	size_t n_msgs;
};

/* Starts toolcallctl with args (NULL-terminated, at most 14). */
void host_start(struct host *h, const char *const *args);
/* Writes one line (the newline added). */
void host_send(struct host *h, const char *line);
/* Reads what the bridge wrote within ms; complete lines are parsed. */
void host_pump(struct host *h, int ms);
/* Waits for the answer with id (its JSON text), or for a message of method
 * (id NULL); NULL on timeout or EOF. Each message is returned once. */
const struct json *host_wait(struct host *h, const char *id, const char *method, int timeout_ms);
/* How many messages of method came so far. */
size_t host_count(struct host *h, const char *method);
/* Closes the bridge's stdin (when close_stdin) and returns its exit status
 * (-1: still running after timeout_ms, then killed). */
int host_end(struct host *h, bool close_stdin, int timeout_ms);
void host_free(struct host *h);
/* What the bridge wrote on stderr so far. */
const char *host_stderr(struct host *h);

#endif
