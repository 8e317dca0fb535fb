/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl's connection to the daemon: one socket, newline-delimited
 * JSON-RPC 2.0; requests matched to responses by id, notifications queued
 * for the commands that print them; and how a failure or an error envelope
 * is reported (the exit statuses scripts rely on).
 */
#ifndef TC_CTL_CLIENT_H
#define TC_CTL_CLIENT_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/base/util.h"

/*
 * The exit status tells scripts what happened without parsing text; the
 * codes are listed in usage() and in toolcallctl(1).
 */
enum {
	EXIT_OK = 0,
	EXIT_IS_ERROR = 1,	/* the call ran; the tool reported isError */
	EXIT_USAGE = 2,		/* bad command line */
	EXIT_CONNECT = 3,	/* cannot connect, or the daemon went away */
	EXIT_PROTOCOL = 4,	/* the daemon's answer made no sense */
	EXIT_FAILED = 5,	/* the daemon answered with an error envelope */
	EXIT_TIMEOUT = 6,	/* no answer within the timeout */
	EXIT_OUTPUT = 7,	/* the output could not be written */
	EXIT_INTERRUPTED = 130,	/* SIGINT during a call (it is cancelled) */
};

/* Longest message accepted from the daemon, and nesting allowed in it. */
#define MAX_LINE (256u << 20)
#define MAX_DEPTH 512
/* Longest JSON-ARGS read from stdin. */
#define MAX_ARGS (64u << 20)
/* Notifications kept while waiting for a response. */
#define MAX_QUEUED 4096
/* What the daemon takes as a session id and as event patterns. */
#define MAX_SESSION_ID 128
#define MAX_PATTERN 128
#define MAX_PATTERNS 64
/* Timeout of requests that should answer at once. */
#define DEFAULT_TIMEOUT_MS 10000


/* Set by SIGINT and SIGTERM; checked wherever the client waits. */
extern volatile sig_atomic_t interrupted;

struct client {
	int fd;
	struct buf in;
	struct framer framer;
	int64_t next_id;
	int64_t timeout_ms;		/* < 0: wait forever */
	bool keep_events;		/* queue notifications instead of dropping them */
	struct json_doc **queue;
	size_t n_queue;
	char why[256];			/* the reason of the last protocol error */
	sigset_t waitmask;		/* the mask while waiting: SIGINT, SIGTERM open */
};

struct opts {
	const char *socket;
	int64_t timeout_ms;		/* < 0: the command's default */
	bool json;
	char *call_args;		/* call: compact JSON text of the arguments */
};

#define _cleanup_doc_ _cleanup_(json_doc_unrefp)

/* Connects to the daemon's socket. */
int client_connect(struct client *c, const char *path);
/*
 * Why path cannot be connected to (err, a positive errno) and what to do,
 * as one sentence after "cannot connect to PATH: ": on EACCES the socket's
 * owner, group and mode and "join group G or use -s"; when no daemon
 * listens there, how to start one. A new string.
 */
char *client_connect_hint(const char *path, int err);
void client_close(struct client *c);
/* Sends a request; params is JSON text or NULL. Returns its id (> 0) or a
 * negative errno. */
int64_t client_request(struct client *c, const char *method, const char *params);
/* Sends a notification; params is JSON text or NULL. */
int client_notify(struct client *c, const char *method, const char *params);
/* Takes the next complete message from the input buffer: 1 and *ret, 0
 * when none is complete yet, -EPROTO when it is not JSON. */
int client_next(struct client *c, struct json_doc **ret);
/* Reads what the socket holds: bytes read, -ECONNRESET at end of file. */
int client_fill(struct client *c);
/*
 * poll() with SIGINT and SIGTERM let through only while waiting: they stay
 * blocked elsewhere, so one arriving just before the wait still wakes it.
 */
int wait_fds(struct client *c, struct pollfd *p, nfds_t n, int timeout_ms);
/* Waits for the next message until deadline (UINT64_MAX: none). */
int client_read(struct client *c, uint64_t deadline, struct json_doc **ret);
/* Takes the oldest parked notification (NULL when none). */
struct json_doc *client_unpark(struct client *c);
/*
 * Sends a request and waits for its response. Returns 0 with the response
 * document in *ret and its result or error member; or a negative errno
 * (-ETIMEDOUT, -ECONNRESET, -EPROTO, -EINTR).
 */
int client_call(struct client *c, const char *method, const char *params, int64_t *ret_id,
		struct json_doc **ret, const struct json **ret_result, const struct json **ret_error);
/* Prints why a request got no answer; returns the exit status. */
int report_failure(struct client *c, const char *method, int r);
/* Prints why a result is not the answer the command needs; returns the
 * exit status. */
int report_bad_result(struct client *c, const char *method, const char *why);
/* Prints an error envelope on stderr (and, with --json, on stdout). */
int report_error(const struct opts *o, const struct json *error);
void print_buf(struct buf *b);
void print_pretty(const struct json *v);
/* Says what a result lacks, or NULL when it is an object. */
const char *bad_object(const struct json *result);
/*
 * Runs one request whose result is printed as JSON (or by show), once bad
 * (NULL: bad_object) finds nothing missing from it.
 */
int simple_request(struct client *c, struct opts *o, const char *method, const char *params,
		   const char *(*bad)(const struct json *result), void (*show)(const struct json *result));

#endif
