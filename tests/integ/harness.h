/* SPDX-License-Identifier: MIT */
/*
 * The integration-test harness: starts the real toolcalld on a private
 * socket inside a fresh temporary directory and talks to it over that
 * socket, black-box, the way an agent loop would.
 *
 * Two objects:
 *
 *   struct tcd  a running daemon. tcd_start() makes a temp dir
 *               (/tmp/tcd-XXXXXX) holding:
 *                   config.json   the config written by the harness
 *                   sock          the daemon's socket
 *                   ws/           the default workspace (created, empty)
 *                   tools.d/      the tools_dir (created, empty)
 *                   daemon.log    the daemon's stdout and stderr
 *               and waits until the socket accepts connections.
 *               tcd_stop() sends SIGTERM and returns the exit status (tests
 *               assert 0: under ASan a leak makes it non-zero).
 *               tcd_free() kills the daemon if still running, removes the
 *               temp dir and frees everything.
 *
 *   struct tcc  a client connection. tcc_request() sends a request with a
 *               fresh numeric id and returns the response with that id,
 *               queueing whatever else arrives meanwhile (notifications,
 *               responses to other ids) for tcc_wait_notification() and
 *               tcc_wait_id().
 *
 * Ownership: every struct json_doc and string returned by a tcc_* function
 * belongs to the connection and is freed by tcc_close(); tests never free
 * them. Strings returned by tcd_* functions (tcd_log, tcd_read) belong to
 * the caller (free them; they are malloc'd).
 *
 * Failure: functions that cannot reasonably fail (start, connect, a request
 * answered in time) fail the test themselves with ck_abort_msg() and a
 * message naming what happened (the daemon log's tail included for start
 * failures), so tests read as a list of steps and assertions. Every wait is
 * bounded (TCC_TIMEOUT_MS unless a timeout is passed) so a hang fails the
 * test instead of hanging the run. The daemon is started with
 * PR_SET_PDEATHSIG, and an exit handler kills the daemons and removes the
 * temp dirs a failed test did not get to free ($TCD_KEEP keeps the dirs),
 * so a test that dies leaves nothing behind.
 *
 * The daemon binary is $TOOLCALLD, toolcallctl is $TOOLCALLCTL (set by
 * tests/meson.build).
 *
 * Typical use:
 *
 *	struct tcd d;
 *	tcd_start(&d, "{\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}}}");
 *	struct tcc *c = tcc_connect(&d);
 *	const struct json *r = tcc_call(c, "shell", "{\"command\":\"echo hi\"}");
 *	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "hi\n");
 *	tcc_close(c);
 *	ck_assert_int_eq(tcd_stop(&d), 0);
 *	tcd_free(&d);
 */
#ifndef TC_HARNESS_H
#define TC_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"

/* How long a tcc_* wait lasts unless told otherwise. */
#define TCC_TIMEOUT_MS 10000
/* How long tcd_start waits for the socket to accept. */
#define TCD_START_TIMEOUT_MS 5000
/* How long tcd_stop waits for the daemon to exit before SIGKILL. */
#define TCD_STOP_TIMEOUT_MS 10000

/* ------------------------------------------------------------------------ */
/* The daemon                                                                */

struct tcd {
	pid_t pid;		/* 0 when not running */
	char *dir;		/* the private temp dir */
	char *sock;		/* dir/sock: the socket path the config names */
	char *ws;		/* dir/ws: default workspace (created) */
	char *tools_dir;	/* dir/tools.d (created) */
	char *config;		/* dir/config.json */
	char *log;		/* dir/daemon.log: the daemon's stdout+stderr */
	int status;		/* exit status once reaped (see tcd_stop), else -1 */
};

/* Options of tcd_start_opts(); zero-initialise and set what you need. */
struct tcd_opts {
	/*
	 * The config, a JSON object text (comments allowed). Before use, the
	 * placeholders @DIR@, @WS@ and @TOOLS@ are replaced by the temp dir,
	 * the workspace and the tools dir. Unless the object sets them itself,
	 * the harness adds "socket": @DIR@/sock, "workspace": @WS@ and
	 * "tools_dir": @TOOLS@ (set "tools_dir": null to have none). NULL
	 * means "{}".
	 */
	const char *config;
	/* Write config verbatim (placeholders still replaced, no keys added,
	 * need not be valid JSON): for config error tests. */
	bool raw_config;
	/* Do not pass --config at all (the daemon runs on its defaults and
	 * flags); the config file is still written. */
	bool no_config_flag;
	/* Extra command-line arguments after "--config FILE", NULL-terminated. */
	const char *const *args;
	/* Environment changes, NULL-terminated: "NAME=value" sets, "NAME"
	 * unsets. The daemon otherwise inherits the test's environment minus
	 * NOTIFY_SOCKET, LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES,
	 * TOOLCALLD_SOCKET and WATCHDOG_*. */
	const char *const *env;
	/* Programs to run the daemon under, NULL-terminated (e.g.
	 * {"systemd-socket-activate", "-l", path, NULL}); the daemon path and
	 * its arguments follow them. */
	const char *const *wrapper;
	/* Do not wait for the socket to accept (the caller waits itself, e.g.
	 * for READY=1, or expects the daemon to exit). */
	bool no_wait;
	/* Working directory of the daemon (default: the temp dir). */
	const char *cwd;
};

/* Makes the temp dir, writes the config, starts the daemon and waits until
 * its socket accepts. Fails the test (with the daemon log) if it does not. */
void tcd_start(struct tcd *d, const char *config_json);
void tcd_start_opts(struct tcd *d, const struct tcd_opts *o);
/* Only makes the temp dir layout and writes the config (no daemon). */
void tcd_prepare(struct tcd *d, const struct tcd_opts *o);
/* Starts the daemon of a prepared tcd (tcd_prepare then tcd_spawn ==
 * tcd_start_opts). */
void tcd_spawn(struct tcd *d, const struct tcd_opts *o);
/* Waits until path accepts a connection; returns 0 or -ETIMEDOUT. Also
 * returns -ECHILD early when d is non-NULL and its daemon has exited. */
int tcd_wait_socket(struct tcd *d, const char *path, int timeout_ms);

/* Sends SIGTERM, waits up to TCD_STOP_TIMEOUT_MS and returns the exit status
 * (0..255), 128+N when killed by signal N, or -1 if it had to be SIGKILLed
 * after the wait. Returns the recorded status when already reaped. */
int tcd_stop(struct tcd *d);
/* Waits up to timeout_ms for the daemon to exit on its own; returns the
 * status as tcd_stop does, or -ETIMEDOUT (the daemon still runs). */
int tcd_wait_exit(struct tcd *d, int timeout_ms);
/* Sends a signal to the daemon. */
void tcd_kill(struct tcd *d, int sig);
/* Kills the daemon if it still runs, removes the temp dir, frees. */
void tcd_free(struct tcd *d);

/* The daemon's log so far (malloc'd, caller frees). */
char *tcd_log(const struct tcd *d);
/* Resident set size of the daemon in KiB (/proc/PID/status VmRSS), or -1. */
long tcd_rss_kb(const struct tcd *d);
/* Waits up to timeout_ms (scaled as every wait for something that should
 * come) until the daemon's log holds needle at least count times; returns
 * whether it did. */
bool tcd_wait_log(const struct tcd *d, const char *needle, unsigned count, int timeout_ms);
/* Waits up to timeout_ms (scaled) until the admin/stats value at path (e.g.
 * "result.running") is at least at_least, asking on a connection of its
 * own; returns whether it was. */
bool tcd_wait_stat(struct tcd *d, const char *path, int64_t at_least, int timeout_ms);

/* Writes content to path relative to the workspace (parent dirs created),
 * with the given mode (0 means 0644). Returns the absolute path (malloc'd,
 * caller frees) — or use tcd_ws_path for the name only. */
char *tcd_write_ws(struct tcd *d, const char *rel, const void *content, size_t len, mode_t mode);
/* Same, content a C string; returns nothing. */
void tcd_put(struct tcd *d, const char *rel, const char *content);
/* Writes size bytes of 'x' to rel, every line_len-th of them a '\n' (0:
 * one line with no end): a file large enough for the output and size
 * limits. */
void tcd_put_filler(struct tcd *d, const char *rel, size_t size, size_t line_len);
/* The absolute path of rel inside the workspace (malloc'd). */
char *tcd_ws_path(const struct tcd *d, const char *rel);

/* Members of a config's top object for the sandbox and network cases: a
 * socket every uid may connect to, and no confirmation asked. */
#define TC_AUTO_CONFIRM                                                                        \
	"\"socket_mode\":\"0666\",\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":" \
	"\"auto\",\"network\":\"auto\"}}"
/* Starts the daemon with TC_AUTO_CONFIRM and the members given (JSON
 * members text after a comma, or ""). */
void tcd_start_auto(struct tcd *d, const char *members);
/* DIR/home, made (0755) when missing: a $HOME of the daemon's own
 * (malloc'd). */
char *tcd_home(const struct tcd *d);
/* Spawns the daemon prepared with o (tcd_prepare()) with HOME=tcd_home()
 * its environment, and waits for its socket: the case fails with the
 * daemon's log when it does not come. */
void tcd_spawn_home(struct tcd *d, struct tcd_opts *o);
/* Lets every uid reach the socket (DIR 0711) and write the workspace
 * (0777). */
void tcd_open_to_all(struct tcd *d);
/* Stops the daemon, which must exit 0, and frees d. */
void tcd_finish(struct tcd *d);
/* setpriv running what follows as uid and gid 65534 with no supplementary
 * groups: a tcd_opts.wrapper. */
extern const char *const tc_as_nobody[];
/* Prepares d as o says and spawns its daemon as uid 65534 (o->wrapper
 * becomes tc_as_nobody, o->no_wait true): the temp dir and the workspace
 * writable by all (0777), the config readable (0644). Does not wait for
 * the socket: the caller does (tcd_wait_socket), as the case wants a
 * failure to start taken. */
void tcd_spawn_nobody(struct tcd *d, struct tcd_opts *o);
/* Reads a file (absolute, or relative to the workspace); NULL if it cannot
 * be read. *ret_len (optional) gets its length. malloc'd, NUL-terminated. */
char *tcd_read(const struct tcd *d, const char *path, size_t *ret_len);
/* Writes a tool file tools_dir/<file> atomically (temp file + rename, so an
 * inotify watch never sees it half written). */
void tcd_write_tool(struct tcd *d, const char *file, const char *json);
/* Writes any file atomically at an absolute path. */
void tc_write_file_atomic(const char *path, const char *content, size_t len);

/*
 * Runs a program to completion with stdin /dev/null, capturing stdout and
 * stderr (each malloc'd, NUL-terminated; pass NULL to discard). env as in
 * tcd_opts.env. Returns the exit status, 128+N on signal N, or -1 when it
 * did not end within timeout_ms (it is then SIGKILLed).
 */
int tc_run(const char *const argv[], const char *const env[], const char *cwd,
	   char **ret_out, char **ret_err, int timeout_ms);

/* $TOOLCALLD and $TOOLCALLCTL (test fails when unset). */
const char *tc_daemon_path(void);
const char *tc_ctl_path(void);

/* ------------------------------------------------------------------------ */
/* A client connection                                                       */

struct tcc;

/* Connects to the daemon's socket (fails the test on error). */
struct tcc *tcc_connect(struct tcd *d);
struct tcc *tcc_connect_path(const char *path);
/* Connects with the effective ids uid/gid (needs root): the daemon sees
 * them through SO_PEERCRED, which records the credentials at connect time. */
struct tcc *tcc_connect_as(struct tcd *d, uid_t uid, gid_t gid);
/* Closes the connection and frees everything it returned. Accepts NULL. */
void tcc_close(struct tcc *c);
/* The socket fd (for shutdown(), poll(), SO_RCVBUF tweaks). */
int tcc_fd(const struct tcc *c);

/* Sends line plus "\n". Fails the test if the daemon closed the socket. */
void tcc_send(struct tcc *c, const char *line);
/* Sends exactly these bytes; returns 0 or a negative errno (EPIPE when the
 * peer is gone); never blocks longer than timeout (TCC_TIMEOUT_MS). */
int tcc_send_raw(struct tcc *c, const void *data, size_t len);
/* Sends bytes without blocking: returns how many were taken (possibly 0
 * when the socket buffer is full), or a negative errno. */
ssize_t tcc_send_nb(struct tcc *c, const void *data, size_t len);

/*
 * Receives the next line from the socket (without its "\n"), NULL on
 * timeout or EOF (tcc_eof() tells which). Does not look at the queue kept
 * by tcc_request: lines come in arrival order from what was not yet read.
 * *ret_len (optional) gets the length (the line may hold NUL bytes).
 */
const char *tcc_recv_line(struct tcc *c, int timeout_ms, size_t *ret_len);
/* Same, parsed; NULL on timeout/EOF; fails the test if the line is not
 * JSON. Here and in every wait below for something that should come (a
 * response, a notification, the daemon's socket or exit), timeout_ms is
 * multiplied by $TC_WAIT_SCALE when set (make valgrind sets it);
 * tcc_recv_line and tcc_quiet, which tests also use to see that nothing
 * comes, wait as told. */
struct json_doc *tcc_recv(struct tcc *c, int timeout_ms);
/* True once the daemon closed the connection. */
bool tcc_eof(const struct tcc *c);
/* True if no byte arrives within ms; false when bytes arrive (nothing is
 * lost: they stay for the next tcc_recv_line) or the daemon closes. */
bool tcc_quiet(struct tcc *c, int ms);

/*
 * Sends {"jsonrpc":"2.0","id":N,"method":method[,"params":params]} with a
 * fresh numeric id N (params_json NULL: no params) and returns the root of
 * the response with id N. Lines that arrive meanwhile are queued. Fails the
 * test on timeout (TCC_TIMEOUT_MS) or EOF.
 */
const struct json *tcc_request(struct tcc *c, const char *method, const char *params_json);
/* Same with a timeout. */
const struct json *tcc_request_t(struct tcc *c, const char *method, const char *params_json,
				 int timeout_ms);
/* tools/call shorthand: params {"name":tool,"arguments":args_json}
 * (args_json NULL: "{}"). */
const struct json *tcc_call(struct tcc *c, const char *tool, const char *args_json);
/* Calls the shell tool with command (quoted as a JSON string). */
const struct json *tcc_shell(struct tcc *c, const char *command);
/* Asserts that the shell command fails: "CMD && echo DONE" prints no
 * DONE. The _all form: each of the n commands. */
void tc_assert_shell_fails(struct tcc *c, const char *command);
void tc_assert_shell_fails_all(struct tcc *c, const char *const *commands, size_t n);
/* Sends a request without waiting; returns its numeric id. The harness's
 * ids count up from 1000, so ids a test writes by hand below 1000 never
 * collide with them. */
int64_t tcc_send_request(struct tcc *c, const char *method, const char *params_json);
/* Waits for the response whose id's text is exactly id_raw (byte for byte,
 * e.g. "7", "\"abc\"", "null"): from the queue first, then the socket.
 * Other lines are queued. NULL on timeout. */
const struct json *tcc_wait_id(struct tcc *c, const char *id_raw, int timeout_ms);
/* Waits for a notification (a message with "method" and no "id") of the
 * given method (NULL: any), from the queue first. Returns its root, NULL
 * on timeout. The notification is removed from the queue. */
const struct json *tcc_wait_notification(struct tcc *c, const char *method, int timeout_ms);
/* Waits for a request the daemon sends (an "id" and this method, e.g.
 * "roots/list"), from the queue first; NULL on timeout. */
const struct json *tcc_wait_daemon_request(struct tcc *c, const char *method, int timeout_ms);
/* Waits for a notifications/event of this type, dropping events of other
 * types; returns its params, NULL on timeout. */
const struct json *tcc_wait_event(struct tcc *c, const char *type, int timeout_ms);
/* Drops every queued line (e.g. notifications a test does not care about). */
void tcc_clear_queue(struct tcc *c);
/* Number of queued notifications of a method (NULL: any). */
size_t tcc_count_notifications(struct tcc *c, const char *method);
/* Sends initialize (protocolVersion 2025-06-18, extra_params_json members
 * merged when non-NULL, e.g. "\"budget\":{\"toolCalls\":3}") and
 * notifications/initialized; returns the initialize result. */
const struct json *tcc_initialize(struct tcc *c, const char *extra_params_json);

/* admin/reload: returns the response root (result {tools, added, removed,
 * changed}, or an error naming file:line:col). */
const struct json *tcc_reload(struct tcc *c);

/* The source text of a value inside a doc returned by this connection
 * (e.g. the raw "id" as sent), NUL-terminated, owned by c. */
const char *tcc_raw(struct tcc *c, const struct json *v);
/* Parses text into a doc owned by c (fails the test if not JSON). */
const struct json *tcc_parse(struct tcc *c, const char *text, size_t len);
/* A formatted string owned by c. */
const char *tcc_fmt(struct tcc *c, const char *fmt, ...) PRINTF(2, 3);

/* ------------------------------------------------------------------------ */
/* JSON helpers                                                              */

/*
 * Walks a dotted path from v: "result.tools.0.name" (object keys, or array
 * indices as decimal numbers). Keys containing '.' are reached with
 * json_get directly. NULL when absent. "" returns v.
 */
const struct json *tj(const struct json *v, const char *path);
/* String at path, NULL when absent or not a string. */
const char *tj_str(const struct json *v, const char *path);
/* Integer at path; fails the test when absent or not an integer. */
int64_t tj_int(const struct json *v, const char *path);
/* Boolean at path; fails the test when absent or not a boolean. */
bool tj_bool(const struct json *v, const char *path);
/* Length of the array (or member count of the object) at path; -1 absent. */
long tj_len(const struct json *v, const char *path);
/* True when the value at path exists. */
static inline bool tj_has(const struct json *v, const char *path) { return tj(v, path) != NULL; }
/* Whether the array at path of v holds the string s. */
bool tj_has_str(const struct json *v, const char *path, const char *s);
/* The error kind of a response (error.data.kind), NULL for a success. */
const char *tj_kind(const struct json *resp);
/* Compact JSON text of a value (malloc'd): for messages and comparisons. */
char *tj_text(const struct json *v);
/* A JSON string literal for s, quotes included (malloc'd). */
char *tj_quote(const char *s);

/* Fails the test unless resp is a success (prints resp otherwise). */
#define tc_assert_ok(resp) tc_assert_ok_at((resp), __FILE__, __LINE__)
/* Fails the test unless resp is an error of that kind (prints resp). */
#define tc_assert_kind(resp, kind) tc_assert_kind_at((resp), (kind), __FILE__, __LINE__)
void tc_assert_ok_at(const struct json *resp, const char *file, int line);
void tc_assert_kind_at(const struct json *resp, const char *kind, const char *file, int line);
/* The text of a tools/call response's first content item
 * (result.content.0.text), "" when it has none. */
const char *tc_text(const struct json *resp);
/* Fails the test unless tc_text(resp) holds the text that the printf
 * format and its arguments make (_lacks: unless it does not hold it); the
 * message is tc_text(resp). */
#define tc_assert_text_has(resp, ...) tc_assert_text_at((resp), true, __FILE__, __LINE__, __VA_ARGS__)
#define tc_assert_text_lacks(resp, ...) tc_assert_text_at((resp), false, __FILE__, __LINE__, __VA_ARGS__)
void tc_assert_text_at(const struct json *resp, bool has, const char *file, int line, const char *fmt, ...)
	PRINTF(5, 6);

/* Milliseconds since an arbitrary start (CLOCK_MONOTONIC). */
uint64_t tc_now_ms(void);
/* timeout_ms times $TC_WAIT_SCALE, as every wait of the harness for
 * something that should come: for a test's own bound on how long
 * something may take where that bound is loose enough to hold under make
 * valgrind once scaled. */
uint64_t tc_wait_scaled(int timeout_ms);
/* Skips the running case (inside a START_TEST body) under make valgrind
 * ($TC_UNDER_VALGRIND), saying why it cannot hold there. */
#define TC_SKIP_UNDER_VALGRIND(why)                                            \
	do {                                                                   \
		if (getenv("TC_UNDER_VALGRIND"))                               \
			TC_SKIP("under valgrind: %s", why);                    \
	} while (0)
/* Sleeps ms: only as the interval of a poll (tc_wait_until) or where a
 * test shows that something does NOT happen within a window. */
void tc_pause_ms(int ms);

/* How often tc_wait_until looks again. */
#define TC_POLL_MS 10
/* Evaluates expr every TC_POLL_MS until it is true or timeout_ms passed;
 * the value is expr's last (false: the deadline passed). */
#define tc_wait_until(expr, timeout_ms)                                        \
	({                                                                     \
		uint64_t tc_wait_end_ = tc_now_ms() + (uint64_t)(timeout_ms);  \
		bool tc_wait_ok_;                                              \
		while (!(tc_wait_ok_ = (expr)) && tc_now_ms() < tc_wait_end_)  \
			tc_pause_ms(TC_POLL_MS);                               \
		tc_wait_ok_;                                                   \
	})

#endif
